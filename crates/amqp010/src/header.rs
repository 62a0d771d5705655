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

/// Whether header segment `segment` has delivery-properties with redelivered set. Reads
/// only the entries' sizes and codes and that one flag, for receivers that want nothing
/// else from the header. Entries are checked for framing only, up to delivery-properties;
/// [`MessageHeader::decode`] also checks every field.
pub fn is_redelivered(segment: &[u8]) -> Result<bool, DecodeError> {
    let mut rest = segment;
    while let Some((size, after)) = rest.split_first_chunk::<4>() {
        let size = u32::from_be_bytes(*size) as usize;
        let entry = after.get(..size).ok_or(DecodeError::Truncated)?;
        match entry {
            [DeliveryProperties::CLASS_CODE, DeliveryProperties::STRUCT_CODE, fields @ ..] => {
                let flags = fields.first().ok_or(DecodeError::Truncated)?;
                return Ok(flags & REDELIVERED_FLAG != 0);
            }
            [_, _, ..] => rest = &after[size..],
            _ => {
                return Err(DecodeError::InvalidSize {
                    what: "struct32",
                    size: size as u64,
                })
            }
        }
    }
    if rest.is_empty() {
        Ok(false)
    } else {
        Err(DecodeError::Truncated)
    }
}

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
    fn redelivered_read_without_decoding_agrees_with_decode() {
        let properties_only = encoded(&MessageHeader {
            properties: sample().properties,
            ..Default::default()
        });
        let mut segments = vec![Bytes::new(), encoded(&sample()), properties_only];
        segments.push(with_redelivered(&segments[1]).unwrap());
        segments.push(with_redelivered(&segments[2]).unwrap());
        // delivery-properties after another entry.
        let mut late = BytesMut::from(&segments[2][..]);
        late.extend_from_slice(&segments[3]);
        segments.push(late.freeze());
        // Two delivery-properties: the first one counts, for both.
        let mut twice = BytesMut::from(&segments[1][..]);
        twice.extend_from_slice(&segments[3]);
        segments.push(twice.freeze());
        for segment in &segments {
            let decoded = MessageHeader::decode(segment.clone()).unwrap();
            let expect = decoded.delivery.is_some_and(|d| d.redelivered);
            assert_eq!(is_redelivered(segment).unwrap(), expect, "{segment:?}");
        }
        assert_eq!(
            segments
                .iter()
                .map(|s| is_redelivered(s).unwrap())
                .collect::<Vec<_>>(),
            [false, false, false, true, true, true, false]
        );
    }

    #[test]
    fn redelivered_read_refuses_what_decode_refuses_before_the_flag() {
        let raw = with_redelivered(&encoded(&sample())).unwrap();
        // delivery-properties comes first: any cut inside it is an error, as for decode.
        let first = 4 + u32::from_be_bytes([raw[0], raw[1], raw[2], raw[3]]) as usize;
        for n in 1..first {
            assert!(is_redelivered(&raw[..n]).is_err(), "at {n}");
            assert!(MessageHeader::decode(raw.slice(..n)).is_err(), "at {n}");
        }
        assert!(is_redelivered(&raw[..first]).unwrap());
        assert!(
            is_redelivered(&[0, 0, 0, 1, 4]).is_err(),
            "entry without its codes"
        );
        assert!(
            is_redelivered(&[0, 0, 0, 2, 9, 9, 0]).is_err(),
            "cut size field"
        );
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
