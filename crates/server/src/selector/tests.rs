use bytes::{Bytes, BytesMut};
use ferry_amqp010::{
    DeliveryMode, DeliveryPriority, DeliveryProperties, Map, MessageHeader, MessageProperties, Str,
    Value as V010,
};
use ferry_amqp091::{FieldTable, LongStr, ShortStr};
use ferry_amqp1::{
    Body, Message as Amqp1Message, RawMessage, Str as Str1, Symbol, Timestamp, Uuid,
};
use ferry_core::{MessageParts, ProtocolHeader};

use super::*;
use crate::bridge::amqp1::stored;

fn over_amqp1(m: &Amqp1Message, priority: u8, persistent: bool) -> Message {
    let mut wire = BytesMut::new();
    m.encode(&mut wire);
    let raw = RawMessage::parse(wire.freeze()).unwrap();
    let split = stored::split(&raw);
    MessageParts {
        header: ProtocolHeader::Amqp1(split.stored),
        body: split.body,
        priority,
        persistent,
        ..MessageParts::new("", "q", Bytes::new())
    }
    .build()
}

fn jms_message() -> Message {
    let mut app = ApplicationProperties::new();
    app.push(Str1::from("colour"), V1::from("blue"));
    app.push(Str1::from("weight"), V1::Int(2600));
    app.push(Str1::from("ratio"), V1::Double(0.5));
    app.push(Str1::from("urgent"), V1::Bool(true));
    app.push(Str1::from("tag"), V1::Symbol(Symbol::from("sym")));
    app.push(Str1::from("blob"), V1::Binary(Bytes::from_static(b"x")));
    over_amqp1(
        &Amqp1Message {
            header: Some(Header {
                durable: true,
                priority: 7,
                delivery_count: 2,
                ..Header::default()
            }),
            properties: Some(Properties {
                message_id: Some(MessageId::String(Str1::from("ID:abc:1"))),
                correlation_id: Some(MessageId::String(Str1::from("corr-1"))),
                subject: Some(Str1::from("car")),
                user_id: Some(Bytes::from_static(b"bob")),
                creation_time: Some(Timestamp(1_700_000_000_123)),
                group_id: Some(Str1::from("g1")),
                group_sequence: Some(3),
                ..Properties::default()
            }),
            application_properties: Some(app),
            body: Body::Data(vec![Bytes::from_static(b"payload")]),
            ..Amqp1Message::default()
        },
        7,
        true,
    )
}

fn matches(selector: &str, m: &Message) -> bool {
    JmsSelector::parse(selector)
        .unwrap()
        .expect("not blank")
        .matches(m)
}

#[test]
fn application_properties_of_a_1_0_message_by_type() {
    let m = jms_message();
    assert!(matches("colour = 'blue' AND weight > 2500", &m));
    assert!(!matches("colour = 'red'", &m));
    assert!(matches("ratio < 1 AND ratio > 0.25", &m));
    assert!(matches("urgent", &m));
    assert!(matches("tag = 'sym'", &m), "symbols read as strings");
    assert!(matches("blob IS NULL", &m), "binaries are no JMS type");
    assert!(matches("missing IS NULL", &m));
    assert!(!matches("missing = 1", &m));
}

#[test]
fn jms_header_fields_of_a_1_0_message_as_qpid_jms_names_them() {
    let m = jms_message();
    for selector in [
        "JMSType = 'car'",
        "JMSMessageID = 'ID:abc:1'",
        "JMSCorrelationID = 'corr-1'",
        "JMSPriority = 7",
        "JMSDeliveryMode = 'PERSISTENT'",
        "JMSTimestamp = 1700000000123",
        "JMSExpiration = 0",
        "JMSXUserID = 'bob'",
        "JMSXGroupID = 'g1' AND JMSXGroupSeq = 3",
        "JMSXDeliveryCount = 3",
    ] {
        assert!(matches(selector, &m), "{selector}");
    }
    let plain = over_amqp1(&Amqp1Message::default(), 4, false);
    assert!(matches("JMSDeliveryMode = 'NON_PERSISTENT'", &plain));
    assert!(matches("JMSType IS NULL AND JMSMessageID IS NULL", &plain));
    assert!(matches("JMSPriority = 4", &plain));
}

#[test]
fn ids_of_other_types_take_qpid_jms_prefixes() {
    let with_ids = |id: MessageId, corr: MessageId| {
        over_amqp1(
            &Amqp1Message {
                properties: Some(Properties {
                    message_id: Some(id),
                    correlation_id: Some(corr),
                    ..Properties::default()
                }),
                ..Amqp1Message::default()
            },
            4,
            false,
        )
    };
    let m = with_ids(
        MessageId::Ulong(7),
        MessageId::Binary(Bytes::from_static(&[1, 171])),
    );
    assert!(matches("JMSMessageID = 'ID:AMQP_ULONG:7'", &m));
    assert!(matches("JMSCorrelationID = 'ID:AMQP_BINARY:01AB'", &m));
    let m = with_ids(
        MessageId::String(Str1::from("plain")),
        MessageId::Uuid(Uuid([0; 16])),
    );
    assert!(matches("JMSMessageID = 'ID:AMQP_NO_PREFIX:plain'", &m));
    assert!(matches(
        "JMSCorrelationID = 'ID:AMQP_UUID:00000000-0000-0000-0000-000000000000'",
        &m
    ));
}

#[test]
fn a_0_9_1_message_by_its_properties_and_headers() {
    let mut headers = FieldTable::new();
    headers.push(ShortStr::from_static("n"), FieldValue::I32(7));
    headers.push(
        ShortStr::from_static("s"),
        FieldValue::LongStr(LongStr::from_static("text")),
    );
    let props = BasicProperties {
        delivery_mode: Some(2),
        priority: Some(3),
        message_id: Some(ShortStr::from_static("m-1")),
        correlation_id: Some(ShortStr::from_static("c-1")),
        timestamp: Some(1_700_000_000),
        kind: Some(ShortStr::from_static("order")),
        headers: Some(headers),
        ..BasicProperties::default()
    };
    let m = MessageParts {
        header: ProtocolHeader::Amqp091(RawProperties::encode(&props).as_bytes().clone()),
        priority: 3,
        persistent: true,
        ..MessageParts::new("", "q", Bytes::new())
    }
    .build();
    assert!(matches("n = 7 AND s = 'text'", &m));
    assert!(matches(
        "JMSType = 'order' AND JMSMessageID = 'm-1' AND JMSCorrelationID = 'c-1'",
        &m
    ));
    assert!(matches("JMSTimestamp = 1700000000 AND JMSPriority = 3", &m));
    assert!(!matches("n > 7", &m));
}

#[test]
fn a_0_10_message_by_its_application_headers() {
    let mut app = Map::new();
    app.insert("colour", V010::Str16(Str::from("red")));
    app.insert("size", V010::Int32(12));
    app.insert("x-jms-type", V010::Str16(Str::from("car")));
    let header = MessageHeader {
        delivery: Some(DeliveryProperties {
            delivery_mode: Some(DeliveryMode::Persistent),
            priority: DeliveryPriority::from_code(6),
            ..DeliveryProperties::default()
        }),
        properties: Some(MessageProperties {
            message_id: Some([0x11; 16]),
            correlation_id: Some(Bytes::from_static(b"c-1")),
            application_headers: Some(app),
            ..MessageProperties::default()
        }),
        other: Vec::new(),
    };
    let mut segment = BytesMut::new();
    header.encode(&mut segment).unwrap();
    let m = MessageParts {
        header: ProtocolHeader::Amqp010(segment.freeze()),
        priority: 6,
        persistent: true,
        ..MessageParts::new("", "q", Bytes::new())
    }
    .build();
    assert!(matches("colour = 'red' AND size BETWEEN 10 AND 20", &m));
    assert!(matches("JMSCorrelationID = 'c-1' AND JMSPriority = 6", &m));
    // As Qpid JMS 0-x shows them over 0-10.
    assert!(matches("JMSType = 'car'", &m));
    assert!(matches(
        "JMSMessageID = 'ID:11111111-1111-1111-1111-111111111111'",
        &m
    ));
    assert!(!matches("colour LIKE 'b%'", &m));
}

#[test]
fn blank_text_is_no_selector_and_bad_text_an_error() {
    assert!(JmsSelector::parse("").unwrap().is_none());
    assert!(JmsSelector::parse("  \t").unwrap().is_none());
    assert!(JmsSelector::parse("colour = ").is_err());
    assert!(JmsSelector::parse("colour = 'blue").is_err());
    // The parser may quote the peer's text; what goes back to the peer stays bounded.
    let huge = format!("a = {}", "9".repeat(60_000));
    let e = JmsSelector::parse(&huge).unwrap_err();
    assert!(e.to_string().len() > 60_000);
    assert!(refusal(&e).len() <= 512);
}

#[test]
fn a_1_0_messages_fields_by_qpidds_amqp_names() {
    let m = jms_message();
    for selector in [
        "amqp.message_id = 'ID:abc:1'",
        "amqp.correlation_id = 'corr-1'",
        "amqp.priority = 7 AND amqp.durable AND amqp.delivery_count = 2",
        "amqp.subject = 'car' AND amqp.user_id = 'bob'",
        "amqp.creation_time = 1700000000123",
        "amqp.group_id = 'g1' AND amqp.group_sequence = 3",
        "amqp.to IS NULL AND amqp.nonsense IS NULL",
    ] {
        assert!(matches(selector, &m), "{selector}");
    }
    // qpidd's broker_1_0 special-fields test: ids as they are.
    let ids = over_amqp1(
        &Amqp1Message {
            properties: Some(Properties {
                message_id: Some(MessageId::String(Str1::from("c"))),
                correlation_id: Some(MessageId::Ulong(5)),
                ..Properties::default()
            }),
            ..Amqp1Message::default()
        },
        1,
        false,
    );
    assert!(matches(
        "amqp.message_id = 'c' AND amqp.correlation_id = 5",
        &ids
    ));
}

#[test]
fn messages_looked_at_in_turn_are_each_read_for_themselves() {
    // The thread keeps the last message decoded: alternating messages, and one built after
    // another was dropped, must each be read afresh.
    let with_colour = |colour: &'static str| {
        let mut headers = FieldTable::new();
        headers.push(
            ShortStr::from_static("colour"),
            FieldValue::LongStr(LongStr::from_static(colour)),
        );
        let props = BasicProperties {
            headers: Some(headers),
            ..BasicProperties::default()
        };
        MessageParts {
            header: ProtocolHeader::Amqp091(RawProperties::encode(&props).as_bytes().clone()),
            ..MessageParts::new("", "q", Bytes::new())
        }
        .build()
    };
    let red = JmsSelector::parse("colour = 'red'").unwrap().unwrap();
    let (r, b) = (with_colour("red"), with_colour("blue"));
    for _ in 0..3 {
        assert!(red.matches(&r));
        assert!(red.matches(&r));
        assert!(!red.matches(&b));
    }
    for colour in ["red", "blue", "red", "blue"] {
        let m = with_colour(colour);
        assert_eq!(red.matches(&m), colour == "red");
        drop(m);
    }
    // A 1.0 message after a 0-9-1 one, and back.
    assert!(!red.matches(&jms_message()));
    assert!(red.matches(&r));
}
