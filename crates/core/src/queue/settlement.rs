//! Settling acquired messages: accepted ones leave the queue, released ones go back where
//! they were, rejected ones leave as dead letters. Positions not acquired (or already
//! settled) are ignored, so a duplicate settlement cannot corrupt counts or duplicate a
//! message.

use std::sync::Arc;

use super::state::Entry;
use super::{DeadLetters, Leaving, Queue, QueueState, Settled};
use crate::message::{DeathReason, Message};

impl Queue {
    /// The consumer accepted the message: it leaves the queue for good. Returns false if the
    /// position was not acquired-and-unsettled (double accept is harmless).
    pub fn accept(&self, position: u64) -> bool {
        self.lock()
            .settle_done(position, Settled::Accepted)
            .is_some()
    }

    /// [`Queue::accept`] for many positions under one lock; returns how many were settled.
    pub fn accept_all(&self, positions: impl IntoIterator<Item = u64>) -> usize {
        let mut st = self.lock();
        positions
            .into_iter()
            .filter(|p| st.settle_done(*p, Settled::Accepted).is_some())
            .count()
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
    ) -> (usize, DeadLetters<'_>) {
        let mut entries: Vec<(u64, Message)> = entries.into_iter().collect();
        // Newest first, so each insert lands at or near the front of the deque (cheap) when
        // the released messages are older than everything still queued (the usual case).
        entries.sort_unstable_by_key(|e| std::cmp::Reverse(e.0));
        let mut orphans = Vec::new();
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
                        &mut orphans,
                    )
                })
                .count();
            st.dispatch(self);
            released
        };
        (released, self.leaving(Leaving::Orphaned, orphans))
    }

    /// Puts one acquired message back under the caller's lock (no dispatch). On a deleted
    /// queue it becomes an orphan for the caller to route once unlocked. False if the
    /// position was not acquired.
    pub(crate) fn release_locked(
        &self,
        st: &mut QueueState,
        position: u64,
        message: Message,
        set_redelivered: bool,
        orphans: &mut Vec<Message>,
    ) -> bool {
        let Some(u) = st.settle(position) else {
            return false;
        };
        st.counters.released += 1;
        if st.deleted {
            orphans.push(message);
        } else {
            st.insert_sorted(Entry::resident(
                position,
                message,
                u.redelivered || set_redelivered,
            ));
        }
        true
    }

    /// The consumer rejected the message: it leaves the queue, dead-lettered (see
    /// `Queue::reject`). `None` if the position was not acquired.
    pub(crate) fn settle_rejected(&self, position: u64, msg: Message) -> Option<DeadLetters<'_>> {
        self.lock().settle_done(position, Settled::Rejected)?;
        Some(self.leaving_one(Leaving::Died(DeathReason::Rejected), msg))
    }
}
