//! Per-connection hand-off of deliveries from queues to the connection's writer task.
//!
//! Part of the queue layer: a delivery names its queue (the handle to settle it with), and
//! a queue that found the outbox full is dispatched again from here.

use std::sync::{Arc, Weak};

use bytes::Bytes;
use parking_lot::Mutex;
use tokio::sync::futures::Notified;
use tokio::sync::Notify;

use super::Queue;
use crate::journal::DurableWaiter;
use crate::message::Message;
use crate::ConsumerId;

/// One message handed to a consumer.
#[derive(Debug, Clone)]
pub struct Delivery {
    pub consumer: ConsumerId,
    pub queue: Arc<Queue>,
    pub message: Message,
    /// Position in the queue; the handle for accept/release/reject/acquire.
    pub position: u64,
    pub redelivered: bool,
    /// Times the message came back to its queue after a delivery (saturating at 32,767).
    pub returns: u16,
    /// False for browse deliveries: the message is still on the queue.
    pub acquired: bool,
    /// The delivery took a slot of the consumer's settlement window (it had unlimited credit);
    /// the protocol layer gives the slot back when the delivery is settled.
    pub windowed: bool,
    /// Delivered in 0-10 window flow mode: its completion moves the consumer's window on
    /// ([`Queue::window_completed`]).
    pub window_credit: bool,
}

impl Delivery {
    /// Earlier deliveries of the message as far as the broker knows, for AMQP 1.0's header
    /// delivery-count: the returns counted, and at least one if the message is marked
    /// redelivered (a message recovered from the store, or restored on a new cluster
    /// leader, is marked so with no return counted). 0-9-1's `x-delivery-count` is the
    /// returns alone, as RabbitMQ counts them: nothing unless the message came back.
    pub fn prior_deliveries(&self) -> u32 {
        u32::from(self.returns).max(u32::from(self.redelivered))
    }
}

#[derive(Debug)]
pub enum OutboxItem {
    Deliver(Delivery),
    /// The queue was deleted under this consumer; the subscription no longer exists.
    ConsumerCancelled {
        consumer: ConsumerId,
        tag: Bytes,
        queue: String,
        /// It still had credit: it was waiting for messages (qpidd then fails the 0-10
        /// session with resource-deleted).
        credit: bool,
    },
    /// The journal reached a sync point this connection asked about
    /// ([`crate::Journal::notify_when_durable`]): completions or confirms waiting for it can go.
    Durable,
    /// Management, or the connection itself on finding its user deleted, closes the
    /// connection (the peer is told `reason`).
    Close {
        reason: String,
    },
}

/// Deliveries waiting for one connection's writer.
///
/// Queues push under their own lock; the writer swaps the whole batch out, writes it, and
/// flushes once. Only the empty→non-empty transition wakes the writer, so a burst of N deliveries
/// costs one wake-up.
///
/// Memory is bounded twice: by consumer credit, and by the outbox's own room
/// ([`OUTBOX_MAX_ITEMS`], [`OUTBOX_MAX_BYTES`]), so a consumer with unlimited credit on a
/// connection that stops writing (a peer that never reads) cannot make it grow without bound.
/// A queue that finds no room registers itself; the next [`Outbox::take`] re-runs its dispatch.
#[derive(Debug, Default)]
pub struct Outbox {
    inner: Mutex<Inner>,
    notify: Notify,
}

#[derive(Debug, Default)]
struct Inner {
    items: Vec<OutboxItem>,
    /// Message bytes in `items`.
    bytes: u64,
    /// Queues that stopped dispatching to this outbox for want of room, or part-way
    /// through a walk.
    waiting: Vec<Weak<Queue>>,
    /// One of `waiting` is in the middle of a walk ([`Again::Walk`]).
    walking: bool,
}

/// Why a queue asks to be dispatched again after the writer's next take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Again {
    /// The outbox had no room left for a consumer with credit.
    Room,
    /// A consumer's walk over the queue stopped at its bound (`Consumer::walk_cut`).
    Walk,
}

/// Most deliveries an outbox holds before queues stop pushing into it.
pub const OUTBOX_MAX_ITEMS: usize = 4096;
/// Most message bytes an outbox holds before queues stop pushing (one message may overshoot).
pub const OUTBOX_MAX_BYTES: u64 = 8 << 20;

impl Outbox {
    pub fn new() -> Arc<Outbox> {
        Arc::new(Outbox::default())
    }

    pub fn push(&self, item: OutboxItem) {
        let was_empty = {
            let mut inner = self.inner.lock();
            let was_empty = inner.items.is_empty();
            inner.bytes += item_bytes(&item);
            inner.items.push(item);
            was_empty
        };
        if was_empty {
            self.notify.notify_one();
        }
    }

    /// Room left for deliveries: (items, bytes).
    pub(crate) fn room(&self) -> (usize, u64) {
        let inner = self.inner.lock();
        (
            OUTBOX_MAX_ITEMS.saturating_sub(inner.items.len()),
            OUTBOX_MAX_BYTES.saturating_sub(inner.bytes),
        )
    }

    /// Moves all of `batch` (holding `bytes` of messages) in, leaving `batch` empty with its
    /// capacity (dispatch reuses it). With `wait_on`, the queue asks to be dispatched again
    /// after the next take, for the reason given; registering under the same lock as the
    /// writer's take means the request cannot be missed.
    pub(crate) fn push_batch(
        &self,
        batch: &mut Vec<OutboxItem>,
        bytes: u64,
        wait_on: Option<(&Arc<Queue>, Again)>,
    ) {
        if batch.is_empty() && wait_on.is_none() {
            return;
        }
        let wake = {
            let mut inner = self.inner.lock();
            let was_empty = inner.items.is_empty();
            if was_empty && inner.items.capacity() < batch.capacity() {
                std::mem::swap(&mut inner.items, batch);
            } else {
                inner.items.append(batch);
            }
            inner.bytes += bytes;
            if let Some((queue, again)) = wait_on {
                inner.walking |= again == Again::Walk;
                if !inner
                    .waiting
                    .iter()
                    .any(|w| w.as_ptr() == Arc::as_ptr(queue))
                {
                    inner.waiting.push(Arc::downgrade(queue));
                }
            }
            // An empty outbox with a waiting queue must still wake the writer, or nobody
            // would ever take and re-dispatch.
            was_empty && !(inner.items.is_empty() && inner.waiting.is_empty())
        };
        if wake {
            self.notify.notify_one();
        }
    }

    /// Moves everything queued into `buf`. When `buf` is empty (the steady state: the writer
    /// clears it after writing) the vectors are swapped, so neither side allocates. Queues
    /// that were waiting for room are then dispatched again (outside the outbox lock, which
    /// ranks below queue locks). Returns whether a queue's walk was among them: it goes on
    /// in slices while takes dispatch it again (see [`Again::Walk`]), so the caller lets other
    /// tasks run before it takes again.
    pub fn take(&self, buf: &mut Vec<OutboxItem>) -> bool {
        let (waiting, walking) = {
            let mut inner = self.inner.lock();
            if buf.is_empty() {
                std::mem::swap(&mut inner.items, buf);
            } else {
                buf.append(&mut inner.items);
            }
            inner.bytes = 0;
            (
                std::mem::take(&mut inner.waiting),
                std::mem::take(&mut inner.walking),
            )
        };
        for queue in waiting.iter().filter_map(Weak::upgrade) {
            queue.redispatch();
        }
        walking
    }

    /// Wakes the connection without handing it anything: something it waits for besides
    /// deliveries happened (a queue let go of its publisher; see `BacklogWaiter`).
    pub fn wake(&self) {
        self.notify.notify_one();
    }

    /// Resolves after a push to an empty outbox. A push that happens before this is awaited is
    /// not lost (`Notify` keeps one permit), so `take`, then await when nothing came, is race
    /// free.
    pub fn notified(&self) -> Notified<'_> {
        self.notify.notified()
    }

    pub fn len(&self) -> usize {
        self.inner.lock().items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.inner.lock().items.is_empty()
    }
}

impl DurableWaiter for Outbox {
    fn wake(&self) {
        self.push(OutboxItem::Durable);
    }
}

fn item_bytes(item: &OutboxItem) -> u64 {
    match item {
        OutboxItem::Deliver(d) => d.message.size(),
        OutboxItem::ConsumerCancelled { .. } | OutboxItem::Durable | OutboxItem::Close { .. } => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cancelled(n: u64) -> OutboxItem {
        OutboxItem::ConsumerCancelled {
            consumer: n,
            tag: Bytes::new(),
            queue: String::new(),
            credit: false,
        }
    }

    #[test]
    fn take_returns_items_in_order_and_empties() {
        let ob = Outbox::default();
        ob.push(cancelled(1));
        ob.push(cancelled(2));
        let mut buf = Vec::new();
        ob.take(&mut buf);
        let ids: Vec<u64> = buf
            .iter()
            .map(|i| match i {
                OutboxItem::ConsumerCancelled { consumer, .. } => *consumer,
                OutboxItem::Deliver(d) => d.consumer,
                OutboxItem::Durable | OutboxItem::Close { .. } => 0,
            })
            .collect();
        assert_eq!(ids, vec![1, 2]);
        assert!(ob.is_empty());
    }

    #[test]
    fn take_appends_when_buffer_not_empty() {
        let ob = Outbox::default();
        let mut buf = vec![cancelled(1)];
        ob.push(cancelled(2));
        ob.take(&mut buf);
        assert_eq!(buf.len(), 2);
    }

    #[test]
    fn batch_push_keeps_order_after_existing_items() {
        let ob = Outbox::default();
        ob.push(cancelled(1));
        let mut batch = vec![cancelled(2), cancelled(3)];
        ob.push_batch(&mut batch, 0, None);
        assert!(batch.is_empty());
        let mut buf = Vec::new();
        ob.take(&mut buf);
        assert_eq!(buf.len(), 3);
        assert!(matches!(
            buf[2],
            OutboxItem::ConsumerCancelled { consumer: 3, .. }
        ));
    }

    #[tokio::test]
    async fn push_before_await_is_not_lost() {
        let ob = Outbox::default();
        ob.push(cancelled(1));
        // Completes immediately thanks to the stored permit.
        tokio::time::timeout(std::time::Duration::from_secs(1), ob.notified())
            .await
            .expect("permit stored by notify_one");
    }

    #[test]
    fn a_take_reports_a_walk_going_on_but_not_a_queue_waiting_for_room() {
        let ob = Outbox::default();
        let q = crate::queue::tests::queue();
        ob.push_batch(&mut Vec::new(), 0, Some((&q, Again::Room)));
        assert!(!ob.take(&mut Vec::new()), "room: nothing to yield for");
        ob.push_batch(&mut Vec::new(), 0, Some((&q, Again::Room)));
        ob.push_batch(&mut Vec::new(), 0, Some((&q, Again::Walk)));
        assert!(ob.take(&mut Vec::new()), "a walk goes on");
        assert!(!ob.take(&mut Vec::new()), "reported once");
    }
}
