//! Connection negotiation: what ferryd offers in connection.start and connection.tune. The
//! SASL exchange itself runs in `crate::auth`.

use ferry_amqp010::{Array, ConnectionStart, ConnectionTune, List, Map, Str, Value};

use crate::config::ServerConfig;

pub fn start(mechanisms: &[&str]) -> ConnectionStart {
    let mut properties = Map::new();
    properties.insert("product", Value::Str16(Str::from("ferryd")));
    properties.insert(
        "version",
        Value::Str16(Str::from(env!("CARGO_PKG_VERSION"))),
    );
    properties.insert("platform", Value::Str16(Str::from(std::env::consts::OS)));
    // Qpid JMS 0-x then leaves selectors to the broker (pre-acquired subscriptions with
    // `x-filter-jms-selector`) instead of browsing and filtering client-side.
    properties.insert(
        "qpid.features",
        Value::List(List(vec![Value::Str16(Str::from("qpid.jms-selector"))])),
    );
    ConnectionStart {
        server_properties: Some(properties),
        mechanisms: Some(Array::of_str16(mechanisms.iter().copied())),
        locales: Some(Array::of_str16(["en_US"])),
    }
}

/// The client's properties (product, version, qpid.client_process...) as text, for
/// management; maps and lists are left out.
pub fn client_properties(map: &Map) -> Vec<(String, String)> {
    map.iter()
        .filter_map(|(k, v)| {
            let text = match v {
                Value::Str8(s) | Value::Str16(s) => s.to_str_lossy().into_owned(),
                Value::Vbin8(b) | Value::Vbin16(b) | Value::Vbin32(b) => {
                    String::from_utf8_lossy(b).into_owned()
                }
                Value::Bool(b) => b.to_string(),
                Value::Int8(n) => n.to_string(),
                Value::Uint8(n) => n.to_string(),
                Value::Int16(n) => n.to_string(),
                Value::Uint16(n) => n.to_string(),
                Value::Int32(n) => n.to_string(),
                Value::Uint32(n) => n.to_string(),
                Value::Int64(n) => n.to_string(),
                Value::Uint64(n) => n.to_string(),
                _ => return None,
            };
            Some((k.to_str_lossy().into_owned(), text))
        })
        .collect()
}

pub fn tune(config: &ServerConfig) -> ConnectionTune {
    ConnectionTune {
        channel_max: Some(config.channel_max),
        max_frame_size: Some(config.max_frame_size),
        heartbeat_min: Some(0),
        heartbeat_max: Some(config.heartbeat_max),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_lists_the_mechanisms_in_order() {
        let names: Vec<String> = start(&["SCRAM-SHA-256", "PLAIN"])
            .mechanisms
            .unwrap()
            .strs()
            .map(|s| s.to_str_lossy().into_owned())
            .collect();
        assert_eq!(names, ["SCRAM-SHA-256", "PLAIN"]);
    }
}
