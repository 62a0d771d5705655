//! Protocol-neutral header and argument values.

use std::fmt;

use bytes::Bytes;

/// A typed value from an application-headers table or a declare/bind argument table.
///
/// Protocol layers convert their wire types into the nearest variant: arrays and lists into
/// `List`, tables and maps into `Map` (down to [`HeaderValue::MAX_NESTING`] levels); anything
/// without a counterpart (decimals, UUIDs, lists nested deeper, ...) becomes `Other`, which
/// the core stores but never matches.
#[derive(Debug, Clone, PartialEq)]
pub enum HeaderValue {
    Void,
    Bool(bool),
    Int(i64),
    UInt(u64),
    Float(f64),
    Str(String),
    Bytes(Bytes),
    List(Vec<HeaderValue>),
    Map(Headers),
    Other,
}

impl HeaderValue {
    /// Deepest nesting of lists and maps the core keeps: a value at depth 1 is an entry of
    /// a top-level table, and a list or map found below this depth is kept as `Other`. The
    /// bound keeps recursion over a peer's value short, lets the store refuse deeper input
    /// as damage (it only reads back what the core kept), and stays within 0-10's own limit
    /// (32), in which queries send arguments back.
    pub const MAX_NESTING: usize = 16;

    /// A list of `items` at `depth` (see [`HeaderValue::MAX_NESTING`]), or `Other` below
    /// the deepest depth kept; the items are converted only if they are kept.
    pub fn list_at<I: IntoIterator<Item = HeaderValue>>(
        depth: usize,
        items: impl FnOnce(usize) -> I,
    ) -> HeaderValue {
        if depth > Self::MAX_NESTING {
            return HeaderValue::Other;
        }
        HeaderValue::List(items(depth + 1).into_iter().collect())
    }

    /// The value for an error text or a log line, bounded whatever a peer sent: scalars as
    /// `{:?}` shows them (text and binary cut after [`BRIEF_MAX`] characters or octets),
    /// lists and tables by their size.
    pub fn brief(&self) -> Brief<'_> {
        Brief(self)
    }

    /// A map of `entries` at `depth`, as [`HeaderValue::list_at`].
    pub fn map_at<I: IntoIterator<Item = (String, HeaderValue)>>(
        depth: usize,
        entries: impl FnOnce(usize) -> I,
    ) -> HeaderValue {
        if depth > Self::MAX_NESTING {
            return HeaderValue::Other;
        }
        HeaderValue::Map(entries(depth + 1).into_iter().collect())
    }

    /// Equality that is total: a float is identical to another with the same bits (NaN to
    /// itself); everything else as `==`.
    pub fn identical(&self, other: &HeaderValue) -> bool {
        self.total_cmp(other).is_eq()
    }

    /// A total order that agrees with [`HeaderValue::identical`]: by variant, then by value
    /// (floats by their bits).
    fn total_cmp(&self, other: &HeaderValue) -> std::cmp::Ordering {
        use HeaderValue as V;
        let rank = |v: &HeaderValue| match v {
            V::Void => 0,
            V::Bool(_) => 1,
            V::Int(_) => 2,
            V::UInt(_) => 3,
            V::Float(_) => 4,
            V::Str(_) => 5,
            V::Bytes(_) => 6,
            V::List(_) => 7,
            V::Map(_) => 8,
            V::Other => 9,
        };
        match (self, other) {
            (V::Bool(a), V::Bool(b)) => a.cmp(b),
            (V::Int(a), V::Int(b)) => a.cmp(b),
            (V::UInt(a), V::UInt(b)) => a.cmp(b),
            (V::Float(a), V::Float(b)) => a.to_bits().cmp(&b.to_bits()),
            (V::Str(a), V::Str(b)) => a.cmp(b),
            (V::Bytes(a), V::Bytes(b)) => a.cmp(b),
            (V::List(a), V::List(b)) => a
                .iter()
                .zip(b)
                .map(|(x, y)| x.total_cmp(y))
                .find(|o| o.is_ne())
                .unwrap_or_else(|| a.len().cmp(&b.len())),
            // Regardless of order, as a binding's own arguments are: management's JSON keeps
            // an object's keys sorted, a client's table keeps them as sent.
            (V::Map(a), V::Map(b)) => sorted_entries(a)
                .into_iter()
                .zip(sorted_entries(b))
                .map(|(x, y)| x.0.cmp(&y.0).then_with(|| x.1.total_cmp(&y.1)))
                .find(|o| o.is_ne())
                .unwrap_or_else(|| a.len().cmp(&b.len())),
            _ => rank(self).cmp(&rank(other)),
        }
    }

    /// Loose equality used by the headers exchange.
    ///
    /// Clients rarely agree on wire widths or on string-versus-binary encodings, so:
    /// integers compare by numeric value whatever their width or signedness; strings and binary
    /// compare by bytes; a float equals an integer only when it is exactly that integer; a string
    /// equals a number when it parses (as a decimal integer) to that number, which covers
    /// qpidd's "compare string forms" in the common case without allocating. Lists match item
    /// by item, in order, and maps entry by entry under the same names, in any order (sorted
    /// first, so a peer's large table costs a sort, not a search per entry), each value by
    /// these rules. `Other` matches nothing because the core cannot see its content.
    pub fn matches(&self, other: &HeaderValue) -> bool {
        use HeaderValue as V;
        match (self, other) {
            (V::Void, V::Void) => true,
            (V::List(a), V::List(b)) => {
                a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.matches(y))
            }
            (V::Map(a), V::Map(b)) => {
                a.len() == b.len()
                    && by_name(a)
                        .into_iter()
                        .zip(by_name(b))
                        .all(|(x, y)| x.0 == y.0 && x.1.matches(&y.1))
            }
            (V::Bool(a), V::Bool(b)) => a == b,
            (V::Float(a), V::Float(b)) => a == b,
            (V::Str(_) | V::Bytes(_), V::Str(_) | V::Bytes(_)) => {
                self.raw_bytes() == other.raw_bytes()
            }
            (V::Float(f), _) => other.as_i128().is_some_and(|i| float_is_int(*f, i)),
            (_, V::Float(f)) => self.as_i128().is_some_and(|i| float_is_int(*f, i)),
            (V::Str(s), _) => parse_int(s).is_some_and(|i| other.as_i128() == Some(i)),
            (_, V::Str(s)) => parse_int(s).is_some_and(|i| self.as_i128() == Some(i)),
            _ => match (self.as_i128(), other.as_i128()) {
                (Some(a), Some(b)) => a == b,
                _ => false,
            },
        }
    }

    /// The value as text: a `Str`, or a `Bytes` holding valid UTF-8 (0-10 peers often send
    /// strings as binary).
    pub fn as_str(&self) -> Option<&str> {
        match self {
            HeaderValue::Str(s) => Some(s),
            HeaderValue::Bytes(b) => std::str::from_utf8(b).ok(),
            _ => None,
        }
    }

    /// The value as a non-negative integer, accepting decimal strings because configuration
    /// tools send numeric arguments either way.
    pub fn as_u64(&self) -> Option<u64> {
        match self {
            HeaderValue::Int(i) => u64::try_from(*i).ok(),
            HeaderValue::UInt(u) => Some(*u),
            HeaderValue::Str(_) | HeaderValue::Bytes(_) => self.as_str()?.trim().parse().ok(),
            _ => None,
        }
    }

    fn as_i128(&self) -> Option<i128> {
        match self {
            HeaderValue::Int(i) => Some(i128::from(*i)),
            HeaderValue::UInt(u) => Some(i128::from(*u)),
            _ => None,
        }
    }

    fn raw_bytes(&self) -> &[u8] {
        match self {
            HeaderValue::Str(s) => s.as_bytes(),
            HeaderValue::Bytes(b) => b,
            _ => &[],
        }
    }
}

/// Longest text or binary value [`HeaderValue::brief`] shows in full.
pub const BRIEF_MAX: usize = 64;

/// See [`HeaderValue::brief`].
pub struct Brief<'a>(&'a HeaderValue);

impl fmt::Display for Brief<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            HeaderValue::Str(s) if s.len() > BRIEF_MAX => {
                let cut = s
                    .char_indices()
                    .nth(BRIEF_MAX)
                    .map_or(s.len(), |(at, _)| at);
                write!(f, "Str({:?}... of {} octets)", &s[..cut], s.len())
            }
            HeaderValue::Bytes(b) if b.len() > BRIEF_MAX => {
                write!(f, "Bytes({:?}... of {} octets)", &b[..BRIEF_MAX], b.len())
            }
            HeaderValue::List(items) => write!(f, "a list of {} values", items.len()),
            HeaderValue::Map(entries) => write!(f, "a table of {} entries", entries.len()),
            scalar => write!(f, "{scalar:?}"),
        }
    }
}

fn float_is_int(f: f64, i: i128) -> bool {
    f.is_finite() && f.fract() == 0.0 && f == i as f64 && f as i128 == i
}

fn parse_int(s: &str) -> Option<i128> {
    s.parse().ok()
}

/// Ordered name/value table: message application headers, or declare/bind arguments.
///
/// A `Vec` rather than a map because tables are small, order is kept for faithful queries, and
/// lookups by scan are cheaper than hashing at these sizes. With duplicate names, the first wins.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Headers(pub Vec<(String, HeaderValue)>);

/// Declare and bind arguments use the same representation as headers.
pub type Arguments = Headers;

impl Headers {
    pub fn new() -> Headers {
        Headers(Vec::new())
    }

    pub fn get(&self, key: &str) -> Option<&HeaderValue> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    pub fn push(&mut self, key: impl Into<String>, value: HeaderValue) {
        self.0.push((key.into(), value));
    }

    pub fn iter(&self) -> impl Iterator<Item = &(String, HeaderValue)> {
        self.0.iter()
    }

    /// Each name's first entry, in order: what [`Headers::get`] reads, and so what the broker
    /// acts on. For showing a peer's table (queries, QMF) where the target keeps one value
    /// per name and a later duplicate would otherwise replace the one in force.
    pub fn distinct(&self) -> impl Iterator<Item = &(String, HeaderValue)> {
        let mut seen = std::collections::HashSet::new();
        self.0.iter().filter(move |(k, _)| seen.insert(k.as_str()))
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The same entries in the same order, values compared as by
    /// [`HeaderValue::identical`].
    pub fn same_in_order(&self, other: &Headers) -> bool {
        self.len() == other.len()
            && self
                .iter()
                .zip(other.iter())
                .all(|(a, b)| a.0 == b.0 && a.1.identical(&b.1))
    }

    /// Same entries regardless of order, each as often (what exchange.bound means by "the
    /// arguments match", and what tells 0-9-1's bindings apart). Floats compare by their
    /// bits, so that an argument is always the same as itself, NaN included. Lists nested in
    /// an entry compare in order, maps regardless of order; `Other` values carry nothing to
    /// compare and are all alike.
    pub fn same_entries(&self, other: &Headers) -> bool {
        if self.len() != other.len() {
            return false;
        }
        // Both sorted by a total order, then compared in step: the same multiset. Sorting
        // keeps a peer's large argument table from costing the square of its length under
        // the locks binds take.
        sorted_entries(self)
            .into_iter()
            .zip(sorted_entries(other))
            .all(|(a, b)| a.0 == b.0 && a.1.identical(&b.1))
    }
}

/// The entries by name only, keeping the order of those under one name.
fn by_name(h: &Headers) -> Vec<&(String, HeaderValue)> {
    let mut all: Vec<&(String, HeaderValue)> = h.iter().collect();
    all.sort_by(|a, b| a.0.cmp(&b.0));
    all
}

/// The entries by name, then by value in [`HeaderValue::total_cmp`]'s order.
fn sorted_entries(h: &Headers) -> Vec<&(String, HeaderValue)> {
    let mut all: Vec<&(String, HeaderValue)> = h.iter().collect();
    all.sort_unstable_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.total_cmp(&b.1)));
    all
}

impl FromIterator<(String, HeaderValue)> for Headers {
    fn from_iter<I: IntoIterator<Item = (String, HeaderValue)>>(iter: I) -> Self {
        Headers(iter.into_iter().collect())
    }
}

impl<'a> FromIterator<(&'a str, HeaderValue)> for Headers {
    fn from_iter<I: IntoIterator<Item = (&'a str, HeaderValue)>>(iter: I) -> Self {
        Headers(iter.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::HeaderValue as V;
    use super::*;

    #[test]
    fn distinct_keeps_each_names_first_entry_in_order() {
        let h: Headers = [
            ("a", V::Int(1)),
            ("b", V::Int(2)),
            ("a", V::Int(3)),
            ("c", V::Int(4)),
            ("b", V::Int(5)),
        ]
        .into_iter()
        .collect();
        let kept: Vec<(&str, &V)> = h.distinct().map(|(k, v)| (k.as_str(), v)).collect();
        assert_eq!(
            kept,
            [("a", &V::Int(1)), ("b", &V::Int(2)), ("c", &V::Int(4))]
        );
        assert_eq!(h.get("a"), Some(&V::Int(1)), "the same one get reads");
    }

    #[test]
    fn same_in_order_wants_the_order_too() {
        let h = |pairs: &[(&str, V)]| -> Headers { pairs.iter().cloned().collect() };
        let ab = h(&[("a", V::Int(1)), ("b", V::Str("x".into()))]);
        let ba = h(&[("b", V::Str("x".into())), ("a", V::Int(1))]);
        assert!(ab.same_in_order(&ab.clone()));
        assert!(ab.same_entries(&ba));
        assert!(!ab.same_in_order(&ba));
        assert!(!ab.same_in_order(&h(&[("a", V::Int(1))])));
        assert!(!ab.same_in_order(&h(&[("a", V::UInt(1)), ("b", V::Str("x".into()))])));
        let nan = h(&[("f", V::Float(f64::NAN))]);
        assert!(nan.same_in_order(&nan.clone()));
    }

    #[test]
    fn integers_match_across_widths_and_signedness() {
        assert!(V::Int(7).matches(&V::UInt(7)));
        assert!(V::UInt(7).matches(&V::Int(7)));
        assert!(!V::Int(-1).matches(&V::UInt(u64::MAX)));
        assert!(!V::Int(7).matches(&V::Int(8)));
    }

    #[test]
    fn strings_and_binary_compare_by_bytes() {
        assert!(V::Str("abc".into()).matches(&V::Bytes(Bytes::from_static(b"abc"))));
        assert!(!V::Str("abc".into()).matches(&V::Str("abd".into())));
    }

    #[test]
    fn numeric_strings_match_numbers_but_text_does_not() {
        assert!(V::Str("42".into()).matches(&V::Int(42)));
        assert!(V::UInt(42).matches(&V::Str("42".into())));
        assert!(!V::Str("forty-two".into()).matches(&V::Int(42)));
    }

    #[test]
    fn floats_match_only_exact_integers() {
        assert!(V::Float(3.0).matches(&V::Int(3)));
        assert!(!V::Float(3.5).matches(&V::Int(3)));
        assert!(!V::Float(f64::NAN).matches(&V::Float(f64::NAN)));
    }

    #[test]
    fn other_and_mismatched_kinds_never_match() {
        assert!(!V::Other.matches(&V::Other));
        assert!(!V::Bool(true).matches(&V::Int(1)));
        assert!(!V::Void.matches(&V::Str(String::new())));
    }

    #[test]
    fn lists_match_in_order_and_maps_in_any_order() {
        let list = |items: &[V]| V::List(items.to_vec());
        let map = |pairs: &[(&str, V)]| V::Map(pairs.iter().cloned().collect());
        let text = V::Bytes(Bytes::from_static(b"a"));
        assert!(list(&[V::Int(1), V::Str("a".into())]).matches(&list(&[V::UInt(1), text])));
        assert!(!list(&[V::Int(1)]).matches(&list(&[V::Int(2)])));
        assert!(!list(&[V::Int(1)]).matches(&list(&[V::Int(1), V::Int(1)])));
        assert!(!list(&[]).matches(&map(&[])));
        let ab = map(&[("a", V::Int(1)), ("b", V::Bool(true))]);
        assert!(ab.matches(&map(&[("a", V::UInt(1)), ("b", V::Bool(true))])));
        assert!(ab.matches(&map(&[("b", V::Bool(true)), ("a", V::UInt(1))])));
        assert!(!ab.matches(&map(&[("b", V::Bool(true)), ("c", V::Int(1))])));
        assert!(!ab.matches(&map(&[("a", V::Int(2)), ("b", V::Bool(true))])));
        assert!(!ab.matches(&map(&[("a", V::Int(1))])));
    }

    #[test]
    fn arguments_that_differ_only_inside_a_list_or_map_differ() {
        let args = |v: V| -> Headers { [("k", v)].into_iter().collect() };
        let one_two = args(V::List(vec![V::Int(1), V::Int(2)]));
        assert!(one_two.same_entries(&one_two.clone()));
        assert!(one_two.same_in_order(&one_two.clone()));
        assert!(!one_two.same_entries(&args(V::List(vec![V::Int(2), V::Int(1)]))));
        assert!(!one_two.same_entries(&args(V::List(vec![V::Int(1)]))));
        assert!(!one_two.same_in_order(&args(V::List(vec![V::Int(1), V::UInt(2)]))));
        let map = |n: i64| args(V::Map([("a", V::Int(n))].into_iter().collect()));
        assert!(map(1).same_entries(&map(1)));
        assert!(!map(1).same_entries(&map(2)));
        assert!(!map(1).same_entries(&one_two));
        // Nested tables too are compared regardless of order (management sorts their keys).
        let nested = |pairs: &[(&str, V)]| args(V::Map(pairs.iter().cloned().collect()));
        let xy = nested(&[("x", V::Int(1)), ("y", V::Int(2))]);
        assert!(xy.same_entries(&nested(&[("y", V::Int(2)), ("x", V::Int(1))])));
        assert!(xy.same_in_order(&nested(&[("y", V::Int(2)), ("x", V::Int(1))])));
        assert!(!xy.same_entries(&nested(&[("y", V::Int(1)), ("x", V::Int(2))])));
    }

    #[test]
    fn lists_and_maps_below_the_deepest_depth_are_kept_as_other() {
        fn nest(levels: usize, depth: usize) -> V {
            match levels {
                0 => V::Int(1),
                _ => V::list_at(depth, |below| [nest(levels - 1, below)]),
            }
        }
        fn lists(v: &V) -> usize {
            match v {
                V::List(items) => 1 + items.first().map_or(0, lists),
                _ => 0,
            }
        }
        let deepest = nest(V::MAX_NESTING, 1);
        assert_eq!(lists(&deepest), V::MAX_NESTING);
        assert!(deepest.matches(&deepest.clone()));
        let too_deep = nest(V::MAX_NESTING + 1, 1);
        assert_eq!(lists(&too_deep), V::MAX_NESTING);
        assert!(
            !too_deep.matches(&too_deep.clone()),
            "its innermost list is Other"
        );
        let map_too_deep = V::map_at(V::MAX_NESTING + 1, |_| -> Vec<(String, V)> {
            unreachable!("the entries of a map kept as Other are not converted")
        });
        assert_eq!(map_too_deep, V::Other);
    }

    #[test]
    fn a_brief_description_is_bounded_whatever_the_value() {
        assert_eq!(V::Int(-3).brief().to_string(), "Int(-3)");
        assert_eq!(V::Str("many".into()).brief().to_string(), "Str(\"many\")");
        let long = "é".repeat(10_000);
        let text = V::Str(long).brief().to_string();
        assert!(
            text.len() < 200 && text.ends_with("... of 20000 octets)"),
            "{text}"
        );
        let binary = V::Bytes(Bytes::from(vec![0u8; 10_000])).brief().to_string();
        assert!(binary.len() < 400, "{binary}");
        let list = V::List(vec![V::Void; 10_000]);
        assert_eq!(list.brief().to_string(), "a list of 10000 values");
        let map = V::Map([("k", V::Void)].into_iter().collect());
        assert_eq!(map.brief().to_string(), "a table of 1 entries");
    }

    #[test]
    fn as_u64_accepts_numeric_strings_rejects_negative() {
        assert_eq!(V::Str(" 12 ".into()).as_u64(), Some(12));
        assert_eq!(V::Int(-3).as_u64(), None);
        assert_eq!(V::UInt(5).as_u64(), Some(5));
        assert_eq!(V::Bool(true).as_u64(), None);
    }

    #[test]
    fn headers_get_first_and_same_entries_ignores_order() {
        let a: Headers = [("k", V::Int(1)), ("k", V::Int(2)), ("j", V::Void)]
            .into_iter()
            .collect();
        assert_eq!(a.get("k"), Some(&V::Int(1)));
        assert_eq!(a.get("missing"), None);
        let b: Headers = [("j", V::Void), ("k", V::Int(1)), ("k", V::Int(2))]
            .into_iter()
            .collect();
        assert!(a.same_entries(&b));
        let c: Headers = [("j", V::Void), ("k", V::Int(3)), ("k", V::Int(2))]
            .into_iter()
            .collect();
        assert!(!a.same_entries(&c));
        // Each entry as often: a duplicate does not stand in for another entry.
        let twice: Headers = [("k", V::Int(1)), ("k", V::Int(1)), ("j", V::Void)]
            .into_iter()
            .collect();
        let once: Headers = [("k", V::Int(1)), ("j", V::Void), ("j", V::Void)]
            .into_iter()
            .collect();
        assert!(!twice.same_entries(&once) && !once.same_entries(&twice));
        // A NaN argument is the same as itself (a binding must find itself again).
        let nan: Headers = [("f", V::Float(f64::NAN))].into_iter().collect();
        assert!(nan.same_entries(&nan.clone()));
        let other_nan: Headers = [("g", V::Float(f64::NAN))].into_iter().collect();
        assert!(!nan.same_entries(&other_nan));
        let zero: Headers = [("f", V::Float(0.0))].into_iter().collect();
        let minus_zero: Headers = [("f", V::Float(-0.0))].into_iter().collect();
        assert!(!zero.same_entries(&minus_zero));
    }
}
