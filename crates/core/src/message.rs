//! Messages as the core sees them.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;

use crate::value::Headers;

/// The protocol header exactly as received, kept so a delivery can be re-sent without the core
/// understanding (or re-encoding) it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ProtocolHeader {
    /// Encoded 0-10 header segment (delivery-properties and message-properties structs).
    Amqp010(Bytes),
    /// Encoded 0-9-1 content-header properties (the property-flags word and the properties
    /// after it).
    Amqp091(Bytes),
    /// What an AMQP 1.0 delivery needs besides [`Message::body`] to be sent on byte for byte:
    /// its sections other than the body, and how the body was encoded. The layout is the
    /// 1.0 protocol layer's (`ferry-server`'s `amqp1::stored`); the core never looks inside.
    Amqp1(Bytes),
    #[default]
    None,
}

/// A published message. Shared as `Arc<Message>`: routing to N queues clones the `Arc`, never
/// the body.
#[derive(Debug, Clone, Default)]
pub struct Message {
    pub routing_key: Bytes,
    /// Name of the exchange it was published to.
    pub exchange: Bytes,
    pub body: Bytes,
    pub header: ProtocolHeader,
    /// Application headers in neutral form; filled by the protocol layer only when the target
    /// exchange asks for them ([`crate::Exchange::needs_headers`]), since decoding them costs.
    pub headers: Option<Arc<Headers>>,
    /// Absolute expiry in milliseconds since the UNIX epoch.
    pub expires_at: Option<u64>,
    pub priority: u8,
    pub persistent: bool,
    /// A 0-10 publisher sent the body as a segment of its own. Only telling for an empty
    /// body: a zero-length body segment is delivered as one (an empty body), where a
    /// message sent without any is delivered without (qpidd forwards segments as received).
    pub body_segment: bool,
    /// Bytes counted against queue size limits and consumer byte credit (header + body as set by
    /// the protocol layer).
    pub size: u64,
    /// Set when a journal has recorded the message (persistent, on a durable queue).
    pub stored: StoreRef,
    /// Where and why the message was dead-lettered so far; `None` for a message that never
    /// was. Protocol layers render it on delivery (0-9-1 as RabbitMQ's `x-death` headers).
    pub deaths: Option<Arc<DeathHistory>>,
    /// The connection it was published on (0: none known, e.g. recovered from the store).
    /// Kept through rerouting, so a no-local queue knows its owner's messages wherever
    /// they come from (qpidd's `Message::isLocalTo`).
    pub publisher: crate::ConnectionId,
    /// The number a sequencing queue gave the message as it arrived there; protocol layers
    /// deliver it as an application header. `None` on every other queue.
    pub sequence: Option<Arc<Sequenced>>,
}

/// qpidd's `qpid.queue_msg_sequence`: a queue counts the messages arriving on it (from 1,
/// every one, so consumers see gaps where some were dropped or purged) and each carries its
/// number to consumers in the application header the argument names (a 0-10 uint32).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sequenced {
    pub key: Arc<str>,
    pub number: u32,
}

/// Why a queue dead-lettered a message (RabbitMQ's reason names).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeathReason {
    /// Rejected or nacked without requeue.
    Rejected,
    /// Its TTL ran out on the queue.
    Expired,
    /// Dropped from the head of a queue over its length limit.
    Maxlen,
}

impl DeathReason {
    pub fn name(self) -> &'static str {
        match self {
            DeathReason::Rejected => "rejected",
            DeathReason::Expired => "expired",
            DeathReason::Maxlen => "maxlen",
        }
    }
}

/// One kind of death: a message dead-lettered `count` times by one queue for one reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Death {
    pub queue: String,
    pub reason: DeathReason,
    pub count: u64,
    /// The exchange the message had been published to when it first died this way (a dead
    /// letter exchange if it had been dead-lettered before).
    pub exchange: Bytes,
    /// Its routing key at that time.
    pub routing_key: Bytes,
    /// When it first died this way, in milliseconds since the UNIX epoch.
    pub time: u64,
}

/// A message's dead-lettering history in neutral form. Entries are keyed by (queue, reason)
/// and kept most recent first, as RabbitMQ keeps `x-death`: a repeat increments the count of
/// its entry and moves it to the front, so a message cycling through a retry loop carries a
/// bounded history.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeathHistory {
    pub entries: Vec<Death>,
    /// The very first death, which no later one replaces (`x-first-death-*`).
    pub first: Option<Death>,
}

impl DeathHistory {
    pub fn record(
        &mut self,
        queue: &str,
        reason: DeathReason,
        exchange: &Bytes,
        routing_key: &Bytes,
        now_ms: u64,
    ) {
        let found = self
            .entries
            .iter()
            .position(|d| d.reason == reason && d.queue == queue);
        let entry = match found {
            Some(i) => {
                let mut d = self.entries.remove(i);
                d.count = d.count.saturating_add(1);
                d
            }
            None => Death {
                queue: queue.to_owned(),
                reason,
                count: 1,
                exchange: exchange.clone(),
                routing_key: routing_key.clone(),
                time: now_ms,
            },
        };
        if self.first.is_none() {
            self.first = Some(entry.clone());
        }
        self.entries.insert(0, entry);
    }

    /// The most recent death.
    pub fn last(&self) -> Option<&Death> {
        self.entries.first()
    }

    /// RabbitMQ's cycle rule: dead-lettering back into a queue the message already died in
    /// is a cycle unless a consumer rejected it somewhere on the way (only a client can then
    /// break the loop, so the broker does not).
    pub fn is_cycle_into(&self, queue: &str) -> bool {
        self.entries.iter().any(|d| d.queue == queue)
            && !self
                .entries
                .iter()
                .any(|d| d.reason == DeathReason::Rejected)
    }
}

impl Message {
    /// A message with no protocol header; `size` is the body length.
    pub fn new(exchange: impl Into<Bytes>, routing_key: impl Into<Bytes>, body: Bytes) -> Message {
        let size = body.len() as u64;
        Message {
            routing_key: routing_key.into(),
            exchange: exchange.into(),
            body,
            size,
            ..Message::default()
        }
    }

    pub fn is_expired_at(&self, now_ms: u64) -> bool {
        self.expires_at.is_some_and(|at| at <= now_ms)
    }

    /// A stand-in for a journaled message whose content stays on disk (flow to disk): what
    /// a queue needs to keep it in order, count it and match its last-value key. The queue
    /// reads the whole message back from the journal before anyone else sees it.
    pub fn stub(&self) -> Message {
        let stub = Message {
            headers: self.headers.clone(),
            expires_at: self.expires_at,
            priority: self.priority,
            persistent: self.persistent,
            size: self.size,
            publisher: self.publisher,
            sequence: self.sequence.clone(),
            ..Message::default()
        };
        stub.stored.carry_from(&self.stored);
        stub
    }
}

/// A message's identity in the store, set when a journal recorded it. A copy of a message
/// (`Message::clone`) is a new message as far as the store is concerned, so cloning gives an
/// unset reference; code that keeps the same stored message under another expiry carries it
/// over with [`StoreRef::carry_from`].
#[derive(Default)]
pub struct StoreRef(AtomicU64);

impl StoreRef {
    /// The store's id for this message, if a journal recorded it.
    pub fn get(&self) -> Option<u64> {
        match self.0.load(Ordering::Acquire) {
            0 => None,
            id => Some(id),
        }
    }

    /// Ids are non-zero; 0 leaves the reference unset.
    pub fn set(&self, id: u64) {
        self.0.store(id, Ordering::Release);
    }

    pub fn carry_from(&self, other: &StoreRef) {
        self.0
            .store(other.0.load(Ordering::Acquire), Ordering::Release);
    }
}

impl Clone for StoreRef {
    fn clone(&self) -> StoreRef {
        StoreRef::default()
    }
}

impl fmt::Debug for StoreRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.get() {
            Some(id) => write!(f, "StoreRef({id})"),
            None => f.write_str("StoreRef(-)"),
        }
    }
}

/// Current time in milliseconds since the UNIX epoch, the unit of [`Message::expires_at`].
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expiry_is_inclusive_of_the_deadline() {
        let mut m = Message::new("", "k", Bytes::from_static(b"abc"));
        assert_eq!(m.size, 3);
        assert!(!m.is_expired_at(u64::MAX));
        m.expires_at = Some(100);
        assert!(!m.is_expired_at(99));
        assert!(m.is_expired_at(100));
    }

    #[test]
    fn deaths_are_counted_per_queue_and_reason_most_recent_first() {
        let mut h = DeathHistory::default();
        let (ex, rk) = (Bytes::from_static(b"x"), Bytes::from_static(b"k"));
        h.record("a", DeathReason::Rejected, &ex, &rk, 1);
        h.record(
            "b",
            DeathReason::Expired,
            &Bytes::from_static(b"dlx"),
            &rk,
            2,
        );
        h.record(
            "a",
            DeathReason::Rejected,
            &Bytes::from_static(b"dlx"),
            &rk,
            3,
        );
        let seen: Vec<(&str, u64, u64)> = h
            .entries
            .iter()
            .map(|d| (d.queue.as_str(), d.count, d.time))
            .collect();
        assert_eq!(seen, [("a", 2, 1), ("b", 1, 2)]);
        // The repeated entry keeps what it recorded first.
        assert_eq!(h.last().unwrap().exchange, ex);
        let first = h.first.as_ref().unwrap();
        assert_eq!(
            (first.queue.as_str(), first.reason),
            ("a", DeathReason::Rejected)
        );
        h.record("a", DeathReason::Expired, &ex, &rk, 4);
        assert_eq!(h.entries.len(), 3);
        assert_eq!(h.last().unwrap().reason.name(), "expired");
    }

    #[test]
    fn only_reject_free_loops_are_cycles() {
        let mut h = DeathHistory::default();
        let b = Bytes::new();
        h.record("a", DeathReason::Expired, &b, &b, 0);
        assert!(h.is_cycle_into("a"));
        assert!(!h.is_cycle_into("b"));
        h.record("b", DeathReason::Rejected, &b, &b, 0);
        assert!(!h.is_cycle_into("a"));
    }

    #[test]
    fn a_clone_is_a_new_message_for_the_store() {
        let r = StoreRef::default();
        assert_eq!(r.get(), None);
        r.set(7);
        assert_eq!(r.get(), Some(7));
        assert_eq!(r.clone().get(), None);
        let carried = StoreRef::default();
        carried.carry_from(&r);
        assert_eq!(carried.get(), Some(7));
    }

    #[test]
    fn now_is_after_2020() {
        assert!(now_ms() > 1_577_836_800_000);
    }
}
