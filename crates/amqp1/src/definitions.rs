//! Types shared by the transport, messaging and security layers: `error`,
//! `fields`, and the restricted types (a primitive with a fixed set of
//! values), which decode strictly: a value outside the set is an error, as
//! the spec leaves no room to guess what it means.

use bytes::BytesMut;

use crate::decode::Decoder;
use crate::error::DecodeError;
use crate::field::Field;
use crate::primitive::{Str, Symbol};
use crate::value::{Map, Value};

/// `fields`: a map with symbol keys (open/begin/attach properties, node
/// properties, error info).
pub type Fields = Map<Symbol, Value>;

/// Declares a restricted type over an unsigned integer (ubyte or uint) as an
/// enum whose discriminants are the wire values.
macro_rules! restricted_number {
    (
        $(#[$doc:meta])*
        $Name:ident: $base:ty, $what:literal, default $Default:ident {
            $($(#[$vdoc:meta])* $Variant:ident = $value:literal,)*
        }
    ) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $Name {
            $(
                $(#[$vdoc])*
                #[doc = concat!("Wire value ", stringify!($value), ".")]
                $Variant,
            )*
        }

        impl Default for $Name {
            fn default() -> Self {
                $Name::$Default
            }
        }

        impl $Name {
            pub fn from_wire(v: $base) -> Option<Self> {
                match v {
                    $($value => Some($Name::$Variant),)*
                    _ => None,
                }
            }

            pub fn to_wire(self) -> $base {
                match self {
                    $($Name::$Variant => $value,)*
                }
            }
        }

        impl $crate::field::Field for $Name {
            fn read(
                code: u8,
                d: &mut $crate::decode::Decoder,
            ) -> Result<Self, $crate::error::DecodeError> {
                let v = <$base as $crate::field::Field>::read(code, d)?;
                $Name::from_wire(v).ok_or($crate::error::DecodeError::InvalidValue {
                    what: $what,
                    value: v.into(),
                })
            }
            fn write(&self, out: &mut bytes::BytesMut) {
                $crate::field::Field::write(&self.to_wire(), out)
            }
        }

        #[cfg(test)]
        impl crate::testutil::Sample for $Name {
            fn sample(g: &mut crate::testutil::Gen) -> Self {
                const ALL: &[$Name] = &[$($Name::$Variant),*];
                ALL[g.below(ALL.len() as u64) as usize]
            }
        }
    };
}
pub(crate) use restricted_number;

restricted_number! {
    /// `sender-settle-mode` (ubyte): how the sending end settles deliveries.
    SenderSettleMode: u8, "sender-settle-mode", default Mixed {
        /// Sends every delivery unsettled.
        Unsettled = 0,
        /// Sends every delivery settled ("at most once").
        Settled = 1,
        /// Either, delivery by delivery.
        Mixed = 2,
    }
}

restricted_number! {
    /// `receiver-settle-mode` (ubyte).
    ReceiverSettleMode: u8, "receiver-settle-mode", default First {
        /// The receiver settles as soon as it has processed a delivery.
        First = 0,
        /// The receiver settles only after the sender has settled.
        Second = 1,
    }
}

/// `role` (boolean): which end of a link an attach or disposition comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Role {
    /// `false`
    #[default]
    Sender,
    /// `true`
    Receiver,
}

impl Field for Role {
    fn read(code: u8, d: &mut Decoder) -> Result<Self, DecodeError> {
        Ok(if d.boolean(code)? {
            Role::Receiver
        } else {
            Role::Sender
        })
    }
    fn write(&self, out: &mut BytesMut) {
        (*self == Role::Receiver).write(out)
    }
}

composites! {
    /// `error`: details of a failure, carried by close, end, detach and
    /// rejected. `condition` is one of [`crate::condition`]'s symbols (or an
    /// implementation's own).
    Error 0x1d "amqp:error:list" {
        condition: req Symbol,
        description: opt Str,
        info: opt Fields,
    }
}

impl Error {
    pub fn new(condition: Symbol, description: impl Into<Str>) -> Self {
        Error {
            condition,
            description: Some(description.into()),
            info: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::field::Composite;
    use bytes::Bytes;

    #[test]
    fn restricted_values_outside_the_set_are_refused() {
        let mut d = Decoder::new(Bytes::from_static(&[3]));
        assert_eq!(
            SenderSettleMode::read(crate::format::UBYTE, &mut d),
            Err(DecodeError::InvalidValue {
                what: "sender-settle-mode",
                value: 3
            })
        );
        assert_eq!(SenderSettleMode::default(), SenderSettleMode::Mixed);
        assert_eq!(ReceiverSettleMode::default().to_wire(), 0);
    }

    #[test]
    fn error_by_hand() {
        let e = Error::new(crate::condition::NOT_FOUND, "no queue");
        let mut out = BytesMut::new();
        e.encode(&mut out);
        let mut expected = vec![0x00, 0x53, 0x1d, 0xc0, 27, 2];
        expected.extend_from_slice(&[0xa3, 14]);
        expected.extend_from_slice(b"amqp:not-found");
        expected.extend_from_slice(&[0xa1, 8]);
        expected.extend_from_slice(b"no queue");
        assert_eq!(&out[..], &expected[..]);
        let mut buf = out.freeze();
        assert_eq!(Error::decode(&mut buf), Ok(e));
        assert!(buf.is_empty());
    }
}
