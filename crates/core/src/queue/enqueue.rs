//! Messages arriving: stored at the tail (or recovered from the store) under the queue lock,
//! within the queue's limits. A drop-head queue makes room by dropping from the head; the
//! dropped messages go back to the caller to dead-letter.

use std::sync::Arc;

use super::{graveyard, Queue, QueueState};
use crate::error::BrokerError;
use crate::limits::{LimitPolicy, LimitScope};
use crate::message::Message;

/// The bytes of `m` a queue's limits count: qpidd's header + body ([`Message::size`]), or
/// RabbitMQ's body alone.
#[inline]
fn counted_bytes(scope: LimitScope, m: &Message) -> u64 {
    match scope {
        LimitScope::Depth => m.size(),
        LimitScope::Ready => m.body_size(),
    }
}

/// A message recovered from the store, for [`Queue::restore`].
#[derive(Debug)]
pub enum Restored {
    InMemory(Message),
    /// A stand-in ([`Message::stub`]) whose content the store kept on disk, and that
    /// content's body size (RabbitMQ's byte limits count it; the stub has no body).
    OnDisk {
        stub: Message,
        body_size: u64,
    },
}

/// A recovered message with the times it had come back to the queue after a delivery, as
/// the store counted them (`x-delivery-count` and `x-delivery-limit`; 0 where it kept no
/// count).
#[derive(Debug)]
pub struct RestoredMessage {
    pub message: Restored,
    pub returns: u32,
}

impl From<Restored> for RestoredMessage {
    fn from(message: Restored) -> RestoredMessage {
        RestoredMessage {
            message,
            returns: 0,
        }
    }
}

/// What [`Queue::enqueue_locked`] did with a message.
#[derive(Debug)]
pub(crate) enum Enqueued {
    /// Not stored: the queue was deleted meanwhile, or it is a no-local queue and the
    /// message came from its owner's connection, or a qpidd ring had nothing to drop for
    /// it (dropped silently, as qpidd does).
    Gone,
    Stored,
    /// Stored, after dropping these from the head to make room (drop-head overflow); the
    /// caller dead-letters them once the lock is released.
    Dropping(Vec<Message>),
}

/// What a publisher is held by (see `BrokerConfig::backlog_hold`): the bytes ready in memory
/// on a queue whose consumers are falling behind, and how many deliveries the queue has made
/// (whether they are falling behind or stuck). A queue without consumers never holds a
/// publisher: nobody is there to drain it, and holding would only stall the publisher.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backlog {
    pub ready_bytes: u64,
    pub delivered: u64,
}

impl Backlog {
    pub(crate) fn of(st: &QueueState) -> Backlog {
        Backlog {
            // Consumers that are all selective may want none of what is queued: a backlog
            // they leave is no reason to hold publishers.
            ready_bytes: if st.consumers.is_empty() || st.only_selective_consumers() {
                0
            } else {
                st.in_memory()
            },
            delivered: st.counters.delivered,
        }
    }
}

impl Queue {
    /// Stores the message and dispatches. What a drop-head queue dropped to make room comes
    /// back in [`Enqueued::Dropping`]; `Queue::enqueue` (in `crate::route`) dead-letters it.
    /// Also returns the queue's [`Backlog`] after dispatch.
    pub(crate) fn push(self: &Arc<Self>, msg: Message) -> Result<(Enqueued, Backlog), BrokerError> {
        let msg = self.apply_ttl(msg);
        self.note_expiry(&msg);
        let mut st = self.lock();
        let enqueued = self.enqueue_locked(&mut st, msg)?;
        if matches!(enqueued, Enqueued::Stored | Enqueued::Dropping(_)) {
            st.dispatch(self);
        }
        let backlog = Backlog::of(&st);
        let taken = st.take_graveyard();
        drop(st);
        if taken {
            graveyard::free_taken();
        }
        Ok((enqueued, backlog))
    }

    /// The queue's [`Backlog`] now.
    pub fn backlog(&self) -> Backlog {
        Backlog::of(&self.lock())
    }

    /// Stores a message (already through [`Queue::apply_ttl`]) under the caller's lock,
    /// without dispatching.
    pub(crate) fn enqueue_locked(
        &self,
        st: &mut QueueState,
        msg: Message,
    ) -> Result<Enqueued, BrokerError> {
        if st.deleted || (self.features.no_local && self.is_local(st, &msg)) || self.excludes(&msg)
        {
            return Ok(Enqueued::Gone);
        }
        let msg = self.traced(msg);
        let size = counted_bytes(self.limits.scope, &msg);
        let (count, bytes) = st.depth(self.limits.scope);
        if !self.limits.admits(count, bytes, size) {
            if self.limits.policy == LimitPolicy::Ring {
                return self.ring_locked(st, msg);
            }
            if self.limits.policy != LimitPolicy::DropHead {
                st.counters.refused += 1;
                return Err(BrokerError::ResourceLimitExceeded(format!(
                    "queue {} is full",
                    self.name
                )));
            }
            // Oldest available messages make room; acquired ones cannot be dropped, so
            // if they alone fill the queue the new message is still taken.
            let mut dropped = Vec::new();
            while let Some((old, content)) = st.pop_front(self.alternate_name.is_some()) {
                st.forget(&old);
                dropped.extend(content);
                let (count, bytes) = st.depth(self.limits.scope);
                if self.limits.admits(count, bytes, size) {
                    break;
                }
            }
            let msg = self.numbered(st, msg);
            st.push(msg);
            return Ok(Enqueued::Dropping(dropped));
        }
        let msg = self.numbered(st, msg);
        st.push(msg);
        Ok(Enqueued::Stored)
    }

    /// qpidd's ring (`LossyQueue::checkDepth`): drops messages (silently, not to the
    /// alternate exchange) until the new one fits, or drops the new one when no older one
    /// of its priority or lower is left. A message larger than the whole queue is refused.
    #[cold]
    fn ring_locked(&self, st: &mut QueueState, msg: Message) -> Result<Enqueued, BrokerError> {
        let size = counted_bytes(self.limits.scope, &msg);
        if self.limits.max_size.is_some_and(|max| size > max) {
            return Err(BrokerError::ResourceLimitExceeded(format!(
                "message larger than the maximum depth of queue {}",
                self.name
            )));
        }
        loop {
            let (count, bytes) = st.depth(self.limits.scope);
            if self.limits.admits(count, bytes, size) {
                break;
            }
            if !st.ring_drop(msg.priority()) {
                return Ok(Enqueued::Gone);
            }
        }
        let msg = self.numbered(st, msg);
        st.push(msg);
        Ok(Enqueued::Stored)
    }

    /// Puts messages recovered from the store back, in the given order, marked redelivered
    /// (they may have been delivered before the restart). Nothing is journaled: the store
    /// already holds them. A message the store left on disk comes as its stand-in
    /// ([`Message::stub`]); the queue reads it back before delivering it.
    pub fn restore(&self, messages: impl IntoIterator<Item = impl Into<RestoredMessage>>) {
        let mut st = self.lock();
        for m in messages {
            let RestoredMessage { message, returns } = m.into();
            let (m, on_disk_body) = match message {
                Restored::InMemory(m) => (m, None),
                Restored::OnDisk { stub, body_size } => (stub, Some(body_size)),
            };
            // Numbers are not kept: recovered messages are numbered afresh, as qpidd does.
            // Nor are trace edits: the queue's own id is added again (earlier queues' and
            // a reroute's clearing are lost).
            let m = self.numbered(&mut st, self.traced(self.apply_ttl(m)));
            st.push_recovered(m, on_disk_body, returns);
        }
    }
}
