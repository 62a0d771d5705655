//! The cluster under test: ferryd processes on loopback addresses 127.0.0.11, .12, ...,
//! each with its own data directory, AMQP port and cluster port, members knowing each
//! other through the partition proxies. Processes are killed (SIGKILL), paused (SIGSTOP)
//! and resumed (SIGCONT) by their pid; dropping [`Nodes`] kills them all.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferry_cluster::{AdminRequest, AdminResponse, Credentials, NodeStatus};
use tokio::net::TcpListener;

use super::proxy::{self, Partitions};
use crate::ToolError;

pub const CLUSTER_NAME: &str = "chaos";
const SECRET: &str = "ferry-chaos-test-secret-0123456789";

#[derive(Debug, Clone)]
pub struct NodeSpec {
    pub id: u64,
    pub ip: Ipv4Addr,
    pub amqp: SocketAddr,
    /// The node's own cluster port.
    pub cluster: SocketAddr,
    /// Its proxy: the address the membership knows it by.
    pub proxy: SocketAddr,
    pub data_dir: PathBuf,
    pub log: PathBuf,
}

pub struct Nodes {
    ferryd: PathBuf,
    pub specs: Vec<NodeSpec>,
    children: Vec<Option<Child>>,
    paused: Vec<bool>,
    pub partitions: Arc<Partitions>,
    secret_file: PathBuf,
    election_ms: u64,
    pub creds: Credentials,
    /// Extra ferryd arguments for every node.
    extra: Vec<String>,
    /// Nodes 1..=initial form the cluster; later ones wait to be added.
    pub initial: u64,
}

/// A free TCP port on `ip` (bound and released: the usual small race).
pub fn free_port(ip: Ipv4Addr) -> Result<u16, ToolError> {
    let l = std::net::TcpListener::bind((ip, 0))
        .map_err(|e| ToolError::io("finding a free port", e))?;
    l.local_addr()
        .map(|a| a.port())
        .map_err(|e| ToolError::io("finding a free port", e))
}

impl NodeSpec {
    pub fn new(id: u64, dir: &Path) -> Result<NodeSpec, ToolError> {
        // One loopback address per node, 127.0.0.11 to 127.0.0.254.
        let last = u8::try_from(10 + id)
            .ok()
            .filter(|o| *o > 10 && *o < 255)
            .ok_or_else(|| {
                ToolError::InvalidOptions(format!("node id {id}: at most 244 nodes per run"))
            })?;
        let ip = Ipv4Addr::new(127, 0, 0, last);
        Ok(NodeSpec {
            id,
            ip,
            amqp: SocketAddr::new(IpAddr::V4(ip), free_port(ip)?),
            cluster: SocketAddr::new(IpAddr::V4(ip), free_port(ip)?),
            proxy: SocketAddr::new(
                IpAddr::V4(Ipv4Addr::LOCALHOST),
                free_port(Ipv4Addr::LOCALHOST)?,
            ),
            data_dir: dir.join(format!("node{id}")),
            log: dir.join(format!("node{id}.log")),
        })
    }
}

impl Nodes {
    /// Prepares `n` nodes under `dir` and starts their proxies (on the current runtime);
    /// starts no process yet.
    pub async fn new(
        ferryd: &Path,
        dir: &Path,
        n: u64,
        election_ms: u64,
        extra: &[String],
    ) -> Result<Nodes, ToolError> {
        std::fs::create_dir_all(dir)
            .map_err(|e| ToolError::io(format!("creating {}", dir.display()), e))?;
        let secret_file = dir.join("secret");
        std::fs::write(&secret_file, SECRET).map_err(|e| ToolError::io("writing the secret", e))?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(&secret_file, std::fs::Permissions::from_mode(0o600));
        }
        let partitions = Partitions::new();
        let mut specs = Vec::new();
        for id in 1..=n {
            let spec = NodeSpec::new(id, dir)?;
            let listener = TcpListener::bind(spec.proxy)
                .await
                .map_err(|e| ToolError::io("binding a partition proxy", e))?;
            tokio::spawn(proxy::serve(listener, spec.cluster, id, partitions.clone()));
            specs.push(spec);
        }
        Ok(Nodes {
            ferryd: ferryd.to_path_buf(),
            children: specs.iter().map(|_| None).collect(),
            paused: specs.iter().map(|_| false).collect(),
            specs,
            partitions,
            secret_file,
            election_ms,
            creds: Credentials {
                cluster: CLUSTER_NAME.into(),
                secret: SECRET.as_bytes().to_vec(),
            },
            extra: extra.to_vec(),
            initial: n,
        })
    }

    /// Starts node `id` (1-based), as an initial member or (with `member: false`) as a node
    /// waiting to be added.
    pub fn spawn(&mut self, id: u64, member: bool) -> Result<(), ToolError> {
        let i = (id - 1) as usize;
        let spec = self.specs[i].clone();
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&spec.log)
            .map_err(|e| ToolError::io("opening a node log", e))?;
        let peers = if member {
            self.specs
                .iter()
                .filter(|s| s.id <= self.initial)
                .map(|s| format!("{}={}", s.id, s.proxy))
                .collect::<Vec<_>>()
                .join(",")
        } else {
            String::new()
        };
        let child = Command::new(&self.ferryd)
            .args(["--port", &spec.amqp.port().to_string()])
            .args(["--interface", &spec.ip.to_string()])
            .args(["--auth", "no", "--log-to-stderr", "yes"])
            .arg(format!("--data-dir={}", spec.data_dir.display()))
            .args(["--cluster-name", CLUSTER_NAME])
            .args(["--node-id", &id.to_string()])
            .arg(format!("--cluster-peers={peers}"))
            .args(["--cluster-port", &spec.cluster.port().to_string()])
            .arg(format!(
                "--cluster-secret-file={}",
                self.secret_file.display()
            ))
            .args(["--cluster-election-timeout", &self.election_ms.to_string()])
            .args(["--memory-high-watermark", "0", "--disk-free-limit", "0"])
            .args(&self.extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(log))
            .spawn()
            .map_err(|e| ToolError::io(format!("starting {}", self.ferryd.display()), e))?;
        self.children[i] = Some(child);
        self.paused[i] = false;
        Ok(())
    }

    /// Prepares one more node (not started), with the next id; returns the id.
    pub fn add_spec(&mut self, dir: &Path) -> Result<u64, ToolError> {
        let id = self.specs.len() as u64 + 1;
        let spec = NodeSpec::new(id, dir)?;
        let listener = std::net::TcpListener::bind(spec.proxy)
            .and_then(|l| l.set_nonblocking(true).map(|()| l))
            .and_then(TcpListener::from_std)
            .map_err(|e| ToolError::io("binding a partition proxy", e))?;
        tokio::spawn(proxy::serve(
            listener,
            spec.cluster,
            id,
            self.partitions.clone(),
        ));
        self.specs.push(spec);
        self.children.push(None);
        self.paused.push(false);
        Ok(id)
    }

    pub fn is_running(&self, id: u64) -> bool {
        self.children[(id - 1) as usize].is_some()
    }

    fn pid(&self, id: u64) -> Option<i32> {
        self.children[(id - 1) as usize]
            .as_ref()
            .map(|c| c.id() as i32)
    }

    fn signal(&self, id: u64, sig: i32) {
        if let Some(pid) = self.pid(id) {
            // SAFETY: kill(2) on the pid of a child we spawned and have not reaped.
            unsafe {
                libc::kill(pid, sig);
            }
        }
    }

    /// SIGKILL, and reap.
    pub fn kill(&mut self, id: u64) {
        let i = (id - 1) as usize;
        if let Some(mut c) = self.children[i].take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        self.paused[i] = false;
    }

    pub fn pause(&mut self, id: u64) {
        self.signal(id, libc::SIGSTOP);
        self.paused[(id - 1) as usize] = true;
    }

    pub fn resume(&mut self, id: u64) {
        self.signal(id, libc::SIGCONT);
        self.paused[(id - 1) as usize] = false;
    }

    /// Resumes and restarts whatever is paused or dead, and heals partitions.
    pub fn heal_all(&mut self) -> Result<(), ToolError> {
        self.partitions.heal();
        for id in 1..=self.specs.len() as u64 {
            if self.paused[(id - 1) as usize] {
                self.resume(id);
            }
        }
        Ok(())
    }

    pub fn amqp_addrs(&self) -> Vec<SocketAddr> {
        self.specs.iter().map(|s| s.amqp).collect()
    }

    /// Node `id`'s own view (over its cluster port directly, never partitioned).
    pub async fn status(&self, id: u64) -> Option<NodeStatus> {
        let addr = self.specs[(id - 1) as usize].cluster.to_string();
        match ferry_cluster::rpc::admin(
            &addr,
            &self.creds,
            &AdminRequest::Status,
            Duration::from_millis(500),
        )
        .await
        {
            Ok(AdminResponse::Status(s)) => Some(s),
            _ => None,
        }
    }

    /// Sends a membership change to whichever node leads.
    pub async fn admin_to_leader(&self, req: AdminRequest) -> Result<String, ToolError> {
        let Some(leader) = self.wait_serving(Duration::from_secs(20)).await else {
            return Err(ToolError::Cluster("no leader".into()));
        };
        let addr = self.specs[(leader - 1) as usize].cluster.to_string();
        match ferry_cluster::rpc::admin(&addr, &self.creds, &req, Duration::from_secs(60)).await {
            Ok(AdminResponse::Done(t)) => Ok(t),
            Ok(other) => Err(ToolError::Cluster(format!("{other:?}"))),
            Err(e) => Err(ToolError::Cluster(e.to_string())),
        }
    }

    /// The node that serves replicated queues, once one does (within `limit`).
    pub async fn wait_serving(&self, limit: Duration) -> Option<u64> {
        let deadline = Instant::now() + limit;
        loop {
            for s in &self.specs {
                if self.is_running(s.id) && !self.paused[(s.id - 1) as usize] {
                    if let Some(st) = self.status(s.id).await {
                        if st.serving {
                            return Some(s.id);
                        }
                    }
                }
            }
            if Instant::now() >= deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

impl Drop for Nodes {
    fn drop(&mut self) {
        for id in 1..=self.specs.len() as u64 {
            self.resume(id);
            self.kill(id);
        }
    }
}
