//! A message's trace (qpidd's `x-qpid.trace`, see [`TraceEdit`]) delivered to 0-10
//! consumers as qpidd sends it: a str16 application header, as tracing queues and reroutes
//! left it (re-encoded; only messages they changed pay).

use bytes::Bytes;
use ferry_amqp010::{Str, Value};
use ferry_core::{TraceEdit, TRACE_HEADER};

/// The header segment with the trace as `edit` leaves it; `None` if that changes nothing,
/// or if the segment does not decode (it always does: the broker decoded or built it).
pub fn render(segment: &Bytes, edit: &TraceEdit) -> Option<Bytes> {
    super::rewrite::edit_header(segment, TRACE_HEADER.len() + 64, |_, headers| {
        let published = headers
            .get(TRACE_HEADER)
            .and_then(Value::as_str)
            .map(|s| s.to_str_lossy().into_owned());
        let Some(list) = edit.apply(published.as_deref()) else {
            return false;
        };
        headers.insert(TRACE_HEADER, Value::Str16(Str::from(list.as_str())));
        true
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use bytes::BytesMut;
    use ferry_amqp010::{DeliveryProperties, Map, MessageHeader, MessageProperties};

    fn with_trace(trace: Option<&str>) -> Bytes {
        let mut app = Map::new();
        app.insert("colour", Value::Str16(Str::from("red")));
        if let Some(t) = trace {
            app.insert(TRACE_HEADER, Value::Str16(Str::from(t)));
        }
        let header = MessageHeader {
            delivery: Some(DeliveryProperties {
                routing_key: Some(Str::from("q")),
                ..Default::default()
            }),
            properties: Some(MessageProperties {
                application_headers: Some(app),
                ..Default::default()
            }),
            other: Vec::new(),
        };
        let mut raw = BytesMut::new();
        header.encode(&mut raw).unwrap();
        raw.freeze()
    }

    fn trace_of(segment: &Bytes) -> Option<String> {
        let h = MessageHeader::decode(segment.clone()).unwrap();
        let app = h.properties?.application_headers?;
        Some(app.get(TRACE_HEADER)?.as_str()?.to_str_lossy().into_owned())
    }

    #[test]
    fn the_trace_header_is_set_as_the_edit_leaves_it() {
        let add = TraceEdit {
            cleared: false,
            added: vec![Arc::from("q1")],
        };
        let out = render(&with_trace(Some("A")), &add).unwrap();
        assert_eq!(trace_of(&out).as_deref(), Some("A,q1"));
        let out = render(&with_trace(None), &add).unwrap();
        assert_eq!(trace_of(&out).as_deref(), Some("q1"));
        let h = MessageHeader::decode(out).unwrap();
        let app = h.properties.unwrap().application_headers.unwrap();
        assert_eq!(
            app.get("colour").and_then(Value::as_str),
            Some(&Str::from("red"))
        );
        let clear = TraceEdit::cleared();
        let out = render(&with_trace(Some("A,B")), &clear).unwrap();
        assert_eq!(trace_of(&out).as_deref(), Some(""));
        assert_eq!(render(&with_trace(None), &clear), None, "nothing to clear");
        assert_eq!(render(&with_trace(Some("A,q1")), &add), None);
    }
}
