//! The overview and the node.

use ferry_core::Overview;
use serde_json::{json, Value};

use super::Ctx;
use crate::process;
use crate::state::App;
use crate::stats::{Churn, Kind, OverviewPoint, Series};

/// What RabbitMQ's clients read for the version; Ferry implements the 3.x management API.
pub const MANAGEMENT_VERSION: &str = "3.10.0";

fn exchange_types() -> Value {
    json!([
        {"name": "direct", "description": "AMQP direct exchange, as per the AMQP specification", "enabled": true},
        {"name": "fanout", "description": "AMQP fanout exchange, as per the AMQP specification", "enabled": true},
        {"name": "headers", "description": "AMQP headers exchange, as per the AMQP specification", "enabled": true},
        {"name": "topic", "description": "AMQP topic exchange, as per the AMQP specification", "enabled": true},
    ])
}

fn listeners(app: &App, ctx: &Ctx) -> Value {
    let l = ctx.listeners;
    let mut out = vec![json!({
        "node": ctx.node, "protocol": "amqp",
        "ip_address": l.amqp.ip().to_string(), "port": l.amqp.port(),
    })];
    if let Some(tls) = l.amqps {
        out.push(json!({
            "node": ctx.node, "protocol": "amqp/ssl",
            "ip_address": tls.ip().to_string(), "port": tls.port(),
        }));
    }
    out.push(json!({
        "node": ctx.node, "protocol": "http",
        "ip_address": app.addr.ip().to_string(), "port": app.addr.port(),
    }));
    Value::Array(out)
}

/// RabbitMQ's `/api/overview`. `o` is a fresh snapshot; rates come from the sampler,
/// counters include queues and exchanges deleted since the start (as far as sampled).
pub fn overview(app: &App, o: &Overview, channels: usize, ctx: &Ctx) -> Value {
    let series = app.stats.overview();
    let retired = app.stats.retired();
    let s: &Series<OverviewPoint> = &series;
    let w = &ctx.windows;
    let q = &o.queue_totals;
    let e = &o.exchange_totals;
    let msg = |kind, f: fn(&OverviewPoint) -> u64| s.details(kind, w.msg_rates, f);
    let len = |f: fn(&OverviewPoint) -> u64| s.details(Kind::Gauge, w.lengths, f);
    let version = env!("CARGO_PKG_VERSION");
    json!({
        "management_version": MANAGEMENT_VERSION,
        "rates_mode": "basic",
        "sample_retention_policies": {"global": [600, 3600], "basic": [60], "detailed": []},
        "exchange_types": exchange_types(),
        "product_name": "Ferry",
        "product_version": version,
        "rabbitmq_version": MANAGEMENT_VERSION,
        "cluster_name": ctx.node,
        "erlang_version": "",
        "erlang_full_version": "",
        "disable_stats": false,
        "enable_queue_totals": true,
        "node": ctx.node,
        "statistics_db_event_queue": 0,
        "message_stats": {
            "publish": e.messages_in + retired.exchanges.publish_in,
            "publish_details": msg(Kind::Counter, |p| p.exchanges.publish_in),
            "deliver_get": q.delivered + retired.queues.deliver_get,
            "deliver_get_details": msg(Kind::Counter, |p| p.queues.deliver_get),
            "redeliver": q.redelivered + retired.queues.redeliver,
            "redeliver_details": msg(Kind::Counter, |p| p.queues.redeliver),
            "ack": q.acked + retired.queues.ack,
            "ack_details": msg(Kind::Counter, |p| p.queues.ack),
            "drop_unroutable": e.unroutable + retired.exchanges.unroutable,
            "drop_unroutable_details": msg(Kind::Counter, |p| p.exchanges.unroutable),
        },
        "churn_rates": churn(s, w.msg_rates),
        "queue_totals": {
            "messages": o.messages_ready + o.messages_unacked,
            "messages_details": len(|p| p.queues.messages),
            "messages_ready": o.messages_ready,
            "messages_ready_details": len(|p| p.queues.ready),
            "messages_unacknowledged": o.messages_unacked,
            "messages_unacknowledged_details": len(|p| p.queues.unacked),
        },
        "object_totals": {
            "connections": o.connections,
            "channels": channels,
            "exchanges": o.exchanges,
            "queues": o.queues,
            "consumers": o.consumers,
        },
        "listeners": listeners(app, ctx),
        "contexts": [{
            "node": ctx.node, "description": "Ferry Management", "path": "/",
            "port": app.addr.port().to_string(),
        }],
        "ferry": {
            "memory_used": o.memory_used,
            "bytes_ready": o.bytes_ready,
            "bytes_unacked": o.bytes_unacked,
            "alarms": o.alarms,
            "store": o.store.as_ref().map(|s| json!({
                "segments": s.segments,
                "disk_bytes": s.disk_bytes,
                "live_bytes": s.live_bytes,
                "records": s.records,
                "syncs": s.syncs,
                "failed": s.failed,
            })),
        },
    })
}

/// A churn_rates field and how to read it.
type ChurnField = (&'static str, fn(&Churn) -> u64);

/// RabbitMQ's `churn_rates`: objects created and closed, as the sampler saw them.
fn churn(s: &Series<OverviewPoint>, w: Option<crate::stats::Window>) -> Value {
    let last = s.last().map(|p| p.churn).unwrap_or_default();
    let mut out = serde_json::Map::new();
    let fields: [ChurnField; 6] = [
        ("connection_created", |c| c.connection_created),
        ("connection_closed", |c| c.connection_closed),
        ("channel_created", |c| c.channel_created),
        ("channel_closed", |c| c.channel_closed),
        ("queue_created", |c| c.queue_created),
        ("queue_deleted", |c| c.queue_deleted),
    ];
    for (name, f) in fields {
        out.insert(name.into(), json!(f(&last)));
        out.insert(
            format!("{name}_details"),
            s.details(Kind::Counter, w, |p| f(&p.churn)),
        );
    }
    // Redeclarations are not seen by sampling.
    out.insert("queue_declared".into(), json!(last.queue_created));
    Value::Object(out)
}

/// RabbitMQ's `auth_mechanisms`: each mechanism with whether AMQP clients may use it.
fn auth_mechanisms(app: &App) -> Value {
    app.admin
        .auth_mechanisms()
        .into_iter()
        .map(|(name, enabled)| {
            let description = match name {
                "AMQPLAIN" => "AMQP 0-9-1's field-table form of PLAIN".to_owned(),
                "EXTERNAL" => "SASL EXTERNAL: the TLS client certificate's name".to_owned(),
                _ => format!("SASL {name}"),
            };
            json!({"name": name, "description": description, "enabled": enabled})
        })
        .collect()
}

/// RabbitMQ's `/api/nodes` entry for this broker.
pub fn node(app: &App, o: &Overview, ctx: &Ctx) -> Value {
    let broker = app.broker();
    let mem_limit = broker.config().memory_watermarks.map_or(0, |w| w.high);
    let processors = std::thread::available_parallelism().map_or(1, |n| n.get());
    json!({
        "name": ctx.node,
        "type": "disc",
        "running": true,
        "being_drained": false,
        "os_pid": std::process::id().to_string(),
        "uptime": app.started.elapsed().as_millis() as u64,
        "processors": processors,
        "run_queue": 0,
        "rates_mode": "basic",
        "mem_used": process::resident_bytes(),
        "mem_limit": mem_limit,
        "mem_alarm": o.alarms.contains(&"memory"),
        "disk_free_alarm": o.alarms.contains(&"disk"),
        "fd_used": process::open_fds(),
        "fd_total": process::max_fds(),
        "sockets_used": o.connections,
        "sockets_total": app.admin.max_connections(),
        "mem_calculation_strategy": "rss",
        "net_ticktime": 0,
        "contexts": [{
            "description": "Ferry Management", "path": "/", "port": app.addr.port().to_string(),
        }],
        "auth_mechanisms": auth_mechanisms(app),
        "cluster_links": [],
        "config_files": [],
        "log_files": [],
        "proc_used": 0,
        "proc_total": 0,
        "partitions": [],
        "applications": [],
        "enabled_plugins": [],
        "exchange_types": exchange_types(),
        "product_name": "Ferry",
        "product_version": env!("CARGO_PKG_VERSION"),
        "ferry": {
            "queued_bytes": o.memory_used,
        },
    })
}
