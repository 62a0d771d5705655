//! Declare and bind arguments between JSON and the core's neutral values.

use ferry_core::{Arguments, HeaderValue};
use serde_json::{Map, Number, Value};

use crate::error::ApiError;

pub fn to_json(args: &Arguments) -> Value {
    let mut out = Map::new();
    for (k, v) in args.iter() {
        out.entry(k.clone()).or_insert_with(|| value_to_json(v));
    }
    Value::Object(out)
}

pub fn value_to_json(v: &HeaderValue) -> Value {
    match v {
        HeaderValue::Void | HeaderValue::Other => Value::Null,
        HeaderValue::Bool(b) => Value::Bool(*b),
        HeaderValue::Int(i) => Value::from(*i),
        HeaderValue::UInt(u) => Value::from(*u),
        HeaderValue::Float(f) => Number::from_f64(*f).map_or(Value::Null, Value::Number),
        HeaderValue::Str(s) => Value::String(s.clone()),
        HeaderValue::Bytes(b) => Value::String(String::from_utf8_lossy(b).into_owned()),
        HeaderValue::List(items) => Value::Array(items.iter().map(value_to_json).collect()),
        HeaderValue::Map(entries) => to_json(entries),
    }
}

/// A JSON object (or null/absent) as arguments; anything else is a bad request.
pub fn from_json(v: Option<&Value>) -> Result<Arguments, ApiError> {
    match v {
        None | Some(Value::Null) => Ok(Arguments::new()),
        Some(Value::Object(map)) => Ok(entries_at(map, 1).collect()),
        Some(_) => Err(ApiError::BadRequest(
            "arguments must be a JSON object".into(),
        )),
    }
}

/// An object's entries at `depth` (see [`HeaderValue::MAX_NESTING`]).
fn entries_at(
    map: &Map<String, Value>,
    depth: usize,
) -> impl Iterator<Item = (String, HeaderValue)> + '_ {
    map.iter()
        .map(move |(k, v)| (k.clone(), json_to_value(v, depth)))
}

fn json_to_value(v: &Value, depth: usize) -> HeaderValue {
    match v {
        Value::Null => HeaderValue::Void,
        Value::Bool(b) => HeaderValue::Bool(*b),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                HeaderValue::Int(i)
            } else if let Some(u) = n.as_u64() {
                HeaderValue::UInt(u)
            } else {
                HeaderValue::Float(n.as_f64().unwrap_or(0.0))
            }
        }
        Value::String(s) => HeaderValue::Str(s.clone()),
        Value::Array(items) => HeaderValue::list_at(depth, |below| {
            items.iter().map(move |v| json_to_value(v, below))
        }),
        Value::Object(map) => HeaderValue::map_at(depth, |below| entries_at(map, below)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn arguments_round_trip_through_json() {
        let v = json!({"x-max-length": 10, "x-overflow": "reject-publish", "flag": true, "f": 1.5});
        let args = from_json(Some(&v)).unwrap();
        assert_eq!(args.get("x-max-length"), Some(&HeaderValue::Int(10)));
        assert_eq!(to_json(&args), v);
        assert!(from_json(Some(&json!([1]))).is_err());
        assert!(from_json(None).unwrap().is_empty());
    }

    #[test]
    fn arrays_and_objects_round_trip_too() {
        let v = json!({"x-filters": ["a", 2, {"k": [true, null]}], "o": {"n": -1}});
        let args = from_json(Some(&v)).unwrap();
        assert_eq!(
            args.get("o"),
            Some(&HeaderValue::Map(
                [("n", HeaderValue::Int(-1))].into_iter().collect()
            ))
        );
        assert_eq!(to_json(&args), v);
    }

    #[test]
    fn a_nested_object_is_the_same_table_whatever_order_a_client_sent() {
        // serde_json keeps an object's keys sorted; a 0-9-1 client's table keeps its order.
        let from_api = from_json(Some(&json!({"t": {"b": 1, "a": 2}}))).unwrap();
        let table: Arguments = [("b", HeaderValue::Int(1)), ("a", HeaderValue::Int(2))]
            .into_iter()
            .collect();
        let from_client: Arguments = [("t", HeaderValue::Map(table))].into_iter().collect();
        assert!(from_api.same_entries(&from_client));
        assert!(from_api
            .get("t")
            .unwrap()
            .matches(from_client.get("t").unwrap()));
    }
}
