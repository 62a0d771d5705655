//! The AMQP 0-10 connection: one task per socket running the connection, session and
//! execution layers over the broker core.
//!
//! The task reads whatever the socket holds, processes every complete frame, appends all
//! replies and deliveries to one outbound buffer, and writes it with as few system calls as
//! the socket allows. Deliveries from queues arrive through the connection's `Outbox`.

mod commands;
mod convert;
mod deaths;
mod dtx;
mod durable;
mod handshake;
mod outgoing;
mod rewrite;
mod sequence;
mod session;
mod trace;
mod tx;

#[cfg(test)]
mod tests;

use crate::shell::outbound::Sink;
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use ferry_amqp010::{
    decode_frame, write_control_framed, Array, Assembler, AssemblyError, CloseCode, Command,
    CommandErrorKind, ConnectionClose, ConnectionCloseOk, ConnectionHeartbeat, ConnectionOpenOk,
    ConnectionSecure, Control, DetachCode, ErrorCode, FrameHeader, Incoming, SegmentType,
    SessionAttached, SessionDetached, SessionTimeout, FRAME_HEADER_SIZE, MIN_MAX_FRAME_SIZE,
};
use ferry_core::{ConsumerId, OutboxItem, SessionStatus};
use tracing::{debug, info, warn};

use crate::auth::LoginStep;
use crate::config::CHECK_UNFINISHED_ABOVE;
use crate::lifecycle::Shutdown;
use crate::shell::{
    driver, CloseReason, Connection, Opened, Peer, Phase, Protocol, Services, Shell,
};
use crate::transport::Transport;
use convert::Exception;
use session::{Env, Session, SessionState};

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

/// The 0-10 side of a connection; the [`Shell`] holds what every protocol has.
pub struct Amqp010 {
    max_frame: usize,
    channel_max: u16,
    /// Negotiated in tune-ok, in force from connection.open.
    heartbeat: u16,
    /// What the client said of itself in start-ok, for management.
    client_properties: Vec<(String, String)>,
    channels: Vec<Option<Box<Channel>>>,
    /// Channels whose sessions completed commands in the current read batch, and whether
    /// one of those commands asked (with sync) for its completion to be reported.
    dirty: Vec<(u16, bool)>,
    /// Channels whose sessions hold commands waiting for the journal.
    waiting_sessions: Vec<u16>,
}

/// A new connection whose 0-10 protocol header has been read and answered:
/// connection.start is queued.
pub fn connection(services: Services, peer: Peer, now: Instant) -> Connection<Amqp010> {
    let protocol = Amqp010 {
        max_frame: usize::from(services.config.max_frame_size),
        channel_max: services.config.channel_max,
        heartbeat: 0,
        client_properties: Vec::new(),
        channels: Vec::new(),
        dirty: Vec::new(),
        waiting_sessions: Vec::new(),
    };
    let shell = Shell::new(services, peer, false, now);
    let mechanisms = shell.login.offered();
    let start = handshake::start(&mechanisms).into();
    let mut conn = Connection::new(shell, protocol);
    conn.protocol.write_control(&mut conn.shell, 0, start);
    conn
}

/// Serves one connection whose 0-10 protocol header has been read and answered.
pub async fn run<T: Transport>(
    stream: T,
    peer: Peer,
    services: Services,
    shutdown: Shutdown,
) -> std::io::Result<()> {
    let mut conn = connection(services, peer, Instant::now());
    driver::drive(stream, &mut conn, shutdown).await
}

/// A control segment in a single frame: what may arrive on a channel without a session.
fn is_whole_control(h: &FrameHeader) -> bool {
    h.segment_type == SegmentType::Control
        && h.first_segment
        && h.last_segment
        && h.first_frame
        && h.last_frame
}

impl Protocol for Amqp010 {
    /// Processes every complete frame in `input`, then reports completions once per session.
    fn process(&mut self, shell: &mut Shell, input: &mut BytesMut) {
        while !matches!(shell.phase, Phase::Authenticating | Phase::Finished) {
            let frame = match decode_frame(input, self.max_frame) {
                Ok(Some(frame)) => frame,
                Ok(None) => break,
                Err(e) => {
                    self.fault(shell, ConnectionFault::framing(e.to_string()));
                    break;
                }
            };
            shell.traffic.frames_in += 1;
            let channel = frame.header.channel;
            if shell.phase == Phase::Closing {
                // Only close-ok (on channel 0) matters; decode it without session state.
                if channel == 0 {
                    if let Ok(Some(Incoming::Control(Control::ConnectionCloseOk(_)))) = self
                        .channel_mut(shell, 0)
                        .map(|c| c.assembler.push(frame))
                        .transpose()
                        .map(Option::flatten)
                    {
                        shell.finish();
                    }
                }
                continue;
            }
            if channel >= self.channel_max.max(1) {
                let text = format!("channel {channel} exceeds channel-max {}", self.channel_max);
                self.fault(shell, ConnectionFault::framing(text));
                break;
            }
            let Some(c) = self.channel_mut(shell, channel) else {
                break;
            };
            if c.session.is_none() && !is_whole_control(&frame.header) {
                // Commands on a channel without a session are dropped (see `on_command`);
                // dropped here, a frame at a time, they are never assembled, so a peer
                // (logged in or not) cannot park a half-sent message on each of its 2,047
                // channels. Only a control can attach a session, and controls fit a frame.
                continue;
            }
            match c.assembler.push(frame) {
                Ok(None) => {
                    if c.assembler.message_so_far() > CHECK_UNFINISHED_ABOVE {
                        self.check_unfinished(shell, channel);
                    }
                }
                Ok(Some(incoming)) => {
                    self.on_incoming(shell, channel, incoming);
                    // Only what a frame completes writes anything, so only then can the
                    // output have filled.
                    if shell.hold_input() {
                        break;
                    }
                }
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
                    self.command_failed(shell, channel, codes, exception);
                }
                Err(e) => {
                    self.fault(shell, ConnectionFault::framing(e.to_string()));
                    break;
                }
            }
        }
        if !self.dirty.is_empty() {
            // Transfers the batch's commands released (message.flow, flush, stop) go out
            // before the completions that cover those commands: qpid.messaging's fetch()
            // takes a completed flush to mean "no more transfers from that credit", as
            // qpidd guarantees by dispatching inside the command.
            self.deliver_waiting(shell);
        }
        for (channel, sync) in std::mem::take(&mut self.dirty) {
            let max_frame = self.max_frame;
            if let Some(Some(c)) = self.channels.get_mut(usize::from(channel)) {
                if let Some(s) = c.session.as_mut() {
                    s.flush_completion(&mut shell.out, max_frame, sync);
                }
            }
        }
        self.request_sync_wakeup(shell);
    }

    fn on_outbox_item(&mut self, shell: &mut Shell, item: OutboxItem) {
        match item {
            OutboxItem::Deliver(d) => {
                let session = shell
                    .consumers
                    .get(&d.consumer)
                    .and_then(|ch| self.channels.get_mut(usize::from(*ch)))
                    .and_then(|c| c.as_mut())
                    .and_then(|c| c.session.as_mut());
                match session {
                    Some(s) => {
                        let sent = s.deliver(
                            Sink {
                                out: &mut shell.out,
                                spliced: &mut shell.spliced,
                            },
                            &mut shell.presettled,
                            self.max_frame,
                            d,
                        );
                        shell.traffic.messages_out += u64::from(sent);
                    }
                    None => {
                        if d.acquired {
                            d.queue.release([(d.position, d.message)], false);
                        }
                    }
                }
            }
            OutboxItem::Durable => self.on_durable(shell),
            OutboxItem::Close { reason } => {
                let fault = ConnectionFault {
                    code: CloseCode::ConnectionForced,
                    text: reason,
                };
                self.fault(shell, fault);
            }
            OutboxItem::ConsumerCancelled {
                consumer,
                queue,
                credit,
                ..
            } => self.queue_deleted(shell, consumer, &queue, credit),
        }
    }

    fn on_login(&mut self, shell: &mut Shell, step: LoginStep) {
        match step {
            LoginStep::Challenge(challenge) => {
                let secure = ConnectionSecure {
                    challenge: Some(challenge.into()),
                };
                self.write_control(shell, 0, secure.into());
                shell.phase = Phase::AwaitSecureOk;
            }
            LoginStep::Success => {
                let tune = handshake::tune(&shell.config).into();
                self.write_control(shell, 0, tune);
                shell.phase = Phase::AwaitTuneOk;
            }
            LoginStep::Failure => {
                // 0-10's close codes have no not-allowed; connection-forced is what qpidd
                // sends, and the text says what happened (never why: that is in our log).
                let fault = ConnectionFault {
                    code: CloseCode::ConnectionForced,
                    text: "not-allowed: authentication failed".into(),
                };
                self.fault(shell, fault);
            }
        }
    }

    fn write_heartbeat(&mut self, shell: &mut Shell) {
        self.write_control(shell, 0, ConnectionHeartbeat {}.into());
    }

    fn close(&mut self, shell: &mut Shell, reason: CloseReason) {
        let text = match reason {
            CloseReason::HandshakeTimeout => "handshake timed out",
            CloseReason::Shutdown => "broker shutting down",
        };
        let fault = ConnectionFault {
            code: CloseCode::ConnectionForced,
            text: text.into(),
        };
        self.fault(shell, fault);
    }

    /// Ends every session: consumers cancelled, unsettled messages back on their queues.
    fn teardown(&mut self, shell: &mut Shell) {
        for channel in 0..self.channels.len() {
            if let Ok(channel) = u16::try_from(channel) {
                self.end_session(shell, channel);
            }
        }
        shell.release_undelivered();
    }

    fn channel_count(&self) -> usize {
        self.channels
            .iter()
            .filter(|c| c.as_ref().is_some_and(|c| c.session.is_some()))
            .count()
    }

    fn sessions(&self) -> Vec<SessionStatus> {
        self.channels
            .iter()
            .filter_map(|c| c.as_ref()?.session.as_ref())
            .map(|s| SessionStatus {
                channel: s.channel,
                name: String::from_utf8_lossy(&s.name).into_owned(),
                owner: s.owner,
                consumers: s.subscription_count(),
                unacked: s.outgoing.unfinished() as u64,
                prefetch: 0,
                transactional: s.tx.is_some(),
                confirms: false,
            })
            .collect()
    }

    fn set_flow_blocked(&mut self, _shell: &mut Shell, _blocked: bool) {
        // 0-10 has no notification: the publisher sees TCP back-pressure, and transfers
        // already read stay incomplete until reading resumes (qpidd's producer flow control).
    }
}

impl Amqp010 {
    /// Writes the deliveries waiting in the outbox now, ahead of what follows.
    fn deliver_waiting(&mut self, shell: &mut Shell) {
        let mut items = Vec::new();
        shell.outbox.take(&mut items);
        for item in items {
            self.on_outbox_item(shell, item);
        }
        shell.presettled.finish();
    }

    /// A subscription's queue was deleted. As in qpidd, the subscription stays in its
    /// session until cancelled (message.cancel still succeeds; message.flow and flush on it
    /// fail with resource-deleted), and a subscription that was waiting for messages (it
    /// had credit) fails its session with resource-deleted at once, as qpidd's next
    /// dispatch to it does.
    fn queue_deleted(
        &mut self,
        shell: &mut Shell,
        consumer: ConsumerId,
        queue: &str,
        credit: bool,
    ) {
        if !credit {
            return;
        }
        let Some(&channel) = shell.consumers.get(&consumer) else {
            return;
        };
        let (channels, mut env) = self.split(shell);
        let Some(session) = working_session(channels, channel) else {
            return;
        };
        let id = session.last_command_id();
        session.fail(&mut env, id, (0, 0), Exception::queue_deleted(queue));
    }

    fn write_control(&mut self, shell: &mut Shell, channel: u16, control: Control) {
        if let Err(e) = write_control_framed(&mut shell.out, channel, &control, self.max_frame) {
            warn!("cannot encode {}: {e}", control.name());
        }
    }

    fn channel_mut(&mut self, shell: &Shell, channel: u16) -> Option<&mut Channel> {
        let index = usize::from(channel);
        if index >= self.channels.len() {
            self.channels.resize_with(index + 1, || None);
        }
        let max_message = shell.config.max_message_size;
        let slot = self.channels.get_mut(index)?;
        Some(slot.get_or_insert_with(|| {
            Box::new(Channel {
                assembler: Assembler::new(max_message),
                session: None,
            })
        }))
    }

    fn on_incoming(&mut self, shell: &mut Shell, channel: u16, incoming: Incoming) {
        match incoming {
            Incoming::Control(control) => self.on_control(shell, channel, control),
            Incoming::Command {
                header,
                command,
                message_header,
                body,
                body_segment,
            } => {
                // `None`: no body segment at all, which is not an empty one.
                let body = body_segment.then_some(body);
                self.on_command(shell, channel, header.sync, command, message_header, body)
            }
        }
    }

    fn on_control(&mut self, shell: &mut Shell, channel: u16, control: Control) {
        let phase = shell.phase;
        match control {
            Control::ConnectionStartOk(c) if phase == Phase::AwaitStartOk && channel == 0 => {
                self.client_properties = c
                    .client_properties
                    .as_ref()
                    .map(handshake::client_properties)
                    .unwrap_or_default();
                let mechanism = c.mechanism.unwrap_or_default();
                let response = c.response.map(|r| r.to_vec()).unwrap_or_default();
                shell.login.start(mechanism.as_bytes(), response);
                shell.phase = Phase::Authenticating;
            }
            Control::ConnectionSecureOk(c) if phase == Phase::AwaitSecureOk && channel == 0 => {
                let response = c.response.map(|r| r.to_vec()).unwrap_or_default();
                if shell.login.resume(response) {
                    shell.phase = Phase::Authenticating;
                }
            }
            Control::ConnectionTuneOk(c) if phase == Phase::AwaitTuneOk && channel == 0 => {
                let offered = usize::from(shell.config.max_frame_size);
                let frame = c.max_frame_size.map(usize::from).unwrap_or(offered);
                if frame < MIN_MAX_FRAME_SIZE.min(offered) || frame > offered {
                    let text = format!(
                        "tune-ok max-frame-size {frame} outside [{MIN_MAX_FRAME_SIZE}, {offered}]"
                    );
                    self.fault(shell, ConnectionFault::framing(text));
                    return;
                }
                self.max_frame = frame.max(FRAME_HEADER_SIZE + 1);
                self.channel_max = c
                    .channel_max
                    .filter(|&m| m > 0)
                    .unwrap_or(shell.config.channel_max)
                    .min(shell.config.channel_max);
                self.heartbeat = c.heartbeat.unwrap_or(0).min(shell.config.heartbeat_max);
                shell.phase = Phase::AwaitOpen;
            }
            Control::ConnectionOpen(_) if phase == Phase::AwaitOpen && channel == 0 => {
                if let Err(reason) = shell.admit() {
                    let fault = ConnectionFault {
                        code: CloseCode::ConnectionForced,
                        text: reason,
                    };
                    self.fault(shell, fault);
                    return;
                }
                // One virtual host: any name is accepted, as qpidd does.
                // In a cluster, the members' addresses: qpidd's clients fail over through them.
                let hosts = shell
                    .config
                    .gate
                    .as_ref()
                    .map(|g| g.0.known_hosts())
                    .unwrap_or_default();
                let open_ok = ConnectionOpenOk {
                    known_hosts: Some(Array::of_str16(
                        hosts.iter().map(|h| format!("amqp:tcp:{h}")),
                    )),
                };
                self.write_control(shell, 0, open_ok.into());
                shell.open(Opened {
                    protocol: "AMQP 0-10",
                    heartbeat: self.heartbeat,
                    frame_max: self.max_frame as u32,
                    channel_max: self.channel_max,
                    client_properties: std::mem::take(&mut self.client_properties),
                });
            }
            Control::ConnectionHeartbeat(_) => {}
            Control::ConnectionClose(c) => {
                debug!(peer = %shell.peer, code = ?c.reply_code, "client closed the connection");
                self.write_control(shell, 0, ConnectionCloseOk {}.into());
                shell.finish();
            }
            Control::ConnectionCloseOk(_) => shell.finish(),
            c if c.class_code() == ConnectionClose::CLASS_CODE => {
                let text = format!("unexpected {} on channel {channel}", c.name());
                self.fault(shell, ConnectionFault::framing(text));
            }
            _ if phase != Phase::Open => {
                let text = "session control before connection.open-ok";
                self.fault(shell, ConnectionFault::framing(text));
            }
            Control::SessionAttach(c) => self.attach(shell, channel, c.name.unwrap_or_default()),
            other => self.on_session_control(shell, channel, other),
        }
    }

    fn attach(&mut self, shell: &mut Shell, channel: u16, name: Bytes) {
        let max_frame = self.max_frame;
        let attached_elsewhere = self.channels.iter().enumerate().any(|(i, c)| {
            i != usize::from(channel)
                && c.as_ref()
                    .and_then(|c| c.session.as_ref())
                    .is_some_and(|s| s.name == name)
        });
        let owner = shell.broker.next_owner_id();
        let window = ferry_core::SettleWindow::with_limit(shell.config.session_max_unacked);
        let Some(c) = self.channel_mut(shell, channel) else {
            return;
        };
        let out = &mut shell.out;
        match &c.session {
            // qpidd: a session that failed reads nothing but detach and detached.
            Some(s) if s.state == SessionState::Failed => {}
            Some(s) if s.name == name => {
                // Idempotent re-attach.
                s.write_control(out, max_frame, SessionAttached { name: Some(name) }.into());
            }
            Some(_) | None if attached_elsewhere || c.session.is_some() => {
                let detached = SessionDetached {
                    name: Some(name),
                    code: Some(DetachCode::SessionBusy),
                };
                let _ = write_control_framed(out, channel, &detached.into(), max_frame);
            }
            _ => {
                let mut session = Session::new(name.clone(), channel, owner);
                session.settle_window = window;
                session.write_control(out, max_frame, SessionAttached { name: Some(name) }.into());
                session.write_attached_command_point(out, max_frame);
                c.session = Some(session);
            }
        }
    }
    fn on_session_control(&mut self, shell: &mut Shell, channel: u16, control: Control) {
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
                let _ = write_control_framed(&mut shell.out, channel, &detached.into(), max_frame);
            }
            return;
        };
        if session.state == SessionState::Failed
            && !matches!(
                control,
                Control::SessionDetach(_) | Control::SessionDetached(_)
            )
        {
            // We sent execution.exception and session.detach: as qpidd's SessionHandler
            // does while it awaits detached, every other control is dropped.
            return;
        }
        let codes = (control.class_code(), control.code());
        match control {
            Control::SessionDetach(d) => {
                let name = d.name.unwrap_or_default();
                if name != session.name {
                    // qpidd's rule: a detach naming another session is the peer's error on
                    // this session (invalid-argument), not a detach.
                    let text = format!(
                        "session.detach: incorrect session name: {}, expecting: {}",
                        String::from_utf8_lossy(&name),
                        String::from_utf8_lossy(&session.name)
                    );
                    let e = Exception::new(ErrorCode::InvalidArgument, text);
                    self.control_failed(shell, channel, codes, e);
                    return;
                }
                let detached = SessionDetached {
                    name: Some(name),
                    code: Some(DetachCode::Normal),
                };
                session.write_control(&mut shell.out, max_frame, detached.into());
                self.end_session(shell, channel);
            }
            Control::SessionDetached(_) => self.end_session(shell, channel),
            Control::SessionRequestTimeout(t) => {
                // Sessions do not outlive their connection yet, so the timeout we grant is 0.
                let _ = t;
                session.write_control(
                    &mut shell.out,
                    max_frame,
                    SessionTimeout { timeout: Some(0) }.into(),
                );
            }
            Control::SessionTimeout(_) => {}
            Control::SessionCommandPoint(p) => {
                if let Err(e) = session.set_command_point(p.command_id.unwrap_or(0)) {
                    self.control_failed(shell, channel, codes, e);
                }
            }
            Control::SessionCompleted(c) => {
                if let Some(commands) = c.commands {
                    session.peer_completed(&commands);
                    if c.timely_reply {
                        session.write_control(
                            &mut shell.out,
                            max_frame,
                            Session::known_completed_reply(commands),
                        );
                    }
                }
            }
            Control::SessionKnownCompleted(k) => {
                if let Some(commands) = k.commands {
                    session.known_completed(&commands);
                    // Acknowledging every other command splits the set as surely as
                    // completing them out of order would.
                    if let Some(e) = session.completed_overflow() {
                        self.control_failed(shell, channel, codes, e);
                    }
                }
            }
            Control::SessionFlush(f) => {
                if f.completed {
                    session.flush_completion(&mut shell.out, max_frame, true);
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
                        session.write_control(&mut shell.out, max_frame, expected.into());
                    }
                    if f.confirmed {
                        let confirmed = ferry_amqp010::SessionConfirmed {
                            commands: Some(empty),
                            fragments: None,
                        };
                        session.write_control(&mut shell.out, max_frame, confirmed.into());
                    }
                }
            }
            Control::SessionExpected(_) | Control::SessionConfirmed(_) => {}
            Control::SessionGap(_) => {
                let e = Exception::not_implemented("session.gap");
                self.control_failed(shell, channel, codes, e);
            }
            Control::SessionAttached(_) => {}
            other => {
                let text = format!("unexpected {} on channel {channel}", other.name());
                self.fault(shell, ConnectionFault::framing(text));
            }
        }
    }

    /// The channel table and what session commands need from the connection, borrowed
    /// side by side.
    fn split<'a>(
        &'a mut self,
        shell: &'a mut Shell,
    ) -> (&'a mut Vec<Option<Box<Channel>>>, Env<'a>) {
        let env = Env {
            broker: &shell.broker,
            connection: shell.id,
            outbox: &shell.outbox,
            out: &mut shell.out,
            max_frame: self.max_frame,
            consumers: &mut shell.consumers,
            access: &shell.access,
            config: &shell.config,
            backlogged: &mut shell.backlogged,
        };
        (&mut self.channels, env)
    }

    fn on_command(
        &mut self,
        shell: &mut Shell,
        channel: u16,
        sync: bool,
        command: Command,
        header: Option<Bytes>,
        body: Option<Bytes>,
    ) {
        let codes = (command.class_code(), command.code());
        if matches!(command, Command::MessageTransfer(_)) {
            shell.publisher = true;
            shell.traffic.messages_in += 1;
        }
        let (channels, mut env) = self.split(shell);
        // Commands for a session that is not attached (e.g. sent before the client saw our
        // detach) are dropped, as qpidd drops them (controls get detached); so are those of
        // a session that failed, until the peer detaches.
        let Some(session) = working_session(channels, channel) else {
            return;
        };
        let id = session.next_command_id();
        let waits_for = durable::WaitsFor::of(&command);
        let mut waits = false;
        let completed_now = match commands::execute(session, &mut env, id, command, header, body) {
            Ok(()) => match waits_for.point(session, env.broker) {
                Some(point) => {
                    session.wait_for_sync(id, point, sync);
                    waits = true;
                    false
                }
                None => {
                    session.complete(id);
                    true
                }
            },
            Err(e) => {
                session.fail(&mut env, id, codes, e);
                false
            }
        };
        if waits && !self.waiting_sessions.contains(&channel) {
            self.waiting_sessions.push(channel);
        }
        if completed_now {
            match self.dirty.iter_mut().find(|(c, _)| *c == channel) {
                Some((_, forced)) => *forced |= sync,
                None => self.dirty.push((channel, sync)),
            }
        }
    }

    /// Fails the message being assembled on `channel` if it, with the other messages this
    /// connection's peer has begun, holds more than the connection may.
    fn check_unfinished(&mut self, shell: &mut Shell, channel: u16) {
        let total: usize = self
            .channels
            .iter()
            .flatten()
            .map(|c| c.assembler.unfinished_message())
            .sum();
        let limit = shell.config.unfinished_limit();
        if total <= limit {
            return;
        }
        let abandoned = self
            .channels
            .get_mut(usize::from(channel))
            .and_then(|c| c.as_mut())
            .and_then(|c| c.assembler.abandon_message());
        if let Some(codes) = abandoned {
            let text = format!(
                "the messages begun on this connection would hold {total} octets, \
                 more than its limit of {limit}"
            );
            let exception = Exception::new(ErrorCode::ResourceLimitExceeded, text);
            self.command_failed(shell, channel, codes, exception);
        }
    }

    /// A command that could not even be decoded still used an id; report it against that id.
    /// (Controls use none: see [`Amqp010::control_failed`].)
    fn command_failed(
        &mut self,
        shell: &mut Shell,
        channel: u16,
        codes: (u8, u8),
        exception: Exception,
    ) {
        self.fail_session(shell, channel, codes, exception, Session::next_command_id);
    }

    /// A session control the session cannot take ends it with an exception. Controls take
    /// no command ids: as qpidd's, it names the last command received, and the control.
    fn control_failed(
        &mut self,
        shell: &mut Shell,
        channel: u16,
        codes: (u8, u8),
        exception: Exception,
    ) {
        self.fail_session(shell, channel, codes, exception, |s| s.last_command_id());
    }

    fn fail_session(
        &mut self,
        shell: &mut Shell,
        channel: u16,
        codes: (u8, u8),
        exception: Exception,
        command_id: impl FnOnce(&mut Session) -> u32,
    ) {
        let (channels, mut env) = self.split(shell);
        let Some(session) = working_session(channels, channel) else {
            return;
        };
        let id = command_id(session);
        session.fail(&mut env, id, codes, exception);
    }

    fn end_session(&mut self, shell: &mut Shell, channel: u16) {
        let max_message = shell.config.max_message_size;
        let (channels, mut env) = self.split(shell);
        let Some(Some(c)) = channels.get_mut(usize::from(channel)) else {
            return;
        };
        if let Some(mut session) = c.session.take() {
            session.end(&mut env);
        }
        // A fresh assembler: leftovers of the old session's input must not leak into a new one.
        c.assembler = Assembler::new(max_message);
    }

    /// Sends connection.close and waits (briefly) for close-ok, ignoring everything else.
    fn fault(&mut self, shell: &mut Shell, fault: ConnectionFault) {
        if shell.is_closing() {
            return;
        }
        if shell.phase == Phase::Open && fault.code == CloseCode::ConnectionForced {
            info!(peer = %shell.peer, code = ?fault.code, "closing connection: {}", fault.text);
        } else {
            warn!(
                peer = %shell.peer,
                user = shell.login.user(),
                code = ?fault.code,
                "closing connection: {}",
                fault.text
            );
        }
        let text = crate::text::truncated(&fault.text, 255).to_owned();
        let close = ConnectionClose {
            reply_code: Some(fault.code),
            reply_text: Some(text.into()),
        };
        self.write_control(shell, 0, close.into());
        shell.start_closing();
        // Nothing more will be processed: release the sessions' messages now.
        self.teardown(shell);
    }
}

/// The session attached on `channel`, unless it has failed (then it only waits for the
/// peer's detach).
fn working_session(channels: &mut [Option<Box<Channel>>], channel: u16) -> Option<&mut Session> {
    let session = channels
        .get_mut(usize::from(channel))?
        .as_mut()?
        .session
        .as_mut()?;
    (session.state != SessionState::Failed).then_some(session)
}
