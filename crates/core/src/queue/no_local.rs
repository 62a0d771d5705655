//! qpidd's `no-local` queues: a message published on the connection of the session that
//! owns the queue exclusively, or that holds its exclusive subscription, is dropped when it
//! arrives, never queued (qpidd's `Queue::isLocal`, checked in `Queue::accept`). The message
//! carries its publisher's connection, so this holds for messages rerouted from elsewhere
//! too. Without an owner or an exclusive subscriber, no-local does nothing.

use super::{Consumer, Queue, QueueState};
use crate::message::Message;

impl Queue {
    /// Whether `msg` is its owner's own. Only no-local queues ask.
    #[cold]
    pub(super) fn is_local(&self, st: &QueueState, msg: &Message) -> bool {
        let from = msg.publisher();
        from != 0
            && ((st.owner.is_some() && st.owner_connection == from)
                || st
                    .consumers
                    .iter()
                    .any(|c| Consumer::is_exclusive(c) && c.spec.connection == from))
    }
}
