//! The harnesses' protocol side over AMQP 0-9-1, with `ferry-client091`.
//!
//! As over 0-10, each harness client is one connection driven from one thread through a
//! current-thread runtime of its own. ferry-client091 runs no background tasks, so nothing
//! happens between calls: a call that waits writes what is buffered and reads what came.

mod latency;
mod perftest;

pub use latency::{LatencyClient, LatencyReceiverClient};
pub use perftest::Connector;

use std::future::Future;

use ferry_client091::{
    BasicProperties, ClientError, ConnectOptions, Connection, Publication, QueueOptions,
};

use crate::amqp010::STEP_TIMEOUT;
use crate::conn::ConnectionOpts;
use crate::driver::DriverError;

impl From<ClientError> for DriverError {
    fn from(e: ClientError) -> Self {
        match e {
            ClientError::ChannelClosed { .. } | ClientError::Nacked { .. } => {
                DriverError::Refused(e.to_string())
            }
            ClientError::Io(_) | ClientError::ConnectionClosed { .. } | ClientError::Closed => {
                DriverError::Connection(e.to_string())
            }
            other => DriverError::Client(Box::new(other)),
        }
    }
}

/// One connection, its runtime and the channel most of its work uses.
pub struct Client {
    runtime: tokio::runtime::Runtime,
    pub conn: Connection,
    pub channel: u16,
}

impl Client {
    pub fn open(opts: &ConnectionOpts) -> Result<Client, DriverError> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| DriverError::Connection(format!("cannot start a runtime: {e}")))?;
        let options = connect_options(opts)?;
        let addr = format!("{}:{}", opts.broker, opts.port);
        let (conn, channel) = runtime.block_on(async {
            let mut conn =
                tokio::time::timeout(STEP_TIMEOUT, Connection::connect(addr.as_str(), &options))
                    .await
                    .map_err(|_| DriverError::Timeout(format!("connecting to {addr}")))?
                    .map_err(|e| DriverError::Connection(format!("{addr}: {e}")))?;
            let channel = conn.open_channel().await?;
            Ok::<_, DriverError>((conn, channel))
        })?;
        Ok(Client {
            runtime,
            conn,
            channel,
        })
    }
}

/// One step of this protocol's client, bounded (see [`crate::driver::run_step`]); the
/// error type is fixed here so that the steps' `Ok(..)` need no annotation.
pub fn run<T>(
    runtime: &tokio::runtime::Runtime,
    what: &str,
    f: impl Future<Output = Result<T, ClientError>>,
) -> Result<T, DriverError> {
    crate::driver::run_step(runtime, what, f)
}

fn connect_options(opts: &ConnectionOpts) -> Result<ConnectOptions, DriverError> {
    match opts.mechanism.as_deref() {
        None => {}
        Some(m) if m.eq_ignore_ascii_case("PLAIN") => {}
        Some(other) => {
            return Err(DriverError::Connection(format!(
                "SASL mechanism {other} is not supported over 0-9-1 (PLAIN)"
            )))
        }
    }
    Ok(ConnectOptions {
        username: opts.username.clone(),
        password: opts.password.clone(),
        frame_max: opts.max_frame_size,
        heartbeat: opts.heartbeat,
        // Always, as RabbitMQ's own clients do: a 0-9-1 client's synchronous methods (a
        // commit after acks, a confirm wait) otherwise sit behind Nagle's algorithm.
        tcp_nodelay: true,
        ..ConnectOptions::default()
    })
}

/// Properties of a test message: persistent (delivery mode 2) when durable.
pub fn properties(durable: bool) -> BasicProperties {
    BasicProperties {
        delivery_mode: durable.then_some(2),
        ..Default::default()
    }
}

/// Declares `queue` and empties it.
pub async fn declare_and_purge(
    conn: &mut Connection,
    channel: u16,
    queue: &str,
    options: QueueOptions,
) -> Result<(), ClientError> {
    declare_and_purge_with(conn, channel, queue, options, Default::default()).await
}

/// [`declare_and_purge`] with arguments.
pub async fn declare_and_purge_with(
    conn: &mut Connection,
    channel: u16,
    queue: &str,
    options: QueueOptions,
    arguments: ferry_client091::FieldTable,
) -> Result<(), ClientError> {
    conn.queue_declare(channel, queue, options, arguments)
        .await?;
    conn.queue_purge(channel, queue).await?;
    Ok(())
}

/// Publishes `body` to `queue` through the default exchange and waits until the broker
/// has it.
pub async fn send_text(
    conn: &mut Connection,
    channel: u16,
    queue: &str,
    body: &str,
    n: usize,
) -> Result<(), ClientError> {
    let p = Publication::new(channel, "", queue, BasicProperties::default(), body.len())?;
    for _ in 0..n {
        conn.publish(&p, body.as_bytes()).await?;
    }
    if conn.unconfirmed(channel) > 0 {
        conn.wait_confirms(channel).await
    } else {
        conn.sync(channel).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn persistence_maps_to_delivery_mode_2() {
        assert_eq!(properties(true).delivery_mode, Some(2));
        assert_eq!(properties(false).delivery_mode, None);
    }

    #[test]
    fn only_plain_is_offered() {
        let mut opts = ConnectionOpts {
            protocol: crate::conn::Protocol::Amqp091,
            broker: "127.0.0.1".into(),
            port: 1,
            tcp_nodelay: true,
            max_frame_size: 65535,
            username: None,
            password: None,
            mechanism: Some("SCRAM-SHA-256".into()),
            heartbeat: 0,
        };
        assert!(connect_options(&opts).is_err());
        opts.mechanism = Some("plain".into());
        let o = connect_options(&opts).unwrap();
        assert_eq!((o.frame_max, o.tcp_nodelay), (65535, true));
        opts.tcp_nodelay = false;
        assert!(connect_options(&opts).unwrap().tcp_nodelay);
    }
}
