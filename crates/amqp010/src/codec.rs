//! Primitive reads and writes. [`Reader`] hands out slices of the input `Bytes` (no
//! copies) and checks every length before touching data, so nothing a peer sends panics.

use bytes::{Buf, BufMut, Bytes, BytesMut};

use crate::error::{DecodeError, EncodeError};
use crate::str::Str;

/// A cursor over received bytes.
#[derive(Debug, Clone, Default)]
pub struct Reader {
    buf: Bytes,
}

macro_rules! get_num {
    ($($name:ident: $ty:ty = $get:ident;)*) => {$(
        pub fn $name(&mut self) -> Result<$ty, DecodeError> {
            self.need(std::mem::size_of::<$ty>())?;
            Ok(self.buf.$get())
        }
    )*};
}

impl Reader {
    pub fn new(buf: Bytes) -> Self {
        Reader { buf }
    }

    pub fn remaining(&self) -> usize {
        self.buf.len()
    }

    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// What has not been read yet.
    pub fn rest(&self) -> &Bytes {
        &self.buf
    }

    pub fn into_rest(self) -> Bytes {
        self.buf
    }

    fn need(&self, n: usize) -> Result<(), DecodeError> {
        if self.buf.len() < n {
            Err(DecodeError::Truncated)
        } else {
            Ok(())
        }
    }

    get_num! {
        u8: u8 = get_u8;
        u16: u16 = get_u16;
        u32: u32 = get_u32;
        u64: u64 = get_u64;
        i8: i8 = get_i8;
        i16: i16 = get_i16;
        i32: i32 = get_i32;
        i64: i64 = get_i64;
        f32: f32 = get_f32;
        f64: f64 = get_f64;
    }

    pub fn array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        self.need(N)?;
        let mut a = [0u8; N];
        self.buf.copy_to_slice(&mut a);
        Ok(a)
    }

    /// The next `n` octets, sharing memory with the input.
    pub fn bytes(&mut self, n: usize) -> Result<Bytes, DecodeError> {
        self.need(n)?;
        Ok(self.buf.split_to(n))
    }

    pub fn skip(&mut self, n: usize) -> Result<(), DecodeError> {
        self.need(n)?;
        self.buf.advance(n);
        Ok(())
    }

    /// A size prefix of `width` octets (0, 1, 2 or 4).
    pub fn size(&mut self, width: u8) -> Result<usize, DecodeError> {
        Ok(match width {
            0 => 0,
            1 => usize::from(self.u8()?),
            2 => usize::from(self.u16()?),
            _ => self.u32()? as usize,
        })
    }

    /// A size-prefixed region as its own reader; this reader moves past it.
    pub fn sized(&mut self, width: u8) -> Result<Reader, DecodeError> {
        let n = self.size(width)?;
        Ok(Reader::new(self.bytes(n)?))
    }

    pub fn vbin8(&mut self) -> Result<Bytes, DecodeError> {
        let n = self.size(1)?;
        self.bytes(n)
    }

    pub fn vbin16(&mut self) -> Result<Bytes, DecodeError> {
        let n = self.size(2)?;
        self.bytes(n)
    }

    pub fn vbin32(&mut self) -> Result<Bytes, DecodeError> {
        let n = self.size(4)?;
        self.bytes(n)
    }

    pub fn str8(&mut self) -> Result<Str, DecodeError> {
        self.vbin8().map(Str::from_bytes)
    }

    pub fn str16(&mut self) -> Result<Str, DecodeError> {
        self.vbin16().map(Str::from_bytes)
    }

    /// Packing flags: octet `k` holds the flags of fields `8k..8k+8`, lowest bit first.
    pub fn flags(&mut self, width: u8) -> Result<u32, DecodeError> {
        let mut flags = 0u32;
        for k in 0..width.min(4) {
            flags |= u32::from(self.u8()?) << (8 * k);
        }
        Ok(flags)
    }
}

/// Writes packing flags in the layout [`Reader::flags`] reads.
pub fn put_flags(out: &mut BytesMut, flags: u32, width: u8) {
    for k in 0..width.min(4) {
        out.put_u8((flags >> (8 * k)) as u8);
    }
}

/// Writes a `width`-octet size followed by whatever `body` writes, patching the size in
/// afterwards so the body is encoded once, straight into `out`.
pub fn put_sized(
    out: &mut BytesMut,
    width: u8,
    body: impl FnOnce(&mut BytesMut) -> Result<(), EncodeError>,
) -> Result<(), EncodeError> {
    let at = out.len();
    let w = usize::from(width);
    out.put_bytes(0, w);
    body(out)?;
    let len = out.len() - at - w;
    let max = max_for_width(width);
    if len > max {
        return Err(EncodeError::TooLong {
            what: "sized value",
            len,
            max,
        });
    }
    let slot = &mut out[at..at + w];
    match width {
        1 => slot.copy_from_slice(&(len as u8).to_be_bytes()),
        2 => slot.copy_from_slice(&(len as u16).to_be_bytes()),
        4 => slot.copy_from_slice(&(len as u32).to_be_bytes()),
        _ => {}
    }
    Ok(())
}

fn max_for_width(width: u8) -> usize {
    match width {
        0 => 0,
        1 => u8::MAX as usize,
        2 => u16::MAX as usize,
        _ => u32::MAX as usize,
    }
}

fn put_prefixed(
    out: &mut BytesMut,
    width: u8,
    data: &[u8],
    what: &'static str,
) -> Result<(), EncodeError> {
    let max = max_for_width(width);
    if data.len() > max {
        return Err(EncodeError::TooLong {
            what,
            len: data.len(),
            max,
        });
    }
    match width {
        1 => out.put_u8(data.len() as u8),
        2 => out.put_u16(data.len() as u16),
        _ => out.put_u32(data.len() as u32),
    }
    out.put_slice(data);
    Ok(())
}

pub fn put_str8(out: &mut BytesMut, s: &Str) -> Result<(), EncodeError> {
    put_prefixed(out, 1, s.as_bytes(), "str8")
}

pub fn put_str16(out: &mut BytesMut, s: &Str) -> Result<(), EncodeError> {
    put_prefixed(out, 2, s.as_bytes(), "str16")
}

pub fn put_vbin8(out: &mut BytesMut, b: &[u8]) -> Result<(), EncodeError> {
    put_prefixed(out, 1, b, "vbin8")
}

pub fn put_vbin16(out: &mut BytesMut, b: &[u8]) -> Result<(), EncodeError> {
    put_prefixed(out, 2, b, "vbin16")
}

pub fn put_vbin32(out: &mut BytesMut, b: &[u8]) -> Result<(), EncodeError> {
    put_prefixed(out, 4, b, "vbin32")
}

/// Writes a variable-width value with a size prefix of `width` octets.
pub(crate) fn put_variable(
    out: &mut BytesMut,
    width: u8,
    b: &[u8],
    what: &'static str,
) -> Result<(), EncodeError> {
    put_prefixed(out, width, b, what)
}

/// Checks the class and struct code that open a coded struct.
pub fn expect_struct_code(r: &mut Reader, class_code: u8, code: u8) -> Result<(), DecodeError> {
    let found = r.u16()?;
    let expected = u16::from_be_bytes([class_code, code]);
    if found != expected {
        return Err(DecodeError::UnexpectedStruct { expected, found });
    }
    Ok(())
}

/// Runs `f`, and on failure removes whatever it appended so `out` never holds half a value.
pub fn atomically<T>(
    out: &mut BytesMut,
    f: impl FnOnce(&mut BytesMut) -> Result<T, EncodeError>,
) -> Result<T, EncodeError> {
    let start = out.len();
    let result = f(out);
    if result.is_err() {
        out.truncate(start);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_big_endian() {
        let mut r = Reader::new(Bytes::from_static(&[
            0x12, 0x34, 0x00, 0x00, 0x01, 0x00, 0xff, 0x3f, 0x80, 0x00, 0x00,
        ]));
        assert_eq!(r.u16().unwrap(), 0x1234);
        assert_eq!(r.u32().unwrap(), 0x100);
        assert_eq!(r.i8().unwrap(), -1);
        assert_eq!(r.f32().unwrap(), 1.0);
        assert!(r.is_empty());
        assert_eq!(r.u8(), Err(DecodeError::Truncated));
    }

    #[test]
    fn short_reads_fail_without_consuming_past_end() {
        let mut r = Reader::new(Bytes::from_static(&[0x00, 0x05, b'a', b'b']));
        assert_eq!(r.str16(), Err(DecodeError::Truncated));
        let mut r = Reader::new(Bytes::from_static(&[0x01]));
        assert_eq!(r.u64(), Err(DecodeError::Truncated));
        assert_eq!(r.array::<2>(), Err(DecodeError::Truncated));
        assert_eq!(r.skip(2), Err(DecodeError::Truncated));
        assert_eq!(r.u8(), Ok(1));
    }

    #[test]
    fn flags_are_little_endian_by_octet() {
        let mut out = BytesMut::new();
        put_flags(&mut out, 0x0201, 2);
        assert_eq!(&out[..], &[0x01, 0x02]);
        let mut r = Reader::new(out.freeze());
        assert_eq!(r.flags(2).unwrap(), 0x0201);
    }

    #[test]
    fn sized_patches_prefix_and_rejects_overflow() {
        let mut out = BytesMut::new();
        put_sized(&mut out, 2, |o| {
            o.put_slice(b"abc");
            Ok(())
        })
        .unwrap();
        assert_eq!(&out[..], b"\x00\x03abc");
        let mut out = BytesMut::new();
        let err = put_sized(&mut out, 1, |o| {
            o.put_bytes(0, 256);
            Ok(())
        });
        assert!(matches!(err, Err(EncodeError::TooLong { len: 256, .. })));
    }

    #[test]
    fn str8_too_long_is_an_error_and_atomic() {
        let mut out = BytesMut::from(&b"keep"[..]);
        let long = Str::from("x".repeat(256));
        let r = atomically(&mut out, |o| {
            o.put_u8(1);
            put_str8(o, &long)
        });
        assert!(r.is_err());
        assert_eq!(&out[..], b"keep");
        put_str16(&mut out, &long).unwrap();
        assert_eq!(out.len(), 4 + 2 + 256);
    }

    #[test]
    fn struct_code_mismatch() {
        let mut r = Reader::new(Bytes::from_static(&[4, 3]));
        assert_eq!(
            expect_struct_code(&mut r, 4, 1),
            Err(DecodeError::UnexpectedStruct {
                expected: 0x0401,
                found: 0x0403
            })
        );
    }
}
