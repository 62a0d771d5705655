//! The core's view of a durable store.
//!
//! The core does no I/O: it tells a [`Journal`] what changed in durable state at the moment it
//! changes (declares, deletes, bindings, persistent messages entering and leaving durable
//! queues), and protocol layers ask it when a change is on stable storage. A broker without a
//! journal (memory only) makes none of these calls, and transient messages or non-durable
//! queues never reach the journal even when there is one.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::error::BrokerError;
use crate::exchange_kind::BindingIdentity;
use crate::exchange_kind::ExchangeKind;
use crate::limits::QueueLimits;
use crate::value::Arguments;

/// A point in the journal's write order. Everything appended up to it is on stable storage
/// once [`Journal::durable`] has reached it. Points only grow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct SyncPoint(pub u64);

/// A durable exchange as the store keeps it.
#[derive(Debug, Clone, Copy)]
pub struct ExchangeDefinition<'a> {
    pub name: &'a str,
    pub kind: ExchangeKind,
    pub auto_delete: bool,
    pub alternate_exchange: Option<&'a str>,
    pub arguments: &'a Arguments,
    pub internal: bool,
}

/// A durable queue as the store keeps it. Exclusivity is not kept: it belongs to a session,
/// which does not outlive the broker (qpidd recovers such queues unowned too).
#[derive(Debug, Clone, Copy)]
pub struct QueueDefinition<'a> {
    pub name: &'a str,
    pub auto_delete: bool,
    pub alternate_exchange: Option<&'a str>,
    /// As declared (protocol layers derive them from arguments in their own ways).
    pub limits: QueueLimits,
    pub arguments: &'a Arguments,
}

/// Where durable state goes. Implementations must be cheap to call: `enqueue` and `dequeue`
/// run on publish and settle paths (the latter under a queue's lock), so they only append to a
/// buffer that another thread writes and syncs.
///
/// Identifiers (`u64`) are the store's: a durable queue's id is what `declare_queue` returned;
/// a message's id is what `enqueue` returned.
pub trait Journal: Send + Sync {
    fn declare_exchange(&self, exchange: &ExchangeDefinition) -> Result<(), BrokerError>;
    fn delete_exchange(&self, name: &str);
    /// Records a durable queue; returns its store id.
    fn declare_queue(&self, queue: &QueueDefinition) -> Result<u64, BrokerError>;
    /// The queue is gone, with every message reference it held.
    fn delete_queue(&self, queue: u64);
    /// A binding between a durable exchange (by name; built-in ones included) and a durable
    /// queue. Binding the same (exchange, queue, key) again replaces the arguments under
    /// [`BindingIdentity::Key`], and adds a binding beside the key's others (unless one has
    /// the same arguments) under [`BindingIdentity::KeyAndArguments`].
    fn bind(
        &self,
        exchange: &str,
        queue: u64,
        key: &str,
        arguments: &Arguments,
        identity: BindingIdentity,
    ) -> Result<(), BrokerError>;
    /// Removes the bindings under (exchange, queue, key): all of them, or with `only` the
    /// one with those arguments.
    fn unbind(&self, exchange: &str, queue: u64, key: &str, only: Option<&Arguments>);
    /// An exchange-to-exchange binding between two durable exchanges (built-in ones
    /// included): what `source` routes under `key` goes on through `destination`. Its
    /// identity is always [`BindingIdentity::KeyAndArguments`]: it joins the others under
    /// (destination, source, key) unless one has the same arguments.
    fn bind_exchange(
        &self,
        destination: &str,
        source: &str,
        key: &str,
        arguments: &Arguments,
    ) -> Result<(), BrokerError>;
    /// Removes the exchange-to-exchange bindings under (destination, source, key): all of
    /// them, or with `only` the one with those arguments.
    fn unbind_exchange(&self, destination: &str, source: &str, key: &str, only: Option<&Arguments>);
    /// Records a persistent message once, referenced by each of `queues`. Refused (with
    /// `ResourceLimitExceeded`) when the store cannot take more: full disk, failed device.
    /// Inside a transaction's commit, `tx` groups it with the commit's other records.
    fn enqueue(
        &self,
        message: &crate::message::Message,
        queues: &[u64],
        tx: Option<&JournalTx>,
    ) -> Result<(u64, SyncPoint), BrokerError>;
    /// The messages left `queue` for good (settled, purged, expired, dropped, dead-lettered).
    fn dequeue(&self, queue: u64, messages: &[u64], tx: Option<&JournalTx>);
    /// Messages came back to `queue` after a delivery: (message, times so far) for each.
    /// Called only for queues that tell consumers the count (quorum queues, and queues with
    /// a delivery limit, which judges a message by it; RabbitMQ's quorum queues keep it
    /// too). A journal that keeps no counts ignores it: the count then starts again from 0
    /// where the journal's messages are restored.
    fn returned(&self, _queue: u64, _returns: &[(u64, u32)]) {}
    /// Closes a transaction's records: after a crash they all count if this commit reached
    /// the disk, none if it did not. Returns the point the whole commit is durable at, or
    /// `None` if the transaction journaled nothing. Never refused: what it closes is
    /// already applied in memory.
    fn commit_tx(&self, tx: &JournalTx) -> Option<SyncPoint>;
    /// Prepares a distributed transaction's branch (`branch`: its name and what else
    /// recovery needs, encoded by the core): its records so far stay in doubt across
    /// restarts until [`Journal::commit_tx`] or [`Journal::abort_tx`]. Returns the point the
    /// prepare is durable at; `None` from a journal that keeps no prepares (its prepared
    /// branches end with the broker). Refused when the store cannot take more.
    fn prepare_tx(
        &self,
        _tx: &JournalTx,
        _branch: &[u8],
    ) -> Result<Option<SyncPoint>, BrokerError> {
        Ok(None)
    }
    /// Ends a transaction without its effects: its messages are let go of, its dequeues
    /// never happen.
    fn abort_tx(&self, _tx: &JournalTx) {}
    /// Whether a prepared transaction can still commit all it journaled. A cluster's journal
    /// holds a transaction's replicated part until the commit, and loses it when this node's
    /// leadership ends: the branch must then be rolled back rather than half committed.
    fn can_commit(&self, _tx: &JournalTx) -> bool {
        true
    }
    /// Whether part of the transaction's journaled work is held in this process until its
    /// commit (a cluster's replicated part), where a restart would lose it.
    fn holds_until_commit(&self, _tx: &JournalTx) -> bool {
        false
    }
    /// Reads messages back for a queue that kept only their stand-ins in memory (flow to
    /// disk): for each id, the message as journaled (with its store id set), or `None` if
    /// the store no longer holds it. May read the disk; callers batch. Parts, not a
    /// message: the queue adds what it kept beside the stand-in before building it.
    fn load(&self, messages: &[u64]) -> Vec<Option<crate::message::MessageParts>>;
    /// The latest point appended so far: what a command that just changed durable state must
    /// wait for.
    fn appended(&self) -> SyncPoint;
    /// Everything up to this point is on stable storage.
    fn durable(&self) -> SyncPoint;
    /// The device failed: points beyond [`Journal::durable`] will never become durable.
    fn is_failed(&self) -> bool;
    /// Wakes `waiter` once `point` is durable (or the journal failed), at once if it already
    /// is. Each registration wakes its waiter once.
    fn notify_when_durable(&self, point: SyncPoint, waiter: Arc<dyn DurableWaiter>);
    /// Whether a queue declared with `arguments` is one this journal replicates (a
    /// cluster's replicated queues): such a queue must be durable, not exclusive.
    fn replicates(&self, _arguments: &Arguments) -> bool {
        false
    }
    /// Whether every message for durable queue `queue` is journaled, persistent or not
    /// (a replicated queue keeps all its messages on a majority).
    fn journals_all(&self, _queue: u64) -> bool {
        false
    }
    /// Figures for management; a journal that keeps none reports zeros.
    fn stats(&self) -> JournalStats {
        JournalStats::default()
    }
}

/// What a journal reports to management.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JournalStats {
    /// Segment files, and the bytes they take on disk.
    pub segments: u64,
    pub disk_bytes: u64,
    /// Bytes of records still needed (the rest is reclaimable).
    pub live_bytes: u64,
    /// Records appended and syncs (fdatasync) made since the start: records per sync is
    /// the group commit's size.
    pub records: u64,
    pub syncs: u64,
    /// Sync points appended and made durable so far.
    pub appended: u64,
    pub durable: u64,
    pub failed: bool,
}

/// Waits for a sync point through [`Journal::notify_when_durable`]. A connection's
/// [`crate::Outbox`] is one: woken, it queues [`crate::OutboxItem::Durable`] for its writer,
/// which then sends the completions or confirms that waited for the point. A trait, not the
/// outbox itself, because outboxes carry deliveries from queues, a layer above the journal.
pub trait DurableWaiter: Send + Sync {
    fn wake(&self);
}

/// One transaction commit's records in the journal. The store names the transaction when
/// it writes its first record (0 until then), so a commit that touches nothing durable
/// writes nothing at all.
#[derive(Debug)]
pub struct JournalTx {
    name: AtomicU64,
    serial: u64,
}

/// Serials of [`JournalTx`]s, unique within the process.
static NEXT_TX_SERIAL: AtomicU64 = AtomicU64::new(1);

impl Default for JournalTx {
    fn default() -> JournalTx {
        JournalTx::named(0)
    }
}

impl JournalTx {
    /// A transaction the store named already (one recovered in doubt).
    pub fn named(id: u64) -> JournalTx {
        JournalTx {
            name: AtomicU64::new(id),
            serial: NEXT_TX_SERIAL.fetch_add(1, Ordering::Relaxed),
        }
    }

    /// Unique among this process's transactions, named or not: for a journal that holds a
    /// transaction's work aside until it ends (the store's name comes too late for that, and
    /// is the store's to choose).
    pub fn serial(&self) -> u64 {
        self.serial
    }

    /// The store's name for the transaction, once it has written a record of it.
    pub fn id(&self) -> Option<u64> {
        match self.name.load(Ordering::Acquire) {
            0 => None,
            id => Some(id),
        }
    }

    /// The transaction's name: `first` (non-zero, unique) unless it already has one.
    pub fn get_or_set(&self, first: u64) -> u64 {
        match self
            .name
            .compare_exchange(0, first, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => first,
            Err(existing) => existing,
        }
    }
}

#[cfg(test)]
pub(crate) mod testing {
    //! A journal that records calls in memory, for the core's tests.

    use super::*;
    use parking_lot::Mutex;

    #[derive(Debug, Clone, PartialEq)]
    pub enum Call {
        DeclareExchange(String),
        DeleteExchange(String),
        DeclareQueue(String, u64),
        DeleteQueue(u64),
        /// (exchange, queue, key, arguments)
        Bind(String, u64, String, Arguments),
        /// A bind under [`BindingIdentity::KeyAndArguments`].
        BindVariant(String, u64, String, Arguments),
        Unbind(String, u64, String),
        /// An unbind of the one binding with the arguments given.
        UnbindOne(String, u64, String, Arguments),
        /// (destination, source, key, arguments)
        BindExchange(String, String, String, Arguments),
        UnbindExchange(String, String, String),
        UnbindExchangeOne(String, String, String, Arguments),
        Enqueue(u64, Vec<u64>),
        Dequeue(u64, Vec<u64>),
        /// (queue, message, returns)
        Returned(u64, u64, u32),
        /// A record inside a transaction's commit (its id, then the record).
        InTx(u64, Box<Call>),
        CommitTx(u64),
        /// (transaction, the branch as encoded)
        PrepareTx(u64, Vec<u8>),
        AbortTx(u64),
    }

    #[derive(Default)]
    pub struct MemoryJournal {
        pub calls: Mutex<Vec<Call>>,
        /// What `load` reads back: every message enqueued, by id.
        pub contents: Mutex<std::collections::HashMap<u64, crate::message::MessageParts>>,
        /// Ids `load` was asked for, one entry per call.
        pub loads: Mutex<Vec<Vec<u64>>>,
        next: AtomicU64,
        pub refuse: std::sync::atomic::AtomicBool,
        /// What `can_commit` answers, negated.
        pub lost_prepared: std::sync::atomic::AtomicBool,
        /// What `holds_until_commit` answers.
        pub holds: std::sync::atomic::AtomicBool,
    }

    impl MemoryJournal {
        pub fn new() -> Arc<MemoryJournal> {
            Arc::new(MemoryJournal::default())
        }

        pub fn take(&self) -> Vec<Call> {
            std::mem::take(&mut *self.calls.lock())
        }

        fn id(&self) -> u64 {
            self.next.fetch_add(1, Ordering::Relaxed) + 1
        }

        /// Records `call`, tagged with its transaction (named after `first` if it is the
        /// transaction's first record).
        fn push(&self, call: Call, tx: Option<&JournalTx>, first: u64) {
            let call = match tx {
                Some(tx) => Call::InTx(tx.get_or_set(first), Box::new(call)),
                None => call,
            };
            self.calls.lock().push(call);
        }

        fn check(&self) -> Result<(), BrokerError> {
            if self.refuse.load(Ordering::Relaxed) {
                Err(BrokerError::ResourceLimitExceeded("store full".into()))
            } else {
                Ok(())
            }
        }
    }

    impl Journal for MemoryJournal {
        fn declare_exchange(&self, e: &ExchangeDefinition) -> Result<(), BrokerError> {
            self.check()?;
            self.calls.lock().push(Call::DeclareExchange(e.name.into()));
            Ok(())
        }
        fn delete_exchange(&self, name: &str) {
            self.calls.lock().push(Call::DeleteExchange(name.into()));
        }
        fn declare_queue(&self, q: &QueueDefinition) -> Result<u64, BrokerError> {
            self.check()?;
            let id = self.id();
            self.calls
                .lock()
                .push(Call::DeclareQueue(q.name.into(), id));
            Ok(id)
        }
        fn delete_queue(&self, queue: u64) {
            self.calls.lock().push(Call::DeleteQueue(queue));
        }
        fn bind(
            &self,
            e: &str,
            q: u64,
            k: &str,
            a: &Arguments,
            identity: BindingIdentity,
        ) -> Result<(), BrokerError> {
            self.check()?;
            let call = match identity {
                BindingIdentity::Key => Call::Bind(e.into(), q, k.into(), a.clone()),
                BindingIdentity::KeyAndArguments => {
                    Call::BindVariant(e.into(), q, k.into(), a.clone())
                }
            };
            self.calls.lock().push(call);
            Ok(())
        }
        fn unbind(&self, e: &str, q: u64, k: &str, only: Option<&Arguments>) {
            let call = match only {
                None => Call::Unbind(e.into(), q, k.into()),
                Some(only) => Call::UnbindOne(e.into(), q, k.into(), only.clone()),
            };
            self.calls.lock().push(call);
        }
        fn bind_exchange(
            &self,
            d: &str,
            s: &str,
            k: &str,
            a: &Arguments,
        ) -> Result<(), BrokerError> {
            self.check()?;
            let call = Call::BindExchange(d.into(), s.into(), k.into(), a.clone());
            self.calls.lock().push(call);
            Ok(())
        }
        fn unbind_exchange(&self, d: &str, s: &str, k: &str, only: Option<&Arguments>) {
            let call = match only {
                None => Call::UnbindExchange(d.into(), s.into(), k.into()),
                Some(only) => Call::UnbindExchangeOne(d.into(), s.into(), k.into(), only.clone()),
            };
            self.calls.lock().push(call);
        }
        fn enqueue(
            &self,
            message: &crate::message::Message,
            queues: &[u64],
            tx: Option<&JournalTx>,
        ) -> Result<(u64, SyncPoint), BrokerError> {
            self.check()?;
            let id = self.id();
            self.push(Call::Enqueue(id, queues.to_vec()), tx, id);
            let mut copy = message.to_parts();
            copy.store_id = Some(id);
            self.contents.lock().insert(id, copy);
            Ok((id, SyncPoint(id)))
        }
        fn dequeue(&self, queue: u64, messages: &[u64], tx: Option<&JournalTx>) {
            let first = match tx {
                Some(t) if t.id().is_none() => self.id(),
                _ => 0,
            };
            self.push(Call::Dequeue(queue, messages.to_vec()), tx, first);
        }
        fn returned(&self, queue: u64, returns: &[(u64, u32)]) {
            let mut calls = self.calls.lock();
            for (message, n) in returns {
                calls.push(Call::Returned(queue, *message, *n));
            }
        }
        fn commit_tx(&self, tx: &JournalTx) -> Option<SyncPoint> {
            let id = tx.id()?;
            self.calls.lock().push(Call::CommitTx(id));
            Some(SyncPoint(self.id()))
        }
        fn prepare_tx(
            &self,
            tx: &JournalTx,
            branch: &[u8],
        ) -> Result<Option<SyncPoint>, BrokerError> {
            self.check()?;
            let first = self.id();
            let id = tx.get_or_set(first);
            self.calls.lock().push(Call::PrepareTx(id, branch.to_vec()));
            Ok(Some(SyncPoint(first)))
        }
        fn abort_tx(&self, tx: &JournalTx) {
            if let Some(id) = tx.id() {
                self.calls.lock().push(Call::AbortTx(id));
            }
        }
        fn can_commit(&self, _: &JournalTx) -> bool {
            !self.lost_prepared.load(Ordering::Relaxed)
        }
        fn holds_until_commit(&self, _: &JournalTx) -> bool {
            self.holds.load(Ordering::Relaxed)
        }
        fn load(&self, ids: &[u64]) -> Vec<Option<crate::message::MessageParts>> {
            self.loads.lock().push(ids.to_vec());
            let contents = self.contents.lock();
            ids.iter().map(|id| contents.get(id).cloned()).collect()
        }
        fn appended(&self) -> SyncPoint {
            SyncPoint(self.next.load(Ordering::Relaxed))
        }
        fn durable(&self) -> SyncPoint {
            SyncPoint(0)
        }
        fn is_failed(&self) -> bool {
            false
        }
        fn notify_when_durable(&self, _: SyncPoint, _: Arc<dyn DurableWaiter>) {}
    }
}
