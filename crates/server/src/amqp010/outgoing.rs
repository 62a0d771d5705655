//! Bookkeeping for the commands the broker sends on one session: each gets the next command
//! id, and message transfers keep a record until the client has both completed them (window
//! credit comes back on completion) and settled them (accept/reject/release).

use std::collections::VecDeque;
use std::sync::Arc;

use ferry_core::{ConsumerId, Message, Queue};

/// What the session remembers about one message transfer it sent.
pub struct DeliveryRecord {
    pub consumer: ConsumerId,
    pub queue: Arc<Queue>,
    pub position: u64,
    /// `None` once the message is settled (accepted, rejected, released, or implicitly
    /// accepted because the subscription said accept-mode none).
    pub message: Option<Arc<Message>>,
    pub acquired: bool,
    /// Byte size charged against window credit, returned when the client completes it.
    pub credit_bytes: u32,
    pub window_credit: bool,
    pub completed: bool,
}

impl DeliveryRecord {
    fn finished(&self) -> bool {
        self.completed && self.message.is_none()
    }
}

/// Outgoing command ids and the records of unfinished transfers, indexed by id.
#[derive(Default)]
pub struct Outgoing {
    /// Id of the first slot in `slots`; ids before it are finished and forgotten.
    base: u32,
    /// One slot per command id from `base`; `None` for commands that need no record
    /// (execution.result, execution.exception) or whose record is finished.
    slots: VecDeque<Option<DeliveryRecord>>,
    /// Transfer records finished since [`Outgoing::take_finished`] was last called: each held
    /// a slot of the session's settlement window.
    finished: u32,
}

impl Outgoing {
    /// The id the next outgoing command will carry.
    pub fn next_id(&self) -> u32 {
        self.base.wrapping_add(self.slots.len() as u32)
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
        id
    }

    fn index(&self, id: u32) -> Option<usize> {
        let offset = id.wrapping_sub(self.base) as usize;
        (offset < self.slots.len()).then_some(offset)
    }

    pub fn get_mut(&mut self, id: u32) -> Option<&mut DeliveryRecord> {
        let index = self.index(id)?;
        self.slots.get_mut(index)?.as_mut()
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
            if let Some(index) = self.index(id) {
                self.slots[index] = None;
                self.finished += 1;
            }
        }
        refund
    }

    /// The ids of `lo..=hi` that still have slots: peers repeat cumulative completion sets,
    /// so walking every id of a wide range each time would cost more than the window holds.
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
        span.into_iter()
            .flat_map(|(first, last)| first..=last)
            .map(move |offset| base.wrapping_add(offset))
    }

    /// Takes the message out of an unsettled record so the caller can settle it.
    pub fn settle(&mut self, id: u32) -> Option<(Arc<Queue>, u64, Arc<Message>, bool)> {
        let index = self.index(id)?;
        let slot = self.slots.get_mut(index)?;
        let record = slot.as_mut()?;
        let message = record.message.take()?;
        let settled = (
            record.queue.clone(),
            record.position,
            message,
            record.acquired,
        );
        if record.finished() {
            *slot = None;
            self.finished += 1;
        }
        Some(settled)
    }

    /// How many transfer records finished since the last call.
    pub fn take_finished(&mut self) -> u32 {
        std::mem::take(&mut self.finished)
    }

    /// Drops finished slots from the front so memory follows the unsettled window only.
    pub fn trim(&mut self) {
        // Popping a finished slot and advancing `base` together keeps next_id() unchanged.
        while let Some(None) = self.slots.front() {
            self.slots.pop_front();
            self.base = self.base.wrapping_add(1);
        }
    }

    /// Every record that still holds a message, in id order (session end: release them).
    pub fn drain_unsettled(&mut self) -> Vec<DeliveryRecord> {
        let drained: Vec<DeliveryRecord> = self
            .slots
            .iter_mut()
            .filter_map(|slot| slot.take())
            .filter(|r| r.message.is_some())
            .collect();
        self.trim();
        drained
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
            queue: queue.clone(),
            position,
            message: Some(Arc::new(Message::new("", "q", Bytes::from_static(b"m")))),
            acquired: true,
            credit_bytes: 10,
            window_credit: window,
            completed: false,
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
}
