//! The memory meter and the flow-to-disk budget count what queues hold, with adds and subs
//! spread over the queue's code paths: every way a message can leave a queue must give back
//! exactly what it took. Each test empties its broker one way and checks the signed totals
//! (the meter's public reading clamps at zero, which would hide a double sub).

use crate::MessageParts;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use super::tests::{declare_with, declare_with_args, rabbit_dlq, take_deliveries};
use super::*;
use crate::journal::testing::MemoryJournal;
use crate::limits::LimitPolicy;
use crate::message::{now_ms, Message};
use crate::queue::ConsumerSpec;
use crate::queue::Outbox;
use crate::queue::QueueOptions;
use crate::route::release_deliveries;
use crate::transaction::Settlement;
use crate::value::Arguments;
use crate::value::HeaderValue as V;

const ME: OwnerId = 1;

/// Long enough for a message published with [`soon`] to have expired.
const PAST_SOON: Duration = Duration::from_millis(40);

#[track_caller]
fn assert_nothing_held(b: &Broker, after: &str) {
    assert_eq!(b.memory.signed_total(), 0, "meter after {after}");
    if let Some(offload) = &b.offload {
        assert_eq!(offload.resident(), 0, "flow-to-disk budget after {after}");
    }
}

fn body(n: usize) -> Bytes {
    Bytes::from(vec![b'x'; n])
}

fn message(key: &str, size: usize) -> MessageParts {
    MessageParts::new("", key.to_owned(), body(size))
}

fn put(b: &Broker, key: &str, size: usize) {
    b.publish(b.default_exchange(), Message::from(message(key, size)))
        .unwrap();
}

/// A message that expires a few milliseconds from now.
fn put_expiring(b: &Broker, key: &str, size: usize) {
    let mut m = message(key, size);
    m.expires_at = Some(now_ms() + 10);
    b.publish(b.default_exchange(), Message::from(m)).unwrap();
}

fn plain(b: &Broker, name: &str) -> Arc<Queue> {
    declare_with(b, name, QueueOptions::default())
}

/// A RabbitMQ-style dead-lettering queue whose dead letters go to queue `dlq`.
fn dead_lettering(b: &Broker, name: &str, dlq: &str, extra: &[(&str, V)]) -> Arc<Queue> {
    let mut args = vec![("x-dead-letter-routing-key", V::Str(dlq.into()))];
    args.extend(extra.iter().cloned());
    rabbit_dlq(b, name, "", &args)
}

fn subscribe(b: &Broker, q: &Arc<Queue>, acquire: bool, credit: u32) -> (ConsumerId, Arc<Outbox>) {
    let ob = Outbox::new();
    let id = b.next_consumer_id();
    q.subscribe(ConsumerSpec {
        id,
        outbox: ob.clone(),
        owner: ME,
        connection: 0,
        tag: Bytes::new(),
        acquire,
        exclusive: false,
        window: None,
        filter: None,
        ack_timeout: None,
    })
    .unwrap();
    q.add_credit(id, credit, u32::MAX).unwrap();
    (id, ob)
}

#[test]
fn accepted_rejected_and_released_messages() {
    let b = Broker::new(BrokerConfig::default());
    let q = plain(&b, "q");
    for size in [10, 20, 30, 40] {
        put(&b, "q", size);
    }
    assert_eq!(b.memory_used(), 100);
    let (c, ob) = subscribe(&b, &q, true, 4);
    let ds = take_deliveries(&ob);
    assert_eq!(b.memory_used(), 100, "delivered, not settled");
    assert!(q.accept(ds[0].position));
    assert!(q.reject(ds[1].position, ds[1].message.clone()));
    release_deliveries(ds[2..].iter().cloned(), true);
    assert_eq!(b.memory_used(), 70);
    q.stop(c).unwrap();
    // basic.get, then accept.
    while let Some(got) = q.get() {
        assert!(q.accept(got.position));
    }
    // Settling twice gives nothing back twice.
    assert!(!q.accept(ds[0].position));
    assert_nothing_held(&b, "accept, reject and release");
}

#[test]
fn dead_lettered_messages_move_to_their_dead_letter_queue() {
    let b = Broker::new(BrokerConfig::default());
    let dlq = plain(&b, "dlq");
    // Room for one message, dropping the oldest (0-9-1's x-max-length).
    let mut opts = QueueOptions {
        arguments: [
            ("x-dead-letter-exchange", V::Str(String::new())),
            ("x-dead-letter-routing-key", V::Str("dlq".into())),
        ]
        .into_iter()
        .collect(),
        ..QueueOptions::default()
    };
    opts.limits = QueueLimits {
        max_count: Some(1),
        max_size: None,
        policy: LimitPolicy::DropHead,
        ..Default::default()
    };
    let q = declare_with(&b, "q", opts);
    put(&b, "q", 10);
    put(&b, "q", 20); // drops the first (maxlen)
    let got = q.get().unwrap();
    assert!(q.reject(got.position, got.message)); // rejected
    assert_eq!(dlq.message_count(), 2);
    assert_eq!(b.memory_used(), 30, "now held by the dead letter queue");
    assert_eq!(dlq.purge(), 2);
    assert_nothing_held(&b, "dead-lettering and purge");
}

#[test]
fn expired_messages_wherever_they_are_found() {
    let b = Broker::new(BrokerConfig::default());
    let dlq = plain(&b, "dlq");
    // Found by the sweep.
    let swept = plain(&b, "swept");
    put_expiring(&b, "swept", 10);
    // Found by dispatch, by basic.get, and by browse-then-acquire.
    let dispatched = plain(&b, "dispatched");
    put_expiring(&b, "dispatched", 20);
    let got = plain(&b, "got");
    put_expiring(&b, "got", 30);
    let browsed = plain(&b, "browsed");
    put_expiring(&b, "browsed", 40);
    let (_, browser) = subscribe(&b, &browsed, false, u32::MAX);
    let seen = take_deliveries(&browser);
    assert_eq!(seen.len(), 1);
    // Found at the head of a dead-lettering queue, and by a queue TTL.
    dead_lettering(&b, "delayed", "dlq", &[]);
    put_expiring(&b, "delayed", 50);
    let ttl = declare_with_args(&b, "ttl", &[("x-message-ttl", V::Int(5))]);
    put(&b, "ttl", 60);
    assert_eq!(b.memory_used(), 210);
    std::thread::sleep(PAST_SOON);
    assert_eq!(swept.purge_expired(now_ms()), 1);
    let (_, ob) = subscribe(&b, &dispatched, true, u32::MAX);
    assert!(take_deliveries(&ob).is_empty());
    assert!(got.get().is_none());
    assert!(browsed.acquire([seen[0].position]).is_empty());
    assert!(!b.expire_heads());
    assert_eq!(dlq.message_count(), 1);
    assert_eq!(dlq.purge(), 1);
    assert_eq!(ttl.message_count(), 0, "counting sweeps");
    assert_nothing_held(&b, "expiry");
}

#[test]
fn messages_dropped_to_make_room_or_replaced_by_a_newer_value() {
    let b = Broker::new(BrokerConfig::default());
    let ring = declare_with(
        &b,
        "ring",
        QueueOptions {
            limits: QueueLimits {
                max_count: Some(2),
                max_size: None,
                policy: LimitPolicy::DropHead,
                ..Default::default()
            },
            ..QueueOptions::default()
        },
    );
    for _ in 0..5 {
        put(&b, "ring", 10);
    }
    assert_eq!(b.memory_used(), 20);
    let lvq = declare_with_args(
        &b,
        "lvq",
        &[("qpid.last_value_queue_key", V::Str("k".into()))],
    );
    for size in [5, 6, 7] {
        let mut m = message("lvq", size);
        m.headers = Some(Arc::new(
            [("k", V::Str("same".into()))].into_iter().collect(),
        ));
        b.publish(b.default_exchange(), Message::from(m)).unwrap();
    }
    assert_eq!(b.memory_used(), 27);
    assert_eq!(ring.purge() + lvq.purge(), 3);
    assert_nothing_held(&b, "drop-head and last-value replacement");
}

#[test]
fn deleted_queues_and_what_their_consumers_still_held() {
    let b = Broker::new(BrokerConfig::default());
    let alt_target = plain(&b, "alt-target");
    b.bind("alt-target", "amq.fanout", "", &Arguments::new())
        .unwrap();
    let q = declare_with(
        &b,
        "q",
        QueueOptions {
            alternate_exchange: Some("amq.fanout".into()),
            ..QueueOptions::default()
        },
    );
    for size in [1, 2, 3, 4, 5] {
        put(&b, "q", size);
    }
    let (_, ob) = subscribe(&b, &q, true, 3);
    let ds = take_deliveries(&ob);
    b.delete_queue("q", false, false, ME).unwrap();
    // A 0-10 alternate exchange takes the acquired ones too; settling them does nothing.
    assert_eq!(alt_target.message_count(), 5, "queued and acquired");
    assert!(!q.accept(ds[0].position));
    assert_eq!(alt_target.purge(), 5);
    assert_eq!(b.memory_used(), 0, "the deleted queue holds nothing");
    drop((q, ds, ob));
    assert_nothing_held(&b, "delete with an alternate");

    // Without one, acquired messages stay with their consumers: one accepted, one
    // released (an orphan, dropped), one never settled (the queue goes with the last
    // handle to it).
    let q = plain(&b, "q");
    for size in [1, 2, 3, 4, 5] {
        put(&b, "q", size);
    }
    let (_, ob) = subscribe(&b, &q, true, 3);
    let ds = take_deliveries(&ob);
    b.delete_queue("q", false, false, ME).unwrap();
    assert!(q.accept(ds[0].position));
    assert_eq!(
        q.release([(ds[1].position, ds[1].message.clone())], false),
        1
    );
    assert_eq!(b.memory_used(), 3, "the unsettled one");
    drop((q, ds, ob));
    assert_nothing_held(&b, "delete");

    // Deleted when unused (x-expires), when its last consumer goes (auto-delete) and when
    // its owner goes (exclusive).
    declare_with_args(&b, "unused", &[("x-expires", V::Int(1))]);
    put(&b, "unused", 7);
    let auto = declare_with(
        &b,
        "auto",
        QueueOptions {
            auto_delete: true,
            ..QueueOptions::default()
        },
    );
    put(&b, "auto", 8);
    put(&b, "auto", 9);
    let (c, ob) = subscribe(&b, &auto, true, 1);
    let held = take_deliveries(&ob);
    declare_with(
        &b,
        "mine",
        QueueOptions {
            exclusive_owner: Some(ME),
            auto_delete: true,
            ..QueueOptions::default()
        },
    );
    put(&b, "mine", 10);
    std::thread::sleep(Duration::from_millis(5));
    b.expire_unused_queues();
    assert!(b.cancel_consumer(&auto, c));
    assert!(b.queue("auto").is_none());
    release_deliveries(held, false);
    b.release_owner(ME);
    assert!(b.queue("unused").is_none() && b.queue("mine").is_none());
    assert_nothing_held(&b, "x-expires, auto-delete and owner deletes");
}

#[test]
fn transactions_stage_publishes_and_settle_at_commit() {
    let b = Broker::new(BrokerConfig::default());
    let dlq = plain(&b, "dlq");
    let q = dead_lettering(&b, "q", "dlq", &[]);
    for size in [1, 2, 3] {
        put(&b, "q", size);
    }
    let (c, ob) = subscribe(&b, &q, true, 3);
    let ds = take_deliveries(&ob);
    q.stop(c).unwrap();
    let mut tx = b.transaction();
    tx.settle(
        q.clone(),
        ds[0].position,
        ds[0].message.clone(),
        Settlement::Accept,
    );
    tx.settle(
        q.clone(),
        ds[1].position,
        ds[1].message.clone(),
        Settlement::Reject,
    );
    let release = Settlement::Release { redelivered: true };
    tx.settle(q.clone(), ds[2].position, ds[2].message.clone(), release);
    tx.publish(
        b.default_exchange().clone(),
        Message::from(message("q", 100)),
    );
    tx.publish(
        b.default_exchange().clone(),
        Message::from(message("nowhere", 50)),
    );
    assert_eq!(b.memory_used(), 156, "staged publishes count");
    b.commit(&mut tx);
    assert_eq!(b.memory_used(), 105);
    tx.publish(
        b.default_exchange().clone(),
        Message::from(message("q", 1000)),
    );
    tx.clear();
    tx.publish(
        b.default_exchange().clone(),
        Message::from(message("q", 1000)),
    );
    drop(tx);
    assert_eq!(q.purge() + dlq.purge(), 3);
    assert_nothing_held(&b, "commit, rollback and a dropped transaction");
}

/// Flow to disk: stand-ins count nowhere, contents read back count in both the meter and
/// the budget, and every way out gives back what was counted.
#[test]
fn contents_on_disk_read_back_and_left_every_way() {
    let journal = MemoryJournal::new();
    let config = BrokerConfig {
        persistent_memory_budget: Some(64 << 10),
        ..BrokerConfig::default()
    };
    let b = Broker::with_journal(config, journal);
    let durable = |name: &str, arguments: Arguments| {
        let opts = QueueOptions {
            durable: true,
            arguments,
            ..QueueOptions::default()
        };
        declare_with(&b, name, opts)
    };
    let persistent = |key: &str| {
        let mut m = message(key, 4096);
        m.persistent = true;
        b.publish(b.default_exchange(), Message::from(m)).unwrap();
    };
    let dlq = durable("dlq", Arguments::new());
    let ttl: Arguments = [
        ("x-message-ttl", V::Int(30)),
        ("x-dead-letter-exchange", V::Str(String::new())),
        ("x-dead-letter-routing-key", V::Str("dlq".into())),
    ]
    .into_iter()
    .collect();
    let q = durable("q", ttl);
    let other = durable("other", Arguments::new());
    for _ in 0..200 {
        persistent("q");
        persistent("other");
    }
    assert!(b.memory_used() < 400 * 4096 / 2, "{}", b.memory_used());
    // Browsed then acquired (most of them still stand-ins), consumed (read back in
    // batches), released, got.
    let (browser, seen) = subscribe(&b, &other, false, 40);
    let seen = take_deliveries(&seen);
    assert_eq!(seen.len(), 40);
    b.cancel_consumer(&other, browser);
    let acquired = other.acquire(seen.iter().map(|d| d.position));
    assert_eq!(acquired.len(), 40);
    other.accept_all(&acquired, &mut []);
    let (c, ob) = subscribe(&b, &other, true, 50);
    let ds = take_deliveries(&ob);
    assert_eq!(ds.len(), 50);
    other.accept_all(
        &ds[..40].iter().map(|d| d.position).collect::<Vec<_>>(),
        &mut [],
    );
    release_deliveries(ds[40..].iter().cloned(), true);
    b.cancel_consumer(&other, c);
    for _ in 0..30 {
        let got = other.get().unwrap();
        assert!(other.accept(got.position));
    }
    // Purged, and deleted with what is left.
    assert_eq!(other.purge(), 90);
    for _ in 0..20 {
        persistent("other");
    }
    b.delete_queue("other", false, false, ME).unwrap();
    // Expired (and dead-lettered, contents read back), then purged from the dead letters.
    std::thread::sleep(PAST_SOON);
    b.purge_expired();
    assert_eq!(q.message_count(), 0);
    assert_eq!(dlq.purge(), 200);
    assert_nothing_held(&b, "flow to disk");
}
