use super::*;
use ferry_amqp091::LongStr;
use ferry_amqp1::RawMessage;
use ferry_core::{MessageParts, ProtocolHeader};

fn published(m: &Amqp1Message, exchange: &str, key: &str) -> (Message, Bytes) {
    let mut wire = BytesMut::new();
    m.encode(&mut wire);
    let wire = wire.freeze();
    let raw = RawMessage::parse(wire.clone()).unwrap();
    let split = stored::split(&raw);
    let message = MessageParts {
        header: ProtocolHeader::Amqp1(split.stored),
        body: split.body,
        exchange: Bytes::copy_from_slice(exchange.as_bytes()),
        routing_key: Bytes::copy_from_slice(key.as_bytes()),
        persistent: true,
        ..MessageParts::default()
    }
    .build();
    (message, wire)
}

fn sample() -> Amqp1Message {
    let mut app = ApplicationProperties::new();
    app.push(Str1::from("colour"), V1::from("blue"));
    app.push(Str1::from("count"), V1::Int(42));
    app.push(Str1::from(APP_ID), V1::from("app-1"));
    let mut annotations = Annotations::new();
    annotations.push(AnnotationKey::from("x-opt-jms-msg-type"), V1::Byte(5));
    annotations.push(AnnotationKey::from("other"), V1::Int(1));
    Amqp1Message {
        header: Some(Header {
            durable: true,
            priority: 7,
            ttl: Some(60_000),
            ..Header::default()
        }),
        message_annotations: Some(annotations),
        properties: Some(Properties {
            message_id: Some(MessageId::String(Str1::from("ID:abc"))),
            user_id: Some(Bytes::from_static(b"bob")),
            to: Some(Str1::from("q1")),
            subject: Some(Str1::from("news")),
            reply_to: Some(Str1::from("amq.direct/replies")),
            correlation_id: Some(MessageId::Ulong(99)),
            content_type: Some(Symbol::from("application/json")),
            content_encoding: Some(Symbol::from("utf-8")),
            creation_time: Some(Timestamp(1_700_000_000_000)),
            group_id: Some(Str1::from("g")),
            group_sequence: Some(3),
            ..Properties::default()
        }),
        application_properties: Some(app),
        body: Body::Data(vec![Bytes::from_static(b"payload")]),
        ..Amqp1Message::default()
    }
}

#[test]
fn a_1_0_message_goes_to_0_10_as_qpidd_maps_it() {
    let (m, _) = published(&sample(), "", "q1");
    assert_eq!(m.body(), b"payload");
    let h = MessageHeader::decode(to_amqp010(&m)).unwrap();
    let dp = h.delivery.unwrap();
    assert_eq!(dp.delivery_mode, Some(DeliveryMode::Persistent));
    assert_eq!(dp.priority.map(|p| p as u8), Some(7));
    assert_eq!(dp.ttl, Some(60_000));
    assert_eq!(dp.routing_key.unwrap().as_bytes(), b"q1");
    assert_eq!(dp.timestamp, Some(1_700_000_000));
    let mp = h.properties.unwrap();
    assert_eq!(mp.message_id, None, "not a UUID");
    assert_eq!(mp.correlation_id.as_deref(), Some(&b"99"[..]));
    let r = mp.reply_to.unwrap();
    assert_eq!(r.exchange.unwrap().as_bytes(), b"amq.direct");
    assert_eq!(r.routing_key.unwrap().as_bytes(), b"replies");
    assert_eq!(mp.content_type.unwrap().as_bytes(), b"application/json");
    assert_eq!(mp.content_encoding.unwrap().as_bytes(), b"utf-8");
    assert_eq!(mp.user_id.as_deref(), Some(&b"bob"[..]));
    assert_eq!(mp.app_id.as_deref(), Some(&b"app-1"[..]));
    let app = mp.application_headers.unwrap();
    assert_eq!(app.get("colour"), Some(&V010::Str16(Str::from("blue"))));
    assert_eq!(app.get("count"), Some(&V010::Int32(42)));
    assert_eq!(app.get(SUBJECT), Some(&V010::Str16(Str::from("news"))));
    assert_eq!(app.get("x-opt-jms-msg-type"), Some(&V010::Int8(5)));
    assert_eq!(app.get(MESSAGE_ID), Some(&V010::Str16(Str::from("ID:abc"))));
    assert_eq!(app.get(GROUP_ID), Some(&V010::Str16(Str::from("g"))));
    assert!(app.get("other").is_none(), "only x- annotations travel");
    assert!(app.get(APP_ID).is_none());
}

#[test]
fn tens_of_thousands_of_application_properties_reach_0_10_whole_and_in_order() {
    // Built in time linear in them: this conversion runs for every delivery.
    let mut m = sample();
    let mut app = ApplicationProperties::new();
    for i in 0..30_000i32 {
        app.push(Str1::from(format!("p{i}").as_str()), V1::Int(i));
    }
    // A repeated name shows its first value, the one a headers exchange matches on, and
    // an x- annotation named as a property does not replace the property.
    app.push(Str1::from("p7"), V1::Int(-7));
    app.push(Str1::from("x-opt-jms-msg-type"), V1::Int(-5));
    m.application_properties = Some(app);
    let (message, _) = published(&m, "", "q1");
    let h = MessageHeader::decode(to_amqp010(&message)).unwrap();
    let headers = h.properties.unwrap().application_headers.unwrap();
    let entries = headers.entries();
    for (i, (k, v)) in entries.iter().take(30_000).enumerate() {
        assert_eq!(
            (k.to_string(), v),
            (format!("p{i}"), &V010::Int32(i as i32))
        );
    }
    assert_eq!(headers.get("x-opt-jms-msg-type"), Some(&V010::Int32(-5)));
}

#[test]
fn a_1_0_message_goes_to_0_9_1_with_text_ids_and_a_timestamp() {
    let (m, _) = published(&sample(), "", "q1");
    let p = to_amqp091(&m);
    assert_eq!(p.delivery_mode, Some(2));
    assert_eq!(p.priority, Some(7));
    assert_eq!(p.expiration.unwrap().as_bytes(), b"60000");
    assert_eq!(p.message_id.unwrap().as_bytes(), b"ID:abc");
    assert_eq!(p.correlation_id.unwrap().as_bytes(), b"99");
    assert_eq!(p.reply_to.unwrap().as_bytes(), b"amq.direct/replies");
    assert_eq!(p.timestamp, Some(1_700_000_000));
    assert_eq!(p.app_id.unwrap().as_bytes(), b"app-1");
    assert_eq!(p.kind, None);
    let h = p.headers.unwrap();
    assert_eq!(h.get("count"), Some(&FieldValue::I32(42)));
    assert!(h.get(SUBJECT).is_some());
    assert!(h.get(MESSAGE_ID).is_none(), "0-9-1 has text message ids");
}

#[test]
fn text_and_encoded_bodies_are_labelled_for_the_other_protocols() {
    let text = Amqp1Message {
        body: Body::Value(V1::from("hello")),
        ..Amqp1Message::default()
    };
    let (m, _) = published(&text, "amq.topic", "k");
    assert_eq!(m.body(), b"hello");
    let h = MessageHeader::decode(to_amqp010(&m)).unwrap();
    assert_eq!(
        h.properties.unwrap().content_type.unwrap().as_bytes(),
        b"text/plain"
    );
    assert_eq!(
        to_amqp091(&m).content_type.unwrap().as_bytes(),
        b"text/plain"
    );
    let map = Amqp1Message {
        body: Body::Value(V1::Int(7)),
        ..Amqp1Message::default()
    };
    let (m, _) = published(&map, "amq.topic", "k");
    assert_eq!(to_amqp091(&m).kind.unwrap().as_bytes(), b"amqp-1.0");
    let app = MessageHeader::decode(to_amqp010(&m))
        .unwrap()
        .properties
        .unwrap()
        .application_headers
        .unwrap();
    assert_eq!(
        app.get(TYPE_HEADER),
        Some(&V010::Str16(Str::from("amqp-1.0")))
    );
}

#[test]
fn a_1_0_consumer_gets_the_bare_message_byte_for_byte() {
    let (m, wire) = published(&sample(), "", "q1");
    let raw = RawMessage::parse(wire.clone()).unwrap();
    let mut out = BytesMut::new();
    write_for_amqp1(&mut out, &m, 0);
    assert!(out.ends_with(raw.bare()), "bare message unchanged");
    let back = RawMessage::parse(out.freeze()).unwrap();
    assert_eq!(back.header().unwrap(), raw.header().unwrap());
    assert_eq!(
        back.raw_message_annotations(),
        raw.raw_message_annotations()
    );
    // Redelivered: the header counts the attempt, nothing else changes.
    let mut out = BytesMut::new();
    write_for_amqp1(&mut out, &m, 1);
    let back = RawMessage::parse(out.freeze()).unwrap();
    assert_eq!(back.header().unwrap().unwrap().delivery_count, 1);
    assert_eq!(back.bare(), raw.bare());
    // Without a header section and not redelivered: none is added.
    let (m, wire) = published(&Amqp1Message::data(&b"x"[..]), "", "q");
    let mut out = BytesMut::new();
    write_for_amqp1(
        &mut out,
        &MessageParts {
            persistent: false,
            priority: 4,
            ..m.to_parts()
        }
        .build(),
        0,
    );
    assert_eq!(&out[..], &wire[..]);
}

#[test]
fn a_0_10_message_reaches_1_0_with_qpidd_properties() {
    let mut app = Map::new();
    app.insert("colour", V010::Str16(Str::from("red")));
    app.insert("x-opt-jms-msg-type", V010::Int8(3));
    app.insert(SUBJECT, V010::Str16(Str::from("ignored: routing key wins")));
    let header = MessageHeader {
        delivery: Some(DeliveryProperties {
            delivery_mode: Some(DeliveryMode::Persistent),
            priority: DeliveryPriority::from_code(6),
            routing_key: Some(Str::from("news")),
            ..DeliveryProperties::default()
        }),
        properties: Some(MessageProperties {
            message_id: Some([1; 16]),
            correlation_id: Some(Bytes::from_static(b"c-1")),
            reply_to: Some(ReplyTo {
                exchange: Some(Str::from("amq.direct")),
                routing_key: Some(Str::from("r")),
            }),
            content_type: Some(Str::from("text/plain")),
            application_headers: Some(app),
            ..MessageProperties::default()
        }),
        other: Vec::new(),
    };
    let mut segment = BytesMut::new();
    header.encode(&mut segment).unwrap();
    let m = MessageParts {
        header: ProtocolHeader::Amqp010(segment.freeze()),
        exchange: Bytes::from_static(b"amq.topic"),
        routing_key: Bytes::from_static(b"news"),
        body: Bytes::from_static(b"text"),
        persistent: true,
        expires_at: Some(now_ms() + 30_000),
        ..MessageParts::default()
    }
    .build();
    let mut out = BytesMut::new();
    write_for_amqp1(&mut out, &m, 1);
    let got = Amqp1Message::decode(out.freeze()).unwrap();
    let h = got.header.unwrap();
    assert!(h.durable);
    assert_eq!((h.priority, h.delivery_count), (6, 1));
    assert!(h.ttl.is_some_and(|t| t > 25_000 && t <= 30_000));
    let p = got.properties.unwrap();
    assert_eq!(p.message_id, Some(MessageId::Uuid(Uuid([1; 16]))));
    assert_eq!(p.to.unwrap().as_str(), "amq.topic");
    assert_eq!(p.subject.unwrap().as_str(), "news");
    assert_eq!(p.reply_to.unwrap().as_str(), "amq.direct/r");
    assert_eq!(p.correlation_id, Some(MessageId::String(Str1::from("c-1"))));
    assert_eq!(p.content_type.unwrap().as_str(), "text/plain");
    let app = got.application_properties.unwrap();
    assert_eq!(app.get("colour"), Some(&V1::from("red")));
    let ma = got.message_annotations.unwrap();
    assert_eq!(ma.get("x-opt-jms-msg-type"), Some(&V1::Byte(3)));
    assert_eq!(got.body, Body::Data(vec![Bytes::from_static(b"text")]));
}

#[test]
fn a_0_9_1_message_reaches_1_0_with_rabbitmq_properties() {
    let mut headers = FieldTable::new();
    headers.push(ShortStr::from_static("n"), FieldValue::I32(7));
    headers.push(
        ShortStr::from_static("s"),
        FieldValue::LongStr(LongStr::from_static("text")),
    );
    let props = BasicProperties {
        content_type: Some(ShortStr::from_static("application/json")),
        delivery_mode: Some(2),
        message_id: Some(ShortStr::from_static("m-1")),
        correlation_id: Some(ShortStr::from_static("c-1")),
        reply_to: Some(ShortStr::from_static("amq.gen-1")),
        timestamp: Some(1_700_000_000),
        kind: Some(ShortStr::from_static("order")),
        app_id: Some(ShortStr::from_static("shop")),
        headers: Some(headers),
        ..BasicProperties::default()
    };
    let m = MessageParts {
        header: ProtocolHeader::Amqp091(RawProperties::encode(&props).as_bytes().clone()),
        routing_key: Bytes::from_static(b"q"),
        body: Bytes::from_static(b"{}"),
        persistent: true,
        ..MessageParts::default()
    }
    .build();
    let mut out = BytesMut::new();
    write_for_amqp1(&mut out, &m, 0);
    let got = Amqp1Message::decode(out.freeze()).unwrap();
    let h = got.header.unwrap();
    assert!(h.durable);
    assert_eq!(h.priority, 4, "0-9-1 without a priority: 1.0's default");
    let p = got.properties.unwrap();
    assert_eq!(p.message_id, Some(MessageId::String(Str1::from("m-1"))));
    assert_eq!(p.to.unwrap().as_str(), "q");
    assert_eq!(p.subject, None);
    assert_eq!(p.reply_to.unwrap().as_str(), "amq.gen-1");
    assert_eq!(p.creation_time, Some(Timestamp(1_700_000_000_000)));
    let app = got.application_properties.unwrap();
    assert_eq!(app.get("n"), Some(&V1::Int(7)));
    assert_eq!(app.get("s"), Some(&V1::from("text")));
    assert_eq!(app.get(APP_ID), Some(&V1::from("shop")));
    assert_eq!(app.get(TYPE_HEADER), Some(&V1::from("order")));
}

#[test]
fn round_trips_through_the_other_protocols_keep_the_1_0_properties() {
    // 1.0 → 0-10 → 1.0: what qpidd keeps, plus subject, group and annotations.
    let (m, _) = published(&sample(), "", "q1");
    let other = MessageParts {
        header: ProtocolHeader::Amqp010(to_amqp010(&m)),
        ..m.to_parts()
    }
    .build();
    let mut out = BytesMut::new();
    write_for_amqp1(&mut out, &other, 0);
    let got = Amqp1Message::decode(out.freeze()).unwrap();
    let p = got.properties.unwrap();
    assert_eq!(p.subject.unwrap().as_str(), "news");
    assert_eq!(p.group_id.unwrap().as_str(), "g");
    assert_eq!(p.group_sequence, Some(3));
    assert_eq!(p.message_id, Some(MessageId::String(Str1::from("ID:abc"))));
    let ma = got.message_annotations.unwrap();
    assert_eq!(ma.get("x-opt-jms-msg-type"), Some(&V1::Byte(5)));
    let app = got.application_properties.unwrap();
    assert_eq!(app.get("colour"), Some(&V1::from("blue")));
    assert_eq!(app.get(APP_ID), Some(&V1::from("app-1")));
}

#[test]
fn neutral_headers_for_routing() {
    let mut app = ApplicationProperties::new();
    app.push(Str1::from("a"), V1::Int(1));
    app.push(Str1::from("b"), V1::from("x"));
    let h = neutral_headers(&app);
    assert_eq!(h.get("a"), Some(&ferry_core::HeaderValue::Int(1)));
    assert_eq!(h.get("b"), Some(&ferry_core::HeaderValue::Str("x".into())));
}
