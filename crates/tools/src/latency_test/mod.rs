//! qpid-latency-test: a sender stamps messages, a receiver on the same clock records how
//! long each took, with per-interval min/avg/max lines and a percentile summary. The
//! messaging itself goes through traits the AMQP 0-10 client will implement; netbench's
//! relay implements them over plain TCP.

mod ack;
mod opts;
mod runner;

pub use ack::AckBatch;
pub use opts::LatencyOpts;
pub use runner::{
    run_latency, LatencyReceiver, LatencyRun, LatencySender, RunLimits, Sample, Stamp,
};

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
    if let Some(path) = &opts.samples_file {
        write_samples(path, &run).map_err(|source| crate::ToolError::Io {
            context: format!("writing {}", path.display()),
            source,
        })?;
    }
    Ok(run)
}

/// One line per message (due, sent, received: ns since the start), after the start on
/// CLOCK_MONOTONIC.
fn write_samples(path: &std::path::Path, run: &LatencyRun) -> std::io::Result<()> {
    use std::io::Write;
    let mut f = std::io::BufWriter::new(std::fs::File::create(path)?);
    writeln!(f, "# start_monotonic_ns={}", run.start_monotonic_ns)?;
    writeln!(f, "intended_ns,sent_ns,received_ns")?;
    for s in &run.samples {
        writeln!(
            f,
            "{},{},{}",
            s.stamp.intended_ns, s.stamp.sent_ns, s.received_ns
        )?;
    }
    f.flush()
}
