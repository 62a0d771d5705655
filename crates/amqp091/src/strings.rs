//! AMQP 0-9-1 strings: octet sequences, not necessarily UTF-8 (routing keys and
//! consumer tags are opaque to the broker), backed by `Bytes` so decoding slices
//! the frame instead of copying.

use bytes::Bytes;
use std::fmt;

/// The length does not fit the string's length prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("string of {len} octets exceeds the {max}-octet limit")]
pub struct StringTooLong {
    pub len: usize,
    pub max: usize,
}

macro_rules! string_type {
    ($(#[$doc:meta])* $name:ident, $max:expr) => {
        $(#[$doc])*
        #[derive(Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(Bytes);

        impl $name {
            /// Longest value the wire's length prefix can carry.
            pub const MAX_LEN: usize = $max;

            /// Checked constructor; the bound is enforced here so that encoding
            /// can never silently truncate a length prefix.
            pub fn new(bytes: impl Into<Bytes>) -> Result<Self, StringTooLong> {
                let bytes = bytes.into();
                if bytes.len() > Self::MAX_LEN {
                    return Err(StringTooLong { len: bytes.len(), max: Self::MAX_LEN });
                }
                Ok(Self(bytes))
            }

            /// For literals. Panics (at compile time in const contexts) if the
            /// literal is too long: a programming error, never peer input.
            pub const fn from_static(s: &'static str) -> Self {
                assert!(s.len() <= $max, "static string exceeds the AMQP length limit");
                Self(Bytes::from_static(s.as_bytes()))
            }

            /// Caller guarantees the bound (decoder: the prefix was read from the wire).
            pub(crate) fn from_bytes_unchecked(bytes: Bytes) -> Self {
                debug_assert!(bytes.len() <= Self::MAX_LEN);
                Self(bytes)
            }

            pub fn as_bytes(&self) -> &[u8] {
                &self.0
            }

            /// The underlying buffer (cheap clone of a shared slice).
            pub fn bytes(&self) -> &Bytes {
                &self.0
            }

            pub fn into_bytes(self) -> Bytes {
                self.0
            }

            pub fn to_str(&self) -> Result<&str, std::str::Utf8Error> {
                std::str::from_utf8(&self.0)
            }

            pub fn len(&self) -> usize {
                self.0.len()
            }

            pub fn is_empty(&self) -> bool {
                self.0.is_empty()
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{:?}", String::from_utf8_lossy(&self.0))
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&String::from_utf8_lossy(&self.0))
            }
        }

        impl TryFrom<&str> for $name {
            type Error = StringTooLong;
            fn try_from(s: &str) -> Result<Self, StringTooLong> {
                Self::new(Bytes::copy_from_slice(s.as_bytes()))
            }
        }

        impl TryFrom<String> for $name {
            type Error = StringTooLong;
            fn try_from(s: String) -> Result<Self, StringTooLong> {
                Self::new(s)
            }
        }

        impl TryFrom<&[u8]> for $name {
            type Error = StringTooLong;
            fn try_from(s: &[u8]) -> Result<Self, StringTooLong> {
                Self::new(Bytes::copy_from_slice(s))
            }
        }

        impl TryFrom<Bytes> for $name {
            type Error = StringTooLong;
            fn try_from(b: Bytes) -> Result<Self, StringTooLong> {
                Self::new(b)
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                self.0 == other.as_bytes()
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                self.0 == other.as_bytes()
            }
        }
    };
}

string_type!(
    /// `shortstr`: at most 255 octets.
    ShortStr,
    255
);

string_type!(
    /// `longstr` (and field-table `S`/`x`): at most 2^32-1 octets.
    LongStr,
    u32::MAX as usize
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_string_bound_is_enforced() {
        assert!(ShortStr::new(vec![b'a'; 255]).is_ok());
        assert_eq!(
            ShortStr::new(vec![b'a'; 256]),
            Err(StringTooLong { len: 256, max: 255 })
        );
    }

    #[test]
    fn non_utf8_is_kept_verbatim() {
        let s = ShortStr::try_from(&[0xff, 0x00, 0x41][..]).unwrap();
        assert!(s.to_str().is_err());
        assert_eq!(s.as_bytes(), &[0xff, 0x00, 0x41]);
    }

    #[test]
    fn static_and_str_comparison() {
        const AMQ: ShortStr = ShortStr::from_static("amq.direct");
        assert_eq!(AMQ, "amq.direct");
        assert_eq!(format!("{AMQ:?}"), "\"amq.direct\"");
    }
}
