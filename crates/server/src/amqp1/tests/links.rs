//! Links both ways: attach, addresses, credit, transfers, dispositions, detach.

use ferry_amqp1::messaging::distribution_mode;
use ferry_amqp1::{
    condition, Accepted, Detach, Header, Modified, Properties, Rejected, Released, Value,
};

use super::*;

fn data(body: &'static [u8]) -> Message {
    Message::data(Bytes::from_static(body))
}

fn with_subject(body: &'static [u8], subject: &str) -> Message {
    Message {
        properties: Some(Properties {
            subject: Some(subject.into()),
            ..Properties::default()
        }),
        ..data(body)
    }
}

fn queue_depth(c: &Client, name: &str) -> u64 {
    c.broker().queue(name).map_or(0, |q| q.message_count())
}

fn attached_source(items: &[Item]) -> Option<Source> {
    items.iter().find_map(|i| match i {
        Item::Frame(_, Performative::Attach(a), _) => a.source.clone(),
        _ => None,
    })
}

#[tokio::test]
async fn a_sending_link_publishes_to_a_queue_and_is_settled() {
    let mut c = open().await;
    declare(&c, "q");
    c.begin(0);
    let got = c.attach_sender(0, 0, Some("q"));
    let Some(Item::Frame(0, Performative::Attach(a), _)) = got.first() else {
        panic!("{got:?}");
    };
    assert_eq!(a.role, Role::Receiver);
    assert_eq!(a.rcv_settle_mode, ReceiverSettleMode::First);
    let credit = flows(&got);
    assert_eq!(credit[0].link_credit, Some(1000));
    assert_eq!(credit[0].handle, Some(0));
    let got = c.transfer(0, 0, 0, false, &data(b"hello"));
    let d = dispositions(&got);
    assert_eq!(d.len(), 1);
    assert!(d[0].settled && d[0].first == 0);
    assert_eq!(d[0].state, Some(DeliveryState::Accepted(Accepted {})));
    // Settled transfers get no disposition.
    assert!(dispositions(&c.transfer(0, 0, 1, true, &data(b"again"))).is_empty());
    assert_eq!(queue_depth(&c, "q"), 2);
}

#[tokio::test]
async fn settlements_of_a_batch_go_out_as_one_range() {
    let mut c = open().await;
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
            ..Transfer::default()
        };
        write_frame(&mut batch, 0, &t.into(), &payload);
    }
    let d = dispositions(&c.exchange(batch));
    assert_eq!(d.len(), 1, "{d:?}");
    assert_eq!((d[0].first, d[0].last), (0, Some(4)));
}

#[tokio::test]
async fn a_message_in_several_transfers_is_joined() {
    let mut c = open().await;
    declare(&c, "q");
    c.begin(0);
    c.attach_sender(0, 0, Some("q"));
    let mut payload = BytesMut::new();
    data(b"0123456789abcdef").encode(&mut payload);
    let payload = payload.freeze();
    let mut out = BytesMut::new();
    for (i, part) in payload.chunks(5).enumerate() {
        let first = i == 0;
        let t = Transfer {
            handle: 0,
            delivery_id: first.then_some(7),
            delivery_tag: first.then(|| Bytes::from_static(b"t")),
            more: (i + 1) * 5 < payload.len(),
            ..Transfer::default()
        };
        write_frame(&mut out, 0, &t.into(), part);
    }
    let d = dispositions(&c.exchange(out));
    assert_eq!(d.len(), 1);
    assert_eq!(d[0].first, 7);
    let q = c.broker().queue("q").unwrap();
    assert_eq!(&q.queued_bodies()[0][..], b"0123456789abcdef");
}

#[tokio::test]
async fn an_aborted_delivery_is_dropped() {
    let mut c = open().await;
    declare(&c, "q");
    c.begin(0);
    c.attach_sender(0, 0, Some("q"));
    let mut out = BytesMut::new();
    let t = Transfer {
        handle: 0,
        delivery_id: Some(0),
        delivery_tag: Some(Bytes::from_static(b"t")),
        more: true,
        ..Transfer::default()
    };
    write_frame(&mut out, 0, &t.into(), b"\x00\x53");
    let abort = Transfer {
        handle: 0,
        aborted: true,
        ..Transfer::default()
    };
    write_frame(&mut out, 0, &abort.into(), &[]);
    assert!(dispositions(&c.exchange(out)).is_empty());
    assert_eq!(queue_depth(&c, "q"), 0);
    // The link goes on.
    assert_eq!(
        dispositions(&c.transfer(0, 0, 1, false, &data(b"x"))).len(),
        1
    );
}

#[tokio::test]
async fn a_receiving_link_gets_what_its_credit_allows() {
    let mut c = open().await;
    declare(&c, "q");
    c.begin(0);
    let got = c.attach_receiver(0, 1, "q");
    let Some(Item::Frame(0, Performative::Attach(a), _)) = got.first() else {
        panic!("{got:?}");
    };
    assert_eq!(a.role, Role::Sender);
    assert_eq!(a.initial_delivery_count, Some(0));
    c.attach_sender(0, 0, Some("q"));
    c.transfer(0, 0, 0, true, &data(b"one"));
    c.transfer(0, 0, 1, true, &data(b"two"));
    assert!(
        transfers(&decode(c.take_output())).is_empty(),
        "no credit yet"
    );
    let got = c.credit(0, 1, 0, 1);
    let t = transfers(&got);
    assert_eq!(t.len(), 1);
    assert_eq!(t[0].0.handle, 1);
    assert_eq!(t[0].0.settled, Some(false));
    assert_eq!(&body_of(&t[0].1)[..], b"one");
    assert!(
        transfers(&decode(c.take_output())).is_empty(),
        "credit used up"
    );
    // Accepting settles: the message leaves the queue's books.
    let id = t[0].0.delivery_id.unwrap();
    c.settle(0, id, None, DeliveryState::Accepted(Accepted {}));
    assert_eq!(c.broker().queue("q").unwrap().unsettled_count(), 0);
    let got = c.credit(0, 1, 1, 5);
    let t = transfers(&got);
    assert_eq!(t.len(), 1);
    assert_eq!(&body_of(&t[0].1)[..], b"two");
}

#[tokio::test]
async fn lowering_credit_takes_back_what_the_queue_has_not_spent() {
    let mut c = open().await;
    declare(&c, "q");
    c.begin(0);
    c.attach_receiver(0, 1, "q");
    c.credit(0, 1, 0, 10);
    c.credit(0, 1, 0, 1);
    c.attach_sender(0, 0, Some("q"));
    let mut sent = 0;
    for id in 0..3 {
        sent += transfers(&c.transfer(0, 0, id, true, &data(b"m"))).len();
    }
    assert_eq!(sent, 1);
    assert_eq!(queue_depth(&c, "q"), 2);
}

#[tokio::test]
async fn outcomes_settle_as_the_spec_says() {
    let mut c = open().await;
    declare(&c, "q");
    c.begin(0);
    c.attach_sender(0, 0, Some("q"));
    c.transfer(0, 0, 0, true, &data(b"m"));
    c.attach_receiver(0, 1, "q");
    let first = transfers(&c.credit(0, 1, 0, 100));
    assert_eq!(first.len(), 1);
    // Released: back on the queue, not counted as a delivery attempt.
    let again = transfers(&c.settle(0, 0, None, DeliveryState::Released(Released {})));
    assert_eq!(again.len(), 1);
    let header = Message::decode(again[0].1.clone()).unwrap().header;
    assert_eq!(header.map_or(0, |h| h.delivery_count), 0);
    // Modified, delivery failed: back, counted.
    let modified = Modified {
        delivery_failed: Some(true),
        undeliverable_here: None,
        message_annotations: None,
    };
    let again = transfers(&c.settle(0, 1, None, DeliveryState::Modified(modified.clone())));
    let header: Option<Header> = Message::decode(again[0].1.clone()).unwrap().header;
    assert_eq!(header.map(|h| h.delivery_count), Some(1));
    // Each failed attempt counts (as RabbitMQ's delivery-count does), not only the first.
    let again = transfers(&c.settle(0, 2, None, DeliveryState::Modified(modified)));
    let header: Option<Header> = Message::decode(again[0].1.clone()).unwrap().header;
    assert_eq!(header.map(|h| h.delivery_count), Some(2));
    // Rejected: gone (no dead letter exchange here).
    let got = c.settle(
        0,
        3,
        None,
        DeliveryState::Rejected(Rejected { error: None }),
    );
    assert!(transfers(&got).is_empty());
    assert_eq!(queue_depth(&c, "q"), 0);
    assert_eq!(c.broker().queue("q").unwrap().unsettled_count(), 0);
}

#[tokio::test]
async fn undeliverable_here_dead_letters() {
    let mut c = open().await;
    let b = c.broker();
    let args: ferry_core::Arguments = std::iter::once((
        "x-dead-letter-exchange".to_owned(),
        ferry_core::HeaderValue::Str(String::new()),
    ))
    .chain(std::iter::once((
        "x-dead-letter-routing-key".to_owned(),
        ferry_core::HeaderValue::Str("dlq".into()),
    )))
    .collect();
    b.declare_queue(
        "q",
        ferry_core::QueueOptions {
            arguments: args,
            ..Default::default()
        },
        false,
        1,
    )
    .unwrap();
    declare(&c, "dlq");
    c.begin(0);
    c.attach_sender(0, 0, Some("q"));
    c.transfer(0, 0, 0, true, &data(b"m"));
    c.attach_receiver(0, 1, "q");
    c.credit(0, 1, 0, 1);
    let modified = Modified {
        delivery_failed: Some(true),
        undeliverable_here: Some(true),
        message_annotations: None,
    };
    c.settle(0, 0, None, DeliveryState::Modified(modified));
    assert_eq!(queue_depth(&c, "q"), 0);
    assert_eq!(queue_depth(&c, "dlq"), 1);
}

#[tokio::test]
async fn one_disposition_settles_a_range() {
    let mut c = open().await;
    declare(&c, "q");
    c.begin(0);
    c.attach_sender(0, 0, Some("q"));
    for id in 0..4 {
        c.transfer(0, 0, id, true, &data(b"m"));
    }
    c.attach_receiver(0, 1, "q");
    assert_eq!(transfers(&c.credit(0, 1, 0, 10)).len(), 4);
    c.settle(
        0,
        0,
        Some(u32::MAX / 4),
        DeliveryState::Accepted(Accepted {}),
    );
    assert_eq!(c.broker().queue("q").unwrap().unsettled_count(), 0);
    assert_eq!(queue_depth(&c, "q"), 0);
}

#[tokio::test]
async fn at_most_once_links_send_settled() {
    let mut c = open().await;
    declare(&c, "q");
    c.begin(0);
    c.attach_sender(0, 0, Some("q"));
    c.transfer(0, 0, 0, true, &data(b"m"));
    let source = Source {
        address: Some("q".into()),
        ..Source::default()
    };
    let got = c.attach_receiver_from(0, 1, source, true);
    let Some(Item::Frame(_, Performative::Attach(a), _)) = got.first() else {
        panic!("{got:?}");
    };
    assert_eq!(a.snd_settle_mode, SenderSettleMode::Settled);
    let t = transfers(&c.credit(0, 1, 0, 10));
    assert_eq!(t[0].0.settled, Some(true));
    assert_eq!(c.broker().queue("q").unwrap().unsettled_count(), 0);
    assert_eq!(queue_depth(&c, "q"), 0);
}

/// Deliveries sent settled are accepted on their queue together once the outbox drain that
/// wrote them ends, the event loop's or a link drain's (which writes inside input).
#[tokio::test]
async fn settled_deliveries_are_accepted_when_the_drain_ends() {
    let mut c = open().await;
    declare(&c, "q");
    c.begin(0);
    c.attach_sender(0, 0, Some("q"));
    for id in 0..3 {
        c.transfer(0, 0, id, true, &data(b"m"));
    }
    let source = Source {
        address: Some("q".into()),
        ..Source::default()
    };
    c.attach_receiver_from(0, 1, source, true);
    let flow = |delivery_count, drain| Flow {
        next_incoming_id: Some(0),
        incoming_window: 10_000,
        next_outgoing_id: 0,
        outgoing_window: 10_000,
        handle: Some(1),
        delivery_count: Some(delivery_count),
        link_credit: Some(2),
        drain,
        ..Flow::default()
    };
    let q = c.broker().queue("q").unwrap();
    c.send(&frame(0, flow(0, false)));
    c.conn.handle_outbox(&mut Vec::new(), c.now);
    assert_eq!((q.message_count(), q.unsettled_count()), (1, 0));
    assert_eq!(transfers(&decode(c.take_output())).len(), 2);
    c.send(&frame(0, flow(2, true)));
    assert_eq!((q.message_count(), q.unsettled_count()), (0, 0), "drained");
    assert_eq!(transfers(&decode(c.take_output())).len(), 1);
}

#[tokio::test]
async fn large_messages_go_out_in_frames_of_the_clients_size() {
    let services = services(ServerConfig::default());
    let mut c = Wire::new(|now| connection(services, peer(), now, false));
    c.take_output();
    c.finish_auth().await;
    c.perform(
        0,
        Open {
            container_id: "small".into(),
            max_frame_size: 512,
            ..Open::default()
        },
    );
    declare(&c, "q");
    c.begin(0);
    c.attach_sender(0, 0, Some("q"));
    let body: &'static [u8] = Box::leak(vec![7u8; 3000].into_boxed_slice());
    c.transfer(0, 0, 0, true, &data(body));
    c.attach_receiver(0, 1, "q");
    let got = transfers(&c.credit(0, 1, 0, 1));
    assert!(got.len() >= 6, "{} frames", got.len());
    assert!(got[..got.len() - 1].iter().all(|(t, _)| t.more));
    assert!(!got.last().unwrap().0.more);
    let joined: Vec<u8> = got.iter().flat_map(|(_, p)| p.to_vec()).collect();
    assert_eq!(&body_of(&Bytes::from(joined))[..], body);
}

#[tokio::test]
async fn drain_sends_what_there_is_and_uses_up_the_rest() {
    let mut c = open().await;
    declare(&c, "q");
    c.begin(0);
    c.attach_sender(0, 0, Some("q"));
    c.transfer(0, 0, 0, true, &data(b"a"));
    c.transfer(0, 0, 1, true, &data(b"b"));
    c.attach_receiver(0, 1, "q");
    let flow = Flow {
        next_incoming_id: Some(0),
        incoming_window: 100,
        next_outgoing_id: 0,
        outgoing_window: 100,
        handle: Some(1),
        delivery_count: Some(0),
        link_credit: Some(5),
        drain: true,
        ..Flow::default()
    };
    let got = c.perform(0, flow);
    assert_eq!(transfers(&got).len(), 2);
    let f = flows(&got);
    let last = f.last().expect("a flow after the transfers");
    assert_eq!(
        (last.delivery_count, last.link_credit, last.drain),
        (Some(5), Some(0), true)
    );
    // The flow comes after the transfers.
    let flow_at = got
        .iter()
        .position(|i| matches!(i, Item::Frame(_, Performative::Flow(_), _)));
    let last_transfer = got
        .iter()
        .rposition(|i| matches!(i, Item::Frame(_, Performative::Transfer(_), _)));
    assert!(flow_at > last_transfer);
}

fn drain_flow(handle: u32, count: u32, credit: u32, next_in: u32, window: u32) -> Flow {
    Flow {
        next_incoming_id: Some(next_in),
        incoming_window: window,
        next_outgoing_id: 0,
        outgoing_window: 100,
        handle: Some(handle),
        delivery_count: Some(count),
        link_credit: Some(credit),
        drain: true,
        ..Flow::default()
    }
}

/// A client that drains before it has seen all we sent gives a credit that ends behind our
/// delivery count: there is nothing to use up, and the count (a serial number) stays.
#[tokio::test]
async fn a_drain_behind_our_count_leaves_it_where_it_is() {
    let mut c = open().await;
    declare(&c, "q");
    c.begin(0);
    c.attach_sender(0, 0, Some("q"));
    for id in 0..12 {
        c.transfer(0, 0, id, true, &data(b"m"));
    }
    c.attach_receiver(0, 1, "q");
    assert_eq!(transfers(&c.credit(0, 1, 0, 10)).len(), 10);
    let got = c.perform(0, drain_flow(1, 5, 2, 10, 100));
    assert!(transfers(&got).is_empty());
    let f = flows(&got);
    let last = f.last().expect("the drain is answered");
    assert_eq!(
        (last.delivery_count, last.link_credit, last.drain),
        (Some(10), Some(0), true)
    );
    assert_eq!(queue_depth(&c, "q"), 2, "nothing more taken");
}

/// Deliveries a drain makes the queue give up but the session window holds back go first:
/// the drain's answer (credit used up) follows them when the window lets them go.
#[tokio::test]
async fn a_drain_held_back_by_the_window_is_answered_once_its_deliveries_go() {
    let mut c = open().await;
    declare(&c, "q");
    c.begin(0);
    c.attach_sender(0, 0, Some("q"));
    for id in 0..3 {
        c.transfer(0, 0, id, true, &data(b"m"));
    }
    c.attach_receiver(0, 1, "q");
    // A window of one frame: one transfer goes, two wait.
    let got = c.perform(0, drain_flow(1, 0, 5, 0, 1));
    assert_eq!(transfers(&got).len(), 1);
    assert!(
        flows(&got).iter().all(|f| f.handle != Some(1)),
        "no answer before the deliveries: {got:?}"
    );
    let open_window = Flow {
        next_incoming_id: Some(1),
        incoming_window: 100,
        next_outgoing_id: 0,
        outgoing_window: 100,
        ..Flow::default()
    };
    let got = c.perform(0, open_window);
    assert_eq!(transfers(&got).len(), 2);
    let f = flows(&got);
    let last = f.last().expect("the drain is answered");
    assert_eq!(
        (
            last.handle,
            last.delivery_count,
            last.link_credit,
            last.drain
        ),
        (Some(1), Some(5), Some(0), true)
    );
    let flow_at = got
        .iter()
        .rposition(|i| matches!(i, Item::Frame(_, Performative::Flow(_), _)));
    let last_transfer = got
        .iter()
        .rposition(|i| matches!(i, Item::Frame(_, Performative::Transfer(_), _)));
    assert!(flow_at > last_transfer);
}

/// The client's flow for a link on which it sends: a delivery count moved forward gives up
/// credit; one behind ours (it only ever moves forward) gives none.
#[tokio::test]
async fn a_publisher_s_delivery_count_gives_up_credit_and_never_adds_any() {
    let mut c = open().await;
    declare(&c, "q");
    c.begin(0);
    c.attach_sender(0, 0, Some("q"));
    c.transfer(0, 0, 0, true, &data(b"m"));
    let flow = |count: u32| Flow {
        next_incoming_id: Some(0),
        incoming_window: 100,
        next_outgoing_id: 1,
        outgoing_window: 100,
        handle: Some(0),
        delivery_count: Some(count),
        link_credit: Some(0),
        echo: true,
        ..Flow::default()
    };
    let ours = |items: &[Item]| {
        let f = flows(items);
        let f = f.last().expect("echoed");
        (f.delivery_count, f.link_credit)
    };
    let credit = crate::amqp1::receiver::LINK_CREDIT;
    assert_eq!(
        ours(&c.perform(0, flow(1u32.wrapping_sub(1_000_000)))),
        (Some(1), Some(credit - 1))
    );
    assert_eq!(ours(&c.perform(0, flow(0))), (Some(1), Some(credit - 1)));
    assert_eq!(ours(&c.perform(0, flow(11))), (Some(11), Some(credit - 11)));
    assert_eq!(
        ours(&c.perform(0, flow(11 + credit + 5))),
        (Some(11 + credit + 5), Some(0)),
        "past the credit: none left"
    );
}

#[tokio::test]
async fn echo_asks_for_our_flow_state() {
    let mut c = open().await;
    declare(&c, "q");
    c.begin(0);
    c.attach_receiver(0, 1, "q");
    let flow = Flow {
        next_incoming_id: Some(0),
        incoming_window: 100,
        next_outgoing_id: 0,
        outgoing_window: 100,
        handle: Some(1),
        delivery_count: Some(0),
        link_credit: Some(3),
        echo: true,
        ..Flow::default()
    };
    let f = flows(&c.perform(0, flow));
    assert_eq!(f.len(), 1);
    assert_eq!(
        (f[0].handle, f[0].link_credit, f[0].available),
        (Some(1), Some(3), Some(0))
    );
}

#[tokio::test]
async fn unknown_addresses_are_refused_with_a_null_terminus_and_a_detach() {
    let mut c = open().await;
    c.begin(0);
    let got = c.attach_receiver(0, 1, "nothing");
    let Some(Item::Frame(_, Performative::Attach(a), _)) = got.first() else {
        panic!("{got:?}");
    };
    assert!(a.source.is_none());
    assert_eq!(error_of(&got).as_deref(), Some("amqp:not-found"));
    let got = c.attach_sender(0, 2, Some("nothing"));
    let Some(Item::Frame(_, Performative::Attach(a), _)) = got.first() else {
        panic!("{got:?}");
    };
    assert!(a.target.is_none());
    assert_eq!(error_of(&got).as_deref(), Some("amqp:not-found"));
    // The client's detach finishes the refusal quietly; the handle is free again.
    assert!(c
        .perform(
            0,
            Detach {
                handle: 1,
                closed: true,
                error: None
            }
        )
        .is_empty());
    declare(&c, "q");
    assert!(error_of(&c.attach_receiver(0, 1, "q")).is_none());
}

#[tokio::test]
async fn dynamic_sources_make_a_queue_that_goes_with_the_link() {
    let mut c = open().await;
    c.begin(0);
    let source = Source {
        dynamic: true,
        ..Source::default()
    };
    let got = c.attach_receiver_from(0, 1, source, false);
    let address = attached_source(&got)
        .and_then(|s| s.address)
        .expect("an address");
    let name = address.as_str().to_owned();
    assert!(name.starts_with("amq.1-"), "{name}");
    assert!(c.broker().queue(&name).is_some());
    // Replies sent to that address reach the link.
    c.attach_sender(0, 0, Some(&name));
    c.transfer(0, 0, 0, true, &data(b"reply"));
    let t = transfers(&c.credit(0, 1, 0, 1));
    assert_eq!(&body_of(&t[0].1)[..], b"reply");
    let got = c.perform(
        0,
        Detach {
            handle: 1,
            closed: true,
            error: None,
        },
    );
    assert!(
        matches!(&got[..], [Item::Frame(_, Performative::Detach(d), _)] if d.handle == 1 && d.closed)
    );
    assert!(c.broker().queue(&name).is_none());
}

#[tokio::test]
async fn dynamic_targets_make_a_queue_too() {
    let mut c = open().await;
    c.begin(0);
    let attach = Attach {
        name: "temp-queue-creator".into(),
        handle: 0,
        role: Role::Sender,
        target: Some(LinkTarget::Target(Target {
            dynamic: true,
            capabilities: vec![Symbol::from("temporary-queue")],
            ..Target::default()
        })),
        ..Attach::default()
    };
    let got = c.perform(0, attach);
    let name = got
        .iter()
        .find_map(|i| match i {
            Item::Frame(_, Performative::Attach(a), _) => match &a.target {
                Some(LinkTarget::Target(t)) => t.address.clone(),
                _ => None,
            },
            _ => None,
        })
        .expect("an address");
    assert!(c.broker().queue(name.as_str()).is_some());
    c.perform(
        0,
        Detach {
            handle: 0,
            closed: true,
            error: None,
        },
    );
    assert!(c.broker().queue(name.as_str()).is_none());
}

#[tokio::test]
async fn exchange_sources_subscribe_with_a_binding_filter() {
    let mut c = open().await;
    c.begin(0);
    let mut filter = ferry_amqp1::FilterSet::new();
    filter.push(
        Symbol::from("binding"),
        Value::described(
            ferry_amqp1::Descriptor::Symbol(Symbol::from(
                "apache.org:legacy-amqp-topic-binding:string",
            )),
            Value::from("news.*"),
        ),
    );
    filter.push(
        Symbol::from("no-local"),
        Value::described(0x0000_468C_0000_0003u64, Value::List(Vec::new())),
    );
    let source = Source {
        address: Some("amq.topic".into()),
        filter: Some(filter),
        ..Source::default()
    };
    let got = c.attach_receiver_from(0, 1, source, false);
    let echoed = attached_source(&got)
        .and_then(|s| s.filter)
        .expect("filters");
    assert!(echoed.get("binding").is_some());
    assert!(
        echoed.get("no-local").is_none(),
        "the selector is not applied, and says so"
    );
    c.credit(0, 1, 0, 10);
    c.attach_sender(0, 0, Some("amq.topic"));
    let mut got = transfers(&c.transfer(0, 0, 0, true, &with_subject(b"sport", "sport.x")));
    got.extend(transfers(&c.transfer(
        0,
        0,
        1,
        true,
        &with_subject(b"news", "news.today"),
    )));
    c.attach_sender(0, 2, Some("amq.topic/news.tomorrow"));
    got.extend(transfers(&c.transfer(0, 2, 2, true, &data(b"keyed"))));
    let bodies: Vec<Bytes> = got.iter().map(|(_, p)| body_of(p)).collect();
    assert_eq!(
        bodies,
        [Bytes::from_static(b"news"), Bytes::from_static(b"keyed")]
    );
}

#[tokio::test]
async fn the_anonymous_relay_routes_by_to() {
    let mut c = open().await;
    declare(&c, "q");
    c.begin(0);
    c.attach_sender(0, 0, None);
    let to = |to: &str| Message {
        properties: Some(Properties {
            to: Some(to.into()),
            ..Properties::default()
        }),
        ..data(b"m")
    };
    let d = dispositions(&c.transfer(0, 0, 0, false, &to("q")));
    assert_eq!(d[0].state, Some(DeliveryState::Accepted(Accepted {})));
    let d = dispositions(&c.transfer(0, 0, 1, false, &to("amq.direct/q")));
    assert_eq!(d[0].state, Some(DeliveryState::Accepted(Accepted {})));
    let d = dispositions(&c.transfer(0, 0, 2, false, &to("nowhere")));
    let Some(DeliveryState::Rejected(r)) = &d[0].state else {
        panic!("{d:?}");
    };
    assert_eq!(
        r.error.as_ref().map(|e| e.condition.clone()),
        Some(condition::NOT_FOUND)
    );
    assert_eq!(queue_depth(&c, "q"), 1, "amq.direct has no binding for q");
}

#[tokio::test]
async fn browsing_leaves_messages_on_the_queue() {
    let mut c = open().await;
    declare(&c, "q");
    c.begin(0);
    c.attach_sender(0, 0, Some("q"));
    c.transfer(0, 0, 0, true, &data(b"m"));
    let source = Source {
        address: Some("q".into()),
        distribution_mode: Some(distribution_mode::COPY),
        ..Source::default()
    };
    c.attach_receiver_from(0, 1, source, false);
    let t = transfers(&c.credit(0, 1, 0, 10));
    assert_eq!(t.len(), 1);
    c.settle(0, 0, None, DeliveryState::Accepted(Accepted {}));
    assert_eq!(queue_depth(&c, "q"), 1);
}

#[tokio::test]
async fn detaching_a_receiving_link_puts_its_unsettled_messages_back() {
    let mut c = open().await;
    declare(&c, "q");
    c.begin(0);
    c.attach_sender(0, 0, Some("q"));
    c.transfer(0, 0, 0, true, &data(b"m"));
    c.attach_receiver(0, 1, "q");
    assert_eq!(transfers(&c.credit(0, 1, 0, 10)).len(), 1);
    assert_eq!(queue_depth(&c, "q"), 0);
    c.perform(
        0,
        Detach {
            handle: 1,
            closed: true,
            error: None,
        },
    );
    assert_eq!(queue_depth(&c, "q"), 1);
    assert_eq!(c.broker().queue("q").unwrap().consumer_count(), 0);
}

#[tokio::test]
async fn deleting_the_queue_detaches_its_links() {
    let mut c = open().await;
    declare(&c, "q");
    c.begin(0);
    c.attach_receiver(0, 1, "q");
    c.broker().delete_queue("q", false, false, 1).unwrap();
    let got = decode(c.take_output());
    assert_eq!(error_of(&got).as_deref(), Some("amqp:resource-deleted"));
}

#[tokio::test]
async fn too_large_messages_and_transfers_without_credit_detach_the_link() {
    let mut c = open_with(
        ServerConfig {
            max_message_size: 10,
            ..ServerConfig::default()
        },
        None,
    )
    .await;
    declare(&c, "q");
    c.begin(0);
    let got = c.attach_sender(0, 0, Some("q"));
    let Some(Item::Frame(_, Performative::Attach(a), _)) = got.first() else {
        panic!("{got:?}");
    };
    assert_eq!(a.max_message_size, Some(10));
    let got = c.transfer(0, 0, 0, false, &data(b"far too large a message"));
    assert_eq!(
        error_of(&got).as_deref(),
        Some("amqp:link:message-size-exceeded")
    );
}

#[tokio::test]
async fn a_client_ignoring_credit_is_detached() {
    let mut c = open().await;
    declare(&c, "q");
    c.begin(0);
    c.attach_sender(0, 0, Some("q"));
    // The client gives up its credit: its delivery count jumps to what it was granted.
    let flow = Flow {
        next_incoming_id: Some(0),
        incoming_window: 100,
        next_outgoing_id: 0,
        outgoing_window: 100,
        handle: Some(0),
        delivery_count: Some(1000),
        link_credit: Some(0),
        ..Flow::default()
    };
    c.perform(0, flow);
    let got = c.transfer(0, 0, 0, false, &data(b"m"));
    assert_eq!(
        error_of(&got).as_deref(),
        Some("amqp:link:transfer-limit-exceeded")
    );
}

#[tokio::test]
async fn credit_is_given_again_once_half_is_used() {
    let mut c = open().await;
    declare(&c, "q");
    c.begin(0);
    c.attach_sender(0, 0, Some("q"));
    let mut batch = BytesMut::new();
    for id in 0..501u32 {
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
    let f = flows(&c.exchange(batch));
    assert_eq!(f.len(), 1);
    assert_eq!(
        (f[0].delivery_count, f[0].link_credit),
        (Some(501), Some(1000))
    );
}

/// The flows about the publisher's link (handle 0).
fn publisher_flows(items: &[Item]) -> Vec<Flow> {
    flows(items)
        .into_iter()
        .filter(|f| f.handle == Some(0))
        .collect()
}

const HALF_CREDIT: u32 = crate::amqp1::receiver::LINK_CREDIT / 2;

/// A connection whose publisher (link 0) has sent queue `q` enough 10-byte messages to
/// want more credit, past a 4000-byte backlog hold; with `consumer`, `q` has a consumer
/// (link 1) with no credit yet, so the queue backs up. Returns what the transfers brought.
async fn publisher_past_the_hold(consumer: bool) -> (Client, Vec<Item>) {
    let config = ServerConfig {
        backlog_hold_bytes: 4000,
        ..ServerConfig::default()
    };
    let mut c = open_with(config, None).await;
    declare(&c, "q");
    c.begin(0);
    if consumer {
        let source = Source {
            address: Some("q".into()),
            ..Source::default()
        };
        c.attach_receiver_from(0, 1, source, true);
    }
    c.attach_sender(0, 0, Some("q"));
    let mut got = Vec::new();
    for id in 0..=HALF_CREDIT {
        got.extend(c.transfer(0, 0, id, true, &data(b"0123456789")));
    }
    (c, got)
}

#[tokio::test]
async fn a_publishers_credit_waits_while_its_consumed_queue_is_backlogged() {
    let (mut c, got) = publisher_past_the_hold(true).await;
    assert_eq!(queue_depth(&c, "q"), u64::from(HALF_CREDIT) + 1);
    assert!(
        publisher_flows(&got).is_empty(),
        "no new credit while backlogged"
    );
    let later = decode(c.advance(std::time::Duration::from_millis(5)));
    assert!(
        publisher_flows(&later).is_empty(),
        "still none: nothing drained"
    );
    // The consumer takes the backlog; the publisher's credit follows.
    let mut got = c.credit(0, 1, 0, 1000);
    assert_eq!(transfers(&got).len(), HALF_CREDIT as usize + 1);
    got.extend(decode(c.advance(std::time::Duration::from_millis(5))));
    let f = publisher_flows(&got);
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(f[0].link_credit, Some(crate::amqp1::receiver::LINK_CREDIT));
}

/// A held publisher that goes on sending is listed for credit once, not once per transfer:
/// released, it gets one flow.
#[tokio::test]
async fn a_held_publisher_sending_on_gets_one_flow_when_released() {
    let (mut c, _) = publisher_past_the_hold(true).await;
    let mut got = Vec::new();
    for id in HALF_CREDIT + 1..HALF_CREDIT + 4 {
        got.extend(c.transfer(0, 0, id, true, &data(b"0123456789")));
    }
    assert!(publisher_flows(&got).is_empty(), "held");
    let mut got = c.credit(0, 1, 0, 1000);
    assert_eq!(transfers(&got).len(), HALF_CREDIT as usize + 4);
    got.extend(decode(c.advance(std::time::Duration::from_millis(5))));
    let f = publisher_flows(&got);
    assert_eq!(f.len(), 1, "{f:?}");
}

#[tokio::test]
async fn held_credit_goes_out_as_soon_as_a_consumer_elsewhere_drains_the_queue() {
    let services = crate::shell::testing::services(ServerConfig {
        backlog_hold_bytes: 4000,
        ..ServerConfig::default()
    });
    let mut publisher = open_on(services.clone(), None).await;
    let mut consumer = open_on(services, None).await;
    declare(&publisher, "q");
    consumer.begin(0);
    let source = Source {
        address: Some("q".into()),
        ..Source::default()
    };
    consumer.attach_receiver_from(0, 1, source, true);
    publisher.begin(0);
    publisher.attach_sender(0, 0, Some("q"));
    let mut got = Vec::new();
    for id in 0..=HALF_CREDIT {
        got.extend(publisher.transfer(0, 0, id, true, &data(b"0123456789")));
    }
    assert!(publisher_flows(&got).is_empty(), "held");
    let taken = consumer.credit(0, 1, 0, 1000);
    assert_eq!(transfers(&taken).len(), HALF_CREDIT as usize + 1);
    // The publisher's clock has not moved: the queue, not a timer, lets its credit go.
    publisher.poll_flow();
    let f = publisher_flows(&decode(publisher.take_output()));
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(f[0].link_credit, Some(crate::amqp1::receiver::LINK_CREDIT));
}

#[tokio::test]
async fn a_queue_without_consumers_never_holds_a_publisher() {
    let (_c, got) = publisher_past_the_hold(false).await;
    let f = publisher_flows(&got);
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(f[0].link_credit, Some(crate::amqp1::receiver::LINK_CREDIT));
}

#[tokio::test]
async fn held_credit_stops_waking_a_connection_once_it_closes() {
    let (mut c, _) = publisher_past_the_hold(true).await;
    let soon = c.now + crate::shell::BACKLOG_RECHECK;
    assert!(
        c.conn.poll_timeout().is_some_and(|at| at <= soon),
        "rechecked soon"
    );
    c.perform(0, ferry_amqp1::Close { error: None });
    assert!(
        c.conn.poll_timeout().is_none_or(|at| at > soon),
        "a closed connection is not woken for held credit"
    );
}

/// The transfers of one 500,000-octet message on link `handle` as delivery `id`, in
/// 60,000-octet frames, all but the last (`more`), then the last.
fn delivery_in_parts(handle: u32, id: u32) -> (BytesMut, BytesMut) {
    let mut payload = BytesMut::new();
    Message::data(Bytes::from(vec![7u8; 500_000])).encode(&mut payload);
    let parts: Vec<&[u8]> = payload.chunks(60_000).collect();
    let (mut first, mut last) = (BytesMut::new(), BytesMut::new());
    for (i, part) in parts.iter().enumerate() {
        let more = i + 1 < parts.len();
        let t = Transfer {
            handle,
            delivery_id: (i == 0).then_some(id),
            delivery_tag: (i == 0).then(|| Bytes::copy_from_slice(&id.to_be_bytes())),
            message_format: Some(0),
            more,
            ..Transfer::default()
        };
        write_frame(
            if more { &mut first } else { &mut last },
            0,
            &t.into(),
            part,
        );
    }
    (first, last)
}

#[tokio::test]
async fn deliveries_begun_on_a_connection_are_bounded_together() {
    // Each within the size limit, two unfinished deliveries would hold more than the
    // connection may: the second link is detached with message-size-exceeded, and the
    // first delivery is still taken when it ends.
    let mut c = open_with(
        ServerConfig {
            max_message_size: 600 * 1024,
            max_unfinished_per_connection: 900 * 1024,
            ..ServerConfig::default()
        },
        None,
    )
    .await;
    declare(&c, "q");
    c.begin(0);
    c.attach_sender(0, 0, Some("q"));
    c.attach_sender(0, 1, Some("q"));
    let (first, first_end) = delivery_in_parts(0, 0);
    assert!(c.exchange(first).is_empty());
    let (second, _) = delivery_in_parts(1, 0);
    let got = c.exchange(second);
    assert_eq!(
        error_of(&got).as_deref(),
        Some("amqp:link:message-size-exceeded"),
        "{got:?}"
    );
    assert_eq!(dispositions(&c.exchange(first_end)).len(), 1);
    assert_eq!(queue_depth(&c, "q"), 1);
}
