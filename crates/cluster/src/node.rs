//! A cluster node: the Raft instance over the log and state machine, the cluster port's
//! listener, the proposer, and the watcher that turns leadership into serving (the core
//! gets the replicated queues from the replica) and back.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use ferry_core::{Broker, QueueOptions, Restored, RestoredMessage};
use ferry_store::record::{kind as rkind, Record};
use openraft::{ChangeMembers, Config, ServerState, SnapshotPolicy};
use parking_lot::Mutex;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tracing::{debug, info, warn};

use crate::journal::{decode, ClusterJournal, Proposal};
use crate::log::LogStore;
use crate::net::{self, Credentials, NetError};
use crate::rpc::{self, AdminRequest, AdminResponse, MemberStatus, Network, NodeStatus, Request};
use crate::sm::StateMachine;
use crate::types::{Member, NodeId, Raft};

/// How a node is set up (ferryd's `--cluster-*` options).
#[derive(Debug, Clone)]
pub struct ClusterConfig {
    pub name: String,
    pub node_id: NodeId,
    /// The initial members: id and cluster address. This node is among them, or it
    /// waits to be added (`ferry cluster add-node`).
    pub peers: Vec<(NodeId, String)>,
    /// Where the cluster port listens.
    pub listen: SocketAddr,
    pub secret: Vec<u8>,
    /// `--data-dir/raft`.
    pub dir: PathBuf,
    /// This node's AMQP address, as clients reach it.
    pub amqp: String,
    pub heartbeat_ms: u64,
    pub election_min_ms: u64,
    pub election_max_ms: u64,
}

/// What the AMQP listener does with a new client connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// This node is the serving leader.
    Serve,
    /// Pass the connection's bytes to the leader's AMQP address.
    Proxy(String),
    /// No leader known (an election is under way): close it; the client retries.
    Refuse,
}

pub struct Cluster {
    config: ClusterConfig,
    creds: Credentials,
    raft: Raft,
    journal: Arc<ClusterJournal>,
    broker: Arc<Broker>,
    /// Peers' AMQP addresses, learned over the cluster port.
    amqp_addrs: Mutex<HashMap<NodeId, String>>,
    /// Bumped whenever the route changes: proxied connections end then.
    route_tx: watch::Sender<u64>,
    /// Replicated queues the core holds now (while serving).
    materialized: Mutex<Vec<String>>,
    amqp: Mutex<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error("raft log or snapshot: {0}")]
    Io(#[from] std::io::Error),
    #[error("raft: {0}")]
    Raft(String),
    #[error("cannot listen on the cluster port {0}: {1}")]
    Listen(SocketAddr, std::io::Error),
}

impl Cluster {
    /// Starts the node. `journal` is the broker's (made with [`ClusterJournal::new`], whose
    /// receiver is `proposals`).
    pub async fn start(
        config: ClusterConfig,
        broker: Arc<Broker>,
        journal: Arc<ClusterJournal>,
        proposals: mpsc::UnboundedReceiver<Proposal>,
    ) -> Result<Arc<Cluster>, ClusterError> {
        let creds = Credentials {
            cluster: config.name.clone(),
            secret: config.secret.clone(),
        };
        let log = LogStore::open(&config.dir)?;
        let j = journal.clone();
        let sm = StateMachine::open(
            config.dir.clone(),
            config.node_id,
            journal.replica().clone(),
            Arc::new(move |epoch, point| j.applied(epoch, point)),
        )?;
        let raft_config = Config {
            cluster_name: config.name.clone(),
            heartbeat_interval: config.heartbeat_ms,
            election_timeout_min: config.election_min_ms,
            election_timeout_max: config.election_max_ms,
            // Snapshots bound the log kept in memory and on disk.
            snapshot_policy: SnapshotPolicy::LogsSinceLast(5_000),
            max_in_snapshot_log_to_keep: 1_000,
            max_payload_entries: 256,
            ..Config::default()
        }
        .validate()
        .map_err(|e| ClusterError::Raft(e.to_string()))?;
        let network = Network {
            me: config.node_id,
            creds: creds.clone(),
            source: source_ip(&config),
        };
        let raft = Raft::new(config.node_id, Arc::new(raft_config), network, log, sm)
            .await
            .map_err(|e| ClusterError::Raft(e.to_string()))?;
        let listener = TcpListener::bind(config.listen)
            .await
            .map_err(|e| ClusterError::Listen(config.listen, e))?;
        let (route_tx, _) = watch::channel(0);
        let cluster = Arc::new(Cluster {
            config,
            creds,
            raft,
            journal,
            broker,
            amqp_addrs: Mutex::new(HashMap::new()),
            route_tx,
            materialized: Mutex::new(Vec::new()),
            amqp: Mutex::new(String::new()),
        });
        cluster.set_amqp_addr(cluster.config.amqp.clone());
        tokio::spawn(cluster.clone().accept(listener));
        tokio::spawn(propose(
            cluster.raft.clone(),
            cluster.journal.clone(),
            cluster.config.node_id,
            proposals,
        ));
        tokio::spawn(cluster.clone().watch_role());
        tokio::spawn(cluster.clone().learn_peers());
        cluster.initialize().await;
        Ok(cluster)
    }

    /// A node with an empty log among the configured peers forms the cluster with them.
    /// Every such node may do it: openraft accepts the same membership from several.
    async fn initialize(&self) {
        if !self
            .config
            .peers
            .iter()
            .any(|(id, _)| *id == self.config.node_id)
        {
            info!("cluster: this node is not among --cluster-peers; waiting to be added");
            return;
        }
        let initialized = self.raft.is_initialized().await.unwrap_or(true);
        if initialized {
            return;
        }
        let members: BTreeMap<NodeId, Member> = self
            .config
            .peers
            .iter()
            .map(|(id, addr)| (*id, Member { addr: addr.clone() }))
            .collect();
        match self.raft.initialize(members).await {
            Ok(()) => info!(
                "cluster: initialized with {} members",
                self.config.peers.len()
            ),
            Err(e) => debug!("cluster: initialize: {e}"),
        }
    }

    pub fn raft(&self) -> &Raft {
        &self.raft
    }

    pub fn node_id(&self) -> NodeId {
        self.config.node_id
    }

    /// This node's AMQP address, once its listener is bound.
    pub fn set_amqp_addr(&self, addr: String) {
        *self.amqp.lock() = addr.clone();
        self.amqp_addrs.lock().insert(self.config.node_id, addr);
    }

    /// Where a new client connection goes now.
    pub fn route(&self) -> Route {
        if self.journal.is_serving() {
            return Route::Serve;
        }
        let m = self.raft.metrics().borrow().clone();
        match m.current_leader.filter(|l| *l != self.config.node_id) {
            Some(leader) => match self.amqp_addrs.lock().get(&leader) {
                Some(addr) => Route::Proxy(addr.clone()),
                None => Route::Refuse,
            },
            None => Route::Refuse,
        }
    }

    /// Changes whenever [`Cluster::route`] may have changed.
    pub fn route_changes(&self) -> watch::Receiver<u64> {
        self.route_tx.subscribe()
    }

    /// The AMQP addresses of every member known (0-10's known-hosts).
    pub fn known_hosts(&self) -> Vec<String> {
        let mut v: Vec<String> = self.amqp_addrs.lock().values().cloned().collect();
        v.sort();
        v
    }

    async fn accept(self: Arc<Self>, listener: TcpListener) {
        loop {
            let (stream, peer) = match listener.accept().await {
                Ok(a) => a,
                Err(e) => {
                    warn!("cluster port: accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            let me = self.clone();
            tokio::spawn(async move {
                if let Err(e) = me.serve_peer(stream).await {
                    debug!(%peer, "cluster connection ended: {e}");
                }
            });
        }
    }

    async fn serve_peer(&self, mut s: TcpStream) -> Result<(), NetError> {
        s.set_nodelay(true)?;
        let peer = match net::accept_handshake(&mut s, &self.creds).await {
            Ok(id) => id,
            Err(e) => {
                warn!("cluster port: refused a peer: {e}");
                return Err(e);
            }
        };
        loop {
            let (k, payload) = net::read_frame(&mut s).await?;
            let reply = match Request::decode(k, &payload)? {
                Request::Append(req) => {
                    postcard::to_allocvec(&self.raft.append_entries(req).await)?
                }
                Request::Vote(req) => postcard::to_allocvec(&self.raft.vote(req).await)?,
                Request::Snapshot(req) => {
                    postcard::to_allocvec(&self.raft.install_snapshot(req).await)?
                }
                Request::Admin(req) => {
                    debug!(peer, ?req, "cluster admin request");
                    postcard::to_allocvec(&self.admin(req).await)?
                }
            };
            net::write_frame(&mut s, k, &reply).await?;
        }
    }

    /// This node's view, for `ferry cluster status`.
    pub fn status(&self) -> NodeStatus {
        let m = self.raft.metrics().borrow().clone();
        let membership = m.membership_config.membership();
        let voters: BTreeSet<NodeId> = membership.voter_ids().collect();
        let matched: BTreeMap<NodeId, Option<u64>> = m
            .replication
            .as_ref()
            .map(|r| r.iter().map(|(id, l)| (*id, l.map(|l| l.index))).collect())
            .unwrap_or_default();
        let members = membership
            .nodes()
            .map(|(id, n)| MemberStatus {
                id: *id,
                addr: n.addr.clone(),
                voter: voters.contains(id),
                matched: matched.get(id).copied().flatten(),
            })
            .collect();
        let queues = {
            let r = self.journal.replica().lock();
            r.queues
                .values()
                .map(|q| (q.name.clone(), q.messages.len() as u64))
                .collect()
        };
        NodeStatus {
            id: self.config.node_id,
            cluster: self.config.name.clone(),
            state: format!("{:?}", m.state).to_lowercase(),
            term: m.current_term,
            leader: m.current_leader,
            last_log_index: m.last_log_index,
            last_applied: m.last_applied.map(|l| l.index),
            snapshot: m.snapshot.map(|l| l.index),
            amqp: self.amqp.lock().clone(),
            serving: self.journal.is_serving(),
            members,
            queues,
            millis_since_quorum_ack: m.millis_since_quorum_ack,
            commit_latency_us: self.journal.commit_latency_us(),
        }
    }

    async fn admin(&self, req: AdminRequest) -> AdminResponse {
        let change = match req {
            AdminRequest::Status => return AdminResponse::Status(self.status()),
            AdminRequest::AddNode { id, addr } => {
                if let Some(r) = self.not_leader() {
                    return r;
                }
                // A learner first: it catches up without counting towards the majority.
                if let Err(e) = self.raft.add_learner(id, Member { addr }, true).await {
                    return AdminResponse::Error(e.to_string());
                }
                ChangeMembers::AddVoterIds([id].into_iter().collect())
            }
            AdminRequest::RemoveNode { id } => {
                if let Some(r) = self.not_leader() {
                    return r;
                }
                ChangeMembers::RemoveVoters([id].into_iter().collect())
            }
        };
        match self.raft.change_membership(change, false).await {
            Ok(r) => AdminResponse::Done(format!(
                "membership changed at log index {}",
                r.log_id.index
            )),
            Err(e) => AdminResponse::Error(e.to_string()),
        }
    }

    fn not_leader(&self) -> Option<AdminResponse> {
        let m = self.raft.metrics().borrow().clone();
        if m.current_leader == Some(self.config.node_id) {
            return None;
        }
        let leader = m.current_leader.and_then(|l| {
            m.membership_config
                .membership()
                .get_node(&l)
                .map(|n| (l, n.addr.clone()))
        });
        Some(AdminResponse::NotLeader { leader })
    }

    /// Whether this node should serve: it leads, has applied everything in its log (its
    /// own term's first entry included, so everything of earlier terms, and entries of an
    /// earlier lapse of this term too: the replica it restores the queues from is
    /// complete), and a majority answered recently (a leader cut off from the others stops
    /// serving before a new one is elected).
    /// (`serving`: whether it does now; the log conditions are for starting only, as a
    /// serving leader's log always runs ahead of what it applied.)
    fn should_serve(&self, m: &openraft::RaftMetrics<NodeId, Member>, serving: bool) -> bool {
        let lease = Duration::from_millis(self.config.election_max_ms);
        let caught_up = serving
            || (m
                .last_applied
                .is_some_and(|l| l.leader_id.term == m.current_term)
                && m.last_applied.map(|l| l.index) == m.last_log_index);
        m.state == ServerState::Leader
            && m.current_leader == Some(self.config.node_id)
            && caught_up
            && m.millis_since_quorum_ack
                .is_some_and(|ms| ms < lease.as_millis() as u64)
    }

    async fn watch_role(self: Arc<Self>) {
        let mut metrics = self.raft.metrics();
        let mut leader = None;
        loop {
            let m = metrics.borrow_and_update().clone();
            let serve = self.should_serve(&m, self.journal.is_serving());
            if serve && !self.journal.is_serving() {
                self.materialize();
                self.journal.start_serving(m.current_term);
                info!(
                    term = m.current_term,
                    "cluster: leader, serving replicated queues"
                );
                self.route_tx.send_modify(|n| *n += 1);
            } else if !serve && self.journal.is_serving() {
                warn!(term = m.current_term, state = ?m.state, "cluster: no longer serving replicated queues");
                self.journal.stop_serving();
                self.close_clients("cluster leader changed; reconnect");
                self.dematerialize();
                self.route_tx.send_modify(|n| *n += 1);
            }
            if m.current_leader != leader {
                leader = m.current_leader;
                info!(leader = ?leader, term = m.current_term, "cluster: leader changed");
                self.route_tx.send_modify(|n| *n += 1);
            }
            if m.running_state.is_err() {
                warn!("cluster: raft stopped");
                return;
            }
            // Also on a tick: the quorum lease runs out without any metrics change.
            tokio::select! {
                r = metrics.changed() => if r.is_err() { return },
                _ = tokio::time::sleep(Duration::from_millis(100)) => {}
            }
        }
    }

    /// Closes every client connection (their unconfirmed publishes fail with them).
    fn close_clients(&self, reason: &str) {
        let conns = self.broker.connections();
        for c in conns.list() {
            conns.close(c.id, reason);
        }
    }

    /// Gives the core the replicated queues, their bindings and messages (marked
    /// redelivered: the previous leader may have delivered them).
    fn materialize(&self) {
        let replica = self.journal.replica().lock().clone();
        let mut names = Vec::new();
        for (id, q) in &replica.queues {
            let Some(Record::QueueDeclare(rec)) = decode(rkind::QUEUE_DECLARE, &q.record) else {
                warn!(queue = q.name, "cluster: undecodable queue record; skipped");
                continue;
            };
            if let Some(old) = self.broker.queue(&q.name) {
                // A local queue of that name (declared before the cluster knew better).
                warn!(
                    queue = q.name,
                    durable = old.is_durable(),
                    "cluster: a local queue has a replicated queue's name; replaced"
                );
                let _ = self.broker.delete_queue(&q.name, false, false, 0);
            }
            let alternate = rec
                .alternate
                .clone()
                .filter(|a| self.broker.exchange(a).is_some());
            let opts = QueueOptions {
                durable: true,
                auto_delete: rec.auto_delete,
                alternate_exchange: alternate,
                limits: rec.limits,
                arguments: rec.arguments.clone(),
                ..QueueOptions::default()
            };
            let queue = match self.broker.restore_queue(&q.name, opts, *id) {
                Ok(queue) => queue,
                Err(e) => {
                    warn!(
                        queue = q.name,
                        "cluster: cannot restore replicated queue: {e}"
                    );
                    continue;
                }
            };
            let messages = q.messages.iter().filter_map(|(mid, content)| {
                let mut m = ferry_store::record::message_from_content(content.clone()).ok()?;
                m.store_id = Some(*mid);
                Some(RestoredMessage {
                    message: Restored::InMemory(m.build()),
                    returns: q.returns.get(mid).copied().unwrap_or(0),
                })
            });
            queue.restore(messages.collect::<Vec<_>>());
            for (exchange, key, args) in &q.bindings {
                let arguments = crate::journal::binding_arguments(args);
                if let Err(e) = self
                    .broker
                    .restore_binding(&q.name, exchange, key, &arguments)
                {
                    warn!(
                        queue = q.name,
                        exchange, "cluster: binding not restored: {e}"
                    );
                }
            }
            names.push(q.name.clone());
        }
        info!(
            queues = names.len(),
            messages = replica.message_count(),
            "cluster: replicated queues restored from the replica"
        );
        *self.materialized.lock() = names;
    }

    /// Takes the replicated queues out of the core (the replica keeps them). Nothing is
    /// proposed: the journal is not serving any more.
    fn dematerialize(&self) {
        let names = std::mem::take(&mut *self.materialized.lock());
        for name in names {
            let _ = self.broker.purge_queue(&name);
            let _ = self.broker.delete_queue(&name, false, false, 0);
        }
    }

    /// Polls every member for its AMQP address (and so learns new members').
    async fn learn_peers(self: Arc<Self>) {
        loop {
            let members: Vec<(NodeId, String)> = {
                let m = self.raft.metrics().borrow().clone();
                m.membership_config
                    .membership()
                    .nodes()
                    .map(|(id, n)| (*id, n.addr.clone()))
                    .collect()
            };
            let mut changed = false;
            {
                // Removed members leave the known-hosts list.
                let mut known = self.amqp_addrs.lock();
                let before = known.len();
                let me = self.config.node_id;
                known.retain(|id, _| *id == me || members.iter().any(|(m, _)| m == id));
                changed |= known.len() != before;
            }
            for (id, addr) in members {
                if id == self.config.node_id {
                    continue;
                }
                let answer = rpc::admin(
                    &addr,
                    &self.creds,
                    &AdminRequest::Status,
                    Duration::from_secs(1),
                )
                .await;
                if let Ok(AdminResponse::Status(s)) = answer {
                    let mut known = self.amqp_addrs.lock();
                    if known.get(&id) != Some(&s.amqp) {
                        known.insert(id, s.amqp);
                        changed = true;
                    }
                }
            }
            if changed {
                self.route_tx.send_modify(|n| *n += 1);
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }

    pub async fn shutdown(&self) {
        let _ = self.raft.shutdown().await;
    }
}

/// Outgoing cluster connections leave from the cluster port's interface, unless that is
/// the wildcard address.
fn source_ip(config: &ClusterConfig) -> Option<std::net::IpAddr> {
    Some(config.listen.ip()).filter(|ip| !ip.is_unspecified())
}

/// Sends proposals to Raft in order, many operations per entry (see
/// [`ClusterJournal::gather`]).
async fn propose(
    raft: Raft,
    journal: Arc<ClusterJournal>,
    me: NodeId,
    mut rx: mpsc::UnboundedReceiver<Proposal>,
) {
    // Answers are awaited in order by a task of their own (openraft complains of answers
    // nobody takes); completion itself is seen when an entry is applied here.
    let (answers, mut pending) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Some(answer) = pending.recv().await {
            let _ = answer.await;
        }
    });
    while let Some(first) = rx.recv().await {
        let (batch, closed) = journal.gather(first, &mut rx, me).await;
        if batch.epoch != journal.epoch() {
            if closed {
                return;
            }
            continue;
        }
        // A refused proposal means leadership is lost, which the watcher sees.
        match raft.client_write_ff(batch).await {
            Ok(answer) => {
                let _ = answers.send(answer);
            }
            Err(e) => {
                warn!("cluster: raft stopped: {e}");
                return;
            }
        }
        if closed {
            return;
        }
    }
}
