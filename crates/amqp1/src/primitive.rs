//! Primitive types that need a Rust type of their own: strings and symbols
//! (octets shared with the frame they were read from, known to be UTF-8),
//! timestamps, UUIDs and the decimal types, which are kept as their raw
//! IEEE 754 octets since a broker never computes with them.

use std::borrow::Borrow;
use std::fmt;

use bytes::Bytes;

macro_rules! text_type {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(Bytes);

        impl $name {
            pub const fn from_static(s: &'static str) -> Self {
                $name(Bytes::from_static(s.as_bytes()))
            }

            /// Wraps octets after checking that they are UTF-8.
            pub fn from_utf8(bytes: Bytes) -> Result<Self, std::str::Utf8Error> {
                std::str::from_utf8(&bytes)?;
                Ok($name(bytes))
            }

            pub fn as_str(&self) -> &str {
                // Every constructor checks UTF-8, so this cannot fail; checking
                // again (strings here are short) keeps the crate free of
                // `unsafe`.
                std::str::from_utf8(&self.0).unwrap_or_default()
            }

            pub fn as_bytes(&self) -> &[u8] {
                &self.0
            }

            /// The octets, sharing the buffer they were decoded from.
            pub fn bytes(&self) -> &Bytes {
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
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Debug::fmt(self.as_str(), f)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl From<&str> for $name {
            fn from(s: &str) -> Self {
                $name(Bytes::copy_from_slice(s.as_bytes()))
            }
        }

        impl From<String> for $name {
            fn from(s: String) -> Self {
                $name(Bytes::from(s))
            }
        }

        impl Borrow<str> for $name {
            fn borrow(&self) -> &str {
                self.as_str()
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

text_type!(
    /// `string`: Unicode text, UTF-8 on the wire (str8 / str32).
    Str
);

text_type!(
    /// `symbol`: a name from a constrained domain (condition, capability,
    /// annotation key). The spec says ASCII; decoding accepts any UTF-8 so that
    /// a peer's odd annotation key does not cost the connection.
    Symbol
);

/// `timestamp`: milliseconds since the Unix epoch (signed, UTC).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Timestamp(pub i64);

/// `uuid`: RFC 4122 octets, in network order.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Uuid(pub [u8; 16]);

/// `decimal32`: IEEE 754-2008 decimal, raw octets in network order.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Decimal32(pub [u8; 4]);

/// `decimal64`: IEEE 754-2008 decimal, raw octets in network order.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Decimal64(pub [u8; 8]);

/// `decimal128`: IEEE 754-2008 decimal, raw octets in network order.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Decimal128(pub [u8; 16]);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utf8_is_checked_on_construction() {
        assert!(Str::from_utf8(Bytes::from_static(&[0xff])).is_err());
        let s = Str::from_utf8(Bytes::from_static("grüße".as_bytes())).unwrap();
        assert_eq!(s.as_str(), "grüße");
        assert_eq!(s, "grüße");
        assert_eq!(format!("{s:?}"), "\"grüße\"");
        const SYM: Symbol = Symbol::from_static("amqp:accepted:list");
        assert_eq!(SYM.to_string(), "amqp:accepted:list");
    }
}
