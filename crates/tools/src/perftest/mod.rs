//! qpid-perftest's throughput test: options, the arithmetic of its totals, its report, and
//! the publisher/subscriber/controller loops written against traits a client implements.

mod driver;
mod opts;
mod plan;
mod report;

pub use crate::driver::DriverError;
pub use driver::{
    run_controller, run_perftest, run_publisher, run_subscriber, ControllerOps, PerftestConnector,
    PublisherOps, SubscriberOps,
};
pub use opts::{Mode, PerftestOpts};
pub use plan::{Actions, Plan};
pub use report::{format_rate_report, parse_rate_report, IterationResult, PerftestReport};

/// Runs `ferry perftest`. The AMQP 0-10 client does not exist yet, so after checking the
/// options this refuses rather than pretend to measure anything.
pub fn command(opts: &PerftestOpts) -> Result<(), crate::ToolError> {
    let (_plan, warnings) = Plan::from_opts(opts)?;
    for w in warnings {
        eprintln!("WARNING: {w}");
    }
    Err(crate::ToolError::ClientNotBuilt("perftest"))
}
