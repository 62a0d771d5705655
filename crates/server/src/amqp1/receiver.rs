//! Links on which we receive: deliveries assembled from their transfer frames, published
//! through `Broker::publish` (or staged in a transaction), and settled, once the journal
//! has them if they are durable.

use std::sync::Arc;

use bytes::Bytes;
use ferry_acl::{Action, ObjectType};
use ferry_amqp1::transaction::capability;
use ferry_amqp1::{
    condition, Accepted, Attach, Coordinator, DeliveryState, Flow, LinkTarget, Outcome, Properties,
    RawMessage, ReceiverSettleMode, Role, TransactionalState, Transfer,
};
use ferry_chunks::Chunks;
use ferry_core::{now_ms, BacklogWaiter, Exchange, SyncPoint};
use tracing::debug;

use super::address::{self, Node};
use super::error::Fault;
use super::sender::{has, temporary_queue};
use super::session::{rejected, Ctx, Session};
use super::txn;
use crate::access;
use crate::bridge::amqp1::{neutral_headers, stored};
use crate::publish::{Encoding, Publish};

/// Credit a receiving link gives (and gives again once half is used).
pub const LINK_CREDIT: u32 = 1000;

/// Where the link's messages go.
#[derive(Debug, Clone)]
pub enum Dest {
    Node(Node),
    /// No address: each message's `to` names its node (the anonymous relay).
    Relay,
    /// The transaction coordinator.
    Coordinator,
}

/// A delivery whose transfers are still arriving.
struct Partial {
    delivery_id: u32,
    settled: bool,
    state: Option<DeliveryState>,
    chunks: Chunks,
}

/// A delivery whose last transfer arrived.
pub struct Complete {
    pub delivery_id: u32,
    pub settled: bool,
    pub state: Option<DeliveryState>,
    pub payload: Bytes,
}

pub struct Receiver {
    pub dest: Dest,
    delivery_count: u32,
    credit: u32,
    current: Option<Partial>,
    max_message_size: u64,
    /// The last `to` the relay resolved, and what to.
    relay_cache: Option<(String, Node)>,
    /// A queue made for this link (dynamic target), deleted when it closes.
    pub temporary: Option<String>,
    /// The session has the link in its list of credit due (or held): it goes there once.
    pub credit_queued: bool,
}

impl Receiver {
    pub fn is_coordinator(&self) -> bool {
        matches!(self.dest, Dest::Coordinator)
    }

    /// Octets of the delivery being received, so far.
    pub fn unfinished(&self) -> usize {
        self.current.as_ref().map_or(0, |p| p.chunks.len())
    }

    /// Drops the delivery being received.
    pub fn abandon(&mut self) {
        self.current = None;
    }

    /// Takes one transfer frame; a delivery is complete after its last.
    pub fn push(&mut self, t: Transfer, payload: Bytes) -> Result<Option<Complete>, Fault> {
        if self.current.is_none() {
            if t.aborted {
                return Ok(None);
            }
            let Some(delivery_id) = t.delivery_id else {
                return Err(Fault::new(
                    condition::INVALID_FIELD,
                    "a delivery's first transfer has no delivery-id",
                ));
            };
            if self.credit == 0 {
                return Err(Fault::new(
                    condition::TRANSFER_LIMIT_EXCEEDED,
                    "transfer without link credit",
                ));
            }
            self.credit -= 1;
            self.delivery_count = self.delivery_count.wrapping_add(1);
            self.current = Some(Partial {
                delivery_id,
                settled: false,
                state: None,
                chunks: Chunks::default(),
            });
        }
        let Some(p) = self.current.as_mut() else {
            return Ok(None);
        };
        if t.aborted {
            self.current = None;
            return Ok(None);
        }
        p.settled |= t.settled.unwrap_or(false);
        if t.state.is_some() {
            p.state = t.state;
        }
        p.chunks.push(payload);
        if p.chunks.len() as u64 > self.max_message_size {
            self.current = None;
            return Err(Fault::new(
                condition::MESSAGE_SIZE_EXCEEDED,
                format!(
                    "message larger than max-message-size {}",
                    self.max_message_size
                ),
            ));
        }
        if t.more {
            return Ok(None);
        }
        let Some(p) = self.current.take() else {
            return Ok(None);
        };
        Ok(Some(Complete {
            delivery_id: p.delivery_id,
            settled: p.settled,
            state: p.state,
            payload: p.chunks.finish(),
        }))
    }

    pub fn credit_low(&self) -> bool {
        self.credit < LINK_CREDIT / 2
    }

    /// Whether new credit should wait because the queue this link feeds has consumers and
    /// more than `hold` bytes ready in memory (see `ServerConfig::backlog_hold_bytes`). If so
    /// the queue holds `waiter`, and lets go of it once that is within the hold again.
    pub fn hold_credit(&self, hold: u64, waiter: &Arc<BacklogWaiter>) -> bool {
        let Dest::Node(Node::Queue(q)) = &self.dest else {
            return false;
        };
        q.hold_publisher(waiter, hold)
    }

    pub fn replenish(&mut self) {
        self.credit = LINK_CREDIT;
    }

    /// The client's flow for its sending link: its delivery count is the one that counts
    /// when it advanced it to give up credit. Only the sender moves the count, and only
    /// forward, so one behind ours (a serial-number comparison) is no state the client can
    /// be in: it changes nothing, as Proton's receiver has it. Taken as given it would
    /// grant the client credit we never gave.
    pub fn on_flow(&mut self, f: &Flow) {
        let Some(count) = f.delivery_count else {
            return;
        };
        let ahead = count.wrapping_sub(self.delivery_count);
        if ahead == 0 || ahead > i32::MAX as u32 {
            return;
        }
        self.delivery_count = count;
        self.credit = self.credit.saturating_sub(ahead);
    }

    pub fn fill_flow(&self, flow: &mut Flow) {
        flow.delivery_count = Some(self.delivery_count);
        flow.link_credit = Some(self.credit);
    }
}

/// The client attaches a sending link: find (or make) its target.
pub fn attach(session: &mut Session, ctx: &mut Ctx, a: Attach) -> Result<Receiver, Fault> {
    let mut temporary = None;
    let (dest, target) = match &a.target {
        Some(LinkTarget::Coordinator(c)) => {
            if !c.capabilities.is_empty()
                && !has(&c.capabilities, capability::LOCAL_TRANSACTIONS.as_str())
            {
                return Err(Fault::new(
                    condition::NOT_IMPLEMENTED,
                    "only local transactions are supported",
                ));
            }
            let reply = Coordinator {
                capabilities: vec![capability::LOCAL_TRANSACTIONS],
            };
            (Dest::Coordinator, LinkTarget::Coordinator(reply))
        }
        Some(LinkTarget::Target(t)) => {
            let mut t = t.clone();
            let dest = if t.dynamic {
                let q = temporary_queue(ctx)?;
                t.address = Some(q.name().into());
                temporary = Some(q.name().to_owned());
                Dest::Node(Node::Queue(q))
            } else {
                match t.address.as_ref().map(|a| a.as_str()).unwrap_or_default() {
                    "" => Dest::Relay,
                    address => {
                        let topic = has(&t.capabilities, "topic");
                        let node =
                            address::resolve(ctx.broker, address, topic).ok_or_else(|| {
                                Fault::new(
                                    condition::NOT_FOUND,
                                    format!("no queue or exchange named {address:?}"),
                                )
                            })?;
                        check_access(ctx, &node)?;
                        Dest::Node(node)
                    }
                }
            };
            (dest, LinkTarget::Target(t))
        }
        _ => {
            return Err(Fault::new(
                condition::INVALID_FIELD,
                "a sending link needs a target",
            ))
        }
    };
    let max_message_size = ctx.config.max_message_size as u64;
    let reply = Attach {
        name: a.name.clone(),
        handle: a.handle,
        role: Role::Receiver,
        snd_settle_mode: a.snd_settle_mode,
        // We settle as soon as we have the message (or it is durable), whatever the
        // client asked for.
        rcv_settle_mode: ReceiverSettleMode::First,
        source: a.source.clone(),
        target: Some(target),
        max_message_size: Some(max_message_size),
        ..Attach::default()
    };
    session.write(ctx, reply);
    debug!(link = %a.name, ?dest, "receiving link attached");
    Ok(Receiver {
        dest,
        delivery_count: a.initial_delivery_count.unwrap_or(0),
        credit: LINK_CREDIT,
        current: None,
        max_message_size,
        relay_cache: None,
        temporary,
        credit_queued: false,
    })
}

/// Queues and exchanges named at attach must be visible to the user (qpidd's access
/// check); publishing is checked per message.
fn check_access(ctx: &Ctx, node: &Node) -> Result<(), Fault> {
    match node {
        Node::Queue(q) => ctx.access.check(Action::Access, ObjectType::Queue, || {
            access::named(q.name())
        })?,
        Node::Exchange { exchange, .. } => {
            ctx.access.check(Action::Access, ObjectType::Exchange, || {
                access::exchange_named(exchange.name())
            })?
        }
    }
    Ok(())
}

/// A delivery from the client is complete: publish it (or run it, for the coordinator)
/// and settle it.
pub fn deliver(session: &mut Session, ctx: &mut Ctx, handle: u32, d: Complete) {
    let Some(super::session::LinkKind::Receiver(r)) =
        session.links.get_mut(&handle).map(|l| &mut l.kind)
    else {
        return;
    };
    let dest = r.dest.clone();
    let cache = r.relay_cache.take();
    if let Dest::Coordinator = dest {
        txn::on_message(session, ctx, d);
        return;
    }
    let txn_id = match &d.state {
        Some(DeliveryState::Transactional(ts)) => Some(ts.txn_id.clone()),
        _ => None,
    };
    let mut cache = cache;
    let result = publish(session, ctx, &dest, &mut cache, d.payload, txn_id.as_ref());
    if let Some(super::session::LinkKind::Receiver(r)) =
        session.links.get_mut(&handle).map(|l| &mut l.kind)
    {
        r.relay_cache = cache;
    }
    if d.settled {
        if let Err(f) = result {
            debug!(condition = %f.condition, "settled delivery dropped: {}", f.text);
        }
        return;
    }
    let (state, point) = match (result, txn_id) {
        (Ok(_), Some(txn_id)) => (
            DeliveryState::Transactional(TransactionalState {
                txn_id,
                outcome: Some(Outcome::Accepted(Accepted {})),
            }),
            None,
        ),
        (Ok(point), None) => (DeliveryState::Accepted(Accepted {}), point),
        (Err(f), _) => (rejected(&f), None),
    };
    session.settle_incoming(d.delivery_id, state, point);
}

fn decode_fault(e: ferry_amqp1::DecodeError) -> Fault {
    Fault::new(e.condition(), format!("malformed message: {e}"))
}

/// Routes one message; returns the point the journal must reach before it is settled.
fn publish(
    session: &mut Session,
    ctx: &mut Ctx,
    dest: &Dest,
    cache: &mut Option<(String, Node)>,
    payload: Bytes,
    txn_id: Option<&Bytes>,
) -> Result<Option<SyncPoint>, Fault> {
    let raw = RawMessage::parse(payload).map_err(decode_fault)?;
    let header = raw.header().map_err(decode_fault)?.unwrap_or_default();
    let properties: Option<Properties> = match raw.raw_properties() {
        Some(_) => raw.properties().map_err(decode_fault)?,
        None => None,
    };
    let node = match dest {
        Dest::Node(n) => n.clone(),
        _ => relay_node(ctx, cache, properties.as_ref(), &raw)?,
    };
    let subject = || {
        properties
            .as_ref()
            .and_then(|p| p.subject.as_ref())
            .map(|s| s.bytes().clone())
            .unwrap_or_default()
    };
    let (exchange, key): (Arc<Exchange>, Bytes) = match node {
        Node::Queue(q) => {
            if q.is_deleted() {
                return Err(Fault::new(
                    condition::NOT_FOUND,
                    format!("queue {} was deleted", q.name()),
                ));
            }
            (
                ctx.broker.default_exchange().clone(),
                Bytes::copy_from_slice(q.name().as_bytes()),
            )
        }
        Node::Exchange { exchange, key } => {
            if exchange.is_internal() {
                // Declared internal over 0-9-1: reached only through exchange bindings.
                return Err(Fault::new(
                    condition::UNAUTHORIZED_ACCESS,
                    format!("cannot publish to internal exchange {}", exchange.name()),
                ));
            }
            let key = match key {
                Some(k) => Bytes::from(k),
                None => subject(),
            };
            (exchange, key)
        }
    };
    let name = Bytes::copy_from_slice(exchange.name().as_bytes());
    ctx.access
        .check_publish(&mut session.publish_acl, &name, &key)?;
    let expires_at = match header.ttl {
        Some(ttl) => Some(now_ms().saturating_add(u64::from(ttl))),
        None => properties
            .as_ref()
            .and_then(|p| p.absolute_expiry_time)
            .and_then(|t| u64::try_from(t.0).ok())
            .filter(|t| *t > 0),
    };
    let headers = match exchange.needs_headers() {
        true => raw
            .application_properties()
            .map_err(decode_fault)?
            .map(|p| Arc::new(neutral_headers(&p))),
        false => None,
    };
    let split = stored::split(&raw);
    let message = Publish {
        exchange: name,
        routing_key: key,
        header: split.stored,
        encoding: Encoding::Amqp1,
        body: split.body,
        persistent: header.durable,
        priority: header.priority,
        expires_at,
        headers,
    }
    .into_message();
    if let Some(id) = txn_id {
        session.txns.stage_publish(id, exchange, message)?;
        return Ok(None);
    }
    let outcome = ctx.broker.publish(&exchange, message)?;
    let durable = ctx.broker.journal().map(|j| j.durable());
    Ok(outcome.sync.filter(|p| durable.is_none_or(|d| *p > d)))
}

/// The node a relayed message's `to` names (the last one is remembered: a producer sending
/// to one destination resolves it once).
fn relay_node(
    ctx: &Ctx,
    cache: &mut Option<(String, Node)>,
    properties: Option<&Properties>,
    raw: &RawMessage,
) -> Result<Node, Fault> {
    let to = properties
        .and_then(|p| p.to.as_ref())
        .map(|t| t.as_str())
        .unwrap_or_default();
    if to.is_empty() {
        return Err(Fault::new(
            condition::NOT_FOUND,
            "a message to the anonymous relay needs a `to` address",
        ));
    }
    if let Some((cached, node)) = cache.as_ref() {
        let live = match node {
            Node::Queue(q) => !q.is_deleted(),
            Node::Exchange { exchange, .. } => !exchange.is_deleted(),
        };
        if cached == to && live {
            return Ok(node.clone());
        }
    }
    let node = address::resolve(ctx.broker, to, false)
        .or_else(|| address::resolve(ctx.broker, to, is_jms_topic(raw)))
        .ok_or_else(|| {
            Fault::new(
                condition::NOT_FOUND,
                format!("no queue or exchange named {to:?}"),
            )
        })?;
    *cache = Some((to.to_owned(), node.clone()));
    Ok(node)
}

/// Qpid JMS names the kind of a relayed message's destination in an annotation (1: a
/// topic), where a link would carry a capability.
fn is_jms_topic(raw: &RawMessage) -> bool {
    let Ok(Some(annotations)) = raw.message_annotations() else {
        return false;
    };
    matches!(
        annotations.get("x-opt-jms-dest"),
        Some(ferry_amqp1::Value::Byte(1) | ferry_amqp1::Value::Ubyte(1))
    )
}

/// The link is gone: its dynamic node goes with it.
pub fn close(ctx: &mut Ctx, r: Receiver) {
    if let Dest::Node(Node::Queue(q)) = &r.dest {
        // Its credit may have been waiting for the queue's backlog.
        q.unhold_publisher(ctx.backlog_waiter);
    }
    if let Some(name) = r.temporary {
        let _ = ctx.broker.delete_queue(&name, false, false, ctx.owner);
    }
}
