//! The AMQP 0-10 connection: one task per socket running the connection, session and
//! execution layers over the broker core.
//!
//! The task reads whatever the socket holds, processes every complete frame, appends all
//! replies and deliveries to one outbound buffer, and writes it with as few system calls as
//! the socket allows. Deliveries from queues arrive through the connection's `Outbox`.

mod commands;
mod convert;
mod deaths;
mod durable;
mod handshake;
mod outgoing;
mod session;
mod tx;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use ferry_amqp010::{
    decode_frame, write_control_framed, Array, Assembler, AssemblyError, CloseCode, Command,
    CommandErrorKind, ConnectionClose, ConnectionCloseOk, ConnectionHeartbeat, ConnectionOpenOk,
    ConnectionSecure, Control, DetachCode, ErrorCode, Incoming, SessionAttached, SessionDetached,
    SessionTimeout, FRAME_HEADER_SIZE, MIN_MAX_FRAME_SIZE,
};
use ferry_core::{Broker, ConsumerId, Outbox, OutboxItem};
use tracing::{debug, warn};

use crate::access::ClientAccess;
use crate::auth::{AuthOutcome, AuthTask, Login, LoginStep};
use crate::config::ServerConfig;
use crate::connection::{Peer, Services};
use crate::io::{self, CloseReason, ProtocolConnection, Transport, READ_CHUNK};
use crate::listener::Shutdown;
use convert::Exception;
use session::{Env, Session, SessionState};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    AwaitStartOk,
    /// A SASL step is running; nothing is read until it ends.
    Authenticating,
    AwaitSecureOk,
    AwaitTuneOk,
    AwaitOpen,
    Open,
    /// We sent connection.close; only close-ok matters now.
    Closing,
    /// Done: flush what is buffered and drop the socket.
    Finished,
}

/// A fault that ends the connection with connection.close.
#[derive(Debug)]
struct ConnectionFault {
    code: CloseCode,
    text: String,
}

impl ConnectionFault {
    fn framing(text: impl Into<String>) -> ConnectionFault {
        ConnectionFault {
            code: CloseCode::FramingError,
            text: text.into(),
        }
    }
}

struct Channel {
    assembler: Assembler,
    session: Option<Session>,
}

struct Connection {
    broker: Arc<Broker>,
    config: Arc<ServerConfig>,
    peer: SocketAddr,
    outbox: Arc<Outbox>,
    out: BytesMut,
    phase: Phase,
    max_frame: usize,
    channel_max: u16,
    heartbeat: u16,
    channels: Vec<Option<Box<Channel>>>,
    consumers: HashMap<ConsumerId, u16>,
    /// Channels whose sessions completed commands in the current read batch.
    dirty: Vec<u16>,
    /// Channels whose sessions hold commands waiting for the journal.
    waiting_sessions: Vec<u16>,
    /// The highest sync point we asked the journal to wake us for.
    sync_requested: ferry_core::SyncPoint,
    closing_since: Option<Instant>,
    login: Login,
    access: ClientAccess,
    /// A message.transfer has been received: resource alarms pause this connection.
    publisher: bool,
}

/// Serves one connection whose 0-10 protocol header has been read and answered.
pub async fn run<T: Transport>(
    stream: T,
    peer: Peer,
    services: Services,
    shutdown: Shutdown,
) -> std::io::Result<()> {
    let mut conn = Connection::new(services, peer);
    let mechanisms = conn.login.offered();
    conn.write_control(0, handshake::start(&mechanisms).into());
    io::drive(stream, &mut conn, shutdown).await
}

impl ProtocolConnection for Connection {
    fn config(&self) -> &ServerConfig {
        &self.config
    }

    fn outbox(&self) -> &Arc<Outbox> {
        &self.outbox
    }

    fn out(&mut self) -> &mut BytesMut {
        &mut self.out
    }

    fn on_outbox_item(&mut self, item: OutboxItem) {
        Connection::on_outbox_item(self, item);
    }

    fn process(&mut self, inbuf: &mut BytesMut) {
        Connection::process(self, inbuf);
    }

    fn is_open(&self) -> bool {
        self.phase == Phase::Open
    }

    fn is_finished(&self) -> bool {
        self.phase == Phase::Finished
    }

    fn heartbeat(&self) -> u16 {
        self.heartbeat
    }

    fn closing_since(&self) -> Option<Instant> {
        self.closing_since
    }

    fn write_heartbeat(&mut self) {
        self.write_control(0, ConnectionHeartbeat {}.into());
    }

    fn close(&mut self, reason: CloseReason) {
        let text = match reason {
            CloseReason::HandshakeTimeout => "handshake timed out",
            CloseReason::Shutdown => "broker shutting down",
        };
        self.fault(ConnectionFault {
            code: CloseCode::ConnectionForced,
            text: text.into(),
        });
    }

    fn teardown(&mut self) {
        Connection::teardown(self);
    }

    fn broker(&self) -> &Broker {
        &self.broker
    }

    fn is_publisher(&self) -> bool {
        self.publisher
    }

    fn set_flow_blocked(&mut self, blocked: bool) {
        // 0-10 has no notification: the publisher sees TCP back-pressure, and transfers
        // already read stay incomplete until reading resumes (qpidd's producer flow control).
        debug!(peer = %self.peer, blocked, "publisher flow control");
    }

    fn take_auth_task(&mut self) -> Option<AuthTask> {
        self.login.take_task()
    }

    fn on_auth_done(&mut self, outcome: AuthOutcome) {
        if self.phase != Phase::Authenticating {
            return;
        }
        match self.login.finish(outcome) {
            LoginStep::Challenge(challenge) => {
                let secure = ConnectionSecure {
                    challenge: Some(challenge.into()),
                };
                self.write_control(0, secure.into());
                self.phase = Phase::AwaitSecureOk;
            }
            LoginStep::Success => {
                self.write_control(0, handshake::tune(&self.config).into());
                self.phase = Phase::AwaitTuneOk;
            }
            LoginStep::Failure => {
                // 0-10's close codes have no not-allowed; connection-forced is what qpidd
                // sends, and the text says what happened (never why: that is in our log).
                self.fault(ConnectionFault {
                    code: CloseCode::ConnectionForced,
                    text: "not-allowed: authentication failed".into(),
                });
            }
        }
    }
}

impl Connection {
    fn new(services: Services, peer: Peer) -> Connection {
        let Services {
            broker,
            config,
            auth,
        } = services;
        Connection {
            access: ClientAccess::new(&config, peer.addr),
            publisher: false,
            max_frame: usize::from(config.max_frame_size),
            channel_max: config.channel_max,
            broker,
            config,
            peer: peer.addr,
            outbox: Outbox::new(),
            out: BytesMut::with_capacity(READ_CHUNK),
            phase: Phase::AwaitStartOk,
            heartbeat: 0,
            channels: Vec::new(),
            consumers: HashMap::new(),
            dirty: Vec::new(),
            waiting_sessions: Vec::new(),
            sync_requested: ferry_core::SyncPoint::default(),
            closing_since: None,
            login: Login::new(auth, peer.addr, peer.client_identity, false),
        }
    }

    fn write_control(&mut self, channel: u16, control: Control) {
        if let Err(e) = write_control_framed(&mut self.out, channel, &control, self.max_frame) {
            warn!("cannot encode {}: {e}", control.name());
        }
    }

    /// Processes every complete frame in `inbuf`, then reports completions once per session.
    fn process(&mut self, inbuf: &mut BytesMut) {
        while matches!(
            self.phase,
            Phase::AwaitStartOk
                | Phase::AwaitSecureOk
                | Phase::AwaitTuneOk
                | Phase::AwaitOpen
                | Phase::Open
                | Phase::Closing
        ) {
            let frame = match decode_frame(inbuf, self.max_frame) {
                Ok(Some(frame)) => frame,
                Ok(None) => break,
                Err(e) => {
                    self.fault(ConnectionFault::framing(e.to_string()));
                    break;
                }
            };
            let channel = frame.header.channel;
            if self.phase == Phase::Closing {
                // Only close-ok (on channel 0) matters; decode it without session state.
                if channel == 0 {
                    if let Ok(Some(Incoming::Control(Control::ConnectionCloseOk(_)))) = self
                        .channel_mut(0)
                        .map(|c| c.assembler.push(frame))
                        .transpose()
                        .map(Option::flatten)
                    {
                        self.phase = Phase::Finished;
                    }
                }
                continue;
            }
            if channel >= self.channel_max.max(1) {
                self.fault(ConnectionFault::framing(format!(
                    "channel {channel} exceeds channel-max {}",
                    self.channel_max
                )));
                break;
            }
            let pushed = match self.channel_mut(channel) {
                Some(c) => c.assembler.push(frame),
                None => break,
            };
            match pushed {
                Ok(None) => {}
                Ok(Some(incoming)) => self.on_incoming(channel, incoming),
                Err(AssemblyError::Command(e)) => {
                    let codes = (e.class_code.unwrap_or(0), e.code.unwrap_or(0));
                    let exception = match &e.error {
                        CommandErrorKind::MessageTooLarge { .. } => {
                            Exception::new(ErrorCode::ResourceLimitExceeded, e.error.to_string())
                        }
                        CommandErrorKind::Decode(d) => {
                            let code = if matches!(
                                d.root(),
                                ferry_amqp010::DecodeError::UnknownCommand { .. }
                            ) {
                                ErrorCode::NotImplemented
                            } else {
                                ErrorCode::InvalidArgument
                            };
                            Exception {
                                code,
                                description: e.to_string(),
                                field_index: d.field_index(),
                            }
                        }
                    };
                    self.command_failed(channel, codes, exception);
                }
                Err(e) => {
                    self.fault(ConnectionFault::framing(e.to_string()));
                    break;
                }
            }
        }
        for channel in std::mem::take(&mut self.dirty) {
            let max_frame = self.max_frame;
            if let Some(Some(c)) = self.channels.get_mut(usize::from(channel)) {
                if let Some(s) = c.session.as_mut() {
                    s.flush_completion(&mut self.out, max_frame, false);
                }
            }
        }
        self.request_sync_wakeup();
    }

    fn channel_mut(&mut self, channel: u16) -> Option<&mut Channel> {
        let index = usize::from(channel);
        if index >= self.channels.len() {
            self.channels.resize_with(index + 1, || None);
        }
        let max_message = self.config.max_message_size;
        let slot = self.channels.get_mut(index)?;
        Some(slot.get_or_insert_with(|| {
            Box::new(Channel {
                assembler: Assembler::new(max_message),
                session: None,
            })
        }))
    }

    fn on_incoming(&mut self, channel: u16, incoming: Incoming) {
        match incoming {
            Incoming::Control(control) => self.on_control(channel, control),
            Incoming::Command {
                header,
                command,
                message_header,
                body,
            } => self.on_command(channel, header.sync, command, message_header, body),
        }
    }

    fn on_control(&mut self, channel: u16, control: Control) {
        match control {
            Control::ConnectionStartOk(c) if self.phase == Phase::AwaitStartOk && channel == 0 => {
                let mechanism = c.mechanism.unwrap_or_default();
                let response = c.response.map(|r| r.to_vec()).unwrap_or_default();
                self.login.start(mechanism.as_bytes(), response);
                self.phase = Phase::Authenticating;
            }
            Control::ConnectionSecureOk(c)
                if self.phase == Phase::AwaitSecureOk && channel == 0 =>
            {
                let response = c.response.map(|r| r.to_vec()).unwrap_or_default();
                if self.login.resume(response) {
                    self.phase = Phase::Authenticating;
                }
            }
            Control::ConnectionTuneOk(c) if self.phase == Phase::AwaitTuneOk && channel == 0 => {
                let offered = usize::from(self.config.max_frame_size);
                let frame = c.max_frame_size.map(usize::from).unwrap_or(offered);
                if frame < MIN_MAX_FRAME_SIZE.min(offered) || frame > offered {
                    self.fault(ConnectionFault::framing(format!(
                        "tune-ok max-frame-size {frame} outside [{MIN_MAX_FRAME_SIZE}, {offered}]"
                    )));
                    return;
                }
                self.max_frame = frame.max(FRAME_HEADER_SIZE + 1);
                self.channel_max = c
                    .channel_max
                    .filter(|&m| m > 0)
                    .unwrap_or(self.config.channel_max)
                    .min(self.config.channel_max);
                self.heartbeat = c.heartbeat.unwrap_or(0).min(self.config.heartbeat_max);
                self.phase = Phase::AwaitOpen;
            }
            Control::ConnectionOpen(_) if self.phase == Phase::AwaitOpen && channel == 0 => {
                if let Err(reason) = self.access.admit(self.login.user()) {
                    self.fault(ConnectionFault {
                        code: CloseCode::ConnectionForced,
                        text: reason,
                    });
                    return;
                }
                // One virtual host: any name is accepted, as qpidd does.
                let open_ok = ConnectionOpenOk {
                    known_hosts: Some(Array::of_str16(std::iter::empty::<&str>())),
                };
                self.write_control(0, open_ok.into());
                self.phase = Phase::Open;
            }
            Control::ConnectionHeartbeat(_) => {}
            Control::ConnectionClose(c) => {
                debug!(peer = %self.peer, code = ?c.reply_code, "client closed the connection");
                self.write_control(0, ConnectionCloseOk {}.into());
                self.phase = Phase::Finished;
            }
            Control::ConnectionCloseOk(_) => self.phase = Phase::Finished,
            c if c.class_code() == ConnectionClose::CLASS_CODE => {
                self.fault(ConnectionFault::framing(format!(
                    "unexpected {} on channel {channel}",
                    c.name()
                )));
            }
            _ if self.phase != Phase::Open => {
                self.fault(ConnectionFault::framing(
                    "session control before connection.open-ok",
                ));
            }
            Control::SessionAttach(c) => self.attach(channel, c.name.unwrap_or_default()),
            other => self.on_session_control(channel, other),
        }
    }

    fn attach(&mut self, channel: u16, name: Bytes) {
        let max_frame = self.max_frame;
        let attached_elsewhere = self.channels.iter().enumerate().any(|(i, c)| {
            i != usize::from(channel)
                && c.as_ref()
                    .and_then(|c| c.session.as_ref())
                    .is_some_and(|s| s.name == name)
        });
        let owner = self.broker.next_owner_id();
        let window = ferry_core::SettleWindow::with_limit(self.config.session_max_unacked);
        let Some(c) = self.channel_mut(channel) else {
            return;
        };
        let mut out = BytesMut::new();
        match &c.session {
            Some(s) if s.name == name => {
                // Idempotent re-attach.
                s.write_control(
                    &mut out,
                    max_frame,
                    SessionAttached { name: Some(name) }.into(),
                );
            }
            Some(_) | None if attached_elsewhere || c.session.is_some() => {
                let detached = SessionDetached {
                    name: Some(name),
                    code: Some(DetachCode::SessionBusy),
                };
                let _ = write_control_framed(&mut out, channel, &detached.into(), max_frame);
            }
            _ => {
                let mut session = Session::new(name.clone(), channel, owner);
                session.settle_window = window;
                session.write_control(
                    &mut out,
                    max_frame,
                    SessionAttached { name: Some(name) }.into(),
                );
                session.write_attached_command_point(&mut out, max_frame);
                c.session = Some(session);
            }
        }
        self.out.unsplit(out);
    }

    fn on_session_control(&mut self, channel: u16, control: Control) {
        let max_frame = self.max_frame;
        let Some(Some(c)) = self.channels.get_mut(usize::from(channel)) else {
            return;
        };
        let Some(session) = c.session.as_mut() else {
            // 0-10: controls for a session that is not attached get detached(not-attached).
            if !matches!(control, Control::SessionDetached(_)) {
                let detached = SessionDetached {
                    name: None,
                    code: Some(DetachCode::NotAttached),
                };
                let _ = write_control_framed(&mut self.out, channel, &detached.into(), max_frame);
            }
            return;
        };
        match control {
            Control::SessionDetach(d) => {
                let name = d.name.unwrap_or_default();
                let code = if name == session.name {
                    DetachCode::Normal
                } else {
                    DetachCode::NotAttached
                };
                let detached = SessionDetached {
                    name: Some(name),
                    code: Some(code),
                };
                session.write_control(&mut self.out, max_frame, detached.into());
                self.end_session(channel);
            }
            Control::SessionDetached(_) => self.end_session(channel),
            Control::SessionRequestTimeout(t) => {
                // Sessions do not outlive their connection yet, so the timeout we grant is 0.
                let _ = t;
                session.write_control(
                    &mut self.out,
                    max_frame,
                    SessionTimeout { timeout: Some(0) }.into(),
                );
            }
            Control::SessionTimeout(_) => {}
            Control::SessionCommandPoint(p) => {
                session.set_command_point(p.command_id.unwrap_or(0));
            }
            Control::SessionCompleted(c) => {
                if let Some(commands) = c.commands {
                    session.peer_completed(&commands);
                    if c.timely_reply {
                        session.write_control(
                            &mut self.out,
                            max_frame,
                            Session::known_completed_reply(commands),
                        );
                    }
                }
            }
            Control::SessionKnownCompleted(k) => {
                if let Some(commands) = k.commands {
                    session.known_completed(&commands);
                }
            }
            Control::SessionFlush(f) => {
                if f.completed {
                    session.flush_completion(&mut self.out, max_frame, true);
                }
                if f.expected || f.confirmed {
                    // Without resumable sessions nothing is ever replayed: an empty set says
                    // exactly that.
                    let empty = ferry_amqp010::SequenceSet::new();
                    if f.expected {
                        let expected = ferry_amqp010::SessionExpected {
                            commands: Some(empty.clone()),
                            fragments: None,
                        };
                        session.write_control(&mut self.out, max_frame, expected.into());
                    }
                    if f.confirmed {
                        let confirmed = ferry_amqp010::SessionConfirmed {
                            commands: Some(empty),
                            fragments: None,
                        };
                        session.write_control(&mut self.out, max_frame, confirmed.into());
                    }
                }
            }
            Control::SessionExpected(_) | Control::SessionConfirmed(_) => {}
            Control::SessionGap(_) => {
                let codes = (0, 0);
                self.command_failed(channel, codes, Exception::not_implemented("session.gap"));
            }
            Control::SessionAttached(_) => {}
            other => {
                self.fault(ConnectionFault::framing(format!(
                    "unexpected {} on channel {channel}",
                    other.name()
                )));
            }
        }
    }

    /// The channel table and what session commands need from the connection, borrowed
    /// side by side.
    fn split(&mut self) -> (&mut Vec<Option<Box<Channel>>>, Env<'_>) {
        let env = Env {
            broker: &self.broker,
            outbox: &self.outbox,
            out: &mut self.out,
            max_frame: self.max_frame,
            consumers: &mut self.consumers,
            access: &self.access,
            config: &self.config,
        };
        (&mut self.channels, env)
    }

    fn on_command(
        &mut self,
        channel: u16,
        sync: bool,
        command: Command,
        header: Option<Bytes>,
        body: Bytes,
    ) {
        let codes = (command.class_code(), command.code());
        if matches!(command, Command::MessageTransfer(_)) {
            self.publisher = true;
        }
        let (channels, mut env) = self.split();
        let Some(Some(c)) = channels.get_mut(usize::from(channel)) else {
            return;
        };
        let Some(session) = c.session.as_mut() else {
            let detached = SessionDetached {
                name: None,
                code: Some(DetachCode::NotAttached),
            };
            let _ = write_control_framed(env.out, channel, &detached.into(), env.max_frame);
            return;
        };
        if session.state == SessionState::Failed {
            return;
        }
        let id = session.next_command_id();
        let waits_for = durable::WaitsFor::of(&command);
        let completed_later = match commands::execute(session, &mut env, id, command, header, body)
        {
            Ok(()) => {
                let point = waits_for.point(session, env.broker);
                match point {
                    Some(point) => {
                        session.wait_for_sync(id, point, sync);
                        if !self.waiting_sessions.contains(&channel) {
                            self.waiting_sessions.push(channel);
                        }
                        false
                    }
                    None => {
                        session.complete(id);
                        if sync {
                            session.flush_completion(env.out, env.max_frame, true);
                        }
                        !sync
                    }
                }
            }
            Err(e) => {
                session.fail(&mut env, id, codes, e);
                false
            }
        };
        if completed_later && !self.dirty.contains(&channel) {
            self.dirty.push(channel);
        }
    }

    /// A command that could not even be decoded still used an id; report it against that id.
    fn command_failed(&mut self, channel: u16, codes: (u8, u8), exception: Exception) {
        let (channels, mut env) = self.split();
        let Some(Some(c)) = channels.get_mut(usize::from(channel)) else {
            return;
        };
        let Some(session) = c.session.as_mut() else {
            return;
        };
        if session.state == SessionState::Failed {
            return;
        }
        let id = session.next_command_id();
        session.fail(&mut env, id, codes, exception);
    }

    fn end_session(&mut self, channel: u16) {
        let max_message = self.config.max_message_size;
        let (channels, mut env) = self.split();
        let Some(Some(c)) = channels.get_mut(usize::from(channel)) else {
            return;
        };
        if let Some(mut session) = c.session.take() {
            session.end(&mut env);
        }
        // A fresh assembler: leftovers of the old session's input must not leak into a new one.
        c.assembler = Assembler::new(max_message);
    }

    fn on_outbox_item(&mut self, item: OutboxItem) {
        match item {
            OutboxItem::Deliver(d) => {
                let session = self
                    .consumers
                    .get(&d.consumer)
                    .and_then(|ch| self.channels.get_mut(usize::from(*ch)))
                    .and_then(|c| c.as_mut())
                    .and_then(|c| c.session.as_mut());
                match session {
                    Some(s) => {
                        s.deliver(&mut self.out, self.max_frame, d);
                    }
                    None => {
                        if d.acquired {
                            d.queue.release([(d.position, d.message)], false);
                        }
                    }
                }
            }
            OutboxItem::Durable => self.on_durable(),
            OutboxItem::ConsumerCancelled { consumer, .. } => {
                // The queue is gone; qpidd leaves the subscription to fail later. Forget it so
                // its destination can be reused.
                if let Some(ch) = self.consumers.remove(&consumer) {
                    if let Some(Some(c)) = self.channels.get_mut(usize::from(ch)) {
                        if let Some(s) = c.session.as_mut() {
                            s.forget_consumer(consumer);
                        }
                    }
                }
            }
        }
    }

    /// Sends connection.close and waits (briefly) for close-ok, ignoring everything else.
    fn fault(&mut self, fault: ConnectionFault) {
        if matches!(self.phase, Phase::Closing | Phase::Finished) {
            return;
        }
        debug!(peer = %self.peer, code = ?fault.code, "closing connection: {}", fault.text);
        let mut text = fault.text;
        text.truncate(255);
        let close = ConnectionClose {
            reply_code: Some(fault.code),
            reply_text: Some(text.into()),
        };
        self.write_control(0, close.into());
        self.phase = Phase::Closing;
        self.closing_since = Some(Instant::now());
        // Nothing more will be processed: release the sessions' messages now.
        self.teardown();
    }

    /// Ends every session: consumers cancelled, unsettled messages back on their queues.
    fn teardown(&mut self) {
        for channel in 0..self.channels.len() {
            if let Ok(channel) = u16::try_from(channel) {
                self.end_session(channel);
            }
        }
        // Deliveries that raced with the teardown go back to their queues too.
        let mut items = Vec::new();
        self.outbox.take(&mut items);
        for item in items {
            if let OutboxItem::Deliver(d) = item {
                if d.acquired {
                    d.queue.release([(d.position, d.message)], false);
                }
            }
        }
    }
}
