//! Field tables and field values, with the type letters RabbitMQ and its
//! clients use (RabbitMQ's 0-9-1 errata), not the spec's own list: the spec's
//! `U`/`L` signed and `s` short-string letters were never used in practice,
//! and `s`, `l` and `x` mean signed 16-bit, signed 64-bit and byte array.
//!
//! Decoding is lossless and keeps entry order and duplicate keys, so a table
//! relayed from one peer to another is re-encoded as it arrived.
//!
//! Memory: a table lives inside one frame, so its size is bounded by
//! frame-max; a decoded value takes at most a few dozen octets per encoded
//! octet (worst case: an array of one-octet `V` values).

use bytes::{Bytes, BytesMut};

use crate::codec::{DecodeError, Reader, Writer};
use crate::strings::{LongStr, ShortStr};

/// Deepest nesting of tables and arrays accepted from a peer. Real clients
/// nest two or three levels (e.g. `x-death`); the bound keeps hostile input
/// from exhausting the stack.
pub const MAX_NESTING: usize = 64;

/// One field-table value. Each variant has its own type letter, so decoding
/// and re-encoding keep the sender's choice of width and signedness.
#[derive(Debug, Clone, PartialEq)]
pub enum FieldValue {
    /// `t`
    Bool(bool),
    /// `b`
    I8(i8),
    /// `B`
    U8(u8),
    /// `s`
    I16(i16),
    /// `u`
    U16(u16),
    /// `I`
    I32(i32),
    /// `i`
    U32(u32),
    /// `l`
    I64(i64),
    /// `f`
    F32(f32),
    /// `d`
    F64(f64),
    /// `D`: `value / 10^scale`.
    Decimal { scale: u8, value: i32 },
    /// `S`
    LongStr(LongStr),
    /// `x`
    ByteArray(LongStr),
    /// `A`
    Array(Vec<FieldValue>),
    /// `T`: seconds since the epoch.
    Timestamp(u64),
    /// `F`
    Table(FieldTable),
    /// `V`
    Void,
}

impl FieldValue {
    /// The type letter written before the value.
    pub fn type_code(&self) -> u8 {
        match self {
            FieldValue::Bool(_) => b't',
            FieldValue::I8(_) => b'b',
            FieldValue::U8(_) => b'B',
            FieldValue::I16(_) => b's',
            FieldValue::U16(_) => b'u',
            FieldValue::I32(_) => b'I',
            FieldValue::U32(_) => b'i',
            FieldValue::I64(_) => b'l',
            FieldValue::F32(_) => b'f',
            FieldValue::F64(_) => b'd',
            FieldValue::Decimal { .. } => b'D',
            FieldValue::LongStr(_) => b'S',
            FieldValue::ByteArray(_) => b'x',
            FieldValue::Array(_) => b'A',
            FieldValue::Timestamp(_) => b'T',
            FieldValue::Table(_) => b'F',
            FieldValue::Void => b'V',
        }
    }

    /// Convenience for the common case of a string value.
    pub fn string(s: &str) -> Result<Self, crate::StringTooLong> {
        Ok(FieldValue::LongStr(LongStr::try_from(s)?))
    }
}

/// An ordered field table. Lookups are linear: tables are small (client
/// properties, queue arguments, message headers) and order must be kept.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FieldTable {
    entries: Vec<(ShortStr, FieldValue)>,
}

impl FieldTable {
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets `key`, replacing the first existing entry with that key in place.
    pub fn insert(&mut self, key: ShortStr, value: FieldValue) {
        match self.entries.iter_mut().find(|(k, _)| *k == key) {
            Some(slot) => slot.1 = value,
            None => self.entries.push((key, value)),
        }
    }

    /// Appends without looking for an existing key (what the decoder does).
    pub fn push(&mut self, key: ShortStr, value: FieldValue) {
        self.entries.push((key, value));
    }

    /// First value stored under `key`.
    pub fn get(&self, key: &str) -> Option<&FieldValue> {
        self.entries
            .iter()
            .find(|(k, _)| k.as_bytes() == key.as_bytes())
            .map(|(_, v)| v)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&ShortStr, &FieldValue)> {
        self.entries.iter().map(|(k, v)| (k, v))
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Decodes a table (with its 32-bit size prefix) from the front of `buf`.
    pub fn decode(buf: &mut Bytes) -> Result<Self, DecodeError> {
        let mut r = Reader::new(std::mem::take(buf));
        let table = read_table(&mut r, 0);
        *buf = r.into_rest();
        table
    }

    /// Appends the table with its 32-bit size prefix.
    pub fn encode(&self, out: &mut BytesMut) {
        write_table(self, &mut Writer::new(out));
    }
}

impl FromIterator<(ShortStr, FieldValue)> for FieldTable {
    fn from_iter<I: IntoIterator<Item = (ShortStr, FieldValue)>>(iter: I) -> Self {
        FieldTable {
            entries: iter.into_iter().collect(),
        }
    }
}

pub(crate) fn read_table(r: &mut Reader, depth: usize) -> Result<FieldTable, DecodeError> {
    if depth >= MAX_NESTING {
        return Err(DecodeError::NestingTooDeep(MAX_NESTING));
    }
    let len = r.u32()?;
    let body = r.take(usize::try_from(len).map_err(|_| DecodeError::Truncated)?)?;
    let mut inner = Reader::new(body);
    let mut table = FieldTable::new();
    while inner.remaining() > 0 {
        let key = inner.short_str()?;
        let value = read_value(&mut inner, depth)?;
        table.push(key, value);
    }
    Ok(table)
}

fn read_array(r: &mut Reader, depth: usize) -> Result<Vec<FieldValue>, DecodeError> {
    if depth >= MAX_NESTING {
        return Err(DecodeError::NestingTooDeep(MAX_NESTING));
    }
    let len = r.u32()?;
    let body = r.take(usize::try_from(len).map_err(|_| DecodeError::Truncated)?)?;
    let mut inner = Reader::new(body);
    let mut values = Vec::new();
    while inner.remaining() > 0 {
        values.push(read_value(&mut inner, depth)?);
    }
    Ok(values)
}

fn read_value(r: &mut Reader, depth: usize) -> Result<FieldValue, DecodeError> {
    let code = r.u8()?;
    Ok(match code {
        b't' => FieldValue::Bool(r.u8()? != 0),
        b'b' => FieldValue::I8(r.u8()? as i8),
        b'B' => FieldValue::U8(r.u8()?),
        b's' => FieldValue::I16(r.u16()? as i16),
        b'u' => FieldValue::U16(r.u16()?),
        b'I' => FieldValue::I32(r.u32()? as i32),
        b'i' => FieldValue::U32(r.u32()?),
        b'l' => FieldValue::I64(r.u64()? as i64),
        b'f' => FieldValue::F32(f32::from_bits(r.u32()?)),
        b'd' => FieldValue::F64(f64::from_bits(r.u64()?)),
        b'D' => FieldValue::Decimal {
            scale: r.u8()?,
            value: r.u32()? as i32,
        },
        b'S' => FieldValue::LongStr(r.long_str()?),
        b'x' => FieldValue::ByteArray(r.long_str()?),
        b'A' => FieldValue::Array(read_array(r, depth + 1)?),
        b'T' => FieldValue::Timestamp(r.u64()?),
        b'F' => FieldValue::Table(read_table(r, depth + 1)?),
        b'V' => FieldValue::Void,
        other => return Err(DecodeError::UnknownFieldType(other)),
    })
}

/// Checks an encoded table (length prefix included) the way [`read_table`] would read it,
/// building nothing: a broker that passes tables through needs them valid, not decoded.
pub(crate) fn skip_table(r: &mut Reader, depth: usize) -> Result<(), DecodeError> {
    if depth >= MAX_NESTING {
        return Err(DecodeError::NestingTooDeep(MAX_NESTING));
    }
    let len = r.u32()?;
    let body = r.take(usize::try_from(len).map_err(|_| DecodeError::Truncated)?)?;
    let mut inner = Reader::new(body);
    while inner.remaining() > 0 {
        inner.short_str()?;
        skip_value(&mut inner, depth)?;
    }
    Ok(())
}

fn skip_value(r: &mut Reader, depth: usize) -> Result<(), DecodeError> {
    match r.u8()? {
        b't' | b'b' | b'B' => drop(r.u8()?),
        b's' | b'u' => drop(r.u16()?),
        b'I' | b'i' | b'f' => drop(r.u32()?),
        b'l' | b'd' | b'T' => drop(r.u64()?),
        b'D' => {
            r.u8()?;
            r.u32()?;
        }
        b'S' | b'x' => drop(r.long_str()?),
        b'A' => {
            if depth + 1 >= MAX_NESTING {
                return Err(DecodeError::NestingTooDeep(MAX_NESTING));
            }
            let len = r.u32()?;
            let body = r.take(usize::try_from(len).map_err(|_| DecodeError::Truncated)?)?;
            let mut inner = Reader::new(body);
            while inner.remaining() > 0 {
                skip_value(&mut inner, depth + 1)?;
            }
        }
        b'F' => skip_table(r, depth + 1)?,
        b'V' => {}
        other => return Err(DecodeError::UnknownFieldType(other)),
    }
    Ok(())
}

pub(crate) fn write_table(table: &FieldTable, w: &mut Writer<'_>) {
    let at = w.begin_sized();
    for (key, value) in &table.entries {
        w.short_str(key);
        write_value(value, w);
    }
    w.end_sized(at);
}

fn write_value(value: &FieldValue, w: &mut Writer<'_>) {
    w.u8(value.type_code());
    match value {
        FieldValue::Bool(v) => w.u8(u8::from(*v)),
        FieldValue::I8(v) => w.u8(*v as u8),
        FieldValue::U8(v) => w.u8(*v),
        FieldValue::I16(v) => w.u16(*v as u16),
        FieldValue::U16(v) => w.u16(*v),
        FieldValue::I32(v) => w.u32(*v as u32),
        FieldValue::U32(v) => w.u32(*v),
        FieldValue::I64(v) => w.u64(*v as u64),
        FieldValue::F32(v) => w.u32(v.to_bits()),
        FieldValue::F64(v) => w.u64(v.to_bits()),
        FieldValue::Decimal { scale, value } => {
            w.u8(*scale);
            w.u32(*value as u32);
        }
        FieldValue::LongStr(s) | FieldValue::ByteArray(s) => w.long_str(s),
        FieldValue::Array(values) => {
            let at = w.begin_sized();
            for v in values {
                write_value(v, w);
            }
            w.end_sized(at);
        }
        FieldValue::Timestamp(v) => w.u64(*v),
        FieldValue::Table(t) => write_table(t, w),
        FieldValue::Void => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(s: &'static str) -> ShortStr {
        ShortStr::from_static(s)
    }

    fn every_type() -> FieldTable {
        let mut nested = FieldTable::new();
        nested.push(key("n"), FieldValue::I8(-1));
        [
            (key("t"), FieldValue::Bool(true)),
            (key("b"), FieldValue::I8(-2)),
            (key("B"), FieldValue::U8(250)),
            (key("s"), FieldValue::I16(-300)),
            (key("u"), FieldValue::U16(60000)),
            (key("I"), FieldValue::I32(-70000)),
            (key("i"), FieldValue::U32(4_000_000_000)),
            (key("l"), FieldValue::I64(-5_000_000_000)),
            (key("f"), FieldValue::F32(1.5)),
            (key("d"), FieldValue::F64(-2.25)),
            (
                key("D"),
                FieldValue::Decimal {
                    scale: 2,
                    value: -12345,
                },
            ),
            (key("S"), FieldValue::string("hello").unwrap()),
            (
                key("x"),
                FieldValue::ByteArray(LongStr::try_from(&[0u8, 0xff][..]).unwrap()),
            ),
            (
                key("A"),
                FieldValue::Array(vec![FieldValue::Void, FieldValue::U8(1)]),
            ),
            (key("T"), FieldValue::Timestamp(1_700_000_000)),
            (key("F"), FieldValue::Table(nested)),
            (key("V"), FieldValue::Void),
        ]
        .into_iter()
        .collect()
    }

    fn encode(t: &FieldTable) -> BytesMut {
        let mut out = BytesMut::new();
        t.encode(&mut out);
        out
    }

    #[test]
    fn every_type_round_trips_in_order() {
        let table = every_type();
        let bytes = encode(&table).freeze();
        let mut rest = bytes.clone();
        let decoded = FieldTable::decode(&mut rest).unwrap();
        assert!(rest.is_empty());
        assert_eq!(decoded, table);
        let keys: Vec<_> = decoded.iter().map(|(k, _)| k.to_string()).collect();
        assert_eq!(keys.concat(), "tbBsuIilfdDSxATFV");
        // Each key is the type letter its value must be written with.
        for (k, v) in decoded.iter() {
            assert_eq!(k.as_bytes(), &[v.type_code()]);
        }
        assert_eq!(encode(&decoded).freeze(), bytes);
    }

    #[test]
    fn hand_encoded_values() {
        let t: FieldTable = [
            (key("a"), FieldValue::I16(-2)),
            (key("b"), FieldValue::I64(-1)),
            (key("c"), FieldValue::ByteArray(LongStr::from_static("z"))),
            (key("d"), FieldValue::Decimal { scale: 1, value: 5 }),
            (key("e"), FieldValue::Bool(true)),
        ]
        .into_iter()
        .collect();
        let expected: &[u8] = &[
            0, 0, 0, 36, // table size
            1, b'a', b's', 0xff, 0xfe, // 5
            1, b'b', b'l', 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // 11
            1, b'c', b'x', 0, 0, 0, 1, b'z', // 8
            1, b'd', b'D', 1, 0, 0, 0, 5, // 8
            1, b'e', b't', 1, // 4
        ];
        assert_eq!(&encode(&t)[..], expected);
        let mut b = Bytes::from_static(expected);
        assert_eq!(FieldTable::decode(&mut b), Ok(t));
    }

    #[test]
    fn duplicate_keys_survive_decoding_and_insert_replaces_in_place() {
        let raw: &[u8] = &[0, 0, 0, 8, 1, b'k', b'B', 1, 1, b'k', b'B', 2];
        let mut b = Bytes::from_static(raw);
        let mut t = FieldTable::decode(&mut b).unwrap();
        assert_eq!(t.len(), 2);
        assert_eq!(t.get("k"), Some(&FieldValue::U8(1)));
        assert_eq!(&encode(&t)[..], raw);
        t.insert(key("k"), FieldValue::U8(9));
        assert_eq!(t.len(), 2);
        assert_eq!(t.get("k"), Some(&FieldValue::U8(9)));
    }

    #[test]
    fn unknown_type_letter_is_rejected() {
        let mut b = Bytes::from_static(&[0, 0, 0, 3, 1, b'k', b'U']);
        assert_eq!(
            FieldTable::decode(&mut b),
            Err(DecodeError::UnknownFieldType(b'U'))
        );
    }

    #[test]
    fn table_size_beyond_payload_is_truncation() {
        let mut b = Bytes::from_static(&[0, 0, 1, 0, 1, b'k', b'V']);
        assert_eq!(FieldTable::decode(&mut b), Err(DecodeError::Truncated));
    }

    #[test]
    fn value_overrunning_its_table_is_truncation_not_a_read_past_the_table() {
        // The table claims 4 octets; the `I` value needs 4 more than that.
        let mut b = Bytes::from_static(&[0, 0, 0, 4, 1, b'k', b'I', 0, 0, 0, 0, 0]);
        assert_eq!(FieldTable::decode(&mut b), Err(DecodeError::Truncated));
    }

    #[test]
    fn nesting_is_bounded() {
        let mut t = FieldTable::new();
        for _ in 0..MAX_NESTING {
            let mut outer = FieldTable::new();
            outer.push(key("n"), FieldValue::Table(t));
            t = outer;
        }
        let mut b = encode(&t).freeze();
        assert_eq!(
            FieldTable::decode(&mut b),
            Err(DecodeError::NestingTooDeep(MAX_NESTING))
        );

        let mut shallow = FieldTable::new();
        shallow.push(key("a"), FieldValue::Array(vec![FieldValue::Void]));
        let mut b = encode(&shallow).freeze();
        assert_eq!(FieldTable::decode(&mut b), Ok(shallow));
    }

    #[test]
    fn truncation_at_every_offset_is_an_error() {
        let bytes = encode(&every_type()).freeze();
        for cut in 0..bytes.len() {
            let mut b = bytes.slice(..cut);
            assert_eq!(
                FieldTable::decode(&mut b),
                Err(DecodeError::Truncated),
                "cut at {cut}"
            );
        }
    }

    #[test]
    fn nan_bits_are_kept() {
        let weird = f64::from_bits(0x7ff8_dead_beef_0001);
        let t: FieldTable = [(key("d"), FieldValue::F64(weird))].into_iter().collect();
        let bytes = encode(&t).freeze();
        let mut b = bytes.clone();
        let decoded = FieldTable::decode(&mut b).unwrap();
        assert_eq!(encode(&decoded).freeze(), bytes);
    }
}
