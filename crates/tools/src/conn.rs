//! Connection options shared by perftest and latency-test, named as qpid's TestOptions
//! names them so existing command lines carry over.

use clap::Args;

#[derive(Debug, Clone, PartialEq, Eq, Args)]
pub struct ConnectionOpts {
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
    /// Turn on TCP_NODELAY (no Nagle batching).
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
    fn yes_no() {
        assert_eq!(parse_yes_no("yes"), Ok(true));
        assert_eq!(parse_yes_no("No"), Ok(false));
        assert!(parse_yes_no("maybe").is_err());
    }
}
