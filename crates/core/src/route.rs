//! Routing a message through an exchange (and its alternates) into queues.

use std::cell::Cell;
use std::sync::Arc;

use crate::error::BrokerError;
use crate::exchange::{dedup_tail, Exchange};
use crate::journal::{Journal, JournalTx, SyncPoint};
use crate::message::Message;
use crate::queue::Queue;

thread_local! {
    /// Reused target list so publishing does not allocate per message. Taken out of the cell
    /// (not borrowed) so a re-entrant call would merely allocate, never panic.
    static SCRATCH: Cell<Vec<Arc<Queue>>> = const { Cell::new(Vec::new()) };
    /// Reused list of the durable targets' store ids, for persistent messages.
    static DURABLE: Cell<Vec<u64>> = const { Cell::new(Vec::new()) };
}

/// What routing did with a message.
pub(crate) struct Routed {
    /// Queues that stored it.
    pub(crate) queues: usize,
    /// Set when the message was journaled: durable once the journal reaches this point.
    pub(crate) sync: Option<SyncPoint>,
}

/// Routes and enqueues. Unroutable messages go to the exchange's alternate (and its
/// alternate, ...). If a queue refuses the message for its limit, the other queues still get
/// it and the first refusal is returned as the error.
pub(crate) fn deliver(
    exchange: &Exchange,
    msg: &Arc<Message>,
    journal: Option<&Arc<dyn Journal>>,
) -> Result<Routed, BrokerError> {
    deliver_except(exchange, msg, journal, |_| false)
}

/// [`deliver`], skipping the queues `skip` picks (dead-letter cycles).
///
/// A persistent message bound for durable queues is journaled once, before any queue holds
/// it, so a settlement (and its dequeue record) can never precede the enqueue record. If the
/// journal refuses it (store full or failed), no queue gets it.
pub(crate) fn deliver_except(
    exchange: &Exchange,
    msg: &Arc<Message>,
    journal: Option<&Arc<dyn Journal>>,
    skip: impl Fn(&Queue) -> bool,
) -> Result<Routed, BrokerError> {
    let mut targets = SCRATCH.with(Cell::take);
    collect(exchange, msg, &mut targets);
    targets.retain(|q| !skip(q));
    let journaled = match journal {
        Some(j) if msg.persistent && !targets.is_empty() => match record(j, msg, &targets, None) {
            Ok(r) => r,
            Err(e) => {
                targets.clear();
                SCRATCH.with(|c| c.set(targets));
                return Err(e);
            }
        },
        _ => None,
    };
    let msg = journaled.as_ref().map_or(msg, |(m, _)| m);
    let mut stored = 0;
    let mut refused = None;
    for q in targets.drain(..) {
        let result = q.enqueue(msg.clone());
        if !matches!(result, Ok(true)) {
            // Journaled for this queue but not taken by it: take the reference back.
            if journaled.is_some() {
                forget(&q, msg, None);
            }
        }
        match result {
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
        None => Ok(Routed {
            queues: stored,
            sync: journaled.map(|(_, point)| point),
        }),
    }
}

/// Journals `msg` for the durable queues among `targets`; `None` if there are none. A message
/// the store already holds (one being dead-lettered) is recorded again as a new message: its
/// old record belongs to the queue it leaves. Returns the message as journaled (a copy in
/// that case) and the point it is durable at. `tx`: the commit it is part of.
pub(crate) fn record(
    journal: &Arc<dyn Journal>,
    msg: &Arc<Message>,
    targets: &[Arc<Queue>],
    tx: Option<&JournalTx>,
) -> Result<Option<(Arc<Message>, SyncPoint)>, BrokerError> {
    let mut ids = DURABLE.with(Cell::take);
    ids.clear();
    ids.extend(targets.iter().filter_map(|q| q.store().map(|s| s.id)));
    let result = if ids.is_empty() {
        Ok(None)
    } else {
        let msg = if msg.stored.get().is_some() {
            Arc::new((**msg).clone())
        } else {
            msg.clone()
        };
        journal.enqueue(&msg, &ids, tx).map(|(id, point)| {
            msg.stored.set(id);
            Some((msg, point))
        })
    };
    DURABLE.with(|c| c.set(ids));
    result
}

/// A journaled message a durable queue did not take after all: drop its reference.
pub(crate) fn forget(q: &Queue, msg: &Message, tx: Option<&JournalTx>) {
    if let (Some(store), Some(id)) = (q.store(), msg.stored.get()) {
        store.journal.dequeue(store.id, &[id], tx);
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
