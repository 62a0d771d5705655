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

/// What a peer may ask once authenticated, by frame kind.
#[derive(Debug)]
pub enum Request {
    Append(AppendEntriesRequest<TypeConfig>),
    Vote(VoteRequest<NodeId>),
    Snapshot(InstallSnapshotRequest<TypeConfig>),
    Admin(AdminRequest),
}

impl Request {
    /// A request frame's payload decoded by its kind; other kinds are refused.
    pub fn decode(k: u8, payload: &[u8]) -> Result<Request, NetError> {
        Ok(match k {
            kind::APPEND => Request::Append(net::decode(payload)?),
            kind::VOTE => Request::Vote(net::decode(payload)?),
            kind::SNAPSHOT => Request::Snapshot(net::decode(payload)?),
            kind::ADMIN => Request::Admin(net::decode(payload)?),
            other => return Err(NetError::Kind(other)),
        })
    }
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

#[cfg(test)]
mod tests {
    use std::fmt::Debug;

    use openraft::error::{Fatal, SnapshotMismatch};
    use openraft::{ErrorSubject, ErrorVerb, SnapshotSegmentId};

    use super::*;
    use crate::samples::{entries, log_id, replica, snapshot_meta, write_seed};
    use crate::types::{storage_error, Vote};

    /// postcard is not self-describing: a type that needs `deserialize_any` (untagged enums,
    /// flattened fields) or skips fields when serializing fails here, not between live nodes.
    fn round_trip<T: Serialize + DeserializeOwned + Debug>(v: &T) {
        let bytes = postcard::to_allocvec(v).unwrap();
        let back: T = postcard::from_bytes(&bytes).unwrap();
        assert_eq!(format!("{back:?}"), format!("{v:?}"));
    }

    #[test]
    fn what_crosses_the_cluster_port_round_trips() {
        let vote = Vote::new_committed(2, 1);
        round_trip(&AppendEntriesRequest::<TypeConfig> {
            vote,
            prev_log_id: Some(log_id(1, 0)),
            entries: entries(),
            leader_commit: Some(log_id(1, 2)),
        });
        round_trip(&VoteRequest::new(vote, Some(log_id(1, 3))));
        round_trip(&InstallSnapshotRequest::<TypeConfig> {
            vote,
            meta: snapshot_meta(),
            offset: 0,
            data: vec![0xff; 300],
            done: true,
        });
        round_trip(&AdminRequest::AddNode {
            id: 4,
            addr: "127.0.0.4:5680".into(),
        });
        round_trip(&(4u64, vec![1u8; 32], vec![2u8; 32]));

        type Answer<T, E = openraft::error::Infallible> = Result<T, RaftError<NodeId, E>>;
        round_trip::<Answer<AppendEntriesResponse<NodeId>>>(&Ok(
            AppendEntriesResponse::PartialSuccess(Some(log_id(1, 2))),
        ));
        round_trip::<Answer<AppendEntriesResponse<NodeId>>>(&Ok(
            AppendEntriesResponse::HigherVote(vote),
        ));
        round_trip::<Answer<VoteResponse<NodeId>>>(&Ok(VoteResponse::new(
            vote,
            Some(log_id(1, 3)),
            true,
        )));
        let storage = storage_error(
            ErrorSubject::Logs,
            ErrorVerb::Write,
            &std::io::Error::other("disk full"),
        );
        round_trip::<Answer<VoteResponse<NodeId>>>(&Err(RaftError::Fatal(Fatal::StorageError(
            storage,
        ))));
        round_trip::<Answer<InstallSnapshotResponse<NodeId>, InstallSnapshotError>>(&Ok(
            InstallSnapshotResponse { vote },
        ));
        let segment = |offset| SnapshotSegmentId {
            id: "1-3-1".into(),
            offset,
        };
        round_trip::<Answer<InstallSnapshotResponse<NodeId>, InstallSnapshotError>>(&Err(
            RaftError::APIError(InstallSnapshotError::SnapshotMismatch(SnapshotMismatch {
                expect: segment(0),
                got: segment(4096),
            })),
        ));
        round_trip(&AdminResponse::Status(NodeStatus {
            id: 1,
            leader: Some(1),
            members: vec![MemberStatus {
                id: 2,
                matched: Some(3),
                ..MemberStatus::default()
            }],
            queues: vec![("q".into(), 1)],
            ..NodeStatus::default()
        }));
        round_trip(&AdminResponse::NotLeader {
            leader: Some((2, "127.0.0.2:5680".into())),
        });
    }

    #[test]
    fn what_goes_to_disk_round_trips() {
        for e in entries() {
            round_trip(&e);
        }
        round_trip(&Vote::new(3, 2));
        round_trip(&log_id(3, 40));
        let replica = replica();
        round_trip(&replica);
        round_trip(&snapshot_meta());
    }

    fn frame<T: Serialize>(k: u8, value: &T, out: &mut Vec<u8>) {
        net::encode_frame(k, &postcard::to_allocvec(value).unwrap(), out).unwrap();
    }

    /// One frame stream per kind a node reads on its cluster port.
    fn request_streams() -> Vec<(&'static str, Vec<u8>)> {
        let vote = Vote::new_committed(2, 1);
        let mut out = Vec::new();
        let mut f = Vec::new();
        frame(net::PROOF, &(2u64, vec![7u8; 32], vec![9u8; 32]), &mut f);
        out.push(("proof", f));
        let mut f = Vec::new();
        let append = AppendEntriesRequest::<TypeConfig> {
            vote,
            prev_log_id: Some(log_id(1, 0)),
            entries: entries(),
            leader_commit: Some(log_id(1, 2)),
        };
        frame(kind::APPEND, &append, &mut f);
        out.push(("append", f));
        let mut f = Vec::new();
        frame(
            kind::VOTE,
            &VoteRequest::new(vote, Some(log_id(1, 3))),
            &mut f,
        );
        out.push(("vote", f));
        let mut f = Vec::new();
        let snapshot = InstallSnapshotRequest::<TypeConfig> {
            vote,
            meta: snapshot_meta(),
            offset: 0,
            data: b"replica bytes".to_vec(),
            done: true,
        };
        frame(kind::SNAPSHOT, &snapshot, &mut f);
        out.push(("snapshot", f));
        let mut f = Vec::new();
        frame(kind::ADMIN, &AdminRequest::Status, &mut f);
        let add = AdminRequest::AddNode {
            id: 4,
            addr: "127.0.0.4:5680".into(),
        };
        frame(kind::ADMIN, &add, &mut f);
        frame(kind::ADMIN, &AdminRequest::RemoveNode { id: 4 }, &mut f);
        out.push(("admin", f));
        out
    }

    #[test]
    fn requests_decode_by_their_frame_kind() {
        let streams = request_streams();
        let (_, proof) = &streams[0];
        let (k, payload, _) = net::split_frame(proof).unwrap();
        assert_eq!(k, net::PROOF);
        let (node, _, _): net::Proof = net::decode(payload).unwrap();
        assert_eq!(node, 2);
        assert!(matches!(
            Request::decode(k, payload),
            Err(NetError::Kind(net::PROOF))
        ));
        let mut seen = Vec::new();
        for (_, stream) in &streams[1..] {
            let mut rest = &stream[..];
            while !rest.is_empty() {
                let (k, payload, tail) = net::split_frame(rest).unwrap();
                seen.push(match Request::decode(k, payload).unwrap() {
                    Request::Append(r) => format!("append {}", r.entries.len()),
                    Request::Vote(r) => format!("vote {:?}", r.last_log_id.map(|l| l.index)),
                    Request::Snapshot(r) => format!("snapshot {}", r.meta.snapshot_id),
                    Request::Admin(r) => format!("admin {r:?}"),
                });
                rest = tail;
            }
        }
        assert_eq!(
            seen,
            [
                "append 3",
                "vote Some(3)",
                "snapshot 1-3-1",
                "admin Status",
                "admin AddNode { id: 4, addr: \"127.0.0.4:5680\" }",
                "admin RemoveNode { id: 4 }",
            ]
        );
    }

    /// `cargo test -p ferry-cluster -- --ignored write_cluster_frame_decode_seeds`
    #[test]
    #[ignore = "writes fuzz/seeds/cluster_frame_decode"]
    fn write_cluster_frame_decode_seeds() {
        for (name, bytes) in request_streams() {
            write_seed("cluster_frame_decode", name, &bytes);
        }
        write_seed(
            "cluster_frame_decode",
            "replica",
            &crate::sm::encode_replica(&replica()).unwrap(),
        );
    }
}
