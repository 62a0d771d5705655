use crate::MessageParts;
use std::sync::Arc;

use bytes::Bytes;

use super::*;
use crate::error::BrokerError;
use crate::message::DeathReason;
use crate::message::{now_ms, Message};
use crate::queue::ConsumerSpec;
use crate::queue::QueueOptions;
use crate::queue::{Outbox, OutboxItem};
use crate::value::Arguments;
use crate::value::HeaderValue as V;

const ME: OwnerId = 1;
const OTHER: OwnerId = 2;

fn broker() -> Arc<Broker> {
    Broker::new(BrokerConfig::default())
}

fn declare(b: &Broker, name: &str) -> Arc<Queue> {
    b.declare_queue(name, QueueOptions::default(), false, ME)
        .unwrap()
        .0
}

fn msg(exchange: &str, key: &str, body: &'static str) -> Message {
    Message::new(
        exchange.to_owned(),
        key.to_owned(),
        Bytes::from_static(body.as_bytes()),
    )
}

fn publish(b: &Broker, exchange: &str, key: &str, body: &'static str) -> usize {
    let ex = b.exchange(exchange).unwrap();
    b.publish(&ex, msg(exchange, key, body)).unwrap().queues
}

fn bodies(q: &Queue) -> Vec<Bytes> {
    q.queued_bodies()
}

fn bs(s: &'static str) -> Bytes {
    Bytes::from_static(s.as_bytes())
}

fn subscribe(b: &Broker, q: &Arc<Queue>, ob: &Arc<Outbox>, owner: OwnerId) -> ConsumerId {
    let id = b.next_consumer_id();
    q.subscribe(ConsumerSpec {
        id,
        outbox: ob.clone(),
        owner,
        connection: 0,
        tag: b_tag(id),
        acquire: true,
        exclusive: false,
        window: None,
        filter: None,
        ack_timeout: None,
    })
    .unwrap();
    id
}

fn b_tag(id: u64) -> Bytes {
    Bytes::from(format!("t{id}"))
}

fn alt_opts(alt: &str) -> QueueOptions {
    QueueOptions {
        alternate_exchange: Some(alt.to_owned()),
        ..QueueOptions::default()
    }
}

#[test]
fn builtin_exchanges_exist_with_their_types() {
    let b = broker();
    for (name, kind) in [
        ("", ExchangeKind::Direct),
        ("amq.direct", ExchangeKind::Direct),
        ("amq.fanout", ExchangeKind::Fanout),
        ("amq.topic", ExchangeKind::Topic),
        ("amq.match", ExchangeKind::Headers),
    ] {
        let ex = b.exchange(name).unwrap();
        assert_eq!(ex.kind(), kind, "{name:?}");
        assert!(ex.is_builtin());
    }
    assert!(Arc::ptr_eq(b.default_exchange(), &b.exchange("").unwrap()));
}

#[test]
fn default_exchange_routes_by_queue_name() {
    let b = broker();
    let q = declare(&b, "orders");
    assert_eq!(publish(&b, "", "orders", "x"), 1);
    assert_eq!(publish(&b, "", "nobody", "y"), 0);
    assert_eq!(bodies(&q), [bs("x")]);
    b.delete_queue("orders", false, false, ME).unwrap();
    assert_eq!(publish(&b, "", "orders", "z"), 0);
}

#[test]
fn default_exchange_cannot_be_bound_declared_or_deleted() {
    let b = broker();
    declare(&b, "q");
    assert!(matches!(
        b.bind("q", "", "k", &Arguments::new()),
        Err(BrokerError::NotAllowed(_))
    ));
    assert!(matches!(
        b.unbind("q", "", "q"),
        Err(BrokerError::NotAllowed(_))
    ));
    assert!(matches!(
        b.declare_exchange("", ExchangeKind::Direct, ExchangeOptions::default(), false),
        Err(BrokerError::NotAllowed(_))
    ));
    assert!(b
        .declare_exchange("", ExchangeKind::Direct, ExchangeOptions::default(), true)
        .is_ok());
    assert!(matches!(
        b.delete_exchange("", false),
        Err(BrokerError::NotAllowed(_))
    ));
}

#[test]
fn exchange_declare_rules() {
    let b = broker();
    let opts = ExchangeOptions::default;
    let e = b
        .declare_exchange("e", ExchangeKind::Topic, opts(), false)
        .unwrap();
    let again = b
        .declare_exchange("e", ExchangeKind::Topic, opts(), false)
        .unwrap();
    assert!(Arc::ptr_eq(&e, &again));
    assert!(matches!(
        b.declare_exchange("e", ExchangeKind::Direct, opts(), false),
        Err(BrokerError::NotAllowed(_))
    ));
    assert!(b
        .declare_exchange("e", ExchangeKind::Direct, opts(), true)
        .is_ok());
    assert!(matches!(
        b.declare_exchange("missing", ExchangeKind::Direct, opts(), true),
        Err(BrokerError::NotFound(_))
    ));
    assert!(matches!(
        b.declare_exchange("amq.custom", ExchangeKind::Direct, opts(), false),
        Err(BrokerError::NotAllowed(_))
    ));
    assert!(b
        .declare_exchange("amq.direct", ExchangeKind::Direct, opts(), false)
        .is_ok());
    assert!(matches!(
        b.declare_exchange("amq.direct", ExchangeKind::Fanout, opts(), false),
        Err(BrokerError::NotAllowed(_))
    ));
    let with_alt = |alt: &str| ExchangeOptions {
        alternate_exchange: Some(alt.to_owned()),
        ..ExchangeOptions::default()
    };
    assert!(matches!(
        b.declare_exchange("f", ExchangeKind::Fanout, with_alt("nope"), false),
        Err(BrokerError::NotFound(_))
    ));
    let f = b
        .declare_exchange("f", ExchangeKind::Fanout, with_alt("e"), false)
        .unwrap();
    assert_eq!(f.alternate().map(|a| a.name()), Some("e"));
    assert!(matches!(
        b.declare_exchange("f", ExchangeKind::Fanout, with_alt("amq.topic"), false),
        Err(BrokerError::NotAllowed(_))
    ));
    let info = b.exchange_info("f").unwrap();
    assert_eq!(info.kind.name(), "fanout");
    assert_eq!(info.alternate_exchange.as_deref(), Some("e"));
}

#[test]
fn exchange_delete_rules() {
    let b = broker();
    let opts = ExchangeOptions::default;
    assert!(matches!(
        b.delete_exchange("amq.topic", false),
        Err(BrokerError::NotAllowed(_))
    ));
    assert!(matches!(
        b.delete_exchange("missing", false),
        Err(BrokerError::NotFound(_))
    ));
    let e = b
        .declare_exchange("e", ExchangeKind::Direct, opts(), false)
        .unwrap();
    declare(&b, "q");
    b.bind("q", "e", "k", &Arguments::new()).unwrap();
    assert!(matches!(
        b.delete_exchange("e", true),
        Err(BrokerError::PreconditionFailed(_))
    ));
    b.declare_queue("alt-user", alt_opts("e"), false, ME)
        .unwrap();
    assert!(matches!(
        b.delete_exchange("e", false),
        Err(BrokerError::NotAllowed(_))
    ));
    b.delete_queue("alt-user", false, false, ME).unwrap();
    b.delete_exchange("e", false).unwrap();
    assert!(b.exchange("e").is_none());
    assert!(matches!(
        b.publish(&e, msg("e", "k", "x")),
        Err(BrokerError::NotFound(_))
    ));
    // The queue forgot the binding: deleting it later does not touch the dead exchange.
    assert_eq!(b.delete_queue("q", false, false, ME).unwrap(), 0);
}

#[test]
fn exchange_used_as_exchange_alternate_cannot_be_deleted() {
    let b = broker();
    b.declare_exchange(
        "alt",
        ExchangeKind::Fanout,
        ExchangeOptions::default(),
        false,
    )
    .unwrap();
    let opts = ExchangeOptions {
        alternate_exchange: Some("alt".into()),
        ..ExchangeOptions::default()
    };
    b.declare_exchange("main", ExchangeKind::Direct, opts, false)
        .unwrap();
    assert!(matches!(
        b.delete_exchange("alt", false),
        Err(BrokerError::NotAllowed(_))
    ));
    b.delete_exchange("main", false).unwrap();
    b.delete_exchange("alt", false).unwrap();
}

#[test]
fn auto_delete_exchange_goes_with_its_last_binding() {
    let b = broker();
    let opts = ExchangeOptions {
        auto_delete: true,
        ..ExchangeOptions::default()
    };
    b.declare_exchange("ad", ExchangeKind::Direct, opts, false)
        .unwrap();
    declare(&b, "q1");
    declare(&b, "q2");
    b.bind("q1", "ad", "k", &Arguments::new()).unwrap();
    b.bind("q2", "ad", "k", &Arguments::new()).unwrap();
    b.unbind("q1", "ad", "k").unwrap();
    assert!(b.exchange("ad").is_some());
    b.delete_queue("q2", false, false, ME).unwrap();
    assert!(b.exchange("ad").is_none());
}

#[test]
fn queue_declare_rules() {
    let b = broker();
    let (q, created) = b
        .declare_queue("q", QueueOptions::default(), false, ME)
        .unwrap();
    assert!(created);
    let (q2, created) = b
        .declare_queue("q", QueueOptions::default(), false, OTHER)
        .unwrap();
    assert!(!created && Arc::ptr_eq(&q, &q2));
    assert!(matches!(
        b.declare_queue("missing", QueueOptions::default(), true, ME),
        Err(BrokerError::NotFound(_))
    ));
    assert!(matches!(
        b.declare_queue("amq.q", QueueOptions::default(), false, ME),
        Err(BrokerError::NotAllowed(_))
    ));
    assert!(matches!(
        b.declare_queue("", QueueOptions::default(), false, ME),
        Err(BrokerError::InvalidArgument(_))
    ));
    assert!(matches!(
        b.declare_queue("a", alt_opts("nope"), false, ME),
        Err(BrokerError::NotFound(_))
    ));
    b.declare_queue("a", alt_opts("amq.fanout"), false, ME)
        .unwrap();
    assert!(matches!(
        b.declare_queue("a", alt_opts("amq.topic"), false, ME),
        Err(BrokerError::NotAllowed(_))
    ));
    // Durable / auto-delete are sticky on redeclare.
    let durable = QueueOptions {
        durable: true,
        auto_delete: true,
        ..QueueOptions::default()
    };
    let (q, _) = b.declare_queue("q", durable, false, ME).unwrap();
    assert!(!q.is_durable() && !q.is_auto_delete());
}

#[test]
fn exclusive_queues_are_locked_to_their_session() {
    let b = broker();
    let excl = QueueOptions {
        exclusive_owner: Some(ME),
        ..QueueOptions::default()
    };
    let (q, _) = b.declare_queue("x", excl.clone(), false, ME).unwrap();
    assert!(q.is_exclusive());
    for passive in [false, true] {
        assert!(matches!(
            b.declare_queue("x", QueueOptions::default(), passive, OTHER),
            Err(BrokerError::ResourceLocked(_))
        ));
    }
    assert!(b.declare_queue("x", excl, false, ME).is_ok());
    assert!(matches!(
        b.delete_queue("x", false, false, OTHER),
        Err(BrokerError::ResourceLocked(_))
    ));
    let info = b.queue_info("x").unwrap();
    assert!(info.exclusive);

    // An exclusive declare of an unowned queue claims it.
    declare(&b, "shared");
    let claim = QueueOptions {
        exclusive_owner: Some(OTHER),
        ..QueueOptions::default()
    };
    let (s, _) = b.declare_queue("shared", claim, false, OTHER).unwrap();
    assert_eq!(s.owner(), Some(OTHER));
}

#[test]
fn release_owner_deletes_exclusive_auto_delete_and_frees_the_rest() {
    let b = broker();
    let opts = |auto_delete| QueueOptions {
        exclusive_owner: Some(ME),
        auto_delete,
        ..QueueOptions::default()
    };
    let (temp, _) = b.declare_queue("temp", opts(true), false, ME).unwrap();
    let (kept, _) = b.declare_queue("kept", opts(false), false, ME).unwrap();
    let ob = Outbox::new();
    subscribe(&b, &temp, &ob, ME);
    b.release_owner(OTHER);
    assert!(b.queue("temp").is_some());
    b.release_owner(ME);
    assert!(b.queue("temp").is_none());
    assert!(temp.is_deleted());
    assert!(!kept.is_exclusive());
    assert!(b
        .declare_queue("kept", QueueOptions::default(), true, OTHER)
        .is_ok());
    let mut items = Vec::new();
    ob.take(&mut items);
    assert!(matches!(items[..], [OutboxItem::ConsumerCancelled { .. }]));
}

#[test]
fn auto_delete_queue_goes_with_its_last_consumer_only_if_it_had_one() {
    let b = broker();
    let opts = QueueOptions {
        auto_delete: true,
        ..QueueOptions::default()
    };
    let (q, _) = b.declare_queue("ad", opts.clone(), false, ME).unwrap();
    let ob = Outbox::new();
    let c1 = subscribe(&b, &q, &ob, ME);
    let c2 = subscribe(&b, &q, &ob, OTHER);
    assert!(b.cancel_consumer(&q, c1));
    assert!(!b.cancel_consumer(&q, c1));
    assert!(b.queue("ad").is_some());
    assert!(b.cancel_consumer(&q, c2));
    assert!(b.queue("ad").is_none());
    assert!(q.is_deleted());

    // Never consumed: stays. Exclusive: stays until its session ends.
    let (never, _) = b.declare_queue("never", opts.clone(), false, ME).unwrap();
    assert_eq!(never.consumer_count(), 0);
    assert!(b.queue("never").is_some());
    let excl = QueueOptions {
        exclusive_owner: Some(ME),
        ..opts
    };
    let (x, _) = b.declare_queue("xad", excl, false, ME).unwrap();
    let c = subscribe(&b, &x, &ob, ME);
    b.cancel_consumer(&x, c);
    assert!(b.queue("xad").is_some());
}

#[test]
fn queue_delete_rules_and_orphans_go_to_alternate() {
    let b = broker();
    let dead = declare(&b, "dead");
    b.bind("dead", "amq.fanout", "", &Arguments::new()).unwrap();
    let (q, _) = b
        .declare_queue("q", alt_opts("amq.fanout"), false, ME)
        .unwrap();
    b.bind("q", "amq.direct", "k", &Arguments::new()).unwrap();
    publish(&b, "", "q", "1");
    publish(&b, "", "q", "2");
    let ob = Outbox::new();
    let c = subscribe(&b, &q, &ob, ME);
    assert!(matches!(
        b.delete_queue("q", true, false, ME),
        Err(BrokerError::PreconditionFailed(_))
    ));
    b.cancel_consumer(&q, c);
    assert!(matches!(
        b.delete_queue("q", false, true, ME),
        Err(BrokerError::PreconditionFailed(_))
    ));
    let c = subscribe(&b, &q, &ob, ME);
    assert_eq!(b.delete_queue("q", false, false, ME).unwrap(), 2);
    assert_eq!(bodies(&dead), [bs("1"), bs("2")]);
    assert_eq!(b.exchange("amq.direct").unwrap().binding_count(), 0);
    let mut items = Vec::new();
    ob.take(&mut items);
    assert!(matches!(
        &items[..],
        [OutboxItem::ConsumerCancelled { consumer, queue, .. }] if *consumer == c && queue == "q"
    ));
    assert!(matches!(
        b.delete_queue("q", false, false, ME),
        Err(BrokerError::NotFound(_))
    ));
    assert!(matches!(
        b.delete_queue("", false, false, ME),
        Err(BrokerError::InvalidArgument(_))
    ));
}

#[test]
fn acquired_messages_go_to_the_alternate_in_queue_order_when_the_queue_is_deleted() {
    // qpidd (QPID-3481): "even acquired messages are treated as abandoned"; settling them
    // afterwards does nothing.
    let b = broker();
    let dead = declare(&b, "dead");
    b.bind("dead", "amq.fanout", "", &Arguments::new()).unwrap();
    let (q, _) = b
        .declare_queue("q", alt_opts("amq.fanout"), false, ME)
        .unwrap();
    for body in ["1", "2", "3", "4", "5"] {
        publish(&b, "", "q", body);
    }
    let ob = Outbox::new();
    let c = subscribe(&b, &q, &ob, ME);
    q.add_credit(c, 3, u32::MAX).unwrap();
    let mut items = Vec::new();
    ob.take(&mut items);
    let held: Vec<_> = items
        .into_iter()
        .filter_map(|i| match i {
            OutboxItem::Deliver(d) => Some(d),
            _ => None,
        })
        .collect();
    assert_eq!(held.len(), 3);
    // The middle one is released first, so the queue order is 1, 3 (acquired), 2, 4, 5.
    q.release([(held[1].position, held[1].message.clone())], false);
    let ob2 = Outbox::new();
    let c2 = subscribe(&b, &q, &ob2, OTHER);
    q.add_credit(c2, 1, u32::MAX).unwrap();
    assert_eq!(b.delete_queue("q", false, false, ME).unwrap(), 5);
    assert_eq!(bodies(&dead), [bs("1"), bs("2"), bs("3"), bs("4"), bs("5")]);
    assert_eq!(
        q.release([(held[0].position, held[0].message.clone())], true),
        0
    );
    assert!(!q.accept(held[2].position));
    assert_eq!(dead.message_count(), 5, "rerouted once");
    assert_eq!(q.unsettled_count(), 0);
    // The broker's totals keep the deleted queue's counts.
    let retired = b.retired_counters();
    assert_eq!(
        (
            retired.enqueued,
            retired.abandoned_via_alternate,
            retired.abandoned
        ),
        (5, 5, 0)
    );
    let totals = b.overview().queue_totals;
    assert_eq!((totals.enqueued, totals.abandoned_via_alternate), (10, 5));
}

#[test]
fn without_an_alternate_acquired_messages_stay_with_their_consumer() {
    let b = broker();
    let q = declare(&b, "q");
    publish(&b, "", "q", "held");
    let ob = Outbox::new();
    let c = subscribe(&b, &q, &ob, ME);
    q.add_credit(c, 1, u32::MAX).unwrap();
    let mut items = Vec::new();
    ob.take(&mut items);
    let Some(OutboxItem::Deliver(d)) = items.pop() else {
        panic!("expected a delivery")
    };
    assert_eq!(b.delete_queue("q", false, false, ME).unwrap(), 0);
    assert!(q.accept(d.position));
    // qpidd counts it abandoned all the same.
    let retired = b.retired_counters();
    assert_eq!((retired.abandoned, retired.abandoned_via_alternate), (1, 0));
}

#[test]
fn reject_goes_to_alternate_or_is_dropped() {
    let b = broker();
    let dead = declare(&b, "dead");
    b.bind("dead", "amq.fanout", "", &Arguments::new()).unwrap();
    let (q, _) = b
        .declare_queue("q", alt_opts("amq.fanout"), false, ME)
        .unwrap();
    let plain = declare(&b, "plain");
    publish(&b, "", "q", "r");
    publish(&b, "", "plain", "p");
    let ob = Outbox::new();
    let c1 = subscribe(&b, &q, &ob, ME);
    let c2 = subscribe(&b, &plain, &ob, ME);
    q.add_credit(c1, 1, u32::MAX).unwrap();
    plain.add_credit(c2, 1, u32::MAX).unwrap();
    let mut items = Vec::new();
    ob.take(&mut items);
    for item in items {
        let OutboxItem::Deliver(d) = item else {
            panic!("expected deliveries")
        };
        assert!(d.queue.reject(d.position, d.message.clone()));
        assert!(!d.queue.reject(d.position, d.message.clone()));
    }
    assert_eq!(bodies(&dead), [bs("r")]);
    assert_eq!(plain.message_count() + plain.unsettled_count(), 0);
}

#[test]
fn unroutable_goes_to_exchange_alternate_else_dropped() {
    let b = broker();
    let dead = declare(&b, "dead");
    b.bind("dead", "amq.fanout", "", &Arguments::new()).unwrap();
    let opts = ExchangeOptions {
        alternate_exchange: Some("amq.fanout".into()),
        ..ExchangeOptions::default()
    };
    b.declare_exchange("e", ExchangeKind::Direct, opts, false)
        .unwrap();
    let live = declare(&b, "live");
    b.bind("live", "e", "hit", &Arguments::new()).unwrap();
    assert_eq!(publish(&b, "e", "miss", "m"), 1);
    assert_eq!(publish(&b, "e", "hit", "h"), 1);
    assert_eq!(bodies(&dead), [bs("m")]);
    assert_eq!(bodies(&live), [bs("h")]);
    assert_eq!(publish(&b, "amq.direct", "miss", "x"), 0);
}

#[test]
fn fanout_shares_one_body_across_many_queues() {
    let b = broker();
    let queues: Vec<Arc<Queue>> = (0..200)
        .map(|i| {
            let name = format!("f{i}");
            let q = declare(&b, &name);
            b.bind(&name, "amq.fanout", "", &Arguments::new()).unwrap();
            q
        })
        .collect();
    let body = Bytes::from(vec![7u8; 4096]);
    let m = Message::new("amq.fanout", "", body.clone());
    let ex = b.exchange("amq.fanout").unwrap();
    assert_eq!(b.publish(&ex, m).unwrap().queues, 200);
    for q in &queues {
        let got = bodies(q);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].as_ptr(), body.as_ptr(), "body was copied");
    }
}

#[test]
fn limit_refusal_still_delivers_elsewhere() {
    let b = broker();
    let small = QueueOptions {
        limits: QueueLimits {
            max_count: Some(1),
            ..QueueLimits::default()
        },
        ..QueueOptions::default()
    };
    let (full, _) = b.declare_queue("full", small, false, ME).unwrap();
    let roomy = declare(&b, "roomy");
    for q in ["full", "roomy"] {
        b.bind(q, "amq.fanout", "", &Arguments::new()).unwrap();
    }
    let ex = b.exchange("amq.fanout").unwrap();
    assert_eq!(
        b.publish(&ex, msg("amq.fanout", "", "1")).unwrap().queues,
        2
    );
    let err = b.publish(&ex, msg("amq.fanout", "", "2")).unwrap_err();
    assert!(matches!(&err, BrokerError::ResourceLimitExceeded(s) if s.contains("full")));
    assert_eq!(full.message_count(), 1);
    assert_eq!(bodies(&roomy), [bs("1"), bs("2")]);
}

#[test]
fn default_limits_apply_to_unlimited_declares() {
    let b = Broker::new(BrokerConfig {
        default_limits: QueueLimits {
            max_count: Some(1),
            ..QueueLimits::default()
        },
        ..BrokerConfig::default()
    });
    let q = declare(&b, "q");
    assert_eq!(q.limits().max_count, Some(1));
    publish(&b, "", "q", "1");
    let ex = b.default_exchange().clone();
    assert!(b.publish(&ex, msg("", "q", "2")).is_err());
}

#[test]
fn a_publish_names_a_consumed_queue_over_the_backlog_hold() {
    let b = Broker::new(BrokerConfig {
        backlog_hold: Some(10),
        ..BrokerConfig::default()
    });
    let q = declare(&b, "q");
    let ex = b.default_exchange().clone();
    let backlogged = |body| {
        b.publish(&ex, msg("", "q", body))
            .unwrap()
            .backlogged
            .map(|q| q.name().to_owned())
    };
    assert_eq!(backlogged("0123456789abc"), None, "no consumers: never");
    let ob = Outbox::new();
    // A consumer without credit: everything stays ready on the queue.
    subscribe(&b, &q, &ob, 1);
    assert_eq!(q.backlog().ready_bytes, 13);
    assert_eq!(backlogged("x"), Some("q".to_owned()), "14 bytes ready > 10");
    q.purge();
    assert_eq!(backlogged("short"), None, "5 bytes ready");
    // Broker-internal routing never asks.
    let plain = broker();
    let pq = declare(&plain, "q");
    subscribe(&plain, &pq, &ob, 1);
    let pex = plain.default_exchange().clone();
    for _ in 0..3 {
        let out = plain.publish(&pex, msg("", "q", "0123456789abc")).unwrap();
        assert!(out.backlogged.is_none(), "no hold configured");
    }
}

#[test]
fn expired_messages_are_dropped_on_arrival_and_by_the_sweep() {
    let b = broker();
    let q = declare(&b, "q");
    let ex = b.default_exchange().clone();
    let mut m = MessageParts::new("", "q", bs("gone"));
    m.expires_at = Some(1);
    assert_eq!(b.publish(&ex, Message::from(m)).unwrap().queues, 0);
    let mut m = MessageParts::new("", "q", bs("soon"));
    m.expires_at = Some(now_ms() + 30);
    assert_eq!(b.publish(&ex, Message::from(m)).unwrap().queues, 1);
    publish(&b, "", "q", "keep");
    std::thread::sleep(std::time::Duration::from_millis(60));
    assert_eq!(b.purge_expired(), 1);
    assert_eq!(bodies(&q), [bs("keep")]);
}

#[test]
fn headers_exchange_through_the_broker() {
    let b = broker();
    let q = declare(&b, "h");
    let args: Arguments = [("x-match", V::Str("any".into())), ("k", V::Int(1))]
        .into_iter()
        .collect();
    b.bind("h", "amq.match", "b1", &args).unwrap();
    let bad: Arguments = [("x-match", V::Str("most".into()))].into_iter().collect();
    assert!(matches!(
        b.bind("h", "amq.match", "b2", &bad),
        Err(BrokerError::InvalidArgument(_))
    ));
    let ex = b.exchange("amq.match").unwrap();
    let mut m = MessageParts::new("amq.match", "", bs("yes"));
    m.headers = Some(Arc::new([("k", V::UInt(1))].into_iter().collect()));
    assert_eq!(b.publish(&ex, Message::from(m)).unwrap().queues, 1);
    assert_eq!(bodies(&q), [bs("yes")]);
}

#[test]
fn bind_and_unbind_error_paths() {
    let b = broker();
    declare(&b, "q");
    let none = Arguments::new();
    assert!(matches!(
        b.bind("q", "nope", "k", &none),
        Err(BrokerError::NotFound(_))
    ));
    assert!(matches!(
        b.bind("nope", "amq.direct", "k", &none),
        Err(BrokerError::NotFound(_))
    ));
    b.bind("q", "amq.direct", "k", &none).unwrap();
    b.bind("q", "amq.direct", "k", &none).unwrap();
    assert_eq!(b.exchange("amq.direct").unwrap().binding_count(), 1);
    b.unbind("q", "amq.direct", "k").unwrap();
    b.unbind("q", "amq.direct", "k").unwrap();
    assert!(matches!(
        b.unbind("q", "nope", "k"),
        Err(BrokerError::NotFound(_))
    ));
    assert!(matches!(
        b.purge_queue("nope"),
        Err(BrokerError::NotFound(_))
    ));
}

#[test]
fn bound_reports_each_criterion() {
    let b = broker();
    declare(&b, "used");
    declare(&b, "unused");
    b.bind("used", "amq.direct", "key", &Arguments::new())
        .unwrap();
    let ok = BoundResult::default();
    assert_eq!(b.bound("amq.direct", Some("used"), None, None), ok);
    assert_eq!(b.bound("amq.direct", None, Some("key"), None), ok);
    assert_eq!(b.bound("amq.direct", Some("used"), Some("key"), None), ok);
    assert!(
        b.bound("amq.direct", Some("unused"), None, None)
            .queue_not_matched
    );
    let r = b.bound("amq.direct", Some("used"), Some("other"), None);
    assert!(!r.queue_not_matched && r.key_not_matched);
    let r = b.bound("amq.direct", Some("unused"), Some("key"), None);
    assert!(r.queue_not_matched && !r.key_not_matched);
    let r = b.bound("amq.direct", Some("unused"), Some("other"), None);
    assert!(r.queue_not_matched && r.key_not_matched);
    let r = b.bound("amq.direct", Some("unknown"), None, None);
    assert!(r.queue_not_found && !r.exchange_not_found);
    let r = b.bound("unknown", Some("used"), None, None);
    assert!(r.exchange_not_found && !r.queue_not_found);
    let r = b.bound("unknown", Some("unknown"), None, None);
    assert!(r.exchange_not_found && r.queue_not_found);
    // The default exchange reports its implicit bindings.
    assert_eq!(b.bound("", Some("used"), Some("used"), None), ok);
    assert!(
        !b.bound("", Some("used"), Some("unused"), None)
            .queue_not_matched
    );
}

#[test]
fn bound_matches_arguments() {
    let b = broker();
    declare(&b, "q");
    let args: Arguments = [("a", V::Int(1))].into_iter().collect();
    let other: Arguments = [("a", V::Int(2))].into_iter().collect();
    b.bind("q", "amq.match", "k", &args).unwrap();
    assert_eq!(
        b.bound("amq.match", Some("q"), None, Some(&args)),
        BoundResult::default()
    );
    let r = b.bound("amq.match", Some("q"), None, Some(&other));
    assert!(r.args_not_matched && !r.queue_not_matched);
    // Empty arguments mean "not asked".
    assert_eq!(
        b.bound("amq.match", Some("q"), None, Some(&Arguments::new())),
        BoundResult::default()
    );
}

#[test]
fn queue_info_reports_counts() {
    let b = broker();
    let q = declare(&b, "q");
    publish(&b, "", "q", "1");
    let ob = Outbox::new();
    subscribe(&b, &q, &ob, ME);
    let info = b.queue_info("q").unwrap();
    assert_eq!((info.message_count, info.consumer_count), (1, 1));
    assert!(!info.exclusive && !info.durable);
    assert_eq!(b.purge_queue("q").unwrap(), 1);
    assert_eq!(b.queue_info("q").unwrap().message_count, 0);
}

#[test]
fn subscribe_on_a_deleted_queue_fails() {
    let b = broker();
    let q = declare(&b, "q");
    b.delete_queue("q", false, false, ME).unwrap();
    let ob = Outbox::new();
    let err = q.subscribe(ConsumerSpec {
        id: 1,
        outbox: ob,
        owner: ME,
        connection: 0,
        tag: Bytes::new(),
        acquire: true,
        exclusive: false,
        window: None,
        filter: None,
        ack_timeout: None,
    });
    assert!(matches!(err, Err(BrokerError::NotFound(_))));
}

#[test]
fn server_named_queues_may_use_reserved_prefixes_and_are_unique() {
    let b = broker();
    let a = b
        .declare_server_named_queue("amq.gen-", QueueOptions::default())
        .unwrap();
    let c = b
        .declare_server_named_queue("amq.gen-", QueueOptions::default())
        .unwrap();
    assert!(a.name().starts_with("amq.gen-"));
    assert_ne!(a.name(), c.name());
    assert_eq!(publish(&b, "", a.name(), "x"), 1);
    assert!(b
        .declare_queue("amq.gen-mine", QueueOptions::default(), false, ME)
        .is_err());
}

pub(super) fn declare_with(b: &Broker, name: &str, opts: QueueOptions) -> Arc<Queue> {
    b.declare_queue(name, opts, false, ME).unwrap().0
}

pub(super) fn declare_with_args(b: &Broker, name: &str, args: &[(&str, V)]) -> Arc<Queue> {
    let opts = QueueOptions {
        arguments: args.iter().cloned().collect(),
        ..QueueOptions::default()
    };
    declare_with(b, name, opts)
}

fn dead_letter_setup(b: &Broker) -> Arc<Queue> {
    let dlx = ExchangeOptions::default();
    b.declare_exchange("dlx", ExchangeKind::Direct, dlx, false)
        .unwrap();
    let dead = declare(b, "dead");
    b.bind("dead", "dlx", "expired", &Arguments::new()).unwrap();
    dead
}

#[test]
fn drop_head_overflow_dead_letters_the_oldest() {
    let b = broker();
    let dead = dead_letter_setup(&b);
    let q = declare_with(
        &b,
        "q",
        QueueOptions {
            alternate_exchange: Some("dlx".into()),
            limits: QueueLimits {
                max_count: Some(2),
                max_size: None,
                policy: crate::limits::LimitPolicy::DropHead,
                ..Default::default()
            },
            arguments: [("x-dead-letter-routing-key", V::Str("expired".into()))]
                .into_iter()
                .collect(),
            ..QueueOptions::default()
        },
    );
    for body in ["a", "b", "c"] {
        assert_eq!(publish(&b, "", "q", body), 1);
    }
    assert_eq!(bodies(&q), vec![bs("b"), bs("c")]);
    assert_eq!(bodies(&dead), vec![bs("a")]);
    assert_eq!(dead.get().unwrap().message.routing_key(), b"expired");
}

#[test]
fn queue_message_ttl_caps_expiry() {
    let b = broker();
    let q = declare_with(
        &b,
        "q",
        QueueOptions {
            arguments: [("x-message-ttl", V::Int(0))].into_iter().collect(),
            ..QueueOptions::default()
        },
    );
    let plain = declare(&b, "plain");
    b.bind("q", "amq.fanout", "", &Arguments::new()).unwrap();
    b.bind("plain", "amq.fanout", "", &Arguments::new())
        .unwrap();
    publish(&b, "amq.fanout", "", "x");
    std::thread::sleep(std::time::Duration::from_millis(2));
    assert!(q.get().is_none());
    assert!(plain
        .get()
        .is_some_and(|g| g.message.expires_at().is_none()));
}

#[test]
fn single_active_consumer_gets_everything_until_it_leaves() {
    let b = broker();
    let q = declare_with(
        &b,
        "q",
        QueueOptions {
            arguments: [("x-single-active-consumer", V::Bool(true))]
                .into_iter()
                .collect(),
            ..QueueOptions::default()
        },
    );
    let (o1, o2) = (Outbox::new(), Outbox::new());
    for (id, ob) in [(1, &o1), (2, &o2)] {
        q.subscribe(ConsumerSpec {
            id,
            outbox: ob.clone(),
            owner: ME,
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
    }
    for body in ["a", "b", "c"] {
        publish(&b, "", "q", body);
    }
    assert_eq!((o1.len(), o2.len()), (3, 0));
    b.cancel_consumer(&q, 1);
    publish(&b, "", "q", "d");
    assert_eq!(o2.len(), 1);
}

fn expiring_queue(b: &Broker, name: &str, dead_letter_expired: bool) -> Arc<Queue> {
    let mut arguments: Arguments = [
        ("x-message-ttl", V::Int(10)),
        ("x-dead-letter-routing-key", V::Str("expired".into())),
    ]
    .into_iter()
    .collect();
    if dead_letter_expired {
        arguments.push("x-dead-letter-exchange", V::Str("dlx".into()));
    }
    declare_with(
        b,
        name,
        QueueOptions {
            alternate_exchange: Some("dlx".into()),
            arguments,
            ..QueueOptions::default()
        },
    )
}

#[test]
fn expired_messages_are_dead_lettered_only_when_the_queue_asks() {
    let b = broker();
    let dead = dead_letter_setup(&b);
    let rabbit = expiring_queue(&b, "rabbit-style", true);
    let qpid = expiring_queue(&b, "qpid-style", false);
    assert_eq!(publish(&b, "", "rabbit-style", "r"), 1);
    assert_eq!(publish(&b, "", "qpid-style", "q"), 1);
    std::thread::sleep(std::time::Duration::from_millis(30));
    b.purge_expired();
    assert_eq!(rabbit.message_count(), 0);
    assert_eq!(qpid.message_count(), 0);
    // qpidd drops expired messages; RabbitMQ dead-letters them.
    assert_eq!(bodies(&dead), vec![bs("r")]);
}

#[test]
fn expired_messages_met_by_dispatch_are_dead_lettered_on_the_next_sweep() {
    let b = broker();
    let dead = dead_letter_setup(&b);
    let q = expiring_queue(&b, "swept", true);
    assert_eq!(publish(&b, "", "swept", "old"), 1);
    std::thread::sleep(std::time::Duration::from_millis(30));
    // A get meets the expired message first and must not return it.
    assert!(q.get().is_none());
    assert!(bodies(&dead).is_empty());
    b.purge_expired();
    assert_eq!(bodies(&dead), vec![bs("old")]);
}

#[test]
fn a_quota_charge_lives_exactly_as_long_as_the_queue() {
    let b = broker();
    let charge: crate::QuotaCharge = Arc::new("slot");
    let with = |c: &crate::QuotaCharge| QueueOptions {
        quota: Some(c.clone()),
        ..QueueOptions::default()
    };
    b.declare_queue("counted", with(&charge), false, ME)
        .unwrap();
    assert_eq!(
        Arc::strong_count(&charge),
        2,
        "the new queue holds its charge"
    );
    // Redeclaring an existing queue does not keep the new charge.
    b.declare_queue("counted", with(&charge), false, ME)
        .unwrap();
    assert_eq!(Arc::strong_count(&charge), 2);
    let q = b.queue("counted").unwrap();
    b.delete_queue("counted", false, false, ME).unwrap();
    assert_eq!(
        Arc::strong_count(&charge),
        1,
        "deleting frees it even while handles remain"
    );
    drop(q);
    // Auto-deleted queues free theirs too.
    let auto = QueueOptions {
        exclusive_owner: Some(ME),
        auto_delete: true,
        ..with(&charge)
    };
    b.declare_queue("mine", auto, false, ME).unwrap();
    assert_eq!(Arc::strong_count(&charge), 2);
    b.release_owner(ME);
    assert_eq!(Arc::strong_count(&charge), 1);
}

pub(super) fn take_deliveries(ob: &Outbox) -> Vec<crate::Delivery> {
    let mut items = Vec::new();
    ob.take(&mut items);
    items
        .into_iter()
        .filter_map(|i| match i {
            OutboxItem::Deliver(d) => Some(d),
            OutboxItem::ConsumerCancelled { .. }
            | OutboxItem::Durable
            | OutboxItem::Close { .. } => None,
        })
        .collect()
}

#[test]
fn memory_meter_follows_messages_in_and_out_of_queues() {
    let b = broker();
    let q = declare(&b, "mem");
    let other = declare(&b, "mem2");
    b.bind("mem2", "amq.fanout", "", &Arguments::new()).unwrap();
    b.bind("mem", "amq.fanout", "", &Arguments::new()).unwrap();
    assert_eq!(b.memory_used(), 0);
    publish(&b, "amq.fanout", "", "12345");
    publish(&b, "amq.fanout", "", "123");
    assert_eq!(b.memory_used(), 16, "a message on two queues counts twice");
    // Delivered and unsettled still counts; released counts once; accepted leaves.
    let ob = Outbox::new();
    let c = subscribe(&b, &q, &ob, ME);
    q.add_credit(c, 2, u32::MAX).unwrap();
    let ds = take_deliveries(&ob);
    assert_eq!(b.memory_used(), 16);
    q.release([(ds[1].position, ds[1].message.clone())], true);
    assert_eq!(b.memory_used(), 16);
    assert!(q.accept(ds[0].position));
    assert_eq!(b.memory_used(), 11);
    // Purge, reject and delete.
    assert_eq!(other.purge(), 2);
    assert_eq!(b.memory_used(), 3);
    b.cancel_consumer(&q, c);
    b.delete_queue("mem", false, false, ME).unwrap();
    assert_eq!(b.memory_used(), 0);
    // Expired messages leave the count when swept.
    let e = declare(&b, "expiring");
    let mut m = MessageParts::new("", "expiring", bs("abcd"));
    m.expires_at = Some(1);
    b.publish(b.default_exchange(), Message::from(m)).unwrap();
    let _ = e;
    assert_eq!(b.memory_used(), 0, "expired on arrival is never stored");
    let mut m = MessageParts::new("", "expiring", bs("abcd"));
    m.expires_at = Some(now_ms() + 30);
    b.publish(b.default_exchange(), Message::from(m)).unwrap();
    assert_eq!(b.memory_used(), 4);
    std::thread::sleep(std::time::Duration::from_millis(40));
    b.purge_expired();
    assert_eq!(b.memory_used(), 0);
}

#[test]
fn memory_alarm_rises_above_high_and_clears_at_low() {
    let b = Broker::new(BrokerConfig {
        memory_watermarks: Some(Watermarks { high: 10, low: 5 }),
        ..BrokerConfig::default()
    });
    let q = declare(&b, "m");
    publish(&b, "", "m", "123456");
    assert_eq!(b.check_memory(), None);
    publish(&b, "", "m", "123456");
    assert_eq!(b.check_memory(), Some(true));
    assert!(b.alarms().blocked());
    assert_eq!(b.check_memory(), None, "no change");
    // Between the marks the alarm stays.
    let ob = Outbox::new();
    let c = subscribe(&b, &q, &ob, ME);
    q.add_credit(c, 1, u32::MAX).unwrap();
    let d = take_deliveries(&ob);
    q.accept(d[0].position);
    assert_eq!(b.memory_used(), 6);
    assert_eq!(b.check_memory(), None);
    assert!(b.alarms().blocked());
    q.add_credit(c, 1, u32::MAX).unwrap();
    let d = take_deliveries(&ob);
    q.accept(d[0].position);
    assert_eq!(b.check_memory(), Some(false));
    assert!(!b.alarms().blocked());
    assert_eq!(broker().check_memory(), None, "no watermarks, no alarm");
}

pub(super) fn rabbit_dlq(b: &Broker, name: &str, dlx: &str, extra: &[(&str, V)]) -> Arc<Queue> {
    let mut arguments: Arguments = [("x-dead-letter-exchange", V::Str(dlx.into()))]
        .into_iter()
        .collect();
    for (k, v) in extra {
        arguments.push(*k, v.clone());
    }
    declare_with(
        b,
        name,
        QueueOptions {
            alternate_exchange: Some(dlx.into()),
            arguments,
            ..QueueOptions::default()
        },
    )
}

fn take_one(q: &Arc<Queue>) -> (u64, Message) {
    let got = q.get().expect("a message");
    (got.position, got.message)
}

#[test]
fn a_dead_letter_exchange_is_found_by_name_when_a_message_dies() {
    // RabbitMQ: the dead letter exchange need not exist when the queue is declared, and may
    // be deleted and declared again; dead letters are dropped while it does not exist.
    // A 0-10 alternate exchange must exist and cannot be deleted while in use (qpidd).
    let b = broker();
    let q = rabbit_dlq(&b, "work", "late-dlx", &[]);
    assert_eq!(q.alternate_exchange_name(), Some("late-dlx"));
    let reject_one = |body: &'static str| {
        b.publish(&b.exchange("").unwrap(), Message::new("", "work", bs(body)))
            .unwrap();
        let (pos, m) = take_one(&q);
        assert!(q.reject(pos, m));
    };
    reject_one("before the exchange");
    assert_eq!(q.message_count(), 0);

    let fanout = || ExchangeOptions::default();
    b.declare_exchange("late-dlx", ExchangeKind::Fanout, fanout(), false)
        .unwrap();
    let dead = declare(&b, "dead");
    b.bind("dead", "late-dlx", "", &Arguments::new()).unwrap();
    reject_one("with the exchange");
    assert_eq!(dead.queued_bodies(), vec![bs("with the exchange")]);

    b.delete_exchange("late-dlx", false)
        .expect("a dead letter exchange in use may be deleted");
    reject_one("after the delete");
    assert_eq!(dead.message_count(), 1);

    b.declare_exchange("late-dlx", ExchangeKind::Fanout, fanout(), false)
        .unwrap();
    b.bind("dead", "late-dlx", "", &Arguments::new()).unwrap();
    reject_one("declared again");
    assert_eq!(
        dead.queued_bodies(),
        vec![bs("with the exchange"), bs("declared again")]
    );
    assert_eq!(
        b.queue_info("work").unwrap().alternate_exchange.as_deref(),
        Some("late-dlx")
    );

    let alt_opts = |alt: &str| QueueOptions {
        alternate_exchange: Some(alt.to_owned()),
        ..QueueOptions::default()
    };
    assert!(matches!(
        b.declare_queue("plain", alt_opts("nope"), false, ME),
        Err(BrokerError::NotFound(_))
    ));
    declare_with(&b, "plain", alt_opts("late-dlx"));
    assert!(matches!(
        b.delete_exchange("late-dlx", false),
        Err(BrokerError::NotAllowed(_))
    ));
}

#[test]
fn dead_lettering_records_deaths_and_renames_the_exchange() {
    let b = broker();
    b.declare_exchange(
        "dlx",
        ExchangeKind::Fanout,
        ExchangeOptions::default(),
        false,
    )
    .unwrap();
    let dead = declare(&b, "dead");
    b.bind("dead", "dlx", "", &Arguments::new()).unwrap();
    let q = rabbit_dlq(&b, "work", "dlx", &[]);
    b.bind("work", "amq.direct", "job", &Arguments::new())
        .unwrap();
    let mut m = MessageParts::new("amq.direct", "job", bs("x"));
    m.expires_at = Some(now_ms() + 60_000);
    b.publish(&b.exchange("amq.direct").unwrap(), Message::from(m))
        .unwrap();
    let (pos, m) = take_one(&q);
    assert!(q.reject(pos, m));
    let (_, d) = take_one(&dead);
    assert_eq!(d.exchange(), b"dlx");
    assert_eq!(d.routing_key(), b"job", "no dead letter routing key: kept");
    assert_eq!(d.expires_at(), None, "dead letters lose their expiry");
    let h = d.deaths().expect("death history");
    let death = h.last().unwrap();
    assert_eq!(
        (death.queue.as_str(), death.reason, death.count),
        ("work", DeathReason::Rejected, 1)
    );
    assert_eq!(&death.exchange[..], b"amq.direct");
    assert_eq!(&death.routing_key[..], b"job");
    assert_eq!(h.first.as_ref().unwrap().queue, "work");
}

#[test]
fn a_retry_loop_counts_deaths_and_reject_free_cycles_are_cut() {
    let b = broker();
    // work --reject--> retry (TTL) --expire--> back to work: a classic retry loop.
    b.declare_exchange(
        "to-retry",
        ExchangeKind::Fanout,
        ExchangeOptions::default(),
        false,
    )
    .unwrap();
    b.declare_exchange(
        "to-work",
        ExchangeKind::Fanout,
        ExchangeOptions::default(),
        false,
    )
    .unwrap();
    let work = rabbit_dlq(&b, "work", "to-retry", &[]);
    // Long enough that a loaded CI machine cannot expire it before it is counted.
    let retry = rabbit_dlq(&b, "retry", "to-work", &[("x-message-ttl", V::Int(40))]);
    b.bind("retry", "to-retry", "", &Arguments::new()).unwrap();
    b.bind("work", "to-work", "", &Arguments::new()).unwrap();
    publish(&b, "", "work", "job");
    for round in 1..=3u64 {
        let (pos, m) = take_one(&work);
        assert!(work.reject(pos, m));
        assert_eq!(retry.message_count(), 1);
        std::thread::sleep(std::time::Duration::from_millis(60));
        b.purge_expired();
        let got = work.get().expect("back on the work queue");
        let h = got.message.deaths().cloned().unwrap();
        let counts: Vec<(&str, DeathReason, u64)> = h
            .entries
            .iter()
            .map(|d| (d.queue.as_str(), d.reason, d.count))
            .collect();
        assert_eq!(
            counts,
            [
                ("retry", DeathReason::Expired, round),
                ("work", DeathReason::Rejected, round)
            ]
        );
        work.release([(got.position, got.message)], false);
    }

    // Expiry alone looping a message back into its own queue is a cycle: dropped.
    b.declare_exchange(
        "self",
        ExchangeKind::Fanout,
        ExchangeOptions::default(),
        false,
    )
    .unwrap();
    let looping = rabbit_dlq(&b, "looping", "self", &[("x-message-ttl", V::Int(1))]);
    b.bind("looping", "self", "", &Arguments::new()).unwrap();
    publish(&b, "", "looping", "spin");
    std::thread::sleep(std::time::Duration::from_millis(5));
    b.purge_expired();
    assert_eq!(looping.message_count(), 0);
}

#[test]
fn drop_head_dead_letters_as_maxlen_and_deleting_a_dead_letter_queue_drops_its_messages() {
    let b = broker();
    b.declare_exchange(
        "dlx",
        ExchangeKind::Fanout,
        ExchangeOptions::default(),
        false,
    )
    .unwrap();
    let dead = declare(&b, "dead");
    b.bind("dead", "dlx", "", &Arguments::new()).unwrap();
    let mut opts = QueueOptions {
        alternate_exchange: Some("dlx".into()),
        arguments: [("x-dead-letter-exchange", V::Str("dlx".into()))]
            .into_iter()
            .collect(),
        ..QueueOptions::default()
    };
    opts.limits = QueueLimits {
        max_count: Some(1),
        max_size: None,
        policy: crate::limits::LimitPolicy::DropHead,
        ..Default::default()
    };
    declare_with(&b, "short", opts);
    publish(&b, "", "short", "first");
    publish(&b, "", "short", "second");
    let (_, d) = take_one(&dead);
    assert_eq!(d.body(), bs("first"));
    assert_eq!(
        d.deaths().unwrap().last().unwrap().reason,
        DeathReason::Maxlen
    );
    // RabbitMQ does not dead-letter the messages of a deleted queue.
    assert_eq!(b.delete_queue("short", false, false, ME).unwrap(), 1);
    assert_eq!(dead.message_count(), 0);
}

#[test]
fn plain_alternate_exchanges_keep_messages_unchanged() {
    let b = broker();
    let dead = declare(&b, "dead");
    b.bind("dead", "amq.fanout", "", &Arguments::new()).unwrap();
    let (q, _) = b
        .declare_queue("q", alt_opts("amq.fanout"), false, ME)
        .unwrap();
    publish(&b, "", "q", "r");
    let (pos, m) = take_one(&q);
    assert!(q.reject(pos, m));
    let (_, d) = take_one(&dead);
    assert!(d.deaths().is_none());
    assert_eq!(d.exchange(), b"");
}

#[test]
fn an_empty_dead_letter_exchange_is_the_default_exchange() {
    let b = broker();
    let retry = declare(&b, "retry");
    let q = rabbit_dlq(
        &b,
        "work",
        "",
        &[("x-dead-letter-routing-key", V::Str("retry".into()))],
    );
    publish(&b, "", "work", "again");
    let (pos, m) = take_one(&q);
    assert!(q.reject(pos, m));
    assert_eq!(bodies(&retry), [bs("again")]);
    // A 0-10 alternate-exchange of "" still means none.
    let (plain, _) = b.declare_queue("plain", alt_opts(""), false, ME).unwrap();
    assert!(plain.alternate_exchange().is_none());
}

fn expiring_after(b: &Broker, name: &str, ms: i64) -> Arc<Queue> {
    declare_with(
        b,
        name,
        QueueOptions {
            arguments: [("x-expires", V::Int(ms))].into_iter().collect(),
            ..QueueOptions::default()
        },
    )
}

fn wait_past(deadline: Option<u64>) {
    let at = deadline.expect("a pending deadline");
    while now_ms() <= at {
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
}

#[test]
fn unused_x_expires_queues_are_deleted_after_their_time() {
    let b = broker();
    let before = now_ms();
    let q = expiring_after(&b, "short", 200);
    declare(&b, "plain");
    publish(&b, "", "short", "lost");
    let next = b.expire_unused_queues();
    assert!(next.is_some_and(|at| at >= before + 200), "not due yet");
    assert!(b.queue("short").is_some());
    wait_past(next);
    assert_eq!(b.expire_unused_queues(), None);
    assert!(b.queue("short").is_none());
    assert!(q.is_deleted());
    assert!(b.queue("plain").is_some());
}

#[test]
fn consumers_gets_and_redeclares_keep_an_x_expires_queue_alive() {
    let b = broker();
    let q = expiring_after(&b, "used", 300);
    let ob = Outbox::new();
    let c = subscribe(&b, &q, &ob, ME);
    std::thread::sleep(std::time::Duration::from_millis(320));
    assert_eq!(b.expire_unused_queues(), None, "a consumed queue is in use");
    assert!(b.queue("used").is_some());
    let before_cancel = now_ms();
    b.cancel_consumer(&q, c);
    let after_cancel = b.expire_unused_queues().unwrap();
    assert!(
        after_cancel >= before_cancel + 300,
        "the lease restarts when the last consumer goes"
    );
    std::thread::sleep(std::time::Duration::from_millis(20));
    assert!(q.get().is_none());
    let after_get = b.expire_unused_queues().unwrap();
    assert!(after_get > after_cancel, "basic.get renews the lease");
    std::thread::sleep(std::time::Duration::from_millis(20));
    b.declare_queue("used", QueueOptions::default(), true, ME)
        .unwrap();
    let after_declare = b.expire_unused_queues().unwrap();
    assert!(
        after_declare > after_get,
        "a (passive) declare renews the lease"
    );
    wait_past(Some(after_declare));
    b.expire_unused_queues();
    assert!(b.queue("used").is_none());
}

#[test]
fn invalid_queue_arguments_are_refused_at_declare() {
    let b = broker();
    for (k, v) in [
        ("x-expires", V::Int(0)),
        ("x-expires", V::Str("soon".into())),
        ("x-max-priority", V::Int(300)),
    ] {
        let opts = QueueOptions {
            arguments: [(k, v.clone())].into_iter().collect(),
            ..QueueOptions::default()
        };
        assert!(
            matches!(
                b.declare_queue("bad", opts, false, ME),
                Err(BrokerError::InvalidArgument(_))
            ),
            "{k} = {v:?}"
        );
    }
    assert!(b.queue("bad").is_none());
}

fn exchange_of(b: &Broker, name: &str, kind: ExchangeKind, auto_delete: bool) {
    let opts = ExchangeOptions {
        auto_delete,
        ..ExchangeOptions::default()
    };
    b.declare_exchange(name, kind, opts, false).unwrap();
}

#[test]
fn exchange_to_exchange_bindings_route_on_through_the_destination() {
    let b = broker();
    exchange_of(&b, "src", ExchangeKind::Topic, false);
    exchange_of(&b, "dst", ExchangeKind::Direct, false);
    let q = declare(&b, "q");
    b.bind_exchange("dst", "src", "stock.#", &Arguments::new())
        .unwrap();
    b.bind("q", "dst", "stock.ibm", &Arguments::new()).unwrap();
    assert_eq!(publish(&b, "src", "stock.ibm", "hit"), 1);
    assert_eq!(publish(&b, "src", "stock.hp", "dst-miss"), 0);
    assert_eq!(publish(&b, "src", "bond.ibm", "src-miss"), 0);
    assert_eq!(bodies(&q), [bs("hit")]);
    b.unbind_exchange("dst", "src", "stock.#").unwrap();
    assert_eq!(publish(&b, "src", "stock.ibm", "unbound"), 0);
    // Unbinding what is not bound is fine; missing exchanges are not.
    b.unbind_exchange("dst", "src", "stock.#").unwrap();
    assert!(matches!(
        b.bind_exchange("dst", "nope", "", &Arguments::new()),
        Err(BrokerError::NotFound(_))
    ));
    assert!(matches!(
        b.bind_exchange("", "src", "", &Arguments::new()),
        Err(BrokerError::NotAllowed(_))
    ));
    assert!(matches!(
        b.bind_exchange("dst", "", "", &Arguments::new()),
        Err(BrokerError::NotAllowed(_))
    ));
}

#[test]
fn cycles_and_diamonds_deliver_once_per_queue() {
    let b = broker();
    for name in ["a", "b", "left", "right"] {
        exchange_of(&b, name, ExchangeKind::Fanout, false);
    }
    let q = declare(&b, "q");
    // a <-> b, both feeding q.
    b.bind_exchange("b", "a", "", &Arguments::new()).unwrap();
    b.bind_exchange("a", "b", "", &Arguments::new()).unwrap();
    b.bind("q", "a", "", &Arguments::new()).unwrap();
    b.bind("q", "b", "", &Arguments::new()).unwrap();
    assert_eq!(publish(&b, "a", "", "cycle"), 1);
    // a -> left -> q and a -> right -> q.
    b.bind_exchange("left", "a", "", &Arguments::new()).unwrap();
    b.bind_exchange("right", "a", "", &Arguments::new())
        .unwrap();
    b.bind("q", "left", "", &Arguments::new()).unwrap();
    b.bind("q", "right", "", &Arguments::new()).unwrap();
    assert_eq!(publish(&b, "a", "", "diamond"), 1);
    assert_eq!(bodies(&q), [bs("cycle"), bs("diamond")]);
}

#[test]
fn a_destination_that_matches_nothing_uses_its_alternate() {
    let b = broker();
    let caught = declare(&b, "caught");
    b.bind("caught", "amq.fanout", "", &Arguments::new())
        .unwrap();
    exchange_of(&b, "src", ExchangeKind::Fanout, false);
    let with_alternate = ExchangeOptions {
        alternate_exchange: Some("amq.fanout".into()),
        ..ExchangeOptions::default()
    };
    b.declare_exchange("dst", ExchangeKind::Direct, with_alternate, false)
        .unwrap();
    b.bind_exchange("dst", "src", "", &Arguments::new())
        .unwrap();
    assert_eq!(publish(&b, "src", "unmatched", "m"), 1);
    assert_eq!(bodies(&caught), [bs("m")]);
}

#[test]
fn deleting_either_end_removes_exchange_bindings_and_auto_delete_follows() {
    let b = broker();
    exchange_of(&b, "auto-src", ExchangeKind::Fanout, true);
    exchange_of(&b, "dst", ExchangeKind::Fanout, false);
    b.bind_exchange("dst", "auto-src", "", &Arguments::new())
        .unwrap();
    assert!(matches!(
        b.delete_exchange("auto-src", true),
        Err(BrokerError::PreconditionFailed(_))
    ));
    // Deleting the destination removes the binding; the auto-delete source, now without
    // bindings, goes with it.
    b.delete_exchange("dst", false).unwrap();
    assert!(b.exchange("auto-src").is_none());

    exchange_of(&b, "auto-src", ExchangeKind::Fanout, true);
    exchange_of(&b, "dst", ExchangeKind::Fanout, false);
    b.bind_exchange("dst", "auto-src", "", &Arguments::new())
        .unwrap();
    b.unbind_exchange("dst", "auto-src", "").unwrap();
    assert!(b.exchange("auto-src").is_none());

    exchange_of(&b, "src", ExchangeKind::Fanout, false);
    let q = declare(&b, "q");
    b.bind("q", "dst", "", &Arguments::new()).unwrap();
    b.bind_exchange("dst", "src", "", &Arguments::new())
        .unwrap();
    b.delete_exchange("src", false).unwrap();
    let dst = b.exchange("dst").unwrap();
    assert_eq!(dst.binding_count(), 1, "only the queue binding is left");
    exchange_of(&b, "src", ExchangeKind::Fanout, false);
    assert_eq!(
        publish(&b, "src", "", "x"),
        0,
        "a new src has no old bindings"
    );
    assert_eq!(q.message_count(), 0);
}

fn keyed(key: &str, value: &str, body: &'static str) -> Message {
    let mut m = MessageParts::new("", "lvq", bs(body));
    m.headers = Some(Arc::new(
        [(key, V::Str(value.into()))].into_iter().collect(),
    ));
    Message::from(m)
}

#[test]
fn last_value_queue_keeps_the_latest_message_per_key() {
    let b = broker();
    assert!(!b.default_exchange().needs_headers());
    let q = declare_with(
        &b,
        "lvq",
        QueueOptions {
            arguments: [("qpid.last_value_queue_key", V::Str("ticker".into()))]
                .into_iter()
                .collect(),
            ..QueueOptions::default()
        },
    );
    // Publishers must now decode headers for the default exchange (it routes to the LVQ).
    assert!(b.default_exchange().needs_headers());
    let ex = b.default_exchange().clone();
    for (value, body) in [("IBM", "ibm-1"), ("HP", "hp-1"), ("IBM", "ibm-2")] {
        b.publish(&ex, keyed("ticker", value, body)).unwrap();
    }
    let mut unkeyed = MessageParts::new("", "lvq", bs("no-key"));
    unkeyed.headers = None;
    b.publish(&ex, Message::from(unkeyed)).unwrap();
    assert_eq!(bodies(&q), [bs("hp-1"), bs("ibm-2"), bs("no-key")]);
    // An acquired message is not replaced; the next one for its key queues behind.
    let got = q.get().unwrap();
    assert_eq!(got.message.body(), bs("hp-1"));
    b.publish(&ex, keyed("ticker", "HP", "hp-2")).unwrap();
    assert_eq!(bodies(&q), [bs("ibm-2"), bs("no-key"), bs("hp-2")]);
    assert_eq!(q.unsettled_count(), 1);
    b.delete_queue("lvq", false, false, ME).unwrap();
    assert!(!b.default_exchange().needs_headers());
}

#[test]
fn exchanges_forwarding_to_others_ask_for_headers() {
    let b = broker();
    exchange_of(&b, "src", ExchangeKind::Direct, false);
    exchange_of(&b, "hdr", ExchangeKind::Headers, false);
    assert!(!b.exchange("src").unwrap().needs_headers());
    b.bind_exchange("hdr", "src", "k", &Arguments::new())
        .unwrap();
    assert!(b.exchange("src").unwrap().needs_headers());
    b.unbind_exchange("hdr", "src", "k").unwrap();
    assert!(!b.exchange("src").unwrap().needs_headers());
}

#[test]
fn exchange_bindings_under_one_key_are_told_apart_by_their_arguments() {
    let b = broker();
    exchange_of(&b, "hs", ExchangeKind::Headers, true);
    exchange_of(&b, "dst", ExchangeKind::Fanout, false);
    let q = declare(&b, "q");
    b.bind("q", "dst", "", &Arguments::new()).unwrap();
    let criteria = |name: &str, value: i64| -> Arguments {
        [("x-match", V::Str("all".into())), (name, V::Int(value))]
            .into_iter()
            .collect()
    };
    let (on_a, on_b) = (criteria("a", 1), criteria("b", 2));
    b.bind_exchange("dst", "hs", "", &on_a).unwrap();
    b.bind_exchange("dst", "hs", "", &on_b).unwrap();
    b.bind_exchange("dst", "hs", "", &on_a).unwrap();
    let hs = b.exchange("hs").unwrap();
    assert_eq!(
        hs.binding_count(),
        2,
        "the same arguments again add nothing"
    );
    let send = |headers: &[(&str, i64)], body: &'static str| {
        let mut m = MessageParts::new("hs", "", bs(body));
        let table = headers.iter().map(|(k, v)| (*k, V::Int(*v))).collect();
        m.headers = Some(Arc::new(table));
        b.publish(&hs, Message::from(m)).unwrap().queues
    };
    assert_eq!(send(&[("a", 1)], "a"), 1);
    assert_eq!(send(&[("b", 2)], "b"), 1);
    assert_eq!(send(&[("a", 1), ("b", 2)], "both, once"), 1);
    assert_eq!(send(&[("c", 3)], "neither"), 0);

    b.unbind_exchange_with_arguments("dst", "hs", "", &on_a)
        .unwrap();
    assert_eq!(send(&[("a", 1)], "a, unbound"), 0);
    assert_eq!(send(&[("b", 2)], "b again"), 1);
    assert!(b.exchange("hs").is_some(), "one binding is left");
    b.unbind_exchange_with_arguments("dst", "hs", "", &on_b)
        .unwrap();
    assert!(
        b.exchange("hs").is_none(),
        "auto-delete with its last binding"
    );
    assert_eq!(
        bodies(&q),
        [bs("a"), bs("b"), bs("both, once"), bs("b again")]
    );

    // A source forwards headers while any binding under the key is left; an unbind
    // without arguments takes them all.
    exchange_of(&b, "src", ExchangeKind::Direct, false);
    exchange_of(&b, "hdr", ExchangeKind::Headers, false);
    b.bind_exchange("hdr", "src", "k", &on_a).unwrap();
    b.bind_exchange("hdr", "src", "k", &on_b).unwrap();
    b.unbind_exchange_with_arguments("hdr", "src", "k", &on_a)
        .unwrap();
    assert!(b.exchange("src").unwrap().needs_headers());
    b.bind_exchange("hdr", "src", "k", &on_a).unwrap();
    b.unbind_exchange("hdr", "src", "k").unwrap();
    assert_eq!(b.exchange("src").unwrap().binding_count(), 0);
    assert!(!b.exchange("src").unwrap().needs_headers());

    // Deleting the destination takes every binding under the key with it.
    b.bind_exchange("hdr", "src", "k", &on_a).unwrap();
    b.bind_exchange("hdr", "src", "k", &on_b).unwrap();
    b.delete_exchange("hdr", false).unwrap();
    assert_eq!(b.exchange("src").unwrap().binding_count(), 0);
    assert!(!b.exchange("src").unwrap().needs_headers());

    // An unbind that leaves a binding under the key keeps the destination's link back to
    // the source, so deleting the destination still finds the binding that is left.
    exchange_of(&b, "hdr", ExchangeKind::Headers, false);
    b.bind_exchange("hdr", "src", "k", &on_a).unwrap();
    b.bind_exchange("hdr", "src", "k", &on_b).unwrap();
    b.unbind_exchange_with_arguments("hdr", "src", "k", &on_a)
        .unwrap();
    b.delete_exchange("hdr", false).unwrap();
    assert_eq!(b.exchange("src").unwrap().binding_count(), 0);
    assert!(!b.exchange("src").unwrap().needs_headers());
}

#[test]
fn dead_lettering_heads_are_watched_and_expire_without_the_sweep() {
    let b = broker();
    let dead = declare(&b, "after-delay");
    let delay = rabbit_dlq(
        &b,
        "delay",
        "",
        &[
            ("x-dead-letter-routing-key", V::Str("after-delay".into())),
            ("x-message-ttl", V::Int(300)),
        ],
    );
    let plain = declare(&b, "plain");
    assert!(!b.expire_heads(), "nothing will expire yet");
    // Consume the permit left by the declares, then check a delayed message notifies.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    runtime.block_on(async {
        let _ = tokio::time::timeout(
            std::time::Duration::from_millis(10),
            b.queue_expiry_changed(),
        )
        .await;
    });
    publish(&b, "", "delay", "later");
    publish(&b, "", "plain", "never-expires");
    runtime.block_on(async {
        tokio::time::timeout(std::time::Duration::from_secs(1), b.queue_expiry_changed())
            .await
            .expect("a delayed message wakes the housekeeping");
    });
    assert!(b.expire_heads(), "one will expire");
    std::thread::sleep(std::time::Duration::from_millis(350));
    assert!(!b.expire_heads(), "dead-lettered, nothing left to watch");
    assert_eq!(delay.message_count(), 0);
    assert_eq!(bodies(&dead), [bs("later")]);
    assert_eq!(plain.message_count(), 1);
}

/// Keys of messages that left a last-value queue are forgotten: a queue keyed by something
/// unique per message (an order id) must not remember every key it ever saw. Keys of
/// messages still queued or held by a consumer are remembered.
#[test]
fn a_last_value_queue_forgets_the_keys_of_messages_that_left() {
    let b = broker();
    let q = declare_with_args(
        &b,
        "lvq",
        &[
            ("qpid.last_value_queue_key", V::Str("id".into())),
            ("x-max-priority", V::Int(9)),
        ],
    );
    let ex = b.default_exchange().clone();
    let publish_keyed = |value: &str, body: &'static str, priority: u8| {
        let mut m = MessageParts::new("", "lvq", bs(body));
        m.priority = priority;
        m.headers = Some(Arc::new(
            [("id", V::Str(value.into()))].into_iter().collect(),
        ));
        b.publish(&ex, Message::from(m)).unwrap();
    };
    publish_keyed("held", "held", 0);
    let held = q.get().unwrap();
    publish_keyed("kept", "first", 0);
    // Each of these goes ahead of "first" (higher priority) and is consumed at once.
    for i in 0..2000 {
        publish_keyed(&format!("order-{i}"), "m", 9);
        let got = q.get().unwrap();
        assert_eq!(got.message.body(), bs("m"));
        assert!(q.accept(got.position));
    }
    assert!(q.last_value_keys() <= 100, "{} keys", q.last_value_keys());
    publish_keyed("kept", "second", 0);
    assert_eq!(bodies(&q), [bs("second")]);
    q.release([(held.position, held.message)], false);
    publish_keyed("held", "replaced", 0);
    assert_eq!(bodies(&q), [bs("second"), bs("replaced")]);
}
