use thiserror::Error;

/// Failures of broker operations. Each variant carries a human-readable detail; protocol layers
/// map the variant to their own error code (0-10 execution exceptions, 0-9-1 channel/connection
/// close codes).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum BrokerError {
    #[error("not found: {0}")]
    NotFound(String),
    #[error("resource locked: {0}")]
    ResourceLocked(String),
    #[error("precondition failed: {0}")]
    PreconditionFailed(String),
    #[error("not allowed: {0}")]
    NotAllowed(String),
    #[error("resource limit exceeded: {0}")]
    ResourceLimitExceeded(String),
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    #[error("not implemented: {0}")]
    NotImplemented(String),
}
