use clap::{Args, ValueEnum};

use crate::conn::{parse_yes_no, ConnectionOpts};

/// How publishers reach subscribers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Mode {
    /// --qt queues, --npubs publishers and --nsubs subscribers per queue.
    Shared,
    /// --npubs publishers, --nsubs subscribers, one fanout exchange.
    Fanout,
    /// --qt topics, --npubs publishers and --nsubs subscribers per topic.
    Topic,
}

/// qpid-perftest's options, under its names.
///
/// If none of --setup, --control, --publish or --subscribe is given the test runs in one
/// process; otherwise run --setup first, then --npubs × --publish, --nsubs × --subscribe and
/// one --control concurrently, all with the same other options.
#[derive(Debug, Clone, PartialEq, Args)]
pub struct PerftestOpts {
    #[command(flatten)]
    pub conn: ConnectionOpts,

    /// Create shared queues.
    #[arg(long)]
    pub setup: bool,
    /// Run test, print report.
    #[arg(long)]
    pub control: bool,
    /// Publish messages.
    #[arg(long)]
    pub publish: bool,
    /// Subscribe for messages.
    #[arg(long)]
    pub subscribe: bool,

    /// Test mode.
    #[arg(long, value_enum, default_value = "shared")]
    pub mode: Mode,
    /// Create N publishers.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub npubs: usize,
    /// Each publisher sends N messages.
    #[arg(long, value_name = "N", default_value_t = 500_000)]
    pub count: usize,
    /// Size of messages in bytes.
    #[arg(long, value_name = "BYTES", default_value_t = 1024)]
    pub size: usize,
    /// Publisher waits for the broker to complete all its messages before reporting.
    #[arg(long = "pub-confirm", value_name = "yes|no", value_parser = parse_yes_no,
          num_args = 0..=1, default_value = "yes", default_missing_value = "yes")]
    pub pub_confirm: bool,
    /// Publish messages as durable.
    #[arg(long, value_name = "yes|no", value_parser = parse_yes_no,
          num_args = 0..=1, default_value = "no", default_missing_value = "yes")]
    pub durable: bool,
    /// Wait for confirmation of each message before sending the next one.
    #[arg(long = "sync-publish", value_name = "yes|no", value_parser = parse_yes_no,
          num_args = 0..=1, default_value = "no", default_missing_value = "yes")]
    pub sync_publish: bool,

    /// AMQP 0-9-1: publishers put their channel in confirm mode and keep at most N
    /// messages unconfirmed (RabbitMQ PerfTest's --confirm); 0 publishes without confirms.
    /// AMQP 1.0: publishers send unsettled transfers and keep at most N waiting for the
    /// broker's settlement; 0 sends them settled (at most once).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub confirm: u32,

    /// AMQP 0-9-1 only: declare the test queues with this `x-queue-type` (`quorum`:
    /// RabbitMQ's quorum queues, a ferryd cluster's replicated queues); they are durable.
    #[arg(long = "queue-type", value_name = "TYPE")]
    pub queue_type: Option<String>,

    /// Create N subscribers.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub nsubs: usize,
    /// Deliveries a subscriber may hold unsettled: basic.qos prefetch-count per consumer
    /// over AMQP 0-9-1 (default 1000; ignored by consumers that do not acknowledge), the
    /// credit window over AMQP 0-10 (default 20000) and 1.0 (default 1000).
    #[arg(long, value_name = "N")]
    pub prefetch: Option<u32>,
    /// N>0: subscriber accepts in batches of N. N=0: unconfirmed mode (over 1.0: the
    /// broker sends settled deliveries).
    #[arg(long = "sub-ack", value_name = "N", default_value_t = 0)]
    pub sub_ack: usize,

    /// Create N queues or topics.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub qt: usize,
    /// Desired number of iterations of the test.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub iterations: usize,
    /// Summary output: pubs/sec subs/sec transfers/sec Mbytes/sec.
    #[arg(short = 's', long)]
    pub summary: bool,
    /// Base name used for queues or topics.
    #[arg(
        long = "base-name",
        value_name = "NAME",
        default_value = "qpid-perftest"
    )]
    pub base_name: String,

    /// If non-zero, the transaction batch size for publishing and consuming.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub tx: usize,
    /// If non-zero, the transaction batch size for publishing (overrides --tx).
    #[arg(long = "pub-tx", value_name = "N", default_value_t = 0)]
    pub pub_tx: usize,
    /// If non-zero, the transaction batch size for consuming (overrides --tx).
    #[arg(long = "sub-tx", value_name = "N", default_value_t = 0)]
    pub sub_tx: usize,
    /// Delay in ms between messages published.
    #[arg(long = "interval_pub", value_name = "ms", default_value_t = 0)]
    pub interval_pub: u32,
    /// Delay in ms between messages consumed.
    #[arg(long = "interval_sub", value_name = "ms", default_value_t = 0)]
    pub interval_sub: u32,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cmd {
        #[command(flatten)]
        opts: PerftestOpts,
    }

    fn parse(args: &[&str]) -> Result<PerftestOpts, clap::Error> {
        Cmd::try_parse_from(std::iter::once("perftest").chain(args.iter().copied())).map(|c| c.opts)
    }

    #[test]
    fn defaults_match_qpid_perftest() {
        let o = parse(&[]).unwrap();
        assert_eq!(o.conn.broker, "localhost");
        assert_eq!(o.conn.port, 5672);
        assert_eq!(o.mode, Mode::Shared);
        assert_eq!((o.npubs, o.nsubs, o.qt, o.iterations), (1, 1, 1, 1));
        assert_eq!((o.count, o.size), (500_000, 1024));
        assert!(o.pub_confirm && !o.durable && !o.sync_publish && !o.summary);
        assert_eq!(o.base_name, "qpid-perftest");
        assert_eq!(o.conn.protocol, crate::conn::Protocol::Amqp010);
        assert_eq!((o.confirm, o.prefetch), (0, None));
    }

    #[test]
    fn papers_command_line() {
        let o = parse(&[
            "-b",
            "127.0.0.1",
            "-p",
            "5673",
            "--mode",
            "topic",
            "--npubs",
            "2",
            "--nsubs",
            "3",
            "--count",
            "1000",
            "--size",
            "256",
            "--qt",
            "4",
            "--durable",
            "yes",
            "--sync-publish",
            "--sub-ack",
            "100",
            "--tx",
            "10",
            "--iterations",
            "5",
            "-s",
            "--tcp-nodelay",
            "--base-name",
            "ferry",
            "--control",
        ])
        .unwrap();
        assert_eq!(o.conn.broker, "127.0.0.1");
        assert_eq!(o.conn.port, 5673);
        assert!(o.conn.tcp_nodelay);
        assert_eq!(o.mode, Mode::Topic);
        assert_eq!((o.npubs, o.nsubs, o.qt), (2, 3, 4));
        assert_eq!(
            (o.count, o.size, o.sub_ack, o.tx, o.iterations),
            (1000, 256, 100, 10, 5)
        );
        assert!(o.durable && o.sync_publish && o.summary && o.control);
        assert!(!o.setup && !o.publish && !o.subscribe);
        assert_eq!(o.base_name, "ferry");
    }

    #[test]
    fn yes_no_values_and_bad_input() {
        assert!(!parse(&["--pub-confirm", "no"]).unwrap().pub_confirm);
        assert!(!parse(&["--durable", "no"]).unwrap().durable);
        assert!(parse(&["--durable", "perhaps"]).is_err());
        assert!(parse(&["--mode", "direct"]).is_err());
        assert!(parse(&["--count", "-3"]).is_err());
    }
}
