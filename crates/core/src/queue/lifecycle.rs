//! How a queue is owned and how it ends: exclusive ownership, auto-delete, the `x-expires`
//! lease, purging, and deletion. A deletion drains the queue under its lock (so no consumer
//! slips in between the check and the deletion); the broker unlinks it from the registry,
//! then `finish_delete` tells the consumers and hands the messages back as orphans for the
//! alternate exchange.

use super::{Consumer, DeadLetters, Leaving, OutboxItem, Queue, QueueState};
use crate::error::BrokerError;
use crate::message::{now_ms, HeaderMatch, Message};
use crate::{ConnectionId, OwnerId};

/// What deleting a queue removed; the broker finishes the job outside its registry lock.
pub(crate) struct Drained {
    messages: Vec<Message>,
    consumers: Vec<Consumer>,
}

/// What a session's end means for one queue.
pub(crate) enum OwnerGone {
    NotOwned,
    Released,
    Delete,
    /// Released, and to be deleted after its `qpid.auto_delete_timeout` if still unused.
    DeleteLater,
}

/// Whether a queue that lost a user goes away (auto-delete).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AutoDelete {
    No,
    Now,
    /// After its `qpid.auto_delete_timeout`, if it stays unused.
    Later,
}

impl Queue {
    /// Whether `requester` may use the queue where another owner's exclusivity forbids it
    /// (0-10: bind, unbind; 0-9-1: anything); protocol layers call this for the operations
    /// whose core call has no requester.
    pub fn check_access(&self, requester: OwnerId) -> Result<(), BrokerError> {
        match self.lock().owner {
            Some(owner) if owner != requester => Err(self.locked()),
            _ => Ok(()),
        }
    }

    pub(super) fn locked(&self) -> BrokerError {
        BrokerError::ResourceLocked(format!(
            "queue {} is exclusive to another session",
            self.name
        ))
    }

    /// A non-passive exclusive declare of an existing unowned queue claims it, as in qpidd,
    /// for session `owner` of `connection`. `unless_consumed`: qpidd also refuses a queue
    /// that has (acquiring) consumers.
    pub(crate) fn claim(
        &self,
        owner: OwnerId,
        connection: ConnectionId,
        unless_consumed: bool,
    ) -> Result<(), BrokerError> {
        let mut st = self.lock();
        // An exclusive declare wants the queue: a timed deletion is off (qpidd).
        st.timed_delete = None;
        match st.owner {
            None if unless_consumed && st.consumers.iter().any(|c| c.spec.acquire) => {
                Err(BrokerError::ResourceLocked(format!(
                    "Cannot grant exclusive access to queue {}",
                    self.name
                )))
            }
            None => {
                st.owner = Some(owner);
                st.owner_connection = connection;
                Ok(())
            }
            Some(o) if o == owner => Ok(()),
            Some(_) => Err(self.locked()),
        }
    }

    /// The owning session ended. Exclusive auto-delete queues go away (after their timeout,
    /// with `qpid.auto_delete_timeout`); other exclusive queues lose their owner and become
    /// usable by any session (qpidd does the same; 0-10 only requires exclusivity "until the
    /// declaring session closes"). One another session still uses (browses) loses its owner
    /// and goes with its last consumer, as qpidd's `releaseExclusiveOwnership`.
    pub(crate) fn owner_gone(&self, owner: OwnerId) -> OwnerGone {
        let mut st = self.lock();
        if st.deleted || st.owner != Some(owner) {
            return OwnerGone::NotOwned;
        }
        st.owner = None;
        let used_by_others = st.consumers.iter().any(|c| c.spec.owner != owner);
        if !self.auto_delete || used_by_others {
            OwnerGone::Released
        } else if self.schedule_delete(&mut st, now_ms()) {
            OwnerGone::DeleteLater
        } else {
            OwnerGone::Delete
        }
    }

    pub(super) fn auto_delete_due(&self, st: &QueueState) -> bool {
        self.auto_delete
            && !st.deleted
            && st.owner.is_none()
            && st.had_consumers
            && st.consumers.is_empty()
    }

    /// A (re)declare renews an `x-expires` queue's lease, as in RabbitMQ.
    pub(crate) fn touch(&self) {
        if self.features.expires.is_some() {
            self.lock().last_used = now_ms();
        }
    }

    /// When the queue falls due for deletion if it stays unused: its `x-expires` lease, or
    /// a timed auto-delete; `None` while it has consumers (or neither applies).
    pub(crate) fn unused_deadline(&self) -> Option<u64> {
        let st = self.lock();
        if !st.consumers.is_empty() || st.deleted {
            return None;
        }
        let lease = self
            .features
            .expires
            .map(|ttl| st.last_used.saturating_add(ttl));
        let timed = st.timed_delete.map(|t| t.at);
        match (lease, timed) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Drops every available message (acquired ones are unaffected); returns how many.
    pub fn purge(&self) -> u64 {
        self.lock().purge()
    }

    /// Drops up to `max` available messages from the front, only those `filter` matches if
    /// there is one; returns how many.
    pub fn purge_front(&self, max: u64, filter: Option<&HeaderMatch>) -> u64 {
        self.lock().remove_front(max, false, filter).0
    }

    /// Takes up to `max` available messages off the front (those `filter` matches) to be
    /// routed elsewhere (see `Broker::reroute`); they count as rerouted.
    pub(crate) fn take_front_for_reroute(
        &self,
        max: u64,
        filter: Option<&HeaderMatch>,
    ) -> Vec<Message> {
        self.lock().remove_front(max, true, filter).1
    }

    /// Checks and empties the queue under one lock, so no consumer can slip in between the
    /// check and the deletion.
    pub(crate) fn drain_if(
        &self,
        check: impl FnOnce(&Queue, &mut QueueState) -> Result<(), BrokerError>,
    ) -> Result<Drained, BrokerError> {
        let mut st = self.lock();
        if st.deleted {
            return Err(BrokerError::NotFound(format!(
                "queue {} was deleted",
                self.name
            )));
        }
        check(self, &mut st)?;
        // qpidd counts every message the queue still holds, acquired ones included, as
        // abandoned: via the alternate exchange if it has one (a RabbitMQ dead letter
        // exchange takes none of them).
        let held = (st.entries.len() + st.unsettled_count()) as u64;
        if self.alternate_name.is_some() && !self.features.dead_letter {
            st.counters.abandoned_via_alternate += held;
        } else {
            st.counters.abandoned += held;
        }
        let (messages, consumers) = st.drain_for_delete(self.alternate_name.is_some());
        Ok(Drained {
            messages,
            consumers,
        })
    }

    pub(crate) fn drain_for_explicit_delete(
        &self,
        if_unused: bool,
        if_empty: bool,
        requester: OwnerId,
    ) -> Result<Drained, BrokerError> {
        self.drain_if(|q, st| {
            if st.owner.is_some_and(|o| o != requester) {
                return Err(q.locked());
            }
            if if_unused && !st.consumers.is_empty() {
                return Err(BrokerError::PreconditionFailed(format!(
                    "queue {} has consumers",
                    q.name
                )));
            }
            if if_empty && !st.entries.is_empty() {
                return Err(BrokerError::PreconditionFailed(format!(
                    "queue {} is not empty",
                    q.name
                )));
            }
            Ok(())
        })
    }

    /// Drains the queue if its `x-expires` lease ran out by `now` or its timed auto-delete
    /// fell due.
    pub(crate) fn drain_if_expired(&self, now: u64) -> Result<Drained, BrokerError> {
        self.drain_if(|q, st| {
            let lease_over = q.features.expires.is_some_and(|ttl| {
                st.consumers.is_empty() && st.last_used.saturating_add(ttl) <= now
            });
            if lease_over || q.timed_delete_due(st, now) {
                return Ok(());
            }
            Err(BrokerError::PreconditionFailed(format!(
                "queue {} is in use again",
                q.name
            )))
        })
    }

    pub(crate) fn drain_if_auto_delete_due(&self) -> Result<Drained, BrokerError> {
        self.drain_if(|q, st| {
            if q.auto_delete_due(st) {
                Ok(())
            } else {
                Err(BrokerError::PreconditionFailed(format!(
                    "queue {} is in use again",
                    q.name
                )))
            }
        })
    }

    /// Tells the consumers they are gone. Returns how many messages the queue held, and
    /// those messages as orphans for the alternate exchange.
    pub(crate) fn finish_delete(&self, drained: Drained) -> (u64, DeadLetters<'_>) {
        for c in drained.consumers {
            c.spec.outbox.push(OutboxItem::ConsumerCancelled {
                consumer: c.spec.id,
                tag: c.spec.tag.clone(),
                queue: self.name.clone(),
                credit: c.credit_messages > 0 && c.credit_bytes > 0,
            });
        }
        let n = drained.messages.len() as u64;
        (n, self.leaving(Leaving::Orphaned, drained.messages))
    }

    /// The queue is gone from the registry: its quota slot is free again.
    pub(crate) fn release_quota(&self) {
        self.quota.lock().take();
    }
}
