//! Settling acquired messages: accepted ones leave the queue, released ones go back where
//! they were, rejected ones leave as dead letters. Positions not acquired (or already
//! settled) are ignored, so a duplicate settlement cannot corrupt counts or duplicate a
//! message.

use std::sync::Arc;

use super::graveyard::Corpse;
use super::state::Entry;
use super::{DeadLetters, Leaving, Queue, QueueState, Settled};
use crate::journal::JournalTx;
use crate::message::{DeathReason, Message};

impl Queue {
    /// The consumer accepted the message: it leaves the queue for good. Returns false if the
    /// position was not acquired-and-unsettled (double accept is harmless).
    pub fn accept(&self, position: u64) -> bool {
        self.lock()
            .settle_done(position, Settled::Accepted)
            .is_some()
    }

    /// [`Queue::accept`] for many positions under one lock, with one journal record for
    /// the persistent ones (one per [`ACCEPT_RUN`] of them); returns how many were settled.
    /// The accepted messages' handles in `corpses` are left for the queue's publishes to drop
    /// if there is room (see `graveyard`); what is left in `corpses` the caller drops.
    pub(crate) fn accept_all(&self, positions: &[u64], corpses: &mut [Corpse]) -> usize {
        let mut st = self.lock();
        // On the stack: a single acknowledgement must not allocate.
        let mut stored = [0u64; ACCEPT_RUN];
        let mut kept = 0;
        let mut settled = 0;
        for (i, &position) in positions.iter().enumerate() {
            let Some(u) = st.settle_counted(position, Settled::Accepted) else {
                continue;
            };
            settled += 1;
            if let Some(corpse) = corpses.get_mut(i) {
                st.bury(corpse);
            }
            if u.stored != 0 {
                if kept == ACCEPT_RUN {
                    st.forget_ids(&stored);
                    kept = 0;
                }
                stored[kept] = u.stored;
                kept += 1;
            }
        }
        st.forget_ids(&stored[..kept]);
        settled
    }

    /// Puts acquired messages back at their original place (ahead of newer messages), marks them
    /// redelivered if asked (or if they already were), and re-dispatches. Positions that are
    /// not acquired-and-unsettled are ignored, so a duplicate release cannot duplicate a message.
    /// Returns how many were released, and the orphans: on a deleted queue the messages leave
    /// for the alternate exchange (see `Queue::release`).
    pub(crate) fn requeue(
        self: &Arc<Self>,
        entries: impl IntoIterator<Item = (u64, Message)>,
        set_redelivered: bool,
    ) -> (usize, [DeadLetters<'_>; 2]) {
        let mut entries: Vec<(u64, Message)> = entries.into_iter().collect();
        // Newest first, so each insert lands at or near the front of the deque (cheap) when
        // the released messages are older than everything still queued (the usual case).
        entries.sort_unstable_by_key(|e| std::cmp::Reverse(e.0));
        let mut gone = Gone::default();
        let released = {
            let mut st = self.lock();
            let released = entries
                .into_iter()
                .filter(|(position, message)| {
                    self.release_locked(
                        &mut st,
                        *position,
                        message.clone(),
                        set_redelivered,
                        &mut gone,
                    )
                })
                .count();
            self.journal_returns(&gone.returned);
            st.dispatch(self);
            released
        };
        (
            released,
            [
                self.leaving(Leaving::Orphaned, gone.orphans),
                self.leaving(Leaving::Died(DeathReason::DeliveryLimit), gone.over_limit),
            ],
        )
    }

    /// Puts one acquired message back under the caller's lock (no dispatch). On a deleted
    /// queue it becomes an orphan, and a message back more often than the queue's
    /// `x-delivery-limit` leaves it, each for the caller to route once unlocked. False if
    /// the position was not acquired.
    pub(crate) fn release_locked(
        &self,
        st: &mut QueueState,
        position: u64,
        message: Message,
        set_redelivered: bool,
        gone: &mut Gone,
    ) -> bool {
        let Some(u) = st.settle(position) else {
            return false;
        };
        // Only a message that went out counts a return (RabbitMQ's delivery count).
        let redelivery = if set_redelivered {
            u.redelivery.returned()
        } else {
            u.redelivery
        };
        let over_limit = self
            .features
            .delivery_limit
            .is_some_and(|limit| u32::from(redelivery.returns()) > limit);
        if over_limit && !st.deleted {
            st.left(&u, Settled::Rejected);
            gone.over_limit.push(message);
            return true;
        }
        st.counters.released += 1;
        if st.deleted {
            gone.orphans.push(message);
        } else {
            if set_redelivered && u.stored != 0 && self.features.reports_returns {
                gone.returned
                    .push((u.stored, u32::from(redelivery.returns())));
            }
            st.insert_sorted(Entry::resident(position, message, redelivery));
        }
        true
    }

    /// Journals the counts of returned messages (what consumers are told, and what a
    /// delivery limit judges by), so they outlive a restart or a failover: (store id,
    /// returns) pairs from [`Gone::returned`], under the queue's lock
    /// (the order of this queue's records), one journal call for a release's worth.
    pub(crate) fn journal_returns(&self, returned: &[(u64, u32)]) {
        if returned.is_empty() {
            return;
        }
        if let Some(store) = self.store() {
            store.journal.returned(store.id, returned);
        }
    }

    /// Journals, inside `tx`, the dequeue that settling acquired message `position` will be:
    /// a prepare records it ahead of the commit that settles it. Returns the message's
    /// store id if there was a dequeue to journal.
    pub(crate) fn journal_settlement(&self, position: u64, tx: &JournalTx) -> Option<u64> {
        let st = self.lock();
        if st.deleted {
            // As `forget_ids`: nothing to journal for a deleted queue.
            return None;
        }
        let store = self.store()?;
        let stored = st.unsettled_store_id(position)?;
        store.journal.dequeue(store.id, &[stored], Some(tx));
        Some(stored)
    }

    /// The consumer rejected the message: it leaves the queue, dead-lettered (see
    /// `Queue::reject`). `None` if the position was not acquired.
    pub(crate) fn settle_rejected(&self, position: u64, msg: Message) -> Option<DeadLetters<'_>> {
        self.lock().settle_done(position, Settled::Rejected)?;
        Some(self.leaving_one(Leaving::Died(DeathReason::Rejected), msg))
    }
}

/// Messages a release took off a queue, for the caller to route once no queue is locked.
#[derive(Debug, Default)]
pub(crate) struct Gone {
    /// Released onto a deleted queue.
    pub(crate) orphans: Vec<Message>,
    /// Back more often than the queue's delivery limit.
    pub(crate) over_limit: Vec<Message>,
    /// (store id, returns) of journaled messages back on a queue that keeps their counts
    /// (`Features::reports_returns`), for [`Queue::journal_returns`].
    pub(crate) returned: Vec<(u64, u32)>,
}

/// Positions gathered before a queue's lock is taken, and store ids per dequeue record: a
/// cumulative acknowledgement's worth, kept on the stack.
const ACCEPT_RUN: usize = 64;

/// Accepts a protocol's settlements a run at a time: consecutive positions of one queue
/// share a lock and a journal record ([`Queue::accept_all`]) instead of taking one each, as
/// a cumulative acknowledgement of a hundred deliveries would. Whatever is pending is
/// accepted by [`Accepts::finish`], or when the value goes.
pub struct Accepts {
    queue: Option<Arc<Queue>>,
    positions: [u64; ACCEPT_RUN],
    /// The delivered handles, given to the queue's graveyard or dropped after the accept.
    corpses: [Corpse; ACCEPT_RUN],
    len: usize,
}

impl Default for Accepts {
    fn default() -> Self {
        Accepts {
            queue: None,
            positions: [0; ACCEPT_RUN],
            corpses: std::array::from_fn(|_| Corpse::default()),
            len: 0,
        }
    }
}

impl Accepts {
    /// Accepts `position` on `queue`; `message` is the handle the delivery held.
    pub fn push(&mut self, queue: &Arc<Queue>, position: u64, message: Message) {
        let same = self.queue.as_ref().is_some_and(|q| Arc::ptr_eq(q, queue));
        if !same || self.len == ACCEPT_RUN {
            self.finish();
            self.queue = Some(queue.clone());
        }
        self.positions[self.len] = position;
        self.corpses[self.len] = Corpse::new(message);
        self.len += 1;
    }

    /// Accepts what is pending.
    pub fn finish(&mut self) {
        if let Some(queue) = self.queue.take() {
            let corpses = &mut self.corpses[..self.len];
            queue.accept_all(&self.positions[..self.len], corpses);
            // Outside the queue's lock: what its graveyard had no room for.
            corpses.iter_mut().for_each(|c| *c = Corpse::default());
            self.len = 0;
        }
    }
}

impl Drop for Accepts {
    fn drop(&mut self) {
        self.finish();
    }
}
