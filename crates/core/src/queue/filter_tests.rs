//! Consumers with a filter (JMS selectors): what they take, what they leave, and how often
//! a message is looked at.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use super::state::WALK_STEPS;
use super::tests::{bodies, bs, deliveries, group_queue, publish, publish_grouped, queue, spec};
use super::*;
use crate::message::{Message, MessageFilter};
use crate::queue::Outbox;
use crate::ConsumerId;

/// Matches bodies starting with its prefix, counting the messages it was asked about.
#[derive(Debug)]
struct Prefix {
    prefix: &'static str,
    asked: AtomicUsize,
}

impl MessageFilter for Prefix {
    fn matches(&self, message: &Message) -> bool {
        self.asked.fetch_add(1, Ordering::Relaxed);
        message.body().starts_with(self.prefix.as_bytes())
    }
}

fn prefix(p: &'static str) -> Arc<Prefix> {
    Arc::new(Prefix {
        prefix: p,
        asked: AtomicUsize::new(0),
    })
}

/// Subscribes `spec` and grants it 10 messages of credit (which dispatches).
fn subscribe_with_credit(q: &Arc<Queue>, spec: ConsumerSpec) {
    let id = spec.id;
    q.subscribe(spec).unwrap();
    q.add_credit(id, 10, u32::MAX).unwrap();
}

/// A consumer that drops what it does not match (a 1.0 topic subscription's).
fn dropping(id: ConsumerId, ob: &Arc<Outbox>, f: &Arc<Prefix>) -> ConsumerSpec {
    ConsumerSpec {
        filter: Some(ConsumerFilter {
            matches: f.clone(),
            drop_unmatched: true,
        }),
        ..spec(id, ob, true)
    }
}

fn filtered(id: ConsumerId, ob: &Arc<Outbox>, acquire: bool, f: &Arc<Prefix>) -> ConsumerSpec {
    ConsumerSpec {
        filter: Some(ConsumerFilter {
            matches: f.clone(),
            drop_unmatched: false,
        }),
        ..spec(id, ob, acquire)
    }
}

#[test]
fn a_filtered_consumer_takes_only_what_it_matches_and_leaves_the_rest_queued() {
    let q = queue();
    let ob = Outbox::new();
    let f = prefix("x");
    q.subscribe(filtered(1, &ob, true, &f)).unwrap();
    publish(&q, &["a1", "x1", "a2", "x2", "a3"]);
    q.add_credit(1, 10, u32::MAX).unwrap();
    assert_eq!(bodies(&deliveries(&ob)), [b"x1", b"x2"]);
    assert_eq!(q.queued_bodies(), bs(&["a1", "a2", "a3"]));
    publish(&q, &["a4", "x3"]);
    assert_eq!(bodies(&deliveries(&ob)), [b"x3"], "new arrivals too");
    assert_eq!(q.queued_bodies(), bs(&["a1", "a2", "a3", "a4"]));
}

#[test]
fn each_message_is_looked_at_once_however_many_passes_follow() {
    let q = queue();
    let ob = Outbox::new();
    let f = prefix("x");
    q.subscribe(filtered(1, &ob, true, &f)).unwrap();
    q.add_credit(1, u32::MAX, u32::MAX).unwrap();
    // Every publish dispatches; without the cursor the walk would cost 100 * 101 / 2.
    publish(&q, &names("a", 100));
    assert_eq!(f.asked.load(Ordering::Relaxed), 100);
    assert!(deliveries(&ob).is_empty());
    assert_eq!(q.message_count(), 100);
}

#[test]
fn unfiltered_consumers_take_what_filtered_ones_leave() {
    let q = queue();
    let (o1, o2) = (Outbox::new(), Outbox::new());
    let f = prefix("x");
    q.subscribe(filtered(1, &o1, true, &f)).unwrap();
    q.subscribe(spec(2, &o2, true)).unwrap();
    publish(&q, &["a1", "x1", "a2", "x2"]);
    q.add_credit(1, 10, u32::MAX).unwrap();
    q.add_credit(2, 10, u32::MAX).unwrap();
    assert_eq!(bodies(&deliveries(&o1)), [b"x1", b"x2"]);
    assert_eq!(bodies(&deliveries(&o2)), [b"a1", b"a2"]);
    // Without credit the filtered consumer's matches go to whoever can take them.
    publish(&q, &["x3"]);
    assert_eq!(bodies(&deliveries(&o1)), [b"x3"]);
    q.stop(1).unwrap();
    publish(&q, &["x4"]);
    assert_eq!(bodies(&deliveries(&o2)), [b"x4"]);
}

#[test]
fn a_release_behind_the_cursor_is_seen_again() {
    let q = queue();
    let (o1, o2) = (Outbox::new(), Outbox::new());
    let f = prefix("x");
    q.subscribe(spec(2, &o2, true)).unwrap();
    publish(&q, &["x1"]);
    q.add_credit(2, 1, u32::MAX).unwrap();
    let taken = deliveries(&o2);
    assert_eq!(bodies(&taken), [b"x1"]);
    // The filtered consumer walks past everything queued now.
    q.subscribe(filtered(1, &o1, true, &f)).unwrap();
    publish(&q, &["a1", "a2"]);
    q.add_credit(1, 10, u32::MAX).unwrap();
    assert!(deliveries(&o1).is_empty());
    assert_eq!(
        q.release([(taken[0].position, taken[0].message.clone())], true),
        1
    );
    let again = deliveries(&o1);
    assert_eq!(bodies(&again), [b"x1"], "released behind its cursor");
    assert!(again[0].redelivered);
    assert_eq!(q.queued_bodies(), bs(&["a1", "a2"]));
}

#[test]
fn a_filtered_browser_sees_only_its_matches_and_takes_nothing() {
    let q = queue();
    let ob = Outbox::new();
    let f = prefix("x");
    q.subscribe(filtered(1, &ob, false, &f)).unwrap();
    publish(&q, &["a1", "x1", "a2", "x2"]);
    q.add_credit(1, 10, u32::MAX).unwrap();
    let ds = deliveries(&ob);
    assert_eq!(bodies(&ds), [b"x1", b"x2"]);
    assert!(ds.iter().all(|d| !d.acquired));
    assert_eq!(q.message_count(), 4);
}

#[test]
fn credit_is_charged_only_for_matches() {
    let q = queue();
    let ob = Outbox::new();
    let f = prefix("x");
    q.subscribe(filtered(1, &ob, true, &f)).unwrap();
    publish(&q, &["a1", "a2", "x1", "a3", "x2", "x3"]);
    q.add_credit(1, 2, u32::MAX).unwrap();
    assert_eq!(bodies(&deliveries(&ob)), [b"x1", b"x2"]);
    q.add_credit(1, 1, u32::MAX).unwrap();
    assert_eq!(bodies(&deliveries(&ob)), [b"x3"]);
}

#[test]
fn only_the_active_consumer_of_a_single_active_queue_is_served_even_when_filtered() {
    use crate::value::HeaderValue;
    let opts = QueueOptions {
        arguments: [("x-single-active-consumer", HeaderValue::Bool(true))]
            .into_iter()
            .collect(),
        ..QueueOptions::default()
    };
    let q = Queue::new("q".into(), &opts, None, QueueLimits::default());
    let (o1, o2) = (Outbox::new(), Outbox::new());
    let f = prefix("x");
    q.subscribe(filtered(1, &o1, true, &f)).unwrap();
    q.subscribe(spec(2, &o2, true)).unwrap();
    publish(&q, &["a1", "x1"]);
    q.add_credit(2, 10, u32::MAX).unwrap();
    q.add_credit(1, 10, u32::MAX).unwrap();
    assert_eq!(bodies(&deliveries(&o1)), [b"x1"]);
    assert!(deliveries(&o2).is_empty(), "consumer 2 is not active");
    assert_eq!(q.queued_bodies(), bs(&["a1"]));
}

#[test]
fn in_a_grouped_queue_a_filtered_consumer_gets_only_matching_groups_messages() {
    let q = group_queue();
    publish_grouped(
        &q,
        &[("a", b"a1"), ("x", b"x1"), ("a", b"a2"), ("x", b"x2")],
    );
    let (o1, o2) = (Outbox::new(), Outbox::new());
    let f = prefix("x");
    subscribe_with_credit(&q, filtered(1, &o1, true, &f));
    assert_eq!(bodies(&deliveries(&o1)), [b"x1", b"x2"]);
    q.subscribe(spec(2, &o2, true)).unwrap();
    q.add_credit(2, 10, u32::MAX).unwrap();
    assert_eq!(bodies(&deliveries(&o2)), [b"a1", b"a2"]);
}

#[test]
fn a_subscriptions_own_consumer_drops_what_it_does_not_match() {
    let q = queue();
    let ob = Outbox::new();
    let f = prefix("x");
    q.subscribe(dropping(1, &ob, &f)).unwrap();
    // No credit yet: what it passes over goes, up to its first match.
    publish(&q, &["a1", "x1", "a2", "x2"]);
    assert_eq!(q.queued_bodies(), bs(&["x1", "a2", "x2"]));
    q.add_credit(1, 10, u32::MAX).unwrap();
    assert_eq!(bodies(&deliveries(&ob)), [b"x1", b"x2"]);
    assert!(q.queued_bodies().is_empty());
    publish(&q, &["a3"]);
    assert!(q.queued_bodies().is_empty());
    let counters = q.lock().counters;
    assert_eq!((counters.unselected, counters.dequeued()), (3, 3));
}

#[test]
fn a_backlog_only_selective_consumers_leave_holds_no_publisher() {
    let q = queue();
    let (o1, o2) = (Outbox::new(), Outbox::new());
    let f = prefix("x");
    subscribe_with_credit(&q, filtered(1, &o1, true, &f));
    publish(&q, &["a1", "a2", "a3"]);
    assert_eq!(q.backlog().ready_bytes, 0, "nobody here wants them");
    q.subscribe(spec(2, &o2, true)).unwrap();
    assert_eq!(q.backlog().ready_bytes, 6, "consumer 2 takes anything");
}

/// `n` distinct bodies, `stem` followed by a number.
fn names(stem: &str, n: usize) -> Vec<&'static str> {
    (0..n)
        .map(|i| &*Box::leak(format!("{stem}{i}").into_boxed_str()))
        .collect()
}

/// More than three walks' worth of messages nobody matches, then one match.
fn deep_queue_ending_in_a_match() -> (Arc<Queue>, usize) {
    deep_queue(3 * WALK_STEPS as usize + 10)
}

/// `deep` messages nobody matches, then "x1".
fn deep_queue(deep: usize) -> (Arc<Queue>, usize) {
    let q = queue();
    publish(&q, &names("a", deep));
    publish(&q, &["x1"]);
    (q, deep)
}

fn asked(f: &Prefix) -> usize {
    f.asked.load(Ordering::Relaxed)
}

/// Takes from `ob` as the connection's writer would, until something comes or `takes`
/// takes found nothing; returns what came and how many takes it needed.
fn take_until_delivered(ob: &Outbox, takes: usize) -> (Vec<Delivery>, usize) {
    for n in 1..=takes {
        let ds = deliveries(ob);
        if !ds.is_empty() {
            return (ds, n);
        }
    }
    (Vec::new(), takes)
}

#[test]
fn a_walk_over_a_deep_queue_goes_in_slices_that_the_connection_resumes() {
    let (q, deep) = deep_queue_ending_in_a_match();
    let ob = Outbox::new();
    let f = prefix("x");
    subscribe_with_credit(&q, filtered(1, &ob, true, &f));
    let slice = WALK_STEPS as usize;
    assert_eq!(f.asked.load(Ordering::Relaxed), slice, "one slice per pass");
    // Each take dispatches the next slice; the fourth finds the match.
    let (ds, takes) = take_until_delivered(&ob, 10);
    assert_eq!(bodies(&ds), [b"x1"]);
    assert_eq!(takes, 4);
    assert_eq!(
        f.asked.load(Ordering::Relaxed),
        deep + 1,
        "each looked at once"
    );
    // Done: no further pass is asked for.
    assert!(deliveries(&ob).is_empty());
    assert_eq!(f.asked.load(Ordering::Relaxed), deep + 1);
    assert_eq!(q.message_count(), deep as u64);
}

#[test]
fn flush_and_drain_walk_the_whole_queue_before_they_answer() {
    let (q, _) = deep_queue_ending_in_a_match();
    let ob = Outbox::new();
    let f = prefix("x");
    subscribe_with_credit(&q, filtered(1, &ob, true, &f));
    q.flush(1).unwrap();
    assert_eq!(bodies(&deliveries(&ob)), [b"x1"], "message.flush");

    let (q, _) = deep_queue_ending_in_a_match();
    let ob = Outbox::new();
    subscribe_with_credit(&q, filtered(1, &ob, true, &prefix("x")));
    assert_eq!(q.drain_credit(1).unwrap(), 9, "1.0 drain");
    assert_eq!(bodies(&deliveries(&ob)), [b"x1"]);
}

#[test]
fn a_filtered_browser_walks_a_deep_queue_in_slices_too() {
    let (q, deep) = deep_queue_ending_in_a_match();
    let ob = Outbox::new();
    let f = prefix("x");
    subscribe_with_credit(&q, filtered(1, &ob, false, &f));
    assert_eq!(f.asked.load(Ordering::Relaxed), WALK_STEPS as usize);
    let (ds, takes) = take_until_delivered(&ob, 10);
    assert_eq!((bodies(&ds), takes), (vec![&b"x1"[..]], 4));
    assert!(!ds[0].acquired);
    assert_eq!(q.message_count(), deep as u64 + 1);
}

#[test]
fn a_dropping_consumer_clears_a_deep_backlog_in_slices() {
    let (q, deep) = deep_queue_ending_in_a_match();
    let ob = Outbox::new();
    let f = prefix("x");
    q.subscribe(dropping(1, &ob, &f)).unwrap();
    q.redispatch();
    let slice = WALK_STEPS as usize;
    assert_eq!(
        q.message_count(),
        (deep + 1 - slice) as u64,
        "one slice dropped"
    );
    for _ in 0..10 {
        deliveries(&ob);
    }
    assert_eq!(
        q.queued_bodies(),
        bs(&["x1"]),
        "the rest without credit, up to its match"
    );
}

#[test]
fn the_walks_of_one_pass_share_its_bound() {
    let (q, _) = deep_queue_ending_in_a_match();
    let (o1, o2) = (Outbox::new(), Outbox::new());
    let (f1, f2) = (prefix("x"), prefix("y"));
    q.subscribe(filtered(1, &o1, true, &f1)).unwrap();
    q.subscribe(filtered(2, &o2, true, &f2)).unwrap();
    q.add_credit(1, 10, u32::MAX).unwrap();
    q.add_credit(2, 10, u32::MAX).unwrap();
    let before = asked(&f1) + asked(&f2);
    q.redispatch();
    assert_eq!(
        asked(&f1) + asked(&f2) - before,
        WALK_STEPS as usize,
        "two selective consumers, one pass's worth"
    );
}

#[test]
fn a_flush_lifts_the_bound_only_for_the_consumer_that_flushes() {
    let (q, _) = deep_queue(5 * WALK_STEPS as usize);
    let (o1, o2) = (Outbox::new(), Outbox::new());
    let (f1, f2) = (prefix("x"), prefix("y"));
    q.subscribe(filtered(1, &o1, true, &f1)).unwrap();
    q.subscribe(filtered(2, &o2, true, &f2)).unwrap();
    q.add_credit(1, 10, u32::MAX).unwrap();
    q.add_credit(2, 10, u32::MAX).unwrap();
    let before = asked(&f2);
    q.flush(1).unwrap();
    // Read before taking deliveries: a take runs the next slice.
    let walked = asked(&f2) - before;
    assert_eq!(
        bodies(&deliveries(&o1)),
        [b"x1"],
        "the flusher walked to the end"
    );
    assert_eq!(walked, WALK_STEPS as usize, "the other, one pass's worth");
}
