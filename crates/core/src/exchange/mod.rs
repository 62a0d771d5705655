//! Exchanges and their bindings.

mod headers;
#[cfg(test)]
mod tests;
mod topic;

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use parking_lot::RwLock;

use crate::error::BrokerError;
use crate::message::Message;
use crate::queue::Queue;
use crate::value::Arguments;
use headers::HeadersBinding;
use topic::TopicTrie;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ExchangeKind {
    Direct,
    Fanout,
    Topic,
    Headers,
}

impl ExchangeKind {
    /// The AMQP type name; `None` for types the broker does not know (0-10 answers those with
    /// not-found, as qpidd does).
    pub fn from_name(name: &str) -> Option<ExchangeKind> {
        match name {
            "direct" => Some(ExchangeKind::Direct),
            "fanout" => Some(ExchangeKind::Fanout),
            "topic" => Some(ExchangeKind::Topic),
            "headers" => Some(ExchangeKind::Headers),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            ExchangeKind::Direct => "direct",
            ExchangeKind::Fanout => "fanout",
            ExchangeKind::Topic => "topic",
            ExchangeKind::Headers => "headers",
        }
    }
}

#[derive(Debug, Clone, Default)]
pub struct ExchangeOptions {
    pub durable: bool,
    /// Deleted once its last binding goes (after it had at least one).
    pub auto_delete: bool,
    pub alternate_exchange: Option<String>,
    pub arguments: Arguments,
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
}

#[derive(Debug)]
struct Binding {
    queue: Arc<Queue>,
    key: String,
    args: Arguments,
}

/// Per-type routing index, kept beside the full binding list so routing never scans bindings
/// (except headers, which is inherently a scan).
#[derive(Debug)]
enum Index {
    Direct(HashMap<Vec<u8>, Vec<Arc<Queue>>>),
    /// Unique queues, with a count of bindings per queue id (a queue may be bound under several
    /// keys but must receive each message once).
    Fanout(Vec<Arc<Queue>>, HashMap<u64, usize>),
    Topic(TopicTrie),
    Headers(Vec<HeadersBinding>),
}

impl Index {
    fn empty(kind: ExchangeKind) -> Index {
        match kind {
            ExchangeKind::Direct => Index::Direct(HashMap::new()),
            ExchangeKind::Fanout => Index::Fanout(Vec::new(), HashMap::new()),
            ExchangeKind::Topic => Index::Topic(TopicTrie::default()),
            ExchangeKind::Headers => Index::Headers(Vec::new()),
        }
    }
}

#[derive(Debug)]
struct Table {
    /// Identity of a binding is (queue, key), as in 0-10.
    bindings: HashMap<(u64, String), Binding>,
    index: Index,
    ever_bound: bool,
}

pub struct Exchange {
    name: String,
    kind: ExchangeKind,
    durable: bool,
    auto_delete: bool,
    builtin: bool,
    alternate: Option<Arc<Exchange>>,
    arguments: Arguments,
    table: RwLock<Table>,
    deleted: AtomicBool,
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
        let index = Index::empty(kind);
        Arc::new(Exchange {
            name,
            kind,
            durable: opts.durable,
            auto_delete: opts.auto_delete,
            builtin,
            alternate,
            arguments: opts.arguments.clone(),
            table: RwLock::new(Table {
                bindings: HashMap::new(),
                index,
                ever_bound: false,
            }),
            deleted: AtomicBool::new(false),
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn kind(&self) -> ExchangeKind {
        self.kind
    }

    /// Whether publishers must fill [`Message::headers`] for routing to work.
    pub fn needs_headers(&self) -> bool {
        self.kind == ExchangeKind::Headers
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

    /// Pre-declared by the broker (the default exchange and `amq.*`).
    pub fn is_builtin(&self) -> bool {
        self.builtin
    }

    pub fn arguments(&self) -> &Arguments {
        &self.arguments
    }

    pub fn binding_count(&self) -> usize {
        self.table.read().bindings.len()
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
        }
    }

    /// Appends the queues the message should reach, each once. Takes only a read lock, so
    /// publishers route concurrently.
    pub fn route(&self, msg: &Message, out: &mut Vec<Arc<Queue>>) {
        let table = self.table.read();
        match &table.index {
            Index::Direct(map) => {
                if let Some(qs) = map.get(&msg.routing_key[..]) {
                    out.extend(qs.iter().cloned());
                }
            }
            Index::Fanout(qs, _) => out.extend(qs.iter().cloned()),
            Index::Topic(trie) => {
                let start = out.len();
                trie.route(&msg.routing_key, out);
                dedup_tail(out, start);
            }
            Index::Headers(list) => {
                let start = out.len();
                let headers = msg.headers.as_deref();
                out.extend(
                    list.iter()
                        .filter(|b| b.matches(headers))
                        .map(|b| b.queue.clone()),
                );
                dedup_tail(out, start);
            }
        }
    }

    /// Adds a binding; `Ok(false)` if (queue, key) was already bound. Rebinding a headers
    /// binding replaces its arguments (so a client can change its match criteria, as qpidd
    /// allows); for other types the arguments play no part in routing and the first are kept.
    pub(crate) fn bind(
        &self,
        queue: &Arc<Queue>,
        key: &str,
        args: &Arguments,
    ) -> Result<bool, BrokerError> {
        if self.kind == ExchangeKind::Topic && topic::pattern_words(key) > topic::MAX_PATTERN_WORDS
        {
            return Err(BrokerError::InvalidArgument(format!(
                "binding key has more than {} words",
                topic::MAX_PATTERN_WORDS
            )));
        }
        let headers_binding = match self.kind {
            ExchangeKind::Headers => Some(HeadersBinding::new(queue.clone(), key, args)?),
            _ => None,
        };
        let mut guard = self.table.write();
        let table = &mut *guard;
        let id = (queue.id(), key.to_owned());
        if let Some(existing) = table.bindings.get_mut(&id) {
            if let (Some(hb), Index::Headers(list)) = (headers_binding, &mut table.index) {
                existing.args = args.clone();
                if let Some(slot) = list
                    .iter_mut()
                    .find(|b| b.queue.id() == queue.id() && b.key == key)
                {
                    *slot = hb;
                }
            }
            return Ok(false);
        }
        match &mut table.index {
            Index::Direct(map) => map
                .entry(key.as_bytes().to_vec())
                .or_default()
                .push(queue.clone()),
            Index::Fanout(qs, refs) => {
                let n = refs.entry(queue.id()).or_insert(0);
                if *n == 0 {
                    qs.push(queue.clone());
                }
                *n += 1;
            }
            Index::Topic(trie) => trie.insert(key, queue.clone()),
            Index::Headers(list) => {
                if let Some(hb) = headers_binding {
                    list.push(hb);
                }
            }
        }
        table.bindings.insert(
            id,
            Binding {
                queue: queue.clone(),
                key: key.to_owned(),
                args: args.clone(),
            },
        );
        table.ever_bound = true;
        Ok(true)
    }

    /// Removes the (queue, key) binding; false if there was none.
    pub(crate) fn unbind(&self, queue_id: u64, key: &str) -> bool {
        let mut guard = self.table.write();
        let table = &mut *guard;
        if table.bindings.remove(&(queue_id, key.to_owned())).is_none() {
            return false;
        }
        match &mut table.index {
            Index::Direct(map) => {
                if let Some(qs) = map.get_mut(key.as_bytes()) {
                    qs.retain(|q| q.id() != queue_id);
                    if qs.is_empty() {
                        map.remove(key.as_bytes());
                    }
                }
            }
            Index::Fanout(qs, refs) => {
                if let Some(n) = refs.get_mut(&queue_id) {
                    *n -= 1;
                    if *n == 0 {
                        refs.remove(&queue_id);
                        qs.retain(|q| q.id() != queue_id);
                    }
                }
            }
            Index::Topic(trie) => {
                trie.remove(key, queue_id);
            }
            Index::Headers(list) => list.retain(|b| !(b.queue.id() == queue_id && b.key == key)),
        }
        true
    }

    /// Drops every binding (exchange deletion); returns the (queue, key) pairs removed.
    pub(crate) fn clear(&self) -> Vec<(Arc<Queue>, String)> {
        let mut table = self.table.write();
        table.index = Index::empty(self.kind);
        table
            .bindings
            .drain()
            .map(|(_, b)| (b.queue, b.key))
            .collect()
    }

    /// An auto-delete exchange whose last binding went away.
    pub(crate) fn auto_delete_due(&self) -> bool {
        if !self.auto_delete || self.builtin {
            return false;
        }
        let table = self.table.read();
        table.ever_bound && table.bindings.is_empty()
    }

    /// Whether some binding satisfies every given criterion (`None` = any). Arguments compare
    /// as unordered sets of entries.
    pub(crate) fn has_binding(
        &self,
        queue: Option<&Queue>,
        key: Option<&str>,
        args: Option<&Arguments>,
    ) -> bool {
        let args_ok = |b: &Binding| args.map_or(true, |a| a.same_entries(&b.args));
        let table = self.table.read();
        if let (Some(q), Some(k)) = (queue, key) {
            return table
                .bindings
                .get(&(q.id(), k.to_owned()))
                .is_some_and(args_ok);
        }
        table.bindings.values().any(|b| {
            queue.map_or(true, |q| q.id() == b.queue.id())
                && key.map_or(true, |k| k == b.key)
                && args_ok(b)
        })
    }

    #[cfg(test)]
    pub(crate) fn topic_index_is_empty(&self) -> bool {
        match &self.table.read().index {
            Index::Topic(t) => t.is_empty(),
            _ => false,
        }
    }
}

/// Removes duplicate queues among `out[start..]` (order is irrelevant to delivery). Sorting by
/// address costs O(k log k) but avoids an O(k²) scan when a message matches many bindings.
fn dedup_tail(out: &mut Vec<Arc<Queue>>, start: usize) {
    if out.len() < start + 2 {
        return;
    }
    if let Some(tail) = out.get_mut(start..) {
        tail.sort_unstable_by_key(|q| Arc::as_ptr(q) as usize);
    }
    let mut keep = start + 1;
    for i in start + 1..out.len() {
        if !Arc::ptr_eq(&out[i], &out[keep - 1]) {
            out.swap(i, keep);
            keep += 1;
        }
    }
    out.truncate(keep);
}
