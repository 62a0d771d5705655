//! Queues, exchanges and bindings.

use std::collections::{HashMap, HashSet};

use ferry_core::BindingStatus;

use super::{alternate, QmfObject, Values, View};
use crate::schema::{binding_key, vhost_object_name, Class};
use crate::value::from_arguments;

/// Queue-to-exchange bindings (the default exchange's included, as qpidd lists them), without
/// the agent's own queue's. Exchange-to-exchange bindings have no QMF class in qpidd and are
/// left out.
fn queue_bindings(view: &View) -> Vec<BindingStatus> {
    view.broker
        .bindings()
        .into_iter()
        .filter(|b| !b.to_exchange && b.destination != view.hidden_queue)
        .collect()
}

pub(super) fn queues(view: &View) -> Vec<QmfObject> {
    let mut bindings: HashMap<String, u64> = HashMap::new();
    for b in queue_bindings(view) {
        *bindings.entry(b.destination).or_default() += 1;
    }
    let vhost = vhost_object_name();
    view.broker
        .queue_statuses()
        .into_iter()
        .filter(|q| q.name != view.hidden_queue)
        .map(|q| {
            let d = &q.depth;
            let c = &d.counters;
            let depth = d.ready + d.unacked;
            let depth_bytes = d.ready_bytes + d.unacked_bytes;
            let v = Values::default()
                .reference("vhostRef", &vhost)
                .text("name", &q.name)
                .bool("durable", q.durable)
                .bool("autoDelete", q.auto_delete)
                .bool("exclusive", q.owner.is_some())
                .value("arguments", from_arguments(&q.arguments));
            let v = alternate(v, q.alternate_exchange.as_deref())
                .u64("msgTotalEnqueues", c.enqueued)
                .u64("msgTotalDequeues", c.dequeued())
                .u64("msgDepth", depth)
                .u64("byteDepth", depth_bytes)
                .u64("byteTotalEnqueues", c.enqueued_bytes)
                // See the broker object: bytes are not counted on the way out.
                .u64(
                    "byteTotalDequeues",
                    c.enqueued_bytes.saturating_sub(depth_bytes),
                )
                .queue_statistics(c, d.on_disk_bytes)
                .hilo32("consumerCount", q.consumers.len() as u64)
                .hilo32(
                    "bindingCount",
                    bindings.get(&q.name).copied().unwrap_or_default(),
                )
                .hilo32("unackedMessages", d.unacked)
                .bool("flowStopped", false)
                .u32("flowStoppedCount", 0)
                .text("redirectPeer", "")
                .bool("redirectSource", false)
                // Who declared a queue is not kept by the core.
                .text("creator", "");
            view.object(Class::Queue, q.name, v.build(), 0)
        })
        .collect()
}

pub(super) fn exchanges(view: &View) -> Vec<QmfObject> {
    let mut bindings: HashMap<String, u64> = HashMap::new();
    for b in view.broker.bindings() {
        if b.to_exchange || b.destination != view.hidden_queue {
            *bindings.entry(b.source).or_default() += 1;
        }
    }
    let vhost = vhost_object_name();
    view.broker
        .exchange_statuses()
        .into_iter()
        .map(|e| {
            let info = e.info;
            let t = e.totals;
            let v = Values::default()
                .reference("vhostRef", &vhost)
                .text("name", &info.name)
                .text("type", info.kind.name())
                .bool("durable", info.durable)
                .bool("autoDelete", info.auto_delete);
            let v = alternate(v, info.alternate_exchange.as_deref())
                .value("arguments", from_arguments(&info.arguments))
                .hilo32("producerCount", 0)
                .hilo32(
                    "bindingCount",
                    bindings.get(&info.name).copied().unwrap_or_default(),
                )
                .u64("msgReceives", t.messages_in)
                .u64("msgDrops", t.unroutable)
                .u64("msgRoutes", t.messages_out())
                .u64("byteReceives", t.bytes_in)
                .u64("byteDrops", t.unroutable_bytes)
                .u64("byteRoutes", t.bytes_in.saturating_sub(t.unroutable_bytes));
            view.object(Class::Exchange, info.name, v.build(), 0)
        })
        .collect()
}

pub(super) fn bindings(view: &View) -> Vec<QmfObject> {
    let bindings = queue_bindings(view);
    let names = binding_names(
        bindings
            .iter()
            .map(|b| binding_key(&b.source, &b.destination, &b.key)),
    );
    bindings
        .into_iter()
        .zip(names)
        .map(|(b, name)| {
            let v = Values::default()
                .reference("exchangeRef", &Class::Exchange.object_name(&b.source))
                .reference("queueRef", &Class::Queue.object_name(&b.destination))
                .text("bindingKey", &b.key)
                .value("arguments", from_arguments(&b.arguments))
                .u64("msgMatched", 0);
            view.object(Class::Binding, name, v.build(), 0)
        })
        .collect()
}

/// Unique names for bindings named `qpidd_names` as qpidd names them. 0-9-1 may bind a queue
/// under one key several times with other arguments, which qpidd cannot: the first keeps
/// qpidd's name, the later ones get `,2`, `,3`... after it, passing over any name another
/// binding has as its own (a key may itself end in `,2`).
fn binding_names(qpidd_names: impl Iterator<Item = String>) -> Vec<String> {
    let qpidd_names: Vec<String> = qpidd_names.collect();
    let mut taken: HashSet<String> = qpidd_names.iter().cloned().collect();
    let mut firsts: HashSet<&str> = HashSet::new();
    let mut next_suffix: HashMap<&str, usize> = HashMap::new();
    qpidd_names
        .iter()
        .map(|name| {
            if firsts.insert(name) {
                return name.clone();
            }
            let n = next_suffix.entry(name).or_insert(2);
            loop {
                let candidate = format!("{name},{n}");
                *n += 1;
                if taken.insert(candidate.clone()) {
                    return candidate;
                }
            }
        })
        .collect()
}
