//! Bindings: `e/{source}/q/{queue}` and `e/{source}/e/{exchange}`, each binding named by
//! its properties key (see `render::objects::properties_key`).

use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Extension;
use ferry_core::BindingStatus;
use serde_json::Value;

use super::exchanges::exchange_name;
use super::{blocking, check_vhost, object, ok, text, Params};
use crate::body::JsonBody;
use crate::error::{ApiError, ApiResult};
use crate::login::Caller;
use crate::paging::ListQuery;
use crate::render::{args, objects as render};
use crate::state::App;

pub async fn list(State(app): State<Arc<App>>, Query(q): Query<Params>) -> ApiResult<Response> {
    let query = ListQuery::parse(&q)?;
    blocking(move || {
        let v = query.apply(app.broker().bindings(), |b| &b.destination, render::binding)?;
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

/// The two ends a path names; `kind` is `q` (a queue) or `e` (an exchange).
struct Ends {
    source: String,
    destination: String,
    to_exchange: bool,
}

fn ends(app: &App, vhost: &str, source: &str, kind: &str, destination: &str) -> ApiResult<Ends> {
    check_vhost(vhost)?;
    let to_exchange = match kind {
        "q" => false,
        "e" => true,
        _ => return Err(ApiError::not_found()),
    };
    let source = exchange_name(source).to_owned();
    let destination = if to_exchange {
        exchange_name(destination).to_owned()
    } else {
        destination.to_owned()
    };
    let broker = app.broker();
    let found = broker.exchange(&source).is_some()
        && if to_exchange {
            broker.exchange(&destination).is_some()
        } else {
            broker.queue(&destination).is_some()
        };
    if !found {
        return Err(ApiError::not_found());
    }
    Ok(Ends {
        source,
        destination,
        to_exchange,
    })
}

fn bindings_between(app: &App, e: &Ends) -> Vec<BindingStatus> {
    app.broker()
        .exchange(&e.source)
        .map(|x| x.bindings())
        .unwrap_or_default()
        .into_iter()
        .filter(|b| b.to_exchange == e.to_exchange && b.destination == e.destination)
        .collect()
}

pub async fn between(
    State(app): State<Arc<App>>,
    Path((vhost, source, kind, destination)): Path<(String, String, String, String)>,
) -> ApiResult<Response> {
    let e = ends(&app, &vhost, &source, &kind, &destination)?;
    let list: Vec<Value> = bindings_between(&app, &e)
        .iter()
        .map(render::binding)
        .collect();
    Ok(ok(Value::Array(list)))
}

/// Binds; the body holds `routing_key` and `arguments`. Replies 201 with the new binding's
/// properties key in `Location`.
pub async fn create(
    State(app): State<Arc<App>>,
    Extension(caller): Extension<Caller>,
    Path((vhost, source, kind, destination)): Path<(String, String, String, String)>,
    JsonBody(body): JsonBody<Value>,
) -> ApiResult<Response> {
    let e = ends(&app, &vhost, &source, &kind, &destination)?;
    object(&body)?;
    let key = text(&body, "routing_key")?.unwrap_or_default().to_owned();
    let arguments = args::from_json(body.get("arguments"))?;
    let props = render::properties_key(&key, &arguments);
    blocking(move || {
        let user = app.user(&caller);
        if e.to_exchange {
            user.bind_exchange(&e.source, &e.destination, &key, &arguments)?;
        } else {
            user.bind_queue(&e.source, &e.destination, &key, &arguments)?;
        }
        let mut response = StatusCode::CREATED.into_response();
        if let Ok(location) = HeaderValue::from_str(&props) {
            response.headers_mut().insert(header::LOCATION, location);
        }
        Ok(response)
    })
    .await
}

fn find(app: &App, e: &Ends, props: &str) -> ApiResult<BindingStatus> {
    bindings_between(app, e)
        .into_iter()
        .find(|b| render::names_binding(props, &b.key, &b.arguments))
        .ok_or_else(ApiError::not_found)
}

pub async fn show(
    State(app): State<Arc<App>>,
    Path((vhost, source, kind, destination, props)): Path<(String, String, String, String, String)>,
) -> ApiResult<Response> {
    let e = ends(&app, &vhost, &source, &kind, &destination)?;
    Ok(ok(render::binding(&find(&app, &e, &props)?)))
}

pub async fn remove(
    State(app): State<Arc<App>>,
    Extension(caller): Extension<Caller>,
    Path((vhost, source, kind, destination, props)): Path<(String, String, String, String, String)>,
) -> ApiResult<Response> {
    let e = ends(&app, &vhost, &source, &kind, &destination)?;
    let b = find(&app, &e, &props)?;
    blocking(move || {
        let user = app.user(&caller);
        if e.to_exchange {
            user.unbind_exchange(&e.source, &e.destination, &b.key, &b.arguments)?;
        } else {
            user.unbind_queue(&e.source, &e.destination, &b.key, &b.arguments)?;
        }
        Ok(StatusCode::NO_CONTENT.into_response())
    })
    .await
}
