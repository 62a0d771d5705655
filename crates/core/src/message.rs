//! Messages as the core sees them.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;

use crate::journal::StoreRef;
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
    /// Bytes counted against queue size limits and consumer byte credit (header + body as set by
    /// the protocol layer).
    pub size: u64,
    /// Set when a journal has recorded the message (persistent, on a durable queue).
    pub stored: StoreRef,
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
    fn now_is_after_2020() {
        assert!(now_ms() > 1_577_836_800_000);
    }
}
