//! Request bodies: JSON, within the size the route allows (`DefaultBodyLimit`), with
//! RabbitMQ-style errors instead of axum's plain-text rejections.
//!
//! A body must say it is `application/json`, as RabbitMQ's API requires: a web page may
//! send another site a POST without asking first only as a form or `text/plain`, so this
//! keeps pages from using a browser's credentials (or `--auth no`) to change the broker.
//!
//! Parsed JSON takes many times its text in memory (about 16 times, measured), so bodies
//! over [`SMALL_BODY`] are read and parsed at most [`LARGE_BODIES`] at a time.

use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::http::{header, StatusCode};
use serde::de::DeserializeOwned;
use tokio::sync::Semaphore;

use crate::error::ApiError;

/// Most bodies: declarations, bindings, publishes, gets.
pub const BODY_LIMIT: usize = 1024 * 1024;
/// A definitions import may list many thousands of objects.
pub const DEFINITIONS_LIMIT: usize = 16 * 1024 * 1024;

/// Bodies up to this size (by their Content-Length) are parsed without a permit: 256 HTTP
/// connections at once hold at most a few hundred MiB of them.
const SMALL_BODY: u64 = 64 * 1024;
/// How many larger bodies (or bodies of unknown length) are read and parsed at once.
const LARGE_BODIES: usize = 2;
/// How long a large body waits for its turn before the request is refused (503): a
/// client that sends slowly holds a permit, and must not hold up the others forever.
const LARGE_BODY_WAIT: Duration = Duration::from_secs(30);

static LARGE_BODY_PERMITS: Semaphore = Semaphore::const_new(LARGE_BODIES);

/// A JSON body parsed into `T`; an empty body reads as `{}` (RabbitMQ accepts a bare PUT).
pub struct JsonBody<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, _state: &S) -> Result<Self, ApiError> {
        parse(req, &LARGE_BODY_PERMITS, LARGE_BODY_WAIT)
            .await
            .map(JsonBody)
    }
}

/// A JSON body not read yet: for handlers that refuse some callers before reading what
/// they sent (RabbitMQ answers 403 before looking at the body), so that a refused request
/// costs no parsing.
pub struct LaterJson(Request);

impl<S: Send + Sync> FromRequest<S> for LaterJson {
    type Rejection = ApiError;

    async fn from_request(req: Request, _state: &S) -> Result<Self, ApiError> {
        Ok(LaterJson(req))
    }
}

impl LaterJson {
    /// Reads and parses the body, as [`JsonBody`] would have.
    pub async fn parse<T: DeserializeOwned>(self) -> Result<T, ApiError> {
        parse(self.0, &LARGE_BODY_PERMITS, LARGE_BODY_WAIT).await
    }
}

/// Whether a Content-Type names JSON: `application/json`, parameters (charset) allowed.
fn is_json(content_type: &str) -> bool {
    let essence = content_type.split(';').next().unwrap_or_default().trim();
    essence.eq_ignore_ascii_case("application/json")
}

/// Reads `req`'s body (within the route's `DefaultBodyLimit`, which its extensions carry)
/// and parses it.
async fn parse<T: DeserializeOwned>(
    req: Request,
    permits: &Semaphore,
    wait: Duration,
) -> Result<T, ApiError> {
    let headers = req.headers();
    // Checked before reading: what a form or a text/plain POST sends is never looked at.
    // No Content-Type is taken only with an empty body (a bare PUT), below.
    let content_type = match headers.get(header::CONTENT_TYPE) {
        None => None,
        Some(v) => match v.to_str() {
            Ok(v) if is_json(v) => Some(v),
            _ => {
                return Err(ApiError::UnsupportedMediaType(format!(
                    "request bodies must be application/json, not {v:?}"
                )))
            }
        },
    };
    let length = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    // Held while the body is read and parsed; unknown lengths (chunked, or HTTP/2 without
    // a length) count as large. An HTTP/1 request with neither length nor chunks has no
    // body, as a bare PUT.
    let bodiless = req.version() < axum::http::Version::HTTP_2
        && !headers.contains_key(header::TRANSFER_ENCODING);
    let small = match length {
        Some(n) => n <= SMALL_BODY,
        None => bodiless,
    };
    let _permit = if small {
        None
    } else {
        match tokio::time::timeout(wait, permits.acquire()).await {
            Ok(Ok(permit)) => Some(permit),
            // Closed never happens (the semaphore is never closed); either way, refuse.
            Ok(Err(_)) | Err(_) => {
                return Err(ApiError::Unavailable(
                    "too many large request bodies at once; try again".into(),
                ))
            }
        }
    };
    let typed = content_type.is_some();
    let bytes = read(req).await?;
    let text: &[u8] = if bytes.iter().all(u8::is_ascii_whitespace) {
        b"{}"
    } else if !typed {
        return Err(ApiError::UnsupportedMediaType(
            "a request body must come with Content-Type: application/json".into(),
        ));
    } else {
        &bytes
    };
    serde_json::from_slice(text).map_err(|e| ApiError::BadRequest(format!("malformed JSON: {e}")))
}

async fn read(req: Request) -> Result<Bytes, ApiError> {
    Bytes::from_request(req, &()).await.map_err(|e| {
        if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::TooLarge
        } else {
            ApiError::BadRequest(format!("cannot read the request body: {e}"))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use axum::http::{HeaderMap, HeaderValue};
    use serde_json::Value;

    fn headers(content_type: Option<&str>, length: usize) -> HeaderMap {
        let mut h = HeaderMap::new();
        if let Some(t) = content_type {
            h.insert(header::CONTENT_TYPE, HeaderValue::from_str(t).unwrap());
        }
        h.insert(header::CONTENT_LENGTH, HeaderValue::from(length));
        h
    }

    async fn parse_with(
        content_type: Option<&str>,
        body: &str,
        permits: &Semaphore,
    ) -> Result<Value, ApiError> {
        parse(
            request(headers(content_type, body.len()), body),
            permits,
            Duration::ZERO,
        )
        .await
    }

    fn request(headers: HeaderMap, body: &str) -> Request {
        let mut req = Request::new(Body::from(body.to_owned()));
        *req.headers_mut() = headers;
        req
    }

    fn run<F: std::future::Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(f)
    }

    #[test]
    fn only_json_bodies_are_read() {
        run(async {
            let permits = Semaphore::new(1);
            for ok in [
                "application/json",
                "application/json; charset=utf-8",
                "Application/JSON",
            ] {
                let v = parse_with(Some(ok), r#"{"a": 1}"#, &permits).await;
                assert_eq!(v.unwrap()["a"], 1, "{ok}");
            }
            // What a cross-site form or a plain fetch can send without asking first.
            for bad in [
                Some("text/plain"),
                Some("application/x-www-form-urlencoded"),
                Some("multipart/form-data; boundary=x"),
                Some("application/jsonp"),
                None,
            ] {
                let r = parse_with(bad, r#"{"a": 1}"#, &permits).await;
                assert!(
                    matches!(r, Err(ApiError::UnsupportedMediaType(_))),
                    "{bad:?}: {:?}",
                    r.map(|_| ())
                );
            }
            // A bare PUT, with or without the header, is `{}`; a form's empty body is not.
            assert_eq!(
                parse_with(None, "", &permits).await.unwrap(),
                serde_json::json!({})
            );
            assert_eq!(
                parse_with(Some("application/json"), " ", &permits)
                    .await
                    .unwrap(),
                serde_json::json!({})
            );
            assert!(matches!(
                parse_with(Some("text/plain"), "", &permits).await,
                Err(ApiError::UnsupportedMediaType(_))
            ));
        });
    }

    #[test]
    fn large_bodies_wait_for_a_permit_and_small_ones_do_not() {
        run(async {
            let permits = Semaphore::new(1);
            let large = format!(r#"{{"pad": "{}"}}"#, "x".repeat(SMALL_BODY as usize));
            let small = r#"{"a": 1}"#;
            let json = Some("application/json");
            // With the one permit taken, a large body is refused (it would wait, here not
            // at all); a small one is parsed.
            let held = permits.acquire().await.unwrap();
            assert!(matches!(
                parse_with(json, &large, &permits).await,
                Err(ApiError::Unavailable(_))
            ));
            assert_eq!(parse_with(json, small, &permits).await.unwrap()["a"], 1);
            // A body of unknown length (chunked) counts as large; a request with neither
            // length nor chunks has no body and needs no permit.
            let mut unknown = headers(json, 0);
            unknown.remove(header::CONTENT_LENGTH);
            let mut chunked = unknown.clone();
            chunked.insert(header::TRANSFER_ENCODING, "chunked".parse().unwrap());
            let r: Result<Value, _> =
                parse(request(chunked, small), &permits, Duration::ZERO).await;
            assert!(matches!(r, Err(ApiError::Unavailable(_))));
            let r: Result<Value, _> = parse(request(unknown, ""), &permits, Duration::ZERO).await;
            assert_eq!(r.unwrap(), serde_json::json!({}));
            drop(held);
            // Free again: parsed, and the permit given back afterwards.
            let v = parse_with(json, &large, &permits).await.unwrap();
            assert_eq!(v["pad"].as_str().unwrap().len(), SMALL_BODY as usize);
            assert_eq!(permits.available_permits(), 1);
        });
    }
}
