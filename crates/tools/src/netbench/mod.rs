//! `ferry netbench`: what loopback TCP on this machine can do, measured with plain threads
//! and blocking sockets. The figures are the ceiling any broker here is compared with.

mod fsync;
mod pingpong;
mod relay;
mod report;
mod serve;
mod stream;
mod wire;

use std::time::Duration;

use clap::{Args, Subcommand};

pub use fsync::{run_fsync, FsyncRow};
pub use pingpong::{run_pingpong, PingpongResult};
pub use relay::{run_relay_latency, run_relay_throughput};
pub use report::{LatencyRow, ThroughputRow};
pub use stream::run_stream;

use crate::ToolError;

#[derive(Debug, Clone, PartialEq, Eq, Subcommand)]
pub enum NetbenchCmd {
    /// TCP round-trip latency: send a message, wait for its echo, repeat.
    Pingpong(PingpongOpts),
    /// One-way TCP throughput, --batch messages per write().
    Stream(StreamOpts),
    /// Producer → relay forwarding bytes → consumer: the ceiling for a broker here.
    Relay(RelayOpts),
    /// Echo/sink server for pingpong and stream run from another process (--connect).
    Serve(ServeOpts),
    /// How fast the device behind a directory makes appends durable (write + fdatasync).
    Fsync(FsyncOpts),
}

/// Options every client-side test shares.
#[derive(Debug, Clone, PartialEq, Eq, Args)]
pub struct CommonOpts {
    /// Message size in bytes.
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..=wire::MAX_SIZE as i64))]
    pub size: u32,
    /// Messages to send (after any warm-up).
    #[arg(long, default_value_t = 100_000)]
    pub count: u64,
    /// Stop after this many seconds even if --count is not reached.
    #[arg(long = "time-limit", value_name = "SECS", default_value_t = 10)]
    pub time_limit: u64,
    /// Turn on TCP_NODELAY on every socket.
    #[arg(long = "tcp-nodelay")]
    pub tcp_nodelay: bool,
    /// Print a CSV header and one row instead of text.
    #[arg(long)]
    pub csv: bool,
}

impl CommonOpts {
    pub fn time_limit(&self) -> Duration {
        Duration::from_secs(self.time_limit.max(1))
    }

    /// Read timeout for the client's sockets: past the run's own limit, so only a peer that
    /// has really gone away trips it.
    pub fn io_timeout(&self) -> Duration {
        self.time_limit() + Duration::from_secs(10)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Args)]
pub struct PingpongOpts {
    #[command(flatten)]
    pub common: CommonOpts,
    /// Round trips per second, each due on a fixed schedule (0: back-to-back).
    #[arg(long, default_value_t = 0)]
    pub rate: u64,
    /// Round trips before measuring, to warm caches and the connection.
    #[arg(long, default_value_t = 1000)]
    pub warmup: u64,
    /// Use a `ferry netbench serve` at HOST:PORT instead of an in-process server.
    #[arg(long, value_name = "HOST:PORT")]
    pub connect: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Args)]
pub struct StreamOpts {
    #[command(flatten)]
    pub common: CommonOpts,
    /// Messages per write().
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub batch: u32,
    /// Use a `ferry netbench serve` at HOST:PORT instead of an in-process server.
    #[arg(long, value_name = "HOST:PORT")]
    pub connect: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Args)]
pub struct RelayOpts {
    #[command(flatten)]
    pub common: CommonOpts,
    /// Messages per producer write() (throughput mode).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub batch: u32,
    /// Measure one-way latency through the relay instead of throughput (needs --size ≥ 16).
    #[arg(long)]
    pub latency: bool,
    /// Messages per second in latency mode (0: back-to-back).
    #[arg(long, default_value_t = 10_000)]
    pub rate: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Args)]
pub struct FsyncOpts {
    /// Directory on the device to measure (a scratch file is created and removed there).
    #[arg(long, default_value = ".")]
    pub dir: std::path::PathBuf,
    /// Bytes appended before each fdatasync.
    #[arg(long, default_value_t = 4096, value_parser = clap::value_parser!(u32).range(1..=64 * 1024 * 1024))]
    pub size: u32,
    /// Appends to make at most.
    #[arg(long, default_value_t = 10_000)]
    pub count: u64,
    /// Stop after this many seconds even if --count is not reached.
    #[arg(long = "time-limit", value_name = "SECS", default_value_t = 5)]
    pub time_limit: u64,
    /// Print a CSV header and one row instead of text.
    #[arg(long)]
    pub csv: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Args)]
pub struct ServeOpts {
    /// Port to listen on, on 127.0.0.1 only.
    #[arg(long)]
    pub port: u16,
    /// Turn on TCP_NODELAY on accepted sockets.
    #[arg(long = "tcp-nodelay")]
    pub tcp_nodelay: bool,
    /// Exit after serving this many connections.
    #[arg(long = "max-connections", default_value_t = 1000)]
    pub max_connections: u64,
}

/// Runs one netbench subcommand, printing its report to stdout.
pub fn command(cmd: &NetbenchCmd) -> Result<(), ToolError> {
    match cmd {
        NetbenchCmd::Pingpong(o) => {
            let r = run_pingpong(o)?;
            print!("{}", r.row.render(o.common.csv));
        }
        NetbenchCmd::Stream(o) => print!("{}", run_stream(o)?.render(o.common.csv)),
        NetbenchCmd::Relay(o) if o.latency => {
            print!("{}", run_relay_latency(o)?.render(o.common.csv));
        }
        NetbenchCmd::Relay(o) => print!("{}", run_relay_throughput(o)?.render(o.common.csv)),
        NetbenchCmd::Serve(o) => serve::serve(o.port, o.tcp_nodelay, o.max_connections)?,
        NetbenchCmd::Fsync(o) => {
            let limit = Duration::from_secs(o.time_limit.max(1));
            print!(
                "{}",
                run_fsync(&o.dir, o.size, o.count, limit)?.render(o.csv)
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(subcommand)]
        cmd: NetbenchCmd,
    }

    fn parse(args: &[&str]) -> Result<NetbenchCmd, clap::Error> {
        Cli::try_parse_from(std::iter::once("netbench").chain(args.iter().copied())).map(|c| c.cmd)
    }

    #[test]
    fn pingpong_options() {
        let NetbenchCmd::Pingpong(o) = parse(&[
            "pingpong",
            "--size",
            "64",
            "--count",
            "5000",
            "--time-limit",
            "3",
            "--rate",
            "1000",
            "--tcp-nodelay",
            "--connect",
            "127.0.0.1:9000",
            "--csv",
        ])
        .unwrap() else {
            panic!("not pingpong")
        };
        assert_eq!(
            (o.common.size, o.common.count, o.common.time_limit),
            (64, 5000, 3)
        );
        assert_eq!(o.rate, 1000);
        assert!(o.common.tcp_nodelay && o.common.csv);
        assert_eq!(o.connect.as_deref(), Some("127.0.0.1:9000"));
    }

    #[test]
    fn stream_relay_serve_options() {
        let NetbenchCmd::Stream(o) = parse(&["stream", "--batch", "64"]).unwrap() else {
            panic!("not stream")
        };
        assert_eq!((o.batch, o.common.size), (64, 256));
        let NetbenchCmd::Relay(o) = parse(&["relay", "--latency", "--rate", "500"]).unwrap() else {
            panic!("not relay")
        };
        assert!(o.latency);
        assert_eq!(o.rate, 500);
        let NetbenchCmd::Serve(o) = parse(&["serve", "--port", "7000"]).unwrap() else {
            panic!("not serve")
        };
        assert_eq!(o.port, 7000);
    }

    #[test]
    fn fsync_options() {
        let NetbenchCmd::Fsync(o) = parse(&["fsync", "--dir", "/tmp", "--size", "256"]).unwrap()
        else {
            panic!("not fsync")
        };
        assert_eq!((o.size, o.count, o.time_limit), (256, 10_000, 5));
        assert_eq!(o.dir, std::path::PathBuf::from("/tmp"));
    }

    #[test]
    fn nonsense_is_refused() {
        assert!(parse(&["stream", "--batch", "0"]).is_err());
        assert!(parse(&["pingpong", "--size", "0"]).is_err());
        assert!(parse(&["serve"]).is_err());
    }
}
