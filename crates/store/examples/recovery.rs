//! Start-up time and memory with a large backlog: journals `n` persistent messages of `size`
//! bytes on one durable queue (through the broker, as publishes would), closes the store, and
//! times a recovery into a fresh broker, printing the resident memory before and after.
//! Usage: `cargo run --release -p ferry-store --example recovery DIR [N] [SIZE]`
//! (DIR is emptied first).

use std::time::Instant;

use bytes::Bytes;
use ferry_core::{Broker, BrokerConfig, MessageParts, QueueOptions};
use ferry_store::{Store, StoreConfig};

fn rss_mib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        })
        .map_or(0, |kib| kib / 1024)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let dir = std::path::PathBuf::from(args.next().expect("usage: recovery DIR [N] [SIZE]"));
    let n: usize = args
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let size: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(1024);
    let _ = std::fs::remove_dir_all(&dir);
    {
        let (store, _) = Store::open(&dir, StoreConfig::default()).expect("open");
        let broker = Broker::with_journal(BrokerConfig::default(), store.clone());
        let opts = QueueOptions {
            durable: true,
            ..QueueOptions::default()
        };
        broker.declare_queue("backlog", opts, false, 1).unwrap();
        let ex = broker.exchange("").unwrap();
        let body = Bytes::from(vec![b'x'; size]);
        let start = Instant::now();
        for _ in 0..n {
            let mut m = MessageParts::new("", "backlog", body.clone());
            m.persistent = true;
            broker.publish(&ex, m.build()).unwrap();
        }
        store.sync();
        println!(
            "journaled {n} x {size} B in {:.1} s",
            start.elapsed().as_secs_f64()
        );
        store.close();
    }
    let before = rss_mib();
    let start = Instant::now();
    let (store, recovered) = Store::open(&dir, StoreConfig::default()).expect("reopen");
    let broker = Broker::with_journal(BrokerConfig::default(), store.clone());
    let stats = recovered.stats.clone();
    recovered.restore(&broker);
    let elapsed = start.elapsed();
    let count = broker.queue("backlog").map_or(0, |q| q.message_count());
    println!(
        "recovered {count} messages ({} MiB read, {} segments) in {:.2} s; RSS {before} MiB -> {} MiB",
        stats.bytes_read >> 20,
        stats.segments,
        elapsed.as_secs_f64(),
        rss_mib()
    );
    store.close();
}
