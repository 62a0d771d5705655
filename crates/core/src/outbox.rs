//! Per-connection hand-off of deliveries from queues to the connection's writer task.

use std::sync::Arc;

use bytes::Bytes;
use parking_lot::Mutex;
use tokio::sync::futures::Notified;
use tokio::sync::Notify;

use crate::message::Message;
use crate::queue::Queue;
use crate::ConsumerId;

/// One message handed to a consumer.
#[derive(Debug, Clone)]
pub struct Delivery {
    pub consumer: ConsumerId,
    /// The protocol's destination / consumer tag given at subscribe time.
    pub tag: Bytes,
    pub queue: Arc<Queue>,
    pub message: Arc<Message>,
    /// Position in the queue; the handle for accept/release/reject/acquire.
    pub position: u64,
    pub redelivered: bool,
    /// False for browse deliveries: the message is still on the queue.
    pub acquired: bool,
}

#[derive(Debug)]
pub enum OutboxItem {
    Deliver(Delivery),
    /// The queue was deleted under this consumer; the subscription no longer exists.
    ConsumerCancelled {
        consumer: ConsumerId,
        tag: Bytes,
        queue: String,
    },
}

/// Deliveries waiting for one connection's writer.
///
/// Queues push under their own lock; the writer swaps the whole batch out, writes it, and
/// flushes once. Only the empty→non-empty transition wakes the writer, so a burst of N deliveries
/// costs one wake-up. Memory is bounded by consumer credit: a queue only pushes what credit
/// allows.
#[derive(Debug, Default)]
pub struct Outbox {
    items: Mutex<Vec<OutboxItem>>,
    notify: Notify,
}

impl Outbox {
    pub fn new() -> Arc<Outbox> {
        Arc::new(Outbox::default())
    }

    pub fn push(&self, item: OutboxItem) {
        let was_empty = {
            let mut items = self.items.lock();
            let was_empty = items.is_empty();
            items.push(item);
            was_empty
        };
        if was_empty {
            self.notify.notify_one();
        }
    }

    /// Moves all of `batch` in, leaving `batch` empty with its capacity (dispatch reuses it).
    pub(crate) fn push_batch(&self, batch: &mut Vec<OutboxItem>) {
        if batch.is_empty() {
            return;
        }
        let was_empty = {
            let mut items = self.items.lock();
            let was_empty = items.is_empty();
            if was_empty && items.capacity() < batch.capacity() {
                std::mem::swap(&mut *items, batch);
            } else {
                items.append(batch);
            }
            was_empty
        };
        if was_empty {
            self.notify.notify_one();
        }
    }

    /// Moves everything queued into `buf`. When `buf` is empty (the steady state: the writer
    /// clears it after writing) the vectors are swapped, so neither side allocates.
    pub fn take(&self, buf: &mut Vec<OutboxItem>) {
        let mut items = self.items.lock();
        if buf.is_empty() {
            std::mem::swap(&mut *items, buf);
        } else {
            buf.append(&mut items);
        }
    }

    /// Resolves after a push to an empty outbox. A push that happens before this is awaited is
    /// not lost (`Notify` keeps one permit), so `take`, then await when nothing came, is race
    /// free.
    pub fn notified(&self) -> Notified<'_> {
        self.notify.notified()
    }

    pub fn len(&self) -> usize {
        self.items.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.lock().is_empty()
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
        ob.push_batch(&mut batch);
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
}
