//! Declaring, deleting and purging queues. A deletion drains the queue and unlinks it under
//! the registry lock, then tells its consumers and routes its messages to the alternate
//! exchange after releasing it (routing takes queue locks).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;

use super::registry::Registry;
use super::Broker;
use crate::error::BrokerError;
use crate::events::BrokerEvent;
use crate::exchange::{BindingIdentity, Exchange};
use crate::journal::QueueDefinition;
use crate::message::{now_ms, HeaderMatch, Message, TraceEdit};
use crate::queue::{
    dead_letter_exchange_name, AlternateExchange, Drained, Features, Queue, QueueOptions,
    QueueStore,
};
use crate::route;
use crate::value::Arguments;
use crate::OwnerId;

/// Whether a queue being created comes from the store (with its store id) or is new.
#[derive(Clone, Copy)]
pub(super) enum Restore {
    No,
    Yes(u64),
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

/// RabbitMQ: another owner's exclusive queue is locked to any declare; a differing
/// alternate exchange is not allowed; an exclusive declare claims an unowned queue.
fn redeclare_rabbitmq(
    q: &Queue,
    opts: &QueueOptions,
    passive: bool,
    requester: OwnerId,
) -> Result<(), BrokerError> {
    q.check_access(requester)?;
    if passive {
        return Ok(());
    }
    if let Some(alt) = opts.alternate_exchange.as_deref().filter(|a| !a.is_empty()) {
        if q.alternate_exchange_name() != Some(alt) {
            return Err(BrokerError::NotAllowed(format!(
                "queue {} exists with a different alternate exchange",
                q.name()
            )));
        }
    }
    match opts.exclusive_owner {
        Some(owner) => q.claim(owner, opts.connection, false),
        None => Ok(()),
    }
}

/// qpidd (`SessionAdapter::QueueHandlerImpl::declare`): a declare without `exclusive` never
/// checks ownership; an exclusive one must end with the requester owning the queue, which a
/// passive declare never claims.
fn redeclare_qpidd(
    q: &Queue,
    opts: &QueueOptions,
    passive: bool,
    requester: OwnerId,
) -> Result<(), BrokerError> {
    let Some(owner) = opts.exclusive_owner else {
        return Ok(());
    };
    let claimed = if passive {
        Err(())
    } else {
        q.claim(owner, opts.connection, true).map_err(|_| ())
    };
    match claimed {
        Ok(()) => Ok(()),
        Err(()) if q.owner() == Some(requester) => Ok(()),
        Err(()) => Err(BrokerError::ResourceLocked(format!(
            "Cannot grant exclusive access to queue {}",
            q.name()
        ))),
    }
}

/// Tells a deleted queue's consumers they are gone and sends the messages it held to its
/// alternate exchange; returns how many it held. Call outside the registry lock: routing
/// them takes queue locks.
impl Broker {
    /// Ends the deletion of a queue drained and unlinked: cancels its consumers, sends what
    /// it held on to its alternate exchange, and keeps its counters in the broker's totals.
    /// Returns how many messages it held.
    pub(super) fn finish_delete(&self, q: &Queue, drained: Drained) -> u64 {
        let (n, orphans) = q.finish_delete(drained);
        route::dead_letters(orphans);
        self.retired.lock().add(&q.depth().counters);
        n
    }

    /// What deleted queues counted, summed (see [`Broker::overview`]).
    pub fn retired_counters(&self) -> crate::QueueCounters {
        *self.retired.lock()
    }
}

/// Whose rules a queue declaration follows where qpidd's and RabbitMQ's differ: what a
/// declare of an existing queue checks. A protocol layer picks its broker's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Dialect {
    /// Any declare of a queue another owner holds exclusively, passive or not, is
    /// `ResourceLocked`; a differing alternate exchange is `NotAllowed`; an exclusive
    /// declare of an unowned queue claims it. (0-9-1 compares the rest itself.)
    #[default]
    RabbitMq,
    /// qpidd's `queue.declare`: only an exclusive declare is checked, passive or not; it
    /// is `ResourceLocked` unless the requester owns the queue or (not passive) may claim
    /// it: unowned and without consumers. A named alternate exchange must exist
    /// (`NotFound`) but is not compared with the queue's.
    Qpidd,
}

impl Broker {
    /// Declares (or, with `passive`, looks up) a queue on behalf of session `requester`,
    /// under [`Dialect::RabbitMq`]'s rules. Returns the queue and whether it was created.
    pub fn declare_queue(
        &self,
        name: &str,
        opts: QueueOptions,
        passive: bool,
        requester: OwnerId,
    ) -> Result<(Arc<Queue>, bool), BrokerError> {
        self.declare_queue_as(Dialect::RabbitMq, name, opts, passive, requester)
    }

    /// Declares (or, with `passive`, looks up) a queue on behalf of session `requester`;
    /// `dialect` says what a declare of an existing queue checks. Returns the queue and
    /// whether it was created. Durable and auto-delete of an existing queue are kept (both
    /// brokers: the protocol layer compares them if it must).
    pub fn declare_queue_as(
        &self,
        dialect: Dialect,
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
            match dialect {
                Dialect::RabbitMq => redeclare_rabbitmq(q, &opts, passive, requester)?,
                Dialect::Qpidd => {
                    if !passive {
                        // qpidd looks the alternate up before the queue.
                        reg.resolve_alternate(opts.alternate_exchange.as_deref())?;
                    }
                    redeclare_qpidd(q, &opts, passive, requester)?;
                }
            }
            q.touch();
            if !passive {
                q.redeclared();
                self.queue_declared(q, false, requester);
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
        let created = self.create_queue(&mut reg, name, opts, Restore::No)?;
        self.queue_declared(&created.0, true, requester);
        Ok(created)
    }

    fn queue_declared(&self, q: &Queue, created: bool, requester: OwnerId) {
        self.notify(|| BrokerEvent::QueueDeclared {
            name: q.name().to_owned(),
            durable: q.is_durable(),
            exclusive: q.is_exclusive(),
            auto_delete: q.is_auto_delete(),
            alternate_exchange: q.alternate_exchange_name().map(str::to_owned),
            arguments: q.arguments().clone(),
            created,
            requester,
        });
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

    pub(super) fn create_queue(
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
        if let Some(journal) = self
            .journal
            .as_ref()
            .filter(|j| j.replicates(&opts.arguments))
        {
            if !opts.durable || opts.exclusive_owner.is_some() {
                let _ = journal;
                return Err(BrokerError::PreconditionFailed(format!(
                    "queue {name}: a replicated queue must be durable and not exclusive"
                )));
            }
        }
        let store = match (&self.journal, restore) {
            _ if !opts.durable => None,
            (Some(journal), Restore::Yes(id)) => Some(QueueStore {
                journal: journal.clone(),
                id,
                offload: self.offload.clone(),
                all: journal.journals_all(id),
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
                    all: journal.journals_all(id),
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
            .bind(&q, name, &Arguments::new(), None, BindingIdentity::Key)
            .map_err(|e| BrokerError::InvalidArgument(e.to_string()))?;
        q.watch_thresholds(&self.observer);
        reg.queues.insert(name.to_owned(), q.clone());
        if q.has_deadlines() {
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
            self.unlink_queue(&mut reg, &q, Some(requester));
            (q, drained)
        };
        Ok(self.finish_delete(&q, drained))
    }

    /// Removes a drained queue from the registry and from every exchange; auto-delete
    /// exchanges left without bindings go too. `requester` deleted it explicitly; `None` for
    /// automatic deletions.
    pub(super) fn unlink_queue(
        &self,
        reg: &mut Registry,
        q: &Arc<Queue>,
        requester: Option<OwnerId>,
    ) {
        if reg.queues.get(q.name()).is_some_and(|e| Arc::ptr_eq(e, q)) {
            reg.queues.remove(q.name());
            self.notify(|| BrokerEvent::QueueDeleted {
                name: q.name().to_owned(),
                requester,
            });
        }
        if let Some(store) = q.store() {
            store.journal.delete_queue(store.id);
        }
        self.default_exchange.unbind(q.id(), q.name(), None);
        q.release_quota();
        for (ex, key) in reg.bindings.remove(&q.id()).unwrap_or_default() {
            if let Some(ex) = ex.upgrade() {
                ex.unbind(q.id(), &key, None);
                self.auto_delete_exchange(reg, &ex);
            }
        }
    }

    pub fn purge_queue(&self, name: &str) -> Result<u64, BrokerError> {
        let q = self.registry.read().queue(name)?.clone();
        Ok(q.purge())
    }

    /// Takes up to `max` messages (all with `None`) off the front of queue `name` and routes
    /// each, with its routing key, through exchange `exchange`, or the queue's alternate
    /// exchange with `None` (qpidd's management reroute). They count as rerouted. Returns
    /// how many were taken.
    pub fn reroute(
        &self,
        name: &str,
        max: Option<u64>,
        exchange: Option<&str>,
        filter: Option<&HeaderMatch>,
    ) -> Result<u64, BrokerError> {
        let q = self.registry.read().queue(name)?.clone();
        let target = match exchange.or(q.alternate_exchange_name()) {
            Some(e) => self
                .exchange(e)
                .ok_or_else(|| BrokerError::NotFound(format!("exchange {e} does not exist")))?,
            None => {
                return Err(BrokerError::NotFound(format!(
                    "queue {name} has no alternate exchange"
                )))
            }
        };
        Ok(self.route_taken(&q, max, &target, filter))
    }

    /// Moves up to `max` messages (all with `None`) from the front of queue `source` to
    /// queue `destination`, in order (qpidd's management queueMoveMessages). They count as
    /// rerouted in the source. Returns how many were moved.
    pub fn move_messages(
        &self,
        source: &str,
        destination: &str,
        max: Option<u64>,
        filter: Option<&HeaderMatch>,
    ) -> Result<u64, BrokerError> {
        let src = {
            let reg = self.registry.read();
            reg.queue(destination)?;
            reg.queue(source)?.clone()
        };
        // Through the default exchange, which routes to a queue by its name.
        let taken = src.take_front_for_reroute(max.unwrap_or(u64::MAX), filter);
        let n = taken.len() as u64;
        for m in taken {
            let copy =
                m.derive(|p| p.routing_key = Some(Bytes::copy_from_slice(destination.as_bytes())));
            self.route_copy(&self.default_exchange, copy, source);
        }
        Ok(n)
    }

    fn route_taken(
        &self,
        q: &Queue,
        max: Option<u64>,
        target: &Arc<Exchange>,
        filter: Option<&HeaderMatch>,
    ) -> u64 {
        let taken = q.take_front_for_reroute(max.unwrap_or(u64::MAX), filter);
        let n = taken.len() as u64;
        for m in taken {
            // A copy: a new message for the store, journaled afresh for durable targets
            // (the source's journal has let go of the original). Its trace starts afresh,
            // as qpidd's reroute clears it: tracing queues it passed may see it again.
            let copy = m.derive(|p| p.trace = Some(Arc::new(TraceEdit::cleared())));
            self.route_copy(target, copy, q.name());
        }
        n
    }

    fn route_copy(&self, target: &Exchange, m: Message, from: &str) {
        if let Err(e) = route::deliver_except(target, &m, self.journal.as_ref(), None) {
            tracing::debug!(queue = from, error = %e, "a rerouted message was refused");
        }
    }
}
