#![no_main]
// Arbitrary text (bytes read as lossy UTF-8) through the JMS selector parser; whatever parses
// is evaluated against a few fixed properties of every type. Neither step may panic or
// overflow the stack, a selector keeps its text, and the limits hold.
use std::borrow::Cow;

use ferry_selector::{Fields, Selector, Value, MAX_LEN};

struct Message;

impl Fields for Message {
    fn get(&self, identifier: &str) -> Value<'_> {
        match identifier {
            "s" | "JMSType" => Value::Str(Cow::Borrowed("car")),
            "e" => Value::Str(Cow::Borrowed("")),
            "u" => Value::Str(Cow::Borrowed("_é%\\")),
            "i" | "JMSPriority" => Value::Int(4),
            "max" => Value::Int(i64::MAX),
            "min" => Value::Int(i64::MIN),
            "f" => Value::Float(2.5),
            "nan" => Value::Float(f64::NAN),
            "inf" => Value::Float(f64::INFINITY),
            "b" => Value::Bool(true),
            "no" => Value::Bool(false),
            _ => Value::Null,
        }
    }
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    match Selector::parse(&text) {
        Ok(selector) => {
            assert!(text.len() <= MAX_LEN);
            assert_eq!(selector.text(), text);
            let first = selector.matches(&Message);
            assert_eq!(selector.clone().matches(&Message), first);
        }
        Err(error) => {
            let _ = error.to_string();
        }
    }
});
