//! Deliveries settled as they are written (0-10 accept-mode none, 0-9-1 no-ack, 1.0
//! pre-settled), accepted on their queues when the drain of the outbox that wrote them ends,
//! rather than one queue lock per message.
//!
//! Each accept takes the queue's lock, the lock its publishers take for every message. With
//! a publisher on another worker, one lock a message from each side kept the lock's cache
//! line and the queue's state moving between the cores, and the two sides waiting on each
//! other. Accepted together, consecutive deliveries from one queue share one lock
//! ([`Accepts`]: up to 64, or until the queue changes).
//!
//! Until then the messages are acquired and unsettled on their queues, as they were between
//! dispatch and the write, so nothing else can take them. Every drain ends with the accept:
//! the event loop's (`Connection::handle_outbox`) and those inside input processing (0-10's
//! deliveries at the end of a batch of commands, a 1.0 link drain), so no command, and no
//! teardown, sees them pending. That keeps the window in which a queue deleted meanwhile
//! would send an acquired message to its alternate exchange as short as it was.

use std::sync::Arc;

use ferry_core::{Accepts, Message, Queue};

/// A connection's pre-settled deliveries not yet accepted on their queues. The run is boxed
/// on first use: connections that never consume pre-settled pay one pointer for it.
#[derive(Default)]
pub struct Presettled {
    pending: Option<Box<Accepts>>,
    /// The deliveries' handles to their queues, let go of together: each is a count on the
    /// queue that its publisher's dispatch counted up on another worker, and dropping them
    /// one a message moved that count's cache line between the cores for every message.
    handles: Vec<Arc<Queue>>,
}

/// Most queue handles kept before they are dropped (a run's worth).
const HANDLES_MAX: usize = 64;

impl Presettled {
    /// `message` at `position` of `queue` was written to a consumer that settles as it
    /// receives.
    pub fn push(&mut self, queue: Arc<Queue>, position: u64, message: Message) {
        self.pending
            .get_or_insert_with(Box::default)
            .push(&queue, position, message);
        if self.handles.len() == HANDLES_MAX {
            self.handles.clear();
        }
        self.handles.push(queue);
    }

    /// Accepts everything pending on its queue.
    pub fn finish(&mut self) {
        if let Some(pending) = self.pending.as_mut() {
            pending.finish();
        }
        self.handles.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use ferry_core::{
        Broker, BrokerConfig, ConsumerSpec, Delivery, Outbox, OutboxItem, QueueOptions,
    };

    /// A queue `name` on `broker` with `n` messages delivered to its one consumer.
    fn delivered(
        broker: &Arc<Broker>,
        name: &'static str,
        n: usize,
    ) -> (Arc<Queue>, Vec<Delivery>) {
        let (queue, _) = broker
            .declare_queue(name, QueueOptions::default(), false, 1)
            .unwrap();
        let outbox = Outbox::new();
        queue
            .subscribe(ConsumerSpec {
                id: 1,
                outbox: outbox.clone(),
                owner: 1,
                connection: 1,
                tag: Bytes::from_static(b"c"),
                acquire: true,
                exclusive: false,
                window: None,
                filter: None,
                ack_timeout: None,
            })
            .unwrap();
        queue.add_credit(1, u32::MAX, u32::MAX).unwrap();
        for _ in 0..n {
            let message = Message::new("", name, Bytes::from_static(b"m"));
            broker.publish(broker.default_exchange(), message).unwrap();
        }
        let mut items = Vec::new();
        outbox.take(&mut items);
        let deliveries: Vec<Delivery> = items
            .into_iter()
            .filter_map(|item| match item {
                OutboxItem::Deliver(d) => Some(d),
                _ => None,
            })
            .collect();
        assert_eq!(deliveries.len(), n);
        (queue, deliveries)
    }

    fn push_all(presettled: &mut Presettled, deliveries: Vec<Delivery>) {
        for d in deliveries {
            presettled.push(d.queue, d.position, d.message);
        }
    }

    /// A queue with `n` deliveries pushed, not yet accepted.
    fn pushed(n: usize) -> (Arc<Queue>, Presettled) {
        let broker = Broker::new(BrokerConfig::default());
        let (queue, deliveries) = delivered(&broker, "q", n);
        let mut presettled = Presettled::default();
        push_all(&mut presettled, deliveries);
        (queue, presettled)
    }

    #[test]
    fn deliveries_stay_acquired_until_finish() {
        let (queue, mut presettled) = pushed(3);
        assert_eq!(
            queue.unsettled_count(),
            3,
            "nobody else can take them meanwhile"
        );
        presettled.finish();
        assert_eq!(queue.unsettled_count(), 0);
        assert_eq!(queue.message_count(), 0);
    }

    #[test]
    fn queue_handles_are_let_go_together_and_bounded() {
        let broker = Broker::new(BrokerConfig::default());
        let (queue, deliveries) = delivered(&broker, "q", 2 * HANDLES_MAX + 1);
        let alone = Arc::strong_count(&queue) - deliveries.len();
        let mut presettled = Presettled::default();
        push_all(&mut presettled, deliveries);
        assert!(presettled.handles.len() <= HANDLES_MAX);
        presettled.finish();
        assert!(presettled.handles.is_empty());
        assert_eq!(
            Arc::strong_count(&queue),
            alone,
            "no handle kept past finish"
        );
        assert_eq!(queue.message_count(), 0);
        assert_eq!(queue.unsettled_count(), 0);
    }

    #[test]
    fn deliveries_from_several_queues_are_each_accepted_on_theirs() {
        let broker = Broker::new(BrokerConfig::default());
        let (a, from_a) = delivered(&broker, "a", 2);
        let (b, from_b) = delivered(&broker, "b", 2);
        let mut presettled = Presettled::default();
        // Interleaved: every push changes queue.
        for (x, y) in from_a.into_iter().zip(from_b) {
            push_all(&mut presettled, vec![x, y]);
        }
        assert_eq!(b.unsettled_count(), 1, "the last run waits for finish");
        presettled.finish();
        assert_eq!((a.unsettled_count(), b.unsettled_count()), (0, 0));
        assert_eq!((a.message_count(), b.message_count()), (0, 0));
    }

    #[test]
    fn what_is_pending_is_accepted_when_the_connection_goes() {
        let (queue, presettled) = pushed(2);
        assert_eq!(queue.unsettled_count(), 2);
        drop(presettled);
        assert_eq!(queue.unsettled_count(), 0);
        assert_eq!(queue.message_count(), 0);
    }
}
