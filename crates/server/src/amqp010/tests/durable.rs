//! With a journal: a command whose effect must be on stable storage (a persistent message
//! reaching a durable queue, a durable declaration, an accept of a stored message, a commit)
//! completes only once the journal has synced it; execution.sync waits for every earlier
//! command; a failed or full store is reported as resource-limit-exceeded.

use std::sync::Arc;

use ferry_amqp010::{
    DeliveryMode, ExchangeBind, ExchangeDeclare, ExchangeDelete, ExchangeUnbind, QueueDelete,
    QueuePurge, TxCommit, TxSelect,
};
use ferry_core::{Broker, BrokerConfig, Journal};

use super::*;
use crate::shell::testing::Disk;

/// A broker journaling to a fresh [`Disk`], and a connection to it with session `s1` on
/// channel 1 and durable queue `dq` declared (and synced).
async fn on_disk() -> (Arc<Disk>, Services, Client) {
    let disk = Arc::new(Disk::default());
    let services = Services {
        broker: Broker::with_journal(BrokerConfig::default(), disk.clone()),
        ..services(ServerConfig::default())
    };
    let mut c = open_on(services.clone(), 0).await;
    c.attach(1, "s1");
    assert!(c.call(1, durable_queue("dq")).is_empty());
    disk.sync();
    assert_eq!(completions(&decode(c.take_output()), 1), [set(&[0])]);
    (disk, services, c)
}

fn durable_queue(name: &str) -> QueueDeclare {
    QueueDeclare {
        durable: true,
        ..declare(name)
    }
}

fn persistent(key: &str) -> MessageHeader {
    MessageHeader {
        delivery: Some(DeliveryProperties {
            routing_key: Some(Str::from(key)),
            delivery_mode: Some(DeliveryMode::Persistent),
            ..Default::default()
        }),
        properties: None,
        other: Vec::new(),
    }
}

/// Whether the last session.completed on channel 1 in `out` covers command `id`.
fn completes(out: &[Item], id: u32) -> bool {
    completions(out, 1).last().is_some_and(|s| s.contains(id))
}

#[tokio::test]
async fn a_durable_declaration_completes_once_synced() {
    let (disk, _services, mut c) = on_disk().await;
    let out = c.call(1, durable_queue("dq2"));
    assert!(out.is_empty(), "{out:?}");
    // A later command that changes nothing completes at once (0-10 completion need not be
    // in order); one that changes what may be durable waits for everything journaled.
    let query = ferry_amqp010::QueueQuery {
        queue: Some(Str::from("dq")),
    };
    let out = c.call(1, query);
    assert!(completes(&out, 2) && !completes(&out, 1), "{out:?}");
    let out = c.call(1, declare("transient"));
    assert!(!completes(&out, 3), "{out:?}");
    disk.sync();
    let out = decode(c.take_output());
    assert_eq!(completions(&out, 1), [set(&[0, 1, 2, 3])]);
}

#[tokio::test]
async fn every_durable_change_completes_only_once_synced() {
    let (disk, _services, mut c) = on_disk().await;
    c.publish(1, "", &persistent("dq"), b"for purge");
    disk.sync();
    c.take_output();
    let changes: Vec<Command> = vec![
        ExchangeDeclare {
            exchange: Some(Str::from("dx")),
            r#type: Some(Str::from("fanout")),
            durable: true,
            ..Default::default()
        }
        .into(),
        ExchangeBind {
            queue: Some(Str::from("dq")),
            exchange: Some(Str::from("dx")),
            binding_key: Some(Str::from("")),
            arguments: None,
        }
        .into(),
        ExchangeUnbind {
            queue: Some(Str::from("dq")),
            exchange: Some(Str::from("dx")),
            binding_key: Some(Str::from("")),
        }
        .into(),
        QueuePurge {
            queue: Some(Str::from("dq")),
        }
        .into(),
        QueueDelete {
            queue: Some(Str::from("dq")),
            ..Default::default()
        }
        .into(),
        ExchangeDelete {
            exchange: Some(Str::from("dx")),
            if_unused: false,
        }
        .into(),
    ];
    // Commands 0 (the declare) and 1 (the transfer) are done.
    for (i, cmd) in changes.into_iter().enumerate() {
        let id = 2 + i as u32;
        let name = cmd.name();
        let before = disk.appended();
        let out = c.call(1, cmd);
        assert!(
            !completes(&out, id),
            "{name} completed before the sync: {out:?}"
        );
        assert!(disk.appended() > before, "{name}: nothing journaled");
        disk.sync();
        let out = decode(c.take_output());
        assert!(completes(&out, id), "{name}: {out:?}");
    }
}

#[tokio::test]
async fn a_persistent_transfer_to_a_durable_queue_completes_once_synced() {
    let (disk, _services, mut c) = on_disk().await;
    c.call(1, declare("memory-only"));
    // Persistent into a non-durable queue, transient into a durable one: nothing to wait for.
    let out = c.exchange(transfer_frames(
        1,
        "",
        &persistent("memory-only"),
        b"p0",
        true,
    ));
    assert!(completes(&out, 2), "{out:?}");
    let out = c.exchange(transfer_frames(1, "", &keyed("dq"), b"t0", true));
    assert!(completes(&out, 3), "{out:?}");
    let out = c.exchange(transfer_frames(1, "", &persistent("dq"), b"p1", true));
    assert!(out.is_empty(), "{out:?}");
    // The message is on the queue (deliverable) before it is durable.
    assert_eq!(c.conn.broker().queue("dq").unwrap().message_count(), 2);
    disk.sync();
    let out = decode(c.take_output());
    assert!(completes(&out, 4), "{out:?}");
}

#[tokio::test]
async fn execution_sync_completes_after_every_earlier_command() {
    let (disk, _services, mut c) = on_disk().await;
    for body in ["1", "2", "3"] {
        c.send(&transfer_frames(
            1,
            "",
            &persistent("dq"),
            body.as_bytes(),
            false,
        ));
    }
    let out = c.call(1, ExecutionSync {});
    assert!(!completes(&out, 4), "{out:?}");
    // Syncing part of the way completes what is durable, and not the sync.
    disk.sync();
    let out = decode(c.take_output());
    assert_eq!(completions(&out, 1), [range(0, 4)]);
    // With nothing waiting, a sync completes at once.
    let out = c.call(1, ExecutionSync {});
    assert!(completes(&out, 5), "{out:?}");
}

#[tokio::test]
async fn a_sync_reached_by_the_journal_meanwhile_completes_at_once() {
    let (disk, _services, mut c) = on_disk().await;
    c.send(&transfer_frames(1, "", &persistent("dq"), b"1", false));
    // The writer synced before the next command was read.
    disk.sync();
    let out = c.call(1, ExecutionSync {});
    // (Reported twice: once as the journal's wake-up is handled, once for the sync flag.)
    assert_eq!(completions(&out, 1).last(), Some(&range(0, 2)));
}

#[tokio::test]
async fn settling_a_stored_message_completes_once_its_dequeue_is_synced() {
    let (disk, _services, mut c) = on_disk().await;
    c.publish(1, "", &persistent("dq"), b"accepted");
    c.publish(1, "", &persistent("dq"), b"rejected");
    disk.sync();
    c.take_output();
    c.subscribe(1, "dq", "d", AcceptMode::Explicit, AcquireMode::PreAcquired);
    assert_eq!(c.grant(1, "d", 2).len(), 2);
    // Commands: declare, two transfers, subscribe, two flows; the accept is 6.
    let accept = MessageAccept {
        transfers: Some(set(&[0])),
    };
    let out = c.call(1, accept);
    assert!(!completes(&out, 6), "{out:?}");
    disk.sync();
    assert!(completes(&decode(c.take_output()), 6));
    let reject = ferry_amqp010::MessageReject {
        transfers: Some(set(&[1])),
        code: None,
        text: None,
    };
    let out = c.call(1, reject);
    assert!(!completes(&out, 7), "{out:?}");
    disk.sync();
    assert!(completes(&decode(c.take_output()), 7));
    assert_eq!(c.conn.broker().queue("dq").unwrap().message_count(), 0);
}

#[tokio::test]
async fn a_commit_completes_once_its_commit_record_is_synced() {
    let (disk, _services, mut c) = on_disk().await;
    c.call(1, TxSelect {});
    c.publish(1, "", &persistent("dq"), b"in tx");
    let out = c.call(1, TxCommit {});
    assert!(!completes(&out, 3), "{out:?}");
    disk.sync();
    assert!(completes(&decode(c.take_output()), 3));
    // A commit that journals nothing completes at once.
    c.publish(1, "", &keyed("dq"), b"transient");
    let out = c.call(1, TxCommit {});
    assert!(completes(&out, 5), "{out:?}");
}

#[tokio::test]
async fn a_failed_store_fails_the_sessions_waiting_on_it() {
    let (disk, services, mut c) = on_disk().await;
    c.attach(2, "idle");
    let mut other = open_on(services, 0).await;
    other.attach(1, "elsewhere");
    c.send(&transfer_frames(1, "", &keyed("dq"), b"transient", false));
    c.send(&transfer_frames(1, "", &persistent("dq"), b"lost", false));
    let out = c.call(1, ExecutionSync {});
    assert!(!completes(&out, 2), "{out:?}");
    disk.fail();
    let out = decode(c.take_output());
    let (code, id, text) = failure(&out);
    assert_eq!(
        (code, id, text.as_str()),
        (
            ErrorCode::ResourceLimitExceeded,
            2,
            "the store failed: the message is not on stable storage"
        )
    );
    assert!(matches!(
        out.last(),
        Some(Item::Control(1, Control::SessionDetach(_)))
    ));
    // Sessions with nothing waiting carry on.
    assert_eq!(exception(&c.call(2, ExecutionSync {})), None);
    assert_eq!(exception(&other.call(1, ExecutionSync {})), None);
    assert_eq!(c.conn.shell.phase, Phase::Open);
}

#[tokio::test]
async fn a_full_store_refuses_persistent_transfers_and_durable_declarations() {
    let (disk, _services, mut c) = on_disk().await;
    c.attach(2, "s2");
    disk.set_full(true);
    // Transient messages still go.
    let out = c.exchange(transfer_frames(1, "", &keyed("dq"), b"fine", true));
    assert!(completes(&out, 1), "{out:?}");
    let out = c.publish(1, "", &persistent("dq"), b"refused");
    assert_eq!(failure(&out).0, ErrorCode::ResourceLimitExceeded);
    let out = c.call(2, durable_queue("another"));
    assert_eq!(failure(&out).0, ErrorCode::ResourceLimitExceeded);
    assert_eq!(c.conn.broker().queue("dq").unwrap().message_count(), 1);
}

#[tokio::test]
async fn a_session_that_ends_while_waiting_is_forgotten() {
    let (disk, _services, mut c) = on_disk().await;
    c.publish(1, "", &persistent("dq"), b"m");
    c.exchange(control(
        1,
        SessionDetach {
            name: Some(Bytes::from_static(b"s1")),
        },
    ));
    disk.sync();
    assert!(decode(c.take_output()).is_empty());
    // Nor does a later wake-up reach a new session on that channel.
    c.attach(1, "s1");
    c.attach(2, "s2");
    c.publish(2, "", &persistent("dq"), b"n");
    disk.sync();
    let out = decode(c.take_output());
    assert_eq!(names(&out), ["session.completed"]);
    assert!(completions(&out, 1).is_empty());
    assert_eq!(c.conn.broker().queue("dq").unwrap().message_count(), 2);
}

#[tokio::test]
async fn completions_follow_the_journal_as_it_catches_up() {
    let (disk, _services, mut c) = on_disk().await;
    c.send(&transfer_frames(1, "", &persistent("dq"), b"1", false));
    // The writer syncs the first; the second arrives before the connection hears of it.
    disk.sync();
    c.send(&transfer_frames(1, "", &persistent("dq"), b"2", false));
    let out = decode(c.take_output());
    assert_eq!(completions(&out, 1), [range(0, 1)]);
    disk.sync();
    let out = decode(c.take_output());
    assert_eq!(completions(&out, 1), [range(0, 2)]);
}
