//! Bindings with a filter (a JMS selector on the binding, as Qpid Broker-J applies Qpid
//! JMS 0-x's `x-filter-jms-selector`): a queue bound through a filtered binding gets a
//! message that binding routes only if the filter matches it. So a topic subscriber's queue
//! is never given what its selector rejects, rather than holding it for nobody.
//!
//! Kept beside the routing index, per queue, and only for queues with such a binding: an
//! exchange without one pays a null check per publish. The index says only that some binding
//! of a queue routed a message, so for a queue bound more than once each binding is asked
//! whether it routes the message (its key, or a headers binding's criteria) and whether its
//! filter admits it; any one that does both lets the message in.

use std::collections::HashMap;
use std::sync::Arc;

use super::headers::HeadersBinding;
use super::{topic, BindingIdentity};
use crate::exchange_kind::ExchangeKind;
use crate::message::{Message, MessageFilter};
use crate::queue::Queue;
use crate::value::Arguments;

/// One binding of a queue that has a filtered binding on this exchange.
#[derive(Debug)]
struct Binding {
    key: String,
    /// What tells it from others under the same key ([`BindingIdentity::KeyAndArguments`]).
    arguments: Arguments,
    /// A headers exchange's match criteria (there the key plays no part in routing).
    headers: Option<HeadersBinding<()>>,
    filter: Option<Arc<dyn MessageFilter>>,
}

impl Binding {
    fn new(
        kind: ExchangeKind,
        key: &str,
        args: &Arguments,
        filter: Option<Arc<dyn MessageFilter>>,
    ) -> Binding {
        Binding {
            key: key.to_owned(),
            arguments: args.clone(),
            // The index accepted these arguments already.
            headers: (kind == ExchangeKind::Headers)
                .then(|| HeadersBinding::new((), key, args).ok())
                .flatten(),
            filter,
        }
    }

    fn routes(&self, kind: ExchangeKind, msg: &Message) -> bool {
        match kind {
            ExchangeKind::Direct => self.key.as_bytes() == msg.routing_key(),
            ExchangeKind::Fanout => true,
            ExchangeKind::Topic => topic::pattern_matches(&self.key, msg.routing_key()),
            ExchangeKind::Headers => self
                .headers
                .as_ref()
                .is_some_and(|h| h.matches(msg.headers().map(|h| &**h))),
        }
    }

    fn admits(&self, msg: &Message) -> bool {
        self.filter.as_ref().map_or(true, |f| f.matches(msg))
    }
}

/// The filtered bindings of one exchange's queues (with those queues' other bindings here),
/// by queue id.
#[derive(Debug, Default)]
pub(crate) struct Selective(HashMap<u64, Vec<Binding>>);

impl Selective {
    /// (`queue`, `key`) was bound, anew or again: under [`BindingIdentity::Key`] a
    /// rebinding's filter replaces the one it had, as its arguments do in the store (so a
    /// restart finds what ran before it). `earlier` lists the queue's bindings here, (key,
    /// arguments); it is asked for only when the queue has no filtered binding here yet, and
    /// includes this one.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn bound<'a>(
        &mut self,
        kind: ExchangeKind,
        queue: u64,
        key: &str,
        args: &Arguments,
        filter: Option<Arc<dyn MessageFilter>>,
        identity: BindingIdentity,
        earlier: impl FnOnce() -> Vec<(&'a str, &'a Arguments)>,
    ) {
        let binding = Binding::new(kind, key, args, filter);
        match self.0.get_mut(&queue) {
            Some(bindings) => {
                match identity {
                    BindingIdentity::Key => bindings.retain(|b| b.key != key),
                    BindingIdentity::KeyAndArguments => {
                        bindings.retain(|b| !(b.key == key && b.arguments.same_entries(args)))
                    }
                }
                bindings.push(binding);
                if bindings.iter().all(|b| b.filter.is_none()) {
                    self.0.remove(&queue);
                }
            }
            None if binding.filter.is_some() => {
                let mut bindings: Vec<Binding> = earlier()
                    .into_iter()
                    .filter(|(k, a)| !(*k == key && a.same_entries(args)))
                    .map(|(k, a)| Binding::new(kind, k, a, None))
                    .collect();
                bindings.push(binding);
                self.0.insert(queue, bindings);
            }
            None => {}
        }
    }

    /// Bindings of `queue` under `key` were removed: all of them, or with `only` the one
    /// with those arguments.
    pub(crate) fn removed(&mut self, queue: u64, key: &str, only: Option<&Arguments>) {
        let Some(bindings) = self.0.get_mut(&queue) else {
            return;
        };
        bindings.retain(|b| !(b.key == key && only.map_or(true, |a| b.arguments.same_entries(a))));
        if bindings.iter().all(|b| b.filter.is_none()) {
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

    /// Drops from `routed` (from index `start`) the queues none of whose bindings both
    /// routes and admits `msg`.
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
                .map_or(true, |bindings| admits(bindings, kind, msg));
            if admitted {
                routed.swap(kept, i);
                kept += 1;
            }
        }
        routed.truncate(kept);
    }
}

fn admits(bindings: &[Binding], kind: ExchangeKind, msg: &Message) -> bool {
    match bindings {
        // The index routed the message here, so the one binding routes it.
        [only] => only.admits(msg),
        _ => bindings
            .iter()
            .any(|b| b.routes(kind, msg) && b.admits(msg)),
    }
}
