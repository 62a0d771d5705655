//! Protocol-neutral broker core: exchanges, bindings, queues, messages, consumers, credit and
//! settlement.
//!
//! Protocol layers (AMQP 0-10 now, 0-9-1 later) translate their commands into calls on
//! [`Broker`] and [`Queue`], and drain each connection's [`Outbox`] to write deliveries. The core
//! never parses protocol headers: a [`Message`] carries its encoded header opaquely so a
//! delivery can be written back without re-encoding.
//!
//! Lock order (outermost first): broker registry, exchange bindings, queue state, outbox or
//! settlement window; a [`Journal`]'s own locks are leaves (queues append dequeues under their
//! lock).
//! The publish path takes no registry lock: sessions cache `Arc<Exchange>` handles, routing takes
//! one exchange read lock, then each target queue's mutex in turn (never two at once). Only a
//! transaction's commit holds several queue locks, taken in queue-id order.

mod alarm;
mod broker;
mod error;
mod exchange;
mod exchange_kind;
mod id_hash;
mod journal;
mod limits;
mod message;
mod queue;
mod route;
mod transaction;
mod value;

pub use alarm::{Alarm, Alarms, MemoryMeter, Watermarks};
pub use broker::{BoundResult, Broker, BrokerConfig, PublishOutcome};
pub use error::BrokerError;
pub use exchange::{Exchange, ExchangeInfo, ExchangeOptions};
pub use exchange_kind::ExchangeKind;
pub use id_hash::{IdHasher, IdMap};
pub use journal::{
    DurableWaiter, ExchangeDefinition, Journal, JournalTx, QueueDefinition, SyncPoint,
};
pub use limits::{LimitPolicy, QueueLimits};
pub use message::{now_ms, Death, DeathHistory, DeathReason, Message, ProtocolHeader, StoreRef};
pub use queue::{
    ConsumerSpec, Delivery, Got, Outbox, OutboxItem, Queue, QueueInfo, QueueOptions, QuotaCharge,
    Restored, SettleWindow,
};
pub use route::release_deliveries;
pub use transaction::{CommitOutcome, Settlement, Transaction};
pub use value::{Arguments, HeaderValue, Headers};

/// Identifies a consumer (subscription) across the broker; allocate with
/// [`Broker::next_consumer_id`].
pub type ConsumerId = u64;

/// Identifies the session (0-10) or connection (0-9-1) that owns exclusive queues and consumers.
/// Opaque to the core; allocate with [`Broker::next_owner_id`].
pub type OwnerId = u64;
