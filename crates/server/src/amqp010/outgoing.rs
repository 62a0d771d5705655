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

/// Unwrapped ids held as ranges (first → last), so that finding those in a span costs
/// the ranges found and a search, not the span.
///
/// The first range is kept apart from the map: ids are pushed in order and mostly removed
/// in order (completed and settled as they were sent), so in the common case every id is
/// in that one range, and a push or a removal is a comparison and a store rather than a
/// tree operation for every transfer.
#[derive(Default)]
struct IdRanges {
    /// The first range; `None` only when there are no ids at all.
    head: Option<(u64, u64)>,
    /// The ranges after `head`, first → last.
    rest: BTreeMap<u64, u64>,
}

impl IdRanges {
    fn is_empty(&self) -> bool {
        self.head.is_none()
    }

    /// Adds `id`, which lies after every member (ids are handed out in order).
    fn push(&mut self, id: u64) {
        if let Some(mut last) = self.rest.last_entry() {
            if *last.get() + 1 == id {
                *last.get_mut() = id;
            } else {
                self.rest.insert(id, id);
            }
            return;
        }
        match &mut self.head {
            Some((_, last)) if *last + 1 == id => *last = id,
            Some(_) => {
                self.rest.insert(id, id);
            }
            None => self.head = Some((id, id)),
        }
    }

    fn remove(&mut self, id: u64) {
        let Some((first, last)) = self.head else {
            return;
        };
        if (first..=last).contains(&id) {
            if first == last {
                self.head = self.rest.pop_first();
            } else if id == first {
                self.head = Some((first + 1, last));
            } else if id == last {
                self.head = Some((first, last - 1));
            } else {
                self.head = Some((first, id - 1));
                self.rest.insert(id + 1, last);
            }
            return;
        }
        let Some((&first, &last)) = self.rest.range(..=id).next_back() else {
            return;
        };
        if last < id {
            return;
        }
        if first < id {
            self.rest.insert(first, id - 1);
        } else {
            self.rest.remove(&first);
        }
        if id < last {
            self.rest.insert(id + 1, last);
        }
    }

    /// The members in `lo..=hi`, as ranges.
    fn within(&self, lo: u64, hi: u64) -> Vec<(u64, u64)> {
        let straddling = self
            .rest
            .range(..lo)
            .next_back()
            .filter(|(_, &last)| last >= lo)
            .map(|(&first, &last)| (first, last));
        self.head
            .into_iter()
            .chain(straddling)
            .chain(
                self.rest
                    .range(lo..=hi)
                    .map(|(&first, &last)| (first, last)),
            )
            .filter(|&(first, last)| first <= hi && last >= lo)
            .map(|(first, last)| (first.max(lo), last.min(hi)))
            .collect()
    }

    fn clear(&mut self) {
        self.head = None;
        self.rest.clear();
    }
}

/// What a command over a range of transfers may still do to a record: each kind keeps the
/// ids it applies to, so a command repeated over the whole window (every completed, settled
/// or acquired transfer again) finds nothing to walk instead of walking every record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pending {
    /// Not yet completed by the peer (session.completed).
    Completion,
    /// Not yet settled (accept, reject, release).
    Settlement,
    /// Sent unacquired and still unsettled (message.acquire).
    Acquisition,
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
    /// The records each [`Pending`] kind applies to, by unwrapped id.
    uncompleted: IdRanges,
    unsettled: IdRanges,
    unacquired: IdRanges,
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
        let abs = self.base_abs + self.slots.len() as u64;
        if !record.completed {
            self.uncompleted.push(abs);
        }
        if record.unsettled.is_some() {
            self.unsettled.push(abs);
            if !record.acquired {
                self.unacquired.push(abs);
            }
        }
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

    /// The unwrapped id of `id`, if it is in the window or held out.
    fn abs(&self, id: u32) -> Option<u64> {
        match self.index(id) {
            Some(offset) => Some(self.base_abs + offset as u64),
            None => self.behind(id),
        }
    }

    pub fn get(&self, id: u32) -> Option<&DeliveryRecord> {
        match self.index(id) {
            Some(index) => self.slots.get(index)?.as_ref(),
            None => self.holdouts.get(&self.behind(id)?),
        }
    }

    fn get_mut(&mut self, id: u32) -> Option<&mut DeliveryRecord> {
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
        let abs = self.abs(id)?;
        let record = self.get_mut(id)?;
        if record.completed {
            return None;
        }
        record.completed = true;
        let refund = record
            .window_credit
            .then_some((record.consumer, record.credit_bytes));
        let (finished, windowed) = (record.finished(), record.windowed);
        self.uncompleted.remove(abs);
        if finished {
            self.forget(id, windowed);
        }
        refund
    }

    /// The ids in `lo..=hi` (a peer's range: it may span the whole id space) of records
    /// still pending `what`, in order. Costs a search and the ids found, not the span.
    pub fn pending(&self, what: Pending, lo: u32, hi: u32) -> impl Iterator<Item = u32> {
        self.pending_ranges(what, lo, hi)
            .into_iter()
            .flat_map(|(first, last)| first..=last)
            .map(|abs| abs as u32)
    }

    /// As [`Outgoing::pending`], as ranges of unwrapped ids.
    pub fn pending_ranges(&self, what: Pending, lo: u32, hi: u32) -> Vec<(u64, u64)> {
        let ids = match what {
            Pending::Completion => &self.uncompleted,
            Pending::Settlement => &self.unsettled,
            Pending::Acquisition => &self.unacquired,
        };
        match self.abs_range(lo, hi) {
            Some((first, last)) if !ids.is_empty() => ids.within(first, last),
            _ => Vec::new(),
        }
    }

    /// `lo..=hi` as unwrapped ids, cut to the ids sent so far; `None` if it holds none.
    fn abs_range(&self, lo: u32, hi: u32) -> Option<(u64, u64)> {
        let next = self.next_id();
        let next_abs = self.base_abs + self.slots.len() as u64;
        // How far an id lies behind the next one, if it was sent (serial arithmetic: at
        // most half the id space back); any other id is yet to be sent.
        let back = |id: u32| {
            let distance = u64::from(next.wrapping_sub(id));
            (1..=1 << 31).contains(&distance).then_some(distance)
        };
        let last = match back(hi) {
            Some(distance) => next_abs.checked_sub(distance)?,
            None => next_abs.checked_sub(1)?,
        };
        let first = match (back(lo), back(hi)) {
            (Some(distance), _) => next_abs.saturating_sub(distance),
            // A range starting beyond the next id and wrapping round to ids sent long ago.
            (None, Some(_)) => next_abs.saturating_sub(1 << 31),
            (None, None) => return None,
        };
        (first <= last).then_some((first, last))
    }

    /// Records that message.acquire took the message of transfer `id`.
    pub fn acquired(&mut self, id: u32) {
        if let Some(record) = self.get_mut(id) {
            record.acquired = true;
        }
        if let Some(abs) = self.abs(id) {
            self.unacquired.remove(abs);
        }
    }

    /// Takes the message out of an unsettled record so the caller can settle it.
    pub fn settle(&mut self, id: u32) -> Option<(Arc<Queue>, u64, Message, bool)> {
        let abs = self.abs(id)?;
        let record = self.get_mut(id)?;
        let Outstanding { queue, message } = record.unsettled.take()?;
        let settled = (queue, record.position, message, record.acquired);
        let (finished, windowed) = (record.finished(), record.windowed);
        self.unsettled.remove(abs);
        self.unacquired.remove(abs);
        if finished {
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
        self.uncompleted.clear();
        self.unsettled.clear();
        self.unacquired.clear();
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
    fn pending_ids_clamp_ranges_to_the_window() {
        let q = queue();
        let mut out = Outgoing::default();
        for p in 0..5 {
            out.push_transfer(record(&q, p, false));
        }
        out.settle(0);
        out.complete(0);
        out.trim();
        // Window is ids 1..=4.
        assert_eq!(
            out.pending(Pending::Settlement, 0, 1_000_000)
                .collect::<Vec<_>>(),
            [1, 2, 3, 4]
        );
        assert_eq!(
            out.pending(Pending::Settlement, 3, 3).collect::<Vec<_>>(),
            [3]
        );
        assert_eq!(out.pending(Pending::Settlement, 5, 9).count(), 0);
        assert_eq!(
            out.pending(Pending::Settlement, u32::MAX - 3, 2)
                .collect::<Vec<_>>(),
            [1, 2]
        );
        assert_eq!(
            Outgoing::default()
                .pending(Pending::Settlement, 0, 10)
                .count(),
            0
        );
    }

    /// The review's case: a window of transfers completed (or acquired) already, and a
    /// peer repeating session.completed or message.acquire over the whole id space. The old
    /// walk yielded every slot of the window each time; now it yields what is left to do.
    #[test]
    fn a_range_walk_yields_only_records_still_pending() {
        let q = queue();
        let mut out = Outgoing::default();
        let n = 10_000u32;
        for p in 0..n {
            let mut r = record(&q, u64::from(p), false);
            r.acquired = p % 2 == 0;
            out.push_transfer(r);
            if p % 1000 == 999 {
                out.push_plain();
            }
        }
        let everything = |out: &Outgoing, what| out.pending(what, 0, u32::MAX / 2).count();
        assert_eq!(everything(&out, Pending::Completion), n as usize);
        assert_eq!(everything(&out, Pending::Acquisition), n as usize / 2);
        let all: Vec<u32> = out.pending(Pending::Completion, 0, u32::MAX / 2).collect();
        for id in all {
            out.complete(id);
        }
        assert_eq!(everything(&out, Pending::Completion), 0);
        assert_eq!(everything(&out, Pending::Settlement), n as usize);
        // Acquiring and settling take ids out of what is pending for each.
        let unacquired: Vec<u32> = out.pending(Pending::Acquisition, 0, 20).collect();
        assert_eq!(unacquired, [1, 3, 5, 7, 9, 11, 13, 15, 17, 19]);
        out.acquired(3);
        assert_eq!(
            out.pending(Pending::Acquisition, 2, 5).collect::<Vec<_>>(),
            [5]
        );
        assert!(out.settle(5).is_some());
        assert_eq!(out.pending(Pending::Acquisition, 2, 6).count(), 0);
        assert_eq!(
            out.pending(Pending::Settlement, 4, 6).collect::<Vec<_>>(),
            [4, 6]
        );
        // Completed and settled: gone from every set and from the window.
        for id in out
            .pending(Pending::Settlement, 0, u32::MAX / 2)
            .collect::<Vec<_>>()
        {
            out.settle(id);
        }
        out.trim();
        for what in [
            Pending::Completion,
            Pending::Settlement,
            Pending::Acquisition,
        ] {
            assert_eq!(everything(&out, what), 0);
        }
        assert_eq!(out.kept(), 0);
    }

    #[test]
    fn id_ranges_split_and_join() {
        let mut ids = IdRanges::default();
        for id in [1, 2, 3, 5, 6, 9] {
            ids.push(id);
        }
        assert_eq!(ids.within(0, 100), [(1, 3), (5, 6), (9, 9)]);
        ids.remove(2);
        ids.remove(5);
        ids.remove(9);
        ids.remove(42);
        assert_eq!(ids.within(0, 100), [(1, 1), (3, 3), (6, 6)]);
        assert_eq!(ids.within(3, 6), [(3, 3), (6, 6)]);
        ids.push(7);
        assert_eq!(ids.within(2, 7), [(3, 3), (6, 7)]);
        assert_eq!(ids.within(7, 7), [(7, 7)]);
        assert!(ids.within(8, 100).is_empty());
        // Emptied from the front, the next range becomes the first.
        ids.remove(1);
        ids.remove(3);
        assert_eq!(ids.within(0, 100), [(6, 7)]);
        ids.remove(6);
        ids.remove(7);
        assert!(ids.is_empty());
        assert!(ids.within(0, 100).is_empty());
        ids.push(20);
        assert_eq!(ids.within(0, 100), [(20, 20)]);
    }

    #[test]
    fn id_ranges_agree_with_a_set() {
        // Pushes in order, removals in a scattered order (front, back, middle, absent),
        // checked against a plain set after each step.
        let mut ids = IdRanges::default();
        let mut set = std::collections::BTreeSet::new();
        let mut next = 0u64;
        let mut x = 12345u64;
        for step in 0..5000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            if step % 3 != 2 {
                ids.push(next);
                set.insert(next);
                next += 1 + (x >> 62) % 2;
            } else {
                let id = (x >> 33) % (next + 1);
                ids.remove(id);
                set.remove(&id);
            }
            if step % 97 == 0 {
                let flat: Vec<u64> = ids
                    .within(0, u64::MAX)
                    .into_iter()
                    .flat_map(|(a, b)| a..=b)
                    .collect();
                assert_eq!(flat, set.iter().copied().collect::<Vec<_>>(), "step {step}");
                let (a, b) = ((x >> 20) % (next + 1), (x >> 40) % (next + 1));
                let (lo, hi) = (a.min(b), a.max(b));
                let part: Vec<u64> = ids
                    .within(lo, hi)
                    .into_iter()
                    .flat_map(|(a, b)| a..=b)
                    .collect();
                let expected: Vec<u64> = set.range(lo..=hi).copied().collect();
                assert_eq!(part, expected, "step {step} {lo}..={hi}");
            }
        }
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
        assert_eq!(
            out.pending(Pending::Settlement, 0, 5).collect::<Vec<_>>(),
            [held]
        );
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
        assert_eq!(
            out.pending(Pending::Settlement, held, held.wrapping_add(3))
                .next(),
            Some(held)
        );
        assert!(out.settle(held).is_some());
    }
}
