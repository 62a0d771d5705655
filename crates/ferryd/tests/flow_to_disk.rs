//! Flow to disk through ferryd: a durable queue holding eight times `--store-memory-budget`
//! of persistent messages is consumed completely, in order and with the right bodies, while
//! the broker's resident memory stays well below what the queue holds. A selector finds its
//! one match deep in such a queue.

mod common;

use std::time::Duration;

use common::{DataDir, Ferryd};
use ferry_client::{
    AcceptMode, ConnectOptions, Connection, FlowMode, Map, OutgoingMessage, QueueDeclareOptions,
    SequenceSet, Session, SubscribeOptions, Value,
};

const BODY: usize = 16 << 10;
/// 64 MiB of bodies.
const COUNT: u32 = 4096;
const WAIT: Duration = Duration::from_secs(30);

fn body(i: u32) -> Vec<u8> {
    let mut b = vec![(i % 251) as u8; BODY];
    b[..4].copy_from_slice(&i.to_be_bytes());
    b
}

/// The broker's peak resident memory so far (VmHWM), in bytes.
fn peak_rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .expect("VmHWM");
    kib * 1024
}

/// Sends what is buffered and waits for the completion of every transfer in `in_flight`
/// (a window keeps what is in flight, and in the journal's buffers, small).
async fn complete(s: &Session, in_flight: &mut Vec<u32>) {
    s.flush().unwrap();
    for id in in_flight.drain(..) {
        tokio::time::timeout(WAIT, s.wait_for(id))
            .await
            .expect("completed in time")
            .unwrap();
    }
}

/// A ferryd on `dir` with this `--store-memory-budget`, a session to it, and the durable
/// queue "deep".
async fn durable_queue_on(dir: &DataDir, budget: &str) -> (Ferryd, Connection, Session) {
    let broker = Ferryd::start_with(&[&dir.arg(), "--store-memory-budget", budget]);
    let conn = Connection::connect(broker.addr, ConnectOptions::default())
        .await
        .expect("connect");
    let s = conn.session().await.expect("session");
    let opts = QueueDeclareOptions {
        durable: true,
        ..QueueDeclareOptions::default()
    };
    s.queue_declare("deep", opts).await.unwrap();
    (broker, conn, s)
}

#[tokio::test]
async fn a_queue_eight_times_the_memory_budget_is_consumed_in_order_with_bounded_memory() {
    let dir = DataDir::new("flow-to-disk");
    let (broker, _conn, s) = durable_queue_on(&dir, "8MiB").await;
    // A window of completions keeps what is in flight (and in the journal's buffers) small.
    let mut in_flight = Vec::new();
    for i in 0..COUNT {
        let m = OutgoingMessage::builder()
            .routing_key("deep")
            .persistent(true)
            .body(body(i))
            .build()
            .unwrap();
        in_flight.push(s.transfer("", &m).await.unwrap());
        if in_flight.len() == 64 {
            complete(&s, &mut in_flight).await;
        }
    }
    s.sync().await.unwrap();
    let held = s.queue_query("deep").await.unwrap();
    assert_eq!(held.message_count, Some(COUNT));
    let after_publishing = peak_rss(broker.pid());

    let opts = SubscribeOptions {
        accept_mode: AcceptMode::Explicit,
        flow_mode: FlowMode::Window,
        message_credit: 128,
        ..SubscribeOptions::default()
    };
    let mut sub = s.subscribe("deep", "c", opts).await.unwrap();
    let mut accept = SequenceSet::new();
    for i in 0..COUNT {
        let d = tokio::time::timeout(WAIT, sub.next())
            .await
            .expect("a delivery in time")
            .expect("subscription open");
        assert_eq!(d.body.len(), BODY, "message {i}");
        assert!(
            d.body[..] == body(i)[..],
            "message {i} out of order or corrupt"
        );
        accept.add(d.id);
        if i % 64 == 63 {
            s.accept(&std::mem::take(&mut accept)).await.unwrap();
        }
    }
    s.sync().await.unwrap();
    assert_eq!(s.queue_query("deep").await.unwrap().message_count, Some(0));
    let peak = peak_rss(broker.pid());
    eprintln!(
        "flow to disk: {} MiB queued; ferryd peak RSS {} MiB after publishing, {} MiB at the end",
        (u64::from(COUNT) * BODY as u64) >> 20,
        after_publishing >> 20,
        peak >> 20
    );
    // Holding the queue in memory takes more than 64 MiB on top of the broker's own ~30 MiB
    // (95 MiB measured without a budget); with it, about 32 MiB.
    assert!(peak < 56 << 20, "peak RSS {} MiB", peak >> 20);
}

/// Publishes persistent messages coloured `colour`, waiting for their completions a
/// window at a time.
async fn publish_coloured(s: &Session, queue: &str, colour: &str, count: u32, size: usize) {
    let mut in_flight = Vec::new();
    for i in 0..count {
        let m = OutgoingMessage::builder()
            .routing_key(queue)
            .persistent(true)
            .header("colour", Value::Str16(colour.into()))
            .body(vec![(i % 251) as u8; size])
            .build()
            .unwrap();
        in_flight.push(s.transfer("", &m).await.unwrap());
        if in_flight.len() == 256 || i + 1 == count {
            complete(s, &mut in_flight).await;
        }
    }
}

/// The walk past 20,000 messages it must read back from disk goes in slices (so the queue's
/// lock is let go between them); the connection resumes it until the match is found.
#[tokio::test]
async fn a_selector_finds_its_match_deep_in_a_queue_held_on_disk() {
    const PASSED_OVER: u32 = 20_000;
    let dir = DataDir::new("flow-to-disk-selector");
    let (_broker, _conn, s) = durable_queue_on(&dir, "1MiB").await;
    publish_coloured(&s, "deep", "blue", PASSED_OVER, 1024).await;
    publish_coloured(&s, "deep", "red", 1, 8).await;
    s.sync().await.unwrap();

    let mut selector = Map::new();
    selector.insert("x-apache-selector", Value::Str16("colour = 'red'".into()));
    let opts = SubscribeOptions {
        arguments: Some(selector),
        message_credit: 10,
        ..SubscribeOptions::default()
    };
    let mut sub = s.subscribe("deep", "reds", opts).await.unwrap();
    let d = tokio::time::timeout(WAIT, sub.next())
        .await
        .expect("the match in time")
        .expect("subscription open");
    assert_eq!(d.body.len(), 8, "the red one");
    assert_eq!(
        s.queue_query("deep").await.unwrap().message_count,
        Some(PASSED_OVER),
        "the rest stays"
    );
}
