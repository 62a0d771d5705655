//! The broker: the registry of exchanges and queues, and the entry points protocol layers
//! call. [`Broker`] is one type; its operations are grouped by concern:
//!
//! - `registry`: exchanges and queues by name, and each queue's bindings;
//! - `exchanges`, `queues`: declaring and deleting them (and purging queues);
//! - `bindings`: queue and exchange-to-exchange bindings, and 0-10 exchange.bound;
//! - `recovery`: recreating what the store recovered, without journaling it again;
//! - `publish`: publishing, and committing transactions;
//! - `sessions`: what a session's end or a consumer's cancel does to queues;
//! - `expiry`: housekeeping by the clock (`x-expires`, expired messages, delay queues);
//! - `alarms`: the memory meter and resource alarms.
//!
//! Deleting a queue happens in two steps: under the registry lock it is drained and
//! unlinked; after the lock is released its consumers are told and its messages routed to
//! the alternate exchange (`queues::finish_delete`), since routing takes queue locks.

mod alarms;
mod bindings;
#[cfg(test)]
mod dtx_tests;
#[cfg(test)]
mod events_tests;
mod exchanges;
mod expiry;
#[cfg(test)]
mod journal_tests;
#[cfg(test)]
mod meter_tests;
mod publish;
#[cfg(test)]
mod qpidd_tests;
mod queues;
mod recovery;
mod registry;
#[cfg(test)]
mod reroute_tests;
mod sessions;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod trace_tests;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use parking_lot::{Mutex, RwLock};
use tokio::sync::Notify;

use crate::alarm::{Alarms, MemoryMeter, Watermarks};
use crate::connections::Connections;
use crate::dtx::{DtxManager, DtxTimeouts};
use crate::events::{BrokerEvent, Observer};
use crate::exchange::{Exchange, ExchangeInfo, ExchangeOptions};
use crate::exchange_kind::ExchangeKind;
use crate::journal::Journal;
use crate::limits::QueueLimits;
use crate::message::MessageFilter;
use crate::queue::{ObserverSlot, OffloadBudget, Queue, QueueInfo};
use crate::stats::QueueCounters;
use crate::value::Arguments;
use crate::{ConnectionId, ConsumerId, OwnerId};

pub use bindings::BoundResult;
pub use publish::PublishOutcome;
pub use queues::Dialect;
use registry::Registry;

#[derive(Debug, Clone, Default)]
pub struct BrokerConfig {
    /// Applied to queues declared without any limit of their own.
    pub default_limits: QueueLimits,
    /// When to raise and clear the memory alarm; `None` never raises it.
    pub memory_watermarks: Option<Watermarks>,
    /// Bytes of persistent messages durable queues keep in memory (flow to disk): beyond
    /// it, and beyond a small read-ahead window per queue, a queued message's content stays
    /// in the journal only and is read back for delivery. `None`: everything in memory.
    /// Needs a journal.
    pub persistent_memory_budget: Option<u64>,
    /// Producer flow control: a publish that leaves a queue with consumers holding more than
    /// this many bytes ready in memory names that queue in its [`PublishOutcome`], so the
    /// protocol layer can stop taking that publisher's messages until the queue drains
    /// (as qpidd's producer flow control and RabbitMQ's credit flow do). `None`: never.
    pub backlog_hold: Option<u64>,
    /// Protocol layers stamp each message they receive with the time (qpidd's
    /// `--enable-timestamp`); management may turn it on and off ([`Broker::set_stamps_receipt`]).
    pub receive_timestamps: bool,
    /// Distributed transactions' branch timeouts.
    pub dtx_timeouts: DtxTimeouts,
    /// Makes a queue binding's filter from its arguments; `None`: bindings have none.
    pub binding_filters: Option<BindingFilters>,
}

/// Reads a binding's arguments for a filter (a JMS selector): the protocol layer's, since
/// only it can read a message's properties. `Ok(None)` for a binding without one; `Err`
/// (why) refuses the binding.
pub type MakeBindingFilter =
    dyn Fn(&Arguments) -> Result<Option<Arc<dyn MessageFilter>>, String> + Send + Sync;

/// See [`BrokerConfig::binding_filters`].
#[derive(Clone)]
pub struct BindingFilters(pub Arc<MakeBindingFilter>);

impl std::fmt::Debug for BindingFilters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BindingFilters")
    }
}

/// Besides the default (nameless direct) exchange.
const BUILTIN_EXCHANGES: [(&str, ExchangeKind); 4] = [
    ("amq.direct", ExchangeKind::Direct),
    ("amq.fanout", ExchangeKind::Fanout),
    ("amq.topic", ExchangeKind::Topic),
    ("amq.match", ExchangeKind::Headers),
];

/// Declares and deletes are rare, so the registry is one `RwLock`ed pair of maps, and every
/// mutation takes it for writing, which serialises admin operations against each other (no
/// binding can be added to a queue being deleted). Publishing never touches it: sessions hold
/// `Arc<Exchange>` handles.
pub struct Broker {
    config: BrokerConfig,
    journal: Option<Arc<dyn Journal>>,
    registry: RwLock<Registry>,
    default_exchange: Arc<Exchange>,
    next_consumer: AtomicU64,
    next_owner: AtomicU64,
    next_name: AtomicU64,
    memory: Arc<MemoryMeter>,
    /// Flow to disk: the budget for persistent contents in durable queues.
    offload: Option<Arc<OffloadBudget>>,
    alarms: Alarms,
    /// Queues declared with `x-expires`, for [`Broker::expire_unused_queues`]. Locked
    /// after the registry, before any queue.
    expiring: Mutex<Vec<Weak<Queue>>>,
    /// Wakes the housekeeping task when an `x-expires` deadline may have come closer, or a
    /// dead-lettering queue got a message that will expire.
    expiry_changed: Arc<Notify>,
    /// Queues that dead-letter expired messages, whose heads [`Broker::expire_heads`]
    /// watches closely (a delay queue should deliver on time, not on the next sweep).
    dead_lettering: Mutex<Vec<Weak<Queue>>>,
    /// Open connections, for management.
    connections: Arc<Connections>,
    /// Told of declares, deletes and bindings (management's events), once set; shared
    /// with queues that watch thresholds.
    observer: ObserverSlot,
    /// The counters of deleted queues, summed: broker-wide totals (qpidd's broker object,
    /// the overview's message rates) keep what deleted queues counted.
    retired: Mutex<QueueCounters>,
    /// [`BrokerConfig::receive_timestamps`], as management last set it: read on every
    /// publish, so an atomic rather than under a lock.
    stamps_receipt: AtomicBool,
    /// Distributed transactions' branches.
    dtx: DtxManager,
}

impl Broker {
    pub fn new(config: BrokerConfig) -> Arc<Broker> {
        Broker::build(config, None)
    }

    /// A broker whose durable state goes to `journal`. Restore what the store recovered with
    /// the `restore_*` methods before serving clients.
    pub fn with_journal(config: BrokerConfig, journal: Arc<dyn Journal>) -> Arc<Broker> {
        Broker::build(config, Some(journal))
    }

    fn build(config: BrokerConfig, journal: Option<Arc<dyn Journal>>) -> Arc<Broker> {
        let offload = config
            .persistent_memory_budget
            .filter(|_| journal.is_some())
            .map(|b| Arc::new(OffloadBudget::new(b)));
        let builtin_opts = ExchangeOptions {
            durable: true,
            ..ExchangeOptions::default()
        };
        let mut reg = Registry::default();
        for (name, kind) in BUILTIN_EXCHANGES {
            let ex = Exchange::new(name.to_owned(), kind, &builtin_opts, None, true);
            reg.exchanges.insert(name.to_owned(), ex);
        }
        let default_exchange = Exchange::new(
            String::new(),
            ExchangeKind::Direct,
            &builtin_opts,
            None,
            true,
        );
        reg.exchanges
            .insert(String::new(), default_exchange.clone());
        let expiry_changed = Arc::new(Notify::new());
        Arc::new(Broker {
            journal,
            registry: RwLock::new(reg),
            default_exchange,
            next_consumer: AtomicU64::new(1),
            next_owner: AtomicU64::new(1),
            next_name: AtomicU64::new(1),
            memory: Arc::default(),
            offload,
            alarms: Alarms::default(),
            expiring: Mutex::new(Vec::new()),
            expiry_changed: expiry_changed.clone(),
            dead_lettering: Mutex::new(Vec::new()),
            connections: Arc::default(),
            observer: ObserverSlot::default(),
            retired: Mutex::default(),
            stamps_receipt: AtomicBool::new(config.receive_timestamps),
            dtx: DtxManager::new(config.dtx_timeouts, expiry_changed),
            config,
        })
    }

    pub fn config(&self) -> &BrokerConfig {
        &self.config
    }

    /// Distributed transactions' branches.
    pub fn dtx(&self) -> &DtxManager {
        &self.dtx
    }

    /// Whether protocol layers stamp received messages with the time of receipt.
    #[inline]
    pub fn stamps_receipt(&self) -> bool {
        self.stamps_receipt.load(Ordering::Relaxed)
    }

    /// Turns receive timestamps on or off (qpidd's broker method `setTimestampConfig`):
    /// messages received from now on.
    pub fn set_stamps_receipt(&self, on: bool) {
        self.stamps_receipt.store(on, Ordering::Relaxed);
    }

    /// Seconds since the UNIX epoch, as a receive timestamp carries them (0-10's datetime
    /// and 0-9-1's timestamp: POSIX time).
    pub fn receipt_time() -> u64 {
        crate::message::now_ms() / 1000
    }

    /// The journal durable state goes to; `None` for a memory-only broker.
    pub fn journal(&self) -> Option<&Arc<dyn Journal>> {
        self.journal.as_ref()
    }

    pub fn next_consumer_id(&self) -> ConsumerId {
        self.next_consumer.fetch_add(1, Ordering::Relaxed)
    }

    pub fn next_owner_id(&self) -> OwnerId {
        self.next_owner.fetch_add(1, Ordering::Relaxed)
    }

    /// A connection's id, never 0. Drawn from the owners' sequence, so a 0-9-1 connection
    /// (which owns its exclusive queues itself) may use one id for both.
    pub fn next_connection_id(&self) -> ConnectionId {
        self.next_owner_id()
    }

    /// The nameless direct exchange every queue is implicitly bound to by its name.
    pub fn default_exchange(&self) -> &Arc<Exchange> {
        &self.default_exchange
    }

    pub fn exchange(&self, name: &str) -> Option<Arc<Exchange>> {
        self.registry.read().exchanges.get(name).cloned()
    }

    pub fn queue(&self, name: &str) -> Option<Arc<Queue>> {
        self.registry.read().queues.get(name).cloned()
    }

    pub fn queue_names(&self) -> Vec<String> {
        self.registry.read().queues.keys().cloned().collect()
    }

    /// Every queue, in no particular order.
    pub fn queues(&self) -> Vec<Arc<Queue>> {
        self.registry.read().queues.values().cloned().collect()
    }

    /// Every exchange (the default one included), in no particular order.
    pub fn exchanges(&self) -> Vec<Arc<Exchange>> {
        self.registry.read().exchanges.values().cloned().collect()
    }

    /// The open connections, for management.
    pub fn connections(&self) -> &Arc<Connections> {
        &self.connections
    }

    /// Sets the observer told of every [`BrokerEvent`] from now on; false (and ignored) if
    /// one is set already.
    pub fn set_observer(&self, observer: Arc<dyn Observer>) -> bool {
        self.observer.set(observer).is_ok()
    }

    /// Tells the observer, if any, of the event `event` builds (built only then).
    pub(super) fn notify(&self, event: impl FnOnce() -> BrokerEvent) {
        if let Some(o) = self.observer.get() {
            o.event(event());
        }
    }

    pub fn exchange_names(&self) -> Vec<String> {
        self.registry.read().exchanges.keys().cloned().collect()
    }

    pub fn queue_info(&self, name: &str) -> Option<QueueInfo> {
        self.queue(name).map(|q| q.info())
    }

    pub fn exchange_info(&self, name: &str) -> Option<ExchangeInfo> {
        self.exchange(name).map(|e| e.info())
    }
}
