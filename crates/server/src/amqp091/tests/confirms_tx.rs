//! Publisher confirms (confirm.select, basic.ack / basic.nack per publish) and transactions
//! (tx.select, commit, rollback), and how the two exclude each other.

use ferry_amqp091::{
    reply, BasicNack, BasicProperties, BasicQos, BasicReject, ConfirmSelect, FieldValue, Method,
    TxCommit, TxRollback, TxSelect,
};

use super::*;

/// A batch of publishes to the default exchange, sent in one read.
fn batch(channel: u16, publishes: &[(&'static str, bool)]) -> BytesMut {
    let mut out = BytesMut::new();
    for (key, mandatory) in publishes {
        out.extend_from_slice(&publish_frames(
            channel,
            BasicPublish {
                mandatory: *mandatory,
                ..to("", key)
            },
            BasicProperties::default(),
            key.as_bytes(),
            4096,
        ));
    }
    out
}

/// The confirms in `got`: ('a' or 'n', delivery tag, multiple).
fn confirms(got: &[(u16, Method)]) -> Vec<(char, u64, bool)> {
    got.iter()
        .filter_map(|(_, m)| match m {
            Method::BasicAck(a) => Some(('a', a.delivery_tag, a.multiple)),
            Method::BasicNack(n) => Some(('n', n.delivery_tag, n.multiple)),
            _ => None,
        })
        .collect()
}

fn select_confirms(c: &mut Client, channel: u16) {
    let ok = c.call(channel, ConfirmSelect { nowait: false });
    assert!(
        matches!(&ok[..], [(ch, Method::ConfirmSelectOk(_))] if *ch == channel),
        "{ok:?}"
    );
}

fn select_tx(c: &mut Client, channel: u16) {
    let ok = c.call(channel, TxSelect {});
    assert!(
        matches!(&ok[..], [(ch, Method::TxSelectOk(_))] if *ch == channel),
        "{ok:?}"
    );
}

fn full_queue(c: &mut Client, channel: u16, name: &'static str) {
    c.declare(
        channel,
        QueueDeclare {
            arguments: table(&[
                ("x-max-length", FieldValue::I32(1)),
                ("x-overflow", long("reject-publish")),
            ]),
            ..queue(name)
        },
    );
}

async fn with_queue() -> Client {
    let mut c = open().await;
    open_channel(&mut c, 1);
    c.declare_queue(1, "q");
    c
}

#[tokio::test]
async fn routed_and_unroutable_publishes_are_both_acked_a_batch_with_one_multiple_ack() {
    let mut c = with_queue().await;
    select_confirms(&mut c, 1);
    c.send(&batch(1, &[("q", false), ("q", false), ("nowhere", false)]));
    let out = methods(c.take_output());
    assert_eq!(confirms(&out), [('a', 3, true)]);
    assert!(out.iter().all(|(ch, _)| *ch == 1));
    c.send(&batch(1, &[("nowhere", false)]));
    assert_eq!(confirms(&methods(c.take_output())), [('a', 4, false)]);
    let q = c.conn.broker().queue("q").unwrap();
    assert_eq!(q.info().message_count, 2);
}

#[tokio::test]
async fn an_unroutable_mandatory_publish_is_returned_before_it_is_acked() {
    let mut c = with_queue().await;
    select_confirms(&mut c, 1);
    c.send(&batch(1, &[("nowhere", true)]));
    let got = c.take();
    let kinds: Vec<&str> = got.iter().map(|i| i.method.name()).collect();
    assert_eq!(kinds, ["basic.return", "basic.ack"]);
    assert_eq!(got[0].body(), b"nowhere");
    let Method::BasicAck(a) = &got[1].method else {
        unreachable!()
    };
    assert_eq!((a.delivery_tag, a.multiple), (1, false));
}

#[tokio::test]
async fn a_publish_a_full_reject_publish_queue_refuses_is_nacked() {
    let mut c = open().await;
    open_channel(&mut c, 1);
    full_queue(&mut c, 1, "full");
    select_confirms(&mut c, 1);
    c.send(&batch(
        1,
        &[("full", false), ("full", false), ("full", false)],
    ));
    assert_eq!(
        confirms(&methods(c.take_output())),
        [('a', 1, false), ('n', 2, false), ('n', 3, false)]
    );
    // Room again: acked again.
    c.call(
        1,
        ferry_amqp091::QueuePurge {
            queue: short("full"),
            ..Default::default()
        },
    );
    c.send(&batch(1, &[("full", false)]));
    assert_eq!(confirms(&methods(c.take_output())), [('a', 4, false)]);
    // Without confirms the refusal is silent, as in RabbitMQ.
    open_channel(&mut c, 2);
    c.send(&batch(2, &[("full", false)]));
    assert!(c.take_output().is_empty());
    assert_eq!(c.conn.shell.phase, Phase::Open);
}

#[tokio::test]
async fn confirms_are_sent_before_the_channel_closes() {
    let mut c = with_queue().await;
    open_channel(&mut c, 2);
    select_confirms(&mut c, 1);
    select_confirms(&mut c, 2);
    // The client closes right after publishing, in the same read.
    let mut bytes = batch(1, &[("q", false), ("q", false)]);
    bytes.extend_from_slice(&encode(1, ChannelClose::default()));
    c.send(&bytes);
    let out = methods(c.take_output());
    let kinds: Vec<&str> = out.iter().map(|(_, m)| m.name()).collect();
    assert_eq!(kinds, ["basic.ack", "channel.close-ok"]);
    assert_eq!(confirms(&out), [('a', 2, true)]);
    // A publish that fails after one that succeeded: the ack goes out before the close.
    let mut bytes = batch(2, &[("q", false)]);
    bytes.extend_from_slice(&publish_frames(
        2,
        to("missing", "k"),
        BasicProperties::default(),
        b"x",
        4096,
    ));
    c.send(&bytes);
    let out = methods(c.take_output());
    assert_eq!(confirms(&out), [('a', 1, false)]);
    assert_channel_closed(&out[1..], 2, reply::NOT_FOUND, (60, 40));
}

#[tokio::test]
async fn confirm_select_nowait_is_silent_and_may_be_repeated() {
    let mut c = with_queue().await;
    assert!(c.call(1, ConfirmSelect { nowait: true }).is_empty());
    select_confirms(&mut c, 1);
    c.send(&batch(1, &[("q", false)]));
    assert_eq!(confirms(&methods(c.take_output())), [('a', 1, false)]);
}

#[tokio::test]
async fn confirms_and_transactions_exclude_each_other_406() {
    let mut c = with_queue().await;
    open_channel(&mut c, 2);
    select_confirms(&mut c, 1);
    let out = c.call(1, TxSelect {});
    assert_channel_closed(&out, 1, reply::PRECONDITION_FAILED, (90, 10));
    select_tx(&mut c, 2);
    let out = c.call(2, ConfirmSelect { nowait: false });
    assert_channel_closed(&out, 2, reply::PRECONDITION_FAILED, (85, 10));
}

#[tokio::test]
async fn commit_and_rollback_without_tx_select_are_406() {
    let mut c = with_queue().await;
    open_channel(&mut c, 2);
    let out = c.call(1, TxCommit {});
    assert_channel_closed(&out, 1, reply::PRECONDITION_FAILED, (90, 20));
    let out = c.call(2, TxRollback {});
    assert_channel_closed(&out, 2, reply::PRECONDITION_FAILED, (90, 30));
}

#[tokio::test]
async fn transactional_publishes_reach_queues_only_at_commit() {
    let mut c = with_queue().await;
    open_channel(&mut c, 2);
    c.consume(2, consumer("q", "watcher"));
    select_tx(&mut c, 1);
    // Selecting again is harmless.
    select_tx(&mut c, 1);
    c.send(&batch(1, &[("q", false), ("q", false)]));
    assert!(c.take().is_empty());
    let got = c.request(1, TxCommit {});
    assert!(
        matches!(
            got[0],
            Incoming {
                channel: 1,
                method: Method::TxCommitOk(_),
                ..
            }
        ),
        "{got:?}"
    );
    assert_eq!(got[1..].len(), 2);
    assert!(got[1..].iter().all(|d| d.channel == 2));
    // The channel stays transactional: the next publish waits for the next commit.
    c.send(&batch(1, &[("q", false)]));
    assert!(c.take().is_empty());
    let got = c.request(1, TxCommit {});
    assert_eq!(bodies(&got), [&b"q"[..]]);
}

#[tokio::test]
async fn rollback_discards_the_staged_publishes() {
    let mut c = with_queue().await;
    select_tx(&mut c, 1);
    c.send(&batch(1, &[("q", false), ("q", true), ("nowhere", true)]));
    let out = c.call(1, TxRollback {});
    assert!(
        matches!(&out[..], [(1, Method::TxRollbackOk(_))]),
        "{out:?}"
    );
    // Nothing of it comes at the next commit, not even the return.
    let out = c.call(1, TxCommit {});
    assert!(matches!(&out[..], [(1, Method::TxCommitOk(_))]), "{out:?}");
    let q = c.conn.broker().queue("q").unwrap();
    assert_eq!(q.info().message_count, 0);
}

#[tokio::test]
async fn an_unroutable_mandatory_publish_is_returned_at_commit() {
    let mut c = with_queue().await;
    select_tx(&mut c, 1);
    c.send(&batch(
        1,
        &[("nowhere", true), ("q", true), ("nowhere", false)],
    ));
    assert!(c.take().is_empty());
    let got = c.request(1, TxCommit {});
    let kinds: Vec<&str> = got.iter().map(|i| i.method.name()).collect();
    assert_eq!(kinds, ["basic.return", "tx.commit-ok"]);
    let Method::BasicReturn(r) = &got[0].method else {
        unreachable!()
    };
    assert_eq!(
        (r.reply_code, r.routing_key.as_bytes()),
        (312, &b"nowhere"[..])
    );
}

#[tokio::test]
async fn a_commit_a_full_queue_refuses_in_part_is_406() {
    let mut c = open().await;
    open_channel(&mut c, 1);
    full_queue(&mut c, 1, "full");
    select_tx(&mut c, 1);
    c.send(&batch(1, &[("full", false), ("full", false)]));
    let out = c.call(1, TxCommit {});
    assert_channel_closed(&out, 1, reply::PRECONDITION_FAILED, (90, 20));
    // The part that fitted took effect.
    let q = c.conn.broker().queue("full").unwrap();
    assert_eq!(q.info().message_count, 1);
}

#[tokio::test]
async fn acks_in_a_transaction_settle_at_commit_and_rollback_makes_them_outstanding_again() {
    let mut c = with_queue().await;
    for body in [b"1", b"2", b"3"] {
        c.publish(1, "", "q", body);
    }
    select_tx(&mut c, 1);
    let got = c.consume(1, consumer("q", "c1"));
    assert_eq!(delivered(&got).len(), 3);
    let q = c.conn.broker().queue("q").unwrap();
    c.ack(1, 2, true);
    assert_eq!(q.unsettled_count(), 3, "staged, not applied");
    // Rolled back: 1 and 2 are unacknowledged again under their tags, not redelivered.
    let out = c.call(1, TxRollback {});
    assert!(
        matches!(&out[..], [(1, Method::TxRollbackOk(_))]),
        "{out:?}"
    );
    assert_eq!(q.unsettled_count(), 3);
    c.ack(1, 1, false);
    c.ack(1, 3, false);
    let out = c.call(1, TxCommit {});
    assert!(matches!(&out[..], [(1, Method::TxCommitOk(_))]), "{out:?}");
    assert_eq!(q.unsettled_count(), 1);
    // Acking a tag already acked in this transaction is an unknown tag.
    assert!(c.ack(1, 2, false).is_empty());
    c.send(&encode(
        1,
        BasicAck {
            delivery_tag: 2,
            multiple: false,
        },
    ));
    let out = methods(c.take_output());
    assert_channel_closed(&out, 1, reply::PRECONDITION_FAILED, (60, 80));
}

#[tokio::test]
async fn a_channel_closed_inside_a_transaction_requeues_what_it_had_acked() {
    let mut c = with_queue().await;
    open_channel(&mut c, 2);
    c.publish(1, "", "q", b"1");
    c.publish(1, "", "q", b"2");
    select_tx(&mut c, 1);
    c.consume(1, consumer("q", "c1"));
    c.ack(1, 1, false);
    c.send(&batch(1, &[("q", false)]));
    c.call(1, ChannelClose::default());
    // Both deliveries are back, the staged publish is not.
    let got = c.consume(2, consumer("q", "c2"));
    assert_eq!(
        delivered(&got),
        [(1, true, "1".into()), (2, true, "2".into())]
    );
}

#[tokio::test]
async fn prefetch_refills_at_commit_not_at_the_transactional_ack() {
    let mut c = with_queue().await;
    for body in [b"1", b"2", b"3"] {
        c.publish(1, "", "q", body);
    }
    c.call(
        1,
        BasicQos {
            prefetch_size: 0,
            prefetch_count: 1,
            global: false,
        },
    );
    select_tx(&mut c, 1);
    assert_eq!(bodies(&c.consume(1, consumer("q", "c1"))), [&b"1"[..]]);
    assert!(c.ack(1, 1, false).is_empty());
    let got = c.request(1, TxCommit {});
    assert!(matches!(got[0].method, Method::TxCommitOk(_)), "{got:?}");
    assert_eq!(delivered(&got[1..]), [(2, false, "2".into())]);
}

#[tokio::test]
async fn transactional_nacks_and_rejects_requeue_or_drop_at_commit() {
    let mut c = with_queue().await;
    for body in [b"1", b"2"] {
        c.publish(1, "", "q", body);
    }
    select_tx(&mut c, 1);
    c.consume(1, consumer("q", "c1"));
    let staged = c.request(
        1,
        BasicNack {
            delivery_tag: 1,
            multiple: false,
            requeue: true,
        },
    );
    assert!(staged.is_empty());
    c.request(
        1,
        BasicReject {
            delivery_tag: 2,
            requeue: false,
        },
    );
    let got = c.request(1, TxCommit {});
    assert!(matches!(got[0].method, Method::TxCommitOk(_)), "{got:?}");
    // 1 comes back redelivered; 2 is gone.
    assert_eq!(delivered(&got[1..]), [(3, true, "1".into())]);
    let q = c.conn.broker().queue("q").unwrap();
    assert_eq!((q.info().message_count, q.unsettled_count()), (0, 1));
}
