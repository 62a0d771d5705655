//! Users: listed from the users file (the built-in guest while there is none), and created,
//! changed and deleted in it as RabbitMQ's API does (see `ferry_server::AdminUser::put_user`).

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Extension;
use ferry_server::{record_of, UserChange, UserInfo};
use serde_json::{json, Value};

use super::{blocking, created_or_not, object, ok, text};
use crate::body::LaterJson;
use crate::error::{ApiError, ApiResult};
use crate::login::Caller;
use crate::state::App;

/// RabbitMQ's user object. `password_hash` is left out for callers who may not change users.
pub fn user_json(user: &UserInfo) -> Value {
    let mut v = json!({ "name": user.name, "tags": user.tags, "limits": {} });
    if let (Some((hash, algorithm)), Value::Object(m)) = (&user.password_hash, &mut v) {
        m.insert("password_hash".into(), json!(hash));
        m.insert("hashing_algorithm".into(), json!(algorithm));
    }
    v
}

// Listing may re-read a replaced users file: off the runtime's workers, as writes are.
pub async fn list(
    State(app): State<Arc<App>>,
    Extension(caller): Extension<Caller>,
) -> ApiResult<Response> {
    blocking(move || {
        let users = app.user(&caller).list_users();
        Ok(ok(users.iter().map(user_json).collect()))
    })
    .await
}

pub async fn show(
    State(app): State<Arc<App>>,
    Extension(caller): Extension<Caller>,
    Path(name): Path<String>,
) -> ApiResult<Response> {
    blocking(move || match app.user(&caller).find_user(&name)? {
        Some(user) => Ok(ok(user_json(&user))),
        None => Err(ApiError::NotFound(format!("no user '{name}'"))),
    })
    .await
}

/// RabbitMQ answers with the caller's tags, which its tools read as what the caller may
/// do. In ferryd only `administrator` counts (for users); the ACL decides the rest.
pub async fn whoami(
    State(app): State<Arc<App>>,
    Extension(caller): Extension<Caller>,
) -> ApiResult<Response> {
    blocking(move || {
        let tags = app.user(&caller).tags();
        Ok(ok(json!({ "name": caller.user, "tags": tags })))
    })
    .await
}

/// `tags` as RabbitMQ takes it: a comma-separated string, or (3.9 on) a list; `None` when
/// absent.
pub fn tags(body: &Value) -> ApiResult<Option<Vec<String>>> {
    let bad = || ApiError::BadRequest("tags must be a string or a list of strings".into());
    let list = match body.get("tags") {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::String(s)) => s
            .split(',')
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .map(str::to_owned)
            .collect(),
        Some(Value::Array(list)) => list
            .iter()
            .map(|t| t.as_str().map(|t| t.trim().to_owned()).ok_or_else(bad))
            .filter(|t| !matches!(t, Ok(t) if t.is_empty()))
            .collect::<ApiResult<Vec<String>>>()?,
        Some(_) => return Err(bad()),
    };
    Ok(Some(list))
}

/// 201 for a user created, 204 for one changed, as RabbitMQ answers.
pub async fn put(
    State(app): State<Arc<App>>,
    Extension(caller): Extension<Caller>,
    Path(name): Path<String>,
    body: LaterJson,
) -> ApiResult<Response> {
    app.user(&caller).check_administrator()?;
    let body: Value = body.parse().await?;
    object(&body)?;
    let record = match text(&body, "password_hash")? {
        Some(hash) => Some(record_of(hash, text(&body, "hashing_algorithm")?)?),
        None => None,
    };
    let change = UserChange {
        password: text(&body, "password")?.map(str::to_owned),
        record,
        tags: tags(&body)?,
    };
    // Deriving a password's keys takes a while on purpose.
    blocking(move || Ok(created_or_not(app.user(&caller).put_user(&name, change)?))).await
}

pub async fn remove(
    State(app): State<Arc<App>>,
    Extension(caller): Extension<Caller>,
    Path(name): Path<String>,
) -> ApiResult<Response> {
    blocking(move || {
        app.user(&caller).delete_user(&name)?;
        Ok(StatusCode::NO_CONTENT.into_response())
    })
    .await
}

/// `POST /api/users/bulk-delete` with `{"users": [names]}`; unknown names are passed over.
pub async fn bulk_delete(
    State(app): State<Arc<App>>,
    Extension(caller): Extension<Caller>,
    body: LaterJson,
) -> ApiResult<Response> {
    app.user(&caller).check_administrator()?;
    let body: Value = body.parse().await?;
    let names = body
        .get("users")
        .and_then(Value::as_array)
        .and_then(|list| {
            list.iter()
                .map(|n| n.as_str().map(str::to_owned))
                .collect::<Option<Vec<String>>>()
        })
        .ok_or_else(|| ApiError::BadRequest("users must be a list of user names".into()))?;
    blocking(move || {
        app.user(&caller).delete_users(&names)?;
        Ok(StatusCode::NO_CONTENT.into_response())
    })
    .await
}
