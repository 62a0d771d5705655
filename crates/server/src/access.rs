//! Authorisation and per-client limits, shared by both protocol layers: the ACL (when
//! `--acl-file` is given) applied to each request, connections counted per user and per client
//! address, queues counted per user.
//!
//! Without an ACL every check is one `Option` test; publish decisions are cached per
//! session/channel and exchange (and routing key, when a rule depends on it) until the ACL is
//! reloaded.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use bytes::Bytes;
use ferry_acl::{
    Acl, Action, Decision, ObjectType, Property, PublishPolicy, QuotaKind, SharedAcl, Value,
    DEFAULT_EXCHANGE_NAME,
};
use ferry_core::{BrokerError, ExchangeOptions, QueueOptions, QuotaCharge};
use parking_lot::Mutex;
use tracing::{info, warn};

use crate::config::ServerConfig;
use crate::fast_map::FastMap;
use crate::state::ServerState;

/// A request the ACL refused; the text is what the client is told.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denied(pub String);

/// One lookup's properties.
pub type Props<'a> = Vec<(Property, Value<'a>)>;

/// Live counts behind the per-user and per-address limits, shared by a server's connections.
#[derive(Debug, Default)]
pub struct ClientCounters {
    by_user: Mutex<HashMap<String, u32>>,
    by_ip: Mutex<HashMap<IpAddr, u32>>,
    queues_by_user: Mutex<HashMap<String, u32>>,
}

/// A connection counted against its client address; dropping it gives the slot back.
#[derive(Debug)]
pub struct IpSlot {
    counters: Arc<ClientCounters>,
    ip: IpAddr,
}

/// A connection counted against its user.
#[derive(Debug)]
struct UserSlot {
    counters: Arc<ClientCounters>,
    user: String,
}

/// A queue counted against the user who created it (held by the queue until it is deleted).
#[derive(Debug)]
struct QueueSlot {
    counters: Arc<ClientCounters>,
    user: String,
}

fn release<K: std::hash::Hash + Eq>(map: &Mutex<HashMap<K, u32>>, key: &K) {
    let mut map = map.lock();
    if let Some(n) = map.get_mut(key) {
        *n = n.saturating_sub(1);
        if *n == 0 {
            map.remove(key);
        }
    }
}

/// Adds one to `key`'s count unless that would pass `limit` (`None` = unlimited).
fn take<K: std::hash::Hash + Eq>(
    map: &Mutex<HashMap<K, u32>>,
    key: K,
    limit: Option<u32>,
) -> Result<(), u32> {
    let mut map = map.lock();
    let n = map.entry(key).or_insert(0);
    match limit {
        Some(max) if *n >= max => Err(max),
        _ => {
            *n += 1;
            Ok(())
        }
    }
}

impl Drop for IpSlot {
    fn drop(&mut self) {
        release(&self.counters.by_ip, &self.ip);
    }
}

impl Drop for UserSlot {
    fn drop(&mut self) {
        release(&self.counters.by_user, &self.user);
    }
}

impl Drop for QueueSlot {
    fn drop(&mut self) {
        release(&self.counters.queues_by_user, &self.user);
    }
}

impl ClientCounters {
    /// Counts a new connection from `ip`; `None` when `limit` (0 = none) is reached.
    pub fn take_ip(self: &Arc<Self>, ip: IpAddr, limit: u32) -> Option<IpSlot> {
        let limit = (limit > 0).then_some(limit);
        take(&self.by_ip, ip, limit).ok()?;
        Some(IpSlot {
            counters: self.clone(),
            ip,
        })
    }

    fn take_user(self: &Arc<Self>, user: &str, limit: Option<u32>) -> Result<UserSlot, u32> {
        take(&self.by_user, user.to_owned(), limit)?;
        Ok(UserSlot {
            counters: self.clone(),
            user: user.to_owned(),
        })
    }

    /// Counts a queue against `user`; the entry goes when the user's last queue does, so
    /// names that come and go (any name logs in with `--auth no`) leave nothing behind.
    fn take_queue(self: &Arc<Self>, user: &str, limit: Option<u32>) -> Result<QueueSlot, u32> {
        take(&self.queues_by_user, user.to_owned(), limit)?;
        Ok(QueueSlot {
            counters: self.clone(),
            user: user.to_owned(),
        })
    }

    #[cfg(test)]
    fn user_connections(&self, user: &str) -> u32 {
        self.by_user.lock().get(user).copied().unwrap_or(0)
    }

    #[cfg(test)]
    fn users_with_queues(&self) -> usize {
        self.queues_by_user.lock().len()
    }
}

/// Cached publish decisions of one session (0-10) or channel (0-9-1).
#[derive(Debug, Default)]
pub struct PublishCache {
    generation: u64,
    acl: Option<Arc<Acl>>,
    exchanges: FastMap<Bytes, Verdict>,
    /// Routing keys cached over all exchanges.
    keys: usize,
}

#[derive(Debug)]
enum Verdict {
    Fixed(Decision),
    ByKey(FastMap<Bytes, Decision>),
}

/// Exchanges and routing keys (over all exchanges) a cache remembers before it starts over: a
/// publisher cycling through endless keys costs lookups, not memory. Cached names are copies:
/// the caller's are slices of the read buffer, and one would keep all of that buffer alive.
const CACHED_EXCHANGES: usize = 256;
const CACHED_KEYS: usize = 1024;

/// One connection's identity for access checks and limits.
#[derive(Debug)]
pub struct ClientAccess {
    acl: Option<Arc<SharedAcl>>,
    counters: Arc<ClientCounters>,
    peer: SocketAddr,
    user: String,
    connection_limit_per_user: u32,
    max_queues_per_user: u32,
    _user_slot: Option<UserSlot>,
}

impl ClientAccess {
    /// Before login: no user yet, nothing counted.
    pub fn new(config: &ServerConfig, state: &ServerState, peer: SocketAddr) -> ClientAccess {
        ClientAccess {
            acl: state.acl.clone(),
            counters: state.counters.clone(),
            peer,
            user: String::new(),
            connection_limit_per_user: config.connection_limit_per_user,
            max_queues_per_user: config.max_queues_per_user,
            _user_slot: None,
        }
    }

    /// A user acting without a connection (management over HTTP): checked by the same rules,
    /// counted against no connection limit.
    pub fn for_user(
        config: &ServerConfig,
        state: &ServerState,
        peer: SocketAddr,
        user: &str,
    ) -> ClientAccess {
        ClientAccess {
            user: user.to_owned(),
            ..ClientAccess::new(config, state, peer)
        }
    }

    /// The user has logged in and opens the connection: connection rules and the per-user
    /// connection limit decide whether it may. The error is the reason to send.
    pub fn admit(&mut self, user: &str) -> Result<(), String> {
        self.user = user.to_owned();
        let acl = self.acl.as_ref().map(|a| a.current());
        if let Some(acl) = &acl {
            let d = acl.check_connection(user, self.peer.ip());
            self.log(&d, "create connection", &format!("host={}", self.peer.ip()));
            if !d.allowed {
                return Err(format!(
                    "ACL denied connection for user {user} from {}",
                    self.peer.ip()
                ));
            }
        }
        let limit = self.quota(acl.as_deref(), QuotaKind::Connections);
        match self.counters.take_user(user, limit) {
            Ok(slot) => {
                self._user_slot = Some(slot);
                Ok(())
            }
            Err(max) => {
                warn!(%user, peer = %self.peer, "connection refused: user has {max} connections (the limit)");
                Err(format!(
                    "user {user} already has {max} connections (the limit)"
                ))
            }
        }
    }

    /// An ACL quota for the user, else for `all`, else the command-line limit (0 = none).
    fn quota(&self, acl: Option<&Acl>, kind: QuotaKind) -> Option<u32> {
        let configured = match kind {
            QuotaKind::Connections => self.connection_limit_per_user,
            QuotaKind::Queues => self.max_queues_per_user,
        };
        acl.and_then(|a| a.quota(kind, &self.user))
            .or((configured > 0).then_some(configured))
    }

    /// Authorises `action` on `object`; `props` is built only when an ACL is in force.
    pub fn check<'a>(
        &self,
        action: Action,
        object: ObjectType,
        props: impl FnOnce() -> Props<'a>,
    ) -> Result<(), Denied> {
        let Some(shared) = &self.acl else {
            return Ok(());
        };
        let props = props();
        let d = shared.current().check(&self.user, action, object, &props);
        self.verdict(d, action, object, &props)
    }

    /// Whether the ACL would allow the request, asked only to decide what to show: nothing
    /// is logged, as a read is not the request itself.
    pub fn permits<'a>(
        &self,
        action: Action,
        object: ObjectType,
        props: impl FnOnce() -> Props<'a>,
    ) -> bool {
        match &self.acl {
            None => true,
            Some(shared) => {
                shared
                    .current()
                    .check(&self.user, action, object, &props())
                    .allowed
            }
        }
    }

    fn verdict(
        &self,
        d: Decision,
        action: Action,
        object: ObjectType,
        props: &[(Property, Value<'_>)],
    ) -> Result<(), Denied> {
        let what = describe(props);
        self.log(&d, &format!("{action} {object}"), &what);
        if d.allowed {
            return Ok(());
        }
        let mut text = format!("ACL denied {action} {object} request from {}", self.user);
        if !what.is_empty() {
            let _ = write!(text, " ({what})");
        }
        if let Some(p) = d.limit_exceeded {
            let _ = write!(text, ": {p} exceeded");
        }
        Err(Denied(text))
    }

    fn log(&self, d: &Decision, request: &str, what: &str) {
        let rule = d
            .line
            .map_or_else(|| "default".to_owned(), |l| format!("line {l}"));
        if !d.allowed {
            warn!(user = %self.user, peer = %self.peer, %rule, "ACL denied {request} {what}");
        } else if d.logged {
            info!(user = %self.user, peer = %self.peer, %rule, "ACL allowed {request} {what}");
        }
    }

    /// Authorises one message published to `exchange` with `routing_key`. Decisions are cached
    /// in `cache` (per session or channel) until the ACL changes.
    #[inline]
    pub fn check_publish(
        &self,
        cache: &mut PublishCache,
        exchange: &Bytes,
        routing_key: &Bytes,
    ) -> Result<(), Denied> {
        match &self.acl {
            None => Ok(()),
            Some(shared) => self.check_publish_by(shared, cache, exchange, routing_key),
        }
    }

    fn check_publish_by(
        &self,
        shared: &SharedAcl,
        cache: &mut PublishCache,
        exchange: &Bytes,
        routing_key: &Bytes,
    ) -> Result<(), Denied> {
        let generation = shared.generation();
        if cache.generation != generation || cache.acl.is_none() {
            cache.generation = generation;
            cache.acl = Some(shared.current());
            cache.exchanges.clear();
            cache.keys = 0;
        }
        let Some(acl) = cache.acl.clone() else {
            return Ok(());
        };
        let name = exchange_name(exchange);
        if !cache.exchanges.contains_key(exchange) {
            if cache.exchanges.len() >= CACHED_EXCHANGES {
                cache.exchanges.clear();
                cache.keys = 0;
            }
            let verdict = match acl.publish_policy(&self.user, &name) {
                PublishPolicy::Fixed(d) => Verdict::Fixed(d),
                PublishPolicy::ByRoutingKey => Verdict::ByKey(FastMap::default()),
            };
            cache
                .exchanges
                .insert(Bytes::copy_from_slice(exchange), verdict);
        }
        let decision = match cache.exchanges.get(exchange) {
            Some(Verdict::Fixed(d)) => *d,
            Some(Verdict::ByKey(keys)) => match keys.get(routing_key) {
                Some(d) => *d,
                None => {
                    let key = String::from_utf8_lossy(routing_key);
                    let d = acl.check(
                        &self.user,
                        Action::Publish,
                        ObjectType::Exchange,
                        &[
                            (Property::Name, Value::Text(&name)),
                            (Property::RoutingKey, Value::Text(&key)),
                        ],
                    );
                    if cache.keys >= CACHED_KEYS {
                        cache.keys = 0;
                        for verdict in cache.exchanges.values_mut() {
                            if let Verdict::ByKey(k) = verdict {
                                k.clear();
                            }
                        }
                    }
                    if let Some(Verdict::ByKey(keys)) = cache.exchanges.get_mut(exchange) {
                        keys.insert(Bytes::copy_from_slice(routing_key), d);
                        cache.keys += 1;
                    }
                    d
                }
            },
            None => return Ok(()),
        };
        if decision.allowed && !decision.logged {
            return Ok(());
        }
        let key = String::from_utf8_lossy(routing_key);
        self.verdict(
            decision,
            Action::Publish,
            ObjectType::Exchange,
            &[
                (Property::Name, Value::Text(&name)),
                (Property::RoutingKey, Value::Text(&key)),
            ],
        )
    }

    /// Counts a queue about to be created against its creator's quota. The charge goes into
    /// the queue's options; the slot frees when the queue is deleted.
    pub fn charge_queue(&self) -> Result<Option<QuotaCharge>, BrokerError> {
        let acl = self.acl.as_ref().map(|a| a.current());
        let limit = self.quota(acl.as_deref(), QuotaKind::Queues);
        if limit.is_none() {
            return Ok(None);
        }
        match self.counters.take_queue(&self.user, limit) {
            Ok(slot) => Ok(Some(Arc::new(slot))),
            Err(max) => {
                warn!(user = %self.user, peer = %self.peer, "queue refused: user has {max} queues (the limit)");
                Err(BrokerError::ResourceLimitExceeded(format!(
                    "user {} may have at most {max} queues",
                    self.user
                )))
            }
        }
    }
}

/// Lookups name the nameless default exchange `amq.default`, so rules can name it.
fn exchange_name(name: &[u8]) -> std::borrow::Cow<'_, str> {
    if name.is_empty() {
        std::borrow::Cow::Borrowed(DEFAULT_EXCHANGE_NAME)
    } else {
        String::from_utf8_lossy(name)
    }
}

fn describe(props: &[(Property, Value<'_>)]) -> String {
    let mut out = String::new();
    // Unlimited limits say nothing worth reading.
    for (p, v) in props.iter().filter(|(_, v)| *v != Value::Number(None)) {
        if !out.is_empty() {
            out.push(' ');
        }
        let _ = match v {
            Value::Text(t) => write!(out, "{p}={t}"),
            Value::Bool(b) => write!(out, "{p}={b}"),
            Value::Number(Some(n)) => write!(out, "{p}={n}"),
            Value::Number(None) => write!(out, "{p}=unlimited"),
            Value::Host(h) => write!(out, "{p}={h}"),
        };
    }
    out
}

/// The properties of a queue declare (create or access), as qpidd supplies them: optional
/// ones (alternate exchange, policy type) only when given, limits always (unlimited counts).
pub fn queue_props<'a>(name: &'a str, opts: &'a QueueOptions) -> Props<'a> {
    let mut props = vec![
        (Property::Name, Value::Text(name)),
        (Property::Durable, Value::Bool(opts.durable)),
        (Property::AutoDelete, Value::Bool(opts.auto_delete)),
        (
            Property::Exclusive,
            Value::Bool(opts.exclusive_owner.is_some()),
        ),
    ];
    if let Some(alt) = opts.alternate_exchange.as_deref().filter(|a| !a.is_empty()) {
        props.push((Property::Alternate, Value::Text(alt)));
    }
    if let Some(policy) = opts
        .arguments
        .get("qpid.policy_type")
        .or_else(|| opts.arguments.get("x-overflow"))
        .and_then(|v| v.as_str())
    {
        props.push((Property::PolicyType, Value::Text(policy)));
    }
    let size = Value::Number(opts.limits.max_size);
    let count = Value::Number(opts.limits.max_count);
    props.extend([
        (Property::QueueMaxSizeLowerLimit, size),
        (Property::QueueMaxSizeUpperLimit, size),
        (Property::QueueMaxCountLowerLimit, count),
        (Property::QueueMaxCountUpperLimit, count),
    ]);
    props
}

/// The properties of an existing queue, for delete.
pub fn existing_queue_props<'a>(name: &'a str, q: &'a ferry_core::Queue) -> Props<'a> {
    let mut props = vec![
        (Property::Name, Value::Text(name)),
        (Property::Durable, Value::Bool(q.is_durable())),
        (Property::AutoDelete, Value::Bool(q.is_auto_delete())),
        (Property::Exclusive, Value::Bool(q.is_exclusive())),
    ];
    if let Some(alt) = q.alternate_exchange_name() {
        props.push((Property::Alternate, Value::Text(alt)));
    }
    props
}

/// The properties of an exchange declare (create or access).
pub fn exchange_props<'a>(name: &'a str, kind: &'a str, opts: &'a ExchangeOptions) -> Props<'a> {
    let mut props = vec![
        (Property::Name, Value::Text(exchange_text(name))),
        (Property::Type, Value::Text(kind)),
        (Property::Durable, Value::Bool(opts.durable)),
        (Property::AutoDelete, Value::Bool(opts.auto_delete)),
    ];
    if let Some(alt) = opts.alternate_exchange.as_deref().filter(|a| !a.is_empty()) {
        props.push((Property::Alternate, Value::Text(alt)));
    }
    props
}

/// The properties of an existing exchange, for delete.
pub fn existing_exchange_props(info: &ferry_core::ExchangeInfo) -> Props<'_> {
    let mut props = vec![
        (Property::Name, Value::Text(exchange_text(&info.name))),
        (Property::Type, Value::Text(info.kind.name())),
        (Property::Durable, Value::Bool(info.durable)),
    ];
    if let Some(alt) = info.alternate_exchange.as_deref().filter(|a| !a.is_empty()) {
        props.push((Property::Alternate, Value::Text(alt)));
    }
    props
}

/// Name only (queries, purge, consume).
pub fn named(name: &str) -> Props<'_> {
    vec![(Property::Name, Value::Text(name))]
}

/// An exchange by name only (queries; the default exchange is `amq.default`).
pub fn exchange_named(name: &str) -> Props<'_> {
    vec![(Property::Name, Value::Text(exchange_text(name)))]
}

fn exchange_text(name: &str) -> &str {
    if name.is_empty() {
        DEFAULT_EXCHANGE_NAME
    } else {
        name
    }
}

/// A binding's properties (bind, unbind, exchange.bound): exchange name, queue, key.
pub fn binding_props<'a>(
    exchange: &'a str,
    queue: Option<&'a str>,
    key: Option<&'a str>,
) -> Props<'a> {
    let mut props = vec![(Property::Name, Value::Text(exchange_text(exchange)))];
    if let Some(q) = queue {
        props.push((Property::QueueName, Value::Text(q)));
    }
    if let Some(k) = key {
        props.push((Property::RoutingKey, Value::Text(k)));
    }
    props
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Settings and live state of a server, as connections see them.
    struct Setup {
        config: ServerConfig,
        state: ServerState,
    }

    fn with_acl(acl: &str, config: ServerConfig) -> Setup {
        let (rules, _) = ferry_acl::parse(acl).unwrap();
        let acl = Arc::new(SharedAcl::with_rules("test.acl", rules));
        Setup {
            config,
            state: ServerState::new(Some(acl)),
        }
    }

    fn config(acl: &str) -> Setup {
        with_acl(acl, ServerConfig::default())
    }

    fn without_acl(config: ServerConfig) -> Setup {
        Setup {
            config,
            state: ServerState::default(),
        }
    }

    fn access(s: &Setup) -> ClientAccess {
        ClientAccess::new(&s.config, &s.state, peer())
    }

    fn peer() -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], 5000))
    }

    fn admitted(setup: &Setup, user: &str) -> ClientAccess {
        let mut a = access(setup);
        a.admit(user).unwrap();
        a
    }

    #[test]
    fn without_an_acl_everything_is_allowed_and_props_are_not_built() {
        let c = without_acl(ServerConfig::default());
        let a = admitted(&c, "bob");
        assert!(a
            .check(Action::Create, ObjectType::Queue, || unreachable!())
            .is_ok());
        let mut cache = PublishCache::default();
        let ex = Bytes::from_static(b"amq.topic");
        assert!(a.check_publish(&mut cache, &ex, &ex).is_ok());
        assert!(cache.exchanges.is_empty());
    }

    #[test]
    fn denials_name_the_request_and_user() {
        let c = config("acl allow bob create queue name=bob*\nacl deny all all\n");
        let a = admitted(&c, "bob");
        assert!(a
            .check(Action::Create, ObjectType::Queue, || named("bob-1"))
            .is_ok());
        let Denied(text) = a
            .check(Action::Create, ObjectType::Queue, || named("alice-1"))
            .unwrap_err();
        assert_eq!(
            text,
            "ACL denied create queue request from bob (name=alice-1)"
        );
    }

    #[test]
    fn publish_decisions_are_cached_per_exchange_or_key_and_follow_reloads() {
        let c = config(
            "acl allow bob publish exchange name=amq.topic routingkey=bob.#\n\
             acl allow bob publish exchange name=amq.default\n\
             acl deny all all\n",
        );
        let a = admitted(&c, "bob");
        let mut cache = PublishCache::default();
        let topic = Bytes::from_static(b"amq.topic");
        let default = Bytes::new();
        let key = |k: &'static str| Bytes::from_static(k.as_bytes());
        assert!(a.check_publish(&mut cache, &topic, &key("bob.x")).is_ok());
        assert!(a.check_publish(&mut cache, &topic, &key("eve.x")).is_err());
        assert!(a.check_publish(&mut cache, &default, &key("any")).is_ok());
        assert!(matches!(cache.exchanges.get(&topic), Some(Verdict::ByKey(k)) if k.len() == 2));
        assert!(matches!(
            cache.exchanges.get(&default),
            Some(Verdict::Fixed(_))
        ));
        // A reload replaces cached decisions.
        let (deny, _) = ferry_acl::parse("acl deny all all\n").unwrap();
        c.state.acl.as_ref().unwrap().replace(deny);
        assert!(a.check_publish(&mut cache, &default, &key("any")).is_err());
    }

    #[test]
    fn the_publish_cache_is_bounded_over_all_exchanges_and_holds_copies() {
        let c = config(
            "acl allow bob publish exchange name=ex* routingkey=bob.#\n\
             acl deny all all\n",
        );
        let a = admitted(&c, "bob");
        let mut cache = PublishCache::default();
        // Names sliced from a large read buffer, as the protocol layers pass them.
        let buffer = Bytes::from(vec![b'x'; 64 * 1024]);
        let within = |b: &Bytes| buffer.as_ptr_range().contains(&b.as_ptr());
        for e in 0..4 {
            for k in 0..CACHED_KEYS {
                let exchange = Bytes::from(format!("ex{e}"));
                let key = Bytes::from(format!("bob.{k}"));
                assert!(a.check_publish(&mut cache, &exchange, &key).is_ok());
            }
        }
        let cached: usize = cache
            .exchanges
            .values()
            .map(|v| match v {
                Verdict::ByKey(k) => k.len(),
                Verdict::Fixed(_) => 0,
            })
            .sum();
        assert!(cached <= CACHED_KEYS, "{cached} keys cached");
        let exchange = buffer.slice(0..2);
        let key = buffer.slice(2..10);
        assert!(a.check_publish(&mut cache, &exchange, &key).is_err());
        let (name, verdict) = cache.exchanges.get_key_value(&exchange).unwrap();
        assert!(!within(name), "the cache holds a slice of the read buffer");
        let Verdict::Fixed(_) = verdict else {
            panic!("exchange xx has no key-dependent rule");
        };
        let topic = Bytes::from_static(b"ex0");
        assert!(a.check_publish(&mut cache, &topic, &key).is_err());
        let Some(Verdict::ByKey(keys)) = cache.exchanges.get(&topic) else {
            panic!("ex0's decisions depend on the key");
        };
        let (cached_key, _) = keys.get_key_value(&key).unwrap();
        assert!(
            !within(cached_key),
            "the cache holds a slice of the read buffer"
        );
    }

    #[test]
    fn connections_are_refused_by_rule_and_by_per_user_limit() {
        let c = with_acl(
            "acl deny mallory create connection\nquota connections 1 carol\nacl allow all all\n",
            ServerConfig {
                connection_limit_per_user: 2,
                ..ServerConfig::default()
            },
        );
        let mut m = access(&c);
        assert!(m
            .admit("mallory")
            .unwrap_err()
            .contains("ACL denied connection"));
        let b1 = admitted(&c, "bob");
        let _b2 = admitted(&c, "bob");
        let mut b3 = access(&c);
        assert!(b3.admit("bob").unwrap_err().contains("2 connections"));
        drop(b1);
        assert!(
            b3.admit("bob").is_ok(),
            "a slot frees when a connection ends"
        );
        let _c1 = admitted(&c, "carol");
        assert!(access(&c).admit("carol").is_err(), "ACL quota wins");
        assert_eq!(c.state.counters.user_connections("bob"), 2);
    }

    #[test]
    fn per_ip_slots_count_and_free() {
        let counters = Arc::new(ClientCounters::default());
        let ip = IpAddr::from([192, 0, 2, 1]);
        let a = counters.take_ip(ip, 2).unwrap();
        let _b = counters.take_ip(ip, 2).unwrap();
        assert!(counters.take_ip(ip, 2).is_none());
        assert!(counters.take_ip(IpAddr::from([192, 0, 2, 2]), 2).is_some());
        drop(a);
        assert!(counters.take_ip(ip, 2).is_some());
        assert!(counters.take_ip(ip, 0).is_some(), "0 is unlimited");
    }

    #[test]
    fn queue_quota_charges_free_when_dropped() {
        let c = without_acl(ServerConfig {
            max_queues_per_user: 1,
            ..ServerConfig::default()
        });
        let a = admitted(&c, "bob");
        let first = a.charge_queue().unwrap().expect("counted");
        assert!(matches!(
            a.charge_queue(),
            Err(BrokerError::ResourceLimitExceeded(_))
        ));
        drop(first);
        assert!(a.charge_queue().unwrap().is_some());
        // Every name that ever made a queue costs nothing once its queues are gone.
        let charges: Vec<_> = (0..100)
            .map(|i| admitted(&c, &format!("user{i}")).charge_queue().unwrap())
            .collect();
        assert_eq!(c.state.counters.users_with_queues(), 100);
        drop(charges);
        assert_eq!(c.state.counters.users_with_queues(), 0);
        let unlimited = admitted(&without_acl(ServerConfig::default()), "bob");
        assert!(unlimited.charge_queue().unwrap().is_none());
    }
}
