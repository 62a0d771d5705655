//! Connection options shared by perftest and latency-test, named as qpid's TestOptions
//! names them so existing command lines carry over.

use clap::{Args, ValueEnum};

/// The AMQP version a harness speaks to the broker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Protocol {
    /// AMQP 0-10, with ferry-client (qpidd, Qpid Broker-J, ferryd).
    #[value(name = "amqp0-10")]
    Amqp010,
    /// AMQP 0-9-1, with ferry-client091 (RabbitMQ, ferryd).
    #[value(name = "amqp0-9-1")]
    Amqp091,
    /// AMQP 1.0, with ferry-client1 (ferryd, Qpid Broker-J); queues are declared over
    /// AMQP 0-10 on the same port, since 1.0 cannot declare them.
    #[value(name = "amqp1.0")]
    Amqp1,
}

#[derive(Debug, Clone, PartialEq, Eq, Args)]
pub struct ConnectionOpts {
    /// Protocol to speak to the broker.
    #[arg(long, value_enum, default_value = "amqp0-10")]
    pub protocol: Protocol,
    /// Broker host to connect to.
    #[arg(
        short = 'b',
        long = "broker",
        value_name = "HOST",
        default_value = "localhost"
    )]
    pub broker: String,
    /// Broker port to connect to.
    #[arg(
        short = 'p',
        long = "port",
        value_name = "PORT",
        default_value_t = 5672
    )]
    pub port: u16,
    /// Turn on TCP_NODELAY (no Nagle batching). Over AMQP 0-9-1 it is always on, as in
    /// RabbitMQ's clients.
    #[arg(long = "tcp-nodelay")]
    pub tcp_nodelay: bool,
    /// Largest frame the client will accept.
    #[arg(long = "max-frame-size", value_name = "N", default_value_t = 65535)]
    pub max_frame_size: u32,
    /// User name for SASL.
    #[arg(long = "username", value_name = "USER")]
    pub username: Option<String>,
    /// Password for SASL.
    #[arg(long = "password", value_name = "PASSWORD")]
    pub password: Option<String>,
    /// SASL mechanism.
    #[arg(long = "mechanism", value_name = "NAME")]
    pub mechanism: Option<String>,
    /// Heartbeat interval in seconds (0: none).
    #[arg(long = "heartbeat", value_name = "SECS", default_value_t = 0)]
    pub heartbeat: u16,
}

/// qpid's `yes|no` booleans; also takes true/false and 1/0.
pub fn parse_yes_no(s: &str) -> Result<bool, String> {
    match s.to_ascii_lowercase().as_str() {
        "yes" | "true" | "1" | "on" => Ok(true),
        "no" | "false" | "0" | "off" => Ok(false),
        other => Err(format!("expected yes or no, got {other:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protocol_names() {
        assert_eq!(
            Protocol::from_str("amqp0-9-1", false),
            Ok(Protocol::Amqp091)
        );
        assert_eq!(Protocol::from_str("amqp0-10", false), Ok(Protocol::Amqp010));
        assert_eq!(Protocol::from_str("amqp1.0", false), Ok(Protocol::Amqp1));
        assert!(Protocol::from_str("amqp1-0", false).is_err());
    }

    #[test]
    fn yes_no() {
        assert_eq!(parse_yes_no("yes"), Ok(true));
        assert_eq!(parse_yes_no("No"), Ok(false));
        assert!(parse_yes_no("maybe").is_err());
    }
}
