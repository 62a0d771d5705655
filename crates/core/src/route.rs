//! Routing a message through an exchange (and its alternates) into queues.

use std::cell::Cell;
use std::sync::Arc;

use crate::error::BrokerError;
use crate::exchange::Exchange;
use crate::message::Message;
use crate::queue::Queue;

/// Alternate exchanges cannot form cycles (an alternate must exist before the exchange naming
/// it, and is fixed for life), but a long chain is still cut off.
const MAX_ALTERNATE_DEPTH: usize = 8;

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
/// or its alternate's (and so on) when it has none.
pub(crate) fn collect(exchange: &Exchange, msg: &Message, targets: &mut Vec<Arc<Queue>>) {
    let mut ex = exchange;
    for _ in 0..=MAX_ALTERNATE_DEPTH {
        let before = targets.len();
        ex.route(msg, targets);
        match (targets.len() == before, ex.alternate()) {
            (true, Some(alt)) => ex = alt,
            _ => break,
        }
    }
}
