//! Self-describing values: what maps, lists and arrays hold, keyed by type code.

use std::collections::HashMap;

use bytes::{BufMut, Bytes, BytesMut};

use crate::codec::{self, Reader};
use crate::error::{DecodeError, EncodeError};
use crate::str::Str;

/// How deep maps, lists and arrays may nest. Decoding recurses, so a peer must not be
/// able to choose the depth.
pub const MAX_DEPTH: usize = 32;

/// Encoded width of a type, as the spec states it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TypeWidth {
    Fixed(u32),
    /// A size prefix of this many octets, then that many octets.
    Variable(u32),
}

/// A `<type>` of the spec (generated into [`crate::SPEC_TYPES`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpecType {
    pub name: &'static str,
    pub code: Option<u8>,
    pub width: TypeWidth,
}

/// The width of any type code. The spec fixes widths by code range so that values of
/// types a receiver does not know can still be skipped; only two ranges are reserved.
pub const fn type_width(code: u8) -> Option<TypeWidth> {
    Some(match code >> 4 {
        0x0 => TypeWidth::Fixed(1),
        0x1 => TypeWidth::Fixed(2),
        0x2 => TypeWidth::Fixed(4),
        0x3 => TypeWidth::Fixed(8),
        0x4 => TypeWidth::Fixed(16),
        0x5 => TypeWidth::Fixed(32),
        0x6 => TypeWidth::Fixed(64),
        0x7 => TypeWidth::Fixed(128),
        0x8 => TypeWidth::Variable(1),
        0x9 => TypeWidth::Variable(2),
        0xa => TypeWidth::Variable(4),
        0xc => TypeWidth::Fixed(5),
        0xd => TypeWidth::Fixed(9),
        0xf => TypeWidth::Fixed(0),
        _ => return None,
    })
}

/// Type codes of the variants of [`Value`].
pub mod code {
    pub const INT8: u8 = 0x01;
    pub const UINT8: u8 = 0x02;
    pub const CHAR: u8 = 0x04;
    pub const BOOLEAN: u8 = 0x08;
    pub const INT16: u8 = 0x11;
    pub const UINT16: u8 = 0x12;
    pub const INT32: u8 = 0x21;
    pub const UINT32: u8 = 0x22;
    pub const FLOAT: u8 = 0x23;
    pub const INT64: u8 = 0x31;
    pub const UINT64: u8 = 0x32;
    pub const DOUBLE: u8 = 0x33;
    pub const DATETIME: u8 = 0x38;
    pub const UUID: u8 = 0x48;
    pub const VBIN8: u8 = 0x80;
    pub const STR8: u8 = 0x85;
    pub const VBIN16: u8 = 0x90;
    pub const STR16: u8 = 0x95;
    pub const VBIN32: u8 = 0xa0;
    pub const MAP: u8 = 0xa8;
    pub const LIST: u8 = 0xa9;
    pub const ARRAY: u8 = 0xaa;
    pub const STRUCT32: u8 = 0xab;
    pub const VOID: u8 = 0xf0;
}

/// A typed value. Every type code round-trips: types without a variant of their own
/// (bin*, dec32/64, str8-latin, str16-utf16, char-utf32, bit, ...) are kept as `Raw`.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Void,
    Bool(bool),
    Int8(i8),
    Uint8(u8),
    Char(u8),
    Int16(i16),
    Uint16(u16),
    Int32(i32),
    Uint32(u32),
    Float(f32),
    Int64(i64),
    Uint64(u64),
    Double(f64),
    /// Seconds since the epoch.
    Datetime(u64),
    Uuid([u8; 16]),
    Str8(Str),
    Str16(Str),
    Vbin8(Bytes),
    Vbin16(Bytes),
    Vbin32(Bytes),
    Map(Map),
    List(List),
    Array(Array),
    Struct32(Struct32),
    /// Any other type: for fixed-width codes `bytes` is the value, for variable-width
    /// codes it is the content after the size prefix.
    Raw {
        code: u8,
        bytes: Bytes,
    },
}

impl Value {
    pub fn type_code(&self) -> u8 {
        match self {
            Value::Void => code::VOID,
            Value::Bool(_) => code::BOOLEAN,
            Value::Int8(_) => code::INT8,
            Value::Uint8(_) => code::UINT8,
            Value::Char(_) => code::CHAR,
            Value::Int16(_) => code::INT16,
            Value::Uint16(_) => code::UINT16,
            Value::Int32(_) => code::INT32,
            Value::Uint32(_) => code::UINT32,
            Value::Float(_) => code::FLOAT,
            Value::Int64(_) => code::INT64,
            Value::Uint64(_) => code::UINT64,
            Value::Double(_) => code::DOUBLE,
            Value::Datetime(_) => code::DATETIME,
            Value::Uuid(_) => code::UUID,
            Value::Str8(_) => code::STR8,
            Value::Str16(_) => code::STR16,
            Value::Vbin8(_) => code::VBIN8,
            Value::Vbin16(_) => code::VBIN16,
            Value::Vbin32(_) => code::VBIN32,
            Value::Map(_) => code::MAP,
            Value::List(_) => code::LIST,
            Value::Array(_) => code::ARRAY,
            Value::Struct32(_) => code::STRUCT32,
            Value::Raw { code, .. } => *code,
        }
    }

    /// The string of a str8 or str16 value.
    pub fn as_str(&self) -> Option<&Str> {
        match self {
            Value::Str8(s) | Value::Str16(s) => Some(s),
            _ => None,
        }
    }

    /// Any integer value that fits an `i64` (header matching and queue arguments accept
    /// whichever integer type the client chose).
    pub fn as_i64(&self) -> Option<i64> {
        Some(match *self {
            Value::Int8(v) => v.into(),
            Value::Uint8(v) => v.into(),
            Value::Int16(v) => v.into(),
            Value::Uint16(v) => v.into(),
            Value::Int32(v) => v.into(),
            Value::Uint32(v) => v.into(),
            Value::Int64(v) => v,
            Value::Uint64(v) => i64::try_from(v).ok()?,
            _ => return None,
        })
    }

    pub fn as_bool(&self) -> Option<bool> {
        match *self {
            Value::Bool(b) => Some(b),
            _ => None,
        }
    }

    /// Writes the type code, then the value.
    pub fn encode(&self, out: &mut BytesMut) -> Result<(), EncodeError> {
        self.encode_depth(out, 0)
    }

    fn encode_depth(&self, out: &mut BytesMut, depth: usize) -> Result<(), EncodeError> {
        out.put_u8(self.type_code());
        self.encode_data(out, depth)
    }

    /// Writes the value without its type code (array elements, or after a code).
    fn encode_data(&self, out: &mut BytesMut, depth: usize) -> Result<(), EncodeError> {
        match self {
            Value::Void => {}
            Value::Bool(b) => out.put_u8(u8::from(*b)),
            Value::Int8(v) => out.put_i8(*v),
            Value::Uint8(v) | Value::Char(v) => out.put_u8(*v),
            Value::Int16(v) => out.put_i16(*v),
            Value::Uint16(v) => out.put_u16(*v),
            Value::Int32(v) => out.put_i32(*v),
            Value::Uint32(v) => out.put_u32(*v),
            Value::Float(v) => out.put_f32(*v),
            Value::Int64(v) => out.put_i64(*v),
            Value::Uint64(v) | Value::Datetime(v) => out.put_u64(*v),
            Value::Double(v) => out.put_f64(*v),
            Value::Uuid(v) => out.put_slice(v),
            Value::Str8(s) => codec::put_str8(out, s)?,
            Value::Str16(s) => codec::put_str16(out, s)?,
            Value::Vbin8(b) => codec::put_vbin8(out, b)?,
            Value::Vbin16(b) => codec::put_vbin16(out, b)?,
            Value::Vbin32(b) => codec::put_vbin32(out, b)?,
            Value::Map(m) => m.encode_depth(out, depth + 1)?,
            Value::List(l) => l.encode_depth(out, depth + 1)?,
            Value::Array(a) => a.encode_depth(out, depth + 1)?,
            Value::Struct32(s) => s.encode(out)?,
            Value::Raw { code, bytes } => match type_width(*code) {
                Some(TypeWidth::Fixed(w)) if bytes.len() == w as usize => out.put_slice(bytes),
                Some(TypeWidth::Fixed(_)) => {
                    return Err(EncodeError::RawWidth {
                        code: *code,
                        len: bytes.len(),
                    })
                }
                Some(TypeWidth::Variable(w)) => codec::put_variable(out, w as u8, bytes, "raw")?,
                None => return Err(EncodeError::ReservedTypeCode(*code)),
            },
        }
        Ok(())
    }

    /// Reads a type code, then the value.
    pub fn decode(r: &mut Reader) -> Result<Value, DecodeError> {
        Self::decode_depth(r, 0)
    }

    fn decode_depth(r: &mut Reader, depth: usize) -> Result<Value, DecodeError> {
        let code = r.u8()?;
        Self::decode_data(code, r, depth)
    }

    /// Reads a value of type `code` (whose code has already been read).
    fn decode_data(type_code: u8, r: &mut Reader, depth: usize) -> Result<Value, DecodeError> {
        Ok(match type_code {
            code::VOID => Value::Void,
            code::BOOLEAN => Value::Bool(r.u8()? != 0),
            code::INT8 => Value::Int8(r.i8()?),
            code::UINT8 => Value::Uint8(r.u8()?),
            code::CHAR => Value::Char(r.u8()?),
            code::INT16 => Value::Int16(r.i16()?),
            code::UINT16 => Value::Uint16(r.u16()?),
            code::INT32 => Value::Int32(r.i32()?),
            code::UINT32 => Value::Uint32(r.u32()?),
            code::FLOAT => Value::Float(r.f32()?),
            code::INT64 => Value::Int64(r.i64()?),
            code::UINT64 => Value::Uint64(r.u64()?),
            code::DOUBLE => Value::Double(r.f64()?),
            code::DATETIME => Value::Datetime(r.u64()?),
            code::UUID => Value::Uuid(r.array()?),
            code::STR8 => Value::Str8(r.str8()?),
            code::STR16 => Value::Str16(r.str16()?),
            code::VBIN8 => Value::Vbin8(r.vbin8()?),
            code::VBIN16 => Value::Vbin16(r.vbin16()?),
            code::VBIN32 => Value::Vbin32(r.vbin32()?),
            code::MAP => Value::Map(Map::decode_depth(r, depth + 1)?),
            code::LIST => Value::List(List::decode_depth(r, depth + 1)?),
            code::ARRAY => Value::Array(Array::decode_depth(r, depth + 1)?),
            code::STRUCT32 => Value::Struct32(Struct32::decode(r)?),
            other => match type_width(other) {
                Some(TypeWidth::Fixed(w)) => Value::Raw {
                    code: other,
                    bytes: r.bytes(w as usize)?,
                },
                Some(TypeWidth::Variable(w)) => {
                    let n = r.size(w as u8)?;
                    Value::Raw {
                        code: other,
                        bytes: r.bytes(n)?,
                    }
                }
                None => return Err(DecodeError::ReservedTypeCode(other)),
            },
        })
    }
}

impl From<&str> for Value {
    /// Strings go out as str16, as Qpid's clients and broker send them.
    fn from(s: &str) -> Self {
        Value::Str16(Str::from(s))
    }
}

impl From<Str> for Value {
    fn from(s: Str) -> Self {
        Value::Str16(s)
    }
}

impl From<bool> for Value {
    fn from(b: bool) -> Self {
        Value::Bool(b)
    }
}

impl From<i64> for Value {
    fn from(v: i64) -> Self {
        Value::Int64(v)
    }
}

impl From<u32> for Value {
    fn from(v: u32) -> Self {
        Value::Uint32(v)
    }
}

impl From<Map> for Value {
    fn from(m: Map) -> Self {
        Value::Map(m)
    }
}

fn check_depth(depth: usize) -> Result<(), DecodeError> {
    if depth > MAX_DEPTH {
        Err(DecodeError::TooDeep(MAX_DEPTH))
    } else {
        Ok(())
    }
}

fn check_encode_depth(depth: usize) -> Result<(), EncodeError> {
    if depth > MAX_DEPTH {
        Err(EncodeError::TooDeep(MAX_DEPTH))
    } else {
        Ok(())
    }
}

/// Reads the size and count that open a map or list. A size of zero (no count at all)
/// is accepted as empty: older Qpid Python clients encode an absent map that way.
fn open_collection(
    r: &mut Reader,
    what: &'static str,
    depth: usize,
) -> Result<Option<(Reader, u32)>, DecodeError> {
    check_depth(depth)?;
    let mut body = r.sized(4)?;
    if body.is_empty() {
        return Ok(None);
    }
    let count = body.u32().map_err(|_| DecodeError::InvalidSize {
        what,
        size: body.remaining() as u64,
    })?;
    Ok(Some((body, count)))
}

fn close_collection(body: &Reader, what: &'static str) -> Result<(), DecodeError> {
    if body.is_empty() {
        Ok(())
    } else {
        Err(DecodeError::InvalidSize {
            what,
            size: body.remaining() as u64,
        })
    }
}

/// An AMQP map: str8 keys to typed values, in wire order. Lookups are linear, which beats
/// hashing for the handful of entries maps carry.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Map(Vec<(Str, Value)>);

impl Map {
    pub fn new() -> Self {
        Map(Vec::new())
    }

    pub fn get(&self, key: &str) -> Option<&Value> {
        self.0
            .iter()
            .find(|(k, _)| k.as_bytes() == key.as_bytes())
            .map(|(_, v)| v)
    }

    /// Sets `key`, replacing (in place) and returning any earlier value.
    pub fn insert(&mut self, key: impl Into<Str>, value: Value) -> Option<Value> {
        let key = key.into();
        match self.0.iter_mut().find(|(k, _)| *k == key) {
            Some((_, v)) => Some(std::mem::replace(v, value)),
            None => {
                self.0.push((key, value));
                None
            }
        }
    }

    pub fn remove(&mut self, key: &str) -> Option<Value> {
        let i = self.0.iter().position(|(k, _)| k == key)?;
        Some(self.0.remove(i).1)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&Str, &Value)> {
        self.0.iter().map(|(k, v)| (k, v))
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn entries(&self) -> &[(Str, Value)] {
        &self.0
    }

    pub fn encode(&self, out: &mut BytesMut) -> Result<(), EncodeError> {
        self.encode_depth(out, 0)
    }

    fn encode_depth(&self, out: &mut BytesMut, depth: usize) -> Result<(), EncodeError> {
        check_encode_depth(depth)?;
        codec::put_sized(out, 4, |out| {
            out.put_u32(count(self.0.len(), "map")?);
            for (k, v) in &self.0 {
                codec::put_str8(out, k)?;
                v.encode_depth(out, depth)?;
            }
            Ok(())
        })
    }

    pub fn decode(r: &mut Reader) -> Result<Map, DecodeError> {
        Self::decode_depth(r, 0)
    }

    fn decode_depth(r: &mut Reader, depth: usize) -> Result<Map, DecodeError> {
        let Some((mut body, n)) = open_collection(r, "map", depth)? else {
            return Ok(Map::new());
        };
        // Every entry takes at least two octets; never reserve more than the data allows.
        let mut entries = Vec::with_capacity((n as usize).min(body.remaining() / 2));
        for _ in 0..n {
            let key = body.str8()?;
            let value = Value::decode_depth(&mut body, depth)?;
            entries.push((key, value));
        }
        close_collection(&body, "map")?;
        Ok(Map(entries))
    }
}

/// Above this many entries, building a map looks keys up in a hash index: a table a peer
/// declared with thousands of entries, sent back in a query, would otherwise cost a search
/// of the entries so far for each one.
const LINEAR_LOOKUP_MAX: usize = 16;

/// Collects entries as repeated [`Map::insert`]s would (a repeated key keeps its first
/// position and takes its last value), in time linear in the entries.
impl<K: Into<Str>> FromIterator<(K, Value)> for Map {
    fn from_iter<I: IntoIterator<Item = (K, Value)>>(iter: I) -> Self {
        collect(iter, Repeated::TakesLastValue)
    }
}

impl Map {
    /// Collects entries keeping a repeated key's first value, in time linear in the
    /// entries: what a broker that reads a header table's first match (as the headers
    /// exchange does) acted on, for a peer that sent a name twice.
    pub fn from_first_values<K: Into<Str>>(iter: impl IntoIterator<Item = (K, Value)>) -> Map {
        collect(iter, Repeated::KeepsFirstValue)
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Repeated {
    TakesLastValue,
    KeepsFirstValue,
}

fn collect<K: Into<Str>>(iter: impl IntoIterator<Item = (K, Value)>, repeated: Repeated) -> Map {
    let mut entries: Vec<(Str, Value)> = Vec::new();
    let mut index: Option<HashMap<Str, usize>> = None;
    for (key, value) in iter {
        let key = key.into();
        let earlier = match &index {
            Some(index) => index.get(&key).copied(),
            None => entries.iter().position(|(k, _)| *k == key),
        };
        if let Some(i) = earlier {
            if repeated == Repeated::TakesLastValue {
                entries[i].1 = value;
            }
            continue;
        }
        if let Some(index) = &mut index {
            index.insert(key.clone(), entries.len());
        }
        entries.push((key, value));
        if index.is_none() && entries.len() > LINEAR_LOOKUP_MAX {
            index = Some(
                entries
                    .iter()
                    .enumerate()
                    .map(|(i, (k, _))| (k.clone(), i))
                    .collect(),
            );
        }
    }
    Map(entries)
}

fn count(n: usize, what: &'static str) -> Result<u32, EncodeError> {
    u32::try_from(n).map_err(|_| EncodeError::TooLong {
        what,
        len: n,
        max: u32::MAX as usize,
    })
}

/// An AMQP list: typed values of mixed types.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct List(pub Vec<Value>);

impl List {
    pub fn encode(&self, out: &mut BytesMut) -> Result<(), EncodeError> {
        self.encode_depth(out, 0)
    }

    fn encode_depth(&self, out: &mut BytesMut, depth: usize) -> Result<(), EncodeError> {
        check_encode_depth(depth)?;
        codec::put_sized(out, 4, |out| {
            out.put_u32(count(self.0.len(), "list")?);
            for v in &self.0 {
                v.encode_depth(out, depth)?;
            }
            Ok(())
        })
    }

    pub fn decode(r: &mut Reader) -> Result<List, DecodeError> {
        Self::decode_depth(r, 0)
    }

    fn decode_depth(r: &mut Reader, depth: usize) -> Result<List, DecodeError> {
        let Some((mut body, n)) = open_collection(r, "list", depth)? else {
            return Ok(List::default());
        };
        let mut items = Vec::with_capacity((n as usize).min(body.remaining()));
        for _ in 0..n {
            items.push(Value::decode_depth(&mut body, depth)?);
        }
        close_collection(&body, "list")?;
        Ok(List(items))
    }
}

/// An AMQP array: values of one type, written without per-item type codes.
#[derive(Debug, Clone, PartialEq)]
pub struct Array {
    pub element_code: u8,
    pub items: Vec<Value>,
}

impl Default for Array {
    fn default() -> Self {
        Array {
            element_code: code::VOID,
            items: Vec::new(),
        }
    }
}

impl Array {
    pub fn new(element_code: u8, items: Vec<Value>) -> Self {
        Array {
            element_code,
            items,
        }
    }

    /// An array of str16, the type of `connection.start` mechanisms and locales.
    pub fn of_str16<S: Into<Str>>(items: impl IntoIterator<Item = S>) -> Self {
        Array {
            element_code: code::STR16,
            items: items.into_iter().map(|s| Value::Str16(s.into())).collect(),
        }
    }

    /// The string items (str8 or str16), skipping any others.
    pub fn strs(&self) -> impl Iterator<Item = &Str> {
        self.items.iter().filter_map(Value::as_str)
    }

    pub fn encode(&self, out: &mut BytesMut) -> Result<(), EncodeError> {
        self.encode_depth(out, 0)
    }

    fn encode_depth(&self, out: &mut BytesMut, depth: usize) -> Result<(), EncodeError> {
        check_encode_depth(depth)?;
        codec::put_sized(out, 4, |out| {
            out.put_u8(self.element_code);
            out.put_u32(count(self.items.len(), "array")?);
            for v in &self.items {
                if v.type_code() != self.element_code {
                    return Err(EncodeError::ArrayElementMismatch {
                        element_code: self.element_code,
                        found: v.type_code(),
                    });
                }
                v.encode_data(out, depth)?;
            }
            Ok(())
        })
    }

    pub fn decode(r: &mut Reader) -> Result<Array, DecodeError> {
        Self::decode_depth(r, 0)
    }

    fn decode_depth(r: &mut Reader, depth: usize) -> Result<Array, DecodeError> {
        check_depth(depth)?;
        let mut body = r.sized(4)?;
        if body.is_empty() {
            return Ok(Array::default());
        }
        let element_code = body.u8()?;
        let n = body.u32()?;
        let width = type_width(element_code).ok_or(DecodeError::ReservedTypeCode(element_code))?;
        // Zero-width items take no octets, so their count alone could demand any amount
        // of memory; real peers never send arrays of them with more than the data allows.
        if matches!(width, TypeWidth::Fixed(0)) && n as usize > body.remaining() {
            return Err(DecodeError::InvalidSize {
                what: "array",
                size: u64::from(n),
            });
        }
        let mut items = Vec::with_capacity((n as usize).min(body.remaining()));
        for _ in 0..n {
            items.push(Value::decode_data(element_code, &mut body, depth)?);
        }
        close_collection(&body, "array")?;
        Ok(Array {
            element_code,
            items,
        })
    }
}

/// A struct defined by the spec with a class and struct code, so it can travel as a
/// struct32 value (execution.result, header segments). Implemented by generated code.
pub trait CodedStruct: Sized {
    const CLASS_CODE: u8;
    const STRUCT_CODE: u8;
    /// Packing flags and fields, without size or codes.
    fn encode_fields(&self, out: &mut BytesMut) -> Result<(), EncodeError>;
    fn decode_fields(r: &mut Reader) -> Result<Self, DecodeError>;
}

/// A struct32 value kept encoded: the codes, and the packing flags and fields as `body`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Struct32 {
    pub class_code: u8,
    pub struct_code: u8,
    pub body: Bytes,
}

impl Struct32 {
    pub fn from_struct<T: CodedStruct>(s: &T) -> Result<Struct32, EncodeError> {
        let mut body = BytesMut::new();
        s.encode_fields(&mut body)?;
        Ok(Struct32 {
            class_code: T::CLASS_CODE,
            struct_code: T::STRUCT_CODE,
            body: body.freeze(),
        })
    }

    pub fn is<T: CodedStruct>(&self) -> bool {
        self.class_code == T::CLASS_CODE && self.struct_code == T::STRUCT_CODE
    }

    /// Decodes the body as `T`, if the codes say it is one.
    pub fn decode_as<T: CodedStruct>(&self) -> Result<T, DecodeError> {
        self.check_is::<T>()?;
        T::decode_fields(&mut Reader::new(self.body.clone()))
    }

    /// [`Struct32::decode_as`] for a struct not needed afterwards: its body is read rather
    /// than shared once more.
    pub fn into_decoded<T: CodedStruct>(self) -> Result<T, DecodeError> {
        self.check_is::<T>()?;
        T::decode_fields(&mut Reader::new(self.body))
    }

    fn check_is<T: CodedStruct>(&self) -> Result<(), DecodeError> {
        if self.is::<T>() {
            return Ok(());
        }
        Err(DecodeError::UnexpectedStruct {
            expected: u16::from_be_bytes([T::CLASS_CODE, T::STRUCT_CODE]),
            found: u16::from_be_bytes([self.class_code, self.struct_code]),
        })
    }

    /// Size (4 octets), codes, body.
    pub fn encode(&self, out: &mut BytesMut) -> Result<(), EncodeError> {
        codec::put_sized(out, 4, |out| {
            out.put_u8(self.class_code);
            out.put_u8(self.struct_code);
            out.put_slice(&self.body);
            Ok(())
        })
    }

    pub fn decode(r: &mut Reader) -> Result<Struct32, DecodeError> {
        let mut body = r.sized(4)?;
        if body.remaining() < 2 {
            return Err(DecodeError::InvalidSize {
                what: "struct32",
                size: body.remaining() as u64,
            });
        }
        Ok(Struct32 {
            class_code: body.u8()?,
            struct_code: body.u8()?,
            body: body.into_rest(),
        })
    }
}

#[cfg(test)]
mod tests;
