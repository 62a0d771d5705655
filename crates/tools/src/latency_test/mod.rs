//! qpid-latency-test: a sender stamps messages, a receiver on the same clock records how
//! long each took, with per-interval min/avg/max lines and a percentile summary. The
//! messaging itself goes through traits the AMQP 0-10 client will implement; netbench's
//! relay implements them over plain TCP.

mod opts;
mod runner;

pub use opts::LatencyOpts;
pub use runner::{run_latency, LatencyReceiver, LatencyRun, LatencySender, RunLimits, Stamp};

/// Runs `ferry latency-test` against an AMQP 0-10 broker.
pub fn command(opts: &LatencyOpts) -> Result<(), crate::ToolError> {
    let limits = opts.limits()?;
    // The receiver declares the queue, so it opens first.
    let mut receiver = crate::amqp010::LatencyReceiverClient::open(opts)?;
    let sender = crate::amqp010::LatencyClient::open(opts)?;
    let mut out = std::io::stdout();
    run_latency(&limits, sender, &mut receiver, &mut out)?;
    Ok(())
}
