//! Bookkeeping for the commands the broker sends on one session: each gets the next command
//! id, and message transfers keep a record until the client has both completed them (window
//! credit comes back on completion) and settled them (accept/reject/release).

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use ferry_core::{ConsumerId, Message, Queue};

/// What the session remembers about one message transfer it sent.
pub struct DeliveryRecord {
    pub consumer: ConsumerId,
    pub position: u64,
    /// `None` once the message is settled (accepted, rejected, released, or implicitly
    /// accepted because the subscription said accept-mode none).
    pub unsettled: Option<Outstanding>,
    pub acquired: bool,
    /// Byte size charged against window credit, returned when the client completes it.
    pub credit_bytes: u32,
    pub window_credit: bool,
    pub completed: bool,
    /// Holds a slot of the session's settlement window until finished.
    pub windowed: bool,
}

/// A transferred message not yet settled, and the queue it is settled on. A settled record
/// keeps no handle to its queue: counting one for every message, on the consumer's worker,
/// moved the queue's count between the cores (the publisher's dispatch counts it too).
pub struct Outstanding {
    pub queue: Arc<Queue>,
    pub message: Message,
}

impl DeliveryRecord {
    fn finished(&self) -> bool {
        self.completed && self.unsettled.is_none()
    }
}

/// Outgoing command ids and the records of unfinished transfers, indexed by id.
///
/// Records live in a deque indexed by id offset, so recording a transfer and finding it again
/// cost O(1). A transfer the peer never finishes (one message held while thousands after it
/// are settled) would keep every slot after it; once the deque is mostly finished slots, the
/// unfinished records at its front move to `holdouts` and the finished run behind them is
/// dropped, so memory follows the unfinished records, not the span of ids since the oldest.
#[derive(Default)]
pub struct Outgoing {
    /// Id of the first slot in `slots`; ids before it are finished or in `holdouts`.
    base: u32,
    /// `base` counted without wrapping (`base == base_abs as u32`): the key space of
    /// `holdouts`.
    base_abs: u64,
    /// One slot per command id from `base`; `None` for commands that need no record
    /// (execution.result, execution.exception) or whose record is finished.
    slots: VecDeque<Option<DeliveryRecord>>,
    /// Unfinished records in `slots`.
    live: usize,
    /// Unfinished records from before `base`, by unwrapped id.
    holdouts: BTreeMap<u64, DeliveryRecord>,
    /// Windowed transfer records finished since [`Outgoing::take_finished`] was last called.
    finished: u32,
}

/// Finished slots the deque may hold beyond twice its unfinished records before the oldest
/// unfinished ones move out of the way.
const SPARSE_SLOTS: usize = 4096;

impl Outgoing {
    /// The id the next outgoing command will carry.
    pub fn next_id(&self) -> u32 {
        self.base.wrapping_add(self.slots.len() as u32)
    }

    /// Transfers sent and not yet both completed and settled.
    pub fn unfinished(&self) -> usize {
        self.live + self.holdouts.len()
    }

    /// Allocates an id for a command that needs no record.
    pub fn push_plain(&mut self) -> u32 {
        let id = self.next_id();
        self.slots.push_back(None);
        self.trim();
        id
    }

    pub fn push_transfer(&mut self, record: DeliveryRecord) -> u32 {
        let id = self.next_id();
        self.slots.push_back(Some(record));
        self.live += 1;
        self.compact_if_sparse();
        id
    }

    fn index(&self, id: u32) -> Option<usize> {
        let offset = id.wrapping_sub(self.base) as usize;
        (offset < self.slots.len()).then_some(offset)
    }

    /// The unwrapped id of `id` if it is before `base` (serial arithmetic: within half the id
    /// space behind it).
    fn behind(&self, id: u32) -> Option<u64> {
        let distance = u64::from(self.base.wrapping_sub(id));
        (distance > 0 && distance <= u64::from(u32::MAX / 2) && distance <= self.base_abs)
            .then(|| self.base_abs - distance)
    }

    pub fn get_mut(&mut self, id: u32) -> Option<&mut DeliveryRecord> {
        match self.index(id) {
            Some(index) => self.slots.get_mut(index)?.as_mut(),
            None => {
                let abs = self.behind(id)?;
                self.holdouts.get_mut(&abs)
            }
        }
    }

    /// Forgets the finished record `id`, counting its window slot.
    fn forget(&mut self, id: u32, windowed: bool) {
        match self.index(id) {
            Some(index) => {
                if self.slots[index].take().is_some() {
                    self.live -= 1;
                }
            }
            None => {
                if let Some(abs) = self.behind(id) {
                    self.holdouts.remove(&abs);
                }
            }
        }
        self.finished += u32::from(windowed);
    }

    /// Marks `id` completed by the peer; returns the consumer and bytes whose window
    /// credit should be restored, if the transfer was sent under window flow.
    pub fn complete(&mut self, id: u32) -> Option<(ConsumerId, u32)> {
        let record = self.get_mut(id)?;
        if record.completed {
            return None;
        }
        record.completed = true;
        let refund = record
            .window_credit
            .then_some((record.consumer, record.credit_bytes));
        if record.finished() {
            let windowed = record.windowed;
            self.forget(id, windowed);
        }
        refund
    }

    /// The ids of `lo..=hi` that still have records or slots: peers repeat cumulative
    /// completion sets, so walking every id of a wide range each time would cost more than
    /// the window holds.
    pub fn live_ids(&self, lo: u32, hi: u32) -> impl Iterator<Item = u32> {
        let base = self.base;
        let len = self.slots.len() as u32;
        // Work in offsets from base. A range that wraps in offset space started behind base.
        let (start, end) = (lo.wrapping_sub(base), hi.wrapping_sub(base));
        let span = match (start <= end, len) {
            (_, 0) => None,
            (true, _) if start < len => Some((start, end.min(len - 1))),
            (true, _) => None,
            (false, _) => Some((0, end.min(len - 1))),
        };
        // Holdouts in range: the range starts behind base and runs up to hi, or to base.
        let held: Vec<u32> = match self.behind(lo) {
            Some(first) if !self.holdouts.is_empty() => {
                let last = self.behind(hi).unwrap_or(self.base_abs.saturating_sub(1));
                self.holdouts
                    .range(first..=last.max(first))
                    .map(|(abs, _)| *abs as u32)
                    .collect()
            }
            _ => Vec::new(),
        };
        held.into_iter().chain(
            span.into_iter()
                .flat_map(|(first, last)| first..=last)
                .map(move |offset| base.wrapping_add(offset)),
        )
    }

    /// Takes the message out of an unsettled record so the caller can settle it.
    pub fn settle(&mut self, id: u32) -> Option<(Arc<Queue>, u64, Message, bool)> {
        let record = self.get_mut(id)?;
        let Outstanding { queue, message } = record.unsettled.take()?;
        let settled = (queue, record.position, message, record.acquired);
        if record.finished() {
            let windowed = record.windowed;
            self.forget(id, windowed);
        }
        Some(settled)
    }

    /// How many windowed transfer records finished since the last call.
    pub fn take_finished(&mut self) -> u32 {
        std::mem::take(&mut self.finished)
    }

    /// Drops finished slots from the front so memory follows the unsettled window only.
    pub fn trim(&mut self) {
        // Popping a finished slot and advancing `base` together keeps next_id() unchanged.
        while let Some(None) = self.slots.front() {
            self.advance();
        }
        self.compact_if_sparse();
    }

    fn advance(&mut self) -> Option<Option<DeliveryRecord>> {
        let slot = self.slots.pop_front()?;
        self.base = self.base.wrapping_add(1);
        self.base_abs += 1;
        Some(slot)
    }

    /// When finished slots dominate, moves the unfinished records at the front to `holdouts`
    /// and drops the finished slots after them.
    #[inline]
    fn compact_if_sparse(&mut self) {
        if self.slots.len() >= 2 * self.live + 2 * SPARSE_SLOTS {
            self.compact();
        }
    }

    #[cold]
    fn compact(&mut self) {
        while self.slots.len() > 2 * self.live + SPARSE_SLOTS {
            let abs = self.base_abs;
            match self.advance() {
                Some(Some(record)) => {
                    self.live -= 1;
                    self.holdouts.insert(abs, record);
                }
                Some(None) => {}
                None => break,
            }
        }
    }

    /// Every record that still holds a message, in id order (session end: release them).
    pub fn drain_unsettled(&mut self) -> Vec<DeliveryRecord> {
        let held = std::mem::take(&mut self.holdouts).into_values();
        let drained: Vec<DeliveryRecord> = held
            .chain(self.slots.iter_mut().filter_map(|slot| slot.take()))
            .filter(|r| r.unsettled.is_some())
            .collect();
        self.live = 0;
        self.trim();
        drained
    }

    /// Slots and held-out records kept now (tests: memory follows unfinished records).
    #[cfg(test)]
    fn kept(&self) -> usize {
        self.slots.len() + self.holdouts.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use ferry_core::{Broker, BrokerConfig, QueueOptions};

    fn record(queue: &Arc<Queue>, position: u64, window: bool) -> DeliveryRecord {
        DeliveryRecord {
            consumer: 7,
            position,
            unsettled: Some(Outstanding {
                queue: queue.clone(),
                message: Message::new("", "q", Bytes::from_static(b"m")),
            }),
            acquired: true,
            credit_bytes: 10,
            window_credit: window,
            completed: false,
            windowed: true,
        }
    }

    fn queue() -> Arc<Queue> {
        let broker = Broker::new(BrokerConfig::default());
        broker
            .declare_queue("q", QueueOptions::default(), false, 1)
            .unwrap()
            .0
    }

    #[test]
    fn ids_count_every_outgoing_command() {
        let q = queue();
        let mut out = Outgoing::default();
        assert_eq!(out.push_plain(), 0);
        assert_eq!(out.push_transfer(record(&q, 1, false)), 1);
        assert_eq!(out.push_plain(), 2);
        assert_eq!(out.next_id(), 3);
    }

    #[test]
    fn records_are_forgotten_only_when_completed_and_settled() {
        let q = queue();
        let mut out = Outgoing::default();
        let a = out.push_transfer(record(&q, 1, true));
        let b = out.push_transfer(record(&q, 2, false));
        assert_eq!(out.complete(a), Some((7, 10)));
        assert_eq!(out.complete(a), None, "window credit is refunded once");
        assert_eq!(out.complete(b), None, "credit mode refunds nothing");
        assert!(out.get_mut(a).is_some(), "completed but unsettled stays");
        assert_eq!(out.take_finished(), 0);
        assert!(out.settle(a).is_some());
        assert!(out.settle(a).is_none(), "settling twice yields nothing");
        assert_eq!(
            out.take_finished(),
            1,
            "a finished record frees its window slot once"
        );
        assert_eq!(out.take_finished(), 0);
        out.trim();
        assert!(out.get_mut(a).is_none());
        assert!(out.get_mut(b).is_some());
        assert_eq!(out.next_id(), 2, "trimming keeps numbering");
    }

    #[test]
    fn drain_returns_unsettled_in_id_order() {
        let q = queue();
        let mut out = Outgoing::default();
        out.push_transfer(record(&q, 5, false));
        out.push_plain();
        let settled = out.push_transfer(record(&q, 6, false));
        out.push_transfer(record(&q, 7, false));
        out.settle(settled);
        let positions: Vec<u64> = out.drain_unsettled().iter().map(|r| r.position).collect();
        assert_eq!(positions, [5, 7]);
        assert_eq!(out.next_id(), 4);
    }

    #[test]
    fn live_ids_clamp_ranges_to_the_window() {
        let q = queue();
        let mut out = Outgoing::default();
        for p in 0..5 {
            out.push_transfer(record(&q, p, false));
        }
        out.settle(0);
        out.complete(0);
        out.trim();
        // Window is ids 1..=4.
        assert_eq!(out.live_ids(0, 1_000_000).collect::<Vec<_>>(), [1, 2, 3, 4]);
        assert_eq!(out.live_ids(3, 3).collect::<Vec<_>>(), [3]);
        assert_eq!(out.live_ids(5, 9).count(), 0);
        assert_eq!(out.live_ids(u32::MAX - 3, 2).collect::<Vec<_>>(), [1, 2]);
        assert_eq!(Outgoing::default().live_ids(0, 10).count(), 0);
    }

    #[test]
    fn unknown_ids_are_ignored() {
        let mut out = Outgoing::default();
        assert!(out.complete(42).is_none());
        assert!(out.settle(u32::MAX).is_none());
    }

    #[test]
    fn a_transfer_never_finished_does_not_hold_the_slots_after_it() {
        let q = queue();
        let mut out = Outgoing::default();
        let held = out.push_transfer(record(&q, 0, false));
        for p in 1..100_000 {
            let id = out.push_transfer(record(&q, p, false));
            out.complete(id);
            assert!(out.settle(id).is_some());
            out.push_plain();
            out.trim();
        }
        assert!(out.kept() < 3 * SPARSE_SLOTS, "kept {}", out.kept());
        // The held transfer is still found by its id, completed and settled.
        assert!(out.get_mut(held).is_some());
        assert_eq!(out.live_ids(0, 5).collect::<Vec<_>>(), [held]);
        assert!(out.complete(held).is_none(), "credit mode refunds nothing");
        assert!(out.settle(held).is_some());
        assert!(out.get_mut(held).is_none());
        assert_eq!(out.next_id(), 200_000 - 1, "numbering is unchanged");
    }

    #[test]
    fn held_out_records_drain_first_and_in_order() {
        let q = queue();
        let mut out = Outgoing::default();
        out.push_transfer(record(&q, 1, false));
        out.push_transfer(record(&q, 2, false));
        for p in 3..(3 * SPARSE_SLOTS as u64) {
            let id = out.push_transfer(record(&q, p, false));
            out.complete(id);
            out.settle(id);
        }
        let last = out.push_transfer(record(&q, 99_999, false));
        assert!(out.holdouts.len() == 2, "the two oldest were moved out");
        let positions: Vec<u64> = out.drain_unsettled().iter().map(|r| r.position).collect();
        assert_eq!(positions, [1, 2, 99_999]);
        assert!(out.get_mut(last).is_none());
        assert_eq!(out.kept(), 0);
    }

    #[test]
    fn ids_behind_base_resolve_across_the_wrap() {
        let q = queue();
        // As after 2^32 + 2^32 - 11 commands: base is always base_abs modulo 2^32.
        let start = (1u64 << 32) + u64::from(u32::MAX - 10);
        let mut out = Outgoing {
            base: start as u32,
            base_abs: start,
            ..Outgoing::default()
        };
        let held = out.push_transfer(record(&q, 1, false));
        for p in 0..(3 * SPARSE_SLOTS as u64) {
            let id = out.push_transfer(record(&q, p + 2, false));
            out.complete(id);
            out.settle(id);
        }
        assert!(out.holdouts.contains_key(&start));
        assert!(out.get_mut(held).is_some());
        assert_eq!(out.live_ids(held, held.wrapping_add(3)).next(), Some(held));
        assert!(out.settle(held).is_some());
    }
}
