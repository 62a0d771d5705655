//! qpid-perftest's throughput test: options, the arithmetic of its totals, its report, and
//! the publisher/subscriber/controller loops written against traits a client implements.

mod credit;
mod driver;
mod opts;
mod plan;
mod report;

pub use crate::driver::DriverError;
pub use credit::CreditWindow;
pub use driver::{
    run_controller, run_perftest, run_publisher, run_subscriber, ControllerOps, PerftestConnector,
    PublisherOps, Received, SubscriberOps,
};
pub use opts::{Mode, PerftestOpts};
pub use plan::{Actions, Plan};
pub use report::{format_rate_report, parse_rate_report, IterationResult, PerftestReport};

/// Runs `ferry perftest` against a broker, over the protocol `--protocol` names.
pub fn command(opts: &PerftestOpts) -> Result<(), crate::ToolError> {
    let (plan, warnings) = Plan::from_opts(opts)?;
    for w in warnings {
        eprintln!("WARNING: {w}");
    }
    run(opts, &plan, &mut std::io::stdout())?;
    Ok(())
}

/// This process's share of a perftest over `plan.protocol`; the report when it controlled
/// the run.
pub fn run(
    opts: &PerftestOpts,
    plan: &Plan,
    out: &mut dyn std::io::Write,
) -> Result<Option<PerftestReport>, DriverError> {
    let conn = opts.conn.clone();
    match plan.protocol {
        crate::conn::Protocol::Amqp010 => {
            run_perftest(&crate::amqp010::Connector { conn }, plan, out)
        }
        crate::conn::Protocol::Amqp091 => {
            run_perftest(&crate::amqp091::Connector { conn }, plan, out)
        }
        crate::conn::Protocol::Amqp1 => run_perftest(&crate::amqp1::Connector { conn }, plan, out),
    }
}
