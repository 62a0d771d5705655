//! Queue arguments end to end against a real ferryd: priority queues (`x-max-priority`,
//! `qpid.priorities`), `x-expires`, qpidd's ring policy, exchange-to-exchange bindings and
//! `x-death` headers.

mod common;

use std::time::{Duration, Instant};

use common::raw091::{short, Raw091};
use common::Ferryd;
use ferry_amqp091::{
    BasicProperties, ExchangeBind, ExchangeDeclare, ExchangeUnbind, FieldTable, FieldValue, Method,
    QueueBind, QueueDeclare,
};
use ferry_client::{
    AcceptMode, ClientError, ConnectOptions, Connection, ErrorCode, Map, OutgoingMessage,
    QueueDeclareOptions, RejectCode, Session, SubscribeOptions, Subscription, Value,
};

const QUIET: Duration = Duration::from_millis(300);

fn table(entries: &[(&str, FieldValue)]) -> FieldTable {
    entries.iter().map(|(k, v)| (short(k), v.clone())).collect()
}

fn body(m: &ferry_amqp091::Message) -> String {
    String::from_utf8_lossy(&m.body).into_owned()
}

fn drain091(raw: &mut Raw091, queue: &str) -> Vec<String> {
    std::iter::from_fn(|| raw.get(queue, true))
        .map(|m| body(&m))
        .collect()
}

fn with_priority(p: u8) -> BasicProperties {
    BasicProperties {
        priority: Some(p),
        ..Default::default()
    }
}

#[test]
fn amqp091_priority_queue_delivers_highest_first() {
    let broker = Ferryd::start();
    let mut raw = Raw091::open(broker.addr);
    raw.declare_queue("prio", table(&[("x-max-priority", FieldValue::I32(5))]));
    for (text, p) in [
        ("low-1", 0),
        ("high-1", 5),
        ("mid", 3),
        ("top", 200),
        ("low-2", 0),
    ] {
        raw.publish("", "prio", &with_priority(p), text.as_bytes());
    }
    raw.publish("", "prio", &BasicProperties::default(), b"none");
    assert_eq!(
        drain091(&mut raw, "prio"),
        ["high-1", "top", "mid", "low-1", "low-2", "none"]
    );
    // An ordinary queue keeps arrival order whatever the priorities.
    raw.declare_queue("fifo", FieldTable::new());
    for (text, p) in [("a", 0), ("b", 9)] {
        raw.publish("", "fifo", &with_priority(p), text.as_bytes());
    }
    assert_eq!(drain091(&mut raw, "fifo"), ["a", "b"]);
}

#[test]
fn amqp091_invalid_queue_arguments_close_the_channel_with_406() {
    let broker = Ferryd::start();
    for (key, value) in [
        ("x-expires", FieldValue::I32(0)),
        ("x-expires", FieldValue::I32(-10)),
        ("x-max-priority", FieldValue::I32(256)),
    ] {
        let mut raw = Raw091::open(broker.addr);
        raw.method(
            1,
            QueueDeclare {
                queue: short("bad-args"),
                arguments: table(&[(key, value.clone())]),
                ..Default::default()
            }
            .into(),
        );
        assert_eq!(raw.channel_closed(), 406, "{key} = {value:?}");
    }
}

fn exists091(raw: &mut Raw091, queue: &str) -> bool {
    raw.method(
        1,
        QueueDeclare {
            queue: short(queue),
            passive: true,
            ..Default::default()
        }
        .into(),
    );
    match raw.expect(1, |m| {
        matches!(m, Method::QueueDeclareOk(_) | Method::ChannelClose(_))
    }) {
        Method::QueueDeclareOk(_) => true,
        Method::ChannelClose(c) => {
            assert_eq!(c.reply_code, 404);
            raw.method(1, ferry_amqp091::ChannelCloseOk {}.into());
            raw.method(1, ferry_amqp091::ChannelOpen::default().into());
            raw.expect(1, |m| matches!(m, Method::ChannelOpenOk(_)));
            false
        }
        _ => unreachable!(),
    }
}

#[test]
fn amqp091_x_expires_deletes_an_unused_queue() {
    let broker = Ferryd::start();
    let mut raw = Raw091::open(broker.addr);
    let start = Instant::now();
    raw.declare_queue("lease", table(&[("x-expires", FieldValue::I32(400))]));
    raw.publish("", "lease", &BasicProperties::default(), b"m");
    // The deadline is 400 ms after the last use; poll with basic.get-free checks only
    // after it, since a passive declare renews the lease.
    std::thread::sleep(Duration::from_millis(700));
    assert!(
        !exists091(&mut raw, "lease"),
        "still there after {:?}",
        start.elapsed()
    );
}

fn declare_exchange(raw: &mut Raw091, name: &str, kind: &str) {
    raw.call(
        ExchangeDeclare {
            exchange: short(name),
            kind: short(kind),
            ..Default::default()
        },
        |m| matches!(m, Method::ExchangeDeclareOk(_)),
    );
}

fn bind_queue(raw: &mut Raw091, queue: &str, exchange: &str, key: &str) {
    raw.call(
        QueueBind {
            queue: short(queue),
            exchange: short(exchange),
            routing_key: short(key),
            ..Default::default()
        },
        |m| matches!(m, Method::QueueBindOk(_)),
    );
}

fn bind_exchange(raw: &mut Raw091, destination: &str, source: &str, key: &str) {
    raw.call(
        ExchangeBind {
            destination: short(destination),
            source: short(source),
            routing_key: short(key),
            ..Default::default()
        },
        |m| matches!(m, Method::ExchangeBindOk(_)),
    );
}

#[test]
fn amqp091_exchange_to_exchange_bindings() {
    let broker = Ferryd::start();
    let mut raw = Raw091::open(broker.addr);
    declare_exchange(&mut raw, "e2e-src", "topic");
    declare_exchange(&mut raw, "e2e-dst", "fanout");
    declare_exchange(&mut raw, "e2e-back", "fanout");
    raw.declare_queue("e2e-q", FieldTable::new());
    bind_exchange(&mut raw, "e2e-dst", "e2e-src", "orders.*");
    // A cycle back to the source, and a second path to the same queue.
    bind_exchange(&mut raw, "e2e-back", "e2e-dst", "");
    bind_exchange(&mut raw, "e2e-src", "e2e-back", "");
    bind_queue(&mut raw, "e2e-q", "e2e-dst", "");
    bind_queue(&mut raw, "e2e-q", "e2e-back", "");
    let props = BasicProperties::default();
    raw.publish("e2e-src", "orders.new", &props, b"routed");
    raw.publish("e2e-src", "invoices.new", &props, b"unmatched");
    assert_eq!(drain091(&mut raw, "e2e-q"), ["routed"]);
    raw.call(
        ExchangeUnbind {
            destination: short("e2e-dst"),
            source: short("e2e-src"),
            routing_key: short("orders.*"),
            ..Default::default()
        },
        |m| matches!(m, Method::ExchangeUnbindOk(_)),
    );
    raw.publish("e2e-src", "orders.new", &props, b"after-unbind");
    assert!(drain091(&mut raw, "e2e-q").is_empty());
    // Binding a missing exchange is 404, the default exchange 403.
    raw.method(
        1,
        ExchangeBind {
            destination: short("e2e-dst"),
            source: short("no-such-exchange"),
            ..Default::default()
        }
        .into(),
    );
    assert_eq!(raw.channel_closed(), 404);
    let mut raw = Raw091::open(broker.addr);
    raw.method(
        1,
        ExchangeBind {
            destination: short("e2e-dst"),
            source: short(""),
            ..Default::default()
        }
        .into(),
    );
    assert_eq!(raw.channel_closed(), 403);
}

async fn session(broker: &Ferryd) -> (Connection, Session) {
    let conn = Connection::connect(broker.addr, ConnectOptions::default())
        .await
        .expect("connect");
    let s = conn.session().await.expect("session");
    (conn, s)
}

fn args(entries: &[(&str, Value)]) -> Map {
    let mut m = Map::new();
    for (k, v) in entries {
        m.insert(*k, v.clone());
    }
    m
}

async fn drain(sub: &mut Subscription) -> Vec<String> {
    let mut got = Vec::new();
    while let Ok(Some(d)) = tokio::time::timeout(QUIET, sub.next()).await {
        got.push(String::from_utf8_lossy(&d.body).into_owned());
    }
    got
}

#[tokio::test]
async fn amqp010_qpid_priorities_deliver_higher_levels_first() {
    let broker = Ferryd::start();
    let (_c, s) = session(&broker).await;
    s.queue_declare(
        "qprio",
        QueueDeclareOptions {
            arguments: Some(args(&[("qpid.priorities", Value::Uint8(2))])),
            ..QueueDeclareOptions::default()
        },
    )
    .await
    .unwrap();
    // Two levels: 0-4 (the default 4 included) and 5-9.
    for (text, p) in [
        ("low", Some(0)),
        ("default", None),
        ("high", Some(6)),
        ("very-high", Some(9)),
        ("medium", Some(4)),
    ] {
        let mut b = OutgoingMessage::builder()
            .routing_key("qprio")
            .body(text.to_string());
        if let Some(p) = p {
            b = b.priority(p);
        }
        s.transfer("", &b.build().unwrap()).await.unwrap();
    }
    s.sync().await.unwrap();
    let mut sub = s
        .subscribe("qprio", "d", SubscribeOptions::default())
        .await
        .unwrap();
    assert_eq!(
        drain(&mut sub).await,
        ["high", "very-high", "low", "default", "medium"]
    );
}

#[tokio::test]
async fn amqp010_ring_queues_drop_the_oldest() {
    let broker = Ferryd::start();
    let (_c, s) = session(&broker).await;
    s.queue_declare(
        "ring",
        QueueDeclareOptions {
            arguments: Some(args(&[
                ("qpid.max_count", Value::Uint32(3)),
                ("qpid.policy_type", Value::Str16("ring".into())),
            ])),
            ..QueueDeclareOptions::default()
        },
    )
    .await
    .unwrap();
    for i in 1..=5 {
        let m = OutgoingMessage::builder()
            .routing_key("ring")
            .body(format!("m{i}"))
            .build()
            .unwrap();
        s.transfer_sync("", &m)
            .await
            .expect("a ring queue never refuses");
    }
    let mut sub = s
        .subscribe("ring", "d", SubscribeOptions::default())
        .await
        .unwrap();
    assert_eq!(drain(&mut sub).await, ["m3", "m4", "m5"]);
}

#[tokio::test]
async fn amqp010_bad_priority_argument_is_invalid_argument() {
    let broker = Ferryd::start();
    let (_c, s) = session(&broker).await;
    let e = s
        .queue_declare(
            "bad",
            QueueDeclareOptions {
                arguments: Some(args(&[("qpid.priorities", Value::Str16("many".into()))])),
                ..QueueDeclareOptions::default()
            },
        )
        .await
        .unwrap_err();
    match e {
        ClientError::Exception { code, .. } => assert_eq!(code, ErrorCode::InvalidArgument),
        other => panic!("expected an exception, got {other:?}"),
    }
}

#[tokio::test]
async fn amqp010_dead_letters_carry_death_headers() {
    let broker = Ferryd::start();
    let (_c, s) = session(&broker).await;
    s.queue_declare("dlq10", QueueDeclareOptions::default())
        .await
        .unwrap();
    s.queue_declare(
        "work10",
        QueueDeclareOptions {
            arguments: Some(args(&[
                ("x-dead-letter-exchange", Value::Str16("".into())),
                ("x-dead-letter-routing-key", Value::Str16("dlq10".into())),
            ])),
            ..QueueDeclareOptions::default()
        },
    )
    .await
    .unwrap();
    let m = OutgoingMessage::builder()
        .routing_key("work10")
        .body("poison".to_string())
        .build()
        .unwrap();
    s.transfer_sync("", &m).await.unwrap();
    let mut work = s
        .subscribe(
            "work10",
            "w",
            SubscribeOptions {
                accept_mode: AcceptMode::Explicit,
                ..SubscribeOptions::default()
            },
        )
        .await
        .unwrap();
    let d = tokio::time::timeout(Duration::from_secs(5), work.next())
        .await
        .unwrap()
        .unwrap();
    s.reject(&d.id_set(), RejectCode::Unspecified, "bad")
        .await
        .unwrap();
    let mut dead = s
        .subscribe("dlq10", "d", SubscribeOptions::default())
        .await
        .unwrap();
    let d = tokio::time::timeout(Duration::from_secs(5), dead.next())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(&d.body[..], b"poison");
    let headers = d
        .header
        .properties
        .and_then(|p| p.application_headers)
        .expect("application headers");
    let text = |k: &str| match headers.get(k) {
        Some(Value::Str16(s)) => s.to_string(),
        other => panic!("{k}: {other:?}"),
    };
    assert_eq!(text("x-first-death-queue"), "work10");
    assert_eq!(text("x-first-death-reason"), "rejected");
    assert_eq!(text("x-last-death-exchange"), "");
    assert!(matches!(headers.get("x-death"), Some(Value::List(l)) if l.0.len() == 1));
}

#[tokio::test]
async fn amqp010_last_value_queue_keeps_the_latest_per_key() {
    let broker = Ferryd::start();
    let (_c, s) = session(&broker).await;
    s.queue_declare(
        "prices",
        QueueDeclareOptions {
            arguments: Some(args(&[(
                "qpid.last_value_queue_key",
                Value::Str16("ticker".into()),
            )])),
            ..QueueDeclareOptions::default()
        },
    )
    .await
    .unwrap();
    for (ticker, price) in [("IBM", "100"), ("HP", "20"), ("IBM", "101"), ("IBM", "102")] {
        let m = OutgoingMessage::builder()
            .routing_key("prices")
            .header("ticker", Value::Str16(ticker.into()))
            .body(format!("{ticker}={price}"))
            .build()
            .unwrap();
        s.transfer("", &m).await.unwrap();
    }
    s.sync().await.unwrap();
    let mut sub = s
        .subscribe("prices", "d", SubscribeOptions::default())
        .await
        .unwrap();
    assert_eq!(drain(&mut sub).await, ["HP=20", "IBM=102"]);
}
