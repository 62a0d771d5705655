//! Values of every kind the cluster encodes, for round-trip tests and fuzz seeds.

use std::collections::{BTreeMap, BTreeSet};

use openraft::{CommittedLeaderId, EntryPayload, Membership, SnapshotMeta};

use crate::sm::{QueueReplica, Replica};
use crate::types::{Batch, Entry, LogId, Member, NodeId, Op, StoredMembership};

pub fn log_id(term: u64, index: u64) -> LogId {
    LogId::new(CommittedLeaderId::new(term, 1), index)
}

pub fn membership() -> Membership<NodeId, Member> {
    let nodes: BTreeMap<NodeId, Member> = (1..=3)
        .map(|i| {
            let addr = format!("127.0.0.{i}:5680");
            (i, Member { addr })
        })
        .collect();
    Membership::new(vec![BTreeSet::from([1, 2, 3])], nodes)
}

pub fn entries() -> Vec<Entry> {
    let ops = vec![
        Op::Declare {
            queue: 7,
            name: "q".into(),
            record: vec![1, 2, 3],
        },
        Op::Enqueue {
            id: 9,
            queues: vec![7],
            content: b"hello".to_vec(),
        },
        Op::Returned {
            queue: 7,
            returns: vec![(9, 2)],
        },
        Op::Dequeue {
            queue: 7,
            ids: vec![9],
        },
        Op::Bind {
            exchange: "amq.direct".into(),
            queue: 7,
            key: "k".into(),
            arguments: vec![],
        },
        Op::Unbind {
            exchange: "amq.direct".into(),
            queue: 7,
            key: "k".into(),
        },
        Op::BindVariant {
            exchange: "amq.match".into(),
            queue: 7,
            key: "".into(),
            arguments: vec![0, 1],
        },
        Op::UnbindVariant {
            exchange: "amq.match".into(),
            queue: 7,
            key: "".into(),
            arguments: vec![0, 1],
        },
        Op::Delete { queue: 7 },
    ];
    vec![
        Entry {
            log_id: log_id(1, 1),
            payload: EntryPayload::Blank,
        },
        Entry {
            log_id: log_id(1, 2),
            payload: EntryPayload::Membership(membership()),
        },
        Entry {
            log_id: log_id(1, 3),
            payload: EntryPayload::Normal(Batch {
                origin: 1,
                epoch: 2,
                point: 3,
                ops,
            }),
        },
    ]
}

pub fn snapshot_meta() -> SnapshotMeta<NodeId, Member> {
    SnapshotMeta {
        last_log_id: Some(log_id(1, 3)),
        last_membership: StoredMembership::new(Some(log_id(1, 2)), membership()),
        snapshot_id: "1-3-1".into(),
    }
}

/// Writes `fuzz/seeds/<target>/<name>` (the ignored `write_*_seeds` tests call this).
pub fn write_seed(target: &str, name: &str, bytes: &[u8]) {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/seeds")
        .join(target);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(name), bytes).unwrap();
}

/// A replica of one queue with a binding, a message and its delivery count.
pub fn replica() -> Replica {
    let mut queue = QueueReplica {
        name: "q".into(),
        record: vec![1],
        bindings: vec![("amq.direct".into(), "k".into(), vec![])],
        ..QueueReplica::default()
    };
    queue
        .messages
        .insert(9, bytes::Bytes::from_static(b"hello"));
    queue.returns.insert(9, 2);
    Replica {
        last_applied: Some(log_id(1, 3)),
        membership: StoredMembership::new(Some(log_id(1, 2)), membership()),
        queues: BTreeMap::from([(7, queue)]),
        messages_applied: 1,
    }
}
