//! Connections, channels (0-10 sessions and 0-9-1 channels) and consumers.

use std::net::SocketAddr;

use ferry_core::{ConnectionStatus, ConsumerEntry, SessionStatus};
use serde_json::{json, Map, Value};

use super::{Ctx, VHOST};
use crate::stats::{ConnectionPoint, Kind, Series};

/// RabbitMQ's connection name, `peer -> listener`: what clients pass back to close one.
pub fn connection_name(c: &ConnectionStatus, ctx: &Ctx) -> String {
    format!("{} -> {}", c.meta.peer, local_addr(c, ctx))
}

fn local_addr(c: &ConnectionStatus, ctx: &Ctx) -> SocketAddr {
    match (c.meta.tls, ctx.listeners.amqps) {
        (true, Some(tls)) => tls,
        _ => ctx.listeners.amqp,
    }
}

fn client_properties(c: &ConnectionStatus) -> Value {
    let mut m = Map::new();
    for (k, v) in &c.meta.client_properties {
        m.entry(k.clone()).or_insert_with(|| json!(v));
    }
    Value::Object(m)
}

/// A connection as in RabbitMQ's `/api/connections`.
pub fn connection(
    c: &ConnectionStatus,
    series: Option<&Series<ConnectionPoint>>,
    ctx: &Ctx,
) -> Value {
    let empty = Series::<ConnectionPoint>::empty();
    let s = series.unwrap_or(&empty);
    let w = ctx.windows.data_rates;
    let local = local_addr(c, ctx);
    let t = &c.traffic;
    json!({
        "name": connection_name(c, ctx),
        "ferry_id": c.id,
        "node": ctx.node,
        "vhost": VHOST,
        "type": "network",
        "state": "running",
        "protocol": c.meta.protocol,
        "user": c.meta.user,
        "user_who_performed_action": c.meta.user,
        "connected_at": c.meta.connected_at,
        "host": local.ip().to_string(),
        "port": local.port(),
        "peer_host": c.meta.peer.ip().to_string(),
        "peer_port": c.meta.peer.port(),
        "ssl": c.meta.tls,
        "timeout": c.meta.heartbeat,
        "frame_max": c.meta.frame_max,
        "channel_max": c.meta.channel_max,
        "channels": c.sessions.len(),
        "client_properties": client_properties(c),
        "recv_oct": t.bytes_in,
        "recv_oct_details": s.details(Kind::Counter, w, |p| p.recv_oct),
        "send_oct": t.bytes_out,
        "send_oct_details": s.details(Kind::Counter, w, |p| p.send_oct),
        "recv_cnt": t.frames_in,
    })
}

/// The short form RabbitMQ nests in channels and consumers.
fn connection_details(c: &ConnectionStatus, ctx: &Ctx) -> Value {
    json!({
        "name": connection_name(c, ctx),
        "peer_host": c.meta.peer.ip().to_string(),
        "peer_port": c.meta.peer.port(),
    })
}

fn channel_name(c: &ConnectionStatus, s: &SessionStatus, ctx: &Ctx) -> String {
    format!("{} ({})", connection_name(c, ctx), s.channel)
}

/// A 0-9-1 channel or 0-10 session as in RabbitMQ's `/api/channels`.
pub fn channel(c: &ConnectionStatus, s: &SessionStatus, ctx: &Ctx) -> Value {
    json!({
        "name": channel_name(c, s, ctx),
        "number": s.channel,
        "session_name": s.name,
        "node": ctx.node,
        "vhost": VHOST,
        "user": c.meta.user,
        "user_who_performed_action": c.meta.user,
        "state": "running",
        "connection_details": connection_details(c, ctx),
        "consumer_count": s.consumers,
        "prefetch_count": s.prefetch,
        "global_prefetch_count": 0,
        "messages_unacknowledged": s.unacked,
        "messages_unconfirmed": 0,
        "messages_uncommitted": 0,
        "acks_uncommitted": 0,
        "confirm": s.confirms,
        "transactional": s.transactional,
    })
}

/// A consumer as in RabbitMQ's `/api/consumers`; `conn` is its connection, when known.
pub fn consumer(e: &ConsumerEntry, conn: Option<&ConnectionStatus>, ctx: &Ctx) -> Value {
    // 0-9-1 channels share their connection's owner id: the first channel with consumers
    // stands for them.
    let session = conn.and_then(|c| {
        let mine = c.sessions.iter().filter(|s| s.owner == e.consumer.owner);
        let mut mine: Vec<_> = mine.collect();
        mine.sort_by_key(|s| s.consumers == 0);
        mine.first().copied().map(|s| (c, s))
    });
    let channel_details = match session {
        Some((c, s)) => json!({
            "name": channel_name(c, s, ctx),
            "number": s.channel,
            "connection_name": connection_name(c, ctx),
            "node": ctx.node,
            "peer_host": c.meta.peer.ip().to_string(),
            "peer_port": c.meta.peer.port(),
            "user": c.meta.user,
        }),
        None => json!({}),
    };
    json!({
        "consumer_tag": e.consumer.tag,
        "active": true,
        "activity_status": "up",
        "ack_required": e.consumer.acquire,
        "prefetch_count": session.map_or(0, |(_, s)| s.prefetch),
        "exclusive": e.consumer.exclusive,
        // The selector under the argument name 0-9-1 clients give it, whatever the protocol.
        "arguments": match &e.consumer.selector {
            Some(selector) => json!({ "x-filter-jms-selector": selector }),
            None => json!({}),
        },
        // In milliseconds; null where nothing times out (no-ack, 0-10 and 1.0 consumers, or
        // the timeout off).
        "consumer_timeout": e
            .consumer
            .ack_timeout
            .map(|t| u64::try_from(t.as_millis()).unwrap_or(u64::MAX)),
        "queue": { "name": e.queue, "vhost": VHOST },
        "channel_details": channel_details,
    })
}
