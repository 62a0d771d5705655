//! The broker: registry of exchanges and queues, declarations, and the publish entry point.

#[cfg(test)]
mod journal_tests;
#[cfg(test)]
mod meter_tests;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use parking_lot::{Mutex, RwLock};
use tokio::sync::futures::Notified;
use tokio::sync::Notify;

use crate::alarm::{Alarm, Alarms, MemoryMeter, Watermarks};
use crate::error::BrokerError;
use crate::exchange::{Exchange, ExchangeInfo, ExchangeOptions};
use crate::exchange_kind::ExchangeKind;
use crate::id_hash::IdMap;
use crate::journal::{ExchangeDefinition, Journal, QueueDefinition, SyncPoint};
use crate::limits::QueueLimits;
use crate::message::{now_ms, Message};
use crate::queue::{
    dead_letter_exchange_name, AlternateExchange, Drained, Features, OffloadBudget, OwnerGone,
    Queue, QueueInfo, QueueOptions, QueueStore,
};
use crate::route;
use crate::transaction::{CommitOutcome, Transaction};
use crate::value::Arguments;
use crate::{ConsumerId, OwnerId};

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
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PublishOutcome {
    /// Queues that stored the message; 0 means it was dropped as unroutable (after trying the
    /// alternate exchange) or expired on arrival.
    pub queues: usize,
    /// Set when the message was journaled (persistent, reaching a durable queue): a protocol
    /// layer confirms it to the publisher only once the journal is durable up to here.
    pub sync: Option<SyncPoint>,
}

/// 0-10 exchange.bound result flags.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BoundResult {
    pub exchange_not_found: bool,
    pub queue_not_found: bool,
    pub queue_not_matched: bool,
    pub key_not_matched: bool,
    pub args_not_matched: bool,
}

/// URL-safe base64 of a counter and a timestamp: short, unique per broker, unguessable enough
/// that clients do not rely on the sequence.
fn name_suffix(n: u64, now: u64) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut v = (u128::from(now) << 64) | u128::from(n.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let mut s = String::with_capacity(22);
    for _ in 0..22 {
        s.push(char::from(ALPHABET[(v & 63) as usize]));
        v >>= 6;
    }
    s
}

/// Tells a deleted queue's consumers they are gone and sends the messages it held to its
/// alternate exchange; returns how many it held. Call outside the registry lock: routing
/// them takes queue locks.
fn finish_delete(q: &Queue, drained: Drained) -> u64 {
    let (n, orphans) = q.finish_delete(drained);
    route::dead_letters(orphans);
    n
}

/// Whether a queue being created comes from the store (with its store id) or is new.
#[derive(Clone, Copy)]
enum Restore {
    No,
    Yes(u64),
}

/// Besides the default (nameless direct) exchange.
const BUILTIN_EXCHANGES: [(&str, ExchangeKind); 4] = [
    ("amq.direct", ExchangeKind::Direct),
    ("amq.fanout", ExchangeKind::Fanout),
    ("amq.topic", ExchangeKind::Topic),
    ("amq.match", ExchangeKind::Headers),
];

#[derive(Default)]
struct Registry {
    exchanges: HashMap<String, Arc<Exchange>>,
    queues: HashMap<String, Arc<Queue>>,
    /// Each queue's explicit bindings (exchange, key), by queue id, so deleting a queue can
    /// remove them without scanning every exchange. Weak: an exchange's bindings already own
    /// the queue.
    bindings: IdMap<Vec<(Weak<Exchange>, String)>>,
}

impl Registry {
    fn add_binding(&mut self, queue: &Queue, exchange: &Arc<Exchange>, key: &str) {
        self.bindings
            .entry(queue.id())
            .or_default()
            .push((Arc::downgrade(exchange), key.to_owned()));
    }

    fn remove_binding(&mut self, queue: &Queue, exchange: &Exchange, key: &str) {
        if let Some(list) = self.bindings.get_mut(&queue.id()) {
            list.retain(|(e, k)| !(k == key && std::ptr::eq(e.as_ptr(), exchange)));
            if list.is_empty() {
                self.bindings.remove(&queue.id());
            }
        }
    }

    fn alternate_users(&self, ex: &Exchange) -> Option<String> {
        let is_it = |alt: Option<&Arc<Exchange>>| alt.is_some_and(|a| std::ptr::eq(&**a, ex));
        self.exchanges
            .values()
            .find(|e| is_it(e.alternate()))
            .map(|e| format!("exchange {}", e.name()))
            .or_else(|| {
                // A RabbitMQ dead letter exchange may be deleted; its queues then drop
                // dead letters until it is declared again.
                self.queues
                    .values()
                    .filter(|q| !q.is_dead_lettering())
                    .find(|q| is_it(q.alternate_exchange().as_ref()))
                    .map(|q| format!("queue {}", q.name()))
            })
    }

    fn resolve_alternate(&self, name: Option<&str>) -> Result<Option<Arc<Exchange>>, BrokerError> {
        match name.filter(|n| !n.is_empty()) {
            None => Ok(None),
            Some(n) => self.exchanges.get(n).cloned().map(Some).ok_or_else(|| {
                BrokerError::NotFound(format!("alternate exchange {n} does not exist"))
            }),
        }
    }

    fn exchange(&self, name: &str) -> Result<&Arc<Exchange>, BrokerError> {
        self.exchanges
            .get(name)
            .ok_or_else(|| BrokerError::NotFound(format!("exchange {name} does not exist")))
    }

    fn queue(&self, name: &str) -> Result<&Arc<Queue>, BrokerError> {
        self.queues
            .get(name)
            .ok_or_else(|| BrokerError::NotFound(format!("queue {name} does not exist")))
    }
}

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
        Arc::new(Broker {
            config,
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
            expiry_changed: Arc::new(Notify::new()),
            dead_lettering: Mutex::new(Vec::new()),
        })
    }

    pub fn config(&self) -> &BrokerConfig {
        &self.config
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

    /// Bytes of messages held by queues now (queued or delivered and unsettled).
    pub fn memory_used(&self) -> u64 {
        self.memory.bytes()
    }

    /// The resource alarms publishers wait on.
    pub fn alarms(&self) -> &Alarms {
        &self.alarms
    }

    /// Raises the memory alarm above the high-water mark and clears it at or below the low
    /// one; returns the alarm's new state when it changed. Called periodically.
    pub fn check_memory(&self) -> Option<bool> {
        let marks = self.config.memory_watermarks?;
        let used = self.memory.bytes();
        let raised = self.alarms.is_raised(Alarm::Memory);
        let want = if raised {
            used > marks.low.min(marks.high)
        } else {
            used > marks.high
        };
        (want != raised && self.alarms.set(Alarm::Memory, want)).then_some(want)
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

    pub fn exchange_names(&self) -> Vec<String> {
        self.registry.read().exchanges.keys().cloned().collect()
    }

    pub fn queue_info(&self, name: &str) -> Option<QueueInfo> {
        self.queue(name).map(|q| q.info())
    }

    pub fn exchange_info(&self, name: &str) -> Option<ExchangeInfo> {
        self.exchange(name).map(|e| e.info())
    }

    /// Declares (or, with `passive`, looks up) an exchange. Redeclaring with another type is
    /// `NotAllowed`, as is a differing alternate exchange; other options of an existing exchange
    /// are ignored (0-10: durable and auto-delete are "sticky"). The default exchange can only
    /// be declared passively; `amq.*` names cannot be created, only redeclared identically.
    pub fn declare_exchange(
        &self,
        name: &str,
        kind: ExchangeKind,
        opts: ExchangeOptions,
        passive: bool,
    ) -> Result<Arc<Exchange>, BrokerError> {
        let mut reg = self.registry.write();
        if let Some(ex) = reg.exchanges.get(name) {
            if passive {
                return Ok(ex.clone());
            }
            if name.is_empty() {
                return Err(BrokerError::NotAllowed(
                    "the default exchange cannot be declared".into(),
                ));
            }
            if ex.kind() != kind {
                return Err(BrokerError::NotAllowed(format!(
                    "exchange {name} exists with type {}",
                    ex.kind().name()
                )));
            }
            if let Some(alt) = opts.alternate_exchange.as_deref().filter(|a| !a.is_empty()) {
                if ex.alternate().map(|a| a.name()) != Some(alt) {
                    return Err(BrokerError::NotAllowed(format!(
                        "exchange {name} exists with a different alternate exchange"
                    )));
                }
            }
            return Ok(ex.clone());
        }
        if passive {
            return Err(BrokerError::NotFound(format!(
                "exchange {name} does not exist"
            )));
        }
        if name.is_empty() || name.starts_with("amq.") {
            return Err(BrokerError::NotAllowed(format!(
                "exchange name {name:?} is reserved"
            )));
        }
        self.create_exchange(&mut reg, name, kind, opts, true)
    }

    /// Recreates a durable exchange the store recovered, without journaling it again.
    pub fn restore_exchange(
        &self,
        name: &str,
        kind: ExchangeKind,
        opts: ExchangeOptions,
    ) -> Result<Arc<Exchange>, BrokerError> {
        let mut reg = self.registry.write();
        if reg.exchanges.contains_key(name) {
            return Err(BrokerError::PreconditionFailed(format!(
                "exchange {name} exists"
            )));
        }
        self.create_exchange(&mut reg, name, kind, opts, false)
    }

    fn create_exchange(
        &self,
        reg: &mut Registry,
        name: &str,
        kind: ExchangeKind,
        opts: ExchangeOptions,
        record: bool,
    ) -> Result<Arc<Exchange>, BrokerError> {
        let alternate = reg.resolve_alternate(opts.alternate_exchange.as_deref())?;
        if let Some(journal) = self.journal.as_ref().filter(|_| record && opts.durable) {
            journal.declare_exchange(&ExchangeDefinition {
                name,
                kind,
                auto_delete: opts.auto_delete,
                alternate_exchange: alternate.as_ref().map(|a| a.name()),
                arguments: &opts.arguments,
            })?;
        }
        let ex = Exchange::new(name.to_owned(), kind, &opts, alternate, false);
        reg.exchanges.insert(name.to_owned(), ex.clone());
        for q in self.dead_lettering_queues() {
            q.adopt_dead_letter_exchange(ex.clone());
        }
        Ok(ex)
    }

    pub fn delete_exchange(&self, name: &str, if_unused: bool) -> Result<(), BrokerError> {
        let mut reg = self.registry.write();
        let ex = reg.exchange(name)?.clone();
        if ex.is_builtin() {
            return Err(BrokerError::NotAllowed(format!(
                "exchange {name:?} is built in"
            )));
        }
        if if_unused && ex.binding_count() > 0 {
            return Err(BrokerError::PreconditionFailed(format!(
                "exchange {name} has bindings"
            )));
        }
        if let Some(user) = reg.alternate_users(&ex) {
            return Err(BrokerError::NotAllowed(format!(
                "exchange {name} is the alternate exchange of {user}"
            )));
        }
        self.unlink_exchange(&mut reg, &ex);
        Ok(())
    }

    /// Removes an exchange from the registry with every binding it is the source or the
    /// destination of; sources left without bindings that are auto-delete go too.
    fn unlink_exchange(&self, reg: &mut Registry, ex: &Arc<Exchange>) {
        if let Some(journal) = self.journal.as_ref().filter(|_| ex.is_durable()) {
            journal.delete_exchange(ex.name());
        }
        if reg
            .exchanges
            .get(ex.name())
            .is_some_and(|e| Arc::ptr_eq(e, ex))
        {
            reg.exchanges.remove(ex.name());
        }
        ex.mark_deleted();
        for q in self.dead_lettering_queues() {
            q.forget_dead_letter_exchange(&**ex);
        }
        let (queues, exchanges) = ex.clear();
        for (q, key) in queues {
            reg.remove_binding(&q, ex, &key);
        }
        for (dest, key) in exchanges {
            dest.remove_inbound(ex, &key);
        }
        for (source, key) in ex.take_inbound() {
            if let Some(source) = source.upgrade() {
                source.unbind_exchange(ex.id(), &key);
                self.auto_delete_exchange(reg, &source);
            }
        }
    }

    /// Declares (or, with `passive`, looks up) a queue on behalf of session `requester`.
    /// Returns the queue and whether it was created.
    ///
    /// An existing queue exclusively owned by another session is `ResourceLocked` for any
    /// declare, passive or not (0-10 queue.declare exclusive/in-use). A non-passive exclusive
    /// declare of an existing unowned queue makes the requester its owner, as qpidd does.
    /// Durable and auto-delete of an existing queue are kept (0-10: ignored on redeclare).
    pub fn declare_queue(
        &self,
        name: &str,
        opts: QueueOptions,
        passive: bool,
        requester: OwnerId,
    ) -> Result<(Arc<Queue>, bool), BrokerError> {
        if name.is_empty() {
            return Err(BrokerError::InvalidArgument(
                "queue name must not be empty".into(),
            ));
        }
        let mut reg = self.registry.write();
        if let Some(q) = reg.queues.get(name) {
            q.check_access(requester)?;
            q.touch();
            if !passive {
                if let Some(alt) = opts.alternate_exchange.as_deref().filter(|a| !a.is_empty()) {
                    if q.alternate_exchange_name() != Some(alt) {
                        return Err(BrokerError::NotAllowed(format!(
                            "queue {name} exists with a different alternate exchange"
                        )));
                    }
                }
                if let Some(owner) = opts.exclusive_owner {
                    q.claim(owner)?;
                }
            }
            return Ok((q.clone(), false));
        }
        if passive {
            return Err(BrokerError::NotFound(format!(
                "queue {name} does not exist"
            )));
        }
        if name.starts_with("amq.") {
            return Err(BrokerError::NotAllowed(format!(
                "queue name {name} is reserved"
            )));
        }
        self.create_queue(&mut reg, name, opts, Restore::No)
    }

    /// Recreates a durable queue the store recovered under its store id `store_id`, without
    /// journaling it again. Put its messages back with [`Queue::restore`].
    pub fn restore_queue(
        &self,
        name: &str,
        opts: QueueOptions,
        store_id: u64,
    ) -> Result<Arc<Queue>, BrokerError> {
        let mut reg = self.registry.write();
        if reg.queues.contains_key(name) {
            return Err(BrokerError::PreconditionFailed(format!(
                "queue {name} exists"
            )));
        }
        self.create_queue(&mut reg, name, opts, Restore::Yes(store_id))
            .map(|(q, _)| q)
    }

    /// Creates a queue under a fresh broker-chosen name starting with `prefix` (0-9-1's
    /// `amq.gen-…` queues). Reserved prefixes are allowed here: the broker, not the client,
    /// picks the name, and it cannot collide with an existing queue.
    pub fn declare_server_named_queue(
        &self,
        prefix: &str,
        opts: QueueOptions,
    ) -> Result<Arc<Queue>, BrokerError> {
        let mut reg = self.registry.write();
        loop {
            let n = self.next_name.fetch_add(1, Ordering::Relaxed);
            // Mixing in the clock keeps names from repeating across broker restarts, which
            // clients caching names from an earlier run would otherwise confuse.
            let name = format!("{prefix}{}", name_suffix(n, now_ms()));
            if !reg.queues.contains_key(&name) {
                return self
                    .create_queue(&mut reg, &name, opts, Restore::No)
                    .map(|(q, _)| q);
            }
        }
    }

    fn create_queue(
        &self,
        reg: &mut Registry,
        name: &str,
        opts: QueueOptions,
        restore: Restore,
    ) -> Result<(Arc<Queue>, bool), BrokerError> {
        Features::validate(&opts.arguments)?;
        // x-dead-letter-exchange is the alternate exchange unless the protocol gave one
        // (0-9-1 maps it there; a 0-10 client may send it as a plain argument).
        let dead_letter_exchange = dead_letter_exchange_name(&opts.arguments);
        let alternate = match opts.alternate_exchange.as_deref().or(dead_letter_exchange) {
            // RabbitMQ: a dead letter exchange of "" is the default exchange, so dead letters
            // can go straight to a queue named by x-dead-letter-routing-key.
            Some("") if dead_letter_exchange.is_some() => Some(self.default_exchange.clone()),
            // RabbitMQ does not ask a dead letter exchange to exist yet.
            Some(name) if dead_letter_exchange.is_some() => reg.exchanges.get(name).cloned(),
            name => reg.resolve_alternate(name)?,
        };
        let limits = if opts.limits.is_unlimited() {
            self.config.default_limits
        } else {
            opts.limits
        };
        let store = match (&self.journal, restore) {
            _ if !opts.durable => None,
            (Some(journal), Restore::Yes(id)) => Some(QueueStore {
                journal: journal.clone(),
                id,
                offload: self.offload.clone(),
            }),
            (Some(journal), Restore::No) => {
                let id = journal.declare_queue(&QueueDefinition {
                    name,
                    auto_delete: opts.auto_delete,
                    // A dead letter exchange not declared yet is kept by name.
                    alternate_exchange: alternate.as_ref().map(|a| a.name()).or(opts
                        .alternate_exchange
                        .as_deref()
                        .filter(|a| !a.is_empty())
                        .or(dead_letter_exchange)),
                    limits: opts.limits,
                    arguments: &opts.arguments,
                })?;
                Some(QueueStore {
                    journal: journal.clone(),
                    id,
                    offload: self.offload.clone(),
                })
            }
            (None, _) => None,
        };
        let q = Queue::with_store(
            name.to_owned(),
            &opts,
            alternate.map(|a| a as Arc<dyn AlternateExchange>),
            limits,
            self.memory.clone(),
            self.journal.clone(),
            store,
        );
        self.default_exchange
            .bind(&q, name, &Arguments::new())
            .map_err(|e| BrokerError::InvalidArgument(e.to_string()))?;
        reg.queues.insert(name.to_owned(), q.clone());
        if q.expires().is_some() {
            self.expiring.lock().push(Arc::downgrade(&q));
            self.expiry_changed.notify_one();
        }
        if q.is_dead_lettering() {
            q.watch_expiry(self.expiry_changed.clone());
            self.dead_lettering.lock().push(Arc::downgrade(&q));
        }
        Ok((q, true))
    }

    /// Deletes a queue. Its messages go to its alternate exchange if it has one, else are
    /// dropped; its consumers receive [`crate::OutboxItem::ConsumerCancelled`]. Returns how many
    /// messages it held.
    pub fn delete_queue(
        &self,
        name: &str,
        if_unused: bool,
        if_empty: bool,
        requester: OwnerId,
    ) -> Result<u64, BrokerError> {
        if name.is_empty() {
            return Err(BrokerError::InvalidArgument(
                "queue name must not be empty".into(),
            ));
        }
        let (q, drained) = {
            let mut reg = self.registry.write();
            let q = reg.queue(name)?.clone();
            let drained = q.drain_for_explicit_delete(if_unused, if_empty, requester)?;
            self.unlink_queue(&mut reg, &q);
            (q, drained)
        };
        Ok(finish_delete(&q, drained))
    }

    /// Removes a drained queue from the registry and from every exchange; auto-delete
    /// exchanges left without bindings go too.
    fn unlink_queue(&self, reg: &mut Registry, q: &Arc<Queue>) {
        if reg.queues.get(q.name()).is_some_and(|e| Arc::ptr_eq(e, q)) {
            reg.queues.remove(q.name());
        }
        if let Some(store) = q.store() {
            store.journal.delete_queue(store.id);
        }
        self.default_exchange.unbind(q.id(), q.name());
        q.release_quota();
        for (ex, key) in reg.bindings.remove(&q.id()).unwrap_or_default() {
            if let Some(ex) = ex.upgrade() {
                ex.unbind(q.id(), &key);
                self.auto_delete_exchange(reg, &ex);
            }
        }
    }

    fn auto_delete_exchange(&self, reg: &mut Registry, ex: &Arc<Exchange>) {
        if ex.auto_delete_due() && !ex.is_deleted() && reg.alternate_users(ex).is_none() {
            self.unlink_exchange(reg, ex);
        }
    }

    pub fn purge_queue(&self, name: &str) -> Result<u64, BrokerError> {
        let q = self.registry.read().queue(name)?.clone();
        Ok(q.purge())
    }

    /// Binds; idempotent for an existing (queue, exchange, key). Headers bindings need a valid
    /// `x-match` (`all`, the default, or `any`).
    pub fn bind(
        &self,
        queue: &str,
        exchange: &str,
        binding_key: &str,
        arguments: &Arguments,
    ) -> Result<(), BrokerError> {
        if exchange.is_empty() {
            return Err(BrokerError::NotAllowed(
                "the default exchange cannot be bound explicitly".into(),
            ));
        }
        let mut reg = self.registry.write();
        let ex = reg.exchange(exchange)?.clone();
        let q = reg.queue(queue)?.clone();
        self.record_binding(&ex, &q, binding_key, arguments)?;
        if ex.bind(&q, binding_key, arguments)? {
            reg.add_binding(&q, &ex, binding_key);
        }
        Ok(())
    }

    /// Journals a binding between a durable exchange and a durable queue.
    fn record_binding(
        &self,
        ex: &Exchange,
        q: &Queue,
        key: &str,
        arguments: &Arguments,
    ) -> Result<(), BrokerError> {
        match (q.store(), ex.is_durable()) {
            (Some(store), true) => store.journal.bind(ex.name(), store.id, key, arguments),
            _ => Ok(()),
        }
    }

    /// Recreates a binding the store recovered, without journaling it again.
    pub fn restore_binding(
        &self,
        queue: &str,
        exchange: &str,
        binding_key: &str,
        arguments: &Arguments,
    ) -> Result<(), BrokerError> {
        let mut reg = self.registry.write();
        let ex = reg.exchange(exchange)?.clone();
        let q = reg.queue(queue)?.clone();
        if ex.bind(&q, binding_key, arguments)? {
            reg.add_binding(&q, &ex, binding_key);
        }
        Ok(())
    }

    /// Binds exchange `destination` to exchange `source` (RabbitMQ's exchange.bind): what
    /// `source` routes under the binding goes on through `destination`'s bindings. Routing
    /// follows such bindings through any graph, cycles included, and delivers a message to
    /// each queue at most once per publish. The default exchange is neither a source nor a
    /// destination.
    pub fn bind_exchange(
        &self,
        destination: &str,
        source: &str,
        binding_key: &str,
        arguments: &Arguments,
    ) -> Result<(), BrokerError> {
        self.link_exchanges(destination, source, binding_key, arguments, true)
    }

    /// Recreates an exchange-to-exchange binding the store recovered, without journaling it
    /// again.
    pub fn restore_exchange_binding(
        &self,
        destination: &str,
        source: &str,
        binding_key: &str,
        arguments: &Arguments,
    ) -> Result<(), BrokerError> {
        self.link_exchanges(destination, source, binding_key, arguments, false)
    }

    fn link_exchanges(
        &self,
        destination: &str,
        source: &str,
        binding_key: &str,
        arguments: &Arguments,
        record: bool,
    ) -> Result<(), BrokerError> {
        if destination.is_empty() || source.is_empty() {
            return Err(BrokerError::NotAllowed(
                "the default exchange cannot be bound explicitly".into(),
            ));
        }
        let reg = self.registry.write();
        let src = reg.exchange(source)?;
        let dst = reg.exchange(destination)?;
        if let Some(journal) = self.journal_for(src, dst).filter(|_| record) {
            journal.bind_exchange(destination, source, binding_key, arguments)?;
        }
        if src.bind_exchange(dst, binding_key, arguments)? {
            dst.add_inbound(src, binding_key);
        }
        Ok(())
    }

    /// The journal, when a binding between these exchanges is durable (both are).
    fn journal_for(&self, source: &Exchange, destination: &Exchange) -> Option<&Arc<dyn Journal>> {
        self.journal
            .as_ref()
            .filter(|_| source.is_durable() && destination.is_durable())
    }

    /// Removes an exchange-to-exchange binding; a missing binding is not an error. A source
    /// left without bindings goes if it is auto-delete.
    pub fn unbind_exchange(
        &self,
        destination: &str,
        source: &str,
        binding_key: &str,
    ) -> Result<(), BrokerError> {
        if destination.is_empty() || source.is_empty() {
            return Err(BrokerError::NotAllowed(
                "the default exchange cannot be unbound".into(),
            ));
        }
        let mut reg = self.registry.write();
        let src = reg.exchange(source)?.clone();
        let dst = reg.exchange(destination)?.clone();
        if src.unbind_exchange(dst.id(), binding_key) {
            dst.remove_inbound(&src, binding_key);
            if let Some(journal) = self.journal_for(&src, &dst) {
                journal.unbind_exchange(destination, source, binding_key);
            }
            self.auto_delete_exchange(&mut reg, &src);
        }
        Ok(())
    }

    /// Unbinds; unbinding a binding that does not exist is not an error (qpidd).
    pub fn unbind(
        &self,
        queue: &str,
        exchange: &str,
        binding_key: &str,
    ) -> Result<(), BrokerError> {
        if exchange.is_empty() {
            return Err(BrokerError::NotAllowed(
                "the default exchange cannot be unbound".into(),
            ));
        }
        let mut reg = self.registry.write();
        let ex = reg.exchange(exchange)?.clone();
        let q = reg.queue(queue)?.clone();
        if ex.unbind(q.id(), binding_key) {
            reg.remove_binding(&q, &ex, binding_key);
            if let (Some(store), true) = (q.store(), ex.is_durable()) {
                store.journal.unbind(ex.name(), store.id, binding_key);
            }
            self.auto_delete_exchange(&mut reg, &ex);
        }
        Ok(())
    }

    /// 0-10 exchange.bound. Given criteria (`None` = not asked; empty arguments count as not
    /// asked) are first checked together; if no single binding satisfies them all, each
    /// criterion is reported separately, as qpidd does: the queue against any binding to it,
    /// the key and the arguments against any binding of the exchange.
    pub fn bound(
        &self,
        exchange: &str,
        queue: Option<&str>,
        binding_key: Option<&str>,
        arguments: Option<&Arguments>,
    ) -> BoundResult {
        let reg = self.registry.read();
        let q = queue.and_then(|n| reg.queues.get(n));
        let queue_not_found = queue.is_some() && q.is_none();
        let Some(ex) = reg.exchanges.get(exchange) else {
            return BoundResult {
                exchange_not_found: true,
                queue_not_found,
                ..BoundResult::default()
            };
        };
        if queue_not_found {
            return BoundResult {
                queue_not_found,
                ..BoundResult::default()
            };
        }
        let q = q.map(|q| &**q);
        let args = arguments.filter(|a| !a.is_empty());
        if ex.has_binding(q, binding_key, args) {
            return BoundResult::default();
        }
        BoundResult {
            queue_not_matched: q.is_some_and(|q| !ex.has_binding(Some(q), None, None)),
            key_not_matched: binding_key.is_some_and(|k| !ex.has_binding(None, Some(k), None)),
            args_not_matched: args.is_some_and(|a| !ex.has_binding(None, None, Some(a))),
            ..BoundResult::default()
        }
    }

    /// The session `owner` ended: its exclusive auto-delete queues are deleted (0-10: "MUST be
    /// deleted when the session closes"); its other exclusive queues stay but lose their owner
    /// (qpidd's behaviour; 0-10 only requires exclusivity until the declaring session closes).
    /// Consumers must be cancelled and unsettled deliveries released separately.
    pub fn release_owner(&self, owner: OwnerId) {
        let mut deleted: Vec<(Arc<Queue>, Drained)> = Vec::new();
        {
            let mut reg = self.registry.write();
            let doomed: Vec<Arc<Queue>> = reg
                .queues
                .values()
                .filter(|q| matches!(q.owner_gone(owner), OwnerGone::Delete))
                .cloned()
                .collect();
            for q in doomed {
                if let Ok(d) = q.drain_if(|_, _| Ok(())) {
                    self.unlink_queue(&mut reg, &q);
                    deleted.push((q, d));
                }
            }
        }
        for (q, d) in deleted {
            finish_delete(&q, d);
        }
    }

    /// Cancels a consumer; returns whether it existed. A non-exclusive auto-delete queue is
    /// deleted when its last consumer goes, if it ever had one (0-10 queue.declare
    /// auto-delete).
    pub fn cancel_consumer(&self, queue: &Arc<Queue>, consumer: ConsumerId) -> bool {
        let (removed, auto_delete) = queue.remove_consumer(consumer);
        if removed && queue.expires().is_some() {
            // Unused from now: its x-expires deadline starts.
            self.expiry_changed.notify_one();
        }
        if auto_delete {
            let drained = {
                let mut reg = self.registry.write();
                match queue.drain_if_auto_delete_due() {
                    Ok(d) => {
                        self.unlink_queue(&mut reg, queue);
                        Some(d)
                    }
                    Err(_) => None,
                }
            };
            if let Some(d) = drained {
                finish_delete(queue, d);
            }
        }
        removed
    }

    /// Deletes the `x-expires` queues that have been unused (no consumers, no basic.get, no
    /// redeclare) for their expiry time, as RabbitMQ does; their messages are dropped like
    /// those of any deleted RabbitMQ-style queue, their consumers (none) need no notice.
    /// Returns the earliest deadline still pending, in milliseconds since the epoch, for
    /// the caller to come back then.
    pub fn expire_unused_queues(&self) -> Option<u64> {
        let queues: Vec<Arc<Queue>> = {
            let mut list = self.expiring.lock();
            list.retain(|w| w.upgrade().is_some_and(|q| !q.is_deleted()));
            list.iter().filter_map(Weak::upgrade).collect()
        };
        let now = now_ms();
        let mut next: Option<u64> = None;
        for q in queues {
            match q.unused_deadline() {
                Some(at) if at <= now => {
                    let drained = {
                        let mut reg = self.registry.write();
                        match q.drain_if_expired(now) {
                            Ok(d) => {
                                self.unlink_queue(&mut reg, &q);
                                Some(d)
                            }
                            Err(_) => None,
                        }
                    };
                    match drained {
                        Some(d) => {
                            tracing::debug!(queue = q.name(), "x-expires: deleting unused queue");
                            finish_delete(&q, d);
                        }
                        // Used again meanwhile: look again at its new deadline.
                        None => next = Some(next.map_or(now, |n| n.min(now))),
                    }
                }
                Some(at) => next = Some(next.map_or(at, |n| n.min(at))),
                None => {}
            }
        }
        next
    }

    /// Resolves when an `x-expires` queue was declared or lost its last consumer, so a
    /// deadline earlier than the one [`Broker::expire_unused_queues`] last returned may
    /// exist, or when a dead-lettering queue took a message that will expire (see
    /// [`Broker::expire_heads`]). A change before the call is not lost (one stored permit).
    pub fn queue_expiry_changed(&self) -> Notified<'_> {
        self.expiry_changed.notified()
    }

    /// Dead-letters the expired messages at the heads of dead-lettering queues; returns
    /// whether any of them still holds messages that will expire, so the caller knows to
    /// come back soon (the full sweep of [`Broker::purge_expired`] is only periodic).
    pub fn expire_heads(&self) -> bool {
        let queues = self.dead_lettering_queues();
        let now = now_ms();
        let mut more = false;
        for q in &queues {
            // Every queue must be looked at: no short-circuit.
            more |= q.expire_head(now);
        }
        more
    }

    /// The live queues that dead-letter the RabbitMQ way; forgets deleted ones.
    fn dead_lettering_queues(&self) -> Vec<Arc<Queue>> {
        let mut list = self.dead_lettering.lock();
        list.retain(|w| w.upgrade().is_some_and(|q| !q.is_deleted()));
        list.iter().filter_map(Weak::upgrade).collect()
    }

    /// Drops expired messages from every queue; returns how many. Called periodically so
    /// memory stays bounded on queues nobody consumes from.
    pub fn purge_expired(&self) -> u64 {
        let queues: Vec<Arc<Queue>> = self.registry.read().queues.values().cloned().collect();
        let now = now_ms();
        queues.iter().map(|q| q.purge_expired(now)).sum()
    }

    /// Routes and enqueues. A message already expired is dropped (`queues: 0`). If some target
    /// queue refuses the message for its limit, the others still store it and the call returns
    /// `ResourceLimitExceeded` naming the first refusing queue, so the publisher learns of the
    /// loss even though delivery was partial.
    pub fn publish(
        &self,
        exchange: &Exchange,
        msg: Arc<Message>,
    ) -> Result<PublishOutcome, BrokerError> {
        if exchange.is_deleted() {
            return Err(BrokerError::NotFound(format!(
                "exchange {} was deleted",
                exchange.name()
            )));
        }
        if msg.expires_at.is_some_and(|at| at <= now_ms()) {
            return Ok(PublishOutcome {
                queues: 0,
                sync: None,
            });
        }
        route::deliver(exchange, &msg, self.journal.as_ref()).map(|r| PublishOutcome {
            queues: r.queues,
            sync: r.sync,
        })
    }

    /// A new, empty transaction whose staged publishes count in the broker's memory meter.
    pub fn transaction(&self) -> Transaction {
        Transaction::metered(self.memory.clone())
    }

    /// Commits a transaction: its settlements, then its publishes (routed now, in the order
    /// staged), applied with every queue involved locked at once, so a consumer never sees
    /// part of a commit without the rest; then a single dispatch per queue. Dead letters
    /// the commit causes (rejects, length-limit drops) are published after it. The
    /// transaction is left empty, ready for the next one.
    ///
    /// This is the one place a transaction takes effect: a durable store must make the
    /// commit's persistent enqueues and dequeues atomic in its journal here, before the
    /// effects become visible.
    pub fn commit(&self, tx: &mut Transaction) -> CommitOutcome {
        tx.apply(self.journal.as_ref())
    }
}
