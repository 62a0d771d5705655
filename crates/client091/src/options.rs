use std::time::Duration;

/// How to connect. The defaults suit a loopback broker with RabbitMQ's stock account.
#[derive(Debug, Clone)]
pub struct ConnectOptions {
    /// SASL PLAIN credentials; `guest`/`guest` when not given, as RabbitMQ clients do.
    pub username: Option<String>,
    pub password: Option<String>,
    pub virtual_host: String,
    /// Largest frame we accept; the smaller of this and the server's offer applies.
    pub frame_max: u32,
    /// Seconds; 0 asks for no heartbeats.
    pub heartbeat: u16,
    pub tcp_nodelay: bool,
    /// Largest incoming message body accepted.
    pub max_body_size: u64,
    /// Buffered outbound octets that make `publish` write to the socket.
    pub flush_at: usize,
    /// How long connecting and the handshake may take.
    pub connect_timeout: Duration,
}

impl Default for ConnectOptions {
    fn default() -> Self {
        ConnectOptions {
            username: None,
            password: None,
            virtual_host: "/".into(),
            frame_max: 131_072,
            heartbeat: 0,
            tcp_nodelay: true,
            max_body_size: 256 << 20,
            flush_at: 64 * 1024,
            connect_timeout: Duration::from_secs(30),
        }
    }
}

/// `queue.declare` flags.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueOptions {
    pub passive: bool,
    pub durable: bool,
    pub exclusive: bool,
    pub auto_delete: bool,
}

/// `basic.consume` flags.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ConsumeOptions {
    /// Deliveries count as acknowledged when sent (no `basic.ack`, no prefetch limit).
    pub no_ack: bool,
    pub exclusive: bool,
}
