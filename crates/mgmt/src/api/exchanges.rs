//! Exchanges: list, show, declare, delete, their bindings, and test publishing.

use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Extension;
use base64::Engine;
use bytes::Bytes;
use serde_json::{json, Value};

use super::{blocking, check_vhost, created_or_not, flag, object, ok, query_flag, text, Params};
use crate::body::JsonBody;
use crate::error::{ApiError, ApiResult};
use crate::login::Caller;
use crate::paging::ListQuery;
use crate::render::objects::{self as render, DEFAULT_EXCHANGE_PATH};
use crate::render::{args, message, Windows};
use crate::state::App;

/// The exchange a path names: `amq.default` is the nameless default exchange.
pub fn exchange_name(path: &str) -> &str {
    if path == DEFAULT_EXCHANGE_PATH {
        ""
    } else {
        path
    }
}

pub async fn list(State(app): State<Arc<App>>, Query(q): Query<Params>) -> ApiResult<Response> {
    let query = ListQuery::parse(&q)?;
    let ctx = app.ctx(Windows::from_query(&q));
    blocking(move || {
        let exchanges = query.select(app.broker().exchange_statuses(), |e| &e.info.name);
        let exchanges = app
            .stats
            .with(|h| exchanges.attach(|e| h.exchange(&e.info.name)));
        let v = query.render(
            exchanges,
            |(e, _)| &e.info.name,
            |(e, series)| render::exchange(e, series.as_deref(), &ctx),
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

pub async fn show(
    State(app): State<Arc<App>>,
    Path((vhost, name)): Path<(String, String)>,
    Query(q): Query<Params>,
) -> ApiResult<Response> {
    check_vhost(&vhost)?;
    let name = exchange_name(&name).to_owned();
    let ctx = app.ctx(Windows::from_query(&q));
    // Off the runtime's workers: the stats lock may wait behind the sampler's write.
    blocking(move || {
        let e = app
            .broker()
            .exchange(&name)
            .ok_or_else(ApiError::not_found)?;
        let status = ferry_core::ExchangeStatus {
            info: e.info(),
            builtin: e.is_builtin(),
            bindings: e.binding_count(),
            totals: e.counters().totals(),
        };
        let series = app.stats.with(|h| h.exchange(&name));
        Ok(ok(render::exchange(&status, series.as_deref(), &ctx)))
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
    let kind = text(&body, "type")?
        .ok_or_else(|| ApiError::BadRequest("type is required".into()))?
        .to_owned();
    let durable = flag(&body, "durable", true)?;
    let auto_delete = flag(&body, "auto_delete", false)?;
    let internal = flag(&body, "internal", false)?;
    let arguments = args::from_json(body.get("arguments"))?;
    let name = exchange_name(&name).to_owned();
    blocking(move || {
        let created = app.user(&caller).declare_exchange(
            &name,
            &kind,
            durable,
            auto_delete,
            internal,
            arguments,
        )?;
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
    let name = exchange_name(&name).to_owned();
    blocking(move || {
        app.user(&caller).delete_exchange(&name, if_unused)?;
        Ok(StatusCode::NO_CONTENT.into_response())
    })
    .await
}

async fn bindings_where(
    app: Arc<App>,
    vhost: String,
    name: String,
    as_source: bool,
) -> ApiResult<Response> {
    check_vhost(&vhost)?;
    let name = exchange_name(&name).to_owned();
    if app.broker().exchange(&name).is_none() {
        return Err(ApiError::not_found());
    }
    blocking(move || {
        let list: Vec<Value> = app
            .broker()
            .bindings()
            .iter()
            .filter(|b| {
                if as_source {
                    b.source == name
                } else {
                    b.to_exchange && b.destination == name
                }
            })
            .map(render::binding)
            .collect();
        Ok(ok(Value::Array(list)))
    })
    .await
}

pub async fn bindings_source(
    State(app): State<Arc<App>>,
    Path((vhost, name)): Path<(String, String)>,
) -> ApiResult<Response> {
    bindings_where(app, vhost, name, true).await
}

pub async fn bindings_destination(
    State(app): State<Arc<App>>,
    Path((vhost, name)): Path<(String, String)>,
) -> ApiResult<Response> {
    bindings_where(app, vhost, name, false).await
}

/// Publishes one message (RabbitMQ's test publishing): `routing_key`, `payload`,
/// `payload_encoding` (`string` or `base64`), `properties`. Replies `{"routed": bool}`.
pub async fn publish(
    State(app): State<Arc<App>>,
    Extension(caller): Extension<Caller>,
    Path((vhost, name)): Path<(String, String)>,
    JsonBody(body): JsonBody<Value>,
) -> ApiResult<Response> {
    check_vhost(&vhost)?;
    object(&body)?;
    let routing_key = text(&body, "routing_key")?.unwrap_or_default().to_owned();
    let payload = text(&body, "payload")?.unwrap_or_default();
    let payload = match text(&body, "payload_encoding")?.unwrap_or("string") {
        "string" => Bytes::copy_from_slice(payload.as_bytes()),
        "base64" => Bytes::from(
            base64::engine::general_purpose::STANDARD
                .decode(payload)
                .map_err(|e| ApiError::BadRequest(format!("payload is not base64: {e}")))?,
        ),
        other => {
            return Err(ApiError::BadRequest(format!(
                "payload_encoding must be string or base64, not {other}"
            )))
        }
    };
    let properties = message::properties_from_json(body.get("properties"))?;
    let name = exchange_name(&name).to_owned();
    blocking(move || {
        let routed = app
            .user(&caller)
            .publish(&name, &routing_key, &properties, payload)?;
        Ok(ok(json!({ "routed": routed })))
    })
    .await
}
