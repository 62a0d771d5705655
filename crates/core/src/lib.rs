//! Protocol-neutral broker core: exchanges, bindings, queues, messages, consumers, credit and
//! settlement.
//!
//! The protocol layers (AMQP 0-10 and 0-9-1, in `ferry-server`) translate their commands into
//! calls on [`Broker`] and [`Queue`], and drain each connection's [`Outbox`] to write
//! deliveries. The core never parses protocol headers: a [`Message`] carries its encoded header
//! opaquely so a delivery can be written back without re-encoding. Nor does it do I/O: a
//! [`Journal`] (`ferry-store`'s) is told what changes in durable state.
//!
//! # Layers
//!
//! A module uses only modules of lower-numbered layers (the `layering` test reads this list
//! and checks every `crate::` path outside test code against it):
//!
//! 1. `error`, `value`, `id_hash`, `alarm`, `exchange_kind`, `stats`: vocabulary and the
//!    management counters, depending on nothing.
//! 2. `limits`, `message`, `events`: queue depth limits; messages, with their store identity
//!    and dead-lettering history; the changes an observer (management) is told of.
//! 3. `journal`: the core's view of a durable store. It wakes a [`DurableWaiter`] (an outbox)
//!    when a sync point is reached.
//! 4. `queue`: storage, consumers and credit, dispatch into connections' outboxes,
//!    settlement windows, settlement, flow to disk. A queue holds its alternate exchange
//!    only through a trait, and what it dead-letters comes back to the caller as effects.
//! 5. `exchange`: exchanges and their bindings, which hold queues.
//! 6. `route`: a message's way through exchanges into queues, journaled first when
//!    persistent; routing what queues dead-letter, and so the public queue operations that
//!    can dead-letter (reject, release, the counts that sweep expired messages).
//! 7. `transaction`: staged publishes and settlements, applied as one unit.
//! 8. `connections`, `dtx`: the registry of open connections management sees and may
//!    close; distributed transactions' branches, whose work is transactions.
//! 9. `broker`: the registry, declarations and bindings, the publish and commit entry points,
//!    housekeeping, recovery and resource alarms.
//! 10. `mgmt`: snapshots of everything above for management (HTTP API, metrics, QMF).
//!
//! # Locks
//!
//! Lock order (outermost first): broker registry, dtx branches, a branch's work, exchange
//! bindings, queue state, outbox or settlement window; a [`Journal`]'s own locks are leaves (queues append dequeues under their
//! lock).
//! The publish path takes no registry lock: sessions cache `Arc<Exchange>` handles, routing takes
//! one exchange read lock, then each target queue's mutex in turn (never two at once). Only a
//! transaction's commit holds several queue locks, taken in queue-id order. Dead letters are
//! publishes of their own, made once the queue lock that took them off is released.

mod alarm;
mod broker;
mod connections;
mod dtx;
mod error;
mod events;
mod exchange;
mod exchange_kind;
mod id_hash;
mod journal;
#[cfg(test)]
mod layering;
mod limits;
mod message;
mod mgmt;
mod queue;
mod route;
mod stats;
mod transaction;
mod value;

pub use alarm::{Alarm, Alarms, MemoryMeter, Watermarks};
pub use broker::{
    BindingFilters, BoundResult, Broker, BrokerConfig, Dialect, MakeBindingFilter, PublishOutcome,
};
pub use connections::{
    ConnectionHandle, ConnectionMeta, ConnectionStatus, Connections, SessionStatus,
};
pub use dtx::{DtxError, DtxManager, DtxTimeouts, DtxWork, XaOutcome, Xid};
pub use error::BrokerError;
pub use events::{BrokerEvent, Observer, Threshold};
pub use exchange::{BindingIdentity, BindingStatus, Exchange, ExchangeInfo, ExchangeOptions};
pub use exchange_kind::ExchangeKind;
pub use id_hash::{IdHasher, IdMap};
pub use journal::{
    DurableWaiter, ExchangeDefinition, Journal, JournalStats, JournalTx, QueueDefinition, SyncPoint,
};
pub use limits::{LimitPolicy, LimitScope, QueueLimits};
pub use message::{
    now_ms, Death, DeathHistory, DeathReason, Header, HeaderMatch, Message, MessageFilter,
    MessageParts, Props, ProtocolHeader, Sequenced, TraceEdit, INLINE_BODY_MAX, TRACE_HEADER,
};
pub use mgmt::{ConsumerEntry, ExchangeStatus, Overview, QueueStatus};
pub use queue::{
    is_quorum_declare, Accepts, BacklogWaiter, ConsumerFilter, ConsumerSpec, ConsumerStatus,
    Delivery, Got, MessageGroup, MessageGroups, Outbox, OutboxItem, Queue, QueueDepth, QueueInfo,
    QueueOptions, QuotaCharge, Restored, RestoredMessage, SettleWindow,
};
pub use route::release_deliveries;
pub use stats::{ConnectionCounters, ExchangeCounters, ExchangeTotals, QueueCounters, Traffic};
pub use transaction::{CommitOutcome, Settlement, Transaction};
pub use value::{Arguments, Brief, HeaderValue, Headers};

/// Identifies a consumer (subscription) across the broker; allocate with
/// [`Broker::next_consumer_id`].
pub type ConsumerId = u64;

/// Identifies the session (0-10) or connection (0-9-1) that owns exclusive queues and consumers.
/// Opaque to the core; allocate with [`Broker::next_owner_id`].
pub type OwnerId = u64;

/// Identifies a client connection: a message remembers the one it was published on (see
/// [`Message::publisher`]), which a no-local queue compares with its owner's. Opaque to
/// the core; allocate with [`Broker::next_connection_id`]; 0 is none.
pub type ConnectionId = u64;
