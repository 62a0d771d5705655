//! What the broker tells its journal, checked with an in-memory journal.

use crate::MessageParts;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;

use super::*;
use crate::error::BrokerError;
use crate::exchange_kind::BindingIdentity;
use crate::journal::testing::{Call, MemoryJournal};
use crate::journal::SyncPoint;
use crate::message::{now_ms, Message};
use crate::queue::ConsumerSpec;
use crate::queue::QueueOptions;
use crate::queue::{Outbox, OutboxItem};
use crate::value::{Arguments, HeaderValue};

fn broker() -> (Arc<Broker>, Arc<MemoryJournal>) {
    let j = MemoryJournal::new();
    (Broker::with_journal(BrokerConfig::default(), j.clone()), j)
}

fn durable() -> QueueOptions {
    QueueOptions {
        durable: true,
        ..QueueOptions::default()
    }
}

fn persistent(key: &str, body: &'static str) -> Message {
    let mut m = MessageParts::new(
        "amq.direct",
        key.to_owned(),
        Bytes::from_static(body.as_bytes()),
    );
    m.persistent = true;
    Message::from(m)
}

fn transient(key: &str) -> Message {
    Message::new("amq.direct", key.to_owned(), Bytes::new())
}

fn store_id(q: &Queue) -> u64 {
    q.store_id().expect("durable queue has a store id")
}

fn take_positions(ob: &Outbox) -> Vec<(u64, Message)> {
    let mut items = Vec::new();
    ob.take(&mut items);
    items
        .into_iter()
        .filter_map(|i| match i {
            OutboxItem::Deliver(d) => Some((d.position, d.message)),
            _ => None,
        })
        .collect()
}

fn consume_all(b: &Broker, q: &Arc<Queue>) -> Arc<Outbox> {
    let ob = Outbox::new();
    let id = b.next_consumer_id();
    q.subscribe(ConsumerSpec {
        id,
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
    q.add_credit(id, u32::MAX, u32::MAX).unwrap();
    ob
}

/// 0-9-1's bindings, told apart by their arguments: each bind and unbind is journaled as
/// such (a bind that changes nothing is not); the queue's deletion takes every binding
/// under the key, and an auto-delete exchange goes only with the last of them.
#[test]
fn bindings_told_apart_by_arguments_are_journaled_and_removed_one_by_one() {
    let (b, j) = broker();
    let (dq, _) = b.declare_queue("d", durable(), false, 1).unwrap();
    let opts = ExchangeOptions {
        durable: true,
        auto_delete: true,
        ..ExchangeOptions::default()
    };
    b.declare_exchange("h", ExchangeKind::Headers, opts, false)
        .unwrap();
    let args = |v: i64| -> Arguments { [("n", HeaderValue::Int(v))].into_iter().collect() };
    let by_args = BindingIdentity::KeyAndArguments;
    b.bind_as(by_args, "d", "h", "", &args(1)).unwrap();
    b.bind_as(by_args, "d", "h", "", &args(2)).unwrap();
    b.bind_as(by_args, "d", "h", "", &args(2)).unwrap();
    assert_eq!(b.exchange("h").unwrap().binding_count(), 2);
    b.unbind_with_arguments("d", "h", "", &args(1)).unwrap();
    assert_eq!(b.exchange("h").unwrap().binding_count(), 1);
    // A bind the exchange refuses is not journaled (it would stay live in the store for
    // good, with nothing to unbind it).
    let bad: Arguments = [("x-match", HeaderValue::Str("some".into()))]
        .into_iter()
        .collect();
    assert!(b.bind_as(by_args, "d", "h", "", &bad).is_err());
    assert!(b.bind("d", "h", "", &bad).is_err());
    let id = store_id(&dq);
    assert_eq!(
        j.take(),
        [
            Call::DeclareQueue("d".into(), id),
            Call::DeclareExchange("h".into()),
            Call::BindVariant("h".into(), id, "".into(), args(1)),
            Call::BindVariant("h".into(), id, "".into(), args(2)),
            Call::UnbindOne("h".into(), id, "".into(), args(1)),
        ]
    );
    // Another binding under the key keeps the auto-delete exchange.
    b.bind_as(by_args, "d", "h", "", &args(3)).unwrap();
    b.unbind_with_arguments("d", "h", "", &args(2)).unwrap();
    assert!(b.exchange("h").is_some());
    // Deleting the queue removes every binding under the key, and with them the exchange.
    b.delete_queue("d", false, false, 1).unwrap();
    assert!(b.exchange("h").is_none());
}

/// 0-10's bindings, one per key: a bind with other arguments replaces them and is
/// journaled, even the same ones in another order (a name given twice reads as its first);
/// one with the same arguments in the same order changes nothing and is not.
#[test]
fn a_rebind_is_journaled_only_when_it_changes_the_arguments() {
    let (b, j) = broker();
    let (dq, _) = b.declare_queue("d", durable(), false, 1).unwrap();
    let args = |pairs: &[(&str, i64)]| -> Arguments {
        pairs
            .iter()
            .map(|&(k, v)| (k, HeaderValue::Int(v)))
            .collect()
    };
    b.bind("d", "amq.match", "", &args(&[("a", 1), ("b", 2)]))
        .unwrap();
    b.bind("d", "amq.match", "", &args(&[("b", 2), ("a", 1)]))
        .unwrap();
    b.bind("d", "amq.match", "", &args(&[("a", 1)])).unwrap();
    b.bind("d", "amq.match", "", &args(&[("a", 1)])).unwrap();
    let id = store_id(&dq);
    let bind = |a| Call::Bind("amq.match".into(), id, "".into(), a);
    assert_eq!(
        j.take(),
        [
            Call::DeclareQueue("d".into(), id),
            bind(args(&[("a", 1), ("b", 2)])),
            bind(args(&[("b", 2), ("a", 1)])),
            bind(args(&[("a", 1)])),
        ]
    );
    assert_eq!(b.exchange("amq.match").unwrap().binding_count(), 1);
    // Two 0-9-1 bindings under a key, then a 0-10 bind with the arguments of one of them:
    // it replaces both with that one, a change the journal must hear of.
    let by_args = BindingIdentity::KeyAndArguments;
    b.bind_as(by_args, "d", "amq.match", "k", &args(&[("a", 1)]))
        .unwrap();
    b.bind_as(by_args, "d", "amq.match", "k", &args(&[("a", 2)]))
        .unwrap();
    b.bind("d", "amq.match", "k", &args(&[("a", 1)])).unwrap();
    let (variant, bind) = (
        |a| Call::BindVariant("amq.match".into(), id, "k".into(), a),
        |a| Call::Bind("amq.match".into(), id, "k".into(), a),
    );
    assert_eq!(
        j.take(),
        [
            variant(args(&[("a", 1)])),
            variant(args(&[("a", 2)])),
            bind(args(&[("a", 1)])),
        ]
    );
    assert_eq!(b.exchange("amq.match").unwrap().binding_count(), 2);
}

#[test]
fn only_durable_objects_are_journaled() {
    let (b, j) = broker();
    let (dq, _) = b.declare_queue("d", durable(), false, 1).unwrap();
    let (tq, _) = b
        .declare_queue("t", QueueOptions::default(), false, 1)
        .unwrap();
    assert!(tq.store_id().is_none());
    let opts = ExchangeOptions {
        durable: true,
        ..ExchangeOptions::default()
    };
    b.declare_exchange("dx", ExchangeKind::Topic, opts, false)
        .unwrap();
    b.declare_exchange("tx", ExchangeKind::Topic, ExchangeOptions::default(), false)
        .unwrap();
    b.bind("d", "dx", "k", &Arguments::new()).unwrap();
    b.bind("t", "dx", "k", &Arguments::new()).unwrap();
    b.bind("d", "tx", "k", &Arguments::new()).unwrap();
    b.bind("d", "amq.direct", "d", &Arguments::new()).unwrap();
    b.unbind("d", "dx", "k").unwrap();
    let id = store_id(&dq);
    assert_eq!(
        j.take(),
        [
            Call::DeclareQueue("d".into(), id),
            Call::DeclareExchange("dx".into()),
            Call::Bind("dx".into(), id, "k".into(), Arguments::new()),
            Call::Bind("amq.direct".into(), id, "d".into(), Arguments::new()),
            Call::Unbind("dx".into(), id, "k".into()),
        ]
    );
    b.delete_exchange("dx", false).unwrap();
    b.delete_exchange("tx", false).unwrap();
    b.delete_queue("d", false, false, 1).unwrap();
    b.delete_queue("t", false, false, 1).unwrap();
    assert_eq!(
        j.take(),
        [Call::DeleteExchange("dx".into()), Call::DeleteQueue(id)]
    );
}

#[test]
fn a_persistent_message_is_journaled_once_for_all_its_durable_queues() {
    let (b, j) = broker();
    let a = b.declare_queue("a", durable(), false, 1).unwrap().0;
    let c = b.declare_queue("c", durable(), false, 1).unwrap().0;
    b.declare_queue("t", QueueOptions::default(), false, 1)
        .unwrap();
    for q in ["a", "c", "t"] {
        b.bind(q, "amq.fanout", "", &Arguments::new()).unwrap();
    }
    j.take();
    let fanout = b.exchange("amq.fanout").unwrap();
    let out = b.publish(&fanout, persistent("", "p")).unwrap();
    assert_eq!(out.queues, 3);
    let calls = j.take();
    let [Call::Enqueue(mid, queues)] = &calls[..] else {
        panic!("{calls:?}");
    };
    assert_eq!(queues, &[store_id(&a), store_id(&c)]);
    assert_eq!(out.sync, Some(SyncPoint(*mid)));
    let out = b.publish(&fanout, transient("")).unwrap();
    assert_eq!((out.queues, out.sync), (3, None));
    assert!(
        j.take().is_empty(),
        "transient messages never reach the store"
    );
}

#[test]
fn settling_purging_and_expiring_write_dequeues_and_releasing_does_not() {
    let (b, j) = broker();
    let q = b.declare_queue("q", durable(), false, 1).unwrap().0;
    let id = store_id(&q);
    let ex = b.exchange("").unwrap();
    for body in ["1", "2", "3"] {
        b.publish(&ex, persistent("q", body)).unwrap();
    }
    j.take();
    let ob = consume_all(&b, &q);
    let got = take_positions(&ob);
    let sids: Vec<u64> = got.iter().map(|(_, m)| m.store_id().unwrap()).collect();
    q.release([got[0].clone()], true);
    assert!(
        j.take().is_empty(),
        "a release keeps the message on the queue"
    );
    assert!(q.accept(got[1].0));
    assert!(q.reject(got[2].0, got[2].1.clone()));
    assert_eq!(
        j.take(),
        [
            Call::Dequeue(id, vec![sids[1]]),
            Call::Dequeue(id, vec![sids[2]])
        ]
    );
    // The released one went to the consumer again; give it back and purge the queue.
    b.cancel_consumer(&q, 1);
    for (position, m) in take_positions(&ob) {
        q.release([(position, m)], false);
    }
    assert_eq!(b.purge_queue("q").unwrap(), 1);
    assert_eq!(j.take(), [Call::Dequeue(id, vec![sids[0]])]);
    let q2 = b.declare_queue("q2", durable(), false, 1).unwrap().0;
    let mut m = MessageParts::new("", "q2", Bytes::new());
    m.persistent = true;
    m.expires_at = Some(1);
    // Expired on arrival: never journaled.
    assert_eq!(b.publish(&ex, Message::from(m)).unwrap().queues, 0);
    let mut m = MessageParts::new("", "q2", Bytes::new());
    m.persistent = true;
    m.expires_at = Some(now_ms() + 50);
    b.publish(&ex, Message::from(m)).unwrap();
    b.publish(&ex, persistent("q2", "stays")).unwrap();
    let calls = j.take();
    let Call::Enqueue(expiring, _) = calls[1] else {
        panic!("{calls:?}")
    };
    std::thread::sleep(std::time::Duration::from_millis(80));
    assert_eq!(b.purge_expired(), 1);
    assert_eq!(j.take(), [Call::Dequeue(store_id(&q2), vec![expiring])]);
    assert_eq!(b.purge_queue("q2").unwrap(), 1);
    assert!(matches!(&j.take()[..], [Call::Dequeue(_, ids)] if ids.len() == 1));
}

/// A durable queue with `x-delivery-limit`.
fn limited(b: &Broker, name: &str, limit: i64) -> Arc<Queue> {
    let mut arguments = Arguments::new();
    arguments.push("x-delivery-limit", crate::value::HeaderValue::Int(limit));
    let opts = QueueOptions {
        durable: true,
        arguments,
        ..QueueOptions::default()
    };
    b.declare_queue(name, opts, false, 1).unwrap().0
}

#[test]
fn a_return_to_a_queue_with_a_delivery_limit_is_journaled_with_its_count() {
    let (b, j) = broker();
    let q = limited(&b, "q", 5);
    let ex = b.exchange("").unwrap();
    b.publish(&ex, persistent("q", "kept")).unwrap();
    b.publish(&ex, transient("q")).unwrap();
    j.take();
    for returns in 1..=2 {
        let got = q.get().unwrap();
        let sid = got.message.store_id().unwrap();
        q.release([(got.position, got.message)], true);
        assert_eq!(j.take(), [Call::Returned(store_id(&q), sid, returns)]);
    }
    // Back without having gone out: no return to count.
    let got = q.get().unwrap();
    q.release([(got.position, got.message)], false);
    assert!(j.take().is_empty());
    // A transient message has no record to count against.
    let (kept, t) = (q.get().unwrap(), q.get().unwrap());
    assert!(t.message.store_id().is_none());
    q.release(
        [(t.position, t.message), (kept.position, kept.message)],
        true,
    );
    assert!(matches!(&j.take()[..], [Call::Returned(_, _, 3)]));
    // A quorum queue with its limit turned off still tells consumers the count, so it
    // keeps it too; a queue that tells nobody (no limit, not quorum) keeps none.
    let quorum = {
        let mut arguments = Arguments::new();
        arguments.push(
            "x-queue-type",
            crate::value::HeaderValue::Str("quorum".into()),
        );
        arguments.push("x-delivery-limit", crate::value::HeaderValue::Int(-1));
        let opts = QueueOptions {
            durable: true,
            arguments,
            ..QueueOptions::default()
        };
        b.declare_queue("quorum", opts, false, 1).unwrap().0
    };
    let plain = b.declare_queue("plain", durable(), false, 1).unwrap().0;
    for queue in [&quorum, &plain] {
        b.publish(&ex, persistent(queue.name(), "kept")).unwrap();
        j.take();
        let got = queue.get().unwrap();
        let sid = got.message.store_id().unwrap();
        queue.release([(got.position, got.message)], true);
        let kept = j.take();
        if Arc::ptr_eq(queue, &quorum) {
            assert_eq!(kept, [Call::Returned(store_id(queue), sid, 1)]);
        } else {
            assert!(kept.is_empty(), "{kept:?}");
        }
    }
}

#[test]
fn accepts_in_a_run_share_one_lock_and_one_dequeue_record_per_queue() {
    let (b, j) = broker();
    let a = b.declare_queue("a", durable(), false, 1).unwrap().0;
    let c = b.declare_queue("c", durable(), false, 1).unwrap().0;
    let ex = b.exchange("").unwrap();
    for body in ["1", "2", "3"] {
        b.publish(&ex, persistent("a", body)).unwrap();
        b.publish(&ex, persistent("c", body)).unwrap();
    }
    // A transient message settles in the same run and journals nothing.
    b.publish(&ex, transient("a")).unwrap();
    let (from_a, from_c) = (
        take_positions(&consume_all(&b, &a)),
        take_positions(&consume_all(&b, &c)),
    );
    j.take();
    let ids = |got: &[(u64, Message)]| -> Vec<u64> {
        got.iter().filter_map(|(_, m)| m.store_id()).collect()
    };
    // A cumulative acknowledgement: a's three and its transient one, then c's, then a's
    // again (a new run), and a duplicate, which settles nothing.
    let mut accepts = crate::queue::Accepts::default();
    for (position, m) in &from_a[..3] {
        accepts.push(&a, *position, m.clone());
    }
    accepts.push(&a, from_a[3].0, from_a[3].1.clone());
    for (position, m) in &from_c[..2] {
        accepts.push(&c, *position, m.clone());
    }
    accepts.push(&c, from_c[0].0, from_c[0].1.clone());
    accepts.finish();
    assert_eq!(
        j.take(),
        [
            Call::Dequeue(store_id(&a), ids(&from_a)),
            Call::Dequeue(store_id(&c), ids(&from_c[..2])),
        ]
    );
    assert_eq!((a.unsettled_count(), c.unsettled_count()), (0, 1));
    // Dropped with a pending run: accepted all the same.
    let mut accepts = crate::queue::Accepts::default();
    accepts.push(&c, from_c[2].0, from_c[2].1.clone());
    drop(accepts);
    assert_eq!(j.take(), [Call::Dequeue(store_id(&c), ids(&from_c[2..]))]);
    assert_eq!(c.unsettled_count(), 0);
}

#[test]
fn a_refusing_journal_refuses_the_publish_and_durable_declares() {
    let (b, j) = broker();
    let q = b.declare_queue("q", durable(), false, 1).unwrap().0;
    b.declare_queue("t", QueueOptions::default(), false, 1)
        .unwrap();
    j.refuse.store(true, Ordering::Relaxed);
    let ex = b.exchange("").unwrap();
    assert!(matches!(
        b.publish(&ex, persistent("q", "x")),
        Err(BrokerError::ResourceLimitExceeded(_))
    ));
    assert_eq!(q.message_count(), 0, "no queue holds a refused message");
    assert_eq!(b.publish(&ex, transient("q")).unwrap().queues, 1);
    assert_eq!(b.publish(&ex, persistent("t", "x")).unwrap().queues, 1);
    assert!(b.declare_queue("d2", durable(), false, 1).is_err());
    assert!(b.queue("d2").is_none());
    assert!(b
        .declare_queue("t2", QueueOptions::default(), false, 1)
        .is_ok());
}

#[test]
fn a_dead_lettered_persistent_message_is_journaled_anew_for_its_durable_target() {
    let (b, j) = broker();
    b.declare_queue("dlq", durable(), false, 1).unwrap();
    b.bind("dlq", "amq.fanout", "", &Arguments::new()).unwrap();
    let opts = QueueOptions {
        durable: true,
        alternate_exchange: Some("amq.fanout".into()),
        ..QueueOptions::default()
    };
    let q = b.declare_queue("q", opts, false, 1).unwrap().0;
    let ex = b.exchange("").unwrap();
    b.publish(&ex, persistent("q", "x")).unwrap();
    j.take();
    let ob = consume_all(&b, &q);
    let (pos, m) = take_positions(&ob).remove(0);
    let old = m.store_id().unwrap();
    q.reject(pos, m);
    let calls = j.take();
    assert_eq!(calls[0], Call::Dequeue(store_id(&q), vec![old]));
    assert!(
        matches!(&calls[1], Call::Enqueue(new, _) if *new != old),
        "{calls:?}"
    );
    let dlq = b.queue("dlq").unwrap();
    assert_eq!(dlq.message_count(), 1);
}

#[test]
fn restoring_journals_nothing_and_marks_messages_redelivered() {
    let (b, j) = broker();
    let opts = ExchangeOptions {
        durable: true,
        ..ExchangeOptions::default()
    };
    b.restore_exchange("x", ExchangeKind::Direct, opts).unwrap();
    let q = b.restore_queue("q", durable(), 42).unwrap();
    b.restore_binding("q", "x", "k", &Arguments::new()).unwrap();
    let m = persistent("q", "back");
    assert!(m.set_store_id(7));
    q.restore([crate::queue::Restored::InMemory(m)]);
    assert!(j.take().is_empty());
    assert_eq!(q.store_id(), Some(42));
    let ob = consume_all(&b, &q);
    let mut items = Vec::new();
    ob.take(&mut items);
    let Some(OutboxItem::Deliver(d)) = items.pop() else {
        panic!("no delivery")
    };
    assert!(d.redelivered);
    assert!(q.accept(d.position));
    assert_eq!(j.take(), [Call::Dequeue(42, vec![7])]);
    assert!(b.restore_queue("q", durable(), 43).is_err());
}

fn enqueued_ids(calls: &[Call]) -> Vec<u64> {
    calls
        .iter()
        .filter_map(|c| match c {
            Call::Enqueue(id, _) => Some(*id),
            _ => None,
        })
        .collect()
}

#[test]
fn messages_queue_features_drop_leave_the_journal() {
    use crate::value::HeaderValue as V;
    let (b, j) = broker();
    let ex = b.exchange("").unwrap();
    // Last-value replacement drops the superseded message.
    let lvq_opts = QueueOptions {
        arguments: [("qpid.last_value_queue_key", V::Str("k".into()))]
            .into_iter()
            .collect(),
        ..durable()
    };
    let lvq = b.declare_queue("lvq", lvq_opts, false, 1).unwrap().0;
    j.take();
    for body in ["old", "new"] {
        let mut m = MessageParts::new("", "lvq", Bytes::from_static(body.as_bytes()));
        m.persistent = true;
        m.headers = Some(Arc::new([("k", V::Str("a".into()))].into_iter().collect()));
        b.publish(&ex, Message::from(m)).unwrap();
    }
    let calls = j.take();
    let ids = enqueued_ids(&calls);
    assert_eq!(
        calls.last(),
        Some(&Call::Dequeue(store_id(&lvq), vec![ids[0]]))
    );
    // A ring (drop-head) queue drops its oldest.
    let mut ring_opts = durable();
    ring_opts.limits = QueueLimits {
        max_count: Some(1),
        max_size: None,
        policy: crate::limits::LimitPolicy::DropHead,
        ..Default::default()
    };
    let ring = b.declare_queue("ring", ring_opts, false, 1).unwrap().0;
    j.take();
    b.publish(&ex, persistent("ring", "1")).unwrap();
    b.publish(&ex, persistent("ring", "2")).unwrap();
    let calls = j.take();
    let ids = enqueued_ids(&calls);
    assert!(
        calls.contains(&Call::Dequeue(store_id(&ring), vec![ids[0]])),
        "{calls:?}"
    );
    assert_eq!(ring.queued_bodies(), [Bytes::from_static(b"2")]);
    // A priority queue settles from any level.
    let prio_opts = QueueOptions {
        arguments: [("x-max-priority", V::Int(5))].into_iter().collect(),
        ..durable()
    };
    let prio = b.declare_queue("prio", prio_opts, false, 1).unwrap().0;
    j.take();
    let mut high = MessageParts::new("", "prio", Bytes::from_static(b"high"));
    high.persistent = true;
    high.priority = 5;
    b.publish(&ex, persistent("prio", "low")).unwrap();
    b.publish(&ex, Message::from(high)).unwrap();
    let ids = enqueued_ids(&j.take());
    let ob = consume_all(&b, &prio);
    let got = take_positions(&ob);
    assert_eq!(got[0].1.body(), Bytes::from_static(b"high"));
    assert!(prio.accept_all(&got.iter().map(|(p, _)| *p).collect::<Vec<_>>(), &mut []) == 2);
    // Settled in delivery order (highest priority first), under one record.
    assert_eq!(
        j.take(),
        [Call::Dequeue(store_id(&prio), vec![ids[1], ids[0]])]
    );
    // An unused x-expires queue is deleted with everything it held.
    let exp_opts = QueueOptions {
        arguments: [("x-expires", V::Int(1))].into_iter().collect(),
        ..durable()
    };
    let exp = b.declare_queue("exp", exp_opts, false, 1).unwrap().0;
    b.publish(&ex, persistent("exp", "gone")).unwrap();
    let exp_id = store_id(&exp);
    j.take();
    std::thread::sleep(std::time::Duration::from_millis(5));
    b.expire_unused_queues();
    assert!(b.queue("exp").is_none());
    assert_eq!(j.take(), [Call::DeleteQueue(exp_id)]);
}

#[test]
fn a_commit_journals_its_enqueues_and_dequeues_as_one_transaction() {
    use crate::transaction::{Settlement, Transaction};
    let (b, j) = broker();
    let q = b.declare_queue("q", durable(), false, 1).unwrap().0;
    let out = b.declare_queue("out", durable(), false, 1).unwrap().0;
    let ex = b.exchange("").unwrap();
    b.publish(&ex, persistent("q", "in")).unwrap();
    j.take();
    let ob = consume_all(&b, &q);
    let (pos, m) = take_positions(&ob).remove(0);
    let consumed = m.store_id().unwrap();
    let mut tx = Transaction::new();
    tx.settle(q.clone(), pos, m, Settlement::Accept);
    tx.publish(ex.clone(), persistent("out", "result"));
    tx.publish(ex.clone(), transient("out"));
    let outcome = b.commit(&mut tx);
    let calls = j.take();
    // Routed (and journaled) before the settlements apply.
    let [Call::InTx(t, first), Call::InTx(t2, second), Call::CommitTx(t3)] = &calls[..] else {
        panic!("{calls:?}");
    };
    assert!(t == t2 && t2 == t3, "{calls:?}");
    assert!(matches!(&**first, Call::Enqueue(_, qs) if qs == &[store_id(&out)]));
    assert_eq!(**second, Call::Dequeue(store_id(&q), vec![consumed]));
    assert!(outcome.sync.is_some());
    assert_eq!(out.message_count(), 2);
    // A commit touching nothing durable writes nothing, not even a commit record.
    let mut tx = Transaction::new();
    tx.publish(ex.clone(), transient("out"));
    assert_eq!(b.commit(&mut tx).sync, None);
    assert!(j.take().is_empty());
}

#[test]
fn exchange_to_exchange_bindings_are_journaled_between_durable_exchanges_only() {
    let (b, j) = broker();
    let durable_opts = ExchangeOptions {
        durable: true,
        ..ExchangeOptions::default()
    };
    b.declare_exchange("d", ExchangeKind::Fanout, durable_opts, false)
        .unwrap();
    b.declare_exchange("t", ExchangeKind::Fanout, ExchangeOptions::default(), false)
        .unwrap();
    j.take();
    let none = Arguments::new();
    b.bind_exchange("d", "amq.topic", "a.#", &none).unwrap();
    b.bind_exchange("t", "amq.topic", "b.#", &none).unwrap();
    b.bind_exchange("d", "t", "c", &none).unwrap();
    b.unbind_exchange("d", "amq.topic", "a.#").unwrap();
    b.unbind_exchange("t", "amq.topic", "b.#").unwrap();
    // One binding of two under a key (bound twice: the second changes nothing and is not
    // journaled), then one that is not there.
    let some: Arguments = [("x-a", HeaderValue::Int(1))].into_iter().collect();
    b.bind_exchange("d", "amq.topic", "e", &none).unwrap();
    b.bind_exchange("d", "amq.topic", "e", &some).unwrap();
    b.bind_exchange("d", "amq.topic", "e", &some).unwrap();
    b.unbind_exchange_with_arguments("d", "amq.topic", "e", &some)
        .unwrap();
    b.unbind_exchange_with_arguments("d", "amq.topic", "e", &some)
        .unwrap();
    let key = |k: &str| ("d".to_owned(), "amq.topic".to_owned(), k.to_owned());
    let (d, s, e) = key("e");
    assert_eq!(
        j.take(),
        [
            Call::BindExchange("d".into(), "amq.topic".into(), "a.#".into(), none.clone()),
            Call::UnbindExchange("d".into(), "amq.topic".into(), "a.#".into()),
            Call::BindExchange(d.clone(), s.clone(), e.clone(), none.clone()),
            Call::BindExchange(d.clone(), s.clone(), e.clone(), some.clone()),
            Call::UnbindExchangeOne(d, s, e, some.clone()),
        ]
    );
    assert_eq!(b.exchange("amq.topic").unwrap().binding_count(), 1);
    b.unbind_exchange("d", "amq.topic", "e").unwrap();
    j.refuse.store(true, Ordering::Relaxed);
    assert!(b.bind_exchange("d", "amq.topic", "x", &none).is_err());
    assert_eq!(b.exchange("amq.topic").unwrap().binding_count(), 0);
}

fn budgeted(budget: u64) -> (Arc<Broker>, Arc<MemoryJournal>) {
    let j = MemoryJournal::new();
    let config = BrokerConfig {
        persistent_memory_budget: Some(budget),
        ..BrokerConfig::default()
    };
    (Broker::with_journal(config, j.clone()), j)
}

fn numbered(key: &str, i: u32, size: usize) -> Message {
    numbered_parts(key, i, size).build()
}

fn numbered_parts(key: &str, i: u32, size: usize) -> MessageParts {
    let mut body = vec![0u8; size];
    body[..4].copy_from_slice(&i.to_be_bytes());
    let mut m = MessageParts::new("", key.to_owned(), Bytes::from(body));
    m.persistent = true;
    m
}

fn number(body: &[u8]) -> u32 {
    u32::from_be_bytes([body[0], body[1], body[2], body[3]])
}

#[test]
fn a_queue_over_the_budget_keeps_contents_on_disk_and_reads_them_back_in_order() {
    let (b, j) = budgeted(256 << 10);
    let q = b.declare_queue("deep", durable(), false, 1).unwrap().0;
    let ex = b.exchange("").unwrap();
    const N: u32 = 400;
    for i in 0..N {
        b.publish(&ex, numbered("deep", i, 4096)).unwrap();
    }
    // A transient message among them stays in memory whatever the budget.
    b.publish(&ex, transient("deep")).unwrap();
    let offload = b.offload.clone().unwrap();
    assert!(offload.resident() <= 256 << 10, "{}", offload.resident());
    assert!(b.memory_used() <= 300 << 10, "{}", b.memory_used());
    assert_eq!(q.message_count(), u64::from(N) + 1);
    assert_eq!(q.byte_count(), u64::from(N) * 4096);
    let ob = consume_all(&b, &q);
    let got = take_positions(&ob);
    assert_eq!(got.len(), N as usize + 1);
    for (i, (_, m)) in got.iter().take(N as usize).enumerate() {
        assert_eq!(m.body().len(), 4096);
        assert_eq!(number(m.body()), i as u32, "in order, with its own body");
        assert!(m.store_id().is_some());
    }
    let loads = j.loads.lock().clone();
    assert!(!loads.is_empty());
    assert!(
        loads.len() < 10,
        "read back in batches: {} reads",
        loads.len()
    );
    assert!(
        q.accept_all(&got.iter().map(|(p, _)| *p).collect::<Vec<_>>(), &mut []) == N as usize + 1
    );
    assert_eq!(offload.resident(), 0);
    assert_eq!(b.memory_used(), 0);
}

/// RabbitMQ's `x-max-length-bytes` counts bodies only, also for messages whose content is on
/// disk (their stand-ins keep the body's length); qpidd's `qpid.max_size` counts headers too.
#[test]
fn byte_limits_count_bodies_or_whole_messages_as_their_scope_says_also_on_disk() {
    use crate::limits::{LimitPolicy, LimitScope};
    let with_header = |i: u32| {
        let mut m = numbered_parts("q", i, 4096);
        m.header = crate::message::ProtocolHeader::Amqp1(Bytes::from(vec![1u8; 100]));
        m.build()
    };
    let fill = |scope| {
        let (b, _j) = budgeted(64 << 10);
        let mut opts = durable();
        opts.limits = QueueLimits {
            max_size: Some(40 * 4096),
            policy: LimitPolicy::Reject,
            scope,
            ..QueueLimits::default()
        };
        let q = b.declare_queue("q", opts, false, 1).unwrap().0;
        let ex = b.exchange("").unwrap();
        let taken = (0..41)
            .take_while(|i| b.publish(&ex, with_header(*i)).is_ok())
            .count();
        (b, q, taken)
    };
    let (_, _, taken) = fill(LimitScope::Depth);
    assert_eq!(taken, 39, "40 bodies with their headers exceed the limit");
    let (b, q, taken) = fill(LimitScope::Ready);
    assert_eq!(taken, 40);
    assert!(
        b.offload.as_ref().unwrap().resident() < 40 * 4096,
        "most are on disk"
    );
    // Taking messages off the queue (read back from disk) gives their bodies' room back.
    for _ in 0..10 {
        let got = q.get().unwrap();
        assert!(q.accept(got.position));
    }
    let ex = b.exchange("").unwrap();
    for i in 100..110 {
        b.publish(&ex, with_header(i)).unwrap();
    }
    assert!(b.publish(&ex, with_header(110)).is_err(), "full again");
}

#[test]
fn contents_on_disk_serve_get_browse_purge_and_dead_letters() {
    use crate::value::HeaderValue as V;
    let (b, _j) = budgeted(64 << 10);
    b.declare_queue("dlq", durable(), false, 1).unwrap();
    b.bind("dlq", "amq.fanout", "", &Arguments::new()).unwrap();
    let mut opts = durable();
    opts.arguments = [("x-message-ttl", V::Int(60_000))].into_iter().collect();
    opts.alternate_exchange = Some("amq.fanout".into());
    let q = b.declare_queue("q", opts, false, 1).unwrap().0;
    let ex = b.exchange("").unwrap();
    for i in 0..64 {
        b.publish(&ex, numbered("q", i, 4096)).unwrap();
    }
    let offload = b.offload.clone().unwrap();
    assert!(offload.resident() < 64 * 4096);
    // basic.get reads back what it needs, in order.
    for i in 0..20 {
        let got = q.get().unwrap();
        assert_eq!(number(got.message.body()), i);
        assert!(got.message.expires_at().is_some(), "the queue TTL is kept");
        assert!(q.accept(got.position));
    }
    // A browser sees contents without changing the queue.
    let ob = Outbox::new();
    q.subscribe(ConsumerSpec {
        id: 77,
        outbox: ob.clone(),
        owner: 1,
        connection: 0,
        tag: Bytes::new(),
        acquire: false,
        exclusive: false,
        window: None,
        filter: None,
        ack_timeout: None,
    })
    .unwrap();
    q.add_credit(77, u32::MAX, u32::MAX).unwrap();
    let seen: Vec<u32> = take_positions(&ob)
        .iter()
        .map(|(_, m)| number(m.body()))
        .collect();
    assert_eq!(seen, (20..64).collect::<Vec<u32>>());
    b.cancel_consumer(&q, 77);
    // Deleting the queue routes its messages, contents read back, to the alternate.
    assert_eq!(b.delete_queue("q", false, false, 1).unwrap(), 44);
    let dlq = b.queue("dlq").unwrap();
    let bodies = dlq.queued_bodies();
    assert_eq!(bodies.len(), 44);
    assert!(bodies.iter().zip(20..).all(|(body, i)| number(body) == i));
    assert_eq!(dlq.purge(), 44);
    assert_eq!(offload.resident(), 0);
    assert_eq!(b.memory_used(), 0);
}

/// A browser whose deliveries count against a settlement window takes a slot only for what
/// it is actually sent: a content the journal lost is skipped without one.
#[test]
fn browsing_past_a_lost_content_takes_no_window_slot() {
    let (b, j) = budgeted(64 << 10);
    let q = b.declare_queue("q", durable(), false, 1).unwrap().0;
    let ex = b.exchange("").unwrap();
    for i in 0..64 {
        b.publish(&ex, numbered("q", i, 4096)).unwrap();
    }
    // The journal loses every content: only those still in memory can be shown.
    j.contents.lock().clear();
    let window = crate::SettleWindow::with_limit(1000).unwrap();
    let ob = Outbox::new();
    q.subscribe(ConsumerSpec {
        id: 5,
        outbox: ob.clone(),
        owner: 1,
        connection: 0,
        tag: Bytes::new(),
        acquire: false,
        exclusive: false,
        window: Some(window.clone()),
        filter: None,
        ack_timeout: None,
    })
    .unwrap();
    q.add_credit(5, u32::MAX, u32::MAX).unwrap();
    let shown = take_positions(&ob).len() as u32;
    assert!(0 < shown && shown < 64, "{shown} shown");
    assert_eq!(window.available(), 1000 - shown);
}

#[test]
fn settling_a_message_of_a_deleted_queue_journals_nothing() {
    // A cluster's replicated queue taken down with a leadership is deleted here and lives
    // on in the replica: a settlement of a message it had delivered must not reach the
    // journal (the next leader still has the message). A store's own deleted queue already
    // dropped everything with its deletion's record.
    let (b, j) = broker();
    let q = b.declare_queue("q", durable(), false, 1).unwrap().0;
    let ex = b.exchange("").unwrap();
    for body in ["a", "b"] {
        b.publish(&ex, persistent("q", body)).unwrap();
    }
    let (first, second) = (q.get().unwrap(), q.get().unwrap());
    b.delete_queue("q", false, false, 0).unwrap();
    j.take();
    let _ = q.accept(first.position);
    let mut tx = b.transaction();
    tx.settle(
        q.clone(),
        second.position,
        second.message,
        crate::transaction::Settlement::Accept,
    );
    b.commit(&mut tx);
    let calls = j.take();
    assert!(
        !calls.iter().any(|c| matches!(c, Call::Dequeue(..))
            || matches!(c, Call::InTx(_, d) if matches!(**d, Call::Dequeue(..)))),
        "{calls:?}"
    );
}
