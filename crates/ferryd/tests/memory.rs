//! Broker memory per queued message, measured as a real ferryd's resident set grows while a
//! queue with no consumer fills with 1,000,000 messages of 256 bytes: once transient in
//! memory, once persistent on a durable queue whose contents flow to disk.
//!
//! It publishes a million messages per case (some 5 s for both in a release build, 17 s in a
//! debug one) and the broker grows by up to 600 MB, so a plain `cargo test` skips it. Run:
//! `cargo test --release -p ferryd --test memory -- --ignored --nocapture --test-threads=1`
//! (`FERRY_MEMORY_MESSAGES=N` publishes N instead; below some 500,000 the figures mostly
//! show memory freed by the warm-up being reused).
//!
//! Figures are for the system allocator (glibc malloc), which is what ferryd uses.
//! With `FERRY_MEMORY_CSV=path` each case also appends its figures to that file as a CSV
//! row (bench/run.sh's `memory` section reads them).

mod common;

use std::time::{Duration, Instant};

use common::{rss_kib, DataDir, Ferryd};
use ferry_client::{ConnectOptions, Connection, OutgoingMessage, QueueDeclareOptions, Session};

const BODY: usize = 256;
/// Issue 15's goals, which the test asserts: broker memory per queued in-memory message
/// beyond its body and its header as the client sent it (50-57 B: a 24-byte head in the
/// message's one allocation, malloc's header and rounding, and the queue's 24-byte entry;
/// the lower figures where memory the warm-up freed is reused), and per message whose
/// content is kept on disk (about 81-89 B).
const IN_MEMORY_GOAL: f64 = 64.0;
const ON_DISK_GOAL: f64 = 100.0;
const IN_MEMORY_LIMIT: f64 = IN_MEMORY_GOAL;
const ON_DISK_LIMIT: f64 = ON_DISK_GOAL;
/// The whole run of one case, publishing included; it needs seconds.
const TIME_LIMIT: Duration = Duration::from_secs(180);
/// Published and purged before the first reading, so buffers that grow once per
/// connection or queue are not counted per message.
const WARM_UP: u32 = 20_000;

fn messages() -> u32 {
    std::env::var("FERRY_MEMORY_MESSAGES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1_000_000)
}

/// What one case measured.
struct Figures {
    count: u32,
    /// Resident set growth per queued message, in bytes.
    per_message: f64,
    /// The 0-10 header segment each message carries (kept byte for byte by the broker).
    header: usize,
    seconds: f64,
}

impl Figures {
    /// Resident set growth per message beyond what the client sent as its content (body
    /// and 0-10 header segment): the broker's own overhead for an in-memory message.
    fn beyond_content(&self) -> f64 {
        self.per_message - (BODY + self.header) as f64
    }

    /// Appends `case,messages,body,header,rss_per_message,beyond_content,goal,limit,seconds`
    /// to `$FERRY_MEMORY_CSV`, if set; the goal and limit are what this case is judged by
    /// (`rss_per_message` on disk, `beyond_content` in memory).
    fn record(&self, case: &str, goal: f64, limit: f64) {
        let Some(path) = std::env::var_os("FERRY_MEMORY_CSV") else {
            return;
        };
        let row = format!(
            "{case},{},{BODY},{},{:.1},{:.1},{goal},{limit},{:.2}\n",
            self.count,
            self.header,
            self.per_message,
            self.beyond_content(),
            self.seconds
        );
        use std::io::Write;
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .and_then(|mut f| f.write_all(row.as_bytes()))
            .expect("FERRY_MEMORY_CSV is writable");
    }

    fn print(&self, case: &str) {
        eprintln!(
            "memory [{case}]: {} messages of {BODY} B (header segment {} B) in {:.1} s: \
             {:.1} B of RSS per message",
            self.count, self.header, self.seconds, self.per_message,
        );
    }
}

async fn publish(s: &Session, m: &OutgoingMessage, n: u32) {
    for _ in 0..n {
        s.transfer("", m).await.expect("transfer");
    }
    // Waits for every transfer's completion (for persistent ones, their journal sync).
    s.sync().await.expect("sync");
}

async fn measure(broker: &Ferryd, durable: bool) -> Figures {
    let conn = Connection::connect(broker.addr, ConnectOptions::default())
        .await
        .expect("connect");
    let s = conn.session().await.expect("session");
    let queue = "memory";
    let opts = QueueDeclareOptions {
        durable,
        ..QueueDeclareOptions::default()
    };
    s.queue_declare(queue, opts).await.expect("declare");
    let m = OutgoingMessage::builder()
        .routing_key(queue)
        .persistent(durable)
        .body(vec![7u8; BODY])
        .build()
        .expect("message");

    publish(&s, &m, WARM_UP).await;
    s.queue_purge(queue).await.expect("purge");
    settle().await;
    let before = rss_kib(broker.pid());
    assert!(before > 0, "no VmRSS for ferryd");

    let count = messages();
    let started = Instant::now();
    publish(&s, &m, count).await;
    let seconds = started.elapsed().as_secs_f64();
    let held = s.queue_query(queue).await.expect("query");
    assert_eq!(held.message_count, Some(count), "every message queued");
    settle().await;
    let after = rss_kib(broker.pid());
    Figures {
        count,
        per_message: (after.saturating_sub(before) * 1024) as f64 / f64::from(count),
        header: m.header_segment().len(),
        seconds,
    }
}

/// Lets the journal writer and the connection's buffers go quiet before a reading.
async fn settle() {
    tokio::time::sleep(Duration::from_millis(500)).await;
}

#[tokio::test]
#[ignore = "a million messages: run with --release (see the module comment)"]
async fn transient_messages_cost_little_beyond_their_content() {
    let broker = Ferryd::start();
    let f = tokio::time::timeout(TIME_LIMIT, measure(&broker, false))
        .await
        .expect("within the time limit");
    f.print("in memory");
    f.record("in_memory", IN_MEMORY_GOAL, IN_MEMORY_LIMIT);
    let overhead = f.beyond_content();
    eprintln!(
        "memory [in memory]: {overhead:.1} B per message beyond body and header \
         (issue 15's goal: {IN_MEMORY_GOAL})"
    );
    assert!(
        overhead <= IN_MEMORY_LIMIT,
        "{overhead:.1} B per in-memory message beyond its content (limit {IN_MEMORY_LIMIT})"
    );
}

#[tokio::test]
#[ignore = "a million messages: run with --release (see the module comment)"]
async fn messages_kept_on_disk_cost_little_memory() {
    let dir = DataDir::new("memory");
    // A budget far below what the queue holds: all but the queue's read-ahead window
    // (64 KiB here) is kept on disk.
    let broker = Ferryd::start_with(&[&dir.arg(), "--store-memory-budget", "256KiB"]);
    let f = tokio::time::timeout(TIME_LIMIT, measure(&broker, true))
        .await
        .expect("within the time limit");
    f.print("on disk");
    f.record("on_disk", ON_DISK_GOAL, ON_DISK_LIMIT);
    eprintln!("memory [on disk]: issue 15's goal: {ON_DISK_GOAL} B per message");
    assert!(
        f.per_message <= ON_DISK_LIMIT,
        "{:.1} B per message kept on disk (limit {ON_DISK_LIMIT})",
        f.per_message
    );
}
