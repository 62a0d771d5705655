//! One attached 0-10 session: command numbering and completion in both directions, the
//! subscriptions it owns, and the transfers it has sent but the client has not yet settled.

use std::collections::VecDeque;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use ferry_amqp010::{
    with_redelivered, write_command, write_control_framed, write_transfer_placing_body, AcceptMode,
    AcquireMode, Command, Control, ErrorCode, ExecutionException, ExecutionResult, MessageTransfer,
    SequenceSet, SessionCommandPoint, SessionCompleted, SessionDetach, SessionKnownCompleted, Str,
    TransferHead,
};
use ferry_core::{
    Broker, ConnectionId, ConsumerId, Delivery, Exchange, Header, Message, Outbox, OwnerId, Queue,
    SettleWindow, SyncPoint,
};
use tracing::{debug, warn};

use super::convert::Exception;
use super::dtx::SessionDtx;
use super::outgoing::{DeliveryRecord, Outgoing, Outstanding, Pending};
use super::tx::SessionTx;
use crate::access::{ClientAccess, PublishCache};
use crate::config::ServerConfig;
use crate::encoded::Encoded;
use crate::fast_map::FastMap;
use crate::shell::outbound::{Sink, SPLICE_MIN};
use crate::shell::presettled::Presettled;

/// What a command handler needs besides its session.
pub struct Env<'a> {
    pub broker: &'a Arc<Broker>,
    /// This connection, as the core knows it (no-local queues).
    pub connection: ConnectionId,
    pub outbox: &'a Arc<Outbox>,
    pub out: &'a mut BytesMut,
    pub max_frame: usize,
    /// Which channel each of this connection's consumers belongs to, for routing deliveries.
    pub consumers: &'a mut FastMap<ConsumerId, u16>,
    /// Who the client is, for ACL checks and quotas.
    pub access: &'a ClientAccess,
    pub config: &'a ServerConfig,
    /// A queue a publish left over the broker's backlog hold (see `Shell::backlogged`).
    pub backlogged: &'a mut Option<Arc<Queue>>,
}

pub struct Subscription {
    pub consumer: ConsumerId,
    pub queue: Arc<Queue>,
    pub destination: Str,
    pub accept_mode: AcceptMode,
    /// The `message.transfer` every delivery carries, made once: one made per delivery
    /// counts the destination's shared buffer up and down each time.
    transfer: MessageTransfer,
}

impl Subscription {
    pub fn new(
        consumer: ConsumerId,
        queue: Arc<Queue>,
        destination: Str,
        accept_mode: AcceptMode,
        acquire_mode: AcquireMode,
    ) -> Subscription {
        let transfer = MessageTransfer {
            destination: Some(destination.clone()),
            accept_mode: Some(accept_mode),
            acquire_mode: Some(acquire_mode),
        };
        Subscription {
            consumer,
            queue,
            destination,
            accept_mode,
            transfer,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionState {
    Attached,
    /// We sent an exception and session.detach; input is ignored until the peer detaches.
    Failed,
}

pub struct Session {
    pub name: Bytes,
    pub channel: u16,
    pub owner: OwnerId,
    pub state: SessionState,
    /// Id the next incoming command gets (set by the peer's session.command-point).
    next_incoming: u32,
    /// A command has been received: the numbering is fixed from then on.
    numbered: bool,
    /// Completed incoming commands the peer has not yet acknowledged with known-completed.
    completed: SequenceSet,
    /// New completions since we last sent session.completed.
    completion_pending: bool,
    pub outgoing: Outgoing,
    subscriptions: FastMap<ConsumerId, Subscription>,
    by_destination: FastMap<Str, ConsumerId>,
    /// The exchange of the last transfer: publishers nearly always reuse one destination.
    last_exchange: Option<(Str, Arc<Exchange>)>,
    /// ACL decisions for this session's publishes.
    pub publish_acl: PublishCache,
    /// Where a transfer's header segment is rewritten on receipt (see
    /// `commands::transfer`), kept so that the rewrite allocates nothing.
    pub header_scratch: Vec<u8>,
    /// Caps the transfers sent and not yet both completed and settled, over all of the
    /// session's subscriptions (`--session-max-unacked`).
    pub settle_window: Option<Arc<SettleWindow>>,
    /// Set by tx.select: what the open transaction has staged.
    pub tx: Option<Box<SessionTx>>,
    /// Set by dtx.select: the session's associations with distributed transactions.
    pub dtx: Option<Box<SessionDtx>>,
    /// Set by a command whose effect must reach stable storage before it completes.
    needs_sync: Option<SyncPoint>,
    /// Commands executed but not complete until the journal is durable up to their point,
    /// in command order (points only grow within a session).
    waiting: VecDeque<Waiting>,
}

/// An executed command whose completion waits for the journal.
#[derive(Debug, Clone, Copy)]
pub struct Waiting {
    pub id: u32,
    pub point: SyncPoint,
    /// The command carried the sync flag: report its completion as soon as it has it.
    pub sync: bool,
}

/// session.completed asks for known-completed once the unacknowledged span gets this wide,
/// as qpidd does, so the set we keep stays small.
const TIMELY_REPLY_SPAN: u64 = 1000;

/// The most ranges the completed set may be split into. A client that numbers its commands
/// in order and answers known-completed keeps one or two; holes come only from commands
/// waiting for the journal (between completed ones) or from a peer that acknowledges every
/// other command. Past this the session ends with resource-limit-exceeded, so the set's
/// memory is bounded and session.completed (32 KiB at this size) always encodes (a
/// sequence-set holds at most [`SequenceSet::MAX_RANGES`]).
pub const MAX_COMPLETED_RANGES: usize = 4096;

/// Room a message.transfer takes around its header segment and body (the command's own
/// segment and the frame headers), near enough to make room for.
const TRANSFER_FRAMES_AROUND: usize = 96;

impl Session {
    pub fn new(name: Bytes, channel: u16, owner: OwnerId) -> Session {
        Session {
            name,
            channel,
            owner,
            state: SessionState::Attached,
            next_incoming: 0,
            numbered: false,
            completed: SequenceSet::new(),
            completion_pending: false,
            outgoing: Outgoing::default(),
            subscriptions: FastMap::default(),
            by_destination: FastMap::default(),
            last_exchange: None,
            publish_acl: PublishCache::default(),
            header_scratch: Vec::new(),
            settle_window: None,
            needs_sync: None,
            waiting: VecDeque::new(),
            tx: None,
            dtx: None,
        }
    }

    /// The command being executed may complete only once the journal is durable up to
    /// `point` (a persistent message's record, a durable declaration).
    pub fn needs_sync(&mut self, point: SyncPoint) {
        self.needs_sync = Some(self.needs_sync.map_or(point, |p| p.max(point)));
    }

    pub fn take_needs_sync(&mut self) -> Option<SyncPoint> {
        self.needs_sync.take()
    }

    /// Holds back command `id`'s completion until the journal reaches `point`.
    pub fn wait_for_sync(&mut self, id: u32, point: SyncPoint, sync: bool) {
        self.waiting.push_back(Waiting { id, point, sync });
    }

    /// The point the last waiting command needs, if any waits.
    pub fn last_waiting_point(&self) -> Option<SyncPoint> {
        self.waiting.back().map(|w| w.point)
    }

    /// Completes the waiting commands the journal has made durable; returns whether one of
    /// them asked (with sync) for its completion to be reported at once.
    pub fn complete_durable(&mut self, durable: SyncPoint) -> bool {
        let mut sync = false;
        while let Some(w) = self.waiting.front().copied() {
            if w.point > durable {
                break;
            }
            self.waiting.pop_front();
            self.complete(w.id);
            sync |= w.sync;
        }
        sync
    }

    /// The first command that can now never complete (the journal failed).
    pub fn first_waiting(&self) -> Option<Waiting> {
        self.waiting.front().copied()
    }

    /// The broker sends commands too (transfers, results), numbered from zero: say so.
    pub fn write_attached_command_point(&self, out: &mut BytesMut, max_frame: usize) {
        let point = SessionCommandPoint {
            command_id: Some(self.outgoing.next_id()),
            command_offset: Some(0),
        };
        self.write_control(out, max_frame, point.into());
    }

    pub fn write_control(&self, out: &mut BytesMut, max_frame: usize, control: Control) {
        if let Err(e) = write_control_framed(out, self.channel, &control, max_frame) {
            warn!("cannot encode {}: {e}", control.name());
        }
    }

    /// The peer numbers its commands from `id` on. Without resumable sessions there is
    /// nothing to replay, so a point may be set before the first command (a new attachment,
    /// or a client resuming what is new to us) or restate the next id; any other point
    /// would renumber commands already executed, or skip ids and leave holes in the
    /// completed set that nothing ever fills. qpidd refuses a point beyond what it
    /// received with invalid-argument; it takes one behind it as a replay, which we cannot do.
    pub fn set_command_point(&mut self, id: u32) -> Result<(), Exception> {
        if self.numbered && id != self.next_incoming {
            return Err(Exception::new(
                ErrorCode::InvalidArgument,
                format!(
                    "command-point {id} out of range: the next command is {}",
                    self.next_incoming
                ),
            ));
        }
        self.next_incoming = id;
        Ok(())
    }

    /// The id of the last command received.
    pub fn last_command_id(&self) -> u32 {
        self.next_incoming.wrapping_sub(1)
    }

    /// Numbers the next incoming command.
    pub fn next_command_id(&mut self) -> u32 {
        let id = self.next_incoming;
        self.next_incoming = id.wrapping_add(1);
        self.numbered = true;
        id
    }

    pub fn complete(&mut self, id: u32) {
        self.completed.add(id);
        self.completion_pending = true;
    }

    pub fn known_completed(&mut self, commands: &SequenceSet) {
        self.completed.remove_set(commands);
    }

    /// The completed set split past [`MAX_COMPLETED_RANGES`]: the session must end. Looked
    /// at after a known-completed, the peer's one way to split it (with command-point
    /// checked): holes left by commands waiting for the journal fill as they complete, and
    /// a journal stall must not end a well-behaved session.
    pub fn completed_overflow(&self) -> Option<Exception> {
        let ranges = self.completed.ranges().len();
        (ranges > MAX_COMPLETED_RANGES).then(|| {
            Exception::new(
                ErrorCode::ResourceLimitExceeded,
                format!(
                    "completed commands split into {ranges} ranges (at most \
                     {MAX_COMPLETED_RANGES}): acknowledge them with known-completed"
                ),
            )
        })
    }

    /// Sends session.completed if anything completed since the last one (once per read
    /// batch, so a pipelining publisher gets one control per batch, not per message).
    pub fn flush_completion(&mut self, out: &mut BytesMut, max_frame: usize, force: bool) {
        if !(self.completion_pending || force) || self.state != SessionState::Attached {
            return;
        }
        self.completion_pending = false;
        let span = match (self.completed.first(), self.completed.last()) {
            (Some(lo), Some(hi)) => u64::from(hi.wrapping_sub(lo)) + 1,
            _ => 0,
        };
        // The set is lent to the control and taken back, not copied for every batch.
        let completed: Control = SessionCompleted {
            commands: Some(std::mem::take(&mut self.completed)),
            timely_reply: span > TIMELY_REPLY_SPAN,
        }
        .into();
        if let Err(e) = write_control_framed(out, self.channel, &completed, max_frame) {
            warn!("cannot encode {}: {e}", completed.name());
        }
        if let Control::SessionCompleted(c) = completed {
            self.completed = c.commands.unwrap_or_default();
        }
    }

    pub fn write_command(&mut self, env: &mut Env, command: Command) {
        if let Err(e) = write_command(env.out, self.channel, &command, false, env.max_frame) {
            warn!("cannot encode {}: {e}", command.name());
            return;
        }
        self.outgoing.push_plain();
    }

    /// Sends a command's result. One that cannot be encoded fails the command: dropping it
    /// would leave the client waiting for it for ever.
    pub fn write_result(
        &mut self,
        env: &mut Env,
        result: Result<ExecutionResult, String>,
    ) -> Result<(), Exception> {
        let result = result.map_err(|e| {
            Exception::new(
                ErrorCode::ResourceLimitExceeded,
                format!("the command's result cannot be sent: {e}"),
            )
        })?;
        self.write_command(env, result.into());
        Ok(())
    }

    /// Reports a failed command and detaches, as qpidd does; the session's consumers and
    /// unsettled messages are released at once.
    pub fn fail(&mut self, env: &mut Env, command_id: u32, codes: (u8, u8), e: Exception) {
        debug!(session = %String::from_utf8_lossy(&self.name), ?e, "execution exception");
        let exception = ExecutionException {
            error_code: Some(e.code),
            command_id: Some(command_id),
            class_code: Some(codes.0),
            command_code: Some(codes.1),
            field_index: e.field_index,
            description: Some(Str::from(crate::text::truncated(&e.description, 255))),
            error_info: None,
        };
        self.write_command(env, exception.into());
        let detach = SessionDetach {
            name: Some(self.name.clone()),
        };
        self.write_control(env.out, env.max_frame, detach.into());
        self.state = SessionState::Failed;
        self.end(env);
    }

    /// Releases everything the session holds: consumers, unsettled messages, exclusive
    /// queues. Idempotent.
    pub fn end(&mut self, env: &mut Env) {
        for (id, sub) in self.subscriptions.drain() {
            env.consumers.remove(&id);
            env.broker.cancel_consumer(&sub.queue, id);
        }
        self.by_destination.clear();
        let unsettled = self.outgoing.drain_unsettled();
        release_to_queues(
            unsettled
                .into_iter()
                .filter(|r| r.acquired)
                .filter_map(|r| r.unsettled.map(|u| (u.queue, r.position, u.message))),
            true,
        );
        env.broker.release_owner(self.owner);
        self.last_exchange = None;
        self.waiting.clear();
        self.needs_sync = None;
        // An open transaction dies with the session: nothing it staged happens.
        self.tx = None;
        // Distributed transactions outlive it, but the branches it worked for can only
        // roll back now.
        if let Some(dtx) = self.dtx.take() {
            dtx.fail_all(env.broker);
        }
    }

    pub fn exchange_for(&mut self, broker: &Broker, name: &Str) -> Option<Arc<Exchange>> {
        if let Some((cached, exchange)) = &self.last_exchange {
            if cached == name && !exchange.is_deleted() {
                return Some(exchange.clone());
            }
        }
        let exchange = broker.exchange(name.as_str().ok()?)?;
        self.last_exchange = Some((name.clone(), exchange.clone()));
        Some(exchange)
    }

    pub fn subscription_count(&self) -> usize {
        self.subscriptions.len()
    }

    /// Gives the window slots of finished transfer records back (once per batch of
    /// completions or settlements, not per message).
    pub fn return_window_slots(&mut self) {
        let n = self.outgoing.take_finished();
        if let Some(w) = &self.settle_window {
            w.give_back(n);
        }
    }

    /// A delivery that will never be recorded (its subscription is gone, or it could not be
    /// encoded) frees its window slot at once, if it took one.
    fn window_slot_unused(&self, d: &Delivery) {
        if let Some(w) = self.settle_window.as_ref().filter(|_| d.windowed) {
            w.give_back(1);
        }
    }

    pub fn subscription(&self, destination: &Str) -> Option<&Subscription> {
        self.by_destination
            .get(destination)
            .and_then(|id| self.subscriptions.get(id))
    }

    pub fn subscription_mut(&mut self, destination: &Str) -> Option<&mut Subscription> {
        let id = self.by_destination.get(destination)?;
        self.subscriptions.get_mut(id)
    }

    pub fn add_subscription(&mut self, sub: Subscription) {
        self.by_destination
            .insert(sub.destination.clone(), sub.consumer);
        self.subscriptions.insert(sub.consumer, sub);
    }

    pub fn remove_subscription(&mut self, destination: &Str) -> Option<Subscription> {
        let id = self.by_destination.remove(destination)?;
        self.subscriptions.remove(&id)
    }

    /// Writes one delivery as a message.transfer and records it. Returns false (and puts
    /// the message back) if the subscription no longer exists here.
    pub fn deliver(
        &mut self,
        sink: Sink<'_>,
        presettled: &mut Presettled,
        max_frame: usize,
        d: Delivery,
    ) -> bool {
        let Sink { out, spliced } = sink;
        let Some(sub) = self.subscriptions.get(&d.consumer) else {
            self.window_slot_unused(&d);
            if d.acquired {
                d.queue.release([(d.position, d.message)], false);
            }
            return false;
        };
        let header = outgoing_header(&d.message, d.redelivered);
        let head = TransferHead {
            channel: self.channel,
            transfer: &sub.transfer,
            sync: false,
            header_segment: &header,
            max_frame_size: max_frame,
        };
        let body = d.message.body();
        let body_len = (d.message.body_segment() || !body.is_empty()).then_some(body.len());
        // A large body goes out from where it is, spliced between its frames' headers.
        let splice = (body.len() >= SPLICE_MIN).then(|| d.message.body_bytes());
        let copied = if splice.is_some() { 0 } else { body.len() };
        spliced.make_room(out, TRANSFER_FRAMES_AROUND + header.len() + copied);
        let written =
            write_transfer_placing_body(out, head, body_len, |out, range| match &splice {
                Some(shared) => spliced.splice(out, shared.slice(range)),
                None => out.extend_from_slice(&body[range]),
            });
        if let Err(e) = written {
            warn!("cannot encode transfer: {e}");
            self.window_slot_unused(&d);
            if d.acquired {
                d.queue.release([(d.position, d.message)], false);
            }
            return false;
        }
        // With accept-mode none the message is settled as soon as it is sent.
        let settled_now = d.acquired && sub.accept_mode == AcceptMode::None;
        let credit_bytes = u32::try_from(d.message.size()).unwrap_or(u32::MAX);
        let unsettled = if settled_now {
            presettled.push(d.queue, d.position, d.message);
            None
        } else {
            Some(Outstanding {
                queue: d.queue,
                message: d.message,
            })
        };
        self.outgoing.push_transfer(DeliveryRecord {
            consumer: d.consumer,
            position: d.position,
            unsettled,
            acquired: d.acquired,
            credit_bytes,
            window_credit: d.window_credit,
            completed: false,
            windowed: d.windowed,
        });
        true
    }

    /// The peer completed some of our commands: transfers delivered in window mode move
    /// their consumer's window on, one call per consumer for the whole set (each call takes
    /// the queue lock and dispatches).
    pub fn peer_completed(&mut self, commands: &SequenceSet) {
        let mut refunds: Vec<(ConsumerId, u32, u32)> = Vec::new();
        for &(lo, hi) in commands.ranges() {
            for id in self.outgoing.pending(Pending::Completion, lo, hi) {
                let Some((consumer, bytes)) = self.outgoing.complete(id) else {
                    continue;
                };
                match refunds.iter_mut().find(|r| r.0 == consumer) {
                    Some(r) => {
                        r.1 = r.1.saturating_add(1);
                        r.2 = r.2.saturating_add(bytes);
                    }
                    None => refunds.push((consumer, 1, bytes)),
                }
            }
        }
        for (consumer, messages, bytes) in refunds {
            if let Some(sub) = self.subscriptions.get(&consumer) {
                let _ = sub.queue.window_completed(consumer, messages, bytes);
            }
        }
        self.outgoing.trim();
        self.return_window_slots();
    }

    /// Should the peer be asked for known-completed? (qpidd answers every timely-reply.)
    pub fn known_completed_reply(commands: SequenceSet) -> Control {
        SessionKnownCompleted {
            commands: Some(commands),
        }
        .into()
    }
}

/// The header segment to send: as received, with `redelivered` set when it must be, and the
/// death headers of a dead letter.
/// Messages published over 0-9-1 or 1.0 get their properties converted (per delivery:
/// cross-protocol traffic pays for its translation, 0-10 to 0-10 traffic pays nothing).
fn outgoing_header(message: &Message, redelivered: bool) -> Encoded<'_> {
    let as_received = !redelivered
        && message.deaths().is_none()
        && message.sequence().is_none()
        && message.trace().is_none();
    let raw = match message.header() {
        Header::Amqp010(raw) if as_received => return Encoded::AsReceived(raw),
        Header::Amqp010(_) => message.header_bytes(),
        Header::Amqp091(_) | Header::Amqp1(_) => {
            crate::bridge::amqp010_header_for(message).unwrap_or_default()
        }
        Header::None => Bytes::new(),
    };
    // Dead letters carry their history in added headers, messages of sequencing queues
    // their number, traced messages their trace (re-encoded; only they pay).
    let raw = match &message.deaths() {
        Some(history) => super::deaths::render(&raw, history).unwrap_or(raw),
        None => raw,
    };
    let raw = match &message.sequence() {
        Some(sequence) => super::sequence::render(&raw, sequence).unwrap_or(raw),
        None => raw,
    };
    let raw = match message.trace() {
        Some(edit) => super::trace::render(&raw, edit).unwrap_or(raw),
        None => raw,
    };
    if !redelivered {
        return Encoded::Made(raw);
    }
    // Every header we send decoded on the way in (or was made by us), so this cannot fail in
    // practice; fall back to the header as is.
    Encoded::Made(with_redelivered(&raw).unwrap_or(raw))
}

/// A message taken back from a consumer: its queue, its position there, the message.
pub type Unsettled = (Arc<Queue>, u64, Message);

/// Puts acquired messages back on their queues, one release call per queue so each queue
/// re-sorts and re-dispatches once.
pub fn release_to_queues(entries: impl IntoIterator<Item = Unsettled>, set_redelivered: bool) {
    type Positioned = Vec<(u64, Message)>;
    let mut per_queue: Vec<(Arc<Queue>, Positioned)> = Vec::new();
    for (queue, position, message) in entries {
        match per_queue.iter_mut().find(|(q, _)| Arc::ptr_eq(q, &queue)) {
            Some((_, list)) => list.push((position, message)),
            None => per_queue.push((queue, vec![(position, message)])),
        }
    }
    for (queue, list) in per_queue {
        queue.release(list, set_redelivered);
    }
}
