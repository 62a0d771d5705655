//! The core's management snapshots as RabbitMQ's JSON objects (field names as RabbitMQ 3.x
//! uses them, vhost always "/"), plus a few Ferry-only fields where the core knows more.

pub mod args;
pub mod connections;
pub mod message;
pub mod objects;
pub mod system;

use std::collections::HashMap;

use ferry_server::Listeners;

use crate::stats::Window;

/// The only virtual host.
pub const VHOST: &str = "/";

/// What every rendering needs to know besides the object.
#[derive(Debug, Clone)]
pub struct Ctx {
    /// RabbitMQ-style node name, `ferry@host`.
    pub node: String,
    pub listeners: Listeners,
    pub windows: Windows,
}

/// The history a request asked to see with its rates.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Windows {
    pub msg_rates: Option<Window>,
    pub lengths: Option<Window>,
    pub data_rates: Option<Window>,
}

impl Windows {
    /// Reads `msg_rates_age`, `msg_rates_incr`, `lengths_age`, ... from a query string. An
    /// age without an increment samples every 5 s; bad numbers are ignored, as RabbitMQ
    /// ignores what it cannot use.
    pub fn from_query(q: &HashMap<String, String>) -> Windows {
        let window = |prefix: &str| {
            let age = q.get(&format!("{prefix}_age"))?.parse::<u64>().ok()?;
            let incr = q
                .get(&format!("{prefix}_incr"))
                .and_then(|i| i.parse::<u64>().ok())
                .filter(|i| *i > 0)
                .unwrap_or(5);
            // A day at most: the history is shorter anyway.
            Some(Window {
                age_s: age.min(86_400),
                incr_s: incr,
            })
        };
        Windows {
            msg_rates: window("msg_rates"),
            lengths: window("lengths"),
            data_rates: window("data_rates"),
        }
    }
}
