//! Transactions end to end: 0-9-1 tx (RabbitMQ semantics) over a raw 0-9-1 peer, and 0-10 tx
//! over ferry-client, against a real ferryd.

mod common;

use std::time::Duration;

use common::raw091::{short, Raw091};
use common::Ferryd;
use ferry_amqp010::{DtxSelect, TxCommit, TxRollback, TxSelect};
use ferry_amqp091::{
    BasicProperties, BasicPublish, ConfirmSelect, FieldTable, Method, QueueDeclare,
    TxCommit as TxCommit091, TxRollback as TxRollback091, TxSelect as TxSelect091,
};
use ferry_client::{
    AcceptMode, ClientError, ConnectOptions, Connection, ErrorCode, FlowMode, OutgoingMessage,
    QueueDeclareOptions, SequenceSet, Session, SubscribeOptions, Subscription,
};

const WAIT: Duration = Duration::from_secs(5);
const QUIET: Duration = Duration::from_millis(300);

fn tx_select(raw: &mut Raw091) {
    raw.call(TxSelect091 {}, |m| matches!(m, Method::TxSelectOk(_)));
}

fn tx_commit(raw: &mut Raw091) {
    raw.call(TxCommit091 {}, |m| matches!(m, Method::TxCommitOk(_)));
}

fn tx_rollback(raw: &mut Raw091) {
    raw.call(TxRollback091 {}, |m| matches!(m, Method::TxRollbackOk(_)));
}

fn message_count(raw: &mut Raw091, queue: &str) -> u32 {
    let ok = raw.call(
        QueueDeclare {
            queue: short(queue),
            passive: true,
            ..Default::default()
        },
        |m| matches!(m, Method::QueueDeclareOk(_)),
    );
    match ok {
        Method::QueueDeclareOk(ok) => ok.message_count,
        _ => unreachable!(),
    }
}

fn get_tag(raw: &mut Raw091, queue: &str) -> (u64, bool, Vec<u8>) {
    let m = raw.get(queue, false).expect("a message");
    match m.method {
        Method::BasicGetOk(ok) => (ok.delivery_tag, ok.redelivered, m.body.to_vec()),
        other => panic!("expected get-ok, got {other:?}"),
    }
}

#[test]
fn amqp091_publishes_take_effect_at_commit_and_rollback_discards_them() {
    let broker = Ferryd::start();
    let mut publisher = Raw091::open(broker.addr);
    let mut observer = Raw091::open(broker.addr);
    publisher.declare_queue("tx-pub", FieldTable::new());
    tx_select(&mut publisher);
    let props = BasicProperties::default();
    publisher.publish("", "tx-pub", &props, b"one");
    publisher.publish("", "tx-pub", &props, b"two");
    assert_eq!(message_count(&mut publisher, "tx-pub"), 0);
    assert!(observer.get("tx-pub", true).is_none());
    tx_commit(&mut publisher);
    assert_eq!(message_count(&mut observer, "tx-pub"), 2);

    publisher.publish("", "tx-pub", &props, b"discarded");
    tx_rollback(&mut publisher);
    tx_commit(&mut publisher);
    let bodies: Vec<Vec<u8>> = std::iter::from_fn(|| observer.get("tx-pub", true))
        .map(|m| m.body.to_vec())
        .collect();
    assert_eq!(bodies, [b"one".to_vec(), b"two".to_vec()]);
}

#[test]
fn amqp091_acks_take_effect_at_commit_and_rollback_leaves_them_unacked() {
    let broker = Ferryd::start();
    let mut raw = Raw091::open(broker.addr);
    raw.declare_queue("tx-ack", FieldTable::new());
    let props = BasicProperties::default();
    for body in [&b"a"[..], b"b", b"c"] {
        raw.publish("", "tx-ack", &props, body);
    }
    // A round trip on the publishing connection: its publishes are queued before another
    // connection looks (connections are not ordered with each other).
    assert_eq!(message_count(&mut raw, "tx-ack"), 3);
    let mut consumer = Raw091::open(broker.addr);
    tx_select(&mut consumer);
    let (a, _, _) = get_tag(&mut consumer, "tx-ack");
    let (b, _, _) = get_tag(&mut consumer, "tx-ack");
    consumer.ack(b, true);
    tx_rollback(&mut consumer);
    // Rolled back: still unacknowledged under the same tags, not redelivered meanwhile.
    assert_eq!(message_count(&mut raw, "tx-ack"), 1);
    consumer.ack(a, false);
    tx_commit(&mut consumer);
    // b is still held; acking it outside a commit does nothing until the next commit.
    consumer.ack(b, false);
    let (c, _, _) = get_tag(&mut consumer, "tx-ack");
    assert_eq!(c, b + 1);
    // The channel ends with b and c acknowledged but uncommitted: both come back.
    drop(consumer);
    let mut again = Vec::new();
    for _ in 0..50 {
        if let Some(m) = raw.get("tx-ack", true) {
            let Method::BasicGetOk(ok) = &m.method else {
                unreachable!()
            };
            again.push((m.body.to_vec(), ok.redelivered));
            if again.len() == 2 {
                break;
            }
        } else {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    assert_eq!(again, [(b"b".to_vec(), true), (b"c".to_vec(), true)]);
}

#[test]
fn amqp091_mandatory_publishes_unroutable_at_commit_are_returned() {
    let broker = Ferryd::start();
    let mut raw = Raw091::open(broker.addr);
    raw.declare_queue("tx-routable", FieldTable::new());
    tx_select(&mut raw);
    let props = BasicProperties::default();
    for key in ["nowhere", "tx-routable"] {
        raw.publish_with(
            BasicPublish {
                routing_key: short(key),
                mandatory: true,
                ..Default::default()
            },
            &props,
            key.as_bytes(),
        );
    }
    raw.method(1, TxCommit091 {}.into());
    let returned = raw.delivery();
    match returned.method {
        Method::BasicReturn(r) => assert_eq!(r.routing_key.as_bytes(), b"nowhere"),
        other => panic!("expected basic.return, got {other:?}"),
    }
    raw.expect(1, |m| matches!(m, Method::TxCommitOk(_)));
    assert_eq!(message_count(&mut raw, "tx-routable"), 1);
}

#[test]
fn amqp091_transactions_and_confirms_exclude_each_other() {
    let broker = Ferryd::start();
    let mut raw = Raw091::open(broker.addr);
    tx_select(&mut raw);
    raw.method(1, ConfirmSelect { nowait: false }.into());
    assert_eq!(raw.channel_closed(), 406);

    let mut raw = Raw091::open(broker.addr);
    raw.call(ConfirmSelect { nowait: false }, |m| {
        matches!(m, Method::ConfirmSelectOk(_))
    });
    raw.method(1, TxSelect091 {}.into());
    assert_eq!(raw.channel_closed(), 406);

    let mut raw = Raw091::open(broker.addr);
    raw.method(1, TxCommit091 {}.into());
    assert_eq!(raw.channel_closed(), 406, "commit without select");
}

/// A message refused at commit (a full reject-publish queue, or a full store) fails the
/// commit with 406 "partial tx completion", as RabbitMQ does; what was accepted stays.
#[test]
fn amqp091_a_commit_a_queue_refused_part_of_is_a_precondition_failure() {
    let broker = Ferryd::start();
    let mut raw = Raw091::open(broker.addr);
    let mut limits = FieldTable::new();
    limits.push(short("x-max-length"), ferry_amqp091::FieldValue::I32(1));
    limits.push(
        short("x-overflow"),
        ferry_amqp091::FieldValue::LongStr(ferry_amqp091::LongStr::from_static("reject-publish")),
    );
    raw.declare_queue("tx-full", limits);
    tx_select(&mut raw);
    for body in [b"1", b"2"] {
        raw.publish("", "tx-full", &BasicProperties::default(), body);
    }
    raw.method(1, TxCommit091 {}.into());
    let close = raw.expect(1, |m| {
        matches!(m, Method::ChannelClose(_) | Method::TxCommitOk(_))
    });
    let Method::ChannelClose(close) = close else {
        panic!("commit-ok although the queue refused a message");
    };
    assert_eq!(close.reply_code, 406);
    assert_eq!(
        close.reply_text.as_bytes(),
        b"PRECONDITION_FAILED - partial tx completion"
    );
    let mut raw = Raw091::open(broker.addr);
    assert_eq!(message_count(&mut raw, "tx-full"), 1);
}

async fn session(broker: &Ferryd) -> (Connection, Session) {
    let conn = Connection::connect(broker.addr, ConnectOptions::default())
        .await
        .expect("connect");
    let s = conn.session().await.expect("session");
    (conn, s)
}

async fn queued(s: &Session, queue: &str) -> u32 {
    s.queue_query(queue)
        .await
        .unwrap()
        .message_count
        .unwrap_or(0)
}

async fn next_body(sub: &mut Subscription) -> (u32, String, bool) {
    let d = tokio::time::timeout(WAIT, sub.next())
        .await
        .expect("a delivery in time")
        .expect("subscription open");
    (
        d.id,
        String::from_utf8_lossy(&d.body).into_owned(),
        d.redelivered,
    )
}

fn one(id: u32) -> SequenceSet {
    let mut set = SequenceSet::new();
    set.add(id);
    set
}

fn code_of(e: ClientError) -> ErrorCode {
    match e {
        ClientError::Exception { code, .. } => code,
        other => panic!("expected an execution exception, got {other:?}"),
    }
}

#[tokio::test]
async fn amqp010_transfers_take_effect_at_commit_and_rollback_discards_them() {
    let broker = Ferryd::start();
    let (_c, s) = session(&broker).await;
    s.queue_declare("tx10", QueueDeclareOptions::default())
        .await
        .unwrap();
    let (_c2, t) = session(&broker).await;
    t.execute(TxSelect {}).await.unwrap();
    t.transfer("", &text_to("tx10", "one")).await.unwrap();
    t.transfer("", &text_to("tx10", "two")).await.unwrap();
    t.sync().await.unwrap();
    assert_eq!(queued(&s, "tx10").await, 0);
    t.execute(TxCommit {}).await.unwrap();
    assert_eq!(queued(&s, "tx10").await, 2);
    t.transfer("", &text_to("tx10", "gone")).await.unwrap();
    t.execute(TxRollback {}).await.unwrap();
    t.execute(TxCommit {}).await.unwrap();
    assert_eq!(queued(&s, "tx10").await, 2);
}

fn text_to(queue: &str, body: &str) -> OutgoingMessage {
    OutgoingMessage::builder()
        .routing_key(queue)
        .body(body.to_string())
        .build()
        .unwrap()
}

#[tokio::test]
async fn amqp010_accepts_take_effect_at_commit_and_rolled_back_ones_stay_acquired() {
    let broker = Ferryd::start();
    let (_c, s) = session(&broker).await;
    s.queue_declare("tx10-acc", QueueDeclareOptions::default())
        .await
        .unwrap();
    for body in ["a", "b"] {
        s.transfer("", &text_to("tx10-acc", body)).await.unwrap();
    }
    s.sync().await.unwrap();
    let (_c2, t) = session(&broker).await;
    t.execute(TxSelect {}).await.unwrap();
    let mut sub = t
        .subscribe(
            "tx10-acc",
            "d",
            SubscribeOptions {
                accept_mode: AcceptMode::Explicit,
                flow_mode: FlowMode::Credit,
                message_credit: 10,
                ..SubscribeOptions::default()
            },
        )
        .await
        .unwrap();
    let (a, body_a, _) = next_body(&mut sub).await;
    let (b, body_b, _) = next_body(&mut sub).await;
    assert_eq!((body_a.as_str(), body_b.as_str()), ("a", "b"));
    t.accept(&one(a)).await.unwrap();
    t.accept(&one(b)).await.unwrap();
    t.execute(TxRollback {}).await.unwrap();
    // Still acquired by the session: not back on the queue, not redelivered.
    assert_eq!(queued(&s, "tx10-acc").await, 0);
    assert!(tokio::time::timeout(QUIET, sub.next()).await.is_err());
    t.release(&one(b), true).await.unwrap();
    let (b2, body, redelivered) = next_body(&mut sub).await;
    assert_eq!((body.as_str(), redelivered), ("b", true));
    t.accept(&one(a)).await.unwrap();
    t.accept(&one(b2)).await.unwrap();
    t.execute(TxCommit {}).await.unwrap();
    drop(sub);
    t.sync().await.unwrap();
    drop(t);
    drop(_c2);
    // Committed accepts are final: nothing comes back when the session goes.
    tokio::time::sleep(QUIET).await;
    assert_eq!(queued(&s, "tx10-acc").await, 0);
}

#[tokio::test]
async fn amqp010_tx_misuse_is_illegal_state_and_tx_with_dtx_is_command_invalid() {
    let broker = Ferryd::start();
    let (c, s) = session(&broker).await;
    let e = s.execute(TxCommit {}).await.unwrap_err();
    assert_eq!(code_of(e), ErrorCode::IllegalState);
    let s = c.session().await.unwrap();
    s.execute(TxSelect {}).await.unwrap();
    let e = s.execute(TxSelect {}).await.unwrap_err();
    assert_eq!(code_of(e), ErrorCode::IllegalState);
    // One session is transactional one way or the other, as in qpidd.
    let s = c.session().await.unwrap();
    s.execute(TxSelect {}).await.unwrap();
    let e = s.execute(DtxSelect {}).await.unwrap_err();
    assert_eq!(code_of(e), ErrorCode::CommandInvalid);
    let s = c.session().await.unwrap();
    s.execute(DtxSelect {}).await.unwrap();
    let e = s.execute(TxSelect {}).await.unwrap_err();
    assert_eq!(code_of(e), ErrorCode::CommandInvalid);
}
