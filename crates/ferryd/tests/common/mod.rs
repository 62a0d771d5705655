//! Starts a real ferryd process on a free loopback port for one test and stops it on drop.
#![allow(dead_code)]

pub mod amqp1;
pub mod http;
pub mod kills;
pub mod raw;
pub mod raw091;

use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// Resident memory of a process in KiB, from /proc (Linux); 0 if it cannot be read.
pub fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

pub struct Ferryd {
    child: Child,
    pub addr: SocketAddr,
    /// The TLS listener, for brokers started with `start_tls`.
    pub tls_addr: Option<SocketAddr>,
    /// The management HTTP listener, for brokers started with `start_mgmt`.
    pub mgmt_addr: Option<SocketAddr>,
    /// The Prometheus listener, for brokers started with `--prometheus-port 0`.
    pub prometheus_addr: Option<SocketAddr>,
    stderr: Option<std::thread::JoinHandle<String>>,
}

impl Ferryd {
    pub fn start() -> Ferryd {
        Ferryd::start_with(&[])
    }

    /// Tests run in parallel: each broker is memory-only unless the test gives it a
    /// `--data-dir` of its own.
    pub fn start_with(extra: &[&str]) -> Ferryd {
        Ferryd::spawn(extra, false, false)
    }

    /// With `--ssl-port 0` among `extra`: ferryd prints the TLS port on its second line.
    pub fn start_tls(extra: &[&str]) -> Ferryd {
        Ferryd::spawn(extra, true, false)
    }

    /// With management on a free loopback port (`mgmt_addr`).
    pub fn start_mgmt(extra: &[&str]) -> Ferryd {
        Ferryd::spawn(extra, false, true)
    }

    fn spawn(extra: &[&str], tls: bool, mgmt: bool) -> Ferryd {
        let mgmt_args: &[&str] = if mgmt {
            &[
                "--mgmt-enable",
                "yes",
                "--mgmt-port",
                "0",
                "--mgmt-interface",
                "127.0.0.1",
            ]
        } else {
            &[]
        };
        let memory_only: &[&str] = if extra.iter().any(|a| a.starts_with("--data-dir")) {
            &[]
        } else {
            &["--no-data-dir"]
        };
        // `FERRYD_BIN` runs another build (a baseline, another allocator) under the same
        // test, for measurements that compare two.
        let bin = std::env::var_os("FERRYD_BIN").map_or_else(
            || env!("CARGO_BIN_EXE_ferryd").into(),
            std::path::PathBuf::from,
        );
        let mut child = Command::new(bin)
            .args(["--port", "0", "--interface", "127.0.0.1", "--auth", "no"])
            .args(memory_only)
            .args(mgmt_args)
            .args(extra)
            .env(
                "RUST_LOG",
                "ferryd=info,ferry_server=debug,ferry_core=debug,ferry_store=info,ferry_mgmt=info",
            )
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn ferryd");
        let stdout = child.stdout.take().expect("ferryd stdout");
        let mut stderr = child.stderr.take().expect("ferryd stderr");
        let stderr = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = stderr.read_to_string(&mut text);
            text
        });
        let (tx, rx) = mpsc::channel();
        let prometheus = extra.windows(2).any(|w| w == ["--prometheus-port", "0"]);
        let lines = 1 + usize::from(tls) + usize::from(mgmt) + usize::from(prometheus);
        std::thread::spawn(move || {
            let mut stdout = BufReader::new(stdout);
            for _ in 0..lines {
                let mut line = String::new();
                let _ = stdout.read_line(&mut line);
                let _ = tx.send(line);
            }
        });
        let port = || -> u16 {
            let line = rx
                .recv_timeout(Duration::from_secs(20))
                .expect("ferryd printed no port");
            line.trim().parse().expect("ferryd port line")
        };
        let plain = port();
        let tls_addr = tls.then(|| SocketAddr::from(([127, 0, 0, 1], port())));
        let mgmt_addr = mgmt.then(|| SocketAddr::from(([127, 0, 0, 1], port())));
        let prometheus_addr = prometheus.then(|| SocketAddr::from(([127, 0, 0, 1], port())));
        Ferryd {
            child,
            addr: SocketAddr::from(([127, 0, 0, 1], plain)),
            tls_addr,
            mgmt_addr,
            prometheus_addr,
            stderr: Some(stderr),
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn signal(&self, name: &str) {
        let _ = Command::new("kill")
            .arg(format!("-{name}"))
            .arg(self.child.id().to_string())
            .status();
    }

    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Sends SIGTERM and waits for a clean exit; returns the exit status and stderr.
    pub fn terminate(mut self) -> (std::process::ExitStatus, String) {
        let pid = self.child.id() as i32;
        send_sigterm(pid);
        let status = wait_timeout(&mut self.child, Duration::from_secs(10));
        let log = self
            .stderr
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or_default();
        (status, log)
    }
}

/// A data directory for one test, removed when it ends.
pub struct DataDir(pub std::path::PathBuf);

impl DataDir {
    pub fn new(tag: &str) -> DataDir {
        use std::sync::atomic::{AtomicU64, Ordering};
        static N: AtomicU64 = AtomicU64::new(0);
        let p = std::env::temp_dir().join(format!(
            "ferryd-test-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&p);
        DataDir(p)
    }

    /// `--data-dir=<dir>`, for [`Ferryd::start_with`].
    pub fn arg(&self) -> String {
        format!("--data-dir={}", self.0.display())
    }
}

impl Drop for DataDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl Ferryd {
    /// SIGKILL, as a crash: nothing is flushed or closed. Returns what it logged.
    pub fn kill(mut self) -> String {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.stderr
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or_default()
    }
}

fn send_sigterm(pid: i32) {
    let _ = Command::new("kill")
        .arg("-TERM")
        .arg(pid.to_string())
        .status();
}

fn wait_timeout(child: &mut Child, limit: Duration) -> std::process::ExitStatus {
    let deadline = std::time::Instant::now() + limit;
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return status;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            return child.wait().expect("wait ferryd");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

impl Drop for Ferryd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
