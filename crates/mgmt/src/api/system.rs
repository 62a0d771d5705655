//! The overview, the node, users, virtual hosts and health checks.

use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use bytes::Bytes;
use ferry_amqp091::BasicProperties;
use ferry_server::GetMode;
use serde_json::{json, Value};

use super::{blocking, check_vhost, ok, Params};
use crate::error::{ApiError, ApiResult};
use crate::login::Caller;
use crate::render::{system, Windows, VHOST};
use crate::state::App;

pub async fn overview(State(app): State<Arc<App>>, Query(q): Query<Params>) -> ApiResult<Response> {
    let windows = Windows::from_query(&q);
    blocking(move || {
        let broker = app.broker();
        let o = broker.overview();
        let channels = broker
            .connections()
            .list()
            .iter()
            .map(|c| c.sessions.len())
            .sum();
        Ok(ok(system::overview(&app, &o, channels, &app.ctx(windows))))
    })
    .await
}

fn node_json(app: &App) -> Value {
    let o = app.broker().overview();
    system::node(app, &o, &app.ctx(Windows::default()))
}

/// A single ferryd's cluster name is its node name, as RabbitMQ's is by default (and as the
/// overview's `cluster_name`).
pub async fn cluster_name(State(app): State<Arc<App>>) -> Response {
    ok(json!({ "name": app.node }))
}

pub async fn nodes(State(app): State<Arc<App>>) -> ApiResult<Response> {
    blocking(move || Ok(ok(json!([node_json(&app)])))).await
}

pub async fn node(State(app): State<Arc<App>>, Path(name): Path<String>) -> ApiResult<Response> {
    if name != app.node {
        return Err(ApiError::NotFound(format!("no node '{name}'")));
    }
    blocking(move || Ok(ok(node_json(&app)))).await
}

/// The one virtual host, with the broker's totals (they are the vhost's).
fn vhost_json(app: &App) -> Value {
    let broker = app.broker();
    let o = broker.overview();
    let connections = broker.connections().list();
    let ctx = app.ctx(Windows::default());
    let overview = system::overview(app, &o, 0, &ctx);
    let (recv, send) = connections.iter().fold((0, 0), |(r, s), c| {
        (r + c.traffic.bytes_in, s + c.traffic.bytes_out)
    });
    let totals = &overview["queue_totals"];
    json!({
        "name": VHOST,
        "description": "Default virtual host",
        "tags": [],
        "default_queue_type": "classic",
        "metadata": {"description": "Default virtual host", "tags": [], "default_queue_type": "classic"},
        "tracing": false,
        "cluster_state": { app.node.clone(): "running" },
        "messages": totals["messages"],
        "messages_details": totals["messages_details"],
        "messages_ready": totals["messages_ready"],
        "messages_ready_details": totals["messages_ready_details"],
        "messages_unacknowledged": totals["messages_unacknowledged"],
        "messages_unacknowledged_details": totals["messages_unacknowledged_details"],
        "message_stats": overview["message_stats"],
        "recv_oct": recv,
        "send_oct": send,
    })
}

pub async fn vhosts(State(app): State<Arc<App>>) -> ApiResult<Response> {
    blocking(move || Ok(ok(json!([vhost_json(&app)])))).await
}

pub async fn vhost(State(app): State<Arc<App>>, Path(vhost): Path<String>) -> ApiResult<Response> {
    check_vhost(&vhost)?;
    blocking(move || Ok(ok(vhost_json(&app)))).await
}

/// The management UI's plugin list; ferryd has none.
pub async fn extensions() -> Response {
    ok(json!([]))
}

fn failed(reason: impl Into<String>, extra: Value) -> Response {
    let mut body = json!({ "status": "failed", "reason": reason.into() });
    if let (Value::Object(b), Value::Object(e)) = (&mut body, extra) {
        b.extend(e);
    }
    (StatusCode::SERVICE_UNAVAILABLE, Json(body)).into_response()
}

fn passed() -> Response {
    ok(json!({ "status": "ok" }))
}

/// RabbitMQ's aliveness test: declares queue `aliveness-test`, publishes a message to it and
/// gets it back, as the caller (so the ACL must allow that).
pub async fn aliveness(
    State(app): State<Arc<App>>,
    Extension(caller): Extension<Caller>,
    Path(vhost): Path<String>,
) -> ApiResult<Response> {
    check_vhost(&vhost)?;
    blocking(move || {
        const QUEUE: &str = "aliveness-test";
        let user = app.user(&caller);
        user.declare_queue(QUEUE, false, false, Default::default())?;
        let routed = user.publish(
            "",
            QUEUE,
            &BasicProperties::default(),
            Bytes::from_static(b"test_message"),
        )?;
        let got = user.get(QUEUE, 1, GetMode::Ack)?;
        if routed && got.first().is_some_and(|m| &m.body[..] == b"test_message") {
            Ok(passed())
        } else {
            Ok(failed("the test message did not come back", json!({})))
        }
    })
    .await
}

/// The node is healthy unless its store failed.
pub async fn healthcheck(State(app): State<Arc<App>>) -> Response {
    match app.broker().journal() {
        Some(j) if j.is_failed() => failed("the store failed", json!({})),
        _ => passed(),
    }
}

pub async fn alarms_check(State(app): State<Arc<App>>) -> Response {
    let alarms = app.broker().alarms().raised();
    if alarms.is_empty() {
        return passed();
    }
    let list: Vec<Value> = alarms
        .iter()
        .map(|a| json!({ "node": app.node, "resource": a }))
        .collect();
    failed("resource alarm(s) in effect", json!({ "alarms": list }))
}

pub async fn port_listener_check(
    State(app): State<Arc<App>>,
    Path(port): Path<String>,
) -> Response {
    let l = app.admin.listeners();
    let ports = [
        Some(l.amqp.port()),
        l.amqps.map(|a| a.port()),
        Some(app.addr.port()),
    ];
    match port.parse::<u16>() {
        Ok(p) if ports.contains(&Some(p)) => passed(),
        Ok(p) => failed(
            format!("no active listener on port {p}"),
            json!({ "missing": p, "ports": ports.iter().flatten().collect::<Vec<_>>() }),
        ),
        Err(_) => ApiError::BadRequest(format!("{port} is not a port")).into_response(),
    }
}

pub async fn protocol_listener_check(
    State(app): State<Arc<App>>,
    Path(protocol): Path<String>,
) -> Response {
    let tls = app.admin.listeners().amqps.is_some();
    let known = match protocol.as_str() {
        "amqp" | "amqp091" | "amqp0-9-1" | "amqp010" | "amqp0-10" | "http" | "prometheus" => true,
        "amqp/ssl" | "amqps" => tls,
        _ => false,
    };
    if known {
        passed()
    } else {
        let mut active = vec!["amqp", "http"];
        if tls {
            active.push("amqp/ssl");
        }
        failed(
            format!("no active listener for protocol {protocol}"),
            json!({ "missing": protocol, "protocols": active }),
        )
    }
}

/// Checks about clustering and virtual hosts that hold trivially for one node and one
/// virtual host.
pub async fn always_ok_check() -> Response {
    passed()
}
