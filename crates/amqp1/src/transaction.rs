//! Transactions (part 4 of the spec). A client attaches a link whose target
//! is a [`Coordinator`] and sends it [`Declare`] and [`Discharge`] messages
//! (as amqp-value bodies); the coordinator answers with a [`Declared`]
//! outcome, and transactional work carries a [`TransactionalState`].

use bytes::Bytes;

use crate::messaging::Outcome;
use crate::primitive::Symbol;
use crate::value::Value;

composites! {
    /// The target of a link to a transaction coordinator.
    Coordinator 0x30 "amqp:coordinator:list" {
        capabilities: multi Symbol,
    }

    /// Message body asking the coordinator for a new transaction.
    Declare 0x31 "amqp:declare:list" {
        /// Only for distributed transactions, which nobody implements; kept
        /// as a plain value.
        global_id: opt Value,
    }

    /// Message body ending a transaction: commit, or roll back if `fail`.
    Discharge 0x32 "amqp:discharge:list" {
        txn_id: req Bytes,
        fail: opt bool,
    }

    /// Outcome of a declare: the new transaction's id.
    Declared 0x33 "amqp:declared:list" {
        txn_id: req Bytes,
    }

    /// Delivery state of work done inside a transaction.
    TransactionalState 0x34 "amqp:transactional-state:list" {
        txn_id: req Bytes,
        outcome: opt Outcome,
    }
}

/// `txn-capability` symbols a coordinator may offer.
pub mod capability {
    use crate::primitive::Symbol;
    pub const LOCAL_TRANSACTIONS: Symbol = Symbol::from_static("amqp:local-transactions");
    pub const DISTRIBUTED_TRANSACTIONS: Symbol =
        Symbol::from_static("amqp:distributed-transactions");
    pub const PROMOTABLE_TRANSACTIONS: Symbol = Symbol::from_static("amqp:promotable-transactions");
    pub const MULTI_TXNS_PER_SSN: Symbol = Symbol::from_static("amqp:multi-txns-per-ssn");
    pub const MULTI_SSNS_PER_TXN: Symbol = Symbol::from_static("amqp:multi-ssns-per-txn");
}

/// The `transaction-error` conditions, also in [`crate::condition`].
pub use crate::condition::{TRANSACTION_ROLLBACK, TRANSACTION_TIMEOUT, TRANSACTION_UNKNOWN_ID};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::field::Composite;
    use crate::messaging::{Accepted, DeliveryState};
    use bytes::BytesMut;

    #[test]
    fn declare_and_discharge_by_hand() {
        let mut out = BytesMut::new();
        Declare::default().encode(&mut out);
        assert_eq!(&out[..], &[0x00, 0x53, 0x31, 0x45]);

        let discharge = Discharge {
            txn_id: Bytes::from_static(&[0, 0, 0, 7]),
            fail: Some(true),
        };
        let mut out = BytesMut::new();
        discharge.encode(&mut out);
        assert_eq!(
            &out[..],
            &[0x00, 0x53, 0x32, 0xc0, 8, 2, 0xa0, 4, 0, 0, 0, 7, 0x41]
        );
        let mut buf = out.freeze();
        assert_eq!(Discharge::decode(&mut buf), Ok(discharge));
    }

    #[test]
    fn transactional_state_nests_an_outcome() {
        let state = DeliveryState::Transactional(TransactionalState {
            txn_id: Bytes::from_static(b"tx1"),
            outcome: Some(Outcome::Accepted(Accepted {})),
        });
        let mut out = BytesMut::new();
        state.encode(&mut out);
        #[rustfmt::skip]
        let expected: &[u8] = &[
            0x00, 0x53, 0x34, 0xc0, 10, 2,
            0xa0, 3, b't', b'x', b'1',
            0x00, 0x53, 0x24, 0x45,
        ];
        assert_eq!(&out[..], expected);
        let mut buf = out.freeze();
        assert_eq!(DeliveryState::decode(&mut buf), Ok(state));
    }

    #[test]
    fn discharge_needs_a_txn_id() {
        let mut buf = Bytes::from_static(&[0x00, 0x53, 0x32, 0x45]);
        assert_eq!(
            Discharge::decode(&mut buf),
            Err(crate::DecodeError::MissingField {
                composite: "amqp:discharge:list",
                field: "txn_id"
            })
        );
    }
}
