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
        }
    }

    pub fn message_count(&self) -> usize {
        self.queues.values().map(|q| q.messages.len()).sum()
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
            match postcard::from_bytes::<SnapshotFile>(&bytes)
                .and_then(|f| postcard::from_bytes::<Replica>(&f.data))
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
            let data = postcard::to_allocvec(&*r).map_err(|e| sm_error(ErrorVerb::Read, e))?;
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
        let mut replica: Replica =
            postcard::from_bytes(&data).map_err(|e| sm_error(ErrorVerb::Read, e))?;
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
