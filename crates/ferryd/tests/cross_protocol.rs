//! A 0-9-1 publisher feeds a 0-10 subscriber and the other way round, with properties
//! mapped as docs/PROTOCOL-MAPPING.md describes.

mod common;

use std::time::Duration;

use bytes::Bytes;
use common::raw091::Raw091;
use common::Ferryd;
use ferry_amqp091::{BasicProperties, FieldTable, FieldValue, LongStr, ShortStr};
use ferry_client::{
    ConnectOptions, Connection, OutgoingMessage, QueueDeclareOptions, SubscribeOptions, Value,
};

#[tokio::test]
async fn amqp091_publisher_to_amqp010_subscriber() {
    let broker = Ferryd::start();
    let conn = Connection::connect(broker.addr, ConnectOptions::default())
        .await
        .unwrap();
    let s = conn.session().await.unwrap();
    s.queue_declare("x091to010", QueueDeclareOptions::default())
        .await
        .unwrap();
    let mut sub = s
        .subscribe("x091to010", "d", SubscribeOptions::default())
        .await
        .unwrap();

    let addr = broker.addr;
    tokio::task::spawn_blocking(move || {
        let mut p = Raw091::open(addr);
        let mut headers = FieldTable::new();
        headers.push(
            ShortStr::from_static("colour"),
            FieldValue::LongStr(LongStr::new(Bytes::from_static(b"blue")).unwrap()),
        );
        headers.push(ShortStr::from_static("count"), FieldValue::I32(42));
        let props = BasicProperties {
            content_type: Some(ShortStr::from_static("text/plain")),
            correlation_id: Some(ShortStr::from_static("corr-9")),
            reply_to: Some(ShortStr::from_static("answers")),
            delivery_mode: Some(2),
            priority: Some(6),
            headers: Some(headers),
            ..Default::default()
        };
        p.publish("", "x091to010", &props, b"from 0-9-1");
        // Keep the connection until the message is surely routed.
        std::thread::sleep(Duration::from_millis(200));
    })
    .await
    .unwrap();

    let d = tokio::time::timeout(Duration::from_secs(5), sub.next())
        .await
        .expect("delivery")
        .expect("open");
    assert_eq!(&d.body[..], b"from 0-9-1");
    assert!(d.header_error.is_none(), "{:?}", d.header_error);
    let dp = d.header.delivery.as_ref().expect("delivery-properties");
    assert_eq!(
        dp.routing_key.as_ref().map(|k| k.to_string()),
        Some("x091to010".into())
    );
    assert_eq!(dp.priority.map(|p| p as u8), Some(6));
    assert_eq!(
        dp.delivery_mode,
        Some(ferry_client::DeliveryMode::Persistent)
    );
    let mp = d.header.properties.as_ref().expect("message-properties");
    assert_eq!(
        mp.content_type.as_ref().map(|c| c.to_string()),
        Some("text/plain".into())
    );
    assert_eq!(mp.correlation_id.as_deref(), Some(&b"corr-9"[..]));
    assert_eq!(
        mp.reply_to
            .as_ref()
            .and_then(|r| r.routing_key.as_ref())
            .map(|k| k.to_string()),
        Some("answers".into())
    );
    assert_eq!(d.application_header("count"), Some(&Value::Int32(42)));
    assert!(d.application_header("colour").is_some());
}

#[tokio::test]
async fn amqp010_publisher_to_amqp091_consumer() {
    let broker = Ferryd::start();
    let conn = Connection::connect(broker.addr, ConnectOptions::default())
        .await
        .unwrap();
    let s = conn.session().await.unwrap();
    s.queue_declare("x010to091", QueueDeclareOptions::default())
        .await
        .unwrap();
    let addr = broker.addr;
    let consumer = tokio::task::spawn_blocking(move || {
        let mut c = Raw091::open(addr);
        c.consume("x010to091");
        c.delivery()
    });
    // Give the consumer time to subscribe; the message waits in the queue anyway.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let m = OutgoingMessage::builder()
        .routing_key("x010to091")
        .content_type("application/json")
        .correlation_id(Bytes::from_static(b"c-10"))
        .priority(3)
        .header("tenant", Value::Str16("acme".into()))
        .body("from 0-10")
        .build()
        .unwrap();
    s.transfer("", &m).await.unwrap();
    s.sync().await.unwrap();
    let delivered = tokio::time::timeout(Duration::from_secs(10), consumer)
        .await
        .expect("delivery in time")
        .unwrap();
    assert_eq!(&delivered.body[..], b"from 0-10");
    let props = &delivered.header.properties.decode();
    assert_eq!(
        props.content_type.as_ref().map(|c| c.as_bytes().to_vec()),
        Some(b"application/json".to_vec())
    );
    assert_eq!(
        props.correlation_id.as_ref().map(|c| c.as_bytes().to_vec()),
        Some(b"c-10".to_vec())
    );
    assert_eq!(props.priority, Some(3));
    let tenant = props.headers.as_ref().and_then(|h| {
        h.iter()
            .find(|(k, _)| k.as_bytes() == b"tenant")
            .map(|(_, v)| v.clone())
    });
    assert!(
        tenant.is_some(),
        "application header mapped to the headers table"
    );
}
