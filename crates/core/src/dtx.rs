//! Distributed (XA) transactions, AMQP 0-10's dtx class: work that sessions do under a
//! transaction branch id ([`Xid`]) is kept apart until a transaction manager completes the
//! branch, in one phase (commit) or two (prepare, then commit or rollback), maybe from
//! another session or connection. The rules are the dtx class's and qpidd's (its
//! `DtxManager` and `DtxWorkRecord`).
//!
//! A session associates with a branch (start, or start with join or resume) and stages its
//! transfers and accepts in a [`DtxWork`], a [`Transaction`] it shares with the branch; end
//! (or suspend) lets go of it. A branch is completed only once every association has ended.
//! Commit applies all its work as one core commit ([`crate::Broker::dtx_commit`]); rollback,
//! a failed association or a timeout undoes it ([`Transaction::undo`]): accepted messages
//! go back to their queues.
//!
//! Prepared branches are kept in memory only: a broker restart loses them (the transaction
//! manager sees them gone, as after a rollback).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::Mutex;

use crate::transaction::Transaction;

/// A transaction branch's id: XA's format id, global transaction id and branch qualifier.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Xid {
    pub format: u32,
    pub global: Bytes,
    pub branch: Bytes,
}

/// One association's work, shared by the session doing it and its branch (which undoes it
/// on a timeout while the session still holds it).
pub type DtxWork = Arc<Mutex<Transaction>>;

/// How a branch operation went, as XA reports it (0-10 `xa-result`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XaOutcome {
    /// xa-ok.
    Ok,
    /// xa-rbrollback: the branch was marked rollback-only (an association failed) and its
    /// work is undone.
    RolledBack,
    /// xa-rbtimeout: the branch timed out and its work is undone.
    TimedOut,
}

/// Why a branch operation was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DtxError {
    #[error("unknown xid {0}")]
    Unknown(String),
    #[error("xid {0} is already known")]
    AlreadyKnown(String),
    #[error("xid {0} is still associated with a session")]
    StillAssociated(String),
    #[error("xid {0} has not been prepared")]
    NotPrepared(String),
    #[error("xid {0} has been prepared: a one-phase commit is not allowed")]
    Prepared(String),
    #[error("xid {0} has not been heuristically completed")]
    NotHeuristic(String),
    #[error("timeout {given} exceeds the maximum {max}")]
    TimeoutTooLong { given: u32, max: u32 },
}

/// Branch timeouts, in seconds (qpidd's `--dtx-default-timeout` and `--dtx-max-timeout`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DtxTimeouts {
    /// A new branch's timeout; 0: none.
    pub default: u32,
    /// The most dtx.set-timeout may ask for; 0: no limit.
    pub max: u32,
}

impl Default for DtxTimeouts {
    fn default() -> DtxTimeouts {
        DtxTimeouts {
            default: 60,
            max: 3600,
        }
    }
}

/// A timer to arm: expire branch `xid` after `seconds` unless its timeout changed since
/// ([`DtxManager::expire`] compares `generation`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DtxTimer {
    pub xid: Xid,
    pub seconds: u32,
    pub generation: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Doom {
    Failed,
    TimedOut,
}

struct Branch {
    /// Every association's work, in the order they began.
    work: Vec<DtxWork>,
    /// Associations not yet ended (active or suspended).
    associated: usize,
    prepared: bool,
    doomed: Option<Doom>,
    timeout: u32,
    generation: u64,
}

impl Branch {
    fn undo(&self) {
        for w in &self.work {
            w.lock().undo();
        }
    }

    fn doomed_outcome(&self) -> Option<XaOutcome> {
        self.doomed.map(|d| match d {
            Doom::Failed => XaOutcome::RolledBack,
            Doom::TimedOut => XaOutcome::TimedOut,
        })
    }
}

/// The broker's transaction branches.
pub struct DtxManager {
    branches: Mutex<HashMap<Xid, Branch>>,
    timeouts: DtxTimeouts,
    next_generation: AtomicU64,
}

fn name(xid: &Xid) -> String {
    format!(
        "{}:{}:{}",
        xid.format,
        String::from_utf8_lossy(&xid.global),
        String::from_utf8_lossy(&xid.branch)
    )
}

impl DtxManager {
    pub fn new(timeouts: DtxTimeouts) -> DtxManager {
        DtxManager {
            branches: Mutex::new(HashMap::new()),
            timeouts,
            next_generation: AtomicU64::new(1),
        }
    }

    fn generation(&self) -> u64 {
        self.next_generation.fetch_add(1, Ordering::Relaxed)
    }

    /// Associates a session with branch `xid`: a new branch, or with `join` an existing
    /// one. Returns the work the session stages into, and the branch's timer to arm when
    /// it is new and has a timeout.
    pub fn start(
        &self,
        xid: &Xid,
        join: bool,
        work: Transaction,
    ) -> Result<(DtxWork, Option<DtxTimer>), DtxError> {
        let work = Arc::new(Mutex::new(work));
        let mut branches = self.branches.lock();
        if join {
            let branch = branches
                .get_mut(xid)
                .ok_or_else(|| DtxError::Unknown(name(xid)))?;
            branch.work.push(work.clone());
            branch.associated += 1;
            return Ok((work, None));
        }
        if branches.contains_key(xid) {
            return Err(DtxError::AlreadyKnown(name(xid)));
        }
        let generation = self.generation();
        let timeout = self.timeouts.default;
        branches.insert(
            xid.clone(),
            Branch {
                work: vec![work.clone()],
                associated: 1,
                prepared: false,
                doomed: None,
                timeout,
                generation,
            },
        );
        let timer = (timeout > 0).then(|| DtxTimer {
            xid: xid.clone(),
            seconds: timeout,
            generation,
        });
        Ok((work, timer))
    }

    /// Whether branch `xid` is still live for an association being suspended or resumed:
    /// [`XaOutcome::TimedOut`] if it timed out (or was rolled back since), else `Ok`.
    pub fn live(&self, xid: &Xid) -> XaOutcome {
        match self.branches.lock().get(xid) {
            Some(b) if b.doomed != Some(Doom::TimedOut) => XaOutcome::Ok,
            _ => XaOutcome::TimedOut,
        }
    }

    /// An association ends; with `fail`, the branch becomes rollback-only. A branch that
    /// is gone was timed out and rolled back.
    pub fn end(&self, xid: &Xid, fail: bool) -> XaOutcome {
        let mut branches = self.branches.lock();
        let Some(branch) = branches.get_mut(xid) else {
            return XaOutcome::TimedOut;
        };
        branch.associated = branch.associated.saturating_sub(1);
        if branch.doomed == Some(Doom::TimedOut) {
            return XaOutcome::TimedOut;
        }
        if fail {
            branch.doomed = Some(Doom::Failed);
            return XaOutcome::RolledBack;
        }
        XaOutcome::Ok
    }

    /// Checks what completing a branch needs: known, timed out (which wins), every
    /// association ended.
    fn completable<'a>(
        branches: &'a mut HashMap<Xid, Branch>,
        xid: &Xid,
    ) -> Result<&'a mut Branch, DtxError> {
        let branch = branches
            .get_mut(xid)
            .ok_or_else(|| DtxError::Unknown(name(xid)))?;
        if branch.associated > 0 && branch.doomed != Some(Doom::TimedOut) {
            return Err(DtxError::StillAssociated(name(xid)));
        }
        Ok(branch)
    }

    /// The first phase: the branch's work is kept until commit or rollback. A doomed
    /// branch's work is undone instead, and the branch stays known until rolled back.
    pub fn prepare(&self, xid: &Xid) -> Result<XaOutcome, DtxError> {
        let mut branches = self.branches.lock();
        let branch = Self::completable(&mut branches, xid)?;
        if let Some(outcome) = branch.doomed_outcome() {
            branch.undo();
            return Ok(outcome);
        }
        branch.prepared = true;
        Ok(XaOutcome::Ok)
    }

    /// Takes branch `xid` for commit: `one_phase` for one never prepared, else one that
    /// was. Returns the outcome and, unless the branch was doomed (its work undone), all
    /// its work moved into `all`, for [`crate::Broker::dtx_commit`] to apply.
    pub(crate) fn take_for_commit(
        &self,
        xid: &Xid,
        one_phase: bool,
        mut all: Transaction,
    ) -> Result<(XaOutcome, Option<Transaction>), DtxError> {
        let branch = {
            let mut branches = self.branches.lock();
            let branch = Self::completable(&mut branches, xid)?;
            if let Some(outcome) = branch.doomed_outcome() {
                branch.undo();
                branches.remove(xid);
                return Ok((outcome, None));
            }
            match (one_phase, branch.prepared) {
                (true, true) => return Err(DtxError::Prepared(name(xid))),
                (false, false) => return Err(DtxError::NotPrepared(name(xid))),
                _ => {}
            }
            branches.remove(xid).expect("checked above")
        };
        for w in &branch.work {
            all.absorb(&mut w.lock());
        }
        Ok((XaOutcome::Ok, Some(all)))
    }

    /// Rolls branch `xid` back, prepared or not, and forgets it.
    pub fn rollback(&self, xid: &Xid) -> Result<XaOutcome, DtxError> {
        let branch = {
            let mut branches = self.branches.lock();
            Self::completable(&mut branches, xid)?;
            branches.remove(xid).expect("checked above")
        };
        branch.undo();
        Ok(match branch.doomed {
            Some(Doom::TimedOut) => XaOutcome::TimedOut,
            _ => XaOutcome::Ok,
        })
    }

    /// Forgets a heuristically completed branch. Branches are never completed
    /// heuristically here, so a known one is refused.
    pub fn forget(&self, xid: &Xid) -> Result<(), DtxError> {
        match self.branches.lock().contains_key(xid) {
            true => Err(DtxError::NotHeuristic(name(xid))),
            false => Err(DtxError::Unknown(name(xid))),
        }
    }

    /// The prepared branches (dtx.recover's in-doubt list).
    pub fn recover(&self) -> Vec<Xid> {
        let branches = self.branches.lock();
        let mut xids: Vec<Xid> = branches
            .iter()
            .filter(|(_, b)| b.prepared)
            .map(|(x, _)| x.clone())
            .collect();
        xids.sort_by(|a, b| (&a.global, &a.branch).cmp(&(&b.global, &b.branch)));
        xids
    }

    /// Branch `xid`'s timeout in seconds (0: none).
    pub fn timeout(&self, xid: &Xid) -> Result<u32, DtxError> {
        let branches = self.branches.lock();
        let branch = branches
            .get(xid)
            .ok_or_else(|| DtxError::Unknown(name(xid)))?;
        Ok(branch.timeout)
    }

    /// Sets branch `xid`'s timeout, counted from now (0: none). Returns the timer to arm;
    /// timers armed before no longer expire the branch.
    pub fn set_timeout(&self, xid: &Xid, seconds: u32) -> Result<Option<DtxTimer>, DtxError> {
        let max = self.timeouts.max;
        if max > 0 && seconds > max {
            return Err(DtxError::TimeoutTooLong {
                given: seconds,
                max,
            });
        }
        let generation = self.generation();
        let mut branches = self.branches.lock();
        let branch = branches
            .get_mut(xid)
            .ok_or_else(|| DtxError::Unknown(name(xid)))?;
        branch.timeout = seconds;
        branch.generation = generation;
        Ok((seconds > 0).then(|| DtxTimer {
            xid: xid.clone(),
            seconds,
            generation,
        }))
    }

    /// A timer went off: unless the branch was prepared, completed or given another
    /// timeout since, it times out and its work is undone now (its sessions may still hold
    /// their associations; what they stage later is undone at rollback).
    pub fn expire(&self, timer: &DtxTimer) {
        let mut branches = self.branches.lock();
        let Some(branch) = branches.get_mut(&timer.xid) else {
            return;
        };
        if branch.generation != timer.generation || branch.prepared {
            return;
        }
        branch.doomed = Some(Doom::TimedOut);
        branch.undo();
    }

    /// How many branches are known (for management and tests).
    pub fn len(&self) -> usize {
        self.branches.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
