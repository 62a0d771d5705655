//! Deterministic sample values for round-trip tests: every field gets a
//! value derived from the seed, and choices (present or absent, which type)
//! follow it, so a handful of seeds covers every shape.

use bytes::Bytes;

use crate::definitions::Role;
use crate::format::Type;
use crate::primitive::{Decimal128, Decimal32, Decimal64, Str, Symbol, Timestamp, Uuid};
use crate::value::{Array, Described, Descriptor, Map, Value};

pub(crate) struct Gen {
    seed: u64,
    n: u64,
}

impl Gen {
    pub(crate) fn new(seed: u64) -> Self {
        Gen { seed, n: 0 }
    }

    fn next(&mut self) -> u64 {
        self.n += 1;
        let mut x = self.n.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ self.seed;
        // A round of xorshift so that low bits vary too.
        x ^= x >> 29;
        x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9);
        x ^ (x >> 32)
    }

    /// A value in `0..n` (`n` > 0).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

pub(crate) trait Sample {
    fn sample(g: &mut Gen) -> Self;
}

impl Sample for bool {
    fn sample(g: &mut Gen) -> Self {
        g.below(2) == 1
    }
}

/// Integers are drawn so that the short encodings (0, one octet) come up as
/// often as the long ones.
macro_rules! sample_int {
    ($($t:ty),*) => {$(
        impl Sample for $t {
            fn sample(g: &mut Gen) -> Self {
                match g.below(4) {
                    0 => 0,
                    1 => g.next() as u8 as $t,
                    _ => g.next() as $t,
                }
            }
        }
    )*};
}
sample_int!(u8, u16, u32, u64, i8, i16, i32, i64);

impl Sample for Str {
    fn sample(g: &mut Gen) -> Self {
        match g.below(5) {
            0 => Str::default(),
            1 => Str::from("grüße, 世界"),
            // Longer than 255 octets: str32.
            2 => Str::from("x".repeat(256 + g.below(10) as usize)),
            _ => Str::from(format!("s{:x}", g.next())),
        }
    }
}

impl Sample for Symbol {
    fn sample(g: &mut Gen) -> Self {
        match g.below(6) {
            0 => Symbol::from_static("amqp:accepted:list"),
            1 => Symbol::from("y".repeat(300)),
            _ => Symbol::from(format!("x-opt-{:x}", g.below(1000))),
        }
    }
}

impl Sample for Bytes {
    fn sample(g: &mut Gen) -> Self {
        let len = match g.below(4) {
            0 => 0,
            1 => 300,
            _ => g.below(20) as usize,
        };
        (0..len).map(|i| (i as u64 ^ g.seed) as u8).collect()
    }
}

impl Sample for Timestamp {
    fn sample(g: &mut Gen) -> Self {
        Timestamp(i64::sample(g))
    }
}

impl Sample for Uuid {
    fn sample(g: &mut Gen) -> Self {
        let mut u = [0; 16];
        u[..8].copy_from_slice(&g.next().to_be_bytes());
        u[8..].copy_from_slice(&g.next().to_be_bytes());
        Uuid(u)
    }
}

impl Sample for Role {
    fn sample(g: &mut Gen) -> Self {
        if bool::sample(g) {
            Role::Receiver
        } else {
            Role::Sender
        }
    }
}

impl<T: Sample> Sample for Option<T> {
    fn sample(g: &mut Gen) -> Self {
        if bool::sample(g) {
            Some(T::sample(g))
        } else {
            None
        }
    }
}

impl<T: Sample> Sample for Vec<T> {
    fn sample(g: &mut Gen) -> Self {
        (0..g.below(4)).map(|_| T::sample(g)).collect()
    }
}

impl<K: Sample, V: Sample> Sample for Map<K, V> {
    fn sample(g: &mut Gen) -> Self {
        (0..g.below(4))
            .map(|_| (K::sample(g), V::sample(g)))
            .collect()
    }
}

/// Not null at the top (an optional `*` field holding null reads back as
/// absent); anything, null included, inside.
impl Sample for Value {
    fn sample(g: &mut Gen) -> Self {
        loop {
            let v = value(g, 0);
            if !v.is_null() {
                return v;
            }
        }
    }
}

/// A described value whose descriptor no type of the spec uses, as an
/// extension would send.
impl Sample for Described {
    fn sample(g: &mut Gen) -> Self {
        let descriptor = if bool::sample(g) {
            Descriptor::Code(0x0000_f3a0_0000_0000 | g.below(16))
        } else {
            Descriptor::Symbol(Symbol::from("com.example:ext"))
        };
        Described {
            descriptor,
            value: value(g, 1),
        }
    }
}

const SCALARS: &[Type] = &[
    Type::Null,
    Type::Boolean,
    Type::Ubyte,
    Type::Ushort,
    Type::Uint,
    Type::Ulong,
    Type::Byte,
    Type::Short,
    Type::Int,
    Type::Long,
    Type::Float,
    Type::Double,
    Type::Decimal32,
    Type::Decimal64,
    Type::Decimal128,
    Type::Char,
    Type::Timestamp,
    Type::Uuid,
    Type::Binary,
    Type::String,
    Type::Symbol,
];

/// A value of type `ty`, nesting at most three levels below `depth`.
pub(crate) fn value_of(g: &mut Gen, ty: Type, depth: usize) -> Value {
    let leaf = depth >= 3;
    match ty {
        Type::Null => Value::Null,
        Type::Boolean => Value::Bool(Sample::sample(g)),
        Type::Ubyte => Value::Ubyte(Sample::sample(g)),
        Type::Ushort => Value::Ushort(Sample::sample(g)),
        Type::Uint => Value::Uint(Sample::sample(g)),
        Type::Ulong => Value::Ulong(Sample::sample(g)),
        Type::Byte => Value::Byte(Sample::sample(g)),
        Type::Short => Value::Short(Sample::sample(g)),
        Type::Int => Value::Int(Sample::sample(g)),
        Type::Long => Value::Long(Sample::sample(g)),
        // Finite values only: NaN is not equal to itself.
        Type::Float => Value::Float(i16::sample(g) as f32 / 8.0),
        Type::Double => Value::Double(i64::sample(g) as f64 / 1024.0),
        Type::Decimal32 => Value::Decimal32(Decimal32((g.next() as u32).to_be_bytes())),
        Type::Decimal64 => Value::Decimal64(Decimal64(g.next().to_be_bytes())),
        Type::Decimal128 => Value::Decimal128(Decimal128(Uuid::sample(g).0)),
        Type::Char => Value::Char(char::from_u32(g.below(0x11_0000) as u32).unwrap_or('é')),
        Type::Timestamp => Value::Timestamp(Sample::sample(g)),
        Type::Uuid => Value::Uuid(Sample::sample(g)),
        Type::Binary => Value::Binary(Sample::sample(g)),
        Type::String => Value::String(Sample::sample(g)),
        Type::Symbol => Value::Symbol(Sample::sample(g)),
        Type::List if !leaf => Value::List((0..g.below(5)).map(|_| value(g, depth + 1)).collect()),
        Type::Map if !leaf => Value::Map(
            (0..g.below(4))
                .map(|_| (value(g, depth + 1), value(g, depth + 1)))
                .collect(),
        ),
        Type::Array if !leaf => Value::Array(array(g, depth + 1)),
        Type::List | Type::Map | Type::Array => Value::Null,
    }
}

fn value(g: &mut Gen, depth: usize) -> Value {
    match g.below(SCALARS.len() as u64 + 5) as usize {
        i if i < SCALARS.len() => value_of(g, SCALARS[i], depth),
        i if i == SCALARS.len() => value_of(g, Type::List, depth),
        i if i == SCALARS.len() + 1 => value_of(g, Type::Map, depth),
        i if i == SCALARS.len() + 2 => value_of(g, Type::Array, depth),
        _ if depth < 3 => Value::Described(Box::new(Described {
            descriptor: if bool::sample(g) {
                Descriptor::Code(u64::sample(g))
            } else {
                Descriptor::Symbol(Symbol::sample(g))
            },
            value: value(g, depth + 1),
        })),
        _ => Value::Null,
    }
}

fn array(g: &mut Gen, depth: usize) -> Array {
    let all = [SCALARS, &[Type::List, Type::Map, Type::Array]].concat();
    let mut ty = all[g.below(all.len() as u64) as usize];
    if depth >= 3 && matches!(ty, Type::List | Type::Map | Type::Array) {
        ty = Type::Uint;
    }
    let items = (0..g.below(4)).map(|_| value_of(g, ty, depth)).collect();
    let descriptor = if g.below(4) == 0 {
        Some(Descriptor::Code(0x77))
    } else {
        None
    };
    Array::from_parts(descriptor, ty, items)
}
