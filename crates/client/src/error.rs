//! The one error type of the client. It is `Clone` because a single failure (a dropped
//! socket, an execution exception) is reported to every call waiting on the session or
//! connection.

use std::sync::Arc;

use ferry_amqp010::{AssemblyError, DecodeError, DetachCode, EncodeError, ErrorCode, FrameError};
use thiserror::Error;

#[derive(Debug, Clone, Error)]
pub enum ClientError {
    #[error("i/o error: {0}")]
    Io(Arc<std::io::Error>),
    /// The server answered our protocol header with another one (it speaks another AMQP
    /// version); `received` is what it sent.
    #[error("protocol mismatch: the server answered with header {received:?}")]
    ProtocolMismatch { received: [u8; 8] },
    /// The server sent `connection.close`, or closed the socket during the handshake.
    #[error("connection closed by the server: {code} {text}")]
    ConnectionClosed { code: u16, text: String },
    /// `execution.exception` from the server. The session is unusable afterwards.
    #[error("execution exception {code:?} ({}) on command {command_id}: {description}", code.code())]
    Exception {
        code: ErrorCode,
        command_id: u32,
        description: String,
    },
    /// The server detached the session without an exception.
    #[error("session detached by the server ({code:?})")]
    SessionDetached { code: Option<DetachCode> },
    #[error("the server offers none of the SASL mechanisms we can use ({offered:?})")]
    NoMechanism { offered: Vec<String> },
    #[error("the server redirected the connection to {host}")]
    Redirected { host: String },
    /// The server broke the protocol (bad frames, unexpected controls).
    #[error("protocol violation by the server: {0}")]
    Protocol(String),
    #[error("no free channel for another session (channel-max {0})")]
    NoChannel(u16),
    #[error("no traffic from the server within twice the heartbeat interval")]
    HeartbeatTimeout,
    #[error("the command's result was missing or of another type: {0}")]
    BadResult(String),
    #[error("encoding failed: {0}")]
    Encode(#[from] EncodeError),
    #[error("decoding failed: {0}")]
    Decode(#[from] DecodeError),
    /// This client closed the connection or session.
    #[error("closed")]
    Closed,
}

impl ClientError {
    /// The execution error code, if this is an execution exception.
    pub fn error_code(&self) -> Option<ErrorCode> {
        match self {
            ClientError::Exception { code, .. } => Some(*code),
            _ => None,
        }
    }
}

impl From<std::io::Error> for ClientError {
    fn from(e: std::io::Error) -> Self {
        ClientError::Io(Arc::new(e))
    }
}

impl From<FrameError> for ClientError {
    fn from(e: FrameError) -> Self {
        ClientError::Protocol(e.to_string())
    }
}

impl From<AssemblyError> for ClientError {
    fn from(e: AssemblyError) -> Self {
        ClientError::Protocol(e.to_string())
    }
}
