//! The state machine: every node's replica of the replicated queues (definitions, bindings
//! and messages, the latter in the store's record encoding), rebuilt by applying committed
//! entries in log order. Only the leader's broker core holds the queues as live queues (see
//! `leader`); the replica is what a new leader makes them from.
//!
//! Snapshots are the whole replica, written to `raft/snapshot` atomically.

use std::collections::BTreeMap;
use std::io::Cursor;
use std::path::PathBuf;
use std::sync::Arc;

use bytes::Bytes;
use openraft::storage::RaftStateMachine;
use openraft::{
    EntryPayload, ErrorSubject, ErrorVerb, OptionalSend, RaftSnapshotBuilder, Snapshot,
    SnapshotMeta,
};
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

use crate::log::write_atomic;
use crate::types::{
    storage_error, Applied, Entry, LogId, Member, NodeId, Op, StorageError, StoredMembership,
    TypeConfig,
};

/// One replicated queue.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct QueueReplica {
    pub name: String,
    /// The store's queue-declare record, encoded.
    pub record: Vec<u8>,
    /// Messages by id, in the store's content encoding. Ids grow with the proposing
    /// leader's term, so this order is the queue's order.
    #[serde(with = "messages_serde")]
    pub messages: BTreeMap<u64, Bytes>,
    /// (exchange, key, encoded arguments)
    pub bindings: Vec<(String, String, Vec<u8>)>,
    /// How often each message that came back after a delivery has come back (only quorum
    /// queues and queues with a delivery limit count): a new leader's queue starts from
    /// these.
    pub returns: BTreeMap<u64, u32>,
}

mod messages_serde {
    use super::*;
    use serde::{Deserializer, Serializer};

    pub fn serialize<S: Serializer>(m: &BTreeMap<u64, Bytes>, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(m.iter().map(|(k, v)| (*k, v.as_ref())))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<BTreeMap<u64, Bytes>, D::Error> {
        let v: Vec<(u64, Vec<u8>)> = Vec::deserialize(d)?;
        Ok(v.into_iter().map(|(k, b)| (k, Bytes::from(b))).collect())
    }
}

/// The replica and what openraft needs to know of it.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Replica {
    pub last_applied: Option<LogId>,
    pub membership: StoredMembership,
    pub queues: BTreeMap<u64, QueueReplica>,
    /// The highest message id applied (for status).
    pub messages_applied: u64,
}

impl Replica {
    /// Applies one operation. Unknown queues are ignored: a declare that never committed,
    /// or a queue deleted since.
    pub fn apply(&mut self, op: Op) {
        match op {
            Op::Declare {
                queue,
                name,
                record,
            } => {
                // A queue of the same name under another id (a leader that did not know
                // of the first) replaces it, as a redeclare would.
                self.queues.retain(|_, q| q.name != name);
                self.queues.insert(
                    queue,
                    QueueReplica {
                        name,
                        record,
                        ..QueueReplica::default()
                    },
                );
            }
            Op::Delete { queue } => {
                self.queues.remove(&queue);
            }
            Op::Enqueue {
                id,
                queues,
                content,
            } => {
                let content = Bytes::from(content);
                for q in queues {
                    if let Some(q) = self.queues.get_mut(&q) {
                        q.messages.insert(id, content.clone());
                    }
                }
                self.messages_applied += 1;
            }
            Op::Dequeue { queue, ids } => {
                if let Some(q) = self.queues.get_mut(&queue) {
                    for id in ids {
                        q.messages.remove(&id);
                        q.returns.remove(&id);
                    }
                }
            }
            Op::Returned { queue, returns } => {
                if let Some(q) = self.queues.get_mut(&queue) {
                    // A message already gone (its dequeue applied first) keeps no count.
                    for (id, count) in returns {
                        if q.messages.contains_key(&id) {
                            q.returns.insert(id, count);
                        }
                    }
                }
            }
            Op::Bind {
                exchange,
                queue,
                key,
                arguments,
            } => {
                if let Some(q) = self.queues.get_mut(&queue) {
                    q.bindings
                        .retain(|(e, k, _)| !(*e == exchange && *k == key));
                    q.bindings.push((exchange, key, arguments));
                }
            }
            Op::Unbind {
                exchange,
                queue,
                key,
            } => {
                if let Some(q) = self.queues.get_mut(&queue) {
                    q.bindings
                        .retain(|(e, k, _)| !(*e == exchange && *k == key));
                }
            }
            Op::BindVariant {
                exchange,
                queue,
                key,
                arguments,
            } => {
                if let Some(q) = self.queues.get_mut(&queue) {
                    q.unbind_variant(&exchange, &key, &arguments);
                    q.bindings.push((exchange, key, arguments));
                }
            }
            Op::UnbindVariant {
                exchange,
                queue,
                key,
                arguments,
            } => {
                if let Some(q) = self.queues.get_mut(&queue) {
                    q.unbind_variant(&exchange, &key, &arguments);
                }
            }
        }
    }

    pub fn message_count(&self) -> usize {
        self.queues.values().map(|q| q.messages.len()).sum()
    }
}

impl QueueReplica {
    /// Drops the binding under (exchange, key) with these arguments, compared as sets of
    /// entries as the broker compares them (the encodings may list them in another order).
    fn unbind_variant(&mut self, exchange: &str, key: &str, arguments: &[u8]) {
        let wanted = crate::journal::binding_arguments(arguments);
        self.bindings.retain(|(e, k, a)| {
            !(e == exchange
                && k == key
                && crate::journal::binding_arguments(a).same_entries(&wanted))
        });
    }
}

/// What a snapshot's replica starts with since it keeps delivery counts. A replica written
/// before then (plain postcard, whose first byte is an `Option` tag: 0 or 1) is read as one
/// with no counts.
const REPLICA_V2: &[u8] = b"\xffFR2";

/// The replica as snapshots carry it (to disk, and to a follower that is behind).
pub fn encode_replica(replica: &Replica) -> Result<Vec<u8>, postcard::Error> {
    postcard::to_extend(replica, REPLICA_V2.to_vec())
}

/// Reads a snapshot's replica, in either encoding.
pub fn decode_replica(data: &[u8]) -> Result<Replica, postcard::Error> {
    match data.strip_prefix(REPLICA_V2) {
        Some(rest) => postcard::from_bytes(rest),
        None => postcard::from_bytes::<v1::Replica>(data).map(Replica::from),
    }
}

/// The replica's shape before delivery counts, for snapshots written then.
mod v1 {
    use super::*;

    #[derive(Serialize, Deserialize)]
    pub struct QueueReplica {
        pub name: String,
        pub record: Vec<u8>,
        #[serde(with = "messages_serde")]
        pub messages: BTreeMap<u64, Bytes>,
        pub bindings: Vec<(String, String, Vec<u8>)>,
    }

    #[derive(Serialize, Deserialize)]
    pub struct Replica {
        pub last_applied: Option<LogId>,
        pub membership: StoredMembership,
        pub queues: BTreeMap<u64, QueueReplica>,
        pub messages_applied: u64,
    }
}

impl From<v1::Replica> for Replica {
    fn from(old: v1::Replica) -> Replica {
        let queues = old.queues.into_iter().map(|(id, q)| {
            let queue = QueueReplica {
                name: q.name,
                record: q.record,
                messages: q.messages,
                bindings: q.bindings,
                returns: BTreeMap::new(),
            };
            (id, queue)
        });
        Replica {
            last_applied: old.last_applied,
            membership: old.membership,
            queues: queues.collect(),
            messages_applied: old.messages_applied,
        }
    }
}

/// Told of each applied batch this node proposed: (epoch, point).
pub type AppliedHook = Arc<dyn Fn(u64, u64) + Send + Sync>;

/// The state machine handed to openraft; clones share the replica.
#[derive(Clone)]
pub struct StateMachine {
    pub replica: Arc<Mutex<Replica>>,
    dir: PathBuf,
    me: NodeId,
    on_applied: AppliedHook,
    snapshot_id: Arc<Mutex<u64>>,
}

fn sm_error(verb: ErrorVerb, e: impl std::error::Error + 'static) -> StorageError {
    storage_error(ErrorSubject::StateMachine, verb, &e)
}

#[derive(Serialize, Deserialize)]
struct SnapshotFile {
    meta: SnapshotMeta<NodeId, Member>,
    data: Vec<u8>,
}

impl StateMachine {
    /// The state machine of node `me`, from the snapshot in `dir` if there is one.
    pub fn open(
        dir: PathBuf,
        me: NodeId,
        shared: Arc<Mutex<Replica>>,
        on_applied: AppliedHook,
    ) -> std::io::Result<StateMachine> {
        let mut replica = Replica::default();
        if let Ok(bytes) = std::fs::read(dir.join("snapshot")) {
            match postcard::from_bytes::<SnapshotFile>(&bytes).and_then(|f| decode_replica(&f.data))
            {
                Ok(r) => replica = r,
                Err(e) => return Err(std::io::Error::other(format!("raft snapshot: {e}"))),
            }
        }
        *shared.lock() = replica;
        Ok(StateMachine {
            replica: shared,
            dir,
            me,
            on_applied,
            snapshot_id: Arc::default(),
        })
    }

    fn save(&self, meta: &SnapshotMeta<NodeId, Member>, data: &[u8]) -> std::io::Result<()> {
        let file = SnapshotFile {
            meta: meta.clone(),
            data: data.to_vec(),
        };
        let bytes = postcard::to_allocvec(&file).map_err(std::io::Error::other)?;
        write_atomic(&self.dir.join("snapshot"), &bytes)
    }
}

impl RaftSnapshotBuilder<TypeConfig> for StateMachine {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, StorageError> {
        let (data, last, membership) = {
            let r = self.replica.lock();
            let data = encode_replica(&r).map_err(|e| sm_error(ErrorVerb::Read, e))?;
            (data, r.last_applied, r.membership.clone())
        };
        let id = {
            let mut n = self.snapshot_id.lock();
            *n += 1;
            *n
        };
        let meta = SnapshotMeta {
            last_log_id: last,
            last_membership: membership,
            snapshot_id: format!(
                "{}-{}-{id}",
                last.map_or(0, |l| l.leader_id.term),
                last.map_or(0, |l| l.index)
            ),
        };
        let me = self.clone();
        let (m, d) = (meta.clone(), data.clone());
        tokio::task::spawn_blocking(move || me.save(&m, &d))
            .await
            .map_err(|e| sm_error(ErrorVerb::Write, e))?
            .map_err(|e| sm_error(ErrorVerb::Write, e))?;
        Ok(Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(data)),
        })
    }
}

impl RaftStateMachine<TypeConfig> for StateMachine {
    type SnapshotBuilder = StateMachine;

    async fn applied_state(&mut self) -> Result<(Option<LogId>, StoredMembership), StorageError> {
        let r = self.replica.lock();
        Ok((r.last_applied, r.membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<Applied>, StorageError>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let mut out = Vec::new();
        let mut mine = None;
        {
            let mut r = self.replica.lock();
            for e in entries {
                r.last_applied = Some(e.log_id);
                match e.payload {
                    EntryPayload::Blank => {}
                    EntryPayload::Normal(batch) => {
                        if batch.origin == self.me {
                            mine = Some((batch.epoch, batch.point));
                        }
                        for op in batch.ops {
                            r.apply(op);
                        }
                    }
                    EntryPayload::Membership(m) => {
                        r.membership = StoredMembership::new(Some(e.log_id), m);
                    }
                }
                out.push(Applied);
            }
        }
        if let Some((epoch, point)) = mine {
            (self.on_applied)(epoch, point);
        }
        Ok(out)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.clone()
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<Cursor<Vec<u8>>>, StorageError> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta<NodeId, Member>,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), StorageError> {
        let data = snapshot.into_inner();
        let mut replica = decode_replica(&data).map_err(|e| sm_error(ErrorVerb::Read, e))?;
        replica.last_applied = meta.last_log_id;
        replica.membership = meta.last_membership.clone();
        let me = self.clone();
        let m = meta.clone();
        let d = data.clone();
        tokio::task::spawn_blocking(move || me.save(&m, &d))
            .await
            .map_err(|e| sm_error(ErrorVerb::Write, e))?
            .map_err(|e| sm_error(ErrorVerb::Write, e))?;
        *self.replica.lock() = replica;
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot<TypeConfig>>, StorageError> {
        let Ok(bytes) = std::fs::read(self.dir.join("snapshot")) else {
            return Ok(None);
        };
        let file: SnapshotFile =
            postcard::from_bytes(&bytes).map_err(|e| sm_error(ErrorVerb::Read, e))?;
        Ok(Some(Snapshot {
            meta: file.meta,
            snapshot: Box::new(Cursor::new(file.data)),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::samples::{log_id, membership};

    /// postcard of a replica (queue 7 "q", record [1, 2], messages 9 "hello" and 10
    /// "world", a binding to amq.direct with key "k", applied up to (2, 5)) written by the
    /// build before delivery counts.
    const LEGACY_REPLICA: &[u8] = &[
        1, 2, 1, 5, 1, 1, 1, 2, 1, 3, 1, 2, 3, 3, 1, 14, 49, 50, 55, 46, 48, 46, 48, 46, 49, 58,
        53, 54, 56, 48, 2, 14, 49, 50, 55, 46, 48, 46, 48, 46, 50, 58, 53, 54, 56, 48, 3, 14, 49,
        50, 55, 46, 48, 46, 48, 46, 51, 58, 53, 54, 56, 48, 1, 7, 1, 113, 2, 1, 2, 2, 9, 5, 104,
        101, 108, 108, 111, 10, 5, 119, 111, 114, 108, 100, 1, 10, 97, 109, 113, 46, 100, 105, 114,
        101, 99, 116, 1, 107, 1, 3, 2,
    ];

    fn replica_with(ids: &[u64]) -> Replica {
        let mut r = Replica::default();
        r.apply(Op::Declare {
            queue: 7,
            name: "q".into(),
            record: vec![1],
        });
        for id in ids {
            r.apply(Op::Enqueue {
                id: *id,
                queues: vec![7],
                content: b"m".to_vec(),
            });
        }
        r
    }

    fn returns(r: &Replica) -> Vec<(u64, u32)> {
        r.queues[&7].returns.iter().map(|(k, v)| (*k, *v)).collect()
    }

    #[test]
    fn a_count_lives_while_its_message_is_queued() {
        let mut r = replica_with(&[9, 10]);
        // 11 is not on the queue (already dequeued, or never there), 8 not a queue.
        r.apply(Op::Returned {
            queue: 7,
            returns: vec![(9, 1), (11, 1)],
        });
        r.apply(Op::Returned {
            queue: 8,
            returns: vec![(10, 1)],
        });
        assert_eq!(returns(&r), [(9, 1)]);
        r.apply(Op::Returned {
            queue: 7,
            returns: vec![(9, 2), (10, 1)],
        });
        assert_eq!(returns(&r), [(9, 2), (10, 1)]);
        r.apply(Op::Dequeue {
            queue: 7,
            ids: vec![9],
        });
        assert_eq!(returns(&r), [(10, 1)]);
        // A queue declared again under the same name starts with no counts.
        r.apply(Op::Declare {
            queue: 12,
            name: "q".into(),
            record: vec![1],
        });
        assert!(r.queues.values().all(|q| q.returns.is_empty()));
        // A deleted queue's counts go with it.
        let mut r = replica_with(&[9]);
        r.apply(Op::Returned {
            queue: 7,
            returns: vec![(9, 1)],
        });
        r.apply(Op::Delete { queue: 7 });
        assert!(r.queues.is_empty());
    }

    /// 0-9-1's bindings under one key are told apart by their arguments (in any order);
    /// a 0-10 bind or unbind of the key replaces or removes them all.
    #[test]
    fn bindings_told_apart_by_arguments() {
        use crate::journal::{binding_arguments, encode_arguments};
        use ferry_core::{Arguments, HeaderValue};
        let args = |entries: &[(&str, i64)]| -> Vec<u8> {
            let a: Arguments = entries
                .iter()
                .map(|(k, v)| (*k, HeaderValue::Int(*v)))
                .collect();
            encode_arguments(&a)
        };
        let variant = |arguments: Vec<u8>| Op::BindVariant {
            exchange: "h".into(),
            queue: 7,
            key: "".into(),
            arguments,
        };
        let ns = |r: &Replica| -> Vec<Arguments> {
            r.queues[&7]
                .bindings
                .iter()
                .map(|(_, _, a)| binding_arguments(a))
                .collect()
        };
        let mut r = replica_with(&[]);
        r.apply(variant(args(&[("a", 1), ("b", 2)])));
        r.apply(variant(args(&[("c", 3)])));
        r.apply(variant(args(&[("b", 2), ("a", 1)])));
        assert_eq!(ns(&r).len(), 2);
        r.apply(Op::UnbindVariant {
            exchange: "h".into(),
            queue: 7,
            key: "".into(),
            arguments: args(&[("b", 2), ("a", 1)]),
        });
        assert_eq!(ns(&r), [binding_arguments(&args(&[("c", 3)]))]);
        r.apply(variant(args(&[("d", 4)])));
        r.apply(Op::Bind {
            exchange: "h".into(),
            queue: 7,
            key: "".into(),
            arguments: args(&[("e", 5)]),
        });
        assert_eq!(ns(&r), [binding_arguments(&args(&[("e", 5)]))]);
        r.apply(variant(args(&[("f", 6)])));
        r.apply(Op::Unbind {
            exchange: "h".into(),
            queue: 7,
            key: "".into(),
        });
        assert!(ns(&r).is_empty());
    }

    #[test]
    fn snapshots_keep_counts_and_older_snapshots_still_read() {
        let mut r = replica_with(&[9, 10]);
        r.last_applied = Some(log_id(2, 5));
        r.membership = StoredMembership::new(Some(log_id(1, 2)), membership());
        r.apply(Op::Returned {
            queue: 7,
            returns: vec![(10, 3)],
        });
        let back = decode_replica(&encode_replica(&r).unwrap()).unwrap();
        assert_eq!(format!("{back:?}"), format!("{r:?}"));

        // A replica as the build before counts (26c4568) wrote it, its bytes printed by that
        // build: it reads back with its messages and binding, and no counts.
        let written_then = decode_replica(LEGACY_REPLICA).unwrap();
        assert_eq!(written_then.last_applied, Some(log_id(2, 5)));
        assert_eq!(written_then.messages_applied, 2);
        let q = &written_then.queues[&7];
        assert_eq!((q.name.as_str(), &q.record[..]), ("q", &[1u8, 2][..]));
        assert_eq!(q.messages.len(), 2);
        assert_eq!(&q.messages[&10][..], b"world");
        assert_eq!(q.bindings, [("amq.direct".into(), "k".into(), vec![3])]);
        assert!(q.returns.is_empty());

        // The legacy shape as this build declares it: the same replica, less its counts.
        let q = &r.queues[&7];
        let old = v1::Replica {
            last_applied: r.last_applied,
            membership: r.membership.clone(),
            queues: BTreeMap::from([(
                7,
                v1::QueueReplica {
                    name: q.name.clone(),
                    record: q.record.clone(),
                    messages: q.messages.clone(),
                    bindings: q.bindings.clone(),
                },
            )]),
            messages_applied: r.messages_applied,
        };
        let back = decode_replica(&postcard::to_allocvec(&old).unwrap()).unwrap();
        assert!(back.queues[&7].returns.is_empty());
        assert_eq!(back.queues[&7].messages, q.messages);
        assert_eq!(back.last_applied, r.last_applied);
        assert_eq!(back.messages_applied, 2);

        // Damaged either way: an error, not a panic.
        for bad in [&b"\xffFR2\x01"[..], &[7u8, 1, 2][..], &[][..]] {
            assert!(decode_replica(bad).is_err());
        }
    }
}
