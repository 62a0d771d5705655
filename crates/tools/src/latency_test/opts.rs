use std::time::Duration;

use clap::Args;

use super::RunLimits;
use crate::conn::{parse_yes_no, ConnectionOpts};
use crate::ToolError;

/// qpid-latency-test's options, under its names.
#[derive(Debug, Clone, PartialEq, Eq, Args)]
pub struct LatencyOpts {
    #[command(flatten)]
    pub conn: ConnectionOpts,
    /// Message size in bytes.
    #[arg(long, value_name = "N", default_value_t = 256)]
    pub size: usize,
    /// Number of messages to send. With --rate and --time-limit it is ignored, as in
    /// qpid-latency-test; with --rate alone it still bounds the run.
    #[arg(long, value_name = "N", default_value_t = 1000)]
    pub count: u64,
    /// Target message rate per second (0: back-to-back). Latency is then measured from each
    /// message's scheduled send time, so stalls are not hidden (coordinated omission).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub rate: u64,
    /// Test duration in seconds (0: no limit but --count).
    #[arg(long = "time-limit", value_name = "N", default_value_t = 0)]
    pub time_limit: u64,
    /// Milliseconds between interval reports (only with --rate).
    #[arg(long = "report-frequency", value_name = "N", default_value_t = 1000)]
    pub report_frequency: u64,
    /// Print stats in csv format (rate,min,max,avg).
    #[arg(long)]
    pub csv: bool,
    /// Prefetch of the receiver (0-10: credit window; 0-9-1: basic.qos); 0 means no flow
    /// control and no acks.
    #[arg(long, value_name = "N", default_value_t = 100)]
    pub prefetch: u32,
    /// Accept every N messages (0: half the prefetch).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub ack: u32,
    /// Use durable messages.
    #[arg(long, value_name = "yes|no", value_parser = parse_yes_no,
          num_args = 0..=1, default_value = "no", default_missing_value = "yes")]
    pub durable: bool,
    /// Send messages synchronously.
    #[arg(long)]
    pub sync: bool,
    /// Base name for queues.
    #[arg(
        long = "queue-base-name",
        value_name = "NAME",
        default_value = "latency-test"
    )]
    pub queue_base_name: String,
    /// Also write every message's times to this file, one line each: nanoseconds since
    /// the run's start when it was due, sent and received, after a line giving the start
    /// on CLOCK_MONOTONIC (to line the slow ones up with `perf record -k mono` traces).
    #[arg(long = "samples-file", value_name = "PATH")]
    pub samples_file: Option<std::path::PathBuf>,
}

impl LatencyOpts {
    pub fn limits(&self) -> Result<RunLimits, ToolError> {
        if self.report_frequency == 0 {
            return Err(ToolError::InvalidOptions(
                "--report-frequency must be at least 1 ms".into(),
            ));
        }
        if self.count == 0 && self.time_limit == 0 {
            return Err(ToolError::InvalidOptions(
                "--count 0 needs a --time-limit so the run ends".into(),
            ));
        }
        let count = if self.rate > 0 && self.time_limit > 0 {
            u64::MAX
        } else {
            self.count
        };
        Ok(RunLimits {
            count,
            rate: self.rate,
            time_limit: (self.time_limit > 0).then(|| Duration::from_secs(self.time_limit)),
            report_every: Duration::from_millis(self.report_frequency),
            sync_each: self.sync,
            csv: self.csv,
            drain_grace: super::runner::DEFAULT_DRAIN_GRACE,
            keep_samples: self.samples_file.is_some(),
        })
    }

    /// Accept batch: --ack, or half the prefetch as qpid-latency-test does.
    pub fn ack_every(&self) -> u32 {
        if self.ack > 0 {
            self.ack
        } else {
            self.prefetch / 2
        }
    }

    pub fn queue_name(&self) -> String {
        format!("{}-1", self.queue_base_name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cmd {
        #[command(flatten)]
        opts: LatencyOpts,
    }

    fn parse(args: &[&str]) -> Result<LatencyOpts, clap::Error> {
        Cmd::try_parse_from(std::iter::once("latency-test").chain(args.iter().copied()))
            .map(|c| c.opts)
    }

    #[test]
    fn defaults_match_qpid_latency_test() {
        let o = parse(&[]).unwrap();
        assert_eq!((o.size, o.count, o.rate, o.time_limit), (256, 1000, 0, 0));
        assert_eq!((o.report_frequency, o.prefetch, o.ack), (1000, 100, 0));
        assert_eq!(o.ack_every(), 50);
        assert!(!o.csv && !o.durable && !o.conn.tcp_nodelay);
        assert_eq!(o.conn.max_frame_size, 65535);
        assert_eq!(o.queue_name(), "latency-test-1");
    }

    #[test]
    fn papers_command_line() {
        let o = parse(&[
            "-b",
            "127.0.0.1",
            "--size",
            "256",
            "--rate",
            "10000",
            "--time-limit",
            "30",
            "--report-frequency",
            "500",
            "--csv",
            "--max-frame-size",
            "4096",
            "--prefetch",
            "0",
            "--durable",
            "yes",
            "--tcp-nodelay",
        ])
        .unwrap();
        assert_eq!(
            (o.size, o.rate, o.time_limit, o.report_frequency),
            (256, 10000, 30, 500)
        );
        assert_eq!((o.conn.max_frame_size, o.prefetch), (4096, 0));
        assert!(o.csv && o.durable && o.conn.tcp_nodelay);
        let l = o.limits().unwrap();
        // Rate with a time limit: count is ignored, as in qpid-latency-test.
        assert_eq!(l.count, u64::MAX);
        assert_eq!(l.time_limit, Some(Duration::from_secs(30)));
        assert_eq!(l.report_every, Duration::from_millis(500));
    }

    #[test]
    fn runs_are_always_bounded() {
        let o = parse(&["--rate", "100"]).unwrap();
        assert_eq!(o.limits().unwrap().count, 1000);
        let o = parse(&["--count", "0"]).unwrap();
        assert!(o.limits().is_err());
        assert!(parse(&["--rate", "fast"]).is_err());
    }
}
