//! The clients: publishers with confirms and consumers with manual acks, over AMQP 0-9-1
//! (ferry-client091), each message carrying a unique id in its body. They connect to any
//! node (followers pass them on to the leader), and on any error or silence reconnect to
//! the next node, as a client with its own recovery would. What they did goes into a
//! [`History`] for the checker.

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ferry_client091::{
    BasicProperties, ConnectOptions, Connection, ConsumeOptions, FieldTable, FieldValue,
    Publication, QueueOptions, ShortStr,
};

/// Everything the clients saw.
#[derive(Debug, Default)]
pub struct History {
    /// Every id a publisher tried to publish.
    pub attempted: HashSet<String>,
    /// Ids whose publish the broker confirmed (basic.ack, no nack on the channel).
    pub confirmed: HashSet<String>,
    /// Deliveries per id.
    pub received: HashMap<String, u32>,
    pub deliveries: u64,
    pub reconnects: u64,
}

pub type Shared = Arc<Mutex<History>>;

/// The members' AMQP addresses, updated as the membership changes.
pub type Addrs = Arc<Mutex<Vec<SocketAddr>>>;

/// The `n`th address (round robin), if any.
fn pick(addrs: &Addrs, n: usize) -> Option<SocketAddr> {
    let a = addrs.lock().ok()?;
    (!a.is_empty()).then(|| a[n % a.len()])
}

fn with<T>(h: &Shared, f: impl FnOnce(&mut History) -> T) -> Option<T> {
    h.lock().ok().map(|mut g| f(&mut g))
}

/// `x-queue-type: quorum`: a replicated queue.
pub fn quorum_args() -> FieldTable {
    let mut t = FieldTable::new();
    if let (Ok(k), Ok(v)) = (
        ShortStr::try_from("x-queue-type"),
        FieldValue::string("quorum"),
    ) {
        t.insert(k, v);
    }
    t
}

const STEP: Duration = Duration::from_secs(5);

async fn open(addr: SocketAddr, queue: &str) -> Option<(Connection, u16)> {
    let opts = ConnectOptions {
        connect_timeout: Duration::from_secs(3),
        ..ConnectOptions::default()
    };
    let mut c = Connection::connect(addr, &opts).await.ok()?;
    let ch = tokio::time::timeout(STEP, c.open_channel())
        .await
        .ok()?
        .ok()?;
    let q = QueueOptions {
        durable: true,
        ..QueueOptions::default()
    };
    tokio::time::timeout(STEP, c.queue_declare(ch, queue, q, quorum_args()))
        .await
        .ok()?
        .ok()?;
    Some((c, ch))
}

/// Publishes `p{n}-{seq}` in batches, waiting for each batch's confirms; `rate` messages
/// per second at most; stops when `stop` is set.
pub async fn publisher(
    n: usize,
    addrs: Addrs,
    queue: String,
    batch: usize,
    rate: u64,
    history: Shared,
    stop: Arc<AtomicBool>,
) {
    let mut seq = 0u64;
    let mut node = n;
    let started = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        let Some(addr) = pick(&addrs, node) else {
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        };
        node += 1;
        let Some((mut c, ch)) = open(addr, &queue).await else {
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        };
        with(&history, |h| h.reconnects += 1);
        if !matches!(
            tokio::time::timeout(STEP, c.confirm_select(ch, 0)).await,
            Ok(Ok(()))
        ) {
            continue;
        }
        let props = BasicProperties {
            delivery_mode: Some(2),
            ..BasicProperties::default()
        };
        let Ok(publication) = Publication::new(ch, "", &queue, props, 0) else {
            return;
        };
        'conn: while !stop.load(Ordering::Relaxed) {
            let mut ids = Vec::with_capacity(batch);
            for _ in 0..batch {
                let id = format!("p{n}-{seq}");
                seq += 1;
                with(&history, |h| h.attempted.insert(id.clone()));
                if !matches!(
                    tokio::time::timeout(STEP, c.publish(&publication, id.as_bytes())).await,
                    Ok(Ok(_))
                ) {
                    break 'conn;
                }
                ids.push(id);
            }
            match tokio::time::timeout(STEP, c.wait_confirms(ch)).await {
                Ok(Ok(())) => {
                    with(&history, |h| h.confirmed.extend(ids));
                }
                _ => break 'conn,
            }
            // Pace to `rate`.
            if rate > 0 {
                let due = started + Duration::from_secs_f64(seq as f64 / rate as f64);
                tokio::time::sleep_until(due.into()).await;
            }
        }
    }
}

/// Consumes and acks everything on `queue`, recording each delivery, until `stop`.
/// `last_delivery`: milliseconds since `epoch` of the latest delivery (for the drain).
pub async fn consumer(
    n: usize,
    addrs: Addrs,
    queue: String,
    history: Shared,
    stop: Arc<AtomicBool>,
    epoch: Instant,
    last_delivery: Arc<AtomicU64>,
) {
    let mut node = n + 1;
    let tag = format!("c{n}");
    while !stop.load(Ordering::Relaxed) {
        let Some(addr) = pick(&addrs, node) else {
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        };
        node += 1;
        let Some((mut c, ch)) = open(addr, &queue).await else {
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        };
        with(&history, |h| h.reconnects += 1);
        if !matches!(
            tokio::time::timeout(STEP, c.qos(ch, 200, false)).await,
            Ok(Ok(()))
        ) {
            continue;
        }
        if !matches!(
            tokio::time::timeout(STEP, c.consume(ch, &queue, &tag, ConsumeOptions::default()))
                .await,
            Ok(Ok(()))
        ) {
            continue;
        }
        let mut quiet_since = Instant::now();
        while !stop.load(Ordering::Relaxed) {
            match tokio::time::timeout(Duration::from_millis(500), c.next_delivery(ch, &tag)).await
            {
                Ok(Ok(d)) => {
                    let id = String::from_utf8_lossy(&d.body).into_owned();
                    with(&history, |h| {
                        *h.received.entry(id).or_insert(0) += 1;
                        h.deliveries += 1;
                    });
                    last_delivery.store(epoch.elapsed().as_millis() as u64, Ordering::Relaxed);
                    c.ack(ch, d.delivery_tag, false);
                    quiet_since = Instant::now();
                }
                Ok(Err(_)) => break,
                Err(_) => {
                    if tokio::time::timeout(STEP, c.flush()).await.is_err() {
                        break;
                    }
                    // A silent connection may be to a paused or cut-off node: try another.
                    if quiet_since.elapsed() > Duration::from_secs(4) {
                        break;
                    }
                }
            }
        }
        let _ = tokio::time::timeout(Duration::from_secs(1), c.flush()).await;
    }
}
