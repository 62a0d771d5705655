//! Format codes (the one-octet constructors of primitive encodings) and the
//! primitive types they encode. Several codes encode one type (`uint` has
//! 0x70, 0x52 and 0x43); decoding accepts every one, encoding picks the
//! shortest.

pub const DESCRIBED: u8 = 0x00;

pub const NULL: u8 = 0x40;
pub const BOOLEAN: u8 = 0x56;
pub const TRUE: u8 = 0x41;
pub const FALSE: u8 = 0x42;
pub const UBYTE: u8 = 0x50;
pub const USHORT: u8 = 0x60;
pub const UINT: u8 = 0x70;
pub const SMALLUINT: u8 = 0x52;
pub const UINT0: u8 = 0x43;
pub const ULONG: u8 = 0x80;
pub const SMALLULONG: u8 = 0x53;
pub const ULONG0: u8 = 0x44;
pub const BYTE: u8 = 0x51;
pub const SHORT: u8 = 0x61;
pub const INT: u8 = 0x71;
pub const SMALLINT: u8 = 0x54;
pub const LONG: u8 = 0x81;
pub const SMALLLONG: u8 = 0x55;
pub const FLOAT: u8 = 0x72;
pub const DOUBLE: u8 = 0x82;
pub const DECIMAL32: u8 = 0x74;
pub const DECIMAL64: u8 = 0x84;
pub const DECIMAL128: u8 = 0x94;
pub const CHAR: u8 = 0x73;
pub const TIMESTAMP: u8 = 0x83;
pub const UUID: u8 = 0x98;
pub const VBIN8: u8 = 0xa0;
pub const VBIN32: u8 = 0xb0;
pub const STR8: u8 = 0xa1;
pub const STR32: u8 = 0xb1;
pub const SYM8: u8 = 0xa3;
pub const SYM32: u8 = 0xb3;
pub const LIST0: u8 = 0x45;
pub const LIST8: u8 = 0xc0;
pub const LIST32: u8 = 0xd0;
pub const MAP8: u8 = 0xc1;
pub const MAP32: u8 = 0xd1;
pub const ARRAY8: u8 = 0xe0;
pub const ARRAY32: u8 = 0xf0;

/// A primitive type, independent of which of its encodings was used; the
/// element type of an [`Array`](crate::Array).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Type {
    Null,
    Boolean,
    Ubyte,
    Ushort,
    Uint,
    Ulong,
    Byte,
    Short,
    Int,
    Long,
    Float,
    Double,
    Decimal32,
    Decimal64,
    Decimal128,
    Char,
    Timestamp,
    Uuid,
    Binary,
    String,
    Symbol,
    List,
    Map,
    Array,
}

/// How the data after a format code is laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Width {
    /// That many octets of data (0 for null, true, false, uint0, ulong0, list0).
    Fixed(usize),
    /// A size field of 1 or 4 octets, then that many octets.
    Variable(usize),
    /// A size field of 1 or 4 octets, then that many octets, which start
    /// with a count of the same width.
    Compound(usize),
    /// Like compound, and the count is followed by an element constructor.
    Array(usize),
}

impl Type {
    /// The type a format code encodes and its layout; `None` for codes the
    /// spec does not define (and for 0x00, which starts a described type).
    pub(crate) fn of_code(code: u8) -> Option<(Type, Width)> {
        use Width::*;
        Some(match code {
            NULL => (Type::Null, Fixed(0)),
            BOOLEAN => (Type::Boolean, Fixed(1)),
            TRUE | FALSE => (Type::Boolean, Fixed(0)),
            UBYTE => (Type::Ubyte, Fixed(1)),
            USHORT => (Type::Ushort, Fixed(2)),
            UINT => (Type::Uint, Fixed(4)),
            SMALLUINT => (Type::Uint, Fixed(1)),
            UINT0 => (Type::Uint, Fixed(0)),
            ULONG => (Type::Ulong, Fixed(8)),
            SMALLULONG => (Type::Ulong, Fixed(1)),
            ULONG0 => (Type::Ulong, Fixed(0)),
            BYTE => (Type::Byte, Fixed(1)),
            SHORT => (Type::Short, Fixed(2)),
            INT => (Type::Int, Fixed(4)),
            SMALLINT => (Type::Int, Fixed(1)),
            LONG => (Type::Long, Fixed(8)),
            SMALLLONG => (Type::Long, Fixed(1)),
            FLOAT => (Type::Float, Fixed(4)),
            DOUBLE => (Type::Double, Fixed(8)),
            DECIMAL32 => (Type::Decimal32, Fixed(4)),
            DECIMAL64 => (Type::Decimal64, Fixed(8)),
            DECIMAL128 => (Type::Decimal128, Fixed(16)),
            CHAR => (Type::Char, Fixed(4)),
            TIMESTAMP => (Type::Timestamp, Fixed(8)),
            UUID => (Type::Uuid, Fixed(16)),
            VBIN8 => (Type::Binary, Variable(1)),
            VBIN32 => (Type::Binary, Variable(4)),
            STR8 => (Type::String, Variable(1)),
            STR32 => (Type::String, Variable(4)),
            SYM8 => (Type::Symbol, Variable(1)),
            SYM32 => (Type::Symbol, Variable(4)),
            LIST0 => (Type::List, Fixed(0)),
            LIST8 => (Type::List, Compound(1)),
            LIST32 => (Type::List, Compound(4)),
            MAP8 => (Type::Map, Compound(1)),
            MAP32 => (Type::Map, Compound(4)),
            ARRAY8 => (Type::Array, Array(1)),
            ARRAY32 => (Type::Array, Array(4)),
            _ => return None,
        })
    }

    /// The spec's name of the type, for error messages.
    pub fn name(self) -> &'static str {
        match self {
            Type::Null => "null",
            Type::Boolean => "boolean",
            Type::Ubyte => "ubyte",
            Type::Ushort => "ushort",
            Type::Uint => "uint",
            Type::Ulong => "ulong",
            Type::Byte => "byte",
            Type::Short => "short",
            Type::Int => "int",
            Type::Long => "long",
            Type::Float => "float",
            Type::Double => "double",
            Type::Decimal32 => "decimal32",
            Type::Decimal64 => "decimal64",
            Type::Decimal128 => "decimal128",
            Type::Char => "char",
            Type::Timestamp => "timestamp",
            Type::Uuid => "uuid",
            Type::Binary => "binary",
            Type::String => "string",
            Type::Symbol => "symbol",
            Type::List => "list",
            Type::Map => "map",
            Type::Array => "array",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exactly_the_specs_codes_are_known() {
        let known: Vec<u8> = (0..=255u8)
            .filter(|c| Type::of_code(*c).is_some())
            .collect();
        assert_eq!(known.len(), 39);
        // The code's high nibble gives the layout class (section 1.2 of the
        // types document): 0x4 empty, 0x5 one octet, 0x6 two, 0x7 four, 0x8
        // eight, 0x9 sixteen, 0xa/0xb variable, 0xc/0xd compound, 0xe/0xf array.
        for code in known {
            let (_, width) = Type::of_code(code).unwrap();
            let expected = match code >> 4 {
                0x4 => Width::Fixed(0),
                0x5 => Width::Fixed(1),
                0x6 => Width::Fixed(2),
                0x7 => Width::Fixed(4),
                0x8 => Width::Fixed(8),
                0x9 => Width::Fixed(16),
                0xa => Width::Variable(1),
                0xb => Width::Variable(4),
                0xc => Width::Compound(1),
                0xd => Width::Compound(4),
                0xe => Width::Array(1),
                _ => Width::Array(4),
            };
            assert_eq!(width, expected, "{code:#04x}");
        }
    }
}
