//! Messages crossing protocols: the 0-9-1 properties a 0-9-1 consumer sees for a message
//! published over 0-10, and the 0-10 header a 0-10 consumer sees for one published over
//! 0-9-1 (docs/PROTOCOL-MAPPING.md); AMQP 1.0 both ways in [`amqp1`]. Each protocol layer keeps its own messages' headers as
//! they arrived; only traffic that crosses pays for a translation, per delivery.

use bytes::{Bytes, BytesMut};
use ferry_amqp010::{
    DeliveryMode, DeliveryPriority, DeliveryProperties, Map, MessageHeader, MessageProperties,
    ReplyTo, Str, Value,
};
use ferry_amqp091::{BasicProperties, FieldTable, FieldValue, LongStr, RawProperties, ShortStr};
use ferry_core::{Header, Message};

pub mod amqp1;

fn short(bytes: impl Into<Bytes>) -> Option<ShortStr> {
    ShortStr::new(bytes.into()).ok()
}

/// The properties a 0-9-1 consumer sees for a message published over 0-10.
///
/// Mapping (see docs/PROTOCOL-MAPPING.md): content-type, content-encoding, correlation-id,
/// user-id and app-id carry over; message-id (a UUID) becomes its hyphenated text; reply-to
/// becomes the routing key when the exchange is the default one, else `exchange/key`;
/// priority and delivery-mode carry over; ttl becomes `expiration` in milliseconds;
/// application-headers become `headers`.
pub fn from_amqp010_header(segment: &[u8]) -> BasicProperties {
    let mut props = BasicProperties::default();
    let Ok(header) = MessageHeader::decode(Bytes::copy_from_slice(segment)) else {
        return props;
    };
    if let Some(dp) = header.delivery {
        props.priority = dp.priority.map(|p| p as u8);
        props.delivery_mode = dp.delivery_mode.map(|m| m as u8);
        props.expiration = dp.ttl.and_then(|ttl| short(ttl.to_string()));
        props.timestamp = dp.timestamp;
    }
    if let Some(mp) = header.properties {
        props.content_type = mp.content_type.and_then(|s| short(s.into_bytes()));
        props.content_encoding = mp.content_encoding.and_then(|s| short(s.into_bytes()));
        props.correlation_id = mp.correlation_id.and_then(short);
        props.user_id = mp.user_id.and_then(short);
        props.app_id = mp.app_id.and_then(short);
        props.message_id = mp.message_id.and_then(|id| short(uuid_text(&id)));
        props.reply_to = mp.reply_to.and_then(|r| {
            let key = r.routing_key.map(Str::into_bytes).unwrap_or_default();
            match r.exchange.filter(|e| !e.is_empty()) {
                None => short(key),
                Some(ex) => {
                    let mut text = BytesMut::from(ex.as_bytes());
                    text.extend_from_slice(b"/");
                    text.extend_from_slice(&key);
                    short(text.freeze())
                }
            }
        });
        props.headers = mp.application_headers.map(|map| map_to_table(&map));
    }
    props
}

fn map_to_table(map: &Map) -> FieldTable {
    let mut table = FieldTable::new();
    for (k, v) in map.iter() {
        let Some(key) = short(k.as_bytes().to_vec()) else {
            continue;
        };
        let value = match v {
            Value::Bool(b) => FieldValue::Bool(*b),
            Value::Int8(v) => FieldValue::I8(*v),
            Value::Uint8(v) | Value::Char(v) => FieldValue::U8(*v),
            Value::Int16(v) => FieldValue::I16(*v),
            Value::Uint16(v) => FieldValue::U16(*v),
            Value::Int32(v) => FieldValue::I32(*v),
            Value::Uint32(v) => FieldValue::U32(*v),
            Value::Int64(v) => FieldValue::I64(*v),
            Value::Uint64(v) => match i64::try_from(*v) {
                Ok(v) => FieldValue::I64(v),
                Err(_) => continue,
            },
            Value::Float(v) => FieldValue::F32(*v),
            Value::Double(v) => FieldValue::F64(*v),
            Value::Datetime(v) => FieldValue::Timestamp(*v),
            Value::Str8(s) | Value::Str16(s) => match LongStr::new(s.clone().into_bytes()) {
                Ok(s) => FieldValue::LongStr(s),
                Err(_) => continue,
            },
            Value::Vbin8(b) | Value::Vbin16(b) | Value::Vbin32(b) => {
                match LongStr::new(b.clone()) {
                    Ok(s) => FieldValue::ByteArray(s),
                    Err(_) => continue,
                }
            }
            Value::Uuid(id) => match LongStr::new(Bytes::from(uuid_text(id))) {
                Ok(s) => FieldValue::LongStr(s),
                Err(_) => continue,
            },
            Value::Map(m) => FieldValue::Table(map_to_table(m)),
            Value::Void => FieldValue::Void,
            _ => continue,
        };
        table.push(key, value);
    }
    table
}

pub(crate) fn uuid_text(id: &[u8; 16]) -> String {
    let mut s = String::with_capacity(36);
    for (i, b) in id.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            s.push('-');
        }
        s.push_str(&format!("{b:02x}"));
    }
    s
}

fn parse_uuid(text: &[u8]) -> Option<[u8; 16]> {
    let hex: Vec<u8> = text.iter().copied().filter(|c| *c != b'-').collect();
    if hex.len() != 32 || text.len() != 36 {
        return None;
    }
    let mut id = [0u8; 16];
    for (slot, pair) in id.iter_mut().zip(hex.chunks(2)) {
        let s = std::str::from_utf8(pair).ok()?;
        *slot = u8::from_str_radix(s, 16).ok()?;
    }
    Some(id)
}

/// The 0-10 header segment a 0-10 consumer should see for a message published over 0-9-1;
/// the inverse of [`from_amqp010_header`]. For the 0-10 layer to call when it delivers a
/// message whose header is `ProtocolHeader::Amqp091` (see [`amqp010_header_for`]).
///
/// A message-id that is not a UUID (0-10's only form) is kept as application header
/// `x-amqp-0-9-1-message-id`; `expiration` becomes ttl; `kind` (0-9-1 `type`) becomes
/// application header `x-amqp-0-9-1-type`; a reply-to of the form `exchange/key` is split.
pub fn to_amqp010_header(props: &BasicProperties, exchange: &[u8], routing_key: &[u8]) -> Bytes {
    let dp = DeliveryProperties {
        priority: props
            .priority
            .and_then(|p| DeliveryPriority::from_code(p.min(9))),
        delivery_mode: props.delivery_mode.and_then(|m| match m {
            2 => Some(DeliveryMode::Persistent),
            1 => Some(DeliveryMode::NonPersistent),
            _ => None,
        }),
        ttl: props
            .expiration
            .as_ref()
            .and_then(|e| e.to_str().ok()?.trim().parse().ok()),
        timestamp: props.timestamp,
        exchange: Some(Str::from_bytes(Bytes::copy_from_slice(exchange))),
        routing_key: Some(Str::from_bytes(Bytes::copy_from_slice(routing_key))),
        ..DeliveryProperties::default()
    };
    let mut headers = props.headers.as_ref().map(table_to_map).unwrap_or_default();
    let message_id = props.message_id.as_ref().and_then(|id| {
        let parsed = parse_uuid(id.as_bytes());
        if parsed.is_none() {
            headers.insert(
                "x-amqp-0-9-1-message-id",
                Value::Str16(Str::from_bytes(id.bytes().clone())),
            );
        }
        parsed
    });
    if let Some(kind) = &props.kind {
        headers.insert(
            "x-amqp-0-9-1-type",
            Value::Str16(Str::from_bytes(kind.bytes().clone())),
        );
    }
    let reply_to = props.reply_to.as_ref().map(|r| {
        let raw = r.bytes();
        match raw.iter().position(|b| *b == b'/') {
            Some(at) => ReplyTo {
                exchange: Some(Str::from_bytes(raw.slice(..at))),
                routing_key: Some(Str::from_bytes(raw.slice(at + 1..))),
            },
            None => ReplyTo {
                exchange: None,
                routing_key: Some(Str::from_bytes(raw.clone())),
            },
        }
    });
    let mp = MessageProperties {
        message_id,
        correlation_id: props.correlation_id.as_ref().map(|c| c.bytes().clone()),
        reply_to,
        content_type: props
            .content_type
            .as_ref()
            .map(|c| Str::from_bytes(c.bytes().clone())),
        content_encoding: props
            .content_encoding
            .as_ref()
            .map(|c| Str::from_bytes(c.bytes().clone())),
        user_id: props.user_id.as_ref().map(|u| u.bytes().clone()),
        app_id: props.app_id.as_ref().map(|a| a.bytes().clone()),
        application_headers: (!headers.is_empty()).then_some(headers),
        ..MessageProperties::default()
    };
    encode_010_header(dp, mp)
}

/// A 0-10 header segment of the two structs; empty if they cannot be encoded (values too
/// long for their fields), which the consumer then sees as a message without properties.
pub fn encode_010_header(dp: DeliveryProperties, mp: MessageProperties) -> Bytes {
    let header = MessageHeader {
        delivery: Some(dp),
        properties: Some(mp),
        other: Vec::new(),
    };
    let mut out = BytesMut::new();
    match header.encode(&mut out) {
        Ok(()) => out.freeze(),
        Err(_) => Bytes::new(),
    }
}

/// The 0-10 header for a core message published over 0-9-1 ([`to_amqp010_header`]) or 1.0
/// ([`amqp1::to_amqp010`]); `None` for other messages (and for 0-9-1 properties that no
/// longer decode, which cannot happen for what we stored).
pub fn amqp010_header_for(message: &Message) -> Option<Bytes> {
    let raw = match message.header() {
        Header::Amqp091(raw) => raw,
        Header::Amqp1(_) => return Some(amqp1::to_amqp010(message)),
        _ => return None,
    };
    let props = RawProperties::parse(Bytes::copy_from_slice(raw))
        .ok()?
        .decode();
    Some(to_amqp010_header(
        &props,
        message.exchange(),
        message.routing_key(),
    ))
}

fn table_to_map(table: &FieldTable) -> Map {
    // Collected, not inserted one by one: a table fills a content header frame, up to
    // thousands of entries, and this runs for every delivery to a 0-10 consumer. A name
    // sent twice shows its first value, the one a headers exchange matched on.
    Map::from_first_values(table.iter().filter_map(|(k, v)| {
        let value = match v {
            FieldValue::Bool(b) => Value::Bool(*b),
            FieldValue::I8(v) => Value::Int8(*v),
            FieldValue::U8(v) => Value::Uint8(*v),
            FieldValue::I16(v) => Value::Int16(*v),
            FieldValue::U16(v) => Value::Uint16(*v),
            FieldValue::I32(v) => Value::Int32(*v),
            FieldValue::U32(v) => Value::Uint32(*v),
            FieldValue::I64(v) => Value::Int64(*v),
            FieldValue::F32(v) => Value::Float(*v),
            FieldValue::F64(v) => Value::Double(*v),
            FieldValue::Timestamp(v) => Value::Datetime(*v),
            FieldValue::LongStr(s) => Value::Str16(Str::from_bytes(s.bytes().clone())),
            FieldValue::ByteArray(b) => Value::Vbin32(b.bytes().clone()),
            FieldValue::Table(t) => Value::Map(table_to_map(t)),
            FieldValue::Void => Value::Void,
            FieldValue::Decimal { .. } | FieldValue::Array(_) => return None,
        };
        Some((Str::from_bytes(k.bytes().clone()), value))
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::amqp091::convert::tests::props;

    #[test]
    fn properties_survive_a_trip_through_0_10() {
        let p = props();
        let segment = to_amqp010_header(&p, b"", b"rk");
        let back = from_amqp010_header(&segment);
        assert_eq!(back.content_type, p.content_type);
        assert_eq!(back.content_encoding, p.content_encoding);
        assert_eq!(back.delivery_mode, Some(2));
        assert_eq!(back.priority, Some(5));
        assert_eq!(back.correlation_id, p.correlation_id);
        assert_eq!(back.reply_to, p.reply_to);
        assert_eq!(back.expiration, p.expiration);
        assert_eq!(back.message_id, p.message_id);
        assert_eq!(back.app_id, p.app_id);
        let h = back.headers.unwrap();
        assert_eq!(h.get("n"), Some(&FieldValue::I32(7)));
        assert!(matches!(h.get("s"), Some(FieldValue::LongStr(s)) if s.as_bytes() == b"text"));
        let decoded = MessageHeader::decode(segment).unwrap();
        let dp = decoded.delivery.unwrap();
        assert_eq!(dp.routing_key.unwrap().as_bytes(), b"rk");
        assert_eq!(dp.ttl, Some(60000));
    }

    #[test]
    fn a_header_table_filling_a_frame_reaches_0_10_whole_and_in_order() {
        // 25,000 entries fit a 131,072-octet content header frame; built in time linear in
        // them, since this runs for every delivery to a 0-10 consumer.
        let mut table = FieldTable::new();
        for i in 0..25_000i32 {
            table.push(ShortStr::new(format!("h{i}")).unwrap(), FieldValue::I32(i));
        }
        // A repeated name shows its first value, the one a headers exchange matches on.
        table.push(ShortStr::new("h3".to_owned()).unwrap(), FieldValue::I32(-3));
        let p = BasicProperties {
            headers: Some(table),
            ..BasicProperties::default()
        };
        let h = MessageHeader::decode(to_amqp010_header(&p, b"", b"rk")).unwrap();
        let headers = h.properties.unwrap().application_headers.unwrap();
        assert_eq!(headers.len(), 25_000);
        for (i, (k, v)) in headers.iter().enumerate() {
            assert_eq!(
                (k.to_string(), v),
                (format!("h{i}"), &Value::Int32(i as i32))
            );
        }
    }

    #[test]
    fn non_uuid_message_ids_and_types_become_headers() {
        let p = BasicProperties {
            message_id: Some(ShortStr::from_static("job-42")),
            kind: Some(ShortStr::from_static("task")),
            reply_to: Some(ShortStr::from_static("amq.direct/replies")),
            ..BasicProperties::default()
        };
        let h = MessageHeader::decode(to_amqp010_header(&p, b"x", b"k")).unwrap();
        let mp = h.properties.unwrap();
        assert_eq!(mp.message_id, None);
        let app = mp.application_headers.unwrap();
        assert!(app.get("x-amqp-0-9-1-message-id").is_some());
        assert!(app.get("x-amqp-0-9-1-type").is_some());
        let r = mp.reply_to.unwrap();
        assert_eq!(r.exchange.unwrap().as_bytes(), b"amq.direct");
        assert_eq!(r.routing_key.unwrap().as_bytes(), b"replies");
    }
}
