//! The core message a publish becomes, built the same way for every protocol layer.

use std::sync::Arc;

use bytes::Bytes;
use ferry_core::{Headers, Message, MessageParts, ProtocolHeader};

/// Which protocol's encoding the header is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    Amqp010,
    Amqp091,
    /// The stored form of `bridge::amqp1::stored`.
    Amqp1,
}

/// What a protocol layer read from a publish. The byte fields may be slices of the read
/// buffer.
pub struct Publish {
    pub exchange: Bytes,
    pub routing_key: Bytes,
    /// The message's header as received (0-10 header segment, 0-9-1 properties), or the
    /// 1.0 sections other than the body.
    pub header: Bytes,
    pub encoding: Encoding,
    pub body: Bytes,
    pub persistent: bool,
    pub priority: u8,
    /// Absolute, in milliseconds since the epoch.
    pub expires_at: Option<u64>,
    /// Application headers, decoded only when the exchange routes on them.
    pub headers: Option<Arc<Headers>>,
}

impl Publish {
    /// The parts of the core message (which copies what it keeps of the read buffer but
    /// for a large body: see `ferry_core::INLINE_BODY_MAX`).
    pub fn into_parts(self) -> MessageParts {
        MessageParts {
            exchange: self.exchange,
            routing_key: self.routing_key,
            header: match self.encoding {
                Encoding::Amqp010 => ProtocolHeader::Amqp010(self.header),
                Encoding::Amqp091 => ProtocolHeader::Amqp091(self.header),
                Encoding::Amqp1 => ProtocolHeader::Amqp1(self.header),
            },
            body: self.body,
            headers: self.headers,
            expires_at: self.expires_at,
            priority: self.priority,
            persistent: self.persistent,
            ..MessageParts::default()
        }
    }

    pub fn into_message(self) -> Message {
        self.into_parts().build()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn publish(body: Bytes, buffer: &Bytes) -> Publish {
        Publish {
            exchange: buffer.slice(0..2),
            routing_key: buffer.slice(2..4),
            header: buffer.slice(4..8),
            encoding: Encoding::Amqp091,
            body,
            persistent: true,
            priority: 3,
            expires_at: Some(7),
            headers: None,
        }
    }

    #[test]
    fn a_small_message_keeps_nothing_of_the_read_buffer() {
        let buffer = Bytes::from(vec![1u8; 64]);
        let m = publish(buffer.slice(8..20), &buffer).into_message();
        assert!(buffer.is_unique(), "header, keys and body were copied");
        assert_eq!(
            (m.exchange(), m.routing_key()),
            (&buffer[0..2], &buffer[2..4])
        );
        assert_eq!(m.header(), ferry_core::Header::Amqp091(&buffer[4..8]));
        assert_eq!(m.body(), &buffer[8..20]);
        assert_eq!(m.size(), 4 + 12);
        assert_eq!(
            (m.priority(), m.persistent(), m.expires_at()),
            (3, true, Some(7))
        );
    }

    #[test]
    fn a_large_body_is_kept_as_it_came_and_the_rest_copied() {
        let buffer = Bytes::from(vec![1u8; 64]);
        let body = Bytes::from(vec![2u8; ferry_core::INLINE_BODY_MAX]);
        let m = publish(body.clone(), &buffer).into_message();
        assert!(buffer.is_unique());
        assert_eq!(m.body().as_ptr(), body.as_ptr(), "not copied");
        assert_eq!(m.routing_key(), &buffer[2..4]);
    }
}
