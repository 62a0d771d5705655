//! Error conditions: the symbols carried in `error.condition` of close, end,
//! detach and rejected. Servers pick one of these rather than spelling the
//! symbol, so a typo cannot reach the wire.

use crate::primitive::Symbol;

macro_rules! conditions {
    ($($(#[$doc:meta])* $name:ident = $sym:literal;)*) => {
        $($(#[$doc])* pub const $name: Symbol = Symbol::from_static($sym);)*

        /// Every condition this module defines, for lookups and tests.
        pub const ALL: &[&str] = &[$($sym),*];
    };
}

conditions! {
    // amqp-error
    /// A bug or failure in the peer that is not the client's fault.
    INTERNAL_ERROR = "amqp:internal-error";
    /// The node named (e.g. an attach's address) does not exist.
    NOT_FOUND = "amqp:not-found";
    UNAUTHORIZED_ACCESS = "amqp:unauthorized-access";
    /// Data could not be decoded.
    DECODE_ERROR = "amqp:decode-error";
    RESOURCE_LIMIT_EXCEEDED = "amqp:resource-limit-exceeded";
    /// The peer tried something that is not allowed (e.g. a non-empty payload
    /// where none is expected).
    NOT_ALLOWED = "amqp:not-allowed";
    INVALID_FIELD = "amqp:invalid-field";
    NOT_IMPLEMENTED = "amqp:not-implemented";
    RESOURCE_LOCKED = "amqp:resource-locked";
    PRECONDITION_FAILED = "amqp:precondition-failed";
    RESOURCE_DELETED = "amqp:resource-deleted";
    /// A frame arrived that the current state does not allow.
    ILLEGAL_STATE = "amqp:illegal-state";
    /// A frame (e.g. an attach) does not fit in the max-frame-size.
    FRAME_SIZE_TOO_SMALL = "amqp:frame-size-too-small";

    // connection-error
    /// An operator closed the connection.
    CONNECTION_FORCED = "amqp:connection:forced";
    /// A frame could not be parsed (bad header, oversized, ...).
    FRAMING_ERROR = "amqp:connection:framing-error";
    CONNECTION_REDIRECT = "amqp:connection:redirect";

    // session-error
    WINDOW_VIOLATION = "amqp:session:window-violation";
    ERRANT_LINK = "amqp:session:errant-link";
    HANDLE_IN_USE = "amqp:session:handle-in-use";
    UNATTACHED_HANDLE = "amqp:session:unattached-handle";

    // link-error
    DETACH_FORCED = "amqp:link:detach-forced";
    TRANSFER_LIMIT_EXCEEDED = "amqp:link:transfer-limit-exceeded";
    MESSAGE_SIZE_EXCEEDED = "amqp:link:message-size-exceeded";
    LINK_REDIRECT = "amqp:link:redirect";
    /// Another attach with the same link name took this link over.
    STOLEN = "amqp:link:stolen";

    // transaction-error
    /// A transaction id the coordinator does not know.
    TRANSACTION_UNKNOWN_ID = "amqp:transaction:unknown-id";
    /// The transaction was rolled back instead of committed.
    TRANSACTION_ROLLBACK = "amqp:transaction:rollback";
    TRANSACTION_TIMEOUT = "amqp:transaction:timeout";
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conditions_are_distinct_and_namespaced() {
        for (i, s) in ALL.iter().enumerate() {
            assert!(s.starts_with("amqp:"), "{s}");
            assert!(!ALL[i + 1..].contains(s), "{s} twice");
        }
        assert_eq!(ALL.len(), 28);
        assert_eq!(STOLEN, "amqp:link:stolen");
        // The spec's names (2.8.15 onwards) all live under amqp:.
        assert_eq!(FRAMING_ERROR, "amqp:connection:framing-error");
        assert_eq!(WINDOW_VIOLATION, "amqp:session:window-violation");
    }
}
