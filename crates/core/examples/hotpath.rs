//! The per-message path of a transient message through one non-durable queue (publish,
//! route, enqueue, dispatch, outbox, accept), on one thread so that instruction counts are
//! the same from run to run: compare builds with
//!
//! valgrind --tool=callgrind cargo run --release -p ferry-core --example hotpath -- [messages]
//!
//! (wall-clock timings of the threaded `queue_throughput` example vary with the machine's load and
//! with how its two threads interleave).

use bytes::Bytes;
use ferry_core::{Accepts, Message, OutboxItem};

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
    let mut items = Vec::new();
    let mut accepts = Accepts::default();
    let mut done = 0u64;
    while done < count {
        for _ in 0..BATCH {
            let msg = Message::new(Bytes::new(), Bytes::from_static(b"bench"), body.clone());
            broker.publish(&exchange, msg)?;
        }
        outbox.take(&mut items);
        let mut settled = 0u32;
        for item in items.drain(..) {
            if let OutboxItem::Deliver(d) = item {
                accepts.push(&queue, d.position, d.message);
                settled += 1;
            }
        }
        accepts.finish();
        queue.add_credit(consumer, settled, 0)?;
        done += u64::from(settled);
    }
    println!("{done} messages");
    Ok(())
}
