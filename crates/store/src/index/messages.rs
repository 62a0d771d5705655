//! The index's per-message entries, one per live persistent message: with a deep queue this
//! is the store's whole memory cost per message, so the usual entry is packed into 24 bytes
//! (a `LiveMessage` takes 56) and kept in a [`DenseMap`], which for ids as dense as
//! journal frame numbers costs little more than that. A message held by one queue whose
//! place fits in 32-bit fields (every message but a huge one, or one copied forward some
//! four billion frames after it was first written) is packed; any other is kept whole
//! beside the packed ones.

use ferry_core::IdMap;

use super::dense::{DenseMap, Slot};
use super::{Live, LiveMessage, Loc, Refs};

/// A message record's place and its one queue, in 24 bytes.
#[derive(Debug, Clone, Copy)]
struct Packed {
    queue: u64,
    segment: u32,
    offset: u32,
    /// Never 0 in a stored entry: 0 marks a free slot of the dense map.
    len: u32,
    /// The record's frame number less the message id (the number of the frame that first
    /// recorded it): 0 until compaction copies the record forward.
    seq_after_id: u32,
}

impl Packed {
    fn new(id: u64, m: &LiveMessage) -> Option<Packed> {
        let Refs::One(queue) = m.queues else {
            return None;
        };
        Some(Packed {
            queue,
            segment: u32::try_from(m.at.loc.segment).ok()?,
            offset: u32::try_from(m.at.loc.offset).ok()?,
            // A frame's length counts its header (`State::append` measures the bytes
            // `write_frame` wrote, recovery the frame `read_frame` checked), so it is never
            // 0. Should that change, a 0 is kept whole rather than taken for a free slot.
            len: u32::try_from(m.at.loc.len).ok().filter(|len| *len != 0)?,
            seq_after_id: u32::try_from(m.at.seq.checked_sub(id)?).ok()?,
        })
    }

    fn at(&self, id: u64) -> Live {
        Live {
            loc: Loc {
                segment: u64::from(self.segment),
                offset: u64::from(self.offset),
                len: u64::from(self.len),
            },
            seq: id + u64::from(self.seq_after_id),
        }
    }

    fn unpack(&self, id: u64) -> LiveMessage {
        LiveMessage {
            at: self.at(id),
            queues: Refs::One(self.queue),
        }
    }
}

impl Slot for Packed {
    const FREE: Packed = Packed {
        queue: 0,
        segment: 0,
        offset: 0,
        len: 0,
        seq_after_id: 0,
    };

    fn is_free(&self) -> bool {
        self.len == 0
    }
}

/// Live messages by id. An id is in `packed` or `whole`, never both.
#[derive(Debug, Default)]
pub struct Messages {
    packed: DenseMap<Packed>,
    /// Messages held by several queues, or too far out for [`Packed`]'s fields.
    whole: IdMap<LiveMessage>,
}

impl Messages {
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.packed.len() + self.whole.len()
    }

    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn get(&self, id: u64) -> Option<LiveMessage> {
        match self.packed.get(id) {
            Some(p) => Some(p.unpack(id)),
            None => self.whole.get(&id).cloned(),
        }
    }

    /// Where message `id`'s record is.
    pub fn at(&self, id: u64) -> Option<Live> {
        match self.packed.get(id) {
            Some(p) => Some(p.at(id)),
            None => self.whole.get(&id).map(|m| m.at),
        }
    }

    pub fn is_referenced(&self, id: u64, queue: u64) -> bool {
        match self.packed.get(id) {
            Some(p) => p.queue == queue,
            None => self
                .whole
                .get(&id)
                .is_some_and(|m| m.queues.contains(queue)),
        }
    }

    /// Records message `id`; returns where its previous record was, if any.
    pub fn insert(&mut self, id: u64, m: LiveMessage) -> Option<Live> {
        // A packed copy replaces a packed original in place: removing it first could thin
        // its chunk out of the dense map only to have the copy land in the sparse one.
        match Packed::new(id, &m) {
            Some(p) => match self.packed.insert(id, p) {
                Some(old) => Some(old.at(id)),
                None => self.whole.remove(&id).map(|old| old.at),
            },
            None => {
                let old = self.remove(id).map(|old| old.at);
                self.whole.insert(id, m);
                old
            }
        }
    }

    pub fn remove(&mut self, id: u64) -> Option<LiveMessage> {
        match self.packed.remove(id) {
            Some(p) => Some(p.unpack(id)),
            None => self.whole.remove(&id),
        }
    }

    /// `queue` lets go of message `id`; returns where its record was if no queue is left.
    pub fn dequeue(&mut self, id: u64, queue: u64) -> Option<Live> {
        // A packed message held by another queue is not in `whole` either: the lookup
        // there finds nothing.
        if let Some(p) = self.packed.remove_if(id, |p| p.queue == queue) {
            return Some(p.at(id));
        }
        let m = self.whole.get_mut(&id)?;
        if !m.queues.contains(queue) || !m.queues.remove(queue) {
            return None;
        }
        self.whole.remove(&id).map(|m| m.at)
    }

    /// Keeps only references to queues for which `keep` holds; returns the messages left
    /// without any, now removed.
    pub fn sweep(&mut self, keep: impl Fn(u64) -> bool) -> Vec<(u64, Live)> {
        let mut dead = Vec::new();
        self.packed.retain(|id, p| {
            let live = keep(p.queue);
            if !live {
                dead.push((id, p.at(id)));
            }
            live
        });
        self.whole.retain(|id, m| {
            let live = m.queues.retain(&keep);
            if !live {
                dead.push((*id, m.at));
            }
            live
        });
        dead
    }

    /// Every live message, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (u64, LiveMessage)> + '_ {
        let packed = self.packed.iter().map(|(id, p)| (id, p.unpack(id)));
        let whole = self.whole.iter().map(|(id, m)| (*id, m.clone()));
        packed.chain(whole)
    }

    /// Where every live message's record is.
    pub fn places(&self) -> impl Iterator<Item = Live> + '_ {
        let packed = self.packed.iter().map(|(id, p)| p.at(id));
        packed.chain(self.whole.values().map(|m| m.at))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn live(seq: u64, segment: u64, offset: u64, len: u64, queues: Refs) -> LiveMessage {
        LiveMessage {
            at: Live {
                loc: Loc {
                    segment,
                    offset,
                    len,
                },
                seq,
            },
            queues,
        }
    }

    #[test]
    fn the_usual_entry_is_packed_into_24_bytes() {
        assert_eq!(std::mem::size_of::<Packed>(), 24);
        let mut m = Messages::default();
        m.insert(10, live(10, 3, 4096, 300, Refs::One(2)));
        assert_eq!((m.packed.len(), m.whole.len()), (1, 0));
        let back = m.get(10).unwrap();
        assert_eq!(back.at, live(10, 3, 4096, 300, Refs::One(2)).at);
        assert_eq!(back.queues, Refs::One(2));
    }

    #[test]
    fn what_does_not_fit_is_kept_whole_and_reads_back_the_same() {
        let cases = [
            live(5, 1, 64, 10, Refs::Many(vec![1, 2])),
            live(5, 1 << 33, 64, 10, Refs::One(1)),
            live(5, 1, 1 << 33, 10, Refs::One(1)),
            live(5, 1, 64, 1 << 33, Refs::One(1)),
            live(5 + (1 << 33), 1, 64, 10, Refs::One(1)),
            // Not a frame the journal writes, but it must not read as a free slot.
            live(5, 1, 64, 0, Refs::One(1)),
        ];
        for c in cases {
            let mut m = Messages::default();
            m.insert(5, c.clone());
            assert_eq!((m.packed.len(), m.whole.len()), (0, 1), "{c:?}");
            let back = m.get(5).unwrap();
            assert_eq!((back.at, back.queues), (c.at, c.queues));
        }
    }

    #[test]
    fn a_copy_replaces_the_record_and_a_dequeue_frees_it() {
        let mut m = Messages::default();
        assert_eq!(m.insert(7, live(7, 1, 64, 10, Refs::One(1))), None);
        let old = m.insert(7, live(90, 4, 64, 10, Refs::One(1)));
        assert_eq!(old.map(|l| (l.seq, l.loc.segment)), Some((7, 1)));
        assert_eq!(m.at(7).map(|l| (l.seq, l.loc.segment)), Some((90, 4)));
        assert_eq!(m.dequeue(7, 2), None, "another queue's dequeue");
        assert!(m.is_referenced(7, 1));
        assert_eq!(m.dequeue(7, 1).map(|l| l.seq), Some(90));
        assert!(m.is_empty());
    }

    #[test]
    fn a_message_on_two_queues_lives_until_both_let_go() {
        let mut m = Messages::default();
        m.insert(8, live(8, 1, 64, 10, Refs::Many(vec![1, 2])));
        m.insert(9, live(9, 1, 80, 10, Refs::One(2)));
        assert_eq!(m.dequeue(8, 1), None);
        assert!(!m.is_referenced(8, 1) && m.is_referenced(8, 2));
        let dead = m.sweep(|q| q != 2);
        let mut ids: Vec<u64> = dead.iter().map(|(id, _)| *id).collect();
        ids.sort_unstable();
        assert_eq!(ids, [8, 9]);
        assert!(m.is_empty());
    }

    #[test]
    fn a_dense_run_costs_about_a_packed_entry_per_message() {
        use super::super::dense::SLOTS;
        let per_entry = DenseMap::<Packed>::chunk_size() as f64 / SLOTS as f64;
        assert!(per_entry <= 25.0, "{per_entry} bytes per entry");
    }

    fn one(id: u64, queue: u64) -> LiveMessage {
        live(id, 1, id * 100, 100, Refs::One(queue))
    }

    /// Ids 0..640 on queue 1, then 60..64 alone left in chunk 0: moved to the sparse map.
    fn dense_and_sparse() -> Messages {
        let mut m = Messages::default();
        for id in 0..640 {
            m.insert(id, one(id, 1));
        }
        for id in 0..60 {
            assert_eq!(m.dequeue(id, 1).map(|l| l.seq), Some(id));
        }
        m.packed.check();
        assert_eq!(m.packed.shape(), (9, 4));
        m
    }

    #[test]
    fn a_compacted_copy_replaces_the_record_in_a_chunk_or_the_sparse_map() {
        let mut m = dense_and_sparse();
        for id in [61, 300] {
            let old = m.insert(id, live(id + 5000, 9, 64, 100, Refs::One(1)));
            assert_eq!(old, Some(one(id, 1).at), "{id}");
            assert_eq!(
                m.at(id).map(|l| (l.seq, l.loc.segment)),
                Some((id + 5000, 9))
            );
        }
        assert_eq!(m.packed.shape(), (9, 4), "replaced where they were");
        // A copy that no longer packs moves to `whole`, and back.
        let far = live(62 + (1 << 33), 9, 64, 100, Refs::One(1));
        assert_eq!(m.insert(62, far.clone()), Some(one(62, 1).at));
        assert_eq!((m.packed.shape(), m.whole.len()), ((9, 3), 1));
        assert_eq!(m.insert(62, one(62, 1)), Some(far.at));
        assert_eq!((m.packed.shape(), m.whole.len()), ((9, 4), 0));
        assert_eq!(m.len(), 580);
        m.packed.check();
    }

    #[test]
    fn a_sweep_reaches_chunks_sparse_entries_and_whole_ones() {
        let mut m = dense_and_sparse();
        // Every other message moves to queue 2: chunks keep 32, above the minimum.
        for id in (60..640).step_by(2) {
            m.insert(id, one(id, 2));
        }
        m.insert(700, live(700, 1, 64, 100, Refs::Many(vec![1, 2])));
        m.insert(701, live(701 + (1 << 33), 1, 64, 100, Refs::One(2)));
        let mut dead: Vec<u64> = m.sweep(|q| q != 2).into_iter().map(|(id, _)| id).collect();
        dead.sort_unstable();
        let mut want: Vec<u64> = (60..640).step_by(2).collect();
        want.push(701);
        assert_eq!(dead, want);
        assert_eq!(m.get(700).map(|l| l.queues), Some(Refs::Many(vec![1])));
        m.packed.check();
        assert_eq!(m.packed.shape(), (9, 2));
        // Chunks fall below the minimum: all but the newest move to the sparse map.
        let dead = m.sweep(|q| q != 1);
        assert_eq!(dead.len(), 291);
        assert!(m.is_empty());
        m.packed.check();
        assert_eq!(m.packed.shape(), (1, 0));
    }

    /// splitmix64: deterministic, and no dependency.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        }

        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    /// Compares `m` with the model, entry by entry, and checks the dense map's invariants.
    fn same(m: &Messages, model: &BTreeMap<u64, (Live, Vec<u64>)>) {
        let mut all: Vec<(u64, Live, Vec<u64>)> = m
            .iter()
            .map(|(id, l)| (id, l.at, l.queues.to_vec()))
            .collect();
        all.sort_unstable_by_key(|(id, _, _)| *id);
        let want: Vec<_> = model
            .iter()
            .map(|(id, (at, qs))| (*id, *at, qs.clone()))
            .collect();
        assert_eq!(all, want);
        let mut places: Vec<u64> = m.places().map(|l| l.seq).collect();
        let mut want: Vec<u64> = model.values().map(|(at, _)| at.seq).collect();
        places.sort_unstable();
        want.sort_unstable();
        assert_eq!(places, want);
        assert_eq!(m.len(), model.len());
        m.packed.check();
        for (id, _) in m.whole.iter() {
            assert!(m.packed.get(*id).is_none(), "{id} in both maps");
        }
    }

    #[test]
    fn random_operations_agree_with_a_plain_map() {
        let mut rng = Rng(0x5EED);
        let mut m = Messages::default();
        let mut model: BTreeMap<u64, (Live, Vec<u64>)> = BTreeMap::new();
        let mut next = 0u64;
        let mut seq = 0u64;
        let mut message = |rng: &mut Rng, id: u64| {
            seq += 1;
            let queues = match rng.below(20) {
                0 => vec![1 + rng.below(2), 3 + rng.below(2)],
                _ => vec![1 + rng.below(4)],
            };
            let seq = match rng.below(50) {
                0 => id + (1 << 33),
                _ => id.max(seq),
            };
            let at = Live {
                loc: Loc {
                    segment: 1 + seq / 1000,
                    offset: rng.below(1 << 20),
                    len: 17 + rng.below(1000),
                },
                seq,
            };
            (at, queues)
        };
        for round in 0..200_000u64 {
            // Phases: mostly publishing, mostly consuming, then a mix.
            let publish = match (round / 20_000) % 3 {
                0 => 60,
                1 => 30,
                _ => 45,
            };
            let roll = rng.below(100);
            let low = model.keys().next().copied().unwrap_or(next);
            if roll < publish {
                // A new message, sometimes after a gap in the ids.
                next += if rng.below(10) == 0 {
                    1 + rng.below(300)
                } else {
                    1
                };
                let (at, queues) = message(&mut rng, next);
                let refs = Refs::from_ids(&queues).expect("never empty");
                let old = m.insert(next, LiveMessage { at, queues: refs });
                assert_eq!(old, model.insert(next, (at, queues)).map(|(at, _)| at));
            } else if roll < publish + 8 {
                // A compacted copy of a live message, or recovery meeting an old id.
                let id = low + rng.below(next - low + 1);
                let (at, queues) = message(&mut rng, id);
                let refs = Refs::from_ids(&queues).expect("never empty");
                let old = m.insert(id, LiveMessage { at, queues: refs });
                assert_eq!(
                    old,
                    model.insert(id, (at, queues)).map(|(at, _)| at),
                    "{id}"
                );
            } else if roll < publish + 30 {
                // Consumption: in order, or anywhere, sometimes for the wrong queue.
                let id = if rng.below(2) == 0 {
                    low
                } else {
                    low + rng.below(next - low + 1)
                };
                let queue = match model.get(&id) {
                    Some((_, qs)) if rng.below(5) != 0 => qs[rng.below(qs.len() as u64) as usize],
                    _ => 1 + rng.below(5),
                };
                let want = match model.get_mut(&id) {
                    Some((_, qs)) if qs.contains(&queue) => {
                        qs.retain(|q| *q != queue);
                        if qs.is_empty() {
                            model.remove(&id).map(|(at, _)| at)
                        } else {
                            None
                        }
                    }
                    _ => None,
                };
                assert_eq!(m.dequeue(id, queue), want, "dequeue {id} from {queue}");
            } else if roll < publish + 38 {
                let id = low + rng.below(next - low + 1);
                let got = m.remove(id).map(|l| (l.at, l.queues.to_vec()));
                assert_eq!(got, model.remove(&id), "remove {id}");
            } else if roll < publish + 39 && rng.below(10) == 0 {
                // A queue deleted.
                let gone = 1 + rng.below(5);
                let mut dead: Vec<(u64, u64)> = m
                    .sweep(|q| q != gone)
                    .into_iter()
                    .map(|(id, at)| (id, at.seq))
                    .collect();
                dead.sort_unstable();
                let mut want = Vec::new();
                model.retain(|id, (at, qs)| {
                    qs.retain(|q| *q != gone);
                    if qs.is_empty() {
                        want.push((*id, at.seq));
                    }
                    !qs.is_empty()
                });
                assert_eq!(dead, want, "sweep of {gone}");
            } else {
                let id = low + rng.below(next - low + 1);
                let want = model.get(&id);
                assert_eq!(m.at(id), want.map(|(at, _)| *at), "at {id}");
                for queue in 1..=5 {
                    let held = want.is_some_and(|(_, qs)| qs.contains(&queue));
                    assert_eq!(m.is_referenced(id, queue), held, "{id} on {queue}");
                }
            }
            if round % 2000 == 0 {
                same(&m, &model);
            }
        }
        same(&m, &model);
        // The run must have reached both places in the dense map.
        let (chunks, sparse) = m.packed.shape();
        assert!(
            chunks > 10 && sparse > 10,
            "{chunks} chunks, {sparse} sparse"
        );
    }
}
