//! The Raft group's types: what a log entry carries (a batch of queue operations), the
//! member record, and the openraft type configuration.

use serde::{Deserialize, Serialize};

/// A cluster member as the Raft membership records it: where its cluster port is.
/// (Its AMQP address is asked for over that port: see `peers`.)
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Member {
    pub addr: String,
}

impl std::fmt::Display for Member {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.addr)
    }
}

/// One replicated queue operation. Ids of replicated queues and of messages in them are
/// chosen by the leader that proposed the operation (see `journal::ids`), so applying an
/// entry needs no state but the replica's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Op {
    /// A replicated queue: its id, name, and the store's queue-declare record
    /// (`ferry_store::record::Record::QueueDeclare`) encoded.
    Declare {
        queue: u64,
        name: String,
        record: Vec<u8>,
    },
    Delete {
        queue: u64,
    },
    /// A message for `queues`, its content in the store's record encoding
    /// (`ferry_store::record::put_message_content`).
    Enqueue {
        id: u64,
        queues: Vec<u64>,
        content: Vec<u8>,
    },
    /// Messages that left `queue` for good (settled, purged, expired, dropped).
    Dequeue {
        queue: u64,
        ids: Vec<u64>,
    },
    Bind {
        exchange: String,
        queue: u64,
        key: String,
        /// `ferry_store::codec` argument encoding.
        arguments: Vec<u8>,
    },
    Unbind {
        exchange: String,
        queue: u64,
        key: String,
    },
    /// Messages that came back to `queue` after a delivery, each with the count of its
    /// returns so far (for `x-delivery-count` and a delivery limit: RabbitMQ's quorum
    /// queues keep theirs in their log too). Last, so that the entries above keep their
    /// encoding.
    Returned {
        queue: u64,
        returns: Vec<(u64, u32)>,
    },
    /// A binding whose arguments are part of its identity (0-9-1's): it joins the others
    /// under (exchange, queue, key) unless one has the same arguments. `Bind` replaces them
    /// all. After `Returned`, for the same reason.
    BindVariant {
        exchange: String,
        queue: u64,
        key: String,
        /// As `Bind`'s.
        arguments: Vec<u8>,
    },
    /// Removes the one binding under (exchange, queue, key) with these arguments; `Unbind`
    /// removes them all.
    UnbindVariant {
        exchange: String,
        queue: u64,
        key: String,
        /// As `Bind`'s.
        arguments: Vec<u8>,
    },
}

/// A log entry's payload: the operations one leader batched, and who proposed them, so the
/// proposer can tell which of its durability points an applied entry completes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Batch {
    /// The proposing node.
    pub origin: u64,
    /// The proposer's leadership epoch (a node-local counter).
    pub epoch: u64,
    /// The highest durability point among the batch's operations.
    pub point: u64,
    pub ops: Vec<Op>,
}

/// What applying an entry answers (nothing: the proposer learns of completion through the
/// applied points).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Applied;

openraft::declare_raft_types!(
    /// The cluster's one Raft group.
    pub TypeConfig:
        D = Batch,
        R = Applied,
        NodeId = u64,
        Node = Member,
        Entry = openraft::Entry<TypeConfig>,
        SnapshotData = std::io::Cursor<Vec<u8>>,
        AsyncRuntime = openraft::TokioRuntime,
);

pub type NodeId = u64;
pub type LogId = openraft::LogId<NodeId>;
pub type Vote = openraft::Vote<NodeId>;
pub type Entry = openraft::Entry<TypeConfig>;
pub type StorageError = openraft::StorageError<NodeId>;
pub type StoredMembership = openraft::StoredMembership<NodeId, Member>;
pub type Raft = openraft::Raft<TypeConfig>;

/// A storage error openraft understands, from an I/O or decoding failure.
pub fn storage_error(
    subject: openraft::ErrorSubject<NodeId>,
    verb: openraft::ErrorVerb,
    e: &(impl std::error::Error + 'static),
) -> StorageError {
    openraft::StorageIOError::new(subject, verb, openraft::AnyError::new(e)).into()
}
