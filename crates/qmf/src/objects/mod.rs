//! QMF objects built from the core's management snapshots (`ferry_core::mgmt`), one module
//! per group of classes. Each object carries the `_values` qpidd's schema gives its class,
//! with the types qpidd uses, so consoles find every key they read; counters the core does
//! not keep are present and zero (see each builder).

mod broker;
mod clients;
mod routing;

pub(crate) use clients::address as connection_address;

use ferry_amqp010::{Map, Str, Value};
use ferry_core::{Broker, QueueCounters};

use crate::schema::{Class, PACKAGE};
use crate::value::{object_ref, text};
use crate::Identity;

/// One object as a query returns it.
#[derive(Debug, Clone, PartialEq)]
pub struct QmfObject {
    pub class: Class,
    /// The object name's key part (see [`crate::schema`]).
    pub key: String,
    pub values: Map,
    /// Nanoseconds since the epoch; 0 where the core does not know when the object was made.
    pub create_ts: u64,
    pub update_ts: u64,
}

impl QmfObject {
    pub fn object_name(&self) -> String {
        self.class.object_name(&self.key)
    }

    /// The map a `_query_response` lists: `_object_id`, `_schema_id`, `_values` and the
    /// timestamps, as qpidd's `handleGetQuery` writes them.
    pub fn encode(&self) -> Value {
        let mut oid = Map::new();
        oid.insert("_object_name", text(&self.object_name()));
        let mut schema = Map::new();
        schema.insert("_package_name", text(PACKAGE));
        schema.insert("_class_name", text(self.class.name()));
        schema.insert("_type", text("_data"));
        schema.insert("_hash", Value::Uuid(self.class.hash()));
        let mut m = Map::new();
        m.insert("_object_id", Value::Map(oid));
        m.insert("_schema_id", Value::Map(schema));
        m.insert("_values", Value::Map(self.values.clone()));
        m.insert("_create_ts", Value::Uint64(self.create_ts));
        m.insert("_update_ts", Value::Uint64(self.update_ts));
        m.insert("_delete_ts", Value::Uint64(0));
        Value::Map(m)
    }
}

/// Builds `_values` maps with qpidd's wire types.
#[derive(Debug, Default)]
pub(crate) struct Values(Map);

impl Values {
    /// The statistics qpidd's queue and broker objects both have, from one queue's counters
    /// or the broker's sums of them, and the bytes kept on disk.
    pub(crate) fn queue_statistics(self, c: &QueueCounters, on_disk: u64) -> Self {
        self.u64("msgTxnEnqueues", c.enqueued_txn)
            .u64("msgTxnDequeues", c.dequeued_txn)
            .u64("byteTxnEnqueues", c.enqueued_txn_bytes)
            .u64("byteTxnDequeues", c.dequeued_txn_bytes)
            .zeros(&[
                "msgPersistEnqueues",
                "msgPersistDequeues",
                "bytePersistEnqueues",
                "bytePersistDequeues",
                "msgFtdEnqueues",
                "msgFtdDequeues",
                "byteFtdEnqueues",
                "byteFtdDequeues",
                "msgFtdDepth",
            ])
            .u64("byteFtdDepth", on_disk)
            .u64("releases", c.released)
            .u64("acquires", c.delivered)
            .u64("discardsTtl", c.expired)
            .u64("discardsRing", c.overflowed)
            .u64("discardsLvq", c.replaced)
            .u64("discardsOverflow", c.refused)
            .u64("discardsSubscriber", c.rejected)
            .u64("discardsPurge", c.purged)
            .u64("reroutes", c.rerouted)
    }

    pub(crate) fn text(mut self, key: &'static str, v: &str) -> Self {
        self.0.insert(key, text(v));
        self
    }

    pub(crate) fn u64(mut self, key: &'static str, v: u64) -> Self {
        self.0.insert(key, Value::Uint64(v));
        self
    }

    pub(crate) fn u32(mut self, key: &'static str, v: u32) -> Self {
        self.0.insert(key, Value::Uint32(v));
        self
    }

    pub(crate) fn u16(mut self, key: &'static str, v: u16) -> Self {
        self.0.insert(key, Value::Uint16(v));
        self
    }

    pub(crate) fn bool(mut self, key: &'static str, v: bool) -> Self {
        self.0.insert(key, Value::Bool(v));
        self
    }

    pub(crate) fn reference(mut self, key: &'static str, object_name: &str) -> Self {
        self.0.insert(key, object_ref(object_name));
        self
    }

    pub(crate) fn value(mut self, key: &'static str, v: Value) -> Self {
        self.0.insert(key, v);
        self
    }

    /// qpidd's `hilo32` statistics come with `<key>High` and `<key>Low`, the extremes over
    /// the publish interval; without periodic publishing they are the current value.
    pub(crate) fn hilo32(mut self, key: &'static str, v: u64) -> Self {
        let v = u32::try_from(v).unwrap_or(u32::MAX);
        self.0.insert(key, Value::Uint32(v));
        self.0
            .insert(Str::from(format!("{key}High")), Value::Uint32(v));
        self.0
            .insert(Str::from(format!("{key}Low")), Value::Uint32(v));
        self
    }

    /// Several `count64` statistics the core does not keep, all zero.
    pub(crate) fn zeros(mut self, keys: &[&'static str]) -> Self {
        for key in keys {
            self.0.insert(*key, Value::Uint64(0));
        }
        self
    }

    pub(crate) fn build(self) -> Map {
        self.0
    }
}

/// What the objects are built from: the broker, the agent's identity, and the one queue
/// (the agent's own) that is plumbing, not part of the broker qpidd would show.
pub struct View<'a> {
    pub broker: &'a Broker,
    pub identity: &'a Identity,
    pub hidden_queue: &'a str,
    pub now_ns: u64,
}

impl View<'_> {
    /// Every object of `class`, in a stable order.
    pub fn objects(&self, class: Class) -> Vec<QmfObject> {
        match class {
            Class::Broker => vec![broker::broker(self)],
            Class::System => vec![broker::system(self)],
            Class::Vhost => vec![broker::vhost(self)],
            Class::Memory => vec![broker::memory(self)],
            Class::Queue => routing::queues(self),
            Class::Exchange => routing::exchanges(self),
            Class::Binding => routing::bindings(self),
            Class::Connection => clients::connections(self),
            Class::Session => clients::sessions(self),
            Class::Subscription => clients::subscriptions(self),
        }
    }

    /// The object named `object_name`, if it exists.
    pub fn find(&self, object_name: &str) -> Option<QmfObject> {
        let (class, _) = crate::schema::parse_object_name(object_name)?;
        let class = Class::from_name(class)?;
        self.objects(class)
            .into_iter()
            .find(|o| o.object_name() == object_name)
    }

    fn object(&self, class: Class, key: String, values: Map, create_ts: u64) -> QmfObject {
        QmfObject {
            class,
            key,
            values,
            create_ts,
            update_ts: self.now_ns,
        }
    }
}

/// An `altExchange` reference, which qpidd leaves out (the property is optional) when there
/// is no alternate exchange.
fn alternate(values: Values, alternate: Option<&str>) -> Values {
    match alternate {
        Some(name) => values.reference("altExchange", &Class::Exchange.object_name(name)),
        None => values,
    }
}

/// Hex text of a 16-byte id in the usual 8-4-4-4-12 form.
pub(crate) fn uuid_text(id: &[u8; 16]) -> String {
    let mut s = String::with_capacity(36);
    for (i, b) in id.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            s.push('-');
        }
        s.push_str(&format!("{b:02x}"));
    }
    s
}

#[cfg(test)]
mod tests;
