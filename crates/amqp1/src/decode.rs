//! Reading the type system's encodings out of a shared buffer.
//!
//! Every encoding is a constructor (a format code, or 0x00, a descriptor and
//! a format code) followed by data whose extent the format code gives. The
//! decoder reads the constructor, then the data for that code; typed readers
//! (`uint`, `string`, ...) accept every format code of their type and refuse
//! the rest with [`DecodeError::UnexpectedType`].
//!
//! Memory: compound sizes are checked against the octets present before
//! anything is allocated, and every element takes at least one octet, except
//! array elements whose constructor has no data (null, true, false, uint0,
//! ulong0, list0). Those are counted against a budget of one per input octet
//! plus [`ZERO_WIDTH_ALLOWANCE`], so a decoded value is never more than a
//! few dozen times the size of its encoding.

use std::mem;

use bytes::{Buf, Bytes};

use crate::error::DecodeError;
use crate::format::{self as f, Type, Width};
use crate::primitive::{Decimal128, Decimal32, Decimal64, Str, Symbol, Timestamp, Uuid};
use crate::value::{Array, Described, Descriptor, Map, Value};

/// Deepest nesting of lists, maps, arrays and described values accepted.
/// Real messages nest a few levels; the bound keeps hostile input from
/// exhausting the stack.
pub const MAX_NESTING: usize = 64;

/// Array elements beyond one per input octet that a decoder accepts (see
/// the module documentation).
pub const ZERO_WIDTH_ALLOWANCE: usize = 256;

/// Reads encoded values from the front of a buffer.
#[derive(Debug)]
pub struct Decoder {
    buf: Bytes,
    depth: usize,
    budget: usize,
}

impl Decoder {
    pub fn new(buf: Bytes) -> Self {
        let budget = buf.len().saturating_add(ZERO_WIDTH_ALLOWANCE);
        Decoder {
            buf,
            depth: 0,
            budget,
        }
    }

    pub fn remaining(&self) -> usize {
        self.buf.len()
    }

    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// What is left unread.
    pub fn into_rest(self) -> Bytes {
        self.buf
    }

    /// Checks that everything was read.
    pub fn finish(&self) -> Result<(), DecodeError> {
        match self.buf.len() {
            0 => Ok(()),
            n => Err(DecodeError::TrailingBytes(n)),
        }
    }

    fn need(&self, n: usize) -> Result<(), DecodeError> {
        if self.buf.len() < n {
            return Err(DecodeError::Truncated);
        }
        Ok(())
    }

    pub(crate) fn u8(&mut self) -> Result<u8, DecodeError> {
        self.need(1)?;
        Ok(self.buf.get_u8())
    }

    fn u16(&mut self) -> Result<u16, DecodeError> {
        self.need(2)?;
        Ok(self.buf.get_u16())
    }

    fn u32(&mut self) -> Result<u32, DecodeError> {
        self.need(4)?;
        Ok(self.buf.get_u32())
    }

    fn u64(&mut self) -> Result<u64, DecodeError> {
        self.need(8)?;
        Ok(self.buf.get_u64())
    }

    fn octets<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        self.need(N)?;
        let mut out = [0; N];
        self.buf.copy_to_slice(&mut out);
        Ok(out)
    }

    pub(crate) fn take(&mut self, n: usize) -> Result<Bytes, DecodeError> {
        self.need(n)?;
        Ok(self.buf.split_to(n))
    }

    /// Runs `f` one level deeper, failing past [`MAX_NESTING`].
    pub(crate) fn deeper<T>(
        &mut self,
        f: impl FnOnce(&mut Self) -> Result<T, DecodeError>,
    ) -> Result<T, DecodeError> {
        if self.depth >= MAX_NESTING {
            return Err(DecodeError::NestingTooDeep(MAX_NESTING));
        }
        self.depth += 1;
        let result = f(self);
        self.depth -= 1;
        result
    }

    /// Runs `f` over `body` (a compound's contents) one level deeper; `f`
    /// must consume all of it.
    pub(crate) fn within<T>(
        &mut self,
        body: Bytes,
        f: impl FnOnce(&mut Self) -> Result<T, DecodeError>,
    ) -> Result<T, DecodeError> {
        let outer = mem::replace(&mut self.buf, body);
        let result = self.deeper(f);
        let inner = mem::replace(&mut self.buf, outer);
        let value = result?;
        match inner.len() {
            0 => Ok(value),
            n => Err(DecodeError::SizeMismatch(n)),
        }
    }

    fn charge(&mut self, elements: u64) -> Result<(), DecodeError> {
        let n = usize::try_from(elements).map_err(|_| DecodeError::TooManyElements)?;
        self.budget = self
            .budget
            .checked_sub(n)
            .ok_or(DecodeError::TooManyElements)?;
        Ok(())
    }

    /// A descriptor: a ulong or a symbol. The spec reserves every other type
    /// for future use, so they are refused rather than guessed at.
    pub fn descriptor(&mut self) -> Result<Descriptor, DecodeError> {
        let code = self.u8()?;
        match code {
            f::ULONG | f::SMALLULONG | f::ULONG0 => Ok(Descriptor::Code(self.ulong(code)?)),
            f::SYM8 | f::SYM32 => Ok(Descriptor::Symbol(self.symbol(code)?)),
            _ => Err(DecodeError::InvalidDescriptor(code)),
        }
    }

    /// One whole value.
    pub fn value(&mut self) -> Result<Value, DecodeError> {
        let code = self.u8()?;
        self.value_of(code)
    }

    /// The value whose format code (or 0x00) was just read.
    pub(crate) fn value_of(&mut self, code: u8) -> Result<Value, DecodeError> {
        if code == f::DESCRIBED {
            let described = self.deeper(|d| {
                let descriptor = d.descriptor()?;
                let value = d.value()?;
                Ok(Described { descriptor, value })
            })?;
            return Ok(Value::Described(Box::new(described)));
        }
        let (ty, _) = Type::of_code(code).ok_or(DecodeError::InvalidFormatCode(code))?;
        self.primitive(code, ty)
    }

    fn primitive(&mut self, code: u8, ty: Type) -> Result<Value, DecodeError> {
        Ok(match ty {
            Type::Null => Value::Null,
            Type::Boolean => Value::Bool(self.boolean(code)?),
            Type::Ubyte => Value::Ubyte(self.u8()?),
            Type::Ushort => Value::Ushort(self.u16()?),
            Type::Uint => Value::Uint(self.uint(code)?),
            Type::Ulong => Value::Ulong(self.ulong(code)?),
            Type::Byte => Value::Byte(self.u8()? as i8),
            Type::Short => Value::Short(self.u16()? as i16),
            Type::Int => Value::Int(self.int(code)?),
            Type::Long => Value::Long(self.long(code)?),
            Type::Float => Value::Float(f32::from_bits(self.u32()?)),
            Type::Double => Value::Double(f64::from_bits(self.u64()?)),
            Type::Decimal32 => Value::Decimal32(Decimal32(self.octets()?)),
            Type::Decimal64 => Value::Decimal64(Decimal64(self.octets()?)),
            Type::Decimal128 => Value::Decimal128(Decimal128(self.octets()?)),
            Type::Char => Value::Char(self.char()?),
            Type::Timestamp => Value::Timestamp(Timestamp(self.u64()? as i64)),
            Type::Uuid => Value::Uuid(Uuid(self.octets()?)),
            Type::Binary => Value::Binary(self.binary(code)?),
            Type::String => Value::String(self.string(code)?),
            Type::Symbol => Value::Symbol(self.symbol(code)?),
            Type::List => Value::List(self.list(code)?),
            Type::Map => Value::Map(self.map(code, |d| d.value(), |d| d.value())?),
            Type::Array => Value::Array(self.array(code)?),
        })
    }

    pub(crate) fn boolean(&mut self, code: u8) -> Result<bool, DecodeError> {
        match code {
            f::TRUE => Ok(true),
            f::FALSE => Ok(false),
            f::BOOLEAN => match self.u8()? {
                0 => Ok(false),
                1 => Ok(true),
                other => Err(DecodeError::InvalidValue {
                    what: "boolean",
                    value: other.into(),
                }),
            },
            _ => Err(unexpected("boolean", code)),
        }
    }

    pub(crate) fn ubyte(&mut self, code: u8) -> Result<u8, DecodeError> {
        match code {
            f::UBYTE => self.u8(),
            _ => Err(unexpected("ubyte", code)),
        }
    }

    pub(crate) fn ushort(&mut self, code: u8) -> Result<u16, DecodeError> {
        match code {
            f::USHORT => self.u16(),
            _ => Err(unexpected("ushort", code)),
        }
    }

    pub(crate) fn uint(&mut self, code: u8) -> Result<u32, DecodeError> {
        match code {
            f::UINT => self.u32(),
            f::SMALLUINT => self.u8().map(u32::from),
            f::UINT0 => Ok(0),
            _ => Err(unexpected("uint", code)),
        }
    }

    pub(crate) fn ulong(&mut self, code: u8) -> Result<u64, DecodeError> {
        match code {
            f::ULONG => self.u64(),
            f::SMALLULONG => self.u8().map(u64::from),
            f::ULONG0 => Ok(0),
            _ => Err(unexpected("ulong", code)),
        }
    }

    fn int(&mut self, code: u8) -> Result<i32, DecodeError> {
        match code {
            f::INT => self.u32().map(|v| v as i32),
            f::SMALLINT => self.u8().map(|v| i32::from(v as i8)),
            _ => Err(unexpected("int", code)),
        }
    }

    fn long(&mut self, code: u8) -> Result<i64, DecodeError> {
        match code {
            f::LONG => self.u64().map(|v| v as i64),
            f::SMALLLONG => self.u8().map(|v| i64::from(v as i8)),
            _ => Err(unexpected("long", code)),
        }
    }

    fn char(&mut self) -> Result<char, DecodeError> {
        let v = self.u32()?;
        char::from_u32(v).ok_or(DecodeError::InvalidChar(v))
    }

    pub(crate) fn timestamp(&mut self, code: u8) -> Result<Timestamp, DecodeError> {
        match code {
            f::TIMESTAMP => Ok(Timestamp(self.u64()? as i64)),
            _ => Err(unexpected("timestamp", code)),
        }
    }

    pub(crate) fn uuid(&mut self, code: u8) -> Result<Uuid, DecodeError> {
        match code {
            f::UUID => Ok(Uuid(self.octets()?)),
            _ => Err(unexpected("uuid", code)),
        }
    }

    /// The octets of a vbin, str or sym encoding: codes 0xa_ have a one-octet
    /// length, 0xb_ a four-octet one.
    fn variable(&mut self, code: u8) -> Result<Bytes, DecodeError> {
        let len = if code & 0xf0 == 0xa0 {
            usize::from(self.u8()?)
        } else {
            usize::try_from(self.u32()?).map_err(|_| DecodeError::Truncated)?
        };
        self.take(len)
    }

    pub(crate) fn binary(&mut self, code: u8) -> Result<Bytes, DecodeError> {
        match code {
            f::VBIN8 | f::VBIN32 => self.variable(code),
            _ => Err(unexpected("binary", code)),
        }
    }

    pub(crate) fn string(&mut self, code: u8) -> Result<Str, DecodeError> {
        match code {
            f::STR8 | f::STR32 => {
                Str::from_utf8(self.variable(code)?).map_err(|_| DecodeError::InvalidUtf8)
            }
            _ => Err(unexpected("string", code)),
        }
    }

    pub(crate) fn symbol(&mut self, code: u8) -> Result<Symbol, DecodeError> {
        match code {
            f::SYM8 | f::SYM32 => {
                Symbol::from_utf8(self.variable(code)?).map_err(|_| DecodeError::InvalidUtf8)
            }
            _ => Err(unexpected("symbol", code)),
        }
    }

    /// The contents and element count of a list or map (`code` one of
    /// list0/list8/list32/map8/map32), after checking that the count can fit.
    fn compound(&mut self, code: u8) -> Result<(Bytes, u64), DecodeError> {
        let (body, count) = match code {
            f::LIST0 => return Ok((Bytes::new(), 0)),
            f::LIST8 | f::MAP8 => {
                let size = self.u8()?;
                if size < 1 {
                    return Err(DecodeError::InvalidSize(size.into()));
                }
                let count = self.u8()?;
                (self.take(usize::from(size) - 1)?, u64::from(count))
            }
            _ => {
                let size = self.u32()?;
                if size < 4 {
                    return Err(DecodeError::InvalidSize(size.into()));
                }
                let count = self.u32()?;
                let len = usize::try_from(size - 4).map_err(|_| DecodeError::Truncated)?;
                (self.take(len)?, u64::from(count))
            }
        };
        if count > body.len() as u64 {
            return Err(DecodeError::CountExceedsSize {
                count,
                size: body.len(),
            });
        }
        Ok((body, count))
    }

    pub(crate) fn list(&mut self, code: u8) -> Result<Vec<Value>, DecodeError> {
        if !matches!(code, f::LIST0 | f::LIST8 | f::LIST32) {
            return Err(unexpected("list", code));
        }
        let (body, count) = self.compound(code)?;
        // `compound` checked count <= body length, so this is bounded.
        let mut items = Vec::with_capacity(count as usize);
        self.within(body, |d| {
            for _ in 0..count {
                items.push(d.value()?);
            }
            Ok(())
        })?;
        Ok(items)
    }

    /// The elements of a list (`code` a list code) one by one: the caller
    /// reads exactly `count` values with the decoder it is handed.
    pub(crate) fn list_with<T>(
        &mut self,
        code: u8,
        f: impl FnOnce(&mut Self, u64) -> Result<T, DecodeError>,
    ) -> Result<T, DecodeError> {
        if !matches!(code, f::LIST0 | f::LIST8 | f::LIST32) {
            return Err(unexpected("list", code));
        }
        let (body, count) = self.compound(code)?;
        self.within(body, |d| f(d, count))
    }

    pub(crate) fn map<K, V>(
        &mut self,
        code: u8,
        mut key: impl FnMut(&mut Self) -> Result<K, DecodeError>,
        mut value: impl FnMut(&mut Self) -> Result<V, DecodeError>,
    ) -> Result<Map<K, V>, DecodeError> {
        if !matches!(code, f::MAP8 | f::MAP32) {
            return Err(unexpected("map", code));
        }
        let (body, count) = self.compound(code)?;
        if count % 2 != 0 {
            return Err(DecodeError::OddMapCount(count));
        }
        let mut map = Map::with_capacity((count / 2) as usize);
        self.within(body, |d| {
            for _ in 0..count / 2 {
                let k = key(d)?;
                let v = value(d)?;
                map.push(k, v);
            }
            Ok(())
        })?;
        Ok(map)
    }

    /// The contents, element count and element constructor of an array.
    fn array_header(
        &mut self,
        code: u8,
    ) -> Result<(Bytes, u64, Option<Descriptor>, u8), DecodeError> {
        let (size, count) = match code {
            f::ARRAY8 => {
                let size = self.u8()?;
                if size < 1 {
                    return Err(DecodeError::InvalidSize(size.into()));
                }
                (usize::from(size) - 1, u64::from(self.u8()?))
            }
            f::ARRAY32 => {
                let size = self.u32()?;
                if size < 4 {
                    return Err(DecodeError::InvalidSize(size.into()));
                }
                let size = usize::try_from(size - 4).map_err(|_| DecodeError::Truncated)?;
                (size, u64::from(self.u32()?))
            }
            _ => return Err(unexpected("array", code)),
        };
        let mut body = self.take(size)?;
        let (descriptor, element) = {
            let mut d = Decoder {
                buf: mem::take(&mut body),
                depth: self.depth,
                budget: 0,
            };
            let mut element = d.u8()?;
            let mut descriptor = None;
            if element == f::DESCRIBED {
                descriptor = Some(d.descriptor()?);
                element = d.u8()?;
            }
            body = d.into_rest();
            (descriptor, element)
        };
        let (_, width) = Type::of_code(element).ok_or(if element == f::DESCRIBED {
            // A descriptor on a described element constructor: legal in
            // the grammar, used by nobody, and not representable here.
            DecodeError::UnexpectedType {
                expected: "array element constructor",
                found: element,
            }
        } else {
            DecodeError::InvalidFormatCode(element)
        })?;
        let least = match width {
            Width::Fixed(n) => n,
            Width::Variable(n) | Width::Compound(n) | Width::Array(n) => n,
        } as u64;
        if count.saturating_mul(least) > body.len() as u64 {
            return Err(DecodeError::CountExceedsSize {
                count,
                size: body.len(),
            });
        }
        self.charge(count)?;
        Ok((body, count, descriptor, element))
    }

    pub(crate) fn array(&mut self, code: u8) -> Result<Array, DecodeError> {
        let (body, count, descriptor, element) = self.array_header(code)?;
        let Some((ty, _)) = Type::of_code(element) else {
            return Err(DecodeError::InvalidFormatCode(element));
        };
        // `array_header` charged `count` to the budget, which the input
        // length bounds.
        let mut items = Vec::with_capacity(count as usize);
        self.within(body, |d| {
            for _ in 0..count {
                items.push(d.primitive(element, ty)?);
            }
            Ok(())
        })?;
        Ok(Array::from_parts(descriptor, ty, items))
    }

    /// The elements of an array one by one: `f` gets the element constructor
    /// (descriptor, format code) and the count, and reads exactly that many
    /// element bodies.
    pub(crate) fn array_with<T>(
        &mut self,
        code: u8,
        f: impl FnOnce(&mut Self, Option<Descriptor>, u8, u64) -> Result<T, DecodeError>,
    ) -> Result<T, DecodeError> {
        let (body, count, descriptor, element) = self.array_header(code)?;
        self.within(body, |d| f(d, descriptor, element, count))
    }

    /// Passes over the value whose format code was just read, checking only
    /// that its extent fits: compounds are skipped by their size field
    /// without looking inside.
    pub(crate) fn skip_of(&mut self, code: u8) -> Result<(), DecodeError> {
        if code == f::DESCRIBED {
            return self.deeper(|d| {
                d.descriptor()?;
                let code = d.u8()?;
                d.skip_of(code)
            });
        }
        let (_, width) = Type::of_code(code).ok_or(DecodeError::InvalidFormatCode(code))?;
        let len = match width {
            Width::Fixed(n) => n,
            Width::Variable(1) | Width::Compound(1) | Width::Array(1) => usize::from(self.u8()?),
            Width::Variable(_) | Width::Compound(_) | Width::Array(_) => {
                usize::try_from(self.u32()?).map_err(|_| DecodeError::Truncated)?
            }
        };
        self.take(len).map(drop)
    }

    /// The encoding of the next value (constructor included), skipped as
    /// [`skip_of`](Self::skip_of) does.
    pub(crate) fn raw_value(&mut self) -> Result<Bytes, DecodeError> {
        let start = self.buf.clone();
        let code = self.u8()?;
        self.skip_of(code)?;
        Ok(start.slice(..start.len() - self.buf.len()))
    }
}

pub(crate) fn unexpected(expected: &'static str, found: u8) -> DecodeError {
    DecodeError::UnexpectedType { expected, found }
}
