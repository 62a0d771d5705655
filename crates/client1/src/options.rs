use std::time::Duration;

/// The SASL mechanism to log in with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mechanism {
    /// PLAIN when a user name is given and the server offers it, else ANONYMOUS.
    Auto,
    Plain,
    Anonymous,
    /// No SASL layer at all: the AMQP header straight away (servers that admit anonymous
    /// clients without SASL).
    None,
}

/// How to connect. The defaults suit a loopback broker.
#[derive(Debug, Clone)]
pub struct ConnectOptions {
    /// SASL PLAIN credentials.
    pub username: Option<String>,
    pub password: Option<String>,
    pub mechanism: Mechanism,
    /// `open.hostname` (the virtual host on brokers that have them); none by default.
    pub hostname: Option<String>,
    /// Largest frame we accept (our `open.max-frame-size`).
    pub max_frame_size: u32,
    pub tcp_nodelay: bool,
    /// Largest incoming message accepted (a multi-frame delivery is refused beyond it).
    pub max_message_size: usize,
    /// Buffered outbound octets that make `send` write to the socket.
    pub flush_at: usize,
    /// Transfer frames the peer may send before we widen the session window again.
    pub incoming_window: u32,
    /// How long connecting and the handshake may take.
    pub connect_timeout: Duration,
}

impl Default for ConnectOptions {
    fn default() -> Self {
        ConnectOptions {
            username: None,
            password: None,
            mechanism: Mechanism::Auto,
            hostname: None,
            max_frame_size: 65_536,
            tcp_nodelay: true,
            max_message_size: 256 << 20,
            flush_at: 64 * 1024,
            incoming_window: 1 << 20,
            connect_timeout: Duration::from_secs(30),
        }
    }
}

/// How a sending link settles.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendMode {
    /// Transfers go out settled (at most once): nothing comes back per message.
    Settled,
    /// Transfers go out unsettled and the receiver settles them with dispositions (at
    /// least once); `send` waits while `window` are outstanding (0: no limit).
    Unsettled { window: u32 },
}

/// How a receiving link gets its deliveries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReceiveOptions {
    /// Ask the sender to settle before sending (at most once: no dispositions from us).
    pub settled: bool,
    /// Credit kept granted: the link is refilled to this many once half of it is used
    /// (taken by the application). 0: no automatic credit, see `Connection::add_credit`.
    pub credit_window: u32,
}

impl Default for ReceiveOptions {
    fn default() -> Self {
        ReceiveOptions {
            settled: false,
            credit_window: 1000,
        }
    }
}
