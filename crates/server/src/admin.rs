//! What management (the HTTP API of `ferry-mgmt`) may do to a running server, checked as an
//! AMQP client's requests are: logins against the same users (guest from loopback only), the
//! same ACL for every change, queue arguments read as 0-9-1's queue.declare reads them, and
//! test messages built as a 0-9-1 publish builds them, so consumers of both protocols read
//! them alike.
//!
//! Management acts under an owner id of its own, which owns no session, queue or consumer.

mod users;

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use ferry_acl::{Action, ObjectType};
use ferry_amqp091::{BasicProperties, RawProperties};
use ferry_core::{
    now_ms, Arguments, BindingIdentity, Broker, BrokerError, ConnectionId, ExchangeKind,
    ExchangeOptions, OwnerId,
};

use crate::access::{self, ClientAccess, Denied, PublishCache};
use crate::amqp091::convert::{decode_properties, outgoing_properties, table_to_headers};
use crate::amqp091::error::Fault;
use crate::amqp091::{self, args};
use crate::auth::AuthService;
use crate::config::ServerConfig;
use crate::publish::{Encoding, Publish};
use crate::state::ServerState;

pub(crate) use users::close_connections_of;
pub use users::{record_of, UserChange, UserInfo};

/// Why a management request was refused; the HTTP layer picks the status from the variant.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AdminError {
    /// The ACL (or a rule such as reserved names) refused it.
    #[error("{0}")]
    Denied(String),
    #[error("{0}")]
    NotFound(String),
    /// Inequivalent redeclarations, bad arguments, failed preconditions, locked queues.
    #[error("{0}")]
    BadRequest(String),
    /// A resource alarm is in effect, or the store cannot take more.
    #[error("{0}")]
    Unavailable(String),
}

impl From<Denied> for AdminError {
    fn from(d: Denied) -> AdminError {
        AdminError::Denied(d.0)
    }
}

impl From<BrokerError> for AdminError {
    fn from(e: BrokerError) -> AdminError {
        match e {
            BrokerError::NotFound(t) => AdminError::NotFound(t),
            // Reserved names, built-in exchanges: 0-9-1 refuses these with access-refused.
            BrokerError::NotAllowed(t) => AdminError::Denied(t),
            BrokerError::ResourceLimitExceeded(t) => AdminError::Unavailable(t),
            BrokerError::ResourceLocked(t)
            | BrokerError::PreconditionFailed(t)
            | BrokerError::InvalidArgument(t)
            | BrokerError::NotImplemented(t) => AdminError::BadRequest(t),
        }
    }
}

impl From<Fault> for AdminError {
    fn from(f: Fault) -> AdminError {
        use ferry_amqp091::reply;
        match f.code {
            reply::NOT_FOUND => AdminError::NotFound(f.text),
            reply::ACCESS_REFUSED => AdminError::Denied(f.text),
            _ => AdminError::BadRequest(f.text),
        }
    }
}

/// The addresses ferryd serves AMQP on, as management reports them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Listeners {
    pub amqp: SocketAddr,
    pub amqps: Option<SocketAddr>,
}

/// A running server's management handle; cheap to clone.
#[derive(Clone)]
pub struct Admin {
    broker: Arc<Broker>,
    config: Arc<ServerConfig>,
    auth: Arc<AuthService>,
    state: Arc<ServerState>,
    owner: OwnerId,
    listeners: Listeners,
}

impl std::fmt::Debug for Admin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Admin")
            .field("listeners", &self.listeners)
            .finish_non_exhaustive()
    }
}

/// How `get` leaves the messages it took (RabbitMQ's `ackmode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GetMode {
    /// Back on the queue, marked redelivered.
    Requeue,
    /// Acknowledged: gone.
    Ack,
    /// Rejected without requeue: dead-lettered, or dropped.
    Reject,
}

/// A message taken by [`AdminUser::get`], with the 0-9-1 properties a 0-9-1 consumer would
/// have received (converted for messages published over 0-10).
#[derive(Debug, Clone)]
pub struct GotMessage {
    pub exchange: String,
    pub routing_key: String,
    pub redelivered: bool,
    /// Messages left on the queue after this one was taken.
    pub remaining: u64,
    pub properties: BasicProperties,
    pub body: Bytes,
}

impl Admin {
    pub(crate) fn new(
        broker: Arc<Broker>,
        config: Arc<ServerConfig>,
        auth: Arc<AuthService>,
        state: Arc<ServerState>,
        listeners: Listeners,
    ) -> Admin {
        let owner = broker.next_owner_id();
        Admin {
            broker,
            config,
            auth,
            state,
            owner,
            listeners,
        }
    }

    pub fn broker(&self) -> &Arc<Broker> {
        &self.broker
    }

    pub fn listeners(&self) -> Listeners {
        self.listeners
    }

    /// `--auth yes`: passwords are checked.
    pub fn auth_required(&self) -> bool {
        self.auth.required()
    }

    /// Every SASL mechanism with whether AMQP clients may log in with it (`--sasl-mechanisms`,
    /// `--auth`, `--allow-anonymous`, and for EXTERNAL client certificates over TLS).
    pub fn auth_mechanisms(&self) -> Vec<(&'static str, bool)> {
        self.auth
            .mechanism_availability(crate::auth::asks_for_certificates(&self.config))
    }

    /// Connections the server accepts at most (`--max-connections`).
    pub fn max_connections(&self) -> usize {
        self.config.max_connections
    }

    /// Whether an ACL file is in force.
    pub fn acl_enabled(&self) -> bool {
        self.state.acl.is_some()
    }

    /// Checks HTTP Basic credentials as an AMQP PLAIN login from `peer` would be checked;
    /// the user's name if they are good. Slow (and paused) when they are not.
    pub async fn login(&self, user: &str, password: &str, peer: SocketAddr) -> Option<String> {
        self.auth.check_password(user, password, peer).await
    }

    /// Acts for `user` (who logged in from `peer`): every change is checked by the ACL.
    pub fn as_user(&self, user: &str, peer: SocketAddr) -> AdminUser {
        AdminUser {
            admin: self.clone(),
            access: ClientAccess::for_user(&self.config, &self.state, peer, user),
            user: user.to_owned(),
        }
    }
}

/// One user's management requests.
pub struct AdminUser {
    admin: Admin,
    access: ClientAccess,
    user: String,
}

impl AdminUser {
    fn broker(&self) -> &Broker {
        &self.admin.broker
    }

    pub fn user(&self) -> &str {
        &self.user
    }

    /// Declares a queue as 0-9-1's queue.declare would (arguments such as `x-max-length`
    /// included); true if it was created. Redeclaring with other properties is refused.
    pub fn declare_queue(
        &self,
        name: &str,
        durable: bool,
        auto_delete: bool,
        arguments: Arguments,
    ) -> Result<bool, AdminError> {
        if name.is_empty() {
            return Err(AdminError::BadRequest(
                "queue name must not be empty".into(),
            ));
        }
        let mut opts = args::queue_options(&arguments)?;
        opts.durable = durable;
        opts.auto_delete = auto_delete;
        opts.arguments = arguments;
        match self.broker().queue(name) {
            None if name.starts_with("amq.") => Err(AdminError::Denied(format!(
                "queue name '{name}' contains reserved prefix 'amq.'"
            ))),
            Some(existing) => {
                self.access.check(Action::Access, ObjectType::Queue, || {
                    access::queue_props(name, &opts)
                })?;
                args::check_equivalent(&existing, &opts)?;
                Ok(false)
            }
            None => {
                self.access.check(Action::Create, ObjectType::Queue, || {
                    access::queue_props(name, &opts)
                })?;
                opts.quota = self.access.charge_queue()?;
                let (_, created) =
                    self.broker()
                        .declare_queue(name, opts, false, self.admin.owner)?;
                Ok(created)
            }
        }
    }

    /// Deletes a queue; returns how many messages it held.
    pub fn delete_queue(
        &self,
        name: &str,
        if_unused: bool,
        if_empty: bool,
    ) -> Result<u64, AdminError> {
        let q = self
            .broker()
            .queue(name)
            .ok_or_else(|| not_found("queue", name))?;
        self.access.check(Action::Delete, ObjectType::Queue, || {
            access::existing_queue_props(name, &q)
        })?;
        // An operator may delete a queue exclusive to some client (RabbitMQ's management
        // may too): the request acts as that queue's owner.
        let requester = q.owner().unwrap_or(self.admin.owner);
        Ok(self
            .broker()
            .delete_queue(name, if_unused, if_empty, requester)?)
    }

    /// Removes a queue's ready messages; returns how many.
    pub fn purge_queue(&self, name: &str) -> Result<u64, AdminError> {
        self.access
            .check(Action::Purge, ObjectType::Queue, || access::named(name))?;
        Ok(self.broker().purge_queue(name)?)
    }

    /// Declares an exchange as 0-9-1's exchange.declare would; true if it was created.
    pub fn declare_exchange(
        &self,
        name: &str,
        kind: &str,
        durable: bool,
        auto_delete: bool,
        internal: bool,
        arguments: Arguments,
    ) -> Result<bool, AdminError> {
        let kind_enum = ExchangeKind::from_name(kind)
            .ok_or_else(|| AdminError::BadRequest(format!("unknown exchange type '{kind}'")))?;
        let existing = self.broker().exchange_info(name);
        match &existing {
            Some(existing) => {
                let wanted = args::WantedExchange {
                    kind: kind_enum.name(),
                    durable,
                    auto_delete,
                    internal,
                    arguments: &arguments,
                };
                args::check_exchange_equivalent(existing, &wanted)?;
            }
            None if name.is_empty() || name.starts_with("amq.") => {
                return Err(AdminError::Denied(format!(
                    "exchange name '{name}' contains reserved prefix 'amq.'"
                )))
            }
            None => {}
        }
        let opts = ExchangeOptions {
            durable,
            auto_delete,
            internal,
            alternate_exchange: arguments
                .get("alternate-exchange")
                .and_then(|v| v.as_str())
                .map(str::to_owned),
            arguments,
        };
        let action = if existing.is_some() {
            Action::Access
        } else {
            Action::Create
        };
        self.access.check(action, ObjectType::Exchange, || {
            access::exchange_props(name, kind, &opts)
        })?;
        self.broker()
            .declare_exchange(name, kind_enum, opts, false)?;
        Ok(existing.is_none())
    }

    pub fn delete_exchange(&self, name: &str, if_unused: bool) -> Result<(), AdminError> {
        if name.is_empty() {
            return Err(AdminError::Denied(
                "the default exchange cannot be deleted".into(),
            ));
        }
        let info = self
            .broker()
            .exchange_info(name)
            .ok_or_else(|| not_found("exchange", name))?;
        self.access
            .check(Action::Delete, ObjectType::Exchange, || {
                access::existing_exchange_props(&info)
            })?;
        Ok(self.broker().delete_exchange(name, if_unused)?)
    }

    /// Binds queue `queue` to `exchange` under `key`, beside any binding under the key with
    /// other arguments (RabbitMQ's API, whose bindings are told apart by them).
    pub fn bind_queue(
        &self,
        exchange: &str,
        queue: &str,
        key: &str,
        arguments: &Arguments,
    ) -> Result<(), AdminError> {
        self.binding_check(Action::Bind, exchange, queue, key, false)?;
        let by_arguments = BindingIdentity::KeyAndArguments;
        Ok(self
            .broker()
            .bind_as(by_arguments, queue, exchange, key, arguments)?)
    }

    /// Removes the binding of `queue` to `exchange` under `key` with these arguments.
    pub fn unbind_queue(
        &self,
        exchange: &str,
        queue: &str,
        key: &str,
        arguments: &Arguments,
    ) -> Result<(), AdminError> {
        self.binding_check(Action::Unbind, exchange, queue, key, false)?;
        Ok(self
            .broker()
            .unbind_with_arguments(queue, exchange, key, arguments)?)
    }

    /// Binds exchange `destination` to exchange `source` (RabbitMQ's exchange-to-exchange
    /// bindings).
    pub fn bind_exchange(
        &self,
        source: &str,
        destination: &str,
        key: &str,
        arguments: &Arguments,
    ) -> Result<(), AdminError> {
        self.binding_check(Action::Bind, source, destination, key, true)?;
        Ok(self
            .broker()
            .bind_exchange(destination, source, key, arguments)?)
    }

    /// Removes the exchange-to-exchange binding under `key` with these arguments.
    pub fn unbind_exchange(
        &self,
        source: &str,
        destination: &str,
        key: &str,
        arguments: &Arguments,
    ) -> Result<(), AdminError> {
        self.binding_check(Action::Unbind, source, destination, key, true)?;
        Ok(self
            .broker()
            .unbind_exchange_with_arguments(destination, source, key, arguments)?)
    }

    /// Both ends exist and the ACL allows `action`; the ACL sees an exchange-to-exchange
    /// binding as a binding of the source whose `queuename` is the destination, as for 0-9-1.
    fn binding_check(
        &self,
        action: Action,
        source: &str,
        destination: &str,
        key: &str,
        to_exchange: bool,
    ) -> Result<(), AdminError> {
        if source.is_empty() || (to_exchange && destination.is_empty()) {
            return Err(AdminError::Denied(
                "operation not permitted on the default exchange".into(),
            ));
        }
        if self.broker().exchange(source).is_none() {
            return Err(not_found("exchange", source));
        }
        let found = if to_exchange {
            self.broker().exchange(destination).is_some()
        } else {
            self.broker().queue(destination).is_some()
        };
        if !found {
            let what = if to_exchange { "exchange" } else { "queue" };
            return Err(not_found(what, destination));
        }
        self.access.check(action, ObjectType::Exchange, || {
            access::binding_props(source, Some(destination), Some(key))
        })?;
        Ok(())
    }

    /// Publishes a message as a 0-9-1 client's basic.publish would (so 0-9-1 consumers get
    /// these properties as they are and 0-10 consumers their translation); true if some
    /// queue took it. Refused while a resource alarm holds publishers back.
    pub fn publish(
        &self,
        exchange: &str,
        routing_key: &str,
        properties: &BasicProperties,
        body: Bytes,
    ) -> Result<bool, AdminError> {
        let alarms = self.broker().alarms().raised();
        if !alarms.is_empty() {
            return Err(AdminError::Unavailable(format!(
                "publishing is paused: {} alarm in effect",
                alarms.join(", ")
            )));
        }
        let ex = if exchange.is_empty() {
            self.broker().default_exchange().clone()
        } else {
            self.broker()
                .exchange(exchange)
                .ok_or_else(|| not_found("exchange", exchange))?
        };
        // RabbitMQ's management answers every refusal of its publish (its channel closed
        // by the broker) with 400 and the broker's text, whatever the AMQP code was.
        amqp091::refuse_internal(&ex).map_err(|f| AdminError::BadRequest(f.text))?;
        let max = self.admin.config.max_message_size as u64;
        if body.len() as u64 > max {
            return Err(AdminError::BadRequest(
                amqp091::too_large(body.len() as u64, max).text,
            ));
        }
        let exchange_bytes = Bytes::copy_from_slice(exchange.as_bytes());
        let key_bytes = Bytes::copy_from_slice(routing_key.as_bytes());
        self.access
            .check_publish(&mut PublishCache::default(), &exchange_bytes, &key_bytes)?;
        let expires_at = match &properties.expiration {
            None => None,
            Some(e) => {
                let ms: u64 = e
                    .to_str()
                    .ok()
                    .and_then(|t| t.parse().ok())
                    .ok_or_else(|| AdminError::BadRequest("invalid expiration".into()))?;
                Some(now_ms().saturating_add(ms))
            }
        };
        let headers = if ex.needs_headers() {
            properties
                .headers
                .as_ref()
                .map(|h| Arc::new(table_to_headers(h)))
        } else {
            None
        };
        let mut header = RawProperties::encode(properties);
        if self.broker().stamps_receipt() {
            header = amqp091::stamped(&header);
        }
        let publish = Publish {
            exchange: exchange_bytes,
            routing_key: key_bytes,
            header: header.as_bytes().clone(),
            encoding: Encoding::Amqp091,
            body,
            persistent: properties.delivery_mode == Some(2),
            priority: properties.priority.unwrap_or(0),
            expires_at,
            headers,
        };
        let outcome = self.broker().publish(&ex, publish.into_message())?;
        Ok(outcome.queues > 0)
    }

    /// Takes up to `count` messages from a queue, as basic.get would, and settles them as
    /// `mode` says; requeued messages go back in their order, marked redelivered.
    pub fn get(
        &self,
        queue: &str,
        count: usize,
        mode: GetMode,
    ) -> Result<Vec<GotMessage>, AdminError> {
        self.access
            .check(Action::Consume, ObjectType::Queue, || access::named(queue))?;
        let q = self
            .broker()
            .queue(queue)
            .ok_or_else(|| not_found("queue", queue))?;
        q.check_access(self.admin.owner)?;
        let mut got = Vec::new();
        while got.len() < count {
            match q.get() {
                Some(g) => got.push(g),
                None => break,
            }
        }
        let messages = got
            .iter()
            .map(|g| GotMessage {
                exchange: String::from_utf8_lossy(g.message.exchange()).into_owned(),
                routing_key: String::from_utf8_lossy(g.message.routing_key()).into_owned(),
                redelivered: g.redelivered,
                remaining: g.remaining,
                properties: decode_properties(&outgoing_properties(
                    &g.message,
                    if q.reports_returns() { g.returns } else { 0 },
                ))
                .unwrap_or_default(),
                body: g.message.body_bytes(),
            })
            .collect();
        match mode {
            GetMode::Ack => {
                for g in &got {
                    q.accept(g.position);
                }
            }
            GetMode::Reject => {
                for g in got {
                    q.reject(g.position, g.message);
                }
            }
            GetMode::Requeue => {
                q.release(got.into_iter().map(|g| (g.position, g.message)), true);
            }
        }
        Ok(messages)
    }

    /// Asks a connection to close, telling its client `reason`. Another user's connection
    /// takes the `administrator` tag, as in RabbitMQ (whose `management` users may close
    /// only their own); with an ACL in force, which has no rule for this, a user may close
    /// only connections of their own whatever their tags.
    pub fn close_connection(&self, id: ConnectionId, reason: &str) -> Result<(), AdminError> {
        let connections = self.broker().connections();
        let c = connections
            .get(id)
            .ok_or_else(|| AdminError::NotFound(format!("no connection {id}")))?;
        let own = c.meta.user == self.user;
        if !own && !self.administrator() {
            return Err(AdminError::Denied(format!(
                "user {} may close only their own connections: another user's takes the \
                 administrator tag",
                self.user
            )));
        }
        if self.admin.acl_enabled() && !own {
            return Err(AdminError::Denied(format!(
                "user {} may close only their own connections",
                self.user
            )));
        }
        if !connections.close(id, reason) {
            return Err(AdminError::NotFound(format!("no connection {id}")));
        }
        Ok(())
    }
}

fn not_found(what: &str, name: &str) -> AdminError {
    AdminError::NotFound(format!("no {what} '{name}' in vhost '/'"))
}
