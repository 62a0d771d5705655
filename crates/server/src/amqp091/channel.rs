//! One 0-9-1 channel: its state, consumers, unacknowledged deliveries, qos and confirms, and
//! the exchange/queue methods. basic.* lives in `basic.rs`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use ferry_amqp091::{
    reply, write_body_placing, write_deliver, write_method, write_raw_content_header,
    ContentAssembler, DeliverRef, ExchangeBind, ExchangeBindOk, ExchangeDeclare, ExchangeDeclareOk,
    ExchangeDelete, ExchangeDeleteOk, ExchangeUnbind, ExchangeUnbindOk, Method, QueueBind,
    QueueBindOk, QueueDeclare, QueueDeclareOk, QueueDelete, QueueDeleteOk, QueuePurge,
    QueuePurgeOk, QueueUnbind, QueueUnbindOk, ShortStr,
};
use ferry_core::{
    BindingIdentity, Broker, BrokerError, ConsumerId, Delivery, Exchange, ExchangeKind,
    ExchangeOptions, Message, Outbox, OwnerId, Queue, SettleWindow, SyncPoint,
};

use crate::access::{self, ClientAccess, PublishCache};
use crate::config::ServerConfig;
use crate::fast_map::FastMap;
use crate::shell::outbound::{Spliced, SPLICE_MIN};
use crate::shell::presettled::Presettled;
use ferry_acl::{Action, ObjectType};

use super::ack_timeout::AckChecks;
use super::args;
use super::confirms::Confirms;
use super::convert::{self, table_to_headers};
use super::error::Fault;
use super::held::{HeldReplies, Reply};
use super::qos::Qos;
use super::tx::ChannelTx;
use super::unacked::Unacked;

/// Most exchanges a channel keeps resolved for publishing.
const EXCHANGE_CACHE_MAX: usize = 64;

/// Room a delivery's frames take around its properties and body (the deliver's own frame,
/// the content header's fixed fields, frame headers and ends), near enough to make room for.
const FRAMES_AROUND: usize = 160;

/// What a channel's methods need from the connection.
pub struct Ctx<'a> {
    pub broker: &'a Arc<Broker>,
    pub owner: OwnerId,
    pub outbox: &'a Arc<Outbox>,
    pub out: &'a mut BytesMut,
    /// Large bodies go out from here, after what `out` held when they were spliced.
    pub spliced: &'a mut Spliced,
    pub frame_max: usize,
    /// Consumer → channel, for routing outbox items.
    pub consumers: &'a mut FastMap<ConsumerId, u16>,
    /// Who the client is, for ACL checks and quotas.
    pub access: &'a ClientAccess,
    pub config: &'a ServerConfig,
    /// A queue a publish left over the broker's backlog hold (see `Shell::backlogged`).
    pub backlogged: &'a mut Option<Arc<Queue>>,
    /// No-ack deliveries written, accepted on their queues when the outbox drain ends.
    pub presettled: &'a mut Presettled,
    /// The connection's counts (messages written).
    pub traffic: &'a mut crate::shell::Traffic,
    /// The time of the event being handled.
    pub now: Instant,
    pub ack_checks: &'a mut AckChecks,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    Open,
    /// We sent channel.close; everything but close-ok is discarded.
    Closing,
}

/// A consumer started with basic.consume.
pub struct ConsumerRec {
    pub id: ConsumerId,
    pub tag: ShortStr,
    pub queue: Arc<Queue>,
    pub no_ack: bool,
    /// How long its deliveries may wait for their acknowledgement (see `ack_timeout`).
    pub ack_timeout: Option<Duration>,
}

/// A delivery (or get-ok) awaiting ack; `consumer` is `None` for basic.get.
pub struct Pending {
    pub consumer: Option<ConsumerId>,
    /// Holds a slot of the channel's settlement window until settled.
    pub windowed: bool,
    pub queue: Arc<Queue>,
    pub position: u64,
    pub message: Message,
    /// How long it may wait for its acknowledgement (see `ack_timeout`), fixed when it
    /// went out: a consumer cancelled meanwhile does not change it.
    pub ack_timeout: Option<Duration>,
}

pub struct Channel {
    pub id: u16,
    pub state: State,
    pub assembler: ContentAssembler,
    pub consumers: Vec<ConsumerRec>,
    pub unacked: Unacked<Pending>,
    pub confirms: Confirms,
    pub qos: Qos,
    pub flow_active: bool,
    /// 0-9-1: an empty queue name means the queue last declared on the channel.
    pub last_queue: Option<String>,
    pub next_ctag: u64,
    /// Set by tx.select: what the open transaction has staged.
    pub tx: Option<Box<ChannelTx>>,
    exchanges: FastMap<Bytes, Arc<Exchange>>,
    /// ACL decisions for this channel's publishes.
    pub publish_acl: PublishCache,
    /// Caps unacknowledged deliveries over all of the channel's consumers, prefetch or not
    /// (`--session-max-unacked`).
    pub settle_window: Option<Arc<SettleWindow>>,
    /// Replies waiting for the journal to make their change durable.
    pub held: HeldReplies,
}

impl Channel {
    pub fn new(id: u16, max_body: u64) -> Channel {
        Channel {
            id,
            state: State::Open,
            assembler: ContentAssembler::new(max_body),
            consumers: Vec::new(),
            unacked: Unacked::default(),
            confirms: Confirms::default(),
            qos: Qos::default(),
            flow_active: true,
            last_queue: None,
            next_ctag: 1,
            tx: None,
            exchanges: FastMap::default(),
            publish_acl: PublishCache::default(),
            settle_window: None,
            held: HeldReplies::default(),
        }
    }

    /// `n` deliveries were settled (or never needed settling): their window slots are free.
    pub fn free_window_slots(&self, n: u32) {
        if let Some(w) = &self.settle_window {
            w.give_back(n);
        }
    }

    pub fn write(&self, out: &mut BytesMut, method: impl Into<Method>) {
        write_method(out, self.id, &method.into());
    }

    /// Sends `method`, the reply to a command that changed durable state when `durable`, once
    /// the journal has the change on stable storage.
    pub fn reply_when_durable(&mut self, ctx: &mut Ctx, durable: bool, method: impl Into<Method>) {
        let point = ctx
            .broker
            .journal()
            .filter(|_| durable)
            .map(|j| j.appended());
        self.reply_at(ctx, point, method);
    }

    /// Sends `method` once the journal is durable up to `point`, after every reply held
    /// before it.
    pub fn reply_at(&mut self, ctx: &mut Ctx, point: Option<SyncPoint>, method: impl Into<Method>) {
        self.reply_held(ctx, point, Reply::from(method.into()));
    }

    /// Sends a reply that changed nothing durable: at once, unless replies are held (then
    /// behind them, so the client sees replies in the order of its requests).
    pub fn reply(&mut self, ctx: &mut Ctx, method: impl Into<Method>) {
        self.reply_at(ctx, None, method);
    }

    fn reply_held(&mut self, ctx: &mut Ctx, point: Option<SyncPoint>, reply: Reply) {
        let wait = match ctx.broker.journal() {
            Some(j) => point.filter(|p| *p > j.durable()),
            None => None,
        };
        match wait {
            None if self.held.is_empty() => self.send(ctx, reply),
            wait => self.held.hold(wait.unwrap_or_default(), reply),
        }
    }

    /// A get-ok with its message, in order with held replies.
    pub fn reply_content(&mut self, ctx: &mut Ctx, method: Method, message: Message, returns: u16) {
        let reply = Reply {
            method,
            content: Some(message),
            returns,
            announces: None,
        };
        self.reply_held(ctx, None, reply);
    }

    /// A consume-ok. The consumer gets credit only once it has been sent: its deliveries
    /// must not overtake it.
    pub fn reply_consume_ok(&mut self, ctx: &mut Ctx, method: Method, consumer: ConsumerId) {
        if self.held.is_empty() {
            self.write(ctx.out, method);
            return;
        }
        self.qos.hold_back(consumer);
        let reply = Reply {
            method,
            content: None,
            returns: 0,
            announces: Some(consumer),
        };
        self.reply_held(ctx, None, reply);
    }

    fn send(&mut self, ctx: &mut Ctx, reply: Reply) {
        match reply.content {
            Some(message) => {
                write_method(ctx.out, self.id, &reply.method);
                self.write_header_and_body(ctx, &message, reply.returns);
            }
            None => self.write(ctx.out, reply.method),
        }
        if let Some(consumer) = reply.announces {
            self.qos.announce(consumer);
        }
    }

    /// Sends the held replies the journal has made true. If it failed instead, they never
    /// will be: the error closes the connection.
    pub fn flush_held(&mut self, ctx: &mut Ctx) -> Result<(), Fault> {
        if self.held.is_empty() {
            return Ok(());
        }
        let (durable, failed) = match ctx.broker.journal() {
            Some(j) => (j.durable(), j.is_failed()),
            None => (SyncPoint(u64::MAX), false),
        };
        let mut announced = false;
        for reply in self.held.release(durable) {
            announced |= reply.announces.is_some();
            self.send(ctx, reply);
        }
        if announced && self.flow_active {
            self.grant(ctx);
        }
        if failed && !self.held.is_empty() {
            self.held.clear();
            return Err(Fault::new(
                reply::INTERNAL_ERROR,
                "the store failed: the change is not on stable storage",
            ));
        }
        Ok(())
    }

    /// Method, content header and body of a get-ok or return.
    pub fn write_content(&self, ctx: &mut Ctx, method: Method, message: &Message) {
        write_method(ctx.out, self.id, &method);
        self.write_header_and_body(ctx, message, 0);
    }

    /// basic.deliver, content header and body: the method written from the message's own
    /// exchange and routing key.
    pub fn write_delivery(&self, ctx: &mut Ctx, deliver: &DeliverRef<'_>, d: &Delivery) {
        write_deliver(ctx.out, self.id, deliver);
        let returns = if d.queue.reports_returns() {
            d.returns
        } else {
            0
        };
        self.write_header_and_body(ctx, &d.message, returns);
    }

    /// `returns`: times the message came back to its queue, sent as `x-delivery-count`.
    fn write_header_and_body(&self, ctx: &mut Ctx, message: &Message, returns: u16) {
        ctx.traffic.messages_out += 1;
        let props = convert::outgoing_properties(message, returns);
        let body = message.body();
        // A large body goes out from where it is, spliced between its frames' headers.
        let splice = (body.len() >= SPLICE_MIN).then(|| message.body_bytes());
        let copied = if splice.is_some() { 0 } else { body.len() };
        let spliced = &mut *ctx.spliced;
        spliced.make_room(ctx.out, FRAMES_AROUND + props.len() + copied);
        write_raw_content_header(ctx.out, self.id, &props, body.len());
        write_body_placing(
            ctx.out,
            self.id,
            body.len(),
            ctx.frame_max,
            |out, range| match &splice {
                Some(shared) => spliced.splice(out, shared.slice(range)),
                None => out.extend_from_slice(&body[range]),
            },
        );
    }

    /// The exchange to publish to, cached while it lives.
    pub fn exchange_for(&mut self, broker: &Broker, name: &Bytes) -> Result<Arc<Exchange>, Fault> {
        if let Some(ex) = self.exchanges.get(name) {
            if !ex.is_deleted() {
                return Ok(ex.clone());
            }
            self.exchanges.remove(name);
        }
        let text = utf8(name, "exchange")?;
        let ex = broker
            .exchange(text)
            .ok_or_else(|| Fault::not_found(format!("no exchange '{text}' in vhost '/'")))?;
        if self.exchanges.len() >= EXCHANGE_CACHE_MAX {
            self.exchanges.clear();
        }
        self.exchanges.insert(name.clone(), ex.clone());
        Ok(ex)
    }

    /// The queue a method names, with 0-9-1's "empty means the last declared one".
    pub fn queue_name<'a>(&'a self, name: &'a ShortStr) -> Result<&'a str, Fault> {
        if name.is_empty() {
            return self
                .last_queue
                .as_deref()
                .ok_or_else(|| Fault::not_found("no previously declared queue"));
        }
        utf8(name.bytes(), "queue")
    }

    /// A queue this connection may use: 404 if missing, 405 if exclusive to another.
    pub fn usable_queue(&self, ctx: &Ctx, name: &ShortStr) -> Result<Arc<Queue>, Fault> {
        let name = self.queue_name(name)?;
        let q = ctx
            .broker
            .queue(name)
            .ok_or_else(|| Fault::not_found(format!("no queue '{name}' in vhost '/'")))?;
        q.check_access(ctx.owner)?;
        Ok(q)
    }

    /// Cancels the consumers and requeues unacknowledged messages: the channel is ending.
    pub fn teardown(&mut self, ctx: &mut Ctx) {
        for c in self.consumers.drain(..) {
            ctx.broker.cancel_consumer(&c.queue, c.id);
            ctx.consumers.remove(&c.id);
        }
        self.tx_teardown();
        self.held.clear();
        requeue(self.unacked.take_all());
        self.assembler.reset();
        self.exchanges.clear();
    }

    pub fn exchange_declare(&mut self, ctx: &mut Ctx, m: ExchangeDeclare) -> Result<(), Fault> {
        let name = utf8(m.exchange.bytes(), "exchange")?;
        // RabbitMQ's rule, passive or not (after the type check when not).
        let not_default = || {
            if name.is_empty() {
                return Err(Fault::access_refused(
                    "operation not permitted on the default exchange",
                ));
            }
            Ok(())
        };
        if m.passive {
            not_default()?;
            ctx.access.check(Action::Access, ObjectType::Exchange, || {
                access::exchange_named(name)
            })?;
            if ctx.broker.exchange(name).is_none() {
                return Err(Fault::not_found(format!(
                    "no exchange '{name}' in vhost '/'"
                )));
            }
        } else {
            let kind_name = utf8(m.kind.bytes(), "type")?;
            let kind = ExchangeKind::from_name(kind_name).ok_or_else(|| {
                Fault::command_invalid(format!("unknown exchange type '{kind_name}'"))
            })?;
            not_default()?;
            let arguments = table_to_headers(&m.arguments);
            match ctx.broker.exchange_info(name) {
                Some(existing) => {
                    let wanted = args::WantedExchange {
                        kind: kind.name(),
                        durable: m.durable,
                        auto_delete: m.auto_delete,
                        internal: m.internal,
                        arguments: &arguments,
                    };
                    args::check_exchange_equivalent(&existing, &wanted)?;
                }
                None if name.starts_with("amq.") => {
                    return Err(Fault::access_refused(format!(
                        "exchange name '{name}' contains reserved prefix 'amq.'"
                    )))
                }
                None => {}
            }
            let mut opts = ExchangeOptions {
                durable: m.durable,
                auto_delete: m.auto_delete,
                alternate_exchange: arguments
                    .get("alternate-exchange")
                    .and_then(|v| v.as_str())
                    .map(str::to_owned),
                arguments,
                internal: m.internal,
            };
            let exists = ctx.broker.exchange(name).is_some();
            let action = if exists {
                Action::Access
            } else {
                Action::Create
            };
            ctx.access.check(action, ObjectType::Exchange, || {
                access::exchange_props(name, kind_name, &opts)
            })?;
            // RabbitMQ looks the alternate exchange up when a message is unroutable and drops
            // the message if there is none: a missing one is no error here (0-10 refuses
            // it). An existing exchange's argument was compared above.
            if exists
                || opts
                    .alternate_exchange
                    .as_deref()
                    .is_some_and(|alt| ctx.broker.exchange(alt).is_none())
            {
                opts.alternate_exchange = None;
            }
            ctx.broker.declare_exchange(name, kind, opts, false)?;
        }
        if !m.nowait {
            self.reply_when_durable(ctx, !m.passive && m.durable, ExchangeDeclareOk {});
        }
        Ok(())
    }

    pub fn exchange_delete(&mut self, ctx: &mut Ctx, m: ExchangeDelete) -> Result<(), Fault> {
        let name = utf8(m.exchange.bytes(), "exchange")?;
        if name.is_empty() {
            return Err(Fault::access_refused(
                "the default exchange cannot be deleted",
            ));
        }
        let info = ctx.broker.exchange_info(name);
        ctx.access
            .check(Action::Delete, ObjectType::Exchange, || match &info {
                Some(info) => access::existing_exchange_props(info),
                None => access::exchange_named(name),
            })?;
        match ctx.broker.delete_exchange(name, m.if_unused) {
            // Deleting what does not exist succeeds, as in RabbitMQ.
            Ok(()) | Err(BrokerError::NotFound(_)) => {}
            Err(e) => return Err(e.into()),
        }
        self.exchanges.remove(m.exchange.bytes());
        if !m.nowait {
            let durable = info.is_some_and(|i| i.durable);
            self.reply_when_durable(ctx, durable, ExchangeDeleteOk {});
        }
        Ok(())
    }

    /// RabbitMQ's exchange.bind: messages `source` routes under the key go on through
    /// `destination`.
    pub fn exchange_bind(&mut self, ctx: &mut Ctx, m: ExchangeBind) -> Result<(), Fault> {
        let (source, destination, key) =
            exchange_binding(ctx, Action::Bind, &m.source, &m.destination, &m.routing_key)?;
        ctx.broker
            .bind_exchange(destination, source, key, &table_to_headers(&m.arguments))?;
        if !m.nowait {
            let durable = both_durable(ctx.broker, source, destination);
            self.reply_when_durable(ctx, durable, ExchangeBindOk {});
        }
        Ok(())
    }

    pub fn exchange_unbind(&mut self, ctx: &mut Ctx, m: ExchangeUnbind) -> Result<(), Fault> {
        let (source, destination, key) = exchange_binding(
            ctx,
            Action::Unbind,
            &m.source,
            &m.destination,
            &m.routing_key,
        )?;
        // As queue.unbind: unbinding what is not there succeeds, and the arguments pick
        // which of the key's bindings goes.
        let arguments = table_to_headers(&m.arguments);
        match ctx
            .broker
            .unbind_exchange_with_arguments(destination, source, key, &arguments)
        {
            Ok(()) | Err(BrokerError::NotFound(_)) => {}
            Err(e) => return Err(e.into()),
        }
        if !m.nowait {
            let durable = both_durable(ctx.broker, source, destination);
            self.reply_when_durable(ctx, durable, ExchangeUnbindOk {});
        }
        Ok(())
    }

    pub fn queue_declare(&mut self, ctx: &mut Ctx, m: QueueDeclare) -> Result<(), Fault> {
        let q = if m.passive {
            let name = self.queue_name(&m.queue)?;
            ctx.access
                .check(Action::Access, ObjectType::Queue, || access::named(name))?;
            self.usable_queue(ctx, &m.queue)?
        } else {
            let arguments = table_to_headers(&m.arguments);
            let mut opts = args::queue_options(&arguments)?;
            opts.durable = m.durable;
            // 0-9-1 exclusive queues die with their connection, which the core does for
            // exclusive queues that are also auto-delete.
            opts.auto_delete = m.auto_delete || m.exclusive;
            opts.exclusive_owner = m.exclusive.then_some(ctx.owner);
            opts.arguments = arguments;
            if m.queue.is_empty() {
                // The name is the broker's to choose: rules see its prefix.
                ctx.access.check(Action::Create, ObjectType::Queue, || {
                    access::queue_props("amq.gen-", &opts)
                })?;
                opts.quota = ctx.access.charge_queue()?;
                ctx.broker.declare_server_named_queue("amq.gen-", opts)?
            } else {
                let name = utf8(m.queue.bytes(), "queue")?;
                match ctx.broker.queue(name) {
                    None if name.starts_with("amq.") => {
                        return Err(Fault::access_refused(format!(
                            "queue name '{name}' contains reserved prefix 'amq.'"
                        )));
                    }
                    Some(existing) => {
                        ctx.access.check(Action::Access, ObjectType::Queue, || {
                            access::queue_props(name, &opts)
                        })?;
                        existing.check_access(ctx.owner)?;
                        // RabbitMQ's strict check: a redeclaration must ask for the
                        // exclusivity the queue has (never claim a shared queue).
                        if existing.owner() != opts.exclusive_owner {
                            return Err(Fault::new(
                                reply::RESOURCE_LOCKED,
                                format!(
                                    "cannot obtain exclusive access to locked queue '{name}' \
                                     in vhost '/': the exclusive property does not match \
                                     that of the original declaration"
                                ),
                            ));
                        }
                        args::check_equivalent(&existing, &opts)?;
                    }
                    None => {
                        ctx.access.check(Action::Create, ObjectType::Queue, || {
                            access::queue_props(name, &opts)
                        })?;
                        opts.quota = ctx.access.charge_queue()?;
                    }
                }
                ctx.broker.declare_queue(name, opts, false, ctx.owner)?.0
            }
        };
        self.last_queue = Some(q.name().to_owned());
        if !m.nowait {
            let info = q.info();
            let ok = QueueDeclareOk {
                queue: ShortStr::new(Bytes::from(info.name)).unwrap_or_default(),
                message_count: clamp(info.message_count),
                consumer_count: clamp(info.consumer_count),
            };
            self.reply_when_durable(ctx, !m.passive && q.is_durable(), ok);
        }
        Ok(())
    }

    pub fn queue_bind(&mut self, ctx: &mut Ctx, m: QueueBind) -> Result<(), Fault> {
        let q = self.usable_queue(ctx, &m.queue)?;
        let exchange = utf8(m.exchange.bytes(), "exchange")?;
        if exchange.is_empty() {
            return Err(Fault::access_refused(
                "operation not permitted on the default exchange",
            ));
        }
        // Spec: an empty queue name and routing key both mean the last declared queue.
        let key = if m.queue.is_empty() && m.routing_key.is_empty() {
            q.name()
        } else {
            utf8(m.routing_key.bytes(), "routing-key")?
        };
        ctx.access.check(Action::Bind, ObjectType::Exchange, || {
            access::binding_props(exchange, Some(q.name()), Some(key))
        })?;
        // RabbitMQ's identity: the same key with other arguments is another binding.
        ctx.broker.bind_as(
            BindingIdentity::KeyAndArguments,
            q.name(),
            exchange,
            key,
            &table_to_headers(&m.arguments),
        )?;
        if !m.nowait {
            self.reply_when_durable(ctx, q.is_durable(), QueueBindOk {});
        }
        Ok(())
    }

    /// Removes the binding with these arguments; the key's others stay (RabbitMQ's
    /// identity). As in RabbitMQ, unbinding what is not there succeeds, whether the binding,
    /// its queue or its exchange is missing (a client tearing down after an auto-delete
    /// queue went counts on it).
    pub fn queue_unbind(&mut self, ctx: &mut Ctx, m: QueueUnbind) -> Result<(), Fault> {
        let queue = self.queue_name(&m.queue)?.to_owned();
        let exchange = utf8(m.exchange.bytes(), "exchange")?;
        if exchange.is_empty() {
            return Err(Fault::access_refused(
                "operation not permitted on the default exchange",
            ));
        }
        let key = utf8(m.routing_key.bytes(), "routing-key")?;
        ctx.access.check(Action::Unbind, ObjectType::Exchange, || {
            access::binding_props(exchange, Some(&queue), Some(key))
        })?;
        let durable = match ctx.broker.queue(&queue) {
            Some(q) => {
                q.check_access(ctx.owner)?;
                let arguments = table_to_headers(&m.arguments);
                match ctx
                    .broker
                    .unbind_with_arguments(&queue, exchange, key, &arguments)
                {
                    Ok(()) | Err(BrokerError::NotFound(_)) => {}
                    Err(e) => return Err(e.into()),
                }
                q.is_durable()
            }
            None => false,
        };
        self.reply_when_durable(ctx, durable, QueueUnbindOk {});
        Ok(())
    }

    pub fn queue_purge(&mut self, ctx: &mut Ctx, m: QueuePurge) -> Result<(), Fault> {
        let name = self.queue_name(&m.queue)?;
        ctx.access
            .check(Action::Purge, ObjectType::Queue, || access::named(name))?;
        let q = self.usable_queue(ctx, &m.queue)?;
        let n = q.purge();
        if !m.nowait {
            let ok = QueuePurgeOk {
                message_count: clamp(n),
            };
            self.reply_when_durable(ctx, q.is_durable() && n > 0, ok);
        }
        Ok(())
    }

    pub fn queue_delete(&mut self, ctx: &mut Ctx, m: QueueDelete) -> Result<(), Fault> {
        let name = self.queue_name(&m.queue)?.to_owned();
        let existing = ctx.broker.queue(&name);
        let durable = existing.as_ref().is_some_and(|q| q.is_durable());
        ctx.access
            .check(Action::Delete, ObjectType::Queue, || match &existing {
                Some(q) => access::existing_queue_props(&name, q),
                None => access::named(&name),
            })?;
        let n = match ctx
            .broker
            .delete_queue(&name, m.if_unused, m.if_empty, ctx.owner)
        {
            Ok(n) => n,
            Err(BrokerError::NotFound(_)) => 0,
            Err(e) => return Err(e.into()),
        };
        if !m.nowait {
            let ok = QueueDeleteOk {
                message_count: clamp(n),
            };
            self.reply_when_durable(ctx, durable, ok);
        }
        Ok(())
    }
}

type Positioned = Vec<(u64, Message)>;

/// Puts messages back on their queues, marked redelivered, one release call per queue.
pub fn requeue(pending: Vec<Pending>) {
    let mut per_queue: Vec<(Arc<Queue>, Positioned)> = Vec::new();
    for p in pending {
        match per_queue.iter_mut().find(|(q, _)| Arc::ptr_eq(q, &p.queue)) {
            Some((_, list)) => list.push((p.position, p.message)),
            None => per_queue.push((p.queue, vec![(p.position, p.message)])),
        }
    }
    for (queue, list) in per_queue {
        queue.release(list, true);
    }
}

/// The names of an exchange-to-exchange (un)binding, if they are usable and the ACL allows
/// `action` on it.
fn exchange_binding<'a>(
    ctx: &Ctx,
    action: Action,
    source: &'a ShortStr,
    destination: &'a ShortStr,
    key: &'a ShortStr,
) -> Result<(&'a str, &'a str, &'a str), Fault> {
    let destination = utf8(destination.bytes(), "destination")?;
    let source = utf8(source.bytes(), "source")?;
    let key = utf8(key.bytes(), "routing-key")?;
    if destination.is_empty() || source.is_empty() {
        return Err(Fault::access_refused(
            "operation not permitted on the default exchange",
        ));
    }
    // The ACL sees an exchange-to-exchange binding as a binding of the source exchange
    // whose target (`queuename`) is the destination exchange.
    ctx.access.check(action, ObjectType::Exchange, || {
        access::binding_props(source, Some(destination), Some(key))
    })?;
    Ok((source, destination, key))
}

/// Whether a binding between these exchanges is journaled (both are durable).
fn both_durable(broker: &Broker, source: &str, destination: &str) -> bool {
    [source, destination]
        .iter()
        .all(|name| broker.exchange(name).is_some_and(|e| e.is_durable()))
}

pub fn utf8<'a>(b: &'a [u8], what: &str) -> Result<&'a str, Fault> {
    std::str::from_utf8(b)
        .map_err(|_| Fault::new(reply::PRECONDITION_FAILED, format!("{what} is not UTF-8")))
}

pub fn clamp(n: u64) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}
