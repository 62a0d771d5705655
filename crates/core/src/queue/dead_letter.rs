//! Dead-lettering, as far as a queue goes: which messages leave for the queue's alternate
//! exchange (0-10) or dead letter exchange (RabbitMQ), and in what form.
//!
//! A queue never routes them itself. Exchanges sit a layer above queues (their bindings hold
//! queues), so a queue holds its alternate exchange only as an [`AlternateExchange`], and
//! the operations that take messages off for it (reject, expiry, drop-head overflow, release
//! onto a deleted queue, deletion) return them as [`DeadLetters`]. The caller routes those
//! with `crate::route::dead_letters` once it holds no queue lock, as every publish is made.

use std::any::Any;
use std::sync::Arc;

use bytes::Bytes;

use super::Queue;
use crate::message::{now_ms, DeathReason, Message};
use crate::value::Arguments;

/// A queue's alternate or dead letter exchange, as the queue holds it: by name, plus what
/// the layers above need to get the exchange back. [`crate::Exchange`] implements it.
pub(crate) trait AlternateExchange: Any + Send + Sync {
    fn name(&self) -> &str;
    /// The exchange itself, for the layers that know its type.
    fn into_any(self: Arc<Self>) -> Arc<dyn Any + Send + Sync>;
}

/// Why messages leave a queue for its alternate exchange.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Leaving {
    /// Dead-lettered: rejected, expired, or dropped from the head over the length limit.
    Died(DeathReason),
    /// Left without dying: still queued when the queue was deleted, or released onto it
    /// after. 0-10 sends these to the alternate exchange; RabbitMQ drops them.
    Orphaned,
}

/// Messages a queue operation took off `queue` for its alternate exchange, in the order
/// they left. Route them with `crate::route::dead_letters` after releasing the queue lock.
#[must_use = "dead letters must be routed once no queue lock is held"]
pub(crate) struct DeadLetters<'q> {
    queue: &'q Queue,
    why: Leaving,
    messages: Vec<Message>,
}

impl<'q> DeadLetters<'q> {
    pub(crate) fn is_empty(&self) -> bool {
        self.messages.is_empty()
    }

    pub(crate) fn queue(&self) -> &'q Queue {
        self.queue
    }

    /// Where the messages go: the queue's alternate exchange while it exists (a dead letter
    /// exchange may be declared after the queue, or deleted), or nowhere (`None`: they are
    /// dropped). A queue that dead-letters the RabbitMQ way drops orphans, as RabbitMQ
    /// does.
    pub(crate) fn target(&self) -> Option<Arc<dyn AlternateExchange>> {
        if self.why == Leaving::Orphaned && self.queue.features.dead_letter {
            return None;
        }
        self.queue.alternate.lock().clone()
    }

    /// Whether routing skips the queues a message already died in with no rejection on the
    /// way (RabbitMQ's cycle rule, [`crate::DeathHistory::is_cycle_into`]).
    pub(crate) fn skips_cycles(&self) -> bool {
        matches!(self.why, Leaving::Died(_)) && self.queue.features.dead_letter
    }

    /// The messages in the form they are published to the target in.
    pub(crate) fn into_messages(self) -> impl Iterator<Item = Message> + 'q {
        let (queue, why) = (self.queue, self.why);
        self.messages.into_iter().map(move |m| match why {
            Leaving::Died(reason) if queue.features.dead_letter => queue.record_death(m, reason),
            _ => queue.rekeyed(m),
        })
    }
}

impl Queue {
    /// `messages` leave the queue for `why`; nothing does if the queue has no alternate
    /// exchange (it never will: the name is fixed at declare).
    pub(crate) fn leaving(&self, why: Leaving, messages: Vec<Message>) -> DeadLetters<'_> {
        let messages = if self.alternate_name.is_some() {
            messages
        } else {
            Vec::new()
        };
        DeadLetters {
            queue: self,
            why,
            messages,
        }
    }

    /// [`Queue::leaving`] for one message, allocating only if it goes somewhere.
    pub(crate) fn leaving_one(&self, why: Leaving, message: Message) -> DeadLetters<'_> {
        let messages = if self.alternate_name.is_some() {
            vec![message]
        } else {
            Vec::new()
        };
        DeadLetters {
            queue: self,
            why,
            messages,
        }
    }

    /// Whether the queue dead-letters the RabbitMQ way (`x-dead-letter-exchange`).
    pub(crate) fn is_dead_lettering(&self) -> bool {
        self.features.dead_letter
    }

    /// The queue's alternate (or dead letter) exchange, while it exists.
    pub(crate) fn alternate(&self) -> Option<Arc<dyn AlternateExchange>> {
        self.alternate.lock().clone()
    }

    /// Takes `ex` as the dead letter exchange if this queue dead-letters by that name and
    /// has none now: the exchange was declared after the queue.
    pub(crate) fn adopt_dead_letter_exchange(&self, ex: Arc<dyn AlternateExchange>) {
        if self.features.dead_letter && self.alternate_name.as_deref() == Some(ex.name()) {
            let mut alt = self.alternate.lock();
            if alt.is_none() {
                *alt = Some(ex);
            }
        }
    }

    /// Lets go of `ex` if it is this queue's dead letter exchange: it is being deleted.
    pub(crate) fn forget_dead_letter_exchange(&self, ex: &dyn AlternateExchange) {
        if self.features.dead_letter {
            let mut alt = self.alternate.lock();
            if alt
                .as_ref()
                .is_some_and(|a| std::ptr::addr_eq(Arc::as_ptr(a), ex))
            {
                *alt = None;
            }
        }
    }

    /// A message dead-lettered the RabbitMQ way: the death is recorded on it, its expiry is
    /// dropped (so it cannot expire again on arrival), and it is republished to the dead
    /// letter exchange, under `x-dead-letter-routing-key` if the queue has one.
    fn record_death(&self, msg: Message, reason: DeathReason) -> Message {
        let mut history = msg.deaths().map(|d| (**d).clone()).unwrap_or_default();
        history.record(
            &self.name,
            reason,
            msg.exchange(),
            msg.routing_key(),
            now_ms(),
        );
        msg.derive(|p| {
            p.deaths = Some(Arc::new(history));
            p.expires_at = None;
            p.exchange = Some(Bytes::from(self.alternate_name.clone().unwrap_or_default()));
            if let Some(key) = &self.features.dead_letter_routing_key {
                p.routing_key = Some(Bytes::from(key.clone()));
            }
        })
    }

    /// A message going to a 0-10 alternate exchange goes unchanged, as qpidd sends it,
    /// except for the routing key when the queue gives one.
    fn rekeyed(&self, msg: Message) -> Message {
        match &self.features.dead_letter_routing_key {
            Some(key) => msg.derive(|p| p.routing_key = Some(Bytes::from(key.clone()))),
            None => msg,
        }
    }
}

/// The `x-dead-letter-exchange` argument, if it is a string.
pub(crate) fn dead_letter_exchange_name(args: &Arguments) -> Option<&str> {
    args.get("x-dead-letter-exchange").and_then(|v| v.as_str())
}
