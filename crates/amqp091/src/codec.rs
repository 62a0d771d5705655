//! Primitive readers and writers shared by methods, content headers and field
//! tables, and the error type for everything decoded out of a frame payload.

use bytes::{Buf, BufMut, Bytes, BytesMut};

use crate::reply;
use crate::strings::{LongStr, ShortStr};
use crate::table::FieldTable;

/// A method, content header or field table that could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("payload ends in the middle of a field")]
    Truncated,
    #[error("unknown class {0}")]
    UnknownClass(u16),
    #[error("unknown method {method_id} in class {class_id}")]
    UnknownMethod { class_id: u16, method_id: u16 },
    #[error("{extra} octets after the last field of {class_id}.{method_id}")]
    TrailingBytes {
        class_id: u16,
        method_id: u16,
        extra: usize,
    },
    #[error("unknown field-table value type {0:#04x}")]
    UnknownFieldType(u8),
    #[error("field tables and arrays nested deeper than {0}")]
    NestingTooDeep(usize),
    #[error("content header for class {0}, which carries no content")]
    NoContentClass(u16),
    #[error("content header weight is {0}, must be 0")]
    NonZeroWeight(u16),
    #[error("property flags {0:#06x} name properties the class does not have")]
    UnknownProperties(u16),
}

impl DecodeError {
    /// The reply code the spec tells the receiving server to close the
    /// connection with (all of these are connection-level errors). A payload
    /// that cannot be cut into the method's fields is a frame error (the spec's
    /// "malformed frame that the recipient could not decode", and RabbitMQ's
    /// answer); fields that decode to values nothing accepts are syntax errors.
    pub fn reply_code(&self) -> u16 {
        match self {
            DecodeError::UnknownClass(_) => reply::NOT_IMPLEMENTED,
            DecodeError::UnknownMethod { .. } => reply::COMMAND_INVALID,
            DecodeError::NoContentClass(_) => reply::UNEXPECTED_FRAME,
            DecodeError::Truncated | DecodeError::TrailingBytes { .. } => reply::FRAME_ERROR,
            DecodeError::UnknownFieldType(_)
            | DecodeError::NestingTooDeep(_)
            | DecodeError::NonZeroWeight(_)
            | DecodeError::UnknownProperties(_) => reply::SYNTAX_ERROR,
        }
    }
}

/// Consumes a payload. Strings and tables are split off the shared buffer, so
/// decoded values keep the frame alive instead of copying out of it.
pub(crate) struct Reader {
    buf: Bytes,
    /// Octet holding the bits of the current run of `bit` fields, and the next
    /// bit to read from it; `8` means "start a new octet".
    bits: u8,
    bit_pos: u8,
}

impl Reader {
    pub(crate) fn new(buf: Bytes) -> Self {
        Reader {
            buf,
            bits: 0,
            bit_pos: 8,
        }
    }

    /// What is left unread.
    pub(crate) fn into_rest(self) -> Bytes {
        self.buf
    }

    pub(crate) fn remaining(&self) -> usize {
        self.buf.len()
    }

    fn need(&mut self, n: usize) -> Result<(), DecodeError> {
        // Any non-bit field ends a run of packed bits.
        self.bit_pos = 8;
        if self.buf.len() < n {
            return Err(DecodeError::Truncated);
        }
        Ok(())
    }

    pub(crate) fn u8(&mut self) -> Result<u8, DecodeError> {
        self.need(1)?;
        Ok(self.buf.get_u8())
    }

    pub(crate) fn u16(&mut self) -> Result<u16, DecodeError> {
        self.need(2)?;
        Ok(self.buf.get_u16())
    }

    pub(crate) fn u32(&mut self) -> Result<u32, DecodeError> {
        self.need(4)?;
        Ok(self.buf.get_u32())
    }

    pub(crate) fn u64(&mut self) -> Result<u64, DecodeError> {
        self.need(8)?;
        Ok(self.buf.get_u64())
    }

    pub(crate) fn bit(&mut self) -> Result<bool, DecodeError> {
        if self.bit_pos >= 8 {
            if self.buf.is_empty() {
                return Err(DecodeError::Truncated);
            }
            self.bits = self.buf.get_u8();
            self.bit_pos = 0;
        }
        let value = self.bits & (1 << self.bit_pos) != 0;
        self.bit_pos += 1;
        Ok(value)
    }

    pub(crate) fn take(&mut self, n: usize) -> Result<Bytes, DecodeError> {
        self.need(n)?;
        Ok(self.buf.split_to(n))
    }

    pub(crate) fn short_str(&mut self) -> Result<ShortStr, DecodeError> {
        let len = self.u8()?;
        Ok(ShortStr::from_bytes_unchecked(self.take(usize::from(len))?))
    }

    pub(crate) fn long_str(&mut self) -> Result<LongStr, DecodeError> {
        let len = self.u32()?;
        let len = usize::try_from(len).map_err(|_| DecodeError::Truncated)?;
        Ok(LongStr::from_bytes_unchecked(self.take(len)?))
    }
}

/// Appends to the caller's buffer, packing consecutive bits into shared octets.
pub(crate) struct Writer<'a> {
    out: &'a mut BytesMut,
    /// Position in `out` of the octet collecting the current run of bits, and
    /// how many of its bits are used.
    bit_octet: Option<(usize, u8)>,
}

impl<'a> Writer<'a> {
    pub(crate) fn new(out: &'a mut BytesMut) -> Self {
        Writer {
            out,
            bit_octet: None,
        }
    }

    pub(crate) fn out(&mut self) -> &mut BytesMut {
        self.bit_octet = None;
        self.out
    }

    pub(crate) fn u8(&mut self, v: u8) {
        self.out().put_u8(v);
    }

    pub(crate) fn u16(&mut self, v: u16) {
        self.out().put_u16(v);
    }

    pub(crate) fn u32(&mut self, v: u32) {
        self.out().put_u32(v);
    }

    pub(crate) fn u64(&mut self, v: u64) {
        self.out().put_u64(v);
    }

    pub(crate) fn bit(&mut self, v: bool) {
        let (at, used) = match self.bit_octet {
            Some((at, used)) if used < 8 => (at, used),
            _ => {
                self.out.put_u8(0);
                (self.out.len() - 1, 0)
            }
        };
        if v {
            if let Some(octet) = self.out.get_mut(at) {
                *octet |= 1 << used;
            }
        }
        self.bit_octet = Some((at, used + 1));
    }

    pub(crate) fn bytes(&mut self, b: &[u8]) {
        self.out().put_slice(b);
    }

    pub(crate) fn short_str(&mut self, s: &ShortStr) {
        // ShortStr's constructor bounds the length to 255.
        self.u8(s.len() as u8);
        self.bytes(s.as_bytes());
    }

    pub(crate) fn long_str(&mut self, s: &LongStr) {
        // LongStr's constructor bounds the length to u32::MAX.
        self.u32(s.len() as u32);
        self.bytes(s.as_bytes());
    }

    /// Writes a 32-bit length placeholder and returns where it is, for
    /// `end_sized` to fill in once the contents are written.
    pub(crate) fn begin_sized(&mut self) -> usize {
        let at = self.out().len();
        self.out.put_u32(0);
        at
    }

    pub(crate) fn end_sized(&mut self, at: usize) {
        self.bit_octet = None;
        let len = self.out.len() - at - 4;
        // Tables we encode are built from frames or local data; a 4 GiB table
        // is not something this codec can be asked to produce.
        let len = u32::try_from(len).unwrap_or(u32::MAX);
        if let Some(slot) = self.out.get_mut(at..at + 4) {
            slot.copy_from_slice(&len.to_be_bytes());
        }
    }
}

/// Wire type of a method or property field, as named in the spec's XML.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldKind {
    Bit,
    Octet,
    Short,
    Long,
    LongLong,
    ShortStr,
    LongStr,
    Timestamp,
    Table,
}

impl FieldKind {
    /// The spec's type name (`<domain type="...">`).
    pub fn spec_name(self) -> &'static str {
        match self {
            FieldKind::Bit => "bit",
            FieldKind::Octet => "octet",
            FieldKind::Short => "short",
            FieldKind::Long => "long",
            FieldKind::LongLong => "longlong",
            FieldKind::ShortStr => "shortstr",
            FieldKind::LongStr => "longstr",
            FieldKind::Timestamp => "timestamp",
            FieldKind::Table => "table",
        }
    }
}

/// A Rust type that is the representation of one spec field type.
pub(crate) trait Field: Sized {
    const KIND: FieldKind;
    fn read(r: &mut Reader) -> Result<Self, DecodeError>;
    fn write(&self, w: &mut Writer<'_>);
}

impl Field for bool {
    const KIND: FieldKind = FieldKind::Bit;
    fn read(r: &mut Reader) -> Result<Self, DecodeError> {
        r.bit()
    }
    fn write(&self, w: &mut Writer<'_>) {
        w.bit(*self)
    }
}

impl Field for u8 {
    const KIND: FieldKind = FieldKind::Octet;
    fn read(r: &mut Reader) -> Result<Self, DecodeError> {
        r.u8()
    }
    fn write(&self, w: &mut Writer<'_>) {
        w.u8(*self)
    }
}

impl Field for u16 {
    const KIND: FieldKind = FieldKind::Short;
    fn read(r: &mut Reader) -> Result<Self, DecodeError> {
        r.u16()
    }
    fn write(&self, w: &mut Writer<'_>) {
        w.u16(*self)
    }
}

impl Field for u32 {
    const KIND: FieldKind = FieldKind::Long;
    fn read(r: &mut Reader) -> Result<Self, DecodeError> {
        r.u32()
    }
    fn write(&self, w: &mut Writer<'_>) {
        w.u32(*self)
    }
}

impl Field for u64 {
    const KIND: FieldKind = FieldKind::LongLong;
    fn read(r: &mut Reader) -> Result<Self, DecodeError> {
        r.u64()
    }
    fn write(&self, w: &mut Writer<'_>) {
        w.u64(*self)
    }
}

impl Field for ShortStr {
    const KIND: FieldKind = FieldKind::ShortStr;
    fn read(r: &mut Reader) -> Result<Self, DecodeError> {
        r.short_str()
    }
    fn write(&self, w: &mut Writer<'_>) {
        w.short_str(self)
    }
}

impl Field for LongStr {
    const KIND: FieldKind = FieldKind::LongStr;
    fn read(r: &mut Reader) -> Result<Self, DecodeError> {
        r.long_str()
    }
    fn write(&self, w: &mut Writer<'_>) {
        w.long_str(self)
    }
}

impl Field for FieldTable {
    const KIND: FieldKind = FieldKind::Table;
    fn read(r: &mut Reader) -> Result<Self, DecodeError> {
        crate::table::read_table(r, 0)
    }
    fn write(&self, w: &mut Writer<'_>) {
        crate::table::write_table(self, w)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consecutive_bits_share_an_octet_and_other_fields_end_the_run() {
        let mut out = BytesMut::new();
        let mut w = Writer::new(&mut out);
        w.bit(true);
        w.bit(false);
        w.bit(true);
        w.u8(0x7f);
        w.bit(true);
        assert_eq!(&out[..], &[0b101, 0x7f, 0b1]);

        let mut r = Reader::new(out.freeze());
        assert_eq!(r.bit(), Ok(true));
        assert_eq!(r.bit(), Ok(false));
        assert_eq!(r.bit(), Ok(true));
        assert_eq!(r.u8(), Ok(0x7f));
        assert_eq!(r.bit(), Ok(true));
        assert_eq!(r.bit(), Ok(false));
        assert_eq!(r.remaining(), 0);
    }

    #[test]
    fn nine_bits_take_two_octets() {
        let mut out = BytesMut::new();
        let mut w = Writer::new(&mut out);
        for i in 0..9 {
            w.bit(i == 0 || i == 8);
        }
        assert_eq!(&out[..], &[0x01, 0x01]);
    }

    #[test]
    fn truncated_reads_fail() {
        let mut r = Reader::new(Bytes::from_static(&[0, 0, 0]));
        assert_eq!(r.u32(), Err(DecodeError::Truncated));
        let mut r = Reader::new(Bytes::from_static(&[5, b'a']));
        assert_eq!(r.short_str(), Err(DecodeError::Truncated));
        let mut r = Reader::new(Bytes::from_static(&[0xff, 0xff, 0xff, 0xff]));
        assert_eq!(r.long_str(), Err(DecodeError::Truncated));
        let mut r = Reader::new(Bytes::new());
        assert_eq!(r.bit(), Err(DecodeError::Truncated));
    }
}
