//! Connections, channels and consumers.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Extension;
use ferry_core::{ConnectionId, ConnectionStatus, SessionStatus};

use super::{blocking, check_vhost, ok, Params};
use crate::error::{ApiError, ApiResult};
use crate::login::Caller;
use crate::paging::ListQuery;
use crate::render::{connections as render, Ctx, Windows};
use crate::state::App;

fn find<'a>(list: &'a [ConnectionStatus], name: &str, ctx: &Ctx) -> Option<&'a ConnectionStatus> {
    // Clients pass back the name we listed; a bare id works too.
    list.iter().find(|c| {
        render::connection_name(c, ctx) == name || name.parse::<ConnectionId>() == Ok(c.id)
    })
}

pub async fn list(State(app): State<Arc<App>>, Query(q): Query<Params>) -> ApiResult<Response> {
    let query = ListQuery::parse(&q)?;
    let ctx = app.ctx(Windows::from_query(&q));
    blocking(move || {
        let list = app.broker().connections().list();
        let names: Vec<(String, ConnectionStatus)> = list
            .into_iter()
            .map(|c| (render::connection_name(&c, &ctx), c))
            .collect();
        let names = query.select(names, |(n, _)| n);
        let names = app
            .stats
            .with(|h| names.attach(|(_, c)| h.connection(c.id)));
        let v = query.render(
            names,
            |((n, _), _)| n,
            |((_, c), series)| render::connection(c, series.as_deref(), &ctx),
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
    Path(name): Path<String>,
    Query(q): Query<Params>,
) -> ApiResult<Response> {
    let ctx = app.ctx(Windows::from_query(&q));
    // Listing locks every connection's sessions, and the stats lock may wait behind the
    // sampler: not on the runtime's workers, which AMQP connections share.
    blocking(move || {
        let list = app.broker().connections().list();
        let c = find(&list, &name, &ctx).ok_or_else(ApiError::not_found)?;
        let series = app.stats.with(|h| h.connection(c.id));
        Ok(ok(render::connection(c, series.as_deref(), &ctx)))
    })
    .await
}

/// Closes a connection; its client is told the `X-Reason` header's text.
pub async fn close(
    State(app): State<Arc<App>>,
    Extension(caller): Extension<Caller>,
    Path(name): Path<String>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let ctx = app.ctx(Windows::default());
    let reason = headers
        .get("x-reason")
        .and_then(|v| v.to_str().ok())
        .filter(|r| !r.is_empty())
        .unwrap_or("Closed via management plugin")
        .to_owned();
    blocking(move || {
        let list = app.broker().connections().list();
        let c = find(&list, &name, &ctx).ok_or_else(ApiError::not_found)?;
        app.user(&caller).close_connection(c.id, &reason)?;
        Ok(StatusCode::NO_CONTENT.into_response())
    })
    .await
}

fn all_channels(list: &[ConnectionStatus], ctx: &Ctx) -> Vec<(String, usize, SessionStatus)> {
    let mut out = Vec::new();
    for (i, c) in list.iter().enumerate() {
        let conn = render::connection_name(c, ctx);
        for s in &c.sessions {
            out.push((format!("{conn} ({})", s.channel), i, s.clone()));
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

pub async fn channels(State(app): State<Arc<App>>, Query(q): Query<Params>) -> ApiResult<Response> {
    let query = ListQuery::parse(&q)?;
    let ctx = app.ctx(Windows::from_query(&q));
    blocking(move || {
        let list = app.broker().connections().list();
        let channels = all_channels(&list, &ctx);
        let v = query.apply(
            channels,
            |(n, _, _)| n,
            |(_, i, s)| render::channel(&list[*i], s, &ctx),
        )?;
        Ok(ok(v))
    })
    .await
}

pub async fn channels_vhost(
    state: State<Arc<App>>,
    Path(vhost): Path<String>,
    q: Query<Params>,
) -> ApiResult<Response> {
    check_vhost(&vhost)?;
    channels(state, q).await
}

pub async fn channel(State(app): State<Arc<App>>, Path(name): Path<String>) -> ApiResult<Response> {
    let ctx = app.ctx(Windows::default());
    blocking(move || {
        let list = app.broker().connections().list();
        let (_, i, s) = all_channels(&list, &ctx)
            .into_iter()
            .find(|(n, _, _)| *n == name)
            .ok_or_else(ApiError::not_found)?;
        Ok(ok(render::channel(&list[i], &s, &ctx)))
    })
    .await
}

pub async fn channels_of(
    State(app): State<Arc<App>>,
    Path(name): Path<String>,
) -> ApiResult<Response> {
    let ctx = app.ctx(Windows::default());
    blocking(move || {
        let list = app.broker().connections().list();
        let c = find(&list, &name, &ctx).ok_or_else(ApiError::not_found)?;
        let v: Vec<_> = c
            .sessions
            .iter()
            .map(|s| render::channel(c, s, &ctx))
            .collect();
        Ok(ok(serde_json::Value::Array(v)))
    })
    .await
}

pub async fn consumers(
    State(app): State<Arc<App>>,
    Query(q): Query<Params>,
) -> ApiResult<Response> {
    let query = ListQuery::parse(&q)?;
    let ctx = app.ctx(Windows::default());
    blocking(move || {
        let broker = app.broker();
        let consumers = broker.consumer_entries();
        let connections: HashMap<ConnectionId, ConnectionStatus> = broker
            .connections()
            .list()
            .into_iter()
            .map(|c| (c.id, c))
            .collect();
        let v = query.apply(
            consumers,
            |e| &e.queue,
            |e| {
                let conn = e.connection.and_then(|id| connections.get(&id));
                render::consumer(e, conn, &ctx)
            },
        )?;
        Ok(ok(v))
    })
    .await
}

pub async fn consumers_vhost(
    state: State<Arc<App>>,
    Path(vhost): Path<String>,
    q: Query<Params>,
) -> ApiResult<Response> {
    check_vhost(&vhost)?;
    consumers(state, q).await
}
