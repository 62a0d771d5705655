//! AMQP 1.0 messages crossing to 0-10 and 0-9-1 consumers, and every message going to a
//! 1.0 consumer (docs/PROTOCOL-MAPPING.md, "AMQP 1.0").
//!
//! The mapping follows qpidd's 1.0 plugin (`qpid/broker/amqp/Translation.cpp`) where it has
//! one: properties to their namesakes, subject to the `qpid.subject` application header,
//! reply-to as `exchange/key` text, application properties to application headers. 0-9-1
//! has fields 0-10 lacks (timestamp, expiration text, message-id text, type), which take
//! what RabbitMQ's 1.0 plugin put there. Message annotations whose keys start with `x-`
//! travel as application headers of the same name, and come back as annotations (RabbitMQ's
//! rule), so `x-opt-jms-*` annotations survive a trip through the other protocols.

pub mod stored;

use bytes::{Bytes, BytesMut};
use ferry_amqp010::{
    DeliveryMode, DeliveryPriority, DeliveryProperties, Map, MessageHeader, MessageProperties,
    ReplyTo, Str, Value as V010,
};
use ferry_amqp091::{BasicProperties, FieldTable, FieldValue, RawProperties, ShortStr};
use ferry_amqp1::{
    AnnotationKey, Annotations, ApplicationProperties, Body, Header, Message as Amqp1Message,
    MessageId, Properties, Str as Str1, Symbol, Timestamp, Uuid, Value as V1,
};
use ferry_core::{now_ms, Header as CoreHeader, Message};

use self::stored::{BodyKind, Stored};

/// Application header carrying the 1.0 subject (qpidd's name).
const SUBJECT: &str = "qpid.subject";
/// Application property carrying the 0-10 / 0-9-1 app-id (qpidd's name).
const APP_ID: &str = "x-amqp-0-10.app-id";
/// Where a message-id that is not a UUID goes in 0-10 (which only has UUIDs).
const MESSAGE_ID: &str = "x-amqp-message-id";
const GROUP_ID: &str = "x-amqp-group-id";
const GROUP_SEQUENCE: &str = "x-amqp-group-sequence";
const REPLY_TO_GROUP_ID: &str = "x-amqp-reply-to-group-id";
/// 0-9-1 `type` (and its 0-10 header, as the 0-9-1 bridge names it).
const TYPE_HEADER: &str = "x-amqp-0-9-1-type";
/// The 0-9-1 `type` of a message whose 1.0 body is not plain octets (RabbitMQ's label).
const ENCODED_BODY_TYPE: &str = "amqp-1.0";
const TEXT_PLAIN: &str = "text/plain";

/// The sections of a message published over 1.0 that a translation reads, decoded.
struct Decoded {
    kind: BodyKind,
    header: Header,
    properties: Properties,
    application_properties: Option<ApplicationProperties>,
    annotations: Option<Annotations>,
}

impl Decoded {
    fn of(message: &Message) -> Option<Decoded> {
        let CoreHeader::Amqp1(_) = message.header() else {
            return None;
        };
        let stored = Stored::parse(&message.header_bytes()).ok()?;
        let s = &stored.sections;
        // Sections that do not decode (they were only split on the way in) are left out
        // rather than failing the delivery.
        Some(Decoded {
            kind: stored.kind,
            header: s.header().ok().flatten().unwrap_or_default(),
            properties: s.properties().ok().flatten().unwrap_or_default(),
            application_properties: s.application_properties().ok().flatten(),
            annotations: s.message_annotations().ok().flatten(),
        })
    }

    /// Annotations that travel as headers: symbol keys starting with `x-`.
    fn header_annotations(&self) -> impl Iterator<Item = (&str, &V1)> {
        self.annotations
            .iter()
            .flat_map(|a| a.iter())
            .filter_map(|(k, v)| match k {
                AnnotationKey::Symbol(s) if s.as_str().starts_with("x-") => Some((s.as_str(), v)),
                _ => None,
            })
    }
}

/// Writes the payload of a transfer to a 1.0 consumer: a message published over 1.0 as it
/// came (a new header section in front: delivery count, durable, priority, ttl), any other
/// translated, with its body as one data section.
pub fn write_for_amqp1(out: &mut BytesMut, message: &Message, prior_deliveries: u32) {
    if let Some(stored) = as_sent_over_amqp1(message) {
        let header = native_header(&stored, message, prior_deliveries);
        stored.write(out, header.as_ref(), message.body());
        return;
    }
    let mut m = match message.header() {
        CoreHeader::Amqp010(segment) => from_amqp010(segment, message),
        CoreHeader::Amqp091(raw) => from_amqp091(raw, message),
        // Never written by a protocol layer; only its body and routing are known.
        _ => Amqp1Message {
            header: Some(Header {
                durable: message.persistent(),
                priority: message.priority(),
                ..Header::default()
            }),
            ..Amqp1Message::default()
        },
    };
    if let Some(h) = m.header.as_mut() {
        h.ttl = remaining_ttl(message);
    }
    m.header = m.header.and_then(|h| outgoing_header(h, prior_deliveries));
    m.body = Body::Data(vec![message.body_bytes()]);
    m.encode(out);
}

/// For a message a 1.0 publisher sent: writes what [`write_for_amqp1`] writes before its
/// body and returns what goes after it, so the body itself can go out from where it is.
/// `None`, with nothing written, for a message from another protocol.
pub fn write_amqp1_around_body(
    out: &mut BytesMut,
    message: &Message,
    prior_deliveries: u32,
) -> Option<Bytes> {
    let stored = as_sent_over_amqp1(message)?;
    let header = native_header(&stored, message, prior_deliveries);
    stored.write_before_body(out, header.as_ref());
    Some(stored.after_body())
}

fn as_sent_over_amqp1(message: &Message) -> Option<Stored> {
    match message.header() {
        CoreHeader::Amqp1(_) => Stored::parse(&message.header_bytes()).ok(),
        _ => None,
    }
}

fn native_header(stored: &Stored, message: &Message, prior_deliveries: u32) -> Option<Header> {
    let header = match stored.sections.header() {
        Ok(Some(h)) => h,
        _ => Header {
            durable: message.persistent(),
            priority: message.priority(),
            ..Header::default()
        },
    };
    outgoing_header(header, prior_deliveries)
}

/// The header section as it goes out: counting the broker's earlier deliveries of it
/// (failed attempts, as RabbitMQ counts them; at least one for a message marked
/// redelivered), left out when every field has its default (a header-less message stays
/// header-less).
fn outgoing_header(mut header: Header, prior_deliveries: u32) -> Option<Header> {
    header.delivery_count = header.delivery_count.saturating_add(prior_deliveries);
    (header != Header::default()).then_some(header)
}

/// What is left of the message's time to live, in milliseconds (at least 1: a message
/// still queued has not expired).
fn remaining_ttl(message: &Message) -> Option<u32> {
    let at = message.expires_at()?;
    let left = at.saturating_sub(now_ms()).max(1);
    Some(u32::try_from(left).unwrap_or(u32::MAX))
}

fn id_text(id: &MessageId) -> String {
    match id {
        MessageId::Ulong(n) => n.to_string(),
        MessageId::Uuid(u) => super::uuid_text(&u.0),
        MessageId::Binary(b) => match std::str::from_utf8(b) {
            Ok(s) => s.to_owned(),
            Err(_) => b.iter().map(|b| format!("{b:02x}")).collect(),
        },
        MessageId::String(s) => s.as_str().to_owned(),
    }
}

fn id_bytes(id: &MessageId) -> Bytes {
    match id {
        MessageId::Binary(b) => b.clone(),
        MessageId::String(s) => s.bytes().clone(),
        other => Bytes::from(id_text(other)),
    }
}

/// A 0-10 message-id: a UUID, or 16 octets, or UUID text.
fn id_uuid(id: &MessageId) -> Option<[u8; 16]> {
    match id {
        MessageId::Uuid(u) => Some(u.0),
        MessageId::Binary(b) => <[u8; 16]>::try_from(&b[..]).ok(),
        MessageId::String(s) => super::parse_uuid(s.as_bytes()),
        MessageId::Ulong(_) => None,
    }
}

fn short(text: impl Into<Bytes>) -> Option<ShortStr> {
    ShortStr::new(text.into()).ok()
}

/// A simple 1.0 value as a 0-10 one; compound values (lists, maps, arrays, described) and
/// decimals have no place in application headers and are dropped.
fn value_to_010(v: &V1) -> Option<V010> {
    Some(match v {
        V1::Null => V010::Void,
        V1::Bool(b) => V010::Bool(*b),
        V1::Ubyte(n) => V010::Uint8(*n),
        V1::Ushort(n) => V010::Uint16(*n),
        V1::Uint(n) => V010::Uint32(*n),
        V1::Ulong(n) => V010::Uint64(*n),
        V1::Byte(n) => V010::Int8(*n),
        V1::Short(n) => V010::Int16(*n),
        V1::Int(n) => V010::Int32(*n),
        V1::Long(n) => V010::Int64(*n),
        V1::Float(f) => V010::Float(*f),
        V1::Double(f) => V010::Double(*f),
        V1::Timestamp(t) => V010::Datetime(u64::try_from(t.0 / 1000).unwrap_or(0)),
        V1::Uuid(u) => V010::Uuid(u.0),
        V1::Binary(b) => V010::Vbin32(b.clone()),
        V1::String(s) => V010::Str16(Str::from_bytes(s.bytes().clone())),
        V1::Symbol(s) => V010::Str16(Str::from_bytes(s.bytes().clone())),
        V1::Char(c) => V010::Str16(Str::from(c.to_string())),
        _ => return None,
    })
}

/// A 0-10 value as a simple 1.0 one (maps, lists and arrays are dropped: application
/// properties hold simple values only).
fn value_from_010(v: &V010) -> Option<V1> {
    Some(match v {
        V010::Void => V1::Null,
        V010::Bool(b) => V1::Bool(*b),
        V010::Int8(n) => V1::Byte(*n),
        V010::Uint8(n) | V010::Char(n) => V1::Ubyte(*n),
        V010::Int16(n) => V1::Short(*n),
        V010::Uint16(n) => V1::Ushort(*n),
        V010::Int32(n) => V1::Int(*n),
        V010::Uint32(n) => V1::Uint(*n),
        V010::Int64(n) => V1::Long(*n),
        V010::Uint64(n) => V1::Ulong(*n),
        V010::Float(f) => V1::Float(*f),
        V010::Double(f) => V1::Double(*f),
        V010::Datetime(s) => V1::Timestamp(Timestamp(seconds_to_ms(*s))),
        V010::Uuid(u) => V1::Uuid(Uuid(*u)),
        V010::Str8(s) | V010::Str16(s) => string_or_binary(s.as_bytes()),
        V010::Vbin8(b) | V010::Vbin16(b) | V010::Vbin32(b) => V1::Binary(b.clone()),
        _ => return None,
    })
}

fn value_from_091(v: &FieldValue) -> Option<V1> {
    Some(match v {
        FieldValue::Bool(b) => V1::Bool(*b),
        FieldValue::I8(n) => V1::Byte(*n),
        FieldValue::U8(n) => V1::Ubyte(*n),
        FieldValue::I16(n) => V1::Short(*n),
        FieldValue::U16(n) => V1::Ushort(*n),
        FieldValue::I32(n) => V1::Int(*n),
        FieldValue::U32(n) => V1::Uint(*n),
        FieldValue::I64(n) => V1::Long(*n),
        FieldValue::F32(f) => V1::Float(*f),
        FieldValue::F64(f) => V1::Double(*f),
        FieldValue::Timestamp(s) => V1::Timestamp(Timestamp(seconds_to_ms(*s))),
        FieldValue::LongStr(s) => string_or_binary(s.as_bytes()),
        FieldValue::ByteArray(b) => V1::Binary(b.bytes().clone()),
        FieldValue::Void => V1::Null,
        _ => return None,
    })
}

fn seconds_to_ms(s: u64) -> i64 {
    i64::try_from(s.saturating_mul(1000)).unwrap_or(i64::MAX)
}

fn string_or_binary(b: &[u8]) -> V1 {
    match std::str::from_utf8(b) {
        Ok(s) => V1::String(Str1::from(s)),
        Err(_) => V1::Binary(Bytes::copy_from_slice(b)),
    }
}

fn text_of(v: &V1) -> Option<String> {
    match v {
        V1::String(s) => Some(s.as_str().to_owned()),
        V1::Symbol(s) => Some(s.as_str().to_owned()),
        V1::Binary(b) => std::str::from_utf8(b).ok().map(str::to_owned),
        V1::Uint(n) => Some(n.to_string()),
        V1::Ulong(n) => Some(n.to_string()),
        V1::Int(n) => Some(n.to_string()),
        V1::Long(n) => Some(n.to_string()),
        _ => None,
    }
}

/// The application headers a 1.0 message's other sections become (the same entries for
/// 0-10 and 0-9-1): application properties, annotations with `x-` keys, the subject, and
/// the properties neither protocol has a field for.
fn headers_of(d: &Decoded, message_id_header: bool) -> Map {
    // Collected, not inserted one by one: a message spanning many transfers may carry
    // hundreds of thousands of properties, and this runs for every delivery. A name sent
    // twice shows its first value, the one a headers exchange matched on; an annotation
    // named as a property does not replace it.
    let properties = d
        .application_properties
        .iter()
        .flat_map(|a| a.iter())
        .filter_map(|(k, v)| Some((Str::from_bytes(k.bytes().clone()), value_to_010(v)?)));
    let annotations = d
        .header_annotations()
        .filter_map(|(k, v)| Some((Str::from(k), value_to_010(v)?)));
    let mut map = Map::from_first_values(properties.chain(annotations));
    let p = &d.properties;
    let text = |s: &Str1| V010::Str16(Str::from_bytes(s.bytes().clone()));
    if let Some(s) = &p.subject {
        map.insert(SUBJECT, text(s));
    }
    if let Some(g) = &p.group_id {
        map.insert(GROUP_ID, text(g));
    }
    if let Some(n) = p.group_sequence {
        map.insert(GROUP_SEQUENCE, V010::Uint32(n));
    }
    if let Some(g) = &p.reply_to_group_id {
        map.insert(REPLY_TO_GROUP_ID, text(g));
    }
    if message_id_header {
        if let Some(id) = p.message_id.as_ref().filter(|id| id_uuid(id).is_none()) {
            map.insert(MESSAGE_ID, V010::Str16(Str::from(id_text(id))));
        }
    }
    map
}

/// The 0-10 header segment a 0-10 consumer gets for a message published over 1.0.
pub fn to_amqp010(message: &Message) -> Bytes {
    let Some(d) = Decoded::of(message) else {
        return Bytes::new();
    };
    let mut headers = headers_of(&d, true);
    let p = &d.properties;
    let app_id = headers.remove(APP_ID).and_then(|v| match v {
        V010::Str8(s) | V010::Str16(s) => Some(s.into_bytes()),
        V010::Vbin8(b) | V010::Vbin16(b) | V010::Vbin32(b) => Some(b),
        _ => None,
    });
    let mut content_type = p
        .content_type
        .as_ref()
        .map(|c| Str::from_bytes(c.bytes().clone()));
    match d.kind {
        BodyKind::String if content_type.is_none() => content_type = Some(Str::from(TEXT_PLAIN)),
        BodyKind::Verbatim => {
            headers.insert(TYPE_HEADER, V010::Str16(Str::from(ENCODED_BODY_TYPE)));
        }
        _ => {}
    }
    let dp = DeliveryProperties {
        priority: DeliveryPriority::from_code(d.header.priority.min(9)),
        delivery_mode: Some(if d.header.durable {
            DeliveryMode::Persistent
        } else {
            DeliveryMode::NonPersistent
        }),
        ttl: d.header.ttl.map(u64::from),
        timestamp: p.creation_time.and_then(|t| u64::try_from(t.0 / 1000).ok()),
        expiration: p
            .absolute_expiry_time
            .and_then(|t| u64::try_from(t.0 / 1000).ok()),
        exchange: Some(Str::from_bytes(Bytes::copy_from_slice(message.exchange()))),
        routing_key: Some(Str::from_bytes(Bytes::copy_from_slice(
            message.routing_key(),
        ))),
        ..DeliveryProperties::default()
    };
    let mp = MessageProperties {
        message_id: p.message_id.as_ref().and_then(id_uuid),
        correlation_id: p.correlation_id.as_ref().map(|id| match id {
            MessageId::Uuid(u) => Bytes::from(super::uuid_text(&u.0)),
            other => id_bytes(other),
        }),
        reply_to: p.reply_to.as_ref().map(|r| reply_to_010(r.as_str())),
        content_type,
        content_encoding: p
            .content_encoding
            .as_ref()
            .map(|c| Str::from_bytes(c.bytes().clone())),
        user_id: p.user_id.clone(),
        app_id,
        application_headers: (!headers.is_empty()).then_some(headers),
        ..MessageProperties::default()
    };
    super::encode_010_header(dp, mp)
}

/// qpidd's reading of an address as a reply-to: `exchange/key`, else a queue (the default
/// exchange with the name as key).
fn reply_to_010(address: &str) -> ReplyTo {
    match address.split_once('/') {
        Some((exchange, key)) => ReplyTo {
            exchange: (!exchange.is_empty()).then(|| Str::from(exchange)),
            routing_key: Some(Str::from(key)),
        },
        None => ReplyTo {
            exchange: None,
            routing_key: Some(Str::from(address)),
        },
    }
}

/// The properties a 0-9-1 consumer gets for a message published over 1.0.
pub fn to_amqp091(message: &Message) -> BasicProperties {
    let Some(d) = Decoded::of(message) else {
        return BasicProperties::default();
    };
    let mut headers = headers_of(&d, false);
    let p = &d.properties;
    let app_id = headers.remove(APP_ID).and_then(|v| match v {
        V010::Str8(s) | V010::Str16(s) => short(s.into_bytes()),
        _ => None,
    });
    let mut content_type = p
        .content_type
        .as_ref()
        .and_then(|c| short(c.bytes().clone()));
    let mut kind = None;
    match d.kind {
        BodyKind::String if content_type.is_none() => content_type = short(TEXT_PLAIN),
        BodyKind::Verbatim => kind = short(ENCODED_BODY_TYPE),
        _ => {}
    }
    let expiration = d.header.ttl.map(u64::from).or_else(|| {
        let at = u64::try_from(p.absolute_expiry_time?.0).ok()?;
        Some(at.saturating_sub(now_ms()).max(1))
    });
    let table = super::map_to_table(&headers);
    BasicProperties {
        content_type,
        content_encoding: p
            .content_encoding
            .as_ref()
            .and_then(|c| short(c.bytes().clone())),
        headers: (!table.is_empty()).then_some(table),
        delivery_mode: Some(if d.header.durable { 2 } else { 1 }),
        priority: Some(d.header.priority),
        correlation_id: p.correlation_id.as_ref().and_then(|id| short(id_text(id))),
        reply_to: p.reply_to.as_ref().and_then(|r| short(r.bytes().clone())),
        expiration: expiration.and_then(|ms| short(ms.to_string())),
        message_id: p.message_id.as_ref().and_then(|id| short(id_text(id))),
        timestamp: p.creation_time.and_then(|t| u64::try_from(t.0 / 1000).ok()),
        kind,
        user_id: p.user_id.clone().and_then(short),
        app_id,
        cluster_id: None,
    }
}

/// Application headers (0-10 map entries or 0-9-1 table entries, as 1.0 values) sorted into
/// the 1.0 sections: `x-` names back to annotations, the names [`headers_of`] gave the 1.0
/// properties back to them, the rest application properties.
fn sort_headers(
    entries: impl Iterator<Item = (String, V1)>,
    properties: &mut Properties,
) -> (
    Option<ApplicationProperties>,
    Option<Annotations>,
    Option<String>,
) {
    let mut app = ApplicationProperties::new();
    let mut annotations = Annotations::new();
    let mut app_type = None;
    for (k, v) in entries {
        match k.as_str() {
            SUBJECT if properties.subject.is_none() => {
                properties.subject = text_of(&v).map(Str1::from);
            }
            GROUP_ID => properties.group_id = text_of(&v).map(Str1::from),
            REPLY_TO_GROUP_ID => properties.reply_to_group_id = text_of(&v).map(Str1::from),
            GROUP_SEQUENCE => {
                properties.group_sequence = text_of(&v).and_then(|t| t.parse().ok());
            }
            MESSAGE_ID if properties.message_id.is_none() => {
                properties.message_id = text_of(&v).map(|t| MessageId::String(Str1::from(t)));
            }
            TYPE_HEADER => app_type = text_of(&v),
            k if k.starts_with("x-opt-") => annotations.push(AnnotationKey::from(k), v),
            _ => app.push(Str1::from(k), v),
        }
    }
    (
        (!app.is_empty()).then_some(app),
        (!annotations.is_empty()).then_some(annotations),
        app_type,
    )
}

fn address_of(exchange: &[u8], key: &[u8]) -> Option<Str1> {
    let text = |b: &[u8]| std::str::from_utf8(b).ok().map(Str1::from);
    if exchange.is_empty() {
        text(key)
    } else {
        text(exchange)
    }
}

/// The 1.0 sections (all but the body) a 1.0 consumer gets for a message published over
/// 0-10: qpidd's `Properties_0_10`, with `to` the exchange (the routing key for the default
/// exchange) and `subject` the routing key.
fn from_amqp010(segment: &[u8], message: &Message) -> Amqp1Message {
    let header = MessageHeader::decode(Bytes::copy_from_slice(segment)).unwrap_or_default();
    let dp = header.delivery.unwrap_or_default();
    let mp = header.properties.unwrap_or_default();
    let mut p = Properties {
        message_id: mp.message_id.map(|u| MessageId::Uuid(Uuid(u))),
        user_id: mp.user_id,
        to: address_of(message.exchange(), message.routing_key()),
        subject: (!message.exchange().is_empty())
            .then(|| {
                std::str::from_utf8(message.routing_key())
                    .ok()
                    .map(Str1::from)
            })
            .flatten(),
        reply_to: mp.reply_to.and_then(|r| {
            let key = r.routing_key.map(Str::into_bytes).unwrap_or_default();
            let text = match r.exchange.filter(|e| !e.is_empty()) {
                None => String::from_utf8(key.to_vec()).ok()?,
                Some(ex) if key.is_empty() => ex.as_str().ok()?.to_owned(),
                Some(ex) => format!("{}/{}", ex.as_str().ok()?, std::str::from_utf8(&key).ok()?),
            };
            Some(Str1::from(text))
        }),
        correlation_id: mp.correlation_id.map(|c| match string_or_binary(&c) {
            V1::String(s) => MessageId::String(s),
            _ => MessageId::Binary(c),
        }),
        content_type: mp
            .content_type
            .map(|c| Symbol::from(c.to_str_lossy().as_ref())),
        content_encoding: mp
            .content_encoding
            .map(|c| Symbol::from(c.to_str_lossy().as_ref())),
        absolute_expiry_time: dp
            .expiration
            .filter(|e| *e > 0)
            .map(|e| Timestamp(seconds_to_ms(e))),
        creation_time: dp.timestamp.map(|t| Timestamp(seconds_to_ms(t))),
        ..Properties::default()
    };
    let mut entries: Vec<(String, V1)> = mp
        .application_headers
        .iter()
        .flat_map(|m| m.iter())
        .filter_map(|(k, v)| Some((k.to_str_lossy().into_owned(), value_from_010(v)?)))
        .collect();
    if let Some(app_id) = mp.app_id {
        entries.push((APP_ID.to_owned(), string_or_binary(&app_id)));
    }
    let (application_properties, message_annotations, _) =
        sort_headers(entries.into_iter(), &mut p);
    Amqp1Message {
        header: Some(Header {
            durable: dp.delivery_mode == Some(DeliveryMode::Persistent),
            priority: dp.priority.map_or(4, |p| p as u8),
            ..Header::default()
        }),
        message_annotations,
        properties: Some(p),
        application_properties,
        ..Amqp1Message::default()
    }
}

/// The 1.0 sections for a message published over 0-9-1 (RabbitMQ's 1.0 plugin's table, and
/// headers as for 0-10).
fn from_amqp091(raw: &[u8], message: &Message) -> Amqp1Message {
    let props = RawProperties::parse(Bytes::copy_from_slice(raw))
        .map(|p| p.decode())
        .unwrap_or_default();
    let text = |s: &ShortStr| std::str::from_utf8(s.as_bytes()).ok().map(Str1::from);
    let mut p = Properties {
        message_id: props
            .message_id
            .as_ref()
            .and_then(text)
            .map(MessageId::String),
        user_id: props.user_id.as_ref().map(|u| u.bytes().clone()),
        to: address_of(message.exchange(), message.routing_key()),
        subject: (!message.exchange().is_empty())
            .then(|| {
                std::str::from_utf8(message.routing_key())
                    .ok()
                    .map(Str1::from)
            })
            .flatten(),
        reply_to: props.reply_to.as_ref().and_then(text),
        correlation_id: props
            .correlation_id
            .as_ref()
            .and_then(text)
            .map(MessageId::String),
        content_type: props
            .content_type
            .as_ref()
            .and_then(|c| std::str::from_utf8(c.as_bytes()).ok().map(Symbol::from)),
        content_encoding: props
            .content_encoding
            .as_ref()
            .and_then(|c| std::str::from_utf8(c.as_bytes()).ok().map(Symbol::from)),
        creation_time: props.timestamp.map(|t| Timestamp(seconds_to_ms(t))),
        ..Properties::default()
    };
    let mut entries: Vec<(String, V1)> = props
        .headers
        .iter()
        .flat_map(FieldTable::iter)
        .filter_map(|(k, v)| {
            Some((
                String::from_utf8_lossy(k.as_bytes()).into_owned(),
                value_from_091(v)?,
            ))
        })
        .collect();
    if let Some(app_id) = &props.app_id {
        entries.push((APP_ID.to_owned(), string_or_binary(app_id.as_bytes())));
    }
    if let Some(kind) = &props.kind {
        entries.push((TYPE_HEADER.to_owned(), string_or_binary(kind.as_bytes())));
    }
    let (application_properties, message_annotations, app_type) =
        sort_headers(entries.into_iter(), &mut p);
    let mut application_properties = application_properties;
    if let Some(t) = app_type {
        application_properties
            .get_or_insert_with(ApplicationProperties::new)
            .push(Str1::from(TYPE_HEADER), V1::String(Str1::from(t)));
    }
    Amqp1Message {
        header: Some(Header {
            durable: props.delivery_mode == Some(2),
            priority: props.priority.unwrap_or(4),
            ..Header::default()
        }),
        message_annotations,
        properties: Some(p),
        application_properties,
        ..Amqp1Message::default()
    }
}

/// The neutral application headers of a 1.0 message, for exchanges and queues that route
/// or key on them (headers exchange, last-value queues).
pub fn neutral_headers(props: &ApplicationProperties) -> ferry_core::Headers {
    use ferry_core::HeaderValue as H;
    props
        .iter()
        .map(|(k, v)| {
            let value = match v {
                V1::Null => H::Void,
                V1::Bool(b) => H::Bool(*b),
                V1::Ubyte(n) => H::UInt(u64::from(*n)),
                V1::Ushort(n) => H::UInt(u64::from(*n)),
                V1::Uint(n) => H::UInt(u64::from(*n)),
                V1::Ulong(n) => H::UInt(*n),
                V1::Byte(n) => H::Int(i64::from(*n)),
                V1::Short(n) => H::Int(i64::from(*n)),
                V1::Int(n) => H::Int(i64::from(*n)),
                V1::Long(n) => H::Int(*n),
                V1::Float(f) => H::Float(f64::from(*f)),
                V1::Double(f) => H::Float(*f),
                V1::Timestamp(t) => H::Int(t.0),
                V1::String(s) => H::Str(s.as_str().to_owned()),
                V1::Symbol(s) => H::Str(s.as_str().to_owned()),
                V1::Binary(b) => H::Bytes(b.clone()),
                _ => H::Other,
            };
            (k.as_str().to_owned(), value)
        })
        .collect()
}

#[cfg(test)]
mod tests;
