//! The deliveries a session sent and the client has not settled, by delivery id.
//!
//! Delivery ids are serial numbers that wrap; records are kept under an unwrapped count, so
//! a range the client settles is a range of the map, and a client naming ids it was never
//! sent (or the whole id space) costs only the records that exist. Each link's ids are
//! indexed too, so a detach costs that link's records, not the session's.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use ferry_core::{Message, Queue};

use crate::fast_map::FastMap;

/// What the session remembers of one unsettled delivery.
#[derive(Debug)]
pub struct OutRecord {
    /// The sending link (its handle).
    pub handle: u32,
    pub queue: Arc<Queue>,
    pub position: u64,
    pub message: Message,
    /// False for browsed messages, which stay on their queue whatever the outcome.
    pub acquired: bool,
}

#[derive(Debug, Default)]
pub struct Unsettled {
    /// Unwrapped id of the next delivery.
    next: u64,
    records: BTreeMap<u64, OutRecord>,
    /// The unwrapped ids of each link's records (by handle).
    by_link: FastMap<u32, BTreeSet<u64>>,
}

impl Unsettled {
    /// Numbers the next delivery (settled ones too: ids are per session).
    pub fn assign(&mut self) -> u32 {
        let id = self.next as u32;
        self.next += 1;
        id
    }

    /// Records delivery `id`, just assigned.
    pub fn insert(&mut self, id: u32, record: OutRecord) {
        if let Some(abs) = self.unwrap(id) {
            self.by_link.entry(record.handle).or_default().insert(abs);
            if let Some(old) = self.records.insert(abs, record) {
                self.unindex(old.handle, abs);
            }
        }
    }

    fn unindex(&mut self, handle: u32, abs: u64) {
        if let Some(ids) = self.by_link.get_mut(&handle) {
            ids.remove(&abs);
            if ids.is_empty() {
                self.by_link.remove(&handle);
            }
        }
    }

    /// The unwrapped id of an id already assigned (within half the id space behind).
    fn unwrap(&self, id: u32) -> Option<u64> {
        let distance = u64::from((self.next as u32).wrapping_sub(id));
        (distance > 0 && distance <= 1 << 31 && distance <= self.next).then(|| self.next - distance)
    }

    /// Takes the records of `first..=last` (a disposition's range).
    pub fn take_range(&mut self, first: u32, last: u32) -> Vec<(u32, OutRecord)> {
        let Some(lo) = self.unwrap(first) else {
            return Vec::new();
        };
        // A range running past the last id sent stops there.
        let hi = self
            .unwrap(last)
            .filter(|hi| *hi >= lo)
            .unwrap_or(self.next.saturating_sub(1));
        let ids: Vec<u64> = self.records.range(lo..=hi).map(|(k, _)| *k).collect();
        let mut taken = Vec::with_capacity(ids.len());
        for k in ids {
            if let Some(r) = self.records.remove(&k) {
                self.unindex(r.handle, k);
                taken.push((k as u32, r));
            }
        }
        taken
    }

    /// Takes every record of link `handle` (the link detached).
    pub fn take_link(&mut self, handle: u32) -> Vec<OutRecord> {
        let ids = self.by_link.remove(&handle).unwrap_or_default();
        ids.into_iter()
            .filter_map(|k| self.records.remove(&k))
            .collect()
    }

    /// Takes every record (the session ended), by link, in one pass.
    pub fn take_all(&mut self) -> FastMap<u32, Vec<OutRecord>> {
        self.by_link.clear();
        let mut by_link: FastMap<u32, Vec<OutRecord>> = FastMap::default();
        for r in std::mem::take(&mut self.records).into_values() {
            by_link.entry(r.handle).or_default().push(r);
        }
        by_link
    }

    pub fn len(&self) -> usize {
        self.records.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use ferry_core::{Broker, BrokerConfig, QueueOptions};

    fn record(handle: u32, position: u64) -> OutRecord {
        let broker = Broker::new(BrokerConfig::default());
        let (queue, _) = broker
            .declare_queue("q", QueueOptions::default(), false, 1)
            .unwrap();
        OutRecord {
            handle,
            queue,
            position,
            message: Message::new("", "q", Bytes::new()),
            acquired: true,
        }
    }

    fn positions(v: &[(u32, OutRecord)]) -> Vec<u64> {
        v.iter().map(|(_, r)| r.position).collect()
    }

    #[test]
    fn ranges_take_what_exists_and_nothing_twice() {
        let mut u = Unsettled::default();
        for p in 0..5 {
            let id = u.assign();
            if p != 2 {
                u.insert(id, record(p as u32 % 2, p));
            }
        }
        assert_eq!(positions(&u.take_range(1, 3)), [1, 3]);
        assert!(u.take_range(1, 3).is_empty());
        assert_eq!(
            positions(&u.take_range(4, 1_000_000)),
            [4],
            "clamped to what was sent"
        );
        assert!(u.take_range(9, 9).is_empty(), "never sent");
        assert_eq!(u.len(), 1);
        assert!(u.take_link(1).is_empty(), "link 1's were settled");
        assert_eq!(u.take_link(0).len(), 1);
        assert_eq!(u.len(), 0);
        assert!(u.by_link.is_empty(), "the index keeps no settled ids");
    }

    #[test]
    fn ending_takes_every_record_by_link() {
        let mut u = Unsettled::default();
        for p in 0..6 {
            let id = u.assign();
            u.insert(id, record(p as u32 % 3, p));
        }
        let mut all = u.take_all();
        let mut of = |h| {
            let mut v: Vec<u64> = all.remove(&h).unwrap().iter().map(|r| r.position).collect();
            v.sort_unstable();
            v
        };
        assert_eq!((of(0), of(1), of(2)), (vec![0, 3], vec![1, 4], vec![2, 5]));
        assert_eq!(u.len(), 0);
        assert!(u.take_link(0).is_empty());
    }

    #[test]
    fn ids_wrap() {
        let mut u = Unsettled {
            next: u64::from(u32::MAX) - 1,
            ..Unsettled::default()
        };
        for p in 0..4 {
            let id = u.assign();
            u.insert(id, record(0, p));
        }
        // Ids u32::MAX-1, u32::MAX, 0, 1.
        assert_eq!(positions(&u.take_range(u32::MAX, 0)), [1, 2]);
        assert_eq!(u.take_all()[&0].len(), 2);
    }
}
