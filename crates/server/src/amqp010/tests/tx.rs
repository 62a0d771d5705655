//! The tx class: after tx.select a session's transfers and accepts take effect at
//! tx.commit and vanish at tx.rollback; release and reject are not transactional; misuse is
//! illegal-state. The dtx class: work under a branch takes effect when any session commits
//! it; qpidd's codes for misuse.

use ferry_amqp010::{
    DtxCommit, DtxEnd, DtxForget, DtxGetTimeout, DtxPrepare, DtxRecover, DtxRollback, DtxSelect,
    DtxSetTimeout, DtxStart, GetTimeoutResult, Map, MessageRelease, RecoverResult, TxCommit,
    TxRollback, TxSelect, Value, XaResult, XaStatus, Xid,
};

use super::*;

/// A connection with session `s1` on channel 1 and queue `q`.
async fn with_queue() -> Client {
    let mut c = open().await;
    c.attach(1, "s1");
    c.call(1, declare("q"));
    c
}

fn accept(ids: &[u32]) -> MessageAccept {
    MessageAccept {
        transfers: Some(set(ids)),
    }
}

fn queue_state(c: &Client, name: &str) -> (u64, u64) {
    let q = c.conn.broker().queue(name).expect("the queue");
    (q.message_count(), q.unsettled_count())
}

#[tokio::test]
async fn transfers_in_a_transaction_are_enqueued_at_commit_and_dropped_at_rollback() {
    let mut c = with_queue().await;
    assert_eq!(exception(&c.call(1, TxSelect {})), None);
    for body in ["a", "b"] {
        let out = c.publish(1, "", &keyed("q"), body.as_bytes());
        assert_eq!(exception(&out), None);
    }
    // The transfers are complete (staged), but not on the queue.
    let out = c.call(1, ExecutionSync {});
    assert_eq!(completions(&out, 1), [range(0, 4)]);
    assert_eq!(queue_state(&c, "q"), (0, 0));
    assert_eq!(exception(&c.call(1, TxCommit {})), None);
    assert_eq!(
        c.conn.broker().queue("q").unwrap().queued_bodies(),
        [Bytes::from_static(b"a"), Bytes::from_static(b"b")]
    );
    c.publish(1, "", &keyed("q"), b"never");
    assert_eq!(exception(&c.call(1, TxRollback {})), None);
    // The session stays transactional: a commit now has nothing to do.
    assert_eq!(exception(&c.call(1, TxCommit {})), None);
    assert_eq!(queue_state(&c, "q"), (2, 0));
}

#[tokio::test]
async fn accepts_in_a_transaction_settle_at_commit_and_stay_acquired_after_rollback() {
    let mut c = with_queue().await;
    for body in ["a", "b", "c"] {
        c.publish(1, "", &keyed("q"), body.as_bytes());
    }
    c.call(1, TxSelect {});
    c.subscribe(1, "q", "d", AcceptMode::Explicit, AcquireMode::PreAcquired);
    assert_eq!(c.grant(1, "d", 3).len(), 3);
    c.call(1, accept(&[0, 1]));
    assert_eq!(queue_state(&c, "q"), (0, 3));
    c.call(1, TxRollback {});
    // Rolled back: still acquired by the session (the spec: the client releases them).
    assert_eq!(queue_state(&c, "q"), (0, 3));
    c.call(1, accept(&[1, 2]));
    c.call(1, TxCommit {});
    assert_eq!(queue_state(&c, "q"), (0, 1));
    // What the session still holds goes back when it ends.
    c.exchange(control(
        1,
        SessionDetach {
            name: Some(Bytes::from_static(b"s1")),
        },
    ));
    assert_eq!(
        c.conn.broker().queue("q").unwrap().queued_bodies(),
        [Bytes::from_static(b"a")]
    );
}

#[tokio::test]
async fn release_and_reject_are_not_transactional() {
    let mut c = with_queue().await;
    for body in ["a", "b", "c"] {
        c.publish(1, "", &keyed("q"), body.as_bytes());
    }
    c.call(1, TxSelect {});
    c.subscribe(1, "q", "d", AcceptMode::Explicit, AcquireMode::PreAcquired);
    c.call(
        1,
        ferry_amqp010::MessageSetFlowMode {
            destination: Some(Str::from("d")),
            flow_mode: Some(ferry_amqp010::FlowMode::Credit),
        },
    );
    assert_eq!(c.grant(1, "d", 3).len(), 3);
    // Accepted in the transaction, then released before the commit: the release wins.
    c.call(1, accept(&[0]));
    let release = MessageRelease {
        transfers: Some(set(&[0])),
        set_redelivered: true,
    };
    c.call(1, release);
    let reject = ferry_amqp010::MessageReject {
        transfers: Some(set(&[1])),
        code: None,
        text: None,
    };
    c.call(1, reject);
    assert_eq!(queue_state(&c, "q"), (1, 1));
    c.call(1, TxCommit {});
    assert_eq!(queue_state(&c, "q"), (1, 1));
    assert_eq!(
        c.conn.broker().queue("q").unwrap().queued_bodies(),
        [Bytes::from_static(b"a")]
    );
}

#[tokio::test]
async fn tx_misuse_is_illegal_state() {
    let mut c = open().await;
    let cases: Vec<(Command, &str)> = vec![
        (
            TxCommit {}.into(),
            "tx.commit on a session that has not selected transactions",
        ),
        (
            TxRollback {}.into(),
            "tx.rollback on a session that has not selected transactions",
        ),
    ];
    for (i, (cmd, text)) in cases.into_iter().enumerate() {
        let channel = 1 + i as u16;
        let name: &'static str = Box::leak(format!("s{channel}").into_boxed_str());
        c.attach(channel, name);
        let out = c.call(channel, cmd);
        assert_eq!(failure(&out), (ErrorCode::IllegalState, 0, text.to_owned()));
    }
    c.attach(3, "s3");
    c.call(3, TxSelect {});
    let out = c.call(3, TxSelect {});
    assert_eq!(
        failure(&out),
        (
            ErrorCode::IllegalState,
            1,
            "tx.select on a session that is already transactional".to_owned()
        )
    );
}

#[tokio::test]
async fn a_session_that_ends_with_an_open_transaction_loses_what_it_staged() {
    let mut c = with_queue().await;
    c.call(1, TxSelect {});
    c.publish(1, "", &keyed("q"), b"staged");
    c.exchange(control(
        1,
        SessionDetach {
            name: Some(Bytes::from_static(b"s1")),
        },
    ));
    assert_eq!(queue_state(&c, "q"), (0, 0));
}

#[tokio::test]
async fn a_commit_a_queue_limit_refuses_fails_the_session_with_resource_limit_exceeded() {
    let mut c = open().await;
    c.attach(1, "s1");
    let mut args = Map::new();
    args.insert("qpid.max_count", Value::Uint32(1));
    args.insert("qpid.policy_type", Value::Str16(Str::from("reject")));
    let small = QueueDeclare {
        arguments: Some(args),
        ..declare("small")
    };
    c.call(1, small);
    c.call(1, declare("big"));
    for q in ["small", "big"] {
        let bind = ferry_amqp010::ExchangeBind {
            queue: Some(Str::from(q)),
            exchange: Some(Str::from("amq.fanout")),
            binding_key: Some(Str::from("")),
            arguments: None,
        };
        c.call(1, bind);
    }
    c.call(1, TxSelect {});
    c.publish(1, "amq.fanout", &keyed(""), b"1");
    c.publish(1, "amq.fanout", &keyed(""), b"2");
    let out = c.call(1, TxCommit {});
    let (code, id, _) = failure(&out);
    assert_eq!((code, id), (ErrorCode::ResourceLimitExceeded, 7));
    // As for a plain transfer, the other queue got both.
    assert_eq!(queue_state(&c, "small"), (1, 0));
    assert_eq!(queue_state(&c, "big"), (2, 0));
}

fn xid(global: &str) -> Option<Xid> {
    Some(Xid {
        format: Some(7),
        global_id: Some(Bytes::copy_from_slice(global.as_bytes())),
        branch_id: Some(Bytes::from_static(b"b")),
    })
}

/// The XA status of the one execution.result in `items`.
#[track_caller]
fn xa(items: &[Item]) -> XaStatus {
    let (_, r): (u32, XaResult) = result(items);
    r.status.expect("a status")
}

fn start(global: &str) -> DtxStart {
    DtxStart {
        xid: xid(global),
        ..Default::default()
    }
}

fn end(global: &str) -> DtxEnd {
    DtxEnd {
        xid: xid(global),
        ..Default::default()
    }
}

#[tokio::test]
async fn dtx_work_takes_effect_at_commit_from_any_session() {
    let mut c = with_queue().await;
    c.publish(1, "", &keyed("q"), b"old");
    c.attach(2, "other");
    assert_eq!(exception(&c.call(1, DtxSelect {})), None);
    assert_eq!(xa(&c.call(1, start("x"))), XaStatus::XaOk);
    c.subscribe(1, "q", "d", AcceptMode::Explicit, AcquireMode::PreAcquired);
    assert_eq!(c.grant(1, "d", 1).len(), 1);
    // Our command 0 was dtx.start's result: the delivery is 1.
    c.call(1, accept(&[1]));
    c.publish(1, "", &keyed("q"), b"new");
    assert_eq!(
        queue_state(&c, "q"),
        (0, 1),
        "accepted under the branch: still held"
    );
    assert_eq!(xa(&c.call(1, end("x"))), XaStatus::XaOk);
    // Ended: the session works outside the branch again.
    c.publish(1, "", &keyed("q"), b"plain");
    assert_eq!(queue_state(&c, "q"), (1, 1));
    let prepare = DtxPrepare { xid: xid("x") };
    assert_eq!(xa(&c.call(2, prepare)), XaStatus::XaOk);
    let (_, recovered): (u32, RecoverResult) = result(&c.call(2, DtxRecover {}));
    let in_doubt = recovered.in_doubt.expect("in-doubt");
    assert_eq!(in_doubt.items.len(), 1);
    let commit = DtxCommit {
        xid: xid("x"),
        one_phase: false,
    };
    assert_eq!(xa(&c.call(2, commit)), XaStatus::XaOk);
    assert_eq!(
        c.conn.broker().queue("q").unwrap().queued_bodies(),
        [Bytes::from_static(b"plain"), Bytes::from_static(b"new")]
    );
    assert_eq!(queue_state(&c, "q"), (2, 0), "the accept applied");
    assert!(c.conn.broker().dtx().is_empty());
}

#[tokio::test]
async fn a_session_that_ends_dooms_its_branch_and_rollback_requeues() {
    let mut c = with_queue().await;
    c.publish(1, "", &keyed("q"), b"m");
    c.attach(2, "other");
    c.call(1, DtxSelect {});
    c.call(1, start("x"));
    c.subscribe(1, "q", "d", AcceptMode::Explicit, AcquireMode::PreAcquired);
    c.grant(1, "d", 1);
    c.call(1, accept(&[1]));
    c.exchange(control(
        1,
        SessionDetach {
            name: Some(Bytes::from_static(b"s1")),
        },
    ));
    // The accept belongs to the branch, not the session: still held.
    assert_eq!(queue_state(&c, "q"), (0, 1));
    assert_eq!(
        xa(&c.call(2, DtxPrepare { xid: xid("x") })),
        XaStatus::XaRbrollback
    );
    assert_eq!(queue_state(&c, "q"), (1, 0), "undone: back on the queue");
    assert_eq!(
        xa(&c.call(2, DtxRollback { xid: xid("x") })),
        XaStatus::XaOk
    );
    assert!(c.conn.broker().dtx().is_empty());
}

#[tokio::test]
async fn work_staged_after_a_timeout_goes_back_when_the_session_lets_go() {
    let mut c = with_queue().await;
    for body in ["a", "b"] {
        c.publish(1, "", &keyed("q"), body.as_bytes());
    }
    c.attach(2, "other");
    c.call(1, DtxSelect {});
    c.call(1, start("x"));
    c.subscribe(1, "q", "d", AcceptMode::Explicit, AcquireMode::PreAcquired);
    assert_eq!(c.grant(1, "d", 2).len(), 2);
    c.call(1, accept(&[1]));
    // The branch times out (the housekeeping task's round, run here by hand) and another
    // session rolls it back while this one is still associated.
    let broker = c.conn.broker().clone();
    broker.dtx().expire_due(ferry_core::now_ms() + 3_600_000);
    assert_eq!(
        xa(&c.call(2, DtxRollback { xid: xid("x") })),
        XaStatus::XaRbtimeout
    );
    assert_eq!(queue_state(&c, "q"), (1, 1), "the first accept undone");
    c.call(1, accept(&[2]));
    assert_eq!(queue_state(&c, "q"), (1, 1), "staged in the session's work");
    assert_eq!(xa(&c.call(1, end("x"))), XaStatus::XaRbtimeout);
    assert_eq!(
        queue_state(&c, "q"),
        (2, 0),
        "and undone as the session lets go"
    );
}

#[tokio::test]
async fn a_session_suspends_a_bounded_number_of_associations() {
    let mut c = with_queue().await;
    c.call(1, DtxSelect {});
    let suspend = |global: &str| DtxEnd {
        xid: xid(global),
        suspend: true,
        fail: false,
    };
    for i in 0..1024 {
        let name = format!("s{i}");
        assert_eq!(xa(&c.call(1, start(&name))), XaStatus::XaOk);
        assert_eq!(xa(&c.call(1, suspend(&name))), XaStatus::XaOk);
    }
    c.call(1, start("over"));
    let (code, _, _) = failure(&c.call(1, suspend("over")));
    assert_eq!(code, ErrorCode::ResourceLimitExceeded);
    // The session failed: every association it held ended as failed.
    c.attach(2, "other");
    let prepare = DtxPrepare { xid: xid("s7") };
    assert_eq!(xa(&c.call(2, prepare)), XaStatus::XaRbrollback);
}

#[tokio::test]
async fn dtx_misuse_gets_qpidds_codes() {
    let mut c = open().await;
    let cases: Vec<(Command, ErrorCode)> = vec![
        // Not selected.
        (start("x").into(), ErrorCode::CommandInvalid),
        (
            DtxStart {
                resume: true,
                ..Default::default()
            }
            .into(),
            ErrorCode::CommandInvalid,
        ),
        (
            DtxPrepare { xid: xid("nobody") }.into(),
            ErrorCode::NotFound,
        ),
        (
            DtxCommit {
                xid: xid("nobody"),
                one_phase: true,
            }
            .into(),
            ErrorCode::NotFound,
        ),
        (
            DtxRollback { xid: xid("nobody") }.into(),
            ErrorCode::NotFound,
        ),
        (
            DtxGetTimeout { xid: xid("nobody") }.into(),
            ErrorCode::NotFound,
        ),
        (DtxForget { xid: xid("nobody") }.into(), ErrorCode::NotFound),
        (
            DtxSetTimeout {
                xid: xid("nobody"),
                timeout: Some(5),
            }
            .into(),
            ErrorCode::NotFound,
        ),
    ];
    for (i, (cmd, code)) in cases.into_iter().enumerate() {
        let channel = 1 + i as u16;
        let name: &'static str = Box::leak(format!("dtx{channel}").into_boxed_str());
        c.attach(channel, name);
        let what = cmd.name();
        assert_eq!(failure(&c.call(channel, cmd)).0, code, "{what}");
    }
    // Selected: join with resume, end with suspend and fail, end of another xid, a start
    // of a known xid elsewhere, a timeout above the maximum.
    c.attach(20, "a");
    c.attach(21, "b");
    c.call(20, DtxSelect {});
    c.call(21, DtxSelect {});
    c.call(20, start("x"));
    let both = DtxStart {
        xid: xid("y"),
        join: true,
        resume: true,
    };
    assert_eq!(failure(&c.call(21, both)).0, ErrorCode::CommandInvalid);
    c.attach(22, "c");
    c.call(22, DtxSelect {});
    assert_eq!(failure(&c.call(22, start("x"))).0, ErrorCode::NotAllowed);
    c.attach(23, "d");
    c.call(23, DtxSelect {});
    assert_eq!(failure(&c.call(23, end("x"))).0, ErrorCode::IllegalState);
    c.attach(24, "e");
    let too_long = DtxSetTimeout {
        xid: xid("x"),
        timeout: Some(3601),
    };
    assert_eq!(failure(&c.call(24, too_long)).0, ErrorCode::InvalidArgument);
    c.attach(26, "e2");
    let (_, timeout): (u32, GetTimeoutResult) =
        result(&c.call(26, DtxGetTimeout { xid: xid("x") }));
    assert_eq!(timeout.timeout, Some(60));
    let commit = DtxCommit {
        xid: xid("x"),
        one_phase: true,
    };
    assert_eq!(failure(&c.call(26, commit)).0, ErrorCode::IllegalState);
    c.attach(25, "f");
    let fail_and_suspend = DtxEnd {
        xid: xid("x"),
        fail: true,
        suspend: true,
    };
    c.call(25, DtxSelect {});
    assert_eq!(
        failure(&c.call(25, fail_and_suspend)).0,
        ErrorCode::CommandInvalid
    );
    assert_eq!(c.conn.shell.phase, Phase::Open);
}
