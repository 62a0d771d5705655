//! The 0-10 layer driven frame by frame, without sockets: each test sends what a client
//! would and checks the controls and commands that come back, with a clock of its own.
//!
//! This module has the harness and a first set of tests (several of them qpidd behaviours);
//! the others are by topic: `connection` (handshake, tune, heartbeats, close, framing errors),
//! `session` (attach, detach, command numbering, completion, the session controls),
//! `exchange_queue` (exchange and queue commands and their results and errors), `message`
//! (transfer, subscriptions, flow, settlement, acquire), `tx` (the tx class, dtx),
//! `durable` (completion that waits for a journal the test syncs), `access` (ACL and
//! quotas) and `crossing` (headers of dead letters and of messages from other protocols).

mod access;
mod connection;
mod crossing;
mod durable;
mod exchange_queue;
mod message;
mod session;
mod tx;

use bytes::{Bytes, BytesMut};
use ferry_amqp010::{
    decode_frame, write_command, write_control, write_transfer, AcceptMode, AcquireMode, Assembler,
    CloseCode, Command, ConnectionClose, ConnectionOpen, ConnectionStartOk, ConnectionTuneOk,
    Control, CreditUnit, DeliveryProperties, DetachCode, ErrorCode, ExchangeBind, ExecutionSync,
    Incoming, MessageAccept, MessageFlow, MessageHeader, MessageSubscribe, MessageTransfer,
    QueueDeclare, SequenceSet, SessionAttach, SessionCompleted, SessionDetach, SessionDetached,
    Str,
};

use super::{connection, Amqp010};
use crate::config::ServerConfig;
use crate::shell::testing::{peer, services, services_with_acl, Wire, SECOND};
use crate::shell::timers::LINGER;
use crate::shell::{Phase, Services};

type Client = Wire<Amqp010>;

const MAX_FRAME: usize = 65535;

/// What the connection sent, decoded (body segments joined to their transfers).
#[derive(Debug)]
enum Item {
    Control(u16, Control),
    Command(u16, Command, Bytes),
}

fn decode(mut out: BytesMut) -> Vec<Item> {
    let mut assemblers: Vec<Assembler> = Vec::new();
    let mut items = Vec::new();
    while let Some(frame) = decode_frame(&mut out, MAX_FRAME).expect("well-formed output") {
        let channel = frame.header.channel;
        while assemblers.len() <= usize::from(channel) {
            assemblers.push(Assembler::new(1 << 20));
        }
        match assemblers[usize::from(channel)]
            .push(frame)
            .expect("assembles")
        {
            None => {}
            Some(Incoming::Control(c)) => items.push(Item::Control(channel, c)),
            Some(Incoming::Command { command, body, .. }) => {
                items.push(Item::Command(channel, command, body))
            }
        }
    }
    assert!(out.is_empty(), "output ends with a partial frame");
    items
}

fn control(channel: u16, c: impl Into<Control>) -> BytesMut {
    let mut out = BytesMut::new();
    write_control(&mut out, channel, &c.into()).expect("encodes");
    out
}

fn command(channel: u16, c: impl Into<Command>, sync: bool) -> BytesMut {
    let mut out = BytesMut::new();
    write_command(&mut out, channel, &c.into(), sync, MAX_FRAME).expect("encodes");
    out
}

fn exception(items: &[Item]) -> Option<ErrorCode> {
    items.iter().find_map(|i| match i {
        Item::Command(_, Command::ExecutionException(e), _) => e.error_code,
        _ => None,
    })
}

impl Client {
    fn exchange(&mut self, bytes: BytesMut) -> Vec<Item> {
        self.send(&bytes);
        decode(self.take_output())
    }

    fn transfer(&mut self, channel: u16, exchange: &str, key: &str, body: &[u8]) {
        let header = MessageHeader {
            delivery: Some(DeliveryProperties {
                routing_key: Some(Str::from(key)),
                ..Default::default()
            }),
            properties: None,
            other: Vec::new(),
        };
        let mut raw = BytesMut::new();
        header.encode(&mut raw).expect("header encodes");
        let transfer = MessageTransfer {
            destination: Some(Str::from(exchange)),
            accept_mode: Some(AcceptMode::None),
            acquire_mode: Some(AcquireMode::PreAcquired),
        };
        let mut out = BytesMut::new();
        write_transfer(&mut out, channel, &transfer, false, &raw, body, MAX_FRAME)
            .expect("transfer encodes");
        self.send(&out);
    }

    fn attach(&mut self, channel: u16, name: &'static str) {
        let attach = SessionAttach {
            name: Some(Bytes::from_static(name.as_bytes())),
            force: false,
        };
        let items = self.exchange(control(channel, attach));
        assert!(
            matches!(items.first(), Some(Item::Control(ch, Control::SessionAttached(_))) if *ch == channel),
            "{items:?}"
        );
    }
}

async fn open_with(config: ServerConfig, heartbeat: u16) -> Client {
    open_on(services(config), heartbeat).await
}

/// A connection to the broker of `services` (several may share one).
async fn open_on(services: Services, heartbeat: u16) -> Client {
    let mut c = Wire::new(|now| connection(services, peer(), now));
    let start = decode(c.take_output());
    assert!(matches!(
        &start[..],
        [Item::Control(0, Control::ConnectionStart(_))]
    ));
    let start_ok = ConnectionStartOk {
        client_properties: None,
        mechanism: Some(Str::from("PLAIN")),
        response: Some(Bytes::from_static(b"\0guest\0guest")),
        locale: Some(Str::from("en_US")),
    };
    c.send(&control(0, start_ok));
    assert_eq!(c.conn.shell.phase, Phase::Authenticating);
    c.finish_auth().await;
    let tune = decode(c.take_output());
    assert!(
        matches!(&tune[..], [Item::Control(0, Control::ConnectionTune(_))]),
        "{tune:?}"
    );
    let tune_ok = ConnectionTuneOk {
        channel_max: Some(32),
        max_frame_size: Some(MAX_FRAME as u16),
        heartbeat: Some(heartbeat),
    };
    c.send(&control(0, tune_ok));
    let open_ok = c.exchange(control(0, ConnectionOpen::default()));
    assert!(matches!(
        &open_ok[..],
        [Item::Control(0, Control::ConnectionOpenOk(_))]
    ));
    assert_eq!(c.conn.shell.phase, Phase::Open);
    c
}

async fn open() -> Client {
    open_with(ServerConfig::default(), 0).await
}

fn declare(queue: &str) -> QueueDeclare {
    QueueDeclare {
        queue: Some(Str::from(queue)),
        ..Default::default()
    }
}

#[tokio::test]
async fn a_transfer_reaches_a_subscriber_with_credit_and_completes() {
    let mut c = open().await;
    c.attach(1, "s1");
    c.exchange(command(1, declare("q1"), false));
    let subscribe = MessageSubscribe {
        queue: Some(Str::from("q1")),
        destination: Some(Str::from("d1")),
        accept_mode: Some(AcceptMode::Explicit),
        acquire_mode: Some(AcquireMode::PreAcquired),
        ..Default::default()
    };
    c.exchange(command(1, subscribe, false));
    let credit = |unit, value| MessageFlow {
        destination: Some(Str::from("d1")),
        unit: Some(unit),
        value: Some(value),
    };
    c.exchange(command(1, credit(CreditUnit::Byte, u32::MAX), false));
    c.exchange(command(1, credit(CreditUnit::Message, 1), false));
    c.transfer(1, "", "q1", b"hello");
    let got = decode(c.take_output());
    let transfer = got.iter().find_map(|i| match i {
        Item::Command(1, Command::MessageTransfer(t), body) => Some((t, body)),
        _ => None,
    });
    let (t, body) = transfer.unwrap_or_else(|| panic!("no transfer in {got:?}"));
    assert_eq!(
        t.destination.as_ref().map(|d| d.as_bytes()),
        Some(&b"d1"[..])
    );
    assert_eq!(&body[..], b"hello");
    // One credit: the second message waits.
    c.transfer(1, "", "q1", b"second");
    assert!(decode(c.take_output())
        .iter()
        .all(|i| !matches!(i, Item::Command(_, Command::MessageTransfer(_), _))));
    // Our transfer was command 0 of our side of the session: accepting it settles it.
    let broker = c.conn.broker().clone();
    let held = broker.memory_used();
    let mut first = SequenceSet::new();
    first.add(0);
    c.exchange(command(
        1,
        MessageAccept {
            transfers: Some(first),
        },
        false,
    ));
    assert!(broker.memory_used() < held);
    // Completion of the client's commands is reported (sync asks for it at once).
    let sync = c.exchange(command(1, ExecutionSync {}, true));
    assert!(
        sync.iter()
            .any(|i| matches!(i, Item::Control(1, Control::SessionCompleted(_)))),
        "{sync:?}"
    );
}

#[tokio::test]
async fn a_failed_command_detaches_its_session_and_a_crossing_detach_is_answered() {
    let mut c = open().await;
    c.attach(1, "s1");
    c.attach(2, "s2");
    // Publishing to a missing exchange: execution.exception(not-found) and session.detach.
    c.transfer(1, "no-such-exchange", "k", b"x");
    let failed = decode(c.take_output());
    assert_eq!(exception(&failed), Some(ErrorCode::NotFound), "{failed:?}");
    assert!(failed
        .iter()
        .any(|i| matches!(i, Item::Control(1, Control::SessionDetach(_)))));
    // The client detached before it saw ours: answered, not a connection error.
    let detach = SessionDetach {
        name: Some(Bytes::from_static(b"s1")),
    };
    let answered = c.exchange(control(1, detach));
    assert!(
        matches!(&answered[..], [Item::Control(1, Control::SessionDetached(d))]
            if d.code == Some(DetachCode::Normal)),
        "{answered:?}"
    );
    // Then the client answers our detach: nothing more happens.
    let detached = SessionDetached {
        name: Some(Bytes::from_static(b"s1")),
        code: Some(DetachCode::Normal),
    };
    assert!(c.exchange(control(1, detached)).is_empty());
    // The other session carries on, and the channel can take a new session.
    let ok = c.exchange(command(2, declare("q2"), true));
    assert_eq!(exception(&ok), None, "{ok:?}");
    c.attach(1, "s1-again");
    assert_eq!(c.conn.shell.phase, Phase::Open);
}

#[tokio::test]
async fn commands_after_a_failure_are_ignored_until_the_peer_detaches() {
    let mut c = open().await;
    c.attach(1, "s1");
    let bad = c.exchange(command(1, declare(""), false));
    assert!(exception(&bad).is_some(), "{bad:?}");
    assert!(c.exchange(command(1, declare("q"), true)).is_empty());
    assert!(c.conn.broker().queue("q").is_none());
}

#[tokio::test]
async fn heartbeats_go_out_half_an_interval_after_the_last_write() {
    let mut c = open_with(ServerConfig::default(), 2).await;
    assert_eq!(c.conn.poll_timeout(), Some(c.now + SECOND));
    let start = c.now;
    let mut sent_at = Vec::new();
    for _ in 0..6 {
        c.send(&control(0, ferry_amqp010::ConnectionHeartbeat {}));
        let out = decode(c.advance(SECOND / 2));
        if out
            .iter()
            .any(|i| matches!(i, Item::Control(0, Control::ConnectionHeartbeat(_))))
        {
            sent_at.push((c.now - start).as_millis());
        }
    }
    assert_eq!(sent_at, [1000, 2000, 3000]);
}

#[tokio::test]
async fn a_peer_silent_for_two_intervals_is_dropped() {
    let mut c = open_with(ServerConfig::default(), 1).await;
    c.advance(SECOND + SECOND / 2);
    assert!(!c.conn.is_finished());
    c.advance(SECOND);
    assert!(c.conn.is_done());
}

#[tokio::test]
async fn after_close_ok_input_is_discarded_until_the_linger_ends() {
    let mut c = open().await;
    c.attach(1, "s1");
    let close = ConnectionClose {
        reply_code: Some(CloseCode::Normal),
        reply_text: None,
    };
    let closed = c.exchange(control(0, close));
    assert!(matches!(
        &closed[..],
        [Item::Control(0, Control::ConnectionCloseOk(_))]
    ));
    assert!(
        c.conn.half_closes(),
        "as qpidd, ferryd closes after close-ok"
    );
    for _ in 0..50 {
        c.transfer(1, "", "q", b"late");
    }
    assert!(c.take_output().is_empty());
    assert_eq!(c.pending_input(), 0);
    c.advance(LINGER);
    assert!(c.conn.is_done());
}

#[tokio::test]
async fn a_session_control_before_open_closes_the_connection_with_framing_error() {
    let services = services(ServerConfig::default());
    let mut c = Wire::new(|now| connection(services, peer(), now));
    c.take_output();
    let attach = SessionAttach {
        name: Some(Bytes::from_static(b"early")),
        force: false,
    };
    let out = c.exchange(control(1, attach));
    assert!(
        matches!(&out[..], [Item::Control(0, Control::ConnectionClose(cl))]
            if cl.reply_code == Some(CloseCode::FramingError)),
        "{out:?}"
    );
    assert_eq!(c.conn.shell.phase, Phase::Closing);
}

#[tokio::test]
async fn completion_of_a_pipelined_batch_is_reported_once() {
    let mut c = open().await;
    c.attach(1, "s1");
    c.exchange(command(1, declare("q1"), false));
    let mut batch = BytesMut::new();
    for _ in 0..10 {
        let header = MessageHeader {
            delivery: Some(DeliveryProperties {
                routing_key: Some(Str::from("q1")),
                ..Default::default()
            }),
            properties: None,
            other: Vec::new(),
        };
        let mut raw = BytesMut::new();
        header.encode(&mut raw).expect("encodes");
        let transfer = MessageTransfer {
            destination: Some(Str::from("")),
            accept_mode: Some(AcceptMode::None),
            acquire_mode: Some(AcquireMode::PreAcquired),
        };
        write_transfer(&mut batch, 1, &transfer, false, &raw, b"m", MAX_FRAME).expect("encodes");
    }
    let out = c.exchange(batch);
    let completions: Vec<_> = out
        .iter()
        .filter_map(|i| match i {
            Item::Control(1, Control::SessionCompleted(SessionCompleted { commands, .. })) => {
                commands.clone()
            }
            _ => None,
        })
        .collect();
    assert_eq!(completions.len(), 1, "{out:?}");
    assert_eq!(completions[0].ranges(), &[(0, 10)]);
    assert_eq!(
        c.conn.broker().queue("q1").unwrap().info().message_count,
        10
    );
}

/// Runs `cmd` (with sync) on a session of its own; the error code it failed with, if any.
fn outcome(c: &mut Client, channel: u16, cmd: impl Into<Command>) -> Option<ErrorCode> {
    let name: &'static str = Box::leak(format!("probe-{channel}").into_boxed_str());
    c.attach(channel, name);
    exception(&c.exchange(command(channel, cmd, true)))
}

#[tokio::test]
async fn transfers_released_by_a_flush_go_out_before_its_completion() {
    let mut c = open().await;
    c.attach(1, "s1");
    c.exchange(command(1, declare("q1"), false));
    let subscribe = MessageSubscribe {
        queue: Some(Str::from("q1")),
        destination: Some(Str::from("d")),
        ..Default::default()
    };
    c.exchange(command(1, subscribe, false));
    c.transfer(1, "", "q1", b"m1");
    c.take_output();
    // qpid.messaging's fetch(): credit, then flush with sync, in one write.
    let mut batch = BytesMut::new();
    for (unit, value) in [(CreditUnit::Byte, u32::MAX), (CreditUnit::Message, 1)] {
        let flow = MessageFlow {
            destination: Some(Str::from("d")),
            unit: Some(unit),
            value: Some(value),
        };
        batch.extend_from_slice(&command(1, flow, false));
    }
    let flush = ferry_amqp010::MessageFlush {
        destination: Some(Str::from("d")),
    };
    batch.extend_from_slice(&command(1, flush, true));
    let out = c.exchange(batch);
    let transfer_at = out
        .iter()
        .position(|i| matches!(i, Item::Command(1, Command::MessageTransfer(_), _)))
        .unwrap_or_else(|| panic!("no transfer: {out:?}"));
    // The flush is the client's command 5 (declare, subscribe, transfer, flow, flow, flush).
    let completed_at = out
        .iter()
        .position(|i| {
            matches!(i, Item::Control(1, Control::SessionCompleted(SessionCompleted {
            commands: Some(set), ..
        })) if set.contains(5))
        })
        .unwrap_or_else(|| panic!("flush not completed: {out:?}"));
    assert!(transfer_at < completed_at, "{out:?}");
}

#[tokio::test]
async fn the_default_exchange_cannot_be_bound_unbound_or_deleted() {
    let mut c = open().await;
    c.attach(1, "s1");
    c.exchange(command(1, declare("q1"), true));
    let bind = ferry_amqp010::ExchangeBind {
        queue: Some(Str::from("q1")),
        exchange: Some(Str::from("")),
        binding_key: Some(Str::from("k")),
        arguments: None,
    };
    let unbind = ferry_amqp010::ExchangeUnbind {
        queue: Some(Str::from("q1")),
        exchange: Some(Str::from("")),
        binding_key: Some(Str::from("k")),
    };
    let delete = ferry_amqp010::ExchangeDelete {
        exchange: Some(Str::from("")),
        if_unused: false,
    };
    assert_eq!(outcome(&mut c, 2, bind), Some(ErrorCode::InvalidArgument));
    assert_eq!(outcome(&mut c, 3, unbind), Some(ErrorCode::InvalidArgument));
    assert_eq!(outcome(&mut c, 4, delete), Some(ErrorCode::InvalidArgument));
}

#[tokio::test]
async fn an_empty_queue_name_is_an_illegal_argument_for_purge_and_subscribe() {
    let mut c = open().await;
    let purge = ferry_amqp010::QueuePurge { queue: None };
    let subscribe = MessageSubscribe {
        destination: Some(Str::from("d")),
        ..Default::default()
    };
    let delete = ferry_amqp010::QueueDelete {
        queue: Some(Str::from("")),
        ..Default::default()
    };
    assert_eq!(outcome(&mut c, 1, purge), Some(ErrorCode::IllegalArgument));
    assert_eq!(
        outcome(&mut c, 2, subscribe),
        Some(ErrorCode::IllegalArgument)
    );
    assert_eq!(outcome(&mut c, 3, delete), Some(ErrorCode::NotFound));
}

#[tokio::test]
async fn exchange_declare_follows_qpidds_naming_and_type_rules() {
    let mut c = open().await;
    let declare_x = |name: &str, kind: &str, passive: bool| ferry_amqp010::ExchangeDeclare {
        exchange: Some(Str::from(name)),
        r#type: (!kind.is_empty()).then(|| Str::from(kind)),
        passive,
        ..Default::default()
    };
    // amq. and qpid. are reserved, even for a redeclaration of a built-in exchange.
    assert_eq!(
        outcome(&mut c, 1, declare_x("qpid.mine", "direct", false)),
        Some(ErrorCode::NotAllowed)
    );
    assert_eq!(
        outcome(&mut c, 2, declare_x("amq.direct", "direct", false)),
        Some(ErrorCode::NotAllowed)
    );
    assert_eq!(
        outcome(&mut c, 3, declare_x("amq.direct", "direct", true)),
        None
    );
    assert_eq!(
        outcome(&mut c, 4, declare_x("amq.direct", "topic", true)),
        Some(ErrorCode::NotAllowed)
    );
    assert_eq!(
        outcome(&mut c, 5, declare_x("amqp.fine", "topic", false)),
        None
    );
    // A redeclaration may leave the type out; another type is not allowed.
    assert_eq!(outcome(&mut c, 6, declare_x("amqp.fine", "", false)), None);
    assert_eq!(
        outcome(&mut c, 7, declare_x("amqp.fine", "fanout", false)),
        Some(ErrorCode::NotAllowed)
    );
    assert_eq!(
        outcome(&mut c, 8, declare_x("new", "no-such-type", false)),
        Some(ErrorCode::NotFound)
    );
    assert_eq!(
        outcome(&mut c, 9, declare_x("missing", "", true)),
        Some(ErrorCode::NotFound)
    );
}

#[tokio::test]
async fn a_headers_binding_needs_x_match_and_one_set_of_arguments_per_key() {
    let mut c = open().await;
    c.attach(1, "s1");
    c.exchange(command(1, declare("q1"), true));
    let bind = |args: &[(&str, &str)]| {
        let mut map = ferry_amqp010::Map::new();
        for (k, v) in args {
            map.insert(*k, ferry_amqp010::Value::Str16(Str::from(*v)));
        }
        ferry_amqp010::ExchangeBind {
            queue: Some(Str::from("q1")),
            exchange: Some(Str::from("amq.match")),
            binding_key: Some(Str::from("k")),
            arguments: Some(map),
        }
    };
    assert_eq!(
        outcome(&mut c, 2, bind(&[("name", "fred")])),
        Some(ErrorCode::InternalError)
    );
    assert_eq!(
        outcome(&mut c, 3, bind(&[("x-match", "some")])),
        Some(ErrorCode::InternalError)
    );
    assert_eq!(
        outcome(&mut c, 4, bind(&[("x-match", "all"), ("name", "fred")])),
        None
    );
    assert_eq!(
        outcome(&mut c, 5, bind(&[("x-match", "all"), ("name", "fred")])),
        None
    );
    assert_eq!(
        outcome(&mut c, 6, bind(&[("x-match", "any"), ("name", "fred")])),
        Some(ErrorCode::InternalError)
    );
}

#[tokio::test]
async fn a_detach_naming_another_session_fails_this_one() {
    let mut c = open().await;
    c.attach(1, "s1");
    c.call(1, ExecutionSync {});
    c.call(1, ExecutionSync {});
    let detach = SessionDetach {
        name: Some(Bytes::from_static(b"not-s1")),
    };
    let out = c.exchange(control(1, detach));
    assert_eq!(exception(&out), Some(ErrorCode::InvalidArgument), "{out:?}");
    // A control takes no command id: the exception names the last command received (1,
    // not an id never sent) and the control, as qpidd's does.
    let [(1, e)] = &exceptions(&out)[..] else {
        panic!("{out:?}");
    };
    let codes = (e.command_id, e.class_code, e.command_code);
    assert_eq!(
        codes,
        (
            Some(1),
            Some(SessionDetach::CLASS_CODE),
            Some(SessionDetach::CODE)
        )
    );
    assert!(out
        .iter()
        .any(|i| matches!(i, Item::Control(1, Control::SessionDetach(_)))));
    assert_eq!(c.conn.shell.phase, Phase::Open);
}

#[tokio::test]
async fn a_priority_above_nine_is_taken_as_the_highest() {
    let mut c = open().await;
    c.attach(1, "s1");
    c.exchange(command(1, declare("q1"), true));
    let mut raw = BytesMut::new();
    // delivery-properties with priority 10, as qpidd's clients may send.
    let header = MessageHeader {
        delivery: Some(DeliveryProperties {
            routing_key: Some(Str::from("q1")),
            priority: Some(ferry_amqp010::DeliveryPriority::Highest),
            ..Default::default()
        }),
        properties: None,
        other: Vec::new(),
    };
    header.encode(&mut raw).expect("encodes");
    // Patch the priority octet (the only 9 in this small header) to 10.
    let at = raw.iter().rposition(|b| *b == 9).expect("priority octet");
    raw[at] = 10;
    let transfer = MessageTransfer {
        destination: Some(Str::from("")),
        accept_mode: Some(AcceptMode::None),
        acquire_mode: Some(AcquireMode::PreAcquired),
    };
    let mut out = BytesMut::new();
    write_transfer(&mut out, 1, &transfer, true, &raw, b"p10", MAX_FRAME).expect("encodes");
    let reply = c.exchange(out);
    assert_eq!(exception(&reply), None, "{reply:?}");
    assert_eq!(c.conn.broker().queue("q1").unwrap().info().message_count, 1);
}

#[tokio::test]
async fn management_sees_sessions_and_can_close_the_connection() {
    let mut c = open().await;
    c.attach(1, "s1");
    c.exchange(command(1, declare("q1"), false));
    let subscribe = MessageSubscribe {
        queue: Some(Str::from("q1")),
        destination: Some(Str::from("d")),
        ..Default::default()
    };
    c.exchange(command(1, subscribe, false));
    c.advance(SECOND);
    let broker = c.conn.broker().clone();
    let listed = broker.connections().list();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].meta.protocol, "AMQP 0-10");
    let s = &listed[0].sessions;
    assert_eq!(s.len(), 1);
    assert_eq!((s[0].name.as_str(), s[0].consumers), ("s1", 1));
    let consumers = broker.consumer_entries();
    assert_eq!(consumers[0].connection, Some(listed[0].id));
    assert!(broker.connections().close(listed[0].id, "maintenance"));
    let out = decode(c.take_output());
    assert!(
        out.iter().any(
            |i| matches!(i, Item::Control(0, Control::ConnectionClose(cl))
            if cl.reply_code == Some(CloseCode::ConnectionForced))
        ),
        "{out:?}"
    );
}

fn subscribe_to(queue: &str, destination: &str) -> MessageSubscribe {
    MessageSubscribe {
        queue: Some(Str::from(queue)),
        destination: Some(Str::from(destination)),
        ..Default::default()
    }
}

fn flow(destination: &str, unit: CreditUnit, value: u32) -> MessageFlow {
    MessageFlow {
        destination: Some(Str::from(destination)),
        unit: Some(unit),
        value: Some(value),
    }
}

/// The bodies of the transfers in `items`, in order.
fn transfer_bodies(items: &[Item]) -> Vec<Bytes> {
    items
        .iter()
        .filter_map(|i| match i {
            Item::Command(_, Command::MessageTransfer(_), body) => Some(body.clone()),
            _ => None,
        })
        .collect()
}

fn range(lo: u32, hi: u32) -> SequenceSet {
    let mut set = SequenceSet::new();
    set.add_range(lo, hi);
    set
}

fn completed(lo: u32, hi: u32) -> SessionCompleted {
    SessionCompleted {
        commands: Some(range(lo, hi)),
        timely_reply: false,
    }
}

fn bodies_of(names: &[&str]) -> Vec<Bytes> {
    names
        .iter()
        .map(|n| Bytes::copy_from_slice(n.as_bytes()))
        .collect()
}

#[tokio::test]
async fn a_subscription_starts_in_window_mode_and_a_stop_keeps_the_window_closed() {
    // qpid-python's message.test_window_stop, frame by frame.
    let mut c = open().await;
    c.attach(1, "s1");
    c.exchange(command(1, declare("q"), false));
    c.exchange(command(1, subscribe_to("q", "c"), false));
    c.exchange(command(1, flow("c", CreditUnit::Message, 5), false));
    c.exchange(command(1, flow("c", CreditUnit::Byte, u32::MAX), false));
    let names: Vec<String> = (1..=10).map(|i| format!("Message {i}")).collect();
    for n in &names {
        c.transfer(1, "", "q", n.as_bytes());
    }
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    assert_eq!(
        transfer_bodies(&decode(c.take_output())),
        bodies_of(&names[..5])
    );
    let stop = ferry_amqp010::MessageStop {
        destination: Some(Str::from("c")),
    };
    c.exchange(command(1, stop, false));
    // The five transfers were our commands 0..=4: completing them after the stop grants nothing.
    assert!(transfer_bodies(&c.exchange(control(1, completed(0, 4)))).is_empty());
    c.exchange(command(1, flow("c", CreditUnit::Message, 5), false));
    let more = c.exchange(command(1, flow("c", CreditUnit::Byte, u32::MAX), false));
    assert_eq!(transfer_bodies(&more), bodies_of(&names[5..]));
}

#[tokio::test]
async fn released_transfers_come_back_in_order_once_their_window_reopens() {
    // qpid-python's message.test_release_ordering.
    let mut c = open().await;
    c.attach(1, "s1");
    c.exchange(command(1, declare("q"), false));
    let names: Vec<String> = (1..=10).map(|i| format!("released message {i}")).collect();
    for n in &names {
        c.transfer(1, "", "q", n.as_bytes());
    }
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    c.exchange(command(1, subscribe_to("q", "d"), false));
    c.exchange(command(1, flow("d", CreditUnit::Message, 10), false));
    let got = c.exchange(command(1, flow("d", CreditUnit::Byte, u32::MAX), false));
    assert_eq!(transfer_bodies(&got), bodies_of(&names));
    let release = ferry_amqp010::MessageRelease {
        transfers: Some(range(0, 9)),
        set_redelivered: false,
    };
    assert!(transfer_bodies(&c.exchange(command(1, release, false))).is_empty());
    let again = c.exchange(control(1, completed(0, 9)));
    assert_eq!(transfer_bodies(&again), bodies_of(&names));
}

/// Each transfer in `out`: its header segment, its body, and whether it came with a body
/// segment.
fn transfer_segments(mut out: BytesMut) -> Vec<(Option<Bytes>, Bytes, bool)> {
    let mut assembler = Assembler::new(1 << 20);
    let mut found = Vec::new();
    while let Some(frame) = decode_frame(&mut out, MAX_FRAME).expect("well-formed output") {
        if let Some(Incoming::Command {
            command: Command::MessageTransfer(_),
            message_header,
            body,
            body_segment,
            ..
        }) = assembler.push(frame).expect("assembles")
        {
            found.push((message_header, body, body_segment));
        }
    }
    found
}

/// Each transfer in `out`: its body, and whether it came with a body segment.
fn body_segments(out: BytesMut) -> Vec<(Bytes, bool)> {
    transfer_segments(out)
        .into_iter()
        .map(|(_, body, segment)| (body, segment))
        .collect()
}

#[tokio::test]
async fn an_empty_body_segment_is_delivered_as_one_and_no_body_as_none() {
    // qpid-python's message.test_empty_body: the consumer must see "", not None.
    let mut c = open().await;
    c.attach(1, "s1");
    c.exchange(command(1, declare("q"), false));
    let header = MessageHeader {
        delivery: Some(DeliveryProperties {
            routing_key: Some(Str::from("q")),
            ..Default::default()
        }),
        properties: None,
        other: Vec::new(),
    };
    let mut raw = BytesMut::new();
    header.encode(&mut raw).expect("header encodes");
    let transfer = MessageTransfer {
        destination: Some(Str::from("")),
        accept_mode: Some(AcceptMode::None),
        acquire_mode: Some(AcquireMode::PreAcquired),
    };
    let mut out = BytesMut::new();
    ferry_amqp010::write_transfer_with_body_segment(
        &mut out, 1, &transfer, false, &raw, b"", MAX_FRAME,
    )
    .expect("transfer encodes");
    c.send(&out);
    c.transfer(1, "", "q", b"");
    c.exchange(command(1, subscribe_to("q", "d"), false));
    c.exchange(command(1, flow("d", CreditUnit::Byte, u32::MAX), false));
    c.send(&command(1, flow("d", CreditUnit::Message, 2), false));
    let got = body_segments(c.take_output());
    assert_eq!(got, [(Bytes::new(), true), (Bytes::new(), false)]);
}

#[tokio::test]
async fn another_sessions_exclusive_queue_follows_qpidds_rules() {
    // qpidd: only an exclusive declare, an acquiring subscribe, bind and delete are locked;
    // passive and plain declares, browsing and purging are allowed.
    let mut c = open().await;
    c.attach(1, "owner");
    let exclusive = |name: &str, passive: bool| QueueDeclare {
        queue: Some(Str::from(name)),
        exclusive: true,
        passive,
        ..Default::default()
    };
    let mine = c.exchange(command(1, exclusive("x", false), true));
    assert_eq!(exception(&mine), None, "{mine:?}");
    let passive = QueueDeclare {
        passive: true,
        ..declare("x")
    };
    let browse = MessageSubscribe {
        acquire_mode: Some(AcquireMode::NotAcquired),
        ..subscribe_to("x", "b")
    };
    let bind = ferry_amqp010::ExchangeBind {
        queue: Some(Str::from("x")),
        exchange: Some(Str::from("amq.direct")),
        binding_key: Some(Str::from("k")),
        arguments: None,
    };
    let purge = ferry_amqp010::QueuePurge {
        queue: Some(Str::from("x")),
    };
    let delete = ferry_amqp010::QueueDelete {
        queue: Some(Str::from("x")),
        ..Default::default()
    };
    assert_eq!(outcome(&mut c, 2, declare("x")), None);
    assert_eq!(outcome(&mut c, 3, passive), None);
    assert_eq!(outcome(&mut c, 4, browse), None);
    assert_eq!(outcome(&mut c, 5, purge), None);
    let locked = Some(ErrorCode::ResourceLocked);
    assert_eq!(outcome(&mut c, 6, exclusive("x", false)), locked);
    assert_eq!(outcome(&mut c, 7, exclusive("x", true)), locked);
    assert_eq!(outcome(&mut c, 8, subscribe_to("x", "a")), locked);
    assert_eq!(outcome(&mut c, 9, bind), locked);
    assert_eq!(outcome(&mut c, 10, delete), locked);
    // The owner's passive exclusive declare is fine.
    let again = c.exchange(command(1, exclusive("x", true), true));
    assert_eq!(exception(&again), None, "{again:?}");

    // A queue with a consumer cannot be made exclusive; passive + exclusive never claims.
    c.exchange(command(1, declare("n"), true));
    c.exchange(command(1, subscribe_to("n", "d"), true));
    assert_eq!(outcome(&mut c, 11, exclusive("n", false)), locked);
    c.exchange(command(1, declare("p"), true));
    assert_eq!(outcome(&mut c, 12, exclusive("p", true)), locked);
}

#[tokio::test]
async fn a_timed_auto_delete_queue_outlives_its_session_by_the_timeout() {
    // qpid-python's extensions.test_timed_autodelete.
    let mut c = open().await;
    c.attach(1, "s1");
    c.attach(2, "another-session");
    let mut args = ferry_amqp010::Map::new();
    args.insert("qpid.auto_delete_timeout", ferry_amqp010::Value::Uint32(3));
    let timed = QueueDeclare {
        exclusive: true,
        auto_delete: true,
        arguments: Some(args),
        ..declare("t")
    };
    assert_eq!(exception(&c.exchange(command(2, timed, true))), None);
    let detach = SessionDetach {
        name: Some(Bytes::from_static(b"another-session")),
    };
    c.exchange(control(2, detach));
    let broker = c.conn.broker().clone();
    let start = ferry_core::now_ms();
    assert!(broker.queue("t").is_some(), "kept for the timeout");
    let due = broker.expire_unused_queues_at(start).expect("a deadline");
    assert!(due >= start + 3000 - 100, "{due} vs {start}");
    broker.expire_unused_queues_at(due);
    assert!(broker.queue("t").is_none());
}

#[tokio::test]
async fn a_no_local_queue_keeps_out_what_its_owners_connection_publishes() {
    // qpid-python's message.test_no_local: two sessions of one connection publish, another
    // connection publishes through amq.fanout.
    let services = services(ServerConfig::default());
    let mut c = open_on(services.clone(), 0).await;
    let mut other = open_on(services, 0).await;
    c.attach(1, "s1");
    c.attach(2, "s2");
    other.attach(1, "elsewhere");
    let mut args = ferry_amqp010::Map::new();
    args.insert("no-local", ferry_amqp010::Value::Str16(Str::from("true")));
    let excl = |name: &str, args: Option<ferry_amqp010::Map>| QueueDeclare {
        exclusive: true,
        auto_delete: true,
        arguments: args,
        ..declare(name)
    };
    c.exchange(command(1, excl("test-queue-1a", None), true));
    c.exchange(command(1, excl("test-queue-1b", Some(args)), true));
    for q in ["test-queue-1a", "test-queue-1b"] {
        c.transfer(1, "", q, b"deliver-me");
        c.transfer(2, "", q, b"dont-deliver-me");
        let bind = ferry_amqp010::ExchangeBind {
            queue: Some(Str::from(q)),
            exchange: Some(Str::from("amq.fanout")),
            binding_key: Some(Str::from("")),
            arguments: None,
        };
        c.exchange(command(1, bind, true));
    }
    other.transfer(1, "amq.fanout", "", b"i-am-not-local");
    let broker = c.conn.broker().clone();
    assert_eq!(
        broker.queue("test-queue-1a").unwrap().queued_bodies().len(),
        3
    );
    assert_eq!(
        broker.queue("test-queue-1b").unwrap().queued_bodies(),
        [Bytes::from_static(b"i-am-not-local")]
    );
}

#[tokio::test]
async fn a_sequencing_queue_numbers_its_messages_in_an_application_header() {
    // qpid-python's new_api.SequenceNumberTests.test_get_sequence_number.
    let mut c = open().await;
    c.attach(1, "s1");
    let mut args = ferry_amqp010::Map::new();
    args.insert(
        "qpid.queue_msg_sequence",
        ferry_amqp010::Value::Str16(Str::from("k")),
    );
    let seq = QueueDeclare {
        arguments: Some(args),
        ..declare("q")
    };
    c.exchange(command(1, seq, true));
    c.transfer(1, "", "q", b"one");
    c.transfer(1, "", "q", b"two");
    c.exchange(command(1, subscribe_to("q", "d"), false));
    c.exchange(command(1, flow("d", CreditUnit::Byte, u32::MAX), false));
    c.send(&command(1, flow("d", CreditUnit::Message, 2), false));
    let numbers: Vec<Option<ferry_amqp010::Value>> = transfer_segments(c.take_output())
        .into_iter()
        .map(|(header, _, _)| {
            let header = MessageHeader::decode(header.expect("a header")).expect("decodes");
            let app = header.properties?.application_headers?;
            app.get("k").cloned()
        })
        .collect();
    use ferry_amqp010::Value::Uint32;
    assert_eq!(numbers, [Some(Uint32(1)), Some(Uint32(2))]);
}

#[tokio::test]
async fn a_deleted_queue_sends_acquired_messages_to_its_alternate_and_keeps_the_subscription() {
    // qpid-python's new_api.test_qpid_3481_acquired_to_alt_exchange_2_consumers.
    let mut c = open().await;
    c.attach(1, "sess1");
    c.attach(2, "sess2");
    c.attach(4, "sess4");
    let with_alt = QueueDeclare {
        alternate_exchange: Some(Str::from("amq.fanout")),
        ..declare("test_acquired")
    };
    c.exchange(command(1, with_alt, true));
    c.exchange(command(4, declare("alt"), true));
    let bind = ferry_amqp010::ExchangeBind {
        queue: Some(Str::from("alt")),
        exchange: Some(Str::from("amq.fanout")),
        binding_key: Some(Str::from("")),
        arguments: None,
    };
    c.exchange(command(4, bind, true));
    for body in ["1", "2", "3", "4", "5"] {
        c.transfer(1, "", "test_acquired", body.as_bytes());
    }
    c.exchange(command(2, subscribe_to("test_acquired", "rx"), false));
    c.exchange(command(2, flow("rx", CreditUnit::Byte, u32::MAX), false));
    let got = c.exchange(command(2, flow("rx", CreditUnit::Message, 3), false));
    assert_eq!(transfer_bodies(&got), bodies_of(&["1", "2", "3"]));
    let delete = ferry_amqp010::QueueDelete {
        queue: Some(Str::from("test_acquired")),
        ..Default::default()
    };
    assert_eq!(exception(&c.exchange(command(1, delete, true))), None);
    let broker = c.conn.broker().clone();
    let alt = broker.queue("alt").unwrap();
    assert_eq!(alt.queued_bodies(), bodies_of(&["1", "2", "3", "4", "5"]));
    // The consumer's session lets go of its deliveries and its subscription: no error,
    // nothing rerouted twice.
    let release = ferry_amqp010::MessageRelease {
        transfers: Some(range(0, 2)),
        set_redelivered: true,
    };
    assert_eq!(exception(&c.exchange(command(2, release, true))), None);
    let cancel = ferry_amqp010::MessageCancel {
        destination: Some(Str::from("rx")),
    };
    assert_eq!(exception(&c.exchange(command(2, cancel, true))), None);
    assert_eq!(alt.message_count(), 5);
}

#[tokio::test]
async fn a_subscription_waiting_for_messages_fails_its_session_when_its_queue_is_deleted() {
    // qpidd: the next dispatch to a consumer with credit finds the queue deleted (408).
    let mut c = open().await;
    c.attach(1, "deleter");
    c.attach(2, "waiting");
    c.attach(3, "idle");
    c.exchange(command(1, declare("q"), true));
    c.exchange(command(2, subscribe_to("q", "w"), false));
    c.exchange(command(2, flow("w", CreditUnit::Byte, u32::MAX), false));
    c.exchange(command(2, flow("w", CreditUnit::Message, 10), false));
    c.exchange(command(3, subscribe_to("q", "i"), true));
    let delete = ferry_amqp010::QueueDelete {
        queue: Some(Str::from("q")),
        ..Default::default()
    };
    let out = c.exchange(command(1, delete, true));
    let failed: Vec<(u16, Option<ErrorCode>)> = out
        .iter()
        .filter_map(|i| match i {
            Item::Command(ch, Command::ExecutionException(e), _) => Some((*ch, e.error_code)),
            _ => None,
        })
        .collect();
    assert_eq!(failed, [(2, Some(ErrorCode::ResourceDeleted))], "{out:?}");
    // The idle subscription stays: flow on it is resource-deleted, cancel succeeds.
    let cancel = ferry_amqp010::MessageCancel {
        destination: Some(Str::from("i")),
    };
    assert_eq!(exception(&c.exchange(command(3, cancel, true))), None);
    c.attach(4, "late");
    c.exchange(command(4, declare("q2"), true));
    c.exchange(command(4, subscribe_to("q2", "l"), true));
    let delete = ferry_amqp010::QueueDelete {
        queue: Some(Str::from("q2")),
        ..Default::default()
    };
    c.exchange(command(1, delete, true));
    let late = c.exchange(command(4, flow("l", CreditUnit::Message, 1), true));
    assert_eq!(exception(&late), Some(ErrorCode::ResourceDeleted));
}

// Helpers shared by the topic modules.

/// Every execution.exception in `items`, with its channel.
fn exceptions(items: &[Item]) -> Vec<(u16, ferry_amqp010::ExecutionException)> {
    items
        .iter()
        .filter_map(|i| match i {
            Item::Command(ch, Command::ExecutionException(e), _) => Some((*ch, e.clone())),
            _ => None,
        })
        .collect()
}

/// The one execution.exception in `items`: its code, the command it names, and its text.
#[track_caller]
fn failure(items: &[Item]) -> (ErrorCode, u32, String) {
    match &exceptions(items)[..] {
        [(_, e)] => (
            e.error_code.expect("an error code"),
            e.command_id.expect("a command id"),
            e.description
                .as_ref()
                .map(|d| d.to_str_lossy().into_owned())
                .unwrap_or_default(),
        ),
        other => panic!("expected one exception: {other:?} in {items:?}"),
    }
}

/// The one execution.result in `items`: the command it answers and its value as `T`.
#[track_caller]
fn result<T: ferry_amqp010::CodedStruct>(items: &[Item]) -> (u32, T) {
    let found: Vec<_> = items
        .iter()
        .filter_map(|i| match i {
            Item::Command(_, Command::ExecutionResult(r), _) => Some(r),
            _ => None,
        })
        .collect();
    let [r] = &found[..] else {
        panic!("expected one result: {items:?}");
    };
    let value = r.value.as_ref().expect("a value");
    (
        r.command_id.expect("a command id"),
        value.decode_as().expect("the expected result struct"),
    )
}

/// The sets of the session.completed controls on `channel` in `items`, in order.
fn completions(items: &[Item], channel: u16) -> Vec<SequenceSet> {
    items
        .iter()
        .filter_map(|i| match i {
            Item::Control(ch, Control::SessionCompleted(c)) if *ch == channel => {
                Some(c.commands.clone().unwrap_or_default())
            }
            _ => None,
        })
        .collect()
}

/// The names of the controls and commands in `items`, in order.
fn names(items: &[Item]) -> Vec<&'static str> {
    items
        .iter()
        .map(|i| match i {
            Item::Control(_, c) => c.name(),
            Item::Command(_, c, _) => c.name(),
        })
        .collect()
}

/// A transfer the broker sent: the transfer command, its decoded header and body.
#[derive(Debug)]
struct Delivered {
    channel: u16,
    transfer: MessageTransfer,
    header: MessageHeader,
    body: Bytes,
}

impl Delivered {
    fn delivery(&self) -> DeliveryProperties {
        self.header.delivery.clone().unwrap_or_default()
    }

    fn redelivered(&self) -> bool {
        self.delivery().redelivered
    }
}

/// The transfers in `out` with their headers decoded; everything else is skipped.
fn delivered(mut out: BytesMut) -> Vec<Delivered> {
    let mut assemblers: Vec<Assembler> = Vec::new();
    let mut found = Vec::new();
    while let Some(frame) = decode_frame(&mut out, MAX_FRAME).expect("well-formed output") {
        let channel = frame.header.channel;
        while assemblers.len() <= usize::from(channel) {
            assemblers.push(Assembler::new(1 << 20));
        }
        if let Some(Incoming::Command {
            command: Command::MessageTransfer(transfer),
            message_header,
            body,
            ..
        }) = assemblers[usize::from(channel)]
            .push(frame)
            .expect("assembles")
        {
            let header = message_header
                .map(|h| MessageHeader::decode(h).expect("header decodes"))
                .unwrap_or(MessageHeader {
                    delivery: None,
                    properties: None,
                    other: Vec::new(),
                });
            found.push(Delivered {
                channel,
                transfer,
                header,
                body,
            });
        }
    }
    found
}

/// A header routing by `key`.
/// `header` as the broker delivers it after receiving it through `exchange`: the broker
/// sets delivery-properties.exchange on receipt.
fn received_through(mut header: MessageHeader, exchange: &str) -> MessageHeader {
    header
        .delivery
        .get_or_insert_with(Default::default)
        .exchange = Some(Str::from(exchange));
    header
}

fn bind(queue: &str, exchange: &str, key: &str) -> ExchangeBind {
    ExchangeBind {
        queue: Some(Str::from(queue)),
        exchange: Some(Str::from(exchange)),
        binding_key: Some(Str::from(key)),
        arguments: None,
    }
}

fn keyed(key: &str) -> MessageHeader {
    MessageHeader {
        delivery: Some(DeliveryProperties {
            routing_key: Some(Str::from(key)),
            ..Default::default()
        }),
        properties: None,
        other: Vec::new(),
    }
}

/// The frames of a transfer to `exchange` with `header` and `body` (no body segment when
/// `body` is empty).
fn transfer_frames(
    channel: u16,
    exchange: &str,
    header: &MessageHeader,
    body: &[u8],
    sync: bool,
) -> BytesMut {
    let mut raw = BytesMut::new();
    header.encode(&mut raw).expect("header encodes");
    let transfer = MessageTransfer {
        destination: Some(Str::from(exchange)),
        accept_mode: Some(AcceptMode::None),
        acquire_mode: Some(AcquireMode::PreAcquired),
    };
    let mut out = BytesMut::new();
    write_transfer(&mut out, channel, &transfer, sync, &raw, body, MAX_FRAME)
        .expect("transfer encodes");
    out
}

impl Client {
    /// Sends `cmd` with the sync flag and returns what came back.
    fn call(&mut self, channel: u16, cmd: impl Into<Command>) -> Vec<Item> {
        self.exchange(command(channel, cmd, true))
    }

    /// Sends a transfer with `header`; returns what came back.
    fn publish(
        &mut self,
        channel: u16,
        exchange: &str,
        header: &MessageHeader,
        body: &[u8],
    ) -> Vec<Item> {
        self.exchange(transfer_frames(channel, exchange, header, body, false))
    }

    /// Subscribes `destination` to `queue` with the given modes (window flow, no credit).
    fn subscribe(
        &mut self,
        channel: u16,
        queue: &str,
        destination: &str,
        accept: AcceptMode,
        acquire: AcquireMode,
    ) {
        let s = MessageSubscribe {
            accept_mode: Some(accept),
            acquire_mode: Some(acquire),
            ..subscribe_to(queue, destination)
        };
        let out = self.call(channel, s);
        assert_eq!(exception(&out), None, "{out:?}");
    }

    /// Grants `destination` unlimited bytes and `messages` more messages; returns the
    /// deliveries that made.
    fn grant(&mut self, channel: u16, destination: &str, messages: u32) -> Vec<Delivered> {
        self.send(&command(
            channel,
            flow(destination, CreditUnit::Byte, u32::MAX),
            false,
        ));
        self.send(&command(
            channel,
            flow(destination, CreditUnit::Message, messages),
            false,
        ));
        delivered(self.take_output())
    }

    /// Takes what the connection wrote and returns the transfers in it.
    fn deliveries(&mut self) -> Vec<Delivered> {
        delivered(self.take_output())
    }
}

fn set(ids: &[u32]) -> SequenceSet {
    let mut s = SequenceSet::new();
    for id in ids {
        s.add(*id);
    }
    s
}

fn bodies(got: &[Delivered]) -> Vec<&[u8]> {
    got.iter().map(|d| &d.body[..]).collect()
}
