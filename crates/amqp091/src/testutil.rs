//! Deterministic sample values for round-trip tests: every field gets a
//! distinct value, and bits follow the seed so that all packings are covered.

use crate::strings::{LongStr, ShortStr};
use crate::table::{FieldTable, FieldValue};

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
        self.n.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ self.seed
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
        g.n += 1;
        (g.seed >> (g.n % 16)) & 1 == 1
    }
}

impl Sample for u8 {
    fn sample(g: &mut Gen) -> Self {
        g.next() as u8
    }
}

impl Sample for u16 {
    fn sample(g: &mut Gen) -> Self {
        g.next() as u16
    }
}

impl Sample for u32 {
    fn sample(g: &mut Gen) -> Self {
        g.next() as u32
    }
}

impl Sample for u64 {
    fn sample(g: &mut Gen) -> Self {
        g.next()
    }
}

impl Sample for ShortStr {
    fn sample(g: &mut Gen) -> Self {
        let n = g.next();
        // Seed 0 also exercises empty strings.
        if g.seed == 0 {
            return ShortStr::default();
        }
        ShortStr::try_from(format!("s{n:x}")).unwrap_or_default()
    }
}

impl Sample for LongStr {
    fn sample(g: &mut Gen) -> Self {
        let n = g.next();
        if g.seed == 0 {
            return LongStr::default();
        }
        LongStr::try_from(format!("long-{n:x}")).unwrap_or_default()
    }
}

impl Sample for FieldTable {
    fn sample(g: &mut Gen) -> Self {
        if g.seed == 0 {
            return FieldTable::new();
        }
        let mut t = FieldTable::new();
        t.push(ShortStr::from_static("n"), FieldValue::I64(g.next() as i64));
        t.push(
            ShortStr::from_static("s"),
            FieldValue::LongStr(LongStr::sample(g)),
        );
        t
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
