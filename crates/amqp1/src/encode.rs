//! Writing encodings. Scalars take their shortest encoding (uint 0 is 0x43,
//! small values 0x52), as the spec recommends and common implementations do.
//! Lists, maps and arrays are written in place behind a 32-bit header and
//! moved down to the 8-bit form when they turn out small enough, so nothing
//! is encoded twice or into a scratch buffer.
//!
//! Array elements share one constructor, so they take the widest encoding of
//! their type (uint elements are 0x70 even when all are small), and lists,
//! maps and arrays inside arrays always use their 32-bit forms.

use bytes::{BufMut, BytesMut};

use crate::format::{self as f, Type};
use crate::primitive::Symbol;
use crate::value::{Array, Descriptor, Value};

pub(crate) fn null(out: &mut BytesMut) {
    out.put_u8(f::NULL);
}

pub(crate) fn boolean(out: &mut BytesMut, v: bool) {
    out.put_u8(if v { f::TRUE } else { f::FALSE });
}

pub(crate) fn ubyte(out: &mut BytesMut, v: u8) {
    out.put_u8(f::UBYTE);
    out.put_u8(v);
}

pub(crate) fn ushort(out: &mut BytesMut, v: u16) {
    out.put_u8(f::USHORT);
    out.put_u16(v);
}

pub(crate) fn uint(out: &mut BytesMut, v: u32) {
    match v {
        0 => out.put_u8(f::UINT0),
        1..=255 => {
            out.put_u8(f::SMALLUINT);
            out.put_u8(v as u8);
        }
        _ => {
            out.put_u8(f::UINT);
            out.put_u32(v);
        }
    }
}

pub(crate) fn ulong(out: &mut BytesMut, v: u64) {
    match v {
        0 => out.put_u8(f::ULONG0),
        1..=255 => {
            out.put_u8(f::SMALLULONG);
            out.put_u8(v as u8);
        }
        _ => {
            out.put_u8(f::ULONG);
            out.put_u64(v);
        }
    }
}

fn int(out: &mut BytesMut, v: i32) {
    match i8::try_from(v) {
        Ok(small) => {
            out.put_u8(f::SMALLINT);
            out.put_i8(small);
        }
        Err(_) => {
            out.put_u8(f::INT);
            out.put_i32(v);
        }
    }
}

fn long(out: &mut BytesMut, v: i64) {
    match i8::try_from(v) {
        Ok(small) => {
            out.put_u8(f::SMALLLONG);
            out.put_i8(small);
        }
        Err(_) => {
            out.put_u8(f::LONG);
            out.put_i64(v);
        }
    }
}

pub(crate) fn timestamp(out: &mut BytesMut, ms: i64) {
    out.put_u8(f::TIMESTAMP);
    out.put_i64(ms);
}

pub(crate) fn uuid(out: &mut BytesMut, v: &[u8; 16]) {
    out.put_u8(f::UUID);
    out.put_slice(v);
}

/// A vbin, str or sym: the 8-bit form up to 255 octets.
fn variable(out: &mut BytesMut, short: u8, long: u8, v: &[u8]) {
    match u8::try_from(v.len()) {
        Ok(len) => {
            out.put_u8(short);
            out.put_u8(len);
        }
        Err(_) => {
            out.put_u8(long);
            out.put_u32(len32(v.len()));
        }
    }
    out.put_slice(v);
}

pub(crate) fn binary(out: &mut BytesMut, v: &[u8]) {
    variable(out, f::VBIN8, f::VBIN32, v);
}

pub(crate) fn string(out: &mut BytesMut, v: &str) {
    variable(out, f::STR8, f::STR32, v.as_bytes());
}

pub(crate) fn symbol(out: &mut BytesMut, v: &Symbol) {
    variable(out, f::SYM8, f::SYM32, v.as_bytes());
}

/// Lengths beyond 4 GiB cannot be encoded; nothing this codec is handed
/// (values inside one frame or message) comes near that.
fn len32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// The 0x00 and the descriptor that start a described value.
pub(crate) fn descriptor(out: &mut BytesMut, d: &Descriptor) {
    out.put_u8(f::DESCRIBED);
    match d {
        Descriptor::Code(code) => ulong(out, *code),
        Descriptor::Symbol(name) => symbol(out, name),
    }
}

/// The start of a described value with a numeric descriptor, the form this
/// codec writes for every type it knows.
pub(crate) fn described_code(out: &mut BytesMut, code: u64) {
    out.put_u8(f::DESCRIBED);
    ulong(out, code);
}

/// Room for the widest header of a list, map or array (code, size, count).
const HEADER32: usize = 9;

/// Starts a list, map or array; returns where, for [`end_compound`].
pub(crate) fn begin_compound(out: &mut BytesMut) -> usize {
    let at = out.len();
    out.put_bytes(0, HEADER32);
    at
}

/// Finishes what [`begin_compound`] started, holding `count` elements (for a
/// map, keys plus values). `code8`/`code32` are the two forms of the type;
/// an empty list becomes list0.
pub(crate) fn end_compound(out: &mut BytesMut, at: usize, count: usize, code8: u8, code32: u8) {
    let body = out.len() - at - HEADER32;
    if code8 == f::LIST8 && count == 0 {
        out.truncate(at);
        out.put_u8(f::LIST0);
    } else if body < 255 && count <= 255 {
        // The size field counts the count field.
        out[at] = code8;
        out[at + 1] = (body + 1) as u8;
        out[at + 2] = count as u8;
        out.copy_within(at + HEADER32.., at + 3);
        out.truncate(at + 3 + body);
    } else {
        fill_header32(out, at, code32, body, count);
    }
}

fn fill_header32(out: &mut BytesMut, at: usize, code32: u8, body: usize, count: usize) {
    out[at] = code32;
    out[at + 1..at + 5].copy_from_slice(&len32(body + 4).to_be_bytes());
    out[at + 5..at + 9].copy_from_slice(&len32(count).to_be_bytes());
}

pub(crate) fn value(out: &mut BytesMut, v: &Value) {
    match v {
        Value::Null => null(out),
        Value::Bool(b) => boolean(out, *b),
        Value::Ubyte(n) => ubyte(out, *n),
        Value::Ushort(n) => ushort(out, *n),
        Value::Uint(n) => uint(out, *n),
        Value::Ulong(n) => ulong(out, *n),
        Value::Byte(n) => {
            out.put_u8(f::BYTE);
            out.put_i8(*n);
        }
        Value::Short(n) => {
            out.put_u8(f::SHORT);
            out.put_i16(*n);
        }
        Value::Int(n) => int(out, *n),
        Value::Long(n) => long(out, *n),
        Value::Timestamp(t) => timestamp(out, t.0),
        Value::Uuid(u) => uuid(out, &u.0),
        Value::Binary(b) => binary(out, b),
        Value::String(s) => string(out, s.as_str()),
        Value::Symbol(s) => symbol(out, s),
        Value::List(items) => {
            let at = begin_compound(out);
            for item in items {
                value(out, item);
            }
            end_compound(out, at, items.len(), f::LIST8, f::LIST32);
        }
        Value::Map(map) => {
            let at = begin_compound(out);
            for (k, v) in map.iter() {
                value(out, k);
                value(out, v);
            }
            end_compound(out, at, map.len() * 2, f::MAP8, f::MAP32);
        }
        Value::Array(a) => array(out, a),
        Value::Described(d) => {
            descriptor(out, &d.descriptor);
            value(out, &d.value);
        }
        // The rest have one encoding, the one arrays use.
        Value::Float(_)
        | Value::Double(_)
        | Value::Decimal32(_)
        | Value::Decimal64(_)
        | Value::Decimal128(_)
        | Value::Char(_) => {
            let code = element_code(v.type_of().unwrap_or(Type::Null), &[]);
            out.put_u8(code);
            element(out, code, v);
        }
    }
}

pub(crate) fn array(out: &mut BytesMut, a: &Array) {
    let at = begin_compound(out);
    if let Some(d) = a.descriptor() {
        descriptor(out, d);
    }
    let code = element_code(a.element_type(), a.items());
    out.put_u8(code);
    for item in a.items() {
        element(out, code, item);
    }
    end_compound(out, at, a.len(), f::ARRAY8, f::ARRAY32);
}

/// An array of symbols, as multiple-valued fields are written.
pub(crate) fn symbol_array(out: &mut BytesMut, items: &[Symbol]) {
    let at = begin_compound(out);
    let code = if items.iter().all(|s| s.len() <= 255) {
        f::SYM8
    } else {
        f::SYM32
    };
    out.put_u8(code);
    for s in items {
        variable_body(out, code, s.as_bytes());
    }
    end_compound(out, at, items.len(), f::ARRAY8, f::ARRAY32);
}

/// The one constructor all elements of an array of `ty` share.
fn element_code(ty: Type, items: &[Value]) -> u8 {
    let short = |v: &Value| match v {
        Value::Binary(b) => b.len() <= 255,
        Value::String(s) => s.len() <= 255,
        Value::Symbol(s) => s.len() <= 255,
        _ => true,
    };
    let all_short = items.iter().all(short);
    match ty {
        Type::Null => f::NULL,
        Type::Boolean => f::BOOLEAN,
        Type::Ubyte => f::UBYTE,
        Type::Ushort => f::USHORT,
        Type::Uint => f::UINT,
        Type::Ulong => f::ULONG,
        Type::Byte => f::BYTE,
        Type::Short => f::SHORT,
        Type::Int => f::INT,
        Type::Long => f::LONG,
        Type::Float => f::FLOAT,
        Type::Double => f::DOUBLE,
        Type::Decimal32 => f::DECIMAL32,
        Type::Decimal64 => f::DECIMAL64,
        Type::Decimal128 => f::DECIMAL128,
        Type::Char => f::CHAR,
        Type::Timestamp => f::TIMESTAMP,
        Type::Uuid => f::UUID,
        Type::Binary if all_short => f::VBIN8,
        Type::Binary => f::VBIN32,
        Type::String if all_short => f::STR8,
        Type::String => f::STR32,
        Type::Symbol if all_short => f::SYM8,
        Type::Symbol => f::SYM32,
        Type::List => f::LIST32,
        Type::Map => f::MAP32,
        Type::Array => f::ARRAY32,
    }
}

fn variable_body(out: &mut BytesMut, code: u8, v: &[u8]) {
    if code & 0xf0 == 0xa0 {
        out.put_u8(v.len() as u8);
    } else {
        out.put_u32(len32(v.len()));
    }
    out.put_slice(v);
}

/// The data of `v` for constructor `code` (chosen by [`element_code`] for
/// `v`'s type, so the two agree).
fn element(out: &mut BytesMut, code: u8, v: &Value) {
    match v {
        Value::Null => {}
        Value::Bool(b) => out.put_u8(u8::from(*b)),
        Value::Ubyte(n) => out.put_u8(*n),
        Value::Ushort(n) => out.put_u16(*n),
        Value::Uint(n) => out.put_u32(*n),
        Value::Ulong(n) => out.put_u64(*n),
        Value::Byte(n) => out.put_i8(*n),
        Value::Short(n) => out.put_i16(*n),
        Value::Int(n) => out.put_i32(*n),
        Value::Long(n) => out.put_i64(*n),
        Value::Float(x) => out.put_u32(x.to_bits()),
        Value::Double(x) => out.put_u64(x.to_bits()),
        Value::Decimal32(d) => out.put_slice(&d.0),
        Value::Decimal64(d) => out.put_slice(&d.0),
        Value::Decimal128(d) => out.put_slice(&d.0),
        Value::Char(c) => out.put_u32(u32::from(*c)),
        Value::Timestamp(t) => out.put_i64(t.0),
        Value::Uuid(u) => out.put_slice(&u.0),
        Value::Binary(b) => variable_body(out, code, b),
        Value::String(s) => variable_body(out, code, s.as_bytes()),
        Value::Symbol(s) => variable_body(out, code, s.as_bytes()),
        Value::List(items) => {
            let at = out.len();
            out.put_bytes(0, 8);
            for item in items {
                value(out, item);
            }
            fill_sized32(out, at, items.len());
        }
        Value::Map(map) => {
            let at = out.len();
            out.put_bytes(0, 8);
            for (k, v) in map.iter() {
                value(out, k);
                value(out, v);
            }
            fill_sized32(out, at, map.len() * 2);
        }
        Value::Array(a) => {
            let at = out.len();
            out.put_bytes(0, 8);
            if let Some(d) = a.descriptor() {
                descriptor(out, d);
            }
            let code = element_code(a.element_type(), a.items());
            out.put_u8(code);
            for item in a.items() {
                element(out, code, item);
            }
            fill_sized32(out, at, a.len());
        }
        // `Array` keeps described values out of its items.
        Value::Described(_) => {}
    }
}

/// Size and count of a 32-bit compound whose data starts at `at`.
fn fill_sized32(out: &mut BytesMut, at: usize, count: usize) {
    let body = out.len() - at - 8;
    out[at..at + 4].copy_from_slice(&len32(body + 4).to_be_bytes());
    out[at + 4..at + 8].copy_from_slice(&len32(count).to_be_bytes());
}
