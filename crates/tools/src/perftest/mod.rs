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
    PublisherOps, SubscriberOps,
};
pub use opts::{Mode, PerftestOpts};
pub use plan::{Actions, Plan};
pub use report::{format_rate_report, parse_rate_report, IterationResult, PerftestReport};

/// Runs `ferry perftest` against an AMQP 0-10 broker.
pub fn command(opts: &PerftestOpts) -> Result<(), crate::ToolError> {
    let (plan, warnings) = Plan::from_opts(opts)?;
    for w in warnings {
        eprintln!("WARNING: {w}");
    }
    let connector = crate::amqp010::Connector {
        conn: opts.conn.clone(),
    };
    let mut out = std::io::stdout();
    run_perftest(&connector, &plan, &mut out)?;
    Ok(())
}
