//! Raft's RPCs over the cluster transport (the client side openraft calls), and the
//! management requests (`ferry cluster`) that share the port.

use std::time::Duration;

use openraft::error::{
    InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, Unreachable,
};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use tokio::net::TcpStream;

use crate::net::{self, kind, Credentials, NetError};
use crate::types::{Member, NodeId, TypeConfig};

/// What `ferry cluster` may ask any node.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum AdminRequest {
    Status,
    /// Adds a node (a learner first, then a voter once it has caught up).
    AddNode {
        id: NodeId,
        addr: String,
    },
    RemoveNode {
        id: NodeId,
    },
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum AdminResponse {
    Status(NodeStatus),
    Done(String),
    /// Membership changes go to the leader: here it is, if known.
    NotLeader {
        leader: Option<(NodeId, String)>,
    },
    Error(String),
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct MemberStatus {
    pub id: NodeId,
    pub addr: String,
    pub voter: bool,
    /// The last log index the leader knows the member has (leader's view only).
    pub matched: Option<u64>,
}

/// One node's view of the cluster.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct NodeStatus {
    pub id: NodeId,
    pub cluster: String,
    /// leader, follower, candidate, learner or shutdown.
    pub state: String,
    pub term: u64,
    pub leader: Option<NodeId>,
    pub last_log_index: Option<u64>,
    pub last_applied: Option<u64>,
    pub snapshot: Option<u64>,
    /// The node's AMQP address (where clients connect).
    pub amqp: String,
    /// Whether this node serves replicated queues now (leader, caught up).
    pub serving: bool,
    pub members: Vec<MemberStatus>,
    /// (queue, messages) in this node's replica.
    pub queues: Vec<(String, u64)>,
    pub millis_since_quorum_ack: Option<u64>,
    /// Moving average of proposal-to-commit-and-apply time on this node (leaders), µs.
    pub commit_latency_us: u64,
}

/// One request-response exchange on an authenticated connection.
pub async fn exchange<Req: Serialize, Resp: DeserializeOwned>(
    s: &mut TcpStream,
    k: u8,
    req: &Req,
) -> Result<Resp, NetError> {
    net::send(s, k, req).await?;
    net::recv(s, k).await
}

/// A management request to the node at `addr`.
pub async fn admin(
    addr: &str,
    creds: &Credentials,
    req: &AdminRequest,
    timeout: Duration,
) -> Result<AdminResponse, NetError> {
    let fut = async {
        let mut s = net::connect(addr, creds, 0, None, timeout).await?;
        exchange(&mut s, kind::ADMIN, req).await
    };
    tokio::time::timeout(timeout, fut)
        .await
        .map_err(|_| NetError::Timeout)?
}

/// Makes a client per peer for openraft.
#[derive(Clone)]
pub struct Network {
    pub me: NodeId,
    pub creds: Credentials,
    /// Outgoing connections leave from here (the node's interface), if set.
    pub source: Option<std::net::IpAddr>,
}

impl RaftNetworkFactory<TypeConfig> for Network {
    type Network = Peer;

    async fn new_client(&mut self, target: NodeId, node: &Member) -> Peer {
        Peer {
            me: self.me,
            target,
            addr: node.addr.clone(),
            creds: self.creds.clone(),
            source: self.source,
            conn: None,
            failing: false,
        }
    }
}

/// A connection to one peer, opened on first use and again after any failure.
pub struct Peer {
    me: NodeId,
    target: NodeId,
    addr: String,
    creds: Credentials,
    source: Option<std::net::IpAddr>,
    conn: Option<TcpStream>,
    /// Set after a failure, so an unreachable peer is logged once, not per retry.
    failing: bool,
}

type RpcErr<E = openraft::error::Infallible> = RPCError<NodeId, Member, RaftError<NodeId, E>>;

impl Peer {
    async fn call<Req, Resp, E>(
        &mut self,
        k: u8,
        req: &Req,
        option: &RPCOption,
    ) -> Result<Resp, RpcErr<E>>
    where
        Req: Serialize,
        Resp: DeserializeOwned,
        E: std::error::Error + DeserializeOwned,
    {
        let ttl = option.hard_ttl();
        if self.conn.is_none() {
            let t = ttl.min(Duration::from_secs(1));
            match net::connect(&self.addr, &self.creds, self.me, self.source, t).await {
                Ok(s) => self.conn = Some(s),
                Err(e) => {
                    self.failed(&e);
                    return Err(RPCError::Unreachable(Unreachable::new(&e)));
                }
            }
        }
        let Some(s) = self.conn.as_mut() else {
            return Err(RPCError::Unreachable(Unreachable::new(
                &std::io::Error::other("no connection"),
            )));
        };
        let answer: Result<Result<Resp, RaftError<NodeId, E>>, NetError> =
            match tokio::time::timeout(ttl, exchange(s, k, req)).await {
                Ok(r) => r,
                Err(_) => Err(NetError::Timeout),
            };
        if answer.is_ok() && self.failing {
            self.failing = false;
            tracing::info!(
                peer = self.target,
                addr = self.addr,
                "cluster: peer reachable again"
            );
        }
        match answer {
            Ok(Ok(resp)) => Ok(resp),
            Ok(Err(e)) => Err(RPCError::RemoteError(RemoteError::new(self.target, e))),
            Err(e) => {
                // A stream left mid-exchange cannot be reused.
                self.conn = None;
                self.failed(&e);
                Err(RPCError::Network(NetworkError::new(&e)))
            }
        }
    }
}

impl Peer {
    fn failed(&mut self, e: &NetError) {
        if !self.failing {
            self.failing = true;
            tracing::warn!(
                peer = self.target,
                addr = self.addr,
                "cluster: peer unreachable: {e}"
            );
        }
    }
}

impl RaftNetwork<TypeConfig> for Peer {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<NodeId>, RpcErr> {
        self.call(kind::APPEND, &rpc, &option).await
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<InstallSnapshotResponse<NodeId>, RpcErr<InstallSnapshotError>> {
        self.call(kind::SNAPSHOT, &rpc, &option).await
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        option: RPCOption,
    ) -> Result<VoteResponse<NodeId>, RpcErr> {
        self.call(kind::VOTE, &rpc, &option).await
    }
}
