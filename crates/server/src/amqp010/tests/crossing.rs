//! Headers a 0-10 consumer sees that the broker wrote: the death history of a dead letter
//! (RabbitMQ's x-death and x-first/last-death headers), and the header of a message
//! published over 0-9-1 on another connection to the same broker (`crate::bridge`).

use ferry_amqp010::{List, Map, MessageReject, MessageRelease, Value};
use ferry_amqp091 as amqp091;

use super::*;

fn s(text: &str) -> Option<Str> {
    Some(Str::from(text))
}

fn text(v: &str) -> Value {
    Value::Str16(Str::from(v))
}

fn app_headers(d: &Delivered) -> Map {
    d.header
        .properties
        .as_ref()
        .and_then(|p| p.application_headers.clone())
        .unwrap_or_default()
}

/// A queue that dead-letters (RabbitMQ's way) through `dlx`.
fn dead_lettering(name: &str, dlx: &str) -> QueueDeclare {
    let mut args = Map::new();
    args.insert("x-dead-letter-exchange", text(dlx));
    QueueDeclare {
        arguments: Some(args),
        ..declare(name)
    }
}

fn reject(ids: &[u32]) -> MessageReject {
    MessageReject {
        transfers: Some(set(ids)),
        code: None,
        text: None,
    }
}

/// Each x-death entry of `headers` as (queue, reason, count, exchange, routing keys).
fn deaths(headers: &Map) -> Vec<(String, String, i64, String, Vec<String>)> {
    let Some(Value::List(List(entries))) = headers.get("x-death") else {
        panic!("no x-death list in {headers:?}");
    };
    let field = |m: &Map, k: &str| match m.get(k) {
        Some(Value::Str16(s)) => s.to_str_lossy().into_owned(),
        other => panic!("{k}: {other:?}"),
    };
    entries
        .iter()
        .map(|e| {
            let Value::Map(m) = e else {
                panic!("not a map: {e:?}")
            };
            let Some(Value::Int64(count)) = m.get("count") else {
                panic!("no count: {m:?}")
            };
            let Some(Value::List(List(keys))) = m.get("routing-keys") else {
                panic!("no routing-keys: {m:?}")
            };
            assert!(matches!(m.get("time"), Some(Value::Datetime(t)) if *t > 0));
            let keys = keys
                .iter()
                .map(|k| match k {
                    Value::Str16(s) => s.to_str_lossy().into_owned(),
                    other => panic!("{other:?}"),
                })
                .collect();
            (
                field(m, "queue"),
                field(m, "reason"),
                *count,
                field(m, "exchange"),
                keys,
            )
        })
        .collect()
}

#[tokio::test]
async fn a_rejected_dead_letter_carries_its_death_history_and_loses_its_ttl() {
    let mut c = open().await;
    c.attach(1, "s1");
    c.call(1, declare("dead"));
    c.call(1, bind("dead", "amq.fanout", ""));
    c.call(1, dead_lettering("work", "amq.fanout"));
    let header = MessageHeader {
        delivery: Some(DeliveryProperties {
            routing_key: s("work"),
            ttl: Some(3_600_000),
            ..Default::default()
        }),
        properties: Some(ferry_amqp010::MessageProperties {
            content_type: s("text/plain"),
            application_headers: Some({
                let mut m = Map::new();
                m.insert("mine", text("kept"));
                m
            }),
            ..Default::default()
        }),
        other: Vec::new(),
    };
    c.publish(1, "", &header, b"doomed");
    c.subscribe(
        1,
        "work",
        "w",
        AcceptMode::Explicit,
        AcquireMode::PreAcquired,
    );
    assert_eq!(c.grant(1, "w", 1).len(), 1);
    assert_eq!(exception(&c.call(1, reject(&[0]))), None);
    c.subscribe(1, "dead", "d", AcceptMode::None, AcquireMode::PreAcquired);
    let got = c.grant(1, "d", 1);
    let [d] = &got[..] else { panic!("{got:?}") };
    assert_eq!(&d.body[..], b"doomed");
    let dp = d.delivery();
    assert_eq!(
        (dp.ttl, dp.expiration),
        (None, None),
        "a dead letter has no ttl"
    );
    assert_eq!(dp.routing_key, s("work"));
    assert_eq!(
        d.header.properties.as_ref().unwrap().content_type,
        s("text/plain")
    );
    let headers = app_headers(d);
    assert_eq!(headers.get("mine"), Some(&text("kept")));
    assert_eq!(
        deaths(&headers),
        [(
            "work".to_owned(),
            "rejected".to_owned(),
            1,
            String::new(),
            vec!["work".to_owned()]
        )]
    );
    for (k, v) in [
        ("x-first-death-queue", "work"),
        ("x-first-death-reason", "rejected"),
        ("x-first-death-exchange", ""),
        ("x-last-death-queue", "work"),
        ("x-last-death-reason", "rejected"),
        ("x-last-death-exchange", ""),
    ] {
        assert_eq!(headers.get(k), Some(&text(v)), "{k}");
    }
}

#[tokio::test]
async fn a_message_dead_lettered_twice_lists_both_deaths_most_recent_first() {
    let mut c = open().await;
    c.attach(1, "s1");
    c.call(
        1,
        ferry_amqp010::ExchangeDeclare {
            exchange: s("dlx2"),
            r#type: s("fanout"),
            ..Default::default()
        },
    );
    c.call(1, declare("last"));
    c.call(1, bind("last", "dlx2", ""));
    c.call(1, dead_lettering("second", "dlx2"));
    c.call(1, bind("second", "amq.fanout", ""));
    c.call(1, dead_lettering("first", "amq.fanout"));
    c.publish(1, "", &keyed("first"), b"twice");
    c.subscribe(
        1,
        "first",
        "a",
        AcceptMode::Explicit,
        AcquireMode::PreAcquired,
    );
    c.subscribe(
        1,
        "second",
        "b",
        AcceptMode::Explicit,
        AcquireMode::PreAcquired,
    );
    assert_eq!(bodies(&c.grant(1, "a", 1)), [&b"twice"[..]]);
    c.call(1, reject(&[0]));
    assert_eq!(bodies(&c.grant(1, "b", 1)), [&b"twice"[..]]);
    c.call(1, reject(&[1]));
    c.subscribe(1, "last", "z", AcceptMode::None, AcquireMode::PreAcquired);
    let got = c.grant(1, "z", 1);
    let headers = app_headers(&got[0]);
    let seen: Vec<(String, String)> = deaths(&headers)
        .into_iter()
        .map(|(q, r, ..)| (q, r))
        .collect();
    assert_eq!(
        seen,
        [
            ("second".to_owned(), "rejected".to_owned()),
            ("first".to_owned(), "rejected".to_owned())
        ]
    );
    assert_eq!(headers.get("x-first-death-queue"), Some(&text("first")));
    assert_eq!(headers.get("x-last-death-queue"), Some(&text("second")));
    assert_eq!(
        headers.get("x-last-death-exchange"),
        Some(&text("amq.fanout"))
    );
}

#[tokio::test]
async fn a_message_expired_on_arrival_is_dropped_not_dead_lettered() {
    // (Expiry after arrival needs a clock the test does not own: the core's own tests
    // cover it.)
    let mut c = open().await;
    c.attach(1, "s1");
    c.call(1, declare("dead"));
    c.call(1, bind("dead", "amq.fanout", ""));
    c.call(1, dead_lettering("work", "amq.fanout"));
    let expired = MessageHeader {
        delivery: Some(DeliveryProperties {
            routing_key: s("work"),
            expiration: Some(1),
            ..Default::default()
        }),
        properties: None,
        other: Vec::new(),
    };
    let out = c.exchange(transfer_frames(1, "", &expired, b"late", true));
    assert_eq!(exception(&out), None);
    assert!(completions(&out, 1).last().unwrap().contains(3));
    c.publish(1, "", &keyed("work"), b"on time");
    c.conn.broker().expire_heads();
    c.subscribe(1, "work", "w", AcceptMode::None, AcquireMode::PreAcquired);
    assert_eq!(bodies(&c.grant(1, "w", 5)), [&b"on time"[..]]);
    assert_eq!(c.conn.broker().queue("dead").unwrap().message_count(), 0);
}

#[tokio::test]
async fn a_message_rejected_to_a_plain_alternate_exchange_has_no_death_headers() {
    // qpidd's alternate exchange is not RabbitMQ's dead-lettering: nothing is added.
    let mut c = open().await;
    c.attach(1, "s1");
    c.call(1, declare("alt"));
    c.call(1, bind("alt", "amq.fanout", ""));
    let with_alt = QueueDeclare {
        alternate_exchange: s("amq.fanout"),
        ..declare("work")
    };
    c.call(1, with_alt);
    c.publish(1, "", &keyed("work"), b"m");
    c.subscribe(
        1,
        "work",
        "w",
        AcceptMode::Explicit,
        AcquireMode::PreAcquired,
    );
    c.grant(1, "w", 1);
    c.call(1, reject(&[0]));
    c.subscribe(1, "alt", "a", AcceptMode::None, AcquireMode::PreAcquired);
    let got = c.grant(1, "a", 1);
    assert_eq!(got[0].header, keyed("work"));
}

/// A 0-9-1 connection to the broker of `services`, logged in as guest, with channel 1 open.
async fn amqp091_client(services: Services) -> Wire<crate::amqp091::Amqp091> {
    use amqp091::{
        ChannelOpen, ConnectionOpen, ConnectionStartOk, ConnectionTuneOk, FieldTable, LongStr,
        Method, ShortStr,
    };
    let method = |channel: u16, m: Method| {
        let mut out = BytesMut::new();
        amqp091::write_method(&mut out, channel, &m);
        out
    };
    let mut c = Wire::new(|now| crate::amqp091::connection(services, peer(), now));
    c.take_output();
    let start_ok = ConnectionStartOk {
        client_properties: FieldTable::new(),
        mechanism: ShortStr::from_static("PLAIN"),
        response: LongStr::new(b"\0guest\0guest".to_vec()).unwrap(),
        locale: ShortStr::from_static("en_US"),
    };
    c.send(&method(0, start_ok.into()));
    c.finish_auth().await;
    c.take_output();
    let tune_ok = ConnectionTuneOk {
        channel_max: 0,
        frame_max: 65535,
        heartbeat: 0,
    };
    c.send(&method(0, tune_ok.into()));
    c.send(&method(0, ConnectionOpen::default().into()));
    c.send(&method(1, ChannelOpen::default().into()));
    c.take_output();
    assert_eq!(c.conn.shell.phase, Phase::Open);
    c
}

fn publish_091(
    c: &mut Wire<crate::amqp091::Amqp091>,
    exchange: &'static str,
    key: &'static str,
    props: amqp091::BasicProperties,
    body: &[u8],
) {
    let publish = amqp091::BasicPublish {
        exchange: amqp091::ShortStr::from_static(exchange),
        routing_key: amqp091::ShortStr::from_static(key),
        ..Default::default()
    };
    let mut out = BytesMut::new();
    amqp091::write_method(&mut out, 1, &publish.into());
    let header = amqp091::ContentHeader::basic(body.len() as u64, props);
    amqp091::write_content_header(&mut out, 1, &header);
    amqp091::write_body(&mut out, 1, body, 65535);
    c.send(&out);
    assert!(c.take_output().is_empty(), "the publish was refused");
}

#[tokio::test]
async fn a_message_published_over_0_9_1_reaches_a_0_10_consumer_with_its_properties() {
    use amqp091::{FieldTable, FieldValue, LongStr, ShortStr};
    let services = services(ServerConfig::default());
    let mut consumer = open_on(services.clone(), 0).await;
    consumer.attach(1, "s1");
    consumer.call(1, declare("q"));
    consumer.call(1, bind("q", "amq.direct", "key"));
    let mut publisher = amqp091_client(services).await;
    let mut headers = FieldTable::new();
    headers.push(
        ShortStr::from_static("colour"),
        FieldValue::LongStr(LongStr::from_static("red")),
    );
    headers.push(ShortStr::from_static("size"), FieldValue::I32(42));
    headers.push(ShortStr::from_static("ok"), FieldValue::Bool(true));
    let props = amqp091::BasicProperties {
        content_type: Some(ShortStr::from_static("application/json")),
        content_encoding: Some(ShortStr::from_static("utf-8")),
        headers: Some(headers),
        delivery_mode: Some(2),
        priority: Some(7),
        correlation_id: Some(ShortStr::from_static("corr-1")),
        reply_to: Some(ShortStr::from_static("amq.direct/replies")),
        expiration: Some(ShortStr::from_static("60000")),
        message_id: Some(ShortStr::from_static("not-a-uuid")),
        timestamp: Some(1_700_000_000),
        kind: Some(ShortStr::from_static("order")),
        app_id: Some(ShortStr::from_static("shop")),
        ..Default::default()
    };
    publish_091(&mut publisher, "amq.direct", "key", props, b"{}");
    // A UUID message-id is 0-10's own form.
    let uuid = amqp091::BasicProperties {
        message_id: Some(ShortStr::from_static(
            "00112233-4455-6677-8899-aabbccddeeff",
        )),
        reply_to: Some(ShortStr::from_static("plain-queue")),
        ..Default::default()
    };
    publish_091(&mut publisher, "amq.direct", "key", uuid, b"second");
    consumer.subscribe(1, "q", "d", AcceptMode::Explicit, AcquireMode::PreAcquired);
    let got = consumer.grant(1, "d", 2);
    let [first, second] = &got[..] else {
        panic!("{got:?}")
    };
    assert_eq!(&first.body[..], b"{}");
    let dp = first.delivery();
    assert_eq!(dp.exchange, s("amq.direct"));
    assert_eq!(dp.routing_key, s("key"));
    assert_eq!(
        dp.delivery_mode,
        Some(ferry_amqp010::DeliveryMode::Persistent)
    );
    assert_eq!(dp.priority.map(|p| p as u8), Some(7));
    assert_eq!(dp.ttl, Some(60000));
    assert_eq!(dp.timestamp, Some(1_700_000_000));
    assert!(!dp.redelivered);
    let mp = first.header.properties.clone().unwrap();
    assert_eq!(mp.content_type, s("application/json"));
    assert_eq!(mp.content_encoding, s("utf-8"));
    assert_eq!(mp.correlation_id, Some(Bytes::from_static(b"corr-1")));
    assert_eq!(mp.app_id, Some(Bytes::from_static(b"shop")));
    let reply_to = mp.reply_to.unwrap();
    assert_eq!(
        (reply_to.exchange, reply_to.routing_key),
        (s("amq.direct"), s("replies"))
    );
    assert_eq!(mp.message_id, None);
    let app = mp.application_headers.unwrap();
    assert_eq!(app.get("colour"), Some(&text("red")));
    assert!(matches!(app.get("size"), Some(Value::Int32(42))), "{app:?}");
    assert_eq!(app.get("ok"), Some(&Value::Bool(true)));
    assert_eq!(
        app.get("x-amqp-0-9-1-message-id"),
        Some(&text("not-a-uuid"))
    );
    assert_eq!(app.get("x-amqp-0-9-1-type"), Some(&text("order")));
    let mp = second.header.properties.clone().unwrap();
    assert_eq!(
        mp.message_id,
        Some([
            0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd,
            0xee, 0xff
        ])
    );
    let reply_to = mp.reply_to.unwrap();
    assert_eq!(
        (reply_to.exchange, reply_to.routing_key),
        (None, s("plain-queue"))
    );
    // Released and sent again: the converted header says redelivered.
    let release = MessageRelease {
        transfers: Some(set(&[0])),
        set_redelivered: true,
    };
    consumer.call(1, release);
    consumer.send(&control(1, completed(0, 1)));
    let again = consumer.deliveries();
    let [d] = &again[..] else { panic!("{again:?}") };
    assert_eq!(&d.body[..], b"{}");
    assert!(d.redelivered());
    assert_eq!(d.delivery().routing_key, s("key"));
    assert_eq!(app_headers(d).get("colour"), Some(&text("red")));
}

#[tokio::test]
async fn a_0_9_1_message_dead_lettered_to_a_0_10_consumer_has_both_conversions() {
    let services = services(ServerConfig::default());
    let mut consumer = open_on(services.clone(), 0).await;
    consumer.attach(1, "s1");
    consumer.call(1, declare("dead"));
    consumer.call(1, bind("dead", "amq.fanout", ""));
    consumer.call(1, dead_lettering("work", "amq.fanout"));
    let mut publisher = amqp091_client(services).await;
    let props = amqp091::BasicProperties {
        content_type: Some(amqp091::ShortStr::from_static("text/plain")),
        expiration: Some(amqp091::ShortStr::from_static("600000")),
        ..Default::default()
    };
    publish_091(&mut publisher, "", "work", props, b"from 0-9-1");
    consumer.subscribe(
        1,
        "work",
        "w",
        AcceptMode::Explicit,
        AcquireMode::PreAcquired,
    );
    consumer.grant(1, "w", 1);
    consumer.call(1, reject(&[0]));
    consumer.subscribe(1, "dead", "d", AcceptMode::None, AcquireMode::PreAcquired);
    let got = consumer.grant(1, "d", 1);
    let [d] = &got[..] else { panic!("{got:?}") };
    assert_eq!(&d.body[..], b"from 0-9-1");
    assert_eq!(d.delivery().ttl, None);
    assert_eq!(
        d.header.properties.as_ref().unwrap().content_type,
        s("text/plain")
    );
    assert_eq!(deaths(&app_headers(d))[0].0, "work");
}

#[tokio::test]
async fn a_sequencing_queues_number_joins_a_converted_header() {
    let services = services(ServerConfig::default());
    let mut consumer = open_on(services.clone(), 0).await;
    consumer.attach(1, "s1");
    let mut args = Map::new();
    args.insert("qpid.queue_msg_sequence", text("seq"));
    consumer.call(
        1,
        QueueDeclare {
            arguments: Some(args),
            ..declare("numbered")
        },
    );
    let mut publisher = amqp091_client(services).await;
    for body in [&b"a"[..], b"b"] {
        publish_091(
            &mut publisher,
            "",
            "numbered",
            amqp091::BasicProperties::default(),
            body,
        );
    }
    consumer.subscribe(
        1,
        "numbered",
        "d",
        AcceptMode::None,
        AcquireMode::PreAcquired,
    );
    let got = consumer.grant(1, "d", 2);
    let numbers: Vec<Option<Value>> = got
        .iter()
        .map(|d| app_headers(d).get("seq").cloned())
        .collect();
    assert_eq!(numbers, [Some(Value::Uint32(1)), Some(Value::Uint32(2))]);
}

#[tokio::test]
async fn a_message_the_broker_made_itself_goes_out_with_an_empty_header() {
    let mut c = open().await;
    c.attach(1, "s1");
    c.call(1, declare("q"));
    let broker = c.conn.broker().clone();
    let exchange = broker.exchange("").unwrap();
    let made = ferry_core::Message::new("", "q", Bytes::from_static(b"internal"));
    broker.publish(&exchange, made).expect("routed");
    c.subscribe(1, "q", "d", AcceptMode::None, AcquireMode::PreAcquired);
    let got = c.grant(1, "d", 1);
    let [d] = &got[..] else { panic!("{got:?}") };
    assert_eq!(&d.body[..], b"internal");
    assert_eq!(
        (d.header.delivery.clone(), d.header.properties.clone()),
        (None, None)
    );
}
