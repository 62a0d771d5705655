//! What a queue holds right now, for queries, tools and tests. The counts here do not sweep
//! expired messages first; `Queue::message_count` and `Queue::info`, which do (and so may
//! dead-letter), are defined with the routing of dead letters, in `crate::route`.

use super::{Queue, QueueInfo};
use crate::OwnerId;

impl Queue {
    /// Messages on the queue (not counting acquired-but-unsettled ones), expired ones
    /// included until a sweep takes them off (see `Queue::message_count`).
    pub(crate) fn count_unswept(&self) -> u64 {
        self.lock().entries.len() as u64
    }

    /// Bytes of the messages available on the queue.
    pub fn byte_count(&self) -> u64 {
        self.lock().queued_bytes()
    }

    /// Messages acquired by consumers and not yet accepted, released or rejected.
    pub fn unsettled_count(&self) -> u64 {
        self.lock().unsettled_count() as u64
    }

    pub fn consumer_count(&self) -> usize {
        self.lock().consumers.len()
    }

    pub fn is_exclusive(&self) -> bool {
        self.lock().owner.is_some()
    }

    pub fn owner(&self) -> Option<OwnerId> {
        self.lock().owner
    }

    pub fn is_deleted(&self) -> bool {
        self.lock().deleted
    }

    /// [`QueueInfo`] as the queue stands, expired messages included (see `Queue::info`).
    pub(crate) fn info_unswept(&self) -> QueueInfo {
        let st = self.lock();
        QueueInfo {
            name: self.name.clone(),
            durable: self.durable,
            exclusive: st.owner.is_some(),
            auto_delete: self.auto_delete,
            alternate_exchange: self.alternate_name.clone(),
            arguments: self.arguments.clone(),
            message_count: st.entries.len() as u64,
            consumer_count: st.consumers.len() as u64,
        }
    }

    /// Bodies of the available messages, front first: a snapshot for tests and tools (it
    /// reads contents kept on disk back).
    pub fn queued_bodies(&self) -> Vec<bytes::Bytes> {
        let st = self.lock();
        st.entries
            .iter()
            .map(|e| st.content(e).map(|m| m.body.clone()).unwrap_or_default())
            .collect()
    }

    /// Keys a last-value queue remembers (tests).
    #[cfg(test)]
    pub(crate) fn last_value_keys(&self) -> usize {
        self.lock().last_value_keys()
    }
}
