//! The AMQP 1.0 connection, over the same shell and core as 0-10 and 0-9-1.
//!
//! `AMQP 3 1 0 0` starts a SASL exchange (the shell's login: PLAIN, SCRAM-SHA-256, EXTERNAL,
//! ANONYMOUS where allowed), after which the client sends `AMQP 0 1 0 0`. A client may also
//! start with `AMQP 0 1 0 0`: as with qpidd, that is an anonymous login, admitted only where
//! ANONYMOUS is offered (`--auth no`, or `--allow-anonymous`, as `--sasl-mechanisms` allows);
//! otherwise the answer is the SASL header and the connection ends, the spec's way of saying
//! "SASL first".
//!
//! Then open, sessions (`session`), links on which we receive (`receiver`: publishes) or send
//! (`sender`: queue consumers), transactions (`txn`), addresses (`address`). The message
//! formats are in `crate::bridge::amqp1`. Idle timeouts run on the shell's heartbeat timers:
//! we send an empty frame at half the client's idle-time-out and close after ours.

mod address;
mod error;
mod receiver;
mod sender;
mod session;
mod subscription;
mod txn;
mod unsettled;

#[cfg(test)]
mod tests;

use std::time::{Duration, Instant};

use bytes::{Buf, BytesMut};
use ferry_amqp1::{
    condition, decode_frame, write_empty_frame, write_frame, write_sasl_frame, Close, FrameBody,
    Open, Performative, SaslCode, SaslFrame, SaslMechanisms, SaslOutcome, Symbol, Value,
    MIN_MAX_FRAME_SIZE, PROTOCOL_HEADER, SASL_PROTOCOL_HEADER,
};
use ferry_core::{OutboxItem, OwnerId, SessionStatus};
use tracing::{debug, info, warn};

use crate::auth::LoginStep;
use crate::config::CHECK_UNFINISHED_ABOVE;
use crate::lifecycle::Shutdown;
use crate::shell::{
    driver, CloseReason, Connection, Opened, Peer, Phase, Protocol, Services, Shell,
    BACKLOG_RECHECK,
};
use crate::transport::Transport;
use error::{Failure, Fault};
use session::{Ctx, Session, SessionState};

/// The capability that tells clients (Qpid JMS) they may send to a link without an
/// address, naming each message's node in its `to`.
const ANONYMOUS_RELAY: Symbol = Symbol::from_static("ANONYMOUS-RELAY");
/// JMS 2 shared subscriptions (see `subscription`): Qpid JMS looks for it in our open.
const SHARED_SUBS: Symbol = Symbol::from_static("SHARED-SUBS");

/// The 1.0 side of a connection; the [`Shell`] holds what every protocol has.
pub struct Amqp1 {
    /// The client skipped SASL: the login is ours, and its success needs no outcome frame.
    implicit_login: bool,
    /// Owns the connection's temporary queues and consumers.
    owner: OwnerId,
    /// The largest frame we take (what our open says).
    max_frame: u32,
    /// The largest frame we send: the client's limit.
    peer_max_frame: u32,
    /// The highest channel number in use: the lower of ours and the client's.
    channel_max: u16,
    /// How long the client may stay silent (our idle-time-out); `None` for ever.
    idle_timeout: Option<Duration>,
    client_properties: Vec<(String, String)>,
    /// The client's container id: with a link's name, it names a durable subscription.
    container_id: String,
    sessions: Vec<Option<Box<Session>>>,
    /// The incoming window each session grants (tests make it small).
    incoming_window: u32,
    /// When to look again at publishers' credit held back for their queues' backlog.
    recheck_at: Option<Instant>,
}

/// A new connection whose protocol header (`sasl`: the SASL one) has been read; our header
/// (and the SASL mechanisms) are queued.
pub fn connection(services: Services, peer: Peer, now: Instant, sasl: bool) -> Connection<Amqp1> {
    let config = &services.config;
    let protocol = Amqp1 {
        implicit_login: !sasl,
        owner: services.broker.next_owner_id(),
        max_frame: u32::from(config.max_frame_size).max(MIN_MAX_FRAME_SIZE),
        peer_max_frame: MIN_MAX_FRAME_SIZE,
        channel_max: config.channel_max.saturating_sub(1),
        idle_timeout: (config.heartbeat_max > 0)
            .then(|| Duration::from_secs(u64::from(config.heartbeat_max))),
        client_properties: Vec::new(),
        container_id: String::new(),
        sessions: Vec::new(),
        incoming_window: session::INCOMING_WINDOW,
        recheck_at: None,
    };
    let mut shell = Shell::new(services, peer, false, now);
    let mechanisms = shell.login.offered();
    if sasl {
        shell.out.extend_from_slice(&SASL_PROTOCOL_HEADER);
        let offer = SaslMechanisms {
            sasl_server_mechanisms: mechanisms.iter().map(|m| Symbol::from(*m)).collect(),
        };
        write_sasl_frame(&mut shell.out, &offer.into());
    } else if mechanisms.contains(&"ANONYMOUS") {
        shell.out.extend_from_slice(&PROTOCOL_HEADER);
        shell.login.start(b"ANONYMOUS", Vec::new());
        shell.phase = Phase::Authenticating;
    } else {
        debug!(peer = %shell.peer, "AMQP 1.0 without SASL refused: ANONYMOUS is not offered");
        shell.out.extend_from_slice(&SASL_PROTOCOL_HEADER);
        shell.finish();
    }
    Connection::new(shell, protocol)
}

/// Serves one connection whose 1.0 protocol header has been read.
pub async fn run<T: Transport>(
    stream: T,
    peer: Peer,
    services: Services,
    shutdown: Shutdown,
    sasl: bool,
) -> std::io::Result<()> {
    let mut conn = connection(services, peer, Instant::now(), sasl);
    driver::drive(stream, &mut conn, shutdown).await
}

impl Protocol for Amqp1 {
    fn process(&mut self, shell: &mut Shell, input: &mut BytesMut) {
        while !matches!(shell.phase, Phase::Finished | Phase::Authenticating) {
            if shell.hold_input() {
                break;
            }
            if shell.phase == Phase::AwaitTuneOk {
                // After the SASL outcome: the client's AMQP header.
                let Some(header) = input.get(..8) else {
                    break;
                };
                let ok = header == PROTOCOL_HEADER;
                input.advance(8);
                shell.out.extend_from_slice(&PROTOCOL_HEADER);
                if ok {
                    shell.phase = Phase::AwaitOpen;
                    continue;
                }
                debug!(peer = %shell.peer, "no AMQP 1.0 header after SASL");
                shell.finish();
                break;
            }
            let frame = match decode_frame(input, self.max_frame) {
                Ok(Some(frame)) => frame,
                Ok(None) => break,
                Err(e) => {
                    self.fail(shell, Fault::new(e.condition(), e.to_string()));
                    break;
                }
            };
            shell.traffic.frames_in += 1;
            let body = match frame.decode_body() {
                Ok(body) => body,
                Err(_) if shell.phase == Phase::Closing => continue,
                Err(e) => {
                    self.fail(shell, Fault::new(e.condition(), e.to_string()));
                    break;
                }
            };
            match body {
                FrameBody::Empty => {}
                FrameBody::Sasl(s) => self.on_sasl(shell, s),
                FrameBody::Amqp {
                    performative,
                    payload,
                } => self.on_frame(shell, frame.channel, performative, payload),
            }
        }
        self.flush(shell);
    }

    fn on_outbox_item(&mut self, shell: &mut Shell, item: OutboxItem) {
        match item {
            OutboxItem::Deliver(d) => {
                let channel = shell.consumers.get(&d.consumer).copied();
                let (sessions, mut ctx) = self.split(shell);
                match channel.and_then(|c| mapped(sessions, c)) {
                    Some(s) => s.deliver(&mut ctx, d),
                    None => sender::release_delivery(d),
                }
            }
            OutboxItem::Durable => self.on_durable(shell),
            OutboxItem::Close { reason } => {
                self.fail(shell, Fault::new(condition::CONNECTION_FORCED, reason));
            }
            OutboxItem::ConsumerCancelled {
                consumer, queue, ..
            } => {
                let channel = shell.consumers.remove(&consumer);
                let (sessions, mut ctx) = self.split(shell);
                if let Some(s) = channel.and_then(|c| mapped(sessions, c)) {
                    s.consumer_cancelled(&mut ctx, consumer, &queue);
                }
            }
        }
    }

    fn on_login(&mut self, shell: &mut Shell, step: LoginStep) {
        match (step, self.implicit_login) {
            (LoginStep::Success, true) => shell.phase = Phase::AwaitOpen,
            (LoginStep::Success, false) => {
                let outcome = SaslOutcome {
                    code: SaslCode::Ok,
                    additional_data: None,
                };
                write_sasl_frame(&mut shell.out, &outcome.into());
                shell.phase = Phase::AwaitTuneOk;
            }
            (LoginStep::Challenge(challenge), false) => {
                let challenge = ferry_amqp1::SaslChallenge {
                    challenge: challenge.into(),
                };
                write_sasl_frame(&mut shell.out, &challenge.into());
                shell.phase = Phase::AwaitSecureOk;
            }
            (LoginStep::Failure, false) => {
                let outcome = SaslOutcome {
                    code: SaslCode::Auth,
                    additional_data: None,
                };
                write_sasl_frame(&mut shell.out, &outcome.into());
                shell.finish();
            }
            // ANONYMOUS has no challenge; a refusal ends the connection unanswered.
            (_, true) => shell.finish(),
        }
    }

    fn write_heartbeat(&mut self, shell: &mut Shell) {
        write_empty_frame(&mut shell.out);
    }

    fn close(&mut self, shell: &mut Shell, reason: CloseReason) {
        let text = match reason {
            CloseReason::HandshakeTimeout => "handshake timed out",
            CloseReason::Shutdown => "broker shutting down",
        };
        self.fail(shell, Fault::new(condition::CONNECTION_FORCED, text));
    }

    fn teardown(&mut self, shell: &mut Shell) {
        let (sessions, mut ctx) = self.split(shell);
        for s in sessions.iter_mut().flatten() {
            s.end(&mut ctx);
        }
        sessions.clear();
        shell.broker.release_owner(self.owner);
        shell.release_undelivered();
    }

    fn set_flow_blocked(&mut self, _shell: &mut Shell, _blocked: bool) {
        // While a resource alarm lasts the connection's input is not processed: the client
        // runs out of session window and link credit, which is 1.0's flow control.
    }

    fn on_peer_silent(&mut self, shell: &mut Shell) {
        let close = Close {
            error: Some(
                Fault::new(condition::RESOURCE_LIMIT_EXCEEDED, "idle-time-out expired").error(),
            ),
        };
        write_frame(&mut shell.out, 0, &close.into(), &[]);
    }

    fn deadline(&self) -> Option<Instant> {
        self.recheck_at
    }

    fn on_deadline(&mut self, shell: &mut Shell) {
        self.recheck_at = None;
        self.flush(shell);
    }

    fn on_backlog_released(&mut self, shell: &mut Shell) {
        self.flush(shell);
    }

    fn channel_count(&self) -> usize {
        self.sessions.iter().flatten().count()
    }

    fn sessions(&self) -> Vec<SessionStatus> {
        self.sessions
            .iter()
            .flatten()
            .map(|s| SessionStatus {
                channel: s.channel,
                name: String::new(),
                owner: self.owner,
                consumers: s.sender_count(),
                unacked: s.unsettled.len() as u64,
                prefetch: 0,
                transactional: s.is_transactional(),
                confirms: false,
            })
            .collect()
    }
}

fn mapped(sessions: &mut [Option<Box<Session>>], channel: u16) -> Option<&mut Session> {
    sessions
        .get_mut(usize::from(channel))?
        .as_deref_mut()
        .filter(|s| s.state == SessionState::Mapped)
}

fn text_of(v: &Value) -> String {
    match v {
        Value::String(s) => s.as_str().to_owned(),
        Value::Symbol(s) => s.as_str().to_owned(),
        other => format!("{other:?}"),
    }
}

impl Amqp1 {
    /// The session table and what session work needs, borrowed side by side.
    fn split<'a>(
        &'a mut self,
        shell: &'a mut Shell,
    ) -> (&'a mut Vec<Option<Box<Session>>>, Ctx<'a>) {
        (
            &mut self.sessions,
            Ctx {
                broker: &shell.broker,
                outbox: &shell.outbox,
                out: &mut shell.out,
                spliced: &mut shell.spliced,
                config: &shell.config,
                access: &shell.access,
                consumers: &mut shell.consumers,
                owner: self.owner,
                container_id: &self.container_id,
                frame_max: self.peer_max_frame,
                publisher: &mut shell.publisher,
                backlog_waiter: &shell.backlog_waiter,
                presettled: &mut shell.presettled,
                traffic: &mut shell.traffic,
            },
        )
    }

    fn on_sasl(&mut self, shell: &mut Shell, frame: SaslFrame) {
        match (shell.phase, frame) {
            (Phase::AwaitStartOk, SaslFrame::SaslInit(init)) if !self.implicit_login => {
                let response = init
                    .initial_response
                    .map(|r| r.to_vec())
                    .unwrap_or_default();
                shell.login.start(init.mechanism.as_bytes(), response);
                shell.phase = Phase::Authenticating;
            }
            (Phase::AwaitSecureOk, SaslFrame::SaslResponse(r)) => {
                if shell.login.resume(r.response.to_vec()) {
                    shell.phase = Phase::Authenticating;
                }
            }
            (phase, frame) => {
                // The SASL layer has no way to say what went wrong: the connection ends.
                debug!(peer = %shell.peer, ?phase, frame = frame.name(), "unexpected SASL frame");
                shell.finish();
            }
        }
    }

    fn on_frame(
        &mut self,
        shell: &mut Shell,
        channel: u16,
        p: Performative,
        payload: bytes::Bytes,
    ) {
        match shell.phase {
            Phase::Open => {}
            Phase::AwaitOpen => {
                match p {
                    Performative::Open(open) if channel == 0 => self.on_open(shell, open),
                    p => self.fail(
                        shell,
                        Fault::new(
                            condition::ILLEGAL_STATE,
                            format!("{} before open", p.name()),
                        ),
                    ),
                }
                return;
            }
            Phase::Closing => {
                if let Performative::Close(_) = p {
                    shell.finish();
                }
                return;
            }
            _ => {
                let text = format!("{} during SASL", p.name());
                debug!(peer = %shell.peer, "{text}");
                shell.finish();
                return;
            }
        }
        match p {
            Performative::Close(c) => {
                if let Some(e) = c.error {
                    info!(peer = %shell.peer, condition = %e.condition, "client closed the connection: {:?}", e.description);
                }
                self.teardown(shell);
                write_frame(&mut shell.out, 0, &Close { error: None }.into(), &[]);
                shell.finish();
            }
            Performative::Open(_) => self.fail(
                shell,
                Fault::new(condition::ILLEGAL_STATE, "open on an open connection"),
            ),
            Performative::Begin(b) => self.on_begin(shell, channel, b),
            Performative::End(e) => self.on_end(shell, channel, e),
            p => {
                let (sessions, mut ctx) = self.split(shell);
                let Some(Some(s)) = sessions.get_mut(usize::from(channel)) else {
                    let fault = Fault::new(
                        condition::NOT_ALLOWED,
                        format!("{} on channel {channel}, which has no session", p.name()),
                    );
                    self.fail(shell, fault);
                    return;
                };
                if s.state == SessionState::Ending {
                    return;
                }
                let receiving = match &p {
                    Performative::Transfer(t) => Some(t.handle),
                    _ => None,
                };
                match s.on_frame(&mut ctx, p, payload) {
                    Ok(()) if s.draining() => self.finish_drains(shell, channel),
                    Ok(()) => {}
                    Err(Failure::Session(f)) => self.end_with(shell, channel, f),
                    Err(Failure::Connection(f)) => self.fail(shell, f),
                }
                if let Some(handle) = receiving {
                    self.check_unfinished(shell, channel, handle);
                }
            }
        }
    }

    /// Refuses the delivery link `handle` of session `channel` is receiving if it has come
    /// past [`CHECK_UNFINISHED_ABOVE`] and, with every other delivery this connection's peer
    /// has begun, holds more than the connection may.
    fn check_unfinished(&mut self, shell: &mut Shell, channel: u16, handle: u32) {
        let Some(Some(s)) = self.sessions.get(usize::from(channel)) else {
            return;
        };
        if s.unfinished(Some(handle)) <= CHECK_UNFINISHED_ABOVE {
            return;
        }
        let total: usize = self
            .sessions
            .iter()
            .flatten()
            .map(|s| s.unfinished(None))
            .sum();
        let limit = shell.config.unfinished_limit();
        if total <= limit {
            return;
        }
        let fault = Fault::new(
            condition::MESSAGE_SIZE_EXCEEDED,
            format!(
                "the deliveries begun on this connection would hold {total} octets, \
                 more than its limit of {limit}"
            ),
        );
        let (sessions, mut ctx) = self.split(shell);
        if let Some(Some(s)) = sessions.get_mut(usize::from(channel)) {
            s.refuse_unfinished(&mut ctx, handle, fault);
        }
    }

    /// A drain made its queue deliver what it could into the outbox: hand every waiting
    /// item out now, in order, so those deliveries precede the drained flow.
    fn finish_drains(&mut self, shell: &mut Shell, channel: u16) {
        let mut items = Vec::new();
        shell.outbox.take(&mut items);
        for item in items {
            self.on_outbox_item(shell, item);
        }
        shell.presettled.finish();
        let (sessions, mut ctx) = self.split(shell);
        if let Some(s) = mapped(sessions, channel) {
            s.finish_drains(&mut ctx);
        }
    }

    fn on_open(&mut self, shell: &mut Shell, open: Open) {
        self.peer_max_frame = open.max_frame_size.min(self.max_frame);
        self.channel_max = self.channel_max.min(open.channel_max);
        self.container_id = open.container_id.as_str().to_owned();
        self.client_properties = std::iter::once((
            "container-id".to_owned(),
            open.container_id.as_str().to_owned(),
        ))
        .chain(
            open.properties
                .iter()
                .flat_map(|p| p.iter())
                .map(|(k, v)| (k.as_str().to_owned(), text_of(v))),
        )
        .collect();
        let ours = Open {
            container_id: "ferryd".into(),
            max_frame_size: self.max_frame,
            channel_max: self.channel_max,
            idle_time_out: self
                .idle_timeout
                .map(|d| u32::try_from(d.as_millis()).unwrap_or(u32::MAX)),
            offered_capabilities: vec![ANONYMOUS_RELAY, SHARED_SUBS],
            properties: Some(
                [
                    (Symbol::from("product"), Value::from("ferryd")),
                    (
                        Symbol::from("version"),
                        Value::from(env!("CARGO_PKG_VERSION")),
                    ),
                ]
                .into_iter()
                .collect(),
            ),
            ..Open::default()
        };
        write_frame(&mut shell.out, 0, &ours.into(), &[]);
        if open.max_frame_size < MIN_MAX_FRAME_SIZE {
            let text = format!(
                "max-frame-size {} is below the minimum {MIN_MAX_FRAME_SIZE}",
                open.max_frame_size
            );
            self.fail(shell, Fault::new(condition::INVALID_FIELD, text));
            return;
        }
        if let Err(reason) = shell.admit() {
            self.fail(shell, Fault::new(condition::UNAUTHORIZED_ACCESS, reason));
            return;
        }
        shell.open(Opened {
            protocol: "AMQP 1.0",
            heartbeat: self
                .idle_timeout
                .map_or(0, |d| u16::try_from(d.as_secs()).unwrap_or(u16::MAX)),
            frame_max: self.peer_max_frame,
            channel_max: self.channel_max,
            client_properties: std::mem::take(&mut self.client_properties),
        });
        // The client's idle-time-out: something goes out at least every half of it (no
        // more often than every 100 ms, whatever it asks).
        let send_every = open
            .idle_time_out
            .filter(|ms| *ms > 0)
            .map(|ms| Duration::from_millis(u64::from(ms / 2).max(100)));
        shell.set_idle_timeouts(send_every, self.idle_timeout);
    }

    fn on_begin(&mut self, shell: &mut Shell, channel: u16, begin: ferry_amqp1::Begin) {
        if channel > self.channel_max {
            let text = format!("channel {channel} exceeds channel-max {}", self.channel_max);
            self.fail(shell, Fault::new(condition::FRAMING_ERROR, text));
            return;
        }
        if begin.remote_channel.is_some() {
            let text = "begin answering a begin the broker never sent";
            self.fail(shell, Fault::new(condition::NOT_ALLOWED, text));
            return;
        }
        let index = usize::from(channel);
        if self.sessions.get(index).is_some_and(|s| s.is_some()) {
            let text = format!("channel {channel} already has a session");
            self.fail(shell, Fault::new(condition::NOT_ALLOWED, text));
            return;
        }
        if self.sessions.len() <= index {
            self.sessions.resize_with(index + 1, || None);
        }
        let window = self.incoming_window;
        let (sessions, mut ctx) = self.split(shell);
        sessions[index] = Some(Box::new(Session::begin(&mut ctx, channel, &begin, window)));
        shell.sessions_changed();
    }

    fn on_end(&mut self, shell: &mut Shell, channel: u16, end: ferry_amqp1::End) {
        let (sessions, mut ctx) = self.split(shell);
        let Some(mut s) = sessions
            .get_mut(usize::from(channel))
            .and_then(Option::take)
        else {
            let text = format!("end on channel {channel}, which has no session");
            self.fail(shell, Fault::new(condition::NOT_ALLOWED, text));
            return;
        };
        if let Some(e) = &end.error {
            debug!(channel, condition = %e.condition, "client ended a session with an error");
        }
        if s.state == SessionState::Mapped {
            s.end(&mut ctx);
            s.write(&mut ctx, ferry_amqp1::End { error: None });
        }
        shell.sessions_changed();
    }

    /// Ends session `channel` with an error; it stays in the table until the client's end.
    fn end_with(&mut self, shell: &mut Shell, channel: u16, fault: Fault) {
        info!(peer = %shell.peer, channel, condition = %fault.condition, "ending session: {}", fault.text);
        let (sessions, mut ctx) = self.split(shell);
        if let Some(s) = mapped(sessions, channel) {
            s.write(
                &mut ctx,
                ferry_amqp1::End {
                    error: Some(fault.error()),
                },
            );
            s.end(&mut ctx);
            s.state = SessionState::Ending;
        }
    }

    /// Closes the connection with an error (before open: our open first, as the spec asks).
    fn fail(&mut self, shell: &mut Shell, fault: Fault) {
        if shell.is_closing() {
            return;
        }
        match shell.phase {
            Phase::Open | Phase::AwaitOpen => {}
            // SASL and headers have no close: the connection just ends.
            _ => {
                debug!(peer = %shell.peer, "ending the connection: {}", fault.text);
                shell.finish();
                return;
            }
        }
        if shell.phase == Phase::AwaitOpen {
            let open = Open {
                container_id: "ferryd".into(),
                max_frame_size: self.max_frame,
                ..Open::default()
            };
            write_frame(&mut shell.out, 0, &open.into(), &[]);
        }
        if fault.condition == condition::CONNECTION_FORCED {
            info!(peer = %shell.peer, "closing connection: {}", fault.text);
        } else {
            warn!(
                peer = %shell.peer,
                user = shell.login.user(),
                condition = %fault.condition,
                "closing connection: {}",
                fault.text
            );
        }
        let close = Close {
            error: Some(fault.error()),
        };
        write_frame(&mut shell.out, 0, &close.into(), &[]);
        shell.start_closing();
        self.teardown(shell);
    }

    /// Writes what the batch left owed, then asks the journal to wake us for what waits.
    fn flush(&mut self, shell: &mut Shell) {
        if shell.is_closing() {
            return;
        }
        let (sessions, mut ctx) = self.split(shell);
        let mut wanted = None;
        let mut holding = false;
        for s in sessions.iter_mut().flatten() {
            s.flush(&mut ctx);
            wanted = wanted.max(s.last_waiting_point());
            holding |= s.holds_credit();
        }
        shell.wake_when_durable(wanted);
        // The queue wakes the connection when held credit may go; the timer is a safety
        // net, as slow as the shell's own look at a held publisher.
        self.recheck_at = match self.recheck_at {
            Some(at) if holding => Some(at),
            _ if holding => Some(shell.now() + BACKLOG_RECHECK),
            _ => None,
        };
    }

    fn on_durable(&mut self, shell: &mut Shell) {
        let Some(journal) = shell.broker.journal().cloned() else {
            return;
        };
        let durable = journal.durable();
        let failed = journal.is_failed();
        for s in self.sessions.iter_mut().flatten() {
            s.on_durable(durable, failed);
        }
        self.flush(shell);
    }
}
