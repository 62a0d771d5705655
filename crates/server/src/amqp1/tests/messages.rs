//! Messages through the layer: sections kept, properties read for routing, expiry.

use ferry_amqp1::{Annotations, ApplicationProperties, Header, Properties, RawMessage, Value};

use super::*;

#[tokio::test]
async fn a_1_0_message_arrives_byte_for_byte_with_a_new_header() {
    let mut c = open().await;
    declare(&c, "q");
    c.begin(0);
    c.attach_sender(0, 0, Some("q"));
    let mut annotations = Annotations::new();
    annotations.push("x-opt-jms-msg-type".into(), Value::Byte(3));
    let mut app = ApplicationProperties::new();
    app.push("colour".into(), Value::from("red"));
    let sent = Message {
        header: Some(Header {
            durable: true,
            priority: 6,
            ..Header::default()
        }),
        message_annotations: Some(annotations),
        properties: Some(Properties {
            message_id: Some(ferry_amqp1::MessageId::Ulong(7)),
            subject: Some("s".into()),
            ..Properties::default()
        }),
        application_properties: Some(app),
        body: Body::Value(Value::from("text")),
        ..Message::default()
    };
    c.transfer(0, 0, 0, false, &sent);
    let q = c.broker().queue("q").unwrap();
    assert_eq!(
        &q.queued_bodies()[0][..],
        b"text",
        "the core holds the payload"
    );
    c.attach_receiver(0, 1, "q");
    let t = transfers(&c.credit(0, 1, 0, 1));
    let mut wire = BytesMut::new();
    sent.encode(&mut wire);
    let original = RawMessage::parse(wire.freeze()).unwrap();
    let got = RawMessage::parse(t[0].1.clone()).unwrap();
    assert_eq!(got.bare(), original.bare());
    assert_eq!(
        got.raw_message_annotations(),
        original.raw_message_annotations()
    );
    let header = got.header().unwrap().unwrap();
    assert!(header.durable);
    assert_eq!(header.priority, 6);
}

#[tokio::test]
async fn ttl_makes_a_message_expire() {
    let mut c = open().await;
    declare(&c, "q");
    c.begin(0);
    c.attach_sender(0, 0, Some("q"));
    let m = Message {
        header: Some(Header {
            ttl: Some(1),
            ..Header::default()
        }),
        ..Message::data(Bytes::from_static(b"short-lived"))
    };
    c.transfer(0, 0, 0, true, &m);
    std::thread::sleep(std::time::Duration::from_millis(5));
    assert_eq!(c.broker().queue("q").unwrap().message_count(), 0);
}

#[tokio::test]
async fn headers_exchanges_route_on_application_properties() {
    let mut c = open().await;
    declare(&c, "reds");
    let b = c.broker();
    let args: ferry_core::Arguments = [
        (
            "x-match".to_owned(),
            ferry_core::HeaderValue::Str("all".into()),
        ),
        (
            "colour".to_owned(),
            ferry_core::HeaderValue::Str("red".into()),
        ),
    ]
    .into_iter()
    .collect();
    b.bind("reds", "amq.match", "", &args).unwrap();
    c.begin(0);
    c.attach_sender(0, 0, Some("amq.match"));
    for (id, colour) in [(0, "red"), (1, "blue")] {
        let mut app = ApplicationProperties::new();
        app.push("colour".into(), Value::from(colour));
        let m = Message {
            application_properties: Some(app),
            ..Message::data(Bytes::from_static(b"m"))
        };
        c.transfer(0, 0, id, true, &m);
    }
    assert_eq!(b.queue("reds").unwrap().message_count(), 1);
}

#[tokio::test]
async fn an_internal_exchange_rejects_what_is_sent_to_it_and_routes_what_is_bound_through_it() {
    let mut c = open().await;
    declare(&c, "q");
    let b = c.broker();
    let internal = ferry_core::ExchangeOptions {
        internal: true,
        ..Default::default()
    };
    b.declare_exchange("inner", ferry_core::ExchangeKind::Fanout, internal, false)
        .unwrap();
    let none = ferry_core::Arguments::new();
    b.bind("q", "inner", "", &none).unwrap();
    b.bind_exchange("inner", "amq.fanout", "", &none).unwrap();
    c.begin(0);
    c.attach_sender(0, 0, Some("inner"));
    c.attach_sender(0, 1, Some("amq.fanout"));
    let m = Message::data(Bytes::from_static(b"m"));
    let got = c.transfer(0, 0, 0, false, &m);
    let d = dispositions(&got);
    let Some(DeliveryState::Rejected(r)) = &d[0].state else {
        panic!("{got:?}");
    };
    assert_eq!(
        r.error.as_ref().map(|e| e.condition.as_str()),
        Some("amqp:unauthorized-access")
    );
    assert!(error_of(&got).is_none(), "the link goes on");
    assert_eq!(b.queue("q").unwrap().message_count(), 0);
    c.transfer(0, 1, 1, true, &m);
    assert_eq!(b.queue("q").unwrap().message_count(), 1);
}

#[tokio::test]
async fn malformed_messages_are_rejected_and_the_link_goes_on() {
    let mut c = open().await;
    declare(&c, "q");
    c.begin(0);
    c.attach_sender(0, 0, Some("q"));
    let t = Transfer {
        handle: 0,
        delivery_id: Some(0),
        delivery_tag: Some(Bytes::from_static(b"t")),
        ..Transfer::default()
    };
    let mut out = BytesMut::new();
    write_frame(&mut out, 0, &t.into(), &[0xa1, 0x01, b'x']);
    let got = c.exchange(out);
    let d = dispositions(&got);
    let Some(DeliveryState::Rejected(r)) = &d[0].state else {
        panic!("{got:?}");
    };
    assert_eq!(
        r.error.as_ref().map(|e| e.condition.as_str()),
        Some("amqp:decode-error")
    );
    assert!(error_of(&got).is_none());
}

#[tokio::test]
async fn messages_from_the_other_protocols_reach_1_0_consumers() {
    let mut c = open().await;
    declare(&c, "q");
    let b = c.broker();
    let mut m = ferry_core::MessageParts::new("", "q", Bytes::from_static(b"plain"));
    m.persistent = true;
    b.publish(b.default_exchange(), m.build()).unwrap();
    c.begin(0);
    c.attach_receiver(0, 1, "q");
    let t = transfers(&c.credit(0, 1, 0, 1));
    let got = Message::decode(t[0].1.clone()).unwrap();
    assert!(got.header.unwrap().durable);
    assert_eq!(got.body, Body::Data(vec![Bytes::from_static(b"plain")]));
}

#[tokio::test]
async fn a_large_body_goes_out_in_one_frame_exactly_as_it_came() {
    let mut c = open().await;
    declare(&c, "q");
    c.begin(0);
    c.attach_sender(0, 0, Some("q"));
    let mut footer = Annotations::new();
    footer.push("x-check".into(), Value::from("sum"));
    let body: Vec<u8> = (0..40_000u32).map(|i| (i % 251) as u8).collect();
    let sent = Message {
        properties: Some(Properties {
            subject: Some("big".into()),
            ..Properties::default()
        }),
        body: Body::Data(vec![Bytes::from(body)]),
        footer: Some(footer),
        ..Message::default()
    };
    c.transfer(0, 0, 0, false, &sent);
    c.attach_receiver(0, 1, "q");
    // Two deliveries back to back: the second's frame follows the first's spliced body.
    c.transfer(0, 0, 1, false, &sent);
    let t = transfers(&c.credit(0, 1, 0, 2));
    assert_eq!(t.len(), 2, "each in one frame");
    let mut wire = BytesMut::new();
    sent.encode(&mut wire);
    for (transfer, payload) in &t {
        assert!(!transfer.more);
        assert_eq!(&payload[..], &wire[..], "rebuilt byte for byte");
    }
}

#[tokio::test]
async fn management_sees_the_messages_a_connection_published_and_was_sent() {
    let mut c = open().await;
    declare(&c, "q");
    c.begin(0);
    c.attach_sender(0, 0, Some("q"));
    let message = Message {
        body: Body::Value(Value::from("m")),
        ..Message::default()
    };
    for id in 0..3 {
        c.transfer(0, 0, id, false, &message);
    }
    c.attach_receiver(0, 1, "q");
    assert_eq!(transfers(&c.credit(0, 1, 0, 2)).len(), 2);
    let t = c.broker().connections().list()[0].traffic;
    assert_eq!((t.messages_in, t.messages_out), (3, 2));
}
