//! The index's per-message entries, one per live persistent message: with a deep queue this
//! is the store's whole memory cost per message, so the usual entry is packed into 24 bytes
//! (a `LiveMessage` takes 56). A message held by one queue whose place fits in 32-bit
//! fields (every message but a huge one, or one copied forward some four billion frames
//! after it was first written) is packed; any other is kept whole beside the packed ones.

use ferry_core::IdMap;

use super::{Live, LiveMessage, Loc, Refs};

/// A message record's place and its one queue, in 24 bytes.
#[derive(Debug, Clone, Copy)]
struct Packed {
    queue: u64,
    segment: u32,
    offset: u32,
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
            len: u32::try_from(m.at.loc.len).ok()?,
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

/// Live messages by id.
#[derive(Debug, Default)]
pub struct Messages {
    packed: IdMap<Packed>,
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
        match self.packed.get(&id) {
            Some(p) => Some(p.unpack(id)),
            None => self.whole.get(&id).cloned(),
        }
    }

    /// Where message `id`'s record is.
    pub fn at(&self, id: u64) -> Option<Live> {
        match self.packed.get(&id) {
            Some(p) => Some(p.at(id)),
            None => self.whole.get(&id).map(|m| m.at),
        }
    }

    pub fn is_referenced(&self, id: u64, queue: u64) -> bool {
        match self.packed.get(&id) {
            Some(p) => p.queue == queue,
            None => self
                .whole
                .get(&id)
                .is_some_and(|m| m.queues.contains(queue)),
        }
    }

    /// Records message `id`; returns where its previous record was, if any.
    pub fn insert(&mut self, id: u64, m: LiveMessage) -> Option<Live> {
        let old = self.remove(id).map(|old| old.at);
        match Packed::new(id, &m) {
            Some(p) => {
                self.packed.insert(id, p);
            }
            None => {
                self.whole.insert(id, m);
            }
        }
        old
    }

    pub fn remove(&mut self, id: u64) -> Option<LiveMessage> {
        match self.packed.remove(&id) {
            Some(p) => Some(p.unpack(id)),
            None => self.whole.remove(&id),
        }
    }

    /// `queue` lets go of message `id`; returns where its record was if no queue is left.
    pub fn dequeue(&mut self, id: u64, queue: u64) -> Option<Live> {
        if let Some(p) = self.packed.get(&id) {
            if p.queue != queue {
                return None;
            }
            return self.packed.remove(&id).map(|p| p.at(id));
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
                dead.push((*id, p.at(*id)));
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
        let packed = self.packed.iter().map(|(id, p)| (*id, p.unpack(*id)));
        let whole = self.whole.iter().map(|(id, m)| (*id, m.clone()));
        packed.chain(whole)
    }

    /// Where every live message's record is.
    pub fn places(&self) -> impl Iterator<Item = Live> + '_ {
        let packed = self.packed.iter().map(|(id, p)| p.at(*id));
        packed.chain(self.whole.values().map(|m| m.at))
    }
}

#[cfg(test)]
mod tests {
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
}
