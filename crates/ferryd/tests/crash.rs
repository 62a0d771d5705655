//! The crash test: publishers (counting only completed transfers) and consumers (counting only
//! completed accepts) run against ferryd while it is killed with SIGKILL at random moments and
//! restarted on the same data directory. At the end a total-queue check drains what is left:
//! every completed message is there exactly once or its accept was sent (an accept the broker
//! carried out just before the kill may not have been reported), no message whose accept
//! completed came back, and nothing that was never published appears.
//!
//! `FERRY_CRASH_CYCLES` sets the number of kills (default 20); `FERRY_CRASH_SEED` replays a
//! run's random timings.

mod common;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{DataDir, Ferryd};
use ferry_amqp010::MessageAccept;
use ferry_client::{
    AcceptMode, Command, ConnectOptions, Connection, FlowMode, OutgoingMessage,
    QueueDeclareOptions, SequenceSet, Session, SubscribeOptions,
};

const QUEUE: &str = "crash-test";
const PUBLISHERS: usize = 3;
const CONSUMERS: usize = 2;
/// Transfers per completion round trip.
const BATCH: usize = 8;
const STEP: Duration = Duration::from_secs(5);

#[derive(Default)]
struct Ledger {
    /// Every message a publisher sent (completed or not).
    sent: HashSet<String>,
    /// Messages whose transfer the broker completed.
    completed: HashSet<String>,
    /// Messages whose accept was sent: the broker may have carried it out without our
    /// hearing so before the kill.
    accept_sent: HashSet<String>,
    /// Messages whose accept the broker completed.
    accepted: HashSet<String>,
    violations: Vec<String>,
}

type Shared = Arc<Mutex<Ledger>>;

/// xorshift64*: enough randomness for kill timings, and replayable from the printed seed.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n
    }
}

async fn open(broker: std::net::SocketAddr) -> Option<(Connection, Session)> {
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

async fn publisher(addr: std::net::SocketAddr, tag: String, ledger: Shared) {
    let Some((_c, s)) = open(addr).await else {
        return;
    };
    let mut seq = 0u64;
    loop {
        let mut batch = Vec::with_capacity(BATCH);
        let mut ids = Vec::with_capacity(BATCH);
        for i in 0..BATCH {
            let body = format!("{tag}-{seq}");
            seq += 1;
            let m = OutgoingMessage::builder()
                .routing_key(QUEUE)
                .persistent(true)
                .body(body.clone())
                .build()
                .expect("message");
            ledger.lock().unwrap().sent.insert(body.clone());
            let sent = if i + 1 == BATCH {
                tokio::time::timeout(STEP, s.transfer_sync("", &m)).await
            } else {
                tokio::time::timeout(STEP, s.transfer("", &m)).await
            };
            match sent {
                Ok(Ok(id)) => {
                    ids.push(id);
                    batch.push(body);
                }
                _ => return,
            }
        }
        for id in ids {
            if !matches!(tokio::time::timeout(STEP, s.wait_for(id)).await, Ok(Ok(()))) {
                return;
            }
        }
        ledger.lock().unwrap().completed.extend(batch);
    }
}

async fn consumer(addr: std::net::SocketAddr, tag: String, ledger: Shared) {
    let Some((_c, s)) = open(addr).await else {
        return;
    };
    let opts = SubscribeOptions {
        accept_mode: AcceptMode::Explicit,
        flow_mode: FlowMode::Window,
        message_credit: 64,
        ..SubscribeOptions::default()
    };
    let Ok(Ok(mut sub)) = tokio::time::timeout(STEP, s.subscribe(QUEUE, &tag, opts)).await else {
        return;
    };
    loop {
        let mut set = SequenceSet::new();
        let mut bodies = Vec::new();
        // Whatever arrives within a short while, then one accept for all of it.
        while bodies.len() < 32 {
            match tokio::time::timeout(Duration::from_millis(20), sub.next()).await {
                Ok(Some(d)) => {
                    let body = String::from_utf8_lossy(&d.body).into_owned();
                    {
                        let mut l = ledger.lock().unwrap();
                        if l.accepted.contains(&body) {
                            l.violations
                                .push(format!("{body} was delivered again after its accept"));
                        }
                        if !l.sent.contains(&body) {
                            l.violations.push(format!("{body} was never published"));
                        }
                    }
                    set.add(d.id);
                    bodies.push(body);
                }
                Ok(None) => return,
                Err(_) => break,
            }
        }
        if bodies.is_empty() {
            continue;
        }
        ledger
            .lock()
            .unwrap()
            .accept_sent
            .extend(bodies.iter().cloned());
        let accept = Command::MessageAccept(MessageAccept {
            transfers: Some(set),
        });
        let Ok(id) = s.send(accept, true) else {
            return;
        };
        if !matches!(tokio::time::timeout(STEP, s.wait_for(id)).await, Ok(Ok(()))) {
            return;
        }
        let mut l = ledger.lock().unwrap();
        for b in bodies {
            if !l.accepted.insert(b.clone()) {
                l.violations.push(format!("{b} was accepted twice"));
            }
        }
    }
}

fn start(dir: &DataDir) -> Ferryd {
    // Small segments: the kills land in rolls, reclamation and compaction too.
    Ferryd::start_with(&[&dir.arg(), "--store-segment-size", "262144"])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_completed_message_survives_sigkill_exactly_once_or_was_accepted() {
    let cycles: usize = std::env::var("FERRY_CRASH_CYCLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20);
    let seed: u64 = std::env::var("FERRY_CRASH_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
                | 1
        });
    eprintln!("crash test: {cycles} cycles, FERRY_CRASH_SEED={seed}");
    let mut rng = Rng(seed);
    let dir = DataDir::new("crash");
    let ledger: Shared = Arc::default();
    let started = Instant::now();
    for cycle in 0..cycles {
        let broker = start(&dir);
        {
            let (_c, s) = open(broker.addr).await.expect("connect after restart");
            let opts = QueueDeclareOptions {
                durable: true,
                ..QueueDeclareOptions::default()
            };
            s.queue_declare(QUEUE, opts).await.expect("declare");
        }
        let mut tasks = Vec::new();
        for p in 0..PUBLISHERS {
            let tag = format!("c{cycle}p{p}");
            tasks.push(tokio::spawn(publisher(broker.addr, tag, ledger.clone())));
        }
        // Consumers sit out some cycles so a backlog builds up across kills.
        if cycle % 3 != 1 {
            for c in 0..CONSUMERS {
                let tag = format!("c{cycle}s{c}");
                tasks.push(tokio::spawn(consumer(broker.addr, tag, ledger.clone())));
            }
        }
        tokio::time::sleep(Duration::from_millis(100 + rng.below(400))).await;
        let log = broker.kill();
        for line in log.lines().filter(|l| l.contains("store")) {
            eprintln!("cycle {cycle}: {line}");
        }
        for t in tasks {
            let _ = tokio::time::timeout(STEP * 2, t).await;
        }
    }
    // The total-queue check: drain everything that is left.
    let broker = start(&dir);
    let (_c, s) = open(broker.addr).await.expect("connect for the check");
    let count = s
        .queue_query(QUEUE)
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
    let mut sub = s.subscribe(QUEUE, "check", opts).await.expect("subscribe");
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
    let l = ledger.lock().unwrap();
    let mut violations = l.violations.clone();
    for (body, n) in &left {
        if *n > 1 {
            violations.push(format!("{body} is in the queue {n} times"));
        }
        if l.accepted.contains(body) {
            violations.push(format!("{body} was accepted but is back in the queue"));
        }
        if !l.sent.contains(body) {
            violations.push(format!("{body} was never published"));
        }
    }
    let mut lost = 0;
    for body in &l.completed {
        if !left.contains_key(body) && !l.accept_sent.contains(body) {
            lost += 1;
            if lost <= 10 {
                violations.push(format!("{body} was completed but is lost"));
            }
        }
    }
    eprintln!(
        "crash test: {cycles} kills in {:.1}s; {} sent, {} completed, {} accepted, {} left; \
         {lost} lost",
        started.elapsed().as_secs_f64(),
        l.sent.len(),
        l.completed.len(),
        l.accepted.len(),
        left.len()
    );
    assert!(
        !l.completed.is_empty(),
        "the publishers got nothing completed"
    );
    assert!(!l.accepted.is_empty(), "the consumers got nothing accepted");
    assert!(violations.is_empty(), "seed {seed}: {violations:#?}");
}
