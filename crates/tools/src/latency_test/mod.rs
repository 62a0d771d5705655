//! qpid-latency-test: a sender stamps messages, a receiver on the same clock records how
//! long each took, with per-interval min/avg/max lines and a percentile summary. The
//! messaging itself goes through traits the AMQP 0-10 client will implement; netbench's
//! relay implements them over plain TCP.

mod opts;
mod runner;

pub use opts::LatencyOpts;
pub use runner::{run_latency, LatencyReceiver, LatencyRun, LatencySender, RunLimits, Stamp};

/// Runs `ferry latency-test`. The AMQP 0-10 client does not exist yet, so after checking
/// the options this refuses rather than pretend to measure anything.
pub fn command(opts: &LatencyOpts) -> Result<(), crate::ToolError> {
    opts.limits()?;
    Err(crate::ToolError::ClientNotBuilt("latency-test"))
}
