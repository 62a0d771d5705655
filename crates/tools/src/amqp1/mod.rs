//! The harnesses' protocol side over AMQP 1.0, with `ferry-client1`.
//!
//! As over the other protocols, each harness client is one connection (with one session)
//! driven from one thread through a current-thread runtime of its own; ferry-client1 runs
//! no background tasks, so a call that waits writes what is buffered and reads what came.
//!
//! AMQP 1.0 cannot create queues, so the queues a run needs (the control queues, the test
//! queues, a subscriber's private queue in fanout and topic mode, the latency queue) are
//! declared over AMQP 0-10 on the same port with `ferry-client`: ferryd and Qpid Broker-J
//! both speak 0-10 there. Everything measured travels over 1.0.

mod latency;
mod perftest;

pub use latency::{LatencyClient, LatencyReceiverClient};
pub use perftest::Connector;

use std::collections::HashMap;
use std::future::Future;

use ferry_client1::{
    ClientError, ConnectOptions, Connection, Mechanism, Publication, ReceiveOptions, ReceiverId,
    SendMode, SenderId,
};

use crate::amqp010::STEP_TIMEOUT;
use crate::conn::ConnectionOpts;
use crate::driver::DriverError;

impl From<ClientError> for DriverError {
    fn from(e: ClientError) -> Self {
        match e {
            ClientError::LinkDetached { .. }
            | ClientError::SessionEnded { .. }
            | ClientError::NotAccepted { .. }
            | ClientError::Sasl(_) => DriverError::Refused(e.to_string()),
            ClientError::Io(_) | ClientError::ConnectionClosed { .. } | ClientError::Closed => {
                DriverError::Connection(e.to_string())
            }
            other => DriverError::Client(Box::new(other)),
        }
    }
}

/// One connection and its runtime, with links to control queues made as they are needed.
pub struct Client {
    runtime: tokio::runtime::Runtime,
    pub conn: Connection,
    /// Senders to control queues, by queue name.
    control_senders: HashMap<String, SenderId>,
    links: u32,
}

impl Client {
    pub fn open(opts: &ConnectionOpts) -> Result<Client, DriverError> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| DriverError::Connection(format!("cannot start a runtime: {e}")))?;
        let options = connect_options(opts)?;
        let addr = format!("{}:{}", opts.broker, opts.port);
        let conn = runtime.block_on(async {
            tokio::time::timeout(STEP_TIMEOUT, Connection::connect(addr.as_str(), &options))
                .await
                .map_err(|_| DriverError::Timeout(format!("connecting to {addr}")))?
                .map_err(|e| DriverError::Connection(format!("{addr}: {e}")))
        })?;
        Ok(Client {
            runtime,
            conn,
            control_senders: HashMap::new(),
            links: 0,
        })
    }

    /// A link name unique on this connection.
    fn link_name(&mut self, what: &str) -> String {
        self.links += 1;
        format!("{what}-{}-{}", std::process::id(), self.links)
    }

    pub fn sender(&mut self, address: &str, mode: SendMode) -> Result<SenderId, DriverError> {
        let name = self.link_name("sender");
        run(
            &self.runtime,
            "attaching a sender",
            self.conn.attach_sender(&name, address, mode),
        )
    }

    pub fn receiver(
        &mut self,
        address: &str,
        options: ReceiveOptions,
    ) -> Result<ReceiverId, DriverError> {
        let name = self.link_name("receiver");
        run(
            &self.runtime,
            "attaching a receiver",
            self.conn.attach_receiver(&name, address, options),
        )
    }

    /// Sends `body` to control queue `queue` `n` times, unsettled, and waits until the
    /// broker has settled them all.
    pub fn send_text(&mut self, queue: &str, body: &str, n: usize) -> Result<(), DriverError> {
        let sender = match self.control_senders.get(queue) {
            Some(&s) => s,
            None => {
                let s = self.sender(queue, SendMode::Unsettled { window: 0 })?;
                self.control_senders.insert(queue.to_string(), s);
                s
            }
        };
        let p = Publication::simple(false, None, body.len());
        let conn = &mut self.conn;
        run(&self.runtime, "sending a control message", async {
            for _ in 0..n {
                conn.send(sender, &p, body.as_bytes()).await?;
            }
            conn.wait_settled(sender).await
        })
    }

    /// Grants one credit on manual-credit receiver `r`, waits for a message and accepts
    /// it; returns its body as text.
    pub fn take_one(&mut self, r: ReceiverId, what: &str) -> Result<String, DriverError> {
        self.conn.add_credit(r, 1)?;
        self.take(r, what)
    }

    /// The next message on `r`, accepted unless it came settled; its body as text.
    pub fn take(&mut self, r: ReceiverId, what: &str) -> Result<String, DriverError> {
        let d = run(&self.runtime, what, self.conn.next_delivery(r))?;
        if !d.settled {
            self.conn.accept(d.delivery_id);
        }
        let body = d.body()?;
        Ok(String::from_utf8_lossy(&body).into_owned())
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
    let mechanism = match opts.mechanism.as_deref() {
        None => Mechanism::Auto,
        Some(m) if m.eq_ignore_ascii_case("PLAIN") => Mechanism::Plain,
        Some(m) if m.eq_ignore_ascii_case("ANONYMOUS") => Mechanism::Anonymous,
        Some(m) if m.eq_ignore_ascii_case("NONE") => Mechanism::None,
        Some(other) => {
            return Err(DriverError::Connection(format!(
                "SASL mechanism {other} is not supported over 1.0 (PLAIN, ANONYMOUS, NONE)"
            )))
        }
    };
    if opts.heartbeat > 0 {
        return Err(DriverError::Connection(
            "--heartbeat is not supported over 1.0 (the client answers the broker's idle \
             time-out, it announces none)"
                .into(),
        ));
    }
    Ok(ConnectOptions {
        username: opts.username.clone(),
        password: opts.password.clone(),
        mechanism,
        max_frame_size: opts.max_frame_size.max(ferry_amqp1_min_frame()),
        // Always, as Qpid JMS and Proton do: a receiver's small dispositions and flows
        // otherwise sit behind Nagle's algorithm and the peer's delayed acknowledgements.
        tcp_nodelay: true,
        ..ConnectOptions::default()
    })
}

/// AMQP 1.0's smallest max-frame-size.
fn ferry_amqp1_min_frame() -> u32 {
    512
}

/// Declares (and purges) queues over AMQP 0-10, which 1.0 cannot do.
pub struct Admin {
    client: crate::amqp010::Client,
}

impl Admin {
    pub fn open(opts: &ConnectionOpts) -> Result<Admin, DriverError> {
        Ok(Admin {
            client: crate::amqp010::Client::open(opts)?,
        })
    }

    pub fn declare(
        &self,
        queue: &str,
        options: ferry_client::QueueDeclareOptions,
        purge: bool,
    ) -> Result<(), DriverError> {
        let session = &self.client.session;
        self.client.run("declaring a queue over 0-10", async {
            session.queue_declare(queue, options).await?;
            if purge {
                session.queue_purge(queue).await?;
            }
            Ok(())
        })
    }

    pub fn bind(&self, queue: &str, exchange: &str, key: &str) -> Result<(), DriverError> {
        let session = &self.client.session;
        self.client.run("binding a queue over 0-10", async {
            session.exchange_bind(queue, exchange, key, None).await?;
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(mechanism: Option<&str>) -> ConnectionOpts {
        ConnectionOpts {
            protocol: crate::conn::Protocol::Amqp1,
            broker: "127.0.0.1".into(),
            port: 1,
            tcp_nodelay: false,
            max_frame_size: 100,
            username: None,
            password: None,
            mechanism: mechanism.map(Into::into),
            heartbeat: 0,
        }
    }

    #[test]
    fn mechanisms_and_frame_size() {
        assert!(connect_options(&opts(Some("SCRAM-SHA-256"))).is_err());
        let o = connect_options(&opts(Some("anonymous"))).unwrap();
        assert_eq!(o.mechanism, Mechanism::Anonymous);
        assert_eq!(o.max_frame_size, 512);
        assert!(o.tcp_nodelay);
        assert_eq!(
            connect_options(&opts(None)).unwrap().mechanism,
            Mechanism::Auto
        );
        let mut h = opts(None);
        h.heartbeat = 5;
        assert!(connect_options(&h).is_err());
    }
}
