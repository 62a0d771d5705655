//! Connection negotiation: connection.start's properties and mechanisms, the SASL check of
//! start-ok (PLAIN and RabbitMQ's AMQPLAIN), and what we offer in connection.tune.

use std::net::SocketAddr;

use bytes::{BufMut, Bytes, BytesMut};
use ferry_amqp091::{
    ConnectionStart, ConnectionStartOk, ConnectionTune, FieldTable, FieldValue, LongStr, ShortStr,
    FRAME_MIN_SIZE,
};

use crate::config::{AuthMode, ServerConfig};

/// Capabilities we announce; each is something this layer really does.
const CAPABILITIES: &[&str] = &[
    "publisher_confirms",
    "basic.nack",
    "consumer_cancel_notify",
    "connection.blocked",
    "authentication_failure_close",
    "per_consumer_qos",
];

fn text(s: &'static str) -> FieldValue {
    FieldValue::LongStr(LongStr::from_static(s))
}

pub fn start(config: &ServerConfig) -> ConnectionStart {
    let mut caps = FieldTable::new();
    for cap in CAPABILITIES {
        caps.push(ShortStr::from_static(cap), FieldValue::Bool(true));
    }
    let mut props = FieldTable::new();
    props.push(ShortStr::from_static("product"), text("ferryd"));
    props.push(
        ShortStr::from_static("version"),
        text(env!("CARGO_PKG_VERSION")),
    );
    props.push(
        ShortStr::from_static("platform"),
        text(std::env::consts::OS),
    );
    props.push(
        ShortStr::from_static("capabilities"),
        FieldValue::Table(caps),
    );
    let mechanisms = match config.auth {
        AuthMode::None => "PLAIN AMQPLAIN ANONYMOUS",
        AuthMode::GuestOnly => "PLAIN AMQPLAIN",
    };
    ConnectionStart {
        version_major: 0,
        version_minor: 9,
        server_properties: props,
        mechanisms: LongStr::from_static(mechanisms),
        locales: LongStr::from_static("en_US"),
    }
}

/// Our frame-max: the configured one, but never below the protocol minimum.
pub fn frame_max(config: &ServerConfig) -> u32 {
    u32::from(config.max_frame_size).max(FRAME_MIN_SIZE as u32)
}

pub fn tune(config: &ServerConfig) -> ConnectionTune {
    ConnectionTune {
        channel_max: config.channel_max,
        frame_max: frame_max(config),
        heartbeat: config.heartbeat_max,
    }
}

/// What the client announced it can handle.
#[derive(Debug, Clone, Copy, Default)]
pub struct ClientCaps {
    pub consumer_cancel_notify: bool,
    pub authentication_failure_close: bool,
    /// The client understands connection.blocked / unblocked (RabbitMQ's resource alarms).
    pub connection_blocked: bool,
}

pub fn client_caps(start_ok: &ConnectionStartOk) -> ClientCaps {
    let caps = match start_ok.client_properties.get("capabilities") {
        Some(FieldValue::Table(t)) => t,
        _ => return ClientCaps::default(),
    };
    let on = |name: &str| matches!(caps.get(name), Some(FieldValue::Bool(true)));
    ClientCaps {
        consumer_cancel_notify: on("consumer_cancel_notify"),
        authentication_failure_close: on("authentication_failure_close"),
        connection_blocked: on("connection.blocked"),
    }
}

/// Checks the client's SASL response; on success returns the user name.
pub fn authenticate(
    config: &ServerConfig,
    peer: SocketAddr,
    start_ok: &ConnectionStartOk,
) -> Result<String, String> {
    let response = start_ok.response.bytes();
    let (user, password) = match start_ok.mechanism.as_bytes() {
        b"PLAIN" => parse_plain(response)?,
        b"AMQPLAIN" => parse_amqplain(response)?,
        b"ANONYMOUS" if config.auth == AuthMode::None => return Ok("anonymous".into()),
        other => {
            return Err(format!(
                "unsupported SASL mechanism {:?}",
                String::from_utf8_lossy(other)
            ))
        }
    };
    match config.auth {
        AuthMode::None => Ok(user),
        AuthMode::GuestOnly
            if user == "guest" && password == "guest" && peer.ip().is_loopback() =>
        {
            Ok(user)
        }
        AuthMode::GuestOnly => Err(format!("login refused for user {user:?}")),
    }
}

/// SASL PLAIN (RFC 4616): `[authzid] NUL authcid NUL passwd`.
fn parse_plain(response: &[u8]) -> Result<(String, String), String> {
    let mut parts = response.split(|b| *b == 0);
    let (Some(_), Some(user), Some(password), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err("malformed PLAIN response".into());
    };
    Ok((utf8(user)?, utf8(password)?))
}

/// RabbitMQ's AMQPLAIN: a field table's entries (without its length prefix) holding LOGIN and
/// PASSWORD.
fn parse_amqplain(response: &[u8]) -> Result<(String, String), String> {
    let len = u32::try_from(response.len()).map_err(|_| "AMQPLAIN response too long")?;
    let mut framed = BytesMut::with_capacity(response.len() + 4);
    framed.put_u32(len);
    framed.put_slice(response);
    let mut buf: Bytes = framed.freeze();
    let table = FieldTable::decode(&mut buf).map_err(|e| format!("malformed AMQPLAIN: {e}"))?;
    let field = |name: &str| match table.get(name) {
        Some(FieldValue::LongStr(s)) => utf8(s.as_bytes()),
        _ => Err(format!("AMQPLAIN response lacks {name}")),
    };
    Ok((field("LOGIN")?, field("PASSWORD")?))
}

fn utf8(b: &[u8]) -> Result<String, String> {
    String::from_utf8(b.to_vec()).map_err(|_| "credentials are not UTF-8".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn start_ok(mechanism: &'static str, response: Vec<u8>) -> ConnectionStartOk {
        ConnectionStartOk {
            mechanism: ShortStr::from_static(mechanism),
            response: LongStr::new(response).unwrap(),
            ..ConnectionStartOk::default()
        }
    }

    fn amqplain(user: &'static str, password: &'static str) -> Vec<u8> {
        let mut t = FieldTable::new();
        t.push(ShortStr::from_static("LOGIN"), text(user));
        t.push(ShortStr::from_static("PASSWORD"), text(password));
        let mut out = BytesMut::new();
        t.encode(&mut out);
        out[4..].to_vec()
    }

    fn loopback() -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], 5000))
    }

    #[test]
    fn open_mode_accepts_any_plain_or_amqplain_user() {
        let c = ServerConfig::default();
        let plain = start_ok("PLAIN", b"\0bob\0pw".to_vec());
        assert_eq!(authenticate(&c, loopback(), &plain).unwrap(), "bob");
        let amq = start_ok("AMQPLAIN", amqplain("amy", "x"));
        assert_eq!(authenticate(&c, loopback(), &amq).unwrap(), "amy");
        assert!(authenticate(&c, loopback(), &start_ok("CRAM-MD5", vec![])).is_err());
    }

    #[test]
    fn guest_mode_checks_credentials() {
        let c = ServerConfig {
            auth: AuthMode::GuestOnly,
            ..ServerConfig::default()
        };
        let ok = start_ok("AMQPLAIN", amqplain("guest", "guest"));
        assert!(authenticate(&c, loopback(), &ok).is_ok());
        let bad = start_ok("PLAIN", b"\0guest\0nope".to_vec());
        assert!(authenticate(&c, loopback(), &bad).is_err());
        assert!(authenticate(&c, loopback(), &start_ok("ANONYMOUS", vec![])).is_err());
    }

    #[test]
    fn start_announces_capabilities() {
        let s = start(&ServerConfig::default());
        let Some(FieldValue::Table(caps)) = s.server_properties.get("capabilities") else {
            panic!("no capabilities");
        };
        assert_eq!(
            caps.get("publisher_confirms"),
            Some(&FieldValue::Bool(true))
        );
        assert!(caps.get("exchange_exchange_bindings").is_none());
    }
}
