//! Bad input from the network: the offending peer gets the spec's error, everything else
//! carries on. Drives a real ferryd over sockets with a raw 0-10 peer.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use bytes::{BufMut, BytesMut};
use common::raw::Raw;
use common::Ferryd;
use ferry_amqp010::{
    CloseCode, Command, Control, DeliveryProperties, DtxStart, ErrorCode, ExchangeDeclare,
    ExecutionException, Incoming, MessageTransfer, QueueDeclare, QueueQuery, SessionAttach,
    SessionCommandPoint, Str, TxSelect, FRAME_HEADER_SIZE, PROTOCOL_HEADER,
};

fn exception(raw: &mut Raw, channel: u16) -> ExecutionException {
    match raw.expect_command(channel, |c| matches!(c, Command::ExecutionException(_))) {
        Command::ExecutionException(e) => e,
        _ => unreachable!(),
    }
}

/// A session on `channel` is still usable: declare a queue and query it back.
fn assert_session_works(raw: &mut Raw, channel: u16, queue: &str) {
    raw.command(
        channel,
        QueueDeclare {
            queue: Some(Str::from(queue)),
            ..Default::default()
        }
        .into(),
    );
    raw.command(
        channel,
        QueueQuery {
            queue: Some(Str::from(queue)),
        }
        .into(),
    );
    let result = raw.expect_command(channel, |c| matches!(c, Command::ExecutionResult(_)));
    let Command::ExecutionResult(r) = result else {
        unreachable!()
    };
    let value: ferry_amqp010::QueueQueryResult = r
        .value
        .expect("query result value")
        .decode_as()
        .expect("queue-query-result");
    assert_eq!(
        value.queue.as_ref().map(|q| q.to_string()),
        Some(queue.to_string())
    );
}

#[test]
fn unsupported_protocol_header_is_answered_with_ours_then_closed() {
    let broker = Ferryd::start();
    // 1.0's in-band TLS (TLS has its own port) and 0-8: not spoken; 0-9-1, 0-10 and 1.0
    // (with or without SASL) are.
    for header in [b"AMQP\x02\x01\x00\x00", b"AMQP\x01\x01\x08\x00"] {
        let mut s = TcpStream::connect(broker.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.write_all(header).unwrap();
        let mut reply = Vec::new();
        s.read_to_end(&mut reply).unwrap();
        assert_eq!(reply, PROTOCOL_HEADER);
    }
}

#[test]
fn garbage_instead_of_a_protocol_header_is_closed() {
    let broker = Ferryd::start();
    let mut s = TcpStream::connect(broker.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
    let mut reply = Vec::new();
    let _ = s.read_to_end(&mut reply);
    assert_eq!(reply, PROTOCOL_HEADER);
    // The broker still serves a proper client.
    let mut raw = Raw::open(broker.addr);
    raw.attach(1, "after-garbage");
    assert_session_works(&mut raw, 1, "after-garbage-q");
}

#[test]
fn a_frame_larger_than_negotiated_is_a_framing_error() {
    let broker = Ferryd::start();
    let mut raw = Raw::open(broker.addr);
    raw.attach(1, "big-frame");
    // Negotiated 4096; claim 8000 octets.
    let mut frame = BytesMut::new();
    frame.put_u8(0x0f);
    frame.put_u8(1);
    frame.put_u16(8000);
    frame.put_bytes(0, FRAME_HEADER_SIZE - 4);
    frame.put_bytes(0, 8000 - FRAME_HEADER_SIZE);
    raw.send_bytes(&frame);
    let close = raw.until_closed().expect("connection.close");
    assert_eq!(close.reply_code, Some(CloseCode::FramingError));
}

#[test]
fn reserved_bits_in_a_frame_header_are_a_framing_error() {
    let broker = Ferryd::start();
    let mut raw = Raw::open(broker.addr);
    raw.send_bytes(&[
        0xff, 0xff, 0x00, 0x10, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4,
    ]);
    let close = raw.until_closed().expect("connection.close");
    assert_eq!(close.reply_code, Some(CloseCode::FramingError));
}

#[test]
fn unknown_command_gets_not_implemented_and_other_sessions_carry_on() {
    let broker = Ferryd::start();
    let mut raw = Raw::open(broker.addr);
    raw.attach(1, "bad-session");
    raw.attach(2, "good-session");
    // A command segment for class 0x04 (message) with an unassigned code 0x7f.
    let mut frame = BytesMut::new();
    let payload = [0x04u8, 0x7f, 0x01, 0x00];
    frame.put_u8(0x0f);
    frame.put_u8(1);
    frame.put_u16((FRAME_HEADER_SIZE + payload.len()) as u16);
    frame.put_u8(0);
    frame.put_u8(1); // track 1: commands
    frame.put_u16(1);
    frame.put_bytes(0, 4);
    frame.put_slice(&payload);
    raw.send_bytes(&frame);
    let e = exception(&mut raw, 1);
    assert_eq!(e.error_code, Some(ErrorCode::NotImplemented));
    assert_eq!(e.command_id, Some(0));
    raw.expect_control(1, |c| matches!(c, Control::SessionDetach(_)));
    assert_session_works(&mut raw, 2, "still-fine");
}

#[test]
fn dtx_start_without_select_is_command_invalid_and_other_sessions_carry_on() {
    let broker = Ferryd::start();
    let mut raw = Raw::open(broker.addr);
    raw.attach(1, "dtx");
    raw.attach(2, "other");
    raw.command(1, DtxStart::default().into());
    let e = exception(&mut raw, 1);
    assert_eq!(e.error_code, Some(ErrorCode::CommandInvalid));
    raw.expect_control(1, |c| matches!(c, Control::SessionDetach(_)));
    assert_session_works(&mut raw, 2, "still-fine");
}

#[test]
fn transfer_to_a_missing_exchange_is_not_found() {
    let broker = Ferryd::start();
    let mut raw = Raw::open(broker.addr);
    raw.attach(1, "missing-exchange");
    let mut header = BytesMut::new();
    DeliveryProperties {
        routing_key: Some(Str::from("k")),
        ..Default::default()
    }
    .encode(&mut header)
    .unwrap();
    raw.transfer(
        1,
        MessageTransfer {
            destination: Some(Str::from("no-such-exchange")),
            ..Default::default()
        },
        &header,
        b"body",
    );
    let e = exception(&mut raw, 1);
    assert_eq!(e.error_code, Some(ErrorCode::NotFound));
    assert_eq!(e.command_id, Some(0));
}

#[test]
fn declaring_an_unknown_exchange_type_is_not_found_and_amq_names_are_reserved() {
    let broker = Ferryd::start();
    let mut raw = Raw::open(broker.addr);
    raw.attach(1, "types");
    raw.command(
        1,
        ExchangeDeclare {
            exchange: Some(Str::from("x")),
            r#type: Some(Str::from("no-such-type")),
            ..Default::default()
        }
        .into(),
    );
    assert_eq!(exception(&mut raw, 1).error_code, Some(ErrorCode::NotFound));
    raw.attach(2, "reserved");
    raw.command(
        2,
        ExchangeDeclare {
            exchange: Some(Str::from("amq.mine")),
            r#type: Some(Str::from("direct")),
            ..Default::default()
        }
        .into(),
    );
    assert_eq!(
        exception(&mut raw, 2).error_code,
        Some(ErrorCode::NotAllowed)
    );
}

#[test]
fn commands_on_an_unattached_channel_are_dropped_as_qpidd_drops_them() {
    let broker = Ferryd::start();
    let mut raw = Raw::open(broker.addr);
    raw.command(3, TxSelect {}.into());
    // Whatever the broker said about channel 3 would come before the answer to this.
    raw.control(
        1,
        SessionAttach {
            name: Some(bytes::Bytes::from_static(b"fine")),
            force: false,
        }
        .into(),
    );
    loop {
        match raw.next() {
            Some((1, Incoming::Control(Control::SessionAttached(_)))) => break,
            Some((3, item)) => panic!("a reply on the unattached channel: {item:?}"),
            Some(_) => continue,
            None => panic!("connection ended before session.attached"),
        }
    }
    raw.control(
        1,
        SessionCommandPoint {
            command_id: Some(0),
            command_offset: Some(0),
        }
        .into(),
    );
    assert_session_works(&mut raw, 1, "unattached-then-fine");
}

#[test]
fn random_and_truncated_bytes_do_not_disturb_a_normal_client() {
    let broker = Ferryd::start();
    let mut normal = Raw::open(broker.addr);
    normal.attach(1, "normal");
    // A deterministic xorshift stream: reproducible, no extra dependency.
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for round in 0..40 {
        let mut s = TcpStream::connect(broker.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let len = (next() % 600) as usize;
        let mut bytes: Vec<u8> = (0..len).map(|_| next() as u8).collect();
        if round % 2 == 0 {
            // Half the peers get past the protocol header so the frame decoder sees garbage.
            let mut with_header = PROTOCOL_HEADER.to_vec();
            with_header.append(&mut bytes);
            bytes = with_header;
        }
        let cut = if round % 3 == 0 {
            bytes.len() / 2
        } else {
            bytes.len()
        };
        let _ = s.write_all(&bytes[..cut]);
        drop(s);
        if round % 10 == 9 {
            assert_session_works(&mut normal, 1, &format!("alive-{round}"));
        }
    }
    // Truncated handshakes: a valid start-ok cut short, then the socket is dropped.
    for cut in [9usize, 13, 20, 30] {
        let mut raw = Raw::connect(broker.addr);
        raw.send_bytes(&PROTOCOL_HEADER);
        let mut out = BytesMut::new();
        ferry_amqp010::write_control(
            &mut out,
            0,
            &ferry_amqp010::ConnectionStartOk {
                mechanism: Some(Str::from("PLAIN")),
                response: Some(bytes::Bytes::from_static(b"\0guest\0guest")),
                ..Default::default()
            }
            .into(),
        )
        .unwrap();
        raw.send_bytes(&out[..cut.min(out.len())]);
    }
    assert_session_works(&mut normal, 1, "alive-at-end");
}

#[test]
fn sigterm_closes_connections_with_connection_forced_and_exits_cleanly() {
    let broker = Ferryd::start();
    let mut raw = Raw::open(broker.addr);
    raw.attach(1, "shutdown");
    let (status, _log) = {
        let handle = std::thread::spawn(move || broker.terminate());
        let close = raw.until_closed().expect("connection.close on shutdown");
        assert_eq!(close.reply_code, Some(CloseCode::ConnectionForced));
        handle.join().unwrap()
    };
    assert!(status.success(), "ferryd exit status {status}");
}

#[test]
fn busy_port_is_a_one_line_error_and_nonzero_exit() {
    let holder = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = holder.local_addr().unwrap().port().to_string();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ferryd"))
        .args(["--port", &port, "--interface", "127.0.0.1", "--no-data-dir"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("cannot listen"), "stderr: {stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "stderr: {stderr}");
}

#[test]
fn bad_option_is_an_error() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ferryd"))
        .args(["--no-such-option"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

/// Settling or acquiring a set that spans half the id space costs what the session has
/// outstanding, not four billion lookups: the command completes, and a transaction that
/// staged such an accept commits.
#[test]
fn settlement_sets_spanning_billions_of_ids_complete_promptly() {
    use ferry_amqp010::{
        MessageAccept, MessageAcquire, MessageRelease, SequenceSet, TxCommit, TxSelect,
    };
    let broker = Ferryd::start();
    let mut raw = Raw::open(broker.addr);
    raw.attach(1, "wide");
    // Ranges are serial numbers: the widest one a set can name spans half the id space.
    let mut everything = SequenceSet::new();
    everything.add_range(0, (1 << 31) - 2);
    assert!(everything.count() > 1 << 30);
    let commands: [Command; 3] = [
        MessageAccept {
            transfers: Some(everything.clone()),
        }
        .into(),
        MessageRelease {
            transfers: Some(everything.clone()),
            set_redelivered: false,
        }
        .into(),
        MessageAcquire {
            transfers: Some(everything.clone()),
        }
        .into(),
    ];
    for command in commands {
        let id = raw.command(1, command);
        assert_completed(&mut raw, 1, id);
    }
    raw.command(1, TxSelect {}.into());
    raw.command(
        1,
        MessageAccept {
            transfers: Some(everything),
        }
        .into(),
    );
    let commit = raw.command(1, TxCommit {}.into());
    assert_completed(&mut raw, 1, commit);
    assert_session_works(&mut raw, 1, "after-wide-sets");
}

fn assert_completed(raw: &mut Raw, channel: u16, id: u32) {
    raw.expect_control(channel, |c| {
        matches!(c, Control::SessionCompleted(sc)
            if sc.commands.as_ref().is_some_and(|s| s.contains(id)))
    });
}

#[test]
fn queries_from_a_peer_that_does_not_read_cost_bounded_memory() {
    // Each query answers with the queue's half-megabyte arguments. Sent all at once, and
    // read only after, they are answered a little at a time as the peer reads: unanswered
    // they would be a gigabyte in the broker's output.
    let broker = Ferryd::start();
    let mut raw = Raw::open(broker.addr);
    raw.attach(1, "asks");
    let mut arguments = ferry_amqp010::Map::new();
    arguments.insert(
        "x-big",
        ferry_amqp010::Value::Vbin32(bytes::Bytes::from(vec![1u8; 512 * 1024])),
    );
    raw.command(
        1,
        QueueDeclare {
            queue: Some(Str::from("wide-args")),
            arguments: Some(arguments),
            ..Default::default()
        }
        .into(),
    );
    let before = common::rss_kib(broker.pid());
    const QUERIES: usize = 2000;
    for _ in 0..QUERIES {
        raw.command(
            1,
            QueueQuery {
                queue: Some(Str::from("wide-args")),
            }
            .into(),
        );
    }
    // Let the broker take in what it will before anything is read.
    std::thread::sleep(Duration::from_millis(500));
    let grown = common::rss_kib(broker.pid()).saturating_sub(before);
    assert!(grown < 64 * 1024, "RSS grew by {grown} KiB");
    for _ in 0..QUERIES {
        raw.expect_command(1, |c| matches!(c, Command::ExecutionResult(_)));
    }
    assert_session_works(&mut raw, 1, "after-queries");
}
