//! Limits a peer cannot exceed: connections, message size, queue depth.

mod common;

use std::io::Read;
use std::time::Duration;

use bytes::BytesMut;
use common::raw::Raw;
use common::Ferryd;
use ferry_amqp010::{
    Command, DeliveryProperties, ErrorCode, ExecutionException, Map, MessageTransfer, QueueDeclare,
    Str, Value,
};

fn exception(raw: &mut Raw, channel: u16) -> ExecutionException {
    match raw.expect_command(channel, |c| matches!(c, Command::ExecutionException(_))) {
        Command::ExecutionException(e) => e,
        _ => unreachable!(),
    }
}

fn header(routing_key: &str) -> BytesMut {
    let mut header = BytesMut::new();
    DeliveryProperties {
        routing_key: Some(Str::from(routing_key)),
        ..Default::default()
    }
    .encode(&mut header)
    .unwrap();
    header
}

fn to_default_exchange() -> MessageTransfer {
    MessageTransfer {
        destination: Some(Str::from("")),
        ..Default::default()
    }
}

#[test]
fn queue_max_count_with_reject_policy_refuses_the_publisher() {
    let broker = Ferryd::start();
    let mut raw = Raw::open(broker.addr);
    raw.attach(1, "limits");
    let mut args = Map::new();
    args.insert("qpid.max_count", Value::Uint32(2));
    args.insert("qpid.policy_type", Value::Str16(Str::from("reject")));
    raw.command(
        1,
        QueueDeclare {
            queue: Some(Str::from("bounded")),
            arguments: Some(args),
            ..Default::default()
        }
        .into(),
    );
    let h = header("bounded");
    raw.transfer(1, to_default_exchange(), &h, b"one");
    raw.transfer(1, to_default_exchange(), &h, b"two");
    let third = raw.transfer(1, to_default_exchange(), &h, b"three");
    let e = exception(&mut raw, 1);
    assert_eq!(e.error_code, Some(ErrorCode::ResourceLimitExceeded));
    assert_eq!(e.command_id, Some(third));
}

#[test]
fn a_message_over_max_message_size_is_refused_and_the_connection_lives() {
    let broker = Ferryd::start_with(&["--max-message-size", "10000"]);
    let mut raw = Raw::open(broker.addr);
    raw.attach(1, "too-big");
    raw.attach(2, "fine");
    raw.command(
        2,
        QueueDeclare {
            queue: Some(Str::from("sized")),
            ..Default::default()
        }
        .into(),
    );
    let h = header("sized");
    let body = vec![7u8; 20_000];
    raw.transfer(1, to_default_exchange(), &h, &body);
    let e = exception(&mut raw, 1);
    assert_eq!(e.error_code, Some(ErrorCode::ResourceLimitExceeded));
    // A small one on the other session still goes through.
    raw.transfer(2, to_default_exchange(), &h, b"small");
    raw.expect_control(2, |c| {
        matches!(c, ferry_amqp010::Control::SessionCompleted(sc)
            if sc.commands.as_ref().is_some_and(|s| s.contains(1)))
    });
}

#[test]
fn connections_beyond_max_connections_are_refused() {
    let broker = Ferryd::start_with(&["--max-connections", "2"]);
    let _a = Raw::open(broker.addr);
    let _b = Raw::open(broker.addr);
    let mut c = std::net::TcpStream::connect(broker.addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut buf = [0u8; 16];
    // Refused: closed without a protocol exchange.
    assert_eq!(c.read(&mut buf).unwrap_or(0), 0);
    drop(_a);
    // A slot frees up once a connection goes.
    let mut ok = false;
    for _ in 0..50 {
        std::thread::sleep(Duration::from_millis(100));
        let attempt = std::panic::catch_unwind(|| Raw::open(broker.addr));
        if attempt.is_ok() {
            ok = true;
            break;
        }
    }
    assert!(ok, "a new connection is accepted after one closes");
}

#[test]
fn a_consumer_that_never_reads_stalls_nobody_and_holds_bounded_memory() {
    let broker = Ferryd::start();
    let mut stuck = Raw::open(broker.addr);
    stuck.attach(1, "never-reads");
    stuck.declare_queue(1, "firehose");
    stuck.subscribe_unlimited(1, "firehose", "d", ferry_amqp010::AcceptMode::None);
    // From here on `stuck` never reads: its socket buffers fill, then ferryd's.
    let before = common::rss_kib(broker.pid());
    let mut publisher = Raw::open(broker.addr);
    publisher.attach(1, "publisher");
    let h = header("firehose");
    let body = vec![0u8; 16 * 1024];
    let total = 4000; // 64 MiB in all
    for _ in 0..total {
        publisher.transfer(1, to_default_exchange(), &h, &body);
    }
    // Every transfer is completed: the publisher was never blocked by the stuck consumer.
    publisher.expect_control(1, |c| {
        matches!(c, ferry_amqp010::Control::SessionCompleted(sc)
            if sc.commands.as_ref().is_some_and(|s| s.contains(total - 1)))
    });
    // Another client is served promptly.
    let mut other = Raw::open(broker.addr);
    other.attach(1, "other");
    other.command(
        1,
        ferry_amqp010::QueueQuery {
            queue: Some(Str::from("firehose")),
        }
        .into(),
    );
    let Command::ExecutionResult(r) =
        other.expect_command(1, |c| matches!(c, Command::ExecutionResult(_)))
    else {
        unreachable!()
    };
    let q: ferry_amqp010::QueueQueryResult = r.value.unwrap().decode_as().unwrap();
    // The undelivered rest waits in the queue, not in the stuck connection's buffers: the
    // connection holds at most its write high-water mark plus one outbox (8 MiB), and the
    // kernel's socket buffers take a few MiB more.
    let queued = u64::from(q.message_count.unwrap_or(0));
    assert!(queued > 0 && queued < u64::from(total), "queued {queued}");
    let grown_mib = common::rss_kib(broker.pid()).saturating_sub(before) / 1024;
    assert!(
        grown_mib < 64 + 32,
        "ferryd grew by {grown_mib} MiB holding {queued} queued 16 KiB messages"
    );
    drop(stuck);
}

/// Transfers that arrive on `channel` until nothing more comes for `quiet`.
fn transfers_until_quiet(raw: &mut Raw, channel: u16, quiet: Duration) -> Vec<u32> {
    raw.stream.set_read_timeout(Some(quiet)).unwrap();
    let mut ids = Vec::new();
    let mut next_id = None::<u32>;
    while let Some((ch, item)) = raw.next() {
        if let ferry_amqp010::Incoming::Control(ferry_amqp010::Control::SessionCommandPoint(p)) =
            &item
        {
            next_id = p.command_id;
        }
        if let ferry_amqp010::Incoming::Command { command, .. } = item {
            // The broker numbers its commands on each session from the command point.
            let id = next_id.unwrap_or(0);
            next_id = Some(id + 1);
            if ch == channel && matches!(command, Command::MessageTransfer(_)) {
                ids.push(id);
            }
        }
    }
    raw.stream
        .set_read_timeout(Some(common::raw::TIMEOUT))
        .unwrap();
    ids
}

#[test]
fn unacknowledged_deliveries_stop_at_session_max_unacked_on_0_10() {
    use ferry_amqp010::{MessageAccept, SequenceSet, SessionCompleted};
    let broker = Ferryd::start_with(&["--session-max-unacked", "5"]);
    let mut raw = Raw::open(broker.addr);
    raw.attach(1, "window");
    raw.declare_queue(1, "unacked");
    let h = header("unacked");
    for _ in 0..20 {
        raw.transfer(1, to_default_exchange(), &h, b"m");
    }
    raw.subscribe_unlimited(1, "unacked", "d", ferry_amqp010::AcceptMode::Explicit);
    let first = transfers_until_quiet(&mut raw, 1, Duration::from_millis(500));
    assert_eq!(
        first.len(),
        5,
        "unlimited credit, yet only the window: {first:?}"
    );
    // Completing and accepting three frees three slots.
    let mut done = SequenceSet::new();
    for id in &first[..3] {
        done.add(*id);
    }
    raw.control(
        1,
        SessionCompleted {
            commands: Some(done.clone()),
            timely_reply: false,
        }
        .into(),
    );
    raw.command(
        1,
        MessageAccept {
            transfers: Some(done),
        }
        .into(),
    );
    let more = transfers_until_quiet(&mut raw, 1, Duration::from_millis(500));
    assert_eq!(more.len(), 3, "{more:?}");
}

#[test]
fn unacknowledged_deliveries_stop_at_session_max_unacked_on_0_9_1() {
    use common::raw091::{short, Raw091};
    use ferry_amqp091::{Assembled, BasicAck, BasicConsume, BasicProperties, Method};
    let broker = Ferryd::start_with(&["--session-max-unacked", "4"]);
    let mut raw = Raw091::open(broker.addr);
    raw.method(
        1,
        ferry_amqp091::QueueDeclare {
            queue: short("unacked091"),
            ..Default::default()
        }
        .into(),
    );
    raw.expect(1, |m| matches!(m, Method::QueueDeclareOk(_)));
    for _ in 0..10 {
        raw.publish("", "unacked091", &BasicProperties::default(), b"m");
    }
    // No basic.qos: RabbitMQ would send all ten.
    raw.method(
        1,
        BasicConsume {
            queue: short("unacked091"),
            consumer_tag: short("c"),
            ..Default::default()
        }
        .into(),
    );
    raw.expect(1, |m| matches!(m, Method::BasicConsumeOk(_)));
    let mut tags = Vec::new();
    let count = |raw: &mut Raw091, tags: &mut Vec<u64>| {
        let mut n = 0;
        while let Some((_, Assembled::Message(m))) = raw.next() {
            if let Method::BasicDeliver(d) = m.method {
                tags.push(d.delivery_tag);
                n += 1;
            }
        }
        n
    };
    raw.set_read_timeout(Duration::from_millis(500));
    assert_eq!(count(&mut raw, &mut tags), 4);
    raw.method(
        1,
        BasicAck {
            delivery_tag: tags[2],
            multiple: true,
        }
        .into(),
    );
    assert_eq!(count(&mut raw, &mut tags), 3);
}

/// Acknowledgements committed in a transaction free their window slots as plain ones do:
/// a transactional consumer is not cut off after --session-max-unacked deliveries.
#[test]
fn transactional_acks_give_their_window_slots_back_on_0_9_1() {
    use common::raw091::{short, Raw091};
    use ferry_amqp091::{
        Assembled, BasicAck, BasicConsume, BasicProperties, Method, TxCommit, TxSelect,
    };
    let broker = Ferryd::start_with(&["--session-max-unacked", "4"]);
    let mut raw = Raw091::open(broker.addr);
    raw.declare_queue("unacked-tx", ferry_amqp091::FieldTable::new());
    for _ in 0..10 {
        raw.publish("", "unacked-tx", &BasicProperties::default(), b"m");
    }
    raw.call(TxSelect {}, |m| matches!(m, Method::TxSelectOk(_)));
    raw.call(
        BasicConsume {
            queue: short("unacked-tx"),
            consumer_tag: short("c"),
            ..Default::default()
        },
        |m| matches!(m, Method::BasicConsumeOk(_)),
    );
    let deliveries = |raw: &mut Raw091| {
        let mut tags = Vec::new();
        while let Some((_, Assembled::Message(m))) = raw.next() {
            if let Method::BasicDeliver(d) = m.method {
                tags.push(d.delivery_tag);
            }
        }
        tags
    };
    raw.set_read_timeout(Duration::from_millis(500));
    let first = deliveries(&mut raw);
    assert_eq!(first.len(), 4);
    raw.method(
        1,
        BasicAck {
            delivery_tag: first[3],
            multiple: true,
        }
        .into(),
    );
    raw.call(TxCommit {}, |m| matches!(m, Method::TxCommitOk(_)));
    assert_eq!(
        deliveries(&mut raw).len(),
        4,
        "the committed acks freed the window"
    );
}

#[test]
fn subscriptions_per_session_and_consumers_per_channel_are_capped() {
    use common::raw091::{short, Raw091};
    use ferry_amqp010::MessageSubscribe;
    use ferry_amqp091::{BasicConsume, Method};
    let broker = Ferryd::start_with(&["--max-consumers-per-session", "2"]);
    let mut raw = Raw::open(broker.addr);
    raw.attach(1, "subs");
    raw.declare_queue(1, "many");
    let mut last = 0;
    for d in ["a", "b", "c"] {
        last = raw.command(
            1,
            MessageSubscribe {
                queue: Some(Str::from("many")),
                destination: Some(Str::from(d)),
                ..Default::default()
            }
            .into(),
        );
    }
    let e = exception(&mut raw, 1);
    assert_eq!(e.error_code, Some(ErrorCode::ResourceLimitExceeded));
    assert_eq!(e.command_id, Some(last));

    let mut raw = Raw091::open(broker.addr);
    for tag in ["a", "b", "c"] {
        raw.method(
            1,
            BasicConsume {
                queue: short("many"),
                consumer_tag: short(tag),
                ..Default::default()
            }
            .into(),
        );
    }
    let Method::ConnectionClose(c) = raw.expect(0, |m| matches!(m, Method::ConnectionClose(_)))
    else {
        unreachable!()
    };
    assert_eq!(c.reply_code, 530);
}

#[test]
fn sessions_beyond_channel_max_are_refused() {
    let broker = Ferryd::start_with(&["--channel-max", "4"]);
    let mut raw = Raw::open(broker.addr);
    raw.attach(3, "last-allowed");
    raw.control(
        4,
        ferry_amqp010::SessionAttach {
            name: Some(bytes::Bytes::from_static(b"too-many")),
            force: false,
        }
        .into(),
    );
    let close = raw.until_closed().expect("connection.close");
    assert_eq!(
        close.reply_code,
        Some(ferry_amqp010::CloseCode::FramingError)
    );
}

/// `--heartbeat` is what each protocol's handshake offers: the 0-9-1 proposal, the 0-10
/// maximum and the AMQP 1.0 idle timeout.
#[test]
fn the_heartbeat_option_sets_what_every_handshake_offers() {
    let broker = Ferryd::start_with(&["--heartbeat", "7"]);
    let (_, tune) = Raw::until_tune(broker.addr, "ANONYMOUS", b"");
    assert_eq!(tune.heartbeat_max, Some(7));
    let (_, tune) = common::raw091::Raw091::until_tune(broker.addr, "guest");
    assert_eq!(tune.heartbeat, 7);
    use common::amqp1::{tcp, Amqp1, SaslResult};
    let mut amqp1 = Amqp1::new(Box::new(tcp(broker.addr)));
    let sasl = amqp1.sasl("ANONYMOUS", Vec::new(), |_| Vec::new());
    assert_eq!(sasl, SaslResult::Ok);
    assert_eq!(amqp1.open_and_begin().idle_time_out, Some(7000));
    // The default, as before the option.
    let broker = Ferryd::start();
    let (_, tune) = common::raw091::Raw091::until_tune(broker.addr, "guest");
    assert_eq!(tune.heartbeat, 120);
}

/// Close-ok tells its recipient to close the socket. After a 0-9-1 client's close, ferryd
/// leaves that to the client, as RabbitMQ does, and closes as soon as the client has.
#[test]
fn after_a_0_9_1_clients_close_the_client_closes_the_socket_first() {
    use common::raw091::Raw091;
    use ferry_amqp091::{ConnectionClose, Method};
    let broker = Ferryd::start();
    let mut raw = Raw091::login_as(broker.addr, "guest");
    raw.expect(0, |m| matches!(m, Method::ConnectionOpenOk(_)));
    raw.method(0, ConnectionClose::default().into());
    raw.expect(0, |m| matches!(m, Method::ConnectionCloseOk(_)));
    raw.set_read_timeout(Duration::from_millis(50));
    assert!(
        !raw.discard_until_closed(Duration::from_millis(500)),
        "ferryd closed its side before the client"
    );
    raw.writer().shutdown(std::net::Shutdown::Write).unwrap();
    assert!(
        raw.discard_until_closed(Duration::from_secs(1)),
        "ferryd did not close once the client had"
    );
}

#[test]
fn a_connection_that_stalls_in_the_handshake_is_closed() {
    use std::io::Write;
    let broker = Ferryd::start_with(&["--max-negotiate-time", "300"]);
    // Nothing at all: dropped once the header is overdue.
    let mut silent = std::net::TcpStream::connect(broker.addr).unwrap();
    silent
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let start = std::time::Instant::now();
    let mut buf = [0u8; 64];
    assert_eq!(silent.read(&mut buf).unwrap_or(0), 0);
    assert!(start.elapsed() < Duration::from_secs(4));
    // The header, then silence: connection.start, then connection.close, then EOF.
    let mut raw = Raw::connect(broker.addr);
    raw.send_bytes(&ferry_amqp010::PROTOCOL_HEADER);
    let mut header = [0u8; 8];
    raw.stream.read_exact(&mut header).unwrap();
    let start = std::time::Instant::now();
    let close = raw.until_closed().expect("connection.close");
    assert_eq!(
        close.reply_code,
        Some(ferry_amqp010::CloseCode::ConnectionForced)
    );
    assert!(start.elapsed() < Duration::from_secs(5));
    // The same on 0-9-1, whose header gets connection.start directly.
    let mut s = std::net::TcpStream::connect(broker.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(8))).unwrap();
    s.write_all(&ferry_amqp091::PROTOCOL_HEADER).unwrap();
    let start = std::time::Instant::now();
    let mut got = Vec::new();
    loop {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    }
    assert!(start.elapsed() < Duration::from_secs(6), "closed in time");
    assert!(got.len() > 8, "got connection.start and connection.close");
}

#[test]
fn a_peer_that_stops_sending_heartbeats_is_disconnected() {
    use common::raw091::Raw091;
    use ferry_amqp091::Method;
    let broker = Ferryd::start();
    let mut raw = Raw091::login(broker.addr, "guest", 1);
    raw.expect(0, |m| matches!(m, Method::ConnectionOpenOk(_)));
    // From here on the client sends nothing, not even heartbeats.
    let start = std::time::Instant::now();
    raw.set_read_timeout(Duration::from_millis(200));
    assert!(raw.discard_until_closed(Duration::from_secs(10)));
    let waited = start.elapsed();
    assert!(
        waited >= Duration::from_millis(1500) && waited < Duration::from_secs(6),
        "closed after {waited:?}"
    );
}

/// Messages on `queue`, asked on a fresh 0-9-1 connection (passive declare).
fn queue_depth(addr: std::net::SocketAddr, queue: &str) -> u32 {
    use common::raw091::{short, Raw091};
    use ferry_amqp091::Method;
    let mut raw = Raw091::open(addr);
    raw.method(
        1,
        ferry_amqp091::QueueDeclare {
            queue: short(queue),
            passive: true,
            ..Default::default()
        }
        .into(),
    );
    let Method::QueueDeclareOk(ok) = raw.expect(1, |m| matches!(m, Method::QueueDeclareOk(_)))
    else {
        unreachable!()
    };
    ok.message_count
}

/// Consumes (no-ack, over 0-9-1, on a connection that never publishes) until `total` messages
/// arrived; fails if the stream stalls.
fn drain(addr: std::net::SocketAddr, queue: &str, total: usize) {
    use common::raw091::{short, Raw091};
    use ferry_amqp091::{Assembled, BasicConsume, Method};
    let mut c = Raw091::open(addr);
    c.method(
        1,
        BasicConsume {
            queue: short(queue),
            consumer_tag: short("drain"),
            no_ack: true,
            ..Default::default()
        }
        .into(),
    );
    let mut got = 0;
    while got < total {
        match c.next() {
            Some((_, Assembled::Message(m))) if matches!(m.method, Method::BasicDeliver(_)) => {
                got += 1
            }
            Some(_) => {}
            None => panic!("delivery stalled after {got} of {total}"),
        }
    }
}

/// The queue stops growing while the alarm holds the publisher.
fn assert_depth_steady(addr: std::net::SocketAddr, queue: &str, total: u32) -> u32 {
    let before = queue_depth(addr, queue);
    std::thread::sleep(Duration::from_millis(400));
    let after = queue_depth(addr, queue);
    assert_eq!(before, after, "the publisher was still being read");
    assert!(after < total, "all {total} got in before the alarm");
    eprintln!("held at {after} of {total}");
    after
}

const FLOW_MESSAGES: usize = 16_000;
const FLOW_ARGS: [&str; 4] = [
    "--memory-high-watermark",
    "256KiB",
    "--memory-low-watermark",
    "128KiB",
];

#[test]
fn memory_alarm_blocks_0_9_1_publishers_with_connection_blocked_until_consumers_drain() {
    use common::raw091::{short, Raw091};
    use ferry_amqp091::{write_content, BasicProperties, BasicPublish, Method};
    use std::io::Write;
    let broker = Ferryd::start_with(&FLOW_ARGS);
    let mut p = Raw091::open(broker.addr);
    p.method(
        1,
        ferry_amqp091::QueueDeclare {
            queue: short("flow091"),
            ..Default::default()
        }
        .into(),
    );
    p.expect(1, |m| matches!(m, Method::QueueDeclareOk(_)));
    let mut bytes = BytesMut::new();
    let publish = Method::BasicPublish(BasicPublish {
        routing_key: short("flow091"),
        ..Default::default()
    });
    for _ in 0..FLOW_MESSAGES {
        write_content(
            &mut bytes,
            1,
            &publish,
            &BasicProperties::default(),
            &[7u8; 1024],
            4096,
        );
    }
    let mut w = p.writer();
    let writer = std::thread::spawn(move || w.write_all(&bytes).expect("publish"));
    let Method::ConnectionBlocked(b) = p.expect(0, |m| matches!(m, Method::ConnectionBlocked(_)))
    else {
        unreachable!()
    };
    assert_eq!(b.reason.as_bytes(), b"low on memory");
    let held = assert_depth_steady(broker.addr, "flow091", FLOW_MESSAGES as u32);
    assert!(
        held >= 200,
        "the alarm rose above 256 KiB, not before ({held})"
    );
    // A consumer on its own connection drains; the alarm clears; the publisher resumes.
    drain(broker.addr, "flow091", FLOW_MESSAGES);
    p.expect(0, |m| matches!(m, Method::ConnectionUnblocked(_)));
    writer.join().unwrap();
    let (_, log) = broker.terminate();
    assert!(log.contains("memory alarm"), "{log}");
}

#[test]
fn memory_alarm_stops_reading_0_10_publishers_until_consumers_drain() {
    use ferry_amqp010::write_transfer;
    use std::io::Write;
    let broker = Ferryd::start_with(&FLOW_ARGS);
    let mut p = Raw::open(broker.addr);
    p.attach(1, "publisher");
    let id = p.declare_queue(1, "flow010");
    p.expect_control(1, |c| {
        matches!(c, ferry_amqp010::Control::SessionCompleted(sc)
            if sc.commands.as_ref().is_some_and(|s| s.contains(id)))
    });
    let h = header("flow010");
    let mut bytes = BytesMut::new();
    for _ in 0..FLOW_MESSAGES {
        write_transfer(
            &mut bytes,
            1,
            &to_default_exchange(),
            false,
            &h,
            &[7u8; 1024],
            4096,
        )
        .unwrap();
    }
    let mut w = p.stream.try_clone().unwrap();
    let writer = std::thread::spawn(move || w.write_all(&bytes).expect("publish"));
    // Wait for the alarm to hold the publisher, then check it stays held.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let mut last = 0;
    loop {
        std::thread::sleep(Duration::from_millis(200));
        let depth = queue_depth(broker.addr, "flow010");
        if depth == last && depth > 0 {
            break;
        }
        last = depth;
        assert!(std::time::Instant::now() < deadline, "never held");
    }
    let held = assert_depth_steady(broker.addr, "flow010", FLOW_MESSAGES as u32);
    assert!(held >= 200, "held at {held}");
    drain(broker.addr, "flow010", FLOW_MESSAGES);
    writer.join().unwrap();
}

/// What a passive declare of `queue` on a fresh 0-9-1 connection says: 200 for declare-ok, or
/// the channel.close code (404 missing, 405 exclusive to another connection).
fn passive_declare(addr: std::net::SocketAddr, queue: &str) -> u16 {
    use common::raw091::{short, Raw091};
    use ferry_amqp091::Method;
    let mut raw = Raw091::open(addr);
    raw.method(
        1,
        ferry_amqp091::QueueDeclare {
            queue: short(queue),
            passive: true,
            ..Default::default()
        }
        .into(),
    );
    match raw.expect(1, |m| {
        matches!(m, Method::QueueDeclareOk(_) | Method::ChannelClose(_))
    }) {
        Method::ChannelClose(c) => c.reply_code,
        _ => 200,
    }
}

#[test]
fn a_publisher_paused_by_the_alarm_that_disconnects_is_noticed() {
    use common::raw091::{short, Raw091};
    use ferry_amqp091::{write_content, BasicProperties, BasicPublish, Method};
    use std::io::Write;
    let broker = Ferryd::start_with(&FLOW_ARGS);
    let mut p = Raw091::open(broker.addr);
    // An exclusive queue lives exactly as long as its connection.
    p.call(
        ferry_amqp091::QueueDeclare {
            queue: short("paused-excl"),
            exclusive: true,
            ..Default::default()
        },
        |m| matches!(m, Method::QueueDeclareOk(_)),
    );
    p.declare_queue("paused-sink", ferry_amqp091::FieldTable::new());
    let mut bytes = BytesMut::new();
    let publish = Method::BasicPublish(BasicPublish {
        routing_key: short("paused-sink"),
        ..Default::default()
    });
    // Enough to raise the alarm, then nothing more: a client that honours connection.blocked.
    for _ in 0..400 {
        write_content(
            &mut bytes,
            1,
            &publish,
            &BasicProperties::default(),
            &[1u8; 1024],
            4096,
        );
    }
    p.writer().write_all(&bytes).unwrap();
    p.expect(0, |m| matches!(m, Method::ConnectionBlocked(_)));
    assert_eq!(
        passive_declare(broker.addr, "paused-excl"),
        405,
        "held by the publisher"
    );
    // The publisher goes away while paused: ferryd notices without waiting for the alarm.
    drop(p);
    let gone = (0..50).any(|_| {
        std::thread::sleep(Duration::from_millis(100));
        passive_declare(broker.addr, "paused-excl") == 404
    });
    assert!(gone, "the paused connection was not noticed closing");
}

#[test]
fn a_transfer_held_while_thousands_of_commands_pass_is_still_settled_by_its_id() {
    use ferry_amqp010::{CreditUnit, MessageFlow, MessageRelease, MessageSubscribe, QueueQuery};
    // The session's books keep the held transfer aside and drop the finished commands after
    // it (unit-tested in outgoing.rs); here a real session does that, then still finds it.
    let broker = Ferryd::start();
    let mut raw = Raw::open(broker.addr);
    raw.attach(1, "books");
    raw.declare_queue(1, "books");
    raw.transfer(1, to_default_exchange(), &header("books"), b"held");
    raw.command(
        1,
        MessageSubscribe {
            queue: Some(Str::from("books")),
            destination: Some(Str::from("d")),
            accept_mode: Some(ferry_amqp010::AcceptMode::Explicit),
            ..Default::default()
        }
        .into(),
    );
    for (unit, value) in [(CreditUnit::Message, 1), (CreditUnit::Byte, u32::MAX)] {
        raw.command(
            1,
            MessageFlow {
                destination: Some(Str::from("d")),
                unit: Some(unit),
                value: Some(value),
            }
            .into(),
        );
    }
    raw.expect_command(1, |c| matches!(c, Command::MessageTransfer(_)));
    // The transfer was the broker's first command on this session: id 0. It stays
    // uncompleted and unsettled while 10,000 results go out after it.
    const QUERIES: usize = 10_000;
    for _ in 0..QUERIES {
        raw.command(
            1,
            QueueQuery {
                queue: Some(Str::from("books")),
            }
            .into(),
        );
    }
    let mut results = 0;
    while results < QUERIES {
        raw.expect_command(1, |c| matches!(c, Command::ExecutionResult(_)));
        results += 1;
    }
    let mut held = ferry_amqp010::SequenceSet::new();
    held.add(0);
    raw.command(
        1,
        MessageRelease {
            transfers: Some(held),
            set_redelivered: true,
        }
        .into(),
    );
    raw.command(
        1,
        QueueQuery {
            queue: Some(Str::from("books")),
        }
        .into(),
    );
    let Command::ExecutionResult(r) =
        raw.expect_command(1, |c| matches!(c, Command::ExecutionResult(_)))
    else {
        unreachable!()
    };
    let q: ferry_amqp010::QueueQueryResult = r.value.unwrap().decode_as().unwrap();
    assert_eq!(
        q.message_count,
        Some(1),
        "the released message is back on its queue"
    );
}
