//! The durable store through ferryd: topology and persistent messages across a clean restart
//! and a SIGKILL, honest confirms for both protocols, and the data directory lock.

mod common;

use std::time::Duration;

use common::raw091::{short, Raw091};
use common::{DataDir, Ferryd};
use ferry_amqp091::{
    BasicProperties, BasicReject, ConfirmSelect, ExchangeBind, ExchangeDeclare, FieldTable,
    FieldValue, Method, QueueBind, QueueDeclare, ShortStr,
};
use ferry_client::{
    AcceptMode, ConnectOptions, Connection, Delivery, ExchangeDeclareOptions, FlowMode,
    OutgoingMessage, QueueDeclareOptions, Session, SubscribeOptions, Subscription,
};

const WAIT: Duration = Duration::from_secs(10);

async fn session(broker: &Ferryd) -> (Connection, Session) {
    let conn = Connection::connect(broker.addr, ConnectOptions::default())
        .await
        .expect("connect");
    let s = conn.session().await.expect("session");
    (conn, s)
}

fn persistent(key: &str, body: &str) -> OutgoingMessage {
    OutgoingMessage::builder()
        .routing_key(key)
        .persistent(true)
        .body(body.to_string())
        .build()
        .unwrap()
}

fn durable_queue() -> QueueDeclareOptions {
    QueueDeclareOptions {
        durable: true,
        ..QueueDeclareOptions::default()
    }
}

async fn subscribe(s: &Session, queue: &str) -> Subscription {
    let opts = SubscribeOptions {
        accept_mode: AcceptMode::Explicit,
        flow_mode: FlowMode::Credit,
        message_credit: 1000,
        ..SubscribeOptions::default()
    };
    s.subscribe(queue, queue, opts).await.expect("subscribe")
}

async fn take(sub: &mut Subscription, n: usize) -> Vec<Delivery> {
    let mut got = Vec::new();
    for _ in 0..n {
        let d = tokio::time::timeout(WAIT, sub.next())
            .await
            .expect("a delivery in time")
            .expect("subscription open");
        got.push(d);
    }
    got
}

fn text(d: &Delivery) -> String {
    String::from_utf8_lossy(&d.body).into_owned()
}

#[tokio::test]
async fn durable_topology_and_messages_survive_restart_and_sigkill() {
    let dir = DataDir::new("restart");
    let broker = Ferryd::start_with(&[&dir.arg()]);
    {
        let (_c, s) = session(&broker).await;
        let xo = ExchangeDeclareOptions {
            durable: true,
            ..Default::default()
        };
        s.exchange_declare("orders", "topic", xo).await.unwrap();
        s.queue_declare("eu", durable_queue()).await.unwrap();
        s.queue_declare("scratch", QueueDeclareOptions::default())
            .await
            .unwrap();
        s.exchange_bind("eu", "orders", "eu.#", None).await.unwrap();
        for i in 0..5 {
            s.transfer_sync("orders", &persistent(&format!("eu.{i}"), &format!("p{i}")))
                .await
                .expect("completed after its sync");
        }
        let transient = OutgoingMessage::builder()
            .routing_key("eu.t")
            .body("transient")
            .build()
            .unwrap();
        s.transfer_sync("orders", &transient).await.unwrap();
        // Settle the first two for good (the accept completes once its dequeue is durable).
        let mut sub = subscribe(&s, "eu").await;
        let got = take(&mut sub, 2).await;
        let mut ids = got[0].id_set();
        ids.add(got[1].id);
        let id = s
            .send(
                ferry_client::Command::MessageAccept(ferry_amqp010::MessageAccept {
                    transfers: Some(ids),
                }),
                true,
            )
            .unwrap();
        s.wait_for(id).await.unwrap();
    }
    let (status, _) = broker.terminate();
    assert!(status.success());

    let broker = Ferryd::start_with(&[&dir.arg()]);
    {
        let (_c, s) = session(&broker).await;
        let q = s.queue_query("eu").await.unwrap();
        assert!(q.durable);
        assert_eq!(
            q.message_count,
            Some(3),
            "the transient message did not survive"
        );
        assert!(s.queue_query("scratch").await.unwrap().queue.is_none());
        let x = s.exchange_query("orders").await.unwrap();
        assert!(x.durable && !x.not_found);
        let bound = s
            .exchange_bound("orders", Some("eu"), Some("eu.#"), None)
            .await
            .unwrap();
        assert!(!bound.queue_not_matched && !bound.key_not_matched);
        // Routing works through the recovered binding; this one then dies with a SIGKILL.
        s.transfer_sync("orders", &persistent("eu.x", "after"))
            .await
            .unwrap();
    }
    broker.kill();

    let broker = Ferryd::start_with(&[&dir.arg()]);
    let (_c, s) = session(&broker).await;
    let mut sub = subscribe(&s, "eu").await;
    let got = take(&mut sub, 4).await;
    let bodies: Vec<String> = got.iter().map(text).collect();
    assert_eq!(bodies, ["p2", "p3", "p4", "after"]);
    assert!(
        got.iter().all(|d| d.redelivered),
        "recovered messages are redelivered"
    );
}

#[tokio::test]
async fn publisher_confirms_come_after_the_sync_and_the_message_survives_a_kill() {
    let dir = DataDir::new("confirms");
    let broker = Ferryd::start_with(&[&dir.arg()]);
    let addr = broker.addr;
    let confirmed = tokio::task::spawn_blocking(move || {
        let mut raw = Raw091::open(addr);
        raw.method(
            1,
            QueueDeclare {
                queue: ShortStr::from_static("jobs"),
                durable: true,
                ..Default::default()
            }
            .into(),
        );
        raw.expect(1, |m| matches!(m, Method::QueueDeclareOk(_)));
        raw.method(1, ConfirmSelect { nowait: false }.into());
        raw.expect(1, |m| matches!(m, Method::ConfirmSelectOk(_)));
        let props = BasicProperties {
            delivery_mode: Some(2),
            ..Default::default()
        };
        for i in 0..20 {
            raw.publish("", "jobs", &props, format!("job{i}").as_bytes());
        }
        let mut acked = 0;
        while acked < 20 {
            match raw.expect(1, |m| {
                matches!(m, Method::BasicAck(_) | Method::BasicNack(_))
            }) {
                Method::BasicAck(a) => acked = a.delivery_tag,
                other => panic!("unexpected {other:?}"),
            }
        }
        acked
    })
    .await
    .unwrap();
    assert_eq!(confirmed, 20);
    broker.kill();
    let broker = Ferryd::start_with(&[&dir.arg()]);
    let (_c, s) = session(&broker).await;
    assert_eq!(s.queue_query("jobs").await.unwrap().message_count, Some(20));
}

#[test]
fn two_brokers_cannot_share_a_data_directory() {
    let dir = DataDir::new("lock");
    let _first = Ferryd::start_with(&[&dir.arg()]);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ferryd"))
        .args(["--port", "0", "--interface", "127.0.0.1", &dir.arg()])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("in use by another broker"),
        "stderr: {stderr}"
    );
}

fn durable_exchange(raw: &mut Raw091, name: &str, kind: &str) {
    raw.call(
        ExchangeDeclare {
            exchange: short(name),
            kind: short(kind),
            durable: true,
            ..Default::default()
        },
        |m| matches!(m, Method::ExchangeDeclareOk(_)),
    );
}

fn durable_queue091(raw: &mut Raw091, name: &str, arguments: FieldTable) {
    raw.call(
        QueueDeclare {
            queue: short(name),
            durable: true,
            arguments,
            ..Default::default()
        },
        |m| matches!(m, Method::QueueDeclareOk(_)),
    );
}

/// Everything here is acknowledged over 0-9-1 and the broker killed right after the last
/// reply: exchange-to-exchange bindings and a dead letter's x-death history are on disk.
#[test]
fn amqp091_e2e_bindings_and_dead_letter_history_survive_a_kill() {
    let dir = DataDir::new("e2e-deaths");
    let broker = Ferryd::start_with(&[&dir.arg()]);
    let mut raw = Raw091::open(broker.addr);
    durable_exchange(&mut raw, "dlx", "fanout");
    durable_exchange(&mut raw, "entry", "direct");
    durable_queue091(&mut raw, "dlq", FieldTable::new());
    let mut args = FieldTable::new();
    args.push(
        short("x-dead-letter-exchange"),
        FieldValue::LongStr(
            ferry_amqp091::LongStr::new(bytes::Bytes::from_static(b"dlx")).unwrap(),
        ),
    );
    durable_queue091(&mut raw, "work", args);
    raw.call(
        QueueBind {
            queue: short("dlq"),
            exchange: short("dlx"),
            ..Default::default()
        },
        |m| matches!(m, Method::QueueBindOk(_)),
    );
    raw.call(
        ExchangeBind {
            destination: short("dlx"),
            source: short("entry"),
            routing_key: short("k"),
            ..Default::default()
        },
        |m| matches!(m, Method::ExchangeBindOk(_)),
    );
    let props = BasicProperties {
        delivery_mode: Some(2),
        ..Default::default()
    };
    raw.publish("", "work", &props, b"poison");
    let got = raw.get("work", false).expect("the message");
    let Method::BasicGetOk(ok) = got.method else {
        panic!("{:?}", got.method)
    };
    raw.method(
        1,
        BasicReject {
            delivery_tag: ok.delivery_tag,
            requeue: false,
        }
        .into(),
    );
    // Its declare-ok waits for the sync, which covers the dead letter journaled before it.
    durable_queue091(&mut raw, "barrier", FieldTable::new());
    broker.kill();

    let broker = Ferryd::start_with(&[&dir.arg()]);
    let mut raw = Raw091::open(broker.addr);
    let dead = raw.get("dlq", true).expect("the dead letter survived");
    assert_eq!(&dead.body[..], b"poison");
    let headers = dead.header.properties.headers().expect("x-death headers");
    assert!(
        matches!(headers.get("x-death"), Some(FieldValue::Array(a)) if a.len() == 1),
        "{headers:?}"
    );
    assert!(
        matches!(headers.get("x-first-death-queue"), Some(FieldValue::LongStr(q)) if q.as_bytes() == b"work"),
        "{headers:?}"
    );
    raw.publish("entry", "k", &props, b"through");
    let routed = raw.get("dlq", true).expect("routed through entry -> dlx");
    assert_eq!(&routed.body[..], b"through");
}

/// Two bindings whose arguments differ only inside an array are two bindings, journaled as
/// such, and after a kill both are back with their arrays: they route by them.
#[test]
fn amqp091_bindings_told_apart_by_arrays_survive_a_kill() {
    fn tags(items: &[&'static str]) -> FieldValue {
        let text = |t: &'static str| {
            let text = ferry_amqp091::LongStr::new(bytes::Bytes::from_static(t.as_bytes()));
            FieldValue::LongStr(text.expect("short text"))
        };
        FieldValue::Array(items.iter().map(|t| text(t)).collect())
    }
    let dir = DataDir::new("array-arguments");
    let broker = Ferryd::start_with(&[&dir.arg()]);
    let mut raw = Raw091::open(broker.addr);
    durable_exchange(&mut raw, "hx", "headers");
    durable_queue091(&mut raw, "hq", FieldTable::new());
    for items in [&["a", "b"][..], &["c"]] {
        let mut arguments = FieldTable::new();
        arguments.push(short("tags"), tags(items));
        raw.call(
            QueueBind {
                queue: short("hq"),
                exchange: short("hx"),
                arguments,
                ..Default::default()
            },
            |m| matches!(m, Method::QueueBindOk(_)),
        );
    }
    // Its declare-ok waits for the sync, which covers the binds journaled before it.
    durable_queue091(&mut raw, "barrier", FieldTable::new());
    broker.kill();

    let broker = Ferryd::start_with(&[&dir.arg()]);
    let mut raw = Raw091::open(broker.addr);
    let sent: [&[&str]; 4] = [&["a", "b"], &["b", "a"], &["c"], &["d"]];
    for (i, items) in sent.into_iter().enumerate() {
        let mut headers = FieldTable::new();
        headers.push(short("tags"), tags(items));
        let props = BasicProperties {
            headers: Some(headers),
            ..Default::default()
        };
        raw.publish("hx", "", &props, i.to_string().as_bytes());
    }
    let mut routed = Vec::new();
    while let Some(m) = raw.get("hq", true) {
        routed.push(String::from_utf8_lossy(&m.body).into_owned());
    }
    assert_eq!(routed, ["0", "2"]);
}

/// Replies held for the journal (a durable queue's declare-ok) keep the order of the
/// requests: the qos-ok, consume-ok and get-ok pipelined behind it come after it, and the
/// new consumer's first delivery after its consume-ok.
#[test]
fn amqp091_replies_behind_a_held_declare_ok_keep_request_order() {
    use ferry_amqp091::{write_method, Assembled, BasicConsume, BasicGet, BasicQos};
    use std::io::Write;
    let dir = DataDir::new("reply-order");
    let broker = Ferryd::start_with(&[&dir.arg()]);
    let mut raw = Raw091::open(broker.addr);
    raw.declare_queue("src", FieldTable::new());
    for body in [b"one", b"two"] {
        raw.publish("", "src", &BasicProperties::default(), body);
    }
    // One write, so one read batch: the declare-ok is still held when the rest is handled.
    let mut batch = bytes::BytesMut::new();
    let requests: [Method; 4] = [
        QueueDeclare {
            queue: short("durable-q"),
            durable: true,
            ..Default::default()
        }
        .into(),
        BasicGet {
            queue: short("src"),
            no_ack: true,
            ..Default::default()
        }
        .into(),
        BasicQos {
            prefetch_count: 10,
            ..Default::default()
        }
        .into(),
        BasicConsume {
            queue: short("src"),
            consumer_tag: short("c"),
            no_ack: true,
            ..Default::default()
        }
        .into(),
    ];
    for m in &requests {
        write_method(&mut batch, 1, m);
    }
    raw.writer().write_all(&batch).expect("write");
    let mut seen = Vec::new();
    while seen.len() < 5 {
        match raw.next() {
            Some((1, Assembled::Method(m))) => seen.push(m.name().to_string()),
            Some((1, Assembled::Message(m))) => seen.push(m.method.name().to_string()),
            Some(_) => {}
            None => panic!("connection ended; seen {seen:?}"),
        }
    }
    assert_eq!(
        seen,
        [
            "queue.declare-ok",
            "basic.get-ok",
            "basic.qos-ok",
            "basic.consume-ok",
            "basic.deliver"
        ]
    );
}
