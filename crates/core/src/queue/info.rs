//! What a queue holds right now, for queries, tools and tests. The counts here do not sweep
//! expired messages first; `Queue::message_count` and `Queue::info`, which do (and so may
//! dead-letter), are defined with the routing of dead letters, in `crate::route`.

use super::{Queue, QueueInfo};
use crate::stats::QueueCounters;
use crate::{ConsumerId, OwnerId};

/// One consumer of a queue, for management.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerStatus {
    pub id: ConsumerId,
    /// The 0-10 destination or 0-9-1 consumer tag (lossy UTF-8).
    pub tag: String,
    /// The session (0-10) or connection (0-9-1) it belongs to.
    pub owner: OwnerId,
    /// False for browsers.
    pub acquire: bool,
    pub exclusive: bool,
    /// Credit left, `u32::MAX` for unlimited.
    pub credit_messages: u32,
    /// Its filter's text (a JMS selector), if it has one.
    pub selector: Option<String>,
    /// See [`ConsumerSpec::ack_timeout`](crate::ConsumerSpec::ack_timeout).
    pub ack_timeout: Option<std::time::Duration>,
}

/// A queue's numbers at one moment, read under one lock.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueueDepth {
    /// Available messages and their bytes.
    pub ready: u64,
    pub ready_bytes: u64,
    /// Acquired by consumers, not yet settled.
    pub unacked: u64,
    pub unacked_bytes: u64,
    /// Of the ready bytes, those whose content is kept on disk only (flow to disk).
    pub on_disk_bytes: u64,
    pub consumers: u64,
    pub counters: QueueCounters,
}

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

    /// Depth, consumers and counters, read together.
    pub fn depth(&self) -> QueueDepth {
        let st = self.lock();
        QueueDepth {
            ready: st.entries.len() as u64,
            ready_bytes: st.queued_bytes(),
            unacked: st.unsettled_count() as u64,
            unacked_bytes: st.unsettled_bytes(),
            on_disk_bytes: st.on_disk_bytes(),
            consumers: st.consumers.len() as u64,
            counters: st.counters,
        }
    }

    /// Whether one of the queue's consumers is one `mine` claims.
    pub fn consumed_by(&self, mine: impl Fn(ConsumerId) -> bool) -> bool {
        self.lock().consumers.iter().any(|c| mine(c.spec.id))
    }

    pub fn consumers(&self) -> Vec<ConsumerStatus> {
        self.lock()
            .consumers
            .iter()
            .map(|c| ConsumerStatus {
                id: c.spec.id,
                tag: String::from_utf8_lossy(&c.spec.tag).into_owned(),
                owner: c.spec.owner,
                acquire: c.spec.acquire,
                exclusive: c.spec.exclusive,
                credit_messages: c.credit_messages,
                selector: c
                    .spec
                    .filter
                    .as_ref()
                    .and_then(|f| f.matches.text())
                    .map(str::to_owned),
                ack_timeout: c.spec.ack_timeout,
            })
            .collect()
    }

    /// Bodies of the available messages, front first: a snapshot for tests and tools (it
    /// reads contents kept on disk back).
    pub fn queued_bodies(&self) -> Vec<bytes::Bytes> {
        let st = self.lock();
        st.entries
            .iter()
            .map(|e| st.content(e).map(|m| m.body_bytes()).unwrap_or_default())
            .collect()
    }

    /// Keys a last-value queue remembers (tests).
    #[cfg(test)]
    pub(crate) fn last_value_keys(&self) -> usize {
        self.lock().last_value_keys()
    }
}
