//! Acquiring without a subscription: 0-9-1's basic.get, and 0-10's message.acquire of
//! messages a browser has seen (still queued, unlike what a consumer acquired).

use super::state::Clock;
use super::Queue;
use crate::message::{now_ms, Message};

/// A message taken by [`Queue::get`].
#[derive(Debug, Clone)]
pub struct Got {
    /// The handle for accept/release/reject.
    pub position: u64,
    pub message: Message,
    pub redelivered: bool,
    /// Times it came back to the queue after a delivery (saturating at 32,767).
    pub returns: u16,
    /// Messages still available after this one.
    pub remaining: u64,
}

impl Queue {
    /// Acquires the first available message for a pull-style get (0-9-1 basic.get), exactly
    /// as a consumer's delivery would be acquired: settle it later with [`Queue::accept`],
    /// [`Queue::release`] or [`Queue::reject`]. Expired messages met on the way are dropped.
    /// `None` when nothing is available (or the queue was deleted).
    pub fn get(&self) -> Option<Got> {
        let mut st = self.lock();
        if st.deleted {
            return None;
        }
        if self.features.expires.is_some() {
            st.last_used = now_ms();
        }
        // Resident: taking the front reads its content back first.
        let entry = st.take_for_get()?;
        Some(Got {
            position: entry.position,
            redelivered: entry.redelivered(),
            returns: entry.redelivery().returns(),
            message: entry.into_message(),
            remaining: st.entries.len() as u64,
        })
    }

    /// Acquires browsed messages (0-10 message.acquire); returns the positions that were still
    /// queued and are now acquired by the caller.
    pub fn acquire(&self, positions: impl IntoIterator<Item = u64>) -> Vec<u64> {
        let mut st = self.lock();
        let mut clock = Clock::default();
        positions
            .into_iter()
            .filter(|p| st.acquire_at(*p, &mut clock))
            .collect()
    }

    /// Acquires recovered messages by store id for a prepared distributed transaction that
    /// dequeues them when it commits (see [`crate::Broker::restore_prepared`]): their
    /// positions and messages. Such messages are restored in memory, never as stand-ins.
    pub(crate) fn acquire_stored(&self, ids: &[u64]) -> Vec<(u64, Message)> {
        let ids: std::collections::HashSet<u64> = ids.iter().copied().collect();
        let mut st = self.lock();
        let found: Vec<(u64, Message)> = st
            .entries
            .iter()
            .filter(|e| e.store_id().is_some_and(|id| ids.contains(&id)))
            .filter_map(|e| Some((e.position, e.message()?.clone())))
            .collect();
        let mut clock = Clock::default();
        found
            .into_iter()
            .filter(|(p, _)| st.acquire_at(*p, &mut clock))
            .collect()
    }
}
