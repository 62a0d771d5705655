//! Routing and delivery semantics, end to end: a real ferryd driven by ferry-client.

mod common;

use std::time::Duration;

use bytes::Bytes;
use common::Ferryd;
use ferry_client::{
    AcceptMode, AcquireMode, ClientError, ConnectOptions, Connection, CreditUnit, Delivery,
    ErrorCode, ExchangeDeclareOptions, FlowMode, Map, OutgoingMessage, QueueDeclareOptions,
    RejectCode, SequenceSet, Session, Str, SubscribeOptions, Subscription, Value,
};

const WAIT: Duration = Duration::from_secs(5);
/// How long we watch for a message that must not arrive.
const QUIET: Duration = Duration::from_millis(300);

async fn connect(broker: &Ferryd) -> Connection {
    Connection::connect(broker.addr, ConnectOptions::default())
        .await
        .expect("connect")
}

async fn declare(s: &Session, name: &str) {
    s.queue_declare(name, QueueDeclareOptions::default())
        .await
        .expect("queue.declare");
}

async fn send(s: &Session, exchange: &str, key: &str, body: &str) {
    let m = OutgoingMessage::builder()
        .routing_key(key)
        .body(body.to_string())
        .build()
        .unwrap();
    s.transfer(exchange, &m).await.expect("transfer");
}

fn explicit(credit: u32) -> SubscribeOptions {
    SubscribeOptions {
        accept_mode: AcceptMode::Explicit,
        flow_mode: FlowMode::Credit,
        message_credit: credit,
        ..SubscribeOptions::default()
    }
}

async fn next(sub: &mut Subscription) -> Delivery {
    tokio::time::timeout(WAIT, sub.next())
        .await
        .expect("a delivery in time")
        .expect("subscription open")
}

async fn nothing_more(sub: &mut Subscription) {
    if let Ok(Some(d)) = tokio::time::timeout(QUIET, sub.next()).await {
        panic!("unexpected delivery {:?}", d.body);
    }
}

async fn drain(sub: &mut Subscription) -> Vec<String> {
    let mut got = Vec::new();
    while let Ok(Some(d)) = tokio::time::timeout(QUIET, sub.next()).await {
        got.push(String::from_utf8_lossy(&d.body).into_owned());
    }
    got
}

fn text(d: &Delivery) -> String {
    String::from_utf8_lossy(&d.body).into_owned()
}

fn code_of(e: ClientError) -> ErrorCode {
    match e {
        ClientError::Exception { code, .. } => code,
        other => panic!("expected an execution exception, got {other:?}"),
    }
}

#[tokio::test]
async fn topic_wildcards_route_by_word() {
    let broker = Ferryd::start();
    let conn = connect(&broker).await;
    let s = conn.session().await.unwrap();
    let patterns = [
        ("t-star", "stock.*"),
        ("t-hash", "stock.#"),
        ("t-mid", "*.ibm.*"),
        ("t-tail", "#.nyse"),
        ("t-all", "#"),
    ];
    for (q, p) in patterns {
        declare(&s, q).await;
        s.exchange_bind(q, "amq.topic", p, None).await.unwrap();
    }
    for key in [
        "stock",
        "stock.ibm",
        "stock.ibm.nyse",
        "bond.ibm.nyse",
        "x.y",
    ] {
        send(&s, "amq.topic", key, key).await;
    }
    s.sync().await.unwrap();
    let expect = [
        ("t-star", vec!["stock.ibm"]),
        ("t-hash", vec!["stock", "stock.ibm", "stock.ibm.nyse"]),
        ("t-mid", vec!["stock.ibm.nyse", "bond.ibm.nyse"]),
        ("t-tail", vec!["stock.ibm.nyse", "bond.ibm.nyse"]),
        (
            "t-all",
            vec![
                "stock",
                "stock.ibm",
                "stock.ibm.nyse",
                "bond.ibm.nyse",
                "x.y",
            ],
        ),
    ];
    for (q, want) in expect {
        let mut sub = s
            .subscribe(q, q, SubscribeOptions::default())
            .await
            .unwrap();
        assert_eq!(drain(&mut sub).await, want, "queue {q}");
    }
}

#[tokio::test]
async fn headers_exchange_matches_all_and_any() {
    let broker = Ferryd::start();
    let conn = connect(&broker).await;
    let s = conn.session().await.unwrap();
    declare(&s, "h-all").await;
    declare(&s, "h-any").await;
    let mut all = Map::new();
    all.insert("x-match", Value::Str16(Str::from("all")));
    all.insert("format", Value::Str16(Str::from("pdf")));
    all.insert("type", Value::Str16(Str::from("report")));
    s.exchange_bind("h-all", "amq.match", "k1", Some(all))
        .await
        .unwrap();
    let mut any = Map::new();
    any.insert("x-match", Value::Str16(Str::from("any")));
    any.insert("format", Value::Str16(Str::from("pdf")));
    any.insert("size", Value::Int32(10));
    s.exchange_bind("h-any", "amq.match", "k2", Some(any))
        .await
        .unwrap();
    let cases: [(&str, &[(&str, Value)]); 4] = [
        (
            "both",
            &[
                ("format", Value::Str16(Str::from("pdf"))),
                ("type", Value::Str16(Str::from("report"))),
            ],
        ),
        ("format-only", &[("format", Value::Str16(Str::from("pdf")))]),
        ("size-only", &[("size", Value::Int64(10))]),
        ("neither", &[("format", Value::Str16(Str::from("doc")))]),
    ];
    for (body, headers) in cases {
        let mut b = OutgoingMessage::builder().body(body.to_string());
        for (k, v) in headers {
            b = b.header(k, v.clone());
        }
        s.transfer("amq.match", &b.build().unwrap()).await.unwrap();
    }
    s.sync().await.unwrap();
    let mut sub = s
        .subscribe("h-all", "a", SubscribeOptions::default())
        .await
        .unwrap();
    assert_eq!(drain(&mut sub).await, ["both"]);
    let mut sub = s
        .subscribe("h-any", "b", SubscribeOptions::default())
        .await
        .unwrap();
    assert_eq!(drain(&mut sub).await, ["both", "format-only", "size-only"]);
}

#[tokio::test]
async fn fanout_reaches_every_bound_queue_and_direct_only_its_key() {
    let broker = Ferryd::start();
    let conn = connect(&broker).await;
    let s = conn.session().await.unwrap();
    s.exchange_declare("fan", "fanout", ExchangeDeclareOptions::default())
        .await
        .unwrap();
    for i in 0..20 {
        let q = format!("fan-{i}");
        declare(&s, &q).await;
        s.exchange_bind(&q, "fan", "", None).await.unwrap();
    }
    declare(&s, "d1").await;
    declare(&s, "d2").await;
    s.exchange_bind("d1", "amq.direct", "one", None)
        .await
        .unwrap();
    s.exchange_bind("d2", "amq.direct", "two", None)
        .await
        .unwrap();
    send(&s, "fan", "ignored", "to-all").await;
    send(&s, "amq.direct", "one", "to-one").await;
    send(&s, "amq.direct", "none", "to-nobody").await;
    send(&s, "", "d2", "via-default").await;
    s.sync().await.unwrap();
    for i in 0..20 {
        let q = format!("fan-{i}");
        let info = s.queue_query(&q).await.unwrap();
        assert_eq!(info.message_count, Some(1), "{q}");
    }
    let mut sub = s
        .subscribe("d1", "d1", SubscribeOptions::default())
        .await
        .unwrap();
    assert_eq!(drain(&mut sub).await, ["to-one"]);
    let mut sub = s
        .subscribe("d2", "d2", SubscribeOptions::default())
        .await
        .unwrap();
    assert_eq!(drain(&mut sub).await, ["via-default"]);
}

#[tokio::test]
async fn consumers_on_one_queue_take_turns() {
    let broker = Ferryd::start();
    let conn = connect(&broker).await;
    let s = conn.session().await.unwrap();
    declare(&s, "rr").await;
    let mut a = s
        .subscribe("rr", "a", SubscribeOptions::default())
        .await
        .unwrap();
    let mut b = s
        .subscribe("rr", "b", SubscribeOptions::default())
        .await
        .unwrap();
    for i in 0..10 {
        send(&s, "", "rr", &i.to_string()).await;
    }
    s.sync().await.unwrap();
    let got_a = drain(&mut a).await;
    let got_b = drain(&mut b).await;
    assert_eq!(got_a, ["0", "2", "4", "6", "8"]);
    assert_eq!(got_b, ["1", "3", "5", "7", "9"]);
}

#[tokio::test]
async fn credit_limits_deliveries_and_flow_adds_more() {
    let broker = Ferryd::start();
    let conn = connect(&broker).await;
    let s = conn.session().await.unwrap();
    declare(&s, "credit").await;
    for i in 0..5 {
        send(&s, "", "credit", &i.to_string()).await;
    }
    s.sync().await.unwrap();
    let mut sub = s.subscribe("credit", "c", explicit(0)).await.unwrap();
    nothing_more(&mut sub).await;
    s.message_flow("c", CreditUnit::Message, 2).await.unwrap();
    assert_eq!(text(&next(&mut sub).await), "0");
    assert_eq!(text(&next(&mut sub).await), "1");
    nothing_more(&mut sub).await;
    // Byte credit too small for any message holds everything back.
    s.message_stop("c").await.unwrap();
    s.message_flow("c", CreditUnit::Message, 10).await.unwrap();
    s.message_flow("c", CreditUnit::Byte, 1).await.unwrap();
    nothing_more(&mut sub).await;
    s.message_flow("c", CreditUnit::Byte, u32::MAX)
        .await
        .unwrap();
    assert_eq!(text(&next(&mut sub).await), "2");
    // flush delivers what credit allows, then credit is gone.
    s.message_flush("c").await.unwrap();
    assert_eq!(drain(&mut sub).await, ["3", "4"]);
    send(&s, "", "credit", "late").await;
    s.sync().await.unwrap();
    nothing_more(&mut sub).await;
}

#[tokio::test]
async fn window_mode_credit_returns_on_completion() {
    let broker = Ferryd::start();
    let conn = connect(&broker).await;
    let s = conn.session().await.unwrap();
    declare(&s, "window").await;
    for i in 0..6 {
        send(&s, "", "window", &i.to_string()).await;
    }
    s.sync().await.unwrap();
    let opts = SubscribeOptions {
        flow_mode: FlowMode::Window,
        message_credit: 2,
        ..explicit(2)
    };
    let mut sub = s.subscribe("window", "w", opts).await.unwrap();
    // The client completes what it has taken; the broker refunds the window each time,
    // so all six arrive although the window is two.
    let mut got = Vec::new();
    for _ in 0..6 {
        got.push(text(&next(&mut sub).await));
    }
    assert_eq!(got, ["0", "1", "2", "3", "4", "5"]);
}

#[tokio::test]
async fn released_messages_return_to_the_head_in_order_marked_redelivered() {
    let broker = Ferryd::start();
    let conn = connect(&broker).await;
    let s = conn.session().await.unwrap();
    declare(&s, "rel").await;
    for i in 0..4 {
        send(&s, "", "rel", &i.to_string()).await;
    }
    s.sync().await.unwrap();
    let mut sub = s.subscribe("rel", "r", explicit(3)).await.unwrap();
    let d0 = next(&mut sub).await;
    let d1 = next(&mut sub).await;
    let d2 = next(&mut sub).await;
    assert!(!d0.redelivered);
    // Release 1 then 0: they go back in queue order, ahead of "3".
    let mut set = SequenceSet::new();
    set.add(d1.id);
    set.add(d0.id);
    s.release(&set, true).await.unwrap();
    s.accept(&d2.id_set()).await.unwrap();
    s.message_flow("r", CreditUnit::Message, 3).await.unwrap();
    let again: Vec<Delivery> = vec![
        next(&mut sub).await,
        next(&mut sub).await,
        next(&mut sub).await,
    ];
    let texts: Vec<String> = again.iter().map(text).collect();
    assert_eq!(texts, ["0", "1", "3"]);
    assert!(again[0].redelivered && again[1].redelivered && !again[2].redelivered);
    // The accepted one is gone for good.
    let mut all = SequenceSet::new();
    for d in &again {
        all.add(d.id);
    }
    s.accept(&all).await.unwrap();
    s.sync().await.unwrap();
    assert_eq!(s.queue_query("rel").await.unwrap().message_count, Some(0));
}

#[tokio::test]
async fn rejected_messages_go_to_the_alternate_exchange() {
    let broker = Ferryd::start();
    let conn = connect(&broker).await;
    let s = conn.session().await.unwrap();
    s.exchange_declare("dlx", "fanout", ExchangeDeclareOptions::default())
        .await
        .unwrap();
    declare(&s, "dead").await;
    s.exchange_bind("dead", "dlx", "", None).await.unwrap();
    s.queue_declare(
        "work",
        QueueDeclareOptions {
            alternate_exchange: Some("dlx".into()),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    send(&s, "", "work", "bad").await;
    s.sync().await.unwrap();
    let mut sub = s.subscribe("work", "w", explicit(1)).await.unwrap();
    let d = next(&mut sub).await;
    s.reject(&d.id_set(), RejectCode::Unspecified, "no")
        .await
        .unwrap();
    s.sync().await.unwrap();
    assert_eq!(s.queue_query("work").await.unwrap().message_count, Some(0));
    let mut dead = s
        .subscribe("dead", "d", SubscribeOptions::default())
        .await
        .unwrap();
    assert_eq!(drain(&mut dead).await, ["bad"]);
}

#[tokio::test]
async fn unsettled_messages_return_when_the_session_ends() {
    let broker = Ferryd::start();
    let conn = connect(&broker).await;
    let admin = conn.session().await.unwrap();
    declare(&admin, "orphans").await;
    for i in 0..3 {
        send(&admin, "", "orphans", &i.to_string()).await;
    }
    admin.sync().await.unwrap();
    {
        let s = conn.session().await.unwrap();
        let mut sub = s.subscribe("orphans", "o", explicit(3)).await.unwrap();
        for _ in 0..3 {
            next(&mut sub).await;
        }
        s.close().await.unwrap();
    }
    let mut sub = admin
        .subscribe("orphans", "again", explicit(10))
        .await
        .unwrap();
    let mut got = Vec::new();
    for _ in 0..3 {
        let d = next(&mut sub).await;
        assert!(d.redelivered);
        got.push(text(&d));
    }
    assert_eq!(got, ["0", "1", "2"]);
    nothing_more(&mut sub).await;
}

#[tokio::test]
async fn unsettled_messages_return_when_the_connection_drops() {
    let broker = Ferryd::start();
    let admin_conn = connect(&broker).await;
    let admin = admin_conn.session().await.unwrap();
    declare(&admin, "dropped").await;
    send(&admin, "", "dropped", "x").await;
    admin.sync().await.unwrap();
    {
        let conn = connect(&broker).await;
        let s = conn.session().await.unwrap();
        let mut sub = s.subscribe("dropped", "o", explicit(1)).await.unwrap();
        next(&mut sub).await;
        drop(sub);
        drop(s);
        drop(conn);
    }
    let mut sub = admin
        .subscribe("dropped", "again", explicit(1))
        .await
        .unwrap();
    let d = next(&mut sub).await;
    assert_eq!(text(&d), "x");
    assert!(d.redelivered);
}

#[tokio::test]
async fn expired_messages_are_never_delivered() {
    let broker = Ferryd::start();
    let conn = connect(&broker).await;
    let s = conn.session().await.unwrap();
    declare(&s, "ttl").await;
    let short = OutgoingMessage::builder()
        .routing_key("ttl")
        .ttl(Duration::from_millis(50))
        .body("short")
        .build()
        .unwrap();
    s.transfer("", &short).await.unwrap();
    send(&s, "", "ttl", "long").await;
    s.sync().await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut sub = s
        .subscribe("ttl", "t", SubscribeOptions::default())
        .await
        .unwrap();
    assert_eq!(drain(&mut sub).await, ["long"]);
    // And with no consumer, the expiry timer drops them so the queue does not keep them.
    declare(&s, "ttl-idle").await;
    let m = OutgoingMessage::builder()
        .routing_key("ttl-idle")
        .ttl(Duration::from_millis(50))
        .body("gone")
        .build()
        .unwrap();
    s.transfer("", &m).await.unwrap();
    s.sync().await.unwrap();
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(
        s.queue_query("ttl-idle").await.unwrap().message_count,
        Some(0)
    );
}

#[tokio::test]
async fn browsing_leaves_messages_and_acquire_takes_them() {
    let broker = Ferryd::start();
    let conn = connect(&broker).await;
    let s = conn.session().await.unwrap();
    declare(&s, "browse").await;
    send(&s, "", "browse", "a").await;
    send(&s, "", "browse", "b").await;
    s.sync().await.unwrap();
    let opts = SubscribeOptions {
        acquire_mode: AcquireMode::NotAcquired,
        ..explicit(10)
    };
    let mut browser = s.subscribe("browse", "br", opts).await.unwrap();
    let a = next(&mut browser).await;
    let b = next(&mut browser).await;
    assert_eq!((text(&a), text(&b)), ("a".into(), "b".into()));
    assert_eq!(
        s.queue_query("browse").await.unwrap().message_count,
        Some(2)
    );
    let acquired = s.acquire(&a.id_set()).await.unwrap();
    assert!(acquired.contains(a.id));
    s.accept(&a.id_set()).await.unwrap();
    s.sync().await.unwrap();
    assert_eq!(
        s.queue_query("browse").await.unwrap().message_count,
        Some(1)
    );
    // A second acquire of the same message fails: it is gone.
    assert!(s.acquire(&a.id_set()).await.unwrap().is_empty());
}

#[tokio::test]
async fn properties_and_headers_pass_through_unchanged() {
    let broker = Ferryd::start();
    let conn = connect(&broker).await;
    let s = conn.session().await.unwrap();
    declare(&s, "props").await;
    let mut nested = Map::new();
    nested.insert("inner", Value::Uint16(7));
    let values = [
        ("bool", Value::Bool(true)),
        ("i8", Value::Int8(-8)),
        ("u8", Value::Uint8(8)),
        ("i16", Value::Int16(-16)),
        ("u16", Value::Uint16(16)),
        ("i32", Value::Int32(-32)),
        ("u32", Value::Uint32(32)),
        ("i64", Value::Int64(-64)),
        ("u64", Value::Uint64(64)),
        ("f32", Value::Float(1.5)),
        ("f64", Value::Double(2.25)),
        ("str8", Value::Str8(Str::from("short"))),
        ("str16", Value::Str16(Str::from("longer"))),
        ("bin", Value::Vbin32(Bytes::from_static(&[0, 1, 2]))),
        ("uuid", Value::Uuid([9; 16])),
        ("time", Value::Datetime(1_700_000_000)),
        ("map", Value::Map(nested)),
        ("void", Value::Void),
    ];
    let mut b = OutgoingMessage::builder()
        .routing_key("props")
        .correlation_id(Bytes::from_static(b"corr-1"))
        .content_type("application/x-test")
        .reply_to("amq.direct", "replies")
        .priority(7)
        .body("payload");
    for (k, v) in &values {
        b = b.header(k, v.clone());
    }
    let m = b.build().unwrap();
    s.transfer("", &m).await.unwrap();
    let mut sub = s
        .subscribe("props", "p", SubscribeOptions::default())
        .await
        .unwrap();
    let d = next(&mut sub).await;
    // Byte for byte: the broker names the exchange on receipt, but leaves the default
    // exchange's empty name out when the client sent none.
    assert_eq!(
        d.raw_header,
        *m.header_segment(),
        "header segment byte for byte"
    );
    for (k, v) in &values {
        assert_eq!(d.application_header(k), Some(v), "header {k}");
    }
}

#[tokio::test]
async fn management_errors_use_the_spec_codes() {
    let broker = Ferryd::start();
    let conn = connect(&broker).await;
    let owner = conn.session().await.unwrap();
    owner
        .queue_declare(
            "mine",
            QueueDeclareOptions {
                exclusive: true,
                ..Default::default()
            },
        )
        .await
        .unwrap();
    // qpidd: only an exclusive declare of another session's exclusive queue is locked.
    let other = conn.session().await.unwrap();
    other
        .queue_declare("mine", QueueDeclareOptions::default())
        .await
        .unwrap();
    let e = other
        .queue_declare(
            "mine",
            QueueDeclareOptions {
                exclusive: true,
                ..Default::default()
            },
        )
        .await
        .unwrap_err();
    assert_eq!(code_of(e), ErrorCode::ResourceLocked);

    let s = conn.session().await.unwrap();
    let e = s
        .queue_declare(
            "missing",
            QueueDeclareOptions {
                passive: true,
                ..Default::default()
            },
        )
        .await
        .unwrap_err();
    assert_eq!(code_of(e), ErrorCode::NotFound);

    let s = conn.session().await.unwrap();
    declare(&s, "full").await;
    send(&s, "", "full", "x").await;
    let e = s.queue_delete("full", false, true).await.unwrap_err();
    assert_eq!(code_of(e), ErrorCode::PreconditionFailed);

    let s = conn.session().await.unwrap();
    s.exchange_declare("typed", "topic", ExchangeDeclareOptions::default())
        .await
        .unwrap();
    let e = s
        .exchange_declare("typed", "fanout", ExchangeDeclareOptions::default())
        .await
        .unwrap_err();
    assert_eq!(code_of(e), ErrorCode::NotAllowed);

    let s = conn.session().await.unwrap();
    let e = s
        .subscribe("no-queue", "x", SubscribeOptions::default())
        .await
        .unwrap_err();
    assert_eq!(code_of(e), ErrorCode::NotFound);

    // The owner's session was never disturbed.
    assert!(owner.queue_query("mine").await.unwrap().exclusive);
}

#[tokio::test]
async fn exclusive_subscription_locks_out_others() {
    let broker = Ferryd::start();
    let conn = connect(&broker).await;
    let s = conn.session().await.unwrap();
    declare(&s, "solo").await;
    let opts = SubscribeOptions {
        exclusive: true,
        ..SubscribeOptions::default()
    };
    let _sub = s.subscribe("solo", "first", opts).await.unwrap();
    let other = conn.session().await.unwrap();
    let e = other
        .subscribe("solo", "second", SubscribeOptions::default())
        .await
        .unwrap_err();
    assert_eq!(code_of(e), ErrorCode::ResourceLocked);
}

#[tokio::test]
async fn auto_delete_queue_goes_with_its_last_consumer() {
    let broker = Ferryd::start();
    let conn = connect(&broker).await;
    let s = conn.session().await.unwrap();
    s.queue_declare(
        "temp",
        QueueDeclareOptions {
            auto_delete: true,
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let sub = s
        .subscribe("temp", "t", SubscribeOptions::default())
        .await
        .unwrap();
    assert_eq!(
        s.queue_query("temp")
            .await
            .unwrap()
            .queue
            .map(|q| q.to_string()),
        Some("temp".into())
    );
    sub.cancel().await.unwrap();
    assert_eq!(s.queue_query("temp").await.unwrap().queue, None);
}

#[tokio::test]
async fn bound_and_query_report_the_broker_state() {
    let broker = Ferryd::start();
    let conn = connect(&broker).await;
    let s = conn.session().await.unwrap();
    declare(&s, "bq").await;
    s.exchange_bind("bq", "amq.direct", "k", None)
        .await
        .unwrap();
    let r = s
        .exchange_bound("amq.direct", Some("bq"), Some("k"), None)
        .await
        .unwrap();
    assert!(
        !r.exchange_not_found && !r.queue_not_found && !r.queue_not_matched && !r.key_not_matched
    );
    let r = s
        .exchange_bound("amq.direct", Some("bq"), Some("other"), None)
        .await
        .unwrap();
    assert!(r.key_not_matched);
    let r = s.exchange_bound("nope", None, None, None).await.unwrap();
    assert!(r.exchange_not_found);
    s.exchange_unbind("bq", "amq.direct", "k").await.unwrap();
    let r = s
        .exchange_bound("amq.direct", Some("bq"), None, None)
        .await
        .unwrap();
    assert!(r.queue_not_matched);
    let q = s.exchange_query("amq.topic").await.unwrap();
    assert_eq!(q.r#type.map(|t| t.to_string()), Some("topic".into()));
    assert!(s.exchange_query("absent").await.unwrap().not_found);
    s.queue_purge("bq").await.unwrap();
    s.queue_delete("bq", false, false).await.unwrap();
    assert_eq!(s.queue_query("bq").await.unwrap().queue, None);
}
