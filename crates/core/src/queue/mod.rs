//! Queues: FIFO storage, consumers, credit and settlement.

mod consumer;
mod dead_letter;
mod entries;
mod features;
pub(crate) mod outbox;
mod state;
#[cfg(test)]
mod tests;
mod window;

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use parking_lot::{Mutex, MutexGuard};
use tokio::sync::Notify;

use crate::alarm::MemoryMeter;
use crate::error::BrokerError;
use crate::journal::Journal;
use crate::limits::{LimitPolicy, QueueLimits};
use crate::message::{now_ms, DeathReason, Message};
use crate::value::Arguments;
use crate::{ConsumerId, OwnerId};

pub(crate) use consumer::Consumer;
pub use consumer::ConsumerSpec;
pub(crate) use dead_letter::{AlternateExchange, DeadLetters, Leaving};
pub(crate) use features::Features;
pub use outbox::{Delivery, Outbox, OutboxItem};
use state::{Clock, Entry};
pub(crate) use state::{OffloadBudget, QueueState};
pub use window::SettleWindow;

/// Unique across the process so bindings can key queues without hashing names.
static NEXT_QUEUE_ID: AtomicU64 = AtomicU64::new(1);

#[derive(Debug, Clone, Default)]
pub struct QueueOptions {
    pub durable: bool,
    /// `Some(session)` declares an exclusive queue owned by that session.
    pub exclusive_owner: Option<OwnerId>,
    pub auto_delete: bool,
    pub alternate_exchange: Option<String>,
    pub limits: QueueLimits,
    pub arguments: Arguments,
    /// Held while the queue exists and dropped when it is deleted: a protocol layer counting
    /// queues against a quota passes a guard whose drop gives the slot back. Ignored when the
    /// declare finds an existing queue.
    pub quota: Option<QuotaCharge>,
}

/// See [`QueueOptions::quota`].
pub type QuotaCharge = Arc<dyn fmt::Debug + Send + Sync>;

/// Answer data for queue.query / queue.declare-ok.
#[derive(Debug, Clone, PartialEq)]
pub struct QueueInfo {
    pub name: String,
    pub durable: bool,
    pub exclusive: bool,
    pub auto_delete: bool,
    pub alternate_exchange: Option<String>,
    pub arguments: Arguments,
    pub message_count: u64,
    pub consumer_count: u64,
}

pub struct Queue {
    name: String,
    id: u64,
    durable: bool,
    auto_delete: bool,
    /// Where messages leaving the queue go, by name: a 0-10 alternate exchange, or a
    /// RabbitMQ dead letter exchange.
    alternate_name: Option<String>,
    /// That exchange while it exists. A 0-10 alternate exchange must exist when the queue is
    /// declared and cannot be deleted while the queue uses it (qpidd); a dead letter
    /// exchange may be declared after the queue and deleted and declared again (RabbitMQ),
    /// and dead letters are dropped while it does not exist.
    alternate: Mutex<Option<Arc<dyn AlternateExchange>>>,
    arguments: Arguments,
    limits: QueueLimits,
    features: Features,
    /// Set for a durable queue of a broker with a journal.
    store: Option<QueueStore>,
    /// The broker's journal, if any: dead-lettered persistent messages are journaled for
    /// durable targets even when this queue is not durable.
    journal: Option<Arc<dyn Journal>>,
    state: Mutex<QueueState>,
    /// Set for dead-lettering queues: told when a message that will expire arrives, so
    /// the broker's housekeeping dead-letters it on time.
    expiry_watch: OnceLock<Arc<Notify>>,
    quota: Mutex<Option<QuotaCharge>>,
}

impl fmt::Debug for Queue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Queue")
            .field("name", &self.name)
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

/// A durable queue's link to the journal.
#[derive(Clone)]
pub(crate) struct QueueStore {
    pub(crate) journal: Arc<dyn Journal>,
    pub(crate) id: u64,
    /// Set when the broker keeps persistent contents within a memory budget.
    pub(crate) offload: Option<Arc<OffloadBudget>>,
}

impl fmt::Debug for QueueStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "QueueStore({})", self.id)
    }
}

/// A message recovered from the store, for [`Queue::restore`].
#[derive(Debug)]
pub enum Restored {
    InMemory(Arc<Message>),
    /// A stand-in ([`Message::stub`]) whose content the store kept on disk.
    OnDisk(Arc<Message>),
}

/// What [`Queue::enqueue_locked`] did with a message.
#[derive(Debug)]
pub(crate) enum Enqueued {
    /// Not stored: the queue was deleted meanwhile.
    Gone,
    Stored,
    /// Stored, after dropping these from the head to make room (drop-head overflow); the
    /// caller dead-letters them once the lock is released.
    Dropping(Vec<Arc<Message>>),
}

/// A message taken by [`Queue::get`].
#[derive(Debug, Clone)]
pub struct Got {
    /// The handle for accept/release/reject.
    pub position: u64,
    pub message: Arc<Message>,
    pub redelivered: bool,
    /// Messages still available after this one.
    pub remaining: u64,
}

/// What deleting a queue removed; the broker finishes the job outside its registry lock.
pub(crate) struct Drained {
    messages: Vec<Arc<Message>>,
    consumers: Vec<Consumer>,
}

/// What a session's end means for one queue.
pub(crate) enum OwnerGone {
    NotOwned,
    Released,
    Delete,
}

impl Queue {
    /// A queue whose bytes count towards nobody's total, with no store (tests).
    #[cfg(test)]
    pub(crate) fn new(
        name: String,
        opts: &QueueOptions,
        alternate: Option<Arc<dyn AlternateExchange>>,
        limits: QueueLimits,
    ) -> Arc<Queue> {
        Queue::with_store(name, opts, alternate, limits, Arc::default(), None, None)
    }

    /// A queue whose held bytes count in `meter` (the broker's). `store` links a durable
    /// queue to the journal; `journal` is the broker's, for dead-lettering into durable
    /// queues.
    pub(crate) fn with_store(
        name: String,
        opts: &QueueOptions,
        alternate: Option<Arc<dyn AlternateExchange>>,
        limits: QueueLimits,
        meter: Arc<MemoryMeter>,
        journal: Option<Arc<dyn Journal>>,
        store: Option<QueueStore>,
    ) -> Arc<Queue> {
        let id = NEXT_QUEUE_ID.fetch_add(1, Ordering::Relaxed);
        let features = Features::from_arguments(&opts.arguments);
        // The name the broker looked up, as `create_queue` does: a missing one is a dead
        // letter exchange still to be declared.
        let alternate_name = alternate.as_ref().map(|a| a.name().to_owned()).or_else(|| {
            opts.alternate_exchange
                .as_deref()
                .filter(|a| !a.is_empty())
                .or(dead_letter_exchange_name(&opts.arguments))
                .map(str::to_owned)
        });
        let mut state = QueueState::new(opts.exclusive_owner, &features, meter, id as usize);
        state.offload = store.as_ref().and_then(|s| s.offload.clone());
        state.store = store.clone();
        Arc::new(Queue {
            name,
            id,
            durable: opts.durable,
            auto_delete: opts.auto_delete,
            alternate_name,
            alternate: Mutex::new(alternate),
            arguments: opts.arguments.clone(),
            limits,
            features,
            state: Mutex::new(state),
            store,
            journal,
            expiry_watch: OnceLock::new(),
            quota: Mutex::new(opts.quota.clone()),
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn id(&self) -> u64 {
        self.id
    }

    /// The queue's store id, for a durable queue of a broker with a journal.
    pub fn store_id(&self) -> Option<u64> {
        self.store.as_ref().map(|s| s.id)
    }

    pub(crate) fn store(&self) -> Option<&QueueStore> {
        self.store.as_ref()
    }

    /// The broker's journal, which dead letters from this queue are journaled in for their
    /// durable targets (even when this queue is not durable).
    pub(crate) fn journal(&self) -> Option<&Arc<dyn Journal>> {
        self.journal.as_ref()
    }

    fn lock(&self) -> MutexGuard<'_, QueueState> {
        self.state.lock()
    }

    /// Messages on the queue (not counting acquired-but-unsettled ones), expired ones
    /// included until a sweep takes them off (see `Queue::message_count`).
    pub(crate) fn count_unswept(&self) -> u64 {
        self.lock().entries.len() as u64
    }

    /// Bytes of the messages available on the queue.
    pub fn byte_count(&self) -> u64 {
        self.lock().queued_bytes()
    }

    /// Messages acquired by consumers and not yet accepted, released or rejected.
    pub fn unsettled_count(&self) -> u64 {
        self.lock().unsettled_count() as u64
    }

    pub fn consumer_count(&self) -> usize {
        self.lock().consumers.len()
    }

    pub fn is_exclusive(&self) -> bool {
        self.lock().owner.is_some()
    }

    pub fn owner(&self) -> Option<OwnerId> {
        self.lock().owner
    }

    pub fn is_auto_delete(&self) -> bool {
        self.auto_delete
    }

    pub fn is_durable(&self) -> bool {
        self.durable
    }

    pub fn is_deleted(&self) -> bool {
        self.lock().deleted
    }

    /// The name of the alternate (or dead letter) exchange, whether or not it exists now.
    pub fn alternate_exchange_name(&self) -> Option<&str> {
        self.alternate_name.as_deref()
    }

    pub fn arguments(&self) -> &Arguments {
        &self.arguments
    }

    pub fn limits(&self) -> QueueLimits {
        self.limits
    }

    /// 0-10 forbids other sessions to declare, bind, consume from or get from an exclusive
    /// queue; protocol layers call this for the operations whose core call has no requester.
    pub fn check_access(&self, requester: OwnerId) -> Result<(), BrokerError> {
        match self.lock().owner {
            Some(owner) if owner != requester => Err(self.locked()),
            _ => Ok(()),
        }
    }

    fn locked(&self) -> BrokerError {
        BrokerError::ResourceLocked(format!(
            "queue {} is exclusive to another session",
            self.name
        ))
    }

    /// [`QueueInfo`] as the queue stands, expired messages included (see `Queue::info`).
    pub(crate) fn info_unswept(&self) -> QueueInfo {
        let st = self.lock();
        QueueInfo {
            name: self.name.clone(),
            durable: self.durable,
            exclusive: st.owner.is_some(),
            auto_delete: self.auto_delete,
            alternate_exchange: self.alternate_name.clone(),
            arguments: self.arguments.clone(),
            message_count: st.entries.len() as u64,
            consumer_count: st.consumers.len() as u64,
        }
    }

    /// Stores the message and dispatches (see `Queue::enqueue`, which also dead-letters what
    /// a drop-head queue dropped to make room).
    pub(crate) fn push(self: &Arc<Self>, msg: Arc<Message>) -> Result<Enqueued, BrokerError> {
        let msg = self.apply_ttl(msg);
        self.note_expiry(&msg);
        let mut st = self.state.lock();
        let enqueued = self.enqueue_locked(&mut st, msg);
        if matches!(enqueued, Ok(Enqueued::Stored | Enqueued::Dropping(_))) {
            st.dispatch(self);
        }
        enqueued
    }

    /// Stores a message (already through [`Queue::apply_ttl`]) under the caller's lock,
    /// without dispatching.
    pub(crate) fn enqueue_locked(
        &self,
        st: &mut QueueState,
        msg: Arc<Message>,
    ) -> Result<Enqueued, BrokerError> {
        if st.deleted {
            return Ok(Enqueued::Gone);
        }
        let (count, bytes) = st.depth();
        if !self.limits.admits(count, bytes, msg.size) {
            if self.limits.policy != LimitPolicy::DropHead {
                return Err(BrokerError::ResourceLimitExceeded(format!(
                    "queue {} is full",
                    self.name
                )));
            }
            // Oldest available messages make room; acquired ones cannot be dropped, so
            // if they alone fill the queue the new message is still taken.
            let mut dropped = Vec::new();
            while let Some((old, content)) = st.pop_front(self.alternate_name.is_some()) {
                st.forget(&old);
                dropped.extend(content);
                let (count, bytes) = st.depth();
                if self.limits.admits(count, bytes, msg.size) {
                    break;
                }
            }
            st.push(msg);
            return Ok(Enqueued::Dropping(dropped));
        }
        st.push(msg);
        Ok(Enqueued::Stored)
    }

    /// A queue message TTL caps each message's own expiry.
    #[inline]
    pub(crate) fn apply_ttl(&self, msg: Arc<Message>) -> Arc<Message> {
        match self.features.message_ttl {
            None => msg,
            Some(ttl) => self.with_ttl(msg, ttl),
        }
    }

    fn with_ttl(&self, msg: Arc<Message>, ttl: u64) -> Arc<Message> {
        let at = crate::message::now_ms().saturating_add(ttl);
        if msg.expires_at.is_some_and(|own| own <= at) {
            return msg;
        }
        // A shallow copy: body and headers are shared, only the expiry differs per queue. It
        // is the same message for the store, already journaled for this queue.
        let mut copy = (*msg).clone();
        copy.expires_at = Some(at);
        copy.stored.carry_from(&msg.stored);
        Arc::new(copy)
    }

    /// Adds a consumer with no credit (0-10 subscriptions start stopped; grant with
    /// [`Queue::add_credit`]).
    pub fn subscribe(self: &Arc<Self>, spec: ConsumerSpec) -> Result<(), BrokerError> {
        let mut st = self.lock();
        if st.deleted {
            return Err(BrokerError::NotFound(format!(
                "queue {} was deleted",
                self.name
            )));
        }
        if st.owner.is_some_and(|o| o != spec.owner) {
            return Err(self.locked());
        }
        if spec.exclusive && !st.consumers.is_empty() {
            return Err(BrokerError::ResourceLocked(format!(
                "queue {} has consumers; exclusive subscription refused",
                self.name
            )));
        }
        if st.consumers.iter().any(|c| c.spec.exclusive) {
            return Err(BrokerError::ResourceLocked(format!(
                "queue {} has an exclusive consumer",
                self.name
            )));
        }
        if st.consumers.iter().any(|c| c.spec.id == spec.id) {
            return Err(BrokerError::InvalidArgument(format!(
                "consumer {} already subscribed to {}",
                spec.id, self.name
            )));
        }
        st.consumers.push(Consumer::new(spec));
        st.had_consumers = true;
        st.last_used = now_ms();
        Ok(())
    }

    /// Removes a consumer; returns whether it existed and whether the queue should now be
    /// auto-deleted (auto-delete, not exclusively owned, had consumers, has none left).
    pub(crate) fn remove_consumer(&self, id: ConsumerId) -> (bool, bool) {
        let mut st = self.lock();
        let before = st.consumers.len();
        st.consumers.retain(|c| c.spec.id != id);
        let removed = st.consumers.len() != before;
        if removed {
            st.last_used = now_ms();
        }
        (removed, removed && self.auto_delete_due(&st))
    }

    fn auto_delete_due(&self, st: &QueueState) -> bool {
        self.auto_delete
            && !st.deleted
            && st.owner.is_none()
            && st.had_consumers
            && st.consumers.is_empty()
    }

    fn with_consumer<R>(
        &self,
        st: &mut QueueState,
        id: ConsumerId,
        f: impl FnOnce(&mut Consumer) -> R,
    ) -> Result<R, BrokerError> {
        match st.consumer_mut(id) {
            Some(c) => Ok(f(c)),
            None => Err(BrokerError::NotFound(format!(
                "no consumer {id} on queue {}",
                self.name
            ))),
        }
    }

    /// Grants credit (`u32::MAX` = unlimited; additions saturate) and dispatches.
    pub fn add_credit(
        self: &Arc<Self>,
        consumer: ConsumerId,
        messages: u32,
        bytes: u32,
    ) -> Result<(), BrokerError> {
        let mut st = self.lock();
        self.with_consumer(&mut st, consumer, |c| c.add_credit(messages, bytes))?;
        st.dispatch(self);
        Ok(())
    }

    /// Sets the consumer's credit to zero.
    pub fn stop(&self, consumer: ConsumerId) -> Result<(), BrokerError> {
        let mut st = self.lock();
        self.with_consumer(&mut st, consumer, Consumer::stop)
    }

    /// The queue's state, for operations that must lock several queues together (a
    /// transaction's commit); everything else locks one queue at a time.
    pub(crate) fn lock_state(&self) -> parking_lot::MutexGuard<'_, QueueState> {
        self.state.lock()
    }

    /// Runs dispatch again: an outbox that was full has been drained.
    pub(crate) fn redispatch(self: &Arc<Self>) {
        self.lock().dispatch(self);
    }

    /// Delivers what the consumer's credit allows now, then zeroes its credit (0-10
    /// message.flush).
    pub fn flush(self: &Arc<Self>, consumer: ConsumerId) -> Result<(), BrokerError> {
        let mut st = self.lock();
        self.with_consumer(&mut st, consumer, |_| ())?;
        st.dispatch(self);
        self.with_consumer(&mut st, consumer, Consumer::stop)
    }

    /// The consumer accepted the message: it leaves the queue for good. Returns false if the
    /// position was not acquired-and-unsettled (double accept is harmless).
    pub fn accept(&self, position: u64) -> bool {
        self.lock().settle_done(position).is_some()
    }

    /// [`Queue::accept`] for many positions under one lock; returns how many were settled.
    pub fn accept_all(&self, positions: impl IntoIterator<Item = u64>) -> usize {
        let mut st = self.lock();
        positions
            .into_iter()
            .filter(|p| st.settle_done(*p).is_some())
            .count()
    }

    /// Puts acquired messages back at their original place (ahead of newer messages), marks them
    /// redelivered if asked (or if they already were), and re-dispatches. Positions that are
    /// not acquired-and-unsettled are ignored, so a duplicate release cannot duplicate a message.
    /// Returns how many were released, and the orphans: on a deleted queue the messages leave
    /// for the alternate exchange (see `Queue::release`).
    pub(crate) fn requeue(
        self: &Arc<Self>,
        entries: impl IntoIterator<Item = (u64, Arc<Message>)>,
        set_redelivered: bool,
    ) -> (usize, DeadLetters<'_>) {
        let mut entries: Vec<(u64, Arc<Message>)> = entries.into_iter().collect();
        // Newest first, so each insert lands at or near the front of the deque (cheap) when
        // the released messages are older than everything still queued (the usual case).
        entries.sort_unstable_by_key(|e| std::cmp::Reverse(e.0));
        let mut orphans = Vec::new();
        let released = {
            let mut st = self.state.lock();
            let released = entries
                .into_iter()
                .filter(|(position, message)| {
                    self.release_locked(
                        &mut st,
                        *position,
                        message.clone(),
                        set_redelivered,
                        &mut orphans,
                    )
                })
                .count();
            st.dispatch(self);
            released
        };
        (released, self.leaving(Leaving::Orphaned, orphans))
    }

    /// Puts one acquired message back under the caller's lock (no dispatch). On a deleted
    /// queue it becomes an orphan for the caller to route once unlocked. False if the
    /// position was not acquired.
    pub(crate) fn release_locked(
        &self,
        st: &mut QueueState,
        position: u64,
        message: Arc<Message>,
        set_redelivered: bool,
        orphans: &mut Vec<Arc<Message>>,
    ) -> bool {
        let Some(u) = st.settle(position) else {
            return false;
        };
        if st.deleted {
            orphans.push(message);
        } else {
            st.insert_sorted(Entry {
                position,
                message,
                redelivered: u.redelivered || set_redelivered,
                on_disk: false,
            });
        }
        true
    }

    /// The consumer rejected the message: it leaves the queue, dead-lettered (see
    /// `Queue::reject`). `None` if the position was not acquired.
    pub(crate) fn settle_rejected(
        &self,
        position: u64,
        msg: Arc<Message>,
    ) -> Option<DeadLetters<'_>> {
        self.lock().settle_done(position)?;
        Some(self.leaving_one(Leaving::Died(DeathReason::Rejected), msg))
    }

    /// Acquires browsed messages (0-10 message.acquire); returns the positions that were still
    /// queued and are now acquired by the caller.
    pub fn acquire(&self, positions: impl IntoIterator<Item = u64>) -> Vec<u64> {
        let mut st = self.lock();
        let mut clock = Clock::default();
        positions
            .into_iter()
            .filter(|p| st.acquire_at(*p, &mut clock))
            .collect()
    }

    /// Acquires the first available message for a pull-style get (0-9-1 basic.get), exactly
    /// as a consumer's delivery would be acquired: settle it later with [`Queue::accept`],
    /// [`Queue::release`] or [`Queue::reject`]. Expired messages met on the way are dropped.
    /// `None` when nothing is available (or the queue was deleted).
    pub fn get(&self) -> Option<Got> {
        let mut st = self.lock();
        if st.deleted {
            return None;
        }
        if self.features.expires.is_some() {
            st.last_used = now_ms();
        }
        let entry = st.take_front()?;
        Some(Got {
            position: entry.position,
            message: entry.message,
            redelivered: entry.redelivered,
            remaining: st.entries.len() as u64,
        })
    }

    /// Puts messages recovered from the store back, in the given order, marked redelivered
    /// (they may have been delivered before the restart). Nothing is journaled: the store
    /// already holds them. A message the store left on disk comes as its stand-in
    /// ([`Message::stub`]); the queue reads it back before delivering it.
    pub fn restore(&self, messages: impl IntoIterator<Item = Restored>) {
        let mut st = self.lock();
        for m in messages {
            let (m, on_disk) = match m {
                Restored::InMemory(m) => (m, false),
                Restored::OnDisk(stub) => (stub, true),
            };
            st.push_recovered(self.apply_ttl(m), on_disk);
        }
    }

    /// Drops every available message (acquired ones are unaffected); returns how many.
    pub fn purge(&self) -> u64 {
        self.lock().purge()
    }

    /// Takes expired messages off the queue; returns how many, and the dead letters: those
    /// messages and the ones dispatch found expired since the last call, when the queue
    /// dead-letters expired messages (it drops them otherwise).
    pub(crate) fn take_expired(&self, now: u64) -> (u64, DeadLetters<'_>) {
        let (n, expired) = {
            let mut st = self.lock();
            let n = st.purge_expired(now);
            (n, std::mem::take(&mut st.expired))
        };
        (
            n,
            self.leaving(Leaving::Died(DeathReason::Expired), expired),
        )
    }

    /// Takes the expired messages off the head of a dead-lettering queue (the periodic sweep
    /// is coarse, a delay queue should be on time); returns whether messages with an expiry
    /// remain, and the dead letters.
    pub(crate) fn take_expired_head(&self, now: u64) -> (bool, DeadLetters<'_>) {
        let (expired, more) = {
            let mut st = self.state.lock();
            let more = st.expire_head(now);
            (std::mem::take(&mut st.expired), more)
        };
        (
            more,
            self.leaving(Leaving::Died(DeathReason::Expired), expired),
        )
    }

    pub(crate) fn watch_expiry(&self, notify: Arc<Notify>) {
        let _ = self.expiry_watch.set(notify);
    }

    /// A message that will expire arrives at a dead-lettering queue: wake the housekeeping.
    #[inline]
    pub(crate) fn note_expiry(&self, msg: &Message) {
        if msg.expires_at.is_some() {
            if let Some(n) = self.expiry_watch.get() {
                n.notify_one();
            }
        }
    }

    /// Bodies of the available messages, front first: a snapshot for tests and tools (it
    /// reads contents kept on disk back).
    pub fn queued_bodies(&self) -> Vec<bytes::Bytes> {
        let st = self.lock();
        st.entries
            .iter()
            .map(|e| st.content(e).map(|m| m.body.clone()).unwrap_or_default())
            .collect()
    }

    /// The queue is gone from the registry: its quota slot is free again.
    pub(crate) fn release_quota(&self) {
        self.quota.lock().take();
    }

    /// Checks and empties the queue under one lock, so no consumer can slip in between the
    /// check and the deletion.
    pub(crate) fn drain_if(
        &self,
        check: impl FnOnce(&Queue, &QueueState) -> Result<(), BrokerError>,
    ) -> Result<Drained, BrokerError> {
        let mut st = self.lock();
        if st.deleted {
            return Err(BrokerError::NotFound(format!(
                "queue {} was deleted",
                self.name
            )));
        }
        check(self, &st)?;
        let (messages, consumers) = st.drain_for_delete(self.alternate_name.is_some());
        Ok(Drained {
            messages,
            consumers,
        })
    }

    pub(crate) fn drain_for_explicit_delete(
        &self,
        if_unused: bool,
        if_empty: bool,
        requester: OwnerId,
    ) -> Result<Drained, BrokerError> {
        self.drain_if(|q, st| {
            if st.owner.is_some_and(|o| o != requester) {
                return Err(q.locked());
            }
            if if_unused && !st.consumers.is_empty() {
                return Err(BrokerError::PreconditionFailed(format!(
                    "queue {} has consumers",
                    q.name
                )));
            }
            if if_empty && !st.entries.is_empty() {
                return Err(BrokerError::PreconditionFailed(format!(
                    "queue {} is not empty",
                    q.name
                )));
            }
            Ok(())
        })
    }

    /// Whether publishers must fill [`Message::headers`] for this queue to work (a
    /// last-value queue reads its key from them).
    pub fn needs_headers(&self) -> bool {
        self.features.last_value_key.is_some()
    }

    /// Keys a last-value queue remembers (tests).
    #[cfg(test)]
    pub(crate) fn last_value_keys(&self) -> usize {
        self.lock().last_value_keys()
    }

    /// `x-expires`, if the queue has it.
    pub fn expires(&self) -> Option<u64> {
        self.features.expires
    }

    /// A (re)declare renews an `x-expires` queue's lease, as in RabbitMQ.
    pub(crate) fn touch(&self) {
        if self.features.expires.is_some() {
            self.state.lock().last_used = now_ms();
        }
    }

    /// When an `x-expires` queue falls due for deletion if it stays unused; `None` while it
    /// has consumers (or has no `x-expires`).
    pub(crate) fn unused_deadline(&self) -> Option<u64> {
        let ttl = self.features.expires?;
        let st = self.state.lock();
        (st.consumers.is_empty() && !st.deleted).then(|| st.last_used.saturating_add(ttl))
    }

    pub(crate) fn drain_if_expired(&self, now: u64) -> Result<Drained, BrokerError> {
        self.drain_if(|q, st| match q.features.expires {
            Some(ttl) if st.consumers.is_empty() && st.last_used.saturating_add(ttl) <= now => {
                Ok(())
            }
            _ => Err(BrokerError::PreconditionFailed(format!(
                "queue {} is in use again",
                q.name
            ))),
        })
    }

    pub(crate) fn drain_if_auto_delete_due(&self) -> Result<Drained, BrokerError> {
        self.drain_if(|q, st| {
            if q.auto_delete_due(st) {
                Ok(())
            } else {
                Err(BrokerError::PreconditionFailed(format!(
                    "queue {} is in use again",
                    q.name
                )))
            }
        })
    }

    /// The owning session ended. Exclusive auto-delete queues go away; other exclusive queues
    /// lose their owner and become usable by any session (qpidd does the same; 0-10 only
    /// requires exclusivity "until the declaring session closes").
    pub(crate) fn owner_gone(&self, owner: OwnerId) -> OwnerGone {
        let mut st = self.lock();
        if st.deleted || st.owner != Some(owner) {
            return OwnerGone::NotOwned;
        }
        if self.auto_delete {
            OwnerGone::Delete
        } else {
            st.owner = None;
            OwnerGone::Released
        }
    }

    /// A non-passive exclusive declare of an existing unowned queue claims it, as in qpidd.
    pub(crate) fn claim(&self, owner: OwnerId) -> Result<(), BrokerError> {
        let mut st = self.lock();
        match st.owner {
            None => {
                st.owner = Some(owner);
                Ok(())
            }
            Some(o) if o == owner => Ok(()),
            Some(_) => Err(self.locked()),
        }
    }

    /// Tells the consumers they are gone. Returns how many messages the queue held, and
    /// those messages as orphans for the alternate exchange.
    pub(crate) fn finish_delete(&self, drained: Drained) -> (u64, DeadLetters<'_>) {
        for c in drained.consumers {
            c.spec.outbox.push(OutboxItem::ConsumerCancelled {
                consumer: c.spec.id,
                tag: c.spec.tag.clone(),
                queue: self.name.clone(),
            });
        }
        let n = drained.messages.len() as u64;
        (n, self.leaving(Leaving::Orphaned, drained.messages))
    }
}

/// The `x-dead-letter-exchange` argument, if it is a string.
pub(crate) fn dead_letter_exchange_name(args: &Arguments) -> Option<&str> {
    args.get("x-dead-letter-exchange").and_then(|v| v.as_str())
}
