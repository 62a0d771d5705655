//! Producer flow control over AMQP 0-10 and 0-9-1 (`--backlog-hold`): a connection that
//! only publishes is not read from while a queue it fills has consumers and more than the
//! hold ready in memory, so a fast publisher waits for slow consumers instead of growing
//! the queue without bound; it goes on once they catch up. A queue without consumers, or a
//! publisher consuming from that queue itself, never holds it.

mod common;

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

/// The queue's depth once it has stopped growing for a while (or the step ran out).
async fn settled_depth(s: &Session, queue: &str) -> u32 {
    let started = Instant::now();
    let mut last = u32::MAX;
    loop {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let now = s
            .queue_query(queue)
            .await
            .expect("query")
            .message_count
            .unwrap_or(0);
        if now == last || started.elapsed() > STEP {
            return now;
        }
        last = now;
    }
}

async fn declare(s: &Session, queue: &str) {
    s.queue_declare(queue, QueueDeclareOptions::default())
        .await
        .expect("declare");
}

#[tokio::test]
async fn a_publisher_waits_while_its_consumed_queue_is_backlogged_and_goes_on_when_it_drains() {
    let broker = Ferryd::start_with(&["--backlog-hold", HOLD]);
    let observer = session(&broker).await;
    declare(&observer, "held").await;
    let consumer = session(&broker).await;
    let mut sub = stalled_consumer(&consumer, "held").await;
    let publisher = spawn_publisher(session(&broker).await, "held");

    let depth = settled_depth(&observer, "held").await;
    assert!(
        u64::from(depth) * BODY as u64 <= HELD_DEPTH,
        "{depth} messages queued while held"
    );
    assert!(depth > 0, "the publisher got going before it was held");
    assert!(!publisher.is_finished(), "the publisher was not held");

    consumer
        .message_flow("stalled", ferry_client::CreditUnit::Message, u32::MAX)
        .await
        .expect("credit");
    for i in 0..COUNT {
        tokio::time::timeout(STEP, sub.next())
            .await
            .unwrap_or_else(|_| panic!("message {i} in time"))
            .expect("delivery");
    }
    tokio::time::timeout(STEP, publisher)
        .await
        .expect("the publisher finished once the queue drained")
        .expect("publisher task");
}

#[tokio::test]
async fn a_queue_without_consumers_never_holds_its_publisher() {
    let broker = Ferryd::start_with(&["--backlog-hold", HOLD]);
    let observer = session(&broker).await;
    declare(&observer, "unconsumed").await;
    let publisher = spawn_publisher(session(&broker).await, "unconsumed");
    tokio::time::timeout(STEP, publisher)
        .await
        .expect("the publisher was not held")
        .expect("publisher task");
    let info = observer.queue_query("unconsumed").await.expect("query");
    assert_eq!(info.message_count, Some(COUNT));
}

#[tokio::test]
async fn a_publisher_consuming_from_the_backlogged_queue_itself_is_not_held() {
    let broker = Ferryd::start_with(&["--backlog-hold", HOLD]);
    let observer = session(&broker).await;
    declare(&observer, "own").await;
    // Its own acks could be what the queue waits for: holding it could deadlock.
    let publisher = session(&broker).await;
    let _own = stalled_consumer(&publisher, "own").await;
    tokio::time::timeout(STEP, spawn_publisher(publisher, "own"))
        .await
        .expect("the publisher was not held")
        .expect("publisher task");
    let info = observer.queue_query("own").await.expect("query");
    assert_eq!(info.message_count, Some(COUNT));
}

#[tokio::test]
async fn consuming_another_queue_does_not_exempt_a_publisher() {
    // qpid-perftest's publishers listen on a control queue while they publish.
    let broker = Ferryd::start_with(&["--backlog-hold", HOLD]);
    let observer = session(&broker).await;
    declare(&observer, "work").await;
    declare(&observer, "control").await;
    let consumer = session(&broker).await;
    let _sub = stalled_consumer(&consumer, "work").await;
    let publisher = session(&broker).await;
    let _control = stalled_consumer(&publisher, "control").await;
    let task = spawn_publisher(publisher, "work");
    let depth = settled_depth(&observer, "work").await;
    assert!(
        u64::from(depth) * BODY as u64 <= HELD_DEPTH,
        "{depth} messages queued while held"
    );
    assert!(!task.is_finished(), "the publisher was not held");
    task.abort();
}

#[tokio::test]
async fn an_amqp091_publisher_is_held_too() {
    use ferry_client091::{BasicProperties, ConnectOptions, Connection, Publication};
    let broker = Ferryd::start_with(&["--backlog-hold", HOLD]);
    let observer = session(&broker).await;
    declare(&observer, "held091").await;
    let consumer = session(&broker).await;
    let _sub = stalled_consumer(&consumer, "held091").await;
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
        conn.flush().await.expect("flush");
    });
    let depth = settled_depth(&observer, "held091").await;
    assert!(
        u64::from(depth) * BODY as u64 <= HELD_DEPTH,
        "{depth} messages queued while held"
    );
    assert!(!publisher.is_finished(), "the publisher was not held");
    // Once the consumer goes the queue has none: the publisher is let go.
    consumer
        .message_cancel("stalled")
        .await
        .expect("cancel the consumer");
    tokio::time::timeout(STEP, publisher)
        .await
        .expect("the publisher finished once the queue lost its consumer")
        .expect("publisher task");
    assert_eq!(settled_depth(&observer, "held091").await, COUNT);
}
