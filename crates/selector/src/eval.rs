//! Evaluation with SQL's three-valued logic: a condition is TRUE, FALSE or UNKNOWN, and NULL
//! (a missing property) or a value of the wrong type makes the conditions it reaches UNKNOWN
//! rather than FALSE, so `NOT (price > 10)` does not match a message without a price.
//!
//! Values borrow from the selector (literals) and from the message (`Fields`); nothing here
//! allocates. Recursion follows the tree, whose height the parser bounds.

use std::borrow::Cow;
use std::cmp::Ordering;

use crate::ast::{ArithOp, CmpOp, Expr, Sign};
use crate::{Fields, Value};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Truth {
    False,
    Unknown,
    True,
}

impl Truth {
    fn not(self) -> Truth {
        match self {
            Truth::False => Truth::True,
            Truth::Unknown => Truth::Unknown,
            Truth::True => Truth::False,
        }
    }

    fn negate_if(self, negated: bool) -> Truth {
        if negated {
            self.not()
        } else {
            self
        }
    }
}

impl From<bool> for Truth {
    fn from(b: bool) -> Truth {
        if b {
            Truth::True
        } else {
            Truth::False
        }
    }
}

/// `expr` as a condition.
pub(crate) fn truth(expr: &Expr, fields: &dyn Fields) -> Truth {
    match expr {
        Expr::Not(operand) => truth(operand, fields).not(),
        Expr::And(terms) => {
            let mut result = Truth::True;
            for term in terms {
                match truth(term, fields) {
                    Truth::False => return Truth::False,
                    Truth::Unknown => result = Truth::Unknown,
                    Truth::True => {}
                }
            }
            result
        }
        Expr::Or(terms) => {
            let mut result = Truth::False;
            for term in terms {
                match truth(term, fields) {
                    Truth::True => return Truth::True,
                    Truth::Unknown => result = Truth::Unknown,
                    Truth::False => {}
                }
            }
            result
        }
        Expr::Compare(op, left, right) => compare(*op, &value(left, fields), &value(right, fields)),
        Expr::Between {
            negated,
            operand,
            low,
            high,
        } => {
            let operand = value(operand, fields);
            let above = compare(CmpOp::Ge, &operand, &value(low, fields));
            let within = match above {
                Truth::False => Truth::False,
                above => match compare(CmpOp::Le, &operand, &value(high, fields)) {
                    Truth::False => Truth::False,
                    Truth::True => above,
                    Truth::Unknown => Truth::Unknown,
                },
            };
            within.negate_if(*negated)
        }
        Expr::Like {
            negated,
            operand,
            pattern,
        } => match value(operand, fields) {
            Value::Str(s) => match pattern.matches(&s) {
                Some(m) => Truth::from(m).negate_if(*negated),
                None => Truth::Unknown,
            },
            _ => Truth::Unknown,
        },
        Expr::In {
            negated,
            operand,
            list,
        } => match value(operand, fields) {
            Value::Str(s) => {
                let found = list.binary_search_by(|item| item.as_str().cmp(&s)).is_ok();
                Truth::from(found).negate_if(*negated)
            }
            _ => Truth::Unknown,
        },
        Expr::IsNull { negated, operand } => {
            Truth::from(matches!(value(operand, fields), Value::Null) != *negated)
        }
        Expr::Literal(_) | Expr::Ident(_) | Expr::Unary(..) | Expr::Arith(..) => {
            match value(expr, fields) {
                Value::Bool(b) => Truth::from(b),
                _ => Truth::Unknown,
            }
        }
    }
}

/// `expr` as a value; a condition's UNKNOWN is NULL.
pub(crate) fn value<'a>(expr: &'a Expr, fields: &'a dyn Fields) -> Value<'a> {
    match expr {
        Expr::Literal(literal) => borrow(literal),
        Expr::Ident(name) => fields.get(name),
        Expr::Unary(sign, operand) => match (sign, value(operand, fields)) {
            (Sign::Plus, v @ (Value::Int(_) | Value::Float(_))) => v,
            (Sign::Minus, Value::Int(i)) => i.checked_neg().map_or(Value::Null, Value::Int),
            (Sign::Minus, Value::Float(f)) => Value::Float(-f),
            _ => Value::Null,
        },
        Expr::Arith(first, rest) => {
            let mut acc = value(first, fields);
            for (op, operand) in rest {
                if !matches!(acc, Value::Int(_) | Value::Float(_)) {
                    // Nothing can make it numeric again: skip the rest.
                    return Value::Null;
                }
                acc = arith(*op, &acc, &value(operand, fields));
            }
            acc
        }
        _ => match truth(expr, fields) {
            Truth::True => Value::Bool(true),
            Truth::False => Value::Bool(false),
            Truth::Unknown => Value::Null,
        },
    }
}

fn borrow<'a>(literal: &'a Value<'static>) -> Value<'a> {
    match literal {
        Value::Null => Value::Null,
        Value::Bool(b) => Value::Bool(*b),
        Value::Int(i) => Value::Int(*i),
        Value::Float(f) => Value::Float(*f),
        Value::Str(s) => Value::Str(Cow::Borrowed(s)),
    }
}

/// Integers stay exact (overflow and division by zero are NULL); a float operand makes the
/// operation IEEE floating point, as Java's numeric promotion does.
fn arith(op: ArithOp, left: &Value, right: &Value) -> Value<'static> {
    if let (Value::Int(a), Value::Int(b)) = (left, right) {
        let result = match op {
            ArithOp::Add => a.checked_add(*b),
            ArithOp::Sub => a.checked_sub(*b),
            ArithOp::Mul => a.checked_mul(*b),
            ArithOp::Div => a.checked_div(*b),
        };
        return result.map_or(Value::Null, Value::Int);
    }
    let (Some(a), Some(b)) = (as_float(left), as_float(right)) else {
        return Value::Null;
    };
    Value::Float(match op {
        ArithOp::Add => a + b,
        ArithOp::Sub => a - b,
        ArithOp::Mul => a * b,
        ArithOp::Div => a / b,
    })
}

fn as_float(v: &Value) -> Option<f64> {
    match v {
        Value::Int(i) => Some(*i as f64),
        Value::Float(f) => Some(*f),
        _ => None,
    }
}

/// Numbers compare by value whatever their types; strings and booleans only for (in)equality.
/// NULL is UNKNOWN; values of unlike types are FALSE (JMS 2.0, 3.8.1.2: "if the comparison
/// of non-like type values is attempted, the value of the operation is false").
fn compare(op: CmpOp, left: &Value, right: &Value) -> Truth {
    let ordering = match (left, right) {
        (Value::Int(a), Value::Int(b)) => Some(a.cmp(b)),
        (Value::Int(a), Value::Float(b)) => compare_int_float(*a, *b),
        (Value::Float(a), Value::Int(b)) => compare_int_float(*b, *a).map(Ordering::reverse),
        (Value::Float(a), Value::Float(b)) => a.partial_cmp(b),
        (Value::Str(a), Value::Str(b)) => return equality(op, a == b),
        (Value::Bool(a), Value::Bool(b)) => return equality(op, a == b),
        (Value::Null, _) | (_, Value::Null) => return Truth::Unknown,
        _ => return Truth::False,
    };
    Truth::from(match ordering {
        // NaN is unordered: only `<>` holds, as with Java's operators.
        None => op == CmpOp::Ne,
        Some(ordering) => match op {
            CmpOp::Eq => ordering == Ordering::Equal,
            CmpOp::Ne => ordering != Ordering::Equal,
            CmpOp::Lt => ordering == Ordering::Less,
            CmpOp::Le => ordering != Ordering::Greater,
            CmpOp::Gt => ordering == Ordering::Greater,
            CmpOp::Ge => ordering != Ordering::Less,
        },
    })
}

fn equality(op: CmpOp, equal: bool) -> Truth {
    match op {
        CmpOp::Eq => Truth::from(equal),
        CmpOp::Ne => Truth::from(!equal),
        _ => Truth::Unknown,
    }
}

/// Exact, unlike converting the integer to f64 (which would make 2^53 + 1 equal 2^53).
fn compare_int_float(i: i64, f: f64) -> Option<Ordering> {
    const TWO_POW_63: f64 = 9_223_372_036_854_775_808.0;
    if f.is_nan() {
        return None;
    }
    if f >= TWO_POW_63 {
        return Some(Ordering::Less);
    }
    if f < -TWO_POW_63 {
        return Some(Ordering::Greater);
    }
    let whole = f.trunc();
    // In range, so the conversion is exact.
    match i.cmp(&(whole as i64)) {
        Ordering::Equal => 0.0.partial_cmp(&(f - whole)),
        unequal => Some(unequal),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{props, Props};
    use crate::Selector;
    use Truth::{False as F, True as T, Unknown as U};

    fn eval(text: &str, fields: &Props) -> Truth {
        let short: String = text.chars().take(80).collect();
        let selector = Selector::parse(text).unwrap_or_else(|e| panic!("{short:?}: {e}"));
        let result = truth(&selector.root, fields);
        assert_eq!(selector.matches(fields), result == T, "{short}");
        result
    }

    fn eval0(text: &str) -> Truth {
        eval(text, &props(&[]))
    }

    fn val(text: &str) -> Value<'static> {
        let selector = Selector::parse(text).unwrap_or_else(|e| panic!("{text:?}: {e}"));
        match value(&selector.root, &props(&[])) {
            Value::Str(s) => Value::Str(Cow::Owned(s.into_owned())),
            Value::Null => Value::Null,
            Value::Bool(b) => Value::Bool(b),
            Value::Int(i) => Value::Int(i),
            Value::Float(f) => Value::Float(f),
        }
    }

    /// Writes a truth value as a selector term that evaluates to it.
    fn term(t: Truth) -> &'static str {
        match t {
            T => "TRUE",
            F => "FALSE",
            U => "missing",
        }
    }

    #[test]
    fn three_valued_tables() {
        let all = [T, F, U];
        for a in all {
            assert_eq!(eval0(&format!("NOT {}", term(a))), a.not());
            for b in all {
                let and = match (a, b) {
                    (F, _) | (_, F) => F,
                    (T, T) => T,
                    _ => U,
                };
                let or = match (a, b) {
                    (T, _) | (_, T) => T,
                    (F, F) => F,
                    _ => U,
                };
                let (x, y) = (term(a), term(b));
                assert_eq!(eval0(&format!("{x} AND {y}")), and, "{x} AND {y}");
                assert_eq!(eval0(&format!("{x} OR {y}")), or, "{x} OR {y}");
            }
        }
        assert_eq!(eval0("NOT NOT missing"), U);
        assert_eq!(eval0("TRUE AND TRUE AND missing AND TRUE"), U);
        assert_eq!(eval0("missing AND TRUE AND FALSE"), F);
        assert_eq!(eval0("FALSE OR missing OR TRUE"), T);
    }

    #[test]
    fn short_circuit_skips_the_rest() {
        struct Counting(std::cell::Cell<u32>);
        impl Fields for Counting {
            fn get(&self, _: &str) -> Value<'_> {
                self.0.set(self.0.get() + 1);
                Value::Int(1)
            }
        }
        let fields = Counting(std::cell::Cell::new(0));
        let selector = Selector::parse("a = 2 AND b = 1 AND c = 1").expect("parses");
        assert!(!selector.matches(&fields));
        assert_eq!(fields.0.get(), 1);
        let selector = Selector::parse("a = 1 OR b = 1").expect("parses");
        assert!(selector.matches(&fields));
        assert_eq!(fields.0.get(), 2);
    }

    #[test]
    fn bare_values_as_conditions() {
        let p = props(&[
            ("yes", Value::Bool(true)),
            ("no", Value::Bool(false)),
            ("one", Value::Int(1)),
            ("s", Value::Str("true".into())),
        ]);
        assert_eq!(eval("yes", &p), T);
        assert_eq!(eval("no", &p), F);
        assert_eq!(eval("NOT no", &p), T);
        assert_eq!(eval("one", &p), U);
        assert_eq!(eval("s", &p), U);
        assert_eq!(eval("missing", &p), U);
        assert_eq!(eval("NOT one", &p), U);
        assert_eq!(eval("1", &p), U);
        assert_eq!(eval("'TRUE'", &p), U);
        assert_eq!(eval("TRUE", &p), T);
        assert_eq!(eval("NULL", &p), U);
        assert_eq!(eval("(yes)", &p), T);
    }

    #[test]
    fn comparisons() {
        let p = props(&[
            ("i", Value::Int(5)),
            ("f", Value::Float(5.0)),
            ("s", Value::Str("abc".into())),
            ("b", Value::Bool(true)),
        ]);
        let cases = [
            ("i = 5", T),
            ("i <> 5", F),
            ("i > 4", T),
            ("i >= 5", T),
            ("i < 5", F),
            ("i <= 5", T),
            ("i > 5", F),
            ("i = 5.0", T),
            ("i < 5.5", T),
            ("f = 5", T),
            ("f > 4", T),
            ("f = i", T),
            ("f >= 5.0", T),
            ("s = 'abc'", T),
            ("s <> 'abc'", F),
            ("s <> 'ABC'", T),
            ("'abc' = s", T),
            ("s < 'b'", U),
            ("s >= 'abc'", U),
            ("b = TRUE", T),
            ("b <> FALSE", T),
            ("b = FALSE", F),
            ("b > FALSE", U),
            // Unlike types are FALSE (JMS 3.8.1.2), for = and <> alike, so NOT makes
            // them TRUE.
            ("s = 5", F),
            ("s <> 5", F),
            ("i = '5'", F),
            ("b = 1", F),
            ("b <> 1", F),
            ("s = TRUE", F),
            ("i > 'a'", F),
            ("NOT (s = 5)", T),
            // NULL compares as UNKNOWN, even with NULL.
            ("missing = 5", U),
            ("missing <> 5", U),
            ("5 <> missing", U),
            ("missing = missing", U),
            ("i = NULL", U),
            ("NOT (missing = 5)", U),
        ];
        for (text, want) in cases {
            assert_eq!(eval(text, &p), want, "{text}");
        }
    }

    #[test]
    fn truth_values_compare_as_booleans() {
        let p = props(&[("i", Value::Int(5))]);
        assert_eq!(eval("(i > 1) = TRUE", &p), T);
        assert_eq!(eval("(i > 9) = FALSE", &p), T);
        assert_eq!(eval("(i > 1) = (i < 9)", &p), T);
        assert_eq!(eval("(missing > 1) = TRUE", &p), U);
        assert_eq!(eval("(i > 1) IS NULL", &p), F);
        assert_eq!(eval("(missing > 1) IS NULL", &p), T);
    }

    #[test]
    fn int_float_comparison_is_exact() {
        let big = 1_i64 << 53;
        let p = props(&[("big1", Value::Int(big + 1)), ("big", Value::Int(big))]);
        assert_eq!(eval("big1 = 9007199254740992.0", &p), F);
        assert_eq!(eval("big1 > 9007199254740992.0", &p), T);
        assert_eq!(eval("big = 9007199254740992.0", &p), T);
        assert_eq!(
            compare_int_float(i64::MAX, 2f64.powi(63)),
            Some(Ordering::Less)
        );
        assert_eq!(
            compare_int_float(i64::MIN, -(2f64.powi(63))),
            Some(Ordering::Equal)
        );
        assert_eq!(compare_int_float(i64::MIN, -1e19), Some(Ordering::Greater));
        assert_eq!(compare_int_float(0, -0.0), Some(Ordering::Equal));
        assert_eq!(compare_int_float(-3, -2.5), Some(Ordering::Less));
        assert_eq!(compare_int_float(-2, -2.5), Some(Ordering::Greater));
        assert_eq!(compare_int_float(2, 2.5), Some(Ordering::Less));
        assert_eq!(compare_int_float(3, 2.5), Some(Ordering::Greater));
        assert_eq!(compare_int_float(1, f64::INFINITY), Some(Ordering::Less));
        assert_eq!(
            compare_int_float(1, f64::NEG_INFINITY),
            Some(Ordering::Greater)
        );
        assert_eq!(compare_int_float(1, f64::NAN), None);
    }

    #[test]
    fn nan_is_unordered() {
        let p = props(&[("nan", Value::Float(f64::NAN))]);
        assert_eq!(eval("nan = nan", &p), F);
        assert_eq!(eval("nan <> nan", &p), T);
        assert_eq!(eval("nan < 1", &p), F);
        assert_eq!(eval("nan >= 1", &p), F);
        assert_eq!(eval("0.0 / 0.0 <> 0", &p), T);
    }

    #[test]
    fn arithmetic() {
        assert_eq!(val("1 + 2 * 3"), Value::Int(7));
        assert_eq!(val("(1 + 2) * 3"), Value::Int(9));
        assert_eq!(val("10 - 4 - 3"), Value::Int(3));
        assert_eq!(val("100 / 10 / 5"), Value::Int(2));
        assert_eq!(val("7 / 2"), Value::Int(3));
        assert_eq!(val("-7 / 2"), Value::Int(-3));
        assert_eq!(val("7 / 2.0"), Value::Float(3.5));
        assert_eq!(val("1 + 0.5"), Value::Float(1.5));
        assert_eq!(val("-(2 + 3)"), Value::Int(-5));
        assert_eq!(val("- -5"), Value::Int(5));
        assert_eq!(val("+(2)"), Value::Int(2));
        assert_eq!(val("--2.5"), Value::Float(2.5));
        assert_eq!(val("2 - -3"), Value::Int(5));
        assert_eq!(val("1.0 / 0"), Value::Float(f64::INFINITY));
        // Integer overflow and division by zero are NULL, not a wrapped value or a panic.
        assert_eq!(val("1 / 0"), Value::Null);
        assert_eq!(val("0 / 0"), Value::Null);
        assert_eq!(val("9223372036854775807 + 1"), Value::Null);
        assert_eq!(val("-9223372036854775808 - 1"), Value::Null);
        assert_eq!(val("-9223372036854775808 / -1"), Value::Null);
        assert_eq!(val("-(-9223372036854775808)"), Value::Null);
        assert_eq!(val("4611686018427387904 * 2"), Value::Null);
        assert_eq!(
            val("9223372036854775807 + 1.0"),
            Value::Float(2f64.powi(63))
        );
        // Non-numbers and NULL poison the whole expression.
        assert_eq!(val("'a' + 1"), Value::Null);
        assert_eq!(val("1 + 'a'"), Value::Null);
        assert_eq!(val("TRUE * 1"), Value::Null);
        assert_eq!(val("missing + 1"), Value::Null);
        assert_eq!(val("1 + missing * 2"), Value::Null);
        assert_eq!(val("-'a'"), Value::Null);
        assert_eq!(val("+'a'"), Value::Null);
        assert_eq!(val("-TRUE"), Value::Null);
        assert_eq!(val("'a'"), Value::Str("a".into()));
        let p = props(&[("n", Value::Int(3))]);
        assert_eq!(eval("n * 2 + 1 = 7", &p), T);
        assert_eq!(eval("n / 0 = 0", &p), U);
        assert_eq!(eval("NOT (n / 0 = 0)", &p), U);
        assert_eq!(eval("n + 0.5 > 3", &p), T);
    }

    #[test]
    fn between() {
        let p = props(&[
            ("age", Value::Int(17)),
            ("f", Value::Float(15.5)),
            ("s", Value::Str("m".into())),
        ]);
        let cases = [
            ("age BETWEEN 15 AND 19", T),
            ("age BETWEEN 17 AND 17", T),
            ("age BETWEEN 18 AND 19", F),
            ("age BETWEEN 10 AND 16", F),
            ("age BETWEEN 19 AND 15", F),
            ("age NOT BETWEEN 15 AND 19", F),
            ("age NOT BETWEEN 18 AND 19", T),
            ("f BETWEEN 15 AND 16", T),
            ("age BETWEEN 16.5 AND 17.5", T),
            ("age BETWEEN 10 + 5 AND 20 - 1", T),
            ("missing BETWEEN 1 AND 2", U),
            ("missing NOT BETWEEN 1 AND 2", U),
            // One bound unknown: the other can still make it FALSE.
            ("age BETWEEN missing AND 20", U),
            ("age BETWEEN missing AND 10", F),
            ("age BETWEEN 20 AND missing", F),
            ("age NOT BETWEEN 20 AND missing", T),
            ("age BETWEEN 10 AND missing", U),
            ("s BETWEEN 'a' AND 'z'", U),
            ("age BETWEEN 'a' AND 20", F),
        ];
        for (text, want) in cases {
            assert_eq!(eval(text, &p), want, "{text}");
        }
    }

    #[test]
    fn like() {
        let p = props(&[
            ("s", Value::Str("hello".into())),
            ("u", Value::Str("_x".into())),
            ("n", Value::Int(1)),
        ]);
        let cases = [
            ("s LIKE 'h%'", T),
            ("s LIKE 'h_llo'", T),
            ("s LIKE 'H%'", F),
            ("s LIKE '%l%'", T),
            ("s LIKE 'hell'", F),
            ("s NOT LIKE 'h%'", F),
            ("s NOT LIKE 'x%'", T),
            ("u LIKE '\\_%' ESCAPE '\\'", T),
            ("s LIKE '\\_%' ESCAPE '\\'", F),
            ("u LIKE '!_x' ESCAPE '!'", T),
            ("n LIKE '1'", U),
            ("n NOT LIKE '1'", U),
            ("missing LIKE '%'", U),
            ("missing NOT LIKE '%'", U),
            ("'abc' LIKE 'a%'", T),
        ];
        for (text, want) in cases {
            assert_eq!(eval(text, &p), want, "{text}");
        }
    }

    #[test]
    fn in_list() {
        let p = props(&[("c", Value::Str("US".into())), ("n", Value::Int(1))]);
        let cases = [
            ("c IN ('UK', 'US', 'France')", T),
            ("c IN ('UK')", F),
            ("c IN ('us')", F),
            ("c NOT IN ('UK', 'US')", F),
            ("c NOT IN ('UK', 'France')", T),
            ("missing IN ('UK')", U),
            ("missing NOT IN ('UK')", U),
            ("n IN ('1')", U),
            ("n NOT IN ('1')", U),
        ];
        for (text, want) in cases {
            assert_eq!(eval(text, &p), want, "{text}");
        }
        let many: Vec<String> = (0..1000).map(|i| format!("'v{i}'")).collect();
        let p = props(&[("v", Value::Str("v777".into()))]);
        assert_eq!(eval(&format!("v IN ({})", many.join(",")), &p), T);
        assert_eq!(eval(&format!("v NOT IN ({})", many.join(",")), &p), F);
    }

    #[test]
    fn is_null_is_never_unknown() {
        let p = props(&[("a", Value::Int(1)), ("n", Value::Null)]);
        assert_eq!(eval("a IS NULL", &p), F);
        assert_eq!(eval("a IS NOT NULL", &p), T);
        assert_eq!(eval("missing IS NULL", &p), T);
        assert_eq!(eval("missing IS NOT NULL", &p), F);
        assert_eq!(eval("n IS NULL", &p), T);
        assert_eq!(eval("a + missing IS NULL", &p), T);
        assert_eq!(eval("1 / 0 IS NULL", &p), T);
        assert_eq!(eval("NULL IS NULL", &p), T);
    }

    #[test]
    fn precedence_changes_results() {
        let p = props(&[
            ("a", Value::Int(1)),
            ("b", Value::Int(0)),
            ("c", Value::Int(0)),
        ]);
        assert_eq!(eval("a = 1 OR b = 2 AND c = 3", &p), T);
        assert_eq!(eval("(a = 1 OR b = 2) AND c = 3", &p), F);
        assert_eq!(eval("NOT a = 1 OR b = 0", &p), T);
        assert_eq!(eval("NOT (a = 1 OR b = 0)", &p), F);
        assert_eq!(eval("a + 2 * 3 = 7", &p), T);
        assert_eq!(eval("a - 1 - 1 = -1", &p), T);
        assert_eq!(eval("-a * -1 = 1", &p), T);
    }

    #[test]
    fn strings_borrow_from_the_message() {
        struct Borrowing(String);
        impl Fields for Borrowing {
            fn get(&self, identifier: &str) -> Value<'_> {
                match identifier {
                    "s" => Value::Str(Cow::Borrowed(&self.0)),
                    _ => Value::Null,
                }
            }
        }
        let fields = Borrowing("abc".into());
        let selector = Selector::parse("s = 'abc'").expect("parses");
        assert!(selector.matches(&fields));
        let Expr::Compare(_, left, right) = &selector.root else {
            panic!("{:?}", selector.root);
        };
        assert!(matches!(value(left, &fields), Value::Str(Cow::Borrowed(_))));
        assert!(matches!(
            value(right, &fields),
            Value::Str(Cow::Borrowed(_))
        ));
    }

    #[test]
    fn long_chains_evaluate() {
        let p = props(&[("a", Value::Int(1))]);
        let ors = vec!["a = 2"; 7_000].join(" OR ");
        assert_eq!(eval(&ors, &p), F);
        assert_eq!(eval(&format!("{ors} OR a = 1"), &p), T);
        let sum = vec!["a"; 15_000].join("+");
        assert_eq!(eval(&format!("{sum} = 15000"), &p), T);
    }
}
