//! The core message a publish becomes, built the same way for every protocol layer.

use std::sync::Arc;

use bytes::Bytes;
use ferry_core::{Headers, Message, ProtocolHeader};

/// Bodies this large usually span frames and so own their memory.
const LARGE_BODY: usize = 4096;

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
    pub fn into_message(self) -> Message {
        // Whatever the message keeps that is sliced from the read buffer keeps that whole
        // buffer alive while the message is queued. For small messages the body shares
        // the buffer anyway; a large body was joined into its own allocation, so the rest
        // gets its own too (a copy of some 100 bytes), and a deep queue of large messages
        // costs what it holds, not twice that.
        let large = self.body.len() >= LARGE_BODY;
        let keep = |b: Bytes| {
            if large {
                Bytes::copy_from_slice(&b)
            } else {
                b
            }
        };
        let size = (self.header.len() + self.body.len()) as u64;
        let header = keep(self.header);
        Message {
            exchange: keep(self.exchange),
            routing_key: keep(self.routing_key),
            header: match self.encoding {
                Encoding::Amqp010 => ProtocolHeader::Amqp010(header),
                Encoding::Amqp091 => ProtocolHeader::Amqp091(header),
                Encoding::Amqp1 => ProtocolHeader::Amqp1(header),
            },
            body: self.body,
            headers: self.headers,
            expires_at: self.expires_at,
            priority: self.priority,
            persistent: self.persistent,
            size,
            ..Message::default()
        }
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

    fn inside(part: &Bytes, buffer: &Bytes) -> bool {
        let start = buffer.as_ptr() as usize;
        let at = part.as_ptr() as usize;
        at >= start && at < start + buffer.len()
    }

    #[test]
    fn a_small_message_shares_the_read_buffer() {
        let buffer = Bytes::from(vec![1u8; 64]);
        let m = publish(buffer.slice(8..20), &buffer).into_message();
        assert!(inside(&m.routing_key, &buffer) && inside(&m.exchange, &buffer));
        assert!(matches!(&m.header, ProtocolHeader::Amqp091(h) if inside(h, &buffer)));
        assert_eq!(m.size, 4 + 12);
        assert_eq!((m.priority, m.persistent, m.expires_at), (3, true, Some(7)));
    }

    #[test]
    fn a_large_message_keeps_nothing_of_the_read_buffer_but_its_body() {
        let buffer = Bytes::from(vec![1u8; 64]);
        let body = Bytes::from(vec![2u8; LARGE_BODY]);
        let m = publish(body, &buffer).into_message();
        assert!(!inside(&m.routing_key, &buffer) && !inside(&m.exchange, &buffer));
        assert!(matches!(&m.header, ProtocolHeader::Amqp091(h) if !inside(h, &buffer)));
        assert_eq!(&m.routing_key[..], &buffer[2..4]);
    }
}
