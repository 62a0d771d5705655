//! Dead-lettering history for 0-10 consumers. qpidd has no equivalent, so the message
//! carries RabbitMQ's names in its application headers (docs/PROTOCOL-MAPPING.md):
//! `x-death` as a list of maps (one per queue and reason, most recent first: `count`,
//! `exchange`, `queue`, `reason`, `routing-keys`, `time`), and the flat strings
//! `x-first-death-queue` / `-reason` / `-exchange` and `x-last-death-…`, which JMS
//! applications can read as string properties. The delivery-properties ttl and expiration
//! are removed, as RabbitMQ removes a dead letter's expiration.

use bytes::Bytes;
use ferry_amqp010::{List, Map, Str, Value};
use ferry_core::{Death, DeathHistory};

fn text(b: &[u8]) -> Value {
    Value::Str16(Str::from_bytes(Bytes::copy_from_slice(b)))
}

fn entry(d: &Death) -> Value {
    let mut m = Map::new();
    m.insert(
        "count",
        Value::Int64(i64::try_from(d.count).unwrap_or(i64::MAX)),
    );
    m.insert("exchange", text(&d.exchange));
    m.insert("queue", text(d.queue.as_bytes()));
    m.insert("reason", text(d.reason.name().as_bytes()));
    m.insert(
        "routing-keys",
        Value::List(List(vec![text(&d.routing_key)])),
    );
    m.insert("time", Value::Datetime(d.time / 1000));
    Value::Map(m)
}

fn summary(headers: &mut Map, prefix: &str, d: &Death) {
    headers.insert(format!("{prefix}-queue").as_str(), text(d.queue.as_bytes()));
    headers.insert(
        format!("{prefix}-reason").as_str(),
        text(d.reason.name().as_bytes()),
    );
    headers.insert(format!("{prefix}-exchange").as_str(), text(&d.exchange));
}

/// The header segment with the death headers added; `None` if it does not decode (it always
/// does: the broker decoded or built it).
pub fn render(segment: &Bytes, history: &DeathHistory) -> Option<Bytes> {
    super::rewrite::edit_header(segment, 256, |delivery, headers| {
        if let Some(dp) = delivery {
            dp.ttl = None;
            dp.expiration = None;
        }
        let list = history.entries.iter().map(entry).collect();
        headers.insert("x-death", Value::List(List(list)));
        if let (None, Some(first)) = (headers.get("x-first-death-queue"), &history.first) {
            summary(headers, "x-first-death", first);
        }
        if let Some(last) = history.last() {
            summary(headers, "x-last-death", last);
        }
        true
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;
    use ferry_amqp010::{DeliveryProperties, MessageHeader, MessageProperties};
    use ferry_core::DeathReason;

    #[test]
    fn adds_death_headers_and_drops_the_ttl() {
        let header = MessageHeader {
            delivery: Some(DeliveryProperties {
                ttl: Some(5000),
                routing_key: Some(Str::from("k")),
                ..Default::default()
            }),
            properties: Some(MessageProperties {
                content_type: Some(Str::from("text/plain")),
                ..Default::default()
            }),
            other: Vec::new(),
        };
        let mut segment = BytesMut::new();
        header.encode(&mut segment).unwrap();
        let mut h = DeathHistory::default();
        let b = Bytes::from_static(b"amq.direct");
        h.record(
            "q",
            DeathReason::Expired,
            &b,
            &Bytes::from_static(b"k"),
            3_000,
        );
        let out = MessageHeader::decode(render(&segment.freeze(), &h).unwrap()).unwrap();
        let dp = out.delivery.unwrap();
        assert_eq!((dp.ttl, dp.routing_key), (None, Some(Str::from("k"))));
        let mp = out.properties.unwrap();
        assert_eq!(mp.content_type, Some(Str::from("text/plain")));
        let app = mp.application_headers.unwrap();
        assert_eq!(app.get("x-first-death-reason"), Some(&text(b"expired")));
        assert_eq!(app.get("x-last-death-queue"), Some(&text(b"q")));
        assert_eq!(
            app.get("x-first-death-exchange"),
            Some(&text(b"amq.direct"))
        );
        let Some(Value::List(List(deaths))) = app.get("x-death") else {
            panic!("no x-death list");
        };
        let Value::Map(d) = &deaths[0] else {
            panic!("not a map")
        };
        assert_eq!(d.get("count"), Some(&Value::Int64(1)));
        assert_eq!(d.get("time"), Some(&Value::Datetime(3)));
    }
}
