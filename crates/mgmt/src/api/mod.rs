//! The routes: RabbitMQ's management paths under `/api`, `/metrics`, and the web console
//! (`/` and `/console/...`, see `crate::console`).

mod bindings;
mod connections;
mod definitions;
mod exchanges;
mod queues;
mod system;
mod users;

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::DefaultBodyLimit;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use axum::{middleware, Json, Router};
use serde_json::Value;

use crate::body::{BODY_LIMIT, DEFINITIONS_LIMIT};
use crate::error::{ApiError, ApiResult};
use crate::render::VHOST;
use crate::state::App;

/// Query strings, as RabbitMQ's parameters are all optional strings.
pub type Params = HashMap<String, String>;

pub fn router(app: Arc<App>) -> Router {
    let definitions = Router::new()
        .route(
            "/api/definitions",
            get(definitions::export).post(definitions::import),
        )
        .route(
            "/api/definitions/{vhost}",
            get(definitions::export_vhost).post(definitions::import_vhost),
        )
        .layer(DefaultBodyLimit::max(DEFINITIONS_LIMIT));
    let api = Router::new()
        .route("/api/overview", get(system::overview))
        .route("/api/cluster-name", get(system::cluster_name))
        .route("/api/nodes", get(system::nodes))
        .route("/api/nodes/{name}", get(system::node))
        .route("/api/users", get(users::list))
        .route("/api/users/bulk-delete", post(users::bulk_delete))
        .route(
            "/api/users/{name}",
            get(users::show).put(users::put).delete(users::remove),
        )
        .route("/api/whoami", get(users::whoami))
        .route("/api/vhosts", get(system::vhosts))
        .route("/api/vhosts/{vhost}", get(system::vhost))
        .route("/api/extensions", get(system::extensions))
        .route("/api/aliveness-test/{vhost}", get(system::aliveness))
        .route("/api/healthchecks/node", get(system::healthcheck))
        .route("/api/healthchecks/node/{node}", get(system::healthcheck))
        .route("/api/health/checks/alarms", get(system::alarms_check))
        .route("/api/health/checks/local-alarms", get(system::alarms_check))
        .route(
            "/api/health/checks/port-listener/{port}",
            get(system::port_listener_check),
        )
        .route(
            "/api/health/checks/protocol-listener/{protocol}",
            get(system::protocol_listener_check),
        )
        .route(
            "/api/health/checks/virtual-hosts",
            get(system::always_ok_check),
        )
        .route(
            "/api/health/checks/node-is-quorum-critical",
            get(system::always_ok_check),
        )
        .route("/api/connections", get(connections::list))
        .route(
            "/api/connections/{name}",
            get(connections::show).delete(connections::close),
        )
        .route(
            "/api/connections/{name}/channels",
            get(connections::channels_of),
        )
        .route(
            "/api/vhosts/{vhost}/connections",
            get(connections::list_vhost),
        )
        .route("/api/channels", get(connections::channels))
        .route("/api/channels/{name}", get(connections::channel))
        .route(
            "/api/vhosts/{vhost}/channels",
            get(connections::channels_vhost),
        )
        .route("/api/consumers", get(connections::consumers))
        .route("/api/consumers/{vhost}", get(connections::consumers_vhost))
        .route("/api/exchanges", get(exchanges::list))
        .route("/api/exchanges/{vhost}", get(exchanges::list_vhost))
        .route(
            "/api/exchanges/{vhost}/{name}",
            get(exchanges::show)
                .put(exchanges::declare)
                .delete(exchanges::remove),
        )
        .route(
            "/api/exchanges/{vhost}/{name}/bindings/source",
            get(exchanges::bindings_source),
        )
        .route(
            "/api/exchanges/{vhost}/{name}/bindings/destination",
            get(exchanges::bindings_destination),
        )
        .route(
            "/api/exchanges/{vhost}/{name}/publish",
            post(exchanges::publish),
        )
        .route("/api/queues", get(queues::list))
        .route("/api/queues/{vhost}", get(queues::list_vhost))
        .route(
            "/api/queues/{vhost}/{name}",
            get(queues::show)
                .put(queues::declare)
                .delete(queues::remove),
        )
        .route("/api/queues/{vhost}/{name}/contents", delete(queues::purge))
        .route("/api/queues/{vhost}/{name}/get", post(queues::get))
        .route("/api/queues/{vhost}/{name}/bindings", get(queues::bindings))
        .route("/api/bindings", get(bindings::list))
        .route("/api/bindings/{vhost}", get(bindings::list_vhost))
        .route(
            "/api/bindings/{vhost}/e/{source}/{kind}/{destination}",
            get(bindings::between).post(bindings::create),
        )
        .route(
            "/api/bindings/{vhost}/e/{source}/{kind}/{destination}/{props}",
            get(bindings::show).delete(bindings::remove),
        )
        .route("/metrics", get(crate::metrics::scrape))
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
        .merge(definitions);
    api.route_layer(middleware::from_fn_with_state(
        app.clone(),
        crate::login::require_login,
    ))
    // After the login layer, which covers only the routes above: the console's files are
    // public, its data comes from the API with credentials.
    .merge(crate::console::router())
    .fallback(not_found)
    .method_not_allowed_fallback(method_not_allowed)
    .with_state(app)
}

/// The Prometheus listener's one route, open to anyone who can reach it (as RabbitMQ's
/// rabbitmq_prometheus is): it only reads, and leaves out what names users and clients.
pub fn metrics_router(app: Arc<App>) -> Router {
    Router::new()
        .route("/metrics", get(crate::metrics::scrape_open))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .with_state(app)
}

/// RabbitMQ's HTTP server ignores a trailing slash (`/api/queues/` is `/api/queues`), and
/// clients rely on it: AMQPStorm's health check asks for `/api/healthchecks/node/`. axum's
/// routes match exactly, so an API path loses its trailing slash before routing (a layer
/// added to the router would run after the routing). One slash only, as RabbitMQ: in
/// `/api/exchanges/%2F//` the last segment is an (empty) name.
pub fn trim_trailing_slash<B>(mut req: axum::http::Request<B>) -> axum::http::Request<B> {
    let uri = req.uri();
    let path = uri.path();
    let Some(trimmed) = path.strip_suffix('/') else {
        return req;
    };
    if !trimmed.starts_with("/api/") {
        return req;
    }
    let path_and_query = match uri.query() {
        Some(query) => format!("{trimmed}?{query}"),
        None => trimmed.to_owned(),
    };
    let mut parts = uri.clone().into_parts();
    let Ok(path_and_query) = path_and_query.parse() else {
        return req;
    };
    parts.path_and_query = Some(path_and_query);
    if let Ok(uri) = axum::http::Uri::from_parts(parts) {
        *req.uri_mut() = uri;
    }
    req
}

async fn not_found() -> ApiError {
    ApiError::not_found()
}

async fn method_not_allowed() -> ApiError {
    ApiError::MethodNotAllowed
}

/// Paths name the virtual host; there is only "/".
pub fn check_vhost(vhost: &str) -> ApiResult<()> {
    if vhost == VHOST {
        Ok(())
    } else {
        Err(ApiError::NotFound(format!("no vhost '{vhost}'")))
    }
}

/// Runs snapshot work (one lock per queue, rendering thousands of objects) on the blocking
/// pool, so the runtime's workers keep serving AMQP connections.
pub async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> ApiResult<T> + Send + 'static,
) -> ApiResult<T> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| ApiError::Internal(format!("the request's work failed: {e}")))?
}

/// A JSON reply with status 200.
pub fn ok(v: Value) -> Response {
    Json(v).into_response()
}

/// 201 for something created, 204 for something that was already there (RabbitMQ's codes).
pub fn created_or_not(created: bool) -> Response {
    if created {
        StatusCode::CREATED.into_response()
    } else {
        StatusCode::NO_CONTENT.into_response()
    }
}

/// Reads a flag from a JSON body: a boolean, or "true"/"false" as some clients send them.
pub fn flag(body: &Value, key: &str, default: bool) -> ApiResult<bool> {
    match body.get(key) {
        None | Some(Value::Null) => Ok(default),
        Some(Value::Bool(b)) => Ok(*b),
        Some(Value::String(s)) if s == "true" => Ok(true),
        Some(Value::String(s)) if s == "false" => Ok(false),
        Some(v) => Err(ApiError::BadRequest(format!(
            "{key} must be true or false, not {v}"
        ))),
    }
}

/// Reads a string from a JSON body.
pub fn text<'a>(body: &'a Value, key: &str) -> ApiResult<Option<&'a str>> {
    match body.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(v) => Err(ApiError::BadRequest(format!(
            "{key} must be a string, not {v}"
        ))),
    }
}

/// Reads a non-negative number from a JSON body (or its decimal text).
pub fn number(body: &Value, key: &str) -> ApiResult<Option<u64>> {
    match body.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) if n.as_u64().is_some() => Ok(n.as_u64()),
        Some(Value::String(s)) if s.trim().parse::<u64>().is_ok() => Ok(s.trim().parse().ok()),
        Some(v) => Err(ApiError::BadRequest(format!(
            "{key} must be a non-negative integer, not {v}"
        ))),
    }
}

/// The body must be a JSON object.
pub fn object(body: &Value) -> ApiResult<()> {
    if body.is_object() {
        Ok(())
    } else {
        Err(ApiError::BadRequest(
            "the body must be a JSON object".into(),
        ))
    }
}

/// `?if-unused=true` and the like.
pub fn query_flag(params: &Params, key: &str) -> bool {
    params.get(key).is_some_and(|v| v == "true")
}
