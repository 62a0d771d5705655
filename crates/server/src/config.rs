//! Settings the server needs at run time, independent of how they were given
//! (command line, config file or a test). What changes while the server runs lives in
//! `crate::state`.

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::tls::TlsSettings;

/// `--auth`: whether clients must prove who they are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthMode {
    /// ANONYMOUS and PLAIN with any credentials are accepted.
    None,
    /// Passwords are checked against the users file (or the built-in loopback-only guest
    /// while there is none); ANONYMOUS only if `allow_anonymous`.
    Required,
}

#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub interface: IpAddr,
    /// 0 asks the OS for a free port (tests, and qpidd's `--port 0`).
    pub port: u16,
    pub tcp_nodelay: bool,
    /// A second listener speaking both protocols over TLS, on `ssl_port` (0: a free port).
    pub tls: Option<TlsSettings>,
    pub ssl_port: u16,
    /// Close connections to the plain port at once: only TLS clients get in (qpidd's
    /// `--require-encryption`).
    pub require_encryption: bool,
    pub auth: AuthMode,
    /// The users file; `None` (or a missing file) leaves only the built-in guest.
    pub users_file: Option<PathBuf>,
    /// Offer ANONYMOUS even with `AuthMode::Required`.
    pub allow_anonymous: bool,
    /// The SASL mechanisms AMQP logins may use (`None`: all, each where it applies).
    /// Management's HTTP Basic check is PLAIN's whatever this says.
    pub sasl_mechanisms: Option<Vec<ferry_auth::Mechanism>>,
    /// How long a refused login waits before the client hears of it.
    pub auth_failure_delay: Duration,
    pub max_connections: usize,
    /// Largest frame we offer in 0-10's connection.tune (its field is 16 bits) and AMQP
    /// 1.0's open; clients may ask for less.
    pub max_frame_size: u16,
    /// Largest frame we offer in 0-9-1's connection.tune: RabbitMQ's `frame_max`, whose
    /// default (131,072) its clients expect and most ask for.
    pub amqp091_frame_max: u32,
    pub channel_max: u16,
    /// Largest message (header + body) a peer may send.
    pub max_message_size: usize,
    /// What the messages one connection has begun and not finished may hold together,
    /// across its sessions and channels (never less than `max_message_size`): a peer with
    /// 2,047 channels could otherwise park a message of the largest size on each.
    pub max_unfinished_per_connection: usize,
    /// Heartbeat interval we propose (seconds, 0 = none); the client picks within [min, max].
    pub heartbeat_max: u16,
    /// How long a new connection may take to finish the handshake.
    pub handshake_timeout: Duration,
    /// Outbound bytes buffered for one connection before we stop reading from it and stop
    /// taking deliveries for it: a peer that never reads cannot grow our memory.
    pub write_high_water: usize,
    /// An AMQP 1.0 publisher's link credit is not topped up while the queue it feeds has
    /// consumers and more than this many bytes ready in memory: the publisher waits for
    /// the consumers instead of growing the queue (and the broker's memory) without bound,
    /// as qpidd's producer flow control and RabbitMQ's credit flow make it.
    pub backlog_hold_bytes: u64,
    /// Connections one authenticated user may hold at once; 0 = unlimited. An ACL
    /// `quota connections` overrides it.
    pub connection_limit_per_user: u32,
    /// Connections from one client address at once; 0 = unlimited.
    pub connection_limit_per_ip: u32,
    /// Queues one user may have created (and not yet deleted); 0 = unlimited. An ACL
    /// `quota queues` overrides it.
    pub max_queues_per_user: u32,
    /// Deliveries made under unlimited credit (0-10) or without a prefetch (0-9-1) that one
    /// session or channel may have awaiting settlement before the broker waits for
    /// acknowledgements; 0 = unlimited (qpidd's `--session-max-unacked`).
    pub session_max_unacked: u32,
    /// Subscriptions per 0-10 session, consumers per 0-9-1 channel; 0 = unlimited.
    pub max_consumers_per_session: u32,
    /// RabbitMQ's consumer timeout: a 0-9-1 channel whose oldest delivery has waited this
    /// long for its acknowledgement is closed with 406 (its deliveries requeued); `None`:
    /// never.
    pub consumer_timeout: Option<Duration>,
    /// Set in a cluster: where each new client connection goes (see `gate`).
    pub gate: Option<crate::gate::GateHandle>,
}

impl ServerConfig {
    /// What the messages one connection has begun may hold together.
    pub fn unfinished_limit(&self) -> usize {
        self.max_unfinished_per_connection
            .max(self.max_message_size)
    }
}

/// A message that has come this far unfinished is checked against
/// [`ServerConfig::unfinished_limit`] with every other unfinished message of its connection
/// (a walk over its sessions or channels); smaller ones are not, so the check costs nothing
/// for messages in a frame or two, and what they may hold unchecked is at most this much a
/// channel.
pub const CHECK_UNFINISHED_ABOVE: usize = 64 * 1024;

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            interface: IpAddr::from([127, 0, 0, 1]),
            port: 5672,
            tcp_nodelay: true,
            tls: None,
            ssl_port: 5671,
            require_encryption: false,
            // ferryd defaults to Required; embedded servers and tests start open.
            auth: AuthMode::None,
            users_file: None,
            allow_anonymous: false,
            sasl_mechanisms: None,
            auth_failure_delay: Duration::from_secs(1),
            max_connections: 500,
            max_frame_size: 65535,
            amqp091_frame_max: 131_072,
            channel_max: 2047,
            max_message_size: 100 * 1024 * 1024,
            max_unfinished_per_connection: 256 * 1024 * 1024,
            heartbeat_max: 120,
            handshake_timeout: Duration::from_secs(10),
            write_high_water: 1024 * 1024,
            backlog_hold_bytes: 16 * 1024 * 1024,
            connection_limit_per_user: 0,
            connection_limit_per_ip: 0,
            max_queues_per_user: 0,
            consumer_timeout: None,
            session_max_unacked: 10_000,
            max_consumers_per_session: 1024,
            gate: None,
        }
    }
}
