//! Connection negotiation: what ferryd offers in connection.start and connection.tune, and
//! the SASL check of connection.start-ok.

use std::net::SocketAddr;

use ferry_amqp010::{Array, ConnectionStart, ConnectionStartOk, ConnectionTune, Map, Str, Value};

use crate::config::{AuthMode, ServerConfig};

pub fn start(config: &ServerConfig) -> ConnectionStart {
    let mut properties = Map::new();
    properties.insert("product", Value::Str16(Str::from("ferryd")));
    properties.insert(
        "version",
        Value::Str16(Str::from(env!("CARGO_PKG_VERSION"))),
    );
    properties.insert("platform", Value::Str16(Str::from(std::env::consts::OS)));
    let mechanisms: &[&str] = match config.auth {
        AuthMode::None => &["ANONYMOUS", "PLAIN"],
        AuthMode::GuestOnly => &["PLAIN"],
    };
    ConnectionStart {
        server_properties: Some(properties),
        mechanisms: Some(Array::of_str16(mechanisms.iter().copied())),
        locales: Some(Array::of_str16(["en_US"])),
    }
}

pub fn tune(config: &ServerConfig) -> ConnectionTune {
    ConnectionTune {
        channel_max: Some(config.channel_max),
        max_frame_size: Some(config.max_frame_size),
        heartbeat_min: Some(0),
        heartbeat_max: Some(config.heartbeat_max),
    }
}

/// Checks the client's SASL response; on success returns the authenticated user name.
pub fn authenticate(
    config: &ServerConfig,
    peer: SocketAddr,
    start_ok: &ConnectionStartOk,
) -> Result<String, String> {
    let mechanism = start_ok
        .mechanism
        .as_ref()
        .map(|m| m.to_str_lossy().into_owned())
        .unwrap_or_default();
    let response = start_ok.response.as_deref().unwrap_or_default();
    match (mechanism.as_str(), config.auth) {
        ("ANONYMOUS", AuthMode::None) => Ok("anonymous".to_string()),
        ("PLAIN", mode) => {
            let (user, password) = parse_plain(response)?;
            match mode {
                AuthMode::None => Ok(user),
                AuthMode::GuestOnly => {
                    if user == "guest" && password == "guest" && peer.ip().is_loopback() {
                        Ok(user)
                    } else {
                        Err("authentication failed".to_string())
                    }
                }
            }
        }
        (other, _) => Err(format!("unsupported SASL mechanism {other:?}")),
    }
}

/// SASL PLAIN (RFC 4616): `[authzid] NUL authcid NUL passwd`.
fn parse_plain(response: &[u8]) -> Result<(String, String), String> {
    let mut parts = response.split(|b| *b == 0);
    let (Some(_authzid), Some(user), Some(password), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err("malformed PLAIN response".to_string());
    };
    let text = |b: &[u8]| String::from_utf8(b.to_vec()).map_err(|_| "PLAIN response is not UTF-8");
    Ok((text(user)?, text(password)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn start_ok(mechanism: &str, response: &'static [u8]) -> ConnectionStartOk {
        ConnectionStartOk {
            mechanism: Some(Str::from(mechanism)),
            response: Some(Bytes::from_static(response)),
            ..Default::default()
        }
    }

    fn loopback() -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], 40000))
    }

    #[test]
    fn open_mode_accepts_anonymous_and_any_plain_user() {
        let config = ServerConfig::default();
        assert!(authenticate(&config, loopback(), &start_ok("ANONYMOUS", b"")).is_ok());
        assert_eq!(
            authenticate(&config, loopback(), &start_ok("PLAIN", b"\0bob\0x")).unwrap(),
            "bob"
        );
    }

    #[test]
    fn guest_mode_admits_only_guest_from_loopback() {
        let config = ServerConfig {
            auth: AuthMode::GuestOnly,
            ..ServerConfig::default()
        };
        assert!(authenticate(&config, loopback(), &start_ok("ANONYMOUS", b"")).is_err());
        assert!(authenticate(&config, loopback(), &start_ok("PLAIN", b"\0guest\0guest")).is_ok());
        assert!(authenticate(&config, loopback(), &start_ok("PLAIN", b"\0guest\0wrong")).is_err());
        let remote = SocketAddr::from(([192, 0, 2, 1], 40000));
        assert!(authenticate(&config, remote, &start_ok("PLAIN", b"\0guest\0guest")).is_err());
    }

    #[test]
    fn malformed_plain_is_refused() {
        let config = ServerConfig::default();
        assert!(authenticate(&config, loopback(), &start_ok("PLAIN", b"guest")).is_err());
        assert!(authenticate(&config, loopback(), &start_ok("PLAIN", b"\0a\0b\0c")).is_err());
        assert!(authenticate(&config, loopback(), &start_ok("CRAM-MD5", b"")).is_err());
    }

    #[test]
    fn start_offers_mechanisms_by_mode() {
        let open = start(&ServerConfig::default());
        let names: Vec<String> = open
            .mechanisms
            .unwrap()
            .strs()
            .map(|s| s.to_str_lossy().into_owned())
            .collect();
        assert_eq!(names, ["ANONYMOUS", "PLAIN"]);
    }
}
