use ferry_amqp010::{
    Command, Control, ErrorCode, ExecutionException, ExecutionResult, QueueQueryResult,
    SequenceSet, SessionCompleted, SessionDetach, Str,
};

use super::with_session;
use crate::{ClientError, QueueDeclareOptions, SessionOptions};

#[tokio::test]
async fn commands_are_numbered_from_zero_and_completed_by_ranges() {
    let (_conn, session, mut peer, _) = with_session(SessionOptions::default()).await;
    let server = async {
        let (ch, id, sync, cmd, _, _) = peer.expect_command().await;
        assert_eq!((id, sync), (0, true));
        assert!(matches!(cmd, Command::QueueDeclare(ref d) if d.queue.as_ref().unwrap() == "q"));
        peer.complete(ch, 0, 0).await;
        for want in 1..=3 {
            let (_, id, sync, _, _, _) = peer.expect_command().await;
            assert_eq!((id, sync), (want, want == 3));
        }
        // One range completes the two pipelined commands and the sync.
        peer.complete(ch, 1, 3).await;
    };
    let client = async {
        session
            .queue_declare("q", QueueDeclareOptions::default())
            .await
            .unwrap();
        assert_eq!(
            session
                .send(
                    ferry_amqp010::QueuePurge {
                        queue: Some("q".into())
                    },
                    false
                )
                .unwrap(),
            1
        );
        assert_eq!(
            session
                .send(
                    ferry_amqp010::QueuePurge {
                        queue: Some("q".into())
                    },
                    false
                )
                .unwrap(),
            2
        );
        session.sync().await.unwrap();
        assert_eq!(session.in_flight(), 0);
    };
    tokio::join!(server, client);
}

#[tokio::test]
async fn results_are_matched_to_their_commands() {
    let (_conn, session, mut peer, _) = with_session(SessionOptions::default()).await;
    let server = async {
        let mut seen = Vec::new();
        for _ in 0..2 {
            let (ch, id, _, cmd, _, _) = peer.expect_command().await;
            let Command::QueueQuery(q) = cmd else {
                panic!("expected queue.query")
            };
            seen.push((ch, id, q.queue.unwrap()));
        }
        // Answer in reverse order, then complete both at once.
        for (ch, id, queue) in seen.iter().rev() {
            let result = QueueQueryResult {
                queue: Some(queue.clone()),
                message_count: Some(*id + 10),
                ..Default::default()
            };
            peer.command(
                *ch,
                ExecutionResult::with_value(*id, &result).unwrap(),
                false,
            )
            .await;
        }
        peer.complete(seen[0].0, 0, 1).await;
    };
    let client = async {
        let (a, b) = tokio::join!(session.queue_query("a"), session.queue_query("b"));
        (a.unwrap(), b.unwrap())
    };
    let ((), (a, b)) = tokio::join!(server, client);
    assert_eq!(a.queue.unwrap(), "a");
    assert_eq!(b.queue.unwrap(), "b");
    // Ids 0 and 1 in whichever order the two calls went out.
    let mut counts = [a.message_count.unwrap(), b.message_count.unwrap()];
    counts.sort();
    assert_eq!(counts, [10, 11]);
}

#[tokio::test]
async fn timely_reply_is_answered_with_known_completed() {
    let (_conn, session, mut peer, _) = with_session(SessionOptions::default()).await;
    let server = async {
        let (ch, id, _, _, _, _) = peer.expect_command().await;
        peer.control(
            ch,
            SessionCompleted {
                commands: Some(SequenceSet::from_range(0, id)),
                timely_reply: true,
            },
        )
        .await;
        loop {
            if let (_, Control::SessionKnownCompleted(k)) = peer.expect_control().await {
                return k.commands.unwrap();
            }
        }
    };
    let (synced, known) = tokio::join!(session.sync(), server);
    synced.unwrap();
    assert_eq!(known, SequenceSet::from_range(0, 0));
}

#[tokio::test]
async fn exception_fails_the_call_and_every_later_one() {
    let (_conn, session, mut peer, _) = with_session(SessionOptions::default()).await;
    let server = async {
        let (ch, id, _, _, _, _) = peer.expect_command().await;
        peer.command(
            ch,
            ExecutionException {
                error_code: Some(ErrorCode::NotFound),
                command_id: Some(id),
                description: Some(Str::from("queue not found: nope")),
                ..Default::default()
            },
            false,
        )
        .await;
        peer.control(
            ch,
            SessionDetach {
                name: Some(session.name().to_vec().into()),
            },
        )
        .await;
        // The client answers the detach.
        loop {
            if let (_, Control::SessionDetached(_)) = peer.expect_control().await {
                break;
            }
        }
    };
    let (err, ()) = tokio::join!(session.queue_purge("nope"), server);
    let err = err.unwrap_err();
    match &err {
        ClientError::Exception {
            code,
            command_id,
            description,
        } => {
            assert_eq!(*code, ErrorCode::NotFound);
            assert_eq!(*command_id, 0);
            assert_eq!(description, "queue not found: nope");
        }
        other => panic!("expected an exception, got {other:?}"),
    }
    let later = session.queue_query("q").await.unwrap_err();
    assert_eq!(later.error_code(), Some(ErrorCode::NotFound));
    assert!(session
        .transfer("", &crate::OutgoingMessage::new("x"))
        .await
        .is_err());
    session.close().await.unwrap();
}

#[tokio::test]
async fn exception_leaves_other_sessions_working() {
    let (conn, first, mut peer, ch1) = with_session(SessionOptions::default()).await;
    let (second, (ch2, _)) = tokio::join!(conn.session(), peer.attach());
    let second = second.unwrap();
    assert_ne!(ch1, ch2);
    let server = async {
        let (ch, id, _, _, _, _) = peer.expect_command().await;
        assert_eq!(ch, ch1);
        peer.command(
            ch,
            ExecutionException {
                error_code: Some(ErrorCode::NotAllowed),
                command_id: Some(id),
                ..Default::default()
            },
            false,
        )
        .await;
        let (ch, id, _, _, _, _) = peer.expect_command().await;
        assert_eq!(ch, ch2);
        peer.complete(ch, id, id).await;
    };
    let client = async {
        let e = first.execute(ferry_amqp010::TxSelect {}).await.unwrap_err();
        assert_eq!(e.error_code(), Some(ErrorCode::NotAllowed));
        second.sync().await.unwrap();
    };
    tokio::join!(server, client);
}

#[tokio::test]
async fn transfer_window_waits_for_completion() {
    let options = SessionOptions {
        window: 8,
        ..Default::default()
    };
    let (_conn, session, mut peer, _) = with_session(options).await;
    let msg = crate::OutgoingMessage::new("payload");
    let publisher = {
        let session = session.clone();
        tokio::spawn(async move {
            for _ in 0..20 {
                session.transfer("amq.direct", &msg).await.unwrap();
            }
            session.sync().await.unwrap();
        })
    };
    let mut ch = 0;
    for want in 0..8 {
        let (c, id, _, cmd, _, body) = peer.expect_command().await;
        assert_eq!(id, want);
        assert!(matches!(cmd, Command::MessageTransfer(_)));
        assert_eq!(&body[..], b"payload");
        ch = c;
    }
    // A full window: the client asks for completion and sends nothing more.
    loop {
        match peer.next().await.unwrap().1 {
            super::fake::Item::Control(Control::SessionFlush(f)) => {
                assert!(f.completed);
                break;
            }
            super::fake::Item::Control(_) => {}
            other => panic!("sent past the window: {other:?}"),
        }
    }
    let quiet = tokio::time::timeout(std::time::Duration::from_millis(100), peer.next()).await;
    assert!(quiet.is_err(), "nothing may follow until completion");
    peer.complete(ch, 0, 7).await;
    let mut last = 0;
    while last < 20 {
        let (_, id, _, _, _, _) = peer.expect_command().await;
        last = id;
        if id % 8 == 7 || id == 20 {
            peer.complete(ch, 0, id).await;
        }
    }
    publisher.await.unwrap();
}

#[tokio::test]
async fn transfer_sync_returns_the_refusal() {
    let (_conn, session, mut peer, _) = with_session(SessionOptions::default()).await;
    let server = async {
        let (ch, id, sync, _, _, _) = peer.expect_command().await;
        assert!(sync);
        peer.command(
            ch,
            ExecutionException {
                error_code: Some(ErrorCode::ResourceLimitExceeded),
                command_id: Some(id),
                description: Some(Str::from("queue full")),
                ..Default::default()
            },
            false,
        )
        .await;
    };
    let msg = crate::OutgoingMessage::new("x");
    let (r, ()) = tokio::join!(session.transfer_sync("amq.direct", &msg), server);
    assert_eq!(
        r.unwrap_err().error_code(),
        Some(ErrorCode::ResourceLimitExceeded)
    );
}

#[tokio::test]
async fn acquire_decodes_its_result() {
    let (_conn, session, mut peer, _) = with_session(SessionOptions::default()).await;
    let server = async {
        let (ch, id, _, cmd, _, _) = peer.expect_command().await;
        let Command::MessageAcquire(a) = cmd else {
            panic!("expected acquire")
        };
        assert_eq!(a.transfers.unwrap(), SequenceSet::from_range(3, 6));
        let acquired = ferry_amqp010::Acquired {
            transfers: Some(SequenceSet::from_range(4, 5)),
        };
        peer.command(
            ch,
            ExecutionResult::with_value(id, &acquired).unwrap(),
            false,
        )
        .await;
        peer.complete(ch, id, id).await;
    };
    let wanted = SequenceSet::from_range(3, 6);
    let (r, ()) = tokio::join!(session.acquire(&wanted), server);
    assert_eq!(r.unwrap(), SequenceSet::from_range(4, 5));
}

#[tokio::test]
async fn flush_and_request_timeout_from_the_server_are_answered() {
    let (_conn, _session, mut peer, ch) = with_session(SessionOptions::default()).await;
    let id = peer
        .command(ch, ferry_amqp010::ExecutionSync {}, false)
        .await;
    peer.control(
        ch,
        ferry_amqp010::SessionRequestTimeout { timeout: Some(600) },
    )
    .await;
    let (_, c) = peer
        .control_where(|c| matches!(c, Control::SessionTimeout(_)))
        .await;
    assert!(matches!(c, Control::SessionTimeout(t) if t.timeout == Some(0)));
    peer.control(
        ch,
        ferry_amqp010::SessionFlush {
            expected: true,
            completed: true,
            confirmed: false,
        },
    )
    .await;
    let (_, c) = peer
        .control_where(|c| matches!(c, Control::SessionExpected(_)))
        .await;
    let Control::SessionExpected(e) = c else {
        unreachable!()
    };
    assert_eq!(e.commands, Some(SequenceSet::from_range(id + 1, id + 1)));
    let (_, c) = peer
        .control_where(|c| matches!(c, Control::SessionCompleted(_)))
        .await;
    let Control::SessionCompleted(done) = c else {
        unreachable!()
    };
    assert!(done.commands.unwrap().contains(id));
}
