//! Messages over HTTP: RabbitMQ's `properties` object as 0-9-1 basic properties (the form
//! ferryd stores for 0-9-1 publishes), and fetched messages back as JSON.

use base64::Engine;
use bytes::Bytes;
use ferry_amqp091::{BasicProperties, FieldTable, FieldValue, LongStr, ShortStr};
use ferry_server::GotMessage;
use serde_json::{json, Map, Number, Value};

use crate::error::ApiError;

/// Deepest nesting of header tables accepted (as the 0-9-1 codec bounds what peers send).
const MAX_DEPTH: usize = 16;

fn bad(text: impl Into<String>) -> ApiError {
    ApiError::BadRequest(text.into())
}

fn short(field: &str, v: &Value) -> Result<ShortStr, ApiError> {
    let text = match v {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        _ => return Err(bad(format!("property {field} must be a string"))),
    };
    ShortStr::new(Bytes::from(text))
        .map_err(|_| bad(format!("property {field} is longer than 255 bytes")))
}

fn octet(field: &str, v: &Value) -> Result<u8, ApiError> {
    let n = match v {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    };
    n.and_then(|n| u8::try_from(n).ok())
        .ok_or_else(|| bad(format!("property {field} must be a number from 0 to 255")))
}

/// RabbitMQ's publish `properties` object as basic properties; unknown keys are refused.
pub fn properties_from_json(v: Option<&Value>) -> Result<BasicProperties, ApiError> {
    let mut p = BasicProperties::default();
    let map = match v {
        None | Some(Value::Null) => return Ok(p),
        Some(Value::Object(m)) => m,
        // RabbitMQ's own console sends [] for "no properties".
        Some(Value::Array(a)) if a.is_empty() => return Ok(p),
        Some(_) => return Err(bad("properties must be a JSON object")),
    };
    for (k, v) in map {
        match k.as_str() {
            "content_type" => p.content_type = Some(short(k, v)?),
            "content_encoding" => p.content_encoding = Some(short(k, v)?),
            "correlation_id" => p.correlation_id = Some(short(k, v)?),
            "reply_to" => p.reply_to = Some(short(k, v)?),
            "expiration" => p.expiration = Some(short(k, v)?),
            "message_id" => p.message_id = Some(short(k, v)?),
            "type" => p.kind = Some(short(k, v)?),
            "user_id" => p.user_id = Some(short(k, v)?),
            "app_id" => p.app_id = Some(short(k, v)?),
            "cluster_id" => p.cluster_id = Some(short(k, v)?),
            "delivery_mode" => p.delivery_mode = Some(octet(k, v)?),
            "priority" => p.priority = Some(octet(k, v)?),
            "timestamp" => {
                p.timestamp = Some(
                    v.as_u64()
                        .ok_or_else(|| bad("property timestamp must be a number"))?,
                )
            }
            "headers" => p.headers = Some(table_from_json(v, 0)?),
            other => return Err(bad(format!("unknown property {other}"))),
        }
    }
    Ok(p)
}

fn table_from_json(v: &Value, depth: usize) -> Result<FieldTable, ApiError> {
    let Value::Object(map) = v else {
        return Err(bad("headers must be a JSON object"));
    };
    let mut table = FieldTable::new();
    for (k, v) in map {
        let key = ShortStr::new(Bytes::from(k.clone()))
            .map_err(|_| bad("a header name is longer than 255 bytes"))?;
        table.push(key, field_from_json(v, depth + 1)?);
    }
    Ok(table)
}

fn field_from_json(v: &Value, depth: usize) -> Result<FieldValue, ApiError> {
    if depth > MAX_DEPTH {
        return Err(bad("headers nest too deeply"));
    }
    Ok(match v {
        Value::Null => FieldValue::Void,
        Value::Bool(b) => FieldValue::Bool(*b),
        Value::Number(n) => match (n.as_i64(), n.as_f64()) {
            (Some(i), _) => match i32::try_from(i) {
                Ok(i) => FieldValue::I32(i),
                Err(_) => FieldValue::I64(i),
            },
            (None, Some(f)) if n.is_f64() => FieldValue::F64(f),
            _ => return Err(bad(format!("header value {n} is out of range"))),
        },
        Value::String(s) => FieldValue::LongStr(
            LongStr::new(Bytes::from(s.clone())).map_err(|_| bad("a header value is too long"))?,
        ),
        Value::Array(items) => FieldValue::Array(
            items
                .iter()
                .map(|i| field_from_json(i, depth + 1))
                .collect::<Result<_, _>>()?,
        ),
        Value::Object(_) => FieldValue::Table(table_from_json(v, depth)?),
    })
}

fn text(s: &ShortStr) -> Value {
    Value::String(String::from_utf8_lossy(s.as_bytes()).into_owned())
}

/// Basic properties as RabbitMQ shows them in a get's reply.
pub fn properties_to_json(p: &BasicProperties) -> Value {
    let mut m = Map::new();
    let mut put = |k: &str, v: Option<Value>| {
        if let Some(v) = v {
            m.insert(k.into(), v);
        }
    };
    put("content_type", p.content_type.as_ref().map(text));
    put("content_encoding", p.content_encoding.as_ref().map(text));
    put("headers", p.headers.as_ref().map(table_to_json));
    put("delivery_mode", p.delivery_mode.map(Value::from));
    put("priority", p.priority.map(Value::from));
    put("correlation_id", p.correlation_id.as_ref().map(text));
    put("reply_to", p.reply_to.as_ref().map(text));
    put("expiration", p.expiration.as_ref().map(text));
    put("message_id", p.message_id.as_ref().map(text));
    put("timestamp", p.timestamp.map(Value::from));
    put("type", p.kind.as_ref().map(text));
    put("user_id", p.user_id.as_ref().map(text));
    put("app_id", p.app_id.as_ref().map(text));
    put("cluster_id", p.cluster_id.as_ref().map(text));
    Value::Object(m)
}

fn table_to_json(t: &FieldTable) -> Value {
    let mut m = Map::new();
    for (k, v) in t.iter() {
        m.entry(String::from_utf8_lossy(k.as_bytes()).into_owned())
            .or_insert_with(|| field_to_json(v));
    }
    Value::Object(m)
}

fn field_to_json(v: &FieldValue) -> Value {
    match v {
        FieldValue::Bool(b) => Value::Bool(*b),
        FieldValue::I8(n) => Value::from(*n),
        FieldValue::U8(n) => Value::from(*n),
        FieldValue::I16(n) => Value::from(*n),
        FieldValue::U16(n) => Value::from(*n),
        FieldValue::I32(n) => Value::from(*n),
        FieldValue::U32(n) => Value::from(*n),
        FieldValue::I64(n) => Value::from(*n),
        FieldValue::Timestamp(n) => Value::from(*n),
        FieldValue::F32(f) => Number::from_f64(f64::from(*f)).map_or(Value::Null, Value::Number),
        FieldValue::F64(f) => Number::from_f64(*f).map_or(Value::Null, Value::Number),
        FieldValue::Decimal { scale, value } => {
            let f = f64::from(*value) / 10f64.powi(i32::from(*scale));
            Number::from_f64(f).map_or(Value::Null, Value::Number)
        }
        FieldValue::LongStr(s) | FieldValue::ByteArray(s) => {
            Value::String(String::from_utf8_lossy(s.as_bytes()).into_owned())
        }
        FieldValue::Array(items) => Value::Array(items.iter().map(field_to_json).collect()),
        FieldValue::Table(t) => table_to_json(t),
        FieldValue::Void => Value::Null,
    }
}

/// How a get's reply encodes payloads (RabbitMQ's `encoding`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PayloadEncoding {
    /// Text when the payload is UTF-8, else base64.
    Auto,
    Base64,
}

/// A fetched message as in RabbitMQ's get reply; `truncate` cuts the payload (before it is
/// encoded) to that many bytes.
pub fn got_to_json(m: &GotMessage, encoding: PayloadEncoding, truncate: Option<usize>) -> Value {
    let body = match truncate {
        Some(n) if n < m.body.len() => &m.body[..n],
        _ => &m.body[..],
    };
    let (payload, payload_encoding) = match (encoding, std::str::from_utf8(body)) {
        (PayloadEncoding::Auto, Ok(text)) => (text.to_owned(), "string"),
        _ => (
            base64::engine::general_purpose::STANDARD.encode(body),
            "base64",
        ),
    };
    json!({
        "payload_bytes": m.body.len(),
        "redelivered": m.redelivered,
        "exchange": m.exchange,
        "routing_key": m.routing_key,
        "message_count": m.remaining,
        "properties": properties_to_json(&m.properties),
        "payload": payload,
        "payload_encoding": payload_encoding,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn properties_round_trip_through_json() {
        let v = json!({
            "content_type": "text/plain",
            "delivery_mode": 2,
            "priority": 5,
            "message_id": "m-1",
            "type": "greeting",
            "timestamp": 1700000000,
            "headers": {"n": 7, "big": 5000000000i64, "s": "x", "t": {"a": [1, "b"]}, "f": 1.5, "z": null}
        });
        let p = properties_from_json(Some(&v)).unwrap();
        assert_eq!(p.delivery_mode, Some(2));
        assert_eq!(
            p.headers.as_ref().unwrap().get("big"),
            Some(&FieldValue::I64(5_000_000_000))
        );
        assert_eq!(properties_to_json(&p), v);
    }

    #[test]
    fn bad_properties_are_refused() {
        for v in [
            json!({"delivery_mode": 300}),
            json!({"nonsense": 1}),
            json!({"headers": [1]}),
            json!({"content_type": "x".repeat(300)}),
            json!("text"),
        ] {
            assert!(properties_from_json(Some(&v)).is_err(), "{v}");
        }
        let mut deep = json!(1);
        for _ in 0..40 {
            deep = json!({ "h": deep });
        }
        assert!(properties_from_json(Some(&json!({ "headers": deep }))).is_err());
    }
}
