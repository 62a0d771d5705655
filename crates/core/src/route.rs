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
    let mut targets = SCRATCH.with(Cell::take);
    let mut ex = exchange;
    for _ in 0..=MAX_ALTERNATE_DEPTH {
        ex.route(msg, &mut targets);
        match (targets.is_empty(), ex.alternate()) {
            (true, Some(alt)) => ex = alt,
            _ => break,
        }
    }
    let mut stored = 0;
    let mut refused = None;
    for q in targets.drain(..) {
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
