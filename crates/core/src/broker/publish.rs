//! The publish and commit entry points.

use std::sync::Arc;

use super::Broker;
use crate::dtx::{DtxError, JournaledBranch, XaOutcome, Xid};
use crate::error::BrokerError;
use crate::exchange::Exchange;
use crate::journal::{JournalTx, SyncPoint};
use crate::message::{now_ms, Message};
use crate::queue::Queue;
use crate::route;
use crate::transaction::{CommitOutcome, Settlement, Transaction};

#[derive(Debug, Clone)]
pub struct PublishOutcome {
    /// Queues that stored the message; 0 means it was dropped as unroutable (after trying the
    /// alternate exchange) or expired on arrival.
    pub queues: usize,
    /// Set when the message was journaled (persistent, reaching a durable queue): a protocol
    /// layer confirms it to the publisher only once the journal is durable up to here.
    pub sync: Option<SyncPoint>,
    /// A queue the message reached that is over the broker's backlog hold (see
    /// `BrokerConfig::backlog_hold`): its consumers are falling behind this publisher.
    pub backlogged: Option<Arc<Queue>>,
}

impl Broker {
    /// Routes and enqueues. A message already expired is dropped (`queues: 0`). If some target
    /// queue refuses the message for its limit, the others still store it and the call returns
    /// `ResourceLimitExceeded` naming the first refusing queue, so the publisher learns of the
    /// loss even though delivery was partial.
    pub fn publish(
        &self,
        exchange: &Exchange,
        msg: Message,
    ) -> Result<PublishOutcome, BrokerError> {
        if exchange.is_deleted() {
            return Err(BrokerError::NotFound(format!(
                "exchange {} was deleted",
                exchange.name()
            )));
        }
        if msg.expires_at().is_some_and(|at| at <= now_ms()) {
            return Ok(PublishOutcome {
                queues: 0,
                sync: None,
                backlogged: None,
            });
        }
        let hold = self.config.backlog_hold.unwrap_or(u64::MAX);
        route::deliver(exchange, &msg, self.journal.as_ref(), hold).map(|r| PublishOutcome {
            queues: r.queues,
            sync: r.sync,
            backlogged: r.backlogged,
        })
    }

    /// A new, empty transaction whose staged publishes count in the broker's memory meter.
    pub fn transaction(&self) -> Transaction {
        Transaction::metered(self.memory.clone())
    }

    /// Commits a transaction: its settlements, then its publishes (routed now, in the order
    /// staged), applied with every queue involved locked at once, so a consumer never sees
    /// part of a commit without the rest; then a single dispatch per queue. Dead letters
    /// the commit causes (rejects, length-limit drops) are published after it. The
    /// transaction is left empty, ready for the next one.
    ///
    /// This is the one place a transaction takes effect: a durable store must make the
    /// commit's persistent enqueues and dequeues atomic in its journal here, before the
    /// effects become visible.
    pub fn commit(&self, tx: &mut Transaction) -> CommitOutcome {
        tx.apply(self.journal.as_ref())
    }

    /// Commits distributed transaction branch `xid` (see `DtxManager::take_for_commit`):
    /// the work of all its sessions as one [`Broker::commit`]. The [`CommitOutcome`] is
    /// there when the work was applied (its sync point says when it is durable).
    pub fn dtx_commit(
        &self,
        xid: &Xid,
        one_phase: bool,
    ) -> Result<(XaOutcome, Option<CommitOutcome>), DtxError> {
        // The commit runs outside the branches' lock: it locks queues.
        let (outcome, work) = self
            .dtx
            .take_for_commit(xid, one_phase, self.transaction())?;
        match work {
            Some(mut all) if all.commit_lost() => {
                tracing::warn!(
                    "dtx: {} lost part of its prepared work (held by a cluster leadership that ended, or before a restart); rolled back",
                    crate::dtx::name(xid)
                );
                all.undo();
                self.dtx.remember_heuristic(xid);
                Ok((XaOutcome::HeuristicRollback, None))
            }
            work => Ok((outcome, work.map(|mut all| self.commit(&mut all)))),
        }
    }

    /// Prepares distributed transaction branch `xid` (see `DtxManager::prepare`): with a
    /// journal, its work is routed and recorded so that a restart finds it in doubt. The
    /// point is when the prepare is durable: complete it then.
    pub fn dtx_prepare(&self, xid: &Xid) -> Result<(XaOutcome, Option<SyncPoint>), DtxError> {
        self.dtx
            .prepare(xid, self.transaction(), |work, xid| match &self.journal {
                Some(journal) => work.prepare(journal, |rejected, held_elsewhere| {
                    let xid = xid.clone();
                    JournaledBranch {
                        xid,
                        rejected,
                        held_elsewhere,
                    }
                    .encode()
                }),
                None => Ok(None),
            })
    }

    /// Restores a prepared branch that recovery found in the journal (`branch` as its
    /// prepare record keeps it, `tx` the journal's name for its transaction): `routed` are
    /// its publishes, with the queues each goes to on commit; `held` the messages (by store
    /// id) it dequeues on commit, which it now holds acquired. Without a journal there is
    /// nothing to restore into.
    pub fn restore_prepared(
        &self,
        branch: &[u8],
        tx: u64,
        routed: Vec<(Vec<Arc<Queue>>, Message)>,
        held: Vec<(Arc<Queue>, Vec<u64>)>,
    ) -> Result<(), BrokerError> {
        let Some(journal) = self.journal.clone() else {
            return Err(BrokerError::PreconditionFailed(
                "no journal to restore into".into(),
            ));
        };
        let branch = JournaledBranch::decode(branch)
            .ok_or_else(|| BrokerError::InvalidArgument("malformed prepare record".into()))?;
        let mut work = self.transaction();
        for (queues, message) in routed {
            work.publish_routed(queues, message);
        }
        for (queue, ids) in held {
            for (position, message) in queue.acquire_stored(&ids) {
                let how = match message.store_id() {
                    Some(id) if branch.rejected.contains(&id) => Settlement::Reject,
                    _ => Settlement::Accept,
                };
                work.settle(queue.clone(), position, message, how);
            }
        }
        work.set_prepared(journal, Arc::new(JournalTx::named(tx)));
        if branch.held_elsewhere {
            // Its replicated part was held by the process that prepared it, and is gone:
            // a commit would apply the rest alone (see `Broker::dtx_commit`).
            work.mark_commit_lost();
        }
        self.dtx.restore_prepared(branch.xid, work);
        Ok(())
    }
}
