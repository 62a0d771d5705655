//! The per-message path of a transient message through one non-durable queue (publish,
//! route, enqueue, dispatch, outbox, accept), on one thread so that instruction counts are
//! the same from run to run: compare builds with
//!
//! valgrind --tool=callgrind cargo run --release -p ferry-core --example hotpath -- [messages]
//!
//! (wall-clock timings of the threaded `queue_throughput` example vary with the machine's load and
//! with how its two threads interleave).

use bytes::Bytes;
use ferry_core::{Message, OutboxItem};

mod common;

/// Messages published before the consumer takes, accepts and grants credit again.
const BATCH: u32 = 100;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let count: u64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(200_000);
    let common::Bench {
        broker,
        queue,
        outbox,
        consumer,
    } = common::one_queue_one_consumer(BATCH)?;
    let exchange = broker.default_exchange().clone();
    let body = Bytes::from(vec![b'x'; 64]);
    let (mut items, mut positions) = (Vec::new(), Vec::new());
    let mut done = 0u64;
    while done < count {
        for _ in 0..BATCH {
            let msg = Message::new(Bytes::new(), Bytes::from_static(b"bench"), body.clone());
            broker.publish(&exchange, msg)?;
        }
        outbox.take(&mut items);
        positions.extend(items.drain(..).filter_map(|item| match item {
            OutboxItem::Deliver(d) => Some(d.position),
            _ => None,
        }));
        let settled = queue.accept_all(positions.drain(..));
        queue.add_credit(consumer, u32::try_from(settled)?, 0)?;
        done += settled as u64;
    }
    println!("{done} messages");
    Ok(())
}
