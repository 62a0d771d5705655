//! Translation between 0-9-1 wire values and the core's neutral ones, and the properties
//! stored on messages published over 0-9-1.

use bytes::Bytes;
use ferry_amqp091::{BasicProperties, FieldTable, FieldValue, LongStr, RawProperties, ShortStr};
use ferry_core::{Header, HeaderValue, Headers, Message, TraceEdit, TRACE_HEADER};

use crate::bridge;
use crate::encoded::Encoded;

/// A field table in the core's neutral form.
pub fn table_to_headers(table: &FieldTable) -> Headers {
    table_entries(table, 1).collect()
}

/// A table's entries at `depth` (see [`HeaderValue::MAX_NESTING`]).
fn table_entries(
    table: &FieldTable,
    depth: usize,
) -> impl Iterator<Item = (String, HeaderValue)> + '_ {
    table.iter().map(move |(k, v)| {
        (
            String::from_utf8_lossy(k.as_bytes()).into_owned(),
            neutral_at(v, depth),
        )
    })
}

fn neutral_at(value: &FieldValue, depth: usize) -> HeaderValue {
    match value {
        FieldValue::Bool(b) => HeaderValue::Bool(*b),
        FieldValue::I8(v) => HeaderValue::Int(i64::from(*v)),
        FieldValue::I16(v) => HeaderValue::Int(i64::from(*v)),
        FieldValue::I32(v) => HeaderValue::Int(i64::from(*v)),
        FieldValue::I64(v) => HeaderValue::Int(*v),
        FieldValue::U8(v) => HeaderValue::UInt(u64::from(*v)),
        FieldValue::U16(v) => HeaderValue::UInt(u64::from(*v)),
        FieldValue::U32(v) => HeaderValue::UInt(u64::from(*v)),
        FieldValue::Timestamp(v) => HeaderValue::UInt(*v),
        FieldValue::F32(v) => HeaderValue::Float(f64::from(*v)),
        FieldValue::F64(v) => HeaderValue::Float(*v),
        FieldValue::LongStr(s) => match s.to_str() {
            Ok(t) => HeaderValue::Str(t.to_owned()),
            Err(_) => HeaderValue::Bytes(s.bytes().clone()),
        },
        FieldValue::ByteArray(b) => HeaderValue::Bytes(b.bytes().clone()),
        FieldValue::Void => HeaderValue::Void,
        FieldValue::Array(items) => HeaderValue::list_at(depth, |below| {
            items.iter().map(move |v| neutral_at(v, below))
        }),
        FieldValue::Table(table) => HeaderValue::map_at(depth, |below| table_entries(table, below)),
        FieldValue::Decimal { .. } => HeaderValue::Other,
    }
}

/// Encoded properties (flags word onwards), as stored on messages published over 0-9-1.
pub fn encode_properties(props: &BasicProperties) -> Bytes {
    RawProperties::encode(props).as_bytes().clone()
}

/// Inverse of [`encode_properties`]; `None` for octets that are not properties (what we
/// stored always is).
pub fn decode_properties(raw: &[u8]) -> Option<BasicProperties> {
    RawProperties::parse(Bytes::copy_from_slice(raw))
        .ok()
        .map(|p| p.decode())
}

/// Times a message came back to its queue after a delivery, as RabbitMQ's quorum queues
/// tell a consumer.
pub const DELIVERY_COUNT_HEADER: &str = "x-delivery-count";

/// The properties to send for any core message, encoded: as stored for 0-9-1 messages,
/// converted for 0-10 and 1.0 ones, empty otherwise; dead-lettered messages get RabbitMQ's
/// `x-death` headers added, messages of a sequencing queue their number (qpidd's
/// `qpid.queue_msg_sequence`, as a long), and so are re-encoded. So are messages that came
/// back to their queue (`returns` > 0): RabbitMQ's quorum queues' `x-delivery-count`, which
/// consumers read to give up on a message (ferryd counts returns on every queue).
pub fn outgoing_properties(message: &Message, returns: u16) -> Encoded<'_> {
    if returns > 0
        || message.deaths().is_some()
        || message.sequence().is_some()
        || message.trace().is_some()
    {
        let mut props = match message.header() {
            Header::Amqp091(raw) => decode_properties(raw).unwrap_or_default(),
            Header::Amqp010(segment) => bridge::from_amqp010_header(segment),
            Header::Amqp1(_) => bridge::amqp1::to_amqp091(message),
            Header::None => BasicProperties::default(),
        };
        if let Some(history) = &message.deaths() {
            super::deaths::render(&mut props, history);
        }
        if let Some(sequence) = &message.sequence() {
            let headers = props.headers.get_or_insert_with(FieldTable::new);
            let key = ShortStr::new(Bytes::copy_from_slice(sequence.key.as_bytes()));
            if let Ok(key) = key {
                headers.insert(key, FieldValue::I64(i64::from(sequence.number)));
            }
        }
        if let Some(edit) = message.trace() {
            render_trace(&mut props, edit);
        }
        if returns > 0 {
            let headers = props.headers.get_or_insert_with(FieldTable::new);
            headers.insert(
                ShortStr::from_static(DELIVERY_COUNT_HEADER),
                FieldValue::I64(i64::from(returns)),
            );
        }
        return Encoded::Made(encode_properties(&props));
    }
    match message.header() {
        Header::Amqp091(raw) => Encoded::AsReceived(raw),
        Header::Amqp010(segment) => {
            Encoded::Made(encode_properties(&bridge::from_amqp010_header(segment)))
        }
        Header::Amqp1(_) => Encoded::Made(encode_properties(&bridge::amqp1::to_amqp091(message))),
        Header::None => Encoded::AsReceived(&[0, 0]),
    }
}

/// Sets `x-qpid.trace` (a long string) as `edit` leaves it (qpidd's message tracing).
fn render_trace(props: &mut BasicProperties, edit: &TraceEdit) {
    let published = props
        .headers
        .as_ref()
        .and_then(|h| h.get(TRACE_HEADER))
        .and_then(|v| match v {
            FieldValue::LongStr(s) => Some(String::from_utf8_lossy(s.as_bytes()).into_owned()),
            _ => None,
        });
    let list = edit.apply(published.as_deref());
    if let Some(Ok(list)) = list.map(|l| LongStr::new(l.into_bytes())) {
        let headers = props.headers.get_or_insert_with(FieldTable::new);
        headers.insert(
            ShortStr::from_static(TRACE_HEADER),
            FieldValue::LongStr(list),
        );
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use ferry_amqp091::{LongStr, ShortStr};

    /// Properties with every kind of field set, for round trips here and in the bridge.
    pub(crate) fn props() -> BasicProperties {
        let mut headers = FieldTable::new();
        headers.push(ShortStr::from_static("n"), FieldValue::I32(7));
        headers.push(
            ShortStr::from_static("s"),
            FieldValue::LongStr(LongStr::from_static("text")),
        );
        BasicProperties {
            content_type: Some(ShortStr::from_static("application/json")),
            content_encoding: Some(ShortStr::from_static("utf-8")),
            headers: Some(headers),
            delivery_mode: Some(2),
            priority: Some(5),
            correlation_id: Some(ShortStr::from_static("corr-1")),
            reply_to: Some(ShortStr::from_static("amq.gen-abc")),
            expiration: Some(ShortStr::from_static("60000")),
            message_id: Some(ShortStr::from_static(
                "0123abcd-0000-1111-2222-333344445555",
            )),
            app_id: Some(ShortStr::from_static("app")),
            ..BasicProperties::default()
        }
    }

    #[test]
    fn arrays_and_tables_keep_their_content_down_to_the_deepest_depth() {
        let mut inner = FieldTable::new();
        inner.push(ShortStr::from_static("k"), FieldValue::U8(1));
        let mut table = FieldTable::new();
        table.push(
            ShortStr::from_static("a"),
            FieldValue::Array(vec![FieldValue::I32(1), FieldValue::Table(inner)]),
        );
        table.push(
            ShortStr::from_static("d"),
            FieldValue::Decimal { scale: 2, value: 5 },
        );
        let headers = table_to_headers(&table);
        let kept: Headers = [("k", HeaderValue::UInt(1))].into_iter().collect();
        assert_eq!(
            headers.get("a"),
            Some(&HeaderValue::List(vec![
                HeaderValue::Int(1),
                HeaderValue::Map(kept)
            ]))
        );
        assert_eq!(headers.get("d"), Some(&HeaderValue::Other));

        // Arrays nested one deeper than the core keeps: the innermost becomes Other.
        let mut nested = FieldValue::Array(Vec::new());
        for _ in 0..HeaderValue::MAX_NESTING {
            nested = FieldValue::Array(vec![nested]);
        }
        let mut value = &neutral_at(&nested, 1);
        for _ in 1..HeaderValue::MAX_NESTING {
            match value {
                HeaderValue::List(items) => value = &items[0],
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(value, &HeaderValue::List(vec![HeaderValue::Other]));
    }

    #[test]
    fn stored_properties_round_trip() {
        let p = props();
        let raw = encode_properties(&p);
        assert_eq!(decode_properties(&raw), Some(p));
        assert_eq!(
            decode_properties(&encode_properties(&BasicProperties::default())),
            Some(BasicProperties::default())
        );
    }

    #[test]
    fn a_trace_edit_sets_the_trace_header() {
        let traced = |trace: Option<&str>, edit: TraceEdit| {
            let mut p = props();
            if let Some(t) = trace {
                let headers = p.headers.get_or_insert_with(FieldTable::new);
                headers.insert(
                    ShortStr::from_static(TRACE_HEADER),
                    FieldValue::LongStr(LongStr::new(t.to_owned()).unwrap()),
                );
            }
            let mut m = ferry_core::MessageParts::new("", "q", Bytes::from_static(b"x"));
            m.header = ferry_core::ProtocolHeader::Amqp091(encode_properties(&p));
            m.trace = Some(std::sync::Arc::new(edit));
            let out = decode_properties(&outgoing_properties(&m.build(), 0)).unwrap();
            let headers = out.headers.unwrap();
            assert_eq!(headers.get("n"), Some(&FieldValue::I32(7)));
            match headers.get(TRACE_HEADER) {
                Some(FieldValue::LongStr(s)) => Some(s.to_str().unwrap().to_owned()),
                _ => None,
            }
        };
        let add = TraceEdit {
            cleared: false,
            added: vec!["q1".into()],
        };
        assert_eq!(traced(Some("A"), add.clone()).as_deref(), Some("A,q1"));
        assert_eq!(traced(None, add).as_deref(), Some("q1"));
        assert_eq!(traced(Some("A"), TraceEdit::cleared()).as_deref(), Some(""));
        assert_eq!(traced(None, TraceEdit::cleared()), None);
    }

    #[test]
    fn a_sequence_number_joins_the_headers_as_a_long() {
        let mut m = ferry_core::MessageParts::new("", "q", Bytes::from_static(b"x"));
        m.header = ferry_core::ProtocolHeader::Amqp091(encode_properties(&props()));
        m.sequence = Some(std::sync::Arc::new(ferry_core::Sequenced {
            key: "qpid.seq".into(),
            number: 7,
        }));
        let out = decode_properties(&outgoing_properties(&m.build(), 0)).unwrap();
        let headers = out.headers.unwrap();
        assert_eq!(headers.get("qpid.seq"), Some(&FieldValue::I64(7)));
        assert_eq!(headers.get("n"), Some(&FieldValue::I32(7)));
        assert_eq!(out.content_type, props().content_type);
    }

    #[test]
    fn tables_become_neutral_headers() {
        let h = table_to_headers(&props().headers.unwrap());
        assert_eq!(h.get("n"), Some(&HeaderValue::Int(7)));
        assert_eq!(h.get("s"), Some(&HeaderValue::Str("text".into())));
    }
}
