//! What the broker tells an observer (management: QMF events) about changes to its
//! objects. Optional: without an observer nothing is built.

use crate::exchange_kind::ExchangeKind;
use crate::value::Arguments;
use crate::OwnerId;

/// A change to the broker's queues, exchanges or bindings.
#[derive(Debug, Clone, PartialEq)]
pub enum BrokerEvent {
    /// A non-passive queue.declare, whether it created the queue or found it.
    QueueDeclared {
        name: String,
        durable: bool,
        exclusive: bool,
        auto_delete: bool,
        alternate_exchange: Option<String>,
        arguments: Arguments,
        created: bool,
        /// The session (0-10) or connection (0-9-1) that declared it.
        requester: OwnerId,
    },
    /// Deleted, explicitly (`requester` set) or automatically (auto-delete, exclusive
    /// owner gone, `x-expires`).
    QueueDeleted {
        name: String,
        requester: Option<OwnerId>,
    },
    /// A non-passive exchange.declare, whether it created the exchange or found it.
    ExchangeDeclared {
        name: String,
        kind: ExchangeKind,
        durable: bool,
        auto_delete: bool,
        alternate_exchange: Option<String>,
        arguments: Arguments,
        created: bool,
    },
    ExchangeDeleted {
        name: String,
    },
    /// A queue binding that did not exist before.
    Bound {
        exchange: String,
        queue: String,
        key: String,
        arguments: Arguments,
    },
    /// A queue binding that existed.
    Unbound {
        exchange: String,
        queue: String,
        key: String,
    },
    /// A queue's depth crossed one of its alert thresholds (qpidd's
    /// `queueThresholdCrossedUpward` / `Downward`; `legacy` asks for
    /// `queueThresholdExceeded` too with an upward one).
    QueueThreshold {
        queue: String,
        crossed: Threshold,
        /// The queue's depth then: messages and bytes, queued and acquired.
        messages: u64,
        bytes: u64,
        legacy: bool,
    },
}

/// Which way a queue's depth crossed a threshold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Threshold {
    Upward,
    Downward,
}

/// Told of every [`BrokerEvent`], in the order the changes happened: it is called under the
/// broker's registry lock (threshold events under the queue's), so it must be quick and must
/// not call back into the broker (queue the event and handle it elsewhere).
pub trait Observer: Send + Sync {
    fn event(&self, event: BrokerEvent);
}
