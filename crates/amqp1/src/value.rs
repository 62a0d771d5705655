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
