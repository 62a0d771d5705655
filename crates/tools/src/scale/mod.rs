//! `ferry scale`: many idle AMQP 0-10 connections and many queues held open on a broker
//! while another command runs (typically `ferry perftest` on one busy queue), measuring
//! what they cost: time to open the connections, declare rate, and the broker's resident
//! memory per connection and per queue (with --broker-pid). Afterwards every session is
//! asked to answer, the queues are deleted and the connections closed.
//!
//! ```text
//! ferry scale -p 5672 --connections 10000 --queues 10000 --broker-pid $(pidof ferryd) \
//!     -- ferry perftest -p 5672 -s --size 256 --count 500000
//! ```

mod load;
mod report;

use std::os::fd::AsFd;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use clap::Args;
pub use report::{rss_kib, ScaleReport};

use crate::conn::{ConnectionOpts, Protocol};
use crate::ToolError;

#[derive(Debug, Clone, PartialEq, Eq, Args)]
pub struct ScaleOpts {
    #[command(flatten)]
    pub conn: ConnectionOpts,
    /// Idle connections to open, each authenticated with one attached session.
    #[arg(long, default_value_t = 1000)]
    pub connections: usize,
    /// Queues to declare, each bound to --exchange with its own name as the key.
    #[arg(long, default_value_t = 1000)]
    pub queues: usize,
    /// Exchange the queues are bound to; "" leaves them on the default exchange only.
    #[arg(long, default_value = "amq.direct")]
    pub exchange: String,
    /// Queue names are BASE-0, BASE-1, ... (and BASE-one-0, ... for --one-by-one).
    #[arg(long = "base-name", default_value = "ferry-scale")]
    pub base_name: String,
    /// How many of the connections declare the queues, concurrently.
    #[arg(long = "declare-connections", default_value_t = 4)]
    pub declare_connections: usize,
    /// Declares each declaring connection keeps in flight (one execution.sync per window).
    #[arg(long, default_value_t = 256)]
    pub window: usize,
    /// Further queues declared (and bound) one at a time, each reply awaited, once the
    /// others exist: the round trip a simple client sees.
    #[arg(long = "one-by-one", value_name = "N", default_value_t = 200)]
    pub one_by_one: usize,
    /// Connection handshakes in flight at once.
    #[arg(long = "open-parallel", value_name = "N", default_value_t = 64)]
    pub open_parallel: usize,
    /// ferryd's process id, to read its resident memory (/proc/PID/status).
    #[arg(long = "broker-pid", value_name = "PID")]
    pub broker_pid: Option<u32>,
    /// Milliseconds to wait after each step before reading the broker's memory.
    #[arg(long = "settle-ms", value_name = "MS", default_value_t = 500,
          value_parser = clap::value_parser!(u64).range(0..=60_000))]
    pub settle_ms: u64,
    /// Without a command: seconds to hold the load before removing it.
    #[arg(long, value_name = "SECS", default_value_t = 0)]
    pub hold: u64,
    /// Longest any one step (opening, declaring, ...) may take.
    #[arg(long = "step-timeout", value_name = "SECS", default_value_t = 120)]
    pub step_timeout: u64,
    /// Longest the command may run; it is killed after that.
    #[arg(long = "command-timeout", value_name = "SECS", default_value_t = 600)]
    pub command_timeout: u64,
    /// Print a CSV header and one row instead of text.
    #[arg(long)]
    pub csv: bool,
    /// Command to run while the load exists. Its output goes to this command's stderr, so
    /// stdout carries only the report.
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

impl ScaleOpts {
    fn validate(&self) -> Result<(), ToolError> {
        if self.conn.protocol != Protocol::Amqp010 {
            return Err(ToolError::InvalidOptions(
                "ferry scale speaks AMQP 0-10 only".into(),
            ));
        }
        if self.connections == 0 && self.queues + self.one_by_one > 0 {
            return Err(ToolError::InvalidOptions(
                "queues are declared over the connections: --connections must be at least 1".into(),
            ));
        }
        Ok(())
    }

    fn step(&self) -> Duration {
        Duration::from_secs(self.step_timeout.max(1))
    }
}

pub fn command(o: &ScaleOpts) -> Result<(), ToolError> {
    o.validate()?;
    let opts = o.clone();
    let report = run_with(o, move || hold(&opts))?;
    if o.csv {
        println!("{}\n{}", ScaleReport::CSV_HEADER, report.csv_row());
    } else {
        print!("{}", report.text());
    }
    if report.answered < report.connections {
        return Err(ToolError::Scale(format!(
            "{} of {} sessions did not answer under load",
            report.connections - report.answered,
            report.connections
        )));
    }
    match report.command_status {
        Some(0) | None => Ok(()),
        Some(code) => Err(ToolError::Scale(format!(
            "the command run under load failed (exit status {code})"
        ))),
    }
}

/// Opens and declares the load, calls `during` (on a thread of its own, while the load's
/// connections keep being served) and records what it returns as the command's status,
/// then checks every session answers and removes the load. Raises this process's
/// open-files limit as far as it may go first.
pub fn run_with<F>(o: &ScaleOpts, during: F) -> Result<ScaleReport, ToolError>
where
    F: FnOnce() -> Result<Option<i32>, ToolError> + Send + 'static,
{
    if let Some(fds) = raise_fd_limit() {
        // One descriptor per connection, plus what the runtime and the command need.
        if (fds as usize) < o.connections + 64 {
            return Err(ToolError::InvalidOptions(format!(
                "open files limit {fds} is too low for {} connections",
                o.connections
            )));
        }
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| ToolError::io("starting a runtime", e))?;
    let addr = format!("{}:{}", o.conn.broker, o.conn.port);
    let options = crate::amqp010::connect_options(&o.conn)?;
    let step = o.step();
    let settle = Duration::from_millis(o.settle_ms);
    let rss = || o.broker_pid.and_then(rss_kib);
    let mut r = ScaleReport {
        connections: o.connections,
        queues: o.queues,
        declare_connections: o.declare_connections.clamp(1, o.connections.max(1)),
        window: o.window.max(1),
        one_by_one: o.one_by_one,
        rss_start: rss(),
        ..Default::default()
    };
    runtime.block_on(async {
        let started = Instant::now();
        let idle = load::open(&addr, &options, o.connections, o.open_parallel, step).await?;
        r.open = started.elapsed();
        eprintln!(
            "opened {} connections in {:.2}s",
            idle.len(),
            r.open.as_secs_f64()
        );
        tokio::time::sleep(settle).await;
        r.rss_connections = rss();

        let names: Vec<String> = (0..o.queues)
            .map(|i| load::queue_name(&o.base_name, i))
            .collect();
        let (k, window) = (r.declare_connections, r.window);
        r.declare = load::spread(
            &idle,
            k,
            &names,
            &o.exchange,
            load::QueueOp::Declare,
            window,
            step,
        )
        .await?;
        eprintln!(
            "declared {} queues in {:.2}s",
            o.queues,
            r.declare.as_secs_f64()
        );
        let one_base = format!("{}-one", o.base_name);
        let one_names: Vec<String> = (0..o.one_by_one)
            .map(|i| load::queue_name(&one_base, i))
            .collect();
        if let Some(first) = idle.first() {
            r.one_by_one_mean =
                load::declare_one_by_one(&first.session, &one_names, &o.exchange, step).await?;
        }
        tokio::time::sleep(settle).await;
        r.rss_queues = rss();

        r.command_status = tokio::task::spawn_blocking(during)
            .await
            .map_err(|_| ToolError::WorkerPanicked("the work run under load"))??;

        let started = Instant::now();
        r.answered = load::answering(&idle, o.open_parallel, step).await;
        r.answer = started.elapsed();
        let all: Vec<String> = names.into_iter().chain(one_names).collect();
        r.delete = load::spread(&idle, k, &all, "", load::QueueOp::Delete, window, step).await?;
        let started = Instant::now();
        load::close(idle, o.open_parallel, step).await;
        r.close = started.elapsed();
        tokio::time::sleep(settle).await;
        r.rss_end = rss();
        Ok::<_, ToolError>(())
    })?;
    Ok(r)
}

/// Runs the command (or sleeps --hold seconds); returns the command's exit code.
fn hold(o: &ScaleOpts) -> Result<Option<i32>, ToolError> {
    let Some((program, args)) = o.command.split_first() else {
        std::thread::sleep(Duration::from_secs(o.hold));
        return Ok(None);
    };
    let stderr = std::io::stderr()
        .as_fd()
        .try_clone_to_owned()
        .map_err(|e| ToolError::io("duplicating stderr", e))?;
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::from(stderr))
        .spawn()
        .map_err(|e| ToolError::io(format!("running {program}"), e))?;
    let deadline = Instant::now() + Duration::from_secs(o.command_timeout.max(1));
    loop {
        if let Some(status) = child
            .try_wait()
            .map_err(|e| ToolError::io(format!("waiting for {program}"), e))?
        {
            // Killed by a signal: no code; report it as failed.
            return Ok(Some(status.code().unwrap_or(-1)));
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err(ToolError::Scale(format!(
                "{program} ran longer than --command-timeout {}s; killed",
                o.command_timeout
            )));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Raises this process's soft open-files limit to the hard limit; returns the limit now.
#[cfg(target_os = "linux")]
fn raise_fd_limit() -> Option<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit only read and write the struct we own.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
            return None;
        }
        if limit.rlim_cur < limit.rlim_max {
            let raised = libc::rlimit {
                rlim_cur: limit.rlim_max,
                rlim_max: limit.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                limit = raised;
            }
        }
    }
    Some(limit.rlim_cur)
}

#[cfg(not(target_os = "linux"))]
fn raise_fd_limit() -> Option<u64> {
    None
}
