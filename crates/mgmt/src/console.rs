//! The web console: static files (HTML, CSS, JavaScript modules) compiled into the binary
//! by `build.rs`, served without login — they hold nothing secret; the console logs in to
//! the API with each request as any other client does.
//!
//! `/` is the index, revalidated on every load (`no-cache` with an ETag). It loads the
//! assets from `console/<build id>/...`, which changes whenever any file does, so those
//! may be cached for ever (`immutable`); `console/<file>` without the id also works, with
//! revalidation, for whoever types it.

use axum::extract::Path;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;

use crate::error::ApiError;

/// One embedded file.
pub struct Asset {
    /// Relative to `console/`, with `/` separators.
    pub path: &'static str,
    pub content_type: &'static str,
    /// Quoted, as the header carries it.
    pub etag: &'static str,
    pub body: &'static [u8],
}

include!(concat!(env!("OUT_DIR"), "/console_assets.rs"));

/// The index's policy: scripts, styles and API calls from this origin only, no inline
/// script or style, no framing. The console never needs more; a queue name that got into
/// the page as markup could still run nothing.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
                   img-src 'self' data:; connect-src 'self'; base-uri 'none'; \
                   form-action 'none'; frame-ancestors 'none'";

const REVALIDATE: &str = "no-cache";
const FOREVER: &str = "public, max-age=31536000, immutable";

pub fn asset(path: &str) -> Option<&'static Asset> {
    ASSETS.iter().find(|a| a.path == path)
}

pub fn router<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route("/", get(index))
        .route("/console/{*path}", get(file))
}

async fn index(headers: HeaderMap) -> Response {
    let index = asset("index.html").expect("build.rs embeds index.html");
    let mut response = serve(index, REVALIDATE, &headers);
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    response
}

async fn file(Path(path): Path<String>, headers: HeaderMap) -> Response {
    let (path, cache) = match path.split_once('/') {
        Some((id, rest)) if id == BUILD_ID => (rest, FOREVER),
        _ => (path.as_str(), REVALIDATE),
    };
    match asset(path).filter(|a| a.path != "index.html") {
        Some(a) => serve(a, cache, &headers),
        None => ApiError::not_found().into_response(),
    }
}

fn serve(a: &'static Asset, cache: &'static str, request: &HeaderMap) -> Response {
    let fresh = request
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == a.etag || t.trim() == "*"));
    let mut response = if fresh {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        a.body.into_response()
    };
    let h = response.headers_mut();
    if !fresh {
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static(a.content_type),
        );
    }
    h.insert(header::ETAG, HeaderValue::from_static(a.etag));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static(cache));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_index_points_at_versioned_assets_that_exist() {
        let index = std::str::from_utf8(asset("index.html").unwrap().body).unwrap();
        assert!(!index.contains("@ASSETS@"));
        let prefix = format!("console/{BUILD_ID}/");
        let mut found = 0;
        for part in index.split(&prefix).skip(1) {
            let path = &part[..part.find('"').unwrap()];
            assert!(
                asset(path).is_some(),
                "index.html names {path}, not embedded"
            );
            found += 1;
        }
        assert!(found >= 2, "the index loads its stylesheet and script");
    }

    #[test]
    fn the_console_builds_no_markup_from_strings() {
        // Everything from the server (queue names are user data) reaches the page as text
        // nodes through js/dom.js; none of these may appear in the console's code.
        for a in ASSETS.iter().filter(|a| a.path.ends_with(".js")) {
            let text = std::str::from_utf8(a.body).unwrap();
            for banned in [
                "innerHTML",
                "outerHTML",
                "insertAdjacentHTML",
                "document.write",
                "eval(",
                "new Function",
            ] {
                assert!(!text.contains(banned), "{} uses {banned}", a.path);
            }
        }
    }
}
