//! Producer flow control over AMQP 0-10 and 0-9-1 (`--backlog-hold`): a connection that
//! only publishes is not read from while a queue it fills has consumers and more than the
//! hold ready in memory, so a fast publisher waits for slow consumers instead of growing
//! the queue without bound; it goes on once they catch up. A queue without consumers, or a
//! publisher consuming from that queue itself, never holds it, and a queue whose consumers
//! take nothing at all (stuck, not slow) holds it only briefly.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::Ferryd;
use ferry_client::{
    AcceptMode, ConnectOptions, Connection, FlowMode, OutgoingMessage, QueueDeclareOptions,
    Session, SubscribeOptions,
};

/// Small, so the test needs little data: the queue may overshoot it by what the broker
/// reads in one batch (256 KiB) and what is in flight.
const HOLD: &str = "64KiB";
const BODY: usize = 4096;
/// 32 MiB: far more than the socket buffers between publisher and broker can absorb, so an
/// unheld publisher would put most of it on the queue.
const COUNT: u32 = 8192;
/// What the queue may hold while the publisher waits: the hold, a read batch, slack.
const HELD_DEPTH: u64 = 2 << 20;
const STEP: Duration = Duration::from_secs(30);

async fn session(broker: &Ferryd) -> Session {
    let conn = Connection::connect(broker.addr, ConnectOptions::default())
        .await
        .expect("connect");
    let s = conn.session().await.expect("session");
    // The connection lives as long as its session is used.
    std::mem::forget(conn);
    s
}

fn message(queue: &str) -> OutgoingMessage {
    OutgoingMessage::builder()
        .routing_key(queue)
        .body(vec![1u8; BODY])
        .build()
        .expect("message")
}

/// Publishes COUNT messages to `queue` on `s` and waits for all to complete.
fn spawn_publisher(s: Session, queue: &'static str) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let m = message(queue);
        for _ in 0..COUNT {
            s.transfer("", &m).await.expect("transfer");
        }
        s.sync().await.expect("sync");
    })
}

/// A subscriber to `queue` with no credit: the queue has a consumer that takes nothing.
async fn stalled_consumer(s: &Session, queue: &str) -> ferry_client::Subscription {
    s.subscribe(
        queue,
        "stalled",
        SubscribeOptions {
            accept_mode: AcceptMode::None,
            flow_mode: FlowMode::Credit,
            message_credit: 0,
            ..SubscribeOptions::default()
        },
    )
    .await
    .expect("subscribe")
}

/// A consumer of `queue` that takes a message about every millisecond until `fast` is
/// set, then as fast as they come; ends after `COUNT`, returning how many it took.
async fn slow_consumer(
    s: Session,
    queue: &str,
    fast: Arc<AtomicBool>,
) -> tokio::task::JoinHandle<u32> {
    let mut sub = s
        .subscribe(queue, "slow", SubscribeOptions::default())
        .await
        .expect("subscribe");
    tokio::spawn(async move {
        let _session = s;
        for taken in 0..COUNT {
            if tokio::time::timeout(STEP, sub.next())
                .await
                .ok()
                .flatten()
                .is_none()
            {
                return taken;
            }
            if !fast.load(Ordering::Relaxed) {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        }
        COUNT
    })
}

/// The largest depth of `queue` seen over `span`.
async fn max_depth(s: &Session, queue: &str, span: Duration) -> u32 {
    let started = Instant::now();
    let mut max = 0;
    while started.elapsed() < span {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let now = s
            .queue_query(queue)
            .await
            .expect("query")
            .message_count
            .unwrap_or(0);
        max = max.max(now);
    }
    max
}

/// Publishes COUNT messages to `queue` on `publisher`, which must not be held for good, and
/// checks they are all queued.
async fn publishes_everything(observer: &Session, publisher: Session, queue: &'static str) {
    tokio::time::timeout(STEP, spawn_publisher(publisher, queue))
        .await
        .expect("the publisher was not held for good")
        .expect("publisher task");
    let info = observer.queue_query(queue).await.expect("query");
    assert_eq!(info.message_count, Some(COUNT));
}

/// Checks over a while that `queue` stays within the hold while `publisher` has not
/// finished: it is being held.
async fn assert_held(observer: &Session, queue: &str, publisher: &tokio::task::JoinHandle<()>) {
    let depth = max_depth(observer, queue, Duration::from_millis(1500)).await;
    assert!(
        u64::from(depth) * BODY as u64 <= HELD_DEPTH,
        "{depth} messages queued at most while held"
    );
    assert!(!publisher.is_finished(), "the publisher was not held");
}

/// Lets a slow consumer go fast and checks it gets every message.
async fn takes_everything(fast: &AtomicBool, consumer: tokio::task::JoinHandle<u32>) {
    fast.store(true, Ordering::Relaxed);
    let taken = tokio::time::timeout(STEP, consumer)
        .await
        .expect("the consumer finished")
        .expect("consumer task");
    assert_eq!(taken, COUNT);
}

async fn declare(s: &Session, queue: &str) {
    s.queue_declare(queue, QueueDeclareOptions::default())
        .await
        .expect("declare");
}

#[tokio::test]
async fn a_publisher_waits_for_slow_consumers_and_goes_on_at_their_pace() {
    let broker = Ferryd::start_with(&["--backlog-hold", HOLD]);
    let observer = session(&broker).await;
    declare(&observer, "held").await;
    let fast = Arc::new(AtomicBool::new(false));
    let consumer = slow_consumer(session(&broker).await, "held", fast.clone()).await;
    let publisher = spawn_publisher(session(&broker).await, "held");

    assert_held(&observer, "held", &publisher).await;

    takes_everything(&fast, consumer).await;
    tokio::time::timeout(STEP, publisher)
        .await
        .expect("the publisher finished")
        .expect("publisher task");
}

#[tokio::test]
async fn a_stuck_consumer_holds_its_publisher_only_briefly() {
    // Its consumers take nothing at all: the hold would never end, so it ends after a
    // stall and the queue grows as it would without flow control.
    let broker = Ferryd::start_with(&["--backlog-hold", HOLD]);
    let observer = session(&broker).await;
    declare(&observer, "stuck").await;
    let consumer = session(&broker).await;
    let _sub = stalled_consumer(&consumer, "stuck").await;
    publishes_everything(&observer, session(&broker).await, "stuck").await;
}

#[tokio::test]
async fn a_queue_without_consumers_never_holds_its_publisher() {
    let broker = Ferryd::start_with(&["--backlog-hold", HOLD]);
    let observer = session(&broker).await;
    declare(&observer, "unconsumed").await;
    publishes_everything(&observer, session(&broker).await, "unconsumed").await;
}

#[tokio::test]
async fn a_publisher_consuming_its_own_backlog_is_never_held_for_good() {
    let broker = Ferryd::start_with(&["--backlog-hold", HOLD]);
    let observer = session(&broker).await;
    declare(&observer, "own").await;
    // Its own acks could be what the queue waits for: a hold could starve its own consumer
    // for good (it is exempt, and a hold ends when deliveries stall too). Paced by its slow
    // consumer (some 1,000 messages a second) it would take 8 s or more.
    let publisher = session(&broker).await;
    let fast = Arc::new(AtomicBool::new(false));
    let consumer = slow_consumer(publisher.clone(), "own", fast.clone()).await;
    let started = Instant::now();
    tokio::time::timeout(STEP, spawn_publisher(publisher, "own"))
        .await
        .expect("the publisher finished")
        .expect("publisher task");
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "the publisher was held: {:?}",
        started.elapsed()
    );
    takes_everything(&fast, consumer).await;
}

#[tokio::test]
async fn consuming_another_queue_does_not_exempt_a_publisher() {
    // qpid-perftest's publishers listen on a control queue while they publish.
    let broker = Ferryd::start_with(&["--backlog-hold", HOLD]);
    let observer = session(&broker).await;
    declare(&observer, "work").await;
    declare(&observer, "control").await;
    let fast = Arc::new(AtomicBool::new(false));
    let consumer = slow_consumer(session(&broker).await, "work", fast.clone()).await;
    let publisher = session(&broker).await;
    let _control = stalled_consumer(&publisher, "control").await;
    let task = spawn_publisher(publisher, "work");
    assert_held(&observer, "work", &task).await;
    task.abort();
    consumer.abort();
}

#[tokio::test]
async fn an_amqp091_publisher_is_held_too() {
    use ferry_client091::{BasicProperties, ConnectOptions, Connection, Publication};
    let broker = Ferryd::start_with(&["--backlog-hold", HOLD]);
    let observer = session(&broker).await;
    declare(&observer, "held091").await;
    let fast = Arc::new(AtomicBool::new(false));
    let consumer = slow_consumer(session(&broker).await, "held091", fast.clone()).await;
    let addr = broker.addr;
    let publisher = tokio::spawn(async move {
        let mut conn = Connection::connect(addr, &ConnectOptions::default())
            .await
            .expect("connect over 0-9-1");
        let ch = conn.open_channel().await.expect("channel");
        let p = Publication::new(ch, "", "held091", BasicProperties::default(), BODY)
            .expect("publication");
        let body = vec![2u8; BODY];
        for _ in 0..COUNT {
            conn.publish(&p, &body).await.expect("publish");
        }
        // Sent, then gone without a close: what the hold kept unprocessed when ferryd read
        // the end of the stream is still published.
        conn.flush().await.expect("flush");
    });
    assert_held(&observer, "held091", &publisher).await;
    takes_everything(&fast, consumer).await;
    tokio::time::timeout(STEP, publisher)
        .await
        .expect("the publisher finished once the consumer caught up")
        .expect("publisher task");
}
