//! RabbitMQ's dead-lettering headers, rendered from the core's neutral death history when a
//! dead-lettered message is delivered over 0-9-1 (only those pay for re-encoding their
//! properties):
//!
//! - `x-death`: an array of tables, most recent first, one per (queue, reason), each with
//!   `count` (long), `exchange`, `queue`, `reason`, `routing-keys` (array) and `time`
//!   (timestamp), plus `original-expiration` on the death that removed the message's
//!   `expiration` property (dead letters lose it, so they cannot expire again);
//! - `x-first-death-queue`, `-reason`, `-exchange`: the first death, never replaced;
//! - `x-last-death-queue`, `-reason`, `-exchange`: the most recent one (RabbitMQ 3.13).
//!
//! A message republished by a client with `x-death` already in its headers keeps those
//! entries: the broker's deaths are merged in front, counts of the same (queue, reason)
//! added up, as RabbitMQ did before 3.13.

use bytes::Bytes;
use ferry_amqp091::{BasicProperties, FieldTable, FieldValue, LongStr, ShortStr};
use ferry_core::{Death, DeathHistory};

const FIRST: [&str; 3] = [
    "x-first-death-queue",
    "x-first-death-reason",
    "x-first-death-exchange",
];
const LAST: [&str; 3] = [
    "x-last-death-queue",
    "x-last-death-reason",
    "x-last-death-exchange",
];

fn long_str(b: impl Into<Bytes>) -> FieldValue {
    LongStr::new(b.into())
        .map(FieldValue::LongStr)
        .unwrap_or(FieldValue::Void)
}

fn text_of(v: Option<&FieldValue>) -> Option<&[u8]> {
    match v {
        Some(FieldValue::LongStr(s)) => Some(s.as_bytes()),
        _ => None,
    }
}

fn count_of(t: &FieldTable) -> i64 {
    match t.get("count") {
        Some(FieldValue::I64(n)) => *n,
        Some(FieldValue::I32(n)) => i64::from(*n),
        Some(FieldValue::U32(n)) => i64::from(*n),
        _ => 0,
    }
}

fn key(k: &'static str) -> ShortStr {
    ShortStr::from_static(k)
}

/// One `x-death` entry, its fields in RabbitMQ's (sorted) order.
fn entry(d: &Death, original_expiration: Option<&ShortStr>) -> FieldTable {
    let mut t = FieldTable::new();
    t.push(
        key("count"),
        FieldValue::I64(i64::try_from(d.count).unwrap_or(i64::MAX)),
    );
    t.push(key("exchange"), long_str(d.exchange.clone()));
    if let Some(e) = original_expiration {
        t.push(key("original-expiration"), long_str(e.bytes().clone()));
    }
    t.push(key("queue"), long_str(d.queue.clone()));
    t.push(key("reason"), long_str(d.reason.name()));
    t.push(
        key("routing-keys"),
        FieldValue::Array(vec![long_str(d.routing_key.clone())]),
    );
    t.push(key("time"), FieldValue::Timestamp(d.time / 1000));
    t
}

/// Adds the dead-lettering headers to `props` and removes `expiration`.
pub fn render(props: &mut BasicProperties, history: &DeathHistory) {
    let old = props.headers.take().unwrap_or_default();
    let earlier: Vec<FieldTable> = match old.get("x-death") {
        Some(FieldValue::Array(items)) => items
            .iter()
            .filter_map(|v| match v {
                FieldValue::Table(t) => Some(t.clone()),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    };
    let original_expiration = props.expiration.take();
    let mut merged: Vec<FieldValue> = Vec::with_capacity(history.entries.len() + earlier.len());
    let mut used = vec![false; earlier.len()];
    for d in &history.entries {
        let prior = earlier.iter().enumerate().position(|(i, t)| {
            !used[i]
                && text_of(t.get("queue")) == Some(d.queue.as_bytes())
                && text_of(t.get("reason")) == Some(d.reason.name().as_bytes())
        });
        let table = match prior {
            Some(i) => {
                used[i] = true;
                let mut t = earlier[i].clone();
                let total = count_of(&t).saturating_add(i64::try_from(d.count).unwrap_or(0));
                t.insert(key("count"), FieldValue::I64(total));
                t
            }
            None => {
                let first = history
                    .first
                    .as_ref()
                    .is_some_and(|f| f.queue == d.queue && f.reason == d.reason);
                entry(d, original_expiration.as_ref().filter(|_| first))
            }
        };
        merged.push(FieldValue::Table(table));
    }
    merged.extend(
        earlier
            .into_iter()
            .zip(used)
            .filter(|(_, used)| !used)
            .map(|(t, _)| FieldValue::Table(t)),
    );

    let ours = |k: &str| k == "x-death" || FIRST.contains(&k) || LAST.contains(&k);
    let first_from_publisher = old.get(FIRST[0]).is_some();
    let mut headers: FieldTable = old
        .iter()
        .filter(|(k, _)| {
            let k = std::str::from_utf8(k.as_bytes()).unwrap_or("");
            !ours(k) || (first_from_publisher && FIRST.contains(&k))
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    headers.push(key("x-death"), FieldValue::Array(merged));
    if let (false, Some(first)) = (first_from_publisher, &history.first) {
        push_summary(&mut headers, FIRST, first);
    }
    if let Some(last) = history.last() {
        push_summary(&mut headers, LAST, last);
    }
    props.headers = Some(headers);
}

fn push_summary(headers: &mut FieldTable, keys: [&'static str; 3], d: &Death) {
    headers.push(key(keys[0]), long_str(d.queue.clone()));
    headers.push(key(keys[1]), long_str(d.reason.name()));
    headers.push(key(keys[2]), long_str(d.exchange.clone()));
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_core::DeathReason;

    fn history() -> DeathHistory {
        let mut h = DeathHistory::default();
        let b = |s: &'static str| Bytes::from_static(s.as_bytes());
        h.record(
            "work",
            DeathReason::Rejected,
            &b("amq.direct"),
            &b("job"),
            5_000,
        );
        h.record("retry", DeathReason::Expired, &b("dlx"), &b("job"), 6_000);
        h.record(
            "work",
            DeathReason::Rejected,
            &b("retry-dlx"),
            &b("job"),
            7_000,
        );
        h
    }

    fn deaths(props: &BasicProperties) -> Vec<FieldTable> {
        match props.headers.as_ref().and_then(|h| h.get("x-death")) {
            Some(FieldValue::Array(items)) => items
                .iter()
                .map(|v| match v {
                    FieldValue::Table(t) => t.clone(),
                    other => panic!("not a table: {other:?}"),
                })
                .collect(),
            other => panic!("no x-death array: {other:?}"),
        }
    }

    fn text(v: Option<&FieldValue>) -> &str {
        std::str::from_utf8(text_of(v).expect("a long string")).unwrap()
    }

    #[test]
    fn renders_rabbitmq_x_death_and_summaries() {
        let mut props = BasicProperties {
            expiration: Some(ShortStr::from_static("60000")),
            headers: Some([(key("app"), FieldValue::I32(1))].into_iter().collect()),
            ..BasicProperties::default()
        };
        render(&mut props, &history());
        assert_eq!(props.expiration, None);
        let d = deaths(&props);
        assert_eq!(d.len(), 2);
        assert_eq!(text(d[0].get("queue")), "work");
        assert_eq!(text(d[0].get("reason")), "rejected");
        assert_eq!(d[0].get("count"), Some(&FieldValue::I64(2)));
        assert_eq!(text(d[0].get("exchange")), "amq.direct");
        assert_eq!(d[0].get("time"), Some(&FieldValue::Timestamp(5)));
        assert_eq!(text(d[0].get("original-expiration")), "60000");
        assert_eq!(
            d[0].get("routing-keys"),
            Some(&FieldValue::Array(vec![long_str("job")]))
        );
        assert_eq!(text(d[1].get("reason")), "expired");
        assert!(d[1].get("original-expiration").is_none());
        let h = props.headers.as_ref().unwrap();
        assert_eq!(h.get("app"), Some(&FieldValue::I32(1)));
        assert_eq!(text(h.get("x-first-death-queue")), "work");
        assert_eq!(text(h.get("x-first-death-reason")), "rejected");
        assert_eq!(text(h.get("x-first-death-exchange")), "amq.direct");
        assert_eq!(text(h.get("x-last-death-queue")), "work");
        assert_eq!(text(h.get("x-last-death-exchange")), "amq.direct");
    }

    #[test]
    fn merges_with_what_a_publisher_carried_over() {
        let mut prior = BasicProperties::default();
        render(&mut prior, &history());
        // A client consumed the dead letter and republished it with its headers, then it
        // died again in "work".
        let mut h = DeathHistory::default();
        let b = Bytes::from_static(b"x");
        h.record("work", DeathReason::Rejected, &b, &b, 9_000);
        h.record("other", DeathReason::Maxlen, &b, &b, 9_500);
        render(&mut prior, &h);
        let d = deaths(&prior);
        let summary: Vec<(&str, &FieldValue)> = d
            .iter()
            .map(|t| (text(t.get("queue")), t.get("count").unwrap()))
            .collect();
        assert_eq!(
            summary,
            [
                ("other", &FieldValue::I64(1)),
                ("work", &FieldValue::I64(3)),
                ("retry", &FieldValue::I64(1))
            ]
        );
        let headers = prior.headers.as_ref().unwrap();
        // The publisher's first death stands; the last is ours.
        assert_eq!(text(headers.get("x-first-death-queue")), "work");
        assert_eq!(text(headers.get("x-last-death-queue")), "other");
        assert_eq!(
            headers
                .iter()
                .filter(|(k, _)| k.as_bytes() == b"x-death")
                .count(),
            1
        );
    }
}
