use std::sync::Arc;

/// Everything an AMQP 1.0 client call can fail with. Cheap to clone: a connection keeps
/// its first failure and hands it to every later call.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ClientError {
    #[error("I/O: {0}")]
    Io(Arc<std::io::Error>),
    #[error("SASL: {0}")]
    Sasl(String),
    #[error("the peer closed the connection: {condition} {description}")]
    ConnectionClosed {
        condition: String,
        description: String,
    },
    #[error("the peer ended the session: {condition} {description}")]
    SessionEnded {
        condition: String,
        description: String,
    },
    #[error("the peer detached link {link}: {condition} {description}")]
    LinkDetached {
        link: String,
        condition: String,
        description: String,
    },
    #[error("protocol error: {0}")]
    Protocol(String),
    #[error(
        "the peer did not accept {count} message(s) sent on link {link} (last outcome: {outcome})"
    )]
    NotAccepted {
        link: String,
        count: u64,
        outcome: &'static str,
    },
    #[error("the connection is closed")]
    Closed,
}

impl ClientError {
    pub(crate) fn from_peer_error(
        e: Option<ferry_amqp1::Error>,
        make: impl FnOnce(String, String) -> ClientError,
    ) -> ClientError {
        match e {
            Some(e) => make(
                e.condition.to_string(),
                e.description.map(|d| d.to_string()).unwrap_or_default(),
            ),
            None => make(String::new(), String::new()),
        }
    }
}

impl From<std::io::Error> for ClientError {
    fn from(e: std::io::Error) -> Self {
        ClientError::Io(Arc::new(e))
    }
}

impl From<ferry_amqp1::DecodeError> for ClientError {
    fn from(e: ferry_amqp1::DecodeError) -> Self {
        ClientError::Protocol(e.to_string())
    }
}

impl From<ferry_amqp1::FrameError> for ClientError {
    fn from(e: ferry_amqp1::FrameError) -> Self {
        ClientError::Protocol(e.to_string())
    }
}
