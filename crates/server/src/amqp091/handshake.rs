//! Connection negotiation: connection.start's properties and mechanisms, RabbitMQ's AMQPLAIN
//! response (checked like PLAIN by `crate::auth`), and what we offer in connection.tune.

use bytes::{BufMut, Bytes, BytesMut};
use ferry_amqp091::{
    ConnectionStart, ConnectionStartOk, ConnectionTune, FieldTable, FieldValue, LongStr, ShortStr,
    FRAME_MIN_SIZE,
};

use crate::config::ServerConfig;

/// Capabilities we announce; each is something this layer really does.
const CAPABILITIES: &[&str] = &[
    "publisher_confirms",
    "basic.nack",
    "consumer_cancel_notify",
    "connection.blocked",
    "authentication_failure_close",
    "per_consumer_qos",
    "exchange_exchange_bindings",
];

fn text(s: &'static str) -> FieldValue {
    FieldValue::LongStr(LongStr::from_static(s))
}

pub fn start(mechanisms: &[&str]) -> ConnectionStart {
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
    ConnectionStart {
        version_major: 0,
        version_minor: 9,
        server_properties: props,
        mechanisms: LongStr::new(mechanisms.join(" ")).unwrap_or_default(),
        locales: LongStr::from_static("en_US"),
    }
}

/// Our frame-max: the configured one, but never below the protocol minimum.
pub fn frame_max(config: &ServerConfig) -> u32 {
    config.amqp091_frame_max.max(FRAME_MIN_SIZE as u32)
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

/// The client's properties (product, version, platform, connection_name...) as text, for
/// management; tables other than these are left out.
pub fn client_properties(start_ok: &ConnectionStartOk) -> Vec<(String, String)> {
    start_ok
        .client_properties
        .iter()
        .filter_map(|(k, v)| {
            let text = match v {
                FieldValue::LongStr(s) | FieldValue::ByteArray(s) => {
                    String::from_utf8_lossy(s.as_bytes()).into_owned()
                }
                FieldValue::Bool(b) => b.to_string(),
                FieldValue::I8(n) => n.to_string(),
                FieldValue::U8(n) => n.to_string(),
                FieldValue::I16(n) => n.to_string(),
                FieldValue::U16(n) => n.to_string(),
                FieldValue::I32(n) => n.to_string(),
                FieldValue::U32(n) => n.to_string(),
                FieldValue::I64(n) => n.to_string(),
                FieldValue::Timestamp(n) => n.to_string(),
                _ => return None,
            };
            Some((String::from_utf8_lossy(k.as_bytes()).into_owned(), text))
        })
        .collect()
}

/// RabbitMQ's AMQPLAIN response (a field table's entries, without the table's length, holding
/// LOGIN and PASSWORD) as a PLAIN response, so it is checked exactly like PLAIN. A malformed
/// one becomes an empty response, which PLAIN refuses.
pub fn amqplain_as_plain(response: &[u8]) -> Vec<u8> {
    parse_amqplain(response)
        .filter(|(user, password)| !user.contains(&0) && !password.contains(&0))
        .map(|(user, password)| [&[0][..], &user, &[0], &password].concat())
        .unwrap_or_default()
}

fn parse_amqplain(response: &[u8]) -> Option<(Bytes, Bytes)> {
    let len = u32::try_from(response.len()).ok()?;
    let mut framed = BytesMut::with_capacity(response.len() + 4);
    framed.put_u32(len);
    framed.put_slice(response);
    let mut buf: Bytes = framed.freeze();
    let table = FieldTable::decode(&mut buf).ok()?;
    let field = |name: &str| match table.get(name) {
        Some(FieldValue::LongStr(s)) => Some(s.bytes().clone()),
        _ => None,
    };
    Some((field("LOGIN")?, field("PASSWORD")?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn amqplain(user: &'static str, password: &'static str) -> Vec<u8> {
        let mut t = FieldTable::new();
        t.push(ShortStr::from_static("LOGIN"), text(user));
        t.push(ShortStr::from_static("PASSWORD"), text(password));
        let mut out = BytesMut::new();
        t.encode(&mut out);
        out[4..].to_vec()
    }

    #[test]
    fn amqplain_becomes_plain() {
        assert_eq!(amqplain_as_plain(&amqplain("amy", "x")), b"\0amy\0x");
        assert_eq!(amqplain_as_plain(&amqplain("a\0b", "x")), b"");
        assert_eq!(amqplain_as_plain(b"garbage"), b"");
        let mut only_login = FieldTable::new();
        only_login.push(ShortStr::from_static("LOGIN"), text("amy"));
        let mut out = BytesMut::new();
        only_login.encode(&mut out);
        assert_eq!(amqplain_as_plain(&out[4..]), b"");
    }

    #[test]
    fn start_announces_capabilities() {
        let s = start(&["PLAIN", "AMQPLAIN"]);
        assert_eq!(s.mechanisms.as_bytes(), b"PLAIN AMQPLAIN");
        let Some(FieldValue::Table(caps)) = s.server_properties.get("capabilities") else {
            panic!("no capabilities");
        };
        assert_eq!(
            caps.get("publisher_confirms"),
            Some(&FieldValue::Bool(true))
        );
        assert_eq!(
            caps.get("exchange_exchange_bindings"),
            Some(&FieldValue::Bool(true))
        );
    }
}
