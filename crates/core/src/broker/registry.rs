//! The registry of exchanges and queues by name.

use std::collections::HashMap;
use std::sync::{Arc, Weak};

use crate::error::BrokerError;
use crate::exchange::Exchange;
use crate::id_hash::IdMap;
use crate::queue::Queue;

#[derive(Default)]
pub(super) struct Registry {
    pub(super) exchanges: HashMap<String, Arc<Exchange>>,
    pub(super) queues: HashMap<String, Arc<Queue>>,
    /// Each queue's explicit bindings (exchange, key), by queue id, so deleting a queue can
    /// remove them without scanning every exchange. Weak: an exchange's bindings already own
    /// the queue.
    pub(super) bindings: IdMap<Vec<(Weak<Exchange>, String)>>,
}

impl Registry {
    pub(super) fn add_binding(&mut self, queue: &Queue, exchange: &Arc<Exchange>, key: &str) {
        self.bindings
            .entry(queue.id())
            .or_default()
            .push((Arc::downgrade(exchange), key.to_owned()));
    }

    pub(super) fn remove_binding(&mut self, queue: &Queue, exchange: &Exchange, key: &str) {
        if let Some(list) = self.bindings.get_mut(&queue.id()) {
            list.retain(|(e, k)| !(k == key && std::ptr::eq(e.as_ptr(), exchange)));
            if list.is_empty() {
                self.bindings.remove(&queue.id());
            }
        }
    }

    pub(super) fn alternate_users(&self, ex: &Exchange) -> Option<String> {
        let is_it = |alt: Option<&Arc<Exchange>>| alt.is_some_and(|a| std::ptr::eq(&**a, ex));
        self.exchanges
            .values()
            .find(|e| is_it(e.alternate()))
            .map(|e| format!("exchange {}", e.name()))
            .or_else(|| {
                // A RabbitMQ dead letter exchange may be deleted; its queues then drop
                // dead letters until it is declared again.
                self.queues
                    .values()
                    .filter(|q| !q.is_dead_lettering())
                    .find(|q| is_it(q.alternate_exchange().as_ref()))
                    .map(|q| format!("queue {}", q.name()))
            })
    }

    pub(super) fn resolve_alternate(
        &self,
        name: Option<&str>,
    ) -> Result<Option<Arc<Exchange>>, BrokerError> {
        match name.filter(|n| !n.is_empty()) {
            None => Ok(None),
            Some(n) => self.exchanges.get(n).cloned().map(Some).ok_or_else(|| {
                BrokerError::NotFound(format!("alternate exchange {n} does not exist"))
            }),
        }
    }

    pub(super) fn exchange(&self, name: &str) -> Result<&Arc<Exchange>, BrokerError> {
        self.exchanges
            .get(name)
            .ok_or_else(|| BrokerError::NotFound(format!("exchange {name} does not exist")))
    }

    pub(super) fn queue(&self, name: &str) -> Result<&Arc<Queue>, BrokerError> {
        self.queues
            .get(name)
            .ok_or_else(|| BrokerError::NotFound(format!("queue {name} does not exist")))
    }
}
