//! What the SIGKILL tests share: replayable random timings, settings from the environment,
//! connecting to a broker that may be gone, and ferryd on one data directory across kills.
#![allow(dead_code)]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Duration;

use ferry_client::{
    AcceptMode, ConnectOptions, Connection, FlowMode, OutgoingMessage, QueueDeclareOptions,
    Session, SubscribeOptions,
};

use super::{DataDir, Ferryd};

/// How long any one step may take before the broker counts as gone.
pub const STEP: Duration = Duration::from_secs(5);

/// xorshift64*: enough randomness for kill timings, and replayable from the printed seed.
pub struct Rng(pub u64);

impl Rng {
    pub fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n
    }
}

/// The number in environment variable `var`, else `default`.
pub fn env_or(var: &str, default: u64) -> u64 {
    std::env::var(var)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The seed in `var` (to replay a run), else one from the clock.
pub fn seed(var: &str) -> u64 {
    let clock = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64);
    env_or(var, clock | 1)
}

/// A 0-10 connection and session, or `None` if the broker does not answer in time.
pub async fn open(broker: SocketAddr) -> Option<(Connection, Session)> {
    let conn = tokio::time::timeout(STEP, Connection::connect(broker, ConnectOptions::default()))
        .await
        .ok()?
        .ok()?;
    let s = tokio::time::timeout(STEP, conn.session())
        .await
        .ok()?
        .ok()?;
    Some((conn, s))
}

/// A persistent message for `queue` through the default exchange.
pub fn persistent_to(queue: &str, body: &str) -> OutgoingMessage {
    OutgoingMessage::builder()
        .routing_key(queue)
        .persistent(true)
        .body(body.to_owned())
        .build()
        .expect("message")
}

pub async fn declare_durable(s: &Session, queue: &str) {
    let opts = QueueDeclareOptions {
        durable: true,
        ..QueueDeclareOptions::default()
    };
    s.queue_declare(queue, opts).await.expect("declare");
}

/// The total-queue check's first half: everything left on `queue`, by body, each of them
/// checked to be marked redelivered (all were recovered after a kill).
pub async fn drain(s: &Session, queue: &str) -> HashMap<String, usize> {
    let count = s
        .queue_query(queue)
        .await
        .expect("query")
        .message_count
        .unwrap_or(0);
    let opts = SubscribeOptions {
        accept_mode: AcceptMode::None,
        flow_mode: FlowMode::Credit,
        message_credit: u32::MAX,
        ..SubscribeOptions::default()
    };
    let mut sub = s.subscribe(queue, queue, opts).await.expect("subscribe");
    let mut left: HashMap<String, usize> = HashMap::new();
    for _ in 0..count {
        let d = tokio::time::timeout(STEP, sub.next())
            .await
            .expect("every counted message is delivered")
            .expect("subscription open");
        assert!(d.redelivered, "recovered messages are marked redelivered");
        *left
            .entry(String::from_utf8_lossy(&d.body).into_owned())
            .or_default() += 1;
    }
    left
}

/// ferryd on `dir` with small segments, so kills land in segment rolls, reclamation and
/// compaction too, and a small memory budget, so a backlog's contents are mostly on disk and
/// read back on delivery.
pub fn start_on(dir: &DataDir) -> Ferryd {
    Ferryd::start_with(&[
        &dir.arg(),
        "--store-segment-size",
        "262144",
        "--store-memory-budget",
        "64KiB",
    ])
}
