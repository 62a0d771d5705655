//! The harnesses' protocol side over AMQP 0-10, with `ferry-client`.
//!
//! The harness loops are synchronous and run one client per thread. Each client owns a
//! current-thread tokio runtime, so its connection's reader and writer tasks run on the
//! same thread as the loop that drives them: no wake-up crosses CPUs per message (see
//! PERFORMANCE-NOTES). The runtime only runs while the loop is inside `block_on`, so after
//! handing a message over, a client yields once, which lets the writer put it on the wire
//! before the loop goes back to sleep or to its own work.

mod latency;
mod perftest;

pub use latency::{LatencyClient, LatencyReceiverClient};
pub use perftest::Connector;

use std::future::Future;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use ferry_client::{
    ClientError, ConnectOptions, Connection, DeliveryMode, Mechanism, MessageHeader, Session,
    SessionOptions, Str,
};

use crate::conn::ConnectionOpts;
use crate::driver::DriverError;

/// The longest any harness step waits for the broker before calling the run failed.
pub const STEP_TIMEOUT: Duration = Duration::from_secs(120);

impl From<ClientError> for DriverError {
    fn from(e: ClientError) -> Self {
        match e {
            ClientError::Exception { .. } => DriverError::Refused(e.to_string()),
            ClientError::Io(_) | ClientError::ProtocolMismatch { .. } => {
                DriverError::Connection(e.to_string())
            }
            other => DriverError::Client(Box::new(other)),
        }
    }
}

/// One connection and session with the runtime that drives them.
pub struct Client {
    runtime: tokio::runtime::Runtime,
    // Kept so the connection lives as long as the client.
    _connection: Connection,
    pub session: Session,
}

impl Client {
    pub fn open(opts: &ConnectionOpts) -> Result<Client, DriverError> {
        Self::open_with_session(opts, SessionOptions::default())
    }

    /// [`Client::open`] with the session's completion batching chosen by the caller.
    pub fn open_with_session(
        opts: &ConnectionOpts,
        session: SessionOptions,
    ) -> Result<Client, DriverError> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| DriverError::Connection(format!("cannot start a runtime: {e}")))?;
        let addr = format!("{}:{}", opts.broker, opts.port);
        let options = ConnectOptions {
            session,
            ..connect_options(opts)?
        };
        let (connection, session) = runtime.block_on(async {
            let connection =
                tokio::time::timeout(STEP_TIMEOUT, Connection::connect(addr.as_str(), options))
                    .await
                    .map_err(|_| DriverError::Timeout(format!("connecting to {addr}")))??;
            let session = connection.session().await?;
            Ok::<_, DriverError>((connection, session))
        })?;
        Ok(Client {
            runtime,
            _connection: connection,
            session,
        })
    }

    /// Runs `f` to completion on this client's runtime, bounded by [`STEP_TIMEOUT`].
    pub fn run<T>(
        &self,
        what: &str,
        f: impl Future<Output = Result<T, DriverError>>,
    ) -> Result<T, DriverError> {
        self.runtime.block_on(async {
            tokio::time::timeout(STEP_TIMEOUT, f)
                .await
                .map_err(|_| DriverError::Timeout(what.to_string()))?
        })
    }

    /// Like [`Client::run`], then lets the connection's tasks run once, so whatever `f`
    /// queued is written now rather than at the next call.
    pub fn run_and_flush<T>(
        &self,
        what: &str,
        f: impl Future<Output = Result<T, DriverError>>,
    ) -> Result<T, DriverError> {
        self.run(what, async {
            let out = f.await;
            tokio::task::yield_now().await;
            out
        })
    }

    pub fn block_on<F: Future>(&self, f: F) -> F::Output {
        self.runtime.block_on(f)
    }
}

/// The error for a subscription that ended while the harness still wanted messages: the
/// session's or connection's own failure when there is one, since "ended" alone says
/// nothing about why.
pub fn subscription_ended(session: &Session, what: &str) -> DriverError {
    match session.error() {
        Some(e) => DriverError::Connection(format!("subscription ended ({what}): {e}")),
        None => DriverError::Connection(format!("subscription ended ({what})")),
    }
}

pub(crate) fn connect_options(opts: &ConnectionOpts) -> Result<ConnectOptions, DriverError> {
    let mechanism = match opts.mechanism.as_deref() {
        None => None,
        Some(m) if m.eq_ignore_ascii_case("PLAIN") => Some(Mechanism::Plain),
        Some(m) if m.eq_ignore_ascii_case("ANONYMOUS") => Some(Mechanism::Anonymous),
        Some(other) => {
            return Err(DriverError::Connection(format!(
                "SASL mechanism {other} is not supported (PLAIN, ANONYMOUS)"
            )))
        }
    };
    Ok(ConnectOptions {
        username: opts.username.clone(),
        password: opts.password.clone(),
        mechanism,
        max_frame_size: u16::try_from(opts.max_frame_size).unwrap_or(u16::MAX),
        heartbeat: opts.heartbeat,
        tcp_nodelay: opts.tcp_nodelay,
        ..ConnectOptions::default()
    })
}

/// An encoded header segment carrying `routing_key` (and persistence): built once per
/// publisher, sent with every message.
pub fn header_segment(routing_key: &str, durable: bool) -> Result<Bytes, DriverError> {
    let mut header = MessageHeader::default();
    let delivery = header.delivery.get_or_insert_with(Default::default);
    delivery.routing_key = Some(Str::from(routing_key));
    if durable {
        delivery.delivery_mode = Some(DeliveryMode::Persistent);
    }
    let mut out = BytesMut::new();
    header
        .encode(&mut out)
        .map_err(|e| DriverError::Client(Box::new(e)))?;
    Ok(out.freeze())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_segment_carries_key_and_persistence() {
        let raw = header_segment("q1", true).unwrap();
        let decoded = MessageHeader::decode(raw).unwrap();
        let d = decoded.delivery.unwrap();
        assert_eq!(d.routing_key.unwrap().to_string(), "q1");
        assert_eq!(d.delivery_mode, Some(DeliveryMode::Persistent));
        let plain = MessageHeader::decode(header_segment("q2", false).unwrap()).unwrap();
        assert_eq!(plain.delivery.unwrap().delivery_mode, None);
    }

    #[test]
    fn unknown_mechanism_is_refused_before_connecting() {
        let opts = ConnectionOpts {
            protocol: crate::conn::Protocol::Amqp010,
            broker: "127.0.0.1".into(),
            port: 1,
            tcp_nodelay: false,
            max_frame_size: 65535,
            username: None,
            password: None,
            mechanism: Some("CRAM-MD5".into()),
            heartbeat: 0,
        };
        assert!(matches!(
            Client::open(&opts),
            Err(DriverError::Connection(_))
        ));
    }
}
