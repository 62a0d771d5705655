//! `ferry chaos`: a Jepsen-style test of replicated queues. It starts a cluster of ferryd
//! processes on loopback addresses (`nodes`), runs publishers with confirms and consumers
//! against it (`workload`), and meanwhile a nemesis on a seeded schedule kills nodes
//! (SIGKILL, then restarts them on their data), pauses them (SIGSTOP/SIGCONT), cuts one
//! off from the others (`proxy`) or replaces a member (removes it, starts a new node and
//! adds it). Then it heals everything, drains the queue and checks the history (`check`):
//! no confirmed message may be lost; duplicates and unexpected messages are counted.

pub mod check;
pub mod nodes;
pub mod proxy;
pub mod workload;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::Args;
use ferry_cluster::AdminRequest;

use crate::ToolError;
use check::Verdict;
use nodes::Nodes;
use workload::History;

#[derive(Debug, Clone, Args)]
pub struct ChaosOpts {
    /// The ferryd binary (default: beside this program).
    #[arg(long)]
    pub ferryd: Option<PathBuf>,
    /// Where the nodes' data and logs go (default: a new directory under the system's
    /// temporary directory, removed afterwards unless --keep).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Keep the data and logs.
    #[arg(long)]
    pub keep: bool,
    /// Seconds of faults under traffic.
    #[arg(long, default_value_t = 60)]
    pub duration: u64,
    /// Seed of the fault schedule (default: from the clock; printed).
    #[arg(long)]
    pub seed: Option<u64>,
    #[arg(long, default_value_t = 3)]
    pub nodes: u64,
    #[arg(long, default_value_t = 2)]
    pub publishers: usize,
    #[arg(long, default_value_t = 2)]
    pub consumers: usize,
    /// Messages per second per publisher (0: as fast as confirms allow).
    #[arg(long, default_value_t = 200)]
    pub rate: u64,
    /// Messages per confirmed batch.
    #[arg(long, default_value_t = 20)]
    pub batch: usize,
    /// Faults to inject: any of kill, pause, partition, member.
    #[arg(long, value_delimiter = ',', default_value = "kill,pause,partition")]
    pub faults: Vec<String>,
    /// Milliseconds between the end of one fault and the start of the next.
    #[arg(long, default_value_t = 3000)]
    pub interval: u64,
    /// Raft election timeout of the nodes (ms).
    #[arg(long, default_value_t = 500)]
    pub election_timeout: u64,
    /// Seconds the final drain may take.
    #[arg(long, default_value_t = 90)]
    pub drain_timeout: u64,
}

/// What a run did and found.
#[derive(Debug, Clone, Default)]
pub struct Report {
    pub seed: u64,
    pub seconds: f64,
    pub kills: u64,
    pub pauses: u64,
    pub partitions: u64,
    pub member_changes: u64,
    pub verdict: Verdict,
    pub reconnects: u64,
    /// The drain finished (the queue was empty at the end).
    pub drained: bool,
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let v = &self.verdict;
        writeln!(
            f,
            "chaos: seed {}, {:.0} s; faults: {} kill -9, {} pause, {} partition, {} membership change",
            self.seed, self.seconds, self.kills, self.pauses, self.partitions, self.member_changes
        )?;
        writeln!(
            f,
            "chaos: published {} (confirmed {}), received {} distinct in {} deliveries, {} client (re)connections",
            v.attempted, v.confirmed, v.received, v.deliveries, self.reconnects
        )?;
        writeln!(
            f,
            "chaos: lost {}, duplicated {}, unexpected {}, unconfirmed but delivered {}{}",
            v.lost,
            v.duplicated,
            v.unexpected,
            v.unconfirmed_received,
            if self.drained {
                ""
            } else {
                " (drain incomplete)"
            }
        )?;
        if !v.lost_sample.is_empty() {
            writeln!(f, "chaos: lost e.g. {:?}", v.lost_sample)?;
        }
        Ok(())
    }
}

/// xorshift64*: the schedule must replay from its seed, nothing more.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
}

pub fn command(o: &ChaosOpts) -> Result<(), ToolError> {
    let report = run(o)?;
    print!("{report}");
    if report.verdict.ok() && report.drained {
        Ok(())
    } else {
        Err(ToolError::Chaos("the checker found a violation".into()))
    }
}

/// Runs a whole chaos test (blocking; starts its own runtime).
pub fn run(o: &ChaosOpts) -> Result<Report, ToolError> {
    let ferryd = match &o.ferryd {
        Some(p) => p.clone(),
        None => std::env::current_exe()
            .map_err(|e| ToolError::io("finding ferryd", e))?
            .with_file_name("ferryd"),
    };
    let (dir, remove) = match &o.dir {
        Some(d) => (d.clone(), false),
        None => (
            std::env::temp_dir().join(format!(
                "ferry-chaos-{}-{}",
                std::process::id(),
                crate::chaos::now_nanos()
            )),
            !o.keep,
        ),
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| ToolError::io("starting a runtime", e))?;
    let result = rt.block_on(run_async(o, &ferryd, &dir));
    rt.shutdown_timeout(Duration::from_secs(2));
    if remove && result.as_ref().is_ok_and(|r| r.verdict.ok()) {
        let _ = std::fs::remove_dir_all(&dir);
    } else {
        eprintln!("chaos: data and logs kept in {}", dir.display());
    }
    result
}

pub(crate) fn now_nanos() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

async fn run_async(
    o: &ChaosOpts,
    ferryd: &std::path::Path,
    dir: &std::path::Path,
) -> Result<Report, ToolError> {
    let seed = o.seed.unwrap_or_else(now_nanos);
    let mut rng = Rng::new(seed);
    eprintln!(
        "chaos: seed {seed}, {} nodes under {}",
        o.nodes,
        dir.display()
    );
    let mut nodes = Nodes::new(ferryd, dir, o.nodes, o.election_timeout, &[]).await?;
    for id in 1..=o.nodes {
        nodes.spawn(id, true)?;
    }
    if nodes.wait_serving(Duration::from_secs(30)).await.is_none() {
        return Err(ToolError::Chaos(
            "the cluster elected no leader within 30 s".into(),
        ));
    }
    let queue = "chaos".to_string();
    let history = Arc::new(Mutex::new(History::default()));
    let stop_pub = Arc::new(AtomicBool::new(false));
    let stop_con = Arc::new(AtomicBool::new(false));
    let epoch = Instant::now();
    let last_delivery = Arc::new(AtomicU64::new(0));
    let mut members: Vec<u64> = (1..=o.nodes).collect();
    let addrs: workload::Addrs = Arc::new(Mutex::new(nodes.amqp_addrs()));
    let mut tasks = Vec::new();
    for n in 0..o.consumers {
        tasks.push(tokio::spawn(workload::consumer(
            n,
            addrs.clone(),
            queue.clone(),
            history.clone(),
            stop_con.clone(),
            epoch,
            last_delivery.clone(),
        )));
    }
    let mut publishers = Vec::new();
    for n in 0..o.publishers {
        publishers.push(tokio::spawn(workload::publisher(
            n,
            addrs.clone(),
            queue.clone(),
            o.batch.max(1),
            o.rate,
            history.clone(),
            stop_pub.clone(),
        )));
    }
    let mut report = Report {
        seed,
        ..Report::default()
    };
    let faults: Vec<String> = o.faults.iter().map(|f| f.trim().to_lowercase()).collect();
    let end = Instant::now() + Duration::from_secs(o.duration);
    while Instant::now() < end && !faults.is_empty() {
        tokio::time::sleep(Duration::from_millis(o.interval)).await;
        let fault = faults[rng.below(faults.len() as u64) as usize].clone();
        // Half the time the leader, else any member.
        let leader = nodes.wait_serving(Duration::from_millis(500)).await;
        let target = match leader {
            Some(l) if rng.below(2) == 0 => l,
            _ => members[rng.below(members.len() as u64) as usize],
        };
        let hold = Duration::from_millis(1000 + rng.below(3000));
        match fault.as_str() {
            "kill" => {
                eprintln!("chaos: kill -9 node {target} for {hold:?}");
                nodes.kill(target);
                tokio::time::sleep(hold).await;
                nodes.spawn(target, true)?;
                report.kills += 1;
            }
            "pause" => {
                eprintln!("chaos: pause node {target} for {hold:?}");
                nodes.pause(target);
                tokio::time::sleep(hold).await;
                nodes.resume(target);
                report.pauses += 1;
            }
            "partition" => {
                let others: Vec<u64> = members.iter().copied().filter(|m| *m != target).collect();
                eprintln!("chaos: partition node {target} from {others:?} for {hold:?}");
                nodes.partitions.isolate(target, &others);
                tokio::time::sleep(hold).await;
                nodes.partitions.heal();
                report.partitions += 1;
            }
            "member" => {
                // Replace a follower: remove it, stop it, start a new node, add it.
                let Some(old) = members.iter().copied().find(|m| Some(*m) != leader) else {
                    continue;
                };
                let new = match nodes.add_spec(dir) {
                    Ok(id) => id,
                    Err(e) => {
                        eprintln!("chaos: no more member changes: {e}");
                        continue;
                    }
                };
                eprintln!("chaos: replace member {old} with new node {new}");
                match nodes
                    .admin_to_leader(AdminRequest::RemoveNode { id: old })
                    .await
                {
                    Ok(_) => {
                        nodes.kill(old);
                        members.retain(|m| *m != old);
                    }
                    Err(e) => eprintln!("chaos: remove-node {old}: {e}"),
                }
                nodes.spawn(new, false)?;
                let addr = nodes.specs[(new - 1) as usize].proxy.to_string();
                match nodes
                    .admin_to_leader(AdminRequest::AddNode { id: new, addr })
                    .await
                {
                    Ok(_) => members.push(new),
                    Err(e) => eprintln!("chaos: add-node {new}: {e}"),
                }
                // Clients reconnect to the current members only.
                if let Ok(mut a) = addrs.lock() {
                    *a = members
                        .iter()
                        .map(|m| nodes.specs[(*m - 1) as usize].amqp)
                        .collect();
                }
                report.member_changes += 1;
            }
            other => return Err(ToolError::InvalidOptions(format!("unknown fault {other}"))),
        }
    }
    eprintln!("chaos: healing");
    nodes.heal_all()?;
    for m in &members {
        if !nodes.is_running(*m) {
            nodes.spawn(*m, true)?;
        }
    }
    if nodes.wait_serving(Duration::from_secs(30)).await.is_none() {
        eprintln!("chaos: no leader 30 s after healing");
    }
    // Traffic goes on a little on the healed cluster, then publishers stop.
    tokio::time::sleep(Duration::from_secs(2)).await;
    stop_pub.store(true, Ordering::Relaxed);
    for p in publishers {
        let _ = tokio::time::timeout(Duration::from_secs(20), p).await;
    }
    eprintln!("chaos: draining");
    let drain_end = Instant::now() + Duration::from_secs(o.drain_timeout);
    loop {
        let quiet =
            epoch.elapsed().as_millis() as u64 - last_delivery.load(Ordering::Relaxed) > 3000;
        let empty = match nodes.wait_serving(Duration::from_secs(2)).await {
            Some(l) => nodes
                .status(l)
                .await
                .is_some_and(|s| s.queues.iter().all(|(_, n)| *n == 0)),
            None => false,
        };
        if quiet && empty {
            report.drained = true;
            break;
        }
        if Instant::now() > drain_end {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    stop_con.store(true, Ordering::Relaxed);
    for t in tasks {
        let _ = tokio::time::timeout(Duration::from_secs(10), t).await;
    }
    report.seconds = epoch.elapsed().as_secs_f64();
    let h = history
        .lock()
        .map_err(|_| ToolError::WorkerPanicked("chaos history"))?;
    report.verdict = check::check(&h);
    report.reconnects = h.reconnects;
    Ok(report)
}
