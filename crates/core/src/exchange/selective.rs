//! Bindings with a filter (a JMS selector on the binding, as Qpid Broker-J applies Qpid
//! JMS 0-x's `x-filter-jms-selector`): a queue bound only through filtered bindings gets a
//! message only if one of those filters matches it. So a topic subscriber's queue is never
//! given what its selector rejects, rather than holding it for nobody.
//!
//! Kept beside the routing index, per queue, and only for queues with such a binding: an
//! exchange without one pays a null check per publish. A queue that is also bound without a
//! filter gets whatever that binding routes. Which of a queue's bindings routed a message
//! is not known here, so for a queue bound several times any of its bindings admits it: one
//! without a filter, or one whose filter matches (for direct exchanges only the bindings
//! whose key is the message's routing key count).

use std::collections::HashMap;
use std::sync::Arc;

use crate::exchange_kind::ExchangeKind;
use crate::message::{Message, MessageFilter};
use crate::queue::Queue;

#[derive(Debug, Default)]
struct QueueBindings {
    /// The keys of this queue's bindings here without a filter.
    unfiltered: Vec<String>,
    /// Its filtered bindings: (key, filter).
    filters: Vec<(String, Arc<dyn MessageFilter>)>,
}

/// The filtered bindings of one exchange's queues, by queue id.
#[derive(Debug, Default)]
pub(crate) struct Selective(HashMap<u64, QueueBindings>);

impl Selective {
    /// A binding of `queue` under `key` was added; `already` are the keys of the bindings
    /// the queue had here before it (all unfiltered if the queue was not yet in this table).
    pub(crate) fn added(
        &mut self,
        queue: u64,
        key: &str,
        filter: Option<Arc<dyn MessageFilter>>,
        already: Vec<String>,
    ) {
        match (filter, self.0.get_mut(&queue)) {
            (None, None) => {}
            (None, Some(q)) => q.unfiltered.push(key.to_owned()),
            (Some(f), Some(q)) => q.filters.push((key.to_owned(), f)),
            (Some(f), None) => {
                self.0.insert(
                    queue,
                    QueueBindings {
                        unfiltered: already,
                        filters: vec![(key.to_owned(), f)],
                    },
                );
            }
        }
    }

    /// The binding of `queue` under `key` was removed.
    pub(crate) fn removed(&mut self, queue: u64, key: &str) {
        let Some(q) = self.0.get_mut(&queue) else {
            return;
        };
        match q.filters.iter().position(|(k, _)| k == key) {
            Some(i) => {
                q.filters.swap_remove(i);
            }
            None => q.unfiltered.retain(|k| k != key),
        }
        if q.filters.is_empty() {
            self.0.remove(&queue);
        }
    }

    /// Whether `queue` has a filtered binding here.
    pub(crate) fn has(&self, queue: u64) -> bool {
        self.0.contains_key(&queue)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Drops from `routed` (from index `start`) the queues none of whose bindings admits
    /// `msg`.
    pub(crate) fn apply(
        &self,
        kind: ExchangeKind,
        msg: &Message,
        routed: &mut Vec<Arc<Queue>>,
        start: usize,
    ) {
        // Compacted in place, in order: removing one at a time would shift the tail once per
        // rejected queue.
        let mut kept = start;
        for i in start..routed.len() {
            let admitted = routed
                .get(i)
                .and_then(|q| self.0.get(&q.id()))
                .map_or(true, |q| q.admits(kind, msg));
            if admitted {
                routed.swap(kept, i);
                kept += 1;
            }
        }
        routed.truncate(kept);
    }
}

impl QueueBindings {
    fn admits(&self, kind: ExchangeKind, msg: &Message) -> bool {
        let routed_by =
            |key: &str| kind != ExchangeKind::Direct || key.as_bytes() == msg.routing_key();
        self.unfiltered.iter().any(|k| routed_by(k))
            || self
                .filters
                .iter()
                .any(|(key, f)| routed_by(key) && f.matches(msg))
    }
}
