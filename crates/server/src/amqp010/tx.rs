//! The 0-10 tx class: after tx.select, the session's transfers and message.accepts take
//! effect at tx.commit, through one core commit; tx.rollback discards them, and messages
//! whose accept was rolled back stay acquired by the session (the spec's rule: the client
//! releases them if it wants them redelivered). message.release and message.reject are not
//! transactional, as in the spec and qpidd. dtx is in `dtx.rs`.

use std::sync::Arc;

use ferry_amqp010::{ErrorCode, SequenceSet};
use ferry_core::{Exchange, Message, Settlement, Transaction};

use super::convert::Exception;
use super::outgoing::{Outgoing, Pending};
use super::session::{Env, Session};

/// What a transactional session has staged since its last commit or rollback.
pub struct SessionTx {
    core: Transaction,
    /// Transfers (our command ids) the client accepted inside the transaction.
    accepts: SequenceSet,
}

impl SessionTx {
    pub fn stage_publish(&mut self, exchange: Arc<Exchange>, message: Message) {
        self.core.publish(exchange, message);
    }

    /// Stages the accepted transfers still unsettled: the set a peer sends may span the
    /// whole id space, and what is staged must stay as small as what is outstanding. Staged
    /// by range, so an accept repeated over transfers already staged costs their ranges.
    pub fn stage_accepts(&mut self, outgoing: &Outgoing, transfers: &SequenceSet) {
        for &(lo, hi) in transfers.ranges() {
            for (first, last) in outgoing.pending_ranges(Pending::Settlement, lo, hi) {
                self.accepts.add_range(first as u32, last as u32);
            }
        }
    }
}

fn not_selected(what: &str) -> Exception {
    Exception::new(
        ErrorCode::IllegalState,
        format!("{what} on a session that has not selected transactions"),
    )
}

pub fn select(session: &mut Session, env: &Env) -> Result<(), Exception> {
    if session.tx.is_some() {
        return Err(Exception::new(
            ErrorCode::IllegalState,
            "tx.select on a session that is already transactional",
        ));
    }
    if session.dtx.is_some() {
        return Err(Exception::new(
            ErrorCode::CommandInvalid,
            "tx.select on a session that has selected distributed transactions",
        ));
    }
    session.tx = Some(Box::new(SessionTx {
        core: env.broker.transaction(),
        accepts: SequenceSet::new(),
    }));
    Ok(())
}

pub fn commit(session: &mut Session, env: &mut Env) -> Result<(), Exception> {
    let tx = session
        .tx
        .as_mut()
        .ok_or_else(|| not_selected("tx.commit"))?;
    let accepts = std::mem::take(&mut tx.accepts);
    for id in accepts.iter() {
        // Transfers released or rejected since their accept are no longer ours to accept.
        if let Some((queue, position, message, true)) = session.outgoing.settle(id) {
            tx.core.settle(queue, position, message, Settlement::Accept);
        }
    }
    session.outgoing.trim();
    let outcome = env.broker.commit(&mut tx.core);
    session.return_window_slots();
    match outcome.refused {
        // As for a plain transfer: the other queues got the message, the publisher learns
        // of the loss.
        Some(e) => Err(e.into()),
        None => {
            // Completed once everything the commit journaled is on stable storage.
            if let Some(point) = outcome.sync {
                session.needs_sync(point);
            }
            Ok(())
        }
    }
}

pub fn rollback(session: &mut Session) -> Result<(), Exception> {
    let tx = session
        .tx
        .as_mut()
        .ok_or_else(|| not_selected("tx.rollback"))?;
    tx.core.clear();
    tx.accepts = SequenceSet::new();
    Ok(())
}
