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

/// The bindings of one exchange to one type of destination. Identity of a binding is
/// (destination, key), as in 0-10.
#[derive(Debug)]
struct Bindings<T> {
    /// Ordered, so that one destination's bindings are a range.
    records: BTreeMap<(u64, String), (T, Arguments)>,
    index: Index<T>,
}

impl<T: Destination> Bindings<T> {
    fn new(kind: ExchangeKind) -> Bindings<T> {
        Bindings {
            records: BTreeMap::new(),
            index: Index::empty(kind),
        }
    }

    /// Adds a binding; `Ok(false)` if (destination, key) was already bound. Rebinding
    /// replaces its arguments: a headers binding's match criteria (so a client can change
    /// them, as qpidd allows), a selector (see `selective`), and what management shows, as
    /// the store keeps the last arguments too.
    fn bind(
        &mut self,
        kind: ExchangeKind,
        dest: &T,
        key: &str,
        args: &Arguments,
    ) -> Result<bool, BrokerError> {
        if kind == ExchangeKind::Topic && topic::pattern_words(key) > topic::MAX_PATTERN_WORDS {
            return Err(BrokerError::InvalidArgument(format!(
                "binding key has more than {} words",
                topic::MAX_PATTERN_WORDS
            )));
        }
        let headers_binding = match kind {
            ExchangeKind::Headers => Some(HeadersBinding::new(dest.clone(), key, args)?),
            _ => None,
        };
        let id = (dest.dest_id(), key.to_owned());
        if let Some(existing) = self.records.get_mut(&id) {
            existing.1 = args.clone();
            if let (Some(hb), Index::Headers(list)) = (headers_binding, &mut self.index) {
                if let Some(slot) = list
                    .iter_mut()
                    .find(|b| b.queue.dest_id() == dest.dest_id() && b.key == key)
                {
                    *slot = hb;
                }
            }
            return Ok(false);
        }
        self.index.insert(dest, key, headers_binding);
        self.records.insert(id, (dest.clone(), args.clone()));
        Ok(true)
    }

    /// Removes the (destination, key) binding; returns its destination.
    fn unbind(&mut self, id: u64, key: &str) -> Option<T> {
        let (dest, _) = self.records.remove(&(id, key.to_owned()))?;
        self.index.remove(id, key);
        Some(dest)
    }

    fn clear(&mut self, kind: ExchangeKind) -> Vec<(T, String)> {
        self.index = Index::empty(kind);
        std::mem::take(&mut self.records)
            .into_iter()
            .map(|((_, key), (dest, _))| (dest, key))
            .collect()
    }
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
        self.queues.records.len() + self.exchanges.as_ref().map_or(0, |e| e.records.len())
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
        let to_queues = table
            .queues
            .records
            .iter()
            .filter(|(_, (q, _))| !q.is_system())
            .map(|((_, key), (q, args))| BindingStatus {
                source: self.name.clone(),
                destination: q.name().to_owned(),
                to_exchange: false,
                key: key.clone(),
                arguments: args.clone(),
            });
        let to_exchanges = table.exchanges.iter().flat_map(|b| {
            b.records
                .iter()
                .map(|((_, key), (ex, args))| BindingStatus {
                    source: self.name.clone(),
                    destination: ex.name.clone(),
                    to_exchange: true,
                    key: key.clone(),
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

    /// Binds a queue; `Ok(false)` if (queue, key) was already bound. Rebinding replaces
    /// the binding's arguments (see `Bindings::bind`).
    ///
    /// `filter` admits what the binding routes (see `selective`). Rebinding (queue, key)
    /// replaces its filter, whatever the exchange type: the store keeps the last arguments,
    /// so a restart would bring the new filter anyway.
    pub(crate) fn bind(
        &self,
        queue: &Arc<Queue>,
        key: &str,
        args: &Arguments,
        filter: Option<Arc<dyn MessageFilter>>,
    ) -> Result<bool, BrokerError> {
        let mut table = self.table.write();
        let Table {
            queues, selective, ..
        } = &mut *table;
        let added = queues.bind(self.kind, queue, key, args)?;
        if filter.is_some() || selective.as_ref().is_some_and(|s| s.has(queue.id())) {
            let id = queue.id();
            let earlier = || {
                queues
                    .records
                    .range((id, String::new())..)
                    .take_while(|((q, _), _)| *q == id)
                    .map(|((_, k), (_, a))| (k.as_str(), a))
                    .collect()
            };
            let table = selective.get_or_insert_with(Box::default);
            table.bound(self.kind, id, key, args, filter, earlier);
            if table.is_empty() {
                *selective = None;
            }
        }
        table.ever_bound |= added;
        if added {
            self.count_dependent(queue, true);
        }
        Ok(added)
    }

    /// Binds another exchange as a destination (exchange-to-exchange), with the same rules
    /// as [`Exchange::bind`].
    pub(crate) fn bind_exchange(
        &self,
        destination: &Arc<Exchange>,
        key: &str,
        args: &Arguments,
    ) -> Result<bool, BrokerError> {
        let mut table = self.table.write();
        let kind = self.kind;
        let added = table
            .exchanges
            .get_or_insert_with(|| Box::new(Bindings::new(kind)))
            .bind(kind, destination, key, args)?;
        table.ever_bound |= added;
        if added {
            self.count_dependent(destination, true);
        }
        Ok(added)
    }

    /// Removes the (queue, key) binding; false if there was none.
    pub(crate) fn unbind(&self, queue_id: u64, key: &str) -> bool {
        let mut table = self.table.write();
        let removed = table.queues.unbind(queue_id, key);
        if removed.is_some() {
            if let Some(selective) = table.selective.as_mut() {
                selective.removed(queue_id, key);
                if selective.is_empty() {
                    table.selective = None;
                }
            }
        }
        drop(table);
        if let Some(q) = &removed {
            self.count_dependent(q, false);
        }
        removed.is_some()
    }

    /// Removes the (destination exchange, key) binding; false if there was none.
    pub(crate) fn unbind_exchange(&self, destination_id: u64, key: &str) -> bool {
        let mut table = self.table.write();
        let removed = table
            .exchanges
            .as_mut()
            .and_then(|e| e.unbind(destination_id, key));
        if table
            .exchanges
            .as_ref()
            .is_some_and(|e| e.records.is_empty())
        {
            table.exchanges = None;
        }
        if let Some(dest) = &removed {
            self.count_dependent(dest, false);
        }
        removed.is_some()
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
                .is_some_and(|(_, a)| args_ok(a));
        }
        records.iter().any(|((id, k), (_, a))| {
            queue.map_or(true, |q| q.id() == *id)
                && key.map_or(true, |want| want == k)
                && args_ok(a)
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
