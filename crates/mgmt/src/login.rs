//! HTTP Basic authentication against ferryd's users, as AMQP clients log in (see
//! `ferry_server::Admin::login`), for every request.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{header, HeaderMap};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use base64::Engine;

use crate::error::ApiError;
use crate::listener::PeerAddr;
use crate::state::App;

/// Who made a request, for handlers (inserted by [`require_login`]).
#[derive(Debug, Clone)]
pub struct Caller {
    pub user: String,
    pub peer: SocketAddr,
}

/// The user name taken for requests without credentials under `--auth no`.
const ANONYMOUS: &str = "anonymous";

/// Lets a request through only with good credentials (any, or none, with `--auth no`).
pub async fn require_login(
    State(app): State<Arc<App>>,
    ConnectInfo(PeerAddr(peer)): ConnectInfo<PeerAddr>,
    mut req: Request,
    next: Next,
) -> Response {
    let scripted = req.headers().contains_key(SCRIPTED);
    let refuse = |reason| {
        let mut response = ApiError::Unauthorized(reason).into_response();
        if scripted {
            response.headers_mut().remove(header::WWW_AUTHENTICATE);
        }
        response
    };
    let user = match basic_credentials(req.headers()) {
        Credentials::Given(user, password) => app.admin.login(&user, &password, peer).await,
        Credentials::None if !app.admin.auth_required() => Some(ANONYMOUS.to_owned()),
        Credentials::None => return refuse("Login failed: no credentials"),
        Credentials::Malformed => return refuse("Login failed: malformed Authorization header"),
    };
    match user {
        Some(user) => {
            req.extensions_mut().insert(Caller { user, peer });
            next.run(req).await
        }
        None => refuse("Login failed"),
    }
}

/// Sent by scripts (the web console; jQuery's convention) that show their own login form:
/// their 401s carry no `WWW-Authenticate`, which would make the browser pop up its own
/// password prompt over the page.
const SCRIPTED: &str = "x-requested-with";

enum Credentials {
    None,
    Malformed,
    Given(String, String),
}

fn basic_credentials(headers: &HeaderMap) -> Credentials {
    let Some(value) = headers.get(header::AUTHORIZATION) else {
        return Credentials::None;
    };
    let parsed = value.to_str().ok().and_then(|v| {
        let (scheme, encoded) = v.trim().split_once(' ')?;
        if !scheme.eq_ignore_ascii_case("basic") {
            return None;
        }
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(encoded.trim())
            .ok()?;
        let text = String::from_utf8(decoded).ok()?;
        let (user, password) = text.split_once(':')?;
        Some((user.to_owned(), password.to_owned()))
    });
    match parsed {
        Some((user, password)) => Credentials::Given(user, password),
        None => Credentials::Malformed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn with(value: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::AUTHORIZATION, HeaderValue::from_str(value).unwrap());
        h
    }

    #[test]
    fn basic_credentials_are_read_and_bad_ones_refused() {
        // "guest:gu:est" — the password may hold colons.
        assert!(matches!(
            basic_credentials(&with("Basic Z3Vlc3Q6Z3U6ZXN0")),
            Credentials::Given(u, p) if u == "guest" && p == "gu:est"
        ));
        assert!(matches!(
            basic_credentials(&HeaderMap::new()),
            Credentials::None
        ));
        for bad in ["Bearer abc", "Basic !!!", "Basic Z3Vlc3Q=", "Basic"] {
            assert!(matches!(
                basic_credentials(&with(bad)),
                Credentials::Malformed
            ));
        }
    }
}
