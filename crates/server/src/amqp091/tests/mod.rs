//! The 0-9-1 layer driven frame by frame, without sockets: each test sends what a client
//! would and checks the frames that come back, with a clock of its own.
//!
//! This module has the harness and a first set of tests; the others are by topic:
//! `connection` (handshake, connection-level methods and errors, frames), `channel`
//! (exchange and queue methods), `basic` (publish, consume, get, settlement, qos, returns,
//! flow), `confirms_tx` (publisher confirms and transactions), `durable` (replies that wait
//! for a journal the test syncs) and `access` (ACL and quotas).

mod access;
mod basic;
mod channel;
mod confirms_tx;
mod connection;
mod consumer_timeout;
mod durable;

use bytes::{Bytes, BytesMut};
use ferry_amqp091::{
    decode_frame, reply, write_body, write_content_header, write_method, BasicAck, BasicConsume,
    BasicDeliver, BasicProperties, BasicPublish, ChannelClose, ChannelCloseOk, ChannelOpen,
    ConnectionClose, ConnectionOpen, ConnectionStartOk, ConnectionTuneOk, ContentHeader,
    ExchangeDeclare, FieldTable, FieldValue, Frame, FrameType, LongStr, Method, QueueDeclare,
    QueueDeclareOk, RawContentHeader, ShortStr,
};

use super::{connection, Amqp091};
use crate::config::ServerConfig;
use crate::shell::testing::{peer, services, services_with_acl, Wire, SECOND};
use crate::shell::timers::LINGER;
use crate::shell::{Phase, Services};

type Client = Wire<Amqp091>;

fn frames(mut out: BytesMut) -> Vec<Frame> {
    let mut frames = Vec::new();
    while let Some(f) = decode_frame(&mut out, 1 << 20).expect("well-formed output") {
        frames.push(f);
    }
    assert!(out.is_empty(), "output ends with a partial frame");
    frames
}

/// The methods in `out`, with their channels; content frames are skipped.
fn methods(out: BytesMut) -> Vec<(u16, Method)> {
    frames(out)
        .into_iter()
        .filter(|f| f.frame_type == FrameType::Method)
        .map(|f| {
            (
                f.channel,
                Method::decode(f.payload).expect("method decodes"),
            )
        })
        .collect()
}

/// A method the broker sent, with the content it carried (deliver, get-ok, return).
#[derive(Debug)]
struct Incoming {
    channel: u16,
    method: Method,
    content: Option<Content>,
}

#[derive(Debug)]
struct Content {
    props: BasicProperties,
    body: Bytes,
    /// How many body frames carried it.
    body_frames: usize,
}

impl Incoming {
    fn content(&self) -> &Content {
        self.content.as_ref().expect("a method with content")
    }

    fn body(&self) -> &[u8] {
        &self.content().body
    }

    fn props(&self) -> &BasicProperties {
        &self.content().props
    }

    fn deliver(&self) -> &BasicDeliver {
        match &self.method {
            Method::BasicDeliver(d) => d,
            other => panic!("not a delivery: {other:?}"),
        }
    }
}

/// Everything in `out`, content frames joined to the method they belong to; heartbeats are
/// skipped. Every content header and body frame must sit where the spec puts it.
fn incoming(out: BytesMut) -> Vec<Incoming> {
    let mut result = Vec::new();
    let mut frames = frames(out).into_iter();
    while let Some(f) = frames.next() {
        match f.frame_type {
            FrameType::Heartbeat => continue,
            FrameType::Method => {}
            other => panic!("{other:?} frame outside a message: {f:?}"),
        }
        let method = Method::decode(f.payload).expect("method decodes");
        let content = method.has_content().then(|| {
            let h = frames.next().expect("a content header follows");
            assert_eq!((h.frame_type, h.channel), (FrameType::Header, f.channel));
            let header = RawContentHeader::decode(h.payload).expect("header decodes");
            let mut body = BytesMut::new();
            let mut body_frames = 0;
            while (body.len() as u64) < header.body_size {
                let b = frames.next().expect("a body frame follows");
                assert_eq!((b.frame_type, b.channel), (FrameType::Body, f.channel));
                body.extend_from_slice(&b.payload);
                body_frames += 1;
            }
            assert_eq!(
                body.len() as u64,
                header.body_size,
                "body overruns its size"
            );
            Content {
                props: header.properties.decode(),
                body: body.freeze(),
                body_frames,
            }
        });
        result.push(Incoming {
            channel: f.channel,
            method,
            content,
        });
    }
    result
}

/// (delivery tag, redelivered, body) of each basic.deliver in `got`, in order.
fn delivered(got: &[Incoming]) -> Vec<(u64, bool, Bytes)> {
    got.iter()
        .filter(|i| matches!(i.method, Method::BasicDeliver(_)))
        .map(|i| {
            let d = i.deliver();
            (d.delivery_tag, d.redelivered, i.content().body.clone())
        })
        .collect()
}

/// The bodies of the deliveries in `got`, in order.
fn bodies(got: &[Incoming]) -> Vec<Bytes> {
    delivered(got).into_iter().map(|(_, _, b)| b).collect()
}

fn encode(channel: u16, m: impl Into<Method>) -> BytesMut {
    let mut out = BytesMut::new();
    write_method(&mut out, channel, &m.into());
    out
}

fn short(s: &'static str) -> ShortStr {
    ShortStr::from_static(s)
}

fn long(s: &'static str) -> FieldValue {
    FieldValue::LongStr(LongStr::from_static(s))
}

fn table(entries: &[(&'static str, FieldValue)]) -> FieldTable {
    let mut t = FieldTable::new();
    for (k, v) in entries {
        t.push(short(k), v.clone());
    }
    t
}

/// A publish's frames: method, header and the body cut into frames of at most `frame_max`.
fn publish_frames(
    channel: u16,
    publish: BasicPublish,
    props: BasicProperties,
    body: &[u8],
    frame_max: usize,
) -> BytesMut {
    let mut out = encode(channel, publish);
    let header = ContentHeader::basic(body.len() as u64, props);
    write_content_header(&mut out, channel, &header);
    write_body(&mut out, channel, body, frame_max);
    out
}

fn to(exchange: &'static str, key: &'static str) -> BasicPublish {
    BasicPublish {
        exchange: short(exchange),
        routing_key: short(key),
        ..Default::default()
    }
}

impl Client {
    fn call(&mut self, channel: u16, m: impl Into<Method>) -> Vec<(u16, Method)> {
        self.send(&encode(channel, m));
        methods(self.take_output())
    }

    /// Sends `m` and returns everything that came back, contents included.
    fn request(&mut self, channel: u16, m: impl Into<Method>) -> Vec<Incoming> {
        self.send(&encode(channel, m));
        self.take()
    }

    /// Everything the connection wrote so far, deliveries waiting in its outbox included.
    fn take(&mut self) -> Vec<Incoming> {
        incoming(self.take_output())
    }

    fn publish(&mut self, channel: u16, exchange: &'static str, key: &'static str, body: &[u8]) {
        self.publish_with(channel, to(exchange, key), BasicProperties::default(), body);
    }

    fn publish_with(
        &mut self,
        channel: u16,
        publish: BasicPublish,
        props: BasicProperties,
        body: &[u8],
    ) {
        self.send(&publish_frames(channel, publish, props, body, 4096));
    }

    /// Declares `name` (empty: a server-named queue) and returns the declare-ok.
    fn declare(&mut self, channel: u16, m: QueueDeclare) -> QueueDeclareOk {
        match &self.call(channel, m)[..] {
            [(ch, Method::QueueDeclareOk(ok))] if *ch == channel => ok.clone(),
            other => panic!("no declare-ok: {other:?}"),
        }
    }

    fn declare_queue(&mut self, channel: u16, name: &'static str) -> QueueDeclareOk {
        self.declare(channel, queue(name))
    }

    /// Starts a consumer; returns what came after consume-ok (deliveries of what waits).
    fn consume(&mut self, channel: u16, m: BasicConsume) -> Vec<Incoming> {
        let tag = m.consumer_tag.clone();
        let mut got = self.request(channel, m);
        assert!(!got.is_empty(), "no consume-ok");
        match got.remove(0) {
            Incoming {
                channel: ch,
                method: Method::BasicConsumeOk(ok),
                ..
            } if ch == channel => {
                assert!(tag.is_empty() || ok.consumer_tag == tag, "{ok:?}");
            }
            other => panic!("no consume-ok: {other:?}"),
        }
        got
    }

    /// Acknowledges; returns what that set moving (deliveries refilling the prefetch).
    fn ack(&mut self, channel: u16, delivery_tag: u64, multiple: bool) -> Vec<Incoming> {
        self.request(
            channel,
            BasicAck {
                delivery_tag,
                multiple,
            },
        )
    }
}

fn queue(name: &'static str) -> QueueDeclare {
    QueueDeclare {
        queue: short(name),
        ..Default::default()
    }
}

fn consumer(queue: &'static str, tag: &'static str) -> BasicConsume {
    BasicConsume {
        queue: short(queue),
        consumer_tag: short(tag),
        ..Default::default()
    }
}

/// A client's start-ok: PLAIN-style `response` for `mechanism`, announcing `caps` (and
/// always authentication_failure_close).
fn start_ok(
    mechanism: &'static str,
    response: Vec<u8>,
    caps: &[&'static str],
) -> ConnectionStartOk {
    let mut capabilities = FieldTable::new();
    capabilities.push(
        short("authentication_failure_close"),
        FieldValue::Bool(true),
    );
    for cap in caps {
        capabilities.push(short(cap), FieldValue::Bool(true));
    }
    let mut props = FieldTable::new();
    props.push(short("product"), long("unit-test"));
    props.push(short("capabilities"), FieldValue::Table(capabilities));
    ConnectionStartOk {
        client_properties: props,
        mechanism: short(mechanism),
        response: LongStr::new(response).expect("a long string"),
        locale: short("en_US"),
    }
}

/// Runs the whole handshake (PLAIN as guest) on a connection to `services`' broker.
async fn handshake(services: Services, caps: &[&'static str], tune_ok: ConnectionTuneOk) -> Client {
    let mut c = Wire::new(|now| connection(services, peer(), now));
    let start = methods(c.take_output());
    assert!(matches!(&start[..], [(0, Method::ConnectionStart(s))]
        if s.mechanisms.as_bytes().windows(5).any(|w| w == b"PLAIN")));
    c.send(&encode(
        0,
        start_ok("PLAIN", b"\0guest\0guest".to_vec(), caps),
    ));
    assert_eq!(c.conn.shell.phase, Phase::Authenticating);
    c.finish_auth().await;
    let tune = methods(c.take_output());
    assert!(
        matches!(&tune[..], [(0, Method::ConnectionTune(_))]),
        "{tune:?}"
    );
    c.send(&encode(0, tune_ok));
    let open_ok = c.call(0, ConnectionOpen::default());
    assert!(
        matches!(&open_ok[..], [(0, Method::ConnectionOpenOk(_))]),
        "{open_ok:?}"
    );
    assert_eq!(c.conn.shell.phase, Phase::Open);
    c
}

fn tune_ok(frame_max: u32, heartbeat: u16) -> ConnectionTuneOk {
    ConnectionTuneOk {
        channel_max: 0,
        frame_max,
        heartbeat,
    }
}

async fn open_with(config: ServerConfig, heartbeat: u16) -> Client {
    handshake(services(config), &[], tune_ok(65535, heartbeat)).await
}

async fn open() -> Client {
    open_with(ServerConfig::default(), 0).await
}

/// Another connection to the broker of `services` (clones share it), announcing `caps`.
async fn open_on(services: &Services, caps: &[&'static str]) -> Client {
    handshake(services.clone(), caps, tune_ok(65535, 0)).await
}

fn open_channel(c: &mut Client, id: u16) {
    let ok = c.call(id, ChannelOpen::default());
    assert!(matches!(&ok[..], [(ch, Method::ChannelOpenOk(_))] if *ch == id));
}

fn channel_close(code: u16) -> impl Fn(&(u16, Method)) -> bool {
    move |m| matches!(m, (_, Method::ChannelClose(c)) if c.reply_code == code)
}

fn connection_close(code: u16) -> impl Fn(&(u16, Method)) -> bool {
    move |m| matches!(m, (0, Method::ConnectionClose(c)) if c.reply_code == code)
}

/// Asserts that `got` is exactly a channel.close of `channel` with `code`, naming the
/// method (class, method id) that failed.
#[track_caller]
fn assert_channel_closed(got: &[(u16, Method)], channel: u16, code: u16, ids: (u16, u16)) {
    match got {
        [(ch, Method::ChannelClose(c))] if *ch == channel => {
            assert_eq!(
                (c.reply_code, c.class_id, c.method_id),
                (code, ids.0, ids.1),
                "{c:?}"
            );
        }
        other => panic!("expected channel.close {code} on {channel}: {other:?}"),
    }
}

/// Asserts that `got` ends the connection with `code` and that the connection now waits
/// for close-ok, ignoring the rest.
#[track_caller]
fn assert_connection_closed(c: &Client, got: &[(u16, Method)], code: u16) {
    match got.last() {
        Some((0, Method::ConnectionClose(cl))) => assert_eq!(cl.reply_code, code, "{cl:?}"),
        other => panic!("expected connection.close {code}: {other:?} in {got:?}"),
    }
    assert_eq!(c.conn.shell.phase, Phase::Closing);
}

#[tokio::test]
async fn a_close_crossing_the_brokers_close_is_answered_and_the_channel_ends_at_close_ok() {
    let mut c = open().await;
    open_channel(&mut c, 1);
    open_channel(&mut c, 2);
    // The client publishes to a missing exchange and closes the channel before it hears of
    // the 404: the broker's close and the client's cross on the wire.
    c.publish(1, "no-such-exchange", "k", b"x");
    let broker_close = methods(c.take_output());
    assert!(
        broker_close.iter().any(channel_close(reply::NOT_FOUND)),
        "{broker_close:?}"
    );
    let crossing = c.call(1, ChannelClose::default());
    assert!(
        matches!(&crossing[..], [(1, Method::ChannelCloseOk(_))]),
        "{crossing:?}"
    );
    // The client answers the broker's close: still the same channel, no connection error.
    let after = c.call(1, ChannelCloseOk {});
    assert!(after.is_empty(), "{after:?}");
    // Frames for the closing channel before that were dropped, not refused; and the
    // channel number is free again now.
    open_channel(&mut c, 1);
    let other = c.call(2, QueueDeclare::default());
    assert!(
        matches!(&other[..], [(2, Method::QueueDeclareOk(_))]),
        "{other:?}"
    );
    assert_eq!(c.conn.shell.phase, Phase::Open);
}

#[tokio::test]
async fn frames_for_a_channel_the_broker_is_closing_are_dropped_until_close_ok() {
    let mut c = open().await;
    open_channel(&mut c, 1);
    c.publish(1, "no-such-exchange", "k", b"x");
    assert!(methods(c.take_output())
        .iter()
        .any(channel_close(reply::NOT_FOUND)));
    // More publishes in flight when the client learns of the close: ignored.
    c.publish(1, "no-such-exchange", "k", b"y");
    assert!(c.call(1, QueueDeclare::default()).is_empty());
    assert!(c.call(1, ChannelCloseOk {}).is_empty());
    // Now the channel is gone: another close-ok is a frame for a closed channel, as in
    // RabbitMQ a connection error.
    let late = c.call(1, ChannelCloseOk {});
    assert!(
        late.iter().any(connection_close(reply::CHANNEL_ERROR)),
        "{late:?}"
    );
}

#[tokio::test]
async fn heartbeats_go_out_half_an_interval_after_the_last_write() {
    let mut c = open_with(ServerConfig::default(), 4).await;
    assert_eq!(c.conn.poll_timeout(), Some(c.now + 2 * SECOND));
    let mut sent_at = Vec::new();
    let start = c.now;
    for _ in 0..12 {
        // The client sends its own heartbeat every second: the connection stays alive.
        c.send(&heartbeat_frame());
        let out = c.advance(SECOND);
        if frames(out)
            .iter()
            .any(|f| f.frame_type == FrameType::Heartbeat)
        {
            sent_at.push((c.now - start).as_secs());
        }
    }
    assert_eq!(sent_at, [2, 4, 6, 8, 10, 12]);
    // Any other output counts as traffic: a reply pushes the next heartbeat back.
    open_channel(&mut c, 1);
    let quiet = c.advance(SECOND + SECOND / 2);
    assert!(frames(quiet).is_empty());
}

fn heartbeat_frame() -> BytesMut {
    let mut out = BytesMut::new();
    ferry_amqp091::write_heartbeat(&mut out);
    out
}

#[tokio::test]
async fn a_peer_silent_for_two_intervals_is_dropped() {
    let mut c = open_with(ServerConfig::default(), 1).await;
    c.advance(SECOND);
    assert!(!c.conn.is_finished());
    c.advance(SECOND);
    assert!(c.conn.is_done());
}

#[tokio::test]
async fn after_close_ok_input_is_discarded_until_the_linger_ends() {
    let mut c = open().await;
    open_channel(&mut c, 1);
    let closed = c.call(0, ConnectionClose::default());
    assert!(matches!(&closed[..], [(0, Method::ConnectionCloseOk(_))]));
    assert!(c.conn.is_finished());
    assert!(!c.conn.half_closes(), "the client closes the socket first");
    // Publishes the client sent before it saw close-ok: read and dropped, no reply.
    for _ in 0..100 {
        c.publish(1, "", "q", b"late");
    }
    assert!(c.take_output().is_empty());
    assert_eq!(c.pending_input(), 0);
    assert!(!c.conn.is_done());
    c.advance(LINGER);
    assert!(c.conn.is_done());
}

#[tokio::test]
async fn the_handshake_must_finish_in_time() {
    let config = ServerConfig {
        handshake_timeout: 3 * SECOND,
        ..ServerConfig::default()
    };
    let services = services(config);
    let mut c = Wire::new(|now| connection(services, peer(), now));
    c.take_output();
    let out = methods(c.advance(3 * SECOND));
    assert!(
        out.iter().any(connection_close(reply::CONNECTION_FORCED)),
        "{out:?}"
    );
    // No close-ok comes: the connection gives up after the grace period.
    c.advance(5 * SECOND);
    assert!(c.conn.is_done());
}

#[tokio::test]
async fn a_frame_for_a_channel_never_opened_closes_the_connection() {
    let mut c = open().await;
    let out = c.call(7, QueueDeclare::default());
    assert!(
        out.iter().any(connection_close(reply::CHANNEL_ERROR)),
        "{out:?}"
    );
    assert_eq!(c.conn.shell.phase, Phase::Closing);
    // Only close-ok matters now.
    assert!(c.call(0, QueueDeclare::default()).is_empty());
    c.call(0, ferry_amqp091::ConnectionCloseOk {});
    assert!(c.conn.is_finished());
}

#[tokio::test]
async fn a_published_message_reaches_a_consumer_and_is_acknowledged() {
    let mut c = open().await;
    open_channel(&mut c, 1);
    let declared = c.call(
        1,
        QueueDeclare {
            queue: short("q1"),
            ..Default::default()
        },
    );
    assert!(matches!(&declared[..], [(1, Method::QueueDeclareOk(_))]));
    let consume = c.call(
        1,
        BasicConsume {
            queue: short("q1"),
            consumer_tag: short("ctag"),
            ..Default::default()
        },
    );
    assert!(matches!(&consume[..], [(1, Method::BasicConsumeOk(_))]));
    c.publish(1, "", "q1", b"hello");
    let delivered = frames(c.take_output());
    let kinds: Vec<FrameType> = delivered.iter().map(|f| f.frame_type).collect();
    assert_eq!(
        kinds,
        [FrameType::Method, FrameType::Header, FrameType::Body]
    );
    let Ok(Method::BasicDeliver(d)) = Method::decode(delivered[0].payload.clone()) else {
        panic!("not a delivery: {delivered:?}");
    };
    assert_eq!(d.consumer_tag.as_bytes(), b"ctag");
    assert_eq!(delivered[2].payload, Bytes::from_static(b"hello"));
    let broker = c.conn.broker().clone();
    assert!(
        broker.memory_used() > 0,
        "an unacknowledged message is still held"
    );
    c.call(
        1,
        BasicAck {
            delivery_tag: d.delivery_tag,
            multiple: false,
        },
    );
    assert_eq!(broker.memory_used(), 0, "acknowledged: gone");
}

#[tokio::test]
async fn an_exchange_redeclared_with_other_properties_is_refused_on_its_channel_only() {
    let mut c = open().await;
    let mut alternate = FieldTable::new();
    alternate.push(
        short("alternate-exchange"),
        FieldValue::LongStr(LongStr::from_static("ae")),
    );
    let original = ExchangeDeclare {
        exchange: short("x1"),
        kind: short("direct"),
        durable: true,
        arguments: alternate.clone(),
        ..Default::default()
    };
    open_channel(&mut c, 1);
    let ae = ExchangeDeclare {
        exchange: short("ae"),
        kind: short("fanout"),
        ..Default::default()
    };
    c.call(1, ae);
    let ok = c.call(1, original.clone());
    assert!(
        matches!(&ok[..], [(1, Method::ExchangeDeclareOk(_))]),
        "{ok:?}"
    );
    let variants = [
        ExchangeDeclare {
            kind: short("fanout"),
            ..original.clone()
        },
        ExchangeDeclare {
            durable: false,
            ..original.clone()
        },
        ExchangeDeclare {
            auto_delete: true,
            ..original.clone()
        },
        ExchangeDeclare {
            internal: true,
            ..original.clone()
        },
        ExchangeDeclare {
            arguments: FieldTable::new(),
            ..original.clone()
        },
    ];
    for (i, variant) in variants.into_iter().enumerate() {
        let channel = 2 + i as u16;
        open_channel(&mut c, channel);
        let refused = c.call(channel, variant);
        assert!(
            refused
                .iter()
                .any(channel_close(reply::PRECONDITION_FAILED)),
            "variant {i}: {refused:?}"
        );
        c.call(channel, ChannelCloseOk {});
    }
    // The same declaration again is fine, other arguments do not matter (as in RabbitMQ).
    let mut other_args = alternate;
    other_args.push(short("x-whatever"), FieldValue::I32(1));
    let same = c.call(
        1,
        ExchangeDeclare {
            arguments: other_args,
            ..original
        },
    );
    assert!(
        matches!(&same[..], [(1, Method::ExchangeDeclareOk(_))]),
        "{same:?}"
    );
    assert_eq!(c.conn.shell.phase, Phase::Open);
}

#[tokio::test]
async fn management_sees_the_connection_and_can_close_it() {
    let mut c = open().await;
    let broker = c.conn.broker().clone();
    let listed = broker.connections().list();
    assert_eq!(listed.len(), 1);
    let id = listed[0].id;
    assert_eq!(listed[0].meta.user, "guest");
    assert_eq!(listed[0].meta.protocol, "AMQP 0-9-1");
    open_channel(&mut c, 1);
    open_channel(&mut c, 2);
    c.call(2, ferry_amqp091::ConfirmSelect { nowait: false });
    // Sessions are reported at most once a second, traffic with every write.
    c.advance(SECOND);
    let status = broker.connections().get(id).unwrap();
    assert_eq!(status.traffic.channels, 2);
    assert!(status.traffic.bytes_in > 0 && status.traffic.bytes_out > 0);
    let channels: Vec<(u16, bool)> = status
        .sessions
        .iter()
        .map(|s| (s.channel, s.confirms))
        .collect();
    assert_eq!(channels, [(1, false), (2, true)]);
    // An operator closes it: the client hears connection-forced with the reason.
    assert!(broker.connections().close(id, "closed by an operator"));
    let out = methods(c.take_output());
    assert!(
        matches!(&out[..], [(0, Method::ConnectionClose(cl))]
            if cl.reply_code == reply::CONNECTION_FORCED
                && cl.reply_text.as_bytes().ends_with(b"closed by an operator")),
        "{out:?}"
    );
    c.call(0, ferry_amqp091::ConnectionCloseOk {});
    drop(c);
    assert!(
        broker.connections().is_empty(),
        "a connection that ended is gone"
    );
}

#[tokio::test]
async fn an_internal_exchange_refuses_publishes_but_routes_what_is_bound_through_it() {
    let mut c = open().await;
    open_channel(&mut c, 1);
    let internal = ExchangeDeclare {
        exchange: short("inner"),
        kind: short("fanout"),
        internal: true,
        ..Default::default()
    };
    assert!(matches!(
        &c.call(1, internal.clone())[..],
        [(1, Method::ExchangeDeclareOk(_))]
    ));
    // Declared again the same way: equivalent; without `internal`: not.
    assert!(matches!(
        &c.call(1, internal.clone())[..],
        [(1, Method::ExchangeDeclareOk(_))]
    ));
    open_channel(&mut c, 2);
    let plain = ExchangeDeclare {
        internal: false,
        ..internal
    };
    assert!(c
        .call(2, plain)
        .iter()
        .any(channel_close(reply::PRECONDITION_FAILED)));
    c.call(2, ChannelCloseOk {});
    let queue = QueueDeclare {
        queue: short("q"),
        ..Default::default()
    };
    c.call(1, queue);
    let bind = ferry_amqp091::QueueBind {
        queue: short("q"),
        exchange: short("inner"),
        ..Default::default()
    };
    c.call(1, bind);
    let e2e = ferry_amqp091::ExchangeBind {
        destination: short("inner"),
        source: short("amq.fanout"),
        ..Default::default()
    };
    assert!(matches!(
        &c.call(1, e2e)[..],
        [(1, Method::ExchangeBindOk(_))]
    ));
    c.publish(1, "amq.fanout", "", b"through");
    let broker = c.conn.broker().clone();
    assert_eq!(broker.queue("q").unwrap().message_count(), 1);
    c.publish(1, "inner", "", b"direct");
    let refused = methods(c.take_output());
    assert!(
        refused.iter().any(|(ch, m)| *ch == 1
            && matches!(m, Method::ChannelClose(cl) if cl.reply_code == reply::ACCESS_REFUSED
                && cl.reply_text.as_bytes().starts_with(b"ACCESS_REFUSED - cannot publish to internal exchange"))),
        "{refused:?}"
    );
    assert_eq!(broker.queue("q").unwrap().message_count(), 1);
}

#[tokio::test]
async fn a_missing_alternate_exchange_is_accepted_and_unroutable_messages_are_dropped() {
    let mut c = open().await;
    open_channel(&mut c, 1);
    let mut args = FieldTable::new();
    args.push(
        short("alternate-exchange"),
        FieldValue::LongStr(LongStr::from_static("not-there")),
    );
    let x = ExchangeDeclare {
        exchange: short("x"),
        kind: short("direct"),
        arguments: args,
        ..Default::default()
    };
    assert!(matches!(
        &c.call(1, x.clone())[..],
        [(1, Method::ExchangeDeclareOk(_))]
    ));
    c.publish(1, "x", "nowhere", b"dropped");
    assert!(matches!(
        &c.call(1, x)[..],
        [(1, Method::ExchangeDeclareOk(_))]
    ));
    assert_eq!(c.conn.shell.phase, Phase::Open);
    let info = c.conn.broker().exchange_info("x").unwrap();
    assert_eq!(info.alternate_exchange, None);
}

#[tokio::test]
async fn management_sees_the_messages_a_connection_published_and_was_sent() {
    let mut c = open().await;
    open_channel(&mut c, 1);
    c.declare_queue(1, "q");
    for body in [&b"a"[..], b"b", b"c"] {
        c.publish(1, "", "q", body);
    }
    assert_eq!(
        bodies(&c.consume(1, consumer("q", "ctag"))),
        [&b"a"[..], b"b", b"c"]
    );
    // A get-ok carries a message too.
    c.publish(1, "", "q", b"d");
    let got = c.call(
        1,
        ferry_amqp091::BasicGet {
            ticket: 0,
            queue: short("q"),
            no_ack: true,
        },
    );
    assert!(!got.is_empty());
    let id = c.conn.broker().connections().list()[0].id;
    let t = c.conn.broker().connections().get(id).unwrap().traffic;
    assert_eq!((t.messages_in, t.messages_out), (4, 4));
}
