//! The broker-wide objects: broker (with qpidd's aggregate statistics), system, vhost and
//! memory.

use ferry_amqp010::Value;

use super::{uuid_text, QmfObject, Values, View};
use crate::schema::{vhost_object_name, Class, BROKER_KEY, VHOST_NAME};

pub(super) fn broker(view: &View) -> QmfObject {
    let id = view.identity;
    let config = &id.config;
    // The broker's figures are the queues' (and exchanges') summed, as the core's overview
    // sums them, but without the agent's own queue, which qpidd would not have.
    // Deleted queues' counts stay in the totals, as qpidd's broker counters are
    // cumulative.
    let mut t = view.broker.retired_counters();
    let (mut queues, mut depth, mut depth_bytes, mut on_disk) = (0u64, 0, 0, 0);
    for q in view.broker.queue_statuses() {
        if q.name == view.hidden_queue {
            continue;
        }
        let d = &q.depth;
        queues += 1;
        depth += d.ready + d.unacked;
        depth_bytes += d.ready_bytes + d.unacked_bytes;
        on_disk += d.on_disk_bytes;
        t.add(&d.counters);
    }
    let unroutable: u64 = view
        .broker
        .exchange_statuses()
        .iter()
        .map(|e| e.totals.unroutable)
        .sum();
    let mut v = Values::default()
        .text("name", BROKER_KEY)
        .reference("systemRef", &system_name(id))
        .u16("port", config.port)
        .u16("workerThreads", config.worker_threads)
        .u16(
            "maxConns",
            u16::try_from(config.max_connections).unwrap_or(u16::MAX),
        )
        .u16("connBacklog", config.listen_backlog)
        .u32("stagingThreshold", 0)
        .bool("mgmtPublish", false)
        .u16("mgmtPubInterval", 10)
        .text("version", &config.version)
        .u64("uptime", view.now_ns.saturating_sub(id.started_ns))
        .u64("queueCount", queues)
        .u64("msgTotalEnqueues", t.enqueued)
        .u64("msgTotalDequeues", t.dequeued())
        .u64("byteTotalEnqueues", t.enqueued_bytes)
        // The core counts dequeued messages, not their bytes: what arrived and is no
        // longer there has left (messages recovered from the store make this an estimate).
        .u64(
            "byteTotalDequeues",
            t.enqueued_bytes.saturating_sub(depth_bytes),
        )
        .u64("msgDepth", depth)
        .u64("byteDepth", depth_bytes)
        .queue_statistics(&t, on_disk)
        .u64("abandoned", t.abandoned)
        .u64("abandonedViaAlt", t.abandoned_via_alternate)
        .u64("discardsNoRoute", unroutable);
    if let Some(dir) = &config.data_dir {
        v = v.text("dataDir", dir);
    }
    view.object(
        Class::Broker,
        BROKER_KEY.to_owned(),
        v.build(),
        id.started_ns,
    )
}

fn system_name(id: &crate::Identity) -> String {
    Class::System.object_name(&uuid_text(&id.system_id))
}

/// The host, as qpidd reports it from uname(2); read from /proc here (Linux), empty
/// elsewhere.
pub(super) fn system(view: &View) -> QmfObject {
    let id = view.identity;
    let kernel = |name: &str| {
        std::fs::read_to_string(format!("/proc/sys/kernel/{name}"))
            .map(|s| s.trim().to_owned())
            .unwrap_or_default()
    };
    let v = Values::default()
        .value("systemId", Value::Uuid(id.system_id))
        .text("osName", &kernel("ostype"))
        .text("nodeName", &kernel("hostname"))
        .text("release", &kernel("osrelease"))
        .text("version", &kernel("version"))
        .text("machine", std::env::consts::ARCH);
    view.object(
        Class::System,
        uuid_text(&id.system_id),
        v.build(),
        id.started_ns,
    )
}

pub(super) fn vhost(view: &View) -> QmfObject {
    let id = view.identity;
    let v = Values::default()
        .reference("brokerRef", &Class::Broker.object_name(BROKER_KEY))
        .text("name", VHOST_NAME)
        .text("federationTag", &uuid_text(&id.broker_id));
    let name = vhost_object_name();
    let key = name
        .strip_prefix(&Class::Vhost.object_name(""))
        .unwrap_or(VHOST_NAME)
        .to_owned();
    view.object(Class::Vhost, key, v.build(), id.started_ns)
}

/// qpidd fills this with mallinfo(3) figures, all optional; ferry reports none of them
/// (`qpid-stat -m` then prints an empty table, as for a qpidd built without mallinfo).
pub(super) fn memory(view: &View) -> QmfObject {
    let v = Values::default().text("name", BROKER_KEY);
    view.object(
        Class::Memory,
        BROKER_KEY.to_owned(),
        v.build(),
        view.identity.started_ns,
    )
}
