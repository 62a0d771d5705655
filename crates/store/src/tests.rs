//! The store end to end: a broker over a real journal in a temporary directory, restarted.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use ferry_core::{
    Arguments, BindingFilters, BindingIdentity, Broker, BrokerConfig, ConsumerFilter, ConsumerSpec,
    ExchangeKind, ExchangeOptions, HeaderValue, Journal, Message, MessageFilter, Outbox,
    OutboxItem, Queue, QueueOptions, SyncPoint,
};

use super::*;

mod dtx;

/// A directory removed when the test ends.
pub(crate) struct TempDir(PathBuf);

impl TempDir {
    pub(crate) fn new(tag: &str) -> TempDir {
        static N: AtomicU64 = AtomicU64::new(0);
        let p = std::env::temp_dir().join(format!(
            "ferry-store-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&p);
        TempDir(p)
    }

    fn path(&self) -> &Path {
        &self.0
    }

    fn journal(&self) -> PathBuf {
        self.0.join("journal")
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn small() -> StoreConfig {
    StoreConfig {
        segment_size: 64 * 1024,
        memory_budget: None,
        ..StoreConfig::default()
    }
}

/// Binding filters for these tests: `x-test-prefix` admits bodies starting with it.
fn prefix_filters() -> BindingFilters {
    BindingFilters(Arc::new(|args: &Arguments| {
        Ok(match args.get("x-test-prefix") {
            Some(HeaderValue::Str(p)) => {
                Some(Arc::new(BodyPrefix(p.clone())) as Arc<dyn MessageFilter>)
            }
            _ => None,
        })
    }))
}

#[derive(Debug)]
struct BodyPrefix(String);

impl MessageFilter for BodyPrefix {
    fn matches(&self, message: &Message) -> bool {
        message.body().starts_with(self.0.as_bytes())
    }
}

fn start(dir: &TempDir, config: StoreConfig) -> (Arc<Store>, Arc<Broker>, RecoveryStats) {
    let broker_config = BrokerConfig {
        persistent_memory_budget: config.memory_budget,
        binding_filters: Some(prefix_filters()),
        ..BrokerConfig::default()
    };
    let (store, recovered) = Store::open(dir.path(), config).expect("open store");
    let broker = Broker::with_journal(broker_config, store.clone());
    let stats = recovered.stats.clone();
    recovered.restore(&broker);
    (store, broker, stats)
}

fn durable_queue(b: &Broker, name: &str) -> Arc<Queue> {
    let opts = QueueOptions {
        durable: true,
        ..QueueOptions::default()
    };
    b.declare_queue(name, opts, false, 1).unwrap().0
}

fn publish(b: &Broker, queue: &str, body: Vec<u8>, persistent: bool) -> Option<SyncPoint> {
    let mut m = MessageParts::new("", queue.to_owned(), Bytes::from(body));
    m.persistent = persistent;
    let ex = b.exchange("").unwrap();
    b.publish(&ex, Message::from(m)).unwrap().sync
}

/// Takes up to `n` messages off the queue and accepts them; returns their bodies.
fn consume(b: &Broker, q: &Arc<Queue>, n: u32) -> Vec<Bytes> {
    consume_matching(b, q, n, None)
}

/// [`consume`] by a consumer with a filter.
fn consume_matching(
    b: &Broker,
    q: &Arc<Queue>,
    n: u32,
    filter: Option<ConsumerFilter>,
) -> Vec<Bytes> {
    let ob = Outbox::new();
    let id = b.next_consumer_id();
    q.subscribe(ConsumerSpec {
        filter,
        ..consumer_spec(id, &ob, true)
    })
    .unwrap();
    q.add_credit(id, n, u32::MAX).unwrap();
    let mut items = Vec::new();
    // As a connection's writer: a walk cut into slices goes on while takes dispatch again.
    while ob.take(&mut items) {}
    b.cancel_consumer(q, id);
    items
        .into_iter()
        .filter_map(|i| match i {
            OutboxItem::Deliver(d) => {
                assert!(q.accept(d.position));
                Some(d.message.body_bytes())
            }
            _ => None,
        })
        .collect()
}

fn bodies(q: &Queue) -> Vec<Bytes> {
    q.queued_bodies()
}

#[test]
fn durable_topology_and_persistent_messages_survive_a_restart() {
    let dir = TempDir::new("restart");
    {
        let (store, b, stats) = start(&dir, small());
        assert_eq!(stats.records, 0);
        let mut args = Arguments::new();
        args.push("x-message-ttl", HeaderValue::UInt(600_000));
        args.push("qpid.max_count", HeaderValue::UInt(1000));
        let opts = QueueOptions {
            durable: true,
            arguments: args.clone(),
            limits: ferry_core::QueueLimits::from_arguments(&args).unwrap(),
            ..QueueOptions::default()
        };
        b.declare_queue("q", opts, false, 1).unwrap();
        durable_queue(&b, "gone");
        b.declare_queue("transient", QueueOptions::default(), false, 1)
            .unwrap();
        let xo = ExchangeOptions {
            durable: true,
            ..ExchangeOptions::default()
        };
        b.declare_exchange("alt", ExchangeKind::Fanout, xo.clone(), false)
            .unwrap();
        let xo_alt = ExchangeOptions {
            alternate_exchange: Some("alt".into()),
            internal: true,
            ..xo
        };
        b.declare_exchange("topics", ExchangeKind::Topic, xo_alt, false)
            .unwrap();
        b.bind("q", "topics", "a.#", &Arguments::new()).unwrap();
        b.bind("q", "amq.direct", "k", &Arguments::new()).unwrap();
        b.bind("gone", "topics", "b.#", &Arguments::new()).unwrap();
        for i in 0..10u8 {
            publish(&b, "q", vec![i; 100], true);
        }
        publish(&b, "q", b"transient".to_vec(), false);
        publish(&b, "gone", b"x".to_vec(), true);
        publish(&b, "transient", b"t".to_vec(), true);
        let q = b.queue("q").unwrap();
        let taken = consume(&b, &q, 3);
        assert_eq!(taken.len(), 3);
        b.delete_queue("gone", false, false, 1).unwrap();
        store.sync();
        store.close();
    }
    let (_store, b, stats) = start(&dir, small());
    assert!(stats.records > 0);
    assert_eq!(stats.cut_at, None);
    assert!(b.queue("gone").is_none() && b.queue("transient").is_none());
    let q = b.queue("q").unwrap();
    assert!(q.is_durable());
    assert_eq!(q.limits().max_count, Some(1000));
    assert_eq!(
        q.arguments().get("x-message-ttl"),
        Some(&HeaderValue::UInt(600_000))
    );
    let expected: Vec<Bytes> = (3..10u8).map(|i| Bytes::from(vec![i; 100])).collect();
    assert_eq!(
        bodies(&q),
        expected,
        "unsettled persistent messages come back in order"
    );
    let topics = b.exchange("topics").unwrap();
    assert_eq!(topics.kind(), ExchangeKind::Topic);
    assert_eq!(topics.alternate().map(|a| a.name()), Some("alt"));
    assert!(topics.is_internal(), "internal (RabbitMQ) is kept");
    assert!(!b.exchange("alt").unwrap().is_internal());
    assert!(b.bound("topics", Some("q"), Some("a.#"), None) == Default::default());
    assert!(b.bound("amq.direct", Some("q"), Some("k"), None) == Default::default());
    // Recovered messages are marked redelivered and can be settled for good.
    let ob = Outbox::new();
    q.subscribe(ConsumerSpec {
        id: 99,
        outbox: ob.clone(),
        owner: 1,
        connection: 0,
        tag: Bytes::new(),
        acquire: true,
        exclusive: false,
        window: None,
        filter: None,
        ack_timeout: None,
    })
    .unwrap();
    q.add_credit(99, 1, u32::MAX).unwrap();
    let mut items = Vec::new();
    ob.take(&mut items);
    let Some(OutboxItem::Deliver(d)) = items.pop() else {
        panic!("no delivery");
    };
    assert!(d.redelivered);
    assert!(q.accept(d.position));
    b.cancel_consumer(&q, 99);
    _store.sync();
    _store.close();
    drop(b);
    let (_s, b, _) = start(&dir, small());
    assert_eq!(b.queue("q").unwrap().message_count(), 6);
}

#[test]
fn a_second_store_on_the_same_directory_is_refused() {
    let dir = TempDir::new("lock");
    let (store, _) = Store::open(dir.path(), small()).unwrap();
    assert!(matches!(
        Store::open(dir.path(), small()),
        Err(StoreError::Locked(_))
    ));
    store.close();
    drop(store);
    assert!(Store::open(dir.path(), small()).is_ok());
}

fn segment_files(dir: &TempDir) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir.journal())
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "jnl"))
        .collect();
    v.sort();
    v
}

/// Appends persistent messages to "q" and closes; returns the journal's last segment.
fn journal_with(dir: &TempDir, n: u8) -> PathBuf {
    let (store, b, _) = start(dir, small());
    durable_queue(&b, "q");
    for i in 0..n {
        publish(&b, "q", vec![i; 50], true);
    }
    store.sync();
    store.close();
    segment_files(dir).pop().unwrap()
}

/// Offset just past the last record of a segment (where its end marker is, if it has one).
fn data_end(data: &[u8]) -> usize {
    let mut pos = segment::SEGMENT_HEADER;
    while let Frame::Record { len, kind, .. } = read_frame(&data[pos..]) {
        if kind == record::kind::SEGMENT_END {
            break;
        }
        pos += len;
    }
    pos
}

#[test]
fn a_torn_tail_is_cut_and_everything_before_it_recovered() {
    let dir = TempDir::new("torn");
    let last = journal_with(&dir, 5);
    let mut data = std::fs::read(&last).unwrap();
    let end = data_end(&data);
    // A sixth record whose write was cut short: only its first 20 bytes reached the disk.
    let mut frame = Vec::new();
    record::write_frame(&mut frame, 999, record::kind::DEQUEUE, |o| {
        o.extend_from_slice(&[1; 40])
    });
    data[end..end + 20].copy_from_slice(&frame[..20]);
    std::fs::write(&last, &data).unwrap();
    let (store, b, stats) = start(&dir, small());
    assert_eq!(stats.cut_at, Some((1, end as u64)));
    assert_eq!(b.queue("q").unwrap().message_count(), 5);
    assert_eq!(
        std::fs::metadata(&last).unwrap().len(),
        end as u64,
        "cut at the tear"
    );
    // The journal goes on after the cut, and a restart after that is clean.
    publish(&b, "q", b"after".to_vec(), true);
    store.sync();
    store.close();
    drop(b);
    let (_s, b, stats) = start(&dir, small());
    assert_eq!(stats.cut_at, None);
    assert_eq!(b.queue("q").unwrap().message_count(), 6);
}

#[test]
fn a_checksum_mismatch_ends_the_journal_there() {
    let dir = TempDir::new("crc");
    let last = journal_with(&dir, 6);
    let mut data = std::fs::read(&last).unwrap();
    // Flip one bit in the body of the fourth message record (frames: queue, m1..m6).
    let mut pos = segment::SEGMENT_HEADER;
    let mut starts = Vec::new();
    while let Frame::Record { len, .. } = read_frame(&data[pos..]) {
        starts.push(pos);
        pos += len;
    }
    assert_eq!(starts.len(), 7);
    data[starts[4] + 40] ^= 0x10;
    std::fs::write(&last, &data).unwrap();
    let (_s, b, stats) = start(&dir, small());
    assert_eq!(stats.cut_at, Some((1, starts[4] as u64)));
    let q = b.queue("q").unwrap();
    let expected: Vec<Bytes> = (0..3u8).map(|i| Bytes::from(vec![i; 50])).collect();
    assert_eq!(bodies(&q), expected);
}

/// 150 persistent messages of 1200 bytes on "q": about three segments of 64 KiB.
fn three_segments(dir: &TempDir) -> Vec<PathBuf> {
    {
        let (store, b, _) = start(dir, small());
        durable_queue(&b, "q");
        for i in 0..150u32 {
            publish(&b, "q", vec![(i % 251) as u8; 1200], true);
        }
        store.sync();
        store.close();
    }
    let files = segment_files(dir);
    assert!(files.len() >= 3, "{files:?}");
    files
}

#[test]
fn stale_bytes_after_a_segments_end_marker_are_not_a_tear() {
    let dir = TempDir::new("stale");
    let files = three_segments(&dir);
    // A recycled segment keeps the bytes of its earlier life after its last frame.
    for f in &files[..files.len() - 1] {
        let mut data = std::fs::read(f).unwrap();
        let end = data_end(&data);
        assert!(matches!(
            read_frame(&data[end..]),
            Frame::Record {
                kind: record::kind::SEGMENT_END,
                ..
            }
        ));
        let marker = end + record::FRAME_HEADER;
        data[marker..].iter_mut().for_each(|b| *b = 0xA5);
        std::fs::write(f, &data).unwrap();
    }
    let (_s, b, stats) = start(&dir, small());
    assert_eq!((stats.cut_at, stats.segments_discarded), (None, 0));
    assert_eq!(b.queue("q").unwrap().message_count(), 150);
}

#[test]
fn segments_after_a_hole_are_set_aside() {
    let dir = TempDir::new("hole");
    let files = three_segments(&dir);
    // Corrupt the middle segment's last frame: what follows it cannot be trusted.
    let mid = &files[1];
    let mut data = std::fs::read(mid).unwrap();
    let end = data_end(&data);
    data[end - 5] ^= 1;
    std::fs::write(mid, &data).unwrap();
    let (_s, b, stats) = start(&dir, small());
    assert_eq!(stats.segments_discarded, files.len() - 2);
    let n = b.queue("q").unwrap().message_count();
    assert!(n > 0 && n < 150, "a prefix is recovered: {n}");
    assert!(std::fs::read_dir(dir.journal()).unwrap().any(|e| e
        .unwrap()
        .path()
        .extension()
        .is_some_and(|x| x == "discarded")));
}

fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn disk_use_follows_the_backlog_not_the_history() {
    let dir = TempDir::new("reclaim");
    let (store, b, _) = start(&dir, small());
    let q = durable_queue(&b, "q");
    // Many times the segment size flows through; the backlog stays small.
    for round in 0..40u32 {
        for i in 0..50u32 {
            publish(&b, "q", vec![((round + i) % 251) as u8; 1000], true);
        }
        assert_eq!(consume(&b, &q, 50).len(), 50);
        store.sync();
    }
    wait_until("reclamation", || store.segment_count() <= 3);
    let on_disk = segment_files(&dir).len();
    assert!(on_disk <= 3, "{on_disk} segment files for an empty queue");
    // Recycled segments hold stale bytes of their earlier life after their last frame: a
    // restart must read them as the end of a segment, not as a tear.
    for i in 0..200u32 {
        publish(
            &b,
            "q",
            vec![(i % 251) as u8; 700 + (i as usize * 7) % 500],
            true,
        );
    }
    store.sync();
    store.close();
    drop((b, q));
    let (_s, b, stats) = start(&dir, small());
    assert_eq!((stats.cut_at, stats.segments_discarded), (None, 0));
    assert_eq!(b.queue("q").unwrap().message_count(), 200);
}

#[test]
fn stale_bytes_after_the_last_frame_of_a_recycled_tail_are_not_a_tear() {
    let dir = TempDir::new("stale-tail");
    let (store, b, _) = start(&dir, small());
    durable_queue(&b, "q");
    let mut published = 0;
    // Half of the first segment written: the writer asks for the next one.
    while store.shared.state.lock().tail.offset < 40 * 1024 {
        publish(&b, "q", vec![7; 1000], true);
        published += 1;
    }
    store.sync();
    wait_until("the spare", || store.shared.spare.lock().ready);
    // What a recycled segment holds: bytes of an earlier life, nowhere near a frame boundary
    // of this one.
    let spare = segment::spare_path(&dir.journal());
    let size = std::fs::metadata(&spare).unwrap().len() as usize;
    std::fs::write(&spare, vec![0xab; size]).unwrap();
    // Into the spare, and part of the way through it.
    while store.shared.state.lock().tail.segment < 2 {
        publish(&b, "q", vec![7; 1000], true);
        published += 1;
    }
    for _ in 0..5 {
        publish(&b, "q", vec![9; 333], true);
        published += 1;
    }
    store.sync();
    store.close();
    drop(b);
    let (_s, b, stats) = start(&dir, small());
    assert_eq!((stats.cut_at, stats.segments_discarded), (None, 0));
    assert_eq!(b.queue("q").unwrap().message_count(), published);
}

#[test]
fn a_consumer_that_keeps_up_lets_dead_segments_be_reused_instead_of_zero_filling_new_ones() {
    let dir = TempDir::new("recycle");
    let (store, b, _) = start(&dir, small());
    let q = durable_queue(&b, "q");
    wait_until("the spare made at start", || {
        store.segments_zero_filled() >= 1
    });
    let before = store.segments_zero_filled();
    // Rounds of about a sixth of a segment, as a connection's read batches are.
    for round in 0..200u32 {
        for i in 0..10u32 {
            publish(&b, "q", vec![((round + i) % 251) as u8; 1000], true);
        }
        assert_eq!(consume(&b, &q, 10).len(), 10);
        store.sync();
    }
    let segments = store.shared.state.lock().tail.segment;
    assert!(segments >= 20, "only {segments} segments were written");
    // At most one, while the first segments were still live.
    let zero_filled = store.segments_zero_filled() - before;
    assert!(
        zero_filled <= 1,
        "{zero_filled} of {segments} segments were zero-filled"
    );
}

/// Publishes and consumes `rounds` x 50 messages on `q` (about 50 KB a round), then waits
/// for compaction to have copied what the head segments still held forward.
fn churn_until_compacted(store: &Store, b: &Broker, q: &Arc<Queue>, rounds: u32) {
    for round in 0..rounds {
        for i in 0..50u32 {
            publish(b, "q", vec![((round * i) % 251) as u8; 1000], true);
        }
        assert_eq!(consume(b, q, 50).len(), 50);
        store.sync();
    }
    wait_until("compaction", || {
        let (disk, live) = store.usage();
        disk <= 2 * live + 4 * 64 * 1024
    });
}

#[test]
fn a_long_lived_message_at_the_head_is_compacted_forward() {
    let dir = TempDir::new("compact");
    let (store, b, _) = start(&dir, small());
    let old = durable_queue(&b, "old");
    let q = durable_queue(&b, "q");
    publish(&b, "old", b"keep me".to_vec(), true);
    churn_until_compacted(&store, &b, &q, 40);
    assert!(segment_files(&dir).len() <= 5);
    assert_eq!(bodies(&old), [Bytes::from_static(b"keep me")]);
    store.sync();
    store.close();
    drop((b, old, q));
    let (_s, b, _) = start(&dir, small());
    assert_eq!(
        bodies(&b.queue("old").unwrap()),
        [Bytes::from_static(b"keep me")]
    );
    assert_eq!(b.queue("q").unwrap().message_count(), 0);
}

/// The bindings of exchange `h` as (queue, the `n` of their arguments), sorted.
fn bound_ns(b: &Broker) -> Vec<(String, i64)> {
    let mut all: Vec<(String, i64)> = b
        .exchange("h")
        .unwrap()
        .bindings()
        .into_iter()
        .filter(|s| s.destination != "nan")
        .map(|s| match s.arguments.get("n") {
            Some(HeaderValue::Int(n)) => (s.destination, *n),
            other => panic!("unexpected arguments {other:?}"),
        })
        .collect();
    all.sort();
    all
}

/// 0-9-1's bindings told apart by their arguments survive a restart as they were, after
/// compaction copied them forward too: a copy of a 0-10 bind (which replaces what is under
/// its key) must not displace a 0-9-1 binding made beside it later.
#[test]
fn bindings_told_apart_by_arguments_survive_compaction_and_restarts() {
    let dir = TempDir::new("variants");
    let n = |v: i64| -> Arguments { [("n", HeaderValue::Int(v))].into_iter().collect() };
    let by_args = BindingIdentity::KeyAndArguments;
    let expected: Vec<(String, i64)> = [("v", 1), ("v", 3), ("w", 1), ("w", 4), ("x", 7)]
        .iter()
        .map(|(q, v)| (q.to_string(), *v))
        .collect();
    {
        let (store, b, _) = start(&dir, small());
        durable_exchange(&b, "h", ExchangeKind::Headers, true);
        for name in ["v", "w", "x", "nan"] {
            durable_queue(&b, name);
        }
        // An argument unequal to itself under `==`: bound twice, it is one binding, and
        // compaction still moves it (or the first segment could never go).
        let nan: Arguments = [("f", HeaderValue::Float(f64::NAN))].into_iter().collect();
        b.bind_as(by_args, "nan", "h", "", &nan).unwrap();
        b.bind_as(by_args, "nan", "h", "", &nan).unwrap();
        let q = durable_queue(&b, "q");
        for v in [1, 2, 3] {
            b.bind_as(by_args, "v", "h", "", &n(v)).unwrap();
        }
        b.unbind_with_arguments("v", "h", "", &n(2)).unwrap();
        // A 0-10 bind, then a 0-9-1 one beside it under the same key.
        b.bind("w", "h", "", &n(1)).unwrap();
        b.bind_as(by_args, "w", "h", "", &n(4)).unwrap();
        // 0-9-1 bindings, then a 0-10 bind that replaces them.
        b.bind_as(by_args, "x", "h", "", &n(5)).unwrap();
        b.bind_as(by_args, "x", "h", "", &n(6)).unwrap();
        b.bind("x", "h", "", &n(7)).unwrap();
        assert_eq!(bound_ns(&b), expected);
        churn_until_compacted(&store, &b, &q, 40);
        assert!(
            segment_files(&dir).len() <= 5,
            "the first segment was compacted"
        );
        store.sync();
        store.close();
    }
    let (store, b, _) = start(&dir, small());
    assert_eq!(bound_ns(&b), expected);
    let nan_bindings = |b: &Broker| {
        let all = b.exchange("h").unwrap().bindings();
        all.iter().filter(|s| s.destination == "nan").count()
    };
    assert_eq!(nan_bindings(&b), 1);
    // A 0-9-1 unbind after the restart removes the one binding, for good.
    b.unbind_with_arguments("w", "h", "", &n(1)).unwrap();
    store.sync();
    store.close();
    drop(b);
    let (_s, b, _) = start(&dir, small());
    let left: Vec<(String, i64)> = expected
        .into_iter()
        .filter(|(q, v)| !(q == "w" && *v == 1))
        .collect();
    assert_eq!(bound_ns(&b), left);
}

/// The exchange-to-exchange bindings from `h` as (destination, the `n` of their arguments,
/// or -1 for a NaN), sorted.
fn forwarded_ns(b: &Broker) -> Vec<(String, i64)> {
    let mut all: Vec<(String, i64)> = b
        .exchange("h")
        .unwrap()
        .bindings()
        .into_iter()
        .filter(|s| s.to_exchange)
        .map(|s| match (s.arguments.get("n"), s.arguments.get("f")) {
            (Some(HeaderValue::Int(n)), _) => (s.destination, *n),
            (_, Some(HeaderValue::Float(f))) if f.is_nan() => (s.destination, -1),
            other => panic!("unexpected arguments {other:?}"),
        })
        .collect();
    all.sort();
    all
}

/// RabbitMQ's exchange-to-exchange bindings are told apart by their arguments, as its queue
/// bindings are: the store keeps each, copies each forward once, and replays a binding
/// written before (type 12, which replaced what was under its key) as one of them.
#[test]
fn exchange_bindings_told_apart_by_arguments_survive_compaction_and_restarts() {
    let dir = TempDir::new("e2e-variants");
    let n = |v: i64| -> Arguments { [("n", HeaderValue::Int(v))].into_iter().collect() };
    let pairs = |list: &[(&str, i64)]| -> Vec<(String, i64)> {
        list.iter().map(|(d, v)| (d.to_string(), *v)).collect()
    };
    let expected = pairs(&[("d1", 1), ("d1", 3), ("d2", -1), ("old", 8), ("old", 9)]);
    {
        let (store, b, _) = start(&dir, small());
        durable_exchange(&b, "h", ExchangeKind::Headers, true);
        for name in ["d1", "d2", "old"] {
            durable_exchange(&b, name, ExchangeKind::Fanout, true);
        }
        let q = durable_queue(&b, "q");
        for v in [1, 2, 3] {
            b.bind_exchange("d1", "h", "", &n(v)).unwrap();
        }
        b.unbind_exchange_with_arguments("d1", "h", "", &n(2))
            .unwrap();
        let nan: Arguments = [("f", HeaderValue::Float(f64::NAN))].into_iter().collect();
        b.bind_exchange("d2", "h", "", &nan).unwrap();
        b.bind_exchange("d2", "h", "", &nan).unwrap();
        // What an older ferryd wrote: binds that replace the key's bindings (7, then 8).
        // 9 is bound as this one writes it, in a later segment, so the live 8 that
        // compaction copies forward lands after 9 and must be added beside it.
        let k = exchange_binding_key("old", "h", "");
        store.with_state(|st| st.record(&Record::ExchangeBind(k.clone(), n(7))));
        store.with_state(|st| st.record(&Record::ExchangeBind(k, n(8))));
        store.sync();
        churn_until_compacted(&store, &b, &q, 3);
        b.bind_exchange("old", "h", "", &n(9)).unwrap();
        store.sync();
        churn_until_compacted(&store, &b, &q, 40);
        assert!(
            segment_files(&dir).len() <= 5,
            "the first segment was compacted"
        );
        store.sync();
        store.close();
    }
    let (store, b, _) = start(&dir, small());
    assert_eq!(forwarded_ns(&b), expected);
    b.bind_exchange("old", "h", "", &n(9)).unwrap();
    assert_eq!(
        forwarded_ns(&b),
        expected,
        "the same binding again adds nothing"
    );
    store.sync();
    store.close();
    drop(b);
    let (store, b, _) = start(&dir, small());
    assert_eq!(forwarded_ns(&b), expected);
    // An unbind after the restarts removes the one binding, for good.
    b.unbind_exchange_with_arguments("d1", "h", "", &n(1))
        .unwrap();
    store.sync();
    store.close();
    drop(b);
    let (_s, b, _) = start(&dir, small());
    let left: Vec<(String, i64)> = expected
        .into_iter()
        .filter(|(d, v)| !(d == "d1" && *v == 1))
        .collect();
    assert_eq!(forwarded_ns(&b), left);
}

/// Takes the queue's first message and puts it back as delivered: one return. The count
/// it had before.
fn return_once(q: &Arc<Queue>) -> u16 {
    let got = q.get().expect("a message to return");
    assert_eq!(q.release([(got.position, got.message)], true), 1);
    got.returns
}

#[test]
fn a_delivery_limits_count_survives_compaction_and_restarts() {
    let dir = TempDir::new("returns");
    let (store, b, _) = start(&dir, small());
    let mut arguments = Arguments::new();
    arguments.push("x-delivery-limit", HeaderValue::Int(3));
    let opts = QueueOptions {
        durable: true,
        arguments,
        ..QueueOptions::default()
    };
    let poison = b.declare_queue("poison", opts, false, 1).unwrap().0;
    let q = durable_queue(&b, "q");
    publish(&b, "poison", b"poison".to_vec(), true);
    assert_eq!(return_once(&poison), 0);
    // The head segment, with the message and its count, is copied forward.
    churn_until_compacted(&store, &b, &q, 40);
    assert_eq!(return_once(&poison), 1);
    // Again: the message's copy now goes after its latest count in the journal, so
    // recovery meets the count first.
    churn_until_compacted(&store, &b, &q, 40);
    assert!(segment_files(&dir).len() <= 5);
    store.sync();
    store.close();
    drop((b, poison, q));

    let (store, b, _) = start(&dir, small());
    let poison = b.queue("poison").unwrap();
    assert_eq!(return_once(&poison), 2, "counted before the restart");
    store.sync();
    store.close();
    drop((b, poison));

    let (_s, b, _) = start(&dir, small());
    let poison = b.queue("poison").unwrap();
    assert_eq!(return_once(&poison), 3);
    // The fourth return is one more than the limit.
    assert_eq!(poison.message_count(), 0);
}

#[test]
fn the_writer_learns_how_long_to_look_for_a_kick_only_from_rounds_it_looked_for() {
    let dir = TempDir::new("kick-spin");
    let config = StoreConfig {
        // Every round here goes by a kick, never by the timer.
        unawaited_records_delay: Duration::from_secs(60),
        // Room to learn from kicks milliseconds late, which a loaded machine times reliably.
        kick_spin_max: Duration::from_secs(1),
        ..small()
    };
    let (store, b, _) = start(&dir, config);
    durable_queue(&b, "q");
    store.sync();
    let limit = || store.shared.kick_spin_micros.load(Ordering::Relaxed);
    // Kicked 2 ms after its record: the writer learns to look at least twice that. (A writer
    // slower to wake than that finds the kick at once and learns nothing from the round.)
    for tries in 1.. {
        assert!(tries <= 20, "never learned from late kicks: {} us", limit());
        let point = publish(&b, "q", vec![1; 100], true).expect("a sync point");
        std::thread::sleep(Duration::from_millis(2));
        store.notify_when_durable(point, Outbox::new());
        wait_until("the round durable", || store.durable() >= point);
        if limit() >= 4_000 {
            break;
        }
    }
    // A round whose kick is there before the writer sees its records: the writer is held at
    // the sync of one round while the next is appended and kicked.
    let held = store.shared.sync_hold.hold();
    let point = publish(&b, "q", vec![2; 100], true).expect("a sync point");
    store.notify_when_durable(point, Outbox::new());
    wait_until("the writer at its sync", || {
        store.shared.sync_hold.is_waiting()
    });
    let learned = limit();
    let next = publish(&b, "q", vec![3; 100], true).expect("a sync point");
    store.notify_when_durable(next, Outbox::new());
    drop(held);
    wait_until("both rounds durable", || store.durable() >= next);
    assert_eq!(limit(), learned);
}

#[test]
fn a_head_segment_is_not_compacted_while_its_last_records_are_still_pending() {
    let dir = TempDir::new("compact-pending");
    let (store, b, _) = start(&dir, small());
    let q = durable_queue(&b, "q");
    store.sync();
    let first = store.shared.state.lock().tail.segment;
    // The writer holds a round at its sync while the rest of the segment comes in.
    let held = store.shared.sync_hold.hold();
    let point = publish(&b, "q", vec![1; 100], true).expect("a sync point");
    store.notify_when_durable(point, Outbox::new());
    wait_until("the writer at its sync", || {
        store.shared.sync_hold.is_waiting()
    });
    let mut published = 1;
    while store.shared.state.lock().tail.segment == first {
        publish(&b, "q", vec![2; 500], true);
        published += 1;
    }
    // Everything but the last message of `first` and the one that began the next segment:
    // `first` then holds little that is live, and that little is not on disk yet.
    assert_eq!(consume(&b, &q, published - 2).len() as u32, published - 2);
    drop(held);
    store.sync();
    wait_until("the head segment compacted", || {
        let st = store.shared.state.lock();
        st.index
            .segments
            .get(&first)
            .is_none_or(|s| s.compacted_upto.is_some())
    });
    assert_eq!(
        store.shared.compaction_failures.load(Ordering::Relaxed),
        0,
        "compaction read records that were not written yet"
    );
    assert_eq!(bodies(&q).len(), 2);
    store.close();
}

/// Holds the writer just before its fdatasync while a test looks at what is durable.
#[derive(Default)]
pub(crate) struct SyncHold {
    held: parking_lot::Mutex<bool>,
    changed: parking_lot::Condvar,
    waiting: std::sync::atomic::AtomicBool,
}

impl SyncHold {
    /// The writer, before it syncs: waits while the test holds syncs.
    pub(crate) fn pass(&self) {
        let mut held = self.held.lock();
        while *held {
            self.waiting.store(true, Ordering::Release);
            self.changed.wait(&mut held);
        }
        self.waiting.store(false, Ordering::Release);
    }

    /// Holds syncs until the guard goes (also when the test fails: the writer must get
    /// past its sync for the store to close).
    fn hold(&self) -> impl Drop + '_ {
        struct Release<'a>(&'a SyncHold);
        impl Drop for Release<'_> {
            fn drop(&mut self) {
                *self.0.held.lock() = false;
                self.0.changed.notify_all();
            }
        }
        *self.held.lock() = true;
        Release(self)
    }

    fn is_waiting(&self) -> bool {
        self.waiting.load(Ordering::Acquire)
    }
}

#[test]
fn nothing_is_durable_and_nobody_is_woken_before_the_sync_returns() {
    let dir = TempDir::new("synchold");
    let (store, b, _) = start(&dir, small());
    durable_queue(&b, "q");
    store.sync();
    let held = store.shared.sync_hold.hold();
    let point = publish(&b, "q", b"m".to_vec(), true).expect("a sync point");
    let ob = Outbox::new();
    store.notify_when_durable(point, ob.clone());
    wait_until("the writer at its sync", || {
        store.shared.sync_hold.is_waiting()
    });
    // Written to the file, not yet synced: a confirm now could be lost with the machine.
    assert!(store.durable() < point, "durable before the sync");
    assert!(ob.is_empty(), "woken before the sync");
    store.notify_when_durable(point, ob.clone());
    assert!(
        ob.is_empty(),
        "a second request is not answered early either"
    );
    drop(held);
    wait_until("the wake-up", || !ob.is_empty());
    assert!(store.durable() >= point);
    store.close();
}

#[test]
fn a_waiting_connection_is_woken_once_its_point_is_durable() {
    let dir = TempDir::new("wake");
    let (store, b, _) = start(&dir, small());
    durable_queue(&b, "q");
    let point = publish(&b, "q", b"m".to_vec(), true).expect("a sync point");
    let ob = Outbox::new();
    store.notify_when_durable(point, ob.clone());
    wait_until("the wake-up", || !ob.is_empty());
    let mut items = Vec::new();
    ob.take(&mut items);
    assert!(matches!(items[..], [OutboxItem::Durable]));
    assert!(store.durable() >= point);
    // Already durable: woken at once.
    store.notify_when_durable(point, ob.clone());
    assert_eq!(ob.len(), 1);
    store.close();
}

#[test]
fn a_burst_of_publishes_and_one_request_share_one_sync() {
    let dir = TempDir::new("burst");
    // However long a loaded machine takes over the burst, no timer writes part of it.
    let config = StoreConfig {
        unawaited_records_delay: Duration::from_secs(60),
        ..small()
    };
    let (store, b, _) = start(&dir, config);
    durable_queue(&b, "q");
    let ob = Outbox::new();
    store.notify_when_durable(store.appended(), ob.clone());
    wait_until("the declare", || store.durable() >= store.appended());
    let before = store.syncs();
    // A connection's read batch: every publish appended, then one request to be woken.
    let mut last = None;
    for i in 0..50u32 {
        last = publish(&b, "q", i.to_be_bytes().to_vec(), true);
    }
    let last = last.expect("a sync point");
    store.notify_when_durable(last, ob.clone());
    wait_until("the burst", || store.durable() >= last);
    assert_eq!(
        store.syncs() - before,
        1,
        "the first publish must not start a sync alone"
    );
    store.close();
}

#[test]
fn records_nobody_waits_for_are_written_anyway() {
    let dir = TempDir::new("unawaited");
    let (store, b, _) = start(&dir, small());
    durable_queue(&b, "q");
    wait_until("the declare", || store.durable() >= store.appended());
    let point = publish(&b, "q", b"m".to_vec(), true).expect("a sync point");
    wait_until("the unrequested sync", || store.durable() >= point);
    store.close();
}

#[test]
fn a_message_for_several_durable_queues_is_stored_once() {
    let dir = TempDir::new("once");
    {
        let (store, b, _) = start(&dir, small());
        for q in ["a", "b", "c"] {
            durable_queue(&b, q);
            b.bind(q, "amq.fanout", "", &Arguments::new()).unwrap();
        }
        let ex = b.exchange("amq.fanout").unwrap();
        let mut m = MessageParts::new("amq.fanout", "", Bytes::from(vec![7u8; 10_000]));
        m.persistent = true;
        b.publish(&ex, Message::from(m)).unwrap();
        store.sync();
        let (_, live) = store.usage();
        assert!(
            live < 12_000,
            "one copy of the body, not three: {live} live bytes"
        );
        let a = b.queue("a").unwrap();
        consume(&b, &a, 1);
        store.sync();
        store.close();
    }
    let (_s, b, stats) = start(&dir, small());
    assert_eq!(stats.messages, 1);
    assert_eq!(b.queue("a").unwrap().message_count(), 0);
    assert_eq!(b.queue("b").unwrap().message_count(), 1);
    assert_eq!(b.queue("c").unwrap().message_count(), 1);
}

#[test]
fn the_fuzz_entry_point_survives_damaged_input() {
    let dir = TempDir::new("fuzz");
    journal_with(&dir, 3);
    let data = std::fs::read(&segment_files(&dir)[0]).unwrap();
    crate::fuzz_decode(&data);
    crate::fuzz_decode(&data[segment::SEGMENT_HEADER..]);
    for cut in (0..data.len().min(600)).step_by(7) {
        crate::fuzz_decode(&data[cut..]);
    }
    crate::fuzz_decode(&[0xff; 40]);
}

/// Acquires the front message of `q` (as a consumer would, not settled yet).
fn acquire_one(q: &Queue) -> (u64, Message) {
    let got = q.get().expect("a message");
    (got.position, got.message)
}

#[test]
fn a_committed_transaction_survives_a_restart_whole() {
    let dir = TempDir::new("tx-commit");
    {
        let (store, b, _) = start(&dir, small());
        let input = durable_queue(&b, "in");
        durable_queue(&b, "out");
        publish(&b, "in", b"work".to_vec(), true);
        let (position, message) = acquire_one(&input);
        let mut tx = ferry_core::Transaction::new();
        tx.settle(
            input.clone(),
            position,
            message,
            ferry_core::Settlement::Accept,
        );
        let mut result = MessageParts::new("", "out", Bytes::from_static(b"result"));
        result.persistent = true;
        tx.publish(b.exchange("").unwrap(), Message::from(result));
        let outcome = b.commit(&mut tx);
        let point = outcome.sync.expect("the commit waits for the journal");
        store.sync();
        assert!(store.durable() >= point);
        store.close();
    }
    let (_s, b, stats) = start(&dir, small());
    assert_eq!(stats.transactions_discarded, 0);
    assert_eq!(b.queue("in").unwrap().message_count(), 0);
    assert_eq!(
        bodies(&b.queue("out").unwrap()),
        [Bytes::from_static(b"result")]
    );
}

/// The journal as a broker that died mid-commit leaves it: the commit's records are
/// written, its commit record is not, and other records follow.
#[test]
fn a_transaction_without_its_commit_record_leaves_no_trace() {
    let dir = TempDir::new("tx-open");
    {
        let (store, b, _) = start(&dir, small());
        let input = durable_queue(&b, "in");
        let out = durable_queue(&b, "out");
        publish(&b, "in", b"work".to_vec(), true);
        let old = input.queued_bodies();
        assert_eq!(old.len(), 1);
        let (_, message) = acquire_one(&input);
        let tx = ferry_core::JournalTx::default();
        let (in_id, out_id) = (input.store_id().unwrap(), out.store_id().unwrap());
        let mut result = MessageParts::new("", "out", Bytes::from_static(b"result"));
        result.persistent = true;
        store
            .enqueue(&result.build(), &[out_id], Some(&tx))
            .unwrap();
        store.dequeue(in_id, &[message.store_id().unwrap()], Some(&tx));
        assert!(tx.id().is_some());
        // Not the tail: a later record by someone else made it to the disk.
        publish(&b, "out", b"later".to_vec(), true);
        store.sync();
        store.close();
    }
    let (store, b, stats) = start(&dir, small());
    assert_eq!(stats.transactions_discarded, 1);
    assert_eq!(
        bodies(&b.queue("in").unwrap()),
        [Bytes::from_static(b"work")]
    );
    assert_eq!(
        bodies(&b.queue("out").unwrap()),
        [Bytes::from_static(b"later")]
    );
    // The dead records do not confuse the journal's continuation or the next recovery.
    publish(&b, "out", b"after".to_vec(), true);
    store.sync();
    store.close();
    drop(b);
    let (_s, b, _) = start(&dir, small());
    assert_eq!(b.queue("out").unwrap().message_count(), 2);
    assert_eq!(b.queue("in").unwrap().message_count(), 1);
}

#[test]
fn a_torn_commit_record_discards_the_whole_transaction() {
    let dir = TempDir::new("tx-torn");
    let last = {
        let (store, b, _) = start(&dir, small());
        let input = durable_queue(&b, "in");
        durable_queue(&b, "out");
        for body in [&b"a"[..], b"b"] {
            publish(&b, "in", body.to_vec(), true);
        }
        let mut tx = ferry_core::Transaction::new();
        for _ in 0..2 {
            let (position, message) = acquire_one(&input);
            tx.settle(
                input.clone(),
                position,
                message,
                ferry_core::Settlement::Accept,
            );
        }
        for body in ["x", "y"] {
            let mut m = MessageParts::new("", "out", Bytes::from_static(body.as_bytes()));
            m.persistent = true;
            tx.publish(b.exchange("").unwrap(), Message::from(m));
        }
        b.commit(&mut tx).sync.unwrap();
        store.sync();
        store.close();
        segment_files(&dir).pop().unwrap()
    };
    // The commit record is the last frame: cut it in half.
    let data = std::fs::read(&last).unwrap();
    let end = data_end(&data);
    let mut pos = segment::SEGMENT_HEADER;
    let mut last_frame = (0, 0, 0u8);
    while let Frame::Record { len, kind, .. } = read_frame(&data[pos..]) {
        if kind == record::kind::SEGMENT_END {
            break;
        }
        last_frame = (pos, len, kind);
        pos += len;
    }
    assert_eq!(pos, end);
    let (start_at, len, kind) = last_frame;
    assert_eq!(kind, record::kind::TX_COMMIT);
    let mut torn = data.clone();
    torn[start_at + len / 2..].fill(0);
    std::fs::write(&last, &torn).unwrap();
    let (_s, b, stats) = start(&dir, small());
    assert_eq!(stats.cut_at, Some((1, start_at as u64)));
    assert_eq!(stats.transactions_discarded, 1);
    let input: Vec<Bytes> = bodies(&b.queue("in").unwrap());
    assert_eq!(input, [Bytes::from_static(b"a"), Bytes::from_static(b"b")]);
    assert_eq!(b.queue("out").unwrap().message_count(), 0);
}

fn durable_exchange(b: &Broker, name: &str, kind: ExchangeKind, durable: bool) {
    let opts = ExchangeOptions {
        durable,
        ..ExchangeOptions::default()
    };
    b.declare_exchange(name, kind, opts, false).unwrap();
}

fn routed_via(b: &Broker, exchange: &str, key: &str) -> usize {
    let ex = b.exchange(exchange).unwrap();
    let m = Message::new(
        exchange.to_owned(),
        key.to_owned(),
        Bytes::from_static(b"probe"),
    );
    b.publish(&ex, m).unwrap().queues
}

#[test]
fn exchange_to_exchange_bindings_between_durable_exchanges_survive_a_restart() {
    let dir = TempDir::new("e2e");
    {
        let (store, b, _) = start(&dir, small());
        durable_exchange(&b, "src", ExchangeKind::Direct, true);
        durable_exchange(&b, "dst", ExchangeKind::Fanout, true);
        durable_exchange(&b, "gone", ExchangeKind::Fanout, true);
        durable_exchange(&b, "transient", ExchangeKind::Fanout, false);
        durable_queue(&b, "sink");
        for ex in ["dst", "gone", "transient"] {
            b.bind("sink", ex, "", &Arguments::new()).unwrap();
        }
        let none = Arguments::new();
        b.bind_exchange("dst", "src", "k", &none).unwrap();
        b.bind_exchange("dst", "amq.topic", "t.#", &none).unwrap();
        b.bind_exchange("gone", "src", "g", &none).unwrap();
        b.bind_exchange("transient", "src", "t", &none).unwrap();
        b.bind_exchange("dst", "src", "undone", &none).unwrap();
        b.unbind_exchange("dst", "src", "undone").unwrap();
        b.delete_exchange("gone", false).unwrap();
        assert_eq!(routed_via(&b, "src", "k"), 1);
        assert_eq!(routed_via(&b, "src", "t"), 1);
        store.sync();
        store.close();
    }
    let (_s, b, _) = start(&dir, small());
    assert!(b.exchange("transient").is_none() && b.exchange("gone").is_none());
    assert_eq!(routed_via(&b, "src", "k"), 1);
    assert_eq!(routed_via(&b, "amq.topic", "t.x"), 1);
    assert_eq!(routed_via(&b, "src", "undone"), 0);
    assert_eq!(routed_via(&b, "src", "g"), 0);
    assert_eq!(routed_via(&b, "src", "t"), 0);
}

#[test]
fn dead_letter_history_and_last_value_keys_survive_a_restart() {
    use ferry_core::DeathReason;
    let dir = TempDir::new("deaths");
    let keyed = |body: &'static str, value: &str| {
        let mut m = MessageParts::new("", "lvq", Bytes::from_static(body.as_bytes()));
        m.persistent = true;
        let mut h = Arguments::new();
        h.push("k", HeaderValue::Str(value.into()));
        m.headers = Some(Arc::new(h));
        m.build()
    };
    {
        let (store, b, _) = start(&dir, small());
        durable_exchange(&b, "dlx", ExchangeKind::Fanout, true);
        durable_queue(&b, "dlq");
        b.bind("dlq", "dlx", "", &Arguments::new()).unwrap();
        let mut args = Arguments::new();
        args.push("x-dead-letter-exchange", HeaderValue::Str("dlx".into()));
        let opts = QueueOptions {
            durable: true,
            arguments: args,
            ..QueueOptions::default()
        };
        let work = b.declare_queue("work", opts, false, 1).unwrap().0;
        publish(&b, "work", b"failed".to_vec(), true);
        let got = work.get().unwrap();
        assert!(work.reject(got.position, got.message));
        let mut args = Arguments::new();
        args.push("qpid.last_value_queue_key", HeaderValue::Str("k".into()));
        let opts = QueueOptions {
            durable: true,
            arguments: args,
            ..QueueOptions::default()
        };
        b.declare_queue("lvq", opts, false, 1).unwrap();
        let ex = b.exchange("").unwrap();
        b.publish(&ex, keyed("a-1", "a")).unwrap();
        b.publish(&ex, keyed("b-1", "b")).unwrap();
        store.sync();
        store.close();
    }
    let (_s, b, _) = start(&dir, small());
    let dlq = b.queue("dlq").unwrap();
    let got = dlq.get().expect("the dead letter");
    let deaths = got.message.deaths().expect("its history");
    let last = deaths.last().unwrap();
    assert_eq!(
        (last.queue.as_str(), last.reason),
        ("work", DeathReason::Rejected)
    );
    assert_eq!(
        deaths.first.as_ref().map(|d| d.queue.as_str()),
        Some("work")
    );
    // The recovered "a" is still the latest for its key: a new one replaces it.
    let ex = b.exchange("").unwrap();
    b.publish(&ex, keyed("a-2", "a")).unwrap();
    let lvq = b.queue("lvq").unwrap();
    assert_eq!(
        bodies(&lvq),
        [Bytes::from_static(b"b-1"), Bytes::from_static(b"a-2")]
    );
}

#[test]
fn a_missing_dead_letter_exchange_is_found_after_a_restart_once_declared() {
    let dir = TempDir::new("late-dlx");
    let work_opts = || {
        let mut args = Arguments::new();
        args.push("x-dead-letter-exchange", HeaderValue::Str("dlx".into()));
        QueueOptions {
            durable: true,
            arguments: args,
            ..QueueOptions::default()
        }
    };
    {
        let (store, b, _) = start(&dir, small());
        b.declare_queue("work", work_opts(), false, 1).unwrap();
        publish(&b, "work", b"dies later".to_vec(), true);
        store.sync();
        store.close();
    }
    let (_s, b, _) = start(&dir, small());
    let work = b
        .queue("work")
        .expect("the queue survives without its exchange");
    assert_eq!(work.alternate_exchange_name(), Some("dlx"));
    durable_exchange(&b, "dlx", ExchangeKind::Fanout, true);
    let dlq = durable_queue(&b, "dlq");
    b.bind("dlq", "dlx", "", &Arguments::new()).unwrap();
    let got = work.get().unwrap();
    assert!(work.reject(got.position, got.message));
    assert_eq!(bodies(&dlq), [Bytes::from_static(b"dies later")]);
}

/// Small segments and a memory budget of 64 KiB for persistent contents.
fn budgeted() -> StoreConfig {
    StoreConfig {
        memory_budget: Some(64 * 1024),
        ..small()
    }
}

fn numbered(i: u32, size: usize) -> Vec<u8> {
    let mut body = vec![(i % 251) as u8; size];
    body[..4].copy_from_slice(&i.to_be_bytes());
    body
}

fn check_numbered(bodies: &[Bytes], from: u32, size: usize) {
    for (k, body) in bodies.iter().enumerate() {
        assert_eq!(
            &body[..],
            &numbered(from + k as u32, size)[..],
            "message {k}"
        );
    }
}

#[test]
fn contents_beyond_the_budget_are_read_back_from_the_journal_in_order() {
    let dir = TempDir::new("offload");
    let (store, b, _) = start(&dir, budgeted());
    let q = durable_queue(&b, "deep");
    // Consumed at once: some still in the writer's buffers, some on disk.
    for i in 0..300 {
        publish(&b, "deep", numbered(i, 2000), true);
    }
    check_numbered(&consume(&b, &q, 300), 0, 2000);
    // Consumed after a sync: from the segment files.
    for i in 0..300 {
        publish(&b, "deep", numbered(i, 2000), true);
    }
    store.sync();
    assert!(
        b.memory_used() < 300 * 2000 / 2,
        "most contents are not in memory: {}",
        b.memory_used()
    );
    check_numbered(&consume(&b, &q, 300), 0, 2000);
    assert_eq!(b.memory_used(), 0);
}

/// Matches the [`numbered`] bodies whose number is a multiple of `every`.
#[derive(Debug)]
struct EveryNth(u32);

impl MessageFilter for EveryNth {
    fn matches(&self, message: &Message) -> bool {
        let number = message.body().get(..4).and_then(|b| b.try_into().ok());
        number.is_some_and(|n| u32::from_be_bytes(n) % self.0 == 0)
    }
}

#[test]
fn a_filtered_consumer_takes_its_matches_from_deep_in_a_queue_held_on_disk() {
    let dir = TempDir::new("offload-filter");
    let (store, b, _) = start(&dir, budgeted());
    let q = durable_queue(&b, "deep");
    for i in 1..=300 {
        publish(&b, "deep", numbered(i, 2000), true);
    }
    store.sync();
    assert!(
        b.memory_used() < 300 * 2000 / 2,
        "most contents are on disk only: {}",
        b.memory_used()
    );
    let number = |body: &Bytes| u32::from_be_bytes([body[0], body[1], body[2], body[3]]);
    let on_disk = q.depth().on_disk_bytes;
    let every_50th = consume_matching(
        &b,
        &q,
        10,
        Some(ConsumerFilter {
            matches: Arc::new(EveryNth(50)),
            drop_unmatched: false,
        }),
    );
    let numbers: Vec<u32> = every_50th.iter().map(number).collect();
    assert_eq!(numbers, [50, 100, 150, 200, 250, 300]);
    let read_back: u64 = every_50th.iter().map(|b| b.len() as u64).sum();
    assert!(
        q.depth().on_disk_bytes + read_back <= on_disk,
        "what was read back is no longer counted on disk: {} then {}",
        on_disk,
        q.depth().on_disk_bytes
    );
    for body in &every_50th {
        assert_eq!(
            &body[..],
            &numbered(number(body), 2000)[..],
            "read back whole"
        );
    }
    let rest: Vec<u32> = consume(&b, &q, 300).iter().map(number).collect();
    let expected: Vec<u32> = (1..=300).filter(|n| n % 50 != 0).collect();
    assert_eq!(rest, expected);
    assert_eq!(b.memory_used(), 0);
    assert_eq!(q.depth().on_disk_bytes, 0);
}

fn group_queue_on_disk(b: &Broker, name: &str) -> Arc<Queue> {
    let mut arguments = Arguments::new();
    arguments.push("qpid.group_header_key", HeaderValue::Str("G".into()));
    arguments.push("qpid.shared_msg_group", HeaderValue::UInt(1));
    let opts = QueueOptions {
        durable: true,
        arguments,
        ..QueueOptions::default()
    };
    b.declare_queue(name, opts, false, 1).unwrap().0
}

fn publish_in_group(b: &Broker, queue: &str, group: &str, i: u32) {
    let mut headers = ferry_core::Headers::new();
    headers.push("G", HeaderValue::Str(group.into()));
    let mut m = MessageParts::new("", queue.to_owned(), Bytes::from(numbered(i, 2000)));
    m.headers = Some(Arc::new(headers));
    m.persistent = true;
    b.publish(&b.exchange("").unwrap(), Message::from(m))
        .unwrap();
}

fn consumer_spec(id: u64, ob: &Arc<Outbox>, acquire: bool) -> ConsumerSpec {
    ConsumerSpec {
        id,
        outbox: ob.clone(),
        owner: 1,
        connection: 0,
        tag: Bytes::from(format!("c{id}")),
        acquire,
        exclusive: false,
        window: None,
        filter: None,
        ack_timeout: None,
    }
}

/// A consumer of `q` with `acquire` (false: a browser), given no credit yet.
fn subscribe_to(b: &Broker, q: &Arc<Queue>, ob: &Arc<Outbox>, acquire: bool) -> u64 {
    let id = b.next_consumer_id();
    q.subscribe(consumer_spec(id, ob, acquire)).unwrap();
    id
}

/// What `ob` holds, as a connection's writer takes it (walks cut short go on).
fn delivered_to(ob: &Outbox) -> Vec<ferry_core::Delivery> {
    let mut items = Vec::new();
    while ob.take(&mut items) {}
    items
        .into_iter()
        .filter_map(|i| match i {
            OutboxItem::Deliver(d) => Some(d),
            _ => None,
        })
        .collect()
}

fn number_of(d: &ferry_core::Delivery) -> u32 {
    let body = d.message.body();
    u32::from_be_bytes([body[0], body[1], body[2], body[3]])
}

#[test]
fn a_message_groups_first_message_held_on_disk_is_read_back_for_its_consumer() {
    let dir = TempDir::new("offload-groups");
    let (store, b, _) = start(&dir, budgeted());
    let q = group_queue_on_disk(&b, "groups");
    // A deep group A, then B's messages, all but the first few on disk only.
    for i in 0..200 {
        publish_in_group(&b, "groups", "A", i);
    }
    for i in 200..210 {
        publish_in_group(&b, "groups", "B", i);
    }
    store.sync();
    assert!(q.depth().on_disk_bytes > 150 * 2000, "{:?}", q.depth());
    // The first consumer holds A, unsettled.
    let (busy, other) = (Outbox::new(), Outbox::new());
    let busy_id = subscribe_to(&b, &q, &busy, true);
    q.add_credit(busy_id, 1, u32::MAX).unwrap();
    let held = delivered_to(&busy);
    assert_eq!(held.iter().map(number_of).collect::<Vec<_>>(), [0]);
    // The second gets B, read back from disk, without waiting for A's 199 others.
    let other_id = subscribe_to(&b, &q, &other, true);
    q.add_credit(other_id, 20, u32::MAX).unwrap();
    let got = delivered_to(&other);
    assert_eq!(
        got.iter().map(number_of).collect::<Vec<_>>(),
        (200..210).collect::<Vec<_>>()
    );
    for d in &got {
        let whole = numbered(number_of(d), 2000);
        assert_eq!(d.message.body(), &whole[..], "read back whole");
        assert!(q.accept(d.position));
    }
    // A gets on the same way.
    assert!(q.accept(held[0].position));
    q.add_credit(busy_id, 199, u32::MAX).unwrap();
    let rest: Vec<u32> = delivered_to(&busy).iter().map(number_of).collect();
    assert_eq!(rest, (1..200).collect::<Vec<_>>());
}

#[test]
fn group_heads_on_disk_are_read_back_only_for_a_taker_and_a_few_at_a_time() {
    let dir = TempDir::new("offload-groups-selective");
    let (store, b, _) = start(&dir, budgeted());
    let q = group_queue_on_disk(&b, "groups");
    // 300 groups of one message each, most of them on disk.
    for i in 1..=300 {
        publish_in_group(&b, "groups", &format!("g{i}"), i);
    }
    store.sync();
    let (on_disk, memory) = (q.depth().on_disk_bytes, b.memory_used());
    assert!(on_disk > 200 * 2000, "{on_disk}");
    // A selective consumer that wants none of them: heads are looked at through copies,
    // and none stays in memory.
    let picky = Outbox::new();
    let id = b.next_consumer_id();
    q.subscribe(ConsumerSpec {
        filter: Some(ConsumerFilter {
            matches: Arc::new(EveryNth(1000)),
            drop_unmatched: false,
        }),
        ..consumer_spec(id, &picky, true)
    })
    .unwrap();
    q.add_credit(id, 1000, u32::MAX).unwrap();
    assert!(delivered_to(&picky).is_empty());
    assert_eq!(
        q.depth().on_disk_bytes,
        on_disk,
        "nothing read back to stay"
    );
    assert_eq!(b.memory_used(), memory);
    // A consumer that takes anything gets them all, in order, read back as it goes.
    let all = Outbox::new();
    let id = subscribe_to(&b, &q, &all, true);
    let mut got = Vec::new();
    for _ in 0..300 {
        q.add_credit(id, 1, u32::MAX).unwrap();
        got.extend(delivered_to(&all).iter().map(number_of));
    }
    assert_eq!(got, (1..=300).collect::<Vec<_>>());
}

#[test]
fn group_heads_a_busy_consumer_holds_are_passed_without_reading_them_back() {
    let dir = TempDir::new("offload-groups-held");
    let (store, b, _) = start(&dir, budgeted());
    let q = group_queue_on_disk(&b, "groups");
    // 300 groups of two messages, then one more group. Once the first 300 are taken,
    // reading back from the front (256 at most) leaves more held heads on disk than a
    // pass reads back.
    for round in 0..2 {
        for g in 0..300 {
            publish_in_group(&b, "groups", &format!("g{g}"), round * 300 + g);
        }
    }
    publish_in_group(&b, "groups", "free", 600);
    store.sync();
    let (busy, other) = (Outbox::new(), Outbox::new());
    let busy_id = subscribe_to(&b, &q, &busy, true);
    q.add_credit(busy_id, 300, u32::MAX).unwrap();
    assert_eq!(
        delivered_to(&busy).len(),
        300,
        "the busy consumer holds every g group"
    );
    // The other consumer passes the held heads (some on disk) and gets the free group's.
    let other_id = subscribe_to(&b, &q, &other, true);
    q.add_credit(other_id, 1, u32::MAX).unwrap();
    let got: Vec<u32> = delivered_to(&other).iter().map(number_of).collect();
    assert_eq!(got, [600]);
}

#[test]
fn a_browsed_message_acquired_while_on_disk_holds_its_own_group() {
    let dir = TempDir::new("offload-groups-browse");
    let (store, b, _) = start(&dir, budgeted());
    let q = group_queue_on_disk(&b, "groups");
    for i in 0..200 {
        publish_in_group(&b, "groups", "A", i);
    }
    publish_in_group(&b, "groups", "B", 200);
    store.sync();
    let browser = Outbox::new();
    let browser_id = subscribe_to(&b, &q, &browser, false);
    q.add_credit(browser_id, 300, u32::MAX).unwrap();
    let seen = delivered_to(&browser);
    assert_eq!(seen.len(), 201);
    // Contents are kept in memory from the front (and read back from there), so with the
    // last 100 messages' worth on disk, message 150's content is there.
    let late_a = seen.iter().find(|d| number_of(d) == 150).unwrap();
    assert!(q.depth().on_disk_bytes >= 100 * 2000, "{:?}", q.depth());
    assert_eq!(q.acquire([late_a.position]), [late_a.position]);
    // Acquired, it holds group A (not the no-group group): a consumer gets only B.
    let consumer = Outbox::new();
    let id = subscribe_to(&b, &q, &consumer, true);
    q.add_credit(id, 10, u32::MAX).unwrap();
    let got: Vec<u32> = delivered_to(&consumer).iter().map(number_of).collect();
    assert_eq!(got, [200]);
}

#[test]
fn contents_on_disk_survive_compaction_and_a_restart_within_the_budget() {
    let dir = TempDir::new("offload-compact");
    {
        let (store, b, _) = start(&dir, budgeted());
        let old = durable_queue(&b, "old");
        let q = durable_queue(&b, "q");
        for i in 0..200 {
            publish(&b, "old", numbered(i, 1000), true);
        }
        // Churn on another queue until the old messages' segments are compacted away.
        churn_until_compacted(&store, &b, &q, 60);
        check_numbered(&consume(&b, &old, 50), 0, 1000);
        store.sync();
        store.close();
    }
    let (_s, b, stats) = start(&dir, budgeted());
    assert!(stats.messages_on_disk > 0, "{stats:?}");
    assert!(b.memory_used() <= 80 * 1024, "{}", b.memory_used());
    let old = b.queue("old").unwrap();
    check_numbered(&consume(&b, &old, 150), 50, 1000);
    assert_eq!(old.message_count(), 0);
}

/// RabbitMQ's byte limits count bodies only; messages recovered with their content left on
/// disk must count as much as before the restart, though their stand-ins have no body.
#[test]
fn recovered_contents_on_disk_count_their_bodies_against_ready_byte_limits() {
    let dir = TempDir::new("offload-limits");
    let publish_with_header = |b: &Broker, i| {
        let mut m = MessageParts::new("", "q", Bytes::from(numbered(i, 1000)));
        m.header = ferry_core::ProtocolHeader::Amqp1(Bytes::from(vec![1u8; 200]));
        m.persistent = true;
        b.publish(&b.exchange("").unwrap(), m.build())
    };
    {
        let (store, b, _) = start(&dir, budgeted());
        let opts = QueueOptions {
            durable: true,
            limits: ferry_core::QueueLimits {
                max_size: Some(100 * 1000),
                scope: ferry_core::LimitScope::Ready,
                ..Default::default()
            },
            ..QueueOptions::default()
        };
        b.declare_queue("q", opts, false, 1).unwrap();
        for i in 0..100 {
            publish_with_header(&b, i).unwrap();
        }
        assert!(publish_with_header(&b, 100).is_err(), "100 bodies fill it");
        store.sync();
        store.close();
    }
    let (_s, b, stats) = start(&dir, budgeted());
    assert!(stats.messages_on_disk > 0, "{stats:?}");
    assert!(
        publish_with_header(&b, 100).is_err(),
        "still full after the restart"
    );
    let q = b.queue("q").unwrap();
    check_numbered(&consume(&b, &q, 10), 0, 1000);
    for i in 100..110 {
        publish_with_header(&b, i).unwrap();
    }
    assert!(publish_with_header(&b, 110).is_err(), "full again");
}

/// Publishes and consumes on `q` until compaction has copied the declarations out of segment
/// `head`, then lets two more write rounds run so that reclamation has had its say.
fn churn_until_head_compacted(store: &Store, b: &Broker, q: &Arc<Queue>, head: u64) {
    let compacted = || {
        let st = store.shared.state.lock();
        let moved = st.index.topology().all(|l| l.loc.segment != head);
        drop(st);
        moved
    };
    let mut round = 0;
    while !compacted() {
        assert!(round < 60, "segment {head} was never compacted");
        for i in 0..50u32 {
            publish(b, "q", vec![((round * i) % 251) as u8; 1000], true);
        }
        assert_eq!(consume(b, q, 50).len(), 50);
        store.sync();
        round += 1;
    }
    for _ in 0..2 {
        publish(b, "q", b"tick".to_vec(), true);
        assert_eq!(consume(b, q, 1).len(), 1);
        store.sync();
    }
}

/// A transaction's dequeues take effect only with its commit record: a broker that dies
/// before that record reaches the disk must find the messages again, however the writer
/// compacted and reclaimed segments meanwhile.
#[test]
fn an_uncommitted_transactions_dequeues_keep_their_messages_through_reclamation() {
    let dir = TempDir::new("tx-reclaim");
    {
        let (store, b, _) = start(&dir, small());
        let head = store.shared.state.lock().tail.segment;
        let input = durable_queue(&b, "in");
        durable_queue(&b, "keep");
        let q = durable_queue(&b, "q");
        for name in ["in", "keep"] {
            b.bind(name, "amq.fanout", "", &Arguments::new()).unwrap();
        }
        publish(&b, "in", b"only".to_vec(), true);
        let mut shared = MessageParts::new("amq.fanout", "", Bytes::from_static(b"shared"));
        shared.persistent = true;
        b.publish(&b.exchange("amq.fanout").unwrap(), Message::from(shared))
            .unwrap();
        // The commit's dequeues are appended; the broker dies before its commit record.
        let tx = ferry_core::JournalTx::default();
        for _ in 0..2 {
            let (_, message) = acquire_one(&input);
            let id = message.store_id().unwrap();
            store.dequeue(input.store_id().unwrap(), &[id], Some(&tx));
        }
        churn_until_head_compacted(&store, &b, &q, head);
        store.close();
    }
    let (_s, b, stats) = start(&dir, small());
    assert_eq!(
        bodies(&b.queue("in").unwrap()),
        [Bytes::from_static(b"only"), Bytes::from_static(b"shared")]
    );
    assert_eq!(
        bodies(&b.queue("keep").unwrap()),
        [Bytes::from_static(b"shared")]
    );
    assert_eq!(stats.transactions_discarded, 1);
}

#[test]
fn management_sees_the_store_in_the_overview() {
    let dir = TempDir::new("stats");
    let (store, b, _) = start(&dir, small());
    durable_queue(&b, "q");
    let mut last = None;
    for i in 0..50u8 {
        last = publish(&b, "q", vec![i; 100], true);
    }
    let point = last.expect("journaled");
    let deadline = Instant::now() + Duration::from_secs(10);
    while store.durable() < point && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    let stats = b
        .overview()
        .store
        .expect("a broker with a journal reports it");
    assert!(stats.records >= 51, "a declare and 50 messages: {stats:?}");
    assert!(stats.syncs >= 1 && stats.syncs <= stats.records);
    assert!(stats.segments >= 1 && stats.disk_bytes > 0 && stats.live_bytes > 0);
    assert_eq!(stats.durable, stats.appended);
    assert!(!stats.failed);
}

/// Publishes a persistent message to amq.topic under "news".
fn send_news(b: &Broker, body: &'static str) {
    let mut m = MessageParts::new("amq.topic", "news", Bytes::from_static(body.as_bytes()));
    m.persistent = true;
    b.publish(&b.exchange("amq.topic").unwrap(), Message::from(m))
        .unwrap();
}

#[test]
fn a_durable_bindings_filter_is_back_after_a_restart() {
    let dir = TempDir::new("binding-filter");
    let mut args = Arguments::new();
    args.push("x-test-prefix", HeaderValue::Str("red".into()));
    {
        let (store, b, _) = start(&dir, small());
        durable_queue(&b, "sub");
        b.bind("sub", "amq.topic", "news", &args).unwrap();
        send_news(&b, "red 1");
        send_news(&b, "blue 1");
        store.sync();
    }
    let (_store, b, _) = start(&dir, small());
    send_news(&b, "blue 2");
    send_news(&b, "red 2");
    assert_eq!(
        bodies(&b.queue("sub").unwrap()),
        [Bytes::from_static(b"red 1"), Bytes::from_static(b"red 2")]
    );
}

#[test]
fn a_rebound_filter_is_in_force_before_and_after_a_restart() {
    let dir = TempDir::new("binding-refilter");
    let prefix = |p: &'static str| {
        let mut args = Arguments::new();
        args.push("x-test-prefix", HeaderValue::Str(p.into()));
        args
    };
    {
        let (store, b, _) = start(&dir, small());
        durable_queue(&b, "sub");
        b.bind("sub", "amq.topic", "news", &prefix("red")).unwrap();
        b.bind("sub", "amq.topic", "news", &prefix("blue")).unwrap();
        send_news(&b, "red 1");
        send_news(&b, "blue 1");
        store.sync();
    }
    let (_store, b, _) = start(&dir, small());
    send_news(&b, "red 2");
    send_news(&b, "blue 2");
    assert_eq!(
        bodies(&b.queue("sub").unwrap()),
        [Bytes::from_static(b"blue 1"), Bytes::from_static(b"blue 2")]
    );
}
