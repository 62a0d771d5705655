//! Errors for the protocol-driving side of the harnesses: what an implementation of the
//! perftest and latency-test traits (the AMQP 0-10 client) reports.

use std::error::Error;

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
