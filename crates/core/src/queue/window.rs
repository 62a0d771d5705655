//! A cap on deliveries awaiting settlement, shared by the consumers of one 0-10 session or
//! 0-9-1 channel (qpidd's `--session-max-unacked`).
//!
//! Credit alone does not bound what a peer can leave unsettled: with unlimited credit and
//! explicit acknowledgement (or 0-9-1 without a prefetch), a client that never acknowledges
//! would be sent every message, and the broker would keep a record of each. With a window,
//! dispatch takes one slot per delivery; the protocol layer gives slots back as deliveries
//! are settled, and queues that stopped for want of a slot are dispatched again (which is
//! why the window is part of the queue layer).

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Weak};

use parking_lot::Mutex;

use super::Queue;

#[derive(Debug)]
pub struct SettleWindow {
    slots: AtomicU32,
    has_waiting: AtomicBool,
    /// Queues that found no slot; ranks below queue locks (taken inside dispatch).
    waiting: Mutex<Vec<Weak<Queue>>>,
}

impl SettleWindow {
    /// A window of `limit` slots; `None` for 0, which means no limit.
    pub fn with_limit(limit: u32) -> Option<Arc<SettleWindow>> {
        (limit > 0).then(|| {
            Arc::new(SettleWindow {
                slots: AtomicU32::new(limit),
                has_waiting: AtomicBool::new(false),
                waiting: Mutex::new(Vec::new()),
            })
        })
    }

    /// Slots free now.
    pub fn available(&self) -> u32 {
        self.slots.load(Ordering::SeqCst)
    }

    fn take_one(&self) -> bool {
        self.slots
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
    }

    /// Takes a slot for one delivery from `queue`. When none is free the queue is noted, to be
    /// dispatched again when slots come back.
    pub(crate) fn try_take(&self, queue: &Arc<Queue>) -> bool {
        if self.take_one() {
            return true;
        }
        {
            let mut waiting = self.waiting.lock();
            if !waiting.iter().any(|w| w.as_ptr() == Arc::as_ptr(queue)) {
                waiting.push(Arc::downgrade(queue));
            }
            self.has_waiting.store(true, Ordering::SeqCst);
        }
        // A give-back between the failed take and the registration saw no waiter; taking again
        // now cannot miss it (both sides use SeqCst: store-then-load against add-then-load).
        self.take_one()
    }

    /// `n` deliveries were settled (or will never be): their slots are free again. Call with
    /// no queue lock held.
    pub fn give_back(&self, n: u32) {
        if n == 0 {
            return;
        }
        self.slots.fetch_add(n, Ordering::SeqCst);
        if !self.has_waiting.load(Ordering::SeqCst) {
            return;
        }
        let waiting = {
            let mut waiting = self.waiting.lock();
            self.has_waiting.store(false, Ordering::SeqCst);
            std::mem::take(&mut *waiting)
        };
        for queue in waiting.iter().filter_map(Weak::upgrade) {
            queue.redispatch();
        }
    }
}
