//! Links on which we send: a queue consumer per link, its credit set by the client's flows,
//! and the settlement of what it sent.
//!
//! 1.0 credit is absolute (the client says how far the delivery count may go), the core's
//! is added: the link keeps `in_flight`, the credit the queue holds or has spent on
//! deliveries not yet here, and grants the queue only what the client's credit and the
//! unsettled cap (`--session-max-unacked`, per link) leave. A client that lowers its credit
//! takes the queue's unspent credit back; deliveries already on their way beyond the new
//! limit wait on the link (`parked`) for more credit.

use std::collections::VecDeque;
use std::sync::Arc;

use bytes::Bytes;
use ferry_acl::{Action, ObjectType};
use ferry_amqp1::messaging::distribution_mode;
use ferry_amqp1::{
    condition, Attach, DeliveryState, Descriptor, FilterSet, Flow, Role, SenderSettleMode, Source,
    Symbol, TerminusDurability, TerminusExpiryPolicy, Value,
};
use ferry_core::{
    Accepts, Arguments, ConsumerFilter, ConsumerId, ConsumerSpec, Delivery, ExchangeKind,
    HeaderValue, Message, Queue, QueueOptions,
};
use tracing::debug;

use super::address::{self, Node};
use super::error::Fault;
use super::session::{Ctx, Session};
use super::subscription::{self, Lifetime, Subscribed};
use super::unsettled::OutRecord;
use crate::access;
use crate::fast_map::FastMap;
use crate::selector::{self, JmsSelector};

/// Names of the queues made for dynamic nodes and exchange subscriptions (the `amq.`
/// prefix is the broker's: no client can declare one).
const TEMPORARY_PREFIX: &str = "amq.1-";

/// `apache.org` filters (qpidd's and Qpid JMS's): binding keys for exchange sources, the
/// JMS selector, and no-local, which ferryd does not support.
const DIRECT_BINDING: (u64, &str) = (
    0x0000_468C_0000_0000,
    "apache.org:legacy-amqp-direct-binding:string",
);
const TOPIC_BINDING: (u64, &str) = (
    0x0000_468C_0000_0001,
    "apache.org:legacy-amqp-topic-binding:string",
);
const HEADERS_BINDING: (u64, &str) = (
    0x0000_468C_0000_0002,
    "apache.org:legacy-amqp-headers-binding:map",
);
const SELECTOR: (u64, &str) = (0x0000_468C_0000_0004, "apache.org:selector-filter:string");

pub struct Sender {
    pub consumer: ConsumerId,
    pub queue: Arc<Queue>,
    /// The client asked for settled deliveries (at most once).
    pub presettled: bool,
    /// Deliveries that arrived beyond the client's credit or the session window.
    pub parked: VecDeque<Delivery>,
    delivery_count: u32,
    /// The delivery count the client's credit reaches.
    limit: u32,
    drain: bool,
    /// The client's drain waits for its answer: deliveries it can take are parked behind
    /// the session window or a large message, and the credit is used up once they go.
    drain_owed: bool,
    in_flight: u32,
    /// Sent and not yet settled by the client.
    outstanding: u32,
    /// A queue made for this link, deleted when it closes.
    temporary: Option<String>,
    /// The durable subscription the link consumes: it ends when the client closes the link.
    subscription: Option<Subscribed>,
}

impl Sender {
    /// Credit left: how many more deliveries the client takes.
    pub fn credit(&self) -> u32 {
        let left = self.limit.wrapping_sub(self.delivery_count);
        if left > i32::MAX as u32 {
            0
        } else {
            left
        }
    }

    pub fn on_flow(&mut self, f: &Flow) {
        let before = self.credit();
        let count = f.delivery_count.unwrap_or(0);
        self.limit = count.wrapping_add(f.link_credit.unwrap_or(0));
        self.drain = f.drain;
        // A newer flow supersedes an unanswered drain (a drain in it is owed afresh once its
        // deliveries are handed out).
        self.drain_owed = false;
        if self.credit() < before && self.in_flight > 0 {
            // The client wants less: take back what the queue has not spent.
            let left = self.queue.take_credit(self.consumer).unwrap_or(0);
            self.in_flight = self.in_flight.saturating_sub(left);
        }
    }

    pub fn fill_flow(&self, flow: &mut Flow) {
        flow.delivery_count = Some(self.delivery_count);
        flow.link_credit = Some(self.credit());
        flow.available = Some(u32::try_from(self.queue.message_count()).unwrap_or(u32::MAX));
        flow.drain = self.drain;
    }

    /// Whether the link consumes a durable subscription (which a closing detach ends).
    pub fn is_subscription(&self) -> bool {
        self.subscription.is_some()
    }

    /// A delivery arrived from the queue.
    pub fn arrived(&mut self) {
        self.in_flight = self.in_flight.saturating_sub(1);
    }

    /// A delivery went out.
    pub fn sent(&mut self, settled: bool) {
        self.delivery_count = self.delivery_count.wrapping_add(1);
        if !settled {
            self.outstanding += 1;
        }
    }

    /// The client settled `n` of our deliveries.
    pub fn settled(&mut self, n: u32) {
        self.outstanding = self.outstanding.saturating_sub(n);
    }

    /// Grants the queue what the credit and the unsettled cap (`cap`, 0: none) allow.
    pub fn top_up(&mut self, cap: u32) {
        if self.drain_owed {
            // Draining: what the queue had is here; fetching more would put off the answer.
            return;
        }
        let parked = u32::try_from(self.parked.len()).unwrap_or(u32::MAX);
        let mut want = self.credit().saturating_sub(parked);
        if cap > 0 {
            want = want.min(cap.saturating_sub(self.outstanding.saturating_add(parked)));
        }
        // u32::MAX is the core's "unlimited".
        want = want.min(u32::MAX - 1);
        if want > self.in_flight {
            let more = want - self.in_flight;
            if self.queue.add_credit(self.consumer, more, u32::MAX).is_ok() {
                self.in_flight = want;
            }
        }
    }

    /// Drain: the queue delivers what its credit allows now and gives the rest back.
    pub fn drain_core(&mut self) {
        let left = self.queue.drain_credit(self.consumer).unwrap_or(0);
        self.in_flight = self.in_flight.saturating_sub(left);
    }

    /// The queue's deliveries for a drain were handed out: the drain is answered once those
    /// the client's credit takes have gone.
    pub fn owe_drain(&mut self) {
        self.drain_owed = self.drain;
    }

    /// Whether an owed drain can be answered now (nothing parked that the credit takes);
    /// if so its unused credit is used up.
    pub fn finish_drain(&mut self) -> bool {
        if !self.drain_owed || (self.credit() > 0 && !self.parked.is_empty()) {
            return false;
        }
        self.drain_owed = false;
        // Only forward: the delivery count is a serial number, and a client whose credit
        // ends behind what we sent (it had not seen them all) has none to use up.
        self.delivery_count = self.delivery_count.wrapping_add(self.credit());
        true
    }
}

/// Where a link's deliveries come from.
struct Found {
    queue: Arc<Queue>,
    /// The source as the reply echoes it.
    source: Source,
    browse: bool,
    /// A queue made for this link, deleted with it.
    temporary: Option<String>,
    /// The durable subscription the link consumes.
    subscription: Option<Subscribed>,
    /// Other links may consume the queue too (a shared subscription's).
    shared: bool,
    /// The link's JMS selector.
    filter: Option<ConsumerFilter>,
}

/// The client attaches a receiving link: find (or make) its source and subscribe.
pub fn attach(session: &mut Session, ctx: &mut Ctx, a: Attach) -> Result<Sender, Fault> {
    let found = match a.source.clone() {
        Some(source) => find_source(ctx, &a, source)?,
        None => find_subscription(ctx, &a)?,
    };
    let exclusive = found.subscription.is_some() && !found.shared;
    let filter = found.filter.clone();
    let consumer = match subscribe(ctx, &found.queue, &a, found.browse, exclusive, filter) {
        Ok(c) => c,
        Err(f) => {
            if let Some(name) = &found.temporary {
                let _ = ctx.broker.delete_queue(name, false, false, ctx.owner);
            }
            return Err(f);
        }
    };
    let presettled = a.snd_settle_mode == SenderSettleMode::Settled;
    let reply = Attach {
        name: a.name.clone(),
        handle: a.handle,
        role: Role::Sender,
        snd_settle_mode: if presettled {
            SenderSettleMode::Settled
        } else {
            SenderSettleMode::Unsettled
        },
        rcv_settle_mode: a.rcv_settle_mode,
        source: Some(found.source),
        target: a.target.clone(),
        initial_delivery_count: Some(0),
        ..Attach::default()
    };
    session.write(ctx, reply);
    let queue = found.queue;
    debug!(link = %a.name, queue = queue.name(), browse = found.browse, "sending link attached");
    Ok(Sender {
        consumer,
        queue,
        presettled,
        parked: VecDeque::new(),
        delivery_count: 0,
        limit: 0,
        drain: false,
        drain_owed: false,
        in_flight: 0,
        outstanding: 0,
        temporary: found.temporary,
        subscription: found.subscription,
    })
}

/// A link with no source names a durable subscription by its name: attached to it if it
/// exists (Qpid JMS then closes the link to unsubscribe), refused if not.
fn find_subscription(ctx: &mut Ctx, a: &Attach) -> Result<Found, Fault> {
    let global = has(&a.desired_capabilities, "global");
    let queue = subscription::find(ctx, a.name.as_str(), global).ok_or_else(|| {
        Fault::new(
            condition::NOT_FOUND,
            format!("no durable subscription named {:?}", a.name),
        )
    })?;
    let source = Source {
        address: Some(queue.name().into()),
        durable: TerminusDurability::UnsettledState,
        expiry_policy: TerminusExpiryPolicy::Never,
        ..Source::default()
    };
    Ok(Found {
        // Held exclusively (refused while shared links consume it), so a closing detach
        // ends it outright.
        subscription: Some(Subscribed {
            queue: queue.name().to_owned(),
            shared: false,
        }),
        queue,
        source,
        browse: false,
        temporary: None,
        shared: false,
        filter: None,
    })
}

fn find_source(ctx: &mut Ctx, a: &Attach, mut source: Source) -> Result<Found, Fault> {
    let browse = source.distribution_mode.as_ref() == Some(&distribution_mode::COPY);
    let topic = has(&source.capabilities, "topic");
    let Filters {
        kept,
        binding,
        selector,
    } = filters(source.filter.take())?;
    source.filter = kept;
    // A topic subscription's own queue has no other reader: what its selector does not
    // match is dropped rather than kept for nobody.
    let filter = |drop_unmatched| {
        selector.as_ref().map(|s| ConsumerFilter {
            matches: s.clone(),
            drop_unmatched,
        })
    };
    let found = |queue, source, temporary, filter| Found {
        queue,
        source,
        browse,
        temporary,
        subscription: None,
        shared: false,
        filter,
    };
    if source.dynamic {
        let q = temporary_queue(ctx)?;
        source.address = Some(q.name().into());
        let name = q.name().to_owned();
        return Ok(found(q, source, Some(name), filter(false)));
    }
    let address = source
        .address
        .as_ref()
        .map(|a| a.as_str())
        .unwrap_or_default();
    let (exchange, key) = match address::resolve(ctx.broker, address, topic) {
        Some(Node::Queue(q)) => return Ok(found(q, source, None, filter(false))),
        Some(Node::Exchange { exchange, key }) => (exchange, key),
        None => {
            return Err(Fault::new(
                condition::NOT_FOUND,
                format!("no queue or exchange named {address:?}"),
            ))
        }
    };
    let (key, args) = match binding {
        Some(b) => b,
        None => (
            key.unwrap_or_else(|| default_key(exchange.kind())),
            Arguments::new(),
        ),
    };
    let args = match (exchange.kind(), args.is_empty()) {
        // A headers binding without arguments: every message.
        (ExchangeKind::Headers, true) => {
            std::iter::once(("x-match".to_owned(), HeaderValue::Str("all".into()))).collect()
        }
        _ => args,
    };
    let durable = source.durable != TerminusDurability::None
        || source.expiry_policy == TerminusExpiryPolicy::Never;
    let shared = has(&source.capabilities, "shared");
    if durable || shared {
        let link = a.name.as_str();
        let name = if shared {
            let global = has(&source.capabilities, "global");
            subscription::shared_queue_name(ctx.container_id, link, global, durable)
        } else {
            subscription::queue_name(ctx.container_id, link)
        };
        let lifetime = if durable {
            Lifetime::Durable
        } else {
            Lifetime::WhileConsumed
        };
        // Checked before the subscription is made: one made for a link that may not consume
        // it would collect messages nobody can read or unsubscribe.
        ctx.access
            .check(Action::Consume, ObjectType::Queue, || access::named(&name))?;
        let selector_text = selector.as_ref().map(|s| s.text());
        let wanted = subscription::Wanted {
            exchange: &exchange,
            key: &key,
            binding: &args,
            selector: selector_text,
            lifetime,
            shared,
        };
        let queue = subscription::open(ctx, &name, &wanted)?;
        // Qpid JMS asks for copies on a durable subscription: its queue is consumed all the
        // same, and the reply says so.
        source.distribution_mode = None;
        return Ok(Found {
            queue,
            source,
            browse: false,
            temporary: None,
            subscription: durable.then_some(Subscribed {
                queue: name,
                shared,
            }),
            shared,
            // Consumed, not browsed, whatever distribution mode was asked for (above).
            filter: filter(true),
        });
    }
    let q = temporary_queue(ctx)?;
    let name = q.name().to_owned();
    let bound = ctx
        .access
        .check(Action::Bind, ObjectType::Exchange, || {
            access::binding_props(exchange.name(), Some(&name), Some(&key))
        })
        .map_err(Fault::from)
        .and_then(|()| {
            ctx.broker
                .bind(&name, exchange.name(), &key, &args)
                .map_err(Fault::from)
        });
    if let Err(f) = bound {
        let _ = ctx.broker.delete_queue(&name, false, false, ctx.owner);
        return Err(f);
    }
    Ok(found(q, source, Some(name), filter(!browse)))
}

/// `exclusive`: a durable subscription has one consumer at a time, as JMS has it.
fn subscribe(
    ctx: &mut Ctx,
    queue: &Arc<Queue>,
    a: &Attach,
    browse: bool,
    exclusive: bool,
    filter: Option<ConsumerFilter>,
) -> Result<ConsumerId, Fault> {
    let name = queue.name();
    ctx.access
        .check(Action::Consume, ObjectType::Queue, || access::named(name))?;
    let consumer = ctx.broker.next_consumer_id();
    queue.subscribe(ConsumerSpec {
        id: consumer,
        outbox: ctx.outbox.clone(),
        owner: ctx.owner,
        // No-local is qpidd's 0-10 notion: a 1.0 consumer makes no connection local.
        connection: 0,
        tag: Bytes::copy_from_slice(a.name.as_bytes()),
        acquire: !browse,
        exclusive,
        window: None,
        filter,
        ack_timeout: None,
    })?;
    Ok(consumer)
}

/// A server-named queue for a dynamic node or an exchange subscription: exclusive to the
/// connection, deleted with its link (or the connection).
pub fn temporary_queue(ctx: &mut Ctx) -> Result<Arc<Queue>, Fault> {
    let mut options = QueueOptions {
        exclusive_owner: Some(ctx.owner),
        auto_delete: true,
        ..QueueOptions::default()
    };
    ctx.access.check(Action::Create, ObjectType::Queue, || {
        access::queue_props(TEMPORARY_PREFIX, &options)
    })?;
    options.quota = ctx.access.charge_queue()?;
    Ok(ctx
        .broker
        .declare_server_named_queue(TEMPORARY_PREFIX, options)?)
}

/// What a source with no binding key takes from an exchange: everything its kind lets
/// through without one.
fn default_key(kind: ExchangeKind) -> String {
    match kind {
        ExchangeKind::Topic => "#".into(),
        _ => String::new(),
    }
}

pub fn has(capabilities: &[Symbol], name: &str) -> bool {
    capabilities.iter().any(|c| c.as_str() == name)
}

fn descriptor_is(d: &Descriptor, (code, name): (u64, &str)) -> bool {
    match d {
        Descriptor::Code(c) => *c == code,
        Descriptor::Symbol(s) => s.as_str() == name,
    }
}

/// A source's filters, sorted.
#[derive(Debug, Default)]
struct Filters {
    /// Those in force, echoed in the attach (the spec's way of saying so).
    kept: Option<FilterSet>,
    /// A binding filter's key and arguments, for an exchange source.
    binding: Option<(String, Arguments)>,
    /// The JMS selector.
    selector: Option<Arc<JmsSelector>>,
}

/// Sorts a source's filters: the binding filters and the JMS selector ferryd applies
/// (kept, to be echoed) and the rest, which are left out of the reply (the spec's way of
/// declining them). A selector that does not parse refuses the link with
/// amqp:invalid-field.
fn filters(filter: Option<FilterSet>) -> Result<Filters, Fault> {
    let Some(filter) = filter else {
        return Ok(Filters::default());
    };
    let mut kept = FilterSet::new();
    let mut binding = None;
    let mut selector = None;
    for (key, value) in filter.iter() {
        let Value::Described(d) = value else {
            continue;
        };
        let found = if descriptor_is(&d.descriptor, DIRECT_BINDING)
            || descriptor_is(&d.descriptor, TOPIC_BINDING)
        {
            d.value.as_str().map(|k| (k.to_owned(), Arguments::new()))
        } else if descriptor_is(&d.descriptor, HEADERS_BINDING) {
            match &d.value {
                Value::Map(m) => Some((String::new(), headers_arguments(m))),
                _ => None,
            }
        } else if descriptor_is(&d.descriptor, SELECTOR) {
            let text = d.value.as_str().ok_or_else(|| {
                Fault::new(condition::INVALID_FIELD, "a JMS selector is a string")
            })?;
            let parsed = JmsSelector::parse(text)
                .map_err(|e| Fault::new(condition::INVALID_FIELD, selector::refusal(&e)))?;
            if let Some(parsed) = parsed {
                selector.get_or_insert(Arc::new(parsed));
            }
            kept.push(key.clone(), value.clone());
            continue;
        } else {
            debug!(filter = %key, descriptor = %d.descriptor, "filter not supported: left out of the attach");
            None
        };
        if let Some(b) = found {
            binding.get_or_insert(b);
            kept.push(key.clone(), value.clone());
        }
    }
    Ok(Filters {
        kept: (!kept.is_empty()).then_some(kept),
        binding,
        selector,
    })
}

fn headers_arguments(m: &ferry_amqp1::Map<Value, Value>) -> Arguments {
    string_keyed_at(m, 1).collect()
}

/// A map's entries under text keys (others are left out), at `depth` (see
/// [`HeaderValue::MAX_NESTING`]).
fn string_keyed_at(
    m: &ferry_amqp1::Map<Value, Value>,
    depth: usize,
) -> impl Iterator<Item = (String, HeaderValue)> + '_ {
    m.iter().filter_map(move |(k, v)| {
        let key = match k {
            Value::String(s) => s.as_str().to_owned(),
            Value::Symbol(s) => s.as_str().to_owned(),
            _ => return None,
        };
        Some((key, filter_value(v, depth)))
    })
}

fn filter_value(v: &Value, depth: usize) -> HeaderValue {
    let list = |items: &[Value]| {
        HeaderValue::list_at(depth, |below| {
            items.iter().map(move |v| filter_value(v, below))
        })
    };
    match v {
        Value::String(s) => HeaderValue::Str(s.as_str().to_owned()),
        Value::Symbol(s) => HeaderValue::Str(s.as_str().to_owned()),
        Value::Bool(b) => HeaderValue::Bool(*b),
        Value::Int(n) => HeaderValue::Int(i64::from(*n)),
        Value::Long(n) => HeaderValue::Int(*n),
        Value::Uint(n) => HeaderValue::UInt(u64::from(*n)),
        Value::Ulong(n) => HeaderValue::UInt(*n),
        Value::Null => HeaderValue::Void,
        Value::List(items) => list(items),
        Value::Array(a) => list(a.items()),
        Value::Map(m) => HeaderValue::map_at(depth, |below| string_keyed_at(m, below)),
        _ => HeaderValue::Other,
    }
}

/// The link is gone: cancel its consumer, put back what the client never settled (and what
/// never reached it), delete its temporary queue, and end its durable subscription if the
/// client closed it (`closed`). Gives why the subscription could not be ended.
pub fn close(ctx: &mut Ctx, s: Sender, unsettled: Vec<OutRecord>, closed: bool) -> Option<Fault> {
    ctx.broker.cancel_consumer(&s.queue, s.consumer);
    for d in s.parked {
        release_delivery(d);
    }
    release_records(unsettled, true);
    if let Some(name) = s.temporary {
        let _ = ctx.broker.delete_queue(&name, false, false, ctx.owner);
    }
    match (s.subscription, closed) {
        (Some(sub), true) => subscription::end(ctx, &sub).err(),
        _ => None,
    }
}

pub fn release_delivery(d: Delivery) {
    if d.acquired {
        d.queue.release([(d.position, d.message)], false);
    }
}

/// Puts acquired messages back, one call per queue.
pub fn release_records(records: Vec<OutRecord>, redelivered: bool) {
    type Positioned = Vec<(u64, Message)>;
    // By the queue's address: records from many queues (a session's end) cost one lookup
    // each rather than a walk of the queues seen.
    let mut per_queue: FastMap<*const Queue, (Arc<Queue>, Positioned)> = FastMap::default();
    for r in records.into_iter().filter(|r| r.acquired) {
        per_queue
            .entry(Arc::as_ptr(&r.queue))
            .or_insert_with(|| (r.queue.clone(), Vec::new()))
            .1
            .push((r.position, r.message));
    }
    for (_, (queue, list)) in per_queue {
        queue.release(list, redelivered);
    }
}

/// What an outcome does to a delivery: accepted leaves the queue, rejected is dead-lettered,
/// released goes back as it was, modified goes back counted as a failed delivery (or, if
/// undeliverable here, is dead-lettered). Settling without an outcome accepts (qpidd's
/// reading).
pub fn apply_outcome(records: Vec<OutRecord>, state: Option<&DeliveryState>) {
    let release = |records: Vec<OutRecord>, redelivered| release_records(records, redelivered);
    match state {
        None | Some(DeliveryState::Accepted(_)) => {
            let mut accepts = Accepts::default();
            for r in records.into_iter().filter(|r| r.acquired) {
                accepts.push(&r.queue, r.position, r.message);
            }
            accepts.finish();
        }
        Some(DeliveryState::Rejected(_)) => reject(records),
        Some(DeliveryState::Modified(m)) if m.undeliverable_here == Some(true) => reject(records),
        Some(DeliveryState::Modified(m)) => release(records, m.delivery_failed == Some(true)),
        Some(_) => release(records, false),
    }
}

fn reject(records: Vec<OutRecord>) {
    for r in records.into_iter().filter(|r| r.acquired) {
        r.queue.reject(r.position, r.message);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_amqp1::{Map, Str};

    fn described(code: u64, v: Value) -> Value {
        Value::described(code, v)
    }

    #[test]
    fn binding_filters_are_kept_and_others_left_out() {
        let mut f = FilterSet::new();
        f.push(
            Symbol::from("no-local"),
            described(0x0000_468C_0000_0003, Value::List(Vec::new())),
        );
        f.push(
            Symbol::from("key"),
            described(TOPIC_BINDING.0, Value::from("a.*")),
        );
        let Filters { kept, binding, .. } = filters(Some(f)).unwrap();
        let kept = kept.unwrap();
        assert_eq!(kept.len(), 1);
        assert!(kept.get("key").is_some());
        assert_eq!(binding.unwrap().0, "a.*");
        let mut f = FilterSet::new();
        let mut m = Map::new();
        m.push(Value::from("x-match"), Value::from("any"));
        m.push(Value::String(Str::from("k")), Value::Int(1));
        let mut inner = Map::new();
        inner.push(Value::from("n"), Value::Long(2));
        inner.push(Value::Int(3), Value::Long(3));
        m.push(
            Value::from("l"),
            Value::List(vec![Value::Uint(1), Value::Map(inner)]),
        );
        f.push(
            Symbol::from("h"),
            Value::described(
                Descriptor::Symbol(Symbol::from(HEADERS_BINDING.1)),
                Value::Map(m),
            ),
        );
        let Filters { kept, binding, .. } = filters(Some(f)).unwrap();
        assert!(kept.is_some());
        let (_, args) = binding.unwrap();
        assert_eq!(args.get("k"), Some(&HeaderValue::Int(1)));
        // Lists and maps keep their content; a nested map's entries under other than text
        // keys are left out, as the filter's own are.
        let n: Arguments = [("n", HeaderValue::Int(2))].into_iter().collect();
        assert_eq!(
            args.get("l"),
            Some(&HeaderValue::List(vec![
                HeaderValue::UInt(1),
                HeaderValue::Map(n)
            ]))
        );
        let none = filters(None).unwrap();
        assert!(none.kept.is_none() && none.binding.is_none() && none.selector.is_none());
    }

    fn selector_filter(v: Value) -> FilterSet {
        let mut f = FilterSet::new();
        f.push(Symbol::from("jms-selector"), described(SELECTOR.0, v));
        f
    }

    #[test]
    fn a_selector_is_kept_and_applied_and_a_bad_one_refused() {
        let applied = filters(Some(selector_filter(Value::from("a = 1")))).unwrap();
        assert!(applied.kept.unwrap().get("jms-selector").is_some());
        assert_eq!(applied.selector.unwrap().text(), "a = 1");
        let blank = filters(Some(selector_filter(Value::from(" ")))).unwrap();
        assert!(blank.selector.is_none(), "blank text is no selector");
        for bad in [Value::from("a = "), Value::Int(1)] {
            let refused = filters(Some(selector_filter(bad))).unwrap_err();
            assert_eq!(refused.condition, condition::INVALID_FIELD);
        }
    }
}
