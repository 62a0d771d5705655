//! Prepared distributed transactions across restarts: in doubt until their outcome.

use ferry_core::{Settlement, XaOutcome, Xid};

use super::*;

fn xid(global: &str) -> Xid {
    Xid {
        format: 7,
        global: Bytes::copy_from_slice(global.as_bytes()),
        branch: Bytes::from_static(b"branch"),
    }
}

/// Queue "in" holding "work", and an empty queue "out".
fn setup(b: &Broker) {
    durable_queue(b, "in");
    durable_queue(b, "out");
    publish(b, "in", b"work".to_vec(), true);
}

/// A branch that consumes "work" from "in" and publishes "result" to "out", prepared and
/// durable.
fn prepare_branch(store: &Store, b: &Broker, x: &Xid) {
    let input = b.queue("in").unwrap();
    let work = b.dtx().start(x, false, b.transaction()).unwrap();
    let (position, message) = acquire_one(&input);
    {
        let mut w = work.lock();
        w.settle(input.clone(), position, message, Settlement::Accept);
        let mut result = MessageParts::new("", "out", Bytes::from_static(b"result"));
        result.persistent = true;
        w.publish(b.exchange("").unwrap(), Message::from(result));
    }
    drop(work);
    assert_eq!(b.dtx().end(x, false), XaOutcome::Ok);
    let (outcome, point) = b.dtx_prepare(x).unwrap();
    assert_eq!(outcome, XaOutcome::Ok);
    store.sync();
    assert!(store.durable() >= point.expect("the prepare is journaled"));
}

/// A first life of the broker that prepares the branch and stops (as if killed: the store
/// is closed, the branch never completed).
fn prepare_and_stop(dir: &TempDir, x: &Xid) {
    let (store, b, _) = start(dir, small());
    setup(&b);
    prepare_branch(&store, &b, x);
    store.close();
}

fn queued(b: &Broker, name: &str) -> Vec<Bytes> {
    bodies(&b.queue(name).unwrap())
}

const RESULT: &[u8] = b"result";
const WORK: &[u8] = b"work";

/// Restarts, checks the branch is back in doubt, holding "work" and "result" out of sight.
fn restart_in_doubt(dir: &TempDir, x: &Xid) -> (Arc<Store>, Arc<Broker>) {
    let (store, b, stats) = start(dir, small());
    assert_eq!(stats.transactions_in_doubt, 1);
    assert_eq!(stats.transactions_discarded, 0);
    assert_eq!(b.dtx().recover(), std::slice::from_ref(x));
    assert!(
        queued(&b, "in").is_empty(),
        "the branch holds what it consumed"
    );
    assert_eq!(b.queue("in").unwrap().unsettled_count(), 1);
    assert!(
        queued(&b, "out").is_empty(),
        "what it published waits for the commit"
    );
    (store, b)
}

/// Restarts and checks nothing is in doubt and the queues hold `input` and `output`.
fn restart_settled(dir: &TempDir, input: &[&[u8]], output: &[&[u8]]) {
    let (_s, b, stats) = start(dir, small());
    assert_eq!(stats.transactions_in_doubt, 0);
    assert!(b.dtx().recover().is_empty());
    assert_eq!(queued(&b, "in"), input);
    assert_eq!(queued(&b, "out"), output);
}

/// Commits (two-phase) or rolls back `x`.
fn complete(b: &Broker, x: &Xid, commit: bool) {
    if commit {
        b.dtx_commit(x, false).unwrap();
    } else {
        b.dtx().rollback(x).unwrap();
    }
}

/// [`restart_settled`] with what the outcome leaves: "result" on "out" after a commit,
/// "work" back on "in" after a rollback.
fn restart_after_outcome(dir: &TempDir, commit: bool) {
    if commit {
        restart_settled(dir, &[], &[RESULT]);
    } else {
        restart_settled(dir, &[WORK], &[]);
    }
}

#[test]
fn a_prepared_branch_is_in_doubt_after_a_restart_and_commits_there() {
    let dir = TempDir::new("dtx-commit");
    let x = xid("commit");
    prepare_and_stop(&dir, &x);
    {
        let (store, b) = restart_in_doubt(&dir, &x);
        let (outcome, commit) = b.dtx_commit(&x, false).unwrap();
        assert_eq!(outcome, XaOutcome::Ok);
        let point = commit
            .and_then(|c| c.sync)
            .expect("the commit is journaled");
        store.sync();
        assert!(store.durable() >= point);
        assert_eq!(queued(&b, "out"), [RESULT]);
        assert_eq!(b.queue("in").unwrap().unsettled_count(), 0);
        store.close();
    }
    restart_settled(&dir, &[], &[RESULT]);
}

#[test]
fn a_prepared_branch_rolled_back_after_a_restart_gives_back_what_it_consumed() {
    let dir = TempDir::new("dtx-rollback");
    let x = xid("rollback");
    prepare_and_stop(&dir, &x);
    {
        let (store, b) = restart_in_doubt(&dir, &x);
        assert_eq!(b.dtx().rollback(&x), Ok(XaOutcome::Ok));
        assert_eq!(queued(&b, "in"), [WORK]);
        assert!(queued(&b, "out").is_empty());
        store.sync();
        store.close();
    }
    restart_settled(&dir, &[WORK], &[]);
}

#[test]
fn a_prepared_branch_completed_before_a_restart_is_not_in_doubt_after_it() {
    for commit in [true, false] {
        let dir = TempDir::new("dtx-done");
        let x = xid("done");
        {
            let (store, b, _) = start(&dir, small());
            setup(&b);
            prepare_branch(&store, &b, &x);
            complete(&b, &x, commit);
            store.sync();
            store.close();
        }
        restart_after_outcome(&dir, commit);
    }
}

/// Churns messages through queue "q" until every segment there is now has been compacted
/// (no live record left in it) and reclaimed.
fn compact_all(store: &Store, b: &Broker) {
    let old: Vec<u64> = store
        .shared
        .state
        .lock()
        .index
        .segments
        .keys()
        .copied()
        .collect();
    let q = b.queue("q").unwrap_or_else(|| durable_queue(b, "q"));
    let mut round = 0;
    let live = || {
        let st = store.shared.state.lock();
        old.iter().any(|s| !st.index.live_in(*s).is_empty())
    };
    while live() {
        assert!(round < 60, "segments {old:?} were never compacted");
        for i in 0..50u32 {
            publish(b, "q", vec![((round * i) % 251) as u8; 1000], true);
        }
        assert_eq!(consume(b, &q, 50).len(), 50);
        store.sync();
        round += 1;
    }
    wait_until("the compacted segments to go", || {
        let st = store.shared.state.lock();
        old.iter().all(|s| !st.index.segments.contains_key(s))
    });
}

/// The prepare record and the branch's message are compacted forward (the dequeues it
/// holds are in no live record but the prepare's) and their segment reclaimed, before a
/// restart and again after it: the branch is still in doubt, whole.
#[test]
fn a_prepared_branch_survives_compaction_of_its_records() {
    for commit in [true, false] {
        let dir = TempDir::new("dtx-compact");
        let x = xid("compact");
        {
            let (store, b, _) = start(&dir, small());
            setup(&b);
            prepare_branch(&store, &b, &x);
            compact_all(&store, &b);
            store.close();
        }
        {
            let (store, b) = restart_in_doubt(&dir, &x);
            compact_all(&store, &b);
            store.close();
        }
        let (store, b) = restart_in_doubt(&dir, &x);
        complete(&b, &x, commit);
        store.sync();
        store.close();
        drop(b);
        restart_after_outcome(&dir, commit);
    }
}

/// A branch that rejected the message it consumed dead-letters it when it commits, after a
/// restart as before one.
#[test]
fn a_rejection_in_a_branch_recovered_in_doubt_is_dead_lettered_on_commit() {
    let dir = TempDir::new("dtx-reject");
    let x = xid("reject");
    {
        let (store, b, _) = start(&dir, small());
        durable_queue(&b, "dead");
        b.bind("dead", "amq.fanout", "", &Arguments::new()).unwrap();
        let opts = QueueOptions {
            durable: true,
            alternate_exchange: Some("amq.fanout".into()),
            ..QueueOptions::default()
        };
        let input = b.declare_queue("in", opts, false, 1).unwrap().0;
        publish(&b, "in", b"poison".to_vec(), true);
        let work = b.dtx().start(&x, false, b.transaction()).unwrap();
        let (position, message) = acquire_one(&input);
        work.lock()
            .settle(input.clone(), position, message, Settlement::Reject);
        drop(work);
        b.dtx().end(&x, false);
        b.dtx_prepare(&x).unwrap();
        store.sync();
        store.close();
    }
    let (store, b, stats) = start(&dir, small());
    assert_eq!(stats.transactions_in_doubt, 1);
    assert!(queued(&b, "in").is_empty() && queued(&b, "dead").is_empty());
    b.dtx_commit(&x, false).unwrap();
    assert!(queued(&b, "in").is_empty());
    assert_eq!(queued(&b, "dead"), [Bytes::from_static(b"poison")]);
    store.sync();
    store.close();
    drop(b);
    let (_s, b, _) = start(&dir, small());
    assert_eq!(queued(&b, "dead"), [Bytes::from_static(b"poison")]);
    assert!(queued(&b, "in").is_empty());
}
