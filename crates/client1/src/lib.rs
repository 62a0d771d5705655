//! `ferry-client1`: a lean AMQP 1.0 client for Ferry's benchmark harnesses and tests, on
//! the project's codec (`ferry-amqp1`).
//!
//! One [`Connection`] (with one session) is owned and driven by one task: there are no
//! background tasks and no locks. Calls append frames to one outbound buffer; calls that
//! wait (an attach, credit, room in the settlement window, a delivery) write it out and
//! decode everything that has arrived, so transfers, flows and dispositions move in large
//! batches. It covers what the harnesses measure: SASL PLAIN and ANONYMOUS; sending links
//! that send settled (at most once) or unsettled with a window of outstanding
//! dispositions (at least once, settled by the peer in batches); receiving links whose
//! credit is refilled in batches (or granted by hand, exactly) and whose acceptances go
//! out as ranges. Transfers are written straight into the outbound buffer: a message
//! costs no allocation beyond its payload, whose body is a slice of what was read.
//!
//! ```no_run
//! # async fn demo() -> Result<(), ferry_client1::ClientError> {
//! use ferry_client1::*;
//! let mut conn = Connection::connect("127.0.0.1:5672", &ConnectOptions::default()).await?;
//! let tx = conn
//!     .attach_sender("tx", "jobs", SendMode::Unsettled { window: 100 })
//!     .await?;
//! let p = Publication::simple(false, None, 5);
//! conn.send(tx, &p, b"hello").await?;
//! conn.wait_settled(tx).await?;
//! let rx = conn.attach_receiver("rx", "jobs", ReceiveOptions::default()).await?;
//! let d = conn.next_delivery(rx).await?;
//! assert_eq!(&d.body()?[..], b"hello");
//! conn.accept(d.delivery_id);
//! conn.close().await
//! # }
//! ```

mod connection;
mod error;
mod options;
mod settle;
mod wire;

pub use connection::{Connection, Delivery, PeerInfo, ReceiverId, SenderId};
pub use error::ClientError;
pub use options::{ConnectOptions, Mechanism, ReceiveOptions, SendMode};
pub use wire::{data_body, Publication};

/// Codec types that appear in this crate's API.
pub use ferry_amqp1::{DeliveryState, Header, Message, Properties};

#[cfg(test)]
mod tests;
