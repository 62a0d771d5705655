//! Session windows, handles, and what ends a session.

use ferry_amqp1::{Accepted, End};

use super::*;

fn data(body: &'static [u8]) -> Message {
    Message::data(Bytes::from_static(body))
}

#[tokio::test]
async fn transfers_beyond_our_window_end_the_session() {
    let mut c = open().await;
    c.conn.protocol.incoming_window = 4;
    declare(&c, "q");
    c.begin(0);
    c.attach_sender(0, 0, Some("q"));
    let mut batch = BytesMut::new();
    for id in 0..5u32 {
        let mut payload = BytesMut::new();
        data(b"m").encode(&mut payload);
        let t = Transfer {
            handle: 0,
            delivery_id: Some(id),
            delivery_tag: Some(Bytes::copy_from_slice(&id.to_be_bytes())),
            settled: Some(true),
            ..Transfer::default()
        };
        write_frame(&mut batch, 0, &t.into(), &payload);
    }
    let got = c.exchange(batch);
    assert_eq!(
        error_of(&got).as_deref(),
        Some("amqp:session:window-violation")
    );
    assert_eq!(c.broker().queue("q").unwrap().message_count(), 4);
    // Only the client's end matters now; then the channel is free again.
    assert!(c.perform(0, Flow::default()).is_empty());
    assert!(c.perform(0, End { error: None }).is_empty());
    c.begin(0);
}

#[tokio::test]
async fn the_window_is_widened_before_it_runs_out() {
    let mut c = open().await;
    c.conn.protocol.incoming_window = 4;
    declare(&c, "q");
    c.begin(0);
    c.attach_sender(0, 0, Some("q"));
    c.transfer(0, 0, 0, true, &data(b"m"));
    c.transfer(0, 0, 1, true, &data(b"m"));
    let got = c.transfer(0, 0, 2, true, &data(b"m"));
    let f = flows(&got);
    assert_eq!(f.len(), 1, "{got:?}");
    assert_eq!((f[0].incoming_window, f[0].next_incoming_id), (4, Some(3)));
    for id in 3..7 {
        assert!(error_of(&c.transfer(0, 0, id, true, &data(b"m"))).is_none());
    }
}

#[tokio::test]
async fn we_send_no_more_frames_than_the_client_s_window_takes() {
    let mut c = open().await;
    declare(&c, "q");
    let begin = Begin {
        next_outgoing_id: 0,
        incoming_window: 1,
        outgoing_window: 100,
        ..Begin::default()
    };
    c.perform(0, begin);
    c.attach_sender(0, 0, Some("q"));
    for id in 0..3 {
        c.transfer(0, 0, id, true, &data(b"m"));
    }
    c.attach_receiver(0, 1, "q");
    let flow = |next_incoming: u32, window: u32| Flow {
        next_incoming_id: Some(next_incoming),
        incoming_window: window,
        next_outgoing_id: 3,
        outgoing_window: 100,
        handle: Some(1),
        delivery_count: Some(0),
        link_credit: Some(10),
        ..Flow::default()
    };
    assert_eq!(transfers(&c.perform(0, flow(0, 1))).len(), 1);
    assert!(transfers(&decode(c.take_output())).is_empty());
    // The client took one transfer and opens its window to five.
    assert_eq!(transfers(&c.perform(0, flow(1, 5))).len(), 2);
    c.settle(0, 0, Some(2), DeliveryState::Accepted(Accepted {}));
    assert_eq!(c.broker().queue("q").unwrap().message_count(), 0);
}

#[tokio::test]
async fn frames_for_unknown_handles_end_the_session() {
    let mut c = open().await;
    c.begin(0);
    let got = c.transfer(0, 9, 0, true, &data(b"m"));
    assert_eq!(
        error_of(&got).as_deref(),
        Some("amqp:session:unattached-handle")
    );
    c.perform(0, End { error: None });
    c.begin(0);
    let got = c.perform(
        0,
        ferry_amqp1::Detach {
            handle: 3,
            closed: true,
            error: None,
        },
    );
    assert_eq!(
        error_of(&got).as_deref(),
        Some("amqp:session:unattached-handle")
    );
}

#[tokio::test]
async fn a_handle_in_use_ends_the_session() {
    let mut c = open().await;
    declare(&c, "q");
    c.begin(0);
    c.attach_sender(0, 0, Some("q"));
    let got = c.attach_receiver(0, 0, "q");
    assert_eq!(
        error_of(&got).as_deref(),
        Some("amqp:session:handle-in-use")
    );
}

#[tokio::test]
async fn ending_a_session_puts_unsettled_messages_back_redelivered() {
    let mut c = open().await;
    declare(&c, "q");
    c.begin(0);
    c.begin(1);
    c.attach_sender(1, 0, Some("q"));
    c.transfer(1, 0, 0, true, &data(b"m"));
    c.attach_receiver(0, 1, "q");
    assert_eq!(transfers(&c.credit(0, 1, 0, 5)).len(), 1);
    let got = c.perform(0, End { error: None });
    assert!(matches!(&got[..], [Item::Frame(0, Performative::End(e), _)] if e.error.is_none()));
    let q = c.broker().queue("q").unwrap();
    assert_eq!((q.message_count(), q.consumer_count()), (1, 0));
    // Another session's link gets it again, counted as a second attempt.
    c.attach_receiver(1, 2, "q");
    let t = transfers(&c.credit(1, 2, 0, 5));
    let header = Message::decode(t[0].1.clone()).unwrap().header.unwrap();
    assert_eq!(header.delivery_count, 1);
}

#[tokio::test]
async fn closing_the_connection_releases_everything() {
    let mut c = open().await;
    declare(&c, "q");
    c.begin(0);
    c.attach_sender(0, 0, Some("q"));
    c.transfer(0, 0, 0, true, &data(b"m"));
    c.attach_receiver(0, 1, "q");
    c.credit(0, 1, 0, 5);
    let source = Source {
        dynamic: true,
        ..Source::default()
    };
    c.attach_receiver_from(0, 2, source, false);
    let queues = c.broker().queue_names().len();
    c.perform(0, ferry_amqp1::Close { error: None });
    let q = c.broker().queue("q").unwrap();
    assert_eq!((q.message_count(), q.consumer_count()), (1, 0));
    assert_eq!(
        c.broker().queue_names().len(),
        queues - 1,
        "the dynamic queue went"
    );
}

/// "A peer that receives a handle outside the supported range MUST close the connection
/// with the framing-error error-code": on attach and on any frame naming a link.
#[tokio::test]
async fn a_handle_beyond_handle_max_closes_the_connection_with_framing_error() {
    let config = ServerConfig {
        max_consumers_per_session: 4,
        ..ServerConfig::default()
    };
    let mut c = open_with(config.clone(), None).await;
    declare(&c, "q");
    let begin = Begin {
        next_outgoing_id: 0,
        incoming_window: 1000,
        outgoing_window: 1000,
        handle_max: 100,
        ..Begin::default()
    };
    let got = c.perform(0, begin);
    let Some(Item::Frame(0, Performative::Begin(b), _)) = got.first() else {
        panic!("{got:?}");
    };
    assert_eq!(b.handle_max, 3);
    assert!(error_of(&c.attach_sender(0, 3, Some("q"))).is_none());
    let got = c.attach_receiver(0, 4, "q");
    assert!(
        matches!(got.last(), Some(Item::Frame(0, Performative::Close(_), _))),
        "{got:?}"
    );
    assert_eq!(
        error_of(&got).as_deref(),
        Some("amqp:connection:framing-error")
    );
    assert_eq!(c.broker().queue("q").unwrap().consumer_count(), 0);

    let mut c = open_with(config, None).await;
    c.begin(0);
    let got = c.transfer(0, 7, 0, true, &data(b"m"));
    assert_eq!(
        error_of(&got).as_deref(),
        Some("amqp:connection:framing-error")
    );
}

/// Ending a session puts back every link's unsettled messages, each on its own queue, and
/// detaching one link puts back only its own.
#[tokio::test]
async fn ending_a_session_puts_back_every_link_s_messages() {
    let mut c = open().await;
    c.begin(0);
    c.begin(1);
    c.attach_sender(1, 0, None);
    let names = ["a", "b", "c"];
    for (i, name) in names.iter().enumerate() {
        declare(&c, name);
        c.attach_sender(1, 1 + i as u32, Some(name));
        for id in 0..3 {
            c.transfer(1, 1 + i as u32, (i * 3 + id) as u32, true, &data(b"m"));
        }
        c.attach_receiver(0, 10 + i as u32, name);
        assert_eq!(transfers(&c.credit(0, 10 + i as u32, 0, 5)).len(), 3);
    }
    let q = |c: &Client, n: &str| {
        let q = c.broker().queue(n).unwrap();
        (q.message_count(), q.unsettled_count())
    };
    c.perform(
        0,
        ferry_amqp1::Detach {
            handle: 11,
            closed: true,
            error: None,
        },
    );
    assert_eq!(
        (q(&c, "a"), q(&c, "b"), q(&c, "c")),
        ((0, 3), (3, 0), (0, 3))
    );
    c.perform(0, End { error: None });
    assert_eq!(
        (q(&c, "a"), q(&c, "b"), q(&c, "c")),
        ((3, 0), (3, 0), (3, 0))
    );
}
