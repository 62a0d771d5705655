//! A hash for integer keys the broker assigns itself (queue positions, store ids). They are
//! not peer-chosen, so a multiplicative hash is safe from collision attacks and much cheaper
//! than SipHash on per-message paths.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

#[derive(Default)]
pub struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(*b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// A map keyed by broker-assigned ids.
pub type IdMap<V> = HashMap<u64, V, BuildHasherDefault<IdHasher>>;
