//! Routing a message through an exchange (and its alternates) into queues.

mod dead_letters;

use std::cell::Cell;
use std::sync::Arc;

use crate::error::BrokerError;
use crate::exchange::{dedup_tail, Exchange};
use crate::journal::{Journal, JournalTx, SyncPoint};
use crate::message::Message;
use crate::queue::Queue;

pub(crate) use dead_letters::dead_letters;
pub use dead_letters::release_deliveries;

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
    /// A queue that stored it and has more than the asked-for backlog ready in memory.
    pub(crate) backlogged: Option<Arc<Queue>>,
}

/// No backlog holds anyone: dead letters and other broker-internal routing.
const NO_HOLD: u64 = u64::MAX;

/// Routes and enqueues. Unroutable messages go to the exchange's alternate (and its
/// alternate, ...). If a queue refuses the message for its limit, the other queues still get
/// it and the first refusal is returned as the error.
/// A queue whose backlog after the message exceeds `hold` bytes comes back in
/// [`Routed::backlogged`].
pub(crate) fn deliver(
    exchange: &Exchange,
    msg: &Message,
    journal: Option<&Arc<dyn Journal>>,
    hold: u64,
) -> Result<Routed, BrokerError> {
    route(exchange, msg, journal, None, hold)
}

/// [`deliver`], skipping the queues `skip` picks (dead-letter cycles).
///
/// A persistent message bound for durable queues is journaled once, before any queue holds
/// it, so a settlement (and its dequeue record) can never precede the enqueue record. If the
/// journal refuses it (store full or failed), no queue gets it.
pub(crate) fn deliver_except(
    exchange: &Exchange,
    msg: &Message,
    journal: Option<&Arc<dyn Journal>>,
    skip: Option<&dyn Fn(&Queue) -> bool>,
) -> Result<Routed, BrokerError> {
    route(exchange, msg, journal, skip, NO_HOLD)
}

fn route(
    exchange: &Exchange,
    msg: &Message,
    journal: Option<&Arc<dyn Journal>>,
    skip: Option<&dyn Fn(&Queue) -> bool>,
    hold: u64,
) -> Result<Routed, BrokerError> {
    let mut targets = SCRATCH.with(Cell::take);
    collect(exchange, msg, &mut targets);
    if let Some(skip) = skip {
        targets.retain(|q| !skip(q));
    }
    // Transient messages are journaled only for queues that journal everything (a
    // cluster's replicated queues).
    let journaled = |_: &_| {
        !targets.is_empty() && (msg.persistent() || targets.iter().any(|q| q.journals_all()))
    };
    let routed = match journal.filter(journaled) {
        None => enqueue_all(&mut targets, msg, hold, |_| {}).map(|(queues, backlogged)| Routed {
            queues,
            sync: None,
            backlogged,
        }),
        Some(journal) => deliver_journaled(journal, msg, &mut targets, hold),
    };
    targets.clear();
    SCRATCH.with(|c| c.set(targets));
    routed
}

/// Journals a persistent message for the durable queues among `targets`, then enqueues it.
#[cold]
fn deliver_journaled(
    journal: &Arc<dyn Journal>,
    msg: &Message,
    targets: &mut Vec<Arc<Queue>>,
    hold: u64,
) -> Result<Routed, BrokerError> {
    let Some((journaled, point)) = record(journal, msg, targets, None)? else {
        return enqueue_all(targets, msg, hold, |_| {}).map(|(queues, backlogged)| Routed {
            queues,
            sync: None,
            backlogged,
        });
    };
    // Journaled for a queue that did not take it after all: take the reference back.
    let (queues, backlogged) =
        enqueue_all(targets, &journaled, hold, |q| forget(q, &journaled, None))?;
    Ok(Routed {
        queues,
        sync: Some(point),
        backlogged,
    })
}

/// Enqueues `msg` on every target; returns how many stored it and the first whose backlog
/// is now over `hold`, or the first refusal (the others still get the message).
/// `not_taken` hears of each queue that did not store it.
#[inline]
fn enqueue_all(
    targets: &mut Vec<Arc<Queue>>,
    msg: &Message,
    hold: u64,
    mut not_taken: impl FnMut(&Queue),
) -> Result<(usize, Option<Arc<Queue>>), BrokerError> {
    let mut stored = 0;
    let mut refused = None;
    let mut backlogged = None;
    for q in targets.drain(..) {
        match q.enqueue(msg.clone()) {
            Ok(Some(backlog)) => {
                stored += 1;
                if backlog.ready_bytes > hold && backlogged.is_none() {
                    backlogged = Some(q);
                }
            }
            Ok(None) => not_taken(&q),
            Err(e) => {
                not_taken(&q);
                refused.get_or_insert(e);
            }
        }
    }
    refused.map_or(Ok((stored, backlogged)), Err)
}

/// Journals `msg` for the durable queues among `targets`; `None` if there are none. A message
/// the store already holds (one being dead-lettered) is recorded again as a new message: its
/// old record belongs to the queue it leaves. Returns the message as journaled (a copy in
/// that case) and the point it is durable at. `tx`: the commit it is part of.
pub(crate) fn record(
    journal: &Arc<dyn Journal>,
    msg: &Message,
    targets: &[Arc<Queue>],
    tx: Option<&JournalTx>,
) -> Result<Option<(Message, SyncPoint)>, BrokerError> {
    let mut ids = DURABLE.with(Cell::take);
    ids.clear();
    ids.extend(targets.iter().filter_map(|q| q.store().map(|s| s.id)));
    let result = if ids.is_empty() {
        Ok(None)
    } else {
        // A message the store holds already gets a new record as a new message, and one
        // without room for a store id (transient, to a queue that journals everything) a
        // copy with room for it.
        let msg = if msg.store_id().is_some() || !msg.has_store_slot() {
            msg.derive(|p| p.store_slot = true)
        } else {
            msg.clone()
        };
        journal.enqueue(&msg, &ids, tx).map(|(id, point)| {
            let recorded = msg.set_store_id(id);
            debug_assert!(recorded, "a message to journal has room for its id");
            Some((msg, point))
        })
    };
    DURABLE.with(|c| c.set(ids));
    result
}

/// A journaled message a durable queue did not take after all: drop its reference.
pub(crate) fn forget(q: &Queue, msg: &Message, tx: Option<&JournalTx>) {
    if let (Some(store), Some(id)) = (q.store(), msg.store_id()) {
        store.journal.dequeue(store.id, &[id], tx);
    }
}

/// Appends the queues `msg` reaches from `exchange`, each once: the exchange's own matches,
/// then (exchange-to-exchange bindings) those of every exchange it is forwarded to; an
/// exchange that matches nothing passes the message to its alternate, if it has one.
/// Each exchange is visited at most once per message, so binding cycles end.
pub(crate) fn collect(exchange: &Exchange, msg: &Message, targets: &mut Vec<Arc<Queue>>) {
    let start = targets.len();
    // The common case: one exchange, a match, no forwarding.
    if !exchange.route_only_queues(msg, targets) {
        collect_onward(exchange, msg, targets);
    }
    exchange
        .counters()
        .record(msg.size(), targets.len() > start);
}

/// [`collect`] through exchange-to-exchange bindings and alternate exchanges.
#[cold]
fn collect_onward(exchange: &Exchange, msg: &Message, targets: &mut Vec<Arc<Queue>>) {
    let start = targets.len();
    let mut onward: Vec<Arc<Exchange>> = Vec::new();
    if !exchange.route_all(msg, targets, &mut onward) {
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
