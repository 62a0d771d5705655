//! Translation between 0-10 wire values and the core's protocol-neutral ones.

use ferry_amqp010::{ErrorCode, List, Map, Str, Value};
use ferry_core::{Arguments, BrokerError, HeaderValue, Headers};

/// A 0-10 map (arguments, application headers) in the core's neutral form.
pub fn map_to_headers(map: &Map) -> Headers {
    map_entries(map, 1).collect()
}

/// A map's entries at `depth` (see [`HeaderValue::MAX_NESTING`]).
fn map_entries(map: &Map, depth: usize) -> impl Iterator<Item = (String, HeaderValue)> + '_ {
    map.iter()
        .map(move |(key, value)| (key.to_str_lossy().into_owned(), header_at(value, depth)))
}

fn header_at(value: &Value, depth: usize) -> HeaderValue {
    let list = |items: &[Value]| {
        HeaderValue::list_at(depth, |below| {
            items.iter().map(move |v| header_at(v, below))
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
        Value::Map(m) => HeaderValue::map_at(depth, |below| map_entries(m, below)),
        _ => HeaderValue::Other,
    }
}

/// Neutral values back to 0-10 for queries. `Other` has lost its content and is sent as void;
/// an array comes back as a list (the core keeps no item type). A repeated name shows the
/// value in force, its first.
pub fn headers_to_map(headers: &Arguments) -> Map {
    headers
        .distinct()
        .map(|(key, value)| (Str::from(key.as_str()), header_to_value(value)))
        .collect()
}

fn header_to_value(value: &HeaderValue) -> Value {
    match value {
        HeaderValue::Void | HeaderValue::Other => Value::Void,
        HeaderValue::Bool(b) => Value::Bool(*b),
        HeaderValue::Int(v) => Value::Int64(*v),
        HeaderValue::UInt(v) => Value::Uint64(*v),
        HeaderValue::Float(v) => Value::Double(*v),
        HeaderValue::Str(s) => Value::Str16(Str::from(s.as_str())),
        HeaderValue::Bytes(b) => Value::Vbin32(b.clone()),
        HeaderValue::List(items) => Value::List(List(items.iter().map(header_to_value).collect())),
        HeaderValue::Map(entries) => Value::Map(headers_to_map(entries)),
    }
}

/// An execution exception to send for a failed command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exception {
    pub code: ErrorCode,
    pub description: String,
    /// Which field of the command was at fault, when known.
    pub field_index: Option<u8>,
}

impl Exception {
    pub fn new(code: ErrorCode, description: impl Into<String>) -> Exception {
        Exception {
            code,
            description: description.into(),
            field_index: None,
        }
    }

    pub fn not_implemented(what: &str) -> Exception {
        Exception::new(
            ErrorCode::NotImplemented,
            format!("{what} is not implemented"),
        )
    }

    /// qpidd's resource-deleted for a subscription whose queue is gone.
    pub fn queue_deleted(queue: &str) -> Exception {
        Exception::new(
            ErrorCode::ResourceDeleted,
            format!("Queue {queue} has been deleted."),
        )
    }

    pub fn missing(field: &str) -> Exception {
        Exception::new(
            ErrorCode::InvalidArgument,
            format!("required field {field} is missing"),
        )
    }
}

impl From<crate::access::Denied> for Exception {
    fn from(d: crate::access::Denied) -> Exception {
        Exception::new(ErrorCode::UnauthorizedAccess, d.0)
    }
}

impl From<BrokerError> for Exception {
    fn from(e: BrokerError) -> Exception {
        let code = match &e {
            BrokerError::NotFound(_) => ErrorCode::NotFound,
            BrokerError::ResourceLocked(_) => ErrorCode::ResourceLocked,
            BrokerError::PreconditionFailed(_) => ErrorCode::PreconditionFailed,
            BrokerError::NotAllowed(_) => ErrorCode::NotAllowed,
            BrokerError::ResourceLimitExceeded(_) => ErrorCode::ResourceLimitExceeded,
            BrokerError::InvalidArgument(_) => ErrorCode::InvalidArgument,
            BrokerError::NotImplemented(_) => ErrorCode::NotImplemented,
        };
        Exception::new(code, e.to_string())
    }
}

/// A required string field as text; names on the wire must be UTF-8.
pub fn required_name<'a>(field: &'a Option<Str>, name: &str) -> Result<&'a str, Exception> {
    let value = field.as_ref().ok_or_else(|| Exception::missing(name))?;
    value.as_str().map_err(|_| {
        Exception::new(
            ErrorCode::InvalidArgument,
            format!("field {name} is not valid UTF-8"),
        )
    })
}

/// An optional string field as text; absent is the empty string (the 0-10 default).
pub fn optional_name<'a>(field: &'a Option<Str>, name: &str) -> Result<&'a str, Exception> {
    match field {
        None => Ok(""),
        Some(_) => required_name(field, name),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_amqp010::Array;

    #[test]
    fn a_query_shows_a_repeated_arguments_value_in_force() {
        let args: Arguments = [
            ("qpid.max_count", HeaderValue::Int(10)),
            ("x", HeaderValue::Int(1)),
            ("qpid.max_count", HeaderValue::Int(20)),
        ]
        .into_iter()
        .collect();
        let map = headers_to_map(&args);
        assert_eq!(map.len(), 2);
        assert_eq!(map.get("qpid.max_count"), Some(&Value::Int64(10)));
        assert_eq!(args.get("qpid.max_count"), Some(&HeaderValue::Int(10)));
    }

    #[test]
    fn integers_of_any_width_become_comparable() {
        assert_eq!(header_at(&Value::Int8(-3), 1), HeaderValue::Int(-3));
        assert_eq!(header_at(&Value::Uint16(7), 1), HeaderValue::UInt(7));
        assert!(header_at(&Value::Int32(7), 1).matches(&header_at(&Value::Uint8(7), 1)));
    }

    #[test]
    fn strings_keep_text_and_invalid_utf8_stays_binary() {
        assert_eq!(
            header_at(&Value::Str16(Str::from("x")), 1),
            HeaderValue::Str("x".into())
        );
        let bad = Str::from_bytes(bytes::Bytes::from_static(&[0xff, 0xfe]));
        assert!(matches!(
            header_at(&Value::Str8(bad), 1),
            HeaderValue::Bytes(_)
        ));
    }

    #[test]
    fn maps_round_trip_through_neutral_form() {
        let mut map = Map::new();
        map.insert("a", Value::Int64(-1));
        map.insert("b", Value::Str16(Str::from("text")));
        map.insert("c", Value::Bool(true));
        let back = headers_to_map(&map_to_headers(&map));
        assert_eq!(back, map);
    }

    #[test]
    fn lists_arrays_and_maps_keep_their_content() {
        let mut inner = Map::new();
        inner.insert("k", Value::Uint8(1));
        let mut map = Map::new();
        map.insert(
            "list",
            Value::List(List(vec![Value::Int64(1), Value::Map(inner.clone())])),
        );
        map.insert("array", Value::Array(Array::of_str16(["x", "y"])));
        map.insert("uuid", Value::Uuid([7; 16]));
        let headers = map_to_headers(&map);
        let kept: Headers = [("k", HeaderValue::UInt(1))].into_iter().collect();
        assert_eq!(
            headers.get("list"),
            Some(&HeaderValue::List(vec![
                HeaderValue::Int(1),
                HeaderValue::Map(kept)
            ]))
        );
        let xy = HeaderValue::List(vec![
            HeaderValue::Str("x".into()),
            HeaderValue::Str("y".into()),
        ]);
        assert_eq!(headers.get("array"), Some(&xy));
        assert_eq!(headers.get("uuid"), Some(&HeaderValue::Other));

        // Back for a query: lists (arrays too) and maps, with the integers widened.
        let back = headers_to_map(&headers);
        let mut widened = Map::new();
        widened.insert("k", Value::Uint64(1));
        assert_eq!(
            back.get("list"),
            Some(&Value::List(List(vec![
                Value::Int64(1),
                Value::Map(widened)
            ])))
        );
        assert_eq!(
            back.get("array"),
            Some(&Value::List(List(vec![
                Value::Str16(Str::from("x")),
                Value::Str16(Str::from("y"))
            ])))
        );
        assert_eq!(back.get("uuid"), Some(&Value::Void));
    }

    #[test]
    fn broker_errors_map_to_spec_codes() {
        let e: Exception = BrokerError::ResourceLimitExceeded("q".into()).into();
        assert_eq!(e.code, ErrorCode::ResourceLimitExceeded);
        let e: Exception = BrokerError::NotFound("q".into()).into();
        assert_eq!(e.code as u16, 404);
    }

    #[test]
    fn names_must_be_present_and_utf8() {
        assert!(required_name(&None, "queue").is_err());
        let bad = Some(Str::from_bytes(bytes::Bytes::from_static(&[0xc3])));
        assert!(required_name(&bad, "queue").is_err());
        assert_eq!(optional_name(&None, "exchange").unwrap(), "");
    }
}
