//! With a journal: replies to durable changes, publisher confirms of persistent messages
//! and tx.commit-ok wait until the journal has the change on stable storage, later replies
//! queue behind them in order, and a failed or full store is reported.

use std::sync::Arc;

use ferry_amqp091::{
    reply, BasicGet, BasicProperties, BasicQos, ConfirmSelect, ExchangeBind, ExchangeDeclare,
    ExchangeDelete, ExchangeUnbind, Method, QueueBind, QueueDelete, QueuePurge, QueueUnbind,
    TxCommit, TxSelect,
};
use ferry_core::{Broker, BrokerConfig, Journal};

use super::*;
use crate::shell::testing::Disk;

/// A broker journaling to a fresh [`Disk`], and a connection to it with channel 1 open
/// and durable queue `dq` declared (and synced).
async fn on_disk() -> (Arc<Disk>, Services, Client) {
    let disk = Arc::new(Disk::default());
    let services = Services {
        broker: Broker::with_journal(BrokerConfig::default(), disk.clone()),
        ..services(ServerConfig::default())
    };
    let mut c = open_on(&services, &[]).await;
    open_channel(&mut c, 1);
    c.send(&encode(1, durable_queue("dq")));
    disk.sync();
    assert!(matches!(&c.take()[..], [i] if matches!(i.method, Method::QueueDeclareOk(_))));
    (disk, services, c)
}

fn durable_queue(name: &'static str) -> QueueDeclare {
    QueueDeclare {
        durable: true,
        ..queue(name)
    }
}

fn persistent() -> BasicProperties {
    BasicProperties {
        delivery_mode: Some(2),
        ..Default::default()
    }
}

fn names(got: &[Incoming]) -> Vec<&'static str> {
    got.iter().map(|i| i.method.name()).collect()
}

#[tokio::test]
async fn replies_to_durable_changes_wait_for_the_journal_and_later_replies_queue_behind() {
    let (disk, _services, mut c) = on_disk().await;
    assert!(c.request(1, durable_queue("dq2")).is_empty());
    // Replies that changed nothing durable wait behind it, to keep the client's order.
    assert!(c
        .request(
            1,
            BasicQos {
                prefetch_size: 0,
                prefetch_count: 5,
                global: false,
            },
        )
        .is_empty());
    assert!(c.request(1, queue("transient")).is_empty());
    disk.sync();
    let got = c.take();
    assert_eq!(
        names(&got),
        ["queue.declare-ok", "basic.qos-ok", "queue.declare-ok"]
    );
    let Method::QueueDeclareOk(ok) = &got[2].method else {
        unreachable!()
    };
    assert_eq!(ok.queue.as_bytes(), b"transient");
    // With nothing held, a reply that changed nothing durable goes at once.
    assert_eq!(
        names(&c.request(1, queue("transient"))),
        ["queue.declare-ok"]
    );
}

#[tokio::test]
async fn every_durable_change_is_answered_only_once_durable() {
    let (disk, _services, mut c) = on_disk().await;
    c.publish_with(1, to("", "dq"), persistent(), b"for purge");
    let changes: [(Method, &str); 8] = [
        (
            ExchangeDeclare {
                exchange: short("dx"),
                kind: short("fanout"),
                durable: true,
                ..Default::default()
            }
            .into(),
            "exchange.declare-ok",
        ),
        (
            ExchangeBind {
                destination: short("dx"),
                source: short("amq.fanout"),
                ..Default::default()
            }
            .into(),
            "exchange.bind-ok",
        ),
        (
            ExchangeUnbind {
                destination: short("dx"),
                source: short("amq.fanout"),
                ..Default::default()
            }
            .into(),
            "exchange.unbind-ok",
        ),
        (
            QueueBind {
                queue: short("dq"),
                exchange: short("dx"),
                ..Default::default()
            }
            .into(),
            "queue.bind-ok",
        ),
        (
            QueueUnbind {
                queue: short("dq"),
                exchange: short("dx"),
                ..Default::default()
            }
            .into(),
            "queue.unbind-ok",
        ),
        (
            QueuePurge {
                queue: short("dq"),
                ..Default::default()
            }
            .into(),
            "queue.purge-ok",
        ),
        (
            QueueDelete {
                queue: short("dq"),
                ..Default::default()
            }
            .into(),
            "queue.delete-ok",
        ),
        (
            ExchangeDelete {
                exchange: short("dx"),
                ..Default::default()
            }
            .into(),
            "exchange.delete-ok",
        ),
    ];
    for (m, ok) in changes {
        let before = disk.appended();
        assert!(c.request(1, m).is_empty(), "{ok} went out before the sync");
        assert!(disk.appended() > before, "{ok}: nothing journaled");
        disk.sync();
        assert_eq!(names(&c.take()), [ok]);
    }
}

#[tokio::test]
async fn a_consumer_gets_nothing_before_its_held_consume_ok() {
    let (disk, _services, mut c) = on_disk().await;
    c.publish(1, "", "dq", b"waiting");
    // A durable exchange declared just before the consume holds its consume-ok.
    let mut batch = encode(
        1,
        ExchangeDeclare {
            exchange: short("dx"),
            kind: short("direct"),
            durable: true,
            ..Default::default()
        },
    );
    batch.extend_from_slice(&encode(1, consumer("dq", "c1")));
    c.send(&batch);
    assert!(c.take().is_empty());
    disk.sync();
    // The consume-ok gives the consumer its credit: the queue's delivery reaches the
    // outbox as the replies go out, and goes out on the event loop's next turn.
    let mut got = c.take();
    got.extend(c.take());
    assert_eq!(
        names(&got),
        ["exchange.declare-ok", "basic.consume-ok", "basic.deliver"]
    );
    assert_eq!(got[2].body(), b"waiting");
}

#[tokio::test]
async fn a_get_ok_waits_behind_a_held_reply() {
    let (disk, _services, mut c) = on_disk().await;
    c.publish(1, "", "dq", b"got");
    let bind = QueueBind {
        queue: short("dq"),
        exchange: short("amq.direct"),
        routing_key: short("k"),
        ..Default::default()
    };
    assert!(c.request(1, bind).is_empty());
    let get = BasicGet {
        queue: short("dq"),
        no_ack: true,
        ..Default::default()
    };
    assert!(c.request(1, get).is_empty());
    disk.sync();
    let got = c.take();
    assert_eq!(names(&got), ["queue.bind-ok", "basic.get-ok"]);
    assert_eq!(got[1].body(), b"got");
}

#[tokio::test]
async fn confirms_of_persistent_messages_wait_for_the_sync_and_later_ones_behind_them() {
    let (disk, _services, mut c) = on_disk().await;
    c.declare_queue(1, "memory-only");
    c.call(1, ConfirmSelect { nowait: false });
    // Persistent into a non-durable queue: nothing to journal, acked at once.
    c.publish_with(1, to("", "memory-only"), persistent(), b"p0");
    let out = methods(c.take_output());
    assert!(
        matches!(&out[..], [(1, Method::BasicAck(a))] if a.delivery_tag == 1),
        "{out:?}"
    );
    c.publish_with(1, to("", "dq"), persistent(), b"p1");
    c.publish(1, "", "dq", b"transient after it");
    assert!(c.take_output().is_empty());
    disk.sync();
    let out = methods(c.take_output());
    assert!(
        matches!(&out[..], [(1, Method::BasicAck(a))] if a.delivery_tag == 3 && a.multiple),
        "{out:?}"
    );
}

#[tokio::test]
async fn a_full_store_nacks_persistent_publishes_and_refuses_durable_declares() {
    let (disk, _services, mut c) = on_disk().await;
    c.call(1, ConfirmSelect { nowait: false });
    disk.set_full(true);
    c.publish_with(1, to("", "dq"), persistent(), b"refused");
    c.publish(1, "", "dq", b"transient");
    let out = methods(c.take_output());
    let confirms: Vec<(bool, u64)> = out
        .iter()
        .map(|(_, m)| match m {
            Method::BasicAck(a) => (true, a.delivery_tag),
            Method::BasicNack(n) => (false, n.delivery_tag),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(confirms, [(false, 1), (true, 2)]);
    let out = c.call(1, durable_queue("another"));
    assert_channel_closed(&out, 1, reply::PRECONDITION_FAILED, (50, 10));
}

#[tokio::test]
async fn tx_commit_ok_waits_for_the_commit_record() {
    let (disk, _services, mut c) = on_disk().await;
    c.call(1, TxSelect {});
    c.publish_with(1, to("", "dq"), persistent(), b"in tx");
    assert!(c.request(1, TxCommit {}).is_empty());
    disk.sync();
    assert_eq!(names(&c.take()), ["tx.commit-ok"]);
    // A commit that journals nothing is answered at once.
    c.publish(1, "", "dq", b"transient");
    assert_eq!(names(&c.request(1, TxCommit {})), ["tx.commit-ok"]);
}

#[tokio::test]
async fn a_failed_store_closes_connections_whose_replies_wait_on_it_with_541() {
    let (disk, services, mut c) = on_disk().await;
    // Another connection only waits for confirms: those are nacked instead.
    let mut publisher = open_on(&services, &[]).await;
    open_channel(&mut publisher, 1);
    publisher.call(1, ConfirmSelect { nowait: false });
    publisher.publish_with(1, to("", "dq"), persistent(), b"lost");
    assert!(publisher.take_output().is_empty());
    assert!(c.request(1, durable_queue("never")).is_empty());
    disk.fail();
    let out = methods(c.take_output());
    assert_connection_closed(&c, &out, reply::INTERNAL_ERROR);
    let out = methods(publisher.take_output());
    assert!(
        matches!(&out[..], [(1, Method::BasicNack(n))] if n.delivery_tag == 1),
        "{out:?}"
    );
    assert_eq!(publisher.conn.shell.phase, Phase::Open);
}
