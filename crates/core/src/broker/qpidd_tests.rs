//! qpidd's rules where they differ from RabbitMQ's: declaring exclusive queues
//! ([`Dialect::Qpidd`]), timed auto-delete.

use std::sync::Arc;

use bytes::Bytes;

use super::tests::declare_with;
use super::*;
use crate::error::BrokerError;
use crate::message::now_ms;
use crate::queue::{ConsumerSpec, Outbox, QueueOptions};
use crate::value::HeaderValue as V;

const ME: OwnerId = 1;
const OTHER: OwnerId = 2;

fn broker() -> Arc<Broker> {
    Broker::new(BrokerConfig::default())
}

fn qpidd(
    b: &Broker,
    name: &str,
    exclusive: bool,
    passive: bool,
    who: OwnerId,
) -> Result<Arc<Queue>, BrokerError> {
    let opts = QueueOptions {
        exclusive_owner: exclusive.then_some(who),
        ..QueueOptions::default()
    };
    b.declare_queue_as(Dialect::Qpidd, name, opts, passive, who)
        .map(|(q, _)| q)
}

fn consumer(b: &Broker, q: &Arc<Queue>, owner: OwnerId, acquire: bool) -> ConsumerId {
    let id = b.next_consumer_id();
    q.subscribe(ConsumerSpec {
        id,
        outbox: Outbox::new(),
        owner,
        connection: 0,
        tag: Bytes::new(),
        acquire,
        exclusive: false,
        window: None,
        filter: None,
        ack_timeout: None,
    })
    .unwrap();
    id
}

fn locked<T: std::fmt::Debug>(r: Result<T, BrokerError>) -> bool {
    matches!(r, Err(BrokerError::ResourceLocked(_)))
}

#[test]
fn only_an_exclusive_declare_is_checked_against_another_sessions_queue() {
    // qpid-python's queue.test_declare_passive_with_exclusive and qpidd's declare.
    let b = broker();
    qpidd(&b, "mine", true, false, ME).unwrap();
    assert!(qpidd(&b, "mine", false, false, OTHER).is_ok());
    assert!(qpidd(&b, "mine", false, true, OTHER).is_ok());
    assert!(locked(qpidd(&b, "mine", true, false, OTHER)));
    assert!(locked(qpidd(&b, "mine", true, true, OTHER)));
    assert!(qpidd(&b, "mine", true, true, ME).is_ok());
    assert_eq!(b.queue("mine").unwrap().owner(), Some(ME));

    // Passive never claims: passive + exclusive of an unowned queue is locked.
    qpidd(&b, "shared", false, false, ME).unwrap();
    assert!(locked(qpidd(&b, "shared", true, true, OTHER)));
    assert!(qpidd(&b, "shared", true, false, OTHER).is_ok());
    assert_eq!(b.queue("shared").unwrap().owner(), Some(OTHER));

    // RabbitMQ's rules are unchanged: another connection's exclusive queue is locked.
    assert!(locked(b.declare_queue(
        "mine",
        QueueOptions::default(),
        true,
        OTHER
    )));
    assert!(locked(b.declare_queue(
        "mine",
        QueueOptions::default(),
        false,
        OTHER
    )));
}

#[test]
fn an_exclusive_declare_of_a_consumed_queue_is_locked_but_browsers_do_not_count() {
    // qpid-python's queue.test_declare_exclusive_alreadyinuse.
    let b = broker();
    let q = qpidd(&b, "used", false, false, ME).unwrap();
    let c = consumer(&b, &q, ME, true);
    assert!(locked(qpidd(&b, "used", true, false, OTHER)));
    assert!(locked(qpidd(&b, "used", true, false, ME)));
    b.cancel_consumer(&q, c);
    consumer(&b, &q, ME, false);
    assert!(qpidd(&b, "used", true, false, OTHER).is_ok());
    // The owner may declare exclusive again whatever consumes it.
    consumer(&b, &q, OTHER, true);
    assert!(qpidd(&b, "used", true, false, OTHER).is_ok());
}

#[test]
fn a_redeclare_does_not_compare_the_alternate_exchange_but_it_must_exist() {
    let b = broker();
    let alt = |name: &str| QueueOptions {
        alternate_exchange: Some(name.to_owned()),
        ..QueueOptions::default()
    };
    b.declare_queue_as(Dialect::Qpidd, "q", alt("amq.fanout"), false, ME)
        .unwrap();
    let (q, created) = b
        .declare_queue_as(Dialect::Qpidd, "q", alt("amq.topic"), false, ME)
        .unwrap();
    assert!(!created);
    assert_eq!(q.alternate_exchange_name(), Some("amq.fanout"));
    assert!(matches!(
        b.declare_queue_as(Dialect::Qpidd, "q", alt("missing"), false, ME),
        Err(BrokerError::NotFound(_))
    ));
    // RabbitMQ's rules still refuse a different one.
    assert!(matches!(
        b.declare_queue("q", alt("amq.topic"), false, ME),
        Err(BrokerError::NotAllowed(_))
    ));
}

fn timed(b: &Broker, name: &str, exclusive: bool) -> Arc<Queue> {
    let opts = QueueOptions {
        exclusive_owner: exclusive.then_some(ME),
        auto_delete: true,
        arguments: [("qpid.auto_delete_timeout", V::Int(3))]
            .into_iter()
            .collect(),
        ..QueueOptions::default()
    };
    declare_with(b, name, opts)
}

#[test]
fn a_timed_auto_delete_queue_goes_its_timeout_after_its_owner() {
    // qpid-python's extensions.test_timed_autodelete.
    let b = broker();
    let q = timed(&b, "t", true);
    let start = now_ms();
    b.release_owner(ME);
    assert!(b.queue("t").is_some(), "kept for the timeout");
    let due = b.expire_unused_queues_at(start).expect("a deadline");
    assert!(
        (start + 3000..start + 3100).contains(&due),
        "{due} vs {start}"
    );
    assert!(b.expire_unused_queues_at(due - 1).is_some());
    assert!(b.queue("t").is_some());
    assert_eq!(b.expire_unused_queues_at(due), None);
    assert!(b.queue("t").is_none() && q.is_deleted());
}

#[test]
fn a_new_consumer_cancels_a_timed_auto_delete_and_a_redeclare_puts_it_off() {
    let b = broker();
    let q = timed(&b, "t", false);
    assert!(q.is_auto_delete(), "a timeout makes the queue auto-delete");
    let c = consumer(&b, &q, ME, true);
    b.cancel_consumer(&q, c);
    let due = b.expire_unused_queues_at(now_ms()).expect("scheduled");
    consumer(&b, &q, OTHER, true);
    assert_eq!(b.expire_unused_queues_at(due), None, "cancelled");
    assert!(b.queue("t").is_some());

    let q = timed(&b, "u", false);
    let c = consumer(&b, &q, ME, true);
    b.cancel_consumer(&q, c);
    let due = b.expire_unused_queues_at(now_ms()).expect("scheduled");
    qpidd(&b, "u", false, false, OTHER).unwrap();
    // Due, but redeclared meanwhile: put off by another timeout (the sweep comes back).
    assert_eq!(b.expire_unused_queues_at(due), Some(due));
    let later = b.expire_unused_queues_at(due).expect("put off");
    assert!(later >= due + 3000);
    assert!(b.queue("u").is_some());
    assert_eq!(b.expire_unused_queues_at(later), None);
    assert!(b.queue("u").is_none());
}

#[test]
fn an_owner_leaving_a_queue_another_session_browses_releases_it() {
    let b = broker();
    let q = qpidd(&b, "x", true, false, ME).unwrap();
    let opts = QueueOptions {
        auto_delete: true,
        exclusive_owner: Some(ME),
        ..QueueOptions::default()
    };
    let x = declare_with(&b, "xad", opts);
    let browser = consumer(&b, &x, OTHER, false);
    b.release_owner(ME);
    assert!(!q.is_exclusive());
    assert!(b.queue("xad").is_some(), "still browsed");
    b.cancel_consumer(&x, browser);
    assert!(b.queue("xad").is_none(), "gone with its last user");
}

fn from(conn: ConnectionId, key: &str, body: &'static str) -> crate::message::Message {
    let mut m =
        crate::message::MessageParts::new("", key.to_owned(), Bytes::from_static(body.as_bytes()));
    m.publisher = conn;
    m.build()
}

fn no_local(b: &Broker, name: &str, owner: Option<(OwnerId, ConnectionId)>) -> Arc<Queue> {
    let opts = QueueOptions {
        exclusive_owner: owner.map(|o| o.0),
        connection: owner.map_or(0, |o| o.1),
        arguments: [("no-local", V::Str("true".into()))].into_iter().collect(),
        ..QueueOptions::default()
    };
    declare_with(b, name, opts)
}

#[test]
fn a_no_local_queue_drops_what_its_owners_connection_publishes() {
    // qpid-python's message.test_no_local / test_no_local_awkward.
    const CONN: ConnectionId = 100;
    const ELSEWHERE: ConnectionId = 200;
    let b = broker();
    let nl = no_local(&b, "nl", Some((ME, CONN)));
    let plain = declare_with(&b, "plain", QueueOptions::default());
    let fanout = b.exchange("amq.fanout").unwrap();
    b.bind("nl", "amq.fanout", "", &Default::default()).unwrap();
    b.bind("plain", "amq.fanout", "", &Default::default())
        .unwrap();
    let out = b.publish(&fanout, from(CONN, "", "local")).unwrap();
    assert_eq!(out.queues, 1, "dropped silently by the no-local queue only");
    b.publish(&fanout, from(ELSEWHERE, "", "foreign")).unwrap();
    b.publish(&fanout, from(0, "", "unknown")).unwrap();
    assert_eq!(
        nl.queued_bodies(),
        [Bytes::from("foreign"), Bytes::from("unknown")]
    );
    assert_eq!(plain.message_count(), 3);

    // Unowned and without an exclusive consumer, no-local does nothing.
    let free = no_local(&b, "free", None);
    b.publish(&b.default_exchange().clone(), from(CONN, "free", "kept"))
        .unwrap();
    assert_eq!(free.message_count(), 1);
}

#[test]
fn an_exclusive_subscription_makes_its_connection_local() {
    // qpid-python's message.test_no_local_exclusive_subscribe.
    const CONN: ConnectionId = 100;
    let b = broker();
    let q = no_local(&b, "q", None);
    let id = b.next_consumer_id();
    q.subscribe(ConsumerSpec {
        id,
        outbox: Outbox::new(),
        owner: ME,
        connection: CONN,
        tag: Bytes::new(),
        acquire: true,
        exclusive: true,
        window: None,
        filter: None,
        ack_timeout: None,
    })
    .unwrap();
    let default = b.default_exchange().clone();
    b.publish(&default, from(CONN, "q", "mine")).unwrap();
    b.publish(&default, from(CONN + 1, "q", "theirs")).unwrap();
    assert_eq!(q.queued_bodies(), [Bytes::from("theirs")]);
    b.cancel_consumer(&q, id);
    b.publish(&default, from(CONN, "q", "now kept")).unwrap();
    assert_eq!(q.message_count(), 2);
}

#[test]
fn a_rerouted_message_is_still_local_to_its_publisher() {
    // qpid-python's new_api.test_nolocal_rerouted.
    const CONN: ConnectionId = 100;
    let b = broker();
    let holding = QueueOptions {
        alternate_exchange: Some("amq.fanout".into()),
        ..QueueOptions::default()
    };
    declare_with(&b, "holding", holding);
    let nl = no_local(&b, "nl", Some((ME, CONN)));
    b.bind("nl", "amq.fanout", "", &Default::default()).unwrap();
    let default = b.default_exchange().clone();
    b.publish(&default, from(CONN + 1, "holding", "a")).unwrap();
    b.publish(&default, from(CONN, "holding", "b")).unwrap();
    b.publish(&default, from(CONN + 1, "holding", "c")).unwrap();
    b.delete_queue("holding", false, false, ME).unwrap();
    assert_eq!(nl.queued_bodies(), [Bytes::from("a"), Bytes::from("c")]);
}
