//! Routing what queues dead-letter, and the queue operations that can.
//!
//! The queue layer takes leaving messages off under the queue lock and returns them as
//! [`DeadLetters`] (see `crate::queue::dead_letter`); routing them is this layer's job, once
//! the lock is released. So the public forms of the queue operations that can dead-letter,
//! which protocol layers call on a [`Queue`], are defined here: each runs its queue-layer
//! counterpart, then routes what that returned.

use std::sync::Arc;

use super::deliver_except;
use crate::error::BrokerError;
use crate::exchange::Exchange;
use crate::message::{now_ms, DeathReason, Message};
use crate::queue::{Backlog, DeadLetters, Delivery, Enqueued, Leaving, Queue, QueueInfo};

/// Publishes dead letters to their queue's alternate exchange, or drops them if it has none
/// now. Call with no queue lock held: routing locks the target queues.
pub(crate) fn dead_letters(letters: DeadLetters<'_>) {
    if letters.is_empty() {
        return;
    }
    let Some(target) = letters.target().and_then(Exchange::from_alternate) else {
        return;
    };
    let queue = letters.queue();
    if !letters.skips_cycles() {
        for m in letters.into_messages() {
            if let Err(e) = deliver_except(&target, &m, queue.journal(), None) {
                tracing::debug!(queue = %queue.name(), error = %e, "alternate exchange refused message");
            }
        }
        return;
    }
    for m in letters.into_messages() {
        let cycle = |q: &Queue| m.deaths().is_some_and(|h| h.is_cycle_into(q.name()));
        if let Err(e) = deliver_except(&target, &m, queue.journal(), Some(&cycle)) {
            tracing::debug!(queue = %queue.name(), error = %e, "dead letter exchange refused message");
        }
    }
}

impl Queue {
    /// Stores the message and dispatches. What a drop-head queue dropped to make room is
    /// dead-lettered.
    /// `Ok(None)` if the queue was deleted meanwhile (the publisher routed with a stale
    /// handle; the message is simply not stored here); else the queue's backlog after it.
    pub(crate) fn enqueue(self: &Arc<Self>, msg: Message) -> Result<Option<Backlog>, BrokerError> {
        let (enqueued, backlog) = self.push(msg)?;
        match enqueued {
            Enqueued::Stored => Ok(Some(backlog)),
            Enqueued::Gone => Ok(None),
            Enqueued::Dropping(dropped) => {
                dead_letters(self.leaving(Leaving::Died(DeathReason::Maxlen), dropped));
                Ok(Some(backlog))
            }
        }
    }

    /// The consumer rejected the message: it leaves the queue and is dead-lettered (goes to
    /// the alternate exchange if there is one, else it is dropped). False if the position was
    /// not acquired.
    pub fn reject(&self, position: u64, msg: Message) -> bool {
        match self.settle_rejected(position, msg) {
            Some(letters) => {
                dead_letters(letters);
                true
            }
            None => false,
        }
    }

    /// Puts acquired messages back at their original place (ahead of newer messages), marks them
    /// redelivered if asked (or if they already were), and re-dispatches. Positions that are
    /// not acquired-and-unsettled are ignored, so a duplicate release cannot duplicate a message.
    /// On a deleted queue the messages are orphans and go to the alternate exchange, if any.
    /// Returns how many were released.
    pub fn release(
        self: &Arc<Self>,
        entries: impl IntoIterator<Item = (u64, Message)>,
        set_redelivered: bool,
    ) -> usize {
        let (released, gone) = self.requeue(entries, set_redelivered);
        for letters in gone {
            dead_letters(letters);
        }
        released
    }

    /// Messages available on the queue (not counting acquired-but-unsettled ones). Expired
    /// ones are swept first, so a count never includes messages no consumer could get.
    pub fn message_count(&self) -> u64 {
        self.purge_expired(now_ms());
        self.count_unswept()
    }

    /// Answer data for queue.query / queue.declare-ok, after sweeping expired messages.
    pub fn info(&self) -> QueueInfo {
        self.purge_expired(now_ms());
        self.info_unswept()
    }

    /// Drops expired messages, or dead-letters them when the queue asked for that; also
    /// routes those that dispatch found expired since the last call. Returns how many
    /// expired now.
    pub(crate) fn purge_expired(&self, now: u64) -> u64 {
        let (n, expired) = self.take_expired(now);
        dead_letters(expired);
        n
    }

    /// Dead-letters the expired messages at the head of a dead-lettering queue promptly
    /// (the periodic sweep is coarse); returns whether messages with an expiry remain.
    pub(crate) fn expire_head(&self, now: u64) -> bool {
        let (more, expired) = self.take_expired_head(now);
        dead_letters(expired);
        more
    }
}

/// Releases a session's unsettled deliveries when it ends (or on a bulk message.release),
/// grouping them per queue so each queue is locked once.
pub fn release_deliveries(deliveries: impl IntoIterator<Item = Delivery>, set_redelivered: bool) {
    let mut all: Vec<Delivery> = deliveries.into_iter().filter(|d| d.acquired).collect();
    all.sort_unstable_by_key(|d| Arc::as_ptr(&d.queue) as usize);
    let mut rest = all.as_slice();
    while let Some(first) = rest.first() {
        let n = rest
            .iter()
            .take_while(|d| Arc::ptr_eq(&d.queue, &first.queue))
            .count();
        let (group, tail) = rest.split_at(n);
        first.queue.release(
            group.iter().map(|d| (d.position, d.message.clone())),
            set_redelivered,
        );
        rest = tail;
    }
}
