//! One AMQP 1.0 session: its transfer windows both ways, its links by handle, the deliveries
//! it sent and the client has not settled, and the settlements it owes the client.
//!
//! The incoming window is ours to grant: every transfer frame takes one unit, and a flow
//! restores it once half is used, so a client that ignores it gets `session:window-violation`.
//! The outgoing window is the client's: transfer frames beyond it wait in `pending`, and
//! deliveries wait on their link until it opens again.

use std::collections::VecDeque;
use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};
use ferry_amqp1::{
    condition, write_frame, Accepted, Attach, DeliveryState, Detach, Disposition, Flow,
    Performative, Role, Transfer,
};
use ferry_core::{BacklogWaiter, Broker, ConsumerId, Delivery, Outbox, OwnerId, SyncPoint};
use tracing::{debug, warn};

use super::error::{Failure, Fault};
use super::receiver::{self, Receiver};
use super::sender::{self, Sender};
use super::txn::Txns;
use super::unsettled::{OutRecord, Unsettled};
use crate::access::{ClientAccess, PublishCache};
use crate::config::ServerConfig;
use crate::fast_map::FastMap;
use crate::shell::outbound::{Sink, Spliced, SPLICE_MIN};
use crate::shell::presettled::Presettled;

/// Transfer frames a client may send before we widen its window again (refreshed at half).
/// Frames are processed as they are read, so the window bounds nothing in memory; it is
/// large so that a publisher never waits for us.
pub const INCOMING_WINDOW: u32 = 16_384;
/// What we say of our outgoing window: informational (the spec leaves its use to the
/// receiver); we never stop sending for it.
const OUTGOING_WINDOW: u32 = i32::MAX as u32;

/// What session work needs from the connection.
pub struct Ctx<'a> {
    pub broker: &'a Arc<Broker>,
    pub outbox: &'a Arc<Outbox>,
    pub out: &'a mut BytesMut,
    /// Large bodies go out from here, after what `out` held when they were spliced.
    pub spliced: &'a mut Spliced,
    pub config: &'a ServerConfig,
    pub access: &'a ClientAccess,
    /// Consumer → channel, for routing deliveries (the shell's table).
    pub consumers: &'a mut FastMap<ConsumerId, u16>,
    /// Owns the connection's temporary queues.
    pub owner: OwnerId,
    /// The client's container id (durable subscriptions are named after it).
    pub container_id: &'a str,
    /// The largest frame the client takes.
    pub frame_max: u32,
    /// Set once the client publishes: resource alarms then pause the connection.
    pub publisher: &'a mut bool,
    /// What a queue holding a link's credit for its backlog wakes the connection through.
    pub backlog_waiter: &'a Arc<BacklogWaiter>,
    /// Pre-settled deliveries written, accepted on their queues when the outbox drain ends.
    pub presettled: &'a mut Presettled,
    /// The connection's counts (messages received and sent).
    pub traffic: &'a mut crate::shell::Traffic,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionState {
    Mapped,
    /// We sent end (with an error); everything but the client's end is ignored.
    Ending,
}

// Links are few and long-lived: boxing either kind would buy nothing.
#[allow(clippy::large_enum_variant)]
pub enum LinkKind {
    /// The client sends, we receive.
    Receiver(Receiver),
    /// We send, the client receives.
    Sender(Sender),
    /// Refused at attach: waits for the client's detach.
    Refused,
}

pub struct Link {
    pub name: String,
    /// The client's handle for the link; ours is the same number (each side numbers its
    /// own links, and the client's numbers are unique within the session).
    pub handle: u32,
    /// We sent detach; the link is gone as soon as the client answers.
    pub detaching: bool,
    pub kind: LinkKind,
}

/// A delivery's transfer frames that wait for the client's incoming window.
struct Pending {
    transfer: Transfer,
    payload: Bytes,
    offset: usize,
}

/// A settlement of a client's delivery that waits for the journal.
struct AwaitingSync {
    point: SyncPoint,
    delivery_id: u32,
    state: DeliveryState,
}

pub struct Session {
    pub channel: u16,
    pub state: SessionState,
    next_incoming_id: u32,
    incoming_window: u32,
    window_size: u32,
    next_outgoing_id: u32,
    remote_incoming_window: u32,
    handle_max: u32,
    pub links: FastMap<u32, Link>,
    /// Consumer → the handle of its sending link.
    pub consumers: FastMap<ConsumerId, u32>,
    pub unsettled: Unsettled,
    pending: VecDeque<Pending>,
    /// Deliveries from the client to settle as accepted, written as ranges by
    /// [`Session::flush`].
    accepted: Vec<u32>,
    /// Other settlements of the client's deliveries, in order.
    settlements: Vec<(u32, DeliveryState)>,
    /// Receiving links whose credit runs low.
    credit_due: Vec<u32>,
    /// Receiving links whose credit waits for their queue's backlog to drain.
    credit_held: Vec<u32>,
    /// Sending links drained, waiting for their deliveries to go out.
    drains: Vec<u32>,
    /// Some link's deliveries (or its drain's answer) wait behind `pending`: the links are
    /// looked at again once it empties, and not on every flow.
    behind_window: bool,
    /// Our incoming window needs widening.
    window_due: bool,
    awaiting_sync: VecDeque<AwaitingSync>,
    /// Detach replies that ended a durable subscription, each waiting for the journal to
    /// have the queue's deletion (as a 0-9-1 queue.delete-ok does), then those now due.
    detaches_awaiting: VecDeque<(SyncPoint, Detach)>,
    detaches_due: Vec<Detach>,
    pub publish_acl: PublishCache,
    pub txns: Txns,
}

impl Session {
    /// A session for the client's begin; writes our begin.
    pub fn begin(ctx: &mut Ctx, channel: u16, begin: &ferry_amqp1::Begin, window: u32) -> Session {
        let ours = ctx
            .config
            .max_consumers_per_session
            .max(1)
            .saturating_sub(1);
        let handle_max = match ctx.config.max_consumers_per_session {
            0 => begin.handle_max,
            _ => begin.handle_max.min(ours),
        };
        let session = Session {
            channel,
            state: SessionState::Mapped,
            next_incoming_id: begin.next_outgoing_id,
            incoming_window: window,
            window_size: window,
            next_outgoing_id: 0,
            remote_incoming_window: begin.incoming_window,
            handle_max,
            links: FastMap::default(),
            consumers: FastMap::default(),
            unsettled: Unsettled::default(),
            pending: VecDeque::new(),
            accepted: Vec::new(),
            settlements: Vec::new(),
            credit_due: Vec::new(),
            credit_held: Vec::new(),
            drains: Vec::new(),
            behind_window: false,
            window_due: false,
            awaiting_sync: VecDeque::new(),
            detaches_awaiting: VecDeque::new(),
            detaches_due: Vec::new(),
            publish_acl: PublishCache::default(),
            txns: Txns::default(),
        };
        let reply = ferry_amqp1::Begin {
            remote_channel: Some(channel),
            next_outgoing_id: session.next_outgoing_id,
            incoming_window: window,
            outgoing_window: OUTGOING_WINDOW,
            handle_max,
            ..ferry_amqp1::Begin::default()
        };
        write(ctx.out, channel, reply);
        session
    }

    pub fn write(&self, ctx: &mut Ctx, p: impl Into<Performative>) {
        write(ctx.out, self.channel, p);
    }

    /// Octets of the deliveries this session's links are receiving, so far; or only link
    /// `handle`'s.
    pub fn unfinished(&self, handle: Option<u32>) -> usize {
        let receiving = |l: &Link| match &l.kind {
            LinkKind::Receiver(r) => r.unfinished(),
            _ => 0,
        };
        match handle {
            Some(h) => self.links.get(&h).map_or(0, receiving),
            None => self.links.values().map(receiving).sum(),
        }
    }

    /// Refuses the delivery link `handle` is receiving: it is dropped and the link detached
    /// with `fault`.
    pub fn refuse_unfinished(&mut self, ctx: &mut Ctx, handle: u32, fault: Fault) {
        if let Some(LinkKind::Receiver(r)) = self.links.get_mut(&handle).map(|l| &mut l.kind) {
            r.abandon();
        }
        self.detach_with(ctx, handle, fault);
    }

    /// A frame for this session (not begin or end).
    pub fn on_frame(
        &mut self,
        ctx: &mut Ctx,
        p: Performative,
        payload: Bytes,
    ) -> Result<(), Failure> {
        let handle = match &p {
            Performative::Attach(a) => Some(a.handle),
            Performative::Flow(f) => f.handle,
            Performative::Transfer(t) => Some(t.handle),
            Performative::Detach(d) => Some(d.handle),
            _ => None,
        };
        if let Some(handle) = handle.filter(|h| *h > self.handle_max) {
            // The spec's rule for a handle outside the range agreed at begin: the
            // connection, not the session, is closed, with framing-error.
            return Err(Failure::Connection(Fault::new(
                condition::FRAMING_ERROR,
                format!("handle {handle} exceeds handle-max {}", self.handle_max),
            )));
        }
        match p {
            Performative::Attach(a) => self.attach(ctx, a),
            Performative::Flow(f) => self.flow(ctx, f),
            Performative::Transfer(t) => self.transfer(ctx, t, payload),
            Performative::Disposition(d) => {
                self.disposition(ctx, d);
                Ok(())
            }
            Performative::Detach(d) => self.detach(ctx, d),
            other => Err(Failure::Connection(Fault::new(
                condition::ILLEGAL_STATE,
                format!("unexpected {} on channel {}", other.name(), self.channel),
            ))),
        }
    }

    fn attach(&mut self, ctx: &mut Ctx, a: Attach) -> Result<(), Failure> {
        if self.links.contains_key(&a.handle) {
            return Err(Failure::Session(Fault::new(
                condition::HANDLE_IN_USE,
                format!("handle {} is in use", a.handle),
            )));
        }
        let handle = a.handle;
        let name = a.name.as_str().to_owned();
        // What a refusal echoes: the attach with our end's terminus null.
        let refusal = Attach {
            name: a.name.clone(),
            handle,
            role: match a.role {
                Role::Sender => Role::Receiver,
                Role::Receiver => Role::Sender,
            },
            source: (a.role == Role::Sender).then(|| a.source.clone()).flatten(),
            target: (a.role == Role::Receiver)
                .then(|| a.target.clone())
                .flatten(),
            ..Attach::default()
        };
        let attached = match a.role {
            // The client sends: we receive.
            Role::Sender => receiver::attach(self, ctx, a).map(LinkKind::Receiver),
            Role::Receiver => sender::attach(self, ctx, a).map(LinkKind::Sender),
        };
        let (kind, detaching) = match attached {
            Ok(kind) => (kind, false),
            Err(fault) => {
                debug!(link = %name, "attach refused: {}", fault.text);
                self.write(ctx, refusal);
                let detach = Detach {
                    handle,
                    closed: true,
                    error: Some(fault.error()),
                };
                self.write(ctx, detach);
                (LinkKind::Refused, true)
            }
        };
        if let LinkKind::Sender(s) = &kind {
            self.consumers.insert(s.consumer, handle);
            ctx.consumers.insert(s.consumer, self.channel);
        }
        let receiving = matches!(kind, LinkKind::Receiver(_));
        self.links.insert(
            handle,
            Link {
                name,
                handle,
                detaching,
                kind,
            },
        );
        if receiving {
            // The link's first credit.
            self.write_link_flow(ctx, handle);
        }
        Ok(())
    }

    fn detach(&mut self, ctx: &mut Ctx, d: Detach) -> Result<(), Failure> {
        let Some(link) = self.links.remove(&d.handle) else {
            return Err(unattached(d.handle));
        };
        if let Some(e) = &d.error {
            debug!(link = %link.name, condition = %e.condition, "client detached with an error");
        }
        if !link.detaching {
            let ends_subscription =
                d.closed && matches!(&link.kind, LinkKind::Sender(s) if s.is_subscription());
            let refused = self.release_link(ctx, link, d.closed);
            let reply = Detach {
                handle: d.handle,
                closed: d.closed,
                error: refused.map(|f| f.error()),
            };
            let journal = ctx.broker.journal().filter(|_| ends_subscription);
            match journal.map(|j| (j.appended(), j.durable())) {
                Some((point, durable)) if point > durable => {
                    self.detaches_awaiting.push_back((point, reply));
                }
                _ => self.write(ctx, reply),
            }
        }
        Ok(())
    }

    /// Detaches link `handle` on our side, with `fault`.
    pub fn detach_with(&mut self, ctx: &mut Ctx, handle: u32, fault: Fault) {
        let Some(mut link) = self.links.remove(&handle) else {
            return;
        };
        if link.detaching {
            self.links.insert(handle, link);
            return;
        }
        debug!(link = %link.name, condition = %fault.condition, "detaching: {}", fault.text);
        self.write(
            ctx,
            Detach {
                handle,
                closed: true,
                error: Some(fault.error()),
            },
        );
        let kind = std::mem::replace(&mut link.kind, LinkKind::Refused);
        link.detaching = true;
        self.links.insert(handle, link);
        let unsettled = self.unsettled.take_link(handle);
        self.release_kind(ctx, handle, kind, false, unsettled);
    }

    /// `closed`: the client closed the link (a detach with closed set), which ends a durable
    /// subscription; otherwise the subscription outlives the link.
    /// Gives why a closed link's subscription could not be ended, for the reply.
    fn release_link(&mut self, ctx: &mut Ctx, link: Link, closed: bool) -> Option<Fault> {
        let unsettled = self.unsettled.take_link(link.handle);
        self.release_kind(ctx, link.handle, link.kind, closed, unsettled)
    }

    /// `unsettled`: the link's records, taken from [`Unsettled`] by the caller.
    fn release_kind(
        &mut self,
        ctx: &mut Ctx,
        handle: u32,
        kind: LinkKind,
        closed: bool,
        unsettled: Vec<OutRecord>,
    ) -> Option<Fault> {
        match kind {
            LinkKind::Sender(s) => {
                self.consumers.remove(&s.consumer);
                ctx.consumers.remove(&s.consumer);
                self.pending.retain(|p| p.transfer.handle != handle);
                sender::close(ctx, s, unsettled, closed)
            }
            LinkKind::Receiver(r) => {
                if r.is_coordinator() {
                    // Transactions end with their coordinator link, uncommitted.
                    let freed = self.txns.rollback_all();
                    self.settled_held(ctx, freed);
                }
                receiver::close(ctx, r);
                // Only sending links have records: none is left behind if that changes.
                sender::release_records(unsettled, true);
                None
            }
            LinkKind::Refused => {
                sender::release_records(unsettled, true);
                None
            }
        }
    }

    fn flow(&mut self, ctx: &mut Ctx, f: Flow) -> Result<(), Failure> {
        // The client's view of our transfers: it expects `next_incoming_id` next and takes
        // `incoming_window` frames from there.
        let expected = f.next_incoming_id.unwrap_or(0);
        self.remote_incoming_window = expected
            .wrapping_add(f.incoming_window)
            .wrapping_sub(self.next_outgoing_id);
        if self.remote_incoming_window > i32::MAX as u32 {
            // It counted frames we have not sent yet: nothing more until it catches up.
            self.remote_incoming_window = 0;
        }
        self.pump(ctx);
        match f.handle {
            None => {
                if f.echo {
                    let flow = self.session_flow();
                    self.write(ctx, flow);
                }
            }
            Some(handle) => {
                let Some(link) = self.links.get_mut(&handle) else {
                    return Err(unattached(handle));
                };
                if link.detaching {
                    return Ok(());
                }
                match &mut link.kind {
                    LinkKind::Sender(s) => {
                        s.on_flow(&f);
                        self.send_parked(ctx, handle);
                        self.top_up(handle, ctx.config);
                        if f.drain {
                            self.drain(handle);
                        } else if f.echo {
                            self.write_link_flow(ctx, handle);
                        }
                    }
                    LinkKind::Receiver(r) => {
                        r.on_flow(&f);
                        if f.echo {
                            self.write_link_flow(ctx, handle);
                        }
                    }
                    LinkKind::Refused => {}
                }
            }
        }
        if self.behind_window && self.pending.is_empty() {
            // A wider window lets every link's waiting deliveries go.
            self.behind_window = false;
            let handles: Vec<u32> = self.consumers.values().copied().collect();
            for handle in handles {
                self.send_parked(ctx, handle);
            }
        }
        Ok(())
    }

    /// Our session flow fields.
    fn session_flow(&self) -> Flow {
        Flow {
            next_incoming_id: Some(self.next_incoming_id),
            incoming_window: self.incoming_window,
            next_outgoing_id: self.next_outgoing_id,
            outgoing_window: OUTGOING_WINDOW,
            ..Flow::default()
        }
    }

    /// Writes our flow state for link `handle`.
    pub fn write_link_flow(&mut self, ctx: &mut Ctx, handle: u32) {
        let mut flow = self.session_flow();
        match self.links.get(&handle).map(|l| &l.kind) {
            Some(LinkKind::Sender(s)) => s.fill_flow(&mut flow),
            Some(LinkKind::Receiver(r)) => r.fill_flow(&mut flow),
            _ => return,
        }
        flow.handle = Some(handle);
        self.write(ctx, flow);
    }

    fn transfer(&mut self, ctx: &mut Ctx, t: Transfer, payload: Bytes) -> Result<(), Failure> {
        if self.incoming_window == 0 {
            return Err(Failure::Session(Fault::new(
                condition::WINDOW_VIOLATION,
                "transfer beyond the incoming window",
            )));
        }
        self.incoming_window -= 1;
        self.next_incoming_id = self.next_incoming_id.wrapping_add(1);
        if self.incoming_window < self.window_size / 2 {
            self.window_due = true;
        }
        let handle = t.handle;
        let Some(link) = self.links.get_mut(&handle) else {
            return Err(unattached(handle));
        };
        if link.detaching {
            return Ok(());
        }
        let LinkKind::Receiver(r) = &mut link.kind else {
            return Err(Failure::Session(Fault::new(
                condition::NOT_ALLOWED,
                format!("transfer on link {handle}, which sends to the client"),
            )));
        };
        let complete = match r.push(t, payload) {
            Ok(Some(complete)) => complete,
            Ok(None) => return Ok(()),
            Err(fault) => {
                self.detach_with(ctx, handle, fault);
                return Ok(());
            }
        };
        if r.credit_low() && !r.credit_queued {
            r.credit_queued = true;
            self.credit_due.push(handle);
        }
        *ctx.publisher = true;
        ctx.traffic.messages_in += 1;
        receiver::deliver(self, ctx, handle, complete);
        Ok(())
    }

    /// Settles delivery `id` from the client with `state` (once `point` is durable, if
    /// given).
    pub fn settle_incoming(&mut self, id: u32, state: DeliveryState, point: Option<SyncPoint>) {
        match point {
            Some(point) => self.awaiting_sync.push_back(AwaitingSync {
                point,
                delivery_id: id,
                state,
            }),
            None if matches!(state, DeliveryState::Accepted(_)) => self.accepted.push(id),
            None => self.settlements.push((id, state)),
        }
    }

    /// The point the last settlement (or detach) waiting for the journal needs.
    pub fn last_waiting_point(&self) -> Option<SyncPoint> {
        let detach = self.detaches_awaiting.back().map(|(point, _)| *point);
        self.awaiting_sync.back().map(|w| w.point).max(detach)
    }

    /// The journal is durable up to `durable` (or failed): settle what waited for it.
    pub fn on_durable(&mut self, durable: SyncPoint, failed: bool) {
        while let Some((point, _)) = self.detaches_awaiting.front() {
            if *point > durable && !failed {
                break;
            }
            if let Some((_, reply)) = self.detaches_awaiting.pop_front() {
                self.detaches_due.push(reply);
            }
        }
        while let Some(w) = self.awaiting_sync.front() {
            if w.point > durable && !failed {
                break;
            }
            let Some(w) = self.awaiting_sync.pop_front() else {
                break;
            };
            if w.point > durable {
                let fault = Fault::new(
                    condition::RESOURCE_LIMIT_EXCEEDED,
                    "the store failed: the message is not on stable storage",
                );
                self.settlements.push((w.delivery_id, rejected(&fault)));
            } else {
                self.settle_incoming(w.delivery_id, w.state, None);
            }
        }
    }

    /// The client settles (or gives outcomes for) deliveries we sent.
    fn disposition(&mut self, ctx: &mut Ctx, d: Disposition) {
        if d.role != Role::Receiver {
            // The client settling its own deliveries: we settled them already.
            return;
        }
        let is_outcome = d
            .state
            .as_ref()
            .is_none_or(|s| s.is_outcome() || matches!(s, DeliveryState::Transactional(_)));
        if !is_outcome || (d.state.is_none() && !d.settled) {
            return;
        }
        let last = d.last.unwrap_or(d.first);
        let records = self.unsettled.take_range(d.first, last);
        if records.is_empty() {
            return;
        }
        // Acquired deliveries a transaction settles stay acquired until its discharge, and
        // count against their link's cap until then: otherwise a transaction never
        // discharged would let a link take its whole queue past --session-max-unacked.
        let in_txn = match &d.state {
            Some(DeliveryState::Transactional(ts)) => self.txns.contains(&ts.txn_id),
            _ => false,
        };
        let mut held = Vec::new();
        let mut handles: Vec<u32> = Vec::with_capacity(records.len());
        let mut plain: Vec<OutRecord> = Vec::with_capacity(records.len());
        for (_, r) in records {
            if let Some(LinkKind::Sender(s)) = self.links.get_mut(&r.handle).map(|l| &mut l.kind) {
                if in_txn && r.acquired {
                    held.push(s.consumer);
                } else {
                    s.settled(1);
                }
            }
            handles.push(r.handle);
            plain.push(r);
        }
        handles.sort_unstable();
        handles.dedup();
        match &d.state {
            Some(DeliveryState::Transactional(ts)) => {
                self.txns
                    .stage_settlements(&ts.txn_id, plain, held, ts.outcome.as_ref());
            }
            state => sender::apply_outcome(plain, state.as_ref()),
        }
        if !d.settled {
            // The client waits for us to settle (receiver settle mode second).
            let reply = Disposition {
                role: Role::Sender,
                first: d.first,
                last: d.last,
                settled: true,
                state: d.state.clone(),
                batchable: false,
            };
            self.write(ctx, reply);
        }
        for handle in handles {
            self.top_up(handle, ctx.config);
        }
    }

    /// A discharge (or the coordinator's end) freed deliveries a transaction held, one
    /// consumer each: their links may take that many more.
    pub fn settled_held(&mut self, ctx: &mut Ctx, consumers: Vec<ConsumerId>) {
        let mut handles: Vec<u32> = Vec::new();
        for consumer in consumers {
            let Some(handle) = self.consumers.get(&consumer).copied() else {
                continue;
            };
            if let Some(LinkKind::Sender(s)) = self.links.get_mut(&handle).map(|l| &mut l.kind) {
                s.settled(1);
                handles.push(handle);
            }
        }
        handles.sort_unstable();
        handles.dedup();
        for handle in handles {
            self.top_up(handle, ctx.config);
        }
    }

    /// A delivery from a queue for one of our sending links.
    pub fn deliver(&mut self, ctx: &mut Ctx, d: Delivery) {
        let handle = self.consumers.get(&d.consumer).copied();
        let link = handle.and_then(|h| self.links.get_mut(&h));
        let Some(LinkKind::Sender(s)) = link.filter(|l| !l.detaching).map(|l| &mut l.kind) else {
            sender::release_delivery(d);
            return;
        };
        s.arrived();
        if s.credit() == 0 || !s.parked.is_empty() || !self.pending.is_empty() {
            s.parked.push_back(d);
            self.behind_window |= !self.pending.is_empty();
            return;
        }
        if let Some(handle) = handle {
            self.send(ctx, handle, d);
        }
    }

    /// Sends the deliveries parked on link `handle` that its credit and the window allow.
    fn send_parked(&mut self, ctx: &mut Ctx, handle: u32) {
        while self.pending.is_empty() {
            let Some(LinkKind::Sender(s)) = self.links.get_mut(&handle).map(|l| &mut l.kind) else {
                return;
            };
            if s.credit() == 0 {
                break;
            }
            let Some(d) = s.parked.pop_front() else {
                break;
            };
            self.send(ctx, handle, d);
        }
        self.behind_window |= !self.pending.is_empty();
        self.answer_drain(ctx, handle);
    }

    /// Sends one delivery on link `handle`, which has credit for it.
    fn send(&mut self, ctx: &mut Ctx, handle: u32, d: Delivery) {
        let Some(LinkKind::Sender(s)) = self.links.get_mut(&handle).map(|l| &mut l.kind) else {
            sender::release_delivery(d);
            return;
        };
        let settled = s.presettled;
        s.sent(settled);
        ctx.traffic.messages_out += 1;
        let id = self.unsettled.assign();
        let transfer = Transfer {
            handle,
            delivery_id: Some(id),
            delivery_tag: Some(Bytes::copy_from_slice(&id.to_be_bytes())),
            message_format: Some(0),
            settled: Some(settled),
            ..Transfer::default()
        };
        // The message is written once: straight after its transfer performative in the
        // outbound buffer when it goes out now in one frame (the usual case), else into a
        // payload of its own that `pump` cuts into frames as the window allows. A body that
        // alone fills a frame goes to the payload at once rather than being written into the
        // outbound buffer and copied back out.
        let one_frame = d.message.body().len() < ctx.frame_max as usize;
        let now = one_frame && self.pending.is_empty() && self.remote_incoming_window > 0;
        // A large body goes out from where it is, spliced between the frame's other octets.
        let transfer = if now && d.message.body().len() >= SPLICE_MIN {
            let sink = Sink {
                out: ctx.out,
                spliced: ctx.spliced,
            };
            write_spliced_transfer(sink, self.channel, transfer, ctx.frame_max, &d)
        } else {
            Some(transfer)
        };
        let payload = match transfer {
            None => {
                self.remote_incoming_window -= 1;
                self.next_outgoing_id = self.next_outgoing_id.wrapping_add(1);
                None
            }
            Some(transfer) if now => {
                match write_single_transfer(ctx.out, self.channel, transfer, ctx.frame_max, |out| {
                    crate::bridge::amqp1::write_for_amqp1(out, &d.message, d.prior_deliveries())
                }) {
                    Ok(()) => {
                        self.remote_incoming_window -= 1;
                        self.next_outgoing_id = self.next_outgoing_id.wrapping_add(1);
                        None
                    }
                    Err(oversized) => Some(*oversized),
                }
            }
            Some(transfer) => {
                let mut payload = BytesMut::with_capacity(d.message.body().len() + 256);
                crate::bridge::amqp1::write_for_amqp1(
                    &mut payload,
                    &d.message,
                    d.prior_deliveries(),
                );
                Some((transfer, payload.freeze()))
            }
        };
        if settled {
            // At most once: the message leaves its queue as it goes.
            if d.acquired {
                ctx.presettled.push(d.queue, d.position, d.message);
            }
        } else {
            self.unsettled.insert(
                id,
                OutRecord {
                    handle,
                    queue: d.queue,
                    position: d.position,
                    message: d.message,
                    acquired: d.acquired,
                },
            );
        }
        if let Some((transfer, payload)) = payload {
            self.pending.push_back(Pending {
                transfer,
                payload,
                offset: 0,
            });
            self.pump(ctx);
        }
    }

    /// Writes waiting transfer frames while the client's window has room.
    fn pump(&mut self, ctx: &mut Ctx) {
        while self.remote_incoming_window > 0 {
            let Some(p) = self.pending.front_mut() else {
                return;
            };
            match write_transfer_frame(
                ctx.out,
                self.channel,
                &p.transfer,
                &p.payload[p.offset..],
                ctx.frame_max,
            ) {
                Ok(n) => {
                    p.offset += n;
                    self.remote_incoming_window -= 1;
                    self.next_outgoing_id = self.next_outgoing_id.wrapping_add(1);
                    if p.offset >= p.payload.len() {
                        self.pending.pop_front();
                    } else {
                        // Continuation frames leave out what the first one said.
                        p.transfer.delivery_id = None;
                        p.transfer.delivery_tag = None;
                        p.transfer.message_format = None;
                    }
                }
                Err(e) => {
                    // Cannot happen with a max-frame-size of at least 512.
                    warn!("cannot write a transfer: {e}");
                    self.pending.pop_front();
                }
            }
        }
    }

    /// The client asked link `handle` to drain: what the queue has now goes, and the rest
    /// of the credit is used up.
    fn drain(&mut self, handle: u32) {
        let Some(LinkKind::Sender(s)) = self.links.get_mut(&handle).map(|l| &mut l.kind) else {
            return;
        };
        s.drain_core();
        // What the queue delivered is in the outbox, to be sent before the drained flow: the
        // connection hands the outbox out (every session's items, in order) and then calls
        // `finish_drains`.
        self.drains.push(handle);
    }

    /// Whether a drain waits for the outbox to be handed out.
    pub fn draining(&self) -> bool {
        !self.drains.is_empty()
    }

    /// The drained links' deliveries were handed out: each drain is answered (its unused
    /// credit used up) as soon as what its credit takes has gone, now or when the window
    /// lets the parked deliveries go.
    pub fn finish_drains(&mut self, ctx: &mut Ctx) {
        for handle in std::mem::take(&mut self.drains) {
            let Some(LinkKind::Sender(s)) = self.links.get_mut(&handle).map(|l| &mut l.kind) else {
                continue;
            };
            s.owe_drain();
            self.send_parked(ctx, handle);
        }
    }

    /// Answers link `handle`'s drain if it is owed and done.
    fn answer_drain(&mut self, ctx: &mut Ctx, handle: u32) {
        if !self.pending.is_empty() {
            // A delivery counted as sent may not have begun yet: a flow now would give the
            // client a delivery count ahead of the transfers it has.
            return;
        }
        if let Some(LinkKind::Sender(s)) = self.links.get_mut(&handle).map(|l| &mut l.kind) {
            if s.finish_drain() {
                self.write_link_flow(ctx, handle);
            }
        }
    }

    /// Grants link `handle`'s queue what its credit and the unsettled cap allow.
    fn top_up(&mut self, handle: u32, config: &ServerConfig) {
        if let Some(LinkKind::Sender(s)) = self.links.get_mut(&handle).map(|l| &mut l.kind) {
            s.top_up(config.session_max_unacked);
        }
    }

    /// The queue under link `consumer` was deleted: the link is detached.
    pub fn consumer_cancelled(&mut self, ctx: &mut Ctx, consumer: ConsumerId, queue: &str) {
        if let Some(handle) = self.consumers.get(&consumer).copied() {
            let fault = Fault::new(
                condition::RESOURCE_DELETED,
                format!("queue {queue} was deleted"),
            );
            self.detach_with(ctx, handle, fault);
        }
    }

    /// Writes what the batch left owed: settlements (accepted ones as ranges), credit for
    /// receiving links, a wider incoming window.
    pub fn flush(&mut self, ctx: &mut Ctx) {
        if self.state != SessionState::Mapped {
            return;
        }
        for (first, last) in runs(&self.accepted) {
            let d = Disposition {
                role: Role::Receiver,
                first,
                last: (last != first).then_some(last),
                settled: true,
                state: Some(DeliveryState::Accepted(Accepted {})),
                batchable: false,
            };
            write(ctx.out, self.channel, d);
        }
        self.accepted.clear();
        for (id, state) in std::mem::take(&mut self.settlements) {
            let d = Disposition {
                role: Role::Receiver,
                first: id,
                last: None,
                settled: true,
                state: Some(state),
                batchable: false,
            };
            write(ctx.out, self.channel, d);
        }
        for reply in std::mem::take(&mut self.detaches_due) {
            write(ctx.out, self.channel, reply);
        }
        let mut credit_due = std::mem::take(&mut self.credit_due);
        // Held credit is looked at again with every flush, and when the queue wakes the
        // connection (its backlog is within the hold again).
        credit_due.append(&mut self.credit_held);
        let widen = std::mem::take(&mut self.window_due);
        if widen {
            self.incoming_window = self.window_size;
        }
        // A link flow carries the session's fields too, so the wider window rides on it.
        let mut wrote_flow = false;
        for handle in credit_due {
            if let Some(LinkKind::Receiver(r)) = self.links.get_mut(&handle).map(|l| &mut l.kind) {
                if r.hold_credit(ctx.config.backlog_hold_bytes, ctx.backlog_waiter) {
                    self.credit_held.push(handle);
                    continue;
                }
                r.replenish();
                r.credit_queued = false;
                self.write_link_flow(ctx, handle);
                wrote_flow = true;
            }
        }
        if widen && !wrote_flow {
            let flow = self.session_flow();
            self.write(ctx, flow);
        }
    }

    /// Releases everything the session holds (it ended, or the connection did).
    pub fn end(&mut self, ctx: &mut Ctx) {
        self.pending.clear();
        // Every record at once, by link: asking per link would scan them all for each.
        let mut unsettled = self.unsettled.take_all();
        let links: Vec<Link> = self.links.drain().map(|(_, l)| l).collect();
        for link in links {
            let records = unsettled.remove(&link.handle).unwrap_or_default();
            self.release_kind(ctx, link.handle, link.kind, false, records);
        }
        // Those of links already gone (detached on our side, awaiting the client's reply).
        sender::release_records(unsettled.into_values().flatten().collect(), true);
        self.txns.rollback_all();
        self.awaiting_sync.clear();
        self.detaches_awaiting.clear();
        self.detaches_due.clear();
    }

    /// Some receiving link's credit waits for its queue's backlog to drain.
    pub fn holds_credit(&self) -> bool {
        !self.credit_held.is_empty()
    }

    pub fn sender_count(&self) -> usize {
        self.consumers.len()
    }

    pub fn is_transactional(&self) -> bool {
        !self.txns.is_empty()
    }
}

fn unattached(handle: u32) -> Failure {
    Failure::Session(Fault::new(
        condition::UNATTACHED_HANDLE,
        format!("no link has handle {handle}"),
    ))
}

pub fn rejected(fault: &Fault) -> DeliveryState {
    DeliveryState::Rejected(ferry_amqp1::Rejected {
        error: Some(fault.error()),
    })
}

pub fn write(out: &mut BytesMut, channel: u16, p: impl Into<Performative>) {
    write_frame(out, channel, &p.into(), &[]);
}

/// Consecutive runs of ids, in the order given.
fn runs(ids: &[u32]) -> Vec<(u32, u32)> {
    let mut runs: Vec<(u32, u32)> = Vec::new();
    for &id in ids {
        match runs.last_mut() {
            Some((_, last)) if last.wrapping_add(1) == id => *last = id,
            _ => runs.push((id, id)),
        }
    }
    runs
}

/// Writes one transfer frame carrying as much of `rest` as fits in `max_frame`; returns how
/// many octets it carried. `more` is set when some are left.
fn write_transfer_frame(
    out: &mut BytesMut,
    channel: u16,
    transfer: &Transfer,
    rest: &[u8],
    max_frame: u32,
) -> Result<usize, ferry_amqp1::FrameSizeTooSmall> {
    let max = max_frame as usize;
    let start = out.len();
    let mut t = transfer.clone();
    t.more = false;
    let head = write_frame(out, channel, &Performative::Transfer(t.clone()), &[]);
    if head + rest.len() <= max {
        out.put_slice(rest);
        patch_size(out, start);
        return Ok(rest.len());
    }
    out.truncate(start);
    t.more = true;
    let head = write_frame(out, channel, &Performative::Transfer(t), &[]);
    if head >= max {
        out.truncate(start);
        return Err(ferry_amqp1::FrameSizeTooSmall {
            needed: head + 1,
            max: max_frame,
        });
    }
    let n = (max - head).min(rest.len());
    out.put_slice(&rest[..n]);
    patch_size(out, start);
    Ok(n)
}

/// Writes a whole delivery as one transfer frame: the performative, then the message as
/// `write_message` writes it, straight into `out`. If the message does not fit one frame of
/// `max_frame` octets, nothing stays written and the transfer comes back with the message's
/// octets, to be sent in parts.
fn write_single_transfer(
    out: &mut BytesMut,
    channel: u16,
    transfer: Transfer,
    max_frame: u32,
    write_message: impl FnOnce(&mut BytesMut),
) -> Result<(), Box<(Transfer, Bytes)>> {
    let start = out.len();
    let performative = Performative::Transfer(transfer);
    let head = write_frame(out, channel, &performative, &[]);
    let message_start = out.len();
    write_message(out);
    if head + (out.len() - message_start) <= max_frame as usize {
        patch_size(out, start);
        return Ok(());
    }
    let payload = Bytes::copy_from_slice(&out[message_start..]);
    out.truncate(start);
    let Performative::Transfer(transfer) = performative else {
        unreachable!("built as a transfer above")
    };
    // Boxed: the oversized case is rare, and an unboxed error would make every Ok as large.
    Err(Box::new((transfer, payload)))
}

/// As [`write_single_transfer`], but the body is not copied: the frame's octets before it
/// are written to `out`, the body is spliced after them and the rest follows in `out`.
/// Gives the transfer back, with nothing written, for a message that did not come over
/// 1.0 (it is re-encoded whole) or that does not fit one frame; `None` once written.
fn write_spliced_transfer(
    sink: Sink<'_>,
    channel: u16,
    transfer: Transfer,
    max_frame: u32,
    d: &Delivery,
) -> Option<Transfer> {
    // A message from another protocol is re-encoded whole: no frame is begun for it.
    if !matches!(d.message.header(), ferry_core::Header::Amqp1(_)) {
        return Some(transfer);
    }
    let Sink { out, spliced } = sink;
    let start = out.len();
    let performative = Performative::Transfer(transfer);
    write_frame(out, channel, &performative, &[]);
    let after =
        crate::bridge::amqp1::write_amqp1_around_body(out, &d.message, d.prior_deliveries());
    let size = after
        .as_ref()
        .map(|after| out.len() - start + d.message.body().len() + after.len())
        .filter(|size| *size <= max_frame as usize);
    let (Some(after), Some(size)) = (after, size) else {
        out.truncate(start);
        let Performative::Transfer(transfer) = performative else {
            unreachable!("built as a transfer above")
        };
        return Some(transfer);
    };
    // Bounded by max_frame, a u32, just above.
    let size = size as u32;
    out[start..start + 4].copy_from_slice(&size.to_be_bytes());
    spliced.splice(out, d.message.body_bytes());
    out.extend_from_slice(&after);
    None
}

fn patch_size(out: &mut BytesMut, start: usize) {
    let size = u32::try_from(out.len() - start).unwrap_or(u32::MAX);
    out[start..start + 4].copy_from_slice(&size.to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_collapse_consecutive_ids() {
        assert_eq!(runs(&[1, 2, 3, 5, 6, 9]), [(1, 3), (5, 6), (9, 9)]);
        assert_eq!(runs(&[u32::MAX, 0, 1]), [(u32::MAX, 1)]);
        assert!(runs(&[]).is_empty());
    }

    #[test]
    fn a_delivery_that_fits_is_written_once_into_one_frame() {
        let t = Transfer {
            handle: 2,
            delivery_id: Some(5),
            delivery_tag: Some(Bytes::from_static(b"t")),
            message_format: Some(0),
            settled: Some(false),
            ..Transfer::default()
        };
        let mut out = BytesMut::from(&b"before"[..]);
        write_single_transfer(&mut out, 1, t.clone(), 512, |o| o.put_slice(&[7; 100])).unwrap();
        let mut frames = out.split_off(6);
        let f = ferry_amqp1::decode_frame(&mut frames, 512)
            .unwrap()
            .unwrap();
        assert!(frames.is_empty());
        let Ok(ferry_amqp1::FrameBody::Amqp {
            performative: Performative::Transfer(got),
            payload,
        }) = f.decode_body()
        else {
            panic!("not a transfer");
        };
        assert_eq!((got, &payload[..]), (t.clone(), &[7u8; 100][..]));
        // Too large for the frame: nothing stays written, the message comes back whole.
        let (back, payload) =
            *write_single_transfer(&mut out, 1, t.clone(), 512, |o| o.put_slice(&[9; 600]))
                .unwrap_err();
        assert_eq!(&out[..], b"before");
        assert_eq!((back, payload.len()), (t, 600));
    }

    #[test]
    fn transfer_frames_split_to_the_frame_size() {
        let t = Transfer {
            handle: 0,
            delivery_id: Some(1),
            delivery_tag: Some(Bytes::from_static(b"t")),
            ..Transfer::default()
        };
        let payload = vec![3u8; 1500];
        let mut out = BytesMut::new();
        let mut offset = 0;
        let mut frames = 0;
        while offset < payload.len() {
            offset += write_transfer_frame(&mut out, 1, &t, &payload[offset..], 512).unwrap();
            frames += 1;
        }
        assert_eq!(frames, 4);
        let mut got = Vec::new();
        let mut seen = 0;
        while let Some(f) = ferry_amqp1::decode_frame(&mut out, 512).unwrap() {
            let ferry_amqp1::FrameBody::Amqp {
                performative: Performative::Transfer(tr),
                payload,
            } = f.decode_body().unwrap()
            else {
                panic!("not a transfer")
            };
            seen += 1;
            assert_eq!(tr.more, seen < frames);
            got.extend_from_slice(&payload);
        }
        assert_eq!(got, payload);
        let big_tag = Transfer {
            delivery_tag: Some(Bytes::from(vec![0; 600])),
            ..t
        };
        assert!(write_transfer_frame(&mut out, 1, &big_tag, b"x", 512).is_err());
        assert!(out.is_empty());
    }
}
