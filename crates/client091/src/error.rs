use std::sync::Arc;

/// Everything a 0-9-1 client call can fail with. Cheap to clone: a connection keeps its
/// first failure and hands it to every later call.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ClientError {
    #[error("I/O: {0}")]
    Io(Arc<std::io::Error>),
    #[error("the server closed the connection: {code} {text}")]
    ConnectionClosed { code: u16, text: String },
    #[error("the server closed channel {channel}: {code} {text}")]
    ChannelClosed {
        channel: u16,
        code: u16,
        text: String,
    },
    #[error("protocol error: {0}")]
    Protocol(String),
    #[error("the server refused {count} published message(s) (basic.nack)")]
    Nacked { count: u64 },
    #[error("consumer {0} was cancelled by the server")]
    ConsumerCancelled(String),
    #[error("the server sent a {0} frame body larger than agreed")]
    TooLarge(&'static str),
    #[error("the connection is closed")]
    Closed,
}

impl From<std::io::Error> for ClientError {
    fn from(e: std::io::Error) -> Self {
        ClientError::Io(Arc::new(e))
    }
}

impl From<ferry_amqp091::StringTooLong> for ClientError {
    fn from(e: ferry_amqp091::StringTooLong) -> Self {
        ClientError::Protocol(e.to_string())
    }
}
