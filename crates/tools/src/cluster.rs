//! `ferry cluster`: a ferryd cluster's members, leader, term, log positions and lag, and
//! membership changes, over the cluster port (authenticated with the cluster's secret).

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Subcommand};
use ferry_cluster::{AdminRequest, AdminResponse, Credentials, NodeStatus};

use crate::ToolError;

#[derive(Debug, Args)]
pub struct ClusterOpts {
    /// A member's cluster address (host:port); more may follow, comma-separated: the
    /// first that answers is asked.
    #[arg(long, short = 'n', value_delimiter = ',', required = true)]
    pub node: Vec<String>,
    /// The cluster's name (--cluster-name of ferryd).
    #[arg(long)]
    pub cluster_name: String,
    /// The file holding the cluster's secret (--cluster-secret-file of ferryd).
    #[arg(long)]
    pub secret_file: PathBuf,
    /// Give up on a node after this many milliseconds.
    #[arg(long, default_value_t = 3000)]
    pub timeout: u64,
    #[command(subcommand)]
    pub cmd: ClusterCmd,
}

#[derive(Debug, Subcommand)]
pub enum ClusterCmd {
    /// Members, leader, term, commit positions and each member's lag.
    Status {
        /// Print JSON-like debug output instead of a table.
        #[arg(long)]
        raw: bool,
    },
    /// Adds a node (started with --cluster-peers not listing it, or listing the cluster):
    /// it catches up as a learner, then becomes a voter.
    AddNode {
        /// Its node id (unique, never reused).
        id: u64,
        /// Its cluster address (host:port).
        addr: String,
    },
    /// Removes a node from the membership (stop it afterwards).
    RemoveNode { id: u64 },
}

fn creds(o: &ClusterOpts) -> Result<Credentials, ToolError> {
    let text = std::fs::read(&o.secret_file)
        .map_err(|e| ToolError::io(format!("reading {}", o.secret_file.display()), e))?;
    Ok(Credentials {
        cluster: o.cluster_name.clone(),
        secret: text.trim_ascii().to_vec(),
    })
}

pub fn command(o: &ClusterOpts) -> Result<(), ToolError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| ToolError::io("starting a runtime", e))?;
    rt.block_on(run(o))
}

async fn ask(
    addr: &str,
    c: &Credentials,
    req: &AdminRequest,
    t: Duration,
) -> Result<AdminResponse, ToolError> {
    ferry_cluster::rpc::admin(addr, c, req, t)
        .await
        .map_err(|e| ToolError::Cluster(format!("{addr}: {e}")))
}

/// The first listed node's answer.
async fn any(
    o: &ClusterOpts,
    c: &Credentials,
    req: &AdminRequest,
) -> Result<(String, AdminResponse), ToolError> {
    let t = Duration::from_millis(o.timeout);
    let mut last = None;
    for addr in &o.node {
        match ask(addr, c, req, t).await {
            Ok(r) => return Ok((addr.clone(), r)),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| ToolError::InvalidOptions("no --node given".into())))
}

async fn run(o: &ClusterOpts) -> Result<(), ToolError> {
    let c = creds(o)?;
    let t = Duration::from_millis(o.timeout);
    match &o.cmd {
        ClusterCmd::Status { raw } => {
            let (_, first) = any(o, &c, &AdminRequest::Status).await?;
            let AdminResponse::Status(first) = first else {
                return Err(ToolError::Cluster(format!("unexpected answer {first:?}")));
            };
            // Every member's own view, for its log position and role.
            let mut views = Vec::new();
            for m in &first.members {
                let view = match ask(&m.addr, &c, &AdminRequest::Status, t).await {
                    Ok(AdminResponse::Status(s)) => Some(s),
                    _ => None,
                };
                views.push((m.clone(), view));
            }
            if *raw {
                println!("{first:#?}");
                for (_, v) in &views {
                    println!("{v:#?}");
                }
                return Ok(());
            }
            print!("{}", render(&first, &views));
            Ok(())
        }
        ClusterCmd::AddNode { id, addr } => {
            change(
                o,
                &c,
                AdminRequest::AddNode {
                    id: *id,
                    addr: addr.clone(),
                },
            )
            .await
        }
        ClusterCmd::RemoveNode { id } => change(o, &c, AdminRequest::RemoveNode { id: *id }).await,
    }
}

/// Sends a membership change to the leader (following a not-leader answer once).
async fn change(o: &ClusterOpts, c: &Credentials, req: AdminRequest) -> Result<(), ToolError> {
    let t = Duration::from_secs(60).max(Duration::from_millis(o.timeout));
    let (_, mut answer) = any(o, c, &req).await?;
    if let AdminResponse::NotLeader {
        leader: Some((_, addr)),
    } = &answer
    {
        answer = ask(addr, c, &req, t).await?;
    }
    match answer {
        AdminResponse::Done(text) => {
            println!("{text}");
            Ok(())
        }
        AdminResponse::NotLeader { .. } => {
            Err(ToolError::Cluster("no leader now; try again".into()))
        }
        AdminResponse::Error(e) => Err(ToolError::Cluster(e)),
        other => Err(ToolError::Cluster(format!("unexpected answer {other:?}"))),
    }
}

fn opt(v: Option<u64>) -> String {
    v.map_or("-".into(), |v| v.to_string())
}

/// The status table: one line per member.
pub fn render(
    first: &NodeStatus,
    views: &[(ferry_cluster::MemberStatus, Option<NodeStatus>)],
) -> String {
    let leader_log = views
        .iter()
        .filter_map(|(_, v)| v.as_ref())
        .find(|v| v.state == "leader")
        .and_then(|v| v.last_log_index);
    let mut out = format!(
        "cluster {}  leader {}  term {}\n",
        first.cluster,
        opt(first.leader),
        first.term
    );
    out.push_str(&format!(
        "{:>4}  {:<22} {:<22} {:<9} {:<6} {:>10} {:>10} {:>6}\n",
        "id", "cluster address", "amqp address", "state", "voter", "log", "applied", "lag"
    ));
    for (m, v) in views {
        let (amqp, state, log, applied) = match v {
            Some(v) => (
                v.amqp.clone(),
                v.state.clone(),
                v.last_log_index,
                v.last_applied,
            ),
            None => ("-".into(), "unreachable".into(), None, None),
        };
        let lag = match (leader_log, applied) {
            (Some(l), Some(a)) => l.saturating_sub(a).to_string(),
            _ => "-".into(),
        };
        out.push_str(&format!(
            "{:>4}  {:<22} {:<22} {:<9} {:<6} {:>10} {:>10} {:>6}\n",
            m.id,
            m.addr,
            amqp,
            state,
            if m.voter { "yes" } else { "no" },
            opt(log),
            opt(applied),
            lag
        ));
    }
    if let Some(leader) = views
        .iter()
        .filter_map(|(_, v)| v.as_ref())
        .find(|v| v.state == "leader")
    {
        if leader.commit_latency_us > 0 {
            out.push_str(&format!(
                "commit latency (moving average): {:.2} ms\n",
                leader.commit_latency_us as f64 / 1000.0
            ));
        }
        for (name, n) in &leader.queues {
            out.push_str(&format!("replicated queue {name}: {n} messages\n"));
        }
    }
    out
}
