//! The AMQP 0-9-1 connection (as RabbitMQ clients speak it): one task per socket, over the
//! same core as 0-10, so queues and exchanges are shared between the protocols.
//!
//! Structure mirrors the 0-10 layer: read whatever the socket holds, process every complete
//! frame, append all replies and deliveries to one outbound buffer, and write it with as few
//! system calls as the socket allows. Deliveries arrive through the connection's `Outbox`.

mod ack_timeout;
pub(crate) mod args;
mod basic;
mod channel;
mod confirms;
pub mod convert;
mod deaths;
pub(crate) mod error;
mod handshake;
mod held;
mod qos;
mod tx;
mod unacked;

#[cfg(test)]
mod tests;

use std::time::{Duration, Instant};

use bytes::BytesMut;
use ferry_amqp091::{
    decode_frame, reply, write_heartbeat, write_method, AssemblyError, AssemblyProgress,
    BasicPublish, ChannelClose, ChannelCloseOk, ChannelFlowOk, ChannelOpenOk, ConnectionBlocked,
    ConnectionClose, ConnectionCloseOk, ConnectionOpenOk, ConnectionSecure, ConnectionUnblocked,
    ConnectionUpdateSecretOk, Frame, FrameError, FrameType, LongStr, Method, ShortStr,
    FRAME_MIN_SIZE, FRAME_OVERHEAD,
};
use ferry_core::{OutboxItem, OwnerId, SessionStatus};
use tracing::{debug, info, warn};

use crate::auth::LoginStep;
use crate::config::CHECK_UNFINISHED_ABOVE;
use crate::fast_map::FastMap;
use crate::lifecycle::Shutdown;
use crate::shell::{
    driver, CloseReason, Connection, Opened, Peer, Phase, Protocol, Services, Shell,
};
use crate::transport::Transport;
use ack_timeout::AckChecks;
use channel::{Channel, Ctx, State};
use error::Fault;

pub(crate) use basic::{refuse_internal, stamped};

/// A message body over `--max-message-size`: RabbitMQ answers its own limit with 406
/// precondition-failed (closing the channel). Management's test publish says the same.
pub(crate) fn too_large(size: u64, max: u64) -> Fault {
    Fault::precondition(format!("message size {size} is larger than max size {max}"))
}
use handshake::ClientCaps;

/// The 0-9-1 side of a connection; the [`Shell`] holds what every protocol has.
pub struct Amqp091 {
    /// Owns the connection's exclusive queues and consumers.
    owner: OwnerId,
    /// Negotiated (our offer until tune-ok). A frame may carry up to this many octets of
    /// payload, eight more than the spec allows in all, as RabbitMQ accepts: some clients
    /// (AMQPStorm) cut bodies at frame-max without leaving room for the frame's header and
    /// end octet, and work against RabbitMQ only thanks to that.
    frame_max: usize,
    channel_max: u16,
    /// Negotiated in tune-ok, in force from connection.open.
    heartbeat: u16,
    caps: ClientCaps,
    /// What the client said of itself in start-ok, for management.
    client_properties: Vec<(String, String)>,
    channels: FastMap<u16, Channel>,
    /// When channels' oldest deliveries are next compared with their consumer timeouts.
    ack_checks: AckChecks,
}

/// A new connection whose 0-9-1 protocol header has been read: connection.start is queued.
pub fn connection(services: Services, peer: Peer, now: Instant) -> Connection<Amqp091> {
    let protocol = Amqp091 {
        owner: services.broker.next_owner_id(),
        frame_max: handshake::frame_max(&services.config) as usize,
        channel_max: services.config.channel_max,
        heartbeat: 0,
        caps: ClientCaps::default(),
        client_properties: Vec::new(),
        channels: FastMap::default(),
        ack_checks: AckChecks::new(services.config.consumer_timeout, now),
    };
    let mut shell = Shell::new(services, peer, true, now);
    let mechanisms = shell.login.offered();
    write_method(&mut shell.out, 0, &handshake::start(&mechanisms).into());
    Connection::new(shell, protocol)
}

/// Serves one connection whose 0-9-1 protocol header has been read.
pub async fn run<T: Transport>(
    stream: T,
    peer: Peer,
    services: Services,
    shutdown: Shutdown,
) -> std::io::Result<()> {
    let mut conn = connection(services, peer, Instant::now());
    driver::drive(stream, &mut conn, shutdown).await
}

impl Protocol for Amqp091 {
    /// Processes every complete frame in `input`, then sends the batch's publisher confirms.
    fn process(&mut self, shell: &mut Shell, input: &mut BytesMut) {
        while !matches!(shell.phase, Phase::Finished | Phase::Authenticating) {
            if shell.hold_input() {
                break;
            }
            let frame = match decode_frame(input, self.frame_max + FRAME_OVERHEAD) {
                Ok(Some(frame)) => frame,
                Ok(None) => break,
                Err(e) => {
                    let text = match &e {
                        FrameError::TooLarge { size, .. } => {
                            format!(
                                "frame of {size} octets exceeds frame-max {}",
                                self.frame_max
                            )
                        }
                        e => e.to_string(),
                    };
                    self.close_connection(shell, Fault::new(e.reply_code(), text), (0, 0));
                    break;
                }
            };
            shell.traffic.frames_in += 1;
            match (frame.frame_type, frame.channel) {
                (FrameType::Heartbeat, _) => {}
                (FrameType::Method, 0) => match Method::decode(frame.payload) {
                    Ok(m) => self.on_connection_method(shell, m),
                    Err(e) if shell.phase != Phase::Closing => {
                        self.close_connection(
                            shell,
                            Fault::new(e.reply_code(), e.to_string()),
                            (0, 0),
                        );
                    }
                    Err(_) => {}
                },
                (_, 0) => self.close_connection(
                    shell,
                    Fault::new(reply::UNEXPECTED_FRAME, "content frame on channel 0"),
                    (0, 0),
                ),
                _ if shell.phase == Phase::Closing => {}
                _ if shell.phase != Phase::Open => self.close_connection(
                    shell,
                    Fault::new(reply::CHANNEL_ERROR, "channel frame before connection.open"),
                    (0, 0),
                ),
                _ => self.on_channel_frame(shell, frame),
            }
        }
        self.flush_durable(shell);
    }

    fn on_outbox_item(&mut self, shell: &mut Shell, item: OutboxItem) {
        match item {
            OutboxItem::Deliver(d) => {
                let id = shell.consumers.get(&d.consumer).copied();
                let (channels, mut ctx) = self.split(shell);
                let channel = id
                    .and_then(|id| channels.get_mut(&id))
                    .filter(|c| c.state == State::Open);
                match channel {
                    Some(c) => c.deliver(&mut ctx, d),
                    None => {
                        if d.acquired {
                            d.queue.release([(d.position, d.message)], false);
                        }
                    }
                }
            }
            OutboxItem::Durable => self.flush_durable(shell),
            OutboxItem::Close { reason } => {
                self.close_connection(shell, Fault::new(reply::CONNECTION_FORCED, reason), (0, 0));
            }
            OutboxItem::ConsumerCancelled { consumer, .. } => {
                if let Some(id) = shell.consumers.remove(&consumer) {
                    let notify = self.caps.consumer_cancel_notify;
                    self.with_channel(shell, id, |c, ctx| c.consumer_gone(ctx, consumer, notify));
                }
            }
        }
    }

    fn on_login(&mut self, shell: &mut Shell, step: LoginStep) {
        match step {
            LoginStep::Challenge(challenge) => {
                let challenge = LongStr::new(challenge).unwrap_or_default();
                write(shell, 0, ConnectionSecure { challenge });
                shell.phase = Phase::AwaitSecureOk;
            }
            LoginStep::Success => {
                write(shell, 0, handshake::tune(&shell.config));
                shell.phase = Phase::AwaitTuneOk;
            }
            LoginStep::Failure if self.caps.authentication_failure_close => {
                let text = format!(
                    "Login was refused using authentication mechanism {}. \
                     For details see the broker logfile.",
                    shell.login.mechanism()
                );
                self.close_connection(shell, Fault::access_refused(text), (0, 0));
            }
            LoginStep::Failure => {
                // Clients without authentication_failure_close expect the socket to just
                // close (the 0-9-1 spec's rule).
                shell.finish();
            }
        }
    }

    fn write_heartbeat(&mut self, shell: &mut Shell) {
        write_heartbeat(&mut shell.out);
    }

    fn close(&mut self, shell: &mut Shell, reason: CloseReason) {
        let text = match reason {
            CloseReason::HandshakeTimeout => "handshake timed out",
            CloseReason::Shutdown => "broker shutting down",
        };
        self.close_connection(shell, Fault::new(reply::CONNECTION_FORCED, text), (0, 0));
    }

    /// Ends every channel (consumers cancelled, unacknowledged messages requeued) and
    /// releases the connection's exclusive queues.
    fn teardown(&mut self, shell: &mut Shell) {
        let (channels, mut ctx) = self.split(shell);
        for c in channels.values_mut() {
            c.teardown(&mut ctx);
        }
        channels.clear();
        shell.broker.release_owner(self.owner);
        shell.release_undelivered();
    }

    fn channel_count(&self) -> usize {
        self.channels.len()
    }

    fn sessions(&self) -> Vec<SessionStatus> {
        let mut sessions: Vec<SessionStatus> = self
            .channels
            .values()
            .map(|c| SessionStatus {
                channel: c.id,
                name: String::new(),
                owner: self.owner,
                consumers: c.consumers.len(),
                unacked: c.unacked.len() as u64,
                prefetch: u32::from(c.qos.settings.prefetch_count),
                transactional: c.tx.is_some(),
                confirms: c.confirms.is_enabled(),
            })
            .collect();
        sessions.sort_by_key(|s| s.channel);
        sessions
    }

    fn set_flow_blocked(&mut self, shell: &mut Shell, blocked: bool) {
        if !self.caps.connection_blocked || shell.phase != Phase::Open {
            return;
        }
        if blocked {
            let reason = shell.broker.alarms().reason();
            let blocked = ConnectionBlocked {
                reason: ShortStr::from_static(reason),
            };
            write(shell, 0, blocked);
        } else {
            write(shell, 0, ConnectionUnblocked {});
        }
    }

    fn deadline(&self) -> Option<Instant> {
        self.ack_checks.next()
    }

    /// The consumer timeout: a channel whose oldest delivery has waited too long is closed
    /// with 406, as RabbitMQ closes it (its deliveries go back to their queues).
    fn on_deadline(&mut self, shell: &mut Shell) {
        let now = shell.now();
        self.ack_checks.checked(now);
        // While input waits unprocessed (an alarm, producer flow control), acks that came
        // in time may be among it: no check, and no marks, until it is read again.
        if shell.phase != Phase::Open || shell.paused() {
            return;
        }
        let mut overdue: Vec<(u16, Duration)> = self
            .channels
            .values_mut()
            .filter(|c| c.state == State::Open)
            .filter_map(|c| Some((c.id, c.unacked.overdue(now, |p| p.ack_timeout)?)))
            .collect();
        overdue.sort_unstable();
        for (id, timeout) in overdue {
            let text = format!(
                "delivery acknowledgement on channel {id} timed out. Timeout value used: {} ms",
                timeout.as_millis()
            );
            self.fail(shell, id, Fault::precondition(text), (0, 0));
        }
    }
}

fn write(shell: &mut Shell, channel: u16, method: impl Into<Method>) {
    write_method(&mut shell.out, channel, &method.into());
}

impl Amqp091 {
    /// Sends every channel's held replies and confirms the journal allows, then asks the
    /// journal to wake the connection for what still waits.
    fn flush_durable(&mut self, shell: &mut Shell) {
        let mut ids: Vec<u16> = self.channels.keys().copied().collect();
        ids.sort_unstable();
        let mut wanted = None;
        let mut failed = None;
        for id in ids {
            let Some((held, point)) = self.with_channel(shell, id, |c, ctx| {
                let held = c.flush_held(ctx);
                c.flush_confirms(ctx);
                let point = c.confirms.last_unsynced_point().max(c.held.last_point());
                (held, point)
            }) else {
                continue;
            };
            wanted = wanted.max(point);
            if let Err(f) = held {
                failed.get_or_insert((id, f));
            }
        }
        if let Some((id, f)) = failed {
            self.fail(shell, id, f, (0, 0));
            return;
        }
        shell.wake_when_durable(wanted);
    }

    /// The channel table and what channel methods need, borrowed side by side.
    fn split<'a>(&'a mut self, shell: &'a mut Shell) -> (&'a mut FastMap<u16, Channel>, Ctx<'a>) {
        let now = shell.now();
        (
            &mut self.channels,
            Ctx {
                broker: &shell.broker,
                owner: self.owner,
                outbox: &shell.outbox,
                out: &mut shell.out,
                spliced: &mut shell.spliced,
                frame_max: self.frame_max,
                consumers: &mut shell.consumers,
                access: &shell.access,
                config: &shell.config,
                backlogged: &mut shell.backlogged,
                presettled: &mut shell.presettled,
                traffic: &mut shell.traffic,
                now,
                ack_checks: &mut self.ack_checks,
            },
        )
    }

    fn with_channel<R>(
        &mut self,
        shell: &mut Shell,
        id: u16,
        f: impl FnOnce(&mut Channel, &mut Ctx) -> R,
    ) -> Option<R> {
        let (channels, mut ctx) = self.split(shell);
        channels.get_mut(&id).map(|c| f(c, &mut ctx))
    }

    fn on_connection_method(&mut self, shell: &mut Shell, m: Method) {
        let ids = (m.class_id(), m.method_id());
        match (shell.phase, m) {
            (Phase::Closing, Method::ConnectionCloseOk(_)) => shell.finish(),
            (Phase::Closing, Method::ConnectionClose(_)) => {
                write(shell, 0, ConnectionCloseOk {});
                shell.finish();
            }
            (Phase::Closing, _) => {}
            (Phase::AwaitStartOk, Method::ConnectionStartOk(s)) => {
                self.caps = handshake::client_caps(&s);
                self.client_properties = handshake::client_properties(&s);
                let mechanism = s.mechanism.as_bytes();
                let response = if mechanism.eq_ignore_ascii_case(b"AMQPLAIN") {
                    handshake::amqplain_as_plain(s.response.as_bytes())
                } else {
                    s.response.as_bytes().to_vec()
                };
                shell.login.start(mechanism, response);
                shell.phase = Phase::Authenticating;
            }
            (Phase::AwaitSecureOk, Method::ConnectionSecureOk(s)) => {
                if shell.login.resume(s.response.as_bytes().to_vec()) {
                    shell.phase = Phase::Authenticating;
                }
            }
            (Phase::AwaitTuneOk, Method::ConnectionTuneOk(t)) => {
                let offered = handshake::frame_max(&shell.config);
                let frame_max = if t.frame_max == 0 {
                    offered
                } else {
                    t.frame_max
                };
                if frame_max < FRAME_MIN_SIZE as u32 || frame_max > offered {
                    let text =
                        format!("frame_max {frame_max} outside [{FRAME_MIN_SIZE}, {offered}]");
                    self.close_connection(shell, Fault::new(reply::NOT_ALLOWED, text), ids);
                    return;
                }
                self.frame_max = frame_max as usize;
                self.channel_max = match t.channel_max {
                    0 => shell.config.channel_max,
                    n => n.min(shell.config.channel_max),
                };
                // A client may turn heartbeats off (0) but not stretch them past our maximum,
                // or a dead peer would hold its connection for up to 18 hours.
                self.heartbeat = match t.heartbeat {
                    0 => 0,
                    n => n.min(shell.config.heartbeat_max.max(1)),
                };
                shell.phase = Phase::AwaitOpen;
            }
            (Phase::AwaitOpen, Method::ConnectionOpen(open)) => {
                // One virtual host, RabbitMQ's default "/" (an empty name is taken for it).
                // RabbitMQ refuses one it does not have, so a client configured for another
                // hears of it at once rather than sharing "/" with every other application.
                let vhost = open.virtual_host.as_bytes();
                if !matches!(vhost, b"/" | b"") {
                    let text = format!(
                        "vhost {} not found",
                        String::from_utf8_lossy(vhost).escape_debug()
                    );
                    self.close_connection(shell, Fault::new(reply::NOT_ALLOWED, text), ids);
                    return;
                }
                if let Err(reason) = shell.admit() {
                    // RabbitMQ refuses vhost access and connection limits with 530.
                    self.close_connection(shell, Fault::new(reply::NOT_ALLOWED, reason), ids);
                    return;
                }
                let open_ok = ConnectionOpenOk {
                    known_hosts: ShortStr::default(),
                };
                write(shell, 0, open_ok);
                shell.open(Opened {
                    protocol: "AMQP 0-9-1",
                    heartbeat: self.heartbeat,
                    frame_max: self.frame_max as u32,
                    channel_max: self.channel_max,
                    client_properties: std::mem::take(&mut self.client_properties),
                });
            }
            (_, Method::ConnectionClose(c)) => {
                debug!(peer = %shell.peer, code = c.reply_code, "client closed the connection");
                self.teardown(shell);
                write(shell, 0, ConnectionCloseOk {});
                shell.finish_after_close_ok();
            }
            (Phase::Open, Method::ConnectionUpdateSecret(_)) => {
                write(shell, 0, ConnectionUpdateSecretOk {});
            }
            (Phase::Open, Method::ConnectionBlocked(_) | Method::ConnectionUnblocked(_)) => {}
            // RabbitMQ's answer to a method out of turn on channel 0.
            (phase, m) => self.close_connection(
                shell,
                Fault::new(
                    reply::CHANNEL_ERROR,
                    format!("unexpected {} in connection state {phase:?}", m.name()),
                ),
                ids,
            ),
        }
    }

    fn on_channel_frame(&mut self, shell: &mut Shell, frame: Frame) {
        let id = frame.channel;
        let Some(c) = self.channels.get_mut(&id) else {
            self.open_channel(shell, frame);
            return;
        };
        if c.state == State::Closing {
            // RabbitMQ's rule, and the spec's: after our channel.close only close-ok ends
            // the channel; a close crossing ours is answered, everything else dropped. The
            // channel number stays taken until close-ok, so a close-ok (or close) arriving
            // after the crossing close is still ours to swallow, not a connection error.
            if frame.frame_type == FrameType::Method {
                match Method::decode(frame.payload) {
                    Ok(Method::ChannelCloseOk(_)) => {
                        self.channels.remove(&id);
                    }
                    Ok(Method::ChannelClose(_)) => write(shell, id, ChannelCloseOk {}),
                    _ => {}
                }
            }
            return;
        }
        let header_frame = frame.frame_type == FrameType::Header;
        match c.assembler.feed(frame) {
            Ok(AssemblyProgress::Incomplete) => {
                if header_frame && c.assembler.unfinished_body() > CHECK_UNFINISHED_ABOVE as u64 {
                    self.check_unfinished(shell, id);
                }
            }
            Ok(AssemblyProgress::MethodReady) => {
                if let Some(m) = c.assembler.take_method() {
                    self.on_channel_method(shell, id, m);
                }
            }
            Ok(AssemblyProgress::MessageReady) => {
                shell.publisher = true;
                shell.traffic.messages_in += 1;
                if let Some(Err((f, ids))) =
                    self.with_channel(shell, id, |c, ctx| c.publish_assembled(ctx))
                {
                    self.fail(shell, id, f, ids);
                }
            }
            Err(AssemblyError::TooLarge { size, max }) => {
                self.fail(shell, id, too_large(size, max), BasicPublish::IDS)
            }
            Err(e) => {
                self.close_connection(shell, Fault::new(e.reply_code(), e.to_string()), (0, 0))
            }
        }
    }

    /// Refuses the message whose header `channel` just took (its body announced past
    /// [`CHECK_UNFINISHED_ABOVE`]) if its body, with the bodies of the other messages this
    /// connection's peer has begun, is more than the connection may hold (a channel error,
    /// as for a message over the size limit).
    fn check_unfinished(&mut self, shell: &mut Shell, channel: u16) {
        let total: u64 = self
            .channels
            .values()
            .map(|c| c.assembler.unfinished_body())
            .sum();
        let limit = shell.config.unfinished_limit() as u64;
        if total <= limit {
            return;
        }
        if let Some(c) = self.channels.get_mut(&channel) {
            c.assembler.reset();
        }
        let text = format!(
            "the messages begun on this connection would hold {total} octets, \
             more than its limit of {limit}"
        );
        self.fail(shell, channel, Fault::precondition(text), BasicPublish::IDS);
    }

    /// A frame for a channel that is not open: only channel.open may come.
    fn open_channel(&mut self, shell: &mut Shell, frame: Frame) {
        let id = frame.channel;
        let opened = frame.frame_type == FrameType::Method
            && matches!(Method::decode(frame.payload), Ok(Method::ChannelOpen(_)));
        if !opened {
            let fault = Fault::new(reply::CHANNEL_ERROR, format!("channel {id} is not open"));
            self.close_connection(shell, fault, (0, 0));
        } else if id > self.channel_max {
            let fault = Fault::new(
                reply::NOT_ALLOWED,
                format!("channel {id} exceeds channel_max {}", self.channel_max),
            );
            self.close_connection(shell, fault, (20, 10));
        } else {
            let max_body = shell.config.max_message_size as u64;
            let mut channel = Channel::new(id, max_body);
            channel.settle_window =
                ferry_core::SettleWindow::with_limit(shell.config.session_max_unacked);
            self.channels.insert(id, channel);
            let open_ok = ChannelOpenOk {
                channel_id: LongStr::default(),
            };
            write(shell, id, open_ok);
        }
    }

    fn on_channel_method(&mut self, shell: &mut Shell, id: u16, m: Method) {
        let ids = (m.class_id(), m.method_id());
        let result = match m {
            Method::ChannelOpen(_) => Err(Fault::new(
                reply::CHANNEL_ERROR,
                format!("channel {id} is already open"),
            )),
            Method::ChannelClose(_) => {
                self.with_channel(shell, id, |c, ctx| {
                    c.flush_confirms(ctx);
                    c.teardown(ctx);
                });
                self.channels.remove(&id);
                write(shell, id, ChannelCloseOk {});
                Ok(())
            }
            // Not expected (we have not closed the channel); harmless.
            Method::ChannelCloseOk(_) => Ok(()),
            Method::ChannelFlow(f) => {
                self.with_channel(shell, id, |c, ctx| {
                    c.flow(ctx, f.active);
                    c.reply(ctx, ChannelFlowOk { active: f.active });
                });
                Ok(())
            }
            Method::ChannelFlowOk(_) => Ok(()),
            m => self
                .with_channel(shell, id, |c, ctx| dispatch(c, ctx, m))
                .unwrap_or(Ok(())),
        };
        if let Err(f) = result {
            self.fail(shell, id, f, ids);
        }
    }

    /// A method failed: a soft error closes the channel, a hard one the connection.
    fn fail(&mut self, shell: &mut Shell, id: u16, fault: Fault, ids: (u16, u16)) {
        if fault.is_hard() {
            self.close_connection(shell, fault, ids);
            return;
        }
        info!(
            peer = %shell.peer,
            user = shell.login.user(),
            channel = id,
            code = fault.code,
            method = ?ids,
            "closing channel: {}",
            fault.text
        );
        self.with_channel(shell, id, |c, ctx| {
            c.flush_confirms(ctx);
            c.teardown(ctx);
            c.state = State::Closing;
            let close = ChannelClose {
                reply_code: fault.code,
                reply_text: ShortStr::new(fault.wire_text()).unwrap_or_default(),
                class_id: ids.0,
                method_id: ids.1,
            };
            c.write(ctx.out, close);
        });
    }

    /// Sends connection.close and waits (briefly) for close-ok, ignoring everything else.
    fn close_connection(&mut self, shell: &mut Shell, fault: Fault, ids: (u16, u16)) {
        if shell.is_closing() {
            return;
        }
        let expected = matches!(shell.phase, Phase::Open) && fault.code == reply::CONNECTION_FORCED;
        if expected {
            info!(peer = %shell.peer, code = fault.code, "closing connection: {}", fault.text);
        } else {
            warn!(
                peer = %shell.peer,
                user = shell.login.user(),
                code = fault.code,
                method = ?ids,
                "closing connection: {}",
                fault.text
            );
        }
        self.teardown(shell);
        let close = ConnectionClose {
            reply_code: fault.code,
            reply_text: ShortStr::new(fault.wire_text()).unwrap_or_default(),
            class_id: ids.0,
            method_id: ids.1,
        };
        write(shell, 0, close);
        shell.start_closing();
    }
}

/// Methods of the exchange, queue, basic, confirm and tx classes.
fn dispatch(c: &mut Channel, ctx: &mut Ctx, m: Method) -> Result<(), Fault> {
    match m {
        Method::ExchangeDeclare(m) => c.exchange_declare(ctx, m),
        Method::ExchangeDelete(m) => c.exchange_delete(ctx, m),
        Method::ExchangeBind(m) => c.exchange_bind(ctx, m),
        Method::ExchangeUnbind(m) => c.exchange_unbind(ctx, m),
        Method::ExchangeBound(_) => Err(Fault::not_implemented(
            "exchange.bound (a Qpid 0-9-1 extension) is not supported",
        )),
        Method::QueueDeclare(m) => c.queue_declare(ctx, m),
        Method::QueueBind(m) => c.queue_bind(ctx, m),
        Method::QueueUnbind(m) => c.queue_unbind(ctx, m),
        Method::QueuePurge(m) => c.queue_purge(ctx, m),
        Method::QueueDelete(m) => c.queue_delete(ctx, m),
        Method::BasicQos(m) => {
            c.qos(ctx, m);
            Ok(())
        }
        Method::BasicConsume(m) => c.consume(ctx, m),
        Method::BasicCancel(m) => {
            c.cancel(ctx, m);
            Ok(())
        }
        // A client's answer to our basic.cancel (RabbitMQ 4.3's clients send one), late or
        // unsolicited: the consumer it names is gone already, or stays, as in RabbitMQ 4.3.
        Method::BasicCancelOk(_) => Ok(()),
        Method::BasicGet(m) => c.get(ctx, m),
        Method::BasicAck(m) => c.ack(ctx, m),
        Method::BasicReject(m) => c.reject(ctx, m),
        Method::BasicNack(m) => c.nack(ctx, m),
        Method::BasicRecover(m) => {
            c.recover(ctx, m.requeue)?;
            c.reply(ctx, ferry_amqp091::BasicRecoverOk {});
            Ok(())
        }
        Method::BasicRecoverAsync(m) => c.recover(ctx, m.requeue),
        Method::ConfirmSelect(m) => c.confirm_select(ctx, m.nowait),
        Method::TxSelect(_) => c.tx_select(ctx),
        Method::TxCommit(_) => c.tx_commit(ctx),
        Method::TxRollback(_) => c.tx_rollback(ctx),
        m => Err(Fault::command_invalid(format!(
            "unexpected {} on a channel",
            m.name()
        ))),
    }
}
