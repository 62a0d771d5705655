//! Routing a message through an exchange (and its alternates) into queues.

use std::cell::Cell;
use std::sync::Arc;

use crate::error::BrokerError;
use crate::exchange::{dedup_tail, Exchange};
use crate::message::Message;
use crate::queue::Queue;

thread_local! {
    /// Reused target list so publishing does not allocate per message. Taken out of the cell
    /// (not borrowed) so a re-entrant call would merely allocate, never panic.
    static SCRATCH: Cell<Vec<Arc<Queue>>> = const { Cell::new(Vec::new()) };
}

/// Routes and enqueues; returns how many queues stored the message. Unroutable messages go to
/// the exchange's alternate (and its alternate, ...). If a queue refuses the message for its
/// limit, the other queues still get it and the first refusal is returned as the error.
pub(crate) fn deliver(exchange: &Exchange, msg: &Arc<Message>) -> Result<usize, BrokerError> {
    deliver_except(exchange, msg, |_| false)
}

/// [`deliver`], skipping the queues `skip` picks (dead-letter cycles).
pub(crate) fn deliver_except(
    exchange: &Exchange,
    msg: &Arc<Message>,
    skip: impl Fn(&Queue) -> bool,
) -> Result<usize, BrokerError> {
    let mut targets = SCRATCH.with(Cell::take);
    collect(exchange, msg, &mut targets);
    let mut stored = 0;
    let mut refused = None;
    for q in targets.drain(..) {
        if skip(&q) {
            continue;
        }
        match q.enqueue(msg.clone()) {
            Ok(true) => stored += 1,
            Ok(false) => {}
            Err(e) => {
                refused.get_or_insert(e);
            }
        }
    }
    SCRATCH.with(|c| c.set(targets));
    match refused {
        Some(e) => Err(e),
        None => Ok(stored),
    }
}

/// Appends the queues `msg` reaches from `exchange`, each once: the exchange's own matches,
/// then (exchange-to-exchange bindings) those of every exchange it is forwarded to; an
/// exchange that matches nothing passes the message to its alternate, if it has one.
/// Each exchange is visited at most once per message, so binding cycles end.
pub(crate) fn collect(exchange: &Exchange, msg: &Message, targets: &mut Vec<Arc<Queue>>) {
    let start = targets.len();
    let mut onward: Vec<Arc<Exchange>> = Vec::new();
    let matched = exchange.route_all(msg, targets, &mut onward);
    if matched && onward.is_empty() {
        // The common case: one exchange, no forwarding, no allocation.
        return;
    }
    if !matched {
        match exchange.alternate() {
            Some(alt) => onward.push(alt.clone()),
            None => return,
        }
    }
    let mut visited = vec![exchange.id()];
    while let Some(ex) = onward.pop() {
        if visited.contains(&ex.id()) || ex.is_deleted() {
            continue;
        }
        visited.push(ex.id());
        if !ex.route_all(msg, targets, &mut onward) {
            onward.extend(ex.alternate().cloned());
        }
    }
    dedup_tail(targets, start);
}
