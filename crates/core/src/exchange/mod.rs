//! Exchanges and their bindings.

mod headers;
mod selective;
#[cfg(test)]
mod tests;
mod topic;

use std::any::Any;
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};

use parking_lot::{Mutex, RwLock};

use crate::error::BrokerError;
pub use crate::exchange_kind::BindingIdentity;
use crate::exchange_kind::ExchangeKind;
use crate::message::{Message, MessageFilter};
use crate::queue::{AlternateExchange, Queue};
use crate::stats::ExchangeCounters;
use crate::value::Arguments;
use headers::HeadersBinding;
use selective::Selective;
use topic::TopicTrie;

#[derive(Debug, Clone, Default)]
pub struct ExchangeOptions {
    pub durable: bool,
    /// Deleted once its last binding goes (after it had at least one).
    pub auto_delete: bool,
    pub alternate_exchange: Option<String>,
    pub arguments: Arguments,
    /// RabbitMQ's internal exchange: clients may not publish to it; it is reached only
    /// through exchange-to-exchange bindings (each protocol layer checks this on publish).
    pub internal: bool,
}

/// Answer data for exchange.query.
#[derive(Debug, Clone, PartialEq)]
pub struct ExchangeInfo {
    pub name: String,
    pub kind: ExchangeKind,
    pub durable: bool,
    pub auto_delete: bool,
    pub alternate_exchange: Option<String>,
    pub arguments: Arguments,
    pub internal: bool,
}

/// One binding, for management.
#[derive(Debug, Clone, PartialEq)]
pub struct BindingStatus {
    pub source: String,
    /// A queue's name, or with `to_exchange` an exchange's.
    pub destination: String,
    pub to_exchange: bool,
    pub key: String,
    pub arguments: Arguments,
}

/// What a bind did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Bound {
    /// The first binding under (destination, key).
    NewKey,
    /// Another binding under a key already bound, with other arguments.
    NewVariant,
    /// The key's binding, with the new arguments ([`BindingIdentity::Key`]).
    Replaced,
    /// The same binding again ([`BindingIdentity::KeyAndArguments`]).
    Unchanged,
}

impl Bound {
    /// Whether a binding that was not there before is.
    pub(crate) fn added(self) -> bool {
        matches!(self, Bound::NewKey | Bound::NewVariant)
    }
}

/// What a binding delivers to: a queue, or (exchange-to-exchange) another exchange.
pub(crate) trait Destination: Clone + fmt::Debug {
    /// Unique among destinations of the same type.
    fn dest_id(&self) -> u64;
    /// Whether messages routed here need their application headers decoded.
    fn needs_headers(&self) -> bool;
}

impl Destination for Arc<Queue> {
    fn dest_id(&self) -> u64 {
        self.id()
    }

    fn needs_headers(&self) -> bool {
        Queue::needs_headers(self)
    }
}

impl Destination for Arc<Exchange> {
    fn dest_id(&self) -> u64 {
        self.id
    }

    /// Whatever is bound further on may match on headers (or be a last-value queue), and
    /// what an exchange needs may change after it was bound: forward headers always.
    fn needs_headers(&self) -> bool {
        true
    }
}

/// Per-type routing index, kept beside the full binding list so routing never scans bindings
/// (except headers, which is inherently a scan).
#[derive(Debug)]
enum Index<T> {
    /// foldhash, not SipHash: hashing the routing key was a tenth of a transient message's
    /// cost, and the keys are bindings a client needs bind rights to create, hashed with a
    /// per-process random seed.
    Direct(HashMap<Vec<u8>, Vec<T>, foldhash::fast::RandomState>),
    /// Unique destinations, with a count of bindings per destination id (one may be bound
    /// under several keys but must receive each message once).
    Fanout(Vec<T>, HashMap<u64, usize>),
    Topic(TopicTrie<T>),
    Headers(Vec<HeadersBinding<T>>),
}

impl<T: Destination> Index<T> {
    fn empty(kind: ExchangeKind) -> Index<T> {
        match kind {
            ExchangeKind::Direct => Index::Direct(HashMap::default()),
            ExchangeKind::Fanout => Index::Fanout(Vec::new(), HashMap::new()),
            ExchangeKind::Topic => Index::Topic(TopicTrie::default()),
            ExchangeKind::Headers => Index::Headers(Vec::new()),
        }
    }

    fn insert(&mut self, dest: &T, key: &str, headers_binding: Option<HeadersBinding<T>>) {
        match self {
            Index::Direct(map) => map
                .entry(key.as_bytes().to_vec())
                .or_default()
                .push(dest.clone()),
            Index::Fanout(all, refs) => {
                let n = refs.entry(dest.dest_id()).or_insert(0);
                if *n == 0 {
                    all.push(dest.clone());
                }
                *n += 1;
            }
            Index::Topic(trie) => trie.insert(key, dest.clone()),
            Index::Headers(list) => list.extend(headers_binding),
        }
    }

    fn remove(&mut self, id: u64, key: &str) {
        match self {
            Index::Direct(map) => {
                if let Some(all) = map.get_mut(key.as_bytes()) {
                    all.retain(|d| d.dest_id() != id);
                    if all.is_empty() {
                        map.remove(key.as_bytes());
                    }
                }
            }
            Index::Fanout(all, refs) => {
                if let Some(n) = refs.get_mut(&id) {
                    *n -= 1;
                    if *n == 0 {
                        refs.remove(&id);
                        all.retain(|d| d.dest_id() != id);
                    }
                }
            }
            Index::Topic(trie) => {
                trie.remove(key, id);
            }
            Index::Headers(list) => list.retain(|b| !(b.queue.dest_id() == id && b.key == key)),
        }
    }

    fn route(&self, msg: &Message, out: &mut Vec<T>) {
        match self {
            Index::Direct(map) => {
                if let Some(all) = map.get(msg.routing_key()) {
                    out.extend(all.iter().cloned());
                }
            }
            Index::Fanout(all, _) => out.extend(all.iter().cloned()),
            Index::Topic(trie) => {
                let start = out.len();
                trie.route(msg.routing_key(), out);
                dedup_tail(out, start);
            }
            Index::Headers(list) => {
                let start = out.len();
                let headers = msg.headers().map(|h| &**h);
                out.extend(
                    list.iter()
                        .filter(|b| b.matches(headers))
                        .map(|b| b.queue.clone()),
                );
                dedup_tail(out, start);
            }
        }
    }
}

/// The bindings of one exchange to one type of destination, by (destination, key); each
/// entry holds the arguments of every binding under that key (one, unless bound with
/// [`BindingIdentity::KeyAndArguments`]).
#[derive(Debug)]
struct Bindings<T> {
    /// Ordered, so that one destination's bindings are a range. Never an empty list.
    records: BTreeMap<(u64, String), (T, Vec<Arguments>)>,
    index: Index<T>,
}

impl<T: Destination> Bindings<T> {
    fn new(kind: ExchangeKind) -> Bindings<T> {
        Bindings {
            records: BTreeMap::new(),
            index: Index::empty(kind),
        }
    }

    /// Whether binding `dest` under `key` with these arguments would change nothing:
    /// under [`BindingIdentity::KeyAndArguments`] a binding with them (compared as sets of
    /// entries, as `bind` compares them) is there; under [`BindingIdentity::Key`], which
    /// replaces every binding under the key with these arguments as they are, it is the only
    /// one and has them entry for entry in the same order (a name given twice reads as its
    /// first, so the order of equal sets can still matter).
    fn bind_changes_nothing(
        &self,
        dest_id: u64,
        key: &str,
        args: &Arguments,
        identity: BindingIdentity,
    ) -> bool {
        let Some((_, variants)) = self.records.get(&(dest_id, key.to_owned())) else {
            return false;
        };
        match identity {
            BindingIdentity::KeyAndArguments => variants.iter().any(|a| a.same_entries(args)),
            BindingIdentity::Key => matches!(&variants[..], [only] if only.same_in_order(args)),
        }
    }

    /// Adds a binding. Under [`BindingIdentity::Key`], rebinding replaces the key's
    /// arguments: a headers binding's match criteria, a selector (see `selective`), and what
    /// management shows, as the store keeps the last arguments too.
    fn bind(
        &mut self,
        kind: ExchangeKind,
        dest: &T,
        key: &str,
        args: &Arguments,
        identity: BindingIdentity,
    ) -> Result<Bound, BrokerError> {
        check_binding(kind, key)?;
        let headers_binding = match kind {
            ExchangeKind::Headers => Some(HeadersBinding::new(dest.clone(), key, args)?),
            _ => None,
        };
        let id = (dest.dest_id(), key.to_owned());
        let Some((_, variants)) = self.records.get_mut(&id) else {
            self.index.insert(dest, key, headers_binding);
            self.records.insert(id, (dest.clone(), vec![args.clone()]));
            return Ok(Bound::NewKey);
        };
        let bound = match identity {
            BindingIdentity::Key => {
                *variants = vec![args.clone()];
                Bound::Replaced
            }
            BindingIdentity::KeyAndArguments if variants.iter().any(|a| a.same_entries(args)) => {
                return Ok(Bound::Unchanged)
            }
            BindingIdentity::KeyAndArguments => {
                variants.push(args.clone());
                Bound::NewVariant
            }
        };
        if let Index::Headers(list) = &mut self.index {
            rebuild_headers(list, dest, key, variants);
        }
        Ok(bound)
    }

    /// Removes the bindings under (destination, key): all of them, or with `only` the one
    /// with those arguments. Returns the destination and whether the key has none left;
    /// `None` if nothing was removed.
    fn unbind(&mut self, id: u64, key: &str, only: Option<&Arguments>) -> Option<(T, bool)> {
        let rid = (id, key.to_owned());
        let (dest, variants) = self.records.get_mut(&rid)?;
        let before = variants.len();
        match only {
            None => variants.clear(),
            Some(args) => variants.retain(|a| !a.same_entries(args)),
        }
        if variants.len() == before {
            return None;
        }
        let dest = dest.clone();
        if variants.is_empty() {
            self.records.remove(&rid);
            self.index.remove(id, key);
            return Some((dest, true));
        }
        if let Index::Headers(list) = &mut self.index {
            rebuild_headers(list, &dest, key, variants);
        }
        Some((dest, false))
    }

    fn clear(&mut self, kind: ExchangeKind) -> Vec<(T, String)> {
        self.index = Index::empty(kind);
        std::mem::take(&mut self.records)
            .into_iter()
            .map(|((_, key), (dest, _))| (dest, key))
            .collect()
    }

    /// Every binding: (destination, key, arguments).
    fn each(&self) -> impl Iterator<Item = (&T, &str, &Arguments)> {
        self.records
            .iter()
            .flat_map(|((_, key), (dest, variants))| {
                variants.iter().map(move |a| (dest, key.as_str(), a))
            })
    }

    fn len(&self) -> usize {
        self.records
            .values()
            .map(|(_, variants)| variants.len())
            .sum()
    }
}

/// What refuses a binding before it is made: a topic key too long for the trie (a headers
/// binding's arguments are checked by [`HeadersBinding::new`]).
fn check_binding(kind: ExchangeKind, key: &str) -> Result<(), BrokerError> {
    if kind == ExchangeKind::Topic && topic::pattern_words(key) > topic::MAX_PATTERN_WORDS {
        return Err(BrokerError::InvalidArgument(format!(
            "binding key has more than {} words",
            topic::MAX_PATTERN_WORDS
        )));
    }
    Ok(())
}

/// Replaces a headers exchange's matchers for (destination, key) with one per binding under
/// the key. Each was accepted when it was bound.
fn rebuild_headers<T: Destination>(
    list: &mut Vec<HeadersBinding<T>>,
    dest: &T,
    key: &str,
    variants: &[Arguments],
) {
    let id = dest.dest_id();
    list.retain(|b| !(b.queue.dest_id() == id && b.key == key));
    list.extend(
        variants
            .iter()
            .filter_map(|a| HeadersBinding::new(dest.clone(), key, a).ok()),
    );
}

#[derive(Debug)]
struct Table {
    queues: Bindings<Arc<Queue>>,
    /// Exchange-to-exchange bindings, where this exchange is the source; boxed and absent
    /// until the first, so ordinary routing pays one null check for the feature.
    exchanges: Option<Box<Bindings<Arc<Exchange>>>>,
    /// Queues' bindings with a filter; absent until the first, as `exchanges` is.
    selective: Option<Box<Selective>>,
    ever_bound: bool,
}

impl Table {
    fn len(&self) -> usize {
        self.queues.len() + self.exchanges.as_ref().map_or(0, |e| e.len())
    }

    /// Appends the queues the message reaches here, less those whose filtered bindings
    /// all reject it.
    #[inline]
    fn route_queues(&self, kind: ExchangeKind, msg: &Message, out: &mut Vec<Arc<Queue>>) {
        let start = out.len();
        self.queues.index.route(msg, out);
        if let Some(selective) = &self.selective {
            selective.apply(kind, msg, out, start);
        }
    }
}

/// Unique across the process, so exchange-to-exchange bindings can key exchanges by number.
static NEXT_EXCHANGE_ID: AtomicU64 = AtomicU64::new(1);

pub struct Exchange {
    name: String,
    id: u64,
    kind: ExchangeKind,
    durable: bool,
    auto_delete: bool,
    internal: bool,
    builtin: bool,
    alternate: Option<Arc<Exchange>>,
    arguments: Arguments,
    table: RwLock<Table>,
    /// Bindings to destinations that need decoded application headers (see
    /// [`Exchange::needs_headers`]); read on every publish, so kept outside the lock.
    header_dependents: AtomicUsize,
    /// Exchange-to-exchange bindings where this exchange is the destination (source, key),
    /// so deleting it can remove them. Weak: the source's bindings own this exchange.
    inbound: Mutex<Vec<(Weak<Exchange>, String)>>,
    deleted: AtomicBool,
    counters: ExchangeCounters,
}

impl fmt::Debug for Exchange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Exchange")
            .field("name", &self.name)
            .field("kind", &self.kind)
            .finish_non_exhaustive()
    }
}

impl Exchange {
    pub(crate) fn new(
        name: String,
        kind: ExchangeKind,
        opts: &ExchangeOptions,
        alternate: Option<Arc<Exchange>>,
        builtin: bool,
    ) -> Arc<Exchange> {
        Arc::new(Exchange {
            name,
            id: NEXT_EXCHANGE_ID.fetch_add(1, Ordering::Relaxed),
            kind,
            durable: opts.durable,
            auto_delete: opts.auto_delete,
            internal: opts.internal,
            builtin,
            alternate,
            arguments: opts.arguments.clone(),
            table: RwLock::new(Table {
                queues: Bindings::new(kind),
                exchanges: None,
                selective: None,
                ever_bound: false,
            }),
            header_dependents: AtomicUsize::new(0),
            inbound: Mutex::new(Vec::new()),
            deleted: AtomicBool::new(false),
            counters: ExchangeCounters::default(),
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// What was published to this exchange, for management.
    pub fn counters(&self) -> &ExchangeCounters {
        &self.counters
    }

    pub fn kind(&self) -> ExchangeKind {
        self.kind
    }

    /// Whether publishers must fill [`Message::headers`]: to route (a headers exchange), for
    /// a last-value queue bound here, or for exchanges this one forwards to. Decoding headers
    /// costs, so plain exchanges to plain queues skip it.
    pub fn needs_headers(&self) -> bool {
        self.kind == ExchangeKind::Headers || self.header_dependents.load(Ordering::Relaxed) > 0
    }

    fn count_dependent(&self, dest: &impl Destination, added: bool) {
        if dest.needs_headers() {
            if added {
                self.header_dependents.fetch_add(1, Ordering::Relaxed);
            } else {
                self.header_dependents.fetch_sub(1, Ordering::Relaxed);
            }
        }
    }

    pub fn alternate(&self) -> Option<&Arc<Exchange>> {
        self.alternate.as_ref()
    }

    pub fn is_durable(&self) -> bool {
        self.durable
    }

    pub fn is_auto_delete(&self) -> bool {
        self.auto_delete
    }

    /// See [`ExchangeOptions::internal`].
    pub fn is_internal(&self) -> bool {
        self.internal
    }

    /// Pre-declared by the broker (the default exchange and `amq.*`).
    pub fn is_builtin(&self) -> bool {
        self.builtin
    }

    pub fn arguments(&self) -> &Arguments {
        &self.arguments
    }

    pub fn id(&self) -> u64 {
        self.id
    }

    /// Bindings where this exchange is the source (to queues and to exchanges).
    pub fn binding_count(&self) -> usize {
        self.table.read().len()
    }

    /// The bindings where this exchange is the source, for management (not those of the
    /// broker's own queues).
    pub fn bindings(&self) -> Vec<BindingStatus> {
        let table = self.table.read();
        let to_queues =
            table
                .queues
                .each()
                .filter(|(q, _, _)| !q.is_system())
                .map(|(q, key, args)| BindingStatus {
                    source: self.name.clone(),
                    destination: q.name().to_owned(),
                    to_exchange: false,
                    key: key.to_owned(),
                    arguments: args.clone(),
                });
        let to_exchanges = table.exchanges.iter().flat_map(|b| {
            b.each().map(|(ex, key, args)| BindingStatus {
                source: self.name.clone(),
                destination: ex.name.clone(),
                to_exchange: true,
                key: key.to_owned(),
                arguments: args.clone(),
            })
        });
        let mut all: Vec<BindingStatus> = to_queues.chain(to_exchanges).collect();
        all.sort_by(|a, b| (&a.destination, &a.key).cmp(&(&b.destination, &b.key)));
        all
    }

    pub fn is_deleted(&self) -> bool {
        self.deleted.load(Ordering::Acquire)
    }

    pub(crate) fn mark_deleted(&self) {
        self.deleted.store(true, Ordering::Release);
    }

    pub fn info(&self) -> ExchangeInfo {
        ExchangeInfo {
            name: self.name.clone(),
            kind: self.kind,
            durable: self.durable,
            auto_delete: self.auto_delete,
            alternate_exchange: self.alternate.as_ref().map(|a| a.name.clone()),
            arguments: self.arguments.clone(),
            internal: self.internal,
        }
    }

    /// Appends the queues the message should reach, each once. Takes only a read lock, so
    /// publishers route concurrently. Exchange-to-exchange bindings are not followed here;
    /// see [`Exchange::route_all`].
    pub fn route(&self, msg: &Message, out: &mut Vec<Arc<Queue>>) {
        self.table.read().route_queues(self.kind, msg, out);
    }

    /// [`Exchange::route`] for an exchange without exchange-to-exchange bindings: returns
    /// whether that was all there is to routing here (it appended a queue and forwards
    /// nowhere). False leaves `out` as it was, for [`Exchange::route_all`].
    pub(crate) fn route_only_queues(&self, msg: &Message, out: &mut Vec<Arc<Queue>>) -> bool {
        let table = self.table.read();
        if table.exchanges.is_some() {
            return false;
        }
        let start = out.len();
        table.route_queues(self.kind, msg, out);
        out.len() > start
    }

    /// Appends the queues the message reaches directly and the exchanges it is forwarded to
    /// (each once, under one read lock); returns whether anything matched.
    pub(crate) fn route_all(
        &self,
        msg: &Message,
        queues: &mut Vec<Arc<Queue>>,
        exchanges: &mut Vec<Arc<Exchange>>,
    ) -> bool {
        let table = self.table.read();
        let (q0, e0) = (queues.len(), exchanges.len());
        table.route_queues(self.kind, msg, queues);
        if let Some(ex) = &table.exchanges {
            ex.index.route(msg, exchanges);
        }
        queues.len() > q0 || exchanges.len() > e0
    }

    /// Refuses what [`Exchange::bind`] would refuse, so that nothing refused is journaled.
    pub(crate) fn check_binding(&self, key: &str, args: &Arguments) -> Result<(), BrokerError> {
        check_binding(self.kind, key)?;
        if self.kind == ExchangeKind::Headers {
            HeadersBinding::new((), key, args)?;
        }
        Ok(())
    }

    /// Binds a queue (see [`BindingIdentity`] for what binding again does).
    ///
    /// `filter` admits what the binding routes (see `selective`). Rebinding (queue, key)
    /// under [`BindingIdentity::Key`] replaces its filter, whatever the exchange type: the
    /// store keeps the last arguments, so a restart would bring the new filter anyway.
    pub(crate) fn bind(
        &self,
        queue: &Arc<Queue>,
        key: &str,
        args: &Arguments,
        filter: Option<Arc<dyn MessageFilter>>,
        identity: BindingIdentity,
    ) -> Result<Bound, BrokerError> {
        let mut table = self.table.write();
        let Table {
            queues, selective, ..
        } = &mut *table;
        let bound = queues.bind(self.kind, queue, key, args, identity)?;
        if bound == Bound::Unchanged {
            return Ok(bound);
        }
        if filter.is_some() || selective.as_ref().is_some_and(|s| s.has(queue.id())) {
            let id = queue.id();
            let earlier = || {
                queues
                    .records
                    .range((id, String::new())..)
                    .take_while(|((q, _), _)| *q == id)
                    .flat_map(|((_, k), (_, variants))| variants.iter().map(|a| (k.as_str(), a)))
                    .collect()
            };
            let table = selective.get_or_insert_with(Box::default);
            table.bound(self.kind, id, key, args, filter, identity, earlier);
            if table.is_empty() {
                *selective = None;
            }
        }
        table.ever_bound |= bound.added();
        if bound == Bound::NewKey {
            self.count_dependent(queue, true);
        }
        Ok(bound)
    }

    /// Binds another exchange as a destination (exchange-to-exchange), with the same rules
    /// as [`Exchange::bind`] under [`BindingIdentity::KeyAndArguments`]: only RabbitMQ's
    /// clients and API bind exchanges, and to them the arguments tell bindings apart.
    pub(crate) fn bind_exchange(
        &self,
        destination: &Arc<Exchange>,
        key: &str,
        args: &Arguments,
    ) -> Result<Bound, BrokerError> {
        let mut table = self.table.write();
        let kind = self.kind;
        let bound = table
            .exchanges
            .get_or_insert_with(|| Box::new(Bindings::new(kind)))
            .bind(
                kind,
                destination,
                key,
                args,
                BindingIdentity::KeyAndArguments,
            )?;
        table.ever_bound |= bound.added();
        if bound == Bound::NewKey {
            self.count_dependent(destination, true);
        }
        Ok(bound)
    }

    /// Removes the queue's bindings under `key`: all of them, or with `only` the one with
    /// those arguments. `None` if none was removed, else whether the key has none left.
    pub(crate) fn unbind(
        &self,
        queue_id: u64,
        key: &str,
        only: Option<&Arguments>,
    ) -> Option<bool> {
        let mut table = self.table.write();
        let (queue, key_gone) = table.queues.unbind(queue_id, key, only)?;
        if let Some(selective) = table.selective.as_mut() {
            selective.removed(queue_id, key, only);
            if selective.is_empty() {
                table.selective = None;
            }
        }
        drop(table);
        if key_gone {
            self.count_dependent(&queue, false);
        }
        Some(key_gone)
    }

    /// Removes the destination exchange's bindings under `key`: all of them, or with `only`
    /// the one with those arguments. `None` if none was removed, else whether the key has
    /// none left.
    pub(crate) fn unbind_exchange(
        &self,
        destination_id: u64,
        key: &str,
        only: Option<&Arguments>,
    ) -> Option<bool> {
        let mut table = self.table.write();
        let removed = table
            .exchanges
            .as_mut()
            .and_then(|e| e.unbind(destination_id, key, only));
        if table
            .exchanges
            .as_ref()
            .is_some_and(|e| e.records.is_empty())
        {
            table.exchanges = None;
        }
        drop(table);
        let (dest, key_gone) = removed?;
        if key_gone {
            self.count_dependent(&dest, false);
        }
        Some(key_gone)
    }

    pub(crate) fn add_inbound(&self, source: &Arc<Exchange>, key: &str) {
        self.inbound
            .lock()
            .push((Arc::downgrade(source), key.to_owned()));
    }

    pub(crate) fn remove_inbound(&self, source: &Exchange, key: &str) {
        self.inbound
            .lock()
            .retain(|(e, k)| !(k == key && std::ptr::eq(e.as_ptr(), source)));
    }

    pub(crate) fn take_inbound(&self) -> Vec<(Weak<Exchange>, String)> {
        std::mem::take(&mut *self.inbound.lock())
    }

    /// Drops every binding where this exchange is the source (exchange deletion); returns
    /// the (queue, key) and (exchange, key) pairs removed.
    #[allow(clippy::type_complexity)]
    pub(crate) fn clear(&self) -> (Vec<(Arc<Queue>, String)>, Vec<(Arc<Exchange>, String)>) {
        let mut table = self.table.write();
        let queues = table.queues.clear(self.kind);
        table.selective = None;
        let exchanges = table
            .exchanges
            .take()
            .map(|mut e| e.clear(self.kind))
            .unwrap_or_default();
        self.header_dependents.store(0, Ordering::Relaxed);
        (queues, exchanges)
    }

    /// An auto-delete exchange whose last binding went away.
    pub(crate) fn auto_delete_due(&self) -> bool {
        if !self.auto_delete || self.builtin {
            return false;
        }
        let table = self.table.read();
        table.ever_bound && table.len() == 0
    }

    /// Whether binding `queue` here under `key` with these arguments would change nothing
    /// (see `Bindings::bind_changes_nothing`).
    pub(crate) fn queue_bind_changes_nothing(
        &self,
        queue: &Queue,
        key: &str,
        args: &Arguments,
        identity: BindingIdentity,
    ) -> bool {
        self.table
            .read()
            .queues
            .bind_changes_nothing(queue.id(), key, args, identity)
    }

    /// Whether binding `destination` here under `key` with these arguments would change
    /// nothing (exchange-to-exchange bindings are told apart by their arguments).
    pub(crate) fn exchange_bind_changes_nothing(
        &self,
        destination: &Exchange,
        key: &str,
        args: &Arguments,
    ) -> bool {
        self.table.read().exchanges.as_ref().is_some_and(|b| {
            b.bind_changes_nothing(destination.id, key, args, BindingIdentity::KeyAndArguments)
        })
    }

    /// Whether some binding satisfies every given criterion (`None` = any). Arguments compare
    /// as unordered sets of entries.
    pub(crate) fn has_binding(
        &self,
        queue: Option<&Queue>,
        key: Option<&str>,
        args: Option<&Arguments>,
    ) -> bool {
        let args_ok = |a: &Arguments| args.map_or(true, |want| want.same_entries(a));
        let table = self.table.read();
        let records = &table.queues.records;
        if let (Some(q), Some(k)) = (queue, key) {
            return records
                .get(&(q.id(), k.to_owned()))
                .is_some_and(|(_, variants)| variants.iter().any(args_ok));
        }
        records.iter().any(|((id, k), (_, variants))| {
            queue.map_or(true, |q| q.id() == *id)
                && key.map_or(true, |want| want == k)
                && variants.iter().any(args_ok)
        })
    }

    #[cfg(test)]
    pub(crate) fn topic_index_is_empty(&self) -> bool {
        match &self.table.read().queues.index {
            Index::Topic(t) => t.is_empty(),
            _ => false,
        }
    }
}

/// Queues hold their alternate exchange through this trait, being a layer below exchanges.
impl AlternateExchange for Exchange {
    fn name(&self) -> &str {
        &self.name
    }

    fn into_any(self: Arc<Self>) -> Arc<dyn Any + Send + Sync> {
        self
    }
}

impl Exchange {
    /// The exchange a queue holds as its alternate (only exchanges are ever held so).
    pub(crate) fn from_alternate(alternate: Arc<dyn AlternateExchange>) -> Option<Arc<Exchange>> {
        alternate.into_any().downcast().ok()
    }
}

impl Queue {
    /// The alternate (or dead letter) exchange, while it exists. Defined here rather than
    /// with the queue, which sits below exchanges and holds it opaquely.
    pub fn alternate_exchange(&self) -> Option<Arc<Exchange>> {
        self.alternate().and_then(Exchange::from_alternate)
    }
}

/// Removes duplicate destinations among `out[start..]` (order is irrelevant to delivery).
/// Sorting by id costs O(k log k) but avoids an O(k²) scan when a message matches many
/// bindings.
pub(crate) fn dedup_tail<T: Destination>(out: &mut Vec<T>, start: usize) {
    if out.len() < start + 2 {
        return;
    }
    if let Some(tail) = out.get_mut(start..) {
        tail.sort_unstable_by_key(Destination::dest_id);
    }
    let mut keep = start + 1;
    for i in start + 1..out.len() {
        if out[i].dest_id() != out[keep - 1].dest_id() {
            out.swap(i, keep);
            keep += 1;
        }
    }
    out.truncate(keep);
}
