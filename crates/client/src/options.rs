//! Options for connections, sessions, subscriptions and declarations.

use std::time::Duration;

use ferry_amqp010::{AcceptMode, AcquireMode, FlowMode, Map};

/// SASL mechanisms the client implements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mechanism {
    Plain,
    Anonymous,
}

impl Mechanism {
    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Plain => "PLAIN",
            Mechanism::Anonymous => "ANONYMOUS",
        }
    }
}

#[derive(Debug, Clone)]
pub struct ConnectOptions {
    pub username: Option<String>,
    pub password: Option<String>,
    /// `None`: PLAIN when a username is given, else ANONYMOUS.
    pub mechanism: Option<Mechanism>,
    pub virtual_host: String,
    /// Our limit; the smaller of this and the server's applies.
    pub max_frame_size: u16,
    /// Seconds; 0 asks for none. Clamped into the server's range.
    pub heartbeat: u16,
    pub tcp_nodelay: bool,
    pub client_properties: Map,
    /// Largest incoming message (header plus body) accepted; bounds memory per delivery.
    pub max_message_size: usize,
    /// Outbound octets buffered before publishers wait for the socket.
    pub write_high_water: usize,
    /// Defaults for the sessions of this connection.
    pub session: SessionOptions,
}

impl Default for ConnectOptions {
    fn default() -> Self {
        ConnectOptions {
            username: None,
            password: None,
            mechanism: None,
            virtual_host: String::new(),
            max_frame_size: u16::MAX,
            heartbeat: 0,
            tcp_nodelay: true,
            client_properties: Map::new(),
            max_message_size: 256 << 20,
            write_high_water: 4 << 20,
            session: SessionOptions::default(),
        }
    }
}

impl ConnectOptions {
    pub(crate) fn effective_mechanism(&self) -> Mechanism {
        self.mechanism.unwrap_or(if self.username.is_some() {
            Mechanism::Plain
        } else {
            Mechanism::Anonymous
        })
    }
}

#[derive(Debug, Clone)]
pub struct SessionOptions {
    /// Commands sent but not yet completed by the server before `transfer` waits.
    pub window: u32,
    /// Received transfers completed before `session.completed` is sent without waiting
    /// for `completion_delay`.
    pub completion_batch: u32,
    /// Longest time a completion of a received transfer waits to be batched.
    pub completion_delay: Duration,
}

impl Default for SessionOptions {
    fn default() -> Self {
        SessionOptions {
            window: 10_000,
            completion_batch: 256,
            completion_delay: Duration::from_millis(2),
        }
    }
}

#[derive(Debug, Clone)]
pub struct SubscribeOptions {
    pub accept_mode: AcceptMode,
    pub acquire_mode: AcquireMode,
    pub exclusive: bool,
    pub arguments: Option<Map>,
    pub flow_mode: FlowMode,
    pub message_credit: u32,
    /// `u32::MAX` is unlimited.
    pub byte_credit: u32,
}

impl Default for SubscribeOptions {
    fn default() -> Self {
        SubscribeOptions {
            accept_mode: AcceptMode::None,
            acquire_mode: AcquireMode::PreAcquired,
            exclusive: false,
            arguments: None,
            flow_mode: FlowMode::Window,
            message_credit: 1000,
            byte_credit: u32::MAX,
        }
    }
}

#[derive(Debug, Clone, Default)]
pub struct ExchangeDeclareOptions {
    pub passive: bool,
    pub durable: bool,
    pub auto_delete: bool,
    pub alternate_exchange: Option<String>,
    pub arguments: Option<Map>,
}

#[derive(Debug, Clone, Default)]
pub struct QueueDeclareOptions {
    pub passive: bool,
    pub durable: bool,
    pub exclusive: bool,
    pub auto_delete: bool,
    pub alternate_exchange: Option<String>,
    pub arguments: Option<Map>,
}
