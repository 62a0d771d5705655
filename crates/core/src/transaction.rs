//! Local transactions (0-9-1 and 0-10 `tx`): a session stages publishes and settlements in a
//! [`Transaction`], and [`crate::Broker::commit`] applies them as one unit.

use std::sync::Arc;

use crate::alarm::MemoryMeter;
use crate::error::BrokerError;
use crate::exchange::Exchange;
use crate::journal::{Journal, JournalTx, SyncPoint};
use crate::message::{now_ms, DeathReason, Message};
use crate::queue::{Enqueued, Gone, Leaving, Locked, Queue, Settled};
use crate::route;

/// How a staged settlement leaves the consumer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settlement {
    /// Accepted (0-10 message.accept, 0-9-1 basic.ack): the message leaves its queue.
    Accept,
    /// Rejected without requeue: the message is dead-lettered.
    Reject,
    /// Put back on its queue (0-9-1 reject/nack with requeue), marked redelivered if asked.
    Release { redelivered: bool },
}

#[derive(Debug)]
struct StagedSettlement {
    queue: Arc<Queue>,
    position: u64,
    message: Message,
    how: Settlement,
}

/// Work a session has done inside a transaction and not yet committed. Nothing staged here
/// is visible to anyone until [`crate::Broker::commit`]; rolling back is dropping (or
/// [`Transaction::clear`]ing) it. Settlements refer to messages the session holds acquired,
/// which stay acquired (and counted against queue limits) until the commit.
///
/// Staged publishes count in the broker's memory meter (make the transaction with
/// [`crate::Broker::transaction`]), so a client staging without committing meets the memory
/// alarm like one filling a queue.
#[derive(Debug, Default)]
pub struct Transaction {
    publishes: Vec<(Arc<Exchange>, Message)>,
    /// Publishes routed (and journaled) by a prepare: they go to these queues on commit.
    routed: Vec<(Vec<Arc<Queue>>, Message)>,
    settlements: Vec<StagedSettlement>,
    meter: Option<Arc<MemoryMeter>>,
    staged_bytes: u64,
    /// Set by a prepare that the journal recorded: the commit or abort closes that
    /// transaction in the journal.
    prepared: Option<Prepared>,
}

struct Prepared {
    journal: Arc<dyn Journal>,
    tx: Arc<JournalTx>,
    /// Restored from a prepare record whose branch had work held elsewhere (see
    /// `JournaledBranch::held_elsewhere`): that part is gone.
    lost: bool,
}

impl std::fmt::Debug for Prepared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Prepared").field("tx", &self.tx).finish()
    }
}

impl Drop for Transaction {
    fn drop(&mut self) {
        self.uncharge();
    }
}

/// What a commit did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CommitOutcome {
    /// For each staged publish, in order (those a prepare routed first): how many queues
    /// stored it (0 = unroutable, expired, or its exchange was deleted before the commit).
    pub routed: Vec<usize>,
    /// The first refusal by a queue at its limit, if any. Like a plain publish, a refused
    /// message still reaches the other queues it was routed to.
    pub refused: Option<BrokerError>,
    /// Settlements that applied (the others named messages no longer held).
    pub settled: usize,
    /// Set when the commit journaled anything (persistent messages in, stored messages
    /// out): confirm the commit once the journal is durable up to here, where all of it is.
    pub sync: Option<SyncPoint>,
}

impl Transaction {
    /// A transaction whose staged bytes are not metered (tests); brokers hand out metered
    /// ones with [`crate::Broker::transaction`].
    pub fn new() -> Transaction {
        Transaction::default()
    }

    pub(crate) fn metered(meter: Arc<MemoryMeter>) -> Transaction {
        Transaction {
            publishes: Vec::new(),
            routed: Vec::new(),
            settlements: Vec::new(),
            meter: Some(meter),
            staged_bytes: 0,
            prepared: None,
        }
    }

    /// Stages a publish; it is routed when the transaction commits.
    pub fn publish(&mut self, exchange: Arc<Exchange>, message: Message) {
        if let Some(meter) = &self.meter {
            meter.add(0, message.size());
        }
        self.staged_bytes += message.size();
        self.publishes.push((exchange, message));
    }

    /// Bytes of the staged publishes.
    pub fn staged_bytes(&self) -> u64 {
        self.staged_bytes
    }

    fn uncharge(&mut self) {
        if let Some(meter) = &self.meter {
            meter.sub(0, self.staged_bytes);
        }
        self.staged_bytes = 0;
    }

    /// Stages the settlement of an acquired message.
    pub fn settle(&mut self, queue: Arc<Queue>, position: u64, message: Message, how: Settlement) {
        self.settlements.push(StagedSettlement {
            queue,
            position,
            message,
            how,
        });
    }

    pub fn is_empty(&self) -> bool {
        self.publishes.is_empty()
            && self.routed.is_empty()
            && self.settlements.is_empty()
            && self.prepared.is_none()
    }

    pub fn publish_count(&self) -> usize {
        self.publishes.len() + self.routed.len()
    }

    /// Stages a publish that a prepare routed and journaled before a restart: it goes to
    /// `queues` on commit.
    pub(crate) fn publish_routed(&mut self, queues: Vec<Arc<Queue>>, message: Message) {
        if let Some(meter) = &self.meter {
            meter.add(0, message.size());
        }
        self.staged_bytes += message.size();
        self.routed.push((queues, message));
    }

    /// A prepared transaction whose journal can no longer commit all of it (see
    /// [`Journal::can_commit`]).
    pub(crate) fn commit_lost(&self) -> bool {
        self.prepared
            .as_ref()
            .is_some_and(|p| p.lost || !p.journal.can_commit(&p.tx))
    }

    /// A restored prepared transaction that lost part of its work in the restart.
    pub(crate) fn mark_commit_lost(&mut self) {
        if let Some(p) = &mut self.prepared {
            p.lost = true;
        }
    }

    /// Marks the transaction as one the journal holds prepared under `tx`.
    pub(crate) fn set_prepared(&mut self, journal: Arc<dyn Journal>, tx: Arc<JournalTx>) {
        self.prepared = Some(Prepared {
            journal,
            tx,
            lost: false,
        });
    }

    pub fn settlement_count(&self) -> usize {
        self.settlements.len()
    }

    /// Discards everything staged (rollback).
    pub fn clear(&mut self) {
        self.uncharge();
        self.publishes.clear();
        self.routed.clear();
        self.settlements.clear();
    }

    /// Moves everything `other` staged to the end of this transaction (a distributed
    /// transaction's branch commits the work of all its sessions as one).
    pub fn absorb(&mut self, other: &mut Transaction) {
        self.publishes.append(&mut other.publishes);
        self.routed.append(&mut other.routed);
        self.settlements.append(&mut other.settlements);
        if self.prepared.is_none() {
            self.prepared = other.prepared.take();
        }
        // The staged bytes move with the publishes; both meters are the broker's.
        if let Some(meter) = &self.meter {
            meter.add(0, other.staged_bytes);
        }
        self.staged_bytes += other.staged_bytes;
        other.uncharge();
    }

    /// Rolls back work whose settlements must not stay with a session: staged publishes are
    /// dropped and the messages staged to be settled go back to their queues, marked
    /// redelivered (a distributed transaction's branch outlives the sessions that did its
    /// work). Leaves the transaction empty.
    pub fn undo(&mut self) {
        self.uncharge();
        self.publishes.clear();
        self.routed.clear();
        if let Some(p) = self.prepared.take() {
            p.journal.abort_tx(&p.tx);
        }
        if self.settlements.is_empty() {
            return;
        }
        for s in &mut self.settlements {
            s.how = Settlement::Release { redelivered: true };
        }
        // Releases journal nothing.
        self.apply(None);
    }

    /// Prepares the transaction (a distributed transaction's branch): routes its publishes
    /// now and journals them, with the dequeues of its settlements and a prepare record, as
    /// one journal transaction that a restart keeps in doubt. The prepare record holds what
    /// `branch` makes of the store ids of the messages it rejects and of whether the
    /// journal holds part of the work elsewhere until the commit (the branch's name beside
    /// them, as the dtx layer encodes it). Returns
    /// the point the prepare is durable at (`None` from a journal that keeps no prepares).
    /// On a refusal nothing stays journaled; the caller rolls the work back.
    pub(crate) fn prepare(
        &mut self,
        journal: &Arc<dyn Journal>,
        branch: impl FnOnce(Vec<u64>, bool) -> Vec<u8>,
    ) -> Result<Option<SyncPoint>, BrokerError> {
        let tx = Arc::new(JournalTx::default());
        let result = self.journal_prepare(journal, &tx, branch);
        match result {
            Ok(_) => self.set_prepared(journal.clone(), tx),
            Err(_) => journal.abort_tx(&tx),
        }
        result
    }

    fn journal_prepare(
        &mut self,
        journal: &Arc<dyn Journal>,
        tx: &JournalTx,
        branch: impl FnOnce(Vec<u64>, bool) -> Vec<u8>,
    ) -> Result<Option<SyncPoint>, BrokerError> {
        let now = now_ms();
        let mut targets = Vec::new();
        for (exchange, message) in std::mem::take(&mut self.publishes) {
            if let Some((message, _)) = route_staged(
                &exchange,
                &message,
                now,
                Some(journal),
                Some(tx),
                &mut targets,
            )? {
                self.routed.push((std::mem::take(&mut targets), message));
            }
        }
        let mut rejected = Vec::new();
        for s in &self.settlements {
            if matches!(s.how, Settlement::Release { .. }) {
                continue;
            }
            let stored = s.queue.journal_settlement(s.position, tx);
            if let (Some(id), Settlement::Reject) = (stored, s.how) {
                rejected.push(id);
            }
        }
        let held_elsewhere = journal.holds_until_commit(tx);
        journal.prepare_tx(tx, &branch(rejected, held_elsewhere))
    }

    /// Applies and empties the transaction; see [`crate::Broker::commit`].
    pub(crate) fn apply(&mut self, journal: Option<&Arc<dyn Journal>>) -> CommitOutcome {
        // From here the queues that store the messages account for them.
        self.uncharge();
        let publishes = std::mem::take(&mut self.publishes);
        let routed = std::mem::take(&mut self.routed);
        let settlements = std::mem::take(&mut self.settlements);
        let prepared_publishes = routed.len();
        let mut outcome = CommitOutcome {
            routed: vec![0; prepared_publishes + publishes.len()],
            ..CommitOutcome::default()
        };

        // Everything the commit journals is one unit: all of it survives a crash or none.
        // A prepared transaction's unit began with the prepare.
        let prepared = self.prepared.take();
        let jtx = match &prepared {
            Some(p) => Some(p.tx.clone()),
            None => journal.map(|_| Arc::new(JournalTx::default())),
        };
        let journal = prepared.as_ref().map(|p| &p.journal).or(journal);
        let mut routes: Vec<(usize, Arc<Queue>, Message)> = Vec::new();
        let mut stage = |i: usize, queues: &mut Vec<Arc<Queue>>, message: &Message| {
            for q in queues.drain(..) {
                let stored = q.apply_ttl(message.clone());
                q.note_expiry(&stored);
                routes.push((i, q, stored));
            }
        };
        // Routed and journaled by the prepare.
        for (i, (mut queues, message)) in routed.into_iter().enumerate() {
            stage(i, &mut queues, &message);
        }
        // Route the rest, outside any queue lock (routing takes exchange locks).
        let now = now_ms();
        let mut targets = Vec::new();
        for (i, (exchange, message)) in publishes.iter().enumerate() {
            match route_staged(
                exchange,
                message,
                now,
                journal,
                jtx.as_deref(),
                &mut targets,
            ) {
                Ok(Some((message, point))) => {
                    outcome.sync = outcome.sync.max(point);
                    stage(prepared_publishes + i, &mut targets, &message);
                }
                Ok(None) => {}
                Err(e) => {
                    targets.clear();
                    outcome.refused.get_or_insert(e);
                }
            }
        }

        // Every queue the commit touches, locked together in id order: no other code holds
        // two queue locks, so the order cannot deadlock, and no consumer can see part of
        // the commit without the rest.
        let mut queues: Vec<Arc<Queue>> = routes
            .iter()
            .map(|r| r.1.clone())
            .chain(settlements.iter().map(|s| s.queue.clone()))
            .collect();
        queues.sort_unstable_by_key(|q| q.id());
        queues.dedup_by_key(|q| q.id());
        let mut locked: Vec<Locked<'_>> = queues.iter().map(|q| q.lock_state()).collect();
        for st in &mut locked {
            st.journal_tx = jtx.clone();
        }
        let slot = |q: &Queue| queues.binary_search_by_key(&q.id(), |x| x.id()).ok();

        let mut rejected: Vec<(Arc<Queue>, Message)> = Vec::new();
        let mut orphans: Vec<(Arc<Queue>, Vec<Message>)> = Vec::new();
        let mut over_limit: Vec<(Arc<Queue>, Vec<Message>)> = Vec::new();
        let mut dropped: Vec<(Arc<Queue>, Vec<Message>)> = Vec::new();
        // Settlements first: what a transaction consumes makes room for what it publishes.
        for s in settlements {
            let Some(st) = slot(&s.queue).and_then(|i| locked.get_mut(i)) else {
                continue;
            };
            let size = s.message.size();
            let (applied, dequeued) = match s.how {
                Settlement::Accept => {
                    let held = st.settle_done(s.position, Settled::Accepted).is_some();
                    (held, held)
                }
                Settlement::Reject => {
                    let held = st.settle_done(s.position, Settled::Rejected).is_some();
                    if held {
                        rejected.push((s.queue.clone(), s.message));
                    }
                    (held, held)
                }
                Settlement::Release { redelivered } => {
                    let mut gone = Gone::default();
                    let held =
                        s.queue
                            .release_locked(st, s.position, s.message, redelivered, &mut gone);
                    s.queue.journal_returns(&gone.returned);
                    if !gone.orphans.is_empty() {
                        orphans.push((s.queue.clone(), gone.orphans));
                    }
                    if !gone.over_limit.is_empty() {
                        over_limit.push((s.queue.clone(), gone.over_limit));
                    }
                    (held, false)
                }
            };
            if dequeued {
                st.counters.dequeued_txn += 1;
                st.counters.dequeued_txn_bytes += size;
            }
            outcome.settled += usize::from(applied);
        }
        for (i, q, message) in routes {
            let Some(st) = slot(&q).and_then(|k| locked.get_mut(k)) else {
                continue;
            };
            let size = message.size();
            let mut stored = |st: &mut crate::queue::QueueState| {
                outcome.routed[i] += 1;
                st.counters.enqueued_txn += 1;
                st.counters.enqueued_txn_bytes += size;
            };
            match q.enqueue_locked(st, message.clone()) {
                Ok(Enqueued::Stored) => stored(st),
                Ok(Enqueued::Dropping(lost)) => {
                    stored(st);
                    if !lost.is_empty() {
                        dropped.push((q.clone(), lost));
                    }
                }
                Ok(Enqueued::Gone) => route::forget(&q, &message, jtx.as_deref()),
                Err(e) => {
                    route::forget(&q, &message, jtx.as_deref());
                    outcome.refused.get_or_insert(e);
                }
            }
        }
        for st in &mut locked {
            st.journal_tx = None;
        }
        // Closed before any consumer sees the commit's messages, so no settlement of one
        // can come before the commit in the journal.
        if let (Some(j), Some(t)) = (journal, &jtx) {
            outcome.sync = outcome.sync.max(j.commit_tx(t));
        }
        for (q, st) in queues.iter().zip(locked.iter_mut()) {
            st.dispatch(q);
        }
        drop(locked);

        // Dead letters are new publishes of their own, made once no queue is locked.
        for (q, m) in rejected {
            route::dead_letters(q.leaving_one(Leaving::Died(DeathReason::Rejected), m));
        }
        for (q, lost) in dropped {
            route::dead_letters(q.leaving(Leaving::Died(DeathReason::Maxlen), lost));
        }
        for (q, lost) in orphans {
            route::dead_letters(q.leaving(Leaving::Orphaned, lost));
        }
        for (q, lost) in over_limit {
            route::dead_letters(q.leaving(Leaving::Died(DeathReason::DeliveryLimit), lost));
        }
        outcome
    }
}

/// Routes a staged publish, and journals it (inside `jtx`) for the durable queues it
/// reaches: the message as journaled (with its store id) and the point it is durable at,
/// with `targets` filled; `None` when it reaches no queue (its exchange deleted, expired,
/// unroutable).
fn route_staged(
    exchange: &Exchange,
    message: &Message,
    now: u64,
    journal: Option<&Arc<dyn Journal>>,
    jtx: Option<&JournalTx>,
    targets: &mut Vec<Arc<Queue>>,
) -> Result<Option<(Message, Option<SyncPoint>)>, BrokerError> {
    if exchange.is_deleted() || message.is_expired_at(now) {
        return Ok(None);
    }
    route::collect(exchange, message, targets);
    if targets.is_empty() {
        return Ok(None);
    }
    // Journaled before any queue holds it, as for a plain publish.
    let journaled = message.persistent() || targets.iter().any(|q| q.journals_all());
    match journal.filter(|_| journaled) {
        Some(j) => match route::record(j, message, targets, jtx) {
            Ok(Some((journaled, point))) => Ok(Some((journaled, Some(point)))),
            Ok(None) => Ok(Some((message.clone(), None))),
            Err(e) => {
                targets.clear();
                Err(e)
            }
        },
        None => Ok(Some((message.clone(), None))),
    }
}

#[cfg(test)]
mod tests {
    use crate::MessageParts;
    use std::time::Duration;

    use bytes::Bytes;

    use super::*;
    use crate::limits::{LimitPolicy, QueueLimits};
    use crate::queue::{ConsumerSpec, QueueOptions};
    use crate::queue::{Outbox, OutboxItem};
    use crate::value::{Arguments, HeaderValue};
    use crate::{Broker, BrokerConfig, ExchangeKind, ExchangeOptions};

    fn broker() -> Arc<Broker> {
        Broker::new(BrokerConfig::default())
    }

    fn declare(b: &Broker, name: &str, opts: QueueOptions) -> Arc<Queue> {
        b.declare_queue(name, opts, false, 1).unwrap().0
    }

    fn msg(key: &str, body: &'static str) -> Message {
        Message::new("", key.to_owned(), Bytes::from_static(body.as_bytes()))
    }

    fn consumer(q: &Arc<Queue>, id: u64) -> Arc<Outbox> {
        let outbox = Outbox::new();
        q.subscribe(ConsumerSpec {
            id,
            outbox: outbox.clone(),
            owner: 1,
            connection: 0,
            tag: Bytes::new(),
            acquire: true,
            exclusive: false,
            window: None,
            filter: None,
            ack_timeout: None,
        })
        .unwrap();
        q.add_credit(id, u32::MAX, u32::MAX).unwrap();
        outbox
    }

    fn taken(outbox: &Outbox) -> Vec<(u64, Message, bool)> {
        let mut items = Vec::new();
        outbox.take(&mut items);
        items
            .into_iter()
            .filter_map(|i| match i {
                OutboxItem::Deliver(d) => Some((d.position, d.message, d.redelivered)),
                OutboxItem::ConsumerCancelled { .. }
                | OutboxItem::Durable
                | OutboxItem::Close { .. } => None,
            })
            .collect()
    }

    fn bodies(q: &Queue) -> Vec<Bytes> {
        q.queued_bodies()
    }

    #[test]
    fn publishes_are_invisible_until_commit_and_rollback_discards_them() {
        let b = broker();
        let q = declare(&b, "q", QueueOptions::default());
        let ex = b.default_exchange().clone();
        let mut tx = Transaction::new();
        tx.publish(ex.clone(), msg("q", "1"));
        tx.publish(ex.clone(), msg("nowhere", "2"));
        tx.publish(ex.clone(), msg("q", "3"));
        assert_eq!(q.message_count(), 0);
        let outcome = b.commit(&mut tx);
        assert_eq!(outcome.routed, [1, 0, 1]);
        assert_eq!(outcome.refused, None);
        assert!(tx.is_empty(), "a commit starts the next transaction empty");
        assert_eq!(
            bodies(&q),
            [Bytes::from_static(b"1"), Bytes::from_static(b"3")]
        );

        tx.publish(ex, msg("q", "rolled back"));
        tx.clear();
        assert_eq!(b.commit(&mut tx), CommitOutcome::default());
        assert_eq!(q.message_count(), 2);
    }

    #[test]
    fn a_committed_release_over_the_delivery_limit_dead_letters() {
        let b = broker();
        let dead = declare(&b, "dead", QueueOptions::default());
        let q = declare(
            &b,
            "q",
            QueueOptions {
                alternate_exchange: Some("amq.fanout".into()),
                arguments: [
                    (
                        "x-dead-letter-exchange",
                        HeaderValue::Str("amq.fanout".into()),
                    ),
                    ("x-delivery-limit", HeaderValue::Int(0)),
                ]
                .into_iter()
                .collect(),
                ..QueueOptions::default()
            },
        );
        b.bind("dead", "amq.fanout", "", &Arguments::new()).unwrap();
        q.enqueue(msg("q", "poison")).unwrap();
        let got = q.get().unwrap();
        let mut tx = Transaction::new();
        tx.settle(
            q.clone(),
            got.position,
            got.message,
            Settlement::Release { redelivered: true },
        );
        assert_eq!(b.commit(&mut tx).settled, 1);
        assert_eq!(q.message_count(), 0, "back once, over a limit of 0");
        let letters = dead.get().unwrap();
        assert_eq!(letters.message.body(), b"poison");
        let deaths = letters.message.deaths().expect("an x-death history");
        let reasons: Vec<_> = deaths.entries.iter().map(|d| d.reason).collect();
        assert_eq!(reasons, [DeathReason::DeliveryLimit]);
    }

    #[test]
    fn settlements_apply_only_at_commit() {
        let b = broker();
        b.declare_exchange(
            "dlx",
            ExchangeKind::Fanout,
            ExchangeOptions::default(),
            false,
        )
        .unwrap();
        let dead = declare(&b, "dead", QueueOptions::default());
        b.bind("dead", "dlx", "", &Arguments::new()).unwrap();
        let q = declare(
            &b,
            "q",
            QueueOptions {
                alternate_exchange: Some("dlx".into()),
                arguments: [("x-dead-letter-exchange", HeaderValue::Str("dlx".into()))]
                    .into_iter()
                    .collect(),
                ..QueueOptions::default()
            },
        );
        for body in ["a", "r", "k", "x"] {
            q.enqueue(msg("q", body)).unwrap();
        }
        let outbox = consumer(&q, 7);
        let got = taken(&outbox);
        assert_eq!(got.len(), 4);
        let mut tx = Transaction::new();
        tx.settle(q.clone(), got[0].0, got[0].1.clone(), Settlement::Accept);
        tx.settle(q.clone(), got[1].0, got[1].1.clone(), Settlement::Reject);
        tx.settle(
            q.clone(),
            got[2].0,
            got[2].1.clone(),
            Settlement::Release { redelivered: true },
        );
        assert_eq!(q.unsettled_count(), 4, "nothing settles before the commit");
        assert_eq!(dead.message_count(), 0);
        q.stop(7).unwrap();
        let outcome = b.commit(&mut tx);
        assert_eq!(outcome.settled, 3);
        assert_eq!(q.unsettled_count(), 1, "only x is still held");
        assert_eq!(bodies(&q), [Bytes::from_static(b"k")]);
        assert_eq!(bodies(&dead), [Bytes::from_static(b"r")]);
        let requeued = q.get().unwrap();
        assert!(requeued.redelivered);
        // qpidd's transactional dequeues: what left the queue (the release did not), and
        // the reject's dead letter arrived outside any transaction.
        let c = q.depth().counters;
        assert_eq!((c.dequeued_txn, c.dequeued_txn_bytes), (2, 2));
        assert_eq!((c.enqueued_txn, dead.depth().counters.enqueued_txn), (0, 0));

        // A message released outside the transaction is no longer the transaction's to settle.
        let mut tx = Transaction::new();
        tx.settle(q.clone(), got[3].0, got[3].1.clone(), Settlement::Accept);
        q.release([(got[3].0, got[3].1.clone())], false);
        assert_eq!(b.commit(&mut tx).settled, 0);
        assert_eq!(q.message_count(), 1);
    }

    #[test]
    fn staged_publishes_count_in_the_memory_meter_until_commit_or_rollback() {
        let b = broker();
        declare(&b, "q", QueueOptions::default());
        let ex = b.default_exchange().clone();
        let before = b.memory_used();
        let mut tx = b.transaction();
        tx.publish(ex.clone(), msg("q", "12345"));
        assert_eq!(tx.staged_bytes(), 5);
        assert_eq!(b.memory_used(), before + 5);
        tx.clear();
        assert_eq!(b.memory_used(), before);
        tx.publish(ex.clone(), msg("q", "12345"));
        b.commit(&mut tx);
        assert_eq!(b.memory_used(), before + 5, "now held by the queue");
        let c = b.queue("q").unwrap().depth().counters;
        assert_eq!(
            (c.enqueued, c.enqueued_txn, c.enqueued_txn_bytes),
            (1, 1, 5)
        );
        tx.publish(ex, msg("nowhere", "123"));
        drop(tx);
        assert_eq!(b.memory_used(), before + 5);
    }

    #[test]
    fn a_commit_reaches_every_queue_together() {
        let b = broker();
        let qa = declare(&b, "a", QueueOptions::default());
        let qb = declare(&b, "b", QueueOptions::default());
        let (oa, ob) = (consumer(&qa, 1), consumer(&qb, 2));
        let ex = b.default_exchange().clone();
        let mut tx = Transaction::new();
        for (key, body) in [("a", "a1"), ("b", "b1"), ("a", "a2"), ("b", "b2")] {
            tx.publish(ex.clone(), msg(key, body));
        }
        b.commit(&mut tx);
        let bodies_of = |o: &Outbox| -> Vec<Bytes> {
            taken(o)
                .into_iter()
                .map(|(_, m, _)| m.body_bytes())
                .collect()
        };
        assert_eq!(
            bodies_of(&oa),
            [Bytes::from_static(b"a1"), Bytes::from_static(b"a2")]
        );
        assert_eq!(
            bodies_of(&ob),
            [Bytes::from_static(b"b1"), Bytes::from_static(b"b2")]
        );
    }

    #[test]
    fn limit_refusals_are_reported_and_other_queues_still_get_the_message() {
        let b = broker();
        let full = declare(
            &b,
            "full",
            QueueOptions {
                limits: QueueLimits {
                    max_count: Some(1),
                    max_size: None,
                    policy: LimitPolicy::Reject,
                    ..Default::default()
                },
                ..QueueOptions::default()
            },
        );
        let open = declare(&b, "open", QueueOptions::default());
        b.bind("full", "amq.fanout", "", &Arguments::new()).unwrap();
        b.bind("open", "amq.fanout", "", &Arguments::new()).unwrap();
        let fanout = b.exchange("amq.fanout").unwrap();
        let mut tx = Transaction::new();
        tx.publish(fanout.clone(), msg("", "1"));
        tx.publish(fanout, msg("", "2"));
        let outcome = b.commit(&mut tx);
        assert_eq!(outcome.routed, [2, 1]);
        assert!(matches!(
            outcome.refused,
            Some(BrokerError::ResourceLimitExceeded(_))
        ));
        assert_eq!(full.message_count(), 1);
        assert_eq!(open.message_count(), 2);
    }

    #[test]
    fn expired_messages_and_deleted_exchanges_route_nowhere() {
        let b = broker();
        let q = declare(&b, "q", QueueOptions::default());
        b.declare_exchange(
            "gone",
            ExchangeKind::Fanout,
            ExchangeOptions::default(),
            false,
        )
        .unwrap();
        b.bind("q", "gone", "", &Arguments::new()).unwrap();
        let gone = b.exchange("gone").unwrap();
        let mut tx = Transaction::new();
        let mut expired = MessageParts::new("", "q", Bytes::from_static(b"old"));
        expired.expires_at = Some(1);
        tx.publish(b.default_exchange().clone(), Message::from(expired));
        tx.publish(gone, msg("", "late"));
        b.delete_exchange("gone", false).unwrap();
        assert_eq!(b.commit(&mut tx).routed, [0, 0]);
        assert_eq!(q.message_count(), 0);
    }

    /// Commits lock several queues; plain publishes and other commits lock one at a time or
    /// in the same id order, so concurrent commits over the same queues in opposite staging
    /// order must all finish.
    #[test]
    fn concurrent_commits_over_shared_queues_do_not_deadlock() {
        let b = broker();
        let names = ["q1", "q2", "q3"];
        for n in names {
            declare(&b, n, QueueOptions::default());
        }
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        for reversed in [false, true] {
            let b = b.clone();
            let done_tx = done_tx.clone();
            std::thread::spawn(move || {
                let ex = b.default_exchange().clone();
                for _ in 0..500 {
                    let mut tx = Transaction::new();
                    let mut order = names.to_vec();
                    if reversed {
                        order.reverse();
                    }
                    for n in order {
                        tx.publish(ex.clone(), msg(n, "m"));
                    }
                    b.commit(&mut tx);
                    b.publish(&ex, msg("q2", "plain")).unwrap();
                }
                done_tx.send(()).unwrap();
            });
        }
        for _ in 0..2 {
            done_rx
                .recv_timeout(Duration::from_secs(30))
                .expect("commits finished");
        }
        assert_eq!(b.queue("q1").unwrap().message_count(), 1000);
        assert_eq!(b.queue("q2").unwrap().message_count(), 2000);
    }
}
