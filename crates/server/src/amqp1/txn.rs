//! Local transactions through the coordinator link: a declare makes a core `Transaction`;
//! transfers and dispositions carrying its id are staged in it; a discharge commits it with
//! `Broker::commit` (accepted once the commit is durable) or rolls it back.
//!
//! Deliveries whose settlement was staged stay acquired until the discharge, and count
//! against their link's unsettled cap until then (as 0-10's transactional accepts do); a
//! rollback puts them back on their queues as redelivered (a JMS session's rollback
//! redelivers what it had received).

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use ferry_amqp1::{
    condition, Accepted, Composite, Declare, Declared, DeliveryState, Discharge, Outcome, RawBody,
    RawMessage,
};
use ferry_core::{Broker, ConsumerId, Exchange, Message, Settlement, SyncPoint, Transaction};

use super::error::Fault;
use super::receiver::Complete;
use super::sender::release_records;
use super::session::{rejected, Ctx, Session};
use super::unsettled::OutRecord;

/// Transactions a session may have open at once: each holds what it stages until the
/// discharge (0-10 bounds a session's suspended dtx associations alike).
pub const MAX_OPEN: usize = 1024;

struct Txn {
    core: Transaction,
    /// Deliveries whose settlement is staged, to put back if the transaction rolls back.
    settled: Vec<OutRecord>,
    /// The consumer (sending link) of each staged delivery that still counts against its
    /// link's unsettled cap, one entry per delivery: freed by the discharge.
    held: Vec<ConsumerId>,
}

#[derive(Default)]
pub struct Txns {
    next: u32,
    open: HashMap<Bytes, Txn>,
}

fn unknown(id: &Bytes) -> Fault {
    Fault::new(
        condition::TRANSACTION_UNKNOWN_ID,
        format!("no transaction {id:?}"),
    )
}

impl Txns {
    pub fn is_empty(&self) -> bool {
        self.open.is_empty()
    }

    pub fn contains(&self, id: &Bytes) -> bool {
        self.open.contains_key(id)
    }

    fn declare(&mut self, broker: &Broker) -> Result<Bytes, Fault> {
        if self.open.len() >= MAX_OPEN {
            return Err(Fault::new(
                condition::RESOURCE_LIMIT_EXCEEDED,
                format!("{MAX_OPEN} transactions are open on this session"),
            ));
        }
        // After the counter wraps, an id may still be open: skip it rather than replace the
        // transaction (at most MAX_OPEN are).
        let id = loop {
            let id = Bytes::copy_from_slice(&self.next.to_be_bytes());
            self.next = self.next.wrapping_add(1);
            if !self.open.contains_key(&id) {
                break id;
            }
        };
        self.open.insert(
            id.clone(),
            Txn {
                core: broker.transaction(),
                settled: Vec::new(),
                held: Vec::new(),
            },
        );
        Ok(id)
    }

    pub fn stage_publish(
        &mut self,
        id: &Bytes,
        exchange: Arc<Exchange>,
        message: Message,
    ) -> Result<(), Fault> {
        let txn = self.open.get_mut(id).ok_or_else(|| unknown(id))?;
        txn.core.publish(exchange, message);
        Ok(())
    }

    /// Stages the client's outcome for deliveries we sent (`held`: the consumers of those
    /// that count against their link's cap until the discharge); an unknown transaction
    /// leaves them unsettled on their queues (released, counted as delivered).
    pub fn stage_settlements(
        &mut self,
        id: &Bytes,
        records: Vec<OutRecord>,
        held: Vec<ConsumerId>,
        outcome: Option<&Outcome>,
    ) {
        let Some(txn) = self.open.get_mut(id) else {
            release_records(records, true);
            return;
        };
        let how = match outcome {
            None | Some(Outcome::Accepted(_)) => Settlement::Accept,
            Some(Outcome::Rejected(_)) => Settlement::Reject,
            Some(Outcome::Modified(m)) if m.undeliverable_here == Some(true) => Settlement::Reject,
            Some(Outcome::Modified(m)) => Settlement::Release {
                redelivered: m.delivery_failed == Some(true),
            },
            Some(_) => Settlement::Release { redelivered: false },
        };
        txn.held.extend(held);
        for r in records {
            if r.acquired {
                txn.core
                    .settle(r.queue.clone(), r.position, r.message.clone(), how);
                txn.settled.push(r);
            }
        }
    }

    /// Ends transaction `id`: committed (the point its records need, if any) or rolled back.
    /// Whatever the outcome, the deliveries it held no longer count against their links'
    /// caps: their consumers are added to `freed`.
    fn discharge(
        &mut self,
        broker: &Broker,
        id: &Bytes,
        fail: bool,
        freed: &mut Vec<ConsumerId>,
    ) -> Result<Option<SyncPoint>, Fault> {
        let mut txn = self.open.remove(id).ok_or_else(|| unknown(id))?;
        freed.append(&mut txn.held);
        if fail {
            rollback(txn);
            return Ok(None);
        }
        let outcome = broker.commit(&mut txn.core);
        match outcome.refused {
            // As for 0-10: what could be applied was; the client learns of the loss.
            Some(e) => Err(Fault::new(condition::TRANSACTION_ROLLBACK, e.to_string())),
            None => Ok(outcome.sync),
        }
    }

    /// Rolls back every open transaction; gives the consumers of the deliveries they held.
    pub fn rollback_all(&mut self) -> Vec<ConsumerId> {
        let mut freed = Vec::new();
        for (_, mut txn) in self.open.drain() {
            freed.append(&mut txn.held);
            rollback(txn);
        }
        freed
    }
}

fn rollback(mut txn: Txn) {
    txn.core.clear();
    release_records(txn.settled, true);
}

/// A message to the coordinator: a declare or a discharge, as an amqp-value body.
pub fn on_message(session: &mut Session, ctx: &mut Ctx, d: Complete) {
    let body = RawMessage::parse(d.payload)
        .ok()
        .and_then(|m| match m.body() {
            RawBody::Value(v) => Some(v.clone()),
            _ => None,
        });
    let state = match body {
        Some(v) if Declare::decode(&mut v.clone()).is_ok() => {
            match session.txns.declare(ctx.broker) {
                Ok(txn_id) => DeliveryState::Declared(Declared { txn_id }),
                Err(f) => rejected(&f),
            }
        }
        Some(mut v) => match Discharge::decode(&mut v) {
            Ok(discharge) => {
                let fail = discharge.fail.unwrap_or(false);
                let mut freed = Vec::new();
                let discharged =
                    session
                        .txns
                        .discharge(ctx.broker, &discharge.txn_id, fail, &mut freed);
                session.settled_held(ctx, freed);
                match discharged {
                    Ok(point) => {
                        let durable = ctx.broker.journal().map(|j| j.durable());
                        let point = point.filter(|p| durable.is_none_or(|d| *p > d));
                        session.settle_incoming(
                            d.delivery_id,
                            DeliveryState::Accepted(Accepted {}),
                            point,
                        );
                        return;
                    }
                    Err(f) => rejected(&f),
                }
            }
            Err(e) => rejected(&Fault::new(
                e.condition(),
                format!("not a declare or discharge: {e}"),
            )),
        },
        None => rejected(&Fault::new(
            condition::DECODE_ERROR,
            "a coordinator message holds a declare or a discharge as its amqp-value",
        )),
    };
    session.settle_incoming(d.delivery_id, state, None);
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_core::BrokerConfig;

    #[test]
    fn a_wrapped_id_counter_skips_open_transactions() {
        let broker = Broker::new(BrokerConfig::default());
        let mut txns = Txns::default();
        let first = txns.declare(&broker).unwrap();
        // The counter comes round to the open transaction's id.
        txns.next = 0;
        let second = txns.declare(&broker).unwrap();
        assert_ne!(first, second);
        assert_eq!(txns.open.len(), 2);
    }
}
