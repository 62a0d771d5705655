//! Byte-level encoding of record payloads: little-endian integers, length-prefixed strings
//! and argument tables. Decoding never panics on bad input; it reports [`DecodeError`].

use bytes::Bytes;
use ferry_core::{Arguments, HeaderValue};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("payload ends early")]
    Short,
    #[error("unknown value tag {0}")]
    BadTag(u8),
    #[error("text is not UTF-8")]
    NotUtf8,
    #[error("unknown record type {0}")]
    BadType(u8),
    #[error("unknown exchange type {0:?}")]
    BadExchangeKind(String),
    #[error("lists and maps nested deeper than the core keeps them")]
    TooDeep,
}

pub fn put_u8(out: &mut Vec<u8>, v: u8) {
    out.push(v);
}

pub fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

pub fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}

/// A length-prefixed byte string.
pub fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_count(out, b.len());
    out.extend_from_slice(b);
}

pub fn put_str(out: &mut Vec<u8>, s: &str) {
    put_bytes(out, s.as_bytes());
}

pub fn put_opt_str(out: &mut Vec<u8>, s: Option<&str>) {
    match s {
        None => put_u8(out, 0),
        Some(s) => {
            put_u8(out, 1);
            put_str(out, s);
        }
    }
}

pub fn put_arguments(out: &mut Vec<u8>, args: &Arguments) {
    put_count(out, args.0.len());
    for (k, v) in args.iter() {
        put_str(out, k);
        put_value(out, v);
    }
}

/// A count of items, lengths and entries as the records write them. Counts beyond `u32`
/// cannot occur: records are bounded by the broker's maximum message size.
pub fn put_count(out: &mut Vec<u8>, n: usize) {
    put_u32(out, u32::try_from(n).unwrap_or(u32::MAX));
}

fn put_value(out: &mut Vec<u8>, v: &HeaderValue) {
    match v {
        HeaderValue::Void => put_u8(out, 0),
        HeaderValue::Bool(b) => {
            put_u8(out, 1);
            put_u8(out, u8::from(*b));
        }
        HeaderValue::Int(i) => {
            put_u8(out, 2);
            put_u64(out, *i as u64);
        }
        HeaderValue::UInt(u) => {
            put_u8(out, 3);
            put_u64(out, *u);
        }
        HeaderValue::Float(f) => {
            put_u8(out, 4);
            put_u64(out, f.to_bits());
        }
        HeaderValue::Str(s) => {
            put_u8(out, 5);
            put_str(out, s);
        }
        HeaderValue::Bytes(b) => {
            put_u8(out, 6);
            put_bytes(out, b);
        }
        // The core could not represent it when it was declared; it stays opaque.
        HeaderValue::Other => put_u8(out, 7),
        // Written by ferryd since lists and maps kept their content; an older one reads
        // these tags as damage (docs/STORE.md).
        HeaderValue::List(items) => {
            put_u8(out, 8);
            put_count(out, items.len());
            for item in items {
                put_value(out, item);
            }
        }
        HeaderValue::Map(entries) => {
            put_u8(out, 9);
            put_arguments(out, entries);
        }
    }
}

/// Reads a payload front to back. Byte strings are slices of the payload (no copy).
pub struct Reader {
    buf: Bytes,
    pos: usize,
}

impl Reader {
    pub fn new(buf: Bytes) -> Reader {
        Reader { buf, pos: 0 }
    }

    pub fn is_empty(&self) -> bool {
        self.pos >= self.buf.len()
    }

    fn take(&mut self, n: usize) -> Result<&[u8], DecodeError> {
        let end = self.pos.checked_add(n).ok_or(DecodeError::Short)?;
        let s = self.buf.get(self.pos..end).ok_or(DecodeError::Short)?;
        self.pos = end;
        Ok(s)
    }

    pub fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.take(1)?[0])
    }

    pub fn u32(&mut self) -> Result<u32, DecodeError> {
        let b: [u8; 4] = self.take(4)?.try_into().map_err(|_| DecodeError::Short)?;
        Ok(u32::from_le_bytes(b))
    }

    pub fn u64(&mut self) -> Result<u64, DecodeError> {
        let b: [u8; 8] = self.take(8)?.try_into().map_err(|_| DecodeError::Short)?;
        Ok(u64::from_le_bytes(b))
    }

    pub fn bytes(&mut self) -> Result<Bytes, DecodeError> {
        let n = self.u32()? as usize;
        let start = self.pos;
        self.take(n)?;
        Ok(self.buf.slice(start..start + n))
    }

    pub fn string(&mut self) -> Result<String, DecodeError> {
        let b = self.bytes()?;
        String::from_utf8(b.to_vec()).map_err(|_| DecodeError::NotUtf8)
    }

    pub fn opt_string(&mut self) -> Result<Option<String>, DecodeError> {
        match self.u8()? {
            0 => Ok(None),
            1 => self.string().map(Some),
            t => Err(DecodeError::BadTag(t)),
        }
    }

    /// The rest of the payload.
    pub fn rest(&mut self) -> Bytes {
        let start = self.pos.min(self.buf.len());
        self.pos = self.buf.len();
        self.buf.slice(start..)
    }

    pub fn arguments(&mut self) -> Result<Arguments, DecodeError> {
        self.entries_at(1)
    }

    /// A table whose values are at `depth` (see [`HeaderValue::MAX_NESTING`]). No room is
    /// reserved from a count, which damage may have made huge: each entry is read first.
    fn entries_at(&mut self, depth: usize) -> Result<Arguments, DecodeError> {
        let n = self.u32()?;
        let mut args = Arguments::new();
        for _ in 0..n {
            let k = self.string()?;
            let v = self.value(depth)?;
            args.push(k, v);
        }
        Ok(args)
    }

    fn value(&mut self, depth: usize) -> Result<HeaderValue, DecodeError> {
        let tag = self.u8()?;
        if matches!(tag, 8 | 9) && depth > HeaderValue::MAX_NESTING {
            // The core never keeps such a value, so it was never written.
            return Err(DecodeError::TooDeep);
        }
        Ok(match tag {
            0 => HeaderValue::Void,
            1 => HeaderValue::Bool(self.u8()? != 0),
            2 => HeaderValue::Int(self.u64()? as i64),
            3 => HeaderValue::UInt(self.u64()?),
            4 => HeaderValue::Float(f64::from_bits(self.u64()?)),
            5 => HeaderValue::Str(self.string()?),
            6 => HeaderValue::Bytes(self.bytes()?),
            7 => HeaderValue::Other,
            8 => {
                let n = self.u32()?;
                let mut items = Vec::new();
                for _ in 0..n {
                    items.push(self.value(depth + 1)?);
                }
                HeaderValue::List(items)
            }
            9 => HeaderValue::Map(self.entries_at(depth + 1)?),
            t => return Err(DecodeError::BadTag(t)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_round_trip_with_every_value_kind() {
        let mut args = Arguments::new();
        args.push("v", HeaderValue::Void);
        args.push("b", HeaderValue::Bool(true));
        args.push("i", HeaderValue::Int(-5));
        args.push("u", HeaderValue::UInt(u64::MAX));
        args.push("f", HeaderValue::Float(1.5));
        args.push("s", HeaderValue::Str("é".into()));
        args.push("x", HeaderValue::Bytes(Bytes::from_static(&[0, 255])));
        args.push("o", HeaderValue::Other);
        let inner: Arguments = [("k", HeaderValue::Int(1)), ("k", HeaderValue::Void)]
            .into_iter()
            .collect();
        args.push(
            "l",
            HeaderValue::List(vec![HeaderValue::Map(inner), HeaderValue::List(Vec::new())]),
        );
        let mut out = Vec::new();
        put_arguments(&mut out, &args);
        let mut r = Reader::new(Bytes::from(out));
        assert_eq!(r.arguments().unwrap(), args);
        assert!(r.is_empty());
    }

    #[test]
    fn lists_nested_as_deep_as_the_core_keeps_them_and_no_deeper() {
        fn nested(lists: usize) -> Arguments {
            let mut v = HeaderValue::Int(1);
            for _ in 0..lists {
                v = HeaderValue::List(vec![v]);
            }
            [("deep", v)].into_iter().collect()
        }
        let deepest = nested(HeaderValue::MAX_NESTING);
        let mut out = Vec::new();
        put_arguments(&mut out, &deepest);
        assert_eq!(Reader::new(Bytes::from(out)).arguments(), Ok(deepest));
        let mut out = Vec::new();
        put_arguments(&mut out, &nested(HeaderValue::MAX_NESTING + 1));
        assert_eq!(
            Reader::new(Bytes::from(out)).arguments(),
            Err(DecodeError::TooDeep)
        );
        // A damaged count is not room reserved: the entries run out first.
        let mut r = Reader::new(Bytes::from_static(&[
            1, 0, 0, 0, 1, 0, 0, 0, b'k', 8, 0xff, 0xff, 0xff, 0xff, 0,
        ]));
        assert_eq!(r.arguments(), Err(DecodeError::Short));
    }

    #[test]
    fn truncated_and_bad_input_are_errors() {
        let mut out = Vec::new();
        put_str(&mut out, "hello");
        for cut in 0..out.len() {
            let mut r = Reader::new(Bytes::copy_from_slice(&out[..cut]));
            assert_eq!(r.string(), Err(DecodeError::Short));
        }
        let mut r = Reader::new(Bytes::from_static(&[1, 0, 0, 0, 9, 99]));
        assert_eq!(r.arguments(), Err(DecodeError::Short));
        let mut r = Reader::new(Bytes::from_static(&[2, 0, 0, 0, 0xff, 0xfe]));
        assert_eq!(r.string(), Err(DecodeError::NotUtf8));
        let mut r = Reader::new(Bytes::from_static(&[u8::MAX, 0xff, 0xff, 0xff, 0xff]));
        assert_eq!(r.u8(), Ok(u8::MAX));
        assert_eq!(r.bytes(), Err(DecodeError::Short));
    }
}
