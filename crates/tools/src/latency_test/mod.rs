//! qpid-latency-test: a sender stamps messages, a receiver on the same clock records how
//! long each took, with per-interval min/avg/max lines and a percentile summary. The
//! messaging itself goes through traits the AMQP 0-10 client will implement; netbench's
//! relay implements them over plain TCP.

mod opts;
mod runner;

pub use opts::LatencyOpts;
pub use runner::{run_latency, LatencyReceiver, LatencyRun, LatencySender, RunLimits, Stamp};

/// Runs `ferry latency-test` against a broker, over the protocol `--protocol` names.
pub fn command(opts: &LatencyOpts) -> Result<(), crate::ToolError> {
    run(opts, &mut std::io::stdout())?;
    Ok(())
}

/// A whole latency test over `opts.conn.protocol`, reporting to `out`.
pub fn run(
    opts: &LatencyOpts,
    out: &mut dyn std::io::Write,
) -> Result<LatencyRun, crate::ToolError> {
    let limits = opts.limits()?;
    // The receiver declares the queue, so it opens first.
    let run = match opts.conn.protocol {
        crate::conn::Protocol::Amqp010 => {
            let mut receiver = crate::amqp010::LatencyReceiverClient::open(opts)?;
            let sender = crate::amqp010::LatencyClient::open(opts)?;
            run_latency(&limits, sender, &mut receiver, out)?
        }
        crate::conn::Protocol::Amqp091 => {
            let mut receiver = crate::amqp091::LatencyReceiverClient::open(opts)?;
            let sender = crate::amqp091::LatencyClient::open(opts)?;
            run_latency(&limits, sender, &mut receiver, out)?
        }
        crate::conn::Protocol::Amqp1 => {
            let mut receiver = crate::amqp1::LatencyReceiverClient::open(opts)?;
            let sender = crate::amqp1::LatencyClient::open(opts)?;
            run_latency(&limits, sender, &mut receiver, out)?
        }
    };
    Ok(run)
}
