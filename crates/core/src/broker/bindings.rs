//! Bindings, queue-to-exchange and exchange-to-exchange: made and removed under the registry
//! lock, journaled when both ends are durable.

use std::sync::Arc;

use super::Broker;
use crate::error::BrokerError;
use crate::events::BrokerEvent;
use crate::exchange::{BindingIdentity, Bound, Exchange};
use crate::journal::Journal;
use crate::message::MessageFilter;
use crate::value::Arguments;

/// 0-10 exchange.bound result flags.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BoundResult {
    pub exchange_not_found: bool,
    pub queue_not_found: bool,
    pub queue_not_matched: bool,
    pub key_not_matched: bool,
    pub args_not_matched: bool,
}

impl Broker {
    /// Binds, as 0-10 does: idempotent for an existing (queue, exchange, key), whose
    /// arguments a bind replaces ([`BindingIdentity::Key`]). Headers bindings need a valid
    /// `x-match` (`all`, the default, or `any`).
    pub fn bind(
        &self,
        queue: &str,
        exchange: &str,
        binding_key: &str,
        arguments: &Arguments,
    ) -> Result<(), BrokerError> {
        self.bind_as(
            BindingIdentity::Key,
            queue,
            exchange,
            binding_key,
            arguments,
        )
    }

    /// Binds with the identity given: [`BindingIdentity::KeyAndArguments`] for 0-9-1,
    /// whose bindings under one key with other arguments are others.
    pub fn bind_as(
        &self,
        identity: BindingIdentity,
        queue: &str,
        exchange: &str,
        binding_key: &str,
        arguments: &Arguments,
    ) -> Result<(), BrokerError> {
        if exchange.is_empty() {
            return Err(BrokerError::NotAllowed(
                "the default exchange cannot be bound explicitly".into(),
            ));
        }
        let filter = self.binding_filter(arguments)?;
        let mut reg = self.registry.write();
        let ex = reg.exchange(exchange)?.clone();
        let q = reg.queue(queue)?.clone();
        ex.check_binding(binding_key, arguments)?;
        // A bind that changes nothing is not journaled again: its record would only take
        // room until compaction.
        let unchanged = ex.queue_bind_changes_nothing(&q, binding_key, arguments, identity);
        if let (Some(store), true, false) = (q.store(), ex.is_durable(), unchanged) {
            store
                .journal
                .bind(ex.name(), store.id, binding_key, arguments, identity)?;
        }
        let bound = ex.bind(&q, binding_key, arguments, filter, identity)?;
        if bound == Bound::NewKey {
            reg.add_binding(&q, &ex, binding_key);
        }
        if bound.added() {
            self.notify(|| BrokerEvent::Bound {
                exchange: exchange.to_owned(),
                queue: queue.to_owned(),
                key: binding_key.to_owned(),
                arguments: arguments.clone(),
            });
        }
        Ok(())
    }

    /// The filter a queue binding's arguments ask for (see [`super::BrokerConfig::binding_filters`]).
    pub(super) fn binding_filter(
        &self,
        arguments: &Arguments,
    ) -> Result<Option<Arc<dyn MessageFilter>>, BrokerError> {
        match &self.config.binding_filters {
            Some(make) if !arguments.is_empty() => {
                (make.0)(arguments).map_err(BrokerError::InvalidArgument)
            }
            _ => Ok(None),
        }
    }

    /// Binds exchange `destination` to exchange `source` (RabbitMQ's exchange.bind): what
    /// `source` routes under the binding goes on through `destination`'s bindings. Routing
    /// follows such bindings through any graph, cycles included, and delivers a message to
    /// each queue at most once per publish. The default exchange is neither a source nor a
    /// destination. As in RabbitMQ, the arguments are part of the binding's identity
    /// ([`BindingIdentity::KeyAndArguments`]): binding again under the key with others adds
    /// a binding.
    pub fn bind_exchange(
        &self,
        destination: &str,
        source: &str,
        binding_key: &str,
        arguments: &Arguments,
    ) -> Result<(), BrokerError> {
        self.link_exchanges(destination, source, binding_key, arguments, true)
    }

    pub(super) fn link_exchanges(
        &self,
        destination: &str,
        source: &str,
        binding_key: &str,
        arguments: &Arguments,
        record: bool,
    ) -> Result<(), BrokerError> {
        if destination.is_empty() || source.is_empty() {
            return Err(BrokerError::NotAllowed(
                "the default exchange cannot be bound explicitly".into(),
            ));
        }
        let reg = self.registry.write();
        let src = reg.exchange(source)?;
        let dst = reg.exchange(destination)?;
        src.check_binding(binding_key, arguments)?;
        let unchanged = src.exchange_bind_changes_nothing(dst, binding_key, arguments);
        if let Some(journal) = self.journal_for(src, dst).filter(|_| record && !unchanged) {
            journal.bind_exchange(destination, source, binding_key, arguments)?;
        }
        if src.bind_exchange(dst, binding_key, arguments)? == Bound::NewKey {
            dst.add_inbound(src, binding_key);
        }
        Ok(())
    }

    /// The journal, when a binding between these exchanges is durable (both are).
    fn journal_for(&self, source: &Exchange, destination: &Exchange) -> Option<&Arc<dyn Journal>> {
        self.journal
            .as_ref()
            .filter(|_| source.is_durable() && destination.is_durable())
    }

    /// Removes every exchange-to-exchange binding under the key; a missing binding is not
    /// an error. A source left without bindings goes if it is auto-delete.
    pub fn unbind_exchange(
        &self,
        destination: &str,
        source: &str,
        binding_key: &str,
    ) -> Result<(), BrokerError> {
        self.unlink_exchanges(destination, source, binding_key, None)
    }

    /// Removes the one exchange-to-exchange binding under the key with these arguments
    /// (compared as sets of entries), as RabbitMQ's exchange.unbind does; the key's others
    /// stay.
    pub fn unbind_exchange_with_arguments(
        &self,
        destination: &str,
        source: &str,
        binding_key: &str,
        arguments: &Arguments,
    ) -> Result<(), BrokerError> {
        self.unlink_exchanges(destination, source, binding_key, Some(arguments))
    }

    fn unlink_exchanges(
        &self,
        destination: &str,
        source: &str,
        binding_key: &str,
        only: Option<&Arguments>,
    ) -> Result<(), BrokerError> {
        if destination.is_empty() || source.is_empty() {
            return Err(BrokerError::NotAllowed(
                "the default exchange cannot be unbound".into(),
            ));
        }
        let mut reg = self.registry.write();
        let src = reg.exchange(source)?.clone();
        let dst = reg.exchange(destination)?.clone();
        if let Some(key_gone) = src.unbind_exchange(dst.id(), binding_key, only) {
            if key_gone {
                dst.remove_inbound(&src, binding_key);
            }
            if let Some(journal) = self.journal_for(&src, &dst) {
                journal.unbind_exchange(destination, source, binding_key, only);
            }
            self.auto_delete_exchange(&mut reg, &src);
        }
        Ok(())
    }

    /// Unbinds every binding of the queue under the key, as 0-10 does; unbinding a binding
    /// that does not exist is not an error (qpidd).
    pub fn unbind(
        &self,
        queue: &str,
        exchange: &str,
        binding_key: &str,
    ) -> Result<(), BrokerError> {
        self.unbind_only(queue, exchange, binding_key, None)
    }

    /// Unbinds the one binding of the queue under the key with these arguments (compared as
    /// sets of entries), as 0-9-1 does; the key's others stay. A binding that does not exist
    /// is not an error (RabbitMQ).
    pub fn unbind_with_arguments(
        &self,
        queue: &str,
        exchange: &str,
        binding_key: &str,
        arguments: &Arguments,
    ) -> Result<(), BrokerError> {
        self.unbind_only(queue, exchange, binding_key, Some(arguments))
    }

    fn unbind_only(
        &self,
        queue: &str,
        exchange: &str,
        binding_key: &str,
        only: Option<&Arguments>,
    ) -> Result<(), BrokerError> {
        if exchange.is_empty() {
            return Err(BrokerError::NotAllowed(
                "the default exchange cannot be unbound".into(),
            ));
        }
        let mut reg = self.registry.write();
        let ex = reg.exchange(exchange)?.clone();
        let q = reg.queue(queue)?.clone();
        if let Some(key_gone) = ex.unbind(q.id(), binding_key, only) {
            if key_gone {
                reg.remove_binding(&q, &ex, binding_key);
            }
            self.notify(|| BrokerEvent::Unbound {
                exchange: exchange.to_owned(),
                queue: queue.to_owned(),
                key: binding_key.to_owned(),
            });
            if let (Some(store), true) = (q.store(), ex.is_durable()) {
                store.journal.unbind(ex.name(), store.id, binding_key, only);
            }
            self.auto_delete_exchange(&mut reg, &ex);
        }
        Ok(())
    }

    /// 0-10 exchange.bound. Given criteria (`None` = not asked; empty arguments count as not
    /// asked) are first checked together; if no single binding satisfies them all, each
    /// criterion is reported separately, as qpidd does: the queue against any binding to it,
    /// the key and the arguments against any binding of the exchange.
    pub fn bound(
        &self,
        exchange: &str,
        queue: Option<&str>,
        binding_key: Option<&str>,
        arguments: Option<&Arguments>,
    ) -> BoundResult {
        let reg = self.registry.read();
        let q = queue.and_then(|n| reg.queues.get(n));
        let queue_not_found = queue.is_some() && q.is_none();
        let Some(ex) = reg.exchanges.get(exchange) else {
            return BoundResult {
                exchange_not_found: true,
                queue_not_found,
                ..BoundResult::default()
            };
        };
        if queue_not_found {
            return BoundResult {
                queue_not_found,
                ..BoundResult::default()
            };
        }
        let q = q.map(|q| &**q);
        let args = arguments.filter(|a| !a.is_empty());
        if ex.has_binding(q, binding_key, args) {
            return BoundResult::default();
        }
        BoundResult {
            queue_not_matched: q.is_some_and(|q| !ex.has_binding(Some(q), None, None)),
            key_not_matched: binding_key.is_some_and(|k| !ex.has_binding(None, Some(k), None)),
            args_not_matched: args.is_some_and(|a| !ex.has_binding(None, None, Some(a))),
            ..BoundResult::default()
        }
    }
}
