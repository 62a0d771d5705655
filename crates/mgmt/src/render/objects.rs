//! Queues, exchanges and bindings.

use ferry_core::{Arguments, BindingStatus, ExchangeStatus, QueueStatus};
use serde_json::{json, Map, Value};

use super::args;
use super::{Ctx, VHOST};
use crate::stats::{ExchangePoint, Kind, QueuePoint, Series};

/// A queue as in RabbitMQ's `/api/queues`. Rates come from `series` (none yet: zero).
pub fn queue(q: &QueueStatus, series: Option<&Series<QueuePoint>>, ctx: &Ctx) -> Value {
    let d = &q.depth;
    let c = &d.counters;
    let w = &ctx.windows;
    let empty = Series::<QueuePoint>::empty();
    let s = series.unwrap_or(&empty);
    let exclusive_tag = q
        .consumers
        .iter()
        .find(|c| c.exclusive)
        .map(|c| Value::String(c.tag.clone()))
        .unwrap_or(Value::Null);
    let total_bytes = d.ready_bytes + d.unacked_bytes;
    let mut m = Map::new();
    m.insert("name".into(), json!(q.name));
    m.insert("vhost".into(), json!(VHOST));
    m.insert("type".into(), json!("classic"));
    m.insert("durable".into(), json!(q.durable));
    m.insert("auto_delete".into(), json!(q.auto_delete));
    m.insert("exclusive".into(), json!(q.owner.is_some()));
    m.insert("arguments".into(), args::to_json(&q.arguments));
    m.insert("node".into(), json!(ctx.node));
    m.insert("state".into(), json!("running"));
    m.insert("policy".into(), Value::Null);
    m.insert("operator_policy".into(), Value::Null);
    m.insert("effective_policy_definition".into(), json!({}));
    m.insert("exclusive_consumer_tag".into(), exclusive_tag);
    // Known to RabbitMQ's clients; nothing in ferryd corresponds.
    m.insert("single_active_consumer_tag".into(), Value::Null);
    m.insert("head_message_timestamp".into(), Value::Null);
    m.insert("recoverable_slaves".into(), Value::Null);
    m.insert("consumers".into(), json!(q.consumers.len()));
    m.insert("messages".into(), json!(d.ready + d.unacked));
    m.insert("messages_ready".into(), json!(d.ready));
    m.insert("messages_unacknowledged".into(), json!(d.unacked));
    m.insert(
        "messages_details".into(),
        s.details(Kind::Gauge, w.lengths, |p| p.messages),
    );
    m.insert(
        "messages_ready_details".into(),
        s.details(Kind::Gauge, w.lengths, |p| p.ready),
    );
    m.insert(
        "messages_unacknowledged_details".into(),
        s.details(Kind::Gauge, w.lengths, |p| p.unacked),
    );
    m.insert("message_bytes".into(), json!(total_bytes));
    m.insert("message_bytes_ready".into(), json!(d.ready_bytes));
    m.insert(
        "message_bytes_unacknowledged".into(),
        json!(d.unacked_bytes),
    );
    m.insert("message_bytes_paged_out".into(), json!(d.on_disk_bytes));
    m.insert(
        "message_bytes_ram".into(),
        json!(total_bytes.saturating_sub(d.on_disk_bytes)),
    );
    m.insert(
        "alternate_exchange".into(),
        json!(q.alternate_exchange.as_deref()),
    );
    let mut stats = Map::new();
    let mut counter = |name: &str, value: u64, f: fn(&QueuePoint) -> u64| {
        stats.insert(name.into(), json!(value));
        stats.insert(
            format!("{name}_details"),
            s.details(Kind::Counter, w.msg_rates, f),
        );
    };
    counter("publish", c.enqueued, |p| p.publish);
    counter("deliver_get", c.delivered, |p| p.deliver_get);
    counter("redeliver", c.redelivered, |p| p.redeliver);
    counter("ack", c.acked, |p| p.ack);
    m.insert("message_stats".into(), Value::Object(stats));
    // What the core counts and RabbitMQ has no field for.
    m.insert(
        "ferry_stats".into(),
        json!({
            "enqueued_bytes": c.enqueued_bytes,
            "browsed": c.browsed,
            "rejected": c.rejected,
            "released": c.released,
            "expired": c.expired,
            "overflowed": c.overflowed,
            "replaced": c.replaced,
            "purged": c.purged,
            "refused": c.refused,
        }),
    );
    Value::Object(m)
}

/// The name management shows for an exchange: the default one is "" in lists and
/// `amq.default` in paths.
pub const DEFAULT_EXCHANGE_PATH: &str = "amq.default";

/// An exchange as in RabbitMQ's `/api/exchanges`.
pub fn exchange(e: &ExchangeStatus, series: Option<&Series<ExchangePoint>>, ctx: &Ctx) -> Value {
    let i = &e.info;
    let t = &e.totals;
    let empty = Series::<ExchangePoint>::empty();
    let s = series.unwrap_or(&empty);
    let w = ctx.windows.msg_rates;
    json!({
        "name": i.name,
        "vhost": VHOST,
        "type": i.kind.name(),
        "durable": i.durable,
        "auto_delete": i.auto_delete,
        "internal": i.internal,
        "arguments": args::to_json(&i.arguments),
        "policy": null,
        "user_who_performed_action": if e.builtin { "rmq-internal" } else { "" },
        "alternate_exchange": i.alternate_exchange,
        "message_stats": {
            "publish_in": t.messages_in,
            "publish_in_details": s.details(Kind::Counter, w, |p| p.publish_in),
            "publish_out": t.messages_out(),
            "publish_out_details": s.details(Kind::Counter, w, |p| p.publish_out),
            "drop_unroutable": t.unroutable,
            "drop_unroutable_details": s.details(Kind::Counter, w, |p| p.unroutable),
        },
        "ferry_stats": {
            "bytes_in": t.bytes_in,
            "unroutable_bytes": t.unroutable_bytes,
            "bindings": e.bindings,
        },
    })
}

/// RabbitMQ's `properties_key`, which names a binding in a DELETE path
/// (`rabbit_mgmt_format:pack_binding_props`): the routing key quoted, or `~` for an empty
/// key without arguments; with arguments, the quoted key, `~` and a hash of the arguments.
/// The quoting keeps `~` for the separator alone, so keys "" and "~" name two bindings.
pub fn properties_key(key: &str, arguments: &Arguments) -> String {
    if arguments.is_empty() {
        if key.is_empty() {
            "~".to_owned()
        } else {
            quote_key(key)
        }
    } else {
        format!("{}~{}", quote_key(key), arguments_hash(arguments))
    }
}

/// FNV-1a over the arguments' text: stable across runs, enough to tell apart the few
/// bindings one exchange has to one destination under one key. (RabbitMQ hashes its own
/// term encoding, which no client computes.)
fn arguments_hash(arguments: &Arguments) -> String {
    let text = args::to_json(arguments).to_string();
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x}")
}

/// Whether `props` (a path segment, percent-decoded once) names the binding under `key`
/// with `arguments`, read as RabbitMQ reads it (`rabbit_mgmt_wm_binding`): up to the first
/// `~` the key, unquoted (`+` a space, `%XX` a byte), after it the arguments' hash. So a
/// client that quoted the key as listed and one that wrote it plainly (`order.*`) both
/// find it, and `~` is always the empty key, never the key "~" (that is `%7E`).
pub fn names_binding(props: &str, key: &str, arguments: &Arguments) -> bool {
    let (quoted, hash) = match props.split_once('~') {
        None => (props, None),
        Some((quoted, "")) => (quoted, None),
        Some((quoted, hash)) => (quoted, Some(hash)),
    };
    let key_matches = unquote_key(quoted).is_some_and(|k| k == key.as_bytes());
    key_matches
        && match hash {
            None => arguments.is_empty(),
            Some(hash) => !arguments.is_empty() && arguments_hash(arguments) == hash,
        }
}

/// `quote_plus` undone; `None` for a `%` not followed by two hex digits.
fn unquote_key(quoted: &str) -> Option<Vec<u8>> {
    let bytes = quoted.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' => {
                let hex = bytes.get(i + 1..i + 3)?;
                let hex = std::str::from_utf8(hex).ok()?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 2;
            }
            b => out.push(b),
        }
        i += 1;
    }
    Some(out)
}

/// RabbitMQ's `quote_binding`: `quote_plus` (letters, digits and `.-_~` kept, space as
/// `+`, other bytes as `%XX`), then `~` as `%7E`.
fn quote_key(key: &str) -> String {
    let mut out = String::with_capacity(key.len());
    for b in key.bytes() {
        match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'.' | b'-' | b'_' => out.push(char::from(b)),
            b' ' => out.push('+'),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// A binding as in RabbitMQ's `/api/bindings`.
pub fn binding(b: &BindingStatus) -> Value {
    json!({
        "source": b.source,
        "vhost": VHOST,
        "destination": b.destination,
        "destination_type": if b.to_exchange { "exchange" } else { "queue" },
        "routing_key": b.key,
        "arguments": args::to_json(&b.arguments),
        "properties_key": properties_key(&b.key, &b.arguments),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn properties_keys_quote_the_routing_key_as_rabbitmq_does() {
        let none = Arguments::default();
        assert_eq!(properties_key("", &none), "~");
        assert_eq!(properties_key("~", &none), "%7E");
        assert_eq!(properties_key("orders.eu-1_x", &none), "orders.eu-1_x");
        assert_eq!(properties_key("a b/c~d", &none), "a+b%2Fc%7Ed");
        assert_eq!(properties_key("é", &none), "%C3%A9");
        let mut with = Arguments::default();
        with.push("x-match", ferry_core::HeaderValue::Str("all".into()));
        let tilde = properties_key("~", &with);
        let empty = properties_key("", &with);
        assert!(tilde.starts_with("%7E~"), "{tilde}");
        assert!(empty.starts_with('~'), "{empty}");
        assert_ne!(tilde, empty);
    }

    #[test]
    fn properties_keys_name_their_bindings_only() {
        let none = Arguments::default();
        let mut with = Arguments::default();
        with.push("k", ferry_core::HeaderValue::Str("v".into()));
        for (key, args) in [
            ("", &none),
            ("~", &none),
            ("a b/c", &none),
            ("~", &with),
            ("", &with),
        ] {
            let props = properties_key(key, args);
            assert!(names_binding(&props, key, args), "{props}");
            for (other_key, other_args) in [("", &none), ("~", &none), ("~", &with), ("", &with)] {
                if (other_key, other_args) != (key, args) {
                    assert!(
                        !names_binding(&props, other_key, other_args),
                        "{props} names {other_key:?} {other_args:?}"
                    );
                }
            }
        }
        // A key written plainly finds its binding too, as in RabbitMQ.
        assert!(names_binding("order.*", "order.*", &none));
        assert!(names_binding("#", "#", &none));
        assert!(!names_binding("%zz", "%zz", &none), "not a quoting");
    }
}
