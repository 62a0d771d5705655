//! Consumers subscribing and cancelling, and their credit. A grant dispatches at once, under
//! the same lock, so the consumer never waits for the next publish to be served.

use std::sync::Arc;

use super::{AutoDelete, Consumer, ConsumerSpec, Queue, QueueState};
use crate::error::BrokerError;
use crate::message::now_ms;
use crate::ConsumerId;

impl Queue {
    /// Adds a consumer with no credit (0-10 subscriptions start stopped; grant with
    /// [`Queue::add_credit`]).
    pub fn subscribe(self: &Arc<Self>, spec: ConsumerSpec) -> Result<(), BrokerError> {
        let mut st = self.lock();
        if st.deleted {
            return Err(BrokerError::NotFound(format!(
                "queue {} was deleted",
                self.name
            )));
        }
        // Exclusivity is about taking messages: a browser (0-10 acquire-mode not-acquired)
        // may look at another session's exclusive queue, beside an exclusive consumer, and
        // asks for no exclusivity itself (qpidd's `Queue::consume`; 0-9-1 never browses).
        if spec.acquire {
            if st.owner.is_some_and(|o| o != spec.owner) {
                return Err(self.locked());
            }
            if st.consumers.iter().any(Consumer::is_exclusive) {
                return Err(BrokerError::ResourceLocked(format!(
                    "queue {} has an exclusive consumer",
                    self.name
                )));
            }
            if spec.exclusive && st.consumers.iter().any(|c| c.spec.acquire) {
                return Err(BrokerError::ResourceLocked(format!(
                    "queue {} has consumers; exclusive subscription refused",
                    self.name
                )));
            }
        }
        if st.consumers.iter().any(|c| c.spec.id == spec.id) {
            return Err(BrokerError::InvalidArgument(format!(
                "consumer {} already subscribed to {}",
                spec.id, self.name
            )));
        }
        st.consumers.push(Consumer::new(spec));
        st.count_filtered();
        st.had_consumers = true;
        // In use again: a timed auto-delete is off (qpidd).
        st.timed_delete = None;
        st.last_used = now_ms();
        Ok(())
    }

    /// Removes a consumer; returns whether it existed and whether the queue should now be
    /// auto-deleted (auto-delete, not exclusively owned, had consumers, has none left), at
    /// once or after its `qpid.auto_delete_timeout` (which this schedules).
    pub(crate) fn remove_consumer(&self, id: ConsumerId) -> (bool, AutoDelete) {
        let mut st = self.lock();
        let before = st.consumers.len();
        st.consumers.retain(|c| c.spec.id != id);
        let removed = st.consumers.len() != before;
        st.count_filtered();
        if !removed {
            return (false, AutoDelete::No);
        }
        let now = now_ms();
        st.last_used = now;
        // With no consumers nothing is accepted here for a while, perhaps for good.
        let buried = if st.consumers.is_empty() {
            st.clear_graveyard()
        } else {
            Vec::new()
        };
        let auto_delete = if !self.auto_delete_due(&st) {
            AutoDelete::No
        } else if self.schedule_delete(&mut st, now) {
            AutoDelete::Later
        } else {
            AutoDelete::Now
        };
        drop(st);
        drop(buried);
        (true, auto_delete)
    }

    fn with_consumer<R>(
        &self,
        st: &mut QueueState,
        id: ConsumerId,
        f: impl FnOnce(&mut Consumer) -> R,
    ) -> Result<R, BrokerError> {
        match st.consumer_mut(id) {
            Some(c) => Ok(f(c)),
            None => Err(BrokerError::NotFound(format!(
                "no consumer {id} on queue {}",
                self.name
            ))),
        }
    }

    /// Changes one consumer's credit or flow under the queue's lock, then dispatches what
    /// the change allows.
    fn change_consumer(
        self: &Arc<Self>,
        consumer: ConsumerId,
        f: impl FnOnce(&mut Consumer),
    ) -> Result<(), BrokerError> {
        let mut st = self.lock();
        self.with_consumer(&mut st, consumer, f)?;
        st.dispatch(self);
        Ok(())
    }

    /// Grants credit (`u32::MAX` = unlimited; additions saturate) and dispatches.
    pub fn add_credit(
        self: &Arc<Self>,
        consumer: ConsumerId,
        messages: u32,
        bytes: u32,
    ) -> Result<(), BrokerError> {
        self.change_consumer(consumer, |c| c.add_credit(messages, bytes))
    }

    /// 0-10 window mode: the client completed `messages` transfers (`bytes` of them) that
    /// were delivered in window mode, which moves the window on; dispatches.
    pub fn window_completed(
        self: &Arc<Self>,
        consumer: ConsumerId,
        messages: u32,
        bytes: u32,
    ) -> Result<(), BrokerError> {
        self.change_consumer(consumer, |c| c.window_completed(messages, bytes))
    }

    /// Window (0-10's default for a subscription) or credit flow mode; see `flow`. A new
    /// consumer is in credit mode (0-9-1's prefetch is credit).
    pub fn set_flow_mode(
        self: &Arc<Self>,
        consumer: ConsumerId,
        window: bool,
    ) -> Result<(), BrokerError> {
        self.change_consumer(consumer, |c| c.set_window_mode(window))
    }

    /// Sets the consumer's credit to zero (in window mode: grants nothing more, and what
    /// is outstanding stays in the window).
    pub fn stop(&self, consumer: ConsumerId) -> Result<(), BrokerError> {
        let mut st = self.lock();
        self.with_consumer(&mut st, consumer, Consumer::stop)
    }

    /// Takes back the consumer's unused message credit and returns it. AMQP 1.0 sets a
    /// link's credit outright rather than adding to it: the protocol layer counts what it
    /// granted and subtracts what comes back.
    pub fn take_credit(&self, consumer: ConsumerId) -> Result<u32, BrokerError> {
        let mut st = self.lock();
        self.with_consumer(&mut st, consumer, |c| {
            let left = c.credit_messages;
            c.stop();
            left
        })
    }

    /// Delivers what the consumer's credit allows now, then takes back what is left and
    /// returns it (AMQP 1.0 drain). Whatever was delivered is in the outbox on return.
    pub fn drain_credit(self: &Arc<Self>, consumer: ConsumerId) -> Result<u32, BrokerError> {
        let mut st = self.lock();
        self.with_consumer(&mut st, consumer, |_| ())?;
        st.dispatch_complete(self, consumer);
        self.with_consumer(&mut st, consumer, |c| {
            let left = c.credit_messages;
            c.stop();
            left
        })
    }

    /// Runs dispatch again: an outbox that was full has been drained, or a settlement window
    /// has slots again.
    pub(crate) fn redispatch(self: &Arc<Self>) {
        self.lock().dispatch(self);
    }

    /// Delivers what the consumer's credit allows now, then zeroes its credit as
    /// [`Queue::stop`] does (0-10 message.flush).
    pub fn flush(self: &Arc<Self>, consumer: ConsumerId) -> Result<(), BrokerError> {
        let mut st = self.lock();
        self.with_consumer(&mut st, consumer, |_| ())?;
        st.dispatch_complete(self, consumer);
        self.with_consumer(&mut st, consumer, Consumer::stop)
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;
    use crate::message::Message;
    use crate::queue::{OutboxItem, QueueLimits, QueueOptions};
    use crate::Outbox;

    #[test]
    fn credit_taken_back_or_drained_is_counted() {
        let q = Queue::new(
            "q".into(),
            &QueueOptions::default(),
            None,
            QueueLimits::default(),
        );
        let outbox = Outbox::new();
        q.subscribe(ConsumerSpec {
            id: 1,
            outbox: outbox.clone(),
            owner: 1,
            connection: 0,
            tag: Bytes::new(),
            acquire: true,
            exclusive: false,
            window: None,
            filter: None,
            ack_timeout: None,
        })
        .unwrap();
        let publish = |body: &'static str| {
            q.enqueue(Message::new("", "q", Bytes::from_static(body.as_bytes())))
                .unwrap()
        };
        q.add_credit(1, 5, u32::MAX).unwrap();
        publish("a");
        assert_eq!(q.take_credit(1), Ok(4));
        publish("b");
        assert_eq!(outbox.len(), 1, "no credit left for b");
        q.add_credit(1, 3, u32::MAX).unwrap();
        publish("c");
        // b and c went out under the new credit; one is left, and draining returns it.
        assert_eq!(q.drain_credit(1), Ok(1));
        publish("d");
        let mut items = Vec::new();
        outbox.take(&mut items);
        let bodies: Vec<&[u8]> = items
            .iter()
            .filter_map(|i| match i {
                OutboxItem::Deliver(d) => Some(d.message.body()),
                _ => None,
            })
            .collect();
        assert_eq!(bodies, [b"a", b"b", b"c"]);
        assert!(matches!(q.take_credit(9), Err(BrokerError::NotFound(_))));
    }
}
