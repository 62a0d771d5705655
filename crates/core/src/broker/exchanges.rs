//! Declaring and deleting exchanges. Deleting one removes every binding it is the source or
//! the destination of, and lets go of it as a dead letter exchange; an exchange that is some
//! queue's or exchange's 0-10 alternate cannot be deleted.

use std::sync::Arc;

use super::registry::Registry;
use super::Broker;
use crate::error::BrokerError;
use crate::events::BrokerEvent;
use crate::exchange::{Exchange, ExchangeOptions};
use crate::exchange_kind::ExchangeKind;
use crate::journal::ExchangeDefinition;

impl Broker {
    /// Declares (or, with `passive`, looks up) an exchange. Redeclaring with another type is
    /// `NotAllowed`, as is a differing alternate exchange; other options of an existing exchange
    /// are ignored (0-10: durable and auto-delete are "sticky"). The default exchange can only
    /// be declared passively; `amq.*` names cannot be created, only redeclared identically.
    pub fn declare_exchange(
        &self,
        name: &str,
        kind: ExchangeKind,
        opts: ExchangeOptions,
        passive: bool,
    ) -> Result<Arc<Exchange>, BrokerError> {
        let mut reg = self.registry.write();
        if let Some(ex) = reg.exchanges.get(name) {
            if passive {
                return Ok(ex.clone());
            }
            if name.is_empty() {
                return Err(BrokerError::NotAllowed(
                    "the default exchange cannot be declared".into(),
                ));
            }
            if ex.kind() != kind {
                return Err(BrokerError::NotAllowed(format!(
                    "exchange {name} exists with type {}",
                    ex.kind().name()
                )));
            }
            if let Some(alt) = opts.alternate_exchange.as_deref().filter(|a| !a.is_empty()) {
                if ex.alternate().map(|a| a.name()) != Some(alt) {
                    return Err(BrokerError::NotAllowed(format!(
                        "exchange {name} exists with a different alternate exchange"
                    )));
                }
            }
            self.exchange_declared(ex, false);
            return Ok(ex.clone());
        }
        if passive {
            return Err(BrokerError::NotFound(format!(
                "exchange {name} does not exist"
            )));
        }
        if name.is_empty() || name.starts_with("amq.") {
            return Err(BrokerError::NotAllowed(format!(
                "exchange name {name:?} is reserved"
            )));
        }
        let ex = self.create_exchange(&mut reg, name, kind, opts, true)?;
        self.exchange_declared(&ex, true);
        Ok(ex)
    }

    fn exchange_declared(&self, ex: &Exchange, created: bool) {
        self.notify(|| {
            let info = ex.info();
            BrokerEvent::ExchangeDeclared {
                name: info.name,
                kind: info.kind,
                durable: info.durable,
                auto_delete: info.auto_delete,
                alternate_exchange: info.alternate_exchange,
                arguments: info.arguments,
                created,
            }
        });
    }

    pub(super) fn create_exchange(
        &self,
        reg: &mut Registry,
        name: &str,
        kind: ExchangeKind,
        opts: ExchangeOptions,
        record: bool,
    ) -> Result<Arc<Exchange>, BrokerError> {
        let alternate = reg.resolve_alternate(opts.alternate_exchange.as_deref())?;
        if let Some(journal) = self.journal.as_ref().filter(|_| record && opts.durable) {
            journal.declare_exchange(&ExchangeDefinition {
                name,
                kind,
                auto_delete: opts.auto_delete,
                alternate_exchange: alternate.as_ref().map(|a| a.name()),
                arguments: &opts.arguments,
                internal: opts.internal,
            })?;
        }
        let ex = Exchange::new(name.to_owned(), kind, &opts, alternate, false);
        reg.exchanges.insert(name.to_owned(), ex.clone());
        for q in self.dead_lettering_queues() {
            q.adopt_dead_letter_exchange(ex.clone());
        }
        Ok(ex)
    }

    pub fn delete_exchange(&self, name: &str, if_unused: bool) -> Result<(), BrokerError> {
        let mut reg = self.registry.write();
        let ex = reg.exchange(name)?.clone();
        if ex.is_builtin() {
            return Err(BrokerError::NotAllowed(format!(
                "exchange {name:?} is built in"
            )));
        }
        if if_unused && ex.binding_count() > 0 {
            return Err(BrokerError::PreconditionFailed(format!(
                "exchange {name} has bindings"
            )));
        }
        if let Some(user) = reg.alternate_users(&ex) {
            return Err(BrokerError::NotAllowed(format!(
                "exchange {name} is the alternate exchange of {user}"
            )));
        }
        self.unlink_exchange(&mut reg, &ex);
        Ok(())
    }

    /// Removes an exchange from the registry with every binding it is the source or the
    /// destination of; sources left without bindings that are auto-delete go too.
    pub(super) fn unlink_exchange(&self, reg: &mut Registry, ex: &Arc<Exchange>) {
        if let Some(journal) = self.journal.as_ref().filter(|_| ex.is_durable()) {
            journal.delete_exchange(ex.name());
        }
        if reg
            .exchanges
            .get(ex.name())
            .is_some_and(|e| Arc::ptr_eq(e, ex))
        {
            reg.exchanges.remove(ex.name());
            self.notify(|| BrokerEvent::ExchangeDeleted {
                name: ex.name().to_owned(),
            });
        }
        ex.mark_deleted();
        for q in self.dead_lettering_queues() {
            q.forget_dead_letter_exchange(&**ex);
        }
        let (queues, exchanges) = ex.clear();
        for (q, key) in queues {
            reg.remove_binding(&q, ex, &key);
        }
        for (dest, key) in exchanges {
            dest.remove_inbound(ex, &key);
        }
        for (source, key) in ex.take_inbound() {
            if let Some(source) = source.upgrade() {
                source.unbind_exchange(ex.id(), &key, None);
                self.auto_delete_exchange(reg, &source);
            }
        }
    }

    pub(super) fn auto_delete_exchange(&self, reg: &mut Registry, ex: &Arc<Exchange>) {
        if ex.auto_delete_due() && !ex.is_deleted() && reg.alternate_users(ex).is_none() {
            self.unlink_exchange(reg, ex);
        }
    }
}
