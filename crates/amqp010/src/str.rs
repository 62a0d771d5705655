//! `Str`: the string type of str8/str16 fields and map keys, sharing the frame's memory.

use std::borrow::{Borrow, Cow};
use std::fmt;

use bytes::Bytes;

/// Octets of an AMQP string. Decoding slices the received frame instead of copying, and
/// does not validate UTF-8 (peers are not always right); [`Str::as_str`] checks on demand.
#[derive(Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Str(Bytes);

impl Str {
    pub const fn from_static(s: &'static str) -> Self {
        Str(Bytes::from_static(s.as_bytes()))
    }

    /// Wraps octets as they are, without checking UTF-8.
    pub fn from_bytes(bytes: Bytes) -> Self {
        Str(bytes)
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    pub fn into_bytes(self) -> Bytes {
        self.0
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn as_str(&self) -> Result<&str, std::str::Utf8Error> {
        std::str::from_utf8(&self.0)
    }

    pub fn to_str_lossy(&self) -> Cow<'_, str> {
        String::from_utf8_lossy(&self.0)
    }
}

impl From<&str> for Str {
    fn from(s: &str) -> Self {
        Str(Bytes::copy_from_slice(s.as_bytes()))
    }
}

impl From<String> for Str {
    fn from(s: String) -> Self {
        Str(Bytes::from(s))
    }
}

impl From<Bytes> for Str {
    fn from(b: Bytes) -> Self {
        Str(b)
    }
}

impl Borrow<[u8]> for Str {
    fn borrow(&self) -> &[u8] {
        &self.0
    }
}

impl AsRef<[u8]> for Str {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl PartialEq<str> for Str {
    fn eq(&self, other: &str) -> bool {
        self.0 == other.as_bytes()
    }
}

impl PartialEq<&str> for Str {
    fn eq(&self, other: &&str) -> bool {
        self.0 == other.as_bytes()
    }
}

impl fmt::Display for Str {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_str_lossy())
    }
}

impl fmt::Debug for Str {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.to_str_lossy(), f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn lookups_by_bytes_match_hash_and_eq() {
        let mut m: HashMap<Str, u32> = HashMap::new();
        m.insert(Str::from("amq.direct"), 7);
        assert_eq!(m.get(b"amq.direct".as_slice()), Some(&7));
        assert_eq!(m.get(b"amq.topic".as_slice()), None);
    }

    #[test]
    fn invalid_utf8_is_kept_and_reported() {
        let s = Str::from_bytes(Bytes::from_static(b"a\xffb"));
        assert!(s.as_str().is_err());
        assert_eq!(s.to_str_lossy(), "a\u{fffd}b");
        assert_eq!(s.as_bytes(), b"a\xffb");
        assert_eq!(s.to_string(), "a\u{fffd}b");
    }

    #[test]
    fn conversions_and_ordering() {
        let a = Str::from_static("a");
        let b = Str::from(String::from("b"));
        assert!(a < b);
        assert_eq!(a, "a");
        assert_eq!(format!("{a:?}"), "\"a\"");
        assert_eq!(b.len(), 1);
        assert!(!b.is_empty());
    }
}
