//! What goes wrong, and how far the damage reaches: a delivery (rejected), a link
//! (detached), a session (ended) or the connection (closed), each with the spec's condition.

use ferry_amqp1::{condition, Error, Symbol};
use ferry_core::BrokerError;

use crate::access::Denied;

/// A condition and the text that explains it to the peer.
#[derive(Debug, Clone, PartialEq)]
pub struct Fault {
    pub condition: Symbol,
    pub text: String,
}

impl Fault {
    pub fn new(condition: Symbol, text: impl Into<String>) -> Fault {
        Fault {
            condition,
            text: text.into(),
        }
    }

    pub fn error(&self) -> Error {
        Error::new(
            self.condition.clone(),
            crate::text::truncated(&self.text, 1024),
        )
    }
}

impl From<BrokerError> for Fault {
    fn from(e: BrokerError) -> Fault {
        let condition = match &e {
            BrokerError::NotFound(_) => condition::NOT_FOUND,
            BrokerError::ResourceLocked(_) => condition::RESOURCE_LOCKED,
            BrokerError::PreconditionFailed(_) => condition::PRECONDITION_FAILED,
            BrokerError::NotAllowed(_) => condition::NOT_ALLOWED,
            BrokerError::ResourceLimitExceeded(_) => condition::RESOURCE_LIMIT_EXCEEDED,
            BrokerError::InvalidArgument(_) => condition::INVALID_FIELD,
            BrokerError::NotImplemented(_) => condition::NOT_IMPLEMENTED,
        };
        Fault::new(condition, e.to_string())
    }
}

impl From<Denied> for Fault {
    fn from(d: Denied) -> Fault {
        Fault::new(condition::UNAUTHORIZED_ACCESS, d.0)
    }
}

/// A frame the session cannot carry on after.
#[derive(Debug, Clone, PartialEq)]
pub enum Failure {
    /// End the session with this error.
    Session(Fault),
    /// Close the connection with this error.
    Connection(Fault),
}
