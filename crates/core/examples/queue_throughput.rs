//! Times publish + deliver + accept of N messages through one queue, with one publisher thread
//! and one consumer thread using a credit window (as a 0-10 client in window mode would).
//!
//! cargo run --release -p ferry-core --example queue_throughput -- [messages] [body-bytes] [window]

use std::time::Instant;

use bytes::Bytes;
use ferry_core::{Accepts, Message, OutboxItem};

mod common;

fn arg(n: usize, default: u64) -> u64 {
    std::env::args()
        .nth(n)
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let count = arg(1, 1_000_000);
    let size = arg(2, 64) as usize;
    let window = u32::try_from(arg(3, 1000))?;

    let common::Bench {
        broker,
        queue,
        outbox,
        consumer,
    } = common::one_queue_one_consumer(window)?;

    let start = Instant::now();
    let rx = {
        let (queue, outbox) = (queue.clone(), outbox.clone());
        std::thread::spawn(
            move || -> Result<u64, Box<dyn std::error::Error + Send + Sync>> {
                let rt = tokio::runtime::Builder::new_current_thread().build()?;
                let mut buf = Vec::new();
                let mut accepts = Accepts::default();
                let mut received = 0u64;
                while received < count {
                    outbox.take(&mut buf);
                    if buf.is_empty() {
                        rt.block_on(outbox.notified());
                        continue;
                    }
                    let mut n = 0u32;
                    for item in buf.drain(..) {
                        if let OutboxItem::Deliver(d) = item {
                            accepts.push(&queue, d.position, d.message);
                            n += 1;
                        }
                    }
                    accepts.finish();
                    received += u64::from(n);
                    queue.add_credit(consumer, n, 0)?;
                }
                Ok(received)
            },
        )
    };

    let exchange = broker.default_exchange().clone();
    let body = Bytes::from(vec![b'x'; size]);
    for _ in 0..count {
        let msg = Message::new(Bytes::new(), Bytes::from_static(b"bench"), body.clone());
        broker.publish(&exchange, msg)?;
    }
    let published = start.elapsed();
    let received = rx
        .join()
        .map_err(|_| "consumer thread panicked")?
        .map_err(|e| e.to_string())?;
    let total = start.elapsed();
    println!(
        "{received} messages of {size} bytes, window {window}: publish {:.0} msgs/s, end-to-end {:.0} msgs/s ({:.3} s)",
        count as f64 / published.as_secs_f64(),
        received as f64 / total.as_secs_f64(),
        total.as_secs_f64()
    );
    Ok(())
}
