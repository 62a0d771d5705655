//! JMS message selectors (JMS 2.0 section 3.8.1): the SQL-92 conditional-expression subset a
//! consumer uses to pick the messages it receives.
//!
//! Pure: no I/O and no global state. The text comes from a network peer, so parsing refuses
//! text longer than [`MAX_LEN`] bytes and nesting deeper than [`MAX_DEPTH`], and neither
//! parsing nor evaluation can panic or recurse without bound.
//!
//! The dialect is JMS's with the extensions ActiveMQ and Qpid Broker-J accept, so selectors
//! written for those brokers carry over:
//!
//! - Literals: `'strings'` (`''` is a quote), decimal integers with an optional `L`, `0x` hex
//!   and leading-zero octal integers, approximate numbers (`7E3`, `7.`, `.5`, an optional
//!   `F`/`D` suffix), `TRUE`, `FALSE`, and `NULL` (usable as a value: `a = NULL` is never
//!   true). An integer outside the `i64` range is a parse error.
//! - Identifiers follow Java's rules, with dots allowed after the first character (as
//!   ActiveMQ, Broker-J and qpidd allow), and are case-sensitive; a `"double-quoted"` name
//!   may hold any characters (`""` is a quote) including a keyword's spelling. Keywords are
//!   case-insensitive and cannot be used as bare names.
//! - Blank text (Java white space only) is JMS's "no selector": it parses to a selector that
//!   matches every message.
//!
//! Evaluation uses SQL's three-valued logic, and a message matches only when the selector is
//! TRUE. Where JMS leaves room, this crate decides:
//!
//! - Numbers compare by value across integer and floating types (exactly, without rounding
//!   the integer to `f64`); NaN is unordered (only `<>` holds). Strings and booleans support
//!   only `=` and `<>`; ordering them (`'a' < 'b'`) is UNKNOWN rather than a parse error.
//!   Comparing values of unlike types (a string with a number, a boolean with a number) is
//!   FALSE for every operator, as JMS 3.8.1.2 says; anything compared with NULL is UNKNOWN.
//! - Integer arithmetic is checked: overflow and division by zero give NULL (so the
//!   comparison using it is UNKNOWN). Any floating operand makes it IEEE arithmetic.
//! - A name or literal used directly as a condition is TRUE or FALSE only if it is a boolean,
//!   otherwise UNKNOWN.
//! - Comparisons, BETWEEN, LIKE, IN and IS NULL do not chain (`a = b = c` is refused, as in
//!   SQL-92); a parenthesised condition can be compared as a boolean: `(a > 1) = FALSE`.
//! - In a LIKE pattern the escape character makes whatever follows it literal (not only `_`,
//!   `%` and itself, as ActiveMQ allows); a pattern ending in its escape is a parse error.
//! - `IN` and `LIKE` on a value that is not a string are UNKNOWN, as is NULL.
//! - A LIKE match that would take more steps than a budget linear in the pattern's and the
//!   value's lengths (only a pathological pattern against a long value does) is UNKNOWN.

mod ast;
mod error;
mod eval;
mod lexer;
mod like;
mod parser;
#[cfg(test)]
mod testutil;

use std::borrow::Cow;

pub use error::SelectorError;

/// The longest selector text accepted, in bytes.
pub const MAX_LEN: usize = 65_536;

/// How deeply a selector may nest: each parenthesis, NOT and unary sign adds a level.
pub const MAX_DEPTH: usize = 64;

/// A value a selector reads or computes. `Str` borrows from the message where it can.
#[derive(Debug, Clone, PartialEq)]
pub enum Value<'a> {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(Cow<'a, str>),
}

/// Where a selector's identifiers are looked up (message properties and JMS header fields;
/// the broker maps names like JMSPriority itself). Unknown names are `Value::Null`.
pub trait Fields {
    fn get(&self, identifier: &str) -> Value<'_>;
}

/// A parsed selector, ready to be evaluated against any number of messages.
#[derive(Debug, Clone)]
pub struct Selector {
    text: String,
    root: ast::Expr,
}

impl Selector {
    /// Parses `text`. Refuses text longer than [`MAX_LEN`] bytes and nesting deeper than
    /// [`MAX_DEPTH`]. Blank text gives a selector that matches every message.
    pub fn parse(text: &str) -> Result<Selector, SelectorError> {
        if text.len() > MAX_LEN {
            return Err(SelectorError::TooLong { len: text.len() });
        }
        let root = parser::parse(text)?;
        Ok(Selector {
            text: text.to_owned(),
            root,
        })
    }

    /// True only when the selector evaluates to TRUE (unknown/NULL and FALSE don't match).
    pub fn matches(&self, fields: &dyn Fields) -> bool {
        eval::truth(&self.root, fields) == eval::Truth::True
    }

    /// The text it was parsed from.
    pub fn text(&self) -> &str {
        &self.text
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::props;

    fn matches(text: &str, fields: &[(&str, Value<'static>)]) -> bool {
        Selector::parse(text)
            .unwrap_or_else(|e| panic!("{text:?}: {e}"))
            .matches(&props(fields))
    }

    fn s(text: &'static str) -> Value<'static> {
        Value::Str(Cow::Borrowed(text))
    }

    #[test]
    fn jms_spec_examples() {
        let car = [
            ("JMSType", s("car")),
            ("color", s("blue")),
            ("weight", Value::Int(3000)),
        ];
        let selector = "JMSType = 'car' AND color = 'blue' AND weight > 2500";
        assert!(matches(selector, &car));
        assert!(!matches(selector, &[("weight", Value::Int(3000))]));
        assert!(!matches(
            selector,
            &[
                ("JMSType", s("car")),
                ("color", s("blue")),
                ("weight", Value::Int(2500)),
            ]
        ));

        for (phone, want) in [("123", true), ("12993", true), ("1234", false)] {
            assert_eq!(
                matches("phone LIKE '12%3'", &[("phone", s(phone))]),
                want,
                "{phone}"
            );
        }
        for (word, want) in [("lose", true), ("loose", false)] {
            assert_eq!(
                matches("word LIKE 'l_se'", &[("word", s(word))]),
                want,
                "{word}"
            );
        }
        for (value, want) in [("_foo", true), ("bar", false)] {
            assert_eq!(
                matches(
                    "underscored LIKE '\\_%' ESCAPE '\\'",
                    &[("underscored", s(value))]
                ),
                want,
                "{value}"
            );
        }
        assert!(matches("prop_name IS NULL", &[]));
        assert!(!matches(
            "prop_name IS NULL",
            &[("prop_name", Value::Int(1))]
        ));
        assert!(matches("prop_name IS NOT NULL", &[("prop_name", s(""))]));

        let countries = "Country IN (' UK', 'US', 'France')";
        assert!(matches(countries, &[("Country", s(" UK"))]));
        assert!(matches(countries, &[("Country", s("France"))]));
        assert!(!matches(countries, &[("Country", s("UK"))]));
        assert!(!matches(countries, &[("Country", s("Peru"))]));
        assert!(!matches(countries, &[]));
        assert!(matches(
            "Country NOT IN (' UK', 'US', 'France')",
            &[("Country", s("Peru"))]
        ));
        assert!(!matches("Country NOT IN (' UK', 'US', 'France')", &[]));

        for (age, want) in [(14, false), (15, true), (17, true), (19, true), (20, false)] {
            assert_eq!(
                matches("age BETWEEN 15 AND 19", &[("age", Value::Int(age))]),
                want,
                "{age}"
            );
            assert_eq!(
                matches("age NOT BETWEEN 15 AND 19", &[("age", Value::Int(age))]),
                !want,
                "{age}"
            );
        }
        assert!(!matches("age BETWEEN 15 AND 19", &[]));
        assert!(!matches("age NOT BETWEEN 15 AND 19", &[]));
    }

    #[test]
    fn boolean_property_as_selector() {
        assert!(matches("flag", &[("flag", Value::Bool(true))]));
        assert!(!matches("flag", &[("flag", Value::Bool(false))]));
        assert!(!matches("flag", &[("flag", s("true"))]));
        assert!(!matches("flag", &[]));
        assert!(matches("NOT flag", &[("flag", Value::Bool(false))]));
        assert!(!matches("NOT flag", &[]));
    }

    #[test]
    fn keywords_any_case() {
        let fields = [("a", Value::Int(1)), ("s", s("xy"))];
        assert!(matches(
            "a between 0 and 2 And s like 'x%' escape '!' aNd s not In ('q') \
             oR a iS nUlL",
            &fields
        ));
        assert!(matches("a = 1 AND tRuE", &fields));
        assert!(matches("s IS not null", &fields));
    }

    #[test]
    fn identifiers_are_case_sensitive() {
        assert!(matches("Color = 'red'", &[("Color", s("red"))]));
        assert!(!matches("color = 'red'", &[("Color", s("red"))]));
    }

    #[test]
    fn quoted_identifiers() {
        let fields = [
            ("my-prop", Value::Int(3)),
            ("a\"b", Value::Int(4)),
            ("AND", Value::Bool(true)),
            ("with space", s("x")),
        ];
        assert!(matches("\"my-prop\" = 3", &fields));
        assert!(matches("\"a\"\"b\" = 4", &fields));
        assert!(matches("\"AND\"", &fields));
        assert!(matches("\"with space\" LIKE 'x'", &fields));
        assert!(!matches("\"my-prop\" = 4", &fields));
    }

    #[test]
    fn numeric_literals() {
        let n = |v: i64| [("n", Value::Int(v))];
        assert!(matches("n = 0x1F", &n(31)));
        assert!(matches("n = 0X1f", &n(31)));
        assert!(matches("n = 017", &n(15)));
        assert!(matches("n = 10L", &n(10)));
        assert!(matches("n = -9223372036854775808", &n(i64::MIN)));
        assert!(matches("n = 9223372036854775807", &n(i64::MAX)));
        assert!(matches("n = 7E3", &n(7000)));
        assert!(matches("n = 7.", &n(7)));
        assert!(matches("n = -57.9E2", &n(-5790)));
        assert!(matches("n * .5 = 1.5", &n(3)));
        assert!(matches("n = 2.0F", &n(2)));
        assert!(matches("n = 2D", &n(2)));
        assert!(matches("n > 1.5", &n(2)));
        assert!(!matches("n = 017", &n(17)));
    }

    #[test]
    fn blank_selects_everything() {
        for text in ["", " ", "\t\r\n\x0c "] {
            let selector = Selector::parse(text).expect("blank parses");
            assert!(selector.matches(&props(&[])), "{text:?}");
            assert_eq!(selector.text(), text);
        }
        // Not blank by Java's rules.
        assert!(Selector::parse("\u{a0}").is_err());
    }

    #[test]
    fn text_is_kept() {
        let text = "  a = 'x''y'  ";
        let selector = Selector::parse(text).expect("parses");
        assert_eq!(selector.text(), text);
        let copy = selector.clone();
        assert_eq!(copy.text(), text);
        assert!(copy.matches(&props(&[("a", s("x'y"))])));
    }

    #[test]
    fn length_limit() {
        let pad = |n: usize| format!("a = 1{}", " ".repeat(n - 5));
        assert!(Selector::parse(&pad(MAX_LEN)).is_ok());
        assert_eq!(
            Selector::parse(&pad(MAX_LEN + 1)).err(),
            Some(SelectorError::TooLong { len: MAX_LEN + 1 })
        );
        assert_eq!(
            Selector::parse(&"NOT ".repeat(100_000)).err(),
            Some(SelectorError::TooLong { len: 400_000 })
        );
    }

    #[test]
    fn deep_input_is_an_error_not_a_crash() {
        for text in [
            "NOT ".repeat(16_000) + "a",
            "-".repeat(60_000) + "1",
            "(".repeat(60_000),
            "(".repeat(30_000) + "a" + &")".repeat(30_000),
            "NOT (".repeat(10_000),
        ] {
            assert!(
                matches!(Selector::parse(&text), Err(SelectorError::TooDeep { .. })),
                "{}",
                &text[..10]
            );
        }
    }

    #[test]
    fn deepest_selectors_fit_a_small_stack() {
        // Threads get 2 MiB stacks by default (std and tokio alike); the deepest selectors
        // must parse and evaluate well inside that even unoptimized, where they take about
        // 600 KiB (under 128 KiB optimized).
        let deepest = [
            format!("{}a{}", "(".repeat(MAX_DEPTH), ")".repeat(MAX_DEPTH)),
            format!("{}a", "NOT ".repeat(MAX_DEPTH)),
            format!("{}a", "-".repeat(MAX_DEPTH)),
            format!(
                "{}a = 1{}",
                "NOT (b = 1 OR -(".repeat(MAX_DEPTH / 4),
                ") = 1)".repeat(MAX_DEPTH / 4)
            ),
        ];
        std::thread::Builder::new()
            .stack_size(1024 * 1024)
            .spawn(move || {
                for text in &deepest {
                    let selector = Selector::parse(text).expect("parses");
                    let _ = selector.matches(&props(&[("a", Value::Int(1))]));
                    drop(selector.clone());
                }
            })
            .expect("spawns")
            .join()
            .expect("no stack overflow");
    }

    #[test]
    fn error_messages_say_what_to_do() {
        let message = |text: &str| Selector::parse(text).expect_err(text).to_string();
        assert_eq!(
            message("a = 1 b"),
            "expected AND, OR or the end of the selector at byte 6, found \"b\""
        );
        assert_eq!(
            message("a = 'x"),
            "string literal starting at byte 4 is not closed; end it with ' (write '' for a \
             quote inside it)"
        );
        assert!(message("a = 99999999999999999999").contains("byte 4"));
        assert!(message("a LIKE 'x' ESCAPE 'ab'").contains("exactly one character"));
        assert!(message(&"(".repeat(100)).contains("deeper than 64"));
        assert!(message(&" ".repeat(MAX_LEN + 1)).contains("65536"));
    }
}
