//! Typed fields of composite types: how each Rust field type is read from
//! and written to the type system's encodings, without going through
//! [`Value`].

use bytes::{Bytes, BytesMut};

use crate::decode::{unexpected, Decoder};
use crate::encode;
use crate::error::DecodeError;
use crate::format as f;
use crate::primitive::{Str, Symbol, Timestamp, Uuid};
use crate::value::{Map, Value};

/// A Rust type that stands for one AMQP type in a composite's field.
pub trait Field: Sized {
    /// Decodes a value whose first constructor octet, `code`, was just read.
    /// Null reaches this only for types that have a null (`Value`); absent
    /// and null fields are handled by the composite reader.
    fn read(code: u8, d: &mut Decoder) -> Result<Self, DecodeError>;

    /// Appends the value with its constructor.
    fn write(&self, out: &mut BytesMut);
}

impl Field for bool {
    fn read(code: u8, d: &mut Decoder) -> Result<Self, DecodeError> {
        d.boolean(code)
    }
    fn write(&self, out: &mut BytesMut) {
        encode::boolean(out, *self)
    }
}

impl Field for u8 {
    fn read(code: u8, d: &mut Decoder) -> Result<Self, DecodeError> {
        d.ubyte(code)
    }
    fn write(&self, out: &mut BytesMut) {
        encode::ubyte(out, *self)
    }
}

impl Field for u16 {
    fn read(code: u8, d: &mut Decoder) -> Result<Self, DecodeError> {
        d.ushort(code)
    }
    fn write(&self, out: &mut BytesMut) {
        encode::ushort(out, *self)
    }
}

impl Field for u32 {
    fn read(code: u8, d: &mut Decoder) -> Result<Self, DecodeError> {
        d.uint(code)
    }
    fn write(&self, out: &mut BytesMut) {
        encode::uint(out, *self)
    }
}

impl Field for u64 {
    fn read(code: u8, d: &mut Decoder) -> Result<Self, DecodeError> {
        d.ulong(code)
    }
    fn write(&self, out: &mut BytesMut) {
        encode::ulong(out, *self)
    }
}

impl Field for Timestamp {
    fn read(code: u8, d: &mut Decoder) -> Result<Self, DecodeError> {
        d.timestamp(code)
    }
    fn write(&self, out: &mut BytesMut) {
        encode::timestamp(out, self.0)
    }
}

impl Field for Uuid {
    fn read(code: u8, d: &mut Decoder) -> Result<Self, DecodeError> {
        d.uuid(code)
    }
    fn write(&self, out: &mut BytesMut) {
        encode::uuid(out, &self.0)
    }
}

/// `binary`.
impl Field for Bytes {
    fn read(code: u8, d: &mut Decoder) -> Result<Self, DecodeError> {
        d.binary(code)
    }
    fn write(&self, out: &mut BytesMut) {
        encode::binary(out, self)
    }
}

impl Field for Str {
    fn read(code: u8, d: &mut Decoder) -> Result<Self, DecodeError> {
        d.string(code)
    }
    fn write(&self, out: &mut BytesMut) {
        encode::string(out, self.as_str())
    }
}

impl Field for Symbol {
    fn read(code: u8, d: &mut Decoder) -> Result<Self, DecodeError> {
        d.symbol(code)
    }
    fn write(&self, out: &mut BytesMut) {
        encode::symbol(out, self)
    }
}

/// `*`: any value.
impl Field for Value {
    fn read(code: u8, d: &mut Decoder) -> Result<Self, DecodeError> {
        d.value_of(code)
    }
    fn write(&self, out: &mut BytesMut) {
        encode::value(out, self)
    }
}

impl<K: Field, V: Field> Field for Map<K, V> {
    fn read(code: u8, d: &mut Decoder) -> Result<Self, DecodeError> {
        d.map(
            code,
            |d| {
                let code = d.u8()?;
                K::read(code, d)
            },
            |d| {
                let code = d.u8()?;
                V::read(code, d)
            },
        )
    }
    fn write(&self, out: &mut BytesMut) {
        let at = encode::begin_compound(out);
        for (k, v) in self.iter() {
            k.write(out);
            v.write(out);
        }
        encode::end_compound(out, at, self.len() * 2, f::MAP8, f::MAP32);
    }
}

/// Reads the fields of a composite from its list, in order. Fields past the
/// list's count are absent (the spec lets senders omit trailing nulls);
/// elements past the fields the codec knows are skipped, so a peer speaking a
/// later version with more fields is still understood.
pub struct FieldReader<'a> {
    d: &'a mut Decoder,
    left: u64,
}

impl<'a> FieldReader<'a> {
    pub(crate) fn new(d: &'a mut Decoder, count: u64) -> Self {
        FieldReader { d, left: count }
    }

    /// The next field's first constructor octet, or `None` if it is absent or
    /// null.
    fn next_code(&mut self) -> Result<Option<u8>, DecodeError> {
        if self.left == 0 {
            return Ok(None);
        }
        self.left -= 1;
        match self.d.u8()? {
            f::NULL => Ok(None),
            code => Ok(Some(code)),
        }
    }

    pub(crate) fn optional<T: Field>(&mut self) -> Result<Option<T>, DecodeError> {
        match self.next_code()? {
            Some(code) => T::read(code, self.d).map(Some),
            None => Ok(None),
        }
    }

    pub(crate) fn mandatory<T: Field>(
        &mut self,
        composite: &'static str,
        field: &'static str,
    ) -> Result<T, DecodeError> {
        self.optional()?
            .ok_or(DecodeError::MissingField { composite, field })
    }

    /// A `multiple="true"` field (all of which are symbols in the spec): null,
    /// one symbol, or an array of symbols. Absent reads as empty.
    pub(crate) fn multiple(&mut self) -> Result<Option<Vec<Symbol>>, DecodeError> {
        let Some(code) = self.next_code()? else {
            return Ok(None);
        };
        match code {
            f::SYM8 | f::SYM32 => Ok(Some(vec![self.d.symbol(code)?])),
            f::ARRAY8 | f::ARRAY32 => self.d.array_with(code, |d, descriptor, element, count| {
                if descriptor.is_some() || !matches!(element, f::SYM8 | f::SYM32) {
                    return Err(unexpected("symbol", element));
                }
                // `array_with` checked that `count` elements fit the input.
                let mut items = Vec::with_capacity(count as usize);
                for _ in 0..count {
                    items.push(d.symbol(element)?);
                }
                Ok(Some(items))
            }),
            _ => Err(unexpected("symbol", code)),
        }
    }

    /// Skips fields beyond the known ones.
    pub(crate) fn finish(self) -> Result<(), DecodeError> {
        for _ in 0..self.left {
            self.d.raw_value()?;
        }
        Ok(())
    }
}

/// A composite type: a described list whose elements are the type's fields.
pub trait Composite: Sized {
    /// The symbolic descriptor, e.g. `amqp:open:list`.
    const NAME: &'static str;
    /// The numeric descriptor, e.g. 0x10 for open.
    const CODE: u64;

    #[doc(hidden)]
    fn read_fields(r: &mut FieldReader<'_>) -> Result<Self, DecodeError>;

    /// Appends the fields, trailing absent ones omitted; returns how many
    /// were written.
    #[doc(hidden)]
    fn write_fields(&self, out: &mut BytesMut) -> usize;

    /// Decodes the list that follows the descriptor (`code` is its format
    /// code, just read).
    #[doc(hidden)]
    fn read_list(code: u8, d: &mut Decoder) -> Result<Self, DecodeError> {
        d.list_with(code, |d, count| {
            let mut r = FieldReader::new(d, count);
            let value = Self::read_fields(&mut r)?;
            r.finish()?;
            Ok(value)
        })
    }

    /// Decodes one described value of this type from the front of `buf`.
    fn decode(buf: &mut Bytes) -> Result<Self, DecodeError> {
        let mut d = Decoder::new(std::mem::take(buf));
        let result = d.u8().and_then(|code| read_composite(code, &mut d));
        *buf = d.into_rest();
        result
    }

    /// Appends the described value: 0x00, the numeric descriptor, the list.
    fn encode(&self, out: &mut BytesMut) {
        encode::described_code(out, Self::CODE);
        let at = encode::begin_compound(out);
        let count = self.write_fields(out);
        encode::end_compound(out, at, count, f::LIST8, f::LIST32);
    }
}

/// Reads a described `T` whose first octet `code` was just read, accepting
/// the numeric or the symbolic descriptor.
pub(crate) fn read_composite<T: Composite>(code: u8, d: &mut Decoder) -> Result<T, DecodeError> {
    if code != f::DESCRIBED {
        return Err(unexpected(T::NAME, code));
    }
    d.deeper(|d| {
        let descriptor = d.descriptor()?;
        if descriptor.code() != Some(T::CODE) {
            return Err(DecodeError::UnexpectedDescriptor {
                expected: T::NAME,
                found: descriptor,
            });
        }
        let list = d.u8()?;
        T::read_list(list, d)
    })
}

/// The Rust type of a field of the given kind.
macro_rules! field_type {
    (req $ty:ty) => { $ty };
    (def $ty:ty) => { $ty };
    (opt $ty:ty) => { Option<$ty> };
    (multi $ty:ty) => { Vec<$ty> };
    (reqmulti $ty:ty) => { Vec<$ty> };
}

macro_rules! field_default {
    (def, [$d:expr]) => {
        $d
    };
    ($kind:ident, []) => {
        Default::default()
    };
}

macro_rules! read_field {
    ($r:ident, req, $name:literal, $field:ident, []) => {
        $r.mandatory($name, stringify!($field))?
    };
    ($r:ident, def, $name:literal, $field:ident, [$d:expr]) => {
        $r.optional()?.unwrap_or($d)
    };
    ($r:ident, opt, $name:literal, $field:ident, []) => {
        $r.optional()?
    };
    ($r:ident, multi, $name:literal, $field:ident, []) => {
        $r.multiple()?.unwrap_or_default()
    };
    ($r:ident, reqmulti, $name:literal, $field:ident, []) => {
        $r.multiple()?
            .ok_or($crate::error::DecodeError::MissingField {
                composite: $name,
                field: stringify!($field),
            })?
    };
}

/// Is a field written (rather than left null)? Fields at their default are
/// not: null means the default, and omitting it lets the list end sooner.
macro_rules! field_present {
    (req, $v:expr, []) => {
        true
    };
    (def, $v:expr, [$d:expr]) => {
        $v != $d
    };
    (opt, $v:expr, []) => {
        $v.is_some()
    };
    (multi, $v:expr, []) => {
        !$v.is_empty()
    };
    (reqmulti, $v:expr, []) => {
        true
    };
}

macro_rules! write_field {
    (req, $v:expr, $out:ident) => {
        $crate::field::Field::write($v, $out)
    };
    (def, $v:expr, $out:ident) => {
        $crate::field::Field::write($v, $out)
    };
    (opt, $v:expr, $out:ident) => {
        match $v {
            Some(v) => $crate::field::Field::write(v, $out),
            None => $crate::encode::null($out),
        }
    };
    (multi, $v:expr, $out:ident) => {
        if $v.is_empty() {
            $crate::encode::null($out)
        } else {
            $crate::encode::symbol_array($out, $v)
        }
    };
    (reqmulti, $v:expr, $out:ident) => {
        $crate::encode::symbol_array($out, $v)
    };
}

/// Declares composite types from a table: per type, the Rust name, the
/// numeric and symbolic descriptors, and the fields in wire order, each
/// `name: kind Type` where kind is
///
/// - `req`: mandatory; decoding fails if it is null;
/// - `def`: has a default (`= expr` after the type); null reads as the
///   default, and the default is written as null;
/// - `opt`: an `Option`;
/// - `multi` (multiple="true"): a `Vec`, empty meaning null;
/// - `reqmulti`: mandatory and multiple.
///
/// Fields are named as in the spec with `-` turned into `_`. Produces the
/// structs (whose `Default` has the spec's defaults), their [`Composite`] and
/// [`Field`] impls, sample values for tests, and `DESCRIPTORS`, the table's
/// (code, name) pairs.
macro_rules! composites {
    ($(
        $(#[$doc:meta])*
        $Name:ident $code:literal $symbol:literal {
            $($(#[$fdoc:meta])* $field:ident : $kind:ident $ty:ty $(= $default:expr)?),* $(,)?
        }
    )*) => {
        $(
            $(#[$doc])*
            #[doc = concat!("\n\nDescriptor `", $symbol, "` (", stringify!($code), ").")]
            #[derive(Debug, Clone, PartialEq)]
            pub struct $Name {
                $($(#[$fdoc])* pub $field: field_type!($kind $ty),)*
            }

            impl Default for $Name {
                fn default() -> Self {
                    $Name {
                        $($field: field_default!($kind, [$($default)?]),)*
                    }
                }
            }

            impl $crate::field::Composite for $Name {
                const NAME: &'static str = $symbol;
                const CODE: u64 = $code;

                #[allow(unused_variables)]
                fn read_fields(
                    r: &mut $crate::field::FieldReader<'_>,
                ) -> Result<Self, $crate::error::DecodeError> {
                    // Struct-literal fields are evaluated in source order,
                    // which is wire order.
                    Ok($Name {
                        $($field: read_field!(r, $kind, $symbol, $field, [$($default)?]),)*
                    })
                }

                #[allow(unused_variables, unused_mut, unused_assignments)]
                fn write_fields(&self, out: &mut bytes::BytesMut) -> usize {
                    let present: &[bool] = &[
                        $(field_present!($kind, self.$field, [$($default)?])),*
                    ];
                    let count = present.iter().rposition(|p| *p).map_or(0, |i| i + 1);
                    let mut i = 0;
                    $(
                        if i < count {
                            write_field!($kind, &self.$field, out);
                        }
                        i += 1;
                    )*
                    count
                }
            }

            impl $crate::field::Field for $Name {
                fn read(
                    code: u8,
                    d: &mut $crate::decode::Decoder,
                ) -> Result<Self, $crate::error::DecodeError> {
                    $crate::field::read_composite(code, d)
                }
                fn write(&self, out: &mut bytes::BytesMut) {
                    $crate::field::Composite::encode(self, out)
                }
            }

            #[cfg(test)]
            impl $crate::testutil::Sample for $Name {
                #[allow(unused_variables)]
                fn sample(g: &mut $crate::testutil::Gen) -> Self {
                    $Name {
                        $($field: $crate::testutil::Sample::sample(g),)*
                    }
                }
            }
        )*

        /// The (numeric, symbolic) descriptors of this module's composites.
        pub(crate) const DESCRIPTORS: &[(u64, &str)] = &[$(($code, $symbol)),*];
    };
}

/// Declares a type that stands for any of several described types (a
/// delivery state, an outcome, a link target): an enum with a variant per
/// known type, chosen by descriptor, and `Other` for descriptors the codec
/// does not know, which the spec allows extensions to define. `Other` keeps
/// the value as decoded and re-encodes it as it came.
macro_rules! described_union {
    (
        $(#[$doc:meta])*
        $Name:ident $what:literal { $($Variant:ident($Ty:ty),)* }
    ) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq)]
        pub enum $Name {
            $($Variant($Ty),)*
            Other($crate::value::Described),
        }

        $(
            impl From<$Ty> for $Name {
                fn from(v: $Ty) -> Self {
                    $Name::$Variant(v)
                }
            }
        )*

        impl $crate::field::Field for $Name {
            fn read(
                code: u8,
                d: &mut $crate::decode::Decoder,
            ) -> Result<Self, $crate::error::DecodeError> {
                if code != $crate::format::DESCRIBED {
                    return Err($crate::decode::unexpected($what, code));
                }
                d.deeper(|d| {
                    let descriptor = d.descriptor()?;
                    $(
                        if descriptor.code() == Some(<$Ty as $crate::field::Composite>::CODE) {
                            let list = d.u8()?;
                            return <$Ty as $crate::field::Composite>::read_list(list, d)
                                .map($Name::$Variant);
                        }
                    )*
                    let value = d.value()?;
                    Ok($Name::Other($crate::value::Described { descriptor, value }))
                })
            }

            fn write(&self, out: &mut bytes::BytesMut) {
                match self {
                    $($Name::$Variant(v) => $crate::field::Composite::encode(v, out),)*
                    $Name::Other(d) => {
                        $crate::encode::descriptor(out, &d.descriptor);
                        $crate::encode::value(out, &d.value);
                    }
                }
            }
        }

        impl $Name {
            /// Decodes one value from the front of `buf`.
            pub fn decode(buf: &mut bytes::Bytes) -> Result<Self, $crate::error::DecodeError> {
                let mut d = $crate::decode::Decoder::new(std::mem::take(buf));
                let result = d
                    .u8()
                    .and_then(|code| <Self as $crate::field::Field>::read(code, &mut d));
                *buf = d.into_rest();
                result
            }

            pub fn encode(&self, out: &mut bytes::BytesMut) {
                $crate::field::Field::write(self, out)
            }
        }

        #[cfg(test)]
        impl $crate::testutil::Sample for $Name {
            fn sample(g: &mut $crate::testutil::Gen) -> Self {
                let known: &[fn(&mut $crate::testutil::Gen) -> $Name] = &[
                    $(|g| $Name::$Variant($crate::testutil::Sample::sample(g)),)*
                ];
                match g.below(known.len() as u64 + 1) as usize {
                    i if i < known.len() => known[i](g),
                    _ => $Name::Other($crate::testutil::Sample::sample(g)),
                }
            }
        }
    };
}

/// Declares the enum of the composites that can be a frame body (the
/// performatives, the SASL frames), with decoding by descriptor.
macro_rules! frame_body_enum {
    (
        $(#[$doc:meta])*
        $Enum:ident $what:literal { $($Variant:ident),* $(,)? }
    ) => {
        $(#[$doc])*
        // Attach (with its source and target) is several times the size of
        // the rest; a frame body is decoded, acted on and dropped, and attaches
        // are rare, so boxing it would add an allocation to save a few copies.
        #[allow(clippy::large_enum_variant)]
        #[derive(Debug, Clone, PartialEq)]
        pub enum $Enum {
            $($Variant($Variant),)*
        }

        impl $Enum {
            /// Decodes the described list at the front of a frame body,
            /// leaving what follows it (a transfer's payload) in `buf`.
            pub fn decode(buf: &mut bytes::Bytes) -> Result<$Enum, $crate::error::DecodeError> {
                let mut d = $crate::decode::Decoder::new(std::mem::take(buf));
                let result = $Enum::read(&mut d);
                *buf = d.into_rest();
                result
            }

            fn read(d: &mut $crate::decode::Decoder) -> Result<$Enum, $crate::error::DecodeError> {
                let code = d.u8()?;
                if code != $crate::format::DESCRIBED {
                    return Err($crate::decode::unexpected($what, code));
                }
                let descriptor = d.descriptor()?;
                let list = d.u8()?;
                $(
                    if descriptor.code() == Some(<$Variant as $crate::field::Composite>::CODE) {
                        return <$Variant as $crate::field::Composite>::read_list(list, d)
                            .map($Enum::$Variant);
                    }
                )*
                Err($crate::error::DecodeError::UnexpectedDescriptor {
                    expected: $what,
                    found: descriptor,
                })
            }

            pub fn encode(&self, out: &mut bytes::BytesMut) {
                match self {
                    $($Enum::$Variant(p) => $crate::field::Composite::encode(p, out),)*
                }
            }

            /// The descriptor's symbolic name, for logs.
            pub fn name(&self) -> &'static str {
                match self {
                    $($Enum::$Variant(_) => <$Variant as $crate::field::Composite>::NAME,)*
                }
            }

            /// The numeric descriptor.
            pub fn code(&self) -> u64 {
                match self {
                    $($Enum::$Variant(_) => <$Variant as $crate::field::Composite>::CODE,)*
                }
            }
        }

        $(
            impl From<$Variant> for $Enum {
                fn from(p: $Variant) -> Self {
                    $Enum::$Variant(p)
                }
            }
        )*

        #[cfg(test)]
        impl $Enum {
            /// One of each, fields filled from `g`.
            pub(crate) fn samples(g: &mut $crate::testutil::Gen) -> Vec<$Enum> {
                vec![$($Enum::$Variant($crate::testutil::Sample::sample(g))),*]
            }
        }
    };
}
