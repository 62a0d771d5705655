//! Errors for the protocol-driving side of the harnesses: what an implementation of the
//! perftest and latency-test traits (the AMQP 0-10 client) reports.

use std::error::Error;
use std::future::Future;

use crate::amqp010::STEP_TIMEOUT;

#[derive(Debug, thiserror::Error)]
pub enum DriverError {
    #[error("connection failed: {0}")]
    Connection(String),
    #[error("broker refused: {0}")]
    Refused(String),
    #[error("timed out waiting for {0}")]
    Timeout(String),
    #[error("sequence error: expected {relation}{expected} but got {actual}")]
    Sequence {
        relation: &'static str,
        expected: u64,
        actual: u64,
    },
    #[error("bad report from a test client: {0:?}")]
    BadReport(String),
    #[error("unexpected control message: expected {expected:?} but received {actual:?}")]
    UnexpectedControl { expected: String, actual: String },
    #[error("test completed in zero seconds; try again with a larger message count")]
    ZeroTime,
    #[error("a perftest client thread panicked")]
    WorkerPanicked,
    #[error(transparent)]
    Client(Box<dyn Error + Send + Sync>),
}

/// Runs one step of a client on `runtime`, bounded by [`STEP_TIMEOUT`]; `what` names it in
/// the time-out error. A function rather than a method so that `f` may borrow a client's
/// connection while the runtime is borrowed too.
pub fn run_step<T, E>(
    runtime: &tokio::runtime::Runtime,
    what: &str,
    f: impl Future<Output = Result<T, E>>,
) -> Result<T, DriverError>
where
    DriverError: From<E>,
{
    runtime.block_on(async {
        match tokio::time::timeout(STEP_TIMEOUT, f).await {
            Ok(r) => r.map_err(DriverError::from),
            Err(_) => Err(DriverError::Timeout(what.to_string())),
        }
    })
}
