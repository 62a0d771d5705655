//! The 0-10 values QMF maps carry: building them the way qpidd's agent does, and reading
//! what consoles send, whichever encoding they chose.

use bytes::Bytes;
use ferry_amqp010::{List, Map, Str, Value};
use ferry_core::{Arguments, HeaderValue};

/// Text in an object's values. qpidd's agent encodes a string without an explicit encoding
/// as binary (vbin16, or vbin32 beyond 64 KiB), which Python consoles read as `str`; doing the
/// same keeps their output (and their `str` comparisons) as they are against qpidd.
pub fn text(s: &str) -> Value {
    let bytes = Bytes::copy_from_slice(s.as_bytes());
    if bytes.len() <= usize::from(u16::MAX) {
        Value::Vbin16(bytes)
    } else {
        Value::Vbin32(bytes)
    }
}

/// Text in application headers, which qpidd writes as str16.
pub fn header_text(s: &str) -> Value {
    Value::Str16(Str::from(s))
}

/// A reference to another object: a map holding its object name, as QMF v2 encodes `objId`
/// properties (`BrokerObject.__getattr__` in qpid-tools strips it back to the key).
pub fn object_ref(object_name: &str) -> Value {
    let mut m = Map::new();
    m.insert("_object_name", text(object_name));
    Value::Map(m)
}

/// A string sent by a console: str8/str16, or binary holding UTF-8 (Python's `str`).
pub fn read_text(v: &Value) -> Option<&str> {
    match v {
        Value::Str8(s) | Value::Str16(s) => s.as_str().ok(),
        Value::Vbin8(b) | Value::Vbin16(b) | Value::Vbin32(b) => std::str::from_utf8(b).ok(),
        _ => None,
    }
}

/// A truth value as qpidd's `Variant` converts one: booleans, integers (non-zero is true)
/// and the strings "true"/"false" (qpid-config sends `durable` as the integer 1).
pub fn read_bool(v: &Value) -> Option<bool> {
    if let Some(b) = v.as_bool() {
        return Some(b);
    }
    if let Some(n) = v.as_i64() {
        return Some(n != 0);
    }
    if let Value::Uint64(n) = v {
        return Some(*n != 0);
    }
    match read_text(v)? {
        "true" | "True" | "TRUE" => Some(true),
        "false" | "False" | "FALSE" => Some(false),
        _ => None,
    }
}

/// A non-negative integer of any width (or a decimal string, as consoles sometimes send).
pub fn read_u64(v: &Value) -> Option<u64> {
    match v {
        Value::Uint64(n) => Some(*n),
        _ => match v.as_i64() {
            Some(n) => u64::try_from(n).ok(),
            None => read_text(v)?.trim().parse().ok(),
        },
    }
}

/// A console's map (queue or binding properties) in the core's neutral form, as the 0-10
/// layer converts declare arguments.
pub fn to_arguments<'a>(entries: impl IntoIterator<Item = (&'a Str, &'a Value)>) -> Arguments {
    entries.into_iter().map(|(k, v)| entry(k, v, 1)).collect()
}

/// An entry whose value is at `depth` (see [`HeaderValue::MAX_NESTING`]).
fn entry(key: &Str, value: &Value, depth: usize) -> (String, HeaderValue) {
    (key.to_str_lossy().into_owned(), to_header(value, depth))
}

fn to_header(value: &Value, depth: usize) -> HeaderValue {
    let list = |items: &[Value]| {
        HeaderValue::list_at(depth, |below| {
            items.iter().map(move |v| to_header(v, below))
        })
    };
    match value {
        Value::Void => HeaderValue::Void,
        Value::Bool(b) => HeaderValue::Bool(*b),
        Value::Int8(v) => HeaderValue::Int(i64::from(*v)),
        Value::Int16(v) => HeaderValue::Int(i64::from(*v)),
        Value::Int32(v) => HeaderValue::Int(i64::from(*v)),
        Value::Int64(v) => HeaderValue::Int(*v),
        Value::Uint8(v) | Value::Char(v) => HeaderValue::UInt(u64::from(*v)),
        Value::Uint16(v) => HeaderValue::UInt(u64::from(*v)),
        Value::Uint32(v) => HeaderValue::UInt(u64::from(*v)),
        Value::Uint64(v) | Value::Datetime(v) => HeaderValue::UInt(*v),
        Value::Float(v) => HeaderValue::Float(f64::from(*v)),
        Value::Double(v) => HeaderValue::Float(*v),
        Value::Str8(s) | Value::Str16(s) => match s.as_str() {
            Ok(text) => HeaderValue::Str(text.to_owned()),
            Err(_) => HeaderValue::Bytes(s.clone().into_bytes()),
        },
        Value::Vbin8(b) | Value::Vbin16(b) | Value::Vbin32(b) => HeaderValue::Bytes(b.clone()),
        Value::List(l) => list(&l.0),
        Value::Array(a) => list(&a.items),
        Value::Map(m) => HeaderValue::map_at(depth, |below| {
            m.iter().map(move |(k, v)| entry(k, v, below))
        }),
        _ => HeaderValue::Other,
    }
}

/// Declare or bind arguments as an object's `arguments` value. Text keeps the form it was
/// given in (str16 for text, binary for bytes); what the core could not keep is void, and an
/// array comes back as a list (the core keeps no item type).
pub fn from_arguments(args: &Arguments) -> Value {
    // A repeated name shows the value in force, its first.
    Value::Map(
        args.distinct()
            .map(|(key, value)| (Str::from(key.as_str()), from_header(value)))
            .collect(),
    )
}

fn from_header(value: &HeaderValue) -> Value {
    match value {
        HeaderValue::Void | HeaderValue::Other => Value::Void,
        HeaderValue::Bool(b) => Value::Bool(*b),
        HeaderValue::Int(v) => Value::Int64(*v),
        HeaderValue::UInt(v) => Value::Uint64(*v),
        HeaderValue::Float(v) => Value::Double(*v),
        HeaderValue::Str(s) => Value::Str16(Str::from(s.as_str())),
        HeaderValue::Bytes(b) if b.len() <= usize::from(u16::MAX) => Value::Vbin16(b.clone()),
        HeaderValue::Bytes(b) => Value::Vbin32(b.clone()),
        HeaderValue::List(items) => Value::List(List(items.iter().map(from_header).collect())),
        HeaderValue::Map(entries) => from_arguments(entries),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_show_a_repeated_names_value_in_force() {
        let args: Arguments = [("n", HeaderValue::Int(1)), ("n", HeaderValue::Int(2))]
            .into_iter()
            .collect();
        let Value::Map(m) = from_arguments(&args) else {
            panic!("not a map");
        };
        assert_eq!(m.len(), 1);
        assert_eq!(m.get("n"), Some(&Value::Int64(1)));
    }

    #[test]
    fn text_is_binary_as_qpidd_sends_it() {
        assert_eq!(text("q"), Value::Vbin16(Bytes::from_static(b"q")));
        let long = "x".repeat(70_000);
        assert!(matches!(text(&long), Value::Vbin32(b) if b.len() == 70_000));
    }

    #[test]
    fn strings_are_read_from_any_string_or_binary_encoding() {
        assert_eq!(read_text(&Value::Str16(Str::from("a"))), Some("a"));
        assert_eq!(read_text(&Value::Str8(Str::from("b"))), Some("b"));
        assert_eq!(
            read_text(&Value::Vbin16(Bytes::from_static(b"c"))),
            Some("c")
        );
        assert_eq!(read_text(&Value::Vbin8(Bytes::from_static(b"\xff"))), None);
        assert_eq!(read_text(&Value::Int64(1)), None);
    }

    #[test]
    fn truth_follows_qpidd_variant_conversion() {
        assert_eq!(read_bool(&Value::Int64(1)), Some(true));
        assert_eq!(read_bool(&Value::Uint8(0)), Some(false));
        assert_eq!(read_bool(&Value::Bool(true)), Some(true));
        assert_eq!(read_bool(&Value::Uint64(u64::MAX)), Some(true));
        assert_eq!(read_bool(&text("True")), Some(true));
        assert_eq!(read_bool(&text("no")), None);
        assert_eq!(read_bool(&Value::Double(1.0)), None);
    }

    #[test]
    fn integers_of_any_width_or_decimal_text() {
        assert_eq!(read_u64(&Value::Uint16(7)), Some(7));
        assert_eq!(read_u64(&Value::Int64(-1)), None);
        assert_eq!(read_u64(&Value::Uint64(u64::MAX)), Some(u64::MAX));
        assert_eq!(read_u64(&text(" 12 ")), Some(12));
    }

    #[test]
    fn arguments_round_trip_through_neutral_form() {
        let mut m = Map::new();
        m.insert("qpid.max_count", Value::Int64(5));
        m.insert("qpid.policy_type", text("ring"));
        m.insert("flag", Value::Bool(true));
        m.insert("nested", Value::Map(Map::new()));
        m.insert("list", Value::List(List(vec![Value::Int64(1)])));
        m.insert("uuid", Value::Uuid([1; 16]));
        let args = to_arguments(m.iter());
        assert_eq!(args.get("qpid.max_count"), Some(&HeaderValue::Int(5)));
        assert_eq!(
            args.get("qpid.policy_type").and_then(|v| v.as_str()),
            Some("ring")
        );
        let Value::Map(back) = from_arguments(&args) else {
            panic!("not a map")
        };
        assert_eq!(back.get("qpid.max_count"), Some(&Value::Int64(5)));
        assert_eq!(back.get("flag"), Some(&Value::Bool(true)));
        assert_eq!(back.get("nested"), Some(&Value::Map(Map::new())));
        assert_eq!(
            back.get("list"),
            Some(&Value::List(List(vec![Value::Int64(1)])))
        );
        assert_eq!(back.get("uuid"), Some(&Value::Void));
    }

    #[test]
    fn references_are_maps_of_object_names() {
        let Value::Map(m) = object_ref("org.apache.qpid.broker:queue:q") else {
            panic!("not a map")
        };
        assert_eq!(
            m.get("_object_name").and_then(read_text),
            Some("org.apache.qpid.broker:queue:q")
        );
    }
}
