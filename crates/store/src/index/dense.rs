//! A map from ids to small values that costs little more than the values themselves when
//! the ids are dense, as journal frame numbers of a deep queue's messages are.
//!
//! Ids are grouped into chunks of [`SLOTS`] consecutive ids, each a flat array: no key, no
//! hash control byte, no spare buckets, so a full chunk costs a slot's size per entry. A
//! hash map of the same entries costs nearly three times that (key, control byte, and a
//! table at most 7/8 full that doubles as it grows).
//!
//! Chunks are kept in a `BTreeMap` rather than a deque indexed from a base id: a deque's
//! length follows the span from the oldest live id to the newest, so one long-lived message
//! (or an unacked one on a priority queue) would keep a pointer per 64 ids of everything
//! published since. The tree's size follows the number of chunks alone.
//!
//! Sparse ids would leave chunks nearly empty, so a chunk that falls below [`MIN_LIVE`]
//! entries moves them to a hash map and goes: no chunk but the newest costs more than
//! `SLOTS / MIN_LIVE` (4) times its full cost per entry. The newest chunk is exempt: it is
//! the one still filling, and keeping it while a short queue is emptied and refilled saves
//! dropping and allocating it at every turn. Once a chunk was moved, later ids in its range
//! go to the hash map too (only compacted copies and recovery bring ids that old), so a
//! chunk is never rebuilt for a few entries.

use std::collections::BTreeMap;

use ferry_core::IdMap;

/// Ids per chunk.
pub const SLOTS: usize = 64;
/// Entries a chunk other than the newest must keep to stay a chunk.
const MIN_LIVE: u32 = (SLOTS / 4) as u32;

/// A value that has a spare bit pattern to mark a free slot, so a chunk needs no occupancy
/// map of its own.
pub trait Slot: Copy {
    /// The value of a free slot; no stored value may be free.
    const FREE: Self;
    fn is_free(&self) -> bool;
}

#[derive(Debug)]
struct Chunk<T> {
    slots: [T; SLOTS],
    /// Slots that are not free.
    live: u32,
}

impl<T: Slot> Chunk<T> {
    fn new() -> Box<Self> {
        Box::new(Chunk {
            slots: [T::FREE; SLOTS],
            live: 0,
        })
    }

    /// The chunk's entries, numbered from `first`.
    fn entries(&self, first: u64) -> impl Iterator<Item = (u64, &T)> + '_ {
        numbered(first, self.slots.iter()).filter(|(_, v)| !v.is_free())
    }
}

/// `slots` numbered from `first`. Not `(first..).zip(..)`: that range steps past the last
/// slot's id, which overflows for the chunk at the very top of the id space (an id a
/// damaged journal could still bring).
fn numbered<I: Iterator>(first: u64, slots: I) -> impl Iterator<Item = (u64, I::Item)> {
    slots.enumerate().map(move |(i, v)| (first + i as u64, v))
}

/// Chunk number and slot of `id`.
fn split(id: u64) -> (u64, usize) {
    (id / SLOTS as u64, (id % SLOTS as u64) as usize)
}

/// An id is in exactly one place: its chunk if that exists, else the sparse map. Every chunk
/// but the newest holds at least `MIN_LIVE` entries, and every sparse id is below the
/// newest chunk's range.
#[derive(Debug)]
pub struct DenseMap<T> {
    chunks: BTreeMap<u64, Box<Chunk<T>>>,
    sparse: IdMap<T>,
}

impl<T> Default for DenseMap<T> {
    fn default() -> Self {
        DenseMap {
            chunks: BTreeMap::new(),
            sparse: IdMap::default(),
        }
    }
}

impl<T: Slot> DenseMap<T> {
    fn newest(&self) -> Option<u64> {
        self.chunks.last_key_value().map(|(c, _)| *c)
    }

    pub fn get(&self, id: u64) -> Option<&T> {
        let (c, i) = split(id);
        match self.chunks.get(&c) {
            Some(chunk) => Some(&chunk.slots[i]).filter(|v| !v.is_free()),
            None => self.sparse.get(&id),
        }
    }

    /// Stores `v` for `id`; returns the value it replaces.
    pub fn insert(&mut self, id: u64, v: T) -> Option<T> {
        debug_assert!(!v.is_free(), "a free value would read back as absent");
        let (c, i) = split(id);
        let newest = self.newest();
        if let Some(chunk) = self.chunks.get_mut(&c) {
            let old = std::mem::replace(&mut chunk.slots[i], v);
            if !old.is_free() {
                return Some(old);
            }
            chunk.live += 1;
            None
        } else if newest.is_none_or(|n| c > n) {
            // Sparse ids are all below the newest chunk, so this id is nowhere yet.
            let mut chunk = Chunk::new();
            chunk.slots[i] = v;
            chunk.live = 1;
            self.chunks.insert(c, chunk);
            if let Some(n) = newest {
                // No longer the newest, it must now hold enough entries to stay.
                self.settle(n);
            }
            None
        } else {
            self.sparse.insert(id, v)
        }
    }

    pub fn remove(&mut self, id: u64) -> Option<T> {
        self.remove_if(id, |_| true)
    }

    /// Removes `id`'s value if `pred` holds for it.
    pub fn remove_if(&mut self, id: u64, pred: impl FnOnce(&T) -> bool) -> Option<T> {
        let (c, i) = split(id);
        if let Some(chunk) = self.chunks.get_mut(&c) {
            let slot = &mut chunk.slots[i];
            if slot.is_free() || !pred(slot) {
                return None;
            }
            let old = std::mem::replace(slot, T::FREE);
            chunk.live -= 1;
            self.settle(c);
            return Some(old);
        }
        if !pred(self.sparse.get(&id)?) {
            return None;
        }
        let old = self.sparse.remove(&id);
        self.shrink_sparse();
        old
    }

    /// Keeps only the entries for which `keep` holds.
    pub fn retain(&mut self, mut keep: impl FnMut(u64, &T) -> bool) {
        let newest = self.newest();
        let mut moved = Vec::new();
        self.chunks.retain(|&c, chunk| {
            let first = c * SLOTS as u64;
            for (id, slot) in numbered(first, chunk.slots.iter_mut()) {
                if !slot.is_free() && !keep(id, slot) {
                    *slot = T::FREE;
                    chunk.live -= 1;
                }
            }
            if Some(c) == newest || chunk.live >= MIN_LIVE {
                return true;
            }
            moved.extend(chunk.entries(first).map(|(id, v)| (id, *v)));
            false
        });
        // Before the moved entries join, or `keep` would see them twice.
        self.sparse.retain(|id, v| keep(*id, v));
        self.sparse.extend(moved);
        self.shrink_sparse();
    }

    /// Every entry: chunks in id order, then the sparse ones in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (u64, &T)> + '_ {
        let dense = self
            .chunks
            .iter()
            .flat_map(|(c, chunk)| chunk.entries(c * SLOTS as u64));
        dense.chain(self.sparse.iter().map(|(id, v)| (*id, v)))
    }

    /// Moves chunk `c`'s entries to the sparse map if it is too empty to pay for itself.
    fn settle(&mut self, c: u64) {
        if Some(c) == self.newest() || self.chunks.get(&c).is_none_or(|ch| ch.live >= MIN_LIVE) {
            return;
        }
        if let Some(chunk) = self.chunks.remove(&c) {
            let first = c * SLOTS as u64;
            self.sparse
                .extend(chunk.entries(first).map(|(id, v)| (id, *v)));
        }
    }

    /// A hash map never gives back room by itself: after a burst of sparse entries (a purge
    /// of a priority queue, say) it would keep the burst's table for good. Shrinking below
    /// 2/5 full keeps a sparse entry within some 4 times a chunk slot's cost, like a chunk
    /// at its minimum. Shrinking to 4/5 full, at most, leaves a change of a fifth of the
    /// entries between a shrink and the next growth, so the two cannot alternate at every
    /// other call.
    fn shrink_sparse(&mut self) {
        let (len, capacity) = (self.sparse.len(), self.sparse.capacity());
        if capacity > SLOTS && len * 5 < capacity * 2 {
            self.sparse.shrink_to(len * 5 / 4);
        }
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        let dense: u32 = self.chunks.values().map(|c| c.live).sum();
        dense as usize + self.sparse.len()
    }

    /// Bytes a chunk takes, for `SLOTS` entries.
    #[cfg(test)]
    pub fn chunk_size() -> usize {
        std::mem::size_of::<Chunk<T>>()
    }

    /// (chunks, sparse entries)
    #[cfg(test)]
    pub fn shape(&self) -> (usize, usize) {
        (self.chunks.len(), self.sparse.len())
    }

    /// Panics unless the invariants the lookups rely on hold.
    #[cfg(test)]
    pub fn check(&self) {
        let newest = self.newest();
        for (c, chunk) in &self.chunks {
            let live = chunk.slots.iter().filter(|v| !v.is_free()).count();
            assert_eq!(live, chunk.live as usize, "chunk {c}'s count");
            assert!(
                Some(*c) == newest || chunk.live >= MIN_LIVE,
                "chunk {c} holds only {live}"
            );
        }
        for (id, v) in &self.sparse {
            let (c, _) = split(*id);
            assert!(!v.is_free(), "a free value for {id}");
            assert!(
                !self.chunks.contains_key(&c),
                "{id} is in its chunk's range"
            );
            assert!(
                newest.is_some_and(|n| c < n),
                "{id} is not below the newest chunk"
            );
        }
        let (len, capacity) = (self.sparse.len(), self.sparse.capacity());
        assert!(
            capacity <= SLOTS || len * 5 >= capacity * 2,
            "sparse {len} of {capacity}"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl Slot for u32 {
        const FREE: u32 = 0;
        fn is_free(&self) -> bool {
            *self == 0
        }
    }

    fn value(id: u64) -> u32 {
        (id % 1_000_000) as u32 + 1
    }

    fn filled(ids: impl Iterator<Item = u64>) -> DenseMap<u32> {
        let mut m = DenseMap::default();
        for id in ids {
            assert_eq!(m.insert(id, value(id)), None);
        }
        m
    }

    #[test]
    fn in_order_removal_frees_chunks_as_it_goes() {
        let mut m = filled(0..10_000);
        assert_eq!(m.shape(), (157, 0));
        for id in 0..10_000 {
            assert_eq!(m.remove(id), Some(value(id)), "{id}");
            assert_eq!(m.remove(id), None);
            if id % 1000 == 999 {
                m.check();
                let left = 10_000 - (id as usize + 1);
                let (chunks, sparse) = m.shape();
                assert!(
                    chunks <= left.div_ceil(SLOTS) + 1,
                    "{chunks} chunks at {id}"
                );
                assert!(sparse < SLOTS, "{sparse} sparse at {id}");
            }
        }
        assert_eq!(m.len(), 0);
        assert_eq!(
            m.shape(),
            (1, 0),
            "only the newest chunk, kept for the next ids"
        );
        assert_eq!(m.insert(10_000, 1), None);
        assert_eq!(m.shape(), (1, 0), "reused");
        m.check();
    }

    #[test]
    fn out_of_order_removal_finds_every_entry() {
        let mut m = filled(0..6400);
        // A fixed permutation of 0..6400 (3 is coprime with 6400).
        let order: Vec<u64> = (0..6400u64).map(|i| i * 3 % 6400).collect();
        for (n, id) in order.iter().enumerate() {
            assert_eq!(m.get(*id), Some(&value(*id)));
            assert_eq!(m.remove(*id), Some(value(*id)), "{id}");
            assert_eq!(m.get(*id), None);
            if n % 500 == 0 {
                m.check();
                for rest in &order[n + 1..] {
                    assert_eq!(m.get(*rest), Some(&value(*rest)), "{rest} after {n}");
                }
            }
        }
        assert_eq!((m.len(), m.shape()), (0, (1, 0)));
    }

    #[test]
    fn a_sparse_remainder_moves_out_of_its_chunks() {
        let mut m = filled(0..100_000);
        for id in (0..100_000).filter(|id| id % 100 != 0) {
            m.remove(id);
        }
        m.check();
        // The newest chunk (99_968..) keeps none of the multiples of 100 but stays.
        assert_eq!(m.shape(), (1, 1000));
        for id in 0..100_000 {
            let want = (id % 100 == 0).then(|| value(id));
            assert_eq!(m.get(id).copied(), want, "{id}");
        }
        // A new id in a moved chunk's range joins the sparse map; one past the newest
        // chunk starts a chunk, and the one it supersedes moves out too.
        assert_eq!(m.insert(150, 7), None);
        assert_eq!(m.shape(), (1, 1001));
        assert_eq!(m.insert(100_000, 8), None);
        assert_eq!(m.shape(), (1, 1001), "in the newest chunk");
        assert_eq!(m.insert(100_032, 9), None);
        assert_eq!(m.shape(), (1, 1002));
        assert_eq!((m.get(100_000), m.get(100_032)), (Some(&8), Some(&9)));
        m.check();
    }

    #[test]
    fn a_sparse_map_gives_back_its_room() {
        let mut m = filled(0..100_000);
        for id in 0..99_000 {
            if id % 64 >= 16 {
                m.remove(id);
            }
        }
        // Every chunk was left at 16: dense still.
        assert_eq!(m.shape().1, 0);
        for id in (0..99_000).filter(|id| id % 64 == 0) {
            m.remove(id);
        }
        let (_, sparse) = m.shape();
        assert!(sparse > 20_000, "{sparse}");
        for id in (0..99_000).filter(|id| id % 500 != 0) {
            m.remove(id);
        }
        m.check();
        assert!(m.sparse.capacity() < 1000, "{}", m.sparse.capacity());
    }

    #[test]
    fn a_second_insert_replaces_the_entry_where_it_is() {
        let mut m = filled((0..3 * SLOTS as u64).chain([1000]));
        for id in 0..SLOTS as u64 - 1 {
            m.remove(id);
        }
        assert_eq!(m.shape(), (3, 1), "id 63 moved out");
        assert_eq!(m.insert(63, 500), Some(value(63)));
        assert_eq!(m.insert(64, 600), Some(value(64)));
        assert_eq!((m.get(63), m.get(64)), (Some(&500), Some(&600)));
        assert_eq!(m.shape(), (3, 1));
        assert_eq!(m.len(), 2 * SLOTS + 2);
        m.check();
    }

    #[test]
    fn retain_reaches_chunks_and_sparse_entries_and_moves_what_thins_out() {
        let mut m = filled(0..10 * SLOTS as u64);
        for id in 0..SLOTS as u64 - 4 {
            m.remove(id);
        }
        assert_eq!(m.shape(), (9, 4));
        let mut seen = Vec::new();
        // Keeps ids divisible by 8: 8 per chunk, too few for a chunk.
        m.retain(|id, v| {
            seen.push(id);
            assert_eq!(*v, value(id));
            id % 8 == 0
        });
        seen.sort_unstable();
        assert_eq!(
            seen,
            (SLOTS as u64 - 4..10 * SLOTS as u64).collect::<Vec<_>>()
        );
        m.check();
        assert_eq!(m.shape(), (1, 8 * 8), "all but the newest chunk moved");
        for id in 0..10 * SLOTS as u64 {
            assert_eq!(m.get(id).is_some(), id % 8 == 0 && id >= 64, "{id}");
        }
    }

    #[test]
    fn the_top_of_the_id_space_is_an_ordinary_chunk() {
        let mut m = filled([u64::MAX - 1, u64::MAX].into_iter());
        let all: Vec<u64> = m.iter().map(|(id, _)| id).collect();
        assert_eq!(all, [u64::MAX - 1, u64::MAX]);
        m.retain(|id, _| id == u64::MAX);
        assert_eq!(m.remove(u64::MAX), Some(value(u64::MAX)));
        assert_eq!(m.len(), 0);
    }
}
