//! The basic class: publish (returns, sizes, properties, split bodies), consume and cancel,
//! deliveries, get, settlement (ack, nack, reject, recover, dead-lettering), qos and
//! channel.flow.

use ferry_amqp091::{
    reply, BasicCancel, BasicGet, BasicNack, BasicProperties, BasicQos, BasicRecover,
    BasicRecoverAsync, BasicReject, ChannelFlow, ExchangeDeclare, FieldValue, Method, QueueBind,
    QueueDelete,
};

use super::*;

/// A channel 1 with queue `q` declared.
async fn with_queue() -> Client {
    let mut c = open().await;
    open_channel(&mut c, 1);
    c.declare_queue(1, "q");
    c
}

fn get(queue: &'static str, no_ack: bool) -> BasicGet {
    BasicGet {
        queue: short(queue),
        no_ack,
        ..Default::default()
    }
}

fn prefetch(count: u16, global: bool) -> BasicQos {
    BasicQos {
        prefetch_size: 0,
        prefetch_count: count,
        global,
    }
}

fn qos(c: &mut Client, channel: u16, m: BasicQos) {
    let ok = c.call(channel, m);
    assert!(
        matches!(&ok[..], [(ch, Method::BasicQosOk(_))] if *ch == channel),
        "{ok:?}"
    );
}

fn tags(got: &[Incoming]) -> Vec<u64> {
    delivered(got).into_iter().map(|(t, _, _)| t).collect()
}

#[tokio::test]
async fn a_mandatory_publish_nothing_routes_comes_back_as_312_no_route() {
    let mut c = with_queue().await;
    let props = BasicProperties {
        content_type: Some(short("text/plain")),
        message_id: Some(short("m-1")),
        ..Default::default()
    };
    c.publish_with(
        1,
        BasicPublish {
            mandatory: true,
            ..to("amq.direct", "nowhere")
        },
        props.clone(),
        b"lost",
    );
    let got = c.take();
    let [ret] = &got[..] else {
        panic!("{got:?}");
    };
    let Method::BasicReturn(r) = &ret.method else {
        panic!("{ret:?}");
    };
    assert_eq!(ret.channel, 1);
    assert_eq!(r.reply_code, 312);
    assert_eq!(r.reply_text.as_bytes(), b"NO_ROUTE");
    assert_eq!(r.exchange.as_bytes(), b"amq.direct");
    assert_eq!(r.routing_key.as_bytes(), b"nowhere");
    assert_eq!(ret.body(), b"lost");
    assert_eq!(ret.props(), &props);
    // Without mandatory an unroutable message just vanishes; a routed mandatory one is
    // not returned.
    c.publish(1, "amq.direct", "nowhere", b"gone");
    c.publish_with(
        1,
        BasicPublish {
            mandatory: true,
            ..to("", "q")
        },
        BasicProperties::default(),
        b"kept",
    );
    assert!(c.take().is_empty());
    let q = c.conn.broker().queue("q").unwrap();
    assert_eq!(q.info().message_count, 1);
}

#[tokio::test]
async fn publishing_to_a_missing_exchange_is_404_and_other_channels_carry_on() {
    let mut c = with_queue().await;
    open_channel(&mut c, 2);
    c.publish(2, "no-such-exchange", "q", b"x");
    let out = methods(c.take_output());
    assert_channel_closed(&out, 2, reply::NOT_FOUND, (60, 40));
    c.call(2, ChannelCloseOk {});
    c.publish(1, "", "q", b"fine");
    let got = c.request(1, get("q", true));
    assert_eq!(got[0].body(), b"fine");
    assert_eq!(c.conn.shell.phase, Phase::Open);
}

#[tokio::test]
async fn immediate_publishing_is_not_implemented_540() {
    let mut c = with_queue().await;
    c.publish_with(
        1,
        BasicPublish {
            immediate: true,
            ..to("", "q")
        },
        BasicProperties::default(),
        b"x",
    );
    let out = methods(c.take_output());
    assert_connection_closed(&c, &out, reply::NOT_IMPLEMENTED);
}

#[tokio::test]
async fn content_methods_only_the_broker_sends_are_503_from_a_client() {
    let methods_with_content = [
        Method::from(BasicDeliver {
            consumer_tag: short("c"),
            delivery_tag: 1,
            routing_key: short("q"),
            ..Default::default()
        }),
        ferry_amqp091::BasicReturn {
            reply_code: 312,
            reply_text: short("NO_ROUTE"),
            ..Default::default()
        }
        .into(),
        ferry_amqp091::BasicGetOk {
            delivery_tag: 1,
            ..Default::default()
        }
        .into(),
    ];
    for m in methods_with_content {
        let ids = (m.class_id(), m.method_id());
        let mut c = with_queue().await;
        let mut bytes = encode(1, m);
        write_content_header(
            &mut bytes,
            1,
            &ContentHeader::basic(1, BasicProperties::default()),
        );
        write_body(&mut bytes, 1, b"x", 4096);
        c.send(&bytes);
        let out = methods(c.take_output());
        assert_connection_closed(&c, &out, reply::COMMAND_INVALID);
        let Some((_, Method::ConnectionClose(cl))) = out.last() else {
            unreachable!()
        };
        assert_eq!((cl.class_id, cl.method_id), ids);
    }
}

#[tokio::test]
async fn an_invalid_expiration_is_406() {
    let mut c = with_queue().await;
    let props = BasicProperties {
        expiration: Some(short("soon")),
        ..Default::default()
    };
    c.publish_with(1, to("", "q"), props, b"x");
    let out = methods(c.take_output());
    assert_channel_closed(&out, 1, reply::PRECONDITION_FAILED, (60, 40));
}

#[tokio::test]
async fn properties_and_empty_bodies_arrive_as_published() {
    let mut c = with_queue().await;
    let props = BasicProperties {
        content_type: Some(short("application/json")),
        content_encoding: Some(short("utf-8")),
        headers: Some(table(&[
            ("n", FieldValue::I32(7)),
            ("s", long("text")),
            (
                "nested",
                FieldValue::Table(table(&[("b", FieldValue::Bool(true))])),
            ),
        ])),
        delivery_mode: Some(1),
        priority: Some(3),
        correlation_id: Some(short("corr")),
        reply_to: Some(short("replies")),
        message_id: Some(short("id-1")),
        timestamp: Some(1_700_000_000),
        kind: Some(short("type")),
        user_id: Some(short("guest")),
        app_id: Some(short("app")),
        ..Default::default()
    };
    c.publish_with(1, to("", "q"), props.clone(), b"");
    let got = c.consume(1, consumer("q", "c1"));
    let [d] = &got[..] else {
        panic!("{got:?}");
    };
    assert_eq!(d.props(), &props);
    assert_eq!(d.body(), b"");
    assert_eq!(d.content().body_frames, 0);
    let deliver = d.deliver();
    assert_eq!(deliver.exchange.as_bytes(), b"");
    assert_eq!(deliver.routing_key.as_bytes(), b"q");
    assert_eq!(deliver.consumer_tag.as_bytes(), b"c1");
    assert!(!deliver.redelivered);
}

#[tokio::test]
async fn a_broker_told_to_stamp_receipt_sets_the_timestamp_property() {
    let mut c = with_queue().await;
    let props = BasicProperties {
        content_type: Some(short("text/plain")),
        headers: Some(table(&[("n", FieldValue::I32(7))])),
        timestamp: Some(5),
        app_id: Some(short("app")),
        ..Default::default()
    };
    let broker = c.conn.broker().clone();
    broker.set_stamps_receipt(true);
    let from = ferry_core::Broker::receipt_time();
    c.publish_with(1, to("", "q"), props.clone(), b"a");
    c.publish_with(1, to("", "q"), BasicProperties::default(), b"b");
    let to_time = ferry_core::Broker::receipt_time();
    broker.set_stamps_receipt(false);
    c.publish_with(1, to("", "q"), props.clone(), b"c");
    let got = c.consume(1, consumer("q", "c1"));
    let [a, b, after] = &got[..] else {
        panic!("{got:?}");
    };
    for d in [a, b] {
        let stamp = d.props().timestamp;
        assert!(
            matches!(stamp, Some(t) if (from..=to_time).contains(&t)),
            "{stamp:?}"
        );
    }
    let expect = BasicProperties {
        timestamp: a.props().timestamp,
        ..props.clone()
    };
    assert_eq!(a.props(), &expect, "the other properties stay");
    assert_eq!(after.props(), &props, "as published once turned off");
}

#[tokio::test]
async fn a_body_split_over_several_frames_is_reassembled_and_split_again_by_frame_max() {
    let body: Vec<u8> = (0..20_000u32).map(|i| (i % 251) as u8).collect();
    // The publisher negotiated 65535 but sends 4096-octet frames: five of them.
    let mut c = with_queue().await;
    c.send(&publish_frames(
        1,
        to("", "q"),
        BasicProperties::default(),
        &body,
        4096,
    ));
    // A consumer that negotiated 4096 gets it in frames of at most 4096 octets.
    let services = Services {
        broker: c.conn.broker().clone(),
        ..services(ServerConfig::default())
    };
    let mut small = handshake(services, &[], tune_ok(4096, 0)).await;
    open_channel(&mut small, 1);
    small.send(&encode(1, consumer("q", "c1")));
    let out = small.take_output();
    let sizes: Vec<usize> = frames(out.clone())
        .iter()
        .filter(|f| f.frame_type == FrameType::Body)
        .map(|f| f.payload.len())
        .collect();
    assert_eq!(sizes, [4088, 4088, 4088, 4088, 3648]);
    let got = incoming(out);
    assert_eq!(got[1].body(), &body[..]);
    // One that negotiated more gets it in one body frame.
    c.declare_queue(1, "q2");
    c.publish(1, "", "q2", &body);
    let got = c.consume(1, consumer("q2", "c2"));
    assert_eq!(got[0].content().body_frames, 1);
    assert_eq!(got[0].body(), &body[..]);
}

#[tokio::test]
async fn a_client_that_takes_our_frame_max_sends_and_gets_frames_of_rabbitmqs_default_size() {
    let body: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    // tune-ok frame-max 0: ours, 131,072 octets (RabbitMQ's default) in all per frame.
    let mut c = handshake(services(ServerConfig::default()), &[], tune_ok(0, 0)).await;
    open_channel(&mut c, 1);
    c.declare_queue(1, "q");
    c.send(&publish_frames(
        1,
        to("", "q"),
        BasicProperties::default(),
        &body,
        131_072,
    ));
    c.send(&encode(1, consumer("q", "c1")));
    let out = c.take_output();
    let sizes: Vec<usize> = frames(out.clone())
        .iter()
        .filter(|f| f.frame_type == FrameType::Body)
        .map(|f| f.payload.len())
        .collect();
    assert_eq!(sizes, [131_064, 131_064, 37_872]);
    let got = incoming(out);
    assert_eq!(got[1].body(), &body[..]);
}

#[tokio::test]
async fn a_message_larger_than_the_maximum_size_is_406_on_its_channel_only() {
    let config = ServerConfig {
        max_message_size: 1000,
        ..ServerConfig::default()
    };
    let mut c = open_with(config, 0).await;
    open_channel(&mut c, 1);
    open_channel(&mut c, 2);
    c.declare_queue(1, "q");
    c.publish(1, "", "q", &[0; 1000]);
    assert!(c.take_output().is_empty());
    c.publish(2, "", "q", &[0; 1001]);
    let out = methods(c.take_output());
    assert_channel_closed(&out, 2, reply::PRECONDITION_FAILED, (60, 40));
    let Some((_, Method::ChannelClose(cl))) = out.first() else {
        unreachable!()
    };
    let text = String::from_utf8_lossy(cl.reply_text.as_bytes()).into_owned();
    assert!(text.contains("1001") && text.contains("1000"), "{text}");
    // Channel 1 goes on; the refused message was never stored.
    c.publish(1, "", "q", b"small");
    let q = c.conn.broker().queue("q").unwrap();
    assert_eq!(q.info().message_count, 2);
}

#[tokio::test]
async fn messages_begun_on_a_connection_are_bounded_together() {
    // Each within the size limit, two messages whose headers announce more than the
    // connection may hold unfinished: the second's channel is closed with 406 at its header,
    // and the first is still taken when its body ends.
    let config = ServerConfig {
        max_message_size: 600 * 1024,
        max_unfinished_per_connection: 900 * 1024,
        ..ServerConfig::default()
    };
    let mut c = open_with(config, 0).await;
    open_channel(&mut c, 1);
    open_channel(&mut c, 2);
    c.declare_queue(1, "q");
    let first = publish_frames(
        1,
        to("", "q"),
        BasicProperties::default(),
        &[1; 500_000],
        4096,
    );
    // Its last body frame: what is left of 4,088-octet payloads, and 8 octets of framing.
    let (first, first_end) = first.split_at(first.len() - (500_000 % 4088 + 8));
    c.send(first);
    let second = publish_frames(
        2,
        to("", "q"),
        BasicProperties::default(),
        &[2; 500_000],
        4096,
    );
    c.send(&second);
    let out = methods(c.take_output());
    assert_channel_closed(&out, 2, reply::PRECONDITION_FAILED, (60, 40));
    c.send(first_end);
    let q = c.conn.broker().queue("q").unwrap();
    assert_eq!(q.info().message_count, 1);
}

#[tokio::test]
async fn consumers_get_what_waits_then_what_comes_in_order_with_increasing_tags() {
    let mut c = with_queue().await;
    c.publish(1, "", "q", b"a");
    c.publish(1, "", "q", b"b");
    let got = c.consume(1, consumer("q", "c1"));
    assert_eq!(
        delivered(&got),
        [(1, false, "a".into()), (2, false, "b".into())]
    );
    c.publish(1, "", "q", b"c");
    assert_eq!(delivered(&c.take()), [(3, false, "c".into())]);
    assert!(got.iter().all(|d| d.channel == 1));
}

#[tokio::test]
async fn a_consumer_without_a_tag_gets_one_from_the_broker() {
    let mut c = with_queue().await;
    let out = c.request(1, consumer("q", ""));
    let Method::BasicConsumeOk(ok) = &out[0].method else {
        panic!("{out:?}");
    };
    assert!(
        ok.consumer_tag.as_bytes().starts_with(b"amq.ctag-"),
        "{ok:?}"
    );
    c.publish(1, "", "q", b"x");
    let got = c.take();
    assert_eq!(got[0].deliver().consumer_tag, ok.consumer_tag);
}

#[tokio::test]
async fn reusing_a_consumer_tag_on_a_channel_is_530() {
    let mut c = with_queue().await;
    c.consume(1, consumer("q", "same"));
    let out = c.call(1, consumer("q", "same"));
    assert_connection_closed(&c, &out, reply::NOT_ALLOWED);
}

#[tokio::test]
async fn a_channel_may_have_only_so_many_consumers_530() {
    let config = ServerConfig {
        max_consumers_per_session: 2,
        ..ServerConfig::default()
    };
    let mut c = open_with(config, 0).await;
    open_channel(&mut c, 1);
    c.declare_queue(1, "q");
    c.consume(1, consumer("q", "a"));
    c.consume(1, consumer("q", "b"));
    let out = c.call(1, consumer("q", "c"));
    assert_connection_closed(&c, &out, reply::NOT_ALLOWED);
}

#[tokio::test]
async fn an_exclusive_consumer_keeps_others_out_with_403() {
    let mut c = with_queue().await;
    open_channel(&mut c, 2);
    c.consume(
        1,
        BasicConsume {
            exclusive: true,
            ..consumer("q", "only")
        },
    );
    let out = c.call(2, consumer("q", "another"));
    assert_channel_closed(&out, 2, reply::ACCESS_REFUSED, (60, 20));
    // And an exclusive consumer is refused where there are others already.
    open_channel(&mut c, 3);
    c.declare_queue(3, "shared");
    c.consume(3, consumer("shared", "first"));
    let out = c.call(
        3,
        BasicConsume {
            exclusive: true,
            ..consumer("shared", "second")
        },
    );
    assert_channel_closed(&out, 3, reply::ACCESS_REFUSED, (60, 20));
}

#[tokio::test]
async fn consuming_from_a_missing_queue_is_404() {
    let mut c = open().await;
    open_channel(&mut c, 1);
    let out = c.call(1, consumer("missing", "c"));
    assert_channel_closed(&out, 1, reply::NOT_FOUND, (60, 20));
    open_channel(&mut c, 2);
    let out = c.call(2, get("missing", false));
    assert_channel_closed(&out, 2, reply::NOT_FOUND, (60, 70));
}

#[tokio::test]
async fn basic_cancel_stops_deliveries_and_is_answered_even_for_unknown_tags() {
    let mut c = with_queue().await;
    c.consume(1, consumer("q", "c1"));
    let out = c.call(
        1,
        BasicCancel {
            consumer_tag: short("c1"),
            nowait: false,
        },
    );
    assert!(
        matches!(&out[..], [(1, Method::BasicCancelOk(ok))] if ok.consumer_tag.as_bytes() == b"c1"),
        "{out:?}"
    );
    c.publish(1, "", "q", b"stays");
    assert!(c.take().is_empty());
    let out = c.call(
        1,
        BasicCancel {
            consumer_tag: short("never"),
            nowait: false,
        },
    );
    assert!(
        matches!(&out[..], [(1, Method::BasicCancelOk(_))]),
        "{out:?}"
    );
    // nowait: nothing comes back.
    let got = c.consume(1, consumer("q", "c2"));
    assert_eq!(delivered(&got), [(1, false, "stays".into())]);
    let out = c.call(
        1,
        BasicCancel {
            consumer_tag: short("c2"),
            nowait: true,
        },
    );
    assert!(out.is_empty(), "{out:?}");
    // The tag is free again; what the cancelled consumer got stays unacknowledged and
    // may still be acked.
    assert!(c.consume(1, consumer("q", "c2")).is_empty());
    assert!(c.ack(1, 1, false).is_empty());
    let q = c.conn.broker().queue("q").unwrap();
    assert_eq!((q.info().message_count, q.unsettled_count()), (0, 0));
}

#[tokio::test]
async fn nowait_consume_sends_no_consume_ok_but_delivers() {
    let mut c = with_queue().await;
    c.publish(1, "", "q", b"x");
    let got = c.request(
        1,
        BasicConsume {
            nowait: true,
            ..consumer("q", "c1")
        },
    );
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].deliver().consumer_tag.as_bytes(), b"c1");
}

#[tokio::test]
async fn deleting_a_queue_cancels_its_consumers_telling_clients_that_asked() {
    let services = services(ServerConfig::default());
    let mut notified = open_on(&services, &["consumer_cancel_notify"]).await;
    let mut silent = open_on(&services, &[]).await;
    open_channel(&mut notified, 1);
    open_channel(&mut notified, 2);
    open_channel(&mut silent, 1);
    notified.declare_queue(1, "q");
    notified.consume(1, consumer("q", "mine"));
    silent.consume(1, consumer("q", "theirs"));
    let out = notified.call(
        2,
        QueueDelete {
            queue: short("q"),
            ..Default::default()
        },
    );
    assert!(
        matches!(&out[..], [(2, Method::QueueDeleteOk(_)), (1, Method::BasicCancel(c))]
            if c.consumer_tag.as_bytes() == b"mine" && c.nowait),
        "{out:?}"
    );
    assert!(silent.take_output().is_empty());
    // The tags are free again: the consumers are gone from their channels.
    notified.declare_queue(1, "q");
    notified.consume(1, consumer("q", "mine"));
    silent.consume(1, consumer("q", "theirs"));
    // A client answering a cancel with basic.cancel-ok, late (for "mine" before it came
    // back) or unsolicited (for the live "theirs"), changes nothing and closes nothing.
    for (c, tag) in [(&mut notified, "mine"), (&mut silent, "theirs")] {
        let answer = ferry_amqp091::BasicCancelOk {
            consumer_tag: short(tag),
        };
        c.send(&encode(1, answer));
        assert!(c.take_output().is_empty());
    }
    // Both consumers still take their turns.
    notified.publish(1, "", "q", b"1");
    notified.publish(1, "", "q", b"2");
    assert_eq!(names_of(&notified.take()), ["basic.deliver"]);
    assert_eq!(names_of(&silent.take()), ["basic.deliver"]);
}

#[tokio::test]
async fn per_consumer_prefetch_limits_deliveries_and_acks_refill_it() {
    let mut c = with_queue().await;
    for body in [b"1", b"2", b"3", b"4", b"5", b"6"] {
        c.publish(1, "", "q", body);
    }
    qos(&mut c, 1, prefetch(2, false));
    let got = c.consume(1, consumer("q", "c1"));
    assert_eq!(tags(&got), [1, 2]);
    assert!(c.take().is_empty());
    // One ack, one more delivery.
    assert_eq!(bodies(&c.ack(1, 1, false)), [&b"3"[..]]);
    // A multiple ack of both outstanding frees two.
    assert_eq!(bodies(&c.ack(1, 3, true)), [&b"4"[..], &b"5"[..]]);
    // New messages wait for room too.
    c.publish(1, "", "q", b"7");
    assert!(c.take().is_empty());
    assert_eq!(bodies(&c.ack(1, 4, false)), [&b"6"[..]]);
    assert_eq!(bodies(&c.ack(1, 6, true)), [&b"7"[..]]);
}

#[tokio::test]
async fn prefetch_applies_to_consumers_started_after_it() {
    let mut c = with_queue().await;
    c.declare_queue(1, "r");
    for _ in 0..3 {
        c.publish(1, "", "q", b"q");
        c.publish(1, "", "r", b"r");
    }
    let got = c.consume(1, consumer("q", "unlimited"));
    assert_eq!(got.len(), 3);
    qos(&mut c, 1, prefetch(1, false));
    let got = c.consume(1, consumer("r", "limited"));
    assert_eq!(got.len(), 1);
}

#[tokio::test]
async fn global_prefetch_is_shared_by_the_channels_consumers() {
    let mut c = with_queue().await;
    c.declare_queue(1, "r");
    for _ in 0..5 {
        c.publish(1, "", "q", b"q");
        c.publish(1, "", "r", b"r");
    }
    qos(&mut c, 1, prefetch(3, true));
    let first = c.consume(1, consumer("q", "cq"));
    assert_eq!(bodies(&first), [&b"q"[..]; 3]);
    // The channel's budget is spent: the second consumer gets nothing yet.
    assert!(c.consume(1, consumer("r", "cr")).is_empty());
    // An ack frees one slot, which goes to the least loaded consumer.
    let got = c.ack(1, 1, false);
    assert_eq!(bodies(&got), [&b"r"[..]]);
    assert_eq!(got[0].deliver().consumer_tag.as_bytes(), b"cr");
    // Acking everything refills to three in all, never more.
    let got = c.ack(1, 0, true);
    assert_eq!(got.len(), 3);
}

#[tokio::test]
async fn no_ack_consumers_ignore_prefetch_and_their_tags_cannot_be_acked() {
    let mut c = with_queue().await;
    for _ in 0..4 {
        c.publish(1, "", "q", b"x");
    }
    qos(&mut c, 1, prefetch(1, false));
    let got = c.consume(
        1,
        BasicConsume {
            no_ack: true,
            ..consumer("q", "c1")
        },
    );
    assert_eq!(tags(&got), [1, 2, 3, 4]);
    let q = c.conn.broker().queue("q").unwrap();
    assert_eq!(q.info().message_count, 0);
    assert_eq!(c.conn.broker().memory_used(), 0, "settled on delivery");
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

/// No-ack deliveries are accepted on their queue together once the outbox drain that wrote
/// them ends.
#[tokio::test]
async fn no_ack_deliveries_are_accepted_when_the_drain_ends() {
    let mut c = with_queue().await;
    for _ in 0..3 {
        c.publish(1, "", "q", b"x");
    }
    c.send(&encode(
        1,
        BasicConsume {
            no_ack: true,
            ..consumer("q", "c1")
        },
    ));
    c.conn.handle_outbox(&mut Vec::new(), c.now);
    let q = c.conn.broker().queue("q").unwrap();
    assert_eq!((q.message_count(), q.unsettled_count()), (0, 0));
    assert_eq!(c.conn.broker().memory_used(), 0);
    assert_eq!(tags(&c.take()), [1, 2, 3]);
}

#[tokio::test]
async fn acks_of_unknown_tags_are_406_and_multiple_acks_settle_a_prefix() {
    let mut c = with_queue().await;
    for body in [b"1", b"2", b"3", b"4"] {
        c.publish(1, "", "q", body);
    }
    c.consume(1, consumer("q", "c1"));
    assert!(c.ack(1, 2, false).is_empty());
    // 1 and 3 settle, 2 is already gone, 4 stays.
    assert!(c.ack(1, 3, true).is_empty());
    let q = c.conn.broker().queue("q").unwrap();
    assert_eq!(q.unsettled_count(), 1);
    // Acking 3 again: unknown.
    c.send(&encode(
        1,
        BasicAck {
            delivery_tag: 3,
            multiple: false,
        },
    ));
    let out = methods(c.take_output());
    assert_channel_closed(&out, 1, reply::PRECONDITION_FAILED, (60, 80));
    let Some((_, Method::ChannelClose(cl))) = out.first() else {
        unreachable!()
    };
    assert!(cl
        .reply_text
        .as_bytes()
        .ends_with(b"unknown delivery tag 3"));
    c.call(1, ChannelCloseOk {});
    // The channel's end requeued 4.
    assert_eq!(q.info().message_count, 1);
}

#[tokio::test]
async fn a_multiple_ack_or_nack_naming_a_settled_tag_is_406_even_with_older_ones_outstanding() {
    for settle in [
        Method::from(BasicAck {
            delivery_tag: 2,
            multiple: true,
        }),
        BasicNack {
            delivery_tag: 2,
            multiple: true,
            requeue: true,
        }
        .into(),
    ] {
        let mut c = with_queue().await;
        for body in [b"1", b"2", b"3"] {
            c.publish(1, "", "q", body);
        }
        c.consume(1, consumer("q", "c1"));
        assert!(c.ack(1, 2, false).is_empty());
        let ids = (settle.class_id(), settle.method_id());
        let out = c.call(1, settle);
        assert_channel_closed(&out, 1, reply::PRECONDITION_FAILED, ids);
        // Tag 1 was not settled by it: the channel's end requeues 1 and 3.
        c.call(1, ChannelCloseOk {});
        let q = c.conn.broker().queue("q").unwrap();
        assert_eq!(q.info().message_count, 2);
    }
}

#[tokio::test]
async fn a_multiple_ack_with_nothing_below_it_is_406() {
    let mut c = with_queue().await;
    c.publish(1, "", "q", b"1");
    c.consume(1, consumer("q", "c1"));
    c.ack(1, 1, false);
    c.send(&encode(
        1,
        BasicAck {
            delivery_tag: 1,
            multiple: true,
        },
    ));
    let out = methods(c.take_output());
    assert_channel_closed(&out, 1, reply::PRECONDITION_FAILED, (60, 80));
}

#[tokio::test]
async fn nack_and_reject_with_requeue_redeliver_with_the_redelivered_flag() {
    let mut c = with_queue().await;
    c.publish(1, "", "q", b"a");
    c.publish(1, "", "q", b"b");
    qos(&mut c, 1, prefetch(2, false));
    let got = c.consume(1, consumer("q", "c1"));
    assert_eq!(
        delivered(&got),
        [(1, false, "a".into()), (2, false, "b".into())]
    );
    // Both back at the head, in order, marked redelivered.
    let got = c.request(
        1,
        BasicNack {
            delivery_tag: 2,
            multiple: true,
            requeue: true,
        },
    );
    assert_eq!(
        delivered(&got),
        [(3, true, "a".into()), (4, true, "b".into())]
    );
    let got = c.request(
        1,
        BasicReject {
            delivery_tag: 4,
            requeue: true,
        },
    );
    assert_eq!(delivered(&got), [(5, true, "b".into())]);
    // Without requeue and without a dead-letter exchange they are dropped.
    c.request(
        1,
        BasicReject {
            delivery_tag: 3,
            requeue: false,
        },
    );
    c.request(
        1,
        BasicNack {
            delivery_tag: 5,
            multiple: false,
            requeue: false,
        },
    );
    let q = c.conn.broker().queue("q").unwrap();
    assert_eq!((q.info().message_count, q.unsettled_count()), (0, 0));
    assert_eq!(c.conn.broker().memory_used(), 0);
}

fn text(v: Option<&FieldValue>) -> &[u8] {
    match v {
        Some(FieldValue::LongStr(s)) => s.as_bytes(),
        other => panic!("not a long string: {other:?}"),
    }
}

#[tokio::test]
async fn rejected_messages_are_dead_lettered_with_x_death_headers() {
    let mut c = open().await;
    open_channel(&mut c, 1);
    let dlx = ExchangeDeclare {
        exchange: short("dlx"),
        kind: short("fanout"),
        ..Default::default()
    };
    assert!(matches!(
        &c.call(1, dlx)[..],
        [(1, Method::ExchangeDeclareOk(_))]
    ));
    c.declare_queue(1, "dead");
    let bound = c.call(
        1,
        QueueBind {
            queue: short("dead"),
            exchange: short("dlx"),
            ..Default::default()
        },
    );
    assert!(matches!(&bound[..], [(1, Method::QueueBindOk(_))]));
    c.declare(
        1,
        QueueDeclare {
            arguments: table(&[("x-dead-letter-exchange", long("dlx"))]),
            ..queue("work")
        },
    );
    let props = BasicProperties {
        message_id: Some(short("m-1")),
        expiration: Some(short("60000")),
        headers: Some(table(&[("app", FieldValue::I32(1))])),
        ..Default::default()
    };
    c.publish_with(1, to("", "work"), props, b"job");
    let got = c.consume(1, consumer("work", "worker"));
    assert_eq!(tags(&got), [1]);
    let after = c.request(
        1,
        BasicNack {
            delivery_tag: 1,
            multiple: false,
            requeue: false,
        },
    );
    assert!(after.is_empty(), "{after:?}");
    let got = c.consume(1, consumer("dead", "undertaker"));
    let [d] = &got[..] else {
        panic!("{got:?}");
    };
    assert_eq!(d.body(), b"job");
    assert_eq!(d.deliver().exchange.as_bytes(), b"dlx");
    assert_eq!(d.deliver().routing_key.as_bytes(), b"work");
    let props = d.props();
    assert_eq!(props.message_id, Some(short("m-1")));
    assert_eq!(props.expiration, None, "dead letters lose their expiration");
    let headers = props.headers.as_ref().expect("headers");
    assert_eq!(headers.get("app"), Some(&FieldValue::I32(1)));
    let Some(FieldValue::Array(deaths)) = headers.get("x-death") else {
        panic!("no x-death: {headers:?}");
    };
    let [FieldValue::Table(death)] = &deaths[..] else {
        panic!("{deaths:?}");
    };
    assert_eq!(death.get("count"), Some(&FieldValue::I64(1)));
    assert_eq!(text(death.get("queue")), b"work");
    assert_eq!(text(death.get("reason")), b"rejected");
    assert_eq!(text(death.get("exchange")), b"");
    assert_eq!(text(death.get("original-expiration")), b"60000");
    assert_eq!(
        death.get("routing-keys"),
        Some(&FieldValue::Array(vec![long("work")]))
    );
    assert!(matches!(death.get("time"), Some(FieldValue::Timestamp(t)) if *t > 0));
    assert_eq!(text(headers.get("x-first-death-queue")), b"work");
    assert_eq!(text(headers.get("x-first-death-reason")), b"rejected");
    assert_eq!(text(headers.get("x-first-death-exchange")), b"");
    assert_eq!(text(headers.get("x-last-death-queue")), b"work");
    // basic.reject without requeue dead-letters the same way; the count goes up.
    c.publish_with(
        1,
        to("", "work"),
        BasicProperties {
            headers: props.headers.clone(),
            ..Default::default()
        },
        b"again",
    );
    let got = c.take();
    let tag = got[0].deliver().delivery_tag;
    let got = c.request(
        1,
        BasicReject {
            delivery_tag: tag,
            requeue: false,
        },
    );
    let Some(FieldValue::Array(deaths)) = got[0].props().headers.as_ref().unwrap().get("x-death")
    else {
        panic!("{got:?}");
    };
    let [FieldValue::Table(death)] = &deaths[..] else {
        panic!("{deaths:?}");
    };
    assert_eq!(death.get("count"), Some(&FieldValue::I64(2)));
}

#[tokio::test]
async fn a_full_queue_dead_letters_its_head_as_maxlen_under_its_dead_letter_routing_key() {
    let mut c = open().await;
    open_channel(&mut c, 1);
    c.declare_queue(1, "overflow");
    c.call(
        1,
        QueueBind {
            queue: short("overflow"),
            exchange: short("amq.direct"),
            routing_key: short("spill"),
            ..Default::default()
        },
    );
    c.declare(
        1,
        QueueDeclare {
            arguments: table(&[
                ("x-max-length", FieldValue::I32(2)),
                ("x-dead-letter-exchange", long("amq.direct")),
                ("x-dead-letter-routing-key", long("spill")),
            ]),
            ..queue("bounded")
        },
    );
    for body in [b"1", b"2", b"3"] {
        c.publish(1, "", "bounded", body);
    }
    let got = c.request(1, get("overflow", true));
    let Method::BasicGetOk(g) = &got[0].method else {
        panic!("{got:?}");
    };
    assert_eq!(
        (g.exchange.as_bytes(), g.routing_key.as_bytes()),
        (&b"amq.direct"[..], &b"spill"[..])
    );
    assert_eq!(got[0].body(), b"1");
    let headers = got[0].props().headers.as_ref().expect("headers");
    let Some(FieldValue::Array(deaths)) = headers.get("x-death") else {
        panic!("{headers:?}");
    };
    let [FieldValue::Table(death)] = &deaths[..] else {
        panic!("{deaths:?}");
    };
    assert_eq!(text(death.get("reason")), b"maxlen");
    assert_eq!(text(death.get("queue")), b"bounded");
    assert_eq!(
        death.get("routing-keys"),
        Some(&FieldValue::Array(vec![long("bounded")]))
    );
    let q = c.conn.broker().queue("bounded").unwrap();
    assert_eq!(q.info().message_count, 2);
}

#[tokio::test]
async fn basic_get_returns_one_message_with_the_count_left_or_get_empty() {
    let mut c = with_queue().await;
    let got = c.request(1, get("q", false));
    assert!(
        matches!(
            &got[..],
            [Incoming {
                channel: 1,
                method: Method::BasicGetEmpty(_),
                content: None
            }]
        ),
        "{got:?}"
    );
    for body in [b"1", b"2", b"3"] {
        c.publish(1, "", "q", body);
    }
    let got = c.request(1, get("q", false));
    let Method::BasicGetOk(g) = &got[0].method else {
        panic!("{got:?}");
    };
    assert_eq!(
        (g.delivery_tag, g.redelivered, g.message_count),
        (1, false, 2)
    );
    assert_eq!(g.exchange.as_bytes(), b"");
    assert_eq!(g.routing_key.as_bytes(), b"q");
    assert_eq!(got[0].body(), b"1");
    // no-ack: gone at once, but the tag is still counted.
    let got = c.request(1, get("q", true));
    let Method::BasicGetOk(g) = &got[0].method else {
        panic!("{got:?}");
    };
    assert_eq!((g.delivery_tag, g.message_count), (2, 1));
    // The first is unacknowledged; requeueing it puts it back at the head.
    c.request(
        1,
        BasicReject {
            delivery_tag: 1,
            requeue: true,
        },
    );
    let got = c.request(1, get("", false));
    let Method::BasicGetOk(g) = &got[0].method else {
        panic!("{got:?}");
    };
    assert_eq!(
        (g.delivery_tag, g.redelivered, g.message_count),
        (3, true, 1)
    );
    assert_eq!(got[0].body(), b"1");
    assert!(c.ack(1, 3, false).is_empty());
    let q = c.conn.broker().queue("q").unwrap();
    assert_eq!((q.info().message_count, q.unsettled_count()), (1, 0));
}

#[tokio::test]
async fn basic_recover_redelivers_everything_unacknowledged() {
    let mut c = with_queue().await;
    for body in [b"1", b"2", b"3"] {
        c.publish(1, "", "q", body);
    }
    let got = c.consume(1, consumer("q", "c1"));
    assert_eq!(tags(&got), [1, 2, 3]);
    c.ack(1, 2, false);
    let got = c.request(1, BasicRecover { requeue: true });
    assert!(
        matches!(got[0].method, Method::BasicRecoverOk(_)),
        "{got:?}"
    );
    assert_eq!(
        delivered(&got[1..]),
        [(4, true, "1".into()), (5, true, "3".into())]
    );
    // recover-async: the same without a reply.
    let got = c.request(1, BasicRecoverAsync { requeue: true });
    assert_eq!(
        delivered(&got),
        [(6, true, "1".into()), (7, true, "3".into())]
    );
    // The old tags are gone.
    c.send(&encode(
        1,
        BasicAck {
            delivery_tag: 4,
            multiple: false,
        },
    ));
    let out = methods(c.take_output());
    assert_channel_closed(&out, 1, reply::PRECONDITION_FAILED, (60, 80));
}

#[tokio::test]
async fn recover_without_requeue_is_not_implemented_540_as_in_rabbitmq() {
    for recover in [
        Method::from(BasicRecover { requeue: false }),
        BasicRecoverAsync { requeue: false }.into(),
    ] {
        let mut c = with_queue().await;
        c.publish(1, "", "q", b"1");
        c.consume(1, consumer("q", "c1"));
        let ids = (recover.class_id(), recover.method_id());
        let out = c.call(1, recover);
        assert_connection_closed(&c, &out, reply::NOT_IMPLEMENTED);
        let Some((_, Method::ConnectionClose(cl))) = out.last() else {
            unreachable!()
        };
        assert_eq!((cl.class_id, cl.method_id), ids);
        assert!(
            cl.reply_text.as_bytes().ends_with(b"requeue=false"),
            "{cl:?}"
        );
    }
}

#[tokio::test]
async fn recover_refills_the_prefetch_window() {
    let mut c = with_queue().await;
    for body in [b"1", b"2", b"3"] {
        c.publish(1, "", "q", body);
    }
    qos(&mut c, 1, prefetch(2, false));
    assert_eq!(tags(&c.consume(1, consumer("q", "c1"))), [1, 2]);
    let got = c.request(1, BasicRecoverAsync { requeue: true });
    assert_eq!(
        delivered(&got),
        [(3, true, "1".into()), (4, true, "2".into())]
    );
}

#[tokio::test]
async fn closing_a_channel_requeues_its_unacknowledged_deliveries_for_other_consumers() {
    let mut c = with_queue().await;
    open_channel(&mut c, 2);
    c.publish(1, "", "q", b"a");
    c.publish(1, "", "q", b"b");
    c.consume(1, consumer("q", "first"));
    c.ack(1, 1, false);
    let other = c.consume(2, consumer("q", "second"));
    assert!(other.is_empty());
    let got = c.request(1, ChannelClose::default());
    assert!(
        matches!(got[0].method, Method::ChannelCloseOk(_)),
        "{got:?}"
    );
    assert_eq!(got[1].channel, 2);
    assert_eq!(delivered(&got[1..]), [(1, true, "b".into())]);
}

#[tokio::test]
async fn deliveries_racing_a_cancel_or_a_channel_error_go_back_to_the_queue_unsent() {
    let mut c = with_queue().await;
    open_channel(&mut c, 2);
    c.consume(1, consumer("q", "c1"));
    // The publish puts a delivery in the connection's outbox; the cancel, in the same read,
    // comes before the connection takes it.
    let mut bytes = publish_frames(1, to("", "q"), BasicProperties::default(), b"a", 4096);
    bytes.extend_from_slice(&encode(
        1,
        BasicCancel {
            consumer_tag: short("c1"),
            nowait: false,
        },
    ));
    c.send(&bytes);
    let got = c.take();
    assert_eq!(names_of(&got), ["basic.cancel-ok"]);
    // It was never sent: the next consumer gets it as new, under the channel's first tag.
    let got = c.consume(1, consumer("q", "c2"));
    assert_eq!(delivered(&got), [(1, false, "a".into())]);
    c.ack(1, 1, false);
    // The same with a channel error: the channel is closing when the delivery is taken.
    let mut bytes = publish_frames(1, to("", "q"), BasicProperties::default(), b"b", 4096);
    bytes.extend_from_slice(&publish_frames(
        1,
        to("missing", "q"),
        BasicProperties::default(),
        b"x",
        4096,
    ));
    c.send(&bytes);
    let out = methods(c.take_output());
    assert_channel_closed(&out, 1, reply::NOT_FOUND, (60, 40));
    // It was not sent either, so it is not redelivered.
    let got = c.consume(2, consumer("q", "c3"));
    assert_eq!(delivered(&got), [(1, false, "b".into())]);
}

fn names_of(got: &[Incoming]) -> Vec<&'static str> {
    got.iter().map(|i| i.method.name()).collect()
}

#[tokio::test]
async fn a_channel_publishing_to_many_exchanges_or_a_redeclared_one_routes_right() {
    let mut c = with_queue().await;
    // More exchanges than a channel keeps resolved.
    for i in 0..70u32 {
        let name = ShortStr::new(format!("fan-{i}")).unwrap();
        let declare = ExchangeDeclare {
            exchange: name.clone(),
            kind: short("fanout"),
            ..Default::default()
        };
        c.call(1, declare);
        let bind = QueueBind {
            queue: short("q"),
            exchange: name.clone(),
            ..Default::default()
        };
        c.call(1, bind);
        let publish = BasicPublish {
            exchange: name,
            ..Default::default()
        };
        c.publish_with(1, publish, BasicProperties::default(), b"x");
    }
    let q = c.conn.broker().queue("q").unwrap();
    assert_eq!(q.info().message_count, 70);
    // An exchange deleted and declared again, elsewhere: the channel uses the new one.
    c.declare_queue(1, "r");
    c.publish(1, "fan-0", "", b"old");
    c.call(
        1,
        ferry_amqp091::ExchangeDelete {
            exchange: short("fan-0"),
            ..Default::default()
        },
    );
    open_channel(&mut c, 2);
    c.call(
        2,
        ExchangeDeclare {
            exchange: short("fan-0"),
            kind: short("fanout"),
            ..Default::default()
        },
    );
    c.call(
        2,
        QueueBind {
            queue: short("r"),
            exchange: short("fan-0"),
            ..Default::default()
        },
    );
    c.publish(1, "fan-0", "", b"new");
    assert_eq!(q.info().message_count, 71);
    let got = c.request(1, get("r", true));
    assert_eq!(got[0].body(), b"new");
}

#[tokio::test]
async fn channel_flow_pauses_and_resumes_deliveries() {
    let mut c = with_queue().await;
    c.consume(1, consumer("q", "c1"));
    let out = c.call(1, ChannelFlow { active: false });
    assert!(
        matches!(&out[..], [(1, Method::ChannelFlowOk(f))] if !f.active),
        "{out:?}"
    );
    c.publish(1, "", "q", b"a");
    c.publish(1, "", "q", b"b");
    assert!(c.take().is_empty());
    // Asking again changes nothing.
    assert_eq!(c.call(1, ChannelFlow { active: false }).len(), 1);
    let got = c.request(1, ChannelFlow { active: true });
    assert!(
        matches!(&got[0].method, Method::ChannelFlowOk(f) if f.active),
        "{got:?}"
    );
    assert_eq!(bodies(&got[1..]), [&b"a"[..], &b"b"[..]]);
}

#[tokio::test]
async fn channel_flow_keeps_the_prefetch_accounting() {
    let mut c = with_queue().await;
    for body in [b"1", b"2", b"3", b"4"] {
        c.publish(1, "", "q", body);
    }
    qos(&mut c, 1, prefetch(2, false));
    assert_eq!(tags(&c.consume(1, consumer("q", "c1"))), [1, 2]);
    c.call(1, ChannelFlow { active: false });
    assert!(c.ack(1, 1, false).is_empty());
    // Back on: one slot is free, not two.
    let got = c.request(1, ChannelFlow { active: true });
    assert_eq!(bodies(&got[1..]), [&b"3"[..]]);
}

#[tokio::test]
async fn a_dead_letter_exchange_of_the_headers_kind_routes_by_the_publishers_headers() {
    let mut c = open().await;
    open_channel(&mut c, 1);
    let dlx = ExchangeDeclare {
        exchange: short("dlx-headers"),
        kind: short("headers"),
        ..Default::default()
    };
    assert!(matches!(
        &c.call(1, dlx)[..],
        [(1, Method::ExchangeDeclareOk(_))]
    ));
    c.declare_queue(1, "red-deaths");
    let bound = c.call(
        1,
        QueueBind {
            queue: short("red-deaths"),
            exchange: short("dlx-headers"),
            arguments: table(&[("x-match", long("all")), ("colour", long("red"))]),
            ..Default::default()
        },
    );
    assert!(matches!(&bound[..], [(1, Method::QueueBindOk(_))]));
    c.declare(
        1,
        QueueDeclare {
            arguments: table(&[("x-dead-letter-exchange", long("dlx-headers"))]),
            ..queue("jobs")
        },
    );
    // Published through the default exchange, which needs no headers to route; the queue's
    // dead letter exchange does, when the message dies.
    let props = BasicProperties {
        headers: Some(table(&[("colour", long("red"))])),
        ..Default::default()
    };
    c.publish_with(1, to("", "jobs"), props, b"job");
    let got = c.consume(1, consumer("jobs", "worker"));
    assert_eq!(tags(&got), [1]);
    let nack = BasicNack {
        delivery_tag: 1,
        multiple: false,
        requeue: false,
    };
    assert!(c.request(1, nack).is_empty());
    let got = c.consume(1, consumer("red-deaths", "undertaker"));
    assert_eq!(bodies(&got), [Bytes::from_static(b"job")]);
}

fn with_colour(colour: &'static str) -> BasicProperties {
    let mut headers = FieldTable::new();
    headers.push(
        ShortStr::from_static("colour"),
        FieldValue::LongStr(ferry_amqp091::LongStr::from_static(colour)),
    );
    BasicProperties {
        headers: Some(headers),
        ..BasicProperties::default()
    }
}

fn selecting(tag: &'static str, selector: &'static str) -> BasicConsume {
    let mut arguments = FieldTable::new();
    arguments.push(
        ShortStr::from_static("x-filter-jms-selector"),
        FieldValue::LongStr(ferry_amqp091::LongStr::from_static(selector)),
    );
    BasicConsume {
        arguments,
        ..consumer("q", tag)
    }
}

/// The Qpid JMS 0-x client sends its selector with basic.consume too.
#[tokio::test]
async fn a_consumer_with_a_jms_selector_gets_only_its_matches() {
    let mut c = with_queue().await;
    for colour in ["red", "blue", "red"] {
        c.publish_with(1, to("", "q"), with_colour(colour), colour.as_bytes());
    }
    let got = c.consume(1, selecting("reds", "colour = 'red'"));
    assert_eq!(
        delivered(&got),
        [(1, false, "red".into()), (2, false, "red".into())]
    );
    let q = c.conn.broker().queue("q").unwrap();
    assert_eq!(q.info().message_count, 1, "blue stays");
    open_channel(&mut c, 2);
    let out = c.call(2, selecting("bad", "colour = 'red"));
    assert_channel_closed(&out, 2, reply::PRECONDITION_FAILED, (60, 20));
}

/// A channel 1 with queue "q" declared with `arguments`.
async fn with_queue_args(arguments: FieldTable) -> Client {
    let mut c = open().await;
    open_channel(&mut c, 1);
    c.declare(
        1,
        QueueDeclare {
            durable: true,
            arguments,
            ..queue("q")
        },
    );
    c
}

/// Cancels consumer "c1" on channel 1, puts its delivery `tag` back on "q" and gets it.
fn cancel_requeue_and_get(c: &mut Client, tag: u64) -> Vec<Incoming> {
    c.call(
        1,
        BasicCancel {
            consumer_tag: short("c1"),
            nowait: false,
        },
    );
    c.request(
        1,
        BasicNack {
            delivery_tag: tag,
            multiple: false,
            requeue: true,
        },
    );
    c.request(1, get("q", true))
}

#[tokio::test]
async fn a_message_that_came_back_to_a_classic_queue_carries_no_count() {
    // RabbitMQ's classic queues keep no count of returns, and tell consumers none.
    let mut c = with_queue().await;
    c.publish(1, "", "q", b"a");
    qos(&mut c, 1, prefetch(1, false));
    let got = c.consume(1, consumer("q", "c1"));
    let nack = BasicNack {
        delivery_tag: got[0].deliver().delivery_tag,
        multiple: false,
        requeue: true,
    };
    let got = c.request(1, nack);
    let [d] = &got[..] else {
        panic!("{got:?}");
    };
    assert!(d.deliver().redelivered);
    assert_eq!(d.props().headers, None, "no x-delivery-count");
    // Nor does a get.
    let got = cancel_requeue_and_get(&mut c, d.deliver().delivery_tag);
    assert_eq!(got[0].props().headers, None, "no x-delivery-count on a get");
}

#[tokio::test]
async fn a_message_that_came_back_carries_x_delivery_count() {
    // A quorum queue's consumers hear the count, as RabbitMQ's, with its delivery limit
    // turned off too; so do those of any queue with a limit (pika's test_queue_features).
    let mut c = with_queue_args(table(&[
        ("x-queue-type", long("quorum")),
        ("x-delivery-limit", FieldValue::I64(-1)),
    ]))
    .await;
    let props = BasicProperties {
        message_id: Some(short("id-1")),
        headers: Some(table(&[("n", FieldValue::I32(7))])),
        ..Default::default()
    };
    c.publish_with(1, to("", "q"), props.clone(), b"a");
    qos(&mut c, 1, prefetch(1, false));
    let got = c.consume(1, consumer("q", "c1"));
    assert_eq!(got[0].props(), &props, "a first delivery is as published");
    // Each requeue counts, as in RabbitMQ's quorum queues; the rest stays as published.
    let mut tag = 1;
    for count in 1..=2 {
        let nack = BasicNack {
            delivery_tag: tag,
            multiple: false,
            requeue: true,
        };
        let got = c.request(1, nack);
        let [d] = &got[..] else {
            panic!("{got:?}");
        };
        tag = d.deliver().delivery_tag;
        let mut expected = props.clone();
        let headers = expected.headers.as_mut().unwrap();
        headers.insert(short("x-delivery-count"), FieldValue::I64(count));
        assert_eq!(d.props(), &expected, "requeued {count} times");
    }
    // A get says so too.
    let got = cancel_requeue_and_get(&mut c, tag);
    let count = got[0]
        .props()
        .headers
        .as_ref()
        .unwrap()
        .get("x-delivery-count");
    assert_eq!(count, Some(&FieldValue::I64(3)));
}
