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
            }
        }
        refund
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
        }
        Some(settled)
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
