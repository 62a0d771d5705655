//! Queues: list, show, declare, delete, purge, get, and their bindings.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Extension;
use ferry_core::{ConnectionId, ConnectionStatus};
use ferry_server::GetMode;
use serde_json::Value;

use super::{
    blocking, check_vhost, created_or_not, flag, number, object, ok, query_flag, text, Params,
};
use crate::body::JsonBody;
use crate::error::{ApiError, ApiResult};
use crate::login::Caller;
use crate::paging::ListQuery;
use crate::render::message::{got_to_json, PayloadEncoding};
use crate::render::{args, connections, objects as render, Windows};
use crate::state::App;

/// Most messages one get request may take: each is held in the reply.
const MAX_GET: u64 = 10_000;

pub async fn list(State(app): State<Arc<App>>, Query(q): Query<Params>) -> ApiResult<Response> {
    let query = ListQuery::parse(&q)?;
    let ctx = app.ctx(Windows::from_query(&q));
    blocking(move || {
        let queues = query.select(app.broker().queue_statuses(), |q| &q.name);
        let queues = app.stats.with(|h| queues.attach(|q| h.queue(&q.name)));
        let v = query.render(
            queues,
            |(q, _)| &q.name,
            |(q, series)| render::queue(q, series.as_deref(), &ctx),
        )?;
        Ok(ok(v))
    })
    .await
}

pub async fn list_vhost(
    state: State<Arc<App>>,
    Path(vhost): Path<String>,
    q: Query<Params>,
) -> ApiResult<Response> {
    check_vhost(&vhost)?;
    list(state, q).await
}

/// One queue, with its consumers (`consumer_details`) as RabbitMQ adds them.
pub async fn show(
    State(app): State<Arc<App>>,
    Path((vhost, name)): Path<(String, String)>,
    Query(q): Query<Params>,
) -> ApiResult<Response> {
    check_vhost(&vhost)?;
    let ctx = app.ctx(Windows::from_query(&q));
    blocking(move || {
        let broker = app.broker();
        let status = broker.queue_status(&name).ok_or_else(ApiError::not_found)?;
        let series = app.stats.with(|h| h.queue(&name));
        let mut v = render::queue(&status, series.as_deref(), &ctx);
        // This queue's consumers and their connections only: every queue's consumers, or
        // every connection, cost as much as the whole broker's list.
        let entries = broker.consumer_entries_of(&status);
        let mut conns: HashMap<ConnectionId, Option<ConnectionStatus>> = HashMap::new();
        for id in entries.iter().filter_map(|e| e.connection) {
            conns
                .entry(id)
                .or_insert_with(|| broker.connections().get(id));
        }
        let details: Vec<Value> = entries
            .iter()
            .map(|e| {
                let conn = e
                    .connection
                    .and_then(|id| conns.get(&id))
                    .and_then(Option::as_ref);
                connections::consumer(e, conn, &ctx)
            })
            .collect();
        if let Value::Object(m) = &mut v {
            m.insert("consumer_details".into(), Value::Array(details));
        }
        Ok(ok(v))
    })
    .await
}

pub async fn declare(
    State(app): State<Arc<App>>,
    Extension(caller): Extension<Caller>,
    Path((vhost, name)): Path<(String, String)>,
    JsonBody(body): JsonBody<Value>,
) -> ApiResult<Response> {
    check_vhost(&vhost)?;
    object(&body)?;
    let durable = flag(&body, "durable", true)?;
    let auto_delete = flag(&body, "auto_delete", false)?;
    let arguments = args::from_json(body.get("arguments"))?;
    blocking(move || {
        let created = app
            .user(&caller)
            .declare_queue(&name, durable, auto_delete, arguments)?;
        Ok(created_or_not(created))
    })
    .await
}

pub async fn remove(
    State(app): State<Arc<App>>,
    Extension(caller): Extension<Caller>,
    Path((vhost, name)): Path<(String, String)>,
    Query(q): Query<Params>,
) -> ApiResult<Response> {
    check_vhost(&vhost)?;
    let if_unused = query_flag(&q, "if-unused");
    let if_empty = query_flag(&q, "if-empty");
    blocking(move || {
        app.user(&caller).delete_queue(&name, if_unused, if_empty)?;
        Ok(StatusCode::NO_CONTENT.into_response())
    })
    .await
}

pub async fn purge(
    State(app): State<Arc<App>>,
    Extension(caller): Extension<Caller>,
    Path((vhost, name)): Path<(String, String)>,
) -> ApiResult<Response> {
    check_vhost(&vhost)?;
    blocking(move || {
        app.user(&caller).purge_queue(&name)?;
        Ok(StatusCode::NO_CONTENT.into_response())
    })
    .await
}

/// Takes messages: `count`, `ackmode` (`ack_requeue_true`, `ack_requeue_false`,
/// `reject_requeue_true`, `reject_requeue_false`), `encoding` (`auto`, `base64`),
/// `truncate` (bytes of each payload to show).
pub async fn get(
    State(app): State<Arc<App>>,
    Extension(caller): Extension<Caller>,
    Path((vhost, name)): Path<(String, String)>,
    JsonBody(body): JsonBody<Value>,
) -> ApiResult<Response> {
    check_vhost(&vhost)?;
    object(&body)?;
    let count = number(&body, "count")?.unwrap_or(1).min(MAX_GET) as usize;
    let mode = match text(&body, "ackmode")? {
        Some("ack_requeue_true" | "reject_requeue_true") => GetMode::Requeue,
        Some("ack_requeue_false") => GetMode::Ack,
        Some("reject_requeue_false") => GetMode::Reject,
        Some(other) => return Err(ApiError::BadRequest(format!("unknown ackmode {other}"))),
        // RabbitMQ before 3.7 took `requeue` instead.
        None if flag(&body, "requeue", true)? => GetMode::Requeue,
        None => GetMode::Ack,
    };
    let encoding = match text(&body, "encoding")?.unwrap_or("auto") {
        "auto" => PayloadEncoding::Auto,
        "base64" => PayloadEncoding::Base64,
        other => return Err(ApiError::BadRequest(format!("unknown encoding {other}"))),
    };
    let truncate = number(&body, "truncate")?.map(|n| n as usize);
    blocking(move || {
        let got = app.user(&caller).get(&name, count, mode)?;
        let v: Vec<Value> = got
            .iter()
            .map(|m| got_to_json(m, encoding, truncate))
            .collect();
        Ok(ok(Value::Array(v)))
    })
    .await
}

pub async fn bindings(
    State(app): State<Arc<App>>,
    Path((vhost, name)): Path<(String, String)>,
) -> ApiResult<Response> {
    check_vhost(&vhost)?;
    if app.broker().queue(&name).is_none() {
        return Err(ApiError::not_found());
    }
    blocking(move || {
        let list: Vec<Value> = app
            .broker()
            .bindings()
            .iter()
            .filter(|b| !b.to_exchange && b.destination == name)
            .map(render::binding)
            .collect();
        Ok(ok(Value::Array(list)))
    })
    .await
}
