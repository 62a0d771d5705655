//! Queues: FIFO storage, consumers, credit and settlement.
//!
//! Everything a queue guards sits in one [`QueueState`] behind one mutex (`state`), so a
//! publish or a credit grant hands messages to consumers without taking a second lock. The
//! operations on a [`Queue`] are grouped by concern:
//!
//! - `enqueue`: messages arriving, within the queue's limits, or recovered from the store
//!   (`no_local`: qpidd's no-local queues drop their owner's own; `sequence`: qpidd's
//!   sequencing queues number what arrives);
//! - `subscriptions`: consumers subscribing and cancelling, and their credit (`flow`: 0-10's
//!   window mode);
//! - `settlement`: acquired messages accepted, released or rejected;
//! - `acquire`: acquiring without a subscription (basic.get, browsed messages);
//! - `expiry`: message TTLs, and taking expired messages off;
//! - `dead_letter`: what leaves for the alternate exchange, and in what form;
//! - `lifecycle`: exclusive ownership, auto-delete, `x-expires`, purge and deletion
//!   (`timed_delete`: qpidd's `qpid.auto_delete_timeout`);
//! - `info`: counts and snapshots.
//!
//! The state is made of `entries` (the FIFO, per priority), `consumer` records and
//! `features` (what the declare arguments ask for); `state::offload` keeps contents on disk
//! (flow to disk). Dispatch delivers into connections' `outbox`es, within a session's
//! settlement `window`; both re-dispatch queues that stopped for want of room.
//!
//! Exchanges and routing sit above queues, so a queue never routes: the operations that take
//! messages off for the alternate exchange return them as [`DeadLetters`]. The public forms
//! of those operations, which route them too (`enqueue`, `reject`, `release`,
//! `message_count`, `info`), are defined in `crate::route`.

mod acquire;
mod alerts;
mod consumer;
mod dead_letter;
mod enqueue;
mod entries;
mod expiry;
mod features;
#[cfg(test)]
mod filter_tests;
mod flow;
mod graveyard;
mod group_heads;
mod groups;
mod hold;
mod info;
mod lifecycle;
mod no_local;
pub(crate) mod outbox;
mod sequence;
mod settlement;
mod state;
mod subscriptions;
#[cfg(test)]
mod tests;
mod timed_delete;
mod trace;
mod window;

use std::fmt;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use parking_lot::{Mutex, MutexGuard};
use tokio::sync::Notify;

use crate::alarm::MemoryMeter;
use crate::journal::Journal;
use crate::limits::QueueLimits;
use crate::value::Arguments;
use crate::{ConnectionId, OwnerId};

pub use acquire::Got;
pub(crate) use alerts::{Alerts, ObserverSlot, Thresholds};
pub(crate) use consumer::Consumer;
pub use consumer::{ConsumerFilter, ConsumerSpec};
pub(crate) use dead_letter::{dead_letter_exchange_name, AlternateExchange, DeadLetters, Leaving};
pub(crate) use enqueue::Enqueued;
pub use enqueue::{Backlog, Restored, RestoredMessage};
pub use features::is_quorum_declare;
pub(crate) use features::Features;
pub use groups::{MessageGroup, MessageGroups};
pub use hold::BacklogWaiter;
pub(crate) use hold::HeldPublisher;
pub use info::{ConsumerStatus, QueueDepth};
pub(crate) use lifecycle::{AutoDelete, Drained, OwnerGone};
pub use outbox::{Delivery, Outbox, OutboxItem};
pub use settlement::Accepts;
pub(crate) use settlement::Gone;
pub(crate) use state::{OffloadBudget, QueueState, Settled};
pub use window::SettleWindow;

/// Unique across the process so bindings can key queues without hashing names.
static NEXT_QUEUE_ID: AtomicU64 = AtomicU64::new(1);

#[derive(Debug, Clone, Default)]
pub struct QueueOptions {
    pub durable: bool,
    /// `Some(session)` declares an exclusive queue owned by that session.
    pub exclusive_owner: Option<OwnerId>,
    /// The declaring session's connection: with `exclusive_owner`, the connection whose
    /// messages a no-local queue drops.
    pub connection: ConnectionId,
    pub auto_delete: bool,
    pub alternate_exchange: Option<String>,
    pub limits: QueueLimits,
    pub arguments: Arguments,
    /// Held while the queue exists and dropped when it is deleted: a protocol layer counting
    /// queues against a quota passes a guard whose drop gives the slot back. Ignored when the
    /// declare finds an existing queue.
    pub quota: Option<QuotaCharge>,
    /// The broker's own plumbing (the QMF agent's request queue): management does not list
    /// it, so tools see the queues clients made.
    pub system: bool,
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
    system: bool,
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
    /// Transient messages are journaled too (see [`Journal::journals_all`]).
    pub(crate) all: bool,
}

impl fmt::Debug for QueueStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "QueueStore({})", self.id)
    }
}

/// The queue's lock, held. Whatever was done under it may have brought the backlog down, so
/// releasing it lets held publishers go that may (see `hold`); with nobody held that is one
/// check of an empty list.
pub(crate) struct Locked<'a>(MutexGuard<'a, QueueState>);

impl Deref for Locked<'_> {
    type Target = QueueState;

    fn deref(&self) -> &QueueState {
        &self.0
    }
}

impl DerefMut for Locked<'_> {
    fn deref_mut(&mut self) -> &mut QueueState {
        &mut self.0
    }
}

impl Drop for Locked<'_> {
    #[inline]
    fn drop(&mut self) {
        if !self.0.held.is_empty() {
            self.0.release_held();
        }
    }
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
        // qpidd: a timeout makes the queue auto-delete.
        let auto_delete = opts.auto_delete || features.auto_delete_timeout.is_some();
        let mut state = QueueState::new(opts.exclusive_owner, &features, meter, id as usize);
        state.owner_connection = opts.connection;
        // Orphans go to a 0-10 alternate exchange, acquired ones included; a RabbitMQ dead
        // letter exchange takes none.
        state.keep_acquired = alternate_name.is_some() && !features.dead_letter;
        state.offload = store.as_ref().and_then(|s| s.offload.clone());
        state.store = store.clone();
        Arc::new(Queue {
            name,
            id,
            durable: opts.durable,
            auto_delete,
            system: opts.system,
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

    /// The queue's message groups, if it has them (`qpid.group_header_key`).
    pub fn message_groups(&self) -> Option<MessageGroups> {
        let st = self.lock();
        let groups = st.groups.as_deref()?;
        Some(groups.status(|p| st.entries.contains(p), &st.consumers))
    }

    /// Watches the queue's depth for the thresholds its arguments set, if any, telling
    /// whatever observer `observer` holds by then.
    pub(crate) fn watch_thresholds(&self, observer: &ObserverSlot) {
        if let Some(t) = Thresholds::from_arguments(&self.arguments) {
            let mut st = self.lock();
            st.alerts = Some(Box::new(Alerts::new(&self.name, t, observer.clone())));
            st.check_alerts();
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn id(&self) -> u64 {
        self.id
    }

    /// Whether transient messages for this queue are journaled too (a replicated queue).
    #[inline]
    pub(crate) fn journals_all(&self) -> bool {
        self.store.as_ref().is_some_and(|s| s.all)
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

    fn lock(&self) -> Locked<'_> {
        Locked(self.state.lock())
    }

    /// The queue's state, for operations that must lock several queues together (a
    /// transaction's commit); everything else locks one queue at a time.
    pub(crate) fn lock_state(&self) -> Locked<'_> {
        self.lock()
    }

    pub fn is_auto_delete(&self) -> bool {
        self.auto_delete
    }

    /// See [`QueueOptions::system`].
    pub fn is_system(&self) -> bool {
        self.system
    }

    pub fn is_durable(&self) -> bool {
        self.durable
    }

    /// Whether consumers hear how often a message came back here (a quorum queue, or one
    /// with a delivery limit), as RabbitMQ's quorum queues' `x-delivery-count` tells them;
    /// its classic queues keep no count.
    pub fn reports_returns(&self) -> bool {
        self.features.reports_returns
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

    /// Whether publishers must fill [`Message::headers`](crate::Message::headers) for this
    /// queue to work: a last-value queue reads its key from them, a grouping queue its
    /// group, a tracing queue the trace (`x-qpid.trace`), and a queue with an
    /// alternate (dead letter) exchange may pass its messages on to an exchange that routes
    /// by them — decided when they die, long after the publisher could have decoded them.
    pub fn needs_headers(&self) -> bool {
        self.features.last_value_key.is_some()
            || self.features.group_key.is_some()
            || self.features.trace.is_some()
            || self.alternate_name.is_some()
    }

    /// `x-expires`, if the queue has it.
    pub fn expires(&self) -> Option<u64> {
        self.features.expires
    }
}
