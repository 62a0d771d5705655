//! The `ferry` command line.

use clap::{Parser, Subcommand};

use crate::chaos::ChaosOpts;
use crate::cluster::ClusterOpts;
use crate::ctl::CtlOpts;
use crate::latency_test::LatencyOpts;
use crate::netbench::NetbenchCmd;
use crate::perftest::PerftestOpts;
use crate::scale::ScaleOpts;
use crate::user::UserOpts;
use crate::ToolError;

#[derive(Debug, Parser)]
#[command(
    name = "ferry",
    version,
    about = "Ferry broker tools: benchmarks, harnesses, users and management"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Throughput test with qpid-perftest's options and report.
    Perftest(Box<PerftestOpts>),
    /// Latency test with qpid-latency-test's options and report.
    LatencyTest(Box<LatencyOpts>),
    /// Loopback TCP baselines: pingpong, stream, relay (and serve).
    Netbench {
        #[command(subcommand)]
        cmd: NetbenchCmd,
    },
    /// Manage ferryd's users file: add, passwd, remove, list.
    User(UserOpts),
    /// Manage a running ferryd over its management HTTP API (--mgmt-enable yes).
    Ctl(Box<CtlOpts>),
    /// A ferryd cluster over its cluster port: status, add-node, remove-node.
    Cluster(Box<ClusterOpts>),
    /// Jepsen-style test of replicated queues: a local ferryd cluster under kill -9,
    /// pause and partition faults while clients publish and consume; checks nothing
    /// confirmed is lost.
    Chaos(Box<ChaosOpts>),
    /// Many idle 0-10 connections and queues held open while a command runs (e.g. a
    /// perftest): open time, declare rate, the broker's memory per connection and queue.
    Scale(Box<ScaleOpts>),
}

pub fn run(cli: &Cli) -> Result<(), ToolError> {
    match &cli.command {
        Command::Perftest(o) => crate::perftest::command(o),
        Command::LatencyTest(o) => crate::latency_test::command(o),
        Command::Netbench { cmd } => crate::netbench::command(cmd),
        Command::User(o) => crate::user::command(o),
        Command::Ctl(o) => crate::ctl::command(o),
        Command::Cluster(o) => crate::cluster::command(o),
        Command::Chaos(o) => crate::chaos::command(o),
        Command::Scale(o) => crate::scale::command(o),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn an_unreachable_broker_is_a_connection_error() {
        // Port 1 on loopback: nothing listens there, so the connect is refused at once.
        for args in [
            vec![
                "ferry",
                "perftest",
                "-b",
                "127.0.0.1",
                "-p",
                "1",
                "--count",
                "10",
                "-s",
            ],
            vec![
                "ferry",
                "latency-test",
                "-b",
                "127.0.0.1",
                "-p",
                "1",
                "--rate",
                "100",
            ],
        ] {
            let cli = Cli::try_parse_from(args).unwrap();
            assert!(matches!(
                run(&cli),
                Err(ToolError::Driver(crate::driver::DriverError::Connection(_)))
            ));
        }
    }

    #[test]
    fn bad_options_are_reported_before_connecting() {
        let cli = Cli::try_parse_from(["ferry", "perftest", "--npubs", "0"]).unwrap();
        assert!(matches!(run(&cli), Err(ToolError::InvalidOptions(_))));
    }
}
