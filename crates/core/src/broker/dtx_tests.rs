//! Distributed transactions through the broker: branches' work applied at commit as one,
//! undone at rollback, on failure and on timeout; the dtx class's refusals.

use bytes::Bytes;

use super::*;
use crate::dtx::{DtxError, DtxWork, XaOutcome, Xid};
use crate::message::now_ms;
use crate::message::Message;
use crate::queue::QueueOptions;
use crate::transaction::Settlement;

fn broker() -> Arc<Broker> {
    let b = Broker::new(BrokerConfig::default());
    for q in ["a", "b"] {
        b.declare_queue(q, QueueOptions::default(), false, 1)
            .unwrap();
    }
    b
}

fn xid(n: &str) -> Xid {
    Xid {
        format: 0,
        global: Bytes::copy_from_slice(n.as_bytes()),
        branch: Bytes::from_static(b"1"),
    }
}

fn msg(queue: &str, body: &'static str) -> Message {
    Message::new("", queue.to_owned(), Bytes::from_static(body.as_bytes()))
}

fn depth(b: &Broker, queue: &str) -> u64 {
    b.queue(queue).unwrap().message_count()
}

/// Starts `x` and, under it, moves the head of `a` to `b` (qpid-python's "swap"): the
/// head is acquired and its accept staged, a copy's publish staged.
fn swap(b: &Broker, x: &Xid) -> DtxWork {
    let work = b.dtx().start(x, false, b.transaction()).unwrap();
    assert_eq!(b.dtx().timeout(x), Ok(60), "the default timeout");
    let a = b.queue("a").unwrap();
    let got = a.get().expect("a message on a");
    let mut w = work.lock();
    w.settle(a.clone(), got.position, got.message, Settlement::Accept);
    w.publish(b.default_exchange().clone(), msg("b", "moved"));
    drop(w);
    work
}

#[test]
fn one_phase_commit_applies_the_work_and_forgets_the_branch() {
    let b = broker();
    b.publish(b.default_exchange(), msg("a", "m")).unwrap();
    let x = xid("x");
    swap(&b, &x);
    assert_eq!(
        (depth(&b, "a"), depth(&b, "b")),
        (0, 0),
        "acquired, not yet moved"
    );
    assert_eq!(b.dtx().end(&x, false), XaOutcome::Ok);
    let (outcome, commit) = b.dtx_commit(&x, true).unwrap();
    assert_eq!(outcome, XaOutcome::Ok);
    assert_eq!(commit.map(|c| (c.routed, c.settled)), Some((vec![1], 1)));
    assert_eq!((depth(&b, "a"), depth(&b, "b")), (0, 1));
    assert!(b.dtx().is_empty());
    // Forgotten: the xid may be used again.
    assert!(b.dtx().start(&x, false, b.transaction()).is_ok());
}

#[test]
fn two_phase_commit_and_rollback() {
    let b = broker();
    for _ in 0..2 {
        b.publish(b.default_exchange(), msg("a", "m")).unwrap();
    }
    let (x, y) = (xid("x"), xid("y"));
    swap(&b, &x);
    b.dtx().end(&x, false);
    swap(&b, &y);
    b.dtx().end(&y, false);
    assert_eq!(b.dtx_prepare(&x).map(|(o, _)| o), Ok(XaOutcome::Ok));
    assert_eq!(b.dtx_prepare(&y).map(|(o, _)| o), Ok(XaOutcome::Ok));
    assert_eq!(b.dtx().recover(), vec![x.clone(), y.clone()]);
    assert!(matches!(b.dtx_commit(&x, true), Err(DtxError::Prepared(_))));
    assert_eq!(b.dtx_commit(&x, false).unwrap().0, XaOutcome::Ok);
    assert_eq!(b.dtx().rollback(&y), Ok(XaOutcome::Ok));
    // y's message is back on a, redelivered; x's moved to b.
    assert_eq!((depth(&b, "a"), depth(&b, "b")), (1, 1));
    let back = b.queue("a").unwrap().get().unwrap();
    assert!(back.redelivered);
    assert!(b.dtx().recover().is_empty());
}

#[test]
fn joined_sessions_commit_as_one() {
    let b = broker();
    b.publish(b.default_exchange(), msg("a", "m")).unwrap();
    let x = xid("x");
    swap(&b, &x);
    let other = b.dtx().start(&x, true, b.transaction()).unwrap();
    let y = xid("y");
    b.dtx().start(&y, false, b.transaction()).unwrap();
    b.dtx().end(&y, false);
    b.dtx_prepare(&y).unwrap();
    assert!(
        matches!(
            b.dtx().start(&y, true, b.transaction()),
            Err(DtxError::Prepared(_))
        ),
        "no work joins a prepared branch"
    );
    other
        .lock()
        .publish(b.default_exchange().clone(), msg("a", "joined"));
    b.dtx().end(&x, false);
    assert!(matches!(
        b.dtx_prepare(&x).map(|(o, _)| o),
        Err(DtxError::StillAssociated(_))
    ));
    assert!(matches!(
        b.dtx().rollback(&x),
        Err(DtxError::StillAssociated(_))
    ));
    b.dtx().end(&x, false);
    let (_, commit) = b.dtx_commit(&x, true).unwrap();
    assert_eq!(commit.unwrap().routed, vec![1, 1]);
    assert_eq!((depth(&b, "a"), depth(&b, "b")), (1, 1));
}

#[test]
fn joining_over_and_over_keeps_only_work_that_matters() {
    let b = broker();
    let x = xid("x");
    let first = b.dtx().start(&x, false, b.transaction()).unwrap();
    for _ in 0..1000 {
        let joined = b.dtx().start(&x, true, b.transaction()).unwrap();
        drop(joined);
        b.dtx().end(&x, false);
    }
    let staged = b.dtx().start(&x, true, b.transaction()).unwrap();
    staged
        .lock()
        .publish(b.default_exchange().clone(), msg("b", "kept"));
    drop(staged);
    b.dtx().end(&x, false);
    drop(first);
    b.dtx().end(&x, false);
    assert_eq!(
        b.dtx().work_count(&x),
        Some(1),
        "only the work with something staged"
    );
    let (_, commit) = b.dtx_commit(&x, true).unwrap();
    assert_eq!(commit.unwrap().routed, vec![1]);
}

#[test]
fn a_failed_association_dooms_the_branch() {
    let b = broker();
    b.publish(b.default_exchange(), msg("a", "m")).unwrap();
    let x = xid("x");
    swap(&b, &x);
    assert_eq!(b.dtx().end(&x, true), XaOutcome::RolledBack);
    assert_eq!(b.dtx_prepare(&x).map(|(o, _)| o), Ok(XaOutcome::RolledBack));
    assert_eq!((depth(&b, "a"), depth(&b, "b")), (1, 0), "undone at once");
    assert!(b.queue("a").unwrap().get().is_some(), "and available again");
    assert_eq!(b.dtx().rollback(&x), Ok(XaOutcome::Ok));
    assert!(b.dtx().is_empty());
}

/// Milliseconds since the epoch, `seconds` from now.
fn in_secs(seconds: u64) -> u64 {
    now_ms() + seconds * 1000
}

#[test]
fn a_timeout_undoes_the_work_while_sessions_still_hold_it() {
    let b = broker();
    b.publish(b.default_exchange(), msg("a", "m")).unwrap();
    let x = xid("x");
    let work = swap(&b, &x);
    let first = b.dtx().expire_due(now_ms()).expect("the default deadline");
    assert!(first > in_secs(59) && first <= in_secs(60));
    b.dtx().set_timeout(&x, 2).unwrap();
    assert_eq!(b.dtx().timeout(&x), Ok(2));
    // Not yet due: nothing happens.
    let due = b.dtx().expire_due(now_ms()).expect("the new deadline");
    assert!(due <= in_secs(2));
    assert_eq!(b.dtx().live(&x), XaOutcome::Ok);
    let forget = b
        .dtx()
        .expire_due(due)
        .expect("timed out, remembered for a while");
    assert!(forget >= due + crate::dtx::FORGET_AFTER);
    assert_eq!((depth(&b, "a"), depth(&b, "b")), (1, 0));
    assert!(work.lock().is_empty());
    assert_eq!(b.dtx().live(&x), XaOutcome::TimedOut);
    assert_eq!(b.dtx().end(&x, false), XaOutcome::TimedOut);
    assert_eq!(b.dtx().rollback(&x), Ok(XaOutcome::TimedOut));
    // Never completed: forgotten once no session holds it, and not before.
    let z = xid("z");
    let work = b.dtx().start(&z, false, b.transaction()).unwrap();
    let forget = b.dtx().expire_due(in_secs(61)).unwrap();
    // Staged after the timeout, by the session still associated.
    b.publish(b.default_exchange(), msg("a", "late")).unwrap();
    let a = b.queue("a").unwrap();
    let got = a.get().unwrap();
    work.lock()
        .settle(a.clone(), got.position, got.message, Settlement::Accept);
    assert_eq!(a.unsettled_count(), 1);
    assert_eq!(
        b.dtx().expire_due(forget),
        Some(forget + crate::dtx::FORGET_AFTER)
    );
    assert_eq!(b.dtx().live(&z), XaOutcome::TimedOut, "still held: kept");
    assert_eq!(b.dtx().end(&z, false), XaOutcome::TimedOut);
    assert_eq!(
        b.dtx().expire_due(forget),
        Some(forget + crate::dtx::FORGET_AFTER)
    );
    assert_eq!(b.dtx().expire_due(forget + crate::dtx::FORGET_AFTER), None);
    assert_eq!(
        (a.unsettled_count(), a.message_count()),
        (0, 2),
        "released when forgotten"
    );
    assert!(
        matches!(b.dtx().rollback(&z), Err(DtxError::Unknown(_))),
        "forgotten"
    );
    // A timed-out branch may be completed before its sessions end.
    let y = xid("y");
    b.dtx().start(&y, false, b.transaction()).unwrap();
    b.dtx().expire_due(in_secs(61));
    assert_eq!(b.dtx_commit(&y, true).unwrap().0, XaOutcome::TimedOut);
    assert_eq!(
        b.dtx().end(&y, false),
        XaOutcome::TimedOut,
        "gone: it timed out"
    );
}

#[test]
fn a_prepared_branch_does_not_time_out_and_0_is_no_timeout() {
    let b = broker();
    let (x, y) = (xid("x"), xid("y"));
    b.dtx().start(&x, false, b.transaction()).unwrap();
    b.dtx().end(&x, false);
    b.dtx_prepare(&x).unwrap();
    b.dtx().start(&y, false, b.transaction()).unwrap();
    b.dtx().set_timeout(&y, 0).unwrap();
    assert_eq!(b.dtx().expire_due(in_secs(7200)), None);
    assert_eq!(b.dtx_commit(&x, false).unwrap().0, XaOutcome::Ok);
    assert_eq!(b.dtx().live(&y), XaOutcome::Ok);
}

#[tokio::test]
async fn an_earlier_deadline_wakes_the_housekeeping_task() {
    let b = broker();
    let x = xid("x");
    let wait = |ms| {
        tokio::time::timeout(
            std::time::Duration::from_millis(ms),
            b.queue_expiry_changed(),
        )
    };
    b.dtx().start(&x, false, b.transaction()).unwrap();
    wait(1000).await.expect("the first deadline wakes it");
    b.dtx().set_timeout(&x, 120).unwrap();
    assert!(wait(100).await.is_err(), "a later one does not");
    b.dtx().set_timeout(&x, 1).unwrap();
    wait(5000).await.expect("an earlier one does");
}

#[test]
fn refusals() {
    let b = broker();
    let (x, unknown) = (xid("x"), xid("nobody"));
    b.dtx().start(&x, false, b.transaction()).unwrap();
    assert!(matches!(
        b.dtx().start(&x, false, b.transaction()),
        Err(DtxError::AlreadyKnown(_))
    ));
    assert!(matches!(
        b.dtx().start(&unknown, true, b.transaction()),
        Err(DtxError::Unknown(_))
    ));
    assert!(matches!(
        b.dtx_prepare(&unknown).map(|(o, _)| o),
        Err(DtxError::Unknown(_))
    ));
    assert!(matches!(
        b.dtx_commit(&unknown, true),
        Err(DtxError::Unknown(_))
    ));
    assert!(matches!(
        b.dtx().rollback(&unknown),
        Err(DtxError::Unknown(_))
    ));
    assert!(matches!(
        b.dtx().timeout(&unknown),
        Err(DtxError::Unknown(_))
    ));
    assert!(matches!(
        b.dtx().forget(&unknown),
        Err(DtxError::Unknown(_))
    ));
    assert!(matches!(b.dtx().forget(&x), Err(DtxError::NotHeuristic(_))));
    assert!(matches!(
        b.dtx().set_timeout(&x, 3601),
        Err(DtxError::TimeoutTooLong {
            given: 3601,
            max: 3600
        })
    ));
    assert!(matches!(
        b.dtx_commit(&x, false),
        Err(DtxError::StillAssociated(_))
    ));
    b.dtx().end(&x, false);
    assert!(matches!(
        b.dtx_commit(&x, false),
        Err(DtxError::NotPrepared(_))
    ));
    assert_eq!(b.dtx().set_timeout(&x, 0), Ok(()));
    for i in 1..crate::dtx::MAX_BRANCHES {
        b.dtx()
            .start(&xid(&i.to_string()), false, b.transaction())
            .unwrap();
    }
    assert_eq!(
        b.dtx()
            .start(&xid("one too many"), false, b.transaction())
            .unwrap_err(),
        DtxError::TooMany(crate::dtx::MAX_BRANCHES)
    );
}

/// A broker over a journal that records calls, with durable queues "a" and "b" and a
/// persistent message on "a".
fn journaled() -> (Arc<Broker>, Arc<crate::journal::testing::MemoryJournal>) {
    let j = crate::journal::testing::MemoryJournal::new();
    let b = Broker::with_journal(BrokerConfig::default(), j.clone());
    let durable = QueueOptions {
        durable: true,
        ..QueueOptions::default()
    };
    for q in ["a", "b"] {
        b.declare_queue(q, durable.clone(), false, 1).unwrap();
    }
    let mut m = crate::MessageParts::new("", "a", Bytes::from_static(b"m"));
    m.persistent = true;
    b.publish(b.default_exchange(), Message::from(m)).unwrap();
    (b, j)
}

#[test]
fn a_prepare_journals_the_branch_as_one_transaction_that_its_outcome_closes() {
    use crate::journal::testing::Call;
    for commit in [true, false] {
        let (b, j) = journaled();
        let (a, q_b) = (b.queue("a").unwrap(), b.queue("b").unwrap());
        let (a_id, b_id) = (a.store_id().unwrap(), q_b.store_id().unwrap());
        let x = xid("x");
        let work = b.dtx().start(&x, false, b.transaction()).unwrap();
        let got = a.get().expect("the message");
        let consumed = got.message.store_id().unwrap();
        {
            let mut w = work.lock();
            w.settle(a.clone(), got.position, got.message, Settlement::Accept);
            let mut moved = crate::MessageParts::new("", "b", Bytes::from_static(b"moved"));
            moved.persistent = true;
            w.publish(b.default_exchange().clone(), Message::from(moved));
        }
        drop(work);
        b.dtx().end(&x, false);
        j.take();
        let (outcome, point) = b.dtx_prepare(&x).unwrap();
        assert_eq!(outcome, XaOutcome::Ok);
        assert!(point.is_some(), "the prepare waits for the journal");
        let calls = j.take();
        let [Call::InTx(t, enqueue), Call::InTx(t2, dequeue), Call::PrepareTx(t3, encoded)] =
            &calls[..]
        else {
            panic!("expected the publish, the dequeue and the prepare: {calls:?}");
        };
        assert!(matches!(&**enqueue, Call::Enqueue(_, qs) if qs == &[b_id]));
        assert_eq!(**dequeue, Call::Dequeue(a_id, vec![consumed]));
        assert_eq!((t, t2), (t3, t3), "one journal transaction");
        let branch = crate::dtx::JournaledBranch::decode(encoded).expect("a branch");
        assert_eq!((branch.xid, branch.rejected), (x.clone(), vec![]));
        assert_eq!(depth(&b, "b"), 0, "routed, not yet delivered");
        if commit {
            b.dtx_commit(&x, false).unwrap();
            assert_eq!(depth(&b, "b"), 1);
            assert!(
                j.take().contains(&Call::CommitTx(*t)),
                "the commit closes the prepared transaction"
            );
        } else {
            b.dtx().rollback(&x).unwrap();
            assert_eq!((depth(&b, "a"), depth(&b, "b")), (1, 0));
            assert_eq!(j.take(), [Call::AbortTx(*t)]);
        }
    }
}

#[test]
fn a_prepare_the_journal_refuses_rolls_the_branch_back() {
    use crate::journal::testing::Call;
    let (b, j) = journaled();
    let x = xid("x");
    swap(&b, &x);
    b.dtx().end(&x, false);
    j.refuse.store(true, std::sync::atomic::Ordering::Relaxed);
    assert_eq!(b.dtx_prepare(&x), Ok((XaOutcome::RolledBack, None)));
    assert!(b.dtx().is_empty(), "forgotten");
    assert_eq!(depth(&b, "a"), 1, "what it consumed is back");
    assert!(j.take().iter().any(|c| matches!(c, Call::AbortTx(_))));
}

#[test]
fn a_prepared_branch_the_journal_can_no_longer_commit_is_rolled_back_heuristically() {
    use crate::journal::testing::Call;
    let (b, j) = journaled();
    let x = xid("x");
    swap(&b, &x);
    b.dtx().end(&x, false);
    assert_eq!(b.dtx_prepare(&x).map(|(o, _)| o), Ok(XaOutcome::Ok));
    j.take();
    // A cluster node's leadership ended since the prepare: the replicated part is gone.
    j.lost_prepared
        .store(true, std::sync::atomic::Ordering::Relaxed);
    let (outcome, commit) = b.dtx_commit(&x, false).unwrap();
    assert_eq!(outcome, XaOutcome::HeuristicRollback);
    assert!(commit.is_none(), "nothing applied");
    assert_eq!(
        (depth(&b, "a"), depth(&b, "b")),
        (1, 0),
        "undone, not half done"
    );
    let calls = j.take();
    assert!(
        calls.iter().any(|c| matches!(c, Call::AbortTx(_)))
            && !calls.iter().any(|c| matches!(c, Call::CommitTx(_))),
        "{calls:?}"
    );
    // Known as heuristically completed until the transaction manager forgets it, as XA
    // has it: listed by recover, its outcome answered again, its xid not reusable.
    assert_eq!(b.dtx().recover(), std::slice::from_ref(&x));
    assert_eq!(
        b.dtx_commit(&x, false).unwrap().0,
        XaOutcome::HeuristicRollback
    );
    assert_eq!(b.dtx().rollback(&x), Ok(XaOutcome::HeuristicRollback));
    assert!(matches!(
        b.dtx().start(&x, false, b.transaction()),
        Err(DtxError::AlreadyKnown(_))
    ));
    assert_eq!(b.dtx().forget(&x), Ok(()));
    assert!(b.dtx().recover().is_empty());
    assert!(matches!(b.dtx().forget(&x), Err(DtxError::Unknown(_))));
    assert_eq!((depth(&b, "a"), depth(&b, "b")), (1, 0), "still undone");
}

#[test]
fn a_branch_whose_journal_held_part_of_it_elsewhere_cannot_commit_after_a_restart() {
    use crate::journal::testing::Call;
    for held_elsewhere in [false, true] {
        let (b, j) = journaled();
        let x = xid("x");
        swap(&b, &x);
        b.dtx().end(&x, false);
        // A cluster journal holds a replicated queue's part in memory until the commit.
        j.holds
            .store(held_elsewhere, std::sync::atomic::Ordering::Relaxed);
        j.take();
        assert_eq!(b.dtx_prepare(&x).map(|(o, _)| o), Ok(XaOutcome::Ok));
        let calls = j.take();
        let Some(Call::PrepareTx(t, record)) = calls.last() else {
            panic!("no prepare record: {calls:?}");
        };
        let branch = crate::dtx::JournaledBranch::decode(record).expect("a branch");
        assert_eq!(branch.held_elsewhere, held_elsewhere);
        // The restart: a new broker restores the branch from its prepare record.
        let (restarted, _) = journaled();
        restarted
            .restore_prepared(record, *t, Vec::new(), Vec::new())
            .expect("restored");
        let (outcome, commit) = restarted.dtx_commit(&x, false).unwrap();
        if held_elsewhere {
            assert_eq!(outcome, XaOutcome::HeuristicRollback);
            assert!(commit.is_none());
            assert_eq!(restarted.dtx().forget(&x), Ok(()));
        } else {
            assert_eq!(outcome, XaOutcome::Ok);
        }
        assert!(restarted.dtx().recover().is_empty());
    }
}
