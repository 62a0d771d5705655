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

/// Resident memory of a process, from /proc (Linux).
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

#[test]
fn a_consumer_that_never_reads_stalls_nobody_and_holds_bounded_memory() {
    use ferry_amqp010::{CreditUnit, MessageFlow, MessageSubscribe};
    let broker = Ferryd::start();
    let mut stuck = Raw::open(broker.addr);
    stuck.attach(1, "never-reads");
    stuck.command(
        1,
        QueueDeclare {
            queue: Some(Str::from("firehose")),
            ..Default::default()
        }
        .into(),
    );
    stuck.command(
        1,
        MessageSubscribe {
            queue: Some(Str::from("firehose")),
            destination: Some(Str::from("d")),
            accept_mode: Some(ferry_amqp010::AcceptMode::None),
            ..Default::default()
        }
        .into(),
    );
    for unit in [CreditUnit::Message, CreditUnit::Byte] {
        stuck.command(
            1,
            MessageFlow {
                destination: Some(Str::from("d")),
                unit: Some(unit),
                value: Some(u32::MAX),
            }
            .into(),
        );
    }
    // From here on `stuck` never reads: its socket buffers fill, then ferryd's.
    let before = rss_kib(broker.pid());
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
    let grown_mib = rss_kib(broker.pid()).saturating_sub(before) / 1024;
    assert!(
        grown_mib < 64 + 32,
        "ferryd grew by {grown_mib} MiB holding {queued} queued 16 KiB messages"
    );
    drop(stuck);
}
