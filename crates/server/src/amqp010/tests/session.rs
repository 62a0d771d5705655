//! The session layer: attach and re-attach, session-busy, detach in both directions and
//! what a session's end releases, command numbering (command-point), completion both ways
//! (completed, known-completed, timely-reply), flush, request-timeout, gap, and the
//! execution commands that do nothing but complete.

use ferry_amqp010::{
    ExecutionException, ExecutionResult, SessionCommandPoint, SessionConfirmed, SessionExpected,
    SessionFlush, SessionGap, SessionKnownCompleted, SessionRequestTimeout, SessionTimeout,
};

use super::*;

fn attach_control(name: &'static str) -> SessionAttach {
    SessionAttach {
        name: Some(Bytes::from_static(name.as_bytes())),
        force: false,
    }
}

fn detach(name: &'static str) -> SessionDetach {
    SessionDetach {
        name: Some(Bytes::from_static(name.as_bytes())),
    }
}

fn flush(expected: bool, confirmed: bool, completed: bool) -> SessionFlush {
    SessionFlush {
        expected,
        confirmed,
        completed,
    }
}

#[track_caller]
fn assert_detached(out: &[Item], channel: u16, name: Option<&[u8]>, code: DetachCode) {
    match out {
        [Item::Control(ch, Control::SessionDetached(d))] if *ch == channel => {
            assert_eq!((d.name.as_deref(), d.code), (name, Some(code)), "{d:?}");
        }
        other => panic!("expected session.detached on {channel}: {other:?}"),
    }
}

#[tokio::test]
async fn attach_is_answered_with_attached_and_the_brokers_command_point() {
    let mut c = open().await;
    let out = c.exchange(control(1, attach_control("s1")));
    match &out[..] {
        [Item::Control(1, Control::SessionAttached(a)), Item::Control(1, Control::SessionCommandPoint(p))] =>
        {
            assert_eq!(a.name.as_deref(), Some(&b"s1"[..]));
            assert_eq!((p.command_id, p.command_offset), (Some(0), Some(0)));
        }
        other => panic!("{other:?}"),
    }
    // Attaching the same session on the same channel again is harmless.
    let out = c.exchange(control(1, attach_control("s1")));
    assert!(
        matches!(&out[..], [Item::Control(1, Control::SessionAttached(a))] if a.name.as_deref() == Some(&b"s1"[..])),
        "{out:?}"
    );
    assert_eq!(crate::shell::Protocol::channel_count(&c.conn.protocol), 1);
}

#[tokio::test]
async fn a_name_or_channel_in_use_is_session_busy() {
    let mut c = open().await;
    c.attach(1, "s1");
    c.call(1, declare("q"));
    // The same name on another channel.
    let out = c.exchange(control(2, attach_control("s1")));
    assert_detached(&out, 2, Some(b"s1"), DetachCode::SessionBusy);
    // Another name on a channel that has a session.
    let out = c.exchange(control(1, attach_control("s2")));
    assert_detached(&out, 1, Some(b"s2"), DetachCode::SessionBusy);
    // The session on channel 1 is still there, numbering on.
    let out = c.call(1, ExecutionSync {});
    assert_eq!(
        completions(&out, 1).last().map(|s| s.ranges().to_vec()),
        Some(vec![(0, 1)])
    );
    // Channel 2 is free for another name.
    c.attach(2, "s2");
}

#[tokio::test]
async fn a_detached_session_releases_its_subscriptions_messages_and_exclusive_queues() {
    let mut c = open().await;
    c.attach(1, "s1");
    c.attach(2, "s2");
    let exclusive = QueueDeclare {
        exclusive: true,
        ..declare("mine")
    };
    c.call(1, exclusive.clone());
    c.call(1, declare("work"));
    for body in ["a", "b"] {
        c.publish(1, "", &keyed("work"), body.as_bytes());
    }
    c.subscribe(
        1,
        "work",
        "d",
        AcceptMode::Explicit,
        AcquireMode::PreAcquired,
    );
    assert_eq!(c.grant(1, "d", 2).len(), 2);
    let broker = c.conn.broker().clone();
    let work = broker.queue("work").unwrap();
    assert_eq!((work.consumer_count(), work.unsettled_count()), (1, 2));
    assert_eq!(
        exception(&c.call(2, exclusive.clone())),
        Some(ErrorCode::ResourceLocked)
    );
    c.attach(3, "s3");
    let out = c.exchange(control(1, detach("s1")));
    assert_detached(&out, 1, Some(b"s1"), DetachCode::Normal);
    assert_eq!((work.consumer_count(), work.unsettled_count()), (0, 0));
    assert_eq!(work.queued_bodies(), [&b"a"[..], b"b"]);
    // The exclusive queue is another session's to claim now.
    assert_eq!(exception(&c.call(3, exclusive)), None);
    // The name can be attached again, on any channel, and numbering starts afresh.
    let out = c.exchange(control(5, attach_control("s1")));
    assert!(matches!(
        &out[..],
        [
            Item::Control(5, Control::SessionAttached(_)),
            Item::Control(5, Control::SessionCommandPoint(_))
        ]
    ));
    let out = c.call(5, ExecutionSync {});
    assert_eq!(completions(&out, 5), [set(&[0])]);
}

#[tokio::test]
async fn a_session_detached_by_the_client_ends_silently() {
    let mut c = open().await;
    c.attach(1, "s1");
    c.call(1, declare("q"));
    c.subscribe(1, "q", "d", AcceptMode::None, AcquireMode::PreAcquired);
    let detached = SessionDetached {
        name: Some(Bytes::from_static(b"s1")),
        code: Some(DetachCode::Normal),
    };
    assert!(c.exchange(control(1, detached)).is_empty());
    assert_eq!(c.conn.broker().queue("q").unwrap().consumer_count(), 0);
    assert_eq!(crate::shell::Protocol::channel_count(&c.conn.protocol), 0);
}

#[tokio::test]
async fn controls_for_no_session_are_not_attached_and_commands_are_dropped() {
    let mut c = open().await;
    // A detach, a flush or a request-timeout on a channel without a session.
    let out = c.exchange(control(3, detach("ghost")));
    assert_detached(&out, 3, None, DetachCode::NotAttached);
    let out = c.exchange(control(3, flush(false, false, true)));
    assert_detached(&out, 3, None, DetachCode::NotAttached);
    let out = c.exchange(control(4, SessionRequestTimeout { timeout: Some(60) }));
    assert_detached(&out, 4, None, DetachCode::NotAttached);
    // A late detached is not answered.
    let detached = SessionDetached {
        name: Some(Bytes::from_static(b"ghost")),
        code: Some(DetachCode::Normal),
    };
    assert!(c.exchange(control(3, detached)).is_empty());
    // Commands are dropped without a word, as qpidd drops them.
    assert!(c.call(3, declare("never")).is_empty());
    assert!(c.conn.broker().queue("never").is_none());
    assert_eq!(c.conn.shell.phase, Phase::Open);
}

#[tokio::test]
async fn command_point_sets_the_id_of_the_next_command() {
    let mut c = open().await;
    c.attach(1, "s1");
    let point = SessionCommandPoint {
        command_id: Some(100),
        command_offset: Some(0),
    };
    assert!(c.exchange(control(1, point)).is_empty());
    let out = c.call(1, ExecutionSync {});
    assert_eq!(completions(&out, 1), [set(&[100])]);
    // An exception names the command by that numbering.
    let out = c.call(1, declare(""));
    assert_eq!(failure(&out).1, 101);
    // Numbering wraps as serial numbers do.
    c.attach(2, "s2");
    let point = SessionCommandPoint {
        command_id: Some(u32::MAX),
        command_offset: Some(0),
    };
    c.exchange(control(2, point));
    c.send(&command(2, ExecutionSync {}, false));
    let out = c.call(2, ExecutionSync {});
    let done = completions(&out, 2);
    assert!(
        done.last()
            .is_some_and(|s| s.contains(u32::MAX) && s.contains(0)),
        "{done:?}"
    );
}

fn point(id: u32) -> SessionCommandPoint {
    SessionCommandPoint {
        command_id: Some(id),
        command_offset: Some(0),
    }
}

#[tokio::test]
async fn once_commands_are_numbered_a_command_point_may_only_restate_the_next_id() {
    let mut c = open().await;
    c.attach(1, "s1");
    // Before any command, any point (and more than one) is taken.
    assert!(c.exchange(control(1, point(500))).is_empty());
    assert!(c.exchange(control(1, point(10))).is_empty());
    c.call(1, ExecutionSync {});
    c.call(1, ExecutionSync {});
    // Restating the next id changes nothing.
    assert!(c.exchange(control(1, point(12))).is_empty());
    let out = c.call(1, ExecutionSync {});
    assert_eq!(completions(&out, 1), [range(10, 12)]);
    // Going back would run commands again under old ids; qpidd refuses a point beyond
    // what it received. Either ends the session, naming the last command received.
    for bad in [11, 14] {
        let mut c = open().await;
        c.attach(1, "s1");
        c.exchange(control(1, point(10)));
        c.call(1, ExecutionSync {});
        c.call(1, ExecutionSync {});
        let out = c.exchange(control(1, point(bad)));
        let (code, id, text) = failure(&out);
        assert_eq!((code, id), (ErrorCode::InvalidArgument, 11), "{text}");
        assert!(
            matches!(
                out.last(),
                Some(Item::Control(1, Control::SessionDetach(_)))
            ),
            "{out:?}"
        );
        assert!(c.call(1, ExecutionSync {}).is_empty(), "the session failed");
    }
}

/// The review's attack: command-point moved back by two before each synced command made
/// every completion a range of its own, without limit. Now the second point is refused.
#[tokio::test]
async fn command_points_cannot_split_the_completed_set() {
    let mut c = open().await;
    c.attach(1, "s1");
    let mut batch = BytesMut::new();
    for k in 0..100u32 {
        batch.extend_from_slice(&control(1, point(1_000_000 - 2 * k)));
        batch.extend_from_slice(&command(1, ExecutionSync {}, true));
    }
    let out = c.exchange(batch);
    assert_eq!(exceptions(&out).len(), 1, "{out:?}");
    assert_eq!(failure(&out).0, ErrorCode::InvalidArgument);
    assert!(completions(&out, 1).iter().all(|s| s.ranges().len() == 1));
}

#[tokio::test]
async fn a_known_completed_that_splits_the_completed_set_too_far_ends_the_session() {
    use crate::amqp010::session::MAX_COMPLETED_RANGES;
    let mut c = open().await;
    c.attach(1, "s1");
    let commands = 2 * MAX_COMPLETED_RANGES as u32 + 4;
    let mut batch = BytesMut::new();
    for _ in 0..commands {
        batch.extend_from_slice(&command(1, ExecutionSync {}, false));
    }
    assert_eq!(completions(&c.exchange(batch), 1), [range(0, commands - 1)]);
    // Acknowledging every other command: the odd ones stay, each a range of its own.
    let evens = |n: u32| (0..n).map(|k| 2 * k).collect::<SequenceSet>();
    let known = SessionKnownCompleted {
        commands: Some(evens(MAX_COMPLETED_RANGES as u32)),
    };
    assert!(c.exchange(control(1, known)).is_empty(), "at the bound");
    let out = c.call(1, ExecutionSync {});
    let done = completions(&out, 1);
    assert_eq!(done.len(), 1, "{out:?}");
    assert_eq!(done[0].ranges().len(), MAX_COMPLETED_RANGES);
    assert_eq!(done[0].first(), Some(1));
    // One more split is one too many.
    let known = SessionKnownCompleted {
        commands: Some(evens(MAX_COMPLETED_RANGES as u32 + 1)),
    };
    let out = c.exchange(control(1, known));
    let (code, id, _) = failure(&out);
    assert_eq!((code, id), (ErrorCode::ResourceLimitExceeded, commands));
    assert!(matches!(
        out.last(),
        Some(Item::Control(1, Control::SessionDetach(_)))
    ));
    assert_eq!(c.conn.shell.phase, Phase::Open, "only the session ends");
}

#[tokio::test]
async fn completion_is_reported_per_batch_and_known_completed_forgets_it() {
    let mut c = open().await;
    c.attach(1, "s1");
    // Commands without sync still have their completion reported, once per batch.
    let mut batch = BytesMut::new();
    for _ in 0..3 {
        batch.extend_from_slice(&command(1, ExecutionSync {}, false));
    }
    let out = c.exchange(batch);
    assert_eq!(names(&out), ["session.completed"]);
    assert_eq!(completions(&out, 1), [set(&[0, 1, 2])]);
    // The set is cumulative until the client says it knows.
    let out = c.call(1, ExecutionSync {});
    assert_eq!(completions(&out, 1), [set(&[0, 1, 2, 3])]);
    let known = SessionKnownCompleted {
        commands: Some(set(&[0, 1, 2])),
    };
    assert!(c.exchange(control(1, known)).is_empty());
    let out = c.call(1, ExecutionSync {});
    assert_eq!(completions(&out, 1), [set(&[3, 4])]);
}

#[tokio::test]
async fn a_wide_completed_set_asks_for_a_timely_reply() {
    let mut c = open().await;
    c.attach(1, "s1");
    let mut batch = BytesMut::new();
    for _ in 0..1001 {
        batch.extend_from_slice(&command(1, ExecutionSync {}, false));
    }
    let out = c.exchange(batch);
    let [Item::Control(1, Control::SessionCompleted(done))] = &out[..] else {
        panic!("{out:?}");
    };
    assert_eq!(done.commands.as_ref().unwrap().ranges(), &[(0, 1000)]);
    assert!(done.timely_reply);
    let known = SessionKnownCompleted {
        commands: done.commands.clone(),
    };
    c.exchange(control(1, known));
    let out = c.call(1, ExecutionSync {});
    let [Item::Control(1, Control::SessionCompleted(done))] = &out[..] else {
        panic!("{out:?}");
    };
    assert_eq!(done.commands.as_ref().unwrap().ranges(), &[(1001, 1001)]);
    assert!(!done.timely_reply);
}

#[tokio::test]
async fn a_timely_reply_is_answered_with_known_completed() {
    let mut c = open().await;
    c.attach(1, "s1");
    let timely = SessionCompleted {
        commands: Some(range(0, 4)),
        timely_reply: true,
    };
    let out = c.exchange(control(1, timely));
    match &out[..] {
        [Item::Control(1, Control::SessionKnownCompleted(k))] => {
            assert_eq!(k.commands, Some(range(0, 4)));
        }
        other => panic!("{other:?}"),
    }
    // Without timely-reply: nothing to say.
    assert!(c.exchange(control(1, completed(0, 4))).is_empty());
    // An empty completed is ignored.
    let empty = SessionCompleted {
        commands: None,
        timely_reply: true,
    };
    assert!(c.exchange(control(1, empty)).is_empty());
}

#[tokio::test]
async fn flush_reports_completion_and_an_empty_expected_and_confirmed() {
    let mut c = open().await;
    c.attach(1, "s1");
    c.call(1, ExecutionSync {});
    let out = c.exchange(control(1, flush(true, true, true)));
    match &out[..] {
        [Item::Control(1, Control::SessionCompleted(done)), Item::Control(1, Control::SessionExpected(e)), Item::Control(1, Control::SessionConfirmed(k))] =>
        {
            assert_eq!(done.commands, Some(set(&[0])));
            assert_eq!(e.commands, Some(SequenceSet::new()));
            assert_eq!(k.commands, Some(SequenceSet::new()));
        }
        other => panic!("{other:?}"),
    }
    // Each on its own.
    assert_eq!(
        names(&c.exchange(control(1, flush(true, false, false)))),
        ["session.expected"]
    );
    assert_eq!(
        names(&c.exchange(control(1, flush(false, false, true)))),
        ["session.completed"]
    );
    // A flush of a fresh session reports an empty set.
    c.attach(2, "s2");
    let out = c.exchange(control(2, flush(false, false, true)));
    assert_eq!(completions(&out, 2), [SequenceSet::new()]);
}

#[tokio::test]
async fn request_timeout_is_granted_zero_and_the_peers_other_controls_are_ignored() {
    let mut c = open().await;
    c.attach(1, "s1");
    let out = c.exchange(control(1, SessionRequestTimeout { timeout: Some(600) }));
    assert!(
        matches!(&out[..], [Item::Control(1, Control::SessionTimeout(t))] if t.timeout == Some(0)),
        "{out:?}"
    );
    let ignored: Vec<Control> = vec![
        SessionTimeout { timeout: Some(5) }.into(),
        SessionExpected {
            commands: Some(range(0, 3)),
            fragments: None,
        }
        .into(),
        SessionConfirmed {
            commands: Some(range(0, 3)),
            fragments: None,
        }
        .into(),
        ferry_amqp010::SessionAttached {
            name: Some(Bytes::from_static(b"s1")),
        }
        .into(),
    ];
    for ctl in ignored {
        let name = ctl.name();
        assert!(c.exchange(control(1, ctl)).is_empty(), "{name}");
    }
    let out = c.call(1, ExecutionSync {});
    assert_eq!(completions(&out, 1), [set(&[0])]);
}

#[tokio::test]
async fn a_gap_is_not_implemented_and_fails_the_session() {
    let mut c = open().await;
    c.attach(1, "s1");
    c.attach(2, "s2");
    c.call(1, ExecutionSync {});
    let gap = SessionGap {
        commands: Some(range(5, 6)),
    };
    let out = c.exchange(control(1, gap));
    let (code, id, text) = failure(&out);
    // Named by the last command received: the gap, a control, took no id.
    assert_eq!((code, id), (ErrorCode::NotImplemented, 0));
    let codes = exceptions(&out)
        .iter()
        .map(|(_, e)| (e.class_code, e.command_code))
        .next();
    assert_eq!(
        codes,
        Some((Some(SessionGap::CLASS_CODE), Some(SessionGap::CODE)))
    );
    assert_eq!(text, "session.gap is not implemented");
    assert!(matches!(
        out.last(),
        Some(Item::Control(1, Control::SessionDetach(d))) if d.name.as_deref() == Some(&b"s1"[..])
    ));
    // Other sessions carry on.
    assert_eq!(exception(&c.call(2, ExecutionSync {})), None);
}

#[tokio::test]
async fn results_and_exceptions_from_the_client_just_complete() {
    let mut c = open().await;
    c.attach(1, "s1");
    let result = ExecutionResult {
        command_id: Some(0),
        value: None,
    };
    let out = c.call(1, result);
    assert_eq!(names(&out), ["session.completed"]);
    let reported = ExecutionException {
        error_code: Some(ErrorCode::InternalError),
        command_id: Some(0),
        description: Some(Str::from("client trouble")),
        ..Default::default()
    };
    let out = c.call(1, reported);
    assert_eq!(names(&out), ["session.completed"]);
    assert_eq!(completions(&out, 1), [set(&[0, 1])]);
}

#[tokio::test]
async fn commands_the_broker_does_not_implement_fail_with_540() {
    let mut c = open().await;
    let resume = ferry_amqp010::MessageResume {
        destination: Some(Str::from("d")),
        resume_id: Some(Str::from("r")),
    };
    assert_eq!(outcome(&mut c, 1, resume), Some(ErrorCode::NotImplemented));
    let sync_header = ferry_amqp010::ExecutionSync {};
    assert_eq!(outcome(&mut c, 2, sync_header), None);
}

#[tokio::test]
async fn the_brokers_commands_are_numbered_and_results_name_the_command_they_answer() {
    let mut c = open().await;
    c.attach(1, "s1");
    c.call(1, declare("q"));
    let query = ferry_amqp010::QueueQuery {
        queue: Some(Str::from("q")),
    };
    // Our result is the broker's command 0 and answers the client's command 1.
    let out = c.call(1, query.clone());
    let (answers, _) = result::<ferry_amqp010::QueueQueryResult>(&out);
    assert_eq!(answers, 1);
    // A transfer takes the broker's next id, 1: completing it refunds its window of one.
    c.publish(1, "", &keyed("q"), b"m");
    c.subscribe(1, "q", "d", AcceptMode::Explicit, AcquireMode::PreAcquired);
    assert_eq!(bodies(&c.grant(1, "d", 1)), [&b"m"[..]]);
    let out = c.publish(1, "", &keyed("q"), b"n");
    assert!(transfer_bodies(&out).is_empty(), "a window of one");
    assert!(transfer_bodies(&c.exchange(control(1, completed(0, 0)))).is_empty());
    let got = c.exchange(control(1, completed(1, 1)));
    assert_eq!(transfer_bodies(&got), bodies_of(&["n"]));
    // The transfer of "n" was command 2, so the next result is command 3, answering the
    // client's command 7 (declare, query, transfer, subscribe, flow, flow, transfer, query).
    let out = c.call(1, query);
    assert_eq!(result::<ferry_amqp010::QueueQueryResult>(&out).0, 7);
    let session = c.conn.protocol.channels[1]
        .as_ref()
        .unwrap()
        .session
        .as_ref()
        .unwrap();
    assert_eq!(session.outgoing.next_id(), 4);
}

#[tokio::test]
async fn management_sees_each_sessions_subscriptions_unsettled_transfers_and_mode() {
    let mut c = open().await;
    c.attach(1, "plain");
    c.attach(2, "txn");
    c.call(2, ferry_amqp010::TxSelect {});
    c.call(1, declare("q"));
    for body in ["a", "b", "c"] {
        c.publish(1, "", &keyed("q"), body.as_bytes());
    }
    c.subscribe(1, "q", "d", AcceptMode::Explicit, AcquireMode::PreAcquired);
    c.grant(1, "d", 2);
    c.advance(SECOND);
    let broker = c.conn.broker().clone();
    let listed = broker.connections().list();
    let mut sessions: Vec<_> = listed[0]
        .sessions
        .iter()
        .map(|s| {
            (
                s.channel,
                s.name.clone(),
                s.consumers,
                s.unacked,
                s.transactional,
            )
        })
        .collect();
    sessions.sort();
    assert_eq!(
        sessions,
        [
            (1, "plain".to_owned(), 1, 2, false),
            (2, "txn".to_owned(), 0, 0, true)
        ]
    );
}

#[tokio::test]
async fn a_failed_session_ignores_every_control_but_detach_and_detached() {
    // qpidd's SessionHandler: while awaiting detached, all but detach controls are dropped.
    let mut c = open().await;
    c.attach(1, "s1");
    let out = c.call(1, declare(""));
    assert!(exception(&out).is_some(), "{out:?}");
    let ignored: Vec<Control> = vec![
        flush(true, true, true).into(),
        SessionRequestTimeout { timeout: Some(5) }.into(),
        SessionCommandPoint {
            command_id: Some(7),
            command_offset: Some(0),
        }
        .into(),
        SessionCompleted {
            commands: Some(range(0, 0)),
            timely_reply: true,
        }
        .into(),
        SessionGap {
            commands: Some(range(0, 0)),
        }
        .into(),
        attach_control("s1").into(),
        attach_control("other").into(),
    ];
    for ctl in ignored {
        let name = ctl.name();
        let out = c.exchange(control(1, ctl));
        assert!(out.is_empty(), "{name}: {out:?}");
    }
    let out = c.exchange(control(1, detach("s1")));
    assert_detached(&out, 1, Some(b"s1"), DetachCode::Normal);
    c.attach(1, "s1");
}
