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
use tokio::sync::Notify;

mod journaled;

pub(crate) use journaled::JournaledBranch;

use crate::error::BrokerError;
use crate::journal::SyncPoint;
use crate::message::now_ms;
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
    /// xa-heurrb: a prepared branch that could not commit all its work was rolled back
    /// instead (see `Journal::can_commit`); it stays known until dtx.forget.
    HeuristicRollback,
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
    /// A one-phase commit, or a join, of a prepared branch.
    #[error("xid {0} has been prepared")]
    Prepared(String),
    #[error("xid {0} has not been heuristically completed")]
    NotHeuristic(String),
    #[error("timeout {given} exceeds the maximum {max}")]
    TimeoutTooLong { given: u32, max: u32 },
    #[error("too many transaction branches (the most is {0})")]
    TooMany(usize),
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
    /// When it times out, in milliseconds since the epoch; `None`: never.
    deadline: Option<u64>,
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

/// How long a timed-out branch is remembered, in milliseconds, once no session holds it.
pub const FORGET_AFTER: u64 = 30 * 60 * 1000;

/// The most branches the broker knows at once (a few hundred bytes each): clients that
/// start branches faster than they complete them meet a limit, not the memory alarm.
pub const MAX_BRANCHES: usize = 65_536;

/// The broker's transaction branches. Timeouts are kept as deadlines, which the broker's
/// housekeeping task enforces ([`DtxManager::expire_due`]): no timer per branch.
pub struct DtxManager {
    branches: Mutex<HashMap<Xid, Branch>>,
    /// Branches rolled back heuristically (`XaOutcome::HeuristicRollback`), oldest first:
    /// XA keeps them known (recover lists them, commit and rollback answer the outcome
    /// again) until the transaction manager forgets them. At most [`MAX_BRANCHES`]: past
    /// that the oldest is forgotten unasked.
    heuristic: Mutex<std::collections::VecDeque<Xid>>,
    timeouts: DtxTimeouts,
    /// The earliest deadline the housekeeping task knows of (`u64::MAX`: none); an earlier
    /// one wakes it through `deadline_changed`.
    earliest: AtomicU64,
    deadline_changed: Arc<Notify>,
}

pub(crate) fn name(xid: &Xid) -> String {
    format!(
        "{}:{}:{}",
        xid.format,
        String::from_utf8_lossy(&xid.global),
        String::from_utf8_lossy(&xid.branch)
    )
}

impl DtxManager {
    /// `deadline_changed` is notified when a branch's deadline comes before any the
    /// housekeeping task was told of.
    pub fn new(timeouts: DtxTimeouts, deadline_changed: Arc<Notify>) -> DtxManager {
        DtxManager {
            branches: Mutex::new(HashMap::new()),
            heuristic: Mutex::default(),
            timeouts,
            earliest: AtomicU64::new(u64::MAX),
            deadline_changed,
        }
    }

    /// The deadline `seconds` from now (`None` for 0), and the housekeeping task woken if
    /// it is the earliest.
    fn deadline(&self, seconds: u32) -> Option<u64> {
        if seconds == 0 {
            return None;
        }
        let at = now_ms().saturating_add(u64::from(seconds) * 1000);
        if self.earliest.fetch_min(at, Ordering::Relaxed) > at {
            self.deadline_changed.notify_one();
        }
        Some(at)
    }

    /// Associates a session with branch `xid`: a new branch (timing out after the default
    /// timeout), or with `join` an existing one. Returns the work the session stages into.
    pub fn start(&self, xid: &Xid, join: bool, work: Transaction) -> Result<DtxWork, DtxError> {
        if self.is_heuristic(xid) {
            return Err(DtxError::AlreadyKnown(name(xid)));
        }
        let work = Arc::new(Mutex::new(work));
        let mut branches = self.branches.lock();
        if join {
            let branch = branches
                .get_mut(xid)
                .ok_or_else(|| DtxError::Unknown(name(xid)))?;
            // Work added after the prepare would not be part of what was prepared.
            if branch.prepared {
                return Err(DtxError::Prepared(name(xid)));
            }
            branch.work.push(work.clone());
            branch.associated += 1;
            return Ok(work);
        }
        if branches.contains_key(xid) {
            return Err(DtxError::AlreadyKnown(name(xid)));
        }
        if branches.len() >= MAX_BRANCHES {
            return Err(DtxError::TooMany(MAX_BRANCHES));
        }
        let timeout = self.timeouts.default;
        branches.insert(
            xid.clone(),
            Branch {
                work: vec![work.clone()],
                associated: 1,
                prepared: false,
                doomed: None,
                timeout,
                deadline: self.deadline(timeout),
            },
        );
        Ok(work)
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
        // Work no session holds and nothing staged in it can go: a client joining one
        // branch over and over does not grow it.
        branch
            .work
            .retain(|w| Arc::strong_count(w) > 1 || !w.lock().is_empty());
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

    /// The first phase: the work of all the branch's sessions becomes one, which `durable`
    /// records (in the journal, for a restart to find in doubt) before the branch counts
    /// as prepared; the point it returns is when the prepare is durable. Work that cannot be
    /// recorded (a full store) is rolled back and the branch forgotten. A doomed branch's
    /// work is undone instead, and the branch stays known until rolled back.
    pub(crate) fn prepare(
        &self,
        xid: &Xid,
        mut all: Transaction,
        durable: impl FnOnce(&mut Transaction, &Xid) -> Result<Option<SyncPoint>, BrokerError>,
    ) -> Result<(XaOutcome, Option<SyncPoint>), DtxError> {
        let mut branches = self.branches.lock();
        let branch = Self::completable(&mut branches, xid)?;
        if let Some(outcome) = branch.doomed_outcome() {
            branch.undo();
            return Ok((outcome, None));
        }
        for w in &branch.work {
            all.absorb(&mut w.lock());
        }
        match durable(&mut all, xid) {
            Ok(point) => {
                branch.work = vec![Arc::new(Mutex::new(all))];
                branch.prepared = true;
                Ok((XaOutcome::Ok, point))
            }
            Err(e) => {
                tracing::warn!("dtx: cannot prepare {}: {e}; rolled back", name(xid));
                branches.remove(xid);
                all.undo();
                Ok((XaOutcome::RolledBack, None))
            }
        }
    }

    /// Restores a branch that a restart found prepared, with its work.
    pub(crate) fn restore_prepared(&self, xid: Xid, work: Transaction) {
        self.branches.lock().insert(
            xid,
            Branch {
                work: vec![Arc::new(Mutex::new(work))],
                associated: 0,
                prepared: true,
                doomed: None,
                timeout: self.timeouts.default,
                deadline: None,
            },
        );
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
        if self.is_heuristic(xid) {
            return Ok((XaOutcome::HeuristicRollback, None));
        }
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
        if self.is_heuristic(xid) {
            return Ok(XaOutcome::HeuristicRollback);
        }
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

    /// Forgets a heuristically completed branch (one a commit rolled back because part of
    /// its work was lost); any other known branch is refused.
    pub fn forget(&self, xid: &Xid) -> Result<(), DtxError> {
        {
            let mut heuristic = self.heuristic.lock();
            if let Some(at) = heuristic.iter().position(|x| x == xid) {
                heuristic.remove(at);
                return Ok(());
            }
        }
        match self.branches.lock().contains_key(xid) {
            true => Err(DtxError::NotHeuristic(name(xid))),
            false => Err(DtxError::Unknown(name(xid))),
        }
    }

    /// Keeps `xid` known as heuristically rolled back until it is forgotten.
    pub(crate) fn remember_heuristic(&self, xid: &Xid) {
        let mut heuristic = self.heuristic.lock();
        if heuristic.len() >= MAX_BRANCHES {
            heuristic.pop_front();
        }
        heuristic.push_back(xid.clone());
    }

    fn is_heuristic(&self, xid: &Xid) -> bool {
        self.heuristic.lock().contains(xid)
    }

    /// The prepared and the heuristically completed branches (dtx.recover's list).
    pub fn recover(&self) -> Vec<Xid> {
        let branches = self.branches.lock();
        let mut xids: Vec<Xid> = branches
            .iter()
            .filter(|(_, b)| b.prepared)
            .map(|(x, _)| x.clone())
            .chain(self.heuristic.lock().iter().cloned())
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

    /// Sets branch `xid`'s timeout, counted from now (0: none).
    pub fn set_timeout(&self, xid: &Xid, seconds: u32) -> Result<(), DtxError> {
        let max = self.timeouts.max;
        if max > 0 && seconds > max {
            return Err(DtxError::TimeoutTooLong {
                given: seconds,
                max,
            });
        }
        let mut branches = self.branches.lock();
        let branch = branches
            .get_mut(xid)
            .ok_or_else(|| DtxError::Unknown(name(xid)))?;
        branch.timeout = seconds;
        branch.deadline = self.deadline(seconds);
        Ok(())
    }

    /// Times out the branches whose deadline is `now` (milliseconds since the epoch) or
    /// earlier, unless prepared: their work is undone now (their sessions may still hold
    /// associations; what they stage later is undone at rollback). A timed-out branch is
    /// kept to answer xa-rbtimeout until completed, but no longer than [`FORGET_AFTER`]
    /// once no session holds it: a client that never completes its branches does not
    /// grow the broker without bound (qpidd keeps them until completed). Returns the
    /// earliest deadline left, for the housekeeping task to come back then.
    pub fn expire_due(&self, now: u64) -> Option<u64> {
        let mut branches = self.branches.lock();
        let mut next: Option<u64> = None;
        branches.retain(|_, branch| {
            let Some(at) = branch.deadline.filter(|_| !branch.prepared) else {
                return true;
            };
            if at > now {
                next = Some(next.map_or(at, |n| n.min(at)));
                return true;
            }
            if branch.doomed == Some(Doom::TimedOut) && branch.associated == 0 {
                // What its sessions staged after the timeout goes back too: accepted
                // messages would otherwise stay acquired for good.
                branch.undo();
                return false;
            }
            if branch.doomed != Some(Doom::TimedOut) {
                branch.doomed = Some(Doom::TimedOut);
                branch.undo();
            }
            let forget_at = now.saturating_add(FORGET_AFTER);
            branch.deadline = Some(forget_at);
            next = Some(next.map_or(forget_at, |n| n.min(forget_at)));
            true
        });
        self.earliest
            .store(next.unwrap_or(u64::MAX), Ordering::Relaxed);
        next
    }

    /// How many work entries branch `xid` keeps (tests).
    #[cfg(test)]
    pub(crate) fn work_count(&self, xid: &Xid) -> Option<usize> {
        self.branches.lock().get(xid).map(|b| b.work.len())
    }

    /// How many branches are known (for management and tests).
    pub fn len(&self) -> usize {
        self.branches.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
