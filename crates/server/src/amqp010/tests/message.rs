//! The message class: transfers in and out, subscriptions (accept-mode none and explicit,
//! acquire-mode pre-acquired and not-acquired), flow (credit and window, messages and
//! bytes, stop, flush, set-flow-mode), settlement (accept, reject, release of ranges),
//! acquire, cancel, the settlement window (`--session-max-unacked`), and what a session's
//! end gives back.

use ferry_amqp010::{
    Acquired, DeliveryMode, FlowMode, Map, MessageAcquire, MessageCancel, MessageFlush,
    MessageProperties, MessageReject, MessageRelease, MessageSetFlowMode, MessageStop, Value,
};

use super::*;

/// A connection with session `s1` on channel 1 and queue `q` holding `bodies`.
async fn with_queue(bodies: &[&str]) -> Client {
    with_queue_on(ServerConfig::default(), bodies).await
}

async fn with_queue_on(config: ServerConfig, bodies: &[&str]) -> Client {
    let mut c = open_with(config, 0).await;
    c.attach(1, "s1");
    c.call(1, declare("q"));
    for body in bodies {
        c.publish(1, "", &keyed("q"), body.as_bytes());
    }
    c
}

fn accept(ids: &[u32]) -> MessageAccept {
    MessageAccept {
        transfers: Some(set(ids)),
    }
}

fn release(ids: &[u32], set_redelivered: bool) -> MessageRelease {
    MessageRelease {
        transfers: Some(set(ids)),
        set_redelivered,
    }
}

fn reject(ids: &[u32]) -> MessageReject {
    MessageReject {
        transfers: Some(set(ids)),
        code: None,
        text: None,
    }
}

fn flow_mode(destination: &str, mode: FlowMode) -> MessageSetFlowMode {
    MessageSetFlowMode {
        destination: Some(Str::from(destination)),
        flow_mode: Some(mode),
    }
}

fn dest(destination: &str) -> Option<Str> {
    Some(Str::from(destination))
}

fn queue_state(c: &Client, name: &str) -> (u64, u64) {
    let q = c.conn.broker().queue(name).expect("the queue");
    (q.message_count(), q.unsettled_count())
}

#[tokio::test]
async fn a_transfer_goes_out_as_received_with_the_subscriptions_modes() {
    let mut c = with_queue(&[]).await;
    let header = MessageHeader {
        delivery: Some(DeliveryProperties {
            routing_key: Some(Str::from("q")),
            delivery_mode: Some(DeliveryMode::NonPersistent),
            ..Default::default()
        }),
        properties: Some(MessageProperties {
            content_type: Some(Str::from("text/plain")),
            correlation_id: Some(Bytes::from_static(b"corr")),
            message_id: Some([7; 16]),
            ..Default::default()
        }),
        other: Vec::new(),
    };
    c.publish(1, "", &header, b"payload");
    c.subscribe(1, "q", "d", AcceptMode::Explicit, AcquireMode::PreAcquired);
    let got = c.grant(1, "d", 1);
    let [d] = &got[..] else { panic!("{got:?}") };
    assert_eq!(d.channel, 1);
    assert_eq!(
        (
            d.transfer.destination.clone(),
            d.transfer.accept_mode,
            d.transfer.acquire_mode
        ),
        (
            dest("d"),
            Some(AcceptMode::Explicit),
            Some(AcquireMode::PreAcquired)
        )
    );
    assert_eq!(
        d.header, header,
        "the header is sent as it came (the default exchange's empty name is not added)"
    );
    assert_eq!(&d.body[..], b"payload");
    assert!(!d.redelivered());
}

#[tokio::test]
async fn a_transfer_without_a_destination_goes_to_the_default_exchange() {
    let mut c = with_queue(&[]).await;
    let mut raw = BytesMut::new();
    keyed("q").encode(&mut raw).unwrap();
    let transfer = MessageTransfer {
        destination: None,
        accept_mode: None,
        acquire_mode: None,
    };
    let mut out = BytesMut::new();
    write_transfer(&mut out, 1, &transfer, true, &raw, b"m", MAX_FRAME).unwrap();
    assert_eq!(exception(&c.exchange(out)), None);
    // No header at all: routed by an empty key, so nowhere, and completed all the same.
    let mut out = BytesMut::new();
    write_transfer(&mut out, 1, &transfer, true, &[], b"n", MAX_FRAME).unwrap();
    let done = c.exchange(out);
    assert_eq!(exception(&done), None);
    assert!(completions(&done, 1).last().unwrap().contains(2));
    assert_eq!(queue_state(&c, "q"), (1, 0));
}

#[tokio::test]
async fn the_broker_names_the_exchange_a_transfer_came_through() {
    // 0-10 delivery-properties.exchange: "This MUST be set by the broker upon receipt".
    let mut c = with_queue(&[]).await;
    c.call(1, bind("q", "amq.direct", "k"));
    c.subscribe(1, "q", "d", AcceptMode::None, AcquireMode::PreAcquired);
    let mut other = keyed("k");
    if let Some(d) = other.delivery.as_mut() {
        d.exchange = Some(Str::from("somewhere.else"));
        d.priority = Some(ferry_amqp010::DeliveryPriority::High);
        d.ttl = Some(60_000);
    }
    let no_delivery_properties = MessageHeader {
        properties: Some(MessageProperties {
            content_type: Some(Str::from("text/plain")),
            ..Default::default()
        }),
        ..Default::default()
    };
    // Without delivery-properties (and so without a routing key, which a fanout exchange
    // does not need) the header gains them.
    c.call(1, bind("q", "amq.fanout", ""));
    let mut misnamed = keyed("q");
    if let Some(d) = misnamed.delivery.as_mut() {
        d.exchange = Some(Str::from("amq.direct"));
    }
    let sent = [
        ("amq.direct", keyed("k")),
        ("amq.direct", received_through(keyed("k"), "amq.direct")),
        ("amq.direct", other),
        ("amq.fanout", no_delivery_properties),
        // The default exchange: a wrong name is corrected, no name is left out (the same).
        ("", misnamed),
        ("", keyed("q")),
    ];
    for (exchange, header) in &sent {
        c.publish(1, exchange, header, b"m");
    }
    let got = c.grant(1, "d", 10);
    let headers: Vec<_> = got.iter().map(|d| d.header.clone()).collect();
    let expect: Vec<_> = sent
        .iter()
        .map(|(exchange, header)| match header.delivery.as_ref() {
            Some(d) if exchange.is_empty() && d.exchange.is_none() => header.clone(),
            _ => received_through(header.clone(), exchange),
        })
        .collect();
    assert_eq!(headers, expect);
}

#[tokio::test]
async fn a_broker_told_to_stamp_receipt_sets_the_timestamp() {
    // qpidd's --enable-timestamp / setTimestampConfig: delivery-properties.timestamp, set
    // on receipt in POSIX seconds, replacing the publisher's.
    let mut c = with_queue(&[]).await;
    c.subscribe(1, "q", "d", AcceptMode::None, AcquireMode::PreAcquired);
    let mut own = keyed("q");
    if let Some(d) = own.delivery.as_mut() {
        d.timestamp = Some(5);
        d.ttl = Some(60_000);
    }
    c.publish(1, "", &keyed("q"), b"before");
    let broker = c.conn.broker().clone();
    broker.set_stamps_receipt(true);
    let from = ferry_core::Broker::receipt_time();
    c.publish(1, "", &keyed("q"), b"plain");
    c.publish(1, "", &own, b"own");
    c.publish(1, "", &MessageHeader::default(), b"headerless");
    let to = ferry_core::Broker::receipt_time();
    broker.set_stamps_receipt(false);
    c.publish(1, "", &own, b"after");
    let got = c.grant(1, "d", 10);
    let stamps: Vec<_> = got
        .iter()
        .map(|d| d.header.delivery.as_ref().and_then(|p| p.timestamp))
        .collect();
    assert_eq!(
        got.len(),
        4,
        "the headerless one routes nowhere: {stamps:?}"
    );
    assert_eq!(stamps[0], None);
    for stamp in &stamps[1..3] {
        assert!(
            matches!(stamp, Some(t) if (from..=to).contains(t)),
            "{stamps:?}"
        );
    }
    assert_eq!(stamps[3], Some(5), "as published once turned off");
    let ttl = got[2].header.delivery.as_ref().and_then(|p| p.ttl);
    assert_eq!(ttl, Some(60_000), "the other fields stay");
}

#[tokio::test]
async fn a_tracing_queue_adds_its_id_and_refuses_excluded_traces() {
    // qpidd's qpid.trace.id / qpid.trace.exclude and the x-qpid.trace header.
    let mut c = open_with(ServerConfig::default(), 0).await;
    c.attach(1, "s1");
    let mut args = Map::new();
    args.insert("qpid.trace.id", Value::Str16(Str::from("me")));
    args.insert("qpid.trace.exclude", Value::Str16(Str::from("me,loop")));
    c.call(
        1,
        QueueDeclare {
            queue: Some(Str::from("t")),
            arguments: Some(args),
            ..Default::default()
        },
    );
    let traced = |trace: Option<&str>| {
        let mut h = keyed("t");
        let mut app = Map::new();
        app.insert("colour", Value::Str16(Str::from("red")));
        if let Some(t) = trace {
            app.insert("x-qpid.trace", Value::Str16(Str::from(t)));
        }
        h.properties = Some(MessageProperties {
            application_headers: Some(app),
            ..Default::default()
        });
        h
    };
    for trace in [None, Some("a"), Some("a,loop"), Some("me")] {
        c.publish(1, "", &traced(trace), b"m");
    }
    c.subscribe(1, "t", "d", AcceptMode::None, AcquireMode::PreAcquired);
    let got = c.grant(1, "d", 10);
    let traces: Vec<_> = got
        .iter()
        .map(|d| {
            let app = d.header.properties.as_ref()?.application_headers.as_ref()?;
            assert_eq!(
                app.get("colour").and_then(Value::as_str),
                Some(&Str::from("red"))
            );
            Some(
                app.get("x-qpid.trace")?
                    .as_str()?
                    .to_str_lossy()
                    .into_owned(),
            )
        })
        .collect();
    assert_eq!(traces, [Some("me".to_owned()), Some("a,me".to_owned())]);
}

#[tokio::test]
async fn a_header_that_does_not_decode_is_invalid_argument() {
    let mut c = with_queue(&[]).await;
    let transfer = MessageTransfer {
        destination: dest(""),
        accept_mode: None,
        acquire_mode: None,
    };
    let mut out = BytesMut::new();
    // A struct32 announcing more octets than there are.
    write_transfer(
        &mut out,
        1,
        &transfer,
        true,
        &[0, 0, 0, 9, 4, 1],
        b"m",
        MAX_FRAME,
    )
    .unwrap();
    let reply = c.exchange(out);
    let (code, id, text) = failure(&reply);
    assert_eq!((code, id), (ErrorCode::InvalidArgument, 1));
    assert!(text.starts_with("malformed message header"), "{text}");
    assert_eq!(queue_state(&c, "q"), (0, 0));
}

#[tokio::test]
async fn a_message_whose_expiration_has_passed_is_not_delivered() {
    let mut c = with_queue(&[]).await;
    let expired = MessageHeader {
        delivery: Some(DeliveryProperties {
            routing_key: Some(Str::from("q")),
            // 0-10 datetime: seconds since the epoch.
            expiration: Some(1),
            ..Default::default()
        }),
        properties: None,
        other: Vec::new(),
    };
    c.publish(1, "", &expired, b"old");
    let fresh = MessageHeader {
        delivery: Some(DeliveryProperties {
            routing_key: Some(Str::from("q")),
            ttl: Some(3_600_000),
            ..Default::default()
        }),
        properties: None,
        other: Vec::new(),
    };
    c.publish(1, "", &fresh, b"new");
    c.subscribe(1, "q", "d", AcceptMode::None, AcquireMode::PreAcquired);
    let got = c.grant(1, "d", 10);
    assert_eq!(bodies(&got), [&b"new"[..]]);
    // The ttl travels with the message.
    assert_eq!(got[0].delivery().ttl, Some(3_600_000));
}

#[tokio::test]
async fn accept_mode_none_settles_each_transfer_as_it_goes_out() {
    let mut c = with_queue(&["a", "b"]).await;
    c.subscribe(1, "q", "d", AcceptMode::None, AcquireMode::PreAcquired);
    let got = c.grant(1, "d", 2);
    assert_eq!(bodies(&got), [&b"a"[..], b"b"]);
    assert_eq!(got[0].transfer.accept_mode, Some(AcceptMode::None));
    assert_eq!(queue_state(&c, "q"), (0, 0));
    // Nothing comes back when the session ends.
    c.exchange(control(
        1,
        SessionDetach {
            name: Some(Bytes::from_static(b"s1")),
        },
    ));
    assert_eq!(queue_state(&c, "q"), (0, 0));
}

#[tokio::test]
async fn accept_of_ranges_settles_those_and_the_rest_return_in_order_at_session_end() {
    // qpid-python's message.test_ack.
    let mut c = with_queue(&["One", "Two", "Three", "Four", "Five"]).await;
    c.subscribe(1, "q", "d", AcceptMode::Explicit, AcquireMode::PreAcquired);
    assert_eq!(c.grant(1, "d", 5).len(), 5);
    assert_eq!(queue_state(&c, "q"), (0, 5));
    // Ids the session never sent (and a range over them) are ignored.
    let out = c.call(1, accept(&[0, 1, 3, 40, 41]));
    assert_eq!(exception(&out), None);
    assert_eq!(queue_state(&c, "q"), (0, 2));
    // Accepting again is harmless.
    assert_eq!(exception(&c.call(1, accept(&[0]))), None);
    c.exchange(control(
        1,
        SessionDetach {
            name: Some(Bytes::from_static(b"s1")),
        },
    ));
    assert_eq!(queue_state(&c, "q"), (2, 0));
    c.attach(2, "s2");
    c.subscribe(2, "q", "e", AcceptMode::None, AcquireMode::PreAcquired);
    let got = c.grant(2, "e", 10);
    assert_eq!(bodies(&got), [&b"Three"[..], b"Five"]);
    assert!(got.iter().all(Delivered::redelivered));
}

#[tokio::test]
async fn release_puts_messages_back_in_order_redelivered_only_when_asked() {
    let mut c = with_queue(&["a", "b", "c", "d"]).await;
    c.subscribe(1, "q", "d", AcceptMode::Explicit, AcquireMode::PreAcquired);
    c.call(1, flow_mode("d", FlowMode::Credit));
    assert_eq!(c.grant(1, "d", 4).len(), 4);
    // Credit mode with no credit left: released messages wait on the queue.
    let out = c.call(1, release(&[1, 3], true));
    assert!(transfer_bodies(&out).is_empty());
    assert_eq!(queue_state(&c, "q"), (2, 2));
    let out = c.call(1, release(&[0, 2], false));
    assert!(transfer_bodies(&out).is_empty());
    assert_eq!(queue_state(&c, "q"), (4, 0));
    let got = c.grant(1, "d", 4);
    let seen: Vec<(&[u8], bool)> = got.iter().map(|d| (&d.body[..], d.redelivered())).collect();
    assert_eq!(
        seen,
        [
            (&b"a"[..], false),
            (b"b", true),
            (b"c", false),
            (b"d", true)
        ]
    );
    // Releasing what was already released (ids 0..=3) does nothing.
    assert_eq!(exception(&c.call(1, release(&[0, 1, 2, 3], true))), None);
    assert_eq!(queue_state(&c, "q"), (0, 4));
}

#[tokio::test]
async fn reject_sends_the_message_to_the_queues_alternate_exchange_or_drops_it() {
    let mut c = open().await;
    c.attach(1, "s1");
    c.call(1, declare("dlq"));
    let bind = ferry_amqp010::ExchangeBind {
        queue: dest("dlq"),
        exchange: dest("amq.fanout"),
        binding_key: dest(""),
        arguments: None,
    };
    c.call(1, bind);
    let with_alt = QueueDeclare {
        alternate_exchange: dest("amq.fanout"),
        ..declare("q")
    };
    c.call(1, with_alt);
    c.call(1, declare("plain"));
    for (queue, body) in [("q", "to-alt"), ("plain", "dropped")] {
        c.publish(1, "", &keyed(queue), body.as_bytes());
    }
    c.subscribe(1, "q", "a", AcceptMode::Explicit, AcquireMode::PreAcquired);
    c.subscribe(
        1,
        "plain",
        "b",
        AcceptMode::Explicit,
        AcquireMode::PreAcquired,
    );
    assert_eq!(c.grant(1, "a", 1).len(), 1);
    assert_eq!(c.grant(1, "b", 1).len(), 1);
    assert_eq!(exception(&c.call(1, reject(&[0, 1]))), None);
    assert_eq!(queue_state(&c, "q"), (0, 0));
    assert_eq!(queue_state(&c, "plain"), (0, 0));
    let dlq = c.conn.broker().queue("dlq").unwrap();
    assert_eq!(dlq.queued_bodies(), [Bytes::from_static(b"to-alt")]);
    // Rejecting again does nothing.
    assert_eq!(exception(&c.call(1, reject(&[0, 1]))), None);
    assert_eq!(dlq.message_count(), 1);
}

#[tokio::test]
async fn a_not_acquired_subscription_browses_and_acquire_reports_what_it_got() {
    // qpid-python's message.test_subscribe_not_acquired_3, frame by frame.
    let names: Vec<String> = (1..=6).map(|i| format!("m{i}")).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let mut c = with_queue(&names).await;
    c.subscribe(1, "q", "b", AcceptMode::Explicit, AcquireMode::NotAcquired);
    let got = c.grant(1, "b", 6);
    assert_eq!(bodies(&got).len(), 6);
    assert_eq!(got[0].transfer.acquire_mode, Some(AcquireMode::NotAcquired));
    // Browsing leaves everything on the queue.
    assert_eq!(queue_state(&c, "q"), (6, 0));
    // Acquire the odd ones (transfers 0, 2, 4) and an id never sent.
    let out = c.call(
        1,
        MessageAcquire {
            transfers: Some(set(&[0, 2, 4, 99])),
        },
    );
    // It answers the acquire: command 10 (declare, six transfers, subscribe, two flows).
    let (answers, acquired) = result::<Acquired>(&out);
    assert_eq!(answers, 10);
    assert_eq!(acquired.transfers, Some(set(&[0, 2, 4])));
    assert_eq!(queue_state(&c, "q"), (3, 3));
    // A second acquire of the same gets nothing.
    let out = c.call(
        1,
        MessageAcquire {
            transfers: Some(set(&[0])),
        },
    );
    assert_eq!(
        result::<Acquired>(&out).1.transfers,
        Some(SequenceSet::new())
    );
    c.call(1, accept(&[0, 2, 4]));
    // Releasing unacquired transfers only forgets them.
    c.call(1, release(&[1, 3, 5], true));
    assert_eq!(queue_state(&c, "q"), (3, 0));
    c.attach(2, "s2");
    c.subscribe(2, "q", "b2", AcceptMode::None, AcquireMode::NotAcquired);
    let got = c.grant(2, "b2", 10);
    assert_eq!(bodies(&got), [&b"m2"[..], b"m4", b"m6"]);
    assert!(got.iter().all(|d| !d.redelivered()));
}

/// A result is one sequence-set, which holds at most 8191 ranges. Acquiring every other of
/// 16,400 browsed transfers made 8200, and the result was dropped: the client waited for it
/// for ever. Now the acquire stops where its result is full.
#[tokio::test]
async fn an_acquire_takes_no_more_than_its_result_can_report() {
    let n = 2 * (SequenceSet::MAX_RANGES as u32 + 9);
    let mut c = with_queue(&[]).await;
    let mut batch = BytesMut::new();
    for _ in 0..n {
        batch.extend_from_slice(&transfer_frames(1, "", &keyed("q"), b"m", false));
    }
    c.exchange(batch);
    c.subscribe(1, "q", "b", AcceptMode::Explicit, AcquireMode::NotAcquired);
    let mut browsed = c.grant(1, "b", n).len();
    while browsed < n as usize {
        let more = c.deliveries().len();
        assert!(more > 0, "{browsed} of {n} browsed");
        browsed += more;
    }
    // The odd transfers (ids 1, 3, ...; the transfers are commands 0..n) first, in
    // requests small enough to send; that leaves the even ones each a range of its own.
    let odd: Vec<u32> = (0..n / 2).map(|k| 2 * k + 1).collect();
    for part in odd.chunks(4000) {
        let out = c.call(
            1,
            MessageAcquire {
                transfers: Some(set(part)),
            },
        );
        assert_eq!(result::<Acquired>(&out).1.transfers, Some(set(part)));
    }
    let everything = MessageAcquire {
        transfers: Some(range(0, n - 1)),
    };
    let out = c.call(1, everything.clone());
    let got = result::<Acquired>(&out).1.transfers.expect("a set");
    assert_eq!(got.ranges().len(), SequenceSet::MAX_RANGES);
    assert_eq!(got.first(), Some(0));
    assert_eq!(queue_state(&c, "q").1, u64::from(n) - 9);
    // The rest are still there for the next acquire.
    let out = c.call(1, everything);
    let rest = result::<Acquired>(&out).1.transfers.expect("a set");
    assert_eq!(
        rest.iter().collect::<Vec<_>>(),
        (n / 2 - 9..n / 2).map(|k| 2 * k).collect::<Vec<_>>()
    );
    assert_eq!(queue_state(&c, "q").1, u64::from(n));
}

#[tokio::test]
async fn acquire_misses_messages_another_consumer_took() {
    let mut c = with_queue(&["x", "y"]).await;
    c.attach(2, "s2");
    c.subscribe(1, "q", "b", AcceptMode::Explicit, AcquireMode::NotAcquired);
    assert_eq!(c.grant(1, "b", 2).len(), 2);
    c.subscribe(2, "q", "t", AcceptMode::Explicit, AcquireMode::PreAcquired);
    assert_eq!(c.grant(2, "t", 1).len(), 1);
    let out = c.call(
        1,
        MessageAcquire {
            transfers: Some(set(&[0, 1])),
        },
    );
    assert_eq!(result::<Acquired>(&out).1.transfers, Some(set(&[1])));
    // Rejecting or accepting an unacquired transfer leaves the message alone.
    c.call(1, reject(&[0]));
    assert_eq!(queue_state(&c, "q"), (0, 2));
}

#[tokio::test]
async fn a_window_moves_on_as_transfers_complete_and_credit_mode_does_not() {
    let mut c = with_queue(&["1", "2", "3", "4"]).await;
    c.subscribe(1, "q", "w", AcceptMode::Explicit, AcquireMode::PreAcquired);
    assert_eq!(bodies(&c.grant(1, "w", 2)), [&b"1"[..], b"2"]);
    // Accepting does not move a window; completing does, once per transfer.
    assert!(transfer_bodies(&c.call(1, accept(&[0, 1]))).is_empty());
    let out = c.exchange(control(1, completed(0, 0)));
    assert_eq!(transfer_bodies(&out), bodies_of(&["3"]));
    // A completion repeated (peers send cumulative sets) refunds nothing more.
    let out = c.exchange(control(1, completed(0, 0)));
    assert!(transfer_bodies(&out).is_empty());
    // In credit mode completions give nothing back.
    c.call(1, flow_mode("w", FlowMode::Credit));
    let out = c.exchange(control(1, completed(0, 2)));
    assert!(transfer_bodies(&out).is_empty());
    assert_eq!(bodies(&c.grant(1, "w", 1)), [&b"4"[..]]);
}

#[tokio::test]
async fn a_byte_window_counts_header_and_body() {
    let mut c = with_queue(&["aaaa", "bbbb", "cccc"]).await;
    c.subscribe(1, "q", "w", AcceptMode::None, AcquireMode::PreAcquired);
    // One message's size: its header segment and body, and the octet of the default
    // exchange's name, which qpidd's header would carry.
    let mut raw = BytesMut::new();
    keyed("q").encode(&mut raw).unwrap();
    let size = (raw.len() + 1 + 4) as u32;
    c.send(&command(1, flow("w", CreditUnit::Message, 10), false));
    let got = c.exchange(command(1, flow("w", CreditUnit::Byte, 2 * size + 1), false));
    assert_eq!(transfer_bodies(&got), bodies_of(&["aaaa", "bbbb"]));
    // Completing the first gives its bytes back.
    let out = c.exchange(control(1, completed(0, 0)));
    assert_eq!(transfer_bodies(&out), bodies_of(&["cccc"]));
}

#[tokio::test]
async fn credit_mode_counts_messages_and_bytes_and_unlimited_stays_unlimited() {
    let mut c = with_queue(&["1", "2", "3"]).await;
    c.subscribe(1, "q", "d", AcceptMode::None, AcquireMode::PreAcquired);
    assert_eq!(
        exception(&c.call(1, flow_mode("d", FlowMode::Credit))),
        None
    );
    // Message credit without byte credit delivers nothing.
    let out = c.exchange(command(1, flow("d", CreditUnit::Message, 5), false));
    assert!(transfer_bodies(&out).is_empty());
    let out = c.exchange(command(1, flow("d", CreditUnit::Byte, u32::MAX), false));
    assert_eq!(transfer_bodies(&out), bodies_of(&["1", "2", "3"]));
    // Two credits left: the next two go, the third waits.
    for body in ["4", "5", "6"] {
        c.send(&transfer_frames(1, "", &keyed("q"), body.as_bytes(), false));
    }
    assert_eq!(bodies(&c.deliveries()), [&b"4"[..], b"5"]);
    // Unlimited message credit (0xFFFFFFFF) is never used up.
    let out = c.exchange(command(1, flow("d", CreditUnit::Message, u32::MAX), false));
    assert_eq!(transfer_bodies(&out), bodies_of(&["6"]));
    for i in 0..20 {
        c.send(&transfer_frames(
            1,
            "",
            &keyed("q"),
            format!("more {i}").as_bytes(),
            false,
        ));
    }
    assert_eq!(c.deliveries().len(), 20);
}

#[tokio::test]
async fn flush_sends_what_credit_allows_and_then_zeroes_it_and_stop_zeroes_it() {
    let mut c = with_queue(&["1", "2", "3"]).await;
    c.subscribe(1, "q", "d", AcceptMode::None, AcquireMode::PreAcquired);
    c.call(1, flow_mode("d", FlowMode::Credit));
    c.send(&command(1, flow("d", CreditUnit::Byte, u32::MAX), false));
    c.send(&command(1, flow("d", CreditUnit::Message, 5), false));
    assert_eq!(c.deliveries().len(), 3);
    // Two credits were left; the flush uses none (nothing waits) and takes them back.
    let flush = MessageFlush {
        destination: dest("d"),
    };
    assert_eq!(exception(&c.call(1, flush)), None);
    let out = c.publish(1, "", &keyed("q"), b"4");
    assert!(transfer_bodies(&out).is_empty());
    c.send(&command(1, flow("d", CreditUnit::Byte, u32::MAX), false));
    c.send(&command(1, flow("d", CreditUnit::Message, 2), false));
    assert_eq!(bodies(&c.deliveries()), [&b"4"[..]]);
    let stop = MessageStop {
        destination: dest("d"),
    };
    assert_eq!(exception(&c.call(1, stop)), None);
    let out = c.publish(1, "", &keyed("q"), b"5");
    assert!(transfer_bodies(&out).is_empty());
    assert_eq!(queue_state(&c, "q"), (1, 0));
}

#[tokio::test]
async fn window_stop_then_flow_then_completion_grants_the_new_window_only() {
    // qpid-python's message.test_credit_window_after_messagestop.
    let names: Vec<String> = (1..=11).map(|i| format!("message-{i}")).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let mut c = with_queue(&names).await;
    c.subscribe(1, "q", "c", AcceptMode::Explicit, AcquireMode::PreAcquired);
    assert_eq!(bodies(&c.grant(1, "c", 5)).len(), 5);
    c.call(
        1,
        MessageStop {
            destination: dest("c"),
        },
    );
    c.send(&command(1, flow("c", CreditUnit::Byte, u32::MAX), false));
    let out = c.exchange(command(1, flow("c", CreditUnit::Message, 5), false));
    assert!(transfer_bodies(&out).is_empty(), "the window is still full");
    let out = c.exchange(control(1, completed(0, 4)));
    assert_eq!(transfer_bodies(&out), bodies_of(&names[5..10]));
    assert!(c.deliveries().is_empty(), "not the eleventh");
}

#[tokio::test]
async fn flow_commands_name_an_existing_subscription() {
    let mut c = open().await;
    let unknown: Vec<Command> = vec![
        flow("nope", CreditUnit::Message, 1).into(),
        MessageFlush {
            destination: dest("nope"),
        }
        .into(),
        MessageStop {
            destination: dest("nope"),
        }
        .into(),
        flow_mode("nope", FlowMode::Window).into(),
        MessageCancel {
            destination: dest("nope"),
        }
        .into(),
    ];
    for (i, cmd) in unknown.into_iter().enumerate() {
        let name = cmd.name();
        assert_eq!(
            outcome(&mut c, 1 + i as u16, cmd),
            Some(ErrorCode::NotFound),
            "{name}"
        );
    }
    let missing: Vec<Command> = vec![
        MessageFlow {
            destination: None,
            unit: Some(CreditUnit::Message),
            value: Some(1),
        }
        .into(),
        MessageFlow {
            destination: dest("d"),
            unit: None,
            value: Some(1),
        }
        .into(),
        MessageFlush { destination: None }.into(),
        MessageStop { destination: None }.into(),
        MessageSetFlowMode {
            destination: None,
            flow_mode: Some(FlowMode::Credit),
        }
        .into(),
        MessageSetFlowMode {
            destination: dest("d"),
            flow_mode: None,
        }
        .into(),
        MessageCancel { destination: None }.into(),
    ];
    for (i, cmd) in missing.into_iter().enumerate() {
        let name = cmd.name();
        assert_eq!(
            outcome(&mut c, 10 + i as u16, cmd),
            Some(ErrorCode::InvalidArgument),
            "{name}"
        );
    }
}

#[tokio::test]
async fn subscribe_refusals_have_their_codes() {
    let config = ServerConfig {
        max_consumers_per_session: 2,
        ..ServerConfig::default()
    };
    let mut c = with_queue_on(config, &[]).await;
    c.call(1, declare("other"));
    assert_eq!(
        outcome(&mut c, 2, subscribe_to("missing", "d")),
        Some(ErrorCode::NotFound)
    );
    c.subscribe(1, "q", "d", AcceptMode::None, AcquireMode::PreAcquired);
    let again = c.call(1, subscribe_to("other", "d"));
    assert_eq!(
        failure(&again),
        (
            ErrorCode::NotAllowed,
            3,
            "destination d is already subscribed".to_owned()
        )
    );
    // At most two subscriptions per session here.
    c.attach(3, "s3");
    c.subscribe(3, "q", "a", AcceptMode::None, AcquireMode::PreAcquired);
    c.subscribe(3, "q", "b", AcceptMode::None, AcquireMode::PreAcquired);
    let third = c.call(3, subscribe_to("q", "c"));
    assert_eq!(failure(&third).0, ErrorCode::ResourceLimitExceeded);
    // An exclusive subscription needs the queue to itself, and then keeps it; browsing
    // beside it is allowed.
    c.call(1, ExecutionSync {});
    c.attach(4, "s4");
    c.call(4, declare("ex"));
    c.subscribe(4, "ex", "plain", AcceptMode::None, AcquireMode::PreAcquired);
    let exclusive = |d: &str| MessageSubscribe {
        exclusive: true,
        ..subscribe_to("ex", d)
    };
    assert_eq!(
        outcome(&mut c, 5, exclusive("x")),
        Some(ErrorCode::ResourceLocked)
    );
    let cancel = MessageCancel {
        destination: dest("plain"),
    };
    assert_eq!(exception(&c.call(4, cancel)), None);
    assert_eq!(outcome(&mut c, 6, exclusive("only")), None);
    assert_eq!(
        outcome(&mut c, 7, subscribe_to("ex", "late")),
        Some(ErrorCode::ResourceLocked)
    );
    let browse = MessageSubscribe {
        acquire_mode: Some(AcquireMode::NotAcquired),
        ..subscribe_to("ex", "look")
    };
    assert_eq!(outcome(&mut c, 8, browse), None);
}

#[tokio::test]
async fn cancel_stops_deliveries_and_leaves_unsettled_transfers_to_be_settled() {
    let mut c = with_queue(&["a", "b", "c"]).await;
    c.subscribe(1, "q", "d", AcceptMode::Explicit, AcquireMode::PreAcquired);
    assert_eq!(c.grant(1, "d", 1).len(), 1);
    let cancel = MessageCancel {
        destination: dest("d"),
    };
    assert_eq!(exception(&c.call(1, cancel.clone())), None);
    assert_eq!(c.conn.broker().queue("q").unwrap().consumer_count(), 0);
    // The transfer sent before can still be accepted.
    c.call(1, accept(&[0]));
    assert_eq!(queue_state(&c, "q"), (2, 0));
    // The destination is free again; cancelling twice is not-found.
    c.subscribe(1, "q", "d", AcceptMode::None, AcquireMode::PreAcquired);
    assert_eq!(bodies(&c.grant(1, "d", 5)), [&b"b"[..], b"c"]);
    c.call(1, cancel.clone());
    let out = c.call(1, cancel);
    assert_eq!(
        failure(&out),
        (ErrorCode::NotFound, 13, "no subscription d".to_owned())
    );
}

#[tokio::test]
async fn deliveries_waiting_for_a_cancelled_subscription_go_back_to_the_queue() {
    let services = services(ServerConfig::default());
    let mut consumer = open_on(services.clone(), 0).await;
    let mut publisher = open_on(services.clone(), 0).await;
    consumer.attach(1, "c");
    publisher.attach(1, "p");
    consumer.call(1, declare("q"));
    consumer.subscribe(1, "q", "d", AcceptMode::Explicit, AcquireMode::PreAcquired);
    consumer.call(1, flow_mode("d", FlowMode::Credit));
    consumer.send(&command(1, flow("d", CreditUnit::Byte, u32::MAX), false));
    consumer.send(&command(1, flow("d", CreditUnit::Message, 10), false));
    // Published elsewhere: the deliveries wait in the consumer's outbox.
    publisher.publish(1, "", &keyed("q"), b"1");
    publisher.publish(1, "", &keyed("q"), b"2");
    let q = services.broker.queue("q").unwrap();
    assert_eq!((q.message_count(), q.unsettled_count()), (0, 2));
    // The cancel is read before they are written: they are not sent, and not lost.
    let cancel = MessageCancel {
        destination: dest("d"),
    };
    let out = consumer.call(1, cancel);
    assert!(transfer_bodies(&out).is_empty(), "{out:?}");
    assert_eq!((q.message_count(), q.unsettled_count()), (2, 0));
    assert_eq!(q.queued_bodies(), [&b"1"[..], b"2"]);
}

#[tokio::test]
async fn deliveries_waiting_for_a_session_that_ended_go_back_to_the_queue() {
    let services = services(ServerConfig::default());
    let mut consumer = open_on(services.clone(), 0).await;
    let mut publisher = open_on(services.clone(), 0).await;
    consumer.attach(1, "c");
    publisher.attach(1, "p");
    consumer.call(1, declare("q"));
    consumer.subscribe(1, "q", "d", AcceptMode::Explicit, AcquireMode::PreAcquired);
    consumer.grant(1, "d", 10);
    publisher.publish(1, "", &keyed("q"), b"1");
    let detach = SessionDetach {
        name: Some(Bytes::from_static(b"c")),
    };
    let out = consumer.exchange(control(1, detach));
    assert!(transfer_bodies(&out).is_empty(), "{out:?}");
    let q = services.broker.queue("q").unwrap();
    assert_eq!((q.message_count(), q.unsettled_count()), (1, 0));
}

#[tokio::test]
async fn the_settlement_window_caps_unsettled_transfers_under_unlimited_credit() {
    let config = ServerConfig {
        session_max_unacked: 3,
        ..ServerConfig::default()
    };
    let names: Vec<String> = (1..=6).map(|i| format!("m{i}")).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let mut c = with_queue_on(config, &names).await;
    c.subscribe(1, "q", "d", AcceptMode::Explicit, AcquireMode::PreAcquired);
    c.call(1, flow_mode("d", FlowMode::Credit));
    let got = c.grant(1, "d", u32::MAX);
    assert_eq!(bodies(&got), [&b"m1"[..], b"m2", b"m3"]);
    // A transfer frees its slot only once both completed and accepted.
    assert!(transfer_bodies(&c.call(1, accept(&[0]))).is_empty());
    let out = c.exchange(control(1, completed(0, 0)));
    assert_eq!(transfer_bodies(&out), bodies_of(&["m4"]));
    let out = c.exchange(control(1, completed(1, 3)));
    assert!(transfer_bodies(&out).is_empty());
    // Released and rejected transfers free theirs too.
    c.send(&command(1, release(&[1], false), false));
    let out = c.call(1, reject(&[2]));
    assert_eq!(transfer_bodies(&out), bodies_of(&["m2", "m5"]));
    // Finite credit is the client's own bound: the window does not apply.
    let mut d = with_queue_on(
        ServerConfig {
            session_max_unacked: 3,
            ..ServerConfig::default()
        },
        &names,
    )
    .await;
    d.subscribe(1, "q", "d", AcceptMode::Explicit, AcquireMode::PreAcquired);
    d.call(1, flow_mode("d", FlowMode::Credit));
    assert_eq!(d.grant(1, "d", 6).len(), 6);
}

#[tokio::test]
async fn a_windowed_session_end_gives_every_unsettled_message_back_in_order() {
    let names: Vec<String> = (1..=8).map(|i| format!("m{i}")).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let mut c = with_queue(&names).await;
    c.attach(2, "s2");
    c.subscribe(1, "q", "d", AcceptMode::Explicit, AcquireMode::PreAcquired);
    assert_eq!(c.grant(1, "d", 8).len(), 8);
    // Some settled, some completed only, some released and re-sent.
    c.call(1, accept(&[1, 4]));
    c.exchange(control(1, completed(0, 3)));
    c.call(1, release(&[6], false));
    assert_eq!(queue_state(&c, "q"), (0, 6));
    c.exchange(control(
        1,
        SessionDetach {
            name: Some(Bytes::from_static(b"s1")),
        },
    ));
    assert_eq!(queue_state(&c, "q"), (6, 0));
    c.subscribe(2, "q", "e", AcceptMode::None, AcquireMode::PreAcquired);
    let got = c.grant(2, "e", 10);
    // m7 was re-sent after m8 and is back in its place.
    assert_eq!(
        bodies(&got),
        [&b"m1"[..], b"m3", b"m4", b"m6", b"m7", b"m8"]
    );
    assert!(got.iter().all(Delivered::redelivered));
}

#[tokio::test]
async fn management_sees_the_messages_a_connection_published_and_was_sent() {
    let mut c = with_queue(&["a", "b", "c"]).await;
    c.subscribe(1, "q", "d", AcceptMode::None, AcquireMode::PreAcquired);
    assert_eq!(c.grant(1, "d", 2).len(), 2);
    let broker = c.conn.broker().clone();
    let t = broker.connections().list()[0].traffic;
    assert_eq!((t.messages_in, t.messages_out), (3, 2));
}

/// A message to `q` whose application header `colour` is `colour`.
fn coloured(colour: &str) -> MessageHeader {
    let mut headers = Map::new();
    headers.insert("colour", Value::Str16(Str::from(colour)));
    MessageHeader {
        properties: Some(MessageProperties {
            application_headers: Some(headers),
            ..Default::default()
        }),
        ..keyed("q")
    }
}

fn selecting(argument: &str, selector: &str, destination: &str) -> MessageSubscribe {
    let mut arguments = Map::new();
    arguments.insert(argument, Value::Str16(Str::from(selector)));
    MessageSubscribe {
        arguments: Some(arguments),
        ..subscribe_to("q", destination)
    }
}

#[tokio::test]
async fn a_subscription_with_a_selector_gets_only_its_matches() {
    let mut c = with_queue(&[]).await;
    for colour in ["red", "blue", "red"] {
        c.publish(1, "", &coloured(colour), colour.as_bytes());
    }
    // Qpid JMS 0-x's argument (an empty one is no selector), then qpidd's.
    for (i, (argument, selector)) in [
        ("x-filter-jms-selector", ""),
        ("x-filter-jms-selector", "colour = 'red'"),
        ("x-apache-selector", "colour <> 'red'"),
    ]
    .into_iter()
    .enumerate()
    {
        let d = format!("d{i}");
        let s = MessageSubscribe {
            acquire_mode: Some(AcquireMode::NotAcquired),
            ..selecting(argument, selector, &d)
        };
        assert_eq!(exception(&c.call(1, s)), None);
    }
    assert_eq!(bodies(&c.grant(1, "d0", 10)).len(), 3, "no selector");
    assert_eq!(bodies(&c.grant(1, "d1", 10)), [&b"red"[..], b"red"]);
    assert_eq!(bodies(&c.grant(1, "d2", 10)), [&b"blue"[..]]);
}

#[tokio::test]
async fn a_selector_that_does_not_parse_is_an_invalid_argument() {
    let mut c = with_queue(&["a"]).await;
    let s = selecting("x-filter-jms-selector", "colour = ", "d");
    assert_eq!(outcome(&mut c, 2, s), Some(ErrorCode::InvalidArgument));
    assert_eq!(c.conn.broker().queue("q").unwrap().consumer_count(), 0);
}

#[tokio::test]
async fn what_a_selective_consumer_passes_over_stays_for_the_next_one() {
    // A queue its session owns outlives its consumers: nothing is dropped for them.
    let mut c = open().await;
    c.attach(1, "s1");
    let private = QueueDeclare {
        exclusive: true,
        auto_delete: true,
        ..declare("q")
    };
    assert_eq!(exception(&c.call(1, private)), None);
    let s = MessageSubscribe {
        exclusive: true,
        ..selecting("x-filter-jms-selector", "colour = 'red'", "d")
    };
    assert_eq!(exception(&c.call(1, s)), None);
    for colour in ["blue", "red", "blue"] {
        c.publish(1, "", &coloured(colour), colour.as_bytes());
    }
    assert_eq!(bodies(&c.grant(1, "d", 10)), [&b"red"[..]]);
    let cancel = MessageCancel {
        destination: dest("d"),
    };
    assert_eq!(exception(&c.call(1, cancel)), None);
    let blues = MessageSubscribe {
        exclusive: true,
        ..selecting("x-apache-selector", "colour = 'blue'", "e")
    };
    assert_eq!(exception(&c.call(1, blues)), None);
    assert_eq!(bodies(&c.grant(1, "e", 10)), [&b"blue"[..], b"blue"]);
}

/// Qpid JMS 0-x binds a topic subscriber's queue with its selector, as Broker-J applies it.
#[tokio::test]
async fn a_binding_with_a_selector_routes_only_its_matches() {
    let mut c = with_queue(&[]).await;
    let mut arguments = Map::new();
    arguments.insert(
        "x-filter-jms-selector",
        Value::Str16(Str::from("colour = 'red'")),
    );
    let selective = ExchangeBind {
        arguments: Some(arguments),
        ..bind("q", "amq.topic", "news")
    };
    assert_eq!(exception(&c.call(1, selective)), None);
    for colour in ["blue", "red", "blue"] {
        let header = MessageHeader {
            delivery: Some(DeliveryProperties {
                routing_key: Some(Str::from("news")),
                ..Default::default()
            }),
            ..coloured(colour)
        };
        c.publish(1, "amq.topic", &header, colour.as_bytes());
    }
    assert_eq!(
        c.conn.broker().queue("q").unwrap().queued_bodies(),
        [Bytes::from_static(b"red")],
        "what the selector rejects is never queued"
    );
    let mut bad = Map::new();
    bad.insert(
        "x-filter-jms-selector",
        Value::Str16(Str::from("colour = ")),
    );
    let refused = ExchangeBind {
        arguments: Some(bad),
        ..bind("q", "amq.topic", "other")
    };
    assert_eq!(
        outcome(&mut c, 2, refused),
        Some(ErrorCode::InvalidArgument)
    );
}
