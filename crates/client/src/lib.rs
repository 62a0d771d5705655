//! `ferry-client`: an AMQP 0-10 client on tokio, for Ferry's integration tests and
//! benchmark harnesses.
//!
//! ```no_run
//! # async fn demo() -> Result<(), ferry_client::ClientError> {
//! use ferry_client::*;
//! let conn = Connection::connect("127.0.0.1:5672", ConnectOptions::default()).await?;
//! let session = conn.session().await?;
//! session.queue_declare("q", QueueDeclareOptions::default()).await?;
//! let msg = OutgoingMessage::builder().routing_key("q").body("hello").build()?;
//! session.transfer("", &msg).await?;
//! let mut sub = session.subscribe("q", "d", SubscribeOptions::default()).await?;
//! let delivery = sub.next().await.expect("a message");
//! assert_eq!(&delivery.body[..], b"hello");
//! session.close().await?;
//! conn.close().await
//! # }
//! ```
//!
//! One task per connection reads the socket and dispatches to sessions; one writes a
//! shared outbound buffer, so pipelined transfers leave in large writes. Commands are
//! numbered and completed as 0-10 specifies; management helpers send with sync and
//! await completion, transfers are pipelined within a window of uncompleted commands.

mod connection;
mod error;
mod handshake;
mod message;
mod options;
mod outbound;
mod reader;
mod session;
mod subscription;

pub use connection::Connection;
pub use error::ClientError;
pub use message::{Delivery, MessageBuilder, OutgoingMessage, Transfer};
pub use options::{
    ConnectOptions, ExchangeDeclareOptions, Mechanism, QueueDeclareOptions, SessionOptions,
    SubscribeOptions,
};
pub use session::Session;
pub use subscription::Subscription;

/// The codec types that appear in this crate's API.
pub use ferry_amqp010::{
    AcceptMode, AcquireMode, Command, CreditUnit, DeliveryMode, ErrorCode, ExchangeBoundResult,
    ExchangeQueryResult, FlowMode, Map, MessageHeader, QueueQueryResult, RejectCode, SequenceSet,
    Str, Struct32, Value,
};

#[cfg(test)]
mod tests;
