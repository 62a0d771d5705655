//! The 0-10 dtx class: distributed (XA) transactions, over the core's branches
//! (`ferry_core::DtxManager`). After dtx.select, a session associated with a branch
//! (dtx.start) stages its transfers and accepts in the branch's work; dtx.end (or suspend)
//! lets go of it. Prepare, commit, rollback, recover and the timeouts need no select and
//! may come from any session. Error codes and XA results are qpidd's.

use ferry_amqp010::value::code;
use ferry_amqp010::{
    Array, DtxCommit, DtxEnd, DtxStart, ErrorCode, GetTimeoutResult, RecoverResult, SequenceSet,
    Struct32, Value, XaResult, XaStatus,
};
use ferry_core::{Broker, DtxError, DtxWork, Settlement, XaOutcome, Xid};

use super::commands::result_of;
use super::convert::Exception;
use super::outgoing::Pending;
use super::session::{Env, Session};

/// A dtx-selected session's associations.
#[derive(Default)]
pub struct SessionDtx {
    /// The branch the session works for now, and its work.
    active: Option<(Xid, DtxWork)>,
    /// Associations suspended (dtx.end with suspend), to resume.
    suspended: Vec<(Xid, DtxWork)>,
}

impl SessionDtx {
    /// The work transfers and accepts are staged in, while associated.
    pub fn work(&self) -> Option<&DtxWork> {
        self.active.as_ref().map(|(_, w)| w)
    }

    /// The session is gone: its associations end as failed, so their branches can only
    /// roll back (qpidd: an association "implicitly ended" by a session's close).
    pub fn fail_all(self, broker: &Broker) {
        for (xid, work) in self.active.into_iter().chain(self.suspended) {
            end_association(broker, &xid, &work, true);
        }
    }
}

type Outcome = Result<(), Exception>;

/// Suspended associations one session may hold (each keeps its branch from being
/// forgotten while the session lives).
const MAX_SUSPENDED: usize = 1024;

/// Ends an association with its branch. If the branch timed out, what the session staged
/// since is undone here: the branch may be gone (rolled back by another session, or
/// forgotten), and messages accepted into `work` would otherwise stay acquired for good.
fn end_association(broker: &Broker, xid: &Xid, work: &DtxWork, fail: bool) -> XaOutcome {
    let outcome = broker.dtx().end(xid, fail);
    if outcome == XaOutcome::TimedOut {
        work.lock().undo();
    }
    outcome
}

fn command_invalid(text: impl Into<String>) -> Exception {
    Exception::new(ErrorCode::CommandInvalid, text)
}

fn not_selected() -> Exception {
    command_invalid("session has not been selected for use with dtx")
}

fn xid_of(xid: Option<ferry_amqp010::Xid>) -> Result<Xid, Exception> {
    let xid = xid.ok_or_else(|| Exception::missing("xid"))?;
    Ok(Xid {
        format: xid.format.unwrap_or(0),
        global: xid.global_id.unwrap_or_default(),
        branch: xid.branch_id.unwrap_or_default(),
    })
}

fn to_wire(xid: &Xid) -> ferry_amqp010::Xid {
    ferry_amqp010::Xid {
        format: Some(xid.format),
        global_id: Some(xid.global.clone()),
        branch_id: Some(xid.branch.clone()),
    }
}

fn dtx_error(e: DtxError) -> Exception {
    let code = match &e {
        DtxError::Unknown(_) => ErrorCode::NotFound,
        DtxError::AlreadyKnown(_) => ErrorCode::NotAllowed,
        DtxError::StillAssociated(_)
        | DtxError::NotPrepared(_)
        | DtxError::Prepared(_)
        | DtxError::NotHeuristic(_) => ErrorCode::IllegalState,
        DtxError::TimeoutTooLong { .. } => ErrorCode::InvalidArgument,
        DtxError::TooMany(_) => ErrorCode::ResourceLimitExceeded,
    };
    Exception::new(code, e.to_string())
}

fn xa_result(session: &mut Session, env: &mut Env, id: u32, outcome: XaOutcome) -> Outcome {
    let status = match outcome {
        XaOutcome::Ok => XaStatus::XaOk,
        XaOutcome::RolledBack => XaStatus::XaRbrollback,
        XaOutcome::TimedOut => XaStatus::XaRbtimeout,
        XaOutcome::HeuristicRollback => XaStatus::XaHeurrb,
    };
    let result = XaResult {
        status: Some(status),
    };
    session.write_result(env, result_of(id, &result))
}

/// An association being resumed or suspended is kept (by `keep`) unless its branch timed
/// out meanwhile: then the association is over. Returns the branch's state.
fn keep_unless_timed_out(
    env: &Env,
    association: (Xid, DtxWork),
    keep: impl FnOnce((Xid, DtxWork)),
) -> XaOutcome {
    let outcome = env.broker.dtx().live(&association.0);
    match outcome {
        XaOutcome::TimedOut => {
            end_association(env.broker, &association.0, &association.1, false);
        }
        _ => keep(association),
    }
    outcome
}

pub fn select(session: &mut Session) -> Outcome {
    if session.tx.is_some() {
        return Err(command_invalid(
            "dtx.select on a session that has selected local transactions",
        ));
    }
    session.dtx.get_or_insert_with(Box::default);
    Ok(())
}

pub fn start(session: &mut Session, env: &mut Env, id: u32, c: DtxStart) -> Outcome {
    let dtx = session.dtx.as_mut().ok_or_else(not_selected)?;
    if c.join && c.resume {
        return Err(command_invalid("dtx.start with both join and resume"));
    }
    let xid = xid_of(c.xid)?;
    if dtx.active.is_some() {
        return Err(Exception::new(
            ErrorCode::IllegalState,
            "the session is associated with a transaction already",
        ));
    }
    let outcome = if c.resume {
        let at = dtx
            .suspended
            .iter()
            .position(|(x, _)| *x == xid)
            .ok_or_else(|| command_invalid("dtx.start resumes a xid not suspended here"))?;
        let association = dtx.suspended.swap_remove(at);
        keep_unless_timed_out(env, association, |a| dtx.active = Some(a))
    } else {
        let work = env
            .broker
            .dtx()
            .start(&xid, c.join, env.broker.transaction())
            .map_err(dtx_error)?;
        dtx.active = Some((xid, work));
        XaOutcome::Ok
    };
    xa_result(session, env, id, outcome)
}

pub fn end(session: &mut Session, env: &mut Env, id: u32, c: DtxEnd) -> Outcome {
    let dtx = session.dtx.as_mut().ok_or_else(not_selected)?;
    if c.suspend && c.fail {
        return Err(command_invalid("dtx.end with both suspend and fail"));
    }
    let xid = xid_of(c.xid)?;
    let (active, work) = match dtx.active.take() {
        Some((active, work)) if active == xid => (active, work),
        other => {
            dtx.active = other;
            return Err(Exception::new(
                ErrorCode::IllegalState,
                "xid not associated with this session",
            ));
        }
    };
    let outcome = if c.suspend {
        if dtx.suspended.len() >= MAX_SUSPENDED {
            dtx.active = Some((active, work));
            return Err(Exception::new(
                ErrorCode::ResourceLimitExceeded,
                format!("a session may suspend at most {MAX_SUSPENDED} associations"),
            ));
        }
        keep_unless_timed_out(env, (active, work), |a| dtx.suspended.push(a))
    } else {
        end_association(env.broker, &active, &work, c.fail)
    };
    xa_result(session, env, id, outcome)
}

/// Stages the accepted transfers in the association's work, taking them from the
/// session: the branch outlives it (its rollback puts them back on their queues).
pub fn stage_accepts(session: &mut Session, work: &DtxWork, transfers: &SequenceSet) {
    let mut staged = work.lock();
    for &(lo, hi) in transfers.ranges() {
        for id in session.outgoing.pending(Pending::Settlement, lo, hi) {
            if let Some((queue, position, message, true)) = session.outgoing.settle(id) {
                staged.settle(queue, position, message, Settlement::Accept);
            }
        }
    }
    drop(staged);
    session.outgoing.trim();
    session.return_window_slots();
}

pub fn prepare(
    session: &mut Session,
    env: &mut Env,
    id: u32,
    xid: Option<ferry_amqp010::Xid>,
) -> Outcome {
    let xid = xid_of(xid)?;
    let (outcome, sync) = env.broker.dtx_prepare(&xid).map_err(dtx_error)?;
    // Completed once the prepare is on stable storage: a restart then keeps it in doubt.
    if let Some(point) = sync {
        session.needs_sync(point);
    }
    xa_result(session, env, id, outcome)
}

pub fn commit(session: &mut Session, env: &mut Env, id: u32, c: DtxCommit) -> Outcome {
    let xid = xid_of(c.xid)?;
    let (outcome, commit) = env
        .broker
        .dtx_commit(&xid, c.one_phase)
        .map_err(dtx_error)?;
    if let Some(commit) = commit {
        // As for tx.commit: a queue at its limit refused a message the others took.
        if let Some(e) = commit.refused {
            return Err(e.into());
        }
        // Completed once everything the commit journaled is on stable storage.
        if let Some(point) = commit.sync {
            session.needs_sync(point);
        }
    }
    xa_result(session, env, id, outcome)
}

pub fn rollback(
    session: &mut Session,
    env: &mut Env,
    id: u32,
    xid: Option<ferry_amqp010::Xid>,
) -> Outcome {
    let xid = xid_of(xid)?;
    let outcome = env.broker.dtx().rollback(&xid).map_err(dtx_error)?;
    xa_result(session, env, id, outcome)
}

pub fn forget(env: &mut Env, xid: Option<ferry_amqp010::Xid>) -> Outcome {
    let xid = xid_of(xid)?;
    env.broker.dtx().forget(&xid).map_err(dtx_error)
}

pub fn recover(session: &mut Session, env: &mut Env, id: u32) -> Outcome {
    let mut in_doubt = Vec::new();
    for xid in env.broker.dtx().recover() {
        let s = Struct32::from_struct(&to_wire(&xid))
            .map_err(|e| Exception::new(ErrorCode::InternalError, e.to_string()))?;
        in_doubt.push(Value::Struct32(s));
    }
    let result = RecoverResult {
        in_doubt: Some(Array::new(code::STRUCT32, in_doubt)),
    };
    session.write_result(env, result_of(id, &result))
}

pub fn get_timeout(
    session: &mut Session,
    env: &mut Env,
    id: u32,
    xid: Option<ferry_amqp010::Xid>,
) -> Outcome {
    let xid = xid_of(xid)?;
    let timeout = env.broker.dtx().timeout(&xid).map_err(dtx_error)?;
    let result = GetTimeoutResult {
        timeout: Some(timeout),
    };
    session.write_result(env, result_of(id, &result))
}

pub fn set_timeout(
    env: &mut Env,
    xid: Option<ferry_amqp010::Xid>,
    timeout: Option<u32>,
) -> Outcome {
    let xid = xid_of(xid)?;
    env.broker
        .dtx()
        .set_timeout(&xid, timeout.unwrap_or(0))
        .map_err(dtx_error)
}
