//! How a failed 0-9-1 method ends: the channel (soft errors) or the connection (hard ones).

use ferry_amqp091::reply;
use ferry_core::BrokerError;

/// A method failure, carrying the reply code and text for channel.close or connection.close.
/// Which of the two is sent follows from the code ([`reply::is_hard_error`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code} {text}")]
pub struct Fault {
    pub code: u16,
    pub text: String,
}

impl Fault {
    pub fn new(code: u16, text: impl Into<String>) -> Fault {
        Fault {
            code,
            text: text.into(),
        }
    }

    pub fn is_hard(&self) -> bool {
        reply::is_hard_error(self.code)
    }

    pub fn not_found(text: impl Into<String>) -> Fault {
        Fault::new(reply::NOT_FOUND, text)
    }

    pub fn precondition(text: impl Into<String>) -> Fault {
        Fault::new(reply::PRECONDITION_FAILED, text)
    }

    pub fn access_refused(text: impl Into<String>) -> Fault {
        Fault::new(reply::ACCESS_REFUSED, text)
    }

    pub fn command_invalid(text: impl Into<String>) -> Fault {
        Fault::new(reply::COMMAND_INVALID, text)
    }

    pub fn not_implemented(text: impl Into<String>) -> Fault {
        Fault::new(reply::NOT_IMPLEMENTED, text)
    }

    /// The reply text as it goes on the wire: a shortstr, cut at a character boundary.
    pub fn wire_text(&self) -> String {
        let text = format!("{} - {}", code_name(self.code), self.text);
        crate::text::truncated(&text, 255).to_owned()
    }
}

/// RabbitMQ's reply texts start with the code's name in capitals; clients log them as is.
fn code_name(code: u16) -> &'static str {
    match code {
        reply::CONTENT_TOO_LARGE => "CONTENT_TOO_LARGE",
        reply::NO_CONSUMERS => "NO_CONSUMERS",
        reply::CONNECTION_FORCED => "CONNECTION_FORCED",
        reply::INVALID_PATH => "INVALID_PATH",
        reply::ACCESS_REFUSED => "ACCESS_REFUSED",
        reply::NOT_FOUND => "NOT_FOUND",
        reply::RESOURCE_LOCKED => "RESOURCE_LOCKED",
        reply::PRECONDITION_FAILED => "PRECONDITION_FAILED",
        reply::FRAME_ERROR => "FRAME_ERROR",
        reply::SYNTAX_ERROR => "SYNTAX_ERROR",
        reply::COMMAND_INVALID => "COMMAND_INVALID",
        reply::CHANNEL_ERROR => "CHANNEL_ERROR",
        reply::UNEXPECTED_FRAME => "UNEXPECTED_FRAME",
        reply::RESOURCE_ERROR => "RESOURCE_ERROR",
        reply::NOT_ALLOWED => "NOT_ALLOWED",
        reply::NOT_IMPLEMENTED => "NOT_IMPLEMENTED",
        reply::INTERNAL_ERROR => "INTERNAL_ERROR",
        _ => "ERROR",
    }
}

impl From<crate::access::Denied> for Fault {
    fn from(d: crate::access::Denied) -> Fault {
        Fault::access_refused(d.0)
    }
}

/// The default mapping of core errors. Methods where 0-9-1 (as RabbitMQ implements it) wants
/// another code check for that case before calling the core.
impl From<BrokerError> for Fault {
    fn from(e: BrokerError) -> Fault {
        let code = match &e {
            BrokerError::NotFound(_) => reply::NOT_FOUND,
            BrokerError::ResourceLocked(_) => reply::RESOURCE_LOCKED,
            BrokerError::PreconditionFailed(_) => reply::PRECONDITION_FAILED,
            // Reserved names, built-in exchanges, the default exchange: RabbitMQ refuses all of
            // these with access-refused on the channel, not with a connection-level 530.
            BrokerError::NotAllowed(_) => reply::ACCESS_REFUSED,
            BrokerError::ResourceLimitExceeded(_) => reply::PRECONDITION_FAILED,
            BrokerError::InvalidArgument(_) => reply::PRECONDITION_FAILED,
            BrokerError::NotImplemented(_) => reply::NOT_IMPLEMENTED,
        };
        let text = match e {
            BrokerError::NotFound(t)
            | BrokerError::ResourceLocked(t)
            | BrokerError::PreconditionFailed(t)
            | BrokerError::NotAllowed(t)
            | BrokerError::ResourceLimitExceeded(t)
            | BrokerError::InvalidArgument(t)
            | BrokerError::NotImplemented(t) => t,
        };
        Fault::new(code, text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn soft_and_hard_codes() {
        assert!(!Fault::from(BrokerError::NotFound("q".into())).is_hard());
        assert_eq!(Fault::from(BrokerError::NotAllowed("x".into())).code, 403);
        assert!(Fault::from(BrokerError::NotImplemented("x".into())).is_hard());
        assert!(Fault::command_invalid("x").is_hard());
    }

    #[test]
    fn wire_text_is_a_shortstr() {
        let f = Fault::not_found("é".repeat(300));
        let t = f.wire_text();
        assert!(t.starts_with("NOT_FOUND - "));
        assert!(t.len() <= 255);
    }
}
