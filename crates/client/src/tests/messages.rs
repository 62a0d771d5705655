use std::time::Duration;

use bytes::{Bytes, BytesMut};
use ferry_amqp010::{
    Command, ConnectionTune, Control, CreditUnit, FlowMode, MessageHeader, SequenceSet,
    SessionKnownCompleted,
};

use super::fake::{connected, default_tune, Item, Peer};
use super::with_session;
use crate::{
    ConnectOptions, Connection, OutgoingMessage, Session, SessionOptions, SubscribeOptions,
    Subscription,
};

/// Subscribes, checking the four commands the broker sees; returns the subscription.
async fn subscribe(session: &Session, peer: &mut Peer, options: SubscribeOptions) -> Subscription {
    let expected = options.clone();
    let server = async {
        let (ch, id0, _, c, _, _) = peer.expect_command().await;
        let Command::MessageSubscribe(s) = c else {
            panic!("expected subscribe, got {c:?}")
        };
        assert_eq!(s.queue.unwrap(), "q");
        assert_eq!(s.destination.unwrap(), "d");
        assert_eq!(s.accept_mode, Some(expected.accept_mode));
        let (_, _, _, c, _, _) = peer.expect_command().await;
        assert!(
            matches!(c, Command::MessageSetFlowMode(ref m) if m.flow_mode == Some(expected.flow_mode))
        );
        let (_, _, _, c, _, _) = peer.expect_command().await;
        assert!(matches!(c, Command::MessageFlow(ref f)
            if f.unit == Some(CreditUnit::Message) && f.value == Some(expected.message_credit)));
        let (_, id, sync, c, _, _) = peer.expect_command().await;
        assert!(sync);
        assert!(matches!(c, Command::MessageFlow(ref f)
            if f.unit == Some(CreditUnit::Byte) && f.value == Some(expected.byte_credit)));
        peer.complete(ch, id0, id).await;
    };
    let (sub, ()) = tokio::join!(session.subscribe("q", "d", options), server);
    sub.unwrap()
}

/// Reads controls until the union of `session.completed` sets covers `want`; returns
/// how many completed controls it took.
async fn completions_until(peer: &mut Peer, want: &SequenceSet) -> (usize, SequenceSet) {
    let mut seen = SequenceSet::new();
    let mut count = 0;
    loop {
        let item = peer.next().await;
        let Some((_, item)) = item else {
            panic!("the connection closed before {want:?} was completed");
        };
        if let Item::Control(Control::SessionCompleted(c)) = item {
            count += 1;
            let set = c.commands.unwrap();
            for &(lo, hi) in set.ranges() {
                seen.add_range(lo, hi);
            }
            if want
                .ranges()
                .iter()
                .all(|&(lo, hi)| (lo..=hi).all(|n| seen.contains(n)))
            {
                return (count, set);
            }
        }
    }
}

#[tokio::test]
async fn received_transfers_are_completed_in_batches_and_trimmed() {
    let (_conn, session, mut peer, ch) = with_session(SessionOptions::default()).await;
    let options = SubscribeOptions {
        flow_mode: FlowMode::Credit,
        message_credit: 100,
        ..Default::default()
    };
    let mut sub = subscribe(&session, &mut peer, options).await;
    for i in 0..50u32 {
        let id = peer.transfer(ch, "d", b"", &i.to_be_bytes()).await;
        assert_eq!(id, i);
    }
    for i in 0..50u32 {
        let d = sub.next().await.unwrap();
        assert_eq!((d.id, &d.body[..]), (i, &i.to_be_bytes()[..]));
        assert_eq!(d.destination, "d");
    }
    let (count, _) = completions_until(&mut peer, &SequenceSet::from_range(0, 49)).await;
    assert!(
        count <= 2,
        "50 transfers took {count} session.completed controls"
    );

    // Once the server knows, the ids are no longer repeated.
    peer.control(
        ch,
        SessionKnownCompleted {
            commands: Some(SequenceSet::from_range(0, 49)),
        },
    )
    .await;
    peer.transfer(ch, "d", b"", b"late").await;
    assert_eq!(sub.next().await.unwrap().id, 50);
    let (_, last) = completions_until(&mut peer, &SequenceSet::from_range(50, 50)).await;
    assert_eq!(last, SequenceSet::from_range(50, 50));
}

/// A window-mode subscription of `credit` on a session whose completion timer is a minute
/// away, with `sent` transfers on their way to it: whatever completes them is not the timer.
async fn window_subscription_past_the_timer(
    credit: u32,
    sent: u32,
) -> (Connection, Peer, Subscription) {
    let options = SessionOptions {
        completion_delay: Duration::from_secs(60),
        ..Default::default()
    };
    let (conn, session, mut peer, ch) = with_session(options).await;
    let sub_options = SubscribeOptions {
        flow_mode: FlowMode::Window,
        message_credit: credit,
        ..Default::default()
    };
    let sub = subscribe(&session, &mut peer, sub_options).await;
    for _ in 0..sent {
        peer.transfer(ch, "d", b"", b"m").await;
    }
    (conn, peer, sub)
}

#[tokio::test]
async fn window_mode_completes_every_half_window_without_the_timer() {
    let (_conn, mut peer, mut sub) = window_subscription_past_the_timer(4, 4).await;
    // Nothing is completed until the application takes the messages.
    let early = tokio::time::timeout(Duration::from_millis(100), peer.next()).await;
    assert!(early.is_err(), "completed before being taken: {early:?}");
    sub.next().await.unwrap();
    sub.next().await.unwrap();
    let (_, set) = completions_until(&mut peer, &SequenceSet::from_range(0, 1)).await;
    assert_eq!(set, SequenceSet::from_range(0, 1));
}

#[tokio::test]
async fn an_accept_carries_the_completions_waiting_for_the_timer() {
    let (_conn, mut peer, mut sub) = window_subscription_past_the_timer(100, 3).await;
    for i in 0..3 {
        assert_eq!(sub.next().await.unwrap().id, i);
    }
    // Three taken, half a window is 50 and the timer 60 s away: only the accept sends them.
    let taken = SequenceSet::from_range(0, 2);
    sub.accept(&taken).await.unwrap();
    let mut completed = SequenceSet::new();
    loop {
        let item = tokio::time::timeout(Duration::from_secs(10), peer.next())
            .await
            .expect("no accept within 10 s");
        match item {
            Some((_, Item::Control(Control::SessionCompleted(c)))) => {
                for &(lo, hi) in c.commands.unwrap().ranges() {
                    completed.add_range(lo, hi);
                }
            }
            Some((
                _,
                Item::Command {
                    command: Command::MessageAccept(a),
                    ..
                },
            )) => {
                assert_eq!(a.transfers.unwrap(), taken);
                break;
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert!(
        (0..3).all(|n| completed.contains(n)),
        "completed before the accept: {completed:?}"
    );
}

#[tokio::test]
async fn credit_mode_completes_on_arrival_without_the_application() {
    // The timer would hide the difference; completion must come from the batch alone.
    let options = SessionOptions {
        completion_delay: Duration::from_secs(60),
        completion_batch: 16,
        ..Default::default()
    };
    let (_conn, session, mut peer, ch) = with_session(options).await;
    let sub_options = SubscribeOptions {
        flow_mode: FlowMode::Credit,
        message_credit: 1000,
        ..Default::default()
    };
    let mut sub = subscribe(&session, &mut peer, sub_options).await;
    for _ in 0..64 {
        peer.transfer(ch, "d", b"", b"m").await;
    }
    // Nothing has been taken, yet every batch of 16 is reported.
    let (count, _) = tokio::time::timeout(
        Duration::from_secs(10),
        completions_until(&mut peer, &SequenceSet::from_range(0, 63)),
    )
    .await
    .expect("transfers not completed until taken");
    assert!(count <= 4, "64 transfers took {count} session.completed");
    // Taking them later completes nothing twice and loses nothing.
    for i in 0..64 {
        assert_eq!(sub.next().await.unwrap().id, i);
    }
    let quiet = tokio::time::timeout(Duration::from_millis(100), peer.next()).await;
    assert!(quiet.is_err(), "completed again when taken: {quiet:?}");
}

#[tokio::test]
async fn bodies_larger_than_a_frame_go_both_ways() {
    let tune = ConnectionTune {
        max_frame_size: Some(4096),
        ..default_tune()
    };
    let (conn, mut peer) = connected(ConnectOptions::default(), tune).await;
    let (session, (ch, _)) = tokio::join!(conn.session(), peer.attach());
    let session = session.unwrap();
    assert_eq!(conn.max_frame_size(), 4096);

    let body: Bytes = (0..20_000u32)
        .map(|i| (i % 251) as u8)
        .collect::<Vec<_>>()
        .into();
    let msg = OutgoingMessage::builder()
        .routing_key("rk")
        .header("k", "v")
        .body(body.clone())
        .build()
        .unwrap();
    session.transfer("amq.direct", &msg).await.unwrap();
    let (_, _, _, cmd, header, got) = peer.expect_command().await;
    assert!(
        matches!(cmd, Command::MessageTransfer(ref t) if t.destination.as_ref().unwrap() == "amq.direct")
    );
    assert_eq!(got, body);
    let header = MessageHeader::decode(header.unwrap()).unwrap();
    assert_eq!(header.delivery.unwrap().routing_key.unwrap(), "rk");

    let mut sub = subscribe(&session, &mut peer, SubscribeOptions::default()).await;
    peer.transfer(ch, "d", msg.header_segment(), &body).await;
    let d = sub.next().await.unwrap();
    assert_eq!(d.body, body);
    assert_eq!(d.routing_key().unwrap(), "rk");
    assert_eq!(d.application_header("k"), Some(&"v".into()));
}

#[tokio::test]
async fn deliveries_end_when_the_session_does() {
    let (_conn, session, mut peer, ch) = with_session(SessionOptions::default()).await;
    let mut sub = subscribe(&session, &mut peer, SubscribeOptions::default()).await;
    peer.transfer(ch, "d", b"", b"one").await;
    peer.control(
        ch,
        ferry_amqp010::SessionDetached {
            name: Some(session.name().to_vec().into()),
            code: Some(ferry_amqp010::DetachCode::SessionBusy),
        },
    )
    .await;
    assert_eq!(&sub.next().await.unwrap().body[..], b"one");
    assert!(sub.next().await.is_none());
    assert!(matches!(
        session.sync().await,
        Err(crate::ClientError::SessionDetached { .. })
    ));
    // The channel may be reused: nothing, not even a completion, goes out on it now.
    let quiet = tokio::time::timeout(Duration::from_millis(100), peer.next()).await;
    assert!(quiet.is_err(), "wrote after the detach: {quiet:?}");
}

#[tokio::test]
async fn transfers_read_with_the_detach_all_arrive_in_order_before_the_end() {
    let (_conn, session, mut peer, ch) = with_session(SessionOptions::default()).await;
    let mut sub = subscribe(&session, &mut peer, SubscribeOptions::default()).await;
    // One write, so the client reads the transfers and the detach together.
    let mut out = BytesMut::new();
    for i in 0..5u32 {
        peer.encode_transfer(&mut out, ch, "d", b"", &i.to_be_bytes());
    }
    peer.encode_control(
        &mut out,
        ch,
        ferry_amqp010::SessionDetached {
            name: Some(session.name().to_vec().into()),
            code: Some(ferry_amqp010::DetachCode::SessionBusy),
        },
    );
    peer.write_raw(&out).await;
    for i in 0..5u32 {
        let t = sub.next_transfer().await.unwrap();
        assert_eq!((t.id, &t.body[..]), (i, &i.to_be_bytes()[..]));
    }
    assert!(sub.next_transfer().await.is_none());
    let quiet = tokio::time::timeout(Duration::from_millis(100), peer.next()).await;
    assert!(quiet.is_err(), "wrote after the detach: {quiet:?}");
}

#[tokio::test]
async fn transfers_for_a_dropped_window_subscription_are_still_completed() {
    let (_conn, session, mut peer, ch) = with_session(SessionOptions::default()).await;
    let options = SubscribeOptions {
        flow_mode: FlowMode::Window,
        ..Default::default()
    };
    let sub = subscribe(&session, &mut peer, options).await;
    drop(sub);
    let mut out = BytesMut::new();
    let first = peer.encode_transfer(&mut out, ch, "d", b"", b"a");
    let last = peer.encode_transfer(&mut out, ch, "d", b"", b"b");
    peer.write_raw(&out).await;
    completions_until(&mut peer, &SequenceSet::from_range(first, last)).await;
}

#[tokio::test]
async fn a_batch_its_subscription_left_behind_is_completed() {
    // The reader found the subscription open, but it was dropped before the hand-over.
    let (_conn, session, mut peer, _) = with_session(SessionOptions::default()).await;
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    drop(rx);
    let delivery = |id| crate::subscription::RawDelivery {
        id,
        destination: "d".into(),
        header: None,
        body: Bytes::new(),
        sync: false,
        completed: false,
    };
    crate::reader::Batch {
        tx,
        session: session.core.clone(),
        deliveries: vec![delivery(0), delivery(1)],
    }
    .send();
    completions_until(&mut peer, &SequenceSet::from_range(0, 1)).await;
}

#[tokio::test]
async fn a_left_behind_batch_does_not_complete_again_what_arrival_completed() {
    // Credit mode completes on arrival: such a delivery must not be completed twice.
    let (_conn, session, mut peer, _) = with_session(SessionOptions::default()).await;
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    drop(rx);
    let delivery = |id, completed| crate::subscription::RawDelivery {
        id,
        destination: "d".into(),
        header: None,
        body: Bytes::new(),
        sync: false,
        completed,
    };
    crate::reader::Batch {
        tx,
        session: session.core.clone(),
        deliveries: vec![delivery(0, true), delivery(1, false), delivery(2, true)],
    }
    .send();
    let (_, set) = completions_until(&mut peer, &SequenceSet::from_range(1, 1)).await;
    assert_eq!(set.ranges(), &[(1, 1)]);
}

#[tokio::test]
async fn a_transfer_leaves_its_header_for_the_application_to_read() {
    let (_conn, session, mut peer, ch) = with_session(SessionOptions::default()).await;
    let mut sub = subscribe(&session, &mut peer, SubscribeOptions::default()).await;
    let header = MessageHeader {
        delivery: Some(ferry_amqp010::DeliveryProperties {
            redelivered: true,
            routing_key: Some("rk".into()),
            ..Default::default()
        }),
        ..Default::default()
    };
    let raw = OutgoingMessage::with_header(&header, "x").unwrap();
    peer.transfer(ch, "d", raw.header_segment(), b"x").await;
    peer.transfer(ch, "d", b"", b"y").await;
    let t = sub.next_transfer().await.unwrap();
    assert!(t.redelivered().unwrap());
    assert_eq!(&t.raw_header, raw.header_segment());
    let d = t.decode();
    assert!(d.redelivered);
    assert_eq!(d.routing_key().unwrap(), "rk");
    let t = match sub.try_next_transfer() {
        Some(t) => t,
        None => sub.next_transfer().await.unwrap(),
    };
    assert!(!t.redelivered().unwrap());
    assert_eq!(&t.body[..], b"y");
}

#[tokio::test]
async fn transfers_read_together_for_two_destinations_keep_each_ones_order() {
    let (_conn, session, mut peer, ch) = with_session(SessionOptions::default()).await;
    let mut first = subscribe(&session, &mut peer, SubscribeOptions::default()).await;
    let server = async {
        // The same four commands as for "d"; only the destination differs.
        let (ch, id0, _, _, _, _) = peer.expect_command().await;
        for _ in 0..2 {
            peer.expect_command().await;
        }
        let (_, id, _, _, _, _) = peer.expect_command().await;
        peer.complete(ch, id0, id).await;
    };
    let (second, ()) = tokio::join!(
        session.subscribe("q", "e", SubscribeOptions::default()),
        server
    );
    let mut second = second.unwrap();
    // d, d, e, d, e, e in one write: the batches split at each change of destination.
    let mut out = BytesMut::new();
    for (i, destination) in ["d", "d", "e", "d", "e", "e"].iter().enumerate() {
        peer.encode_transfer(&mut out, ch, destination, b"", &[i as u8]);
    }
    peer.write_raw(&out).await;
    for want in [0u8, 1, 3] {
        assert_eq!(&first.next_transfer().await.unwrap().body[..], &[want]);
    }
    for want in [2u8, 4, 5] {
        let t = second.next_transfer().await.unwrap();
        assert_eq!(
            (&t.body[..], t.destination.as_bytes()),
            (&[want][..], &b"e"[..])
        );
    }
    assert!(first.try_next_transfer().is_none() && second.try_next_transfer().is_none());
}
