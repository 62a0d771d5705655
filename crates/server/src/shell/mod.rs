//! The protocol-neutral connection shell, and the sans-I/O interface both protocol layers
//! (and any later one) implement.
//!
//! A [`Connection`] is a [`Shell`] (what every AMQP connection has: phase, login, access,
//! heartbeats, closing, the outbound buffer, the outbox deliveries arrive in, counters) plus a
//! [`Protocol`] (frames and their meaning). It does no I/O and never reads the clock: the
//! event loop in [`driver`] hands it input bytes and the time, takes its output bytes, and
//! asks it when it next wants to be woken ([`Connection::poll_timeout`]). Unit tests drive
//! it the same way, frame by frame, with a clock of their own.

pub mod driver;
pub mod outbound;
pub mod presettled;
#[cfg(test)]
pub mod testing;
pub mod timers;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use ferry_core::{
    now_ms, BacklogWaiter, Broker, ConnectionHandle, ConnectionId, ConnectionMeta, ConsumerId,
    Outbox, OutboxItem, Queue, SessionStatus, SyncPoint,
};
use tracing::{debug, info};

use crate::access::ClientAccess;
use crate::auth::{AuthOutcome, AuthService, AuthTask, Login, LoginStep};
use crate::config::ServerConfig;
use crate::fast_map::FastMap;
use crate::lifecycle::check_memory_alarm;
use crate::state::ServerState;
use outbound::Spliced;
use presettled::Presettled;
use timers::Timers;

/// Read this much at a time; a full-size 0-10 frame fits. A larger frame (0-9-1's may
/// take 128 KiB) accumulates over reads, the buffer making room each time.
pub const READ_CHUNK: usize = 64 * 1024;

/// Where a connection is in its life; the same steps for every AMQP version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    AwaitStartOk,
    /// A SASL step is running; nothing is read until it ends.
    Authenticating,
    AwaitSecureOk,
    AwaitTuneOk,
    AwaitOpen,
    Open,
    /// We sent connection.close; only close-ok matters now.
    Closing,
    /// Nothing more is processed: flush what is buffered, half-close (unless the peer is to
    /// close first), and discard input until the peer closes (or [`timers::LINGER`] passes).
    Finished,
}

/// Why the shell asks the protocol to close the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CloseReason {
    HandshakeTimeout,
    Shutdown,
}

/// What a connection task needs besides its socket.
#[derive(Clone)]
pub struct Services {
    pub broker: Arc<Broker>,
    pub config: Arc<ServerConfig>,
    pub auth: Arc<AuthService>,
    pub state: Arc<ServerState>,
}

/// Who is on the other end: the address, whether it came over TLS, and the name in the TLS
/// client certificate when one was presented and verified (the identity SASL EXTERNAL logs
/// in as).
#[derive(Debug, Clone)]
pub struct Peer {
    pub addr: SocketAddr,
    pub tls: bool,
    pub client_identity: Option<String>,
}

/// What went through one connection.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Traffic {
    pub bytes_in: u64,
    pub bytes_out: u64,
    pub frames_in: u64,
    /// Messages the client published.
    pub messages_in: u64,
    /// Messages written to the client: deliveries, and for 0-9-1 get-oks and returns.
    pub messages_out: u64,
}

/// How often a busy connection tells management about its sessions.
const SESSIONS_EVERY: Duration = Duration::from_secs(1);

/// What every connection has, whatever its protocol.
pub struct Shell {
    /// The core's id for this connection: what its messages carry as their publisher, and
    /// what management knows it by.
    pub id: ConnectionId,
    pub broker: Arc<Broker>,
    pub config: Arc<ServerConfig>,
    pub peer: SocketAddr,
    /// Deliveries from queues (and durability wake-ups) arrive here.
    pub outbox: Arc<Outbox>,
    /// Everything to send, in order; the driver writes it with as few system calls as the
    /// socket allows.
    pub out: BytesMut,
    /// Large bodies (and the buffer's bytes before them) queued ahead of `out`.
    pub spliced: Spliced,
    /// Deliveries written to consumers that settle as they receive, accepted on their
    /// queues together once the outbox is drained.
    pub presettled: Presettled,
    pub phase: Phase,
    pub login: Login,
    pub access: ClientAccess,
    /// Consumer → channel (0-9-1) or session channel (0-10), to route deliveries.
    pub consumers: FastMap<ConsumerId, u16>,
    /// A message has been published: resource alarms pause this connection.
    pub publisher: bool,
    /// Set by a publish that left a queue over the broker's backlog hold; the shell takes it
    /// at the end of the batch and holds the connection unless it consumes from that queue.
    pub backlogged: Option<Arc<Queue>>,
    /// Producer flow control: input is not processed while this queue's consumers catch up
    /// (the queue lets go of `backlog_waiter` once they have).
    held_by: Option<Held>,
    /// What a queue holding this connection's publishing (or, in 1.0, a link's credit)
    /// marks and wakes the connection through when its backlog has drained.
    pub backlog_waiter: Arc<BacklogWaiter>,
    /// A queue whose consumers made no progress while they held this connection, and its
    /// delivery count then: it holds the connection again only once they move.
    stalled: Option<(Arc<Queue>, u64)>,
    pub traffic: Traffic,
    timers: Timers,
    /// The time of the event being handled.
    now: Instant,
    /// A resource alarm stopped processing this publisher's input.
    flow_blocked: bool,
    /// The protocol stopped decoding its input halfway through a read because the output
    /// was past its high-water mark: the rest is processed once the peer has read enough.
    input_held: bool,
    /// The highest sync point we asked the journal to wake us for.
    sync_requested: SyncPoint,
    /// Give up at once, without lingering (the peer never answered our close).
    abandoned: bool,
    /// We answered the peer's close with close-ok, which tells the peer to close the socket:
    /// we wait for it to (up to [`timers::LINGER`]) instead of half-closing first.
    peer_closes: bool,
    tls: bool,
    /// Set once the connection is open: management sees it (and may close it).
    registration: Option<ConnectionHandle>,
    /// Sessions changed, or may have, since management last heard; told by this time.
    sessions_due: Option<Instant>,
    /// How many sessions management last heard of.
    reported_channels: usize,
}

/// A hold ends when the queue's consumers deliver nothing for this long: a consumer that is
/// stuck (not reading, no credit) must not stall its publishers, only slow ones pace them.
const BACKLOG_STALL: Duration = Duration::from_millis(100);
/// How often a held publisher looks at its queue's delivery count, for the stall rule (and
/// at the backlog, though the queue tells it when that has drained).
pub const BACKLOG_RECHECK: Duration = Duration::from_millis(25);

/// The queue a publisher waits for, when its consumers last took something, and when to
/// look again.
struct Held {
    queue: Arc<Queue>,
    delivered: u64,
    progress_at: Instant,
    check_at: Instant,
}

impl Shell {
    /// The output is past its high-water mark.
    fn output_full(&self) -> bool {
        self.out.len() + self.spliced.len() >= self.config.write_high_water
    }

    /// Called by a protocol before it decodes each frame: whether to stop here and leave
    /// the rest of the input for later, because the output is past its high-water mark. A
    /// peer that sends commands whose answers are far larger than they are (a 0-10 query
    /// answers with the arguments a queue was declared with, up to a megabyte, for a
    /// twenty-octet command), and does not read, then costs the broker that mark plus one
    /// answer, not an answer for every command in a read.
    pub fn hold_input(&mut self) -> bool {
        self.input_held = self.output_full();
        self.input_held
    }

    /// Input waits unprocessed: a resource alarm, or producer flow control.
    pub fn paused(&self) -> bool {
        self.flow_blocked || self.held_by.is_some()
    }

    /// Producer flow control's hold: the bytes a queue with consumers may have ready in
    /// memory before the publishers filling it wait.
    pub fn backlog_hold(&self) -> u64 {
        self.broker.config().backlog_hold.unwrap_or(u64::MAX)
    }

    /// The time of the event being handled.
    pub fn now(&self) -> Instant {
        self.now
    }

    pub fn new(services: Services, peer: Peer, amqp091: bool, now: Instant) -> Shell {
        let Services {
            broker,
            config,
            auth,
            state,
        } = services;
        let outbox = Outbox::new();
        Shell {
            id: broker.next_connection_id(),
            access: ClientAccess::new(&config, &state, peer.addr),
            login: Login::new(auth, peer.addr, peer.client_identity.clone(), amqp091),
            timers: Timers::new(now, config.handshake_timeout),
            broker,
            config,
            peer: peer.addr,
            backlog_waiter: BacklogWaiter::new(&outbox),
            outbox,
            out: BytesMut::with_capacity(READ_CHUNK),
            spliced: Spliced::default(),
            presettled: Presettled::default(),
            phase: Phase::AwaitStartOk,
            consumers: FastMap::default(),
            publisher: false,
            backlogged: None,
            held_by: None,
            stalled: None,
            traffic: Traffic::default(),
            now,
            flow_blocked: false,
            input_held: false,
            sync_requested: SyncPoint::default(),
            abandoned: false,
            peer_closes: false,
            tls: peer.tls,
            registration: None,
            sessions_due: None,
            reported_channels: 0,
        }
    }

    /// The client asks to open the connection as the user it logged in as: refused (the
    /// reason to send) when management deleted that user since the password check, or when
    /// connection rules or the per-user limit say no.
    pub fn admit(&mut self) -> Result<(), String> {
        if let Some(reason) = self.user_deleted() {
            return Err(reason);
        }
        let user = self.login.user().to_owned();
        self.access.admit(&user)
    }

    /// Why the connection may not go on when management deleted its user since the login.
    fn user_deleted(&self) -> Option<String> {
        self.login
            .user_deleted()
            .then(|| format!("user '{}' was deleted", self.login.user()))
    }

    /// The handshake is done: heartbeats apply from now, the handshake deadline no longer
    /// does, and management sees the connection.
    pub fn open(&mut self, opened: Opened) {
        self.phase = Phase::Open;
        self.timers.open(self.now, opened.heartbeat);
        let meta = ConnectionMeta {
            peer: self.peer,
            user: self.login.user().to_owned(),
            protocol: opened.protocol,
            tls: self.tls,
            client_properties: opened.client_properties,
            connected_at: now_ms(),
            heartbeat: opened.heartbeat,
            frame_max: opened.frame_max,
            channel_max: opened.channel_max,
        };
        let connections = self.broker.connections().clone();
        self.registration = Some(connections.register(self.id, meta, &self.outbox));
        // [`Shell::admit`] looked before open-ok; a deletion since then did not find this
        // connection, and one from now on will.
        if let Some(reason) = self.user_deleted() {
            self.outbox.push(OutboxItem::Close { reason });
        }
    }

    /// Sessions changed (opened, ended, consumers, modes): management hears of it soon.
    pub fn sessions_changed(&mut self) {
        if self.registration.is_some() && self.sessions_due.is_none() {
            self.sessions_due = Some(self.now + SESSIONS_EVERY);
        }
    }

    /// Replaces the heartbeat rule [`Shell::open`] set (AMQP 1.0: we send something at
    /// least every `send_every`, and take the peer for gone after `silent_after` without a
    /// byte from it).
    pub fn set_idle_timeouts(
        &mut self,
        send_every: Option<Duration>,
        silent_after: Option<Duration>,
    ) {
        self.timers.idle(self.now, send_every, silent_after);
    }

    /// We sent our connection close: wait (briefly) for close-ok.
    pub fn start_closing(&mut self) {
        self.phase = Phase::Closing;
        self.timers.closing(self.now);
    }

    pub fn is_closing(&self) -> bool {
        matches!(self.phase, Phase::Closing | Phase::Finished)
    }

    /// Nothing more will be processed: what is buffered goes out, then the socket closes
    /// once the peer has (or [`timers::LINGER`] passes).
    pub fn finish(&mut self) {
        if self.phase != Phase::Finished {
            self.phase = Phase::Finished;
            self.timers.finished(self.now);
        }
    }

    /// As [`Shell::finish`], after answering a 0-9-1 client's connection.close with close-ok,
    /// which tells its recipient that it may close the socket: the client closes first, as
    /// RabbitMQ lets it (0-10 keeps qpidd's way, closing right after close-ok).
    pub fn finish_after_close_ok(&mut self) {
        self.peer_closes = true;
        self.finish();
    }

    /// Asks the journal to wake this connection (through its outbox) once it is durable up
    /// to `point`; one registration per new point.
    pub fn wake_when_durable(&mut self, point: Option<SyncPoint>) {
        if let (Some(journal), Some(point)) = (self.broker.journal(), point) {
            if point > self.sync_requested {
                self.sync_requested = point;
                journal.notify_when_durable(point, self.outbox.clone());
            }
        }
    }

    /// Puts deliveries that raced with the end of the connection back on their queues.
    pub fn release_undelivered(&mut self) {
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

/// What a protocol layer tells the shell when its handshake completes.
#[derive(Debug, Clone, Default)]
pub struct Opened {
    pub protocol: &'static str,
    pub heartbeat: u16,
    pub frame_max: u32,
    pub channel_max: u16,
    /// What the client said of itself in its start-ok, as text.
    pub client_properties: Vec<(String, String)>,
}

/// What a protocol layer does; the shell does the rest.
pub trait Protocol {
    /// Processes every complete frame in `input` (consuming it), appending replies to
    /// `shell.out`. Called only while the phase is neither `Authenticating` nor `Finished`.
    fn process(&mut self, shell: &mut Shell, input: &mut BytesMut);
    fn on_outbox_item(&mut self, shell: &mut Shell, item: OutboxItem);
    /// A SASL step finished (the phase was `Authenticating`).
    fn on_login(&mut self, shell: &mut Shell, step: LoginStep);
    fn write_heartbeat(&mut self, shell: &mut Shell);
    /// Sends the protocol's connection close for `reason` and starts closing.
    fn close(&mut self, shell: &mut Shell, reason: CloseReason);
    /// Releases everything the connection holds (idempotent).
    fn teardown(&mut self, shell: &mut Shell);
    /// A resource alarm stopped (true) or resumed (false) processing this publisher's input.
    fn set_flow_blocked(&mut self, shell: &mut Shell, blocked: bool);
    /// The peer said nothing for too long and the connection is about to be dropped: a last
    /// chance to tell it why (AMQP 1.0 closes with an error; the others just drop).
    fn on_peer_silent(&mut self, _shell: &mut Shell) {}
    /// When the protocol wants [`Protocol::on_deadline`] called (to look again at credit it
    /// holds back); none by default.
    fn deadline(&self) -> Option<Instant> {
        None
    }
    fn on_deadline(&mut self, _shell: &mut Shell) {}
    /// A queue let go of the connection's [`Shell::backlog_waiter`]: credit the protocol
    /// held back for that queue's backlog may go now.
    fn on_backlog_released(&mut self, _shell: &mut Shell) {}
    /// Sessions (0-10) or channels (0-9-1) open now.
    fn channel_count(&self) -> usize;
    /// The sessions open now, for management (asked at most once a second).
    fn sessions(&self) -> Vec<SessionStatus>;
}

/// A connection without I/O: bytes and time in, bytes out.
pub struct Connection<P> {
    pub shell: Shell,
    pub protocol: P,
}

impl<P: Protocol> Connection<P> {
    pub fn new(shell: Shell, protocol: P) -> Connection<P> {
        Connection { shell, protocol }
    }

    fn at(&mut self, now: Instant) {
        // Time only moves forward, whatever the caller's clock does.
        self.shell.now = self.shell.now.max(now);
    }

    /// Bytes arrived (appended to `input`): process what is complete. Input that cannot be
    /// processed yet (a SASL step runs, an alarm pauses this publisher) stays in `input`.
    pub fn handle_input(&mut self, input: &mut BytesMut, now: Instant) {
        self.at(now);
        self.shell.timers.read(self.shell.now);
        // Anything the peer sends may change its sessions' figures.
        self.shell.sessions_changed();
        if self.shell.phase == Phase::Finished {
            // After close-ok everything the peer still sends is discarded, not refused:
            // closing with unread input would reset the connection under the peer.
            self.shell.traffic.bytes_in += input.len() as u64;
            input.clear();
            return;
        }
        self.process(input);
    }

    fn process(&mut self, input: &mut BytesMut) {
        if self.shell.paused() || self.shell.phase == Phase::Authenticating {
            return;
        }
        let before = input.len();
        self.protocol.process(&mut self.shell, input);
        self.shell.traffic.bytes_in += (before - input.len()) as u64;
        if self.protocol.channel_count() != self.shell.reported_channels {
            // A session opened or ended is told before the peer hears of it, not after the
            // write: a tool that made one and at once asks management for it over another
            // connection (qpid-python's test_connection_stats) raced the report.
            self.report();
        }
        if self.shell.phase == Phase::Finished {
            input.clear();
        }
        if self.shell.publisher {
            // Per batch read, not per tick: a fast publisher overshoots the high-water mark
            // by one batch, not by a tick's worth.
            check_memory_alarm(&self.shell.broker);
        }
        if let Some(q) = self.shell.backlogged.take() {
            // A connection consuming from that queue itself is not held: its own acks,
            // unread, could be what the queue waits for. (Consumers of other queues do not
            // exempt it: qpid-perftest's publishers listen on a control queue. Two
            // connections each publishing into a backlog the other consumes stop each
            // other's deliveries, which ends both holds after BACKLOG_STALL.)
            let consumers = &self.shell.consumers;
            let delivered = q.backlog().delivered;
            let stalled = self
                .shell
                .stalled
                .as_ref()
                .is_some_and(|(s, at)| Arc::ptr_eq(s, &q) && *at == delivered);
            // Held only while still over the hold: consumers that caught up since the
            // publish leave nothing to wait for.
            let hold = self.shell.backlog_hold();
            if !stalled
                && !self.shell.is_closing()
                && !q.consumed_by(|id| consumers.contains_key(&id))
                && q.hold_publisher(&self.shell.backlog_waiter, hold)
            {
                debug!(peer = %self.shell.peer, queue = q.name(), "publisher held: queue backlog");
                self.shell.stalled = None;
                self.shell.held_by = Some(Held {
                    queue: q,
                    delivered,
                    progress_at: self.shell.now,
                    check_at: self.shell.now + BACKLOG_RECHECK,
                });
            }
        }
    }

    /// Lets a publisher held by a queue's backlog go once the queue has let go of it
    /// (`released`: its backlog drained to the hold, it lost its consumers or was deleted),
    /// its consumers took nothing for [`BACKLOG_STALL`] (looked at every
    /// [`BACKLOG_RECHECK`]), or the connection is closing; processes what waited in `input`.
    fn poll_backlog(&mut self, input: &mut BytesMut, released: bool) {
        let now = self.shell.now;
        let closing = self.shell.is_closing();
        let hold = self.shell.backlog_hold();
        let Some(held) = self
            .shell
            .held_by
            .as_mut()
            .filter(|h| released || closing || now >= h.check_at)
        else {
            return;
        };
        let waiter = &self.shell.backlog_waiter;
        let backlog = held.queue.backlog();
        // Registering again also covers a release that raced with other publishers filling
        // the queue back up: over the hold again, it stays held.
        if !closing && held.queue.hold_publisher(waiter, hold) {
            if backlog.delivered != held.delivered {
                held.delivered = backlog.delivered;
                held.progress_at = now;
            }
            if now.duration_since(held.progress_at) < BACKLOG_STALL {
                held.check_at = now + BACKLOG_RECHECK;
                return;
            }
            debug!(peer = %self.shell.peer, queue = held.queue.name(), "publisher let go: consumers stalled");
            self.shell.stalled = Some((held.queue.clone(), backlog.delivered));
        }
        self.let_go();
        self.shell.timers.read(self.shell.now);
        self.process(input);
    }

    /// Ends a backlog hold, if any: the queue forgets this connection's waiter.
    fn let_go(&mut self) -> bool {
        let Some(held) = self.shell.held_by.take() else {
            return false;
        };
        held.queue.unhold_publisher(&self.shell.backlog_waiter);
        true
    }

    /// The peer closed its side: what a backlog hold kept unprocessed is processed now (at
    /// most a read batch), so a publisher that sent and closed loses nothing to the hold. A
    /// resource alarm still keeps it: memory is what that protects.
    pub fn handle_eof(&mut self, input: &mut BytesMut, now: Instant) {
        self.at(now);
        if self.let_go() {
            self.process(input);
        }
    }

    /// Looks at what may have let a paused publisher go: its queue's backlog (the queue
    /// marks the connection's waiter and wakes it), and the broker's resource alarms (a
    /// publisher is paused while one is raised). Processes what waited in `input` when it
    /// resumes.
    pub fn poll_flow(&mut self, input: &mut BytesMut, now: Instant) {
        self.at(now);
        let released = self.shell.backlog_waiter.take_released();
        self.poll_backlog(input, released);
        if released && !self.shell.is_closing() {
            self.protocol.on_backlog_released(&mut self.shell);
        }
        let block = self.shell.publisher && self.shell.broker.alarms().blocked();
        if block == self.shell.flow_blocked {
            return;
        }
        self.shell.flow_blocked = block;
        debug!(peer = %self.shell.peer, blocked = block, "publisher flow control");
        self.protocol.set_flow_blocked(&mut self.shell, block);
        if !block {
            // Heartbeats that waited unread while we were not reading are not held
            // against the peer.
            self.shell.timers.read(self.shell.now);
            self.process(input);
        }
    }

    /// Takes the deliveries waiting in the outbox, unless the outbound buffer is already
    /// past its high-water mark (a peer that never reads costs at most that plus its
    /// credit). Returns whether a queue's walk goes on through the outbox
    /// ([`Outbox::take`]).
    pub fn handle_outbox(&mut self, items: &mut Vec<OutboxItem>, now: Instant) -> bool {
        self.at(now);
        if !self.below_high_water() {
            return false;
        }
        let walking = self.shell.outbox.take(items);
        for item in items.drain(..) {
            self.protocol.on_outbox_item(&mut self.shell, item);
        }
        self.shell.presettled.finish();
        walking
    }

    pub fn below_high_water(&self) -> bool {
        !self.shell.output_full()
    }

    /// Processes the input a protocol left for later ([`Shell::hold_input`]) once the
    /// output has gone below its high-water mark; returns whether it did. The driver calls
    /// this after each write: the peer may have sent everything already, so no read would
    /// come to process it.
    pub fn resume_held_input(&mut self, input: &mut BytesMut, now: Instant) -> bool {
        if !self.shell.input_held || self.shell.output_full() || self.is_finished() {
            return false;
        }
        self.at(now);
        self.shell.input_held = false;
        self.process(input);
        true
    }

    /// The next bytes to send (all of them unless a large body was spliced in; see
    /// [`Connection::output_slices`]). Tests read output this way.
    #[cfg(test)]
    pub fn output(&self) -> &[u8] {
        self.shell.spliced.front(&self.shell.out)
    }

    /// Everything to send, in order, as slices for one vectored write; returns how many of
    /// `slices` it filled.
    pub fn output_slices<'a>(&'a self, slices: &mut [std::io::IoSlice<'a>]) -> usize {
        self.shell.spliced.io_slices(&self.shell.out, slices)
    }

    pub fn has_output(&self) -> bool {
        !self.shell.out.is_empty() || !self.shell.spliced.is_empty()
    }

    /// `n` bytes of the output went out.
    pub fn on_transmitted(&mut self, n: usize, now: Instant) {
        self.at(now);
        self.shell.spliced.advance(&mut self.shell.out, n);
        if self.shell.out.is_empty() && self.shell.spliced.is_empty() {
            // Everything went: the buffer starts again at the front of its allocation (no
            // copy, nothing unsent to move, no piece split off it still queued). Otherwise
            // each write left the buffer's start further on, until a batch of deliveries ran
            // out of room halfway and had the half already written moved back to the front:
            // a second copy of most of what a consumer was sent.
            self.shell.out.reserve(READ_CHUNK);
        }
        self.shell.traffic.bytes_out += n as u64;
        if n > 0 {
            self.shell.timers.wrote(self.shell.now);
            self.report();
        }
    }

    /// Tells management the traffic so far (a few plain stores, once per write), and the
    /// sessions when they are due.
    fn report(&mut self) {
        let Some(registration) = &self.shell.registration else {
            return;
        };
        let t = self.shell.traffic;
        let channels = self.protocol.channel_count();
        registration.store_traffic(ferry_core::Traffic {
            bytes_in: t.bytes_in,
            bytes_out: t.bytes_out,
            frames_in: t.frames_in,
            messages_in: t.messages_in,
            messages_out: t.messages_out,
            channels: channels as u64,
        });
        // A session opened or ended shows at once (tools look for a session they just
        // made); figures within sessions at most once a second.
        let due = self
            .shell
            .sessions_due
            .is_some_and(|due| self.shell.now >= due);
        if due {
            self.shell.sessions_due = None;
        }
        if due || channels != self.shell.reported_channels {
            // A count change does not put off the due report: what else changed with it
            // (modes, consumers) still shows within the second.
            self.shell.reported_channels = channels;
            registration.set_sessions(self.protocol.sessions());
        }
    }

    /// When the connection next wants [`Connection::handle_timeout`] called.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let timer = self
            .shell
            .timers
            .next(self.shell.phase, self.shell.paused());
        // A closing connection no longer does the protocol's timed work (handle_timeout
        // skips it), so its deadline must not keep waking the loop.
        let protocol = self
            .protocol
            .deadline()
            .filter(|_| !self.shell.is_closing());
        let held = self.shell.held_by.as_ref().map(|h| h.check_at);
        [timer, self.shell.sessions_due, protocol, held]
            .into_iter()
            .flatten()
            .min()
    }

    pub fn handle_timeout(&mut self, now: Instant) {
        self.at(now);
        self.report();
        let now = self.shell.now;
        if !self.shell.is_closing() && self.protocol.deadline().is_some_and(|at| at <= now) {
            self.protocol.on_deadline(&mut self.shell);
        }
        let timers = &self.shell.timers;
        match self.shell.phase {
            Phase::Finished => {}
            Phase::Closing => {
                if timers.close_grace_over(now) {
                    debug!(peer = %self.shell.peer, "no close-ok in time: dropping the connection");
                    self.shell.abandoned = true;
                }
            }
            Phase::Open => {
                if !self.shell.paused() && timers.peer_silent(now) {
                    info!(
                        peer = %self.shell.peer,
                        user = self.shell.login.user(),
                        "missed heartbeats from the client: dropping the connection"
                    );
                    self.protocol.on_peer_silent(&mut self.shell);
                    self.shell.abandoned = true;
                } else if timers.heartbeat_due(now) {
                    if self.shell.out.is_empty() && self.shell.spliced.is_empty() {
                        self.protocol.write_heartbeat(&mut self.shell);
                    }
                    // Due again half an interval from now unless something is written.
                    self.shell.timers.wrote(now);
                }
            }
            _ => {
                if timers.handshake_over(now) {
                    self.protocol
                        .close(&mut self.shell, CloseReason::HandshakeTimeout);
                }
            }
        }
    }

    /// The broker is stopping.
    pub fn handle_shutdown(&mut self, now: Instant) {
        self.at(now);
        if !self.shell.is_closing() {
            self.protocol.close(&mut self.shell, CloseReason::Shutdown);
        }
    }

    /// A SASL step the connection started, for the driver to await (input waits meanwhile).
    pub fn take_auth_task(&mut self) -> Option<AuthTask> {
        self.shell.login.take_task()
    }

    /// The SASL step finished; whatever the client sent meanwhile is in `input`.
    pub fn handle_auth(&mut self, outcome: AuthOutcome, input: &mut BytesMut, now: Instant) {
        self.at(now);
        if self.shell.phase != Phase::Authenticating {
            return;
        }
        let step = self.shell.login.finish(outcome);
        self.protocol.on_login(&mut self.shell, step);
        if !input.is_empty() {
            self.process(input);
        }
    }

    /// Whether the driver should read from the socket now.
    pub fn wants_read(&self, buffered: usize) -> bool {
        // A publisher paused by an alarm or a backlog is still read, without processing, up
        // to one batch: enough to notice that it went away, not enough to matter.
        self.below_high_water()
            && self.shell.phase != Phase::Authenticating
            && (!self.shell.paused() || buffered < 4 * READ_CHUNK)
    }

    /// Nothing more will be processed; the driver flushes, half-closes and drains.
    pub fn is_finished(&self) -> bool {
        self.shell.phase == Phase::Finished || self.shell.abandoned
    }

    /// Whether the driver half-closes once finished, or leaves that to the peer.
    pub fn half_closes(&self) -> bool {
        !self.shell.peer_closes
    }

    /// The socket may be dropped now (after a finish, once output is flushed).
    pub fn is_done(&self) -> bool {
        self.shell.abandoned
            || (self.shell.phase == Phase::Finished
                && self.shell.timers.linger_over(self.shell.now))
    }

    /// The driver is done with the socket: release everything.
    pub fn teardown(&mut self) {
        self.let_go();
        self.protocol.teardown(&mut self.shell);
    }

    pub fn outbox(&self) -> &Arc<Outbox> {
        &self.shell.outbox
    }

    pub fn broker(&self) -> &Arc<Broker> {
        &self.shell.broker
    }

    pub fn is_publisher(&self) -> bool {
        self.shell.publisher
    }
}
