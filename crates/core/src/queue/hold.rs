//! Producer flow control's wake-up (see `BrokerConfig::backlog_hold`).
//!
//! A publisher held by a queue's backlog registers a [`BacklogWaiter`] with the queue. The
//! queue looks at its backlog each time its lock is released while anyone is registered
//! (under that lock, where the backlog is already known), and lets go of every waiter whose
//! hold the backlog is back within: the waiter is marked and its connection woken through
//! its outbox, so the publisher goes on as soon as the consumers have caught up rather than
//! at its next timer tick. While nobody is held the only cost is the check that the list is
//! empty, a plain read under a lock already held.
//!
//! A publisher goes on at the hold itself, not lower: resuming at half of it (fewer holds,
//! each longer) cost the 0-10 perftest 14% at 256 B and gained nothing measurable at
//! 8-32 KiB.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};

use super::enqueue::Backlog;
use super::{Outbox, Queue, QueueState};

/// One connection's side of a backlog hold: set by a queue that let it go.
#[derive(Debug)]
pub struct BacklogWaiter {
    released: AtomicBool,
    /// Weak: a queue holding a waiter must not keep a closed connection's outbox (and the
    /// deliveries in it, which hold queues) alive.
    outbox: Weak<Outbox>,
}

impl BacklogWaiter {
    /// A waiter that wakes the connection reading `outbox`.
    pub fn new(outbox: &Arc<Outbox>) -> Arc<BacklogWaiter> {
        Arc::new(BacklogWaiter {
            released: AtomicBool::new(false),
            outbox: Arc::downgrade(outbox),
        })
    }

    /// Whether some queue let this waiter go since the last call (which clears it). A plain
    /// load when none did, so an event loop may ask on every turn.
    pub fn take_released(&self) -> bool {
        self.released.load(Ordering::Relaxed) && self.released.swap(false, Ordering::Acquire)
    }

    fn release(&self) {
        self.released.store(true, Ordering::Release);
        if let Some(outbox) = self.outbox.upgrade() {
            outbox.wake();
        }
    }
}

/// A registered waiter and the backlog (bytes) it waits to be within.
#[derive(Debug)]
pub(crate) struct HeldPublisher {
    waiter: Arc<BacklogWaiter>,
    hold: u64,
}

impl QueueState {
    /// Lets go of the waiters whose hold the backlog is within (all of them once the queue
    /// has no consumers or is deleted). Called as the lock is released, only while
    /// someone is held.
    #[cold]
    pub(crate) fn release_held(&mut self) {
        let ready = if self.deleted {
            0
        } else {
            Backlog::of(self).ready_bytes
        };
        self.held.retain(|h| {
            if ready <= h.hold {
                h.waiter.release();
                false
            } else {
                true
            }
        });
    }
}

impl Queue {
    /// Holds `waiter` if the queue has consumers and more than `hold` bytes ready in memory:
    /// the queue lets it go ([`BacklogWaiter::take_released`], and a wake-up of its
    /// connection) once that is within the hold again, the queue loses its consumers or is
    /// deleted. Returns whether it was held; registering again only updates the hold.
    pub fn hold_publisher(&self, waiter: &Arc<BacklogWaiter>, hold: u64) -> bool {
        let mut st = self.lock();
        if st.deleted || Backlog::of(&st).ready_bytes <= hold {
            return false;
        }
        match st.held.iter_mut().find(|h| Arc::ptr_eq(&h.waiter, waiter)) {
            Some(h) => h.hold = hold,
            None => st.held.push(HeldPublisher {
                waiter: waiter.clone(),
                hold,
            }),
        }
        true
    }

    /// Forgets `waiter`: its connection let go of the hold itself (a stall, its end of
    /// stream, or it closed).
    pub fn unhold_publisher(&self, waiter: &Arc<BacklogWaiter>) {
        self.lock().held.retain(|h| !Arc::ptr_eq(&h.waiter, waiter));
    }

    /// Publishers held by this queue now (tests and management).
    pub fn held_publishers(&self) -> usize {
        self.lock().held.len()
    }
}
