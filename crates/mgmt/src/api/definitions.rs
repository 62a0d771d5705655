//! Definitions: export the broker's exchanges, queues and bindings (and its users, with their
//! tags, and their password records for a caller who may change users) as RabbitMQ's
//! definitions file; import users, exchanges, queues and bindings from one. A user is
//! imported with a password record of ferryd's own or RabbitMQ's SHA-256/512 hash (so a
//! RabbitMQ export brings its users); one without a hash, with MD5, or guest/guest is passed
//! over and logged. Permissions, policies and parameters are ignored: ferryd's rules live in its ACL
//! file.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Extension;
use ferry_server::{record_of, AdminUser, UserChange};
use serde_json::{json, Value};

use super::{blocking, check_vhost, flag, object, ok, text, users};
use crate::body::JsonBody;
use crate::error::{ApiError, ApiResult};
use crate::login::Caller;
use crate::render::system::MANAGEMENT_VERSION;
use crate::render::{args, VHOST};
use crate::state::App;

/// Exchanges, queues and bindings a client declared (built-in exchanges, exclusive queues
/// and the default exchange's implicit bindings are the broker's own).
fn objects(app: &App, with_vhost: bool) -> (Vec<Value>, Vec<Value>, Vec<Value>) {
    let broker = app.broker();
    let tag = |mut v: Value| {
        if with_vhost {
            if let Value::Object(m) = &mut v {
                m.insert("vhost".into(), json!(VHOST));
            }
        }
        v
    };
    let exchanges = broker
        .exchange_statuses()
        .into_iter()
        // Built-in exchanges, and the ones the broker makes for itself (names clients may
        // not take: the QMF agent's), belong to whatever broker imports the definitions.
        .filter(|e| !e.builtin && !is_reserved(&e.info.name))
        .map(|e| {
            tag(json!({
                "name": e.info.name,
                "type": e.info.kind.name(),
                "durable": e.info.durable,
                "auto_delete": e.info.auto_delete,
                "internal": e.info.internal,
                "arguments": args::to_json(&e.info.arguments),
            }))
        })
        .collect();
    let statuses = broker.queue_statuses();
    let exported: std::collections::HashSet<&str> = statuses
        .iter()
        .filter(|q| q.owner.is_none())
        .map(|q| q.name.as_str())
        .collect();
    let queues = statuses
        .iter()
        .filter(|q| q.owner.is_none())
        .map(|q| {
            tag(json!({
                "name": q.name,
                "durable": q.durable,
                "auto_delete": q.auto_delete,
                "arguments": args::to_json(&q.arguments),
            }))
        })
        .collect();
    let bindings = broker
        .bindings()
        .into_iter()
        .filter(|b| !b.source.is_empty())
        .filter(|b| b.to_exchange || exported.contains(b.destination.as_str()))
        .map(|b| {
            tag(json!({
                "source": b.source,
                "destination": b.destination,
                "destination_type": if b.to_exchange { "exchange" } else { "queue" },
                "routing_key": b.key,
                "arguments": args::to_json(&b.arguments),
            }))
        })
        .collect();
    (exchanges, queues, bindings)
}

pub async fn export(
    State(app): State<Arc<App>>,
    Extension(caller): Extension<Caller>,
) -> ApiResult<Response> {
    blocking(move || {
        let (exchanges, queues, bindings) = objects(&app, true);
        let users: Vec<Value> = app
            .user(&caller)
            .list_users()
            .iter()
            .map(super::users::user_json)
            .collect();
        Ok(ok(json!({
            "rabbit_version": MANAGEMENT_VERSION,
            "rabbitmq_version": MANAGEMENT_VERSION,
            "product_name": "Ferry",
            "product_version": env!("CARGO_PKG_VERSION"),
            "users": users,
            "vhosts": [{ "name": VHOST, "limits": [], "metadata": {"description": "Default virtual host", "tags": []} }],
            "permissions": [],
            "topic_permissions": [],
            "parameters": [],
            "global_parameters": [],
            "policies": [],
            "queues": queues,
            "exchanges": exchanges,
            "bindings": bindings,
        })))
    })
    .await
}

pub async fn export_vhost(
    State(app): State<Arc<App>>,
    Path(vhost): Path<String>,
) -> ApiResult<Response> {
    check_vhost(&vhost)?;
    blocking(move || {
        let (exchanges, queues, bindings) = objects(&app, false);
        Ok(ok(json!({
            "rabbit_version": MANAGEMENT_VERSION,
            "rabbitmq_version": MANAGEMENT_VERSION,
            "parameters": [],
            "policies": [],
            "queues": queues,
            "exchanges": exchanges,
            "bindings": bindings,
        })))
    })
    .await
}

/// The entries of `key` (absent: none) whose vhost is "/" (or absent, for a vhost import).
fn entries<'a>(body: &'a Value, key: &str) -> ApiResult<Vec<&'a Value>> {
    match body.get(key) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => Ok(items
            .iter()
            .filter(|i| i.get("vhost").and_then(Value::as_str).unwrap_or(VHOST) == VHOST)
            .collect()),
        Some(_) => Err(ApiError::BadRequest(format!("{key} must be a list"))),
    }
}

fn required<'a>(v: &'a Value, key: &str, what: &str) -> ApiResult<&'a str> {
    text(v, key)?.ok_or_else(|| ApiError::BadRequest(format!("{what} without a {key}")))
}

/// Creates or replaces the users `body` lists, with their tags, and passes over (with a log
/// line) those whose password ferryd cannot check: no hash (RabbitMQ's passwordless users),
/// or a kind it does not keep (MD5); and RabbitMQ's default guest/guest.
fn import_users(user: &AdminUser, body: &Value) -> ApiResult<()> {
    let Some(list) = body.get("users").filter(|u| !u.is_null()) else {
        return Ok(());
    };
    let list = list
        .as_array()
        .ok_or_else(|| ApiError::BadRequest("users must be a list".into()))?;
    for u in list {
        let name = required(u, "name", "a user")?;
        let hash = text(u, "password_hash")?.unwrap_or_default();
        let record = match record_of(hash, text(u, "hashing_algorithm")?) {
            // RabbitMQ's exports carry its default guest/guest administrator: taking it would
            // bring that login back (from loopback) where the operator had dropped guest.
            Ok(record) if name == "guest" && record.verify_password("guest") => {
                tracing::warn!(
                    "definitions import: user \"guest\" passed over: its password is \
                     \"guest\"; add it with ferry user add, or PUT /api/users/guest"
                );
                continue;
            }
            Ok(record) => record,
            Err(e) => {
                // Quoted: the name comes from the request, unchecked so far.
                tracing::warn!(
                    "definitions import: user {name:?} passed over: {e}; add it with ferry \
                     user add, or PUT /api/users/NAME"
                );
                continue;
            }
        };
        let change = UserChange {
            password: None,
            record: Some(record),
            tags: Some(users::tags(u)?.unwrap_or_default()),
        };
        user.put_user(name, change)
            .map_err(ApiError::from)
            .map_err(|e| annotate(e, &format!("user '{name}'")))?;
    }
    Ok(())
}

/// Declares what `body` lists, users first, then exchanges, queues and bindings; stops at
/// the first refusal, naming the object.
fn import_all(user: &AdminUser, body: &Value, with_users: bool) -> ApiResult<()> {
    object(body)?;
    if with_users {
        import_users(user, body)?;
    }
    let context = |what: String| move |e: ApiError| annotate(e, &what);
    for e in entries(body, "exchanges")? {
        let name = required(e, "name", "an exchange")?;
        let kind = text(e, "type")?.unwrap_or("direct");
        let arguments = args::from_json(e.get("arguments"))?;
        // Built-in exchanges (in files exported elsewhere) are here already, and reserved.
        if name.is_empty() || name.starts_with("amq.") {
            continue;
        }
        user.declare_exchange(
            name,
            kind,
            flag(e, "durable", true)?,
            flag(e, "auto_delete", false)?,
            flag(e, "internal", false)?,
            arguments,
        )
        .map_err(ApiError::from)
        .map_err(context(format!("exchange '{name}'")))?;
    }
    for q in entries(body, "queues")? {
        let name = required(q, "name", "a queue")?;
        let arguments = args::from_json(q.get("arguments"))?;
        user.declare_queue(
            name,
            flag(q, "durable", true)?,
            flag(q, "auto_delete", false)?,
            arguments,
        )
        .map_err(ApiError::from)
        .map_err(context(format!("queue '{name}'")))?;
    }
    for b in entries(body, "bindings")? {
        let source = required(b, "source", "a binding")?;
        let destination = required(b, "destination", "a binding")?;
        let key = text(b, "routing_key")?.unwrap_or_default();
        let arguments = args::from_json(b.get("arguments"))?;
        let what = format!("binding of '{destination}' to '{source}'");
        let done = match text(b, "destination_type")?.unwrap_or("queue") {
            "queue" => user.bind_queue(source, destination, key, &arguments),
            "exchange" => user.bind_exchange(source, destination, key, &arguments),
            other => {
                return Err(ApiError::BadRequest(format!(
                    "{what}: destination_type {other}"
                )))
            }
        };
        done.map_err(ApiError::from).map_err(context(what))?;
    }
    Ok(())
}

fn annotate(e: ApiError, what: &str) -> ApiError {
    match e {
        ApiError::BadRequest(r) => ApiError::BadRequest(format!("{what}: {r}")),
        ApiError::Forbidden(r) => ApiError::Forbidden(format!("{what}: {r}")),
        ApiError::NotFound(r) => ApiError::BadRequest(format!("{what}: {r}")),
        ApiError::Unavailable(r) => ApiError::Unavailable(format!("{what}: {r}")),
        other => other,
    }
}

pub async fn import(
    State(app): State<Arc<App>>,
    Extension(caller): Extension<Caller>,
    JsonBody(body): JsonBody<Value>,
) -> ApiResult<Response> {
    blocking(move || {
        // With --auth no there are no users to import into (nor any that log in).
        let with_users = app.admin.auth_required();
        import_all(&app.user(&caller), &body, with_users)?;
        Ok(StatusCode::NO_CONTENT.into_response())
    })
    .await
}

/// A virtual host's definitions hold no users (RabbitMQ's neither), whatever the body says.
pub async fn import_vhost(
    State(app): State<Arc<App>>,
    Extension(caller): Extension<Caller>,
    Path(vhost): Path<String>,
    JsonBody(body): JsonBody<Value>,
) -> ApiResult<Response> {
    check_vhost(&vhost)?;
    blocking(move || {
        import_all(&app.user(&caller), &body, false)?;
        Ok(StatusCode::NO_CONTENT.into_response())
    })
    .await
}

/// Exchange names only the broker itself may create.
fn is_reserved(name: &str) -> bool {
    name.starts_with("amq.") || name.starts_with("qmf.") || name.starts_with("qpid.")
}
