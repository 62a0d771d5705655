//! Message expiry: a queue's `x-message-ttl` caps each message's own, and expired messages
//! are taken off (by the periodic sweep, and promptly at the head of a dead-lettering
//! queue). Expired messages a dead-lettering queue keeps are handed back as dead letters.

use std::sync::Arc;

use tokio::sync::Notify;

use super::{DeadLetters, Leaving, Queue};
use crate::message::{now_ms, DeathReason, Message};

impl Queue {
    /// A queue message TTL caps each message's own expiry.
    #[inline]
    pub(crate) fn apply_ttl(&self, msg: Message) -> Message {
        match self.features.message_ttl {
            None => msg,
            Some(ttl) => self.with_ttl(msg, ttl),
        }
    }

    fn with_ttl(&self, msg: Message, ttl: u64) -> Message {
        let at = now_ms().saturating_add(ttl);
        if msg.expires_at().is_some_and(|own| own <= at) {
            return msg;
        }
        // A copy with this queue's expiry (a large body is shared). It is the same message
        // for the store, already journaled for this queue.
        msg.derive(|p| {
            p.expires_at = Some(at);
            p.store_id = msg.store_id();
        })
    }

    /// Takes expired messages off the queue; returns how many, and the dead letters: those
    /// messages and the ones dispatch found expired since the last call, when the queue
    /// dead-letters expired messages (it drops them otherwise).
    pub(crate) fn take_expired(&self, now: u64) -> (u64, DeadLetters<'_>) {
        let (n, expired) = {
            let mut st = self.lock();
            let n = st.purge_expired(now);
            (n, std::mem::take(&mut st.expired))
        };
        (
            n,
            self.leaving(Leaving::Died(DeathReason::Expired), expired),
        )
    }

    /// Takes the expired messages off the head of a dead-lettering queue (the periodic sweep
    /// is coarse, a delay queue should be on time); returns whether messages with an expiry
    /// remain, and the dead letters.
    pub(crate) fn take_expired_head(&self, now: u64) -> (bool, DeadLetters<'_>) {
        let (expired, more) = {
            let mut st = self.lock();
            let more = st.expire_head(now);
            (std::mem::take(&mut st.expired), more)
        };
        (
            more,
            self.leaving(Leaving::Died(DeathReason::Expired), expired),
        )
    }

    pub(crate) fn watch_expiry(&self, notify: Arc<Notify>) {
        let _ = self.expiry_watch.set(notify);
    }

    /// A message that will expire arrives at a dead-lettering queue: wake the housekeeping.
    #[inline]
    pub(crate) fn note_expiry(&self, msg: &Message) {
        if msg.expires_at().is_some() {
            if let Some(n) = self.expiry_watch.get() {
                n.notify_one();
            }
        }
    }
}
