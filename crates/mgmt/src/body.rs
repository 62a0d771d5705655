//! Request bodies: JSON, within the size the route allows (`DefaultBodyLimit`), with
//! RabbitMQ-style errors instead of axum's plain-text rejections.

use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::http::StatusCode;
use serde::de::DeserializeOwned;

use crate::error::ApiError;

/// Most bodies: declarations, bindings, publishes, gets.
pub const BODY_LIMIT: usize = 1024 * 1024;
/// A definitions import may list many thousands of objects.
pub const DEFINITIONS_LIMIT: usize = 16 * 1024 * 1024;

/// A JSON body parsed into `T`; an empty body reads as `{}` (RabbitMQ accepts a bare PUT).
pub struct JsonBody<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let bytes = Bytes::from_request(req, state).await.map_err(|e| {
            if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::TooLarge
            } else {
                ApiError::BadRequest(format!("cannot read the request body: {e}"))
            }
        })?;
        let text: &[u8] = if bytes.iter().all(u8::is_ascii_whitespace) {
            b"{}"
        } else {
            &bytes
        };
        serde_json::from_slice(text)
            .map(JsonBody)
            .map_err(|e| ApiError::BadRequest(format!("malformed JSON: {e}")))
    }
}
