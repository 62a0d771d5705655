//! Sequence-sets of command ids (RFC 1982 serial numbers) and byte-ranges.

use bytes::{BufMut, BytesMut};

use crate::codec::Reader;
use crate::error::{DecodeError, EncodeError};

/// `a < b` in 32-bit serial number arithmetic: ids wrap, so "before" means "less than
/// half the number space behind".
pub fn serial_lt(a: u32, b: u32) -> bool {
    (b.wrapping_sub(a) as i32) > 0
}

pub fn serial_le(a: u32, b: u32) -> bool {
    a == b || serial_lt(a, b)
}

/// An ordered set of u32s held as merged inclusive ranges in serial order. All members
/// are assumed to lie within half the number space of each other, as the spec requires
/// of ids in flight.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct SequenceSet {
    ranges: Vec<(u32, u32)>,
}

impl SequenceSet {
    /// The most ranges an encoded set can hold: its size is two octets, eight per range.
    pub const MAX_RANGES: usize = u16::MAX as usize / 8;

    pub fn new() -> Self {
        Self::default()
    }

    pub fn from_range(lower: u32, upper: u32) -> Self {
        let mut s = Self::new();
        s.add_range(lower, upper);
        s
    }

    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// The inclusive ranges, in serial order, neither overlapping nor adjacent.
    pub fn ranges(&self) -> &[(u32, u32)] {
        &self.ranges
    }

    pub fn first(&self) -> Option<u32> {
        self.ranges.first().map(|r| r.0)
    }

    pub fn last(&self) -> Option<u32> {
        self.ranges.last().map(|r| r.1)
    }

    /// How many numbers the set holds.
    pub fn count(&self) -> u64 {
        self.ranges
            .iter()
            .map(|&(lo, hi)| u64::from(hi.wrapping_sub(lo)) + 1)
            .sum()
    }

    pub fn contains(&self, n: u32) -> bool {
        let i = self.ranges.partition_point(|&(_, hi)| serial_lt(hi, n));
        self.ranges.get(i).is_some_and(|&(lo, _)| serial_le(lo, n))
    }

    pub fn add(&mut self, n: u32) {
        // Ids are usually added in order; extend the last range without searching.
        if let Some(last) = self.ranges.last_mut() {
            if last.1.wrapping_add(1) == n {
                last.1 = n;
                return;
            }
        }
        self.add_range(n, n);
    }

    /// Adds `lower..=upper` (swapped if given backwards).
    pub fn add_range(&mut self, lower: u32, upper: u32) {
        let (lo, hi) = if serial_lt(upper, lower) {
            (upper, lower)
        } else {
            (lower, upper)
        };
        // Ranges ending more than one before `lo` stay untouched on the left.
        let start = self
            .ranges
            .partition_point(|&(_, h)| serial_lt(h.wrapping_add(1), lo));
        let mut end = start;
        let (mut new_lo, mut new_hi) = (lo, hi);
        while let Some(&(l, h)) = self.ranges.get(end) {
            if !serial_le(l, hi.wrapping_add(1)) {
                break;
            }
            if serial_lt(l, new_lo) {
                new_lo = l;
            }
            if serial_lt(new_hi, h) {
                new_hi = h;
            }
            end += 1;
        }
        self.ranges
            .splice(start..end, std::iter::once((new_lo, new_hi)));
    }

    /// Removes `lower..=upper` (swapped if given backwards).
    pub fn remove_range(&mut self, lower: u32, upper: u32) {
        let (lo, hi) = if serial_lt(upper, lower) {
            (upper, lower)
        } else {
            (lower, upper)
        };
        let mut kept = Vec::with_capacity(self.ranges.len() + 1);
        for &(l, h) in &self.ranges {
            if serial_lt(h, lo) || serial_lt(hi, l) {
                kept.push((l, h));
                continue;
            }
            if serial_lt(l, lo) {
                kept.push((l, lo.wrapping_sub(1)));
            }
            if serial_lt(hi, h) {
                kept.push((hi.wrapping_add(1), h));
            }
        }
        self.ranges = kept;
    }

    /// Removes every member of `other`, in one merge of the two range lists: O(n + k) for n
    /// ranges here and k there, where removing k ranges one by one would rebuild the list k
    /// times (a peer's known-completed carries up to 8191 of them).
    pub fn remove_set(&mut self, other: &SequenceSet) {
        if self.ranges.is_empty() || other.ranges.is_empty() {
            return;
        }
        let cuts = &other.ranges;
        let mut kept = Vec::with_capacity(self.ranges.len() + 1);
        let mut j = 0;
        for &(l, h) in &self.ranges {
            let mut lo = l;
            // Every step either ends this range or moves on to the next cut, so the merge
            // ends whatever order members that lie far apart happen to compare in.
            loop {
                while j < cuts.len() && serial_lt(cuts[j].1, lo) {
                    j += 1;
                }
                let Some(&(cut_lo, cut_hi)) = cuts.get(j) else {
                    kept.push((lo, h));
                    break;
                };
                if serial_lt(h, cut_lo) {
                    kept.push((lo, h));
                    break;
                }
                if serial_lt(lo, cut_lo) {
                    kept.push((lo, cut_lo.wrapping_sub(1)));
                }
                if !serial_lt(cut_hi, h) {
                    // The cut runs to the end of this range (and may cover the next).
                    break;
                }
                lo = cut_hi.wrapping_add(1);
                j += 1;
            }
        }
        self.ranges = kept;
    }

    pub fn remove(&mut self, n: u32) {
        self.remove_range(n, n);
    }

    /// Removes every member up to and including `n`.
    pub fn remove_upto(&mut self, n: u32) {
        if let Some(first) = self.first() {
            if serial_le(first, n) {
                self.remove_range(first, n);
            }
        }
    }

    /// Every member, in order.
    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.ranges.iter().flat_map(|&(lo, hi)| {
            (0..=u64::from(hi.wrapping_sub(lo))).map(move |k| lo.wrapping_add(k as u32))
        })
    }

    /// Two-octet size, then lower and upper of each range.
    pub fn encode(&self, out: &mut BytesMut) -> Result<(), EncodeError> {
        let size = self.ranges.len() * 8;
        if self.ranges.len() > Self::MAX_RANGES {
            return Err(EncodeError::TooLong {
                what: "sequence-set",
                len: size,
                max: usize::from(u16::MAX),
            });
        }
        out.put_u16(size as u16);
        for &(lo, hi) in &self.ranges {
            out.put_u32(lo);
            out.put_u32(hi);
        }
        Ok(())
    }

    pub fn decode(r: &mut Reader) -> Result<SequenceSet, DecodeError> {
        let mut body = r.sized(2)?;
        let size = body.remaining();
        if size % 8 != 0 {
            return Err(DecodeError::InvalidSize {
                what: "sequence-set",
                size: size as u64,
            });
        }
        let mut raw = Vec::with_capacity(size / 8);
        for _ in 0..size / 8 {
            let (lo, hi) = (body.u32()?, body.u32()?);
            if serial_lt(hi, lo) {
                return Err(DecodeError::InvalidRange {
                    lower: lo.into(),
                    upper: hi.into(),
                });
            }
            raw.push((lo, hi));
        }
        Self::normalize(raw)
    }

    /// Sorts and merges ranges in O(n log n): adding a peer's ranges one by one could
    /// be quadratic. Members must lie within half the number space of each other, or
    /// serial order is not an order at all (and re-encoding would not be stable).
    fn normalize(mut raw: Vec<(u32, u32)>) -> Result<SequenceSet, DecodeError> {
        let Some(&(first, _)) = raw.first() else {
            return Ok(SequenceSet::new());
        };
        // Offsets from half the space below the first member order every member that
        // lies within half the space of it, wrap or no wrap.
        let base = first.wrapping_sub(1 << 31);
        let key = |n: u32| u64::from(n.wrapping_sub(base));
        raw.sort_unstable_by_key(|&(lo, _)| key(lo));
        let mut ranges: Vec<(u32, u32)> = Vec::with_capacity(raw.len());
        for (lo, hi) in raw {
            if key(hi) < key(lo) {
                return Err(DecodeError::InvalidRange {
                    lower: lo.into(),
                    upper: hi.into(),
                });
            }
            match ranges.last_mut() {
                Some(last) if key(lo) <= key(last.1) + 1 => {
                    if key(hi) > key(last.1) {
                        last.1 = hi;
                    }
                }
                _ => ranges.push((lo, hi)),
            }
        }
        if let (Some(&(lo, _)), Some(&(_, hi))) = (ranges.first(), ranges.last()) {
            if key(hi) - key(lo) >= 1 << 31 {
                return Err(DecodeError::InvalidRange {
                    lower: lo.into(),
                    upper: hi.into(),
                });
            }
        }
        Ok(SequenceSet { ranges })
    }
}

impl FromIterator<u32> for SequenceSet {
    fn from_iter<I: IntoIterator<Item = u32>>(iter: I) -> Self {
        let mut s = SequenceSet::new();
        for n in iter {
            s.add(n);
        }
        s
    }
}

/// Byte ranges within a command (session.command-fragment): merged inclusive u64 ranges.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct ByteRanges {
    ranges: Vec<(u64, u64)>,
}

impl ByteRanges {
    pub fn ranges(&self) -> &[(u64, u64)] {
        &self.ranges
    }

    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    pub fn add_range(&mut self, lower: u64, upper: u64) {
        let (lo, hi) = (lower.min(upper), lower.max(upper));
        let start = self
            .ranges
            .partition_point(|&(_, h)| h.saturating_add(1) < lo);
        let mut end = start;
        let (mut new_lo, mut new_hi) = (lo, hi);
        while let Some(&(l, h)) = self.ranges.get(end) {
            if l > hi.saturating_add(1) {
                break;
            }
            new_lo = new_lo.min(l);
            new_hi = new_hi.max(h);
            end += 1;
        }
        self.ranges
            .splice(start..end, std::iter::once((new_lo, new_hi)));
    }

    pub fn encode(&self, out: &mut BytesMut) -> Result<(), EncodeError> {
        let size = self.ranges.len() * 16;
        if size > usize::from(u16::MAX) {
            return Err(EncodeError::TooLong {
                what: "byte-ranges",
                len: size,
                max: usize::from(u16::MAX),
            });
        }
        out.put_u16(size as u16);
        for &(lo, hi) in &self.ranges {
            out.put_u64(lo);
            out.put_u64(hi);
        }
        Ok(())
    }

    pub fn decode(r: &mut Reader) -> Result<ByteRanges, DecodeError> {
        let mut body = r.sized(2)?;
        let size = body.remaining();
        if size % 16 != 0 {
            return Err(DecodeError::InvalidSize {
                what: "byte-ranges",
                size: size as u64,
            });
        }
        let mut raw = Vec::with_capacity(size / 16);
        for _ in 0..size / 16 {
            let (lo, hi) = (body.u64()?, body.u64()?);
            if hi < lo {
                return Err(DecodeError::InvalidRange {
                    lower: lo,
                    upper: hi,
                });
            }
            raw.push((lo, hi));
        }
        raw.sort_unstable();
        let mut ranges: Vec<(u64, u64)> = Vec::with_capacity(raw.len());
        for (lo, hi) in raw {
            match ranges.last_mut() {
                Some(last) if lo <= last.1.saturating_add(1) => last.1 = last.1.max(hi),
                _ => ranges.push((lo, hi)),
            }
        }
        Ok(ByteRanges { ranges })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn set(ranges: &[(u32, u32)]) -> SequenceSet {
        let mut s = SequenceSet::new();
        for &(l, h) in ranges {
            s.add_range(l, h);
        }
        s
    }

    #[test]
    fn serial_comparison_wraps() {
        assert!(serial_lt(1, 2));
        assert!(!serial_lt(2, 1));
        assert!(serial_lt(u32::MAX, 0));
        assert!(!serial_lt(0, u32::MAX));
        assert!(serial_le(5, 5));
        assert!(!serial_lt(5, 5));
    }

    #[test]
    fn adds_merge_overlapping_and_adjacent_ranges() {
        let s = set(&[(10, 12), (1, 3), (5, 5), (4, 4)]);
        assert_eq!(s.ranges(), &[(1, 5), (10, 12)]);
        let s = set(&[(1, 3), (10, 12), (2, 11)]);
        assert_eq!(s.ranges(), &[(1, 12)]);
        let s = set(&[(20, 30), (1, 2), (8, 9)]);
        assert_eq!(s.ranges(), &[(1, 2), (8, 9), (20, 30)]);
        let mut s = SequenceSet::new();
        for n in [3, 4, 5, 7, 6, 1] {
            s.add(n);
        }
        assert_eq!(s.ranges(), &[(1, 1), (3, 7)]);
        assert_eq!(s.count(), 6);
    }

    #[test]
    fn ranges_across_the_wrap() {
        let mut s = SequenceSet::new();
        s.add(u32::MAX - 1);
        s.add(u32::MAX);
        s.add(0);
        s.add(1);
        assert_eq!(s.ranges(), &[(u32::MAX - 1, 1)]);
        assert!(s.contains(u32::MAX));
        assert!(s.contains(0));
        assert!(!s.contains(2));
        assert_eq!(
            s.iter().collect::<Vec<_>>(),
            vec![u32::MAX - 1, u32::MAX, 0, 1]
        );
        s.remove_upto(u32::MAX);
        assert_eq!(s.ranges(), &[(0, 1)]);
    }

    #[test]
    fn contains_and_remove() {
        let mut s = set(&[(1, 10), (20, 30)]);
        assert!(s.contains(1) && s.contains(10) && s.contains(25));
        assert!(!s.contains(0) && !s.contains(11) && !s.contains(31));
        s.remove_range(5, 22);
        assert_eq!(s.ranges(), &[(1, 4), (23, 30)]);
        s.remove(30);
        assert_eq!(s.ranges(), &[(1, 4), (23, 29)]);
        s.remove_upto(23);
        assert_eq!(s.ranges(), &[(24, 29)]);
        s.remove_upto(100);
        assert!(s.is_empty());
        s.remove_upto(100);
        assert!(s.is_empty());
    }

    #[test]
    fn removing_a_set_matches_removing_its_ranges_one_by_one() {
        let base = set(&[(1, 10), (20, 30), (40, 40), (50, 60), (u32::MAX - 2, 2)]);
        let cuts = [
            vec![],
            vec![(0, 100)],
            vec![(3, 4), (6, 6), (10, 22), (25, 25), (41, 49), (55, 70)],
            vec![(1, 1), (30, 40), (61, 62)],
            vec![(u32::MAX - 1, u32::MAX - 1), (1, 1)],
            vec![(u32::MAX - 5, 0), (2, 5)],
        ];
        for ranges in cuts {
            let other = set(&ranges);
            let mut by_range = base.clone();
            for &(l, h) in other.ranges() {
                by_range.remove_range(l, h);
            }
            let mut merged = base.clone();
            merged.remove_set(&other);
            assert_eq!(merged, by_range, "removing {ranges:?}");
        }
        let mut whole = base.clone();
        whole.remove_set(&base);
        assert!(whole.is_empty());
    }

    /// A known-completed's worth of cuts (8191) against 100k ranges, as a fragmenting peer
    /// would send: only the cut members go.
    #[test]
    fn removing_many_ranges_from_many_leaves_the_rest() {
        let mut s = SequenceSet::new();
        for k in 0..100_000u32 {
            s.add_range(4 * k, 4 * k + 1);
        }
        let cuts: SequenceSet = (0..8191u32).map(|k| 8 * k).collect();
        s.remove_set(&cuts);
        assert_eq!(s.ranges().len(), 100_000);
        assert_eq!(s.count(), 200_000 - 8191);
        assert_eq!(s.ranges()[0], (1, 1));
        assert_eq!(s.ranges()[1], (4, 5));
    }

    #[test]
    fn encodes_size_then_pairs() {
        let s = set(&[(1, 2), (5, 5)]);
        let mut out = BytesMut::new();
        s.encode(&mut out).unwrap();
        assert_eq!(
            &out[..],
            &[0, 16, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 5, 0, 0, 0, 5]
        );
        let back = SequenceSet::decode(&mut Reader::new(out.freeze())).unwrap();
        assert_eq!(back, s);
    }

    #[test]
    fn decode_normalizes_unordered_overlapping_input() {
        let mut out = BytesMut::new();
        out.put_u16(32);
        for (l, h) in [(10u32, 12u32), (1, 3), (4, 4), (11, 20)] {
            out.put_u32(l);
            out.put_u32(h);
        }
        let s = SequenceSet::decode(&mut Reader::new(out.freeze())).unwrap();
        assert_eq!(s.ranges(), &[(1, 4), (10, 20)]);
    }

    #[test]
    fn decode_rejects_bad_sizes_and_ranges() {
        let bad_size = Bytes::from_static(&[0, 4, 0, 0, 0, 1]);
        assert!(matches!(
            SequenceSet::decode(&mut Reader::new(bad_size)),
            Err(DecodeError::InvalidSize { .. })
        ));
        let backwards = Bytes::from_static(&[0, 8, 0, 0, 0, 5, 0, 0, 0, 1]);
        assert!(matches!(
            SequenceSet::decode(&mut Reader::new(backwards)),
            Err(DecodeError::InvalidRange { .. })
        ));
        // Members more than half the number space apart have no serial order.
        let mut wide = BytesMut::new();
        wide.put_u16(16);
        for n in [0u32, 0, 0x8000_0000, 0x8000_0000] {
            wide.put_u32(n);
        }
        assert!(matches!(
            SequenceSet::decode(&mut Reader::new(wide.freeze())),
            Err(DecodeError::InvalidRange { .. })
        ));
        let truncated = Bytes::from_static(&[0, 8, 0, 0, 0, 5]);
        assert_eq!(
            SequenceSet::decode(&mut Reader::new(truncated)),
            Err(DecodeError::Truncated)
        );
    }

    /// Found by fuzzing: members spread over more than half the number space sorted
    /// differently on each decode, so re-encoding was not stable.
    #[test]
    fn fuzz_regression_unstable_order() {
        let wire = Bytes::from_static(&[
            0x00, 0x18, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x30, 0x30, 0x30, 0x30,
            0x98, 0x98, 0x30, 0x98, 0x98, 0x98, 0x98, 0x98, 0x98, 0x98, 0x98, 0x98,
        ]);
        assert!(matches!(
            SequenceSet::decode(&mut Reader::new(wire)),
            Err(DecodeError::InvalidRange { .. })
        ));
    }

    #[test]
    fn byte_ranges_merge_and_round_trip() {
        let mut b = ByteRanges::default();
        b.add_range(10, 20);
        b.add_range(0, 4);
        b.add_range(5, 9);
        assert_eq!(b.ranges(), &[(0, 20)]);
        b.add_range(30, 40);
        let mut out = BytesMut::new();
        b.encode(&mut out).unwrap();
        assert_eq!(out.len(), 2 + 32);
        let back = ByteRanges::decode(&mut Reader::new(out.freeze())).unwrap();
        assert_eq!(back, b);
    }
}
