//! The dynamic value type: anything the type system can encode, for fields
//! typed `*` (message bodies, annotation and property values, filters) and for
//! inspecting data whose shape is not known in advance.

use std::fmt;

use bytes::{Bytes, BytesMut};

use crate::decode::Decoder;
use crate::error::DecodeError;
use crate::format::Type;
use crate::primitive::{Decimal128, Decimal32, Decimal64, Str, Symbol, Timestamp, Uuid};

/// A decoded value. Strings, symbols and binaries share the buffer they were
/// decoded from. Equality is by type and value, not by encoding: `uint` 0
/// decoded from 0x43 equals `uint` 0 decoded from 0x70 00 00 00 00.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum Value {
    #[default]
    Null,
    Bool(bool),
    Ubyte(u8),
    Ushort(u16),
    Uint(u32),
    Ulong(u64),
    Byte(i8),
    Short(i16),
    Int(i32),
    Long(i64),
    Float(f32),
    Double(f64),
    Decimal32(Decimal32),
    Decimal64(Decimal64),
    Decimal128(Decimal128),
    Char(char),
    Timestamp(Timestamp),
    Uuid(Uuid),
    Binary(Bytes),
    String(Str),
    Symbol(Symbol),
    List(Vec<Value>),
    Map(Map<Value, Value>),
    Array(Array),
    Described(Box<Described>),
}

impl Value {
    /// Decodes one value from the front of `buf`, leaving the rest.
    pub fn decode(buf: &mut Bytes) -> Result<Value, DecodeError> {
        let mut d = Decoder::new(std::mem::take(buf));
        let value = d.value();
        *buf = d.into_rest();
        value
    }

    /// Decodes `buf`, which must hold exactly one value.
    pub fn decode_exact(buf: Bytes) -> Result<Value, DecodeError> {
        let mut d = Decoder::new(buf);
        let value = d.value()?;
        d.finish()?;
        Ok(value)
    }

    /// Appends the value, in the shortest encoding of its type.
    pub fn encode(&self, out: &mut BytesMut) {
        crate::encode::value(out, self)
    }

    /// The primitive type of the value; `None` for a described value.
    pub fn type_of(&self) -> Option<Type> {
        Some(match self {
            Value::Null => Type::Null,
            Value::Bool(_) => Type::Boolean,
            Value::Ubyte(_) => Type::Ubyte,
            Value::Ushort(_) => Type::Ushort,
            Value::Uint(_) => Type::Uint,
            Value::Ulong(_) => Type::Ulong,
            Value::Byte(_) => Type::Byte,
            Value::Short(_) => Type::Short,
            Value::Int(_) => Type::Int,
            Value::Long(_) => Type::Long,
            Value::Float(_) => Type::Float,
            Value::Double(_) => Type::Double,
            Value::Decimal32(_) => Type::Decimal32,
            Value::Decimal64(_) => Type::Decimal64,
            Value::Decimal128(_) => Type::Decimal128,
            Value::Char(_) => Type::Char,
            Value::Timestamp(_) => Type::Timestamp,
            Value::Uuid(_) => Type::Uuid,
            Value::Binary(_) => Type::Binary,
            Value::String(_) => Type::String,
            Value::Symbol(_) => Type::Symbol,
            Value::List(_) => Type::List,
            Value::Map(_) => Type::Map,
            Value::Array(_) => Type::Array,
            Value::Described(_) => return None,
        })
    }

    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s.as_str()),
            _ => None,
        }
    }

    pub fn as_symbol(&self) -> Option<&Symbol> {
        match self {
            Value::Symbol(s) => Some(s),
            _ => None,
        }
    }

    pub fn described(descriptor: impl Into<Descriptor>, value: Value) -> Value {
        Value::Described(Box::new(Described {
            descriptor: descriptor.into(),
            value,
        }))
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Self {
        Value::String(Str::from(s))
    }
}

impl From<Str> for Value {
    fn from(s: Str) -> Self {
        Value::String(s)
    }
}

impl From<Symbol> for Value {
    fn from(s: Symbol) -> Self {
        Value::Symbol(s)
    }
}

/// What says which described type a value is: a numeric code (the spec's
/// `domain:id` pairs packed into a ulong) or a symbolic name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Descriptor {
    Code(u64),
    Symbol(Symbol),
}

impl Descriptor {
    /// The numeric code, translating the symbolic names of the types this
    /// codec knows (`amqp:open:list` is 0x10).
    pub fn code(&self) -> Option<u64> {
        match self {
            Descriptor::Code(c) => Some(*c),
            Descriptor::Symbol(s) => code_of_name(s.as_str()),
        }
    }
}

impl From<u64> for Descriptor {
    fn from(code: u64) -> Self {
        Descriptor::Code(code)
    }
}

impl From<Symbol> for Descriptor {
    fn from(name: Symbol) -> Self {
        Descriptor::Symbol(name)
    }
}

impl fmt::Display for Descriptor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Descriptor::Code(c) => write!(f, "{:#010x}:{:#010x}", c >> 32, c & 0xffff_ffff),
            Descriptor::Symbol(s) => f.write_str(s.as_str()),
        }
    }
}

/// A described value: a descriptor and the value it describes. Composite
/// types the codec does not know (extension filters, outcomes, delivery
/// states) are kept as these, and re-encoded as they came.
#[derive(Debug, Clone, PartialEq)]
pub struct Described {
    pub descriptor: Descriptor,
    pub value: Value,
}

/// An ordered map. Order and duplicate keys are kept as decoded, so a map
/// relayed unchanged is re-encoded as it arrived; lookups are linear, which
/// suits the handful of entries annotations and properties hold.
#[derive(Debug, Clone, PartialEq)]
pub struct Map<K, V> {
    entries: Vec<(K, V)>,
}

impl<K, V> Default for Map<K, V> {
    fn default() -> Self {
        Map {
            entries: Vec::new(),
        }
    }
}

impl<K: PartialEq, V> Map<K, V> {
    pub fn new() -> Self {
        Self::default()
    }

    /// First value under `key`.
    pub fn get<Q>(&self, key: &Q) -> Option<&V>
    where
        K: PartialEq<Q>,
        Q: ?Sized,
    {
        self.entries.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// Sets `key`, replacing the first entry with that key in place.
    pub fn insert(&mut self, key: K, value: V) {
        match self.entries.iter_mut().find(|(k, _)| *k == key) {
            Some(slot) => slot.1 = value,
            None => self.entries.push((key, value)),
        }
    }

    /// Removes every entry under `key`, returning the first value.
    pub fn remove<Q>(&mut self, key: &Q) -> Option<V>
    where
        K: PartialEq<Q>,
        Q: ?Sized,
    {
        let mut first = None;
        let mut i = 0;
        while i < self.entries.len() {
            if self.entries[i].0 == *key {
                let (_, v) = self.entries.remove(i);
                first = first.or(Some(v));
            } else {
                i += 1;
            }
        }
        first
    }
}

impl<K, V> Map<K, V> {
    /// Appends without looking for the key (what the decoder does).
    pub fn push(&mut self, key: K, value: V) {
        self.entries.push((key, value));
    }

    pub fn iter(&self) -> impl Iterator<Item = (&K, &V)> {
        self.entries.iter().map(|(k, v)| (k, v))
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub(crate) fn with_capacity(n: usize) -> Self {
        Map {
            entries: Vec::with_capacity(n),
        }
    }
}

impl<K, V> FromIterator<(K, V)> for Map<K, V> {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        Map {
            entries: iter.into_iter().collect(),
        }
    }
}

/// A sequence of values of one type, encoded with a single shared
/// constructor (a described array shares the descriptor too).
#[derive(Debug, Clone, PartialEq)]
pub struct Array {
    descriptor: Option<Descriptor>,
    element: Type,
    items: Vec<Value>,
}

/// An [`Array`] was built from values that are not all of its element type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("array of {expected} holds a value of another type")]
pub struct NotHomogeneous {
    pub expected: &'static str,
}

impl Array {
    /// An array of `element` values. Every item must be a plain (not
    /// described) value of that type; `Type::Array` items may differ in their
    /// own element types, as the encoding allows.
    pub fn new(element: Type, items: Vec<Value>) -> Result<Array, NotHomogeneous> {
        if items.iter().any(|v| v.type_of() != Some(element)) {
            return Err(NotHomogeneous {
                expected: element.name(),
            });
        }
        Ok(Array {
            descriptor: None,
            element,
            items,
        })
    }

    /// An array whose every element is described by `descriptor`.
    pub fn described(
        descriptor: Descriptor,
        element: Type,
        items: Vec<Value>,
    ) -> Result<Array, NotHomogeneous> {
        let mut array = Array::new(element, items)?;
        array.descriptor = Some(descriptor);
        Ok(array)
    }

    /// Caller guarantees that every item has type `element`.
    pub(crate) fn from_parts(
        descriptor: Option<Descriptor>,
        element: Type,
        items: Vec<Value>,
    ) -> Array {
        Array {
            descriptor,
            element,
            items,
        }
    }

    pub fn symbols(items: impl IntoIterator<Item = Symbol>) -> Array {
        Array::from_parts(
            None,
            Type::Symbol,
            items.into_iter().map(Value::Symbol).collect(),
        )
    }

    pub fn descriptor(&self) -> Option<&Descriptor> {
        self.descriptor.as_ref()
    }

    pub fn element_type(&self) -> Type {
        self.element
    }

    /// The elements, without their (shared) descriptor.
    pub fn items(&self) -> &[Value] {
        &self.items
    }

    pub fn into_items(self) -> Vec<Value> {
        self.items
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
}

/// Every descriptor this codec knows: (numeric, symbolic).
pub fn known_descriptors() -> impl Iterator<Item = (u64, &'static str)> {
    [
        crate::definitions::DESCRIPTORS,
        crate::performative::DESCRIPTORS,
        crate::messaging::DESCRIPTORS,
        crate::message::DESCRIPTORS,
        crate::transaction::DESCRIPTORS,
        crate::sasl::DESCRIPTORS,
    ]
    .into_iter()
    .flatten()
    .copied()
}

fn code_of_name(name: &str) -> Option<u64> {
    known_descriptors()
        .find(|(_, n)| *n == name)
        .map(|(code, _)| code)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{Gen, Sample};

    fn encode(v: &Value) -> Bytes {
        let mut out = BytesMut::new();
        v.encode(&mut out);
        out.freeze()
    }

    /// Decodes `wire` to `v`, and `v` encodes to `shortest`.
    fn check(wire: &[u8], v: Value, shortest: &[u8]) {
        assert_eq!(
            Value::decode_exact(Bytes::copy_from_slice(wire)),
            Ok(v.clone()),
            "{wire:02x?}"
        );
        assert_eq!(&encode(&v)[..], shortest, "{v:?}");
    }

    fn same(wire: &[u8], v: Value) {
        check(wire, v, wire)
    }

    #[test]
    fn every_fixed_width_encoding_by_hand() {
        same(&[0x40], Value::Null);
        same(&[0x41], Value::Bool(true));
        same(&[0x42], Value::Bool(false));
        check(&[0x56, 0x01], Value::Bool(true), &[0x41]);
        check(&[0x56, 0x00], Value::Bool(false), &[0x42]);
        same(&[0x50, 0xfe], Value::Ubyte(254));
        same(&[0x60, 0x12, 0x34], Value::Ushort(0x1234));
        same(&[0x43], Value::Uint(0));
        same(&[0x52, 0x07], Value::Uint(7));
        same(&[0x70, 0x00, 0x01, 0x00, 0x00], Value::Uint(65536));
        check(&[0x70, 0, 0, 0, 0], Value::Uint(0), &[0x43]);
        check(&[0x70, 0, 0, 0, 9], Value::Uint(9), &[0x52, 9]);
        same(&[0x44], Value::Ulong(0));
        same(&[0x53, 0xff], Value::Ulong(255));
        same(&[0x80, 0, 0, 0, 1, 0, 0, 0, 0], Value::Ulong(1 << 32));
        check(&[0x80, 0, 0, 0, 0, 0, 0, 0, 3], Value::Ulong(3), &[0x53, 3]);
        same(&[0x51, 0x80], Value::Byte(-128));
        same(&[0x61, 0xff, 0xfe], Value::Short(-2));
        same(&[0x54, 0xff], Value::Int(-1));
        same(&[0x71, 0x00, 0x00, 0x00, 0x80], Value::Int(128));
        check(
            &[0x71, 0xff, 0xff, 0xff, 0x80],
            Value::Int(-128),
            &[0x54, 0x80],
        );
        same(&[0x55, 0x7f], Value::Long(127));
        same(
            &[0x81, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f],
            Value::Long(-129),
        );
        same(&[0x72, 0x3f, 0x80, 0, 0], Value::Float(1.0));
        same(
            &[0x82, 0x40, 0x09, 0x21, 0xfb, 0x54, 0x44, 0x2d, 0x18],
            Value::Double(std::f64::consts::PI),
        );
        same(
            &[0x74, 1, 2, 3, 4],
            Value::Decimal32(Decimal32([1, 2, 3, 4])),
        );
        same(
            &[0x84, 1, 2, 3, 4, 5, 6, 7, 8],
            Value::Decimal64(Decimal64([1, 2, 3, 4, 5, 6, 7, 8])),
        );
        let mut d128 = vec![0x94];
        d128.extend(0..16u8);
        same(
            &d128,
            Value::Decimal128(Decimal128(std::array::from_fn(|i| i as u8))),
        );
        same(&[0x73, 0, 0, 0, 0x41], Value::Char('A'));
        same(&[0x73, 0, 0x01, 0xf6, 0x00], Value::Char('\u{1f600}'));
        same(
            &[0x83, 0, 0, 0, 0, 0, 0, 0x03, 0xe8],
            Value::Timestamp(Timestamp(1000)),
        );
        same(
            &[0x83, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff],
            Value::Timestamp(Timestamp(-1)),
        );
        let mut uuid = vec![0x98];
        uuid.extend([0xab; 16]);
        same(&uuid, Value::Uuid(Uuid([0xab; 16])));
    }

    #[test]
    fn variable_width_encodings_by_hand() {
        same(
            &[0xa0, 2, 0xde, 0xad],
            Value::Binary(Bytes::from_static(&[0xde, 0xad])),
        );
        check(
            &[0xb0, 0, 0, 0, 1, 7],
            Value::Binary(Bytes::from_static(&[7])),
            &[0xa0, 1, 7],
        );
        same(&[0xa1, 3, b'a', b'b', b'c'], Value::from("abc"));
        check(&[0xb1, 0, 0, 0, 0], Value::from(""), &[0xa1, 0]);
        same(&[0xa3, 2, b'o', b'k'], Value::Symbol(Symbol::from("ok")));
        check(
            &[0xb3, 0, 0, 0, 1, b'x'],
            Value::Symbol(Symbol::from("x")),
            &[0xa3, 1, b'x'],
        );
        // 256 octets need the 32-bit form.
        let long = "z".repeat(256);
        let mut wire = vec![0xb1, 0, 0, 1, 0];
        wire.extend_from_slice(long.as_bytes());
        same(&wire, Value::from(long.as_str()));
    }

    #[test]
    fn compound_encodings_by_hand() {
        same(&[0x45], Value::List(vec![]));
        check(&[0xc0, 1, 0], Value::List(vec![]), &[0x45]);
        check(
            &[0xd0, 0, 0, 0, 4, 0, 0, 0, 0],
            Value::List(vec![]),
            &[0x45],
        );
        same(
            &[0xc0, 3, 2, 0x41, 0x40],
            Value::List(vec![Value::Bool(true), Value::Null]),
        );
        check(
            &[0xd0, 0, 0, 0, 6, 0, 0, 0, 2, 0x41, 0x40],
            Value::List(vec![Value::Bool(true), Value::Null]),
            &[0xc0, 3, 2, 0x41, 0x40],
        );
        let map: Map<Value, Value> = [(Value::from("k"), Value::Uint(1))].into_iter().collect();
        same(
            &[0xc1, 6, 2, 0xa1, 1, b'k', 0x52, 1],
            Value::Map(map.clone()),
        );
        check(
            &[0xd1, 0, 0, 0, 9, 0, 0, 0, 2, 0xa1, 1, b'k', 0x52, 1],
            Value::Map(map),
            &[0xc1, 6, 2, 0xa1, 1, b'k', 0x52, 1],
        );
        same(&[0xc1, 1, 0], Value::Map(Map::new()));
        // Arrays: one constructor, then the elements' data.
        let ints = Array::new(Type::Int, vec![Value::Int(1), Value::Int(-1)]).unwrap();
        same(
            &[0xe0, 10, 2, 0x71, 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff],
            Value::Array(ints.clone()),
        );
        // Small ints may share a smallint constructor; ferry writes int.
        check(
            &[0xe0, 4, 2, 0x54, 1, 0xff],
            Value::Array(ints),
            &[0xe0, 10, 2, 0x71, 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff],
        );
        same(
            &[0xe0, 2, 0, 0xa1],
            Value::Array(Array::new(Type::String, vec![]).unwrap()),
        );
        // Booleans share 0x56: one octet each.
        let bools = Array::new(Type::Boolean, vec![Value::Bool(true), Value::Bool(false)]).unwrap();
        same(&[0xe0, 4, 2, 0x56, 1, 0], Value::Array(bools.clone()));
        // A peer may use a zero-width constructor: every element is true.
        check(
            &[0xe0, 2, 2, 0x41],
            Value::Array(Array::new(Type::Boolean, vec![Value::Bool(true); 2]).unwrap()),
            &[0xe0, 4, 2, 0x56, 1, 1],
        );
        // A described array: 0x00 and the descriptor in the constructor.
        let described = Array::described(
            Descriptor::Code(0x24),
            Type::List,
            vec![Value::List(vec![])],
        )
        .unwrap();
        same(
            &[0xe0, 13, 1, 0x00, 0x53, 0x24, 0xd0, 0, 0, 0, 4, 0, 0, 0, 0],
            Value::Array(described),
        );
        // A described value.
        same(
            &[0x00, 0xa3, 1, b'x', 0x43],
            Value::described(Symbol::from("x"), Value::Uint(0)),
        );
        check(
            &[0x00, 0x80, 0, 0, 0, 0, 0, 0, 0, 0x10, 0x45],
            Value::described(0x10u64, Value::List(vec![])),
            &[0x00, 0x53, 0x10, 0x45],
        );
    }

    #[test]
    fn values_round_trip() {
        for seed in 0..500 {
            let v = Value::sample(&mut Gen::new(seed));
            let bytes = encode(&v);
            assert_eq!(
                Value::decode_exact(bytes.clone()),
                Ok(v.clone()),
                "seed {seed}"
            );
            // The encoding is canonical: decoding and encoding again gives
            // the same octets.
            let again = Value::decode_exact(bytes.clone()).map(|v| encode(&v));
            assert_eq!(again, Ok(bytes.clone()), "seed {seed}");
            // And every proper prefix is an error, never a panic.
            for cut in 0..bytes.len() {
                assert!(
                    Value::decode_exact(bytes.slice(..cut)).is_err(),
                    "seed {seed} cut {cut}"
                );
            }
        }
    }

    #[test]
    fn decoded_strings_share_the_buffer() {
        let wire = Bytes::from_static(&[0xc0, 7, 2, 0xa1, 1, b's', 0xa0, 1, 0xff]);
        let Ok(Value::List(items)) = Value::decode_exact(wire.clone()) else {
            panic!("not a list");
        };
        let (Value::String(s), Value::Binary(b)) = (&items[0], &items[1]) else {
            panic!("{items:?}");
        };
        assert_eq!(s.as_bytes().as_ptr(), wire[5..].as_ptr());
        assert_eq!(b.as_ptr(), wire[8..].as_ptr());
    }

    #[test]
    fn decode_leaves_what_follows() {
        let mut buf = Bytes::from_static(&[0x52, 1, 0x41]);
        assert_eq!(Value::decode(&mut buf), Ok(Value::Uint(1)));
        assert_eq!(&buf[..], &[0x41]);
        assert_eq!(
            Value::decode_exact(Bytes::from_static(&[0x52, 1, 0x41])),
            Err(DecodeError::TrailingBytes(1))
        );
    }

    #[test]
    fn maps_keep_order_and_duplicates() {
        let mut m: Map<Symbol, Value> = Map::new();
        m.push(Symbol::from("b"), Value::Uint(1));
        m.push(Symbol::from("a"), Value::Uint(2));
        m.push(Symbol::from("b"), Value::Uint(3));
        assert_eq!(m.get("b"), Some(&Value::Uint(1)));
        m.insert(Symbol::from("a"), Value::Uint(4));
        let keys: Vec<_> = m.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["b", "a", "b"]);
        assert_eq!(m.remove("b"), Some(Value::Uint(1)));
        assert_eq!(m.len(), 1);
        assert_eq!(m.get("a"), Some(&Value::Uint(4)));
    }

    #[test]
    fn arrays_are_homogeneous() {
        assert_eq!(
            Array::new(Type::Uint, vec![Value::Uint(1), Value::Ulong(1)]),
            Err(NotHomogeneous { expected: "uint" })
        );
        assert!(Array::new(Type::Uint, vec![Value::described(1u64, Value::Uint(1))]).is_err());
    }

    #[test]
    fn descriptors_know_their_symbolic_names() {
        let known: Vec<_> = known_descriptors().collect();
        for (i, (code, name)) in known.iter().enumerate() {
            assert!(name.starts_with("amqp:"), "{name}");
            assert!(
                known[i + 1..].iter().all(|(c, n)| c != code && n != name),
                "{name}"
            );
            assert_eq!(Descriptor::Symbol(Symbol::from(*name)).code(), Some(*code));
        }
        // The performatives, error, 5 delivery states, source, target, 4
        // lifetime policies, 9 sections, 5 transaction types, 5 SASL frames.
        assert_eq!(known.len(), 9 + 1 + 5 + 2 + 4 + 9 + 5 + 5);
        assert_eq!(Descriptor::Code(0x14).to_string(), "0x00000000:0x00000014");
    }
}
