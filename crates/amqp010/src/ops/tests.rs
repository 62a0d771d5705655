//! Known encodings written out by hand from the spec, so an encoder and decoder that
//! agree with each other but not with the spec cannot pass.

use super::*;
use crate::generated::*;
use crate::header::MessageHeader;
use crate::sequence::SequenceSet;
use crate::str::Str;
use crate::value::{Array, Map, Value};

fn encode_control(c: &Control) -> Vec<u8> {
    let mut out = BytesMut::new();
    c.encode(&mut out).unwrap();
    out.to_vec()
}

fn encode_command(c: &Command, sync: bool) -> Vec<u8> {
    let mut out = BytesMut::new();
    c.encode(CommandHeader::sync(sync), &mut out).unwrap();
    out.to_vec()
}

fn cat(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

#[test]
fn connection_start() {
    let wire = cat(&[
        &[0x01, 0x01, 0x07, 0x00],
        // server-properties {"product": str16 "qpidd"}
        &[0, 0, 0, 20, 0, 0, 0, 1, 7],
        b"product",
        &[0x95, 0, 5],
        b"qpidd",
        // mechanisms: array of str16
        &[0, 0, 0, 23, 0x95, 0, 0, 0, 2, 0, 5],
        b"PLAIN",
        &[0, 9],
        b"ANONYMOUS",
        // locales
        &[0, 0, 0, 12, 0x95, 0, 0, 0, 1, 0, 5],
        b"en_US",
    ]);
    let mut props = Map::new();
    props.insert("product", Value::Str16(Str::from("qpidd")));
    let expected = Control::ConnectionStart(ConnectionStart {
        server_properties: Some(props),
        mechanisms: Some(Array::of_str16(["PLAIN", "ANONYMOUS"])),
        locales: Some(Array::of_str16(["en_US"])),
    });
    assert_eq!(
        Control::decode(Bytes::from(wire.clone())).unwrap(),
        expected
    );
    assert_eq!(encode_control(&expected), wire);
}

#[test]
fn connection_tune() {
    let wire = [0x01, 0x05, 0x0f, 0x00, 0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 120];
    let expected = Control::ConnectionTune(ConnectionTune {
        channel_max: Some(32767),
        max_frame_size: Some(65535),
        heartbeat_min: Some(0),
        heartbeat_max: Some(120),
    });
    assert_eq!(
        Control::decode(Bytes::copy_from_slice(&wire)).unwrap(),
        expected
    );
    assert_eq!(encode_control(&expected), wire);
}

#[test]
fn session_attach_with_force_bit() {
    let wire = [0x02, 0x01, 0x03, 0x00, 0x00, 0x04, b's', b'e', b's', b's'];
    let expected = Control::SessionAttach(SessionAttach {
        name: Some(Bytes::from_static(b"sess")),
        force: true,
    });
    assert_eq!(
        Control::decode(Bytes::copy_from_slice(&wire)).unwrap(),
        expected
    );
    assert_eq!(encode_control(&expected), wire);
}

#[test]
fn session_completed_with_sequence_set() {
    let wire = [
        0x02, 0x0a, 0x03, 0x00, 0, 16, 0, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0, 7, 0, 0, 0, 7,
    ];
    let mut commands = SequenceSet::from_range(0, 4);
    commands.add(7);
    let expected = Control::SessionCompleted(SessionCompleted {
        commands: Some(commands),
        timely_reply: true,
    });
    assert_eq!(
        Control::decode(Bytes::copy_from_slice(&wire)).unwrap(),
        expected
    );
    assert_eq!(encode_control(&expected), wire);
}

#[test]
fn queue_declare_bits() {
    // durable (field 3) and auto-delete (field 5) are flags only.
    let wire = [0x08, 0x01, 0x01, 0x00, 0x29, 0x00, 0x01, b'q'];
    let expected = Command::QueueDeclare(QueueDeclare {
        queue: Some(Str::from("q")),
        durable: true,
        auto_delete: true,
        ..Default::default()
    });
    let (header, cmd) = Command::decode(Bytes::copy_from_slice(&wire)).unwrap();
    assert!(!header.sync);
    assert_eq!(cmd, expected);
    assert_eq!(encode_command(&expected, false), wire);
}

#[test]
fn message_transfer_with_header_segment() {
    let command = cat(&[
        &[0x04, 0x01, 0x01, 0x01, 0x07, 0x00, 10],
        b"amq.direct",
        &[0, 0],
    ]);
    let expected = Command::MessageTransfer(MessageTransfer {
        destination: Some(Str::from("amq.direct")),
        accept_mode: Some(AcceptMode::Explicit),
        acquire_mode: Some(AcquireMode::PreAcquired),
    });
    let (header, cmd) = Command::decode(Bytes::from(command.clone())).unwrap();
    assert!(header.sync);
    assert_eq!(cmd, expected);
    assert_eq!(encode_command(&expected, true), command);

    let segment = cat(&[
        // delivery-properties: priority medium, persistent, routing-key "rk"
        &[0, 0, 0, 9, 0x04, 0x01, 0x18, 0x02, 4, 2, 2, b'r', b'k'],
        // message-properties: content-length 5, content-type, application-headers
        &[0, 0, 0, 37, 0x04, 0x03, 0x11, 0x01],
        &[0, 0, 0, 0, 0, 0, 0, 5],
        &[10],
        b"text/plain",
        &[0, 0, 0, 10, 0, 0, 0, 1, 1, b'x', 0x95, 0, 1, b'y'],
    ]);
    let mut headers = Map::new();
    headers.insert("x", Value::Str16(Str::from("y")));
    let expected = MessageHeader {
        delivery: Some(DeliveryProperties {
            priority: Some(DeliveryPriority::Medium),
            delivery_mode: Some(DeliveryMode::Persistent),
            routing_key: Some(Str::from("rk")),
            ..Default::default()
        }),
        properties: Some(MessageProperties {
            content_length: Some(5),
            content_type: Some(Str::from("text/plain")),
            application_headers: Some(headers),
            ..Default::default()
        }),
        other: Vec::new(),
    };
    assert_eq!(
        MessageHeader::decode(Bytes::from(segment.clone())).unwrap(),
        expected
    );
    let mut out = BytesMut::new();
    expected.encode(&mut out).unwrap();
    assert_eq!(&out[..], &segment[..]);
}

#[test]
fn reply_to_is_a_sized_uncoded_struct() {
    let props = MessageProperties {
        reply_to: Some(ReplyTo {
            exchange: Some(Str::from("ex")),
            routing_key: Some(Str::from("rk")),
        }),
        ..Default::default()
    };
    let mut out = BytesMut::new();
    props.encode(&mut out).unwrap();
    let wire = [
        0, 0, 0, 14, 0x04, 0x03, 0x08, 0x00, 0, 8, 0x03, 0x00, 2, b'e', b'x', 2, b'r', b'k',
    ];
    assert_eq!(&out[..], &wire);
    let back = MessageProperties::decode(&mut Reader::new(out.freeze())).unwrap();
    assert_eq!(back, props);
}

#[test]
fn execution_result_carries_a_struct32() {
    let q = QueueQueryResult {
        queue: Some(Str::from("q")),
        durable: true,
        message_count: Some(3),
        subscriber_count: Some(0),
        ..Default::default()
    };
    let result = ExecutionResult::with_value(5, &q).unwrap();
    let wire = [
        0x03, 0x02, 0x01, 0x00, 0x03, 0x00, 0, 0, 0, 5, // command-id
        0, 0, 0, 14, 0x08, 0x01, 0xc5, 0x00, 1, b'q', 0, 0, 0, 3, 0, 0, 0, 0,
    ];
    let cmd = Command::ExecutionResult(result);
    assert_eq!(encode_command(&cmd, false), wire);
    let (_, back) = Command::decode(Bytes::copy_from_slice(&wire)).unwrap();
    let Command::ExecutionResult(r) = back else {
        panic!()
    };
    assert_eq!(r.value.unwrap().decode_as::<QueueQueryResult>().unwrap(), q);
}

#[test]
fn dtx_start_with_coded_struct_field() {
    let wire = [
        0x06, 0x02, 0x01, 0x00, 0x03, 0x00, // join bit set
        0, 0, 0, 12, 0x06, 0x04, 0x07, 0x00, 0, 0, 0, 1, 1, b'g', 1, b'b',
    ];
    let expected = Command::DtxStart(DtxStart {
        xid: Some(Xid {
            format: Some(1),
            global_id: Some(Bytes::from_static(b"g")),
            branch_id: Some(Bytes::from_static(b"b")),
        }),
        join: true,
        resume: false,
    });
    assert_eq!(
        Command::decode(Bytes::copy_from_slice(&wire)).unwrap().1,
        expected
    );
    assert_eq!(encode_command(&expected, false), wire);
    let mut wrong = wire;
    wrong[11] = 0x05;
    let err = Command::decode(Bytes::copy_from_slice(&wrong)).unwrap_err();
    assert_eq!(err.field_index(), Some(0));
    assert_eq!(
        err.root(),
        &DecodeError::UnexpectedStruct {
            expected: 0x0604,
            found: 0x0605
        }
    );
}

#[test]
fn session_header_variants() {
    // Size 0 (no flags) reads as not sync; extra header octets are skipped.
    let (h, _) = Command::decode(Bytes::from_static(&[0x03, 0x01, 0x00, 0x00, 0x00])).unwrap();
    assert!(!h.sync);
    let (h, c) = Command::decode(Bytes::from_static(&[
        0x03, 0x01, 0x02, 0x01, 0xff, 0x00, 0x00,
    ]))
    .unwrap();
    assert!(h.sync);
    assert_eq!(c, Command::ExecutionSync(ExecutionSync {}));
}

#[test]
fn every_operation_with_no_fields_round_trips() {
    for &(class_code, code) in Control::CODES {
        let wire = [class_code, code, 0, 0];
        let c = Control::decode(Bytes::copy_from_slice(&wire)).unwrap();
        assert_eq!((c.class_code(), c.code()), (class_code, code));
        assert_eq!(encode_control(&c), wire, "{}", c.name());
    }
    for &(class_code, code) in Command::CODES {
        let wire = [class_code, code, 1, 1, 0, 0];
        let (h, c) = Command::decode(Bytes::copy_from_slice(&wire)).unwrap();
        assert!(h.sync);
        assert_eq!(encode_command(&c, true), wire, "{}", c.name());
    }
    assert_eq!(Control::CODES.len(), 12 + 13);
    assert!(Command::CODES.contains(&(0x0a, 0x08)), "stream.deliver");
}

#[test]
fn unknown_flags_and_trailing_bytes_are_ignored() {
    let (_, c) = Command::decode(Bytes::from_static(&[
        0x03, 0x01, 0x01, 0x00, 0x00, 0x80, 0xaa,
    ]))
    .unwrap();
    assert_eq!(c, Command::ExecutionSync(ExecutionSync {}));
}

#[test]
fn decode_errors() {
    let cases: &[(&[u8], DecodeError)] = &[
        (&[], DecodeError::Truncated),
        (&[0x01], DecodeError::Truncated),
        (
            &[0x01, 0x0d, 0, 0],
            DecodeError::UnknownControl {
                class_code: 1,
                code: 13,
            },
        ),
        (
            &[0x0b, 0x01, 0, 0],
            DecodeError::UnknownControl {
                class_code: 11,
                code: 1,
            },
        ),
    ];
    for (wire, err) in cases {
        assert_eq!(&Control::decode(Bytes::from_static(wire)).unwrap_err(), err);
    }
    // connection.close with reply-code 999.
    let err =
        Control::decode(Bytes::from_static(&[0x01, 0x0b, 0x01, 0x00, 0x03, 0xe7])).unwrap_err();
    assert_eq!(err.field_index(), Some(0));
    assert_eq!(
        err.root(),
        &DecodeError::InvalidEnum {
            domain: "connection.close-code",
            value: 999
        }
    );
}

fn samples() -> Vec<Command> {
    let mut args = Map::new();
    args.insert("qpid.max_count", Value::Int64(10));
    vec![
        ExchangeDeclare {
            exchange: Some(Str::from("ex")),
            r#type: Some(Str::from("topic")),
            alternate_exchange: Some(Str::from("alt")),
            durable: true,
            arguments: Some(args.clone()),
            ..Default::default()
        }
        .into(),
        ExchangeBind {
            queue: Some(Str::from("q")),
            exchange: Some(Str::from("amq.topic")),
            binding_key: Some(Str::from("a.#")),
            arguments: Some(args.clone()),
        }
        .into(),
        MessageSubscribe {
            queue: Some(Str::from("q")),
            destination: Some(Str::from("d")),
            accept_mode: Some(AcceptMode::None),
            acquire_mode: Some(AcquireMode::NotAcquired),
            exclusive: true,
            resume_id: Some(Str::from("r")),
            resume_ttl: Some(9),
            arguments: Some(args),
        }
        .into(),
        MessageFlow {
            destination: Some(Str::from("d")),
            unit: Some(CreditUnit::Byte),
            value: Some(u32::MAX),
        }
        .into(),
        MessageAccept {
            transfers: Some(SequenceSet::from_range(1, 100)),
        }
        .into(),
        MessageReject {
            transfers: Some(SequenceSet::from_range(7, 7)),
            code: Some(RejectCode::Unroutable),
            text: Some(Str::from("no route")),
        }
        .into(),
        ExecutionException {
            error_code: Some(ErrorCode::NotFound),
            command_id: Some(4),
            class_code: Some(8),
            command_code: Some(1),
            field_index: Some(0),
            description: Some(Str::from("queue not found")),
            error_info: Some(Map::new()),
        }
        .into(),
        FileDeliver {
            consumer_tag: Some(Str::from("c")),
            delivery_tag: Some(1),
            redelivered: true,
            exchange: Some(Str::from("e")),
            routing_key: Some(Str::from("k")),
            identifier: Some(Str::from("i")),
        }
        .into(),
        StreamQos {
            prefetch_size: Some(1),
            prefetch_count: Some(2),
            consume_rate: Some(3),
            global: true,
        }
        .into(),
        DtxSetTimeout {
            xid: Some(Xid::default()),
            timeout: Some(60),
        }
        .into(),
    ]
}

#[test]
fn commands_round_trip_and_reject_every_truncation() {
    for cmd in samples() {
        for sync in [false, true] {
            let wire = Bytes::from(encode_command(&cmd, sync));
            let (h, back) = Command::decode(wire.clone()).unwrap();
            assert_eq!((h.sync, &back), (sync, &cmd));
            for n in 0..wire.len() {
                assert!(
                    Command::decode(wire.slice(..n)).is_err(),
                    "{} decoded from {n} of {} octets",
                    cmd.name(),
                    wire.len()
                );
            }
        }
    }
}

#[test]
fn encode_failure_appends_nothing() {
    let cmd: Command = MessageCancel {
        destination: Some(Str::from("x".repeat(300))),
    }
    .into();
    let mut out = BytesMut::from(&b"abc"[..]);
    assert!(matches!(
        cmd.encode(CommandHeader::default(), &mut out),
        Err(EncodeError::TooLong { .. })
    ));
    assert_eq!(&out[..], b"abc");
}
