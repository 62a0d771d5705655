use crate::MessageParts;
use std::sync::Arc;

use bytes::Bytes;

use super::graveyard::Corpse;
use super::*;
use crate::error::BrokerError;
use crate::limits::{LimitPolicy, LimitScope};
use crate::message::Message;
use crate::queue::Outbox;
use crate::route::release_deliveries;
use crate::ConsumerId;

fn queue_with(limits: QueueLimits, owner: Option<OwnerId>) -> Arc<Queue> {
    let opts = QueueOptions {
        exclusive_owner: owner,
        ..QueueOptions::default()
    };
    Queue::new("q".into(), &opts, None, limits)
}

pub(super) fn queue() -> Arc<Queue> {
    queue_with(QueueLimits::default(), None)
}

pub(super) fn msg(body: &'static str) -> Message {
    Message::new("", "q", Bytes::from_static(body.as_bytes()))
}

pub(super) fn spec(id: ConsumerId, outbox: &Arc<Outbox>, acquire: bool) -> ConsumerSpec {
    ConsumerSpec {
        id,
        outbox: outbox.clone(),
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

pub(super) fn deliveries(outbox: &Outbox) -> Vec<Delivery> {
    let mut buf = Vec::new();
    outbox.take(&mut buf);
    buf.into_iter()
        .filter_map(|i| match i {
            OutboxItem::Deliver(d) => Some(d),
            OutboxItem::ConsumerCancelled { .. }
            | OutboxItem::Durable
            | OutboxItem::Close { .. } => None,
        })
        .collect()
}

pub(super) fn bodies(ds: &[Delivery]) -> Vec<&[u8]> {
    ds.iter().map(|d| d.message.body()).collect()
}

pub(super) fn bs(v: &[&'static str]) -> Vec<Bytes> {
    v.iter().map(|s| Bytes::from_static(s.as_bytes())).collect()
}

pub(super) fn publish(q: &Arc<Queue>, bodies: &[&'static str]) {
    for b in bodies {
        assert!(q.enqueue(msg(b)).unwrap().is_some());
    }
}

#[test]
fn nothing_is_delivered_without_credit() {
    let q = queue();
    let ob = Outbox::new();
    q.subscribe(spec(1, &ob, true)).unwrap();
    publish(&q, &["a", "b"]);
    assert!(ob.is_empty());
    assert_eq!(q.message_count(), 2);
    q.add_credit(1, 1, u32::MAX).unwrap();
    let ds = deliveries(&ob);
    assert_eq!(bodies(&ds), [b"a"]);
    assert_eq!(ds[0].consumer, 1);
    assert!(ds[0].acquired && !ds[0].redelivered);
    assert_eq!(q.message_count(), 1);
    assert_eq!(q.unsettled_count(), 1);
}

#[test]
fn byte_credit_blocks_messages_larger_than_remaining() {
    let q = queue();
    let ob = Outbox::new();
    q.subscribe(spec(1, &ob, true)).unwrap();
    publish(&q, &["aaaa", "bbbb", "cc"]);
    q.add_credit(1, u32::MAX, 6).unwrap();
    assert_eq!(bodies(&deliveries(&ob)), [b"aaaa"]);
    // 2 bytes left: "bbbb" (4) blocks the head of the queue, so "cc" waits too (FIFO).
    assert!(deliveries(&ob).is_empty());
    q.add_credit(1, 0, 2).unwrap();
    assert_eq!(bodies(&deliveries(&ob)), [b"bbbb"]);
}

#[test]
fn round_robin_across_consumers_with_credit() {
    let q = queue();
    let (o1, o2) = (Outbox::new(), Outbox::new());
    q.subscribe(spec(1, &o1, true)).unwrap();
    q.subscribe(spec(2, &o2, true)).unwrap();
    q.add_credit(1, 1, u32::MAX).unwrap();
    q.add_credit(2, u32::MAX, u32::MAX).unwrap();
    publish(&q, &["1", "2", "3", "4", "5"]);
    let (d1, d2) = (deliveries(&o1), deliveries(&o2));
    assert_eq!(bodies(&d1), [b"1"]);
    assert_eq!(bodies(&d2), [b"2", b"3", b"4", b"5"]);
}

#[test]
fn round_robin_alternates_when_both_have_credit() {
    let q = queue();
    let (o1, o2) = (Outbox::new(), Outbox::new());
    q.subscribe(spec(1, &o1, true)).unwrap();
    q.subscribe(spec(2, &o2, true)).unwrap();
    q.add_credit(1, u32::MAX, u32::MAX).unwrap();
    q.add_credit(2, u32::MAX, u32::MAX).unwrap();
    publish(&q, &["1", "2", "3", "4"]);
    assert_eq!(bodies(&deliveries(&o1)), [b"1", b"3"]);
    assert_eq!(bodies(&deliveries(&o2)), [b"2", b"4"]);
}

#[test]
fn stop_and_flush_zero_the_credit() {
    let q = queue();
    let ob = Outbox::new();
    q.subscribe(spec(1, &ob, true)).unwrap();
    q.add_credit(1, 5, u32::MAX).unwrap();
    q.stop(1).unwrap();
    publish(&q, &["a"]);
    assert!(ob.is_empty());
    q.add_credit(1, 1, u32::MAX).unwrap();
    assert_eq!(deliveries(&ob).len(), 1);
    publish(&q, &["b", "c"]);
    q.stop(1).unwrap();
    q.add_credit(1, 1, u32::MAX).unwrap();
    q.flush(1).unwrap();
    assert_eq!(bodies(&deliveries(&ob)), [b"b"]);
    publish(&q, &["d"]);
    assert!(ob.is_empty(), "flush leaves no credit");
    assert!(matches!(q.stop(99), Err(BrokerError::NotFound(_))));
}

#[test]
fn a_window_stopped_is_not_reopened_by_completions_of_what_it_sent() {
    // qpid-python's message.test_window_stop and test_credit_window_after_messagestop.
    let q = queue();
    let ob = Outbox::new();
    q.subscribe(spec(1, &ob, true)).unwrap();
    q.set_flow_mode(1, true).unwrap();
    q.add_credit(1, 5, 0).unwrap();
    q.add_credit(1, 0, u32::MAX).unwrap();
    publish(&q, &["1", "2", "3", "4", "5", "6", "7", "8", "9", "a", "b"]);
    let first = deliveries(&ob);
    assert_eq!(first.len(), 5);
    assert!(first.iter().all(|d| d.window_credit));
    q.stop(1).unwrap();
    q.window_completed(1, 5, 10).unwrap();
    assert!(ob.is_empty(), "completions after a stop grant nothing");
    q.add_credit(1, 5, 0).unwrap();
    assert!(ob.is_empty(), "the byte window was stopped too");
    q.add_credit(1, 0, u32::MAX).unwrap();
    assert_eq!(bodies(&deliveries(&ob)), [b"6", b"7", b"8", b"9", b"a"]);

    // Stopped with 5 outstanding, granted 5 again: nothing until those complete, then 5.
    q.stop(1).unwrap();
    q.add_credit(1, 5, u32::MAX).unwrap();
    assert!(ob.is_empty());
    q.window_completed(1, 5, 10).unwrap();
    assert_eq!(bodies(&deliveries(&ob)), [b"b"]);
    publish(&q, &["c", "d", "e", "f", "g"]);
    assert_eq!(deliveries(&ob).len(), 4, "a window of 5, not 10");
}

#[test]
fn credit_mode_ignores_completions_and_switching_starts_from_nothing() {
    let q = queue();
    let ob = Outbox::new();
    q.subscribe(spec(1, &ob, true)).unwrap();
    q.add_credit(1, 1, u32::MAX).unwrap();
    publish(&q, &["a", "b", "c"]);
    let d = deliveries(&ob);
    assert!(!d[0].window_credit);
    q.window_completed(1, 1, 1).unwrap();
    assert!(ob.is_empty(), "credit is used up, not a window");
    q.set_flow_mode(1, true).unwrap();
    assert!(ob.is_empty(), "window mode starts with no window");
    q.add_credit(1, 1, u32::MAX).unwrap();
    assert_eq!(bodies(&deliveries(&ob)), [b"b"]);
    q.set_flow_mode(1, false).unwrap();
    q.window_completed(1, 1, 1).unwrap();
    assert!(ob.is_empty());
}

#[test]
fn browser_sees_everything_without_removing_and_keeps_its_cursor() {
    let q = queue();
    let ob = Outbox::new();
    q.subscribe(spec(1, &ob, false)).unwrap();
    publish(&q, &["a", "b", "c"]);
    q.add_credit(1, 2, u32::MAX).unwrap();
    let ds = deliveries(&ob);
    assert_eq!(bodies(&ds), [b"a", b"b"]);
    assert!(ds.iter().all(|d| !d.acquired));
    q.add_credit(1, u32::MAX, u32::MAX).unwrap();
    publish(&q, &["d"]);
    assert_eq!(bodies(&deliveries(&ob)), [b"c", b"d"]);
    assert_eq!(q.message_count(), 4);
}

#[test]
fn browsers_and_acquirers_share_a_queue() {
    let q = queue();
    let (ob, oa) = (Outbox::new(), Outbox::new());
    q.subscribe(spec(1, &ob, false)).unwrap();
    q.subscribe(spec(2, &oa, true)).unwrap();
    q.add_credit(1, u32::MAX, u32::MAX).unwrap();
    q.add_credit(2, u32::MAX, u32::MAX).unwrap();
    publish(&q, &["a", "b"]);
    assert_eq!(bodies(&deliveries(&ob)), [b"a", b"b"]);
    assert_eq!(bodies(&deliveries(&oa)), [b"a", b"b"]);
    assert_eq!(q.message_count(), 0);
}

#[test]
fn release_restores_original_order_and_sets_redelivered() {
    let q = queue();
    let ob = Outbox::new();
    q.subscribe(spec(1, &ob, true)).unwrap();
    publish(&q, &["1", "2", "3", "4"]);
    q.add_credit(1, 3, u32::MAX).unwrap();
    let ds = deliveries(&ob);
    assert_eq!(ds.len(), 3);
    // Release out of order; "4" is still queued and must stay behind them.
    let back = [&ds[2], &ds[0]].map(|d| (d.position, d.message.clone()));
    assert_eq!(q.release(back, true), 2);
    assert_eq!(q.queued_bodies(), bs(&["1", "3", "4"]));
    // Releasing again (or something never acquired) does nothing.
    assert_eq!(
        q.release([(ds[0].position, ds[0].message.clone())], true),
        0
    );
    q.add_credit(1, 3, u32::MAX).unwrap();
    let again = deliveries(&ob);
    assert_eq!(bodies(&again), [b"1", b"3", b"4"]);
    assert_eq!(
        again.iter().map(|d| d.redelivered).collect::<Vec<_>>(),
        [true, true, false]
    );
    assert_eq!(again[0].position, ds[0].position);
}

#[test]
fn release_without_redelivered_keeps_earlier_flag() {
    let q = queue();
    let ob = Outbox::new();
    q.subscribe(spec(1, &ob, true)).unwrap();
    publish(&q, &["1"]);
    q.add_credit(1, 1, u32::MAX).unwrap();
    let d = deliveries(&ob).remove(0);
    q.release([(d.position, d.message.clone())], false);
    q.add_credit(1, 1, u32::MAX).unwrap();
    let d = deliveries(&ob).remove(0);
    assert!(!d.redelivered);
    assert_eq!((d.returns, d.prior_deliveries()), (0, 0));
    q.release([(d.position, d.message.clone())], true);
    q.add_credit(1, 1, u32::MAX).unwrap();
    let d = deliveries(&ob).remove(0);
    assert_eq!((d.returns, d.prior_deliveries()), (1, 1));
    q.release([(d.position, d.message.clone())], true);
    q.add_credit(1, 1, u32::MAX).unwrap();
    let d = deliveries(&ob).remove(0);
    assert_eq!(
        (d.returns, d.prior_deliveries()),
        (2, 2),
        "each return counted"
    );
    q.release([(d.position, d.message.clone())], false);
    q.add_credit(1, 1, u32::MAX).unwrap();
    let d = deliveries(&ob).remove(0);
    assert!(d.redelivered, "once redelivered, always");
    assert_eq!(
        d.returns, 2,
        "a release without set-redelivered counts nothing"
    );
}

#[test]
fn accept_settles_once() {
    let q = queue();
    let ob = Outbox::new();
    q.subscribe(spec(1, &ob, true)).unwrap();
    publish(&q, &["1", "2"]);
    q.add_credit(1, 2, u32::MAX).unwrap();
    let ds = deliveries(&ob);
    assert!(q.accept(ds[0].position));
    assert!(!q.accept(ds[0].position));
    assert_eq!(
        q.accept_all(&[ds[0].position, ds[1].position, 999], &mut []),
        1
    );
    assert_eq!(q.unsettled_count(), 0);
    // Settled messages cannot be released back.
    assert_eq!(
        q.release([(ds[1].position, ds[1].message.clone())], true),
        0
    );
    assert_eq!(q.message_count(), 0);
}

#[test]
fn acquire_after_browse_only_while_still_queued() {
    let q = queue();
    let (ob, oa) = (Outbox::new(), Outbox::new());
    q.subscribe(spec(1, &ob, false)).unwrap();
    publish(&q, &["a", "b"]);
    q.add_credit(1, u32::MAX, u32::MAX).unwrap();
    let seen = deliveries(&ob);
    let got = q.acquire([seen[0].position, 12345]);
    assert_eq!(got, [seen[0].position]);
    assert_eq!(q.message_count(), 1);
    assert!(q.acquire([seen[0].position]).is_empty(), "already acquired");
    // An acquiring consumer takes "b"; acquiring it afterwards fails.
    q.subscribe(spec(2, &oa, true)).unwrap();
    q.add_credit(2, 1, u32::MAX).unwrap();
    assert_eq!(bodies(&deliveries(&oa)), [b"b"]);
    assert!(q.acquire([seen[1].position]).is_empty());
    assert!(q.accept(seen[0].position));
}

fn expiring(body: &'static str, at: u64) -> Message {
    let mut m = MessageParts::new("", "q", Bytes::from_static(body.as_bytes()));
    m.expires_at = Some(at);
    Message::from(m)
}

#[test]
fn expired_messages_are_never_delivered_and_are_purged() {
    let q = queue();
    let past = crate::now_ms().saturating_sub(1000);
    let future = crate::now_ms() + 3_600_000;
    q.enqueue(expiring("old", past)).unwrap();
    q.enqueue(expiring("fresh", future)).unwrap();
    q.enqueue(expiring("old2", past)).unwrap();
    q.enqueue(msg("forever")).unwrap();
    assert_eq!(q.purge_expired(crate::now_ms()), 2);
    assert_eq!(q.queued_bodies(), bs(&["fresh", "forever"]));
    assert_eq!(q.byte_count(), 12);

    q.enqueue(expiring("old3", past)).unwrap();
    let ob = Outbox::new();
    q.subscribe(spec(1, &ob, true)).unwrap();
    q.add_credit(1, u32::MAX, u32::MAX).unwrap();
    assert_eq!(bodies(&deliveries(&ob)), [&b"fresh"[..], b"forever"]);
    assert_eq!(
        q.message_count(),
        0,
        "old3 reached the head and was dropped"
    );
    assert_eq!(q.purge_expired(crate::now_ms()), 0);
}

#[test]
fn expired_messages_are_skipped_by_browsers() {
    let q = queue();
    let past = crate::now_ms().saturating_sub(1000);
    q.enqueue(expiring("old", past)).unwrap();
    q.enqueue(msg("new")).unwrap();
    let ob = Outbox::new();
    q.subscribe(spec(1, &ob, false)).unwrap();
    q.add_credit(1, u32::MAX, u32::MAX).unwrap();
    assert_eq!(bodies(&deliveries(&ob)), [b"new"]);
}

#[test]
fn limits_reject_and_count_unsettled_messages() {
    let limits = QueueLimits {
        max_count: Some(2),
        max_size: None,
        ..QueueLimits::default()
    };
    let q = queue_with(limits, None);
    publish(&q, &["1", "2"]);
    assert!(matches!(
        q.enqueue(msg("3")),
        Err(BrokerError::ResourceLimitExceeded(_))
    ));
    assert_eq!(q.message_count(), 2);
    let ob = Outbox::new();
    q.subscribe(spec(1, &ob, true)).unwrap();
    q.add_credit(1, 1, u32::MAX).unwrap();
    let d = deliveries(&ob).remove(0);
    assert!(q.enqueue(msg("3")).is_err(), "acquired still counts");
    q.accept(d.position);
    assert!(q.enqueue(msg("3")).unwrap().is_some());
}

/// A queue with `limits` whose consumer has acquired "1" and "2" and not settled them.
fn two_unsettled(limits: QueueLimits) -> Arc<Queue> {
    let q = queue_with(limits, None);
    publish(&q, &["1", "2"]);
    let ob = Outbox::new();
    q.subscribe(spec(1, &ob, true)).unwrap();
    q.add_credit(1, 2, u32::MAX).unwrap();
    assert_eq!(deliveries(&ob).len(), 2);
    q
}

#[test]
fn ready_scoped_limits_do_not_count_unsettled_messages() {
    // RabbitMQ's x-max-length: two unacknowledged messages leave room for two ready ones.
    let q = two_unsettled(QueueLimits {
        max_count: Some(2),
        max_size: Some(4),
        scope: LimitScope::Ready,
        ..QueueLimits::default()
    });
    publish(&q, &["3", "4"]);
    assert!(q.enqueue(msg("5")).is_err(), "two ready messages fill it");
    assert_eq!(q.queued_bodies(), bs(&["3", "4"]));
}

#[test]
fn ready_scoped_drop_head_keeps_the_newest_ready_messages_beside_unsettled_ones() {
    let limits = QueueLimits {
        max_count: Some(2),
        max_size: None,
        policy: LimitPolicy::DropHead,
        scope: LimitScope::Ready,
    };
    let q = two_unsettled(limits);
    publish(&q, &["3", "4", "5"]);
    assert_eq!(q.queued_bodies(), bs(&["4", "5"]));
    // Counting the unsettled too (qpidd's scope), only the newest would be left.
    let depth = two_unsettled(QueueLimits {
        scope: LimitScope::Depth,
        ..limits
    });
    publish(&depth, &["3", "4", "5"]);
    assert_eq!(depth.queued_bodies(), bs(&["5"]));
}

#[test]
fn byte_limit_rejects() {
    let limits = QueueLimits {
        max_count: None,
        max_size: Some(5),
        ..QueueLimits::default()
    };
    let q = queue_with(limits, None);
    publish(&q, &["abc"]);
    assert!(q.enqueue(msg("abc")).is_err());
    publish(&q, &["ab"]);
    assert_eq!(q.byte_count(), 5);
}

#[test]
fn exclusive_subscription_rules() {
    let q = queue();
    let ob = Outbox::new();
    q.subscribe(spec(1, &ob, true)).unwrap();
    let mut ex = spec(2, &ob, true);
    ex.exclusive = true;
    assert!(matches!(
        q.subscribe(ex.clone()),
        Err(BrokerError::ResourceLocked(_))
    ));
    assert!(matches!(
        q.subscribe(spec(1, &ob, true)),
        Err(BrokerError::InvalidArgument(_))
    ));
    let (removed, _) = q.remove_consumer(1);
    assert!(removed);
    q.subscribe(ex).unwrap();
    assert!(matches!(
        q.subscribe(spec(3, &ob, true)),
        Err(BrokerError::ResourceLocked(_))
    ));
    // Browsers take nothing: they may watch beside an exclusive consumer (qpidd).
    q.subscribe(spec(4, &ob, false)).unwrap();
    q.remove_consumer(2);
    let mut ex = spec(5, &ob, true);
    ex.exclusive = true;
    q.subscribe(ex).unwrap();
}

#[test]
fn another_session_may_browse_an_exclusive_queue_but_not_consume() {
    // qpidd's message.subscribe: only an acquiring subscription is refused (405).
    let q = queue_with(QueueLimits::default(), Some(7));
    let ob = Outbox::new();
    publish(&q, &["a"]);
    q.subscribe(spec(1, &ob, false)).unwrap();
    q.add_credit(1, 1, u32::MAX).unwrap();
    assert_eq!(bodies(&deliveries(&ob)), [b"a"]);
    assert!(matches!(
        q.subscribe(spec(2, &ob, true)),
        Err(BrokerError::ResourceLocked(_))
    ));
}

#[test]
fn exclusive_queue_refuses_other_owners() {
    let q = queue_with(QueueLimits::default(), Some(7));
    let ob = Outbox::new();
    assert!(matches!(
        q.subscribe(spec(1, &ob, true)),
        Err(BrokerError::ResourceLocked(_))
    ));
    let mut mine = spec(1, &ob, true);
    mine.owner = 7;
    q.subscribe(mine).unwrap();
    assert!(q.check_access(7).is_ok());
    assert!(q.check_access(8).is_err());
}

#[test]
fn purge_drops_available_but_not_acquired() {
    let q = queue();
    let ob = Outbox::new();
    q.subscribe(spec(1, &ob, true)).unwrap();
    publish(&q, &["1", "2", "3"]);
    q.add_credit(1, 1, u32::MAX).unwrap();
    let d = deliveries(&ob).remove(0);
    assert_eq!(q.purge(), 2);
    assert_eq!(q.byte_count(), 0);
    assert_eq!(q.release([(d.position, d.message)], true), 1);
    assert_eq!(q.message_count(), 1);
}

#[test]
fn release_deliveries_groups_per_queue() {
    let (q1, q2) = (queue(), queue());
    let ob = Outbox::new();
    q1.subscribe(spec(1, &ob, true)).unwrap();
    q2.subscribe(spec(2, &ob, true)).unwrap();
    publish(&q1, &["a", "b"]);
    publish(&q2, &["c"]);
    q1.add_credit(1, u32::MAX, u32::MAX).unwrap();
    q2.add_credit(2, u32::MAX, u32::MAX).unwrap();
    let ds = deliveries(&ob);
    assert_eq!(ds.len(), 3);
    q1.stop(1).unwrap();
    q2.stop(2).unwrap();
    release_deliveries(ds, true);
    assert_eq!(q1.queued_bodies(), bs(&["a", "b"]));
    assert_eq!(q2.queued_bodies(), bs(&["c"]));
}

#[test]
fn one_wakeup_per_burst() {
    let q = queue();
    let ob = Outbox::new();
    q.subscribe(spec(1, &ob, true)).unwrap();
    publish(&q, &["1", "2", "3"]);
    q.add_credit(1, u32::MAX, u32::MAX).unwrap();
    assert_eq!(ob.len(), 3);
}

#[test]
fn a_full_outbox_stops_dispatch_until_taken_even_with_unlimited_credit() {
    use crate::queue::outbox::OUTBOX_MAX_ITEMS;
    let q = queue();
    let ob = Outbox::new();
    q.subscribe(spec(1, &ob, true)).unwrap();
    q.add_credit(1, u32::MAX, u32::MAX).unwrap();
    let total = OUTBOX_MAX_ITEMS * 2 + 10;
    for _ in 0..total {
        q.enqueue(msg("x")).unwrap();
    }
    // The writer has not taken anything: the outbox holds at most its bound.
    assert_eq!(ob.len(), OUTBOX_MAX_ITEMS);
    assert_eq!(q.message_count() as usize, total - OUTBOX_MAX_ITEMS);
    // Each take drains and lets the waiting queue refill it.
    let mut seen = 0;
    for _ in 0..4 {
        seen += deliveries(&ob).len();
    }
    assert_eq!(seen, total);
    assert_eq!(q.message_count(), 0);
}

#[test]
fn a_full_outbox_does_not_strand_messages_when_the_writer_takes_concurrently() {
    let q = queue();
    let ob = Outbox::new();
    q.subscribe(spec(1, &ob, true)).unwrap();
    q.add_credit(1, u32::MAX, u32::MAX).unwrap();
    let total = 50_000;
    let producer = {
        let q = q.clone();
        std::thread::spawn(move || {
            for _ in 0..total {
                q.enqueue(msg("y")).unwrap();
            }
        })
    };
    let mut seen = 0;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while seen < total && std::time::Instant::now() < deadline {
        seen += deliveries(&ob).len();
        if ob.is_empty() {
            std::thread::yield_now();
        }
    }
    producer.join().unwrap();
    seen += deliveries(&ob).len();
    assert_eq!(seen, total);
}

#[test]
fn get_acquires_the_front_and_skips_expired() {
    let q = queue();
    let mut old = MessageParts::new("", "q", Bytes::from_static(b"old"));
    old.expires_at = Some(1);
    q.enqueue(Message::from(old)).unwrap();
    publish(&q, &["a", "b"]);
    let got = q.get().unwrap();
    assert_eq!(got.message.body(), b"a");
    assert_eq!(got.remaining, 1);
    assert!(!got.redelivered);
    assert_eq!(q.unsettled_count(), 1);
    assert_eq!(q.release([(got.position, got.message)], true), 1);
    let again = q.get().unwrap();
    assert_eq!(again.message.body(), b"a");
    assert!(again.redelivered);
    assert!(q.accept(again.position));
    assert_eq!(q.get().unwrap().message.body(), b"b");
    assert!(q.get().is_none());
}

#[test]
fn a_settlement_window_caps_unlimited_credit_across_queues() {
    let window = crate::SettleWindow::with_limit(3).unwrap();
    let (q1, q2) = (queue(), queue());
    let ob = Outbox::new();
    let windowed = |id| ConsumerSpec {
        window: Some(window.clone()),
        ..spec(id, &ob, true)
    };
    q1.subscribe(windowed(1)).unwrap();
    q2.subscribe(windowed(2)).unwrap();
    q1.add_credit(1, u32::MAX, u32::MAX).unwrap();
    q2.add_credit(2, u32::MAX, u32::MAX).unwrap();
    publish(&q1, &["a", "b"]);
    publish(&q2, &["c", "d", "e"]);
    let ds = deliveries(&ob);
    assert_eq!(
        bodies(&ds),
        [b"a", b"b", b"c"],
        "three slots shared by two queues"
    );
    assert_eq!(window.available(), 0);
    // Settling one frees one slot and the waiting queue is dispatched again.
    assert!(q1.accept(ds[0].position));
    window.give_back(1);
    assert_eq!(bodies(&deliveries(&ob)), [b"d"]);
    window.give_back(2);
    assert_eq!(bodies(&deliveries(&ob)), [b"e"]);
    assert_eq!(window.available(), 1);
    assert!(
        crate::SettleWindow::with_limit(0).is_none(),
        "0 means no window"
    );
}

#[test]
fn a_browser_stops_at_the_window_too() {
    let window = crate::SettleWindow::with_limit(1).unwrap();
    let q = queue();
    let ob = Outbox::new();
    q.subscribe(ConsumerSpec {
        window: Some(window.clone()),
        ..spec(1, &ob, false)
    })
    .unwrap();
    q.add_credit(1, u32::MAX, u32::MAX).unwrap();
    publish(&q, &["a", "b"]);
    assert_eq!(bodies(&deliveries(&ob)), [b"a"]);
    window.give_back(1);
    assert_eq!(bodies(&deliveries(&ob)), [b"b"]);
}

#[test]
fn slots_given_back_concurrently_with_dispatch_are_never_lost() {
    // Publishers on two threads race the consumer's give-backs; with a window of one slot any
    // missed wake-up would strand messages.
    let window = crate::SettleWindow::with_limit(1).unwrap();
    let queues = [queue(), queue()];
    let ob = Outbox::new();
    for (i, q) in queues.iter().enumerate() {
        let id = i as ConsumerId + 1;
        q.subscribe(ConsumerSpec {
            window: Some(window.clone()),
            ..spec(id, &ob, true)
        })
        .unwrap();
        q.add_credit(id, u32::MAX, u32::MAX).unwrap();
    }
    const PER_QUEUE: usize = 2000;
    let publishers: Vec<_> = queues
        .iter()
        .map(|q| {
            let q = q.clone();
            std::thread::spawn(move || {
                for _ in 0..PER_QUEUE {
                    q.enqueue(msg("m")).unwrap();
                }
            })
        })
        .collect();
    let mut received = 0;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while received < 2 * PER_QUEUE && std::time::Instant::now() < deadline {
        let ds = deliveries(&ob);
        for d in &ds {
            d.queue.accept(d.position);
        }
        received += ds.len();
        window.give_back(ds.len() as u32);
        if ds.is_empty() {
            std::thread::yield_now();
        }
    }
    for p in publishers {
        p.join().unwrap();
    }
    assert_eq!(received, 2 * PER_QUEUE);
}

fn priority_queue(max: i64, limits: QueueLimits) -> Arc<Queue> {
    let opts = QueueOptions {
        arguments: [("x-max-priority", crate::value::HeaderValue::Int(max))]
            .into_iter()
            .collect(),
        ..QueueOptions::default()
    };
    Queue::new("pq".into(), &opts, None, limits)
}

fn prio(body: &'static str, priority: u8) -> Message {
    let mut m = MessageParts::new("", "pq", Bytes::from_static(body.as_bytes()));
    m.priority = priority;
    Message::from(m)
}

#[test]
fn priority_queue_delivers_highest_first_fifo_within_and_requeues_in_place() {
    let q = priority_queue(5, QueueLimits::default());
    for (body, p) in [
        ("l1", 0),
        ("h1", 5),
        ("m1", 2),
        ("h2", 9),
        ("l2", 0),
        ("m2", 2),
    ] {
        q.enqueue(prio(body, p)).unwrap();
    }
    assert_eq!(q.queued_bodies(), bs(&["h1", "h2", "m1", "m2", "l1", "l2"]));
    let ob = Outbox::new();
    q.subscribe(spec(1, &ob, true)).unwrap();
    q.add_credit(1, 3, u32::MAX).unwrap();
    let ds = deliveries(&ob);
    assert_eq!(bodies(&ds), [b"h1", b"h2", b"m1"]);
    // A later high-priority message overtakes what is queued; released ones return ahead
    // of newer messages of their own priority.
    q.enqueue(prio("h3", 7)).unwrap();
    q.release(ds.iter().map(|d| (d.position, d.message.clone())), true);
    assert_eq!(
        q.queued_bodies(),
        bs(&["h1", "h2", "h3", "m1", "m2", "l1", "l2"])
    );
    q.add_credit(1, 7, u32::MAX).unwrap();
    let ds = deliveries(&ob);
    assert_eq!(ds.iter().filter(|d| d.redelivered).count(), 3);
    assert_eq!(
        bodies(&ds),
        [&b"h1"[..], b"h2", b"h3", b"m1", b"m2", b"l1", b"l2"]
    );
}

#[test]
fn priority_queue_limits_ttl_browse_and_get() {
    let q = priority_queue(
        9,
        QueueLimits {
            max_count: Some(3),
            max_size: None,
            policy: LimitPolicy::Reject,
            ..Default::default()
        },
    );
    q.enqueue(prio("low", 1)).unwrap();
    let mut old = MessageParts::new("", "pq", Bytes::from_static(b"expired-high"));
    old.priority = 9;
    old.expires_at = Some(1);
    q.enqueue(Message::from(old)).unwrap();
    q.enqueue(prio("mid", 5)).unwrap();
    assert!(
        q.enqueue(prio("too-many", 9)).is_err(),
        "limits count all levels"
    );
    let ob = Outbox::new();
    q.subscribe(spec(1, &ob, false)).unwrap();
    q.add_credit(1, u32::MAX, u32::MAX).unwrap();
    // Browsers see arrival order and skip the expired message.
    assert_eq!(bodies(&deliveries(&ob)), [&b"low"[..], b"mid"]);
    let got = q.get().unwrap();
    assert_eq!(got.message.body(), b"mid");
    assert_eq!(got.remaining, 1);
    assert_eq!(q.message_count(), 1);
}

#[test]
fn drop_head_on_a_priority_queue_drops_the_next_to_deliver() {
    let q = priority_queue(
        9,
        QueueLimits {
            max_count: Some(2),
            max_size: None,
            policy: LimitPolicy::DropHead,
            ..Default::default()
        },
    );
    for (body, p) in [("low", 1), ("high", 8), ("new", 1)] {
        q.enqueue(prio(body, p)).unwrap();
    }
    assert_eq!(q.queued_bodies(), bs(&["low", "new"]));
}

#[test]
fn finite_credit_is_its_own_bound_and_takes_no_window_slots() {
    let window = crate::SettleWindow::with_limit(1).unwrap();
    let q = queue();
    let ob = Outbox::new();
    q.subscribe(ConsumerSpec {
        window: Some(window.clone()),
        ..spec(1, &ob, true)
    })
    .unwrap();
    publish(&q, &["a", "b", "c", "d"]);
    q.add_credit(1, 3, u32::MAX).unwrap();
    let ds = deliveries(&ob);
    assert_eq!(bodies(&ds), [b"a", b"b", b"c"]);
    assert!(ds.iter().all(|d| !d.windowed));
    assert_eq!(window.available(), 1);
    // Unlimited credit: the window applies again.
    q.add_credit(1, u32::MAX, 0).unwrap();
    let ds = deliveries(&ob);
    assert_eq!(bodies(&ds), [b"d"]);
    assert!(ds[0].windowed);
    assert_eq!(window.available(), 0);
}

fn sequencing_queue(key: &str, limits: QueueLimits) -> Arc<Queue> {
    let opts = QueueOptions {
        arguments: [(
            "qpid.queue_msg_sequence",
            crate::value::HeaderValue::Str(key.into()),
        )]
        .into_iter()
        .collect(),
        ..QueueOptions::default()
    };
    Queue::new("seq".into(), &opts, None, limits)
}

fn numbers(ds: &[Delivery]) -> Vec<(String, u32)> {
    ds.iter()
        .map(|d| {
            let s = d.message.sequence().expect("numbered");
            (s.key.to_string(), s.number)
        })
        .collect()
}

#[test]
fn a_sequencing_queue_numbers_every_arrival_and_drops_leave_gaps() {
    // qpid-python's new_api.SequenceNumberTests.test_sequence_number_gap: a ring of 4.
    let ring = QueueLimits {
        max_count: Some(4),
        policy: LimitPolicy::Ring,
        ..QueueLimits::default()
    };
    let q = sequencing_queue("qpid.seq", ring);
    let ob = Outbox::new();
    q.subscribe(spec(1, &ob, true)).unwrap();
    publish(&q, &["1"]);
    q.add_credit(1, 1, u32::MAX).unwrap();
    let first = deliveries(&ob);
    assert_eq!(numbers(&first), [("qpid.seq".to_owned(), 1)]);
    // "1" stays acquired and unsettled: qpidd's ring drops it first, then "2".
    publish(&q, &["2", "3", "4", "5", "6"]);
    q.add_credit(1, 1, u32::MAX).unwrap();
    let next = deliveries(&ob);
    assert_eq!(bodies(&next), [b"3"]);
    assert_eq!(numbers(&next)[0].1, 3, "2 was dropped by the ring: a gap");
    assert!(!q.accept(first[0].position), "dropped while acquired");
    // A message on a plain queue carries no number.
    let plain = queue();
    plain.enqueue(msg("x")).unwrap();
    plain.subscribe(spec(2, &ob, true)).unwrap();
    plain.add_credit(2, 1, u32::MAX).unwrap();
    assert!(deliveries(&ob)[0].message.sequence().is_none());
}

#[test]
fn recovered_messages_are_numbered_afresh() {
    let q = sequencing_queue("k", QueueLimits::default());
    let old = msg("old").derive(|p| {
        p.sequence = Some(Arc::new(crate::message::Sequenced {
            key: "k".into(),
            number: 41,
        }))
    });
    q.restore([Restored::InMemory(old), Restored::InMemory(msg("older"))]);
    publish(&q, &["new"]);
    let ob = Outbox::new();
    q.subscribe(spec(1, &ob, true)).unwrap();
    q.add_credit(1, 3, u32::MAX).unwrap();
    let ds = deliveries(&ob);
    let got: Vec<u32> = numbers(&ds).into_iter().map(|n| n.1).collect();
    assert_eq!(got, [1, 2, 3]);
    // Recovered: redelivered with no return counted, so one earlier delivery at least.
    let prior: Vec<u32> = ds.iter().map(Delivery::prior_deliveries).collect();
    assert_eq!(prior, [1, 1, 0]);
}

fn ring_queue(max_count: u64, priorities: Option<u64>) -> Arc<Queue> {
    let mut arguments = crate::value::Arguments::new();
    if let Some(n) = priorities {
        arguments.push("x-qpid-priorities", crate::value::HeaderValue::UInt(n));
    }
    let opts = QueueOptions {
        arguments,
        ..QueueOptions::default()
    };
    let ring = QueueLimits {
        max_count: Some(max_count),
        policy: LimitPolicy::Ring,
        ..QueueLimits::default()
    };
    Queue::new("ring".into(), &opts, None, ring)
}

#[test]
fn a_qpidd_ring_drops_the_oldest_of_the_lowest_priority_first() {
    // qpid-python's priority.test_ring_queue_3 (QPID-3866).
    let q = ring_queue(5, Some(10));
    let priorities = [8u8, 9, 5, 1, 2, 2, 3, 4, 9, 7, 8, 9, 9, 2];
    for (i, p) in priorities.iter().enumerate() {
        let mut m = MessageParts::new("", "q", Bytes::from(i.to_string()));
        m.priority = *p;
        q.enqueue(Message::from(m)).unwrap();
    }
    // Priority order, FIFO within: 9 (sent 1, 8, 11, 12), then 8 (sent 10).
    assert_eq!(q.queued_bodies(), bs(&["1", "8", "11", "12", "10"]));
}

#[test]
fn a_qpidd_ring_without_priorities_drops_the_oldest_even_if_acquired() {
    let q = ring_queue(2, None);
    let ob = Outbox::new();
    q.subscribe(spec(1, &ob, true)).unwrap();
    publish(&q, &["a", "b"]);
    q.add_credit(1, 1, u32::MAX).unwrap();
    let a = deliveries(&ob).remove(0);
    publish(&q, &["c"]);
    assert_eq!(q.queued_bodies(), bs(&["b", "c"]));
    assert_eq!(q.unsettled_count(), 0);
    assert_eq!(q.release([(a.position, a.message.clone())], true), 0);
    assert_eq!(q.queued_bodies(), bs(&["b", "c"]));
}

/// Whether `outbox` has a wake-up waiting for its connection: `notified()` resolves at once.
fn woken(outbox: &Outbox) -> bool {
    struct Ignore;
    impl std::task::Wake for Ignore {
        fn wake(self: Arc<Self>) {}
    }
    let waker = std::task::Waker::from(Arc::new(Ignore));
    let notified = std::pin::pin!(outbox.notified());
    std::future::Future::poll(notified, &mut std::task::Context::from_waker(&waker)).is_ready()
}

/// A queue with one consumer (no credit yet) and ten 10-byte messages ready: 100 bytes of
/// backlog. Returns it and the consumer's outbox.
fn backlogged() -> (Arc<Queue>, Arc<Outbox>) {
    let q = queue();
    let consumer = Outbox::new();
    q.subscribe(spec(1, &consumer, true)).unwrap();
    for _ in 0..10 {
        publish(&q, &["0123456789"]);
    }
    assert_eq!(q.backlog().ready_bytes, 100);
    (q, consumer)
}

#[test]
fn a_held_publisher_is_let_go_as_soon_as_the_backlog_is_within_the_hold() {
    let (q, consumer) = backlogged();
    let publisher = Outbox::new();
    let w = BacklogWaiter::new(&publisher);
    assert!(q.hold_publisher(&w, 40));
    assert_eq!(q.held_publishers(), 1);
    // Five taken: 50 bytes left, still over the hold.
    q.add_credit(1, 5, u32::MAX).unwrap();
    assert_eq!(deliveries(&consumer).len(), 5);
    assert!(!w.take_released() && !woken(&publisher));
    // One more: 40, the hold. The consumer's own grant lets the publisher go, and wakes it.
    q.add_credit(1, 1, u32::MAX).unwrap();
    assert!(w.take_released(), "released by the queue");
    assert!(woken(&publisher), "its connection woken");
    assert!(!w.take_released(), "taken once");
    assert_eq!(q.held_publishers(), 0);
}

#[test]
fn nobody_is_held_within_the_hold_or_by_a_queue_without_consumers() {
    let (q, _consumer) = backlogged();
    let w = BacklogWaiter::new(&Outbox::new());
    assert!(!q.hold_publisher(&w, 100), "100 bytes is not over 100");
    let unconsumed = queue();
    for _ in 0..10 {
        publish(&unconsumed, &["0123456789"]);
    }
    assert!(!unconsumed.hold_publisher(&w, 0), "no consumers");
    assert_eq!(q.held_publishers() + unconsumed.held_publishers(), 0);
    assert!(!w.take_released());
}

#[test]
fn losing_its_consumers_or_being_deleted_lets_held_publishers_go() {
    let (q, _consumer) = backlogged();
    let w = BacklogWaiter::new(&Outbox::new());
    assert!(q.hold_publisher(&w, 0));
    q.remove_consumer(1);
    assert!(w.take_released(), "no consumers left");

    let (q, _consumer) = backlogged();
    assert!(q.hold_publisher(&w, 0));
    q.drain_for_explicit_delete(false, false, 1).unwrap();
    assert!(w.take_released(), "deleted");
}

#[test]
fn a_publisher_that_let_go_itself_is_not_woken() {
    let (q, _consumer) = backlogged();
    let publisher = Outbox::new();
    let w = BacklogWaiter::new(&publisher);
    assert!(q.hold_publisher(&w, 50));
    assert!(
        q.hold_publisher(&w, 90),
        "registering again updates the hold"
    );
    assert_eq!(q.held_publishers(), 1);
    q.unhold_publisher(&w);
    q.add_credit(1, 10, u32::MAX).unwrap();
    assert!(!w.take_released() && !woken(&publisher));
}

/// A queue with one consumer (id 1, credit for `credit` messages) and the deliveries of
/// `bodies` published to it.
fn delivered(credit: u32, bodies: &[&'static str]) -> (Arc<Queue>, Arc<Outbox>, Vec<Delivery>) {
    let q = queue();
    let ob = Outbox::new();
    q.subscribe(spec(1, &ob, true)).unwrap();
    q.add_credit(1, credit, u32::MAX).unwrap();
    publish(&q, bodies);
    let ds = deliveries(&ob);
    assert_eq!(ds.len(), bodies.len());
    (q, ob, ds)
}

/// Accepts one delivery with its handle to the message, as a connection's run of accepts
/// does; whether the position was settled here.
fn accept_one(q: &Queue, position: u64, message: Message) -> bool {
    q.accept_all(&[position], &mut [Corpse::new(message)]) == 1
}

/// [`delivered`] for one message, accepted with its delivery's handle: the queue, the
/// outbox and another handle to the message, to watch who lets go of it.
fn one_accepted() -> (Arc<Queue>, Arc<Outbox>, Message) {
    let (q, ob, mut ds) = delivered(10, &["a"]);
    let d = ds.remove(0);
    let watch = d.message.clone();
    assert!(accept_one(&q, d.position, d.message));
    (q, ob, watch)
}

#[test]
fn an_accepted_message_is_let_go_by_the_next_publish() {
    let (q, _ob, watch) = one_accepted();
    assert_eq!(watch.handles(), 2, "kept for the next publish");
    assert_eq!(q.lock().graveyard.len(), 1);
    publish(&q, &["b"]);
    assert_eq!(watch.handles(), 1, "the publish dropped it");
    assert_eq!(q.lock().graveyard.len(), 0);
}

#[test]
fn accepts_in_a_run_leave_their_messages_for_the_next_publish() {
    let (q, _ob, ds) = delivered(10, &["a", "b", "c"]);
    let watch: Vec<Message> = ds.iter().map(|d| d.message.clone()).collect();
    let mut accepts = Accepts::default();
    for d in ds {
        accepts.push(&q, d.position, d.message);
    }
    accepts.finish();
    assert_eq!(q.unsettled_count(), 0);
    assert!(watch.iter().all(|m| m.handles() == 2));
    publish(&q, &["d"]);
    assert!(watch.iter().all(|m| m.handles() == 1));
}

#[test]
fn a_message_not_accepted_here_is_not_kept() {
    let (q, _ob, mut ds) = delivered(10, &["a"]);
    let d = ds.remove(0);
    assert!(q.accept(d.position));
    let watch = d.message.clone();
    assert!(!accept_one(&q, d.position, d.message), "already settled");
    assert_eq!(watch.handles(), 1);
    assert_eq!(q.lock().graveyard.len(), 0);
}

#[test]
fn a_queue_without_consumers_keeps_no_accepted_messages() {
    let (q, _ob, mut ds) = delivered(10, &["a", "b"]);
    let (first, second) = (ds.remove(0), ds.remove(0));
    let watch = [first.message.clone(), second.message.clone()];
    assert!(accept_one(&q, first.position, first.message));
    assert_eq!(watch[0].handles(), 2);
    q.remove_consumer(1);
    assert_eq!(watch[0].handles(), 1, "the last consumer's going let it go");
    // Accepted after the consumer went: nothing to publish soon, so not kept.
    assert!(accept_one(&q, second.position, second.message));
    assert_eq!(watch[1].handles(), 1);
}

#[test]
fn deleting_a_queue_lets_its_accepted_messages_go() {
    let (q, _ob, watch) = one_accepted();
    q.drain_for_explicit_delete(false, false, 1).unwrap();
    assert_eq!(watch.handles(), 1);
}

#[test]
fn a_consumer_going_while_others_stay_leaves_the_accepted_messages_kept() {
    let (q, ob, watch) = one_accepted();
    q.subscribe(spec(2, &ob, true)).unwrap();
    q.remove_consumer(1);
    assert_eq!(watch.handles(), 2, "consumer 2 is still there");
    q.remove_consumer(2);
    assert_eq!(watch.handles(), 1);
}

#[test]
fn an_accepts_run_keeps_only_what_it_settled() {
    let (q, _ob, mut ds) = delivered(10, &["a"]);
    let d = ds.remove(0);
    let watch = d.message.clone();
    let mut accepts = Accepts::default();
    accepts.push(&q, d.position, d.message.clone());
    accepts.push(&q, d.position, d.message);
    accepts.finish();
    assert_eq!(
        watch.handles(),
        2,
        "the duplicate's handle was dropped, the first kept"
    );
    assert_eq!(q.lock().graveyard.len(), 1);
}

#[test]
fn a_queue_whose_publishers_stopped_frees_its_accepted_messages_within_two_sweeps() {
    let (q, _ob, watch) = one_accepted();
    q.sweep_graveyard();
    assert_eq!(watch.handles(), 2, "one sweep only marks");
    q.sweep_graveyard();
    assert_eq!(watch.handles(), 1);
}

#[test]
fn a_message_group_goes_to_one_consumer_at_a_time() {
    use crate::value::{HeaderValue, Headers};
    let opts = QueueOptions {
        arguments: [
            ("qpid.group_header_key", HeaderValue::Str("G".into())),
            ("qpid.shared_msg_group", HeaderValue::UInt(1)),
        ]
        .into_iter()
        .collect(),
        ..QueueOptions::default()
    };
    let q = Queue::new("q".into(), &opts, None, QueueLimits::default());
    assert!(q.needs_headers(), "publishers decode the group header");
    // qpid-python's test_simple: A A A B B B C C C.
    for (i, group) in ["A", "A", "A", "B", "B", "B", "C", "C", "C"]
        .iter()
        .enumerate()
    {
        let mut headers = Headers::new();
        headers.push("G", HeaderValue::Str((*group).into()));
        let body = Bytes::from(format!("{group}{i}"));
        let m = MessageParts {
            headers: Some(Arc::new(headers)),
            ..MessageParts::new("", "q", body)
        }
        .build();
        q.enqueue(m).unwrap();
    }
    let (o1, o2) = (Outbox::new(), Outbox::new());
    q.subscribe(spec(1, &o1, true)).unwrap();
    q.subscribe(spec(2, &o2, true)).unwrap();
    let take = |consumer: ConsumerId| {
        let outbox = if consumer == 1 { &o1 } else { &o2 };
        q.add_credit(consumer, 1, u32::MAX).unwrap();
        let got = deliveries(outbox);
        assert_eq!(got.len(), 1, "consumer {consumer}");
        (got[0].position, got[0].message.clone())
    };
    let text = |m: &(u64, Message)| String::from_utf8_lossy(m.1.body()).into_owned();
    let a0 = take(1);
    assert_eq!(text(&a0), "A0");
    let b3 = take(2);
    assert_eq!(text(&b3), "B3", "A is held by consumer 1");
    assert!(q.accept(a0.0));
    assert_eq!(text(&take(2)), "A1", "A is free again");
    let c6 = take(1);
    assert_eq!(text(&c6), "C6", "A and B are held by consumer 2");
    assert!(q.accept(b3.0));
    assert_eq!(text(&take(1)), "B4");
    // Released, a message goes back in its place and its group is free again.
    assert_eq!(q.release([(c6.0, c6.1.clone())], false), 1);
    assert_eq!(text(&take(2)), "A2", "consumer 2 still holds A");
    assert_eq!(
        text(&take(2)),
        "C6",
        "B is consumer 1's; C was freed by the release"
    );
    // Consumer 1 holds B, consumer 2 holds A and C, and nothing else is left for either.
    q.add_credit(1, 1, u32::MAX).unwrap();
    assert_eq!(bodies(&deliveries(&o1)), [&b"B5"[..]]);
    q.add_credit(1, 1, u32::MAX).unwrap();
    assert!(deliveries(&o1).is_empty(), "C7 and C8 wait for consumer 2");
    q.add_credit(2, 2, u32::MAX).unwrap();
    assert_eq!(bodies(&deliveries(&o2)), [&b"C7"[..], b"C8"]);
}

pub(super) fn group_queue() -> Arc<Queue> {
    use crate::value::HeaderValue;
    let opts = QueueOptions {
        arguments: [("qpid.group_header_key", HeaderValue::Str("G".into()))]
            .into_iter()
            .collect(),
        ..QueueOptions::default()
    };
    Queue::new("q".into(), &opts, None, QueueLimits::default())
}

fn grouped(group: &str, body: &'static [u8], expires_at: Option<u64>) -> Message {
    use crate::value::{HeaderValue, Headers};
    let mut headers = Headers::new();
    headers.push("G", HeaderValue::Str(group.into()));
    MessageParts {
        headers: Some(Arc::new(headers)),
        expires_at,
        ..MessageParts::new("", "q", Bytes::from_static(body))
    }
    .build()
}

#[test]
fn a_group_gives_its_messages_in_order_even_when_a_later_one_would_fit() {
    let q = group_queue();
    q.enqueue(grouped("A", &[b'x'; 1000], None)).unwrap();
    q.enqueue(grouped("A", b"small", None)).unwrap();
    q.enqueue(grouped("B", b"b", None)).unwrap();
    let ob = Outbox::new();
    q.subscribe(spec(1, &ob, true)).unwrap();
    // Room for the small messages only: A's first waits, and A's second waits behind it.
    q.add_credit(1, 10, 500).unwrap();
    assert_eq!(bodies(&deliveries(&ob)), [&b"b"[..]]);
    q.add_credit(1, 0, 2000).unwrap();
    let got = deliveries(&ob);
    assert_eq!(got.len(), 2);
    assert_eq!(got[1].message.body(), b"small");
}

#[test]
fn a_groups_next_message_takes_over_when_its_first_expired_or_the_queue_was_purged() {
    let q = group_queue();
    q.enqueue(grouped("A", b"gone", Some(1))).unwrap();
    q.enqueue(grouped("A", b"a1", None)).unwrap();
    q.enqueue(grouped("B", b"b1", None)).unwrap();
    let ob = Outbox::new();
    q.subscribe(spec(1, &ob, true)).unwrap();
    q.add_credit(1, 1, u32::MAX).unwrap();
    assert_eq!(bodies(&deliveries(&ob)), [&b"a1"[..]]);
    assert_eq!(q.depth().counters.expired, 1);
    assert_eq!(q.purge(), 1, "b1");
    let listed = |q: &Queue| q.lock().groups.as_deref().unwrap().heads.listed();
    assert_eq!(listed(&q), 0, "a purge empties the heads' lists");
    q.enqueue(grouped("B", b"b2", None)).unwrap();
    q.enqueue(grouped("C", b"c1", None)).unwrap();
    q.add_credit(1, 2, u32::MAX).unwrap();
    assert_eq!(bodies(&deliveries(&ob)), [&b"b2"[..], b"c1"]);
}

#[test]
fn a_browsed_and_acquired_first_message_released_is_its_groups_first_again() {
    let q = group_queue();
    publish_grouped(&q, &[("A", b"a1"), ("A", b"a2"), ("B", b"b1")]);
    let positions = q.acquire([1]);
    assert_eq!(positions, [1]);
    let ob = Outbox::new();
    q.subscribe(spec(1, &ob, true)).unwrap();
    q.add_credit(1, 1, u32::MAX).unwrap();
    assert_eq!(
        bodies(&deliveries(&ob)),
        [&b"b1"[..]],
        "A is held by the acquirer"
    );
    q.release([(1, grouped("A", b"a1", None))], false);
    q.add_credit(1, 2, u32::MAX).unwrap();
    assert_eq!(bodies(&deliveries(&ob)), [&b"a1"[..], b"a2"]);
}

#[test]
fn management_sees_each_groups_messages_and_holder() {
    let q = group_queue();
    publish_grouped(&q, &[("A", b"a1"), ("A", b"a2"), ("B", b"b1")]);
    let ob = Outbox::new();
    q.subscribe(spec(1, &ob, true)).unwrap();
    q.add_credit(1, 1, u32::MAX).unwrap();
    assert_eq!(deliveries(&ob).len(), 1);
    let mut groups = q.message_groups().unwrap().groups;
    groups.sort_by(|a, b| a.id.cmp(&b.id));
    let seen: Vec<(&[u8], u64, &[u8])> = groups
        .iter()
        .map(|g| (&g.id[..], g.messages, &g.consumer[..]))
        .collect();
    assert_eq!(seen, [(&b"A"[..], 2, &b"c1"[..]), (b"B", 1, b"")]);
}

pub(super) fn publish_grouped(q: &Arc<Queue>, messages: &[(&str, &'static [u8])]) {
    for (group, body) in messages {
        q.enqueue(grouped(group, body, None)).unwrap();
    }
}

#[test]
fn a_get_takes_no_message_of_a_group_a_consumer_holds() {
    let q = group_queue();
    let messages: [(&str, &[u8]); 5] = [
        ("A", b"A0"),
        ("A", b"A1"),
        ("B", b"B2"),
        ("A", b"A3"),
        ("B", b"B4"),
    ];
    publish_grouped(&q, &messages);
    let ob = Outbox::new();
    q.subscribe(spec(1, &ob, true)).unwrap();
    q.add_credit(1, 1, u32::MAX).unwrap();
    assert_eq!(
        bodies(&deliveries(&ob)),
        [&b"A0"[..]],
        "the consumer holds A"
    );
    let text = |got: Option<crate::queue::Got>| {
        got.map(|g| String::from_utf8_lossy(g.message.body()).into_owned())
    };
    // A is the consumer's: the gets take B, in order, and then nothing.
    assert_eq!(text(q.get()).as_deref(), Some("B2"));
    assert_eq!(text(q.get()).as_deref(), Some("B4"), "gets hold B in turn");
    assert_eq!(text(q.get()), None, "A1 and A3 wait for the consumer");
    assert_eq!(q.info().message_count, 2);
}

/// Returns a quorum queue's message until it is gone: how many returns it took.
fn returns_until_gone(arguments: &[(&str, crate::value::HeaderValue)]) -> Option<u32> {
    let opts = QueueOptions {
        arguments: arguments.iter().cloned().collect(),
        ..QueueOptions::default()
    };
    let q = Queue::new("q".into(), &opts, None, QueueLimits::default());
    publish(&q, &["poison"]);
    for returns in 1..=1000 {
        let got = q.get()?;
        q.release([(got.position, got.message)], true);
        if q.info().message_count == 0 {
            return Some(returns);
        }
    }
    None
}

#[test]
fn a_quorum_queue_has_rabbitmq_4s_delivery_limit_of_20_unless_told_otherwise() {
    use crate::value::HeaderValue::{Int, Str};
    let quorum = ("x-queue-type", Str("quorum".into()));
    assert_eq!(returns_until_gone(std::slice::from_ref(&quorum)), Some(21));
    let own = ("x-delivery-limit", Int(3));
    assert_eq!(returns_until_gone(&[quorum.clone(), own]), Some(4));
    // Past what one byte would count.
    let high = ("x-delivery-limit", Int(300));
    assert_eq!(returns_until_gone(&[quorum.clone(), high]), Some(301));
    // A negative limit turns it off, as in RabbitMQ.
    let off = ("x-delivery-limit", Int(-1));
    assert_eq!(returns_until_gone(&[quorum, off]), None);
    assert_eq!(
        returns_until_gone(&[("x-queue-type", Str("classic".into()))]),
        None
    );
}

#[test]
fn a_message_back_more_often_than_the_delivery_limit_leaves_the_queue() {
    use crate::value::HeaderValue;
    let opts = QueueOptions {
        arguments: [("x-delivery-limit", HeaderValue::Int(2))]
            .into_iter()
            .collect(),
        ..QueueOptions::default()
    };
    let q = Queue::new("q".into(), &opts, None, QueueLimits::default());
    publish(&q, &["poison", "fine"]);
    // Released without having gone out (a 1.0 `released`): no return counted.
    let got = q.get().unwrap();
    assert_eq!(q.release([(got.position, got.message)], false), 1);
    for returns in 1..=3 {
        let got = q.get().unwrap();
        assert_eq!(got.message.body(), b"poison", "return {returns}");
        assert_eq!(got.redelivered, returns > 1);
        assert_eq!(u32::from(got.returns), returns - 1);
        q.release([(got.position, got.message)], true);
    }
    // The third return is one more than the limit: gone, the next message is up.
    let got = q.get().unwrap();
    assert_eq!(got.message.body(), b"fine");
    assert_eq!(q.info().message_count, 0);
    assert_eq!(q.unsettled_count(), 1);
}
