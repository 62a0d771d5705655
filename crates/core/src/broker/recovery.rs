//! Recreating what the store recovered, before clients are served: the same paths as the
//! declares and binds, without journaling again.

use std::sync::Arc;

use super::queues::Restore;
use super::Broker;
use crate::error::BrokerError;
use crate::exchange::{BindingIdentity, Bound, Exchange, ExchangeOptions};
use crate::exchange_kind::ExchangeKind;
use crate::queue::{Queue, QueueOptions};
use crate::value::Arguments;

impl Broker {
    /// Recreates a durable exchange the store recovered, without journaling it again.
    pub fn restore_exchange(
        &self,
        name: &str,
        kind: ExchangeKind,
        opts: ExchangeOptions,
    ) -> Result<Arc<Exchange>, BrokerError> {
        let mut reg = self.registry.write();
        if reg.exchanges.contains_key(name) {
            return Err(BrokerError::PreconditionFailed(format!(
                "exchange {name} exists"
            )));
        }
        self.create_exchange(&mut reg, name, kind, opts, false)
    }

    /// Recreates a durable queue the store recovered under its store id `store_id`, without
    /// journaling it again. Put its messages back with [`Queue::restore`].
    pub fn restore_queue(
        &self,
        name: &str,
        opts: QueueOptions,
        store_id: u64,
    ) -> Result<Arc<Queue>, BrokerError> {
        let mut reg = self.registry.write();
        if reg.queues.contains_key(name) {
            return Err(BrokerError::PreconditionFailed(format!(
                "queue {name} exists"
            )));
        }
        self.create_queue(&mut reg, name, opts, Restore::Yes(store_id))
            .map(|(q, _)| q)
    }

    /// Recreates a binding the store recovered, without journaling it again. Whatever the
    /// bind that made it, the store keeps one record per binding it holds, so each is
    /// restored beside the others under its key.
    pub fn restore_binding(
        &self,
        queue: &str,
        exchange: &str,
        binding_key: &str,
        arguments: &Arguments,
    ) -> Result<(), BrokerError> {
        // Accepted when it was made; should it not be now, the binding is kept without.
        let filter = self.binding_filter(arguments).unwrap_or_else(|e| {
            tracing::warn!(queue, exchange, %e, "a recovered binding's filter is refused; bound without it");
            None
        });
        let mut reg = self.registry.write();
        let ex = reg.exchange(exchange)?.clone();
        let q = reg.queue(queue)?.clone();
        let bound = ex.bind(
            &q,
            binding_key,
            arguments,
            filter,
            BindingIdentity::KeyAndArguments,
        )?;
        if bound == Bound::NewKey {
            reg.add_binding(&q, &ex, binding_key);
        }
        Ok(())
    }

    /// Recreates an exchange-to-exchange binding the store recovered, without journaling it
    /// again.
    pub fn restore_exchange_binding(
        &self,
        destination: &str,
        source: &str,
        binding_key: &str,
        arguments: &Arguments,
    ) -> Result<(), BrokerError> {
        self.link_exchanges(destination, source, binding_key, arguments, false)
    }
}
