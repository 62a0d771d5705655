//! ferryd in a cluster (`--cluster-name`): the store under a cluster journal, the Raft
//! node, and the gate that sends client connections to the leader.

use std::net::SocketAddr;
use std::sync::Arc;

use ferry_cluster::{Cluster, ClusterConfig, ClusterJournal, Route};
use ferry_core::{Broker, BrokerConfig, Journal};
use ferry_server::{Gate, GateHandle, GateRoute};
use ferry_store::Store;
use tokio::sync::watch;

use crate::options::{parse_peers, Options};

/// The broker over a cluster journal (over the store of `--data-dir`, recovered first),
/// and the started cluster node.
pub async fn open(
    options: &Options,
    broker_config: BrokerConfig,
    store: Arc<Store>,
    recovered: ferry_store::Recovered,
) -> Result<(Arc<Broker>, Arc<Cluster>), String> {
    let (Some(name), Some(node_id), Some(secret_file)) = (
        &options.cluster_name,
        options.node_id,
        &options.cluster_secret_file,
    ) else {
        return Err("--cluster-name needs --node-id and --cluster-secret-file".into());
    };
    let Some(dir) = options.data_dir() else {
        return Err("a cluster node needs a data directory (--data-dir)".into());
    };
    let secret = read_secret(secret_file)?;
    let peers = parse_peers(&options.cluster_peers).map_err(|e| format!("--cluster-peers: {e}"))?;
    let own = peers
        .iter()
        .find(|(id, _)| *id == node_id)
        .map(|(_, a)| a.clone());
    let port = match (options.cluster_port, &own) {
        (Some(p), _) => p,
        (None, Some(addr)) => addr
            .rsplit_once(':')
            .and_then(|(_, p)| p.parse().ok())
            .ok_or_else(|| format!("--cluster-peers: bad port in {addr}"))?,
        (None, None) if options.port != 0 => options.port.saturating_add(1000),
        (None, None) => return Err("--port 0 in a cluster needs --cluster-port".into()),
    };
    let (journal, proposals) = ClusterJournal::new(store.clone() as Arc<dyn Journal>, node_id);
    let broker = Broker::with_journal(broker_config, journal.clone());
    recovered.restore(&broker);
    let election = options.cluster_election_timeout;
    let config = ClusterConfig {
        name: name.clone(),
        node_id,
        peers,
        listen: SocketAddr::new(options.interface, port),
        secret,
        dir: dir.join("raft"),
        // Until the listener is bound (--port 0): set again then.
        amqp: format!("{}:{}", options.interface, options.port),
        heartbeat_ms: (election / 5).max(10),
        election_min_ms: election,
        election_max_ms: election * 2,
    };
    let cluster = Cluster::start(config, broker.clone(), journal, proposals)
        .await
        .map_err(|e| e.to_string())?;
    Ok((broker, cluster))
}

fn read_secret(path: &std::path::Path) -> Result<Vec<u8>, String> {
    use std::os::unix::fs::PermissionsExt;
    let meta = std::fs::metadata(path)
        .map_err(|e| format!("--cluster-secret-file {}: {e}", path.display()))?;
    if meta.permissions().mode() & 0o077 != 0 {
        tracing::warn!(
            "--cluster-secret-file {} is readable by others than its owner",
            path.display()
        );
    }
    let text = std::fs::read(path)
        .map_err(|e| format!("--cluster-secret-file {}: {e}", path.display()))?;
    let secret = text.trim_ascii().to_vec();
    if secret.len() < 16 {
        return Err(format!(
            "--cluster-secret-file {}: the secret must be at least 16 bytes",
            path.display()
        ));
    }
    Ok(secret)
}

/// The cluster as the AMQP listener's gate.
pub struct ClusterGate(pub Arc<Cluster>);

impl Gate for ClusterGate {
    fn route(&self) -> GateRoute {
        match self.0.route() {
            Route::Serve => GateRoute::Serve,
            Route::Proxy(addr) => GateRoute::Proxy(addr),
            Route::Refuse => GateRoute::Refuse,
        }
    }

    fn changes(&self) -> watch::Receiver<u64> {
        self.0.route_changes()
    }

    fn known_hosts(&self) -> Vec<String> {
        self.0.known_hosts()
    }
}

pub fn gate(cluster: &Arc<Cluster>) -> GateHandle {
    GateHandle(Arc::new(ClusterGate(cluster.clone())))
}
