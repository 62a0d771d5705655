//! The journal a clustered broker's core writes to: operations on replicated queues become
//! Raft proposals, everything else goes to the node's own store as before. Durability
//! points are the cluster journal's own: each covers either a point of the local store or a
//! proposal, and "durable up to N" means every point up to N is on the local disk or
//! committed (on a majority's disks). The protocol layers hold confirms and completions on
//! these points exactly as they do on the store's, so they need no new code.
//!
//! Only a serving leader proposes: elsewhere operations on replicated queues are refused
//! (declares, publishes) or dropped (a settlement on a queue being taken down: the message
//! stays in the replica and is delivered again by the next leader).
//!
//! A transaction's operations on replicated queues are held here until it commits, and
//! dropped if it aborts: a distributed transaction's branch journals its work when it is
//! prepared, and proposing that at once would leave a rolled-back branch's dequeues and
//! publishes in the replica for the next leader.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use bytes::Bytes;
use ferry_core::{
    Arguments, BindingIdentity, BrokerError, DurableWaiter, ExchangeDefinition, HeaderValue,
    Journal, JournalStats, JournalTx, Message, MessageParts, QueueDefinition, SyncPoint,
};
use ferry_store::record::{self, BindingKey, QueueRec, Record};
use parking_lot::Mutex;
use tokio::sync::mpsc;

use crate::sm::Replica;
use crate::types::{Batch, NodeId, Op};

/// Ids of replicated queues and of messages the leader numbered: bit 63 set, then the
/// proposing leader's term and a counter of its own. Terms are unique to one leader, so
/// ids never collide across failovers.
pub const REPLICATED: u64 = 1 << 63;
/// A message the local store numbered (it also went to non-replicated durable queues),
/// as the replica keys it: bit 62, the node, the store's id.
const LOCAL_TAGGED: u64 = 1 << 62;

pub fn is_replicated_id(id: u64) -> bool {
    id & REPLICATED != 0
}

/// Whether a declare asks for a replicated queue: 0-9-1 `x-queue-type: quorum` (RabbitMQ's
/// name), or `qpid.replicated` true (any protocol).
pub fn is_replicated_declare(args: &Arguments) -> bool {
    let quorum = ferry_core::is_quorum_declare(args);
    let replicated = match args.get("qpid.replicated") {
        Some(HeaderValue::Bool(b)) => *b,
        Some(HeaderValue::Str(s)) => matches!(s.as_str(), "true" | "1" | "yes"),
        Some(HeaderValue::Bytes(b)) => matches!(&b[..], b"true" | b"1" | b"yes"),
        Some(HeaderValue::Int(i)) => *i != 0,
        Some(HeaderValue::UInt(i)) => *i != 0,
        _ => false,
    };
    quorum || replicated
}

/// Most operations in one Raft entry.
const MAX_OPS: usize = 1024;

/// Longest a proposal waits for more to join its entry when nobody asks to hear of its
/// durability (a settlement, a publish without confirms); as the store's
/// `unawaited_records_delay`.
const UNAWAITED_PROPOSAL_DELAY: std::time::Duration = std::time::Duration::from_millis(2);

/// A queue operation for the proposer, with the point it completes.
#[derive(Debug)]
pub struct Proposal {
    pub epoch: u64,
    pub point: u64,
    pub op: Op,
}

#[derive(Debug, Clone, Copy)]
enum Source {
    Local(SyncPoint),
    Raft,
}

#[derive(Default)]
struct Points {
    /// Leadership epochs of this node; a proposal of an older one never completes.
    epoch: u64,
    last: u64,
    durable: u64,
    pending: VecDeque<(u64, Source)>,
    /// The highest point whose proposal this node has seen applied (this epoch).
    raft_done: u64,
    /// The local store's latest point already covered by a point of ours.
    local_seen: SyncPoint,
    /// Leadership was lost: pending points will never complete.
    failed: bool,
    /// When some proposals were made, for the commit latency: (point, time).
    sent: VecDeque<(u64, std::time::Instant)>,
    /// Moving average of proposal-to-applied time, microseconds.
    latency_us: u64,
    waiters: Vec<(u64, Arc<dyn DurableWaiter>)>,
}

pub struct ClusterJournal {
    local: Arc<dyn Journal>,
    me: u64,
    pub(crate) replica: Arc<Mutex<Replica>>,
    points: Mutex<Points>,
    proposals: mpsc::UnboundedSender<Proposal>,
    serving: AtomicBool,
    /// (term << 32) | counter, for new ids; set when serving starts.
    next_id: AtomicU64,
    /// Handed to the local store to hear of its durability.
    kick: Arc<Kick>,
    /// Somebody waits for what is proposed: the proposer sends what it gathered now (see
    /// [`ClusterJournal::proposer_kicked`]).
    proposer_kicked: AtomicBool,
    proposer_kick: tokio::sync::Notify,
    /// Open transactions' operations on replicated queues, by [`JournalTx::serial`].
    held: Mutex<HashMap<u64, HeldOps>>,
}

/// What a transaction will propose when it commits, and the leadership it was staged in.
/// Once that leadership ends the entry is void: its operations are dropped, later ones
/// refused, and the transaction cannot commit (see `Journal::can_commit`), until it ends.
struct HeldOps {
    epoch: u64,
    ops: Vec<HeldOp>,
}

enum HeldOp {
    /// A publish: the message itself, not its encoding, so that holding it shares the
    /// transaction's copy rather than making another; encoded at the commit.
    Enqueue {
        id: u64,
        queues: Vec<u64>,
        message: Message,
    },
    Other(Op),
}

struct Kick(Weak<ClusterJournal>);

impl DurableWaiter for Kick {
    fn wake(&self) {
        if let Some(j) = self.0.upgrade() {
            j.poll();
        }
    }
}

fn not_leader() -> BrokerError {
    BrokerError::ResourceLimitExceeded(
        "replicated queues are served by the cluster leader; this node is not it (reconnect)"
            .into(),
    )
}

/// A Raft entry of node `me` holding `p` alone.
fn entry(me: NodeId, p: Proposal) -> Batch {
    Batch {
        origin: me,
        epoch: p.epoch,
        point: p.point,
        ops: vec![p.op],
    }
}

/// Adds `p` to the entry being gathered; a proposal of a new epoch starts the entry afresh,
/// since what came before it can no longer complete.
fn add_proposal(batch: &mut Batch, me: NodeId, p: Proposal) {
    if p.epoch == batch.epoch {
        batch.point = p.point;
        batch.ops.push(p.op);
    } else {
        *batch = entry(me, p);
    }
}

impl ClusterJournal {
    /// The journal of node `me` over its local store; proposals go to the returned receiver.
    pub fn new(
        local: Arc<dyn Journal>,
        me: u64,
    ) -> (Arc<ClusterJournal>, mpsc::UnboundedReceiver<Proposal>) {
        let (tx, rx) = mpsc::unbounded_channel();
        let j = Arc::new_cyclic(|weak| ClusterJournal {
            local,
            me,
            replica: Arc::default(),
            points: Mutex::new(Points::default()),
            proposals: tx,
            serving: AtomicBool::new(false),
            next_id: AtomicU64::new(0),
            kick: Arc::new(Kick(weak.clone())),
            proposer_kicked: AtomicBool::new(false),
            proposer_kick: tokio::sync::Notify::new(),
            held: Mutex::default(),
        });
        (j, rx)
    }

    pub fn replica(&self) -> &Arc<Mutex<Replica>> {
        &self.replica
    }

    /// Moving average of the time from proposing an operation to seeing it applied here
    /// (commit latency), in microseconds; 0 before any.
    pub fn commit_latency_us(&self) -> u64 {
        self.points.lock().latency_us
    }

    pub fn is_serving(&self) -> bool {
        self.serving.load(Ordering::Acquire)
    }

    pub fn epoch(&self) -> u64 {
        self.points.lock().epoch
    }

    fn new_id(&self) -> u64 {
        REPLICATED | self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// The replica's key for message `id` (see [`LOCAL_TAGGED`]).
    fn message_key(&self, id: u64) -> u64 {
        if id & (REPLICATED | LOCAL_TAGGED) != 0 {
            id
        } else {
            LOCAL_TAGGED | (self.me << 48) | id
        }
    }

    /// Proposes `op`; returns its point. Under the points lock, so points reach the
    /// proposer in order.
    fn propose(&self, op: Op) -> Result<SyncPoint, BrokerError> {
        let mut p = self.points.lock();
        self.propose_locked(&mut p, op)
    }

    fn propose_locked(&self, p: &mut Points, op: Op) -> Result<SyncPoint, BrokerError> {
        if !self.is_serving() {
            return Err(not_leader());
        }
        p.last += 1;
        let point = p.last;
        p.pending.push_back((point, Source::Raft));
        // One sample per few hundred proposals is enough for an average.
        if point.is_multiple_of(256) || p.sent.is_empty() {
            p.sent.push_back((point, std::time::Instant::now()));
        }
        self.proposals
            .send(Proposal {
                epoch: p.epoch,
                point,
                op,
            })
            .map_err(|_| not_leader())?;
        Ok(SyncPoint(point))
    }

    /// Whether a connection asked to hear of durability since the proposer last looked, and
    /// so has proposed all it will for now: a connection proposes a whole read batch, then
    /// asks once. The proposer gathers until then, so a batch of publishes is one Raft entry
    /// and one log sync rather than a sync for each few that came before the proposer woke.
    pub(crate) fn proposer_kicked(&self) -> bool {
        self.proposer_kicked.swap(false, Ordering::AcqRel)
    }

    /// Resolves after a kick; one that came before this is awaited is not lost.
    pub(crate) async fn proposer_kick(&self) {
        self.proposer_kick.notified().await
    }

    /// The next Raft entry, starting with `first`: it goes when a connection waits for what
    /// it proposed (it has proposed its whole read batch by then), when it is full, or
    /// [`UNAWAITED_PROPOSAL_DELAY`] after `first`. Also says whether the channel closed.
    pub(crate) async fn gather(
        &self,
        first: Proposal,
        rx: &mut mpsc::UnboundedReceiver<Proposal>,
        me: NodeId,
    ) -> (Batch, bool) {
        let mut batch = entry(me, first);
        let deadline = tokio::time::Instant::now() + UNAWAITED_PROPOSAL_DELAY;
        loop {
            while batch.ops.len() < MAX_OPS {
                match rx.try_recv() {
                    Ok(p) => add_proposal(&mut batch, me, p),
                    Err(_) => break,
                }
            }
            if batch.ops.len() >= MAX_OPS || self.proposer_kicked() {
                return (batch, false);
            }
            tokio::select! {
                () = self.proposer_kick() => {}
                more = rx.recv() => match more {
                    Some(p) => add_proposal(&mut batch, me, p),
                    None => return (batch, true),
                },
                () = tokio::time::sleep_until(deadline) => return (batch, false),
            }
        }
    }

    fn kick_proposer(&self) {
        self.proposer_kicked.store(true, Ordering::Release);
        self.proposer_kick.notify_one();
    }

    /// Covers the local store's latest point with one of ours, if it moved.
    fn cover_local(&self, p: &mut Points) {
        let local = self.local.appended();
        if local > p.local_seen {
            p.local_seen = local;
            p.last += 1;
            let point = p.last;
            p.pending.push_back((point, Source::Local(local)));
        }
    }

    fn advance(&self, p: &mut Points) {
        let local = self.local.durable();
        while let Some(&(point, src)) = p.pending.front() {
            let done = match src {
                Source::Local(sp) => local >= sp,
                Source::Raft => p.raft_done >= point,
            };
            if !done {
                break;
            }
            p.durable = point;
            p.pending.pop_front();
        }
        if p.pending.is_empty() {
            p.durable = p.last;
        }
    }

    /// Re-reads what is durable and wakes whoever waited for it.
    pub fn poll(&self) {
        let woken = {
            let mut p = self.points.lock();
            self.advance(&mut p);
            let (durable, failed) = (p.durable, p.failed || self.local.is_failed());
            let mut woken = Vec::new();
            p.waiters.retain(|(point, w)| {
                if failed || *point <= durable {
                    woken.push(w.clone());
                    false
                } else {
                    true
                }
            });
            woken
        };
        for w in woken {
            w.wake();
        }
    }

    /// The state machine applied a batch this node proposed.
    pub fn applied(&self, epoch: u64, point: u64) {
        {
            let mut p = self.points.lock();
            if epoch != p.epoch || point <= p.raft_done {
                return;
            }
            p.raft_done = point;
            while let Some(&(sent, at)) = p.sent.front() {
                if sent > point {
                    break;
                }
                p.sent.pop_front();
                let us = at.elapsed().as_micros() as u64;
                p.latency_us = if p.latency_us == 0 {
                    us
                } else {
                    (p.latency_us * 7 + us) / 8
                };
            }
        }
        self.poll();
    }

    /// This node leads (in `term`) and its core holds the replicated queues: proposals may
    /// start. Points of an earlier leadership were failed when it ended.
    pub fn start_serving(&self, term: u64) {
        let mut p = self.points.lock();
        p.epoch += 1;
        p.failed = false;
        p.pending.clear();
        p.sent.clear();
        p.raft_done = 0;
        p.durable = p.last;
        // Ids restart only with a new term: serving again within a term (after a lapse of
        // the quorum lease) must not reuse the ids of proposals that may still commit.
        let base = (term & 0x7fff_ffff) << 32;
        if self.next_id.load(Ordering::Relaxed) & !0xffff_ffff != base {
            self.next_id.store(base | 1, Ordering::Relaxed);
        }
        self.serving.store(true, Ordering::Release);
    }

    /// Leadership is lost: nothing more is proposed, and whoever waits for a point not yet
    /// complete hears it failed (0-9-1 gets a nack, 0-10 an error), never a confirm.
    pub fn stop_serving(&self) {
        {
            let mut p = self.points.lock();
            self.serving.store(false, Ordering::Release);
            p.epoch += 1;
            p.failed = true;
        }
        // Held operations are void now (see `HeldOps`): their messages need not be kept.
        for entry in self.held.lock().values_mut() {
            entry.ops = Vec::new();
        }
        self.poll();
    }

    /// Holds `op` until transaction `tx` commits; refused if the transaction's entry is
    /// void (staged under a leadership that has ended).
    fn hold(&self, tx: &JournalTx, op: HeldOp) -> Result<SyncPoint, BrokerError> {
        // An epoch read while not serving belongs to no leadership (serving starts a new
        // one), so a transaction refused here gets a void entry: its commit can then
        // neither succeed as if nothing had been refused nor commit a prepared half.
        let epoch = self.epoch();
        let serving = self.is_serving();
        let mut held = self.held.lock();
        let entry = held.entry(tx.serial()).or_insert_with(|| HeldOps {
            epoch,
            ops: Vec::new(),
        });
        if !serving || entry.epoch != epoch {
            return Err(not_leader());
        }
        entry.ops.push(op);
        drop(held);
        // Nothing to wait for yet: the commit's point covers what it proposes.
        Ok(self.appended())
    }

    /// Proposes `op` now, or holds it until transaction `tx` commits.
    fn propose_in(&self, op: Op, tx: Option<&JournalTx>) -> Result<SyncPoint, BrokerError> {
        match tx {
            Some(tx) => self.hold(tx, HeldOp::Other(op)),
            None => self.propose(op),
        }
    }

    /// Proposes what transaction `tx` held, in order, if its leadership still lasts: under
    /// one hold of the points lock, so that leadership cannot end and start again between
    /// the check and the proposals.
    fn commit_held(&self, tx: &JournalTx) {
        let Some(held) = self.held.lock().remove(&tx.serial()) else {
            return;
        };
        // Encoded before the points lock, which every publisher takes.
        let (epoch, count) = (held.epoch, held.ops.len());
        let ops: Vec<Op> = held
            .ops
            .into_iter()
            .map(|op| match op {
                HeldOp::Enqueue {
                    id,
                    queues,
                    message,
                } => {
                    let mut content = Vec::with_capacity(message.size() as usize + 64);
                    record::put_message_content(&mut content, &message);
                    Op::Enqueue {
                        id,
                        queues,
                        content,
                    }
                }
                HeldOp::Other(op) => op,
            })
            .collect();
        let mut p = self.points.lock();
        if epoch != p.epoch {
            // Void (see `HeldOps`): a prepared branch is refused before it gets here
            // (`can_commit`); a local transaction's connection was closed with the
            // leadership, so none commits across it unless the change came inside its commit.
            tracing::warn!(
                ops = count,
                "cluster: a transaction staged under an ended leadership committed; its replicated operations are dropped"
            );
            return;
        }
        for op in ops {
            // A refusal means leadership just ended: the commit's point then fails.
            if self.propose_locked(&mut p, op).is_err() {
                return;
            }
        }
    }

    fn replicated_load(&self, id: u64) -> Option<MessageParts> {
        let r = self.replica.lock();
        let content = r.queues.values().find_map(|q| q.messages.get(&id))?.clone();
        drop(r);
        let mut m = record::message_from_content(content).ok()?;
        m.store_id = Some(id);
        Some(m)
    }
}

fn encode(rec: &Record) -> Vec<u8> {
    let mut out = Vec::new();
    rec.encode(&mut out);
    out
}

/// A binding's arguments as [`Op::Bind`] carries them: a `BIND` record's payload (its key
/// left empty), which [`binding_arguments`] reads back.
pub(crate) fn encode_arguments(arguments: &Arguments) -> Vec<u8> {
    let key = BindingKey {
        exchange: String::new(),
        queue: 0,
        key: String::new(),
    };
    encode(&Record::Bind(key, arguments.clone()))
}

/// The arguments an [`Op::Bind`] or [`Op::BindVariant`] carries; none if they cannot be
/// read (the leader wrote them, so only a damaged log could).
pub fn binding_arguments(encoded: &[u8]) -> Arguments {
    match decode(record::kind::BIND, encoded) {
        Some(Record::Bind(_, arguments)) => arguments,
        _ => Arguments::default(),
    }
}

/// Decodes what [`encode`] made of a record of `kind`.
pub fn decode(kind: u8, bytes: &[u8]) -> Option<Record> {
    Record::decode(kind, Bytes::copy_from_slice(bytes)).ok()
}

impl Journal for ClusterJournal {
    fn declare_exchange(&self, exchange: &ExchangeDefinition) -> Result<(), BrokerError> {
        self.local.declare_exchange(exchange)
    }

    fn delete_exchange(&self, name: &str) {
        self.local.delete_exchange(name)
    }

    fn declare_queue(&self, queue: &QueueDefinition) -> Result<u64, BrokerError> {
        if !is_replicated_declare(queue.arguments) {
            return self.local.declare_queue(queue);
        }
        if !self.is_serving() {
            return Err(not_leader());
        }
        let id = self.new_id();
        let rec = Record::QueueDeclare(QueueRec {
            id,
            name: queue.name.to_owned(),
            auto_delete: queue.auto_delete,
            alternate: queue.alternate_exchange.map(str::to_owned),
            limits: queue.limits,
            arguments: queue.arguments.clone(),
        });
        self.propose(Op::Declare {
            queue: id,
            name: queue.name.to_owned(),
            record: encode(&rec),
        })?;
        Ok(id)
    }

    fn delete_queue(&self, queue: u64) {
        if is_replicated_id(queue) {
            let _ = self.propose(Op::Delete { queue });
        } else {
            self.local.delete_queue(queue)
        }
    }

    fn bind(
        &self,
        exchange: &str,
        queue: u64,
        key: &str,
        arguments: &Arguments,
        identity: BindingIdentity,
    ) -> Result<(), BrokerError> {
        if !is_replicated_id(queue) {
            return self.local.bind(exchange, queue, key, arguments, identity);
        }
        let (exchange, key, arguments) = (
            exchange.to_owned(),
            key.to_owned(),
            encode_arguments(arguments),
        );
        let op = match identity {
            BindingIdentity::Key => Op::Bind {
                exchange,
                queue,
                key,
                arguments,
            },
            BindingIdentity::KeyAndArguments => Op::BindVariant {
                exchange,
                queue,
                key,
                arguments,
            },
        };
        self.propose(op).map(|_| ())
    }

    fn unbind(&self, exchange: &str, queue: u64, key: &str, only: Option<&Arguments>) {
        if !is_replicated_id(queue) {
            return self.local.unbind(exchange, queue, key, only);
        }
        let (exchange, key) = (exchange.to_owned(), key.to_owned());
        let op = match only {
            None => Op::Unbind {
                exchange,
                queue,
                key,
            },
            Some(arguments) => Op::UnbindVariant {
                exchange,
                queue,
                key,
                arguments: encode_arguments(arguments),
            },
        };
        let _ = self.propose(op);
    }

    fn bind_exchange(
        &self,
        destination: &str,
        source: &str,
        key: &str,
        arguments: &Arguments,
    ) -> Result<(), BrokerError> {
        self.local
            .bind_exchange(destination, source, key, arguments)
    }

    fn unbind_exchange(
        &self,
        destination: &str,
        source: &str,
        key: &str,
        only: Option<&Arguments>,
    ) {
        self.local.unbind_exchange(destination, source, key, only)
    }

    fn enqueue(
        &self,
        message: &Message,
        queues: &[u64],
        tx: Option<&JournalTx>,
    ) -> Result<(u64, SyncPoint), BrokerError> {
        if !queues.iter().any(|q| is_replicated_id(*q)) {
            return self.local.enqueue(message, queues, tx);
        }
        if !self.is_serving() {
            return Err(not_leader());
        }
        let (replicated, local): (Vec<u64>, Vec<u64>) =
            queues.iter().partition(|q| is_replicated_id(**q));
        // A transient message stays out of the local store (its non-replicated queues
        // hold it in memory only, as always).
        let local: Vec<u64> = if message.persistent() {
            local
        } else {
            Vec::new()
        };
        let id = if local.is_empty() {
            self.new_id()
        } else {
            // One id for both: the local store's, which its dequeues need. Its point is
            // covered first, so the proposal's (later) point covers both.
            let id = self.local.enqueue(message, &local, tx)?.0;
            let mut p = self.points.lock();
            self.cover_local(&mut p);
            id
        };
        let key = self.message_key(id);
        if let Some(tx) = tx {
            let op = HeldOp::Enqueue {
                id: key,
                queues: replicated,
                message: message.clone(),
            };
            return Ok((id, self.hold(tx, op)?));
        }
        let mut content = Vec::with_capacity(message.size() as usize + 64);
        record::put_message_content(&mut content, message);
        let op = Op::Enqueue {
            id: key,
            queues: replicated,
            content,
        };
        Ok((id, self.propose(op)?))
    }

    fn dequeue(&self, queue: u64, messages: &[u64], tx: Option<&JournalTx>) {
        if is_replicated_id(queue) {
            let ids = messages.iter().map(|id| self.message_key(*id)).collect();
            let _ = self.propose_in(Op::Dequeue { queue, ids }, tx);
        } else if messages.iter().any(|id| is_replicated_id(*id)) {
            // A transient message numbered for a replicated queue, leaving a local one:
            // the local store never had it.
            let local: Vec<u64> = messages
                .iter()
                .copied()
                .filter(|id| !is_replicated_id(*id))
                .collect();
            if !local.is_empty() {
                self.local.dequeue(queue, &local, tx)
            }
        } else {
            self.local.dequeue(queue, messages, tx)
        }
    }

    fn returned(&self, queue: u64, returns: &[(u64, u32)]) {
        // Nobody waits for a count, as for the local store's: one lost with the leader
        // within the gathering delay gives that message one more delivery.
        if is_replicated_id(queue) {
            let returns = returns
                .iter()
                .map(|(id, count)| (self.message_key(*id), *count))
                .collect();
            let _ = self.propose(Op::Returned { queue, returns });
            return;
        }
        // A transient message numbered for a replicated queue is not in the local store.
        if returns.iter().any(|(id, _)| is_replicated_id(*id)) {
            let local: Vec<(u64, u32)> = returns
                .iter()
                .copied()
                .filter(|(id, _)| !is_replicated_id(*id))
                .collect();
            self.local.returned(queue, &local);
        } else {
            self.local.returned(queue, returns);
        }
    }

    fn commit_tx(&self, tx: &JournalTx) -> Option<SyncPoint> {
        // Replicated operations of the transaction are proposed now, one by one (they are
        // not atomic across a failover: docs/CLUSTER.md); the commit waits for all of them.
        self.local.commit_tx(tx);
        self.commit_held(tx);
        Some(self.appended())
    }

    // Prepares are the local store's: a replicated queue's part of a prepared branch stays
    // held on this node until the branch ends, and is not kept in doubt across a failover.
    fn prepare_tx(&self, tx: &JournalTx, branch: &[u8]) -> Result<Option<SyncPoint>, BrokerError> {
        self.local.prepare_tx(tx, branch)?;
        Ok(Some(self.appended()))
    }

    fn abort_tx(&self, tx: &JournalTx) {
        self.local.abort_tx(tx);
        self.held.lock().remove(&tx.serial());
    }

    fn holds_until_commit(&self, tx: &JournalTx) -> bool {
        self.held.lock().contains_key(&tx.serial())
    }

    fn can_commit(&self, tx: &JournalTx) -> bool {
        let epoch = self.epoch();
        let ours = self
            .held
            .lock()
            .get(&tx.serial())
            .is_none_or(|h| h.epoch == epoch);
        ours && self.local.can_commit(tx)
    }

    fn load(&self, messages: &[u64]) -> Vec<Option<MessageParts>> {
        if !messages
            .iter()
            .any(|id| id & (REPLICATED | LOCAL_TAGGED) != 0)
        {
            return self.local.load(messages);
        }
        messages
            .iter()
            .map(|id| {
                if id & (REPLICATED | LOCAL_TAGGED) != 0 {
                    self.replicated_load(*id)
                } else {
                    self.local.load(&[*id]).pop().flatten()
                }
            })
            .collect()
    }

    fn appended(&self) -> SyncPoint {
        let mut p = self.points.lock();
        self.cover_local(&mut p);
        SyncPoint(p.last)
    }

    fn durable(&self) -> SyncPoint {
        let mut p = self.points.lock();
        self.advance(&mut p);
        SyncPoint(p.durable)
    }

    fn is_failed(&self) -> bool {
        self.points.lock().failed || self.local.is_failed()
    }

    fn notify_when_durable(&self, point: SyncPoint, waiter: Arc<dyn DurableWaiter>) {
        let local_wait = {
            let mut p = self.points.lock();
            self.advance(&mut p);
            if p.failed || point.0 <= p.durable {
                drop(p);
                waiter.wake();
                return;
            }
            p.waiters.push((point.0, waiter));
            if p.pending
                .iter()
                .rev()
                .any(|(_, s)| matches!(s, Source::Raft))
            {
                self.kick_proposer();
            }
            // The local store syncs when asked: ask for the latest local point pending.
            p.pending.iter().rev().find_map(|(_, s)| match s {
                Source::Local(sp) => Some(*sp),
                Source::Raft => None,
            })
        };
        if let Some(sp) = local_wait {
            self.local.notify_when_durable(sp, self.kick.clone());
        }
    }

    fn replicates(&self, arguments: &Arguments) -> bool {
        is_replicated_declare(arguments)
    }

    fn journals_all(&self, queue: u64) -> bool {
        is_replicated_id(queue)
    }

    fn stats(&self) -> JournalStats {
        self.local.stats()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replicated_declares_are_recognised() {
        let mut a = Arguments::new();
        assert!(!is_replicated_declare(&a));
        a.push("x-queue-type", HeaderValue::Str("quorum".into()));
        assert!(is_replicated_declare(&a));
        let mut b = Arguments::new();
        b.push("x-queue-type", HeaderValue::Str("classic".into()));
        assert!(!is_replicated_declare(&b));
        b.push("qpid.replicated", HeaderValue::Bool(true));
        assert!(is_replicated_declare(&b));
        let mut c = Arguments::new();
        c.push("qpid.replicated", HeaderValue::UInt(0));
        assert!(!is_replicated_declare(&c));
    }

    #[test]
    fn replicated_ids_stay_apart_from_the_stores() {
        let (j, _rx) = ClusterJournal::new(Arc::new(NullJournal::default()), 3);
        assert!(!is_replicated_id(42));
        assert_eq!(j.message_key(42), LOCAL_TAGGED | (3 << 48) | 42);
        j.start_serving(7);
        let id = j.new_id();
        assert!(is_replicated_id(id));
        assert_eq!((id >> 32) & 0x7fff_ffff, 7);
        assert_eq!(j.message_key(id), id);
        // Serving again in the same term goes on counting; a new term starts afresh.
        j.stop_serving();
        j.start_serving(7);
        assert!(j.new_id() > id);
        j.stop_serving();
        j.start_serving(8);
        assert_eq!(j.new_id(), REPLICATED | (8 << 32) | 1);
    }

    #[test]
    fn delivery_counts_go_to_raft_or_the_local_store_by_queue() {
        let local = Arc::new(NullJournal::default());
        let (j, mut rx) = ClusterJournal::new(local.clone(), 1);
        j.start_serving(1);
        j.returned(5, &[(6, 2)]);
        // A replicated queue's, under the replica's keys: a message the local store
        // numbered (it is also on a local queue) gets this node's tagged key.
        j.returned(REPLICATED | 1, &[(REPLICATED | 7, 1), (4, 2)]);
        // A transient message numbered for a replicated queue, back on a local one.
        j.returned(5, &[(REPLICATED | 8, 1), (9, 3)]);
        assert_eq!(*local.returned.lock(), [(5, 6, 2), (5, 9, 3)]);
        let proposed = rx
            .try_recv()
            .expect("the replicated queue's counts are proposed");
        assert_eq!(
            proposed.op,
            Op::Returned {
                queue: REPLICATED | 1,
                returns: vec![(REPLICATED | 7, 1), (j.message_key(4), 2)],
            }
        );
        assert!(rx.try_recv().is_err(), "nothing else went to raft");
    }

    #[test]
    fn points_complete_in_order_and_fail_when_leadership_ends() {
        let (j, mut rx) = ClusterJournal::new(Arc::new(NullJournal::default()), 1);
        assert!(
            j.propose(Op::Delete {
                queue: REPLICATED | 1
            })
            .is_err(),
            "not serving"
        );
        j.start_serving(1);
        let a = j
            .propose(Op::Delete {
                queue: REPLICATED | 1,
            })
            .unwrap();
        let b = j
            .propose(Op::Delete {
                queue: REPLICATED | 2,
            })
            .unwrap();
        assert!(b > a);
        assert_eq!(rx.try_recv().unwrap().point, a.0);
        assert!(j.durable() < a);
        j.applied(j.epoch(), a.0);
        assert_eq!(j.durable(), a);
        j.stop_serving();
        assert!(j.is_failed());
        // An answer from the old epoch completes nothing.
        j.applied(j.epoch() - 1, b.0);
        assert!(j.durable() < b);
    }

    /// A transaction's publish to replicated queue 1, and its settlement of message 5 there.
    fn stage_work(j: &ClusterJournal, tx: &JournalTx) {
        let m = Message::new("", "q", Bytes::from_static(b"m"));
        j.enqueue(&m, &[REPLICATED | 1], Some(tx)).expect("enqueue");
        j.dequeue(REPLICATED | 1, &[REPLICATED | 5], Some(tx));
    }

    #[test]
    fn a_transactions_replicated_work_is_proposed_at_its_commit() {
        let (j, mut rx) = ClusterJournal::new(Arc::new(NullJournal::default()), 1);
        j.start_serving(1);
        let tx = JournalTx::default();
        assert!(!j.holds_until_commit(&tx));
        stage_work(&j, &tx);
        assert!(j.holds_until_commit(&tx), "a prepare record must say so");
        // A plain dequeue meanwhile goes at once.
        j.dequeue(REPLICATED | 1, &[REPLICATED | 6], None);
        j.prepare_tx(&tx, b"branch").expect("prepare");
        let plain = rx.try_recv().expect("the plain dequeue");
        assert!(matches!(plain.op, Op::Dequeue { ref ids, .. } if ids == &[REPLICATED | 6]));
        assert!(rx.try_recv().is_err(), "nothing of the prepared branch yet");
        let point = j.commit_tx(&tx).expect("a point");
        let enqueue = rx.try_recv().expect("the publish");
        assert!(
            matches!(enqueue.op, Op::Enqueue { ref queues, .. } if queues == &[REPLICATED | 1])
        );
        let dequeue = rx.try_recv().expect("the settlement");
        assert_eq!(
            dequeue.op,
            Op::Dequeue {
                queue: REPLICATED | 1,
                ids: vec![REPLICATED | 5],
            }
        );
        assert_eq!(point.0, dequeue.point, "the commit waits for all of it");
        assert!(j.held.lock().is_empty());
    }

    #[test]
    fn an_aborted_transaction_proposes_nothing() {
        let (j, mut rx) = ClusterJournal::new(Arc::new(NullJournal::default()), 1);
        j.start_serving(1);
        let tx = JournalTx::default();
        stage_work(&j, &tx);
        j.prepare_tx(&tx, b"branch").expect("prepare");
        j.abort_tx(&tx);
        assert!(j.held.lock().is_empty());
        j.commit_tx(&tx);
        assert!(
            rx.try_recv().is_err(),
            "a rolled-back branch reaches no replica"
        );
    }

    #[test]
    fn a_transaction_staged_under_an_ended_leadership_is_void() {
        let (j, mut rx) = ClusterJournal::new(Arc::new(NullJournal::default()), 1);
        j.start_serving(1);
        let (old, later) = (JournalTx::default(), JournalTx::default());
        stage_work(&j, &old);
        assert!(j.can_commit(&old));
        j.stop_serving();
        assert!(
            j.held.lock().values().all(|h| h.ops.is_empty()),
            "its messages are let go of"
        );
        j.start_serving(2);
        assert!(
            !j.can_commit(&old),
            "a prepared branch must not commit half"
        );
        // More work of the same transaction is refused rather than committed without the
        // part before.
        let m = Message::new("", "q", Bytes::from_static(b"m"));
        assert!(j.enqueue(&m, &[REPLICATED | 1], Some(&old)).is_err());
        j.commit_tx(&old);
        assert!(
            rx.try_recv().is_err(),
            "the replica never saw the rebuilt queues' past"
        );
        // Operations still held when the leadership ended (staged just as it did, before
        // `stop_serving` let go of them) are not proposed either.
        let raced = JournalTx::default();
        j.held.lock().insert(
            raced.serial(),
            HeldOps {
                epoch: j.epoch() - 2,
                ops: vec![HeldOp::Other(Op::Delete {
                    queue: REPLICATED | 1,
                })],
            },
        );
        j.commit_tx(&raced);
        assert!(rx.try_recv().is_err(), "nothing of an ended leadership");
        assert!(j.held.lock().is_empty());
        // A transaction of the new leadership commits as usual.
        stage_work(&j, &later);
        assert!(j.can_commit(&later));
        j.commit_tx(&later);
        assert!(matches!(
            rx.try_recv().expect("publish").op,
            Op::Enqueue { .. }
        ));
        assert!(matches!(
            rx.try_recv().expect("settle").op,
            Op::Dequeue { .. }
        ));
        assert!(rx.try_recv().is_err());
    }

    #[test]
    fn work_refused_while_not_serving_voids_its_transaction() {
        let (j, mut rx) = ClusterJournal::new(Arc::new(NullJournal::default()), 1);
        let tx = JournalTx::default();
        // A settlement on a queue object from before a leadership change, made while this
        // node does not serve: dropped, and the transaction cannot commit the rest.
        j.dequeue(REPLICATED | 1, &[REPLICATED | 5], Some(&tx));
        j.start_serving(1);
        assert!(!j.can_commit(&tx));
        let m = Message::new("", "q", Bytes::from_static(b"m"));
        assert!(j.enqueue(&m, &[REPLICATED | 1], Some(&tx)).is_err());
        j.commit_tx(&tx);
        assert!(rx.try_recv().is_err());
    }

    fn delete(j: &ClusterJournal, queue: u64) -> SyncPoint {
        j.propose(Op::Delete {
            queue: REPLICATED | queue,
        })
        .unwrap()
    }

    struct Woken;

    impl DurableWaiter for Woken {
        fn wake(&self) {}
    }

    #[tokio::test]
    async fn a_connections_read_batch_goes_to_raft_as_one_entry() {
        let (j, mut rx) = ClusterJournal::new(Arc::new(NullJournal::default()), 1);
        j.start_serving(1);
        delete(&j, 1);
        delete(&j, 2);
        let first = rx.recv().await.unwrap();
        // The proposer has woken for the first publish of a read batch; the connection
        // proposes the rest of it, then waits for the last point.
        let proposer = j.gather(first, &mut rx, 1);
        let connection = async {
            tokio::task::yield_now().await;
            let last = delete(&j, 3);
            j.notify_when_durable(last, Arc::new(Woken));
            last
        };
        let ((batch, closed), last) = tokio::join!(proposer, connection);
        assert!(!closed);
        assert_eq!(batch.ops.len(), 3, "one entry for the whole batch");
        assert_eq!(batch.point, last.0);
    }

    #[tokio::test]
    async fn an_entry_nobody_waits_for_goes_after_a_short_delay() {
        let (j, mut rx) = ClusterJournal::new(Arc::new(NullJournal::default()), 1);
        j.start_serving(1);
        let point = delete(&j, 1);
        let first = rx.recv().await.unwrap();
        let started = tokio::time::Instant::now();
        let (batch, closed) = j.gather(first, &mut rx, 1).await;
        assert!(!closed);
        assert_eq!((batch.ops.len(), batch.point), (1, point.0));
        assert!(started.elapsed() >= UNAWAITED_PROPOSAL_DELAY);
    }

    /// A local store that holds nothing and is always durable.
    #[derive(Default)]
    struct NullJournal {
        /// The delivery counts it was given.
        returned: parking_lot::Mutex<Vec<(u64, u64, u32)>>,
    }

    impl Journal for NullJournal {
        fn declare_exchange(&self, _: &ExchangeDefinition) -> Result<(), BrokerError> {
            Ok(())
        }
        fn delete_exchange(&self, _: &str) {}
        fn declare_queue(&self, _: &QueueDefinition) -> Result<u64, BrokerError> {
            Ok(1)
        }
        fn delete_queue(&self, _: u64) {}
        fn bind(
            &self,
            _: &str,
            _: u64,
            _: &str,
            _: &Arguments,
            _: BindingIdentity,
        ) -> Result<(), BrokerError> {
            Ok(())
        }
        fn unbind(&self, _: &str, _: u64, _: &str, _: Option<&Arguments>) {}
        fn bind_exchange(
            &self,
            _: &str,
            _: &str,
            _: &str,
            _: &Arguments,
        ) -> Result<(), BrokerError> {
            Ok(())
        }
        fn unbind_exchange(&self, _: &str, _: &str, _: &str, _: Option<&Arguments>) {}
        fn enqueue(
            &self,
            _: &Message,
            _: &[u64],
            _: Option<&JournalTx>,
        ) -> Result<(u64, SyncPoint), BrokerError> {
            Ok((1, SyncPoint(0)))
        }
        fn dequeue(&self, _: u64, _: &[u64], _: Option<&JournalTx>) {}
        fn returned(&self, queue: u64, returns: &[(u64, u32)]) {
            let mut kept = self.returned.lock();
            kept.extend(returns.iter().map(|(message, n)| (queue, *message, *n)));
        }
        fn commit_tx(&self, _: &JournalTx) -> Option<SyncPoint> {
            None
        }
        fn load(&self, m: &[u64]) -> Vec<Option<MessageParts>> {
            m.iter().map(|_| None).collect()
        }
        fn appended(&self) -> SyncPoint {
            SyncPoint(0)
        }
        fn durable(&self) -> SyncPoint {
            SyncPoint(0)
        }
        fn is_failed(&self) -> bool {
            false
        }
        fn notify_when_durable(&self, _: SyncPoint, w: Arc<dyn DurableWaiter>) {
            w.wake()
        }
    }
}
