//! AMQP 1.0 through a real ferryd: messages crossing to and from 0-10 and 0-9-1 with their
//! properties mapped as docs/PROTOCOL-MAPPING.md says, durable messages settled only once
//! the journal has them and recovered byte for byte, and the headers that pick the layer.

mod common;

use std::io::{Read, Write};
use std::time::Duration;

use bytes::Bytes;
use common::amqp1::Amqp1;
use common::raw091::{short, Raw091};
use common::{DataDir, Ferryd};
use ferry_amqp091::{BasicProperties, FieldTable, FieldValue, LongStr, QueueDeclare};
use ferry_amqp1::{
    Accepted, ApplicationProperties, Body, DeliveryState, Header, Message, MessageId, Properties,
    RawMessage, Value,
};
use ferry_client::{
    AcceptMode, ConnectOptions, Connection, FlowMode, OutgoingMessage, QueueDeclareOptions,
    SubscribeOptions, Value as V010,
};

const WAIT: Duration = Duration::from_secs(10);

fn sample() -> Message {
    let mut app = ApplicationProperties::new();
    app.push("colour".into(), Value::from("red"));
    app.push("count".into(), Value::Int(42));
    Message {
        header: Some(Header {
            durable: true,
            priority: 6,
            ..Header::default()
        }),
        properties: Some(Properties {
            message_id: Some(MessageId::String("m-1".into())),
            correlation_id: Some(MessageId::String("c-1".into())),
            reply_to: Some("answers".into()),
            subject: Some("greeting".into()),
            content_type: Some("text/plain".into()),
            ..Properties::default()
        }),
        application_properties: Some(app),
        ..Message::data(Bytes::from_static(b"from 1.0"))
    }
}

fn accepted() -> DeliveryState {
    DeliveryState::Accepted(Accepted {})
}

#[tokio::test]
async fn amqp1_to_amqp010_and_back() {
    let broker = Ferryd::start();
    let conn = Connection::connect(broker.addr, ConnectOptions::default())
        .await
        .unwrap();
    let s = conn.session().await.unwrap();
    s.queue_declare("x1to010", QueueDeclareOptions::default())
        .await
        .unwrap();
    let mut sub = s
        .subscribe("x1to010", "d", SubscribeOptions::default())
        .await
        .unwrap();
    let addr = broker.addr;
    tokio::task::spawn_blocking(move || {
        let mut c = Amqp1::open(addr);
        c.sender(0, "x1to010");
        assert_eq!(c.publish(0, &sample()), accepted());
        c.close();
    })
    .await
    .unwrap();
    let d = tokio::time::timeout(WAIT, sub.next())
        .await
        .expect("a delivery")
        .expect("open");
    assert_eq!(&d.body[..], b"from 1.0");
    let dp = d.header.delivery.as_ref().expect("delivery-properties");
    assert_eq!(dp.priority.map(|p| p as u8), Some(6));
    assert_eq!(
        dp.delivery_mode,
        Some(ferry_client::DeliveryMode::Persistent)
    );
    let mp = d.header.properties.as_ref().expect("message-properties");
    assert_eq!(mp.correlation_id.as_deref(), Some(&b"c-1"[..]));
    assert_eq!(
        mp.content_type.as_ref().map(|c| c.to_string()),
        Some("text/plain".into())
    );
    assert_eq!(d.application_header("count"), Some(&V010::Int32(42)));
    assert!(d.application_header("colour").is_some());
    assert!(d.application_header("qpid.subject").is_some());

    // And back: 0-10 to a 1.0 receiver.
    let m = OutgoingMessage::builder()
        .routing_key("x1to010")
        .content_type("application/json")
        .correlation_id(Bytes::from_static(b"c-2"))
        .priority(3)
        .persistent(true)
        .header("tenant", V010::Str16("acme".into()))
        .body("from 0-10")
        .build()
        .unwrap();
    sub.cancel().await.unwrap();
    s.transfer("", &m).await.unwrap();
    s.sync().await.unwrap();
    let got = tokio::task::spawn_blocking(move || {
        let mut c = Amqp1::open(addr);
        c.receiver(1, "x1to010", 10);
        let r = c.receive();
        c.settle(r.delivery_id, accepted());
        r.message()
    })
    .await
    .unwrap();
    assert_eq!(got.body, Body::Data(vec![Bytes::from_static(b"from 0-10")]));
    let h = got.header.expect("a header");
    assert!(h.durable);
    assert_eq!(h.priority, 3);
    let p = got.properties.expect("properties");
    assert_eq!(p.correlation_id, Some(MessageId::String("c-2".into())));
    assert_eq!(
        p.content_type.map(|c| c.as_str().to_owned()).as_deref(),
        Some("application/json")
    );
    assert_eq!(
        p.to.map(|t| t.as_str().to_owned()).as_deref(),
        Some("x1to010")
    );
    let app = got.application_properties.expect("application properties");
    assert_eq!(app.get("tenant"), Some(&Value::from("acme")));
}

#[tokio::test]
async fn amqp1_to_amqp091_and_back() {
    let broker = Ferryd::start();
    let addr = broker.addr;
    tokio::task::spawn_blocking(move || {
        let mut p = Raw091::open(addr);
        p.call(
            QueueDeclare {
                queue: short("x1to091"),
                ..QueueDeclare::default()
            },
            |m| matches!(m, ferry_amqp091::Method::QueueDeclareOk(_)),
        );
        let mut c = Amqp1::open(addr);
        c.sender(0, "x1to091");
        assert_eq!(c.publish(0, &sample()), accepted());
        let got = p.get("x1to091", true).expect("a message");
        assert_eq!(&got.body[..], b"from 1.0");
        let props = got.header.properties.decode();
        assert_eq!(props.message_id, Some(short("m-1")));
        assert_eq!(props.correlation_id, Some(short("c-1")));
        assert_eq!(props.reply_to, Some(short("answers")));
        assert_eq!((props.delivery_mode, props.priority), (Some(2), Some(6)));
        let headers = props.headers.expect("headers");
        assert_eq!(headers.get("count"), Some(&FieldValue::I32(42)));
        assert!(headers.get("qpid.subject").is_some());

        // And back.
        let mut table = FieldTable::new();
        table.push(
            short("tenant"),
            FieldValue::LongStr(LongStr::from_static("acme")),
        );
        let props = BasicProperties {
            message_id: Some(short("m-2")),
            reply_to: Some(short("amq.direct/replies")),
            delivery_mode: Some(2),
            timestamp: Some(1_700_000_000),
            headers: Some(table),
            ..BasicProperties::default()
        };
        p.publish("", "x1to091", &props, b"from 0-9-1");
        c.receiver(1, "x1to091", 10);
        let r = c.receive();
        c.settle(r.delivery_id, accepted());
        let got = r.message();
        assert_eq!(
            got.body,
            Body::Data(vec![Bytes::from_static(b"from 0-9-1")])
        );
        assert!(got.header.expect("a header").durable);
        let p1 = got.properties.expect("properties");
        assert_eq!(p1.message_id, Some(MessageId::String("m-2".into())));
        assert_eq!(
            p1.reply_to.map(|r| r.as_str().to_owned()).as_deref(),
            Some("amq.direct/replies")
        );
        assert_eq!(p1.creation_time.map(|t| t.0), Some(1_700_000_000_000));
        let app = got.application_properties.expect("application properties");
        assert_eq!(app.get("tenant"), Some(&Value::from("acme")));
        c.close();
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn durable_messages_are_settled_after_the_journal_and_come_back_byte_for_byte() {
    let dir = DataDir::new("amqp1");
    let broker = Ferryd::start_with(&[&dir.arg()]);
    let conn = Connection::connect(broker.addr, ConnectOptions::default())
        .await
        .unwrap();
    let s = conn.session().await.unwrap();
    let durable = QueueDeclareOptions {
        durable: true,
        ..QueueDeclareOptions::default()
    };
    s.queue_declare("d1", durable).await.unwrap();
    drop(s);
    drop(conn);
    let addr = broker.addr;
    let sent = sample();
    let original = {
        let mut wire = bytes::BytesMut::new();
        sent.encode(&mut wire);
        RawMessage::parse(wire.freeze()).unwrap()
    };
    tokio::task::spawn_blocking(move || {
        let mut c = Amqp1::open(addr);
        c.sender(0, "d1");
        // The broker's settlement means the journal has it: the restart below keeps it.
        assert_eq!(c.publish(0, &sent), accepted());
        c.close();
    })
    .await
    .unwrap();
    let (status, _) = broker.terminate();
    assert!(status.success());
    let broker = Ferryd::start_with(&[&dir.arg()]);
    let addr = broker.addr;
    let got = tokio::task::spawn_blocking(move || {
        let mut c = Amqp1::open(addr);
        c.receiver(0, "d1", 10);
        let r = c.receive();
        c.settle(r.delivery_id, accepted());
        c.close();
        r
    })
    .await
    .unwrap();
    let got = RawMessage::parse(got.payload).unwrap();
    assert_eq!(
        got.bare(),
        original.bare(),
        "the bare message, byte for byte"
    );
    let header = got.header().unwrap().unwrap();
    assert!(header.durable);
    // Recovered messages count as delivered once (the store cannot know they were not).
    assert_eq!(header.delivery_count, 1);

    // The same message reaches a 0-10 consumer after the restart too.
    tokio::task::spawn_blocking(move || {
        let mut c = Amqp1::open(addr);
        c.sender(0, "d1");
        assert_eq!(c.publish(0, &sample()), accepted());
        c.close();
    })
    .await
    .unwrap();
    let conn = Connection::connect(broker.addr, ConnectOptions::default())
        .await
        .unwrap();
    let s = conn.session().await.unwrap();
    let opts = SubscribeOptions {
        accept_mode: AcceptMode::Explicit,
        flow_mode: FlowMode::Credit,
        message_credit: 10,
        ..SubscribeOptions::default()
    };
    let mut sub = s.subscribe("d1", "d", opts).await.unwrap();
    let d = tokio::time::timeout(WAIT, sub.next())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(&d.body[..], b"from 1.0");
}

#[test]
fn the_protocol_header_picks_the_layer() {
    let broker = Ferryd::start();
    // 1.0 without SASL where ANONYMOUS is allowed (--auth no): our header back, then open.
    let mut s = common::amqp1::tcp(broker.addr);
    s.write_all(b"AMQP\x00\x01\x00\x00").unwrap();
    let mut header = [0u8; 8];
    s.read_exact(&mut header).unwrap();
    assert_eq!(&header, b"AMQP\x00\x01\x00\x00");
    let mut c = Amqp1::new(Box::new(s));
    c.send(
        0,
        ferry_amqp1::Open {
            container_id: "bare".into(),
            ..ferry_amqp1::Open::default()
        },
    );
    let open = c.next().expect("an open");
    assert!(matches!(open.1, ferry_amqp1::Performative::Open(_)));
    // The TLS header is not spoken in band (TLS has its own port): 0-10's header back.
    let mut s = common::amqp1::tcp(broker.addr);
    s.write_all(b"AMQP\x02\x01\x00\x00").unwrap();
    let mut header = [0u8; 8];
    s.read_exact(&mut header).unwrap();
    assert_eq!(&header, b"AMQP\x01\x01\x00\x0a");
}

/// A JMS-style durable subscription (durable source on `amq.topic`, link name `sub`) keeps
/// what its topic gets while no link consumes it, across a SIGKILL of ferryd; a detach that
/// closes the link ends it, for good.
#[tokio::test]
async fn a_durable_subscription_survives_a_kill_until_its_link_is_closed() {
    use ferry_amqp1::{
        Attach, Detach, LinkTarget, Performative, ReceiverSettleMode, Role, SenderSettleMode,
        Source, Target, TerminusDurability, TerminusExpiryPolicy,
    };
    fn subscribe(c: &mut Amqp1) -> Attach {
        c.send(
            0,
            Attach {
                name: "sub".into(),
                handle: 1,
                role: Role::Receiver,
                snd_settle_mode: SenderSettleMode::Unsettled,
                rcv_settle_mode: ReceiverSettleMode::First,
                source: Some(Source {
                    address: Some("amq.topic/prices".into()),
                    durable: TerminusDurability::UnsettledState,
                    expiry_policy: TerminusExpiryPolicy::Never,
                    ..Source::default()
                }),
                target: Some(LinkTarget::Target(Target::default())),
                ..Attach::default()
            },
        );
        let Performative::Attach(a) = c.wait_for(|p| matches!(p, Performative::Attach(_))) else {
            unreachable!()
        };
        a
    }
    fn detach(c: &mut Amqp1, closed: bool) {
        let detach = Detach {
            handle: 1,
            closed,
            error: None,
        };
        c.send(0, detach);
        c.wait_for(|p| matches!(p, Performative::Detach(_)));
    }
    let dir = DataDir::new("amqp1-sub");
    let broker = Ferryd::start_with(&[&dir.arg()]);
    let addr = broker.addr;
    tokio::task::spawn_blocking(move || {
        let mut c = Amqp1::open(addr);
        assert!(subscribe(&mut c).source.is_some());
        detach(&mut c, false);
        // Published while nobody consumes: settled once the journal has it.
        c.sender(0, "amq.topic/prices");
        assert_eq!(c.publish(0, &sample()), accepted());
    })
    .await
    .unwrap();
    broker.kill();
    let broker = Ferryd::start_with(&[&dir.arg()]);
    let addr = broker.addr;
    tokio::task::spawn_blocking(move || {
        let mut c = Amqp1::open(addr);
        assert!(subscribe(&mut c).source.is_some(), "resumed after the kill");
        c.credit(1, 0, 10);
        let r = c.receive();
        assert_eq!(
            r.message().application_properties,
            sample().application_properties
        );
        c.settle(r.delivery_id, accepted());
        detach(&mut c, true);
    })
    .await
    .unwrap();
    broker.kill();
    let broker = Ferryd::start_with(&[&dir.arg()]);
    let conn = Connection::connect(broker.addr, ConnectOptions::default())
        .await
        .unwrap();
    let s = conn.session().await.unwrap();
    let gone = s.queue_query("ferry-test_sub").await.unwrap();
    assert!(
        gone.queue.is_none_or(|q| q.is_empty()),
        "the closed subscription stays gone"
    );
}
