//! The AMQP 0-9-1 connection (as RabbitMQ clients speak it): one task per socket, over the
//! same core as 0-10, so queues and exchanges are shared between the protocols.
//!
//! Structure mirrors the 0-10 layer: read whatever the socket holds, process every complete
//! frame, append all replies and deliveries to one outbound buffer, and write it with as few
//! system calls as the socket allows. Deliveries arrive through the connection's `Outbox`.

mod args;
mod basic;
mod channel;
mod confirms;
pub mod convert;
mod deaths;
mod error;
mod handshake;
mod held;
mod qos;
mod tx;
mod unacked;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use bytes::BytesMut;
use ferry_amqp091::{
    decode_frame, reply, write_heartbeat, write_method, Assembled, AssemblyError, ChannelClose,
    ChannelCloseOk, ChannelFlowOk, ChannelOpenOk, ConnectionBlocked, ConnectionClose,
    ConnectionCloseOk, ConnectionOpenOk, ConnectionSecure, ConnectionUnblocked,
    ConnectionUpdateSecretOk, Frame, FrameType, LongStr, Method, ShortStr, FRAME_MIN_SIZE,
};
use ferry_core::{Broker, ConsumerId, Outbox, OutboxItem, OwnerId};
use tracing::debug;

use crate::access::ClientAccess;
use crate::auth::{AuthOutcome, AuthTask, Login, LoginStep};
use crate::config::ServerConfig;
use crate::connection::{Peer, Services};
use crate::io::{self, CloseReason, ProtocolConnection, Transport, READ_CHUNK};
use crate::listener::Shutdown;
use channel::{Channel, Ctx, State};
use error::Fault;
use handshake::ClientCaps;

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

struct Connection {
    broker: Arc<Broker>,
    config: Arc<ServerConfig>,
    peer: SocketAddr,
    owner: OwnerId,
    outbox: Arc<Outbox>,
    out: BytesMut,
    phase: Phase,
    frame_max: usize,
    channel_max: u16,
    heartbeat: u16,
    caps: ClientCaps,
    channels: HashMap<u16, Channel>,
    consumers: HashMap<ConsumerId, u16>,
    closing_since: Option<Instant>,
    /// The highest sync point we asked the journal to wake us for.
    sync_requested: ferry_core::SyncPoint,
    login: Login,
    access: ClientAccess,
    /// A message has been published: resource alarms pause this connection.
    publisher: bool,
}

/// Serves one connection whose 0-9-1 protocol header has been read.
pub async fn run<T: Transport>(
    stream: T,
    peer: Peer,
    services: Services,
    shutdown: Shutdown,
) -> std::io::Result<()> {
    let mut conn = Connection::new(services, peer);
    let mechanisms = conn.login.offered();
    write_method(&mut conn.out, 0, &handshake::start(&mechanisms).into());
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
        write_heartbeat(&mut self.out);
    }

    fn close(&mut self, reason: CloseReason) {
        let text = match reason {
            CloseReason::HandshakeTimeout => "handshake timed out",
            CloseReason::Shutdown => "broker shutting down",
        };
        self.close_connection(Fault::new(reply::CONNECTION_FORCED, text), (0, 0));
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
        debug!(peer = %self.peer, blocked, "publisher flow control");
        if !self.caps.connection_blocked || self.phase != Phase::Open {
            return;
        }
        if blocked {
            let reason = self.broker.alarms().reason();
            self.write(
                0,
                ConnectionBlocked {
                    reason: ShortStr::from_static(reason),
                },
            );
        } else {
            self.write(0, ConnectionUnblocked {});
        }
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
                let challenge = LongStr::new(challenge).unwrap_or_default();
                self.write(0, ConnectionSecure { challenge });
                self.phase = Phase::AwaitSecureOk;
            }
            LoginStep::Success => {
                self.write(0, handshake::tune(&self.config));
                self.phase = Phase::AwaitTuneOk;
            }
            LoginStep::Failure if self.caps.authentication_failure_close => {
                let text = format!(
                    "Login was refused using authentication mechanism {}. \
                     For details see the broker logfile.",
                    self.login.mechanism()
                );
                self.close_connection(Fault::access_refused(text), (0, 0));
            }
            LoginStep::Failure => {
                // Clients without authentication_failure_close expect the socket to just
                // close (the 0-9-1 spec's rule).
                self.phase = Phase::Finished;
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
            owner: broker.next_owner_id(),
            frame_max: handshake::frame_max(&config) as usize,
            channel_max: config.channel_max,
            broker,
            config,
            peer: peer.addr,
            outbox: Outbox::new(),
            out: BytesMut::with_capacity(READ_CHUNK),
            phase: Phase::AwaitStartOk,
            heartbeat: 0,
            caps: ClientCaps::default(),
            channels: HashMap::new(),
            consumers: HashMap::new(),
            closing_since: None,
            sync_requested: ferry_core::SyncPoint::default(),
            login: Login::new(auth, peer.addr, peer.client_identity, true),
        }
    }

    fn write(&mut self, channel: u16, method: impl Into<Method>) {
        write_method(&mut self.out, channel, &method.into());
    }

    /// Processes every complete frame in `inbuf`, then sends the batch's publisher confirms.
    fn process(&mut self, inbuf: &mut BytesMut) {
        while !matches!(self.phase, Phase::Finished | Phase::Authenticating) {
            let frame = match decode_frame(inbuf, self.frame_max) {
                Ok(Some(frame)) => frame,
                Ok(None) => break,
                Err(e) => {
                    self.close_connection(Fault::new(e.reply_code(), e.to_string()), (0, 0));
                    break;
                }
            };
            match (frame.frame_type, frame.channel) {
                (FrameType::Heartbeat, _) => {}
                (FrameType::Method, 0) => match Method::decode(frame.payload) {
                    Ok(m) => self.on_connection_method(m),
                    Err(e) if self.phase != Phase::Closing => {
                        self.close_connection(Fault::new(e.reply_code(), e.to_string()), (0, 0));
                    }
                    Err(_) => {}
                },
                (_, 0) => self.close_connection(
                    Fault::new(reply::UNEXPECTED_FRAME, "content frame on channel 0"),
                    (0, 0),
                ),
                _ if self.phase == Phase::Closing => {}
                _ if self.phase != Phase::Open => self.close_connection(
                    Fault::new(reply::CHANNEL_ERROR, "channel frame before connection.open"),
                    (0, 0),
                ),
                _ => self.on_channel_frame(frame),
            }
        }
        self.flush_durable();
    }

    /// Sends every channel's held replies and confirms the journal allows, then asks the
    /// journal to wake the connection for what still waits (one registration per new point).
    fn flush_durable(&mut self) {
        let mut ids: Vec<u16> = self.channels.keys().copied().collect();
        ids.sort_unstable();
        let mut wanted = None;
        let mut failed = None;
        for id in ids {
            let Some((held, point)) = self.with_channel(id, |c, ctx| {
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
            self.fail(id, f, (0, 0));
            return;
        }
        if let (Some(journal), Some(point)) = (self.broker.journal(), wanted) {
            if point > self.sync_requested {
                self.sync_requested = point;
                journal.notify_when_durable(point, self.outbox.clone());
            }
        }
    }

    fn ctx_parts(&mut self) -> (&mut HashMap<u16, Channel>, Ctx<'_>) {
        (
            &mut self.channels,
            Ctx {
                broker: &self.broker,
                owner: self.owner,
                outbox: &self.outbox,
                out: &mut self.out,
                frame_max: self.frame_max,
                consumers: &mut self.consumers,
                access: &self.access,
                config: &self.config,
            },
        )
    }

    fn with_channel<R>(
        &mut self,
        id: u16,
        f: impl FnOnce(&mut Channel, &mut Ctx) -> R,
    ) -> Option<R> {
        let (channels, mut ctx) = self.ctx_parts();
        channels.get_mut(&id).map(|c| f(c, &mut ctx))
    }

    fn on_connection_method(&mut self, m: Method) {
        let ids = (m.class_id(), m.method_id());
        match (self.phase, m) {
            (Phase::Closing, Method::ConnectionCloseOk(_)) => self.phase = Phase::Finished,
            (Phase::Closing, Method::ConnectionClose(_)) => {
                self.write(0, ConnectionCloseOk {});
                self.phase = Phase::Finished;
            }
            (Phase::Closing, _) => {}
            (Phase::AwaitStartOk, Method::ConnectionStartOk(s)) => {
                self.caps = handshake::client_caps(&s);
                let mechanism = s.mechanism.as_bytes();
                let response = if mechanism.eq_ignore_ascii_case(b"AMQPLAIN") {
                    handshake::amqplain_as_plain(s.response.as_bytes())
                } else {
                    s.response.as_bytes().to_vec()
                };
                self.login.start(mechanism, response);
                self.phase = Phase::Authenticating;
            }
            (Phase::AwaitSecureOk, Method::ConnectionSecureOk(s)) => {
                if self.login.resume(s.response.as_bytes().to_vec()) {
                    self.phase = Phase::Authenticating;
                }
            }
            (Phase::AwaitTuneOk, Method::ConnectionTuneOk(t)) => {
                let offered = handshake::frame_max(&self.config);
                let frame_max = if t.frame_max == 0 {
                    offered
                } else {
                    t.frame_max
                };
                if frame_max < FRAME_MIN_SIZE as u32 || frame_max > offered {
                    self.close_connection(
                        Fault::new(
                            reply::NOT_ALLOWED,
                            format!("frame_max {frame_max} outside [{FRAME_MIN_SIZE}, {offered}]"),
                        ),
                        ids,
                    );
                    return;
                }
                self.frame_max = frame_max as usize;
                self.channel_max = match t.channel_max {
                    0 => self.config.channel_max,
                    n => n.min(self.config.channel_max),
                };
                // A client may turn heartbeats off (0) but not stretch them past our maximum,
                // or a dead peer would hold its connection for up to 18 hours.
                self.heartbeat = match t.heartbeat {
                    0 => 0,
                    n => n.min(self.config.heartbeat_max.max(1)),
                };
                self.phase = Phase::AwaitOpen;
            }
            (Phase::AwaitOpen, Method::ConnectionOpen(_)) => {
                if let Err(reason) = self.access.admit(self.login.user()) {
                    // RabbitMQ refuses vhost access and connection limits with 530.
                    self.close_connection(Fault::new(reply::NOT_ALLOWED, reason), ids);
                    return;
                }
                // One virtual host: any name is accepted, as for 0-10.
                self.write(
                    0,
                    ConnectionOpenOk {
                        known_hosts: ShortStr::default(),
                    },
                );
                self.phase = Phase::Open;
            }
            (_, Method::ConnectionClose(c)) => {
                debug!(peer = %self.peer, code = c.reply_code, "client closed the connection");
                self.teardown();
                self.write(0, ConnectionCloseOk {});
                self.phase = Phase::Finished;
            }
            (Phase::Open, Method::ConnectionUpdateSecret(_)) => {
                self.write(0, ConnectionUpdateSecretOk {});
            }
            (Phase::Open, Method::ConnectionBlocked(_) | Method::ConnectionUnblocked(_)) => {}
            (_, m) => self.close_connection(
                Fault::command_invalid(format!("unexpected {} on channel 0", m.name())),
                ids,
            ),
        }
    }

    fn on_channel_frame(&mut self, frame: Frame) {
        let id = frame.channel;
        let Some(c) = self.channels.get_mut(&id) else {
            let opened = matches!(Method::decode(frame.payload), Ok(Method::ChannelOpen(_)))
                && frame.frame_type == FrameType::Method;
            if !opened {
                self.close_connection(
                    Fault::new(reply::CHANNEL_ERROR, format!("channel {id} is not open")),
                    (0, 0),
                );
            } else if id > self.channel_max {
                self.close_connection(
                    Fault::new(
                        reply::NOT_ALLOWED,
                        format!("channel {id} exceeds channel_max {}", self.channel_max),
                    ),
                    (20, 10),
                );
            } else {
                let max_body = self.config.max_message_size as u64;
                let mut channel = Channel::new(id, max_body);
                channel.settle_window =
                    ferry_core::SettleWindow::with_limit(self.config.session_max_unacked);
                self.channels.insert(id, channel);
                self.write(
                    id,
                    ChannelOpenOk {
                        channel_id: LongStr::default(),
                    },
                );
            }
            return;
        };
        if c.state == State::Closing {
            if frame.frame_type == FrameType::Method {
                match Method::decode(frame.payload) {
                    Ok(Method::ChannelCloseOk(_)) => {
                        self.channels.remove(&id);
                    }
                    Ok(Method::ChannelClose(_)) => {
                        self.write(id, ChannelCloseOk {});
                        self.channels.remove(&id);
                    }
                    _ => {}
                }
            }
            return;
        }
        match c.assembler.push(frame) {
            Ok(None) => {}
            Ok(Some(Assembled::Method(m))) => self.on_channel_method(id, m),
            Ok(Some(Assembled::Message(msg))) => {
                self.publisher = true;
                let ids = (msg.method.class_id(), msg.method.method_id());
                if let Some(Err(f)) = self.with_channel(id, |c, ctx| c.publish(ctx, msg)) {
                    self.fail(id, f, ids);
                }
            }
            Err(AssemblyError::TooLarge { size, max }) => self.fail(
                id,
                Fault::precondition(format!("message size {size} is larger than max size {max}")),
                (60, 40),
            ),
            Err(e) => self.close_connection(Fault::new(e.reply_code(), e.to_string()), (0, 0)),
        }
    }

    fn on_channel_method(&mut self, id: u16, m: Method) {
        let ids = (m.class_id(), m.method_id());
        let result = match m {
            Method::ChannelOpen(_) => Err(Fault::new(
                reply::CHANNEL_ERROR,
                format!("channel {id} is already open"),
            )),
            Method::ChannelClose(_) => {
                self.with_channel(id, |c, ctx| {
                    c.flush_confirms(ctx);
                    c.teardown(ctx);
                });
                self.channels.remove(&id);
                self.write(id, ChannelCloseOk {});
                Ok(())
            }
            // Not expected (we have not closed the channel); harmless.
            Method::ChannelCloseOk(_) => Ok(()),
            Method::ChannelFlow(f) => {
                self.with_channel(id, |c, ctx| {
                    c.flow(ctx, f.active);
                    c.reply(ctx, ChannelFlowOk { active: f.active });
                });
                Ok(())
            }
            Method::ChannelFlowOk(_) => Ok(()),
            m => self
                .with_channel(id, |c, ctx| dispatch(c, ctx, m))
                .unwrap_or(Ok(())),
        };
        if let Err(f) = result {
            self.fail(id, f, ids);
        }
    }

    /// A method failed: a soft error closes the channel, a hard one the connection.
    fn fail(&mut self, id: u16, fault: Fault, ids: (u16, u16)) {
        if fault.is_hard() {
            self.close_connection(fault, ids);
            return;
        }
        debug!(peer = %self.peer, channel = id, code = fault.code, "closing channel: {}", fault.text);
        self.with_channel(id, |c, ctx| {
            c.flush_confirms(ctx);
            c.teardown(ctx);
            c.state = State::Closing;
            c.write(
                ctx.out,
                ChannelClose {
                    reply_code: fault.code,
                    reply_text: ShortStr::new(fault.wire_text()).unwrap_or_default(),
                    class_id: ids.0,
                    method_id: ids.1,
                },
            );
        });
    }

    fn on_outbox_item(&mut self, item: OutboxItem) {
        match item {
            OutboxItem::Deliver(d) => {
                let id = self.consumers.get(&d.consumer).copied();
                let handled = match id {
                    Some(id) => {
                        let (channels, mut ctx) = self.ctx_parts();
                        match channels.get_mut(&id).filter(|c| c.state == State::Open) {
                            Some(c) => {
                                c.deliver(&mut ctx, d);
                                None
                            }
                            None => Some(d),
                        }
                    }
                    None => Some(d),
                };
                if let Some(d) = handled {
                    if d.acquired {
                        d.queue.release([(d.position, d.message)], false);
                    }
                }
            }
            OutboxItem::Durable => self.flush_durable(),
            OutboxItem::ConsumerCancelled { consumer, .. } => {
                if let Some(id) = self.consumers.remove(&consumer) {
                    let notify = self.caps.consumer_cancel_notify;
                    self.with_channel(id, |c, ctx| c.consumer_gone(ctx, consumer, notify));
                }
            }
        }
    }

    /// Sends connection.close and waits (briefly) for close-ok, ignoring everything else.
    fn close_connection(&mut self, fault: Fault, ids: (u16, u16)) {
        if matches!(self.phase, Phase::Closing | Phase::Finished) {
            return;
        }
        debug!(peer = %self.peer, code = fault.code, "closing connection: {}", fault.text);
        self.teardown();
        self.write(
            0,
            ConnectionClose {
                reply_code: fault.code,
                reply_text: ShortStr::new(fault.wire_text()).unwrap_or_default(),
                class_id: ids.0,
                method_id: ids.1,
            },
        );
        self.phase = Phase::Closing;
        self.closing_since = Some(Instant::now());
    }

    /// Ends every channel (consumers cancelled, unacknowledged messages requeued) and releases
    /// the connection's exclusive queues.
    fn teardown(&mut self) {
        let (channels, mut ctx) = self.ctx_parts();
        for c in channels.values_mut() {
            c.teardown(&mut ctx);
        }
        channels.clear();
        self.broker.release_owner(self.owner);
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
        Method::BasicGet(m) => c.get(ctx, m),
        Method::BasicAck(m) => c.ack(ctx, m),
        Method::BasicReject(m) => c.reject(ctx, m),
        Method::BasicNack(m) => c.nack(ctx, m),
        Method::BasicRecover(_) => {
            c.recover(ctx);
            c.reply(ctx, ferry_amqp091::BasicRecoverOk {});
            Ok(())
        }
        Method::BasicRecoverAsync(_) => {
            c.recover(ctx);
            Ok(())
        }
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
