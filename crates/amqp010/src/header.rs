//! Message header segments: a sequence of struct32 entries, of which the broker reads
//! delivery-properties and message-properties and passes the rest through.

use bytes::{BufMut, Bytes, BytesMut};

use crate::codec::{self, Reader};
use crate::error::{DecodeError, EncodeError};
use crate::generated::{DeliveryProperties, MessageProperties};
use crate::value::Struct32;

/// A decoded header segment.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MessageHeader {
    pub delivery: Option<DeliveryProperties>,
    pub properties: Option<MessageProperties>,
    /// Entries of any other type (fragment-properties, or unknown), kept encoded.
    pub other: Vec<Struct32>,
}

impl MessageHeader {
    pub fn decode(segment: Bytes) -> Result<MessageHeader, DecodeError> {
        let mut r = Reader::new(segment);
        let mut header = MessageHeader::default();
        while !r.is_empty() {
            let entry = Struct32::decode(&mut r)?;
            if entry.is::<DeliveryProperties>() && header.delivery.is_none() {
                header.delivery = Some(entry.into_decoded()?);
            } else if entry.is::<MessageProperties>() && header.properties.is_none() {
                header.properties = Some(entry.into_decoded()?);
            } else {
                header.other.push(entry);
            }
        }
        Ok(header)
    }

    /// Writes delivery-properties, message-properties, then the other entries. On error
    /// nothing is appended.
    pub fn encode(&self, out: &mut BytesMut) -> Result<(), EncodeError> {
        codec::atomically(out, |out| {
            if let Some(d) = &self.delivery {
                d.encode(out)?;
            }
            if let Some(p) = &self.properties {
                p.encode(out)?;
            }
            for s in &self.other {
                s.encode(out)?;
            }
            Ok(())
        })
    }
}

/// The packing-flag octet and bit of delivery-properties.redelivered (field 2).
const REDELIVERED_FLAG: u8 = 0x04;

/// A copy of header segment `segment` with delivery-properties.redelivered set, adding
/// delivery-properties if the segment has none. Only the one flag bit changes (bits have
/// no data), so this is a copy plus a bit flip; an already-redelivered segment is
/// returned as is, without copying.
pub fn with_redelivered(segment: &Bytes) -> Result<Bytes, DecodeError> {
    let mut r = Reader::new(segment.clone());
    while !r.is_empty() {
        let start = segment.len() - r.remaining();
        let entry = Struct32::decode(&mut r)?;
        if entry.is::<DeliveryProperties>() {
            // size (4) + codes (2), then the first packing-flag octet.
            let flag_at = start + 6;
            let flags = *entry.body.first().ok_or(DecodeError::Truncated)?;
            if flags & REDELIVERED_FLAG != 0 {
                return Ok(segment.clone());
            }
            let mut copy = BytesMut::from(&segment[..]);
            if let Some(octet) = copy.get_mut(flag_at) {
                *octet = flags | REDELIVERED_FLAG;
            }
            return Ok(copy.freeze());
        }
    }
    let mut out = BytesMut::with_capacity(segment.len() + 10);
    out.put_u32(4);
    out.put_u8(DeliveryProperties::CLASS_CODE);
    out.put_u8(DeliveryProperties::STRUCT_CODE);
    out.put_u8(REDELIVERED_FLAG);
    out.put_u8(0);
    out.put_slice(segment);
    Ok(out.freeze())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generated::{DeliveryMode, FragmentProperties};
    use crate::str::Str;
    use crate::value::{Map, Value};

    fn sample() -> MessageHeader {
        let mut headers = Map::new();
        headers.insert("colour", Value::from("blue"));
        MessageHeader {
            delivery: Some(DeliveryProperties {
                routing_key: Some(Str::from("rk")),
                delivery_mode: Some(DeliveryMode::Persistent),
                ..Default::default()
            }),
            properties: Some(MessageProperties {
                content_length: Some(5),
                application_headers: Some(headers),
                ..Default::default()
            }),
            other: vec![Struct32::from_struct(&FragmentProperties {
                first: true,
                ..Default::default()
            })
            .unwrap()],
        }
    }

    fn encoded(h: &MessageHeader) -> Bytes {
        let mut out = BytesMut::new();
        h.encode(&mut out).unwrap();
        out.freeze()
    }

    #[test]
    fn round_trip() {
        let h = sample();
        assert_eq!(MessageHeader::decode(encoded(&h)).unwrap(), h);
        assert_eq!(
            MessageHeader::decode(Bytes::new()).unwrap(),
            MessageHeader::default()
        );
    }

    #[test]
    fn redelivered_set_in_place() {
        let raw = encoded(&sample());
        let patched = with_redelivered(&raw).unwrap();
        assert_eq!(patched.len(), raw.len());
        let mut expect = sample();
        if let Some(d) = expect.delivery.as_mut() {
            d.redelivered = true;
        }
        assert_eq!(MessageHeader::decode(patched.clone()).unwrap(), expect);
        let again = with_redelivered(&patched).unwrap();
        assert_eq!(again, patched);
        assert_eq!(again.as_ptr(), patched.as_ptr(), "no copy when already set");
    }

    #[test]
    fn redelivered_inserts_delivery_properties() {
        let mut h = sample();
        h.delivery = None;
        let raw = encoded(&h);
        let patched = with_redelivered(&raw).unwrap();
        let back = MessageHeader::decode(patched).unwrap();
        assert_eq!(
            back.delivery,
            Some(DeliveryProperties {
                redelivered: true,
                ..Default::default()
            })
        );
        assert_eq!(back.properties, h.properties);
        assert_eq!(back.other, h.other);
        let empty = with_redelivered(&Bytes::new()).unwrap();
        assert_eq!(&empty[..], &[0, 0, 0, 4, 4, 1, 4, 0]);
    }

    #[test]
    fn truncation_is_an_error_at_every_offset() {
        let h = sample();
        let raw = encoded(&h);
        // Cutting between entries leaves a valid, shorter header.
        let first = encoded(&MessageHeader {
            delivery: h.delivery.clone(),
            ..Default::default()
        })
        .len();
        let second = first
            + encoded(&MessageHeader {
                properties: h.properties.clone(),
                ..Default::default()
            })
            .len();
        for n in 1..raw.len() {
            let cut = raw.slice(..n);
            let decoded = MessageHeader::decode(cut.clone());
            let patched = with_redelivered(&cut);
            if n == first || n == second {
                assert!(decoded.is_ok() && patched.is_ok(), "at {n}");
            } else {
                assert!(decoded.is_err(), "decode at {n}");
                // with_redelivered stops at delivery-properties, which comes first.
                assert!(n > first || patched.is_err(), "redelivered at {n}");
            }
        }
    }
}
