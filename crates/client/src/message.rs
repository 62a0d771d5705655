//! Messages going out (`OutgoingMessage`, encoded once, sent any number of times) and
//! coming in (`Delivery`).

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use ferry_amqp010::{
    DecodeError, DeliveryMode, DeliveryPriority, DeliveryProperties, MessageHeader,
    MessageProperties, ReplyTo, SequenceSet, Str, Value,
};

use crate::error::ClientError;

/// A message ready to publish. The header segment is encoded when the message is built,
/// so publishing the same message repeatedly costs only the copy into the socket buffer.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OutgoingMessage {
    header_segment: Bytes,
    body: Bytes,
}

impl OutgoingMessage {
    /// A message with no properties at all.
    pub fn new(body: impl Into<Bytes>) -> Self {
        OutgoingMessage {
            header_segment: Bytes::new(),
            body: body.into(),
        }
    }

    pub fn with_header(
        header: &MessageHeader,
        body: impl Into<Bytes>,
    ) -> Result<Self, ClientError> {
        let mut out = BytesMut::new();
        header.encode(&mut out)?;
        Ok(OutgoingMessage {
            header_segment: out.freeze(),
            body: body.into(),
        })
    }

    /// A header segment sent exactly as given (tests use this to send odd headers).
    pub fn with_raw_header(header_segment: Bytes, body: impl Into<Bytes>) -> Self {
        OutgoingMessage {
            header_segment,
            body: body.into(),
        }
    }

    pub fn builder() -> MessageBuilder {
        MessageBuilder::default()
    }

    pub fn header_segment(&self) -> &Bytes {
        &self.header_segment
    }

    pub fn body(&self) -> &Bytes {
        &self.body
    }

    pub fn header(&self) -> Result<MessageHeader, DecodeError> {
        MessageHeader::decode(self.header_segment.clone())
    }
}

/// Builds delivery- and message-properties for an [`OutgoingMessage`].
#[derive(Debug, Clone, Default)]
pub struct MessageBuilder {
    delivery: DeliveryProperties,
    properties: MessageProperties,
    body: Bytes,
}

impl MessageBuilder {
    pub fn body(mut self, body: impl Into<Bytes>) -> Self {
        self.body = body.into();
        self
    }

    pub fn routing_key(mut self, key: &str) -> Self {
        self.delivery.routing_key = Some(Str::from(key));
        self
    }

    /// Rounded down to whole milliseconds, the unit of the `ttl` field.
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.delivery.ttl = Some(u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX));
        self
    }

    /// 0-9; larger values are sent as 9.
    pub fn priority(mut self, priority: u8) -> Self {
        self.delivery.priority = DeliveryPriority::from_code(priority.min(9));
        self
    }

    pub fn persistent(mut self, persistent: bool) -> Self {
        self.delivery.delivery_mode = Some(if persistent {
            DeliveryMode::Persistent
        } else {
            DeliveryMode::NonPersistent
        });
        self
    }

    /// Adds one application header.
    pub fn header(mut self, key: &str, value: impl Into<Value>) -> Self {
        self.properties
            .application_headers
            .get_or_insert_with(Default::default)
            .insert(key, value.into());
        self
    }

    pub fn correlation_id(mut self, id: impl Into<Bytes>) -> Self {
        self.properties.correlation_id = Some(id.into());
        self
    }

    pub fn message_id(mut self, id: [u8; 16]) -> Self {
        self.properties.message_id = Some(id);
        self
    }

    pub fn reply_to(mut self, exchange: &str, routing_key: &str) -> Self {
        self.properties.reply_to = Some(ReplyTo {
            exchange: Some(Str::from(exchange)),
            routing_key: Some(Str::from(routing_key)),
        });
        self
    }

    pub fn content_type(mut self, content_type: &str) -> Self {
        self.properties.content_type = Some(Str::from(content_type));
        self
    }

    /// Direct access for fields without a setter.
    pub fn delivery_properties(&mut self) -> &mut DeliveryProperties {
        &mut self.delivery
    }

    pub fn message_properties(&mut self) -> &mut MessageProperties {
        &mut self.properties
    }

    pub fn build(self) -> Result<OutgoingMessage, ClientError> {
        let header = MessageHeader {
            delivery: (self.delivery != DeliveryProperties::default()).then_some(self.delivery),
            properties: (self.properties != MessageProperties::default())
                .then_some(self.properties),
            other: Vec::new(),
        };
        OutgoingMessage::with_header(&header, self.body)
    }
}

/// A message received on a subscription.
#[derive(Debug, Clone)]
pub struct Delivery {
    /// The transfer's command id: what accept, release, reject and acquire name.
    pub id: u32,
    pub destination: Str,
    /// The decoded header segment; default if it did not decode (see `header_error`).
    pub header: MessageHeader,
    pub header_error: Option<DecodeError>,
    /// The header segment as received.
    pub raw_header: Bytes,
    pub body: Bytes,
    pub redelivered: bool,
}

/// A delivery with its header segment still encoded, for receivers that need little but the
/// body (a load generator): reading the header's properties is most of what taking a small
/// message costs. [`Transfer::decode`] gives the [`Delivery`] with the header read.
#[derive(Debug, Clone)]
pub struct Transfer {
    /// The transfer's command id: what accept, release, reject and acquire name.
    pub id: u32,
    pub destination: Str,
    /// The header segment as received.
    pub raw_header: Bytes,
    pub body: Bytes,
}

impl Transfer {
    /// delivery-properties.redelivered, read without decoding the rest of the header.
    pub fn redelivered(&self) -> Result<bool, DecodeError> {
        ferry_amqp010::is_redelivered(&self.raw_header)
    }

    pub fn decode(self) -> Delivery {
        Delivery::new(self.id, self.destination, self.raw_header, self.body)
    }
}

impl Delivery {
    pub(crate) fn new(id: u32, destination: Str, raw_header: Bytes, body: Bytes) -> Self {
        let (header, header_error) = match MessageHeader::decode(raw_header.clone()) {
            Ok(h) => (h, None),
            Err(e) => (MessageHeader::default(), Some(e)),
        };
        let redelivered = header.delivery.as_ref().is_some_and(|d| d.redelivered);
        Delivery {
            id,
            destination,
            header,
            header_error,
            raw_header,
            body,
            redelivered,
        }
    }

    /// This delivery's id as a set, for accept/release/reject/acquire.
    pub fn id_set(&self) -> SequenceSet {
        SequenceSet::from_range(self.id, self.id)
    }

    pub fn routing_key(&self) -> Option<&Str> {
        self.header.delivery.as_ref()?.routing_key.as_ref()
    }

    pub fn application_header(&self, key: &str) -> Option<&Value> {
        self.header
            .properties
            .as_ref()?
            .application_headers
            .as_ref()?
            .get(key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builder_round_trips_through_the_header_segment() {
        let m = OutgoingMessage::builder()
            .routing_key("rk")
            .ttl(Duration::from_millis(1500))
            .priority(12)
            .persistent(true)
            .header("colour", "blue")
            .correlation_id(&b"c1"[..])
            .reply_to("amq.direct", "replies")
            .content_type("text/plain")
            .body(&b"hello"[..])
            .build()
            .unwrap();
        let h = m.header().unwrap();
        let d = h.delivery.unwrap();
        assert_eq!(d.routing_key.unwrap(), "rk");
        assert_eq!(d.ttl, Some(1500));
        assert_eq!(d.priority, Some(DeliveryPriority::Highest));
        assert_eq!(d.delivery_mode, Some(DeliveryMode::Persistent));
        let p = h.properties.unwrap();
        assert_eq!(
            p.application_headers.unwrap().get("colour"),
            Some(&Value::from("blue"))
        );
        assert_eq!(p.correlation_id.as_deref(), Some(&b"c1"[..]));
        assert_eq!(p.content_type.unwrap(), "text/plain");
        assert_eq!(&m.body()[..], b"hello");
    }

    #[test]
    fn empty_builder_sends_an_empty_header() {
        let m = OutgoingMessage::builder().body("x").build().unwrap();
        assert!(m.header_segment().is_empty());
    }

    #[test]
    fn delivery_reports_redelivered_and_bad_headers() {
        let header = MessageHeader {
            delivery: Some(DeliveryProperties {
                redelivered: true,
                ..Default::default()
            }),
            ..Default::default()
        };
        let m = OutgoingMessage::with_header(&header, "b").unwrap();
        let d = Delivery::new(7, Str::from("d"), m.header_segment().clone(), Bytes::new());
        assert!(d.redelivered && d.header_error.is_none());
        assert_eq!(d.id_set(), SequenceSet::from_range(7, 7));
        let bad = Delivery::new(8, Str::from("d"), Bytes::from_static(&[0, 0]), Bytes::new());
        assert!(bad.header_error.is_some() && !bad.redelivered);
    }
}
