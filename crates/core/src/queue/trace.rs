//! qpidd's message tracing on queues (`qpid.trace.id`, `qpid.trace.exclude`; see
//! [`TraceEdit`]). The list is read from the message's decoded headers, which publishers
//! fill for tracing queues ([`Queue::needs_headers`]); a message that arrives without them
//! (moved or rerouted from a queue that did not need them) counts as untraced. Queues that
//! do not trace pay one branch per message for each check.

use std::sync::Arc;

use super::features::Tracing;
use super::Queue;
use crate::message::{trace_ids, Message, TraceEdit};

impl Queue {
    /// Whether the queue refuses `msg` because its trace names an excluded id.
    #[inline]
    pub(super) fn excludes(&self, msg: &Message) -> bool {
        match &self.features.trace {
            Some(t) if !t.exclude.is_empty() => excluded(t, msg),
            _ => false,
        }
    }

    /// The message as this queue stores it: with the queue's id added to its trace, if the
    /// queue traces and the trace does not name it yet.
    #[inline]
    pub(super) fn traced(&self, msg: Message) -> Message {
        match self.features.trace.as_ref().and_then(|t| t.id.as_ref()) {
            None => msg,
            Some(id) => add_id(msg, id),
        }
    }
}

#[cold]
fn excluded(tracing: &Tracing, msg: &Message) -> bool {
    let list = msg.trace_list();
    let refused = trace_ids(&list).any(|id| tracing.exclude.iter().any(|e| **e == *id));
    refused
}

#[cold]
fn add_id(msg: Message, id: &Arc<str>) -> Message {
    match TraceEdit::adding(msg.trace().map(|e| &**e), &msg.trace_list(), id) {
        None => msg,
        Some(edit) => msg.derive(|p| {
            // The same message for the store: its record on this queue stays its record.
            p.store_id = msg.store_id();
            p.trace = Some(Arc::new(edit));
        }),
    }
}
