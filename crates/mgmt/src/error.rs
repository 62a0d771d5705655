//! Errors as RabbitMQ's management API reports them: a status and a JSON body
//! `{"error": ..., "reason": ...}`.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use ferry_server::AdminError;

/// Every way a request can fail.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("not authorised: {0}")]
    Unauthorized(&'static str),
    #[error("access refused: {0}")]
    Forbidden(String),
    #[error("not found: {0}")]
    NotFound(String),
    #[error("bad request: {0}")]
    BadRequest(String),
    #[error("method not allowed")]
    MethodNotAllowed,
    #[error("request body too large")]
    TooLarge,
    #[error("unsupported media type: {0}")]
    UnsupportedMediaType(String),
    #[error("service unavailable: {0}")]
    Unavailable(String),
    #[error("internal error: {0}")]
    Internal(String),
}

impl ApiError {
    pub fn not_found() -> ApiError {
        ApiError::NotFound("Not Found".into())
    }

    fn status(&self) -> StatusCode {
        match self {
            ApiError::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            ApiError::Forbidden(_) => StatusCode::FORBIDDEN,
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ApiError::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::TooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ApiError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// RabbitMQ's `error` words for each status.
    fn word(&self) -> &'static str {
        match self {
            ApiError::Unauthorized(_) | ApiError::Forbidden(_) => "not_authorised",
            ApiError::NotFound(_) => "Object Not Found",
            ApiError::BadRequest(_) => "bad_request",
            ApiError::MethodNotAllowed => "Method Not Allowed",
            ApiError::TooLarge => "payload_too_large",
            ApiError::UnsupportedMediaType(_) => "unsupported_media_type",
            ApiError::Unavailable(_) => "service_unavailable",
            ApiError::Internal(_) => "internal_server_error",
        }
    }

    fn reason(&self) -> String {
        match self {
            ApiError::Unauthorized(r) => (*r).to_owned(),
            ApiError::Forbidden(r)
            | ApiError::NotFound(r)
            | ApiError::BadRequest(r)
            | ApiError::UnsupportedMediaType(r)
            | ApiError::Unavailable(r)
            | ApiError::Internal(r) => r.clone(),
            ApiError::MethodNotAllowed => "Method Not Allowed".into(),
            ApiError::TooLarge => "the request body is too large".into(),
        }
    }
}

impl From<AdminError> for ApiError {
    fn from(e: AdminError) -> ApiError {
        match e {
            AdminError::Denied(r) => ApiError::Forbidden(r),
            AdminError::NotFound(r) => ApiError::NotFound(r),
            AdminError::BadRequest(r) => ApiError::BadRequest(r),
            AdminError::Unavailable(r) => ApiError::Unavailable(r),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = serde_json::json!({ "error": self.word(), "reason": self.reason() });
        let mut response = (self.status(), axum::Json(body)).into_response();
        if let ApiError::Unauthorized(_) = self {
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Basic realm=\"Ferry Management\""),
            );
        }
        response
    }
}

pub type ApiResult<T> = Result<T, ApiError>;
