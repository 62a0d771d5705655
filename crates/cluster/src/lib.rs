//! `ferry-cluster`: replicated queues for ferryd.
//!
//! One Raft group (openraft) per cluster replicates the replicated queues' operations;
//! its log and snapshots live under `--data-dir/raft` (`log`, `sm`), its RPCs travel over
//! an authenticated cluster port (`net`, `rpc`). The broker core writes to a
//! [`ClusterJournal`], which sends replicated queues' operations to Raft and everything
//! else to the node's own store, and holds confirms until the proposals commit. Only the
//! leader's core holds the replicated queues; other nodes pass client connections on to it
//! ([`Route`]). See docs/CLUSTER.md.

// openraft's storage and RPC error types are large and fixed by its traits; boxing them at
// every call would only move the cost.
#![allow(clippy::result_large_err)]

pub mod journal;
mod log;
pub mod net;
mod node;
pub mod rpc;
#[cfg(test)]
mod samples;
mod sm;
pub mod types;

pub use journal::{is_replicated_declare, ClusterJournal};
pub use log::{replay_records, Replayed};
pub use net::Credentials;
pub use node::{Cluster, ClusterConfig, ClusterError, Route};
pub use rpc::{AdminRequest, AdminResponse, MemberStatus, NodeStatus};
pub use sm::{decode_replica, encode_replica};
