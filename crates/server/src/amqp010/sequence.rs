//! A sequencing queue's number (qpidd's `qpid.queue_msg_sequence`) delivered to 0-10
//! consumers as qpidd sends it: an application header (uint32) under the queue's key,
//! added to message-properties (re-encoded; only numbered messages pay).

use bytes::Bytes;
use ferry_amqp010::{Str, Value};
use ferry_core::Sequenced;

/// The header segment with the number added; `None` if it does not decode (it always does:
/// the broker decoded or built it).
pub fn render(segment: &Bytes, sequence: &Sequenced) -> Option<Bytes> {
    super::rewrite::edit_header(segment, sequence.key.len() + 16, |_, headers| {
        headers.insert(Str::from(&*sequence.key), Value::Uint32(sequence.number));
        true
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;
    use ferry_amqp010::{DeliveryProperties, Map, MessageHeader, MessageProperties};

    #[test]
    fn the_number_joins_the_application_headers() {
        let mut app = Map::new();
        app.insert("colour", Value::Str16(Str::from("red")));
        let header = MessageHeader {
            delivery: Some(DeliveryProperties {
                routing_key: Some(Str::from("q")),
                ..Default::default()
            }),
            properties: Some(MessageProperties {
                application_headers: Some(app),
                ..Default::default()
            }),
            other: Vec::new(),
        };
        let mut segment = BytesMut::new();
        header.encode(&mut segment).unwrap();
        let seq = Sequenced {
            key: "qpid.seq".into(),
            number: 3,
        };
        let out = MessageHeader::decode(render(&segment.freeze(), &seq).unwrap()).unwrap();
        let app = out.properties.unwrap().application_headers.unwrap();
        assert_eq!(app.get("qpid.seq"), Some(&Value::Uint32(3)));
        assert_eq!(app.get("colour"), Some(&Value::Str16(Str::from("red"))));
        // No properties at all: they are made.
        let bare = render(&Bytes::new(), &seq).unwrap();
        let app = MessageHeader::decode(bare).unwrap().properties.unwrap();
        assert_eq!(
            app.application_headers.unwrap().get("qpid.seq"),
            Some(&Value::Uint32(3))
        );
    }
}
