//! Interop with Qpid Proton, a real AMQP 1.0 implementation.
//!
//! `vectors/proton_*.txt` hold encodings proton produced (values, messages,
//! and both sides of a whole connection); `vectors/gen_proton_vectors.py`
//! made them and says how to run it again. The expected values below are
//! written by hand from what that script asked proton to encode.
//!
//! The other direction: `vectors/ferry_*.txt` hold ferry's encodings of the
//! same values and messages and a ferry client's and server's side of a
//! connection; `ferry_vectors_are_current` keeps them in step with the codec
//! (`FERRY_UPDATE_VECTORS=1` rewrites them), and
//! `vectors/check_ferry_vectors.py` feeds them to proton (see the README
//! there for the result). Python is not needed to run these tests.

use std::collections::BTreeMap;
use std::path::PathBuf;

use bytes::{Bytes, BytesMut};
use ferry_amqp1::*;

/// The condition the vectors were generated with (gen_proton_vectors.py): an arbitrary
/// symbol as far as the codec goes (the spec's name is `amqp:connection:forced`).
const PROTON_FORCED: Symbol = Symbol::from_static("connection:forced");

fn vectors_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/vectors")
}

fn unhex(hex: &str) -> Vec<u8> {
    assert_eq!(hex.len() % 2, 0, "odd hex length");
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex"))
        .collect()
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// `name hex` lines, in order.
fn read_vectors(file: &str) -> Vec<(String, Bytes)> {
    let text = std::fs::read_to_string(vectors_dir().join(file)).expect(file);
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let (name, h) = l.split_once(' ').expect("name and hex");
            (name.to_string(), Bytes::from(unhex(h.trim())))
        })
        .collect()
}

fn sym(s: &str) -> Symbol {
    Symbol::from(s)
}

fn string(s: &str) -> Value {
    Value::String(Str::from(s))
}

fn uuid(last: u8) -> Uuid {
    let mut u = [0; 16];
    u[15] = last;
    Uuid(u)
}

/// What `gen_proton_vectors.py`'s VALUES are, as ferry values.
fn expected_values() -> Vec<(&'static str, Value)> {
    let map = |entries: Vec<(Value, Value)>| Value::Map(entries.into_iter().collect());
    vec![
        ("null", Value::Null),
        ("true", Value::Bool(true)),
        ("false", Value::Bool(false)),
        ("ubyte", Value::Ubyte(7)),
        ("ushort", Value::Ushort(300)),
        ("uint_zero", Value::Uint(0)),
        ("uint_small", Value::Uint(255)),
        ("uint_big", Value::Uint(70000)),
        ("ulong_zero", Value::Ulong(0)),
        ("ulong_small", Value::Ulong(5)),
        ("ulong_big", Value::Ulong(1 << 40)),
        ("byte", Value::Byte(-1)),
        ("short", Value::Short(-300)),
        ("int_small", Value::Int(-5)),
        ("int_big", Value::Int(1 << 20)),
        ("long_small", Value::Long(-3)),
        ("long_big", Value::Long(1 << 40)),
        ("float", Value::Float(1.5)),
        ("double", Value::Double(-2.25)),
        ("decimal32", Value::Decimal32(Decimal32([1, 2, 3, 4]))),
        (
            "decimal64",
            Value::Decimal64(Decimal64([1, 2, 3, 4, 5, 6, 7, 8])),
        ),
        (
            "decimal128",
            Value::Decimal128(Decimal128(std::array::from_fn(|i| i as u8))),
        ),
        ("char", Value::Char('é')),
        ("char_astral", Value::Char('\u{1F600}')),
        ("timestamp", Value::Timestamp(Timestamp(1_700_000_000_123))),
        (
            "uuid",
            Value::Uuid(Uuid([
                0x0f, 0x1e, 0x2d, 0x3c, 0x4b, 0x5a, 0x69, 0x78, 0x87, 0x96, 0xa5, 0xb4, 0xc3, 0xd2,
                0xe1, 0xf0,
            ])),
        ),
        ("binary", Value::Binary(Bytes::from_static(&[0, 1, 0xff]))),
        (
            "binary_long",
            Value::Binary((0..300).map(|i| i as u8).collect()),
        ),
        ("string", string("grüße")),
        ("string_long", string(&"a".repeat(300))),
        ("symbol", Value::Symbol(sym("amqp:accepted:list"))),
        ("symbol_long", Value::Symbol(sym(&"s".repeat(256)))),
        ("list_empty", Value::List(vec![])),
        (
            "list_mixed",
            Value::List(vec![
                Value::Long(1),
                string("a"),
                Value::Null,
                Value::Bool(true),
            ]),
        ),
        (
            "list_long",
            Value::List((0..300).map(Value::Uint).collect()),
        ),
        (
            "map",
            map(vec![
                (string("k"), Value::Long(1)),
                (Value::Symbol(sym("s")), Value::Null),
            ]),
        ),
        (
            "map_nested",
            map(vec![(
                string("outer"),
                map(vec![(
                    string("inner"),
                    Value::List(vec![Value::Long(1), Value::Long(2)]),
                )]),
            )]),
        ),
        (
            "array_int",
            Value::Array(
                Array::new(Type::Int, vec![Value::Int(1), Value::Int(2), Value::Int(3)]).unwrap(),
            ),
        ),
        (
            "array_symbol",
            Value::Array(Array::symbols([sym("a"), sym("bc")])),
        ),
        (
            "array_bool",
            Value::Array(
                Array::new(Type::Boolean, vec![Value::Bool(true), Value::Bool(false)]).unwrap(),
            ),
        ),
        (
            "array_ulong",
            Value::Array(
                Array::new(Type::Ulong, vec![Value::Ulong(0), Value::Ulong(1 << 33)]).unwrap(),
            ),
        ),
        (
            "array_empty",
            Value::Array(Array::new(Type::String, vec![]).unwrap()),
        ),
        (
            "described_ulong",
            Value::described(0x24u64, Value::List(vec![])),
        ),
        (
            "described_symbol",
            Value::described(sym("x:y"), Value::List(vec![Value::Long(1), string("a")])),
        ),
        (
            "array_described",
            Value::Array(
                Array::described(
                    Descriptor::Symbol(sym("d")),
                    Type::Int,
                    vec![Value::Int(4), Value::Int(5)],
                )
                .unwrap(),
            ),
        ),
    ]
}

/// What the script's MESSAGES are, as ferry messages. Proton always writes
/// a header and a properties section.
fn expected_messages() -> Vec<(&'static str, Message)> {
    let plain = |body: Body| Message {
        header: Some(Header::default()),
        properties: Some(Properties::default()),
        body,
        ..Message::default()
    };
    let with_props = |properties: Properties| Message {
        properties: Some(properties),
        ..plain(Body::Empty)
    };
    let full = Message {
        header: Some(Header {
            durable: true,
            priority: 9,
            ttl: Some(60_000),
            first_acquirer: true,
            delivery_count: 2,
        }),
        delivery_annotations: Some(
            [(AnnotationKey::from("x-opt-delivery"), string("di"))]
                .into_iter()
                .collect(),
        ),
        message_annotations: Some(
            [
                (AnnotationKey::from("x-opt-annot"), Value::Long(42)),
                (AnnotationKey::Ulong(77), string("by-number")),
            ]
            .into_iter()
            .collect(),
        ),
        properties: Some(Properties {
            message_id: Some(MessageId::Uuid(uuid(1))),
            user_id: Some(Bytes::from_static(b"guest")),
            to: Some(Str::from("queue-a")),
            subject: Some(Str::from("subj")),
            reply_to: Some(Str::from("reply-q")),
            correlation_id: Some(MessageId::String(Str::from("corr"))),
            content_type: Some(sym("text/plain")),
            content_encoding: Some(sym("utf-8")),
            absolute_expiry_time: Some(Timestamp(1_700_000_001_500)),
            creation_time: Some(Timestamp(1_700_000_000_250)),
            group_id: Some(Str::from("g")),
            group_sequence: Some(3),
            reply_to_group_id: Some(Str::from("rg")),
        }),
        application_properties: Some(
            [
                (Str::from("colour"), string("red")),
                (Str::from("n"), Value::Long(5)),
            ]
            .into_iter()
            .collect(),
        ),
        body: Body::Value(Value::Map(
            [(
                string("k"),
                Value::List(vec![Value::Long(1), Value::Long(2)]),
            )]
            .into_iter()
            .collect(),
        )),
        footer: None,
    };
    vec![
        ("string_body", plain(Body::Value(string("hello")))),
        (
            "binary_value_body",
            plain(Body::Value(Value::Binary(Bytes::from_static(b"hello")))),
        ),
        (
            "data_body",
            plain(Body::Data(vec![Bytes::from_static(b"hello")])),
        ),
        (
            "sequence_body",
            plain(Body::Sequence(vec![vec![Value::Long(1), Value::Long(2)]])),
        ),
        ("no_body", plain(Body::Empty)),
        (
            "ulong_id",
            with_props(Properties {
                message_id: Some(MessageId::Ulong(12345)),
                ..Properties::default()
            }),
        ),
        (
            "binary_id",
            with_props(Properties {
                message_id: Some(MessageId::Binary(Bytes::from_static(&[1, 2]))),
                correlation_id: Some(MessageId::Uuid(uuid(2))),
                ..Properties::default()
            }),
        ),
        ("full", full),
    ]
}

#[test]
fn proton_values_decode_to_the_expected_values() {
    let got = read_vectors("proton_values.txt");
    let expected = expected_values();
    assert_eq!(got.len(), expected.len());
    let mut differ = Vec::new();
    for ((name, bytes), (want_name, want)) in got.iter().zip(&expected) {
        assert_eq!(name, want_name);
        let value = Value::decode_exact(bytes.clone()).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(&value, want, "{name}");
        let mut ours = BytesMut::new();
        value.encode(&mut ours);
        if ours != bytes {
            differ.push(name.as_str());
        }
    }
    // Scalars take the same (shortest) encodings in both. Proton writes
    // every list, map and array with 32-bit sizes, where ferry uses the 8-bit
    // forms when they fit, and its symbol arrays as sym32.
    assert_eq!(
        differ,
        [
            "list_mixed",
            "map",
            "map_nested",
            "array_int",
            "array_symbol",
            "array_bool",
            "array_ulong",
            "array_empty",
            "described_symbol",
            "array_described"
        ]
    );
}

#[test]
fn proton_messages_decode_to_the_expected_messages() {
    let got = read_vectors("proton_messages.txt");
    let expected = expected_messages();
    assert_eq!(got.len(), expected.len());
    for ((name, bytes), (want_name, want)) in got.iter().zip(&expected) {
        assert_eq!(name, want_name);
        let raw = RawMessage::parse(bytes.clone()).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(raw.decode().as_ref(), Ok(want), "{name}");

        // Forwarding keeps proton's bare message octets as they are.
        let header = Header {
            delivery_count: 1,
            ..raw.header().unwrap().unwrap_or_default()
        };
        let mut out = BytesMut::new();
        raw.encode_with(
            &mut out,
            Some(&header),
            raw.message_annotations().unwrap().as_ref(),
        );
        let bare_start = bytes.len() - raw.bare().len() - raw.raw_footer().map_or(0, |f| f.len());
        assert!(out.ends_with(&bytes[bare_start..]), "{name}");
        let again = RawMessage::parse(out.freeze()).unwrap();
        assert_eq!(again.header().unwrap(), Some(header));
        assert_eq!(again.properties(), raw.properties());
    }
}

/// Splits one side of a connection into its protocol headers and frames.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, PartialEq)]
enum Item {
    Header(ProtocolId),
    Frame(u16, FrameBody),
}

fn parse_stream(mut buf: BytesMut, max_frame_size: u32) -> Vec<Item> {
    let mut items = Vec::new();
    while !buf.is_empty() {
        if buf.starts_with(b"AMQP") {
            let header: [u8; 8] = buf.split_to(8)[..].try_into().unwrap();
            items.push(Item::Header(ProtocolId::from_header(&header).unwrap()));
            continue;
        }
        let frame = decode_frame(&mut buf, max_frame_size)
            .unwrap()
            .expect("whole frames");
        items.push(Item::Frame(frame.channel, frame.decode_body().unwrap()));
    }
    items
}

fn proton_stream(direction: &str) -> BytesMut {
    let mut buf = BytesMut::new();
    for (name, chunk) in read_vectors("proton_frames.txt") {
        if name == direction {
            buf.extend_from_slice(&chunk);
        }
    }
    buf
}

fn performatives(items: &[Item]) -> Vec<(&Performative, &Bytes)> {
    items
        .iter()
        .filter_map(|i| match i {
            Item::Frame(
                0,
                FrameBody::Amqp {
                    performative,
                    payload,
                },
            ) => Some((performative, payload)),
            _ => None,
        })
        .collect()
}

#[test]
fn proton_client_frames() {
    let items = parse_stream(proton_stream("c2s"), 1024);
    assert_eq!(items[0], Item::Header(ProtocolId::Sasl));
    assert_eq!(
        items[1],
        Item::Frame(
            0,
            FrameBody::Sasl(SaslFrame::SaslInit(SaslInit {
                mechanism: sym("ANONYMOUS"),
                initial_response: Some(Bytes::from_static(b"anonymous")),
                hostname: None,
            }))
        )
    );
    assert_eq!(items[2], Item::Header(ProtocolId::Amqp));
    let p = performatives(&items);
    let names: Vec<_> = p.iter().map(|(p, _)| p.name()).collect();
    assert_eq!(
        names,
        [
            "amqp:open:list",
            "amqp:begin:list",
            "amqp:attach:list",
            "amqp:attach:list",
            "amqp:attach:list",
            "amqp:flow:list",
            "amqp:transfer:list",
            "amqp:transfer:list",
            "amqp:transfer:list",
            "amqp:transfer:list",
        ]
    );
    let mut props = Fields::new();
    props.insert(sym("product"), string("proton-vectors"));
    assert_eq!(
        p[0].0,
        &Performative::Open(Open {
            container_id: Str::from("client-1"),
            hostname: Some(Str::from("ferry.example")),
            max_frame_size: 512,
            channel_max: 32767,
            // Proton announces half its idle timeout.
            idle_time_out: Some(15_000),
            offered_capabilities: vec![sym("cap-a")],
            properties: Some(props),
            ..Open::default()
        })
    );
    let Performative::Attach(sender) = p[2].0 else {
        panic!()
    };
    assert_eq!(
        (sender.name.as_str(), sender.role),
        ("link-1", Role::Sender)
    );
    let Some(LinkTarget::Target(target)) = &sender.target else {
        panic!("{:?}", sender.target)
    };
    assert_eq!(target.address, Some(Str::from("queue-a")));
    assert_eq!(
        sender.source.as_ref().and_then(|s| s.address.clone()),
        Some(Str::from("src"))
    );
    let Performative::Attach(receiver) = p[3].0 else {
        panic!()
    };
    assert_eq!(receiver.role, Role::Receiver);
    assert_eq!(
        receiver.source,
        Some(Source {
            address: Some(Str::from("queue-b")),
            durable: TerminusDurability::UnsettledState,
            expiry_policy: TerminusExpiryPolicy::Never,
            timeout: 60,
            distribution_mode: Some(messaging::distribution_mode::COPY),
            capabilities: vec![sym("queue")],
            ..Source::default()
        })
    );
    let Performative::Attach(coordinator) = p[4].0 else {
        panic!()
    };
    assert_eq!(
        coordinator.target,
        Some(LinkTarget::Coordinator(Coordinator {
            capabilities: vec![transaction::capability::LOCAL_TRANSACTIONS],
        }))
    );
    let Performative::Flow(flow) = p[5].0 else {
        panic!()
    };
    assert_eq!((flow.handle, flow.link_credit), (Some(1), Some(10)));

    // The first message fits one transfer.
    let Performative::Transfer(t) = p[6].0 else {
        panic!()
    };
    assert_eq!(t.delivery_tag, Some(Bytes::from_static(b"tag-1")));
    assert!(!t.more);
    let m = Message::decode(p[6].1.clone()).unwrap();
    assert_eq!(m.header.map(|h| h.durable), Some(true));
    let props = m.properties.unwrap();
    assert_eq!(props.message_id, Some(MessageId::Ulong(7)));
    assert_eq!(props.to, Some(Str::from("queue-a")));
    assert_eq!(props.subject, Some(Str::from("greeting")));
    assert_eq!(m.body, Body::Data(vec![Bytes::from_static(b"hello")]));

    // The second takes two; joined, they are one message.
    let (Performative::Transfer(a), Performative::Transfer(b)) = (p[7].0, p[8].0) else {
        panic!()
    };
    assert!(a.more && !b.more);
    let joined = [&p[7].1[..], &p[8].1[..]].concat();
    let m = Message::decode(Bytes::from(joined)).unwrap();
    assert_eq!(m.body, Body::Data(vec![Bytes::from(vec![b'x'; 1500])]));

    // A declare, as the body of a message to the coordinator.
    let raw = RawMessage::parse(p[9].1.clone()).unwrap();
    let RawBody::Value(body) = raw.body() else {
        panic!("{:?}", raw.body())
    };
    let mut body = body.clone();
    assert_eq!(Declare::decode(&mut body), Ok(Declare::default()));
}

#[test]
fn proton_server_frames() {
    let items = parse_stream(proton_stream("s2c"), 512);
    assert_eq!(
        &items[..4],
        &[
            Item::Header(ProtocolId::Sasl),
            Item::Frame(
                0,
                FrameBody::Sasl(SaslFrame::SaslMechanisms(SaslMechanisms {
                    sasl_server_mechanisms: vec![sym("ANONYMOUS")],
                }))
            ),
            Item::Frame(
                0,
                FrameBody::Sasl(SaslFrame::SaslOutcome(SaslOutcome {
                    code: SaslCode::Ok,
                    additional_data: None,
                }))
            ),
            Item::Header(ProtocolId::Amqp),
        ]
    );
    let p: Vec<_> = performatives(&items).into_iter().map(|(p, _)| p).collect();
    let Performative::Open(open) = p[0] else {
        panic!()
    };
    assert_eq!(
        (open.container_id.as_str(), open.max_frame_size),
        ("server-1", 1024)
    );
    let Performative::Begin(begin) = p[1] else {
        panic!()
    };
    assert_eq!(begin.remote_channel, Some(0));
    let dispositions: Vec<_> = p
        .iter()
        .filter_map(|p| match p {
            Performative::Disposition(d) => Some(d),
            _ => None,
        })
        .collect();
    assert_eq!(dispositions.len(), 3);
    for d in &dispositions {
        assert_eq!(d.role, Role::Receiver);
        assert!(d.settled);
    }
    let states: BTreeMap<u32, &DeliveryState> = dispositions
        .iter()
        .map(|d| (d.first, d.state.as_ref().unwrap()))
        .collect();
    assert_eq!(states[&0], &DeliveryState::Accepted(Accepted {}));
    assert_eq!(
        states[&1],
        &DeliveryState::Rejected(Rejected {
            error: Some(Error::new(condition::INVALID_FIELD, "too big")),
        })
    );
    assert_eq!(
        states[&2],
        &DeliveryState::Declared(Declared {
            txn_id: Bytes::from_static(b"txn-1"),
        })
    );
    let n = p.len();
    assert_eq!(
        &p[n - 3..],
        &[
            &Performative::Detach(Detach {
                handle: 0,
                closed: true,
                error: Some(Error::new(condition::RESOURCE_DELETED, "queue gone")),
            }),
            &Performative::End(End { error: None }),
            &Performative::Close(Close {
                error: Some(Error::new(PROTON_FORCED, "shutting down")),
            }),
        ]
    );
}

/// Ferry's side of a connection as a client: what `check_ferry_vectors.py`
/// feeds to a proton server.
fn ferry_client_stream() -> BytesMut {
    let mut out = BytesMut::new();
    out.extend_from_slice(&SASL_PROTOCOL_HEADER);
    write_sasl_frame(
        &mut out,
        &SaslFrame::SaslInit(SaslInit {
            mechanism: sym("ANONYMOUS"),
            initial_response: Some(Bytes::from_static(b"ferry")),
            hostname: None,
        }),
    );
    out.extend_from_slice(&PROTOCOL_HEADER);
    let frames: Vec<Performative> = vec![
        Open {
            container_id: Str::from("ferry-client"),
            hostname: Some(Str::from("proton.example")),
            max_frame_size: 4096,
            idle_time_out: Some(10_000),
            offered_capabilities: vec![sym("ferry-cap")],
            ..Open::default()
        }
        .into(),
        Begin {
            next_outgoing_id: 0,
            incoming_window: 100,
            outgoing_window: 100,
            ..Begin::default()
        }
        .into(),
        Attach {
            name: Str::from("ferry-sender"),
            handle: 0,
            role: Role::Sender,
            source: Some(Source {
                address: Some(Str::from("ferry-src")),
                ..Source::default()
            }),
            target: Some(LinkTarget::Target(Target {
                address: Some(Str::from("queue-x")),
                durable: TerminusDurability::Configuration,
                expiry_policy: TerminusExpiryPolicy::Never,
                capabilities: vec![sym("queue")],
                ..Target::default()
            })),
            initial_delivery_count: Some(0),
            ..Attach::default()
        }
        .into(),
    ];
    for p in &frames {
        write_frame(&mut out, 0, p, &[]);
    }
    let message = expected_messages()
        .into_iter()
        .find(|(n, _)| *n == "full")
        .map(|(_, m)| m)
        .unwrap();
    let mut payload = BytesMut::new();
    message.encode(&mut payload);
    let transfer = Transfer {
        handle: 0,
        delivery_id: Some(0),
        delivery_tag: Some(Bytes::from_static(b"ferry-1")),
        message_format: Some(0),
        ..Transfer::default()
    };
    // Small frames, so the message goes in several transfers.
    write_transfer(&mut out, 0, &transfer, &payload, 128).unwrap();
    write_empty_frame(&mut out);
    let end: Vec<Performative> = vec![
        Detach {
            handle: 0,
            closed: true,
            error: None,
        }
        .into(),
        End { error: None }.into(),
        Close {
            error: Some(Error::new(PROTON_FORCED, "bye")),
        }
        .into(),
    ];
    for p in &end {
        write_frame(&mut out, 0, p, &[]);
    }
    out
}

/// Ferry's side as a server, answering a proton client that opens a
/// connection, a session and a receiving link.
fn ferry_server_stream() -> BytesMut {
    let mut out = BytesMut::new();
    out.extend_from_slice(&SASL_PROTOCOL_HEADER);
    write_sasl_frame(
        &mut out,
        &SaslFrame::SaslMechanisms(SaslMechanisms {
            sasl_server_mechanisms: vec![sym("ANONYMOUS"), sym("PLAIN")],
        }),
    );
    write_sasl_frame(
        &mut out,
        &SaslFrame::SaslOutcome(SaslOutcome {
            code: SaslCode::Ok,
            additional_data: None,
        }),
    );
    out.extend_from_slice(&PROTOCOL_HEADER);
    let mut props = Fields::new();
    props.insert(sym("product"), string("ferry"));
    let frames: Vec<Performative> = vec![
        Open {
            container_id: Str::from("ferry-server"),
            max_frame_size: 65536,
            channel_max: 255,
            properties: Some(props),
            ..Open::default()
        }
        .into(),
        Begin {
            remote_channel: Some(0),
            next_outgoing_id: 0,
            incoming_window: 5000,
            outgoing_window: 5000,
            handle_max: 1023,
            ..Begin::default()
        }
        .into(),
        Attach {
            name: Str::from("proton-receiver"),
            handle: 0,
            role: Role::Sender,
            snd_settle_mode: SenderSettleMode::Unsettled,
            source: Some(Source {
                address: Some(Str::from("queue-y")),
                default_outcome: Some(Outcome::Released(Released {})),
                outcomes: vec![sym("amqp:accepted:list"), sym("amqp:released:list")],
                ..Source::default()
            }),
            target: Some(LinkTarget::Target(Target::default())),
            initial_delivery_count: Some(0),
            max_message_size: Some(1 << 20),
            ..Attach::default()
        }
        .into(),
    ];
    for p in &frames {
        write_frame(&mut out, 0, p, &[]);
    }
    let message = Message {
        header: Some(Header {
            delivery_count: 1,
            ..Header::default()
        }),
        properties: Some(Properties {
            message_id: Some(MessageId::String(Str::from("m-1"))),
            ..Properties::default()
        }),
        ..Message::data(&b"from ferry"[..])
    };
    let mut payload = BytesMut::new();
    message.encode(&mut payload);
    let transfer = Transfer {
        handle: 0,
        delivery_id: Some(0),
        delivery_tag: Some(Bytes::from_static(b"d-0")),
        message_format: Some(0),
        ..Transfer::default()
    };
    write_transfer(&mut out, 0, &transfer, &payload, 512).unwrap();
    write_frame(
        &mut out,
        0,
        &Disposition {
            role: Role::Sender,
            first: 0,
            settled: true,
            state: Some(DeliveryState::Modified(Modified {
                delivery_failed: Some(true),
                ..Modified::default()
            })),
            ..Disposition::default()
        }
        .into(),
        &[],
    );
    write_frame(
        &mut out,
        0,
        &Close {
            error: Some(Error::new(PROTON_FORCED, "bye")),
        }
        .into(),
        &[],
    );
    out
}

fn ferry_vectors() -> BTreeMap<&'static str, String> {
    let mut files = BTreeMap::new();
    let values: String = expected_values()
        .iter()
        .map(|(name, v)| {
            let mut out = BytesMut::new();
            v.encode(&mut out);
            format!("{name} {}\n", hex(&out))
        })
        .collect();
    files.insert("ferry_values.txt", values);
    let messages: String = expected_messages()
        .iter()
        .map(|(name, m)| {
            let mut out = BytesMut::new();
            m.encode(&mut out);
            format!("{name} {}\n", hex(&out))
        })
        .collect();
    files.insert("ferry_messages.txt", messages);
    files.insert(
        "ferry_frames.txt",
        format!(
            "c2s {}\ns2c {}\n",
            hex(&ferry_client_stream()),
            hex(&ferry_server_stream())
        ),
    );
    files
}

#[test]
fn ferry_vectors_are_current() {
    let update = std::env::var_os("FERRY_UPDATE_VECTORS").is_some();
    for (file, content) in ferry_vectors() {
        let path = vectors_dir().join(file);
        if update {
            std::fs::write(&path, &content).unwrap();
        }
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            committed == content,
            "{file} is out of date: run with FERRY_UPDATE_VECTORS=1 and check it with proton again"
        );
    }
}

#[test]
fn ferry_streams_decode_back() {
    let items = parse_stream(ferry_client_stream(), 4096);
    let transfers: Vec<_> = performatives(&items)
        .into_iter()
        .filter(|(p, _)| matches!(p, Performative::Transfer(_)))
        .map(|(_, payload)| payload.clone())
        .collect();
    assert_eq!(transfers.len(), 3);
    let message = Message::decode(Bytes::from(transfers.concat())).unwrap();
    assert_eq!(message.properties.unwrap().subject, Some(Str::from("subj")));
    let items = parse_stream(ferry_server_stream(), 4096);
    assert!(matches!(
        items.last(),
        Some(Item::Frame(
            0,
            FrameBody::Amqp {
                performative: Performative::Close(_),
                ..
            }
        ))
    ));
}
