//! `ferry-client091`: a lean AMQP 0-9-1 client for Ferry's benchmark harnesses and tests,
//! on the project's codec (`ferry-amqp091`).
//!
//! One [`Connection`] is owned and driven by one task: there are no background tasks and
//! no locks. Calls append frames to one outbound buffer; calls that wait (a reply, a
//! delivery, room in the publisher-confirm window) write it out and decode everything that
//! has arrived, so publishes, acknowledgements and deliveries move in large batches.
//! It covers what the harnesses measure: publisher confirms with a window, `basic.qos`
//! prefetch, manual acks with `multiple`, persistent messages, transactions.
//!
//! ```no_run
//! # async fn demo() -> Result<(), ferry_client091::ClientError> {
//! use ferry_client091::*;
//! let mut conn = Connection::connect("127.0.0.1:5672", &ConnectOptions::default()).await?;
//! let ch = conn.open_channel().await?;
//! conn.queue_declare(ch, "jobs", QueueOptions::default(), Default::default()).await?;
//! conn.confirm_select(ch, 100).await?;
//! let p = Publication::new(ch, "", "jobs", Default::default(), 5)?;
//! conn.publish(&p, b"hello").await?;
//! conn.wait_confirms(ch).await?;
//! conn.consume(ch, "jobs", "c1", ConsumeOptions::default()).await?;
//! let d = conn.next_delivery(ch, "c1").await?;
//! conn.ack(ch, d.delivery_tag, false);
//! conn.close().await
//! # }
//! ```

mod confirms;
mod connection;
mod error;
mod options;

pub use confirms::ConfirmTracker;
pub use connection::{Connection, Delivery, Publication, ServerInfo};
pub use error::ClientError;
pub use options::{ConnectOptions, ConsumeOptions, QueueOptions};

/// Codec types that appear in this crate's API.
pub use ferry_amqp091::{BasicProperties, FieldTable, FieldValue, QueueDeclareOk, ShortStr};
