//! A `Fields` over a map, for tests.

use std::borrow::Cow;
use std::collections::HashMap;

use crate::{Fields, Value};

pub(crate) struct Props(HashMap<String, Value<'static>>);

impl Fields for Props {
    fn get(&self, identifier: &str) -> Value<'_> {
        match self.0.get(identifier) {
            None | Some(Value::Null) => Value::Null,
            Some(Value::Bool(b)) => Value::Bool(*b),
            Some(Value::Int(i)) => Value::Int(*i),
            Some(Value::Float(f)) => Value::Float(*f),
            Some(Value::Str(s)) => Value::Str(Cow::Borrowed(s)),
        }
    }
}

pub(crate) fn props(entries: &[(&str, Value<'static>)]) -> Props {
    Props(
        entries
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.clone()))
            .collect(),
    )
}
