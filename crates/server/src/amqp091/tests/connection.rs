//! Connection-level behaviour: the handshake (PLAIN, AMQPLAIN, refusals, tune), methods on
//! channel 0, frame errors, the end of a connection and what it releases, resource alarms.

use std::time::Duration;

use bytes::BytesMut;
use ferry_amqp091::{
    reply, write_frame, BasicGet, BasicProperties, ChannelOpen, ConnectionBlocked, ConnectionClose,
    ConnectionCloseOk, ConnectionOpen, ConnectionUpdateSecret, ExchangeBound, FieldTable,
    FieldValue, FrameType, LongStr, Method, QueueDeclare,
};
use ferry_core::{BrokerConfig, Watermarks};

use super::*;
use crate::config::AuthMode;
use crate::shell::testing::services_with;

/// A broker that checks passwords (the built-in guest/guest), refusing without delay.
fn verifying() -> ServerConfig {
    ServerConfig {
        auth: AuthMode::Required,
        auth_failure_delay: Duration::ZERO,
        ..ServerConfig::default()
    }
}

/// RabbitMQ's AMQPLAIN response: a field table's entries without the table's length.
fn amqplain(login: &'static str, password: &'static str) -> Vec<u8> {
    let mut t = FieldTable::new();
    t.push(short("LOGIN"), long(login));
    t.push(short("PASSWORD"), long(password));
    let mut out = BytesMut::new();
    t.encode(&mut out);
    out[4..].to_vec()
}

/// A fresh connection that has sent connection.start, not yet answered.
fn fresh(config: ServerConfig) -> Client {
    let services = services(config);
    let mut c = Wire::new(|now| connection(services, peer(), now));
    c.take_output();
    c
}

/// A connection past start-ok and tune, waiting for tune-ok.
async fn at_tune(config: ServerConfig) -> Client {
    let mut c = fresh(config);
    c.send(&encode(
        0,
        start_ok("PLAIN", b"\0guest\0guest".to_vec(), &[]),
    ));
    c.finish_auth().await;
    let tune = methods(c.take_output());
    assert!(
        matches!(&tune[..], [(0, Method::ConnectionTune(_))]),
        "{tune:?}"
    );
    c
}

#[tokio::test]
async fn connection_start_offers_amqplain_and_announces_capabilities() {
    let services = services(ServerConfig::default());
    let mut c = Wire::new(|now| connection(services, peer(), now));
    let start = methods(c.take_output());
    let [(0, Method::ConnectionStart(s))] = &start[..] else {
        panic!("{start:?}");
    };
    assert_eq!((s.version_major, s.version_minor), (0, 9));
    let mechanisms = String::from_utf8_lossy(s.mechanisms.as_bytes()).into_owned();
    assert!(
        mechanisms.split(' ').any(|m| m == "AMQPLAIN"),
        "{mechanisms}"
    );
    let Some(FieldValue::Table(caps)) = s.server_properties.get("capabilities") else {
        panic!("no capabilities: {s:?}");
    };
    for cap in [
        "publisher_confirms",
        "basic.nack",
        "consumer_cancel_notify",
        "connection.blocked",
        "authentication_failure_close",
        "per_consumer_qos",
        "exchange_exchange_bindings",
    ] {
        assert_eq!(caps.get(cap), Some(&FieldValue::Bool(true)), "{cap}");
    }
}

#[tokio::test]
async fn amqplain_logs_in_as_plain_does() {
    let mut c = fresh(verifying());
    c.send(&encode(
        0,
        start_ok("AMQPLAIN", amqplain("guest", "guest"), &[]),
    ));
    assert_eq!(c.conn.shell.phase, Phase::Authenticating);
    c.finish_auth().await;
    let tune = methods(c.take_output());
    let [(0, Method::ConnectionTune(t))] = &tune[..] else {
        panic!("not logged in: {tune:?}");
    };
    assert_eq!(
        (t.channel_max, t.frame_max, t.heartbeat),
        (2047, 131_072, 120)
    );
    c.send(&encode(0, tune_ok(0, 0)));
    let ok = c.call(0, ConnectionOpen::default());
    assert!(
        matches!(&ok[..], [(0, Method::ConnectionOpenOk(_))]),
        "{ok:?}"
    );
    assert_eq!(c.conn.shell.login.user(), "guest");
    // The client properties reach management.
    let listed = c.conn.broker().connections().list();
    assert!(listed[0]
        .meta
        .client_properties
        .contains(&("product".to_owned(), "unit-test".to_owned())));
}

#[tokio::test]
async fn a_refused_login_is_403_for_clients_with_authentication_failure_close() {
    for (mechanism, response) in [
        ("AMQPLAIN", amqplain("guest", "wrong")),
        ("PLAIN", b"\0guest\0wrong".to_vec()),
        ("AMQPLAIN", b"not a table".to_vec()),
    ] {
        let mut c = fresh(verifying());
        c.send(&encode(0, start_ok(mechanism, response, &[])));
        c.finish_auth().await;
        let out = methods(c.take_output());
        let [(0, Method::ConnectionClose(cl))] = &out[..] else {
            panic!("{mechanism}: {out:?}");
        };
        assert_eq!(cl.reply_code, reply::ACCESS_REFUSED);
        let text = String::from_utf8_lossy(cl.reply_text.as_bytes()).into_owned();
        assert!(
            text.starts_with("ACCESS_REFUSED - Login was refused using authentication mechanism")
                && text.contains(mechanism),
            "{text}"
        );
        c.call(0, ConnectionCloseOk {});
        assert!(c.conn.is_finished());
    }
}

#[tokio::test]
async fn a_refused_login_just_ends_the_connection_for_older_clients() {
    let mut c = fresh(verifying());
    let mut refused = start_ok("PLAIN", b"\0guest\0wrong".to_vec(), &[]);
    refused.client_properties = FieldTable::new();
    c.send(&encode(0, refused));
    c.finish_auth().await;
    // The 0-9-1 spec's rule: no connection.close, the socket just closes.
    assert!(c.take_output().is_empty());
    assert!(c.conn.is_finished());
}

#[tokio::test]
async fn scram_challenges_with_connection_secure_and_a_wrong_proof_is_403() {
    let mut c = fresh(verifying());
    c.send(&encode(
        0,
        start_ok("SCRAM-SHA-256", b"n,,n=guest,r=clientnonce".to_vec(), &[]),
    ));
    c.finish_auth().await;
    let out = methods(c.take_output());
    let [(0, Method::ConnectionSecure(secure))] = &out[..] else {
        panic!("{out:?}");
    };
    let challenge = String::from_utf8(secure.challenge.as_bytes().to_vec()).unwrap();
    // server-first: r=<our nonce and the server's>,s=<salt>,i=<iterations>
    let nonce = challenge
        .split(',')
        .find_map(|f| f.strip_prefix("r="))
        .expect("a nonce");
    assert!(nonce.starts_with("clientnonce") && nonce.len() > "clientnonce".len());
    assert!(
        challenge.contains(",s=") && challenge.contains(",i="),
        "{challenge}"
    );
    assert_eq!(c.conn.shell.phase, Phase::AwaitSecureOk);
    // A client-final whose proof is not the password's.
    let proof = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=";
    let response = format!("c=biws,r={nonce},p={proof}");
    c.send(&encode(
        0,
        ferry_amqp091::ConnectionSecureOk {
            response: LongStr::new(response).unwrap(),
        },
    ));
    assert_eq!(c.conn.shell.phase, Phase::Authenticating);
    c.finish_auth().await;
    let out = methods(c.take_output());
    assert_connection_closed(&c, &out, reply::ACCESS_REFUSED);
}

#[tokio::test]
async fn an_unknown_mechanism_is_refused() {
    let mut c = fresh(verifying());
    c.send(&encode(0, start_ok("CRAM-MD5", b"x".to_vec(), &[])));
    c.finish_auth().await;
    let out = methods(c.take_output());
    assert!(
        out.iter().any(connection_close(reply::ACCESS_REFUSED)),
        "{out:?}"
    );
}

#[tokio::test]
async fn tune_ok_outside_the_offered_frame_max_is_530() {
    for frame_max in [131_073, 4095, 512] {
        let mut c = at_tune(ServerConfig::default()).await;
        let out = c.call(0, tune_ok(frame_max, 0));
        assert_connection_closed(&c, &out, reply::NOT_ALLOWED);
        let Some((_, Method::ConnectionClose(cl))) = out.last() else {
            unreachable!()
        };
        assert_eq!((cl.class_id, cl.method_id), (10, 31), "{frame_max}");
    }
}

#[tokio::test]
async fn tune_ok_zero_takes_the_offer_and_heartbeats_are_capped_at_the_maximum() {
    let config = ServerConfig {
        heartbeat_max: 10,
        ..ServerConfig::default()
    };
    let mut c = at_tune(config).await;
    // frame_max 0: "no limit" from the client, so ours; heartbeat 600 s: too long.
    c.send(&encode(0, tune_ok(0, 600)));
    let ok = c.call(0, ConnectionOpen::default());
    assert!(matches!(&ok[..], [(0, Method::ConnectionOpenOk(_))]));
    assert_eq!(c.conn.protocol.frame_max, 131_072);
    // Heartbeats go out every half of the capped ten seconds.
    assert_eq!(c.conn.poll_timeout(), Some(c.now + 5 * SECOND));
    let listed = c.conn.broker().connections().list();
    assert_eq!(listed[0].meta.heartbeat, 10);
}

#[tokio::test]
async fn a_channel_above_the_negotiated_channel_max_is_530() {
    let services = services(ServerConfig::default());
    let tune = ConnectionTuneOk {
        channel_max: 2,
        frame_max: 65535,
        heartbeat: 0,
    };
    let mut c = handshake(services, &[], tune).await;
    open_channel(&mut c, 2);
    let out = c.call(3, ChannelOpen::default());
    assert_connection_closed(&c, &out, reply::NOT_ALLOWED);
    let Some((_, Method::ConnectionClose(cl))) = out.last() else {
        unreachable!()
    };
    assert_eq!((cl.class_id, cl.method_id), (20, 10));
}

#[tokio::test]
async fn a_second_channel_open_is_a_channel_error_504() {
    let mut c = open().await;
    open_channel(&mut c, 1);
    let out = c.call(1, ChannelOpen::default());
    assert_connection_closed(&c, &out, reply::CHANNEL_ERROR);
}

#[tokio::test]
async fn channel_frames_before_connection_open_are_504() {
    let mut c = at_tune(ServerConfig::default()).await;
    c.send(&encode(0, tune_ok(65535, 0)));
    let out = c.call(1, ChannelOpen::default());
    assert_connection_closed(&c, &out, reply::CHANNEL_ERROR);
}

#[tokio::test]
async fn the_one_virtual_host_is_slash_and_others_are_refused_with_530_as_in_rabbitmq() {
    let open = |vhost: &'static str| ConnectionOpen {
        virtual_host: short(vhost),
        ..ConnectionOpen::default()
    };
    for vhost in ["/", ""] {
        let mut c = at_tune(ServerConfig::default()).await;
        c.send(&encode(0, tune_ok(65535, 0)));
        let out = c.call(0, open(vhost));
        assert!(
            matches!(&out[..], [(0, Method::ConnectionOpenOk(_))]),
            "{vhost:?}: {out:?}"
        );
    }
    let mut c = at_tune(ServerConfig::default()).await;
    c.send(&encode(0, tune_ok(65535, 0)));
    let out = c.call(0, open("/prod"));
    assert_connection_closed(&c, &out, reply::NOT_ALLOWED);
    let Some((_, Method::ConnectionClose(cl))) = out.last() else {
        unreachable!()
    };
    assert_eq!(cl.reply_text, "NOT_ALLOWED - vhost /prod not found");
    assert!(c.conn.broker().connections().list().is_empty());
}

#[tokio::test]
async fn a_method_out_of_turn_in_the_handshake_is_504_as_in_rabbitmq() {
    let mut c = fresh(ServerConfig::default());
    let out = c.call(0, ConnectionOpen::default());
    assert_connection_closed(&c, &out, reply::CHANNEL_ERROR);
    let Some((_, Method::ConnectionClose(cl))) = out.last() else {
        unreachable!()
    };
    assert_eq!((cl.class_id, cl.method_id), (10, 40));
}

#[tokio::test]
async fn unexpected_methods_on_channel_0_are_504_as_in_rabbitmq() {
    let mut c = open().await;
    let out = c.call(0, QueueDeclare::default());
    assert_connection_closed(&c, &out, reply::CHANNEL_ERROR);
    let Some((_, Method::ConnectionClose(cl))) = out.last() else {
        unreachable!()
    };
    assert_eq!((cl.class_id, cl.method_id), (50, 10));
    // A handshake method once the connection is open, too.
    let mut c = open().await;
    let out = c.call(0, tune_ok(65535, 0));
    assert_connection_closed(&c, &out, reply::CHANNEL_ERROR);
}

#[tokio::test]
async fn connection_methods_on_a_channel_are_503() {
    let mut c = open().await;
    open_channel(&mut c, 1);
    let out = c.call(1, ConnectionOpen::default());
    assert_connection_closed(&c, &out, reply::COMMAND_INVALID);
}

#[tokio::test]
async fn exchange_bound_is_not_implemented_540() {
    let mut c = open().await;
    open_channel(&mut c, 1);
    let out = c.call(1, ExchangeBound::default());
    assert_connection_closed(&c, &out, reply::NOT_IMPLEMENTED);
    let Some((_, Method::ConnectionClose(cl))) = out.last() else {
        unreachable!()
    };
    assert_eq!((cl.class_id, cl.method_id), (40, 22));
}

fn raw_frame(frame_type: FrameType, channel: u16, payload: &[u8]) -> BytesMut {
    let mut out = BytesMut::new();
    write_frame(&mut out, frame_type, channel, payload);
    out
}

fn sent_and_closed(c: &mut Client, bytes: &[u8], code: u16) {
    c.send(bytes);
    let out = methods(c.take_output());
    assert_connection_closed(c, &out, code);
}

#[tokio::test]
async fn an_unknown_class_is_540_and_an_unknown_method_503() {
    let mut c = open().await;
    open_channel(&mut c, 1);
    sent_and_closed(
        &mut c,
        &raw_frame(FrameType::Method, 1, &[0, 99, 0, 10]),
        reply::NOT_IMPLEMENTED,
    );
    let mut c = open().await;
    open_channel(&mut c, 1);
    sent_and_closed(
        &mut c,
        &raw_frame(FrameType::Method, 1, &[0, 50, 0, 99]),
        reply::COMMAND_INVALID,
    );
    // The same on channel 0.
    let mut c = open().await;
    sent_and_closed(
        &mut c,
        &raw_frame(FrameType::Method, 0, &[0, 10, 0, 99]),
        reply::COMMAND_INVALID,
    );
}

#[tokio::test]
async fn a_method_that_cannot_be_decoded_is_a_frame_error_501_as_in_rabbitmq() {
    // queue.declare with only its ticket.
    let mut c = open().await;
    open_channel(&mut c, 1);
    sent_and_closed(
        &mut c,
        &raw_frame(FrameType::Method, 1, &[0, 50, 0, 10, 0, 0]),
        reply::FRAME_ERROR,
    );
    // tx.select with an octet too many, on a channel and on channel 0.
    let mut c = open().await;
    open_channel(&mut c, 1);
    sent_and_closed(
        &mut c,
        &raw_frame(FrameType::Method, 1, &[0, 90, 0, 10, 0]),
        reply::FRAME_ERROR,
    );
    let mut c = open().await;
    sent_and_closed(
        &mut c,
        &raw_frame(FrameType::Method, 0, &[0, 10, 0, 51, 0]),
        reply::FRAME_ERROR,
    );
}

#[tokio::test]
async fn a_field_table_value_of_an_unknown_type_is_a_syntax_error_502() {
    let mut c = open().await;
    open_channel(&mut c, 1);
    // queue.declare: ticket, queue "q", flags, then a table holding key "k" of type 'Z'.
    let mut payload = vec![0, 50, 0, 10, 0, 0, 1, b'q', 0];
    payload.extend_from_slice(&[0, 0, 0, 3, 1, b'k', b'Z']);
    sent_and_closed(
        &mut c,
        &raw_frame(FrameType::Method, 1, &payload),
        reply::SYNTAX_ERROR,
    );
}

#[tokio::test]
async fn content_frames_on_channel_0_are_unexpected_505() {
    let mut c = open().await;
    sent_and_closed(
        &mut c,
        &raw_frame(FrameType::Body, 0, b"x"),
        reply::UNEXPECTED_FRAME,
    );
}

#[tokio::test]
async fn content_frames_out_of_order_on_a_channel_are_unexpected_505() {
    // A body without its publish and header.
    let mut c = open().await;
    open_channel(&mut c, 1);
    sent_and_closed(
        &mut c,
        &raw_frame(FrameType::Body, 1, b"x"),
        reply::UNEXPECTED_FRAME,
    );
    // A method where the header should be.
    let mut c = open().await;
    open_channel(&mut c, 1);
    let mut bytes = encode(1, to("", "q"));
    bytes.extend_from_slice(&encode(1, QueueDeclare::default()));
    sent_and_closed(&mut c, &bytes, reply::UNEXPECTED_FRAME);
    // More body than the header announced.
    let mut c = open().await;
    open_channel(&mut c, 1);
    let mut overrun = encode(1, to("", "q"));
    write_content_header(
        &mut overrun,
        1,
        &ContentHeader::basic(1, BasicProperties::default()),
    );
    overrun.extend_from_slice(&raw_frame(FrameType::Body, 1, b"toolong"));
    sent_and_closed(&mut c, &overrun, reply::UNEXPECTED_FRAME);
}

#[tokio::test]
async fn a_heartbeat_on_a_channel_is_505_and_an_unknown_frame_type_501() {
    let mut c = open().await;
    sent_and_closed(
        &mut c,
        &raw_frame(FrameType::Heartbeat, 1, b""),
        reply::UNEXPECTED_FRAME,
    );
    let mut c = open().await;
    sent_and_closed(&mut c, &[9, 0, 0, 0, 0, 0, 0, 0xce], reply::FRAME_ERROR);
    let mut c = open().await;
    // A frame-end octet that is not 0xce.
    sent_and_closed(&mut c, &[8, 0, 0, 0, 0, 0, 0, 0], reply::FRAME_ERROR);
}

#[tokio::test]
async fn a_frame_larger_than_the_negotiated_frame_max_is_a_frame_error_501() {
    let services = services(ServerConfig::default());
    let mut c = handshake(services, &[], tune_ok(4096, 0)).await;
    open_channel(&mut c, 1);
    c.declare_queue(1, "q");
    // Frames of exactly frame_max octets pass.
    c.send(&publish_frames(
        1,
        to("", "q"),
        BasicProperties::default(),
        &[7; 10_000],
        4096,
    ));
    assert!(c.take_output().is_empty());
    // So do frames of frame_max octets of payload, eight octets over in all: RabbitMQ
    // accepts them, and clients that leave no room for the frame's header and end (AMQPStorm)
    // rely on it.
    let body_of = |payload: usize| {
        let mut bytes = encode(1, to("", "q"));
        write_content_header(
            &mut bytes,
            1,
            &ContentHeader::basic(payload as u64, BasicProperties::default()),
        );
        bytes.extend_from_slice(&raw_frame(FrameType::Body, 1, &vec![0; payload]));
        bytes
    };
    c.send(&body_of(4096));
    assert!(c.take_output().is_empty());
    // One octet more does not.
    c.send(&body_of(4097));
    let out = methods(c.take_output());
    assert_connection_closed(&c, &out, reply::FRAME_ERROR);
    let Some((_, Method::ConnectionClose(close))) = out.last() else {
        unreachable!()
    };
    assert_eq!(
        close.reply_text,
        "FRAME_ERROR - frame of 4105 octets exceeds frame-max 4096"
    );
    // What was published before stands.
    let q = c.conn.broker().queue("q").unwrap();
    assert_eq!(q.info().message_count, 2);
}

#[tokio::test]
async fn update_secret_is_acknowledged_and_client_blocked_notices_are_ignored() {
    let mut c = open().await;
    let update = ConnectionUpdateSecret {
        new_secret: LongStr::from_static("token"),
        reason: short("refresh"),
    };
    let out = c.call(0, update);
    assert!(
        matches!(&out[..], [(0, Method::ConnectionUpdateSecretOk(_))]),
        "{out:?}"
    );
    let out = c.call(
        0,
        ConnectionBlocked {
            reason: short("client"),
        },
    );
    assert!(out.is_empty(), "{out:?}");
    assert_eq!(c.conn.shell.phase, Phase::Open);
}

#[tokio::test]
async fn a_close_from_the_client_while_the_broker_closes_is_answered() {
    let mut c = open().await;
    let out = c.call(0, QueueDeclare::default());
    assert_connection_closed(&c, &out, reply::CHANNEL_ERROR);
    // While the broker waits for close-ok, even an undecodable method is ignored.
    assert!(c.call(0, QueueDeclare::default()).is_empty());
    c.send(&raw_frame(FrameType::Method, 0, &[0, 10, 0, 99]));
    assert!(c.take_output().is_empty());
    assert_eq!(c.conn.shell.phase, Phase::Closing);
    // The client's own close crosses ours: close-ok, and the connection is over.
    let out = c.call(0, ConnectionClose::default());
    assert!(
        matches!(&out[..], [(0, Method::ConnectionCloseOk(_))]),
        "{out:?}"
    );
    assert!(c.conn.is_finished());
}

#[tokio::test]
async fn a_broker_shutdown_closes_with_320() {
    let mut c = open().await;
    open_channel(&mut c, 1);
    c.conn.handle_shutdown(c.now);
    let out = methods(c.take_output());
    assert_connection_closed(&c, &out, reply::CONNECTION_FORCED);
    c.call(0, ConnectionCloseOk {});
    assert!(c.conn.is_finished());
}

#[tokio::test]
async fn closing_a_connection_cancels_its_consumers_and_requeues_what_it_had_not_acked() {
    let services = services(ServerConfig::default());
    let mut a = open_on(&services, &[]).await;
    let mut b = open_on(&services, &[]).await;
    open_channel(&mut a, 1);
    open_channel(&mut a, 2);
    a.declare_queue(1, "work");
    for body in [b"m1", b"m2", b"m3"] {
        a.publish(1, "", "work", body);
    }
    let got = a.consume(1, consumer("work", "c1"));
    assert_eq!(delivered(&got).len(), 3);
    a.ack(1, 2, false);
    // Another delivery, and a message fetched with basic.get on another channel: not acked.
    a.publish(1, "", "work", b"m4");
    assert_eq!(delivered(&a.take()).len(), 1);
    a.declare_queue(2, "other");
    a.publish(2, "", "other", b"o1");
    let got = a.request(
        2,
        BasicGet {
            queue: short("other"),
            ..Default::default()
        },
    );
    assert!(matches!(got[0].method, Method::BasicGetOk(_)), "{got:?}");
    let closed = a.call(0, ConnectionClose::default());
    assert!(matches!(&closed[..], [(0, Method::ConnectionCloseOk(_))]));
    open_channel(&mut b, 1);
    let ok = b.declare(
        1,
        QueueDeclare {
            passive: true,
            ..queue("work")
        },
    );
    // m1, m3 and m4 are back (m2 was acked), and the consumer is gone.
    assert_eq!((ok.message_count, ok.consumer_count), (3, 0));
    let mut seen = Vec::new();
    for name in ["work", "work", "work", "other"] {
        let got = b.request(
            1,
            BasicGet {
                queue: ShortStr::new(name.as_bytes().to_vec()).unwrap(),
                no_ack: true,
                ..Default::default()
            },
        );
        let Method::BasicGetOk(g) = &got[0].method else {
            panic!("{got:?}");
        };
        assert!(g.redelivered, "{g:?}");
        seen.push(got[0].body().to_vec());
    }
    assert_eq!(
        seen,
        [
            b"m1".to_vec(),
            b"m3".to_vec(),
            b"m4".to_vec(),
            b"o1".to_vec()
        ]
    );
}

#[tokio::test]
async fn a_publisher_is_blocked_above_the_memory_high_water_mark_and_resumes_below_it() {
    let broker = BrokerConfig {
        memory_watermarks: Some(Watermarks {
            high: 1000,
            low: 100,
        }),
        ..BrokerConfig::default()
    };
    let services = services_with(ServerConfig::default(), broker);
    let mut publisher = open_on(&services, &["connection.blocked"]).await;
    let mut quiet = open_on(&services, &[]).await;
    let mut other = open_on(&services, &["connection.blocked"]).await;
    open_channel(&mut publisher, 1);
    open_channel(&mut quiet, 1);
    open_channel(&mut other, 1);
    publisher.declare_queue(1, "q");
    quiet.publish(1, "", "q", b"small");
    publisher.publish(1, "", "q", &[1; 600]);
    publisher.publish(1, "", "q", &[2; 600]);
    assert!(services.broker.alarms().blocked());
    // The event loop looks at the alarms: publishers hear of it, others do not.
    publisher.poll_flow();
    quiet.poll_flow();
    other.poll_flow();
    let out = methods(publisher.take_output());
    let [(0, Method::ConnectionBlocked(b))] = &out[..] else {
        panic!("{out:?}");
    };
    assert_eq!(b.reason.as_bytes(), b"low on memory");
    // A publisher without the capability is paused silently.
    assert!(quiet.take_output().is_empty());
    assert!(other.take_output().is_empty());
    // What it sends now waits unprocessed.
    publisher.publish(1, "", "q", b"held");
    assert!(publisher.pending_input() > 0);
    let q = services.broker.queue("q").unwrap();
    assert_eq!(q.info().message_count, 3);
    // Consumers free memory; the alarm timer notices, and the publisher resumes.
    let purged = other.call(
        1,
        ferry_amqp091::QueuePurge {
            queue: short("q"),
            ..Default::default()
        },
    );
    assert!(matches!(&purged[..], [(1, Method::QueuePurgeOk(p))] if p.message_count == 3));
    assert_eq!(services.broker.check_memory(), Some(false));
    publisher.poll_flow();
    let out = methods(publisher.take_output());
    assert!(
        matches!(&out[..], [(0, Method::ConnectionUnblocked(_))]),
        "{out:?}"
    );
    assert_eq!(publisher.pending_input(), 0);
    assert_eq!(q.info().message_count, 1);
}
