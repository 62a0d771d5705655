//! Driving a [`Connection`] in unit tests without sockets: the test owns the clock, feeds
//! the bytes a client would send and reads what the connection wrote.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use ferry_core::{Broker, BrokerConfig};

use super::{Connection, Peer, Protocol, Services};
use crate::auth::AuthService;
use crate::config::ServerConfig;
use crate::state::ServerState;

/// A broker and the services a connection to it needs. Connections made from clones of
/// the result share the broker.
pub fn services(config: ServerConfig) -> Services {
    services_with(config, BrokerConfig::default())
}

/// [`services`] with a broker configured as given (e.g. memory watermarks).
pub fn services_with(config: ServerConfig, broker: BrokerConfig) -> Services {
    let auth = AuthService::new(&config).expect("auth service");
    Services {
        broker: Broker::new(broker),
        config: Arc::new(config),
        auth: Arc::new(auth),
        state: Arc::new(ServerState::default()),
    }
}

pub fn peer() -> Peer {
    Peer {
        addr: SocketAddr::from(([127, 0, 0, 1], 40000)),
        tls: false,
        client_identity: None,
    }
}

/// One connection under test, as its event loop would see it.
pub struct Wire<P> {
    pub conn: Connection<P>,
    pub now: Instant,
    input: BytesMut,
}

impl<P: Protocol> Wire<P> {
    pub fn new(make: impl FnOnce(Instant) -> Connection<P>) -> Wire<P> {
        let now = Instant::now();
        Wire {
            conn: make(now),
            now,
            input: BytesMut::new(),
        }
    }

    /// The client sends `bytes`.
    pub fn send(&mut self, bytes: &[u8]) {
        self.input.extend_from_slice(bytes);
        self.conn.handle_input(&mut self.input, self.now);
    }

    /// Runs the SASL step the connection started, as the event loop would.
    pub async fn finish_auth(&mut self) {
        if let Some(task) = self.conn.take_auth_task() {
            let outcome = task.await;
            self.conn.handle_auth(outcome, &mut self.input, self.now);
        }
    }

    /// Takes deliveries from the outbox, then everything written so far (all of it "goes
    /// out" now).
    pub fn take_output(&mut self) -> BytesMut {
        let mut items = Vec::new();
        self.conn.handle_outbox(&mut items, self.now);
        let out = BytesMut::from(self.conn.output());
        self.conn.on_transmitted(out.len(), self.now);
        out
    }

    /// Moves the clock on by `d`, handling every deadline passed on the way in order, and
    /// returns what the connection wrote meanwhile (taken as sent when written).
    pub fn advance(&mut self, d: Duration) -> BytesMut {
        let end = self.now + d;
        let mut written = self.take_output();
        while let Some(at) = self.conn.poll_timeout().filter(|at| *at <= end) {
            self.now = self.now.max(at);
            self.conn.handle_timeout(self.now);
            if self.conn.is_done() {
                break;
            }
            written.extend_from_slice(&self.take_output());
        }
        self.now = end;
        written
    }

    /// Looks at the broker's resource alarms, as the event loop does after each read and
    /// on its alarm timer: a publisher is paused or resumed (processing what waited).
    pub fn poll_flow(&mut self) {
        self.conn.poll_flow(&mut self.input, self.now);
    }

    /// Unprocessed input (e.g. held while a SASL step runs).
    pub fn pending_input(&self) -> usize {
        self.input.len()
    }
}

pub const SECOND: Duration = Duration::from_secs(1);
