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

/// delivery-properties.exchange (field 8): the second packing-flag octet's first bit.
const EXCHANGE_FLAG: u8 = 0x01;

/// The encoded sizes of delivery-properties' fields before `exchange` that take room
/// (priority, delivery-mode, ttl, timestamp, expiration; fields 0-2 are bits), with their
/// flags in the first packing-flag octet.
const FIELDS_BEFORE_EXCHANGE: [(u8, usize); 5] =
    [(0x08, 1), (0x10, 1), (0x20, 8), (0x40, 8), (0x80, 8)];

/// What [`write_with_exchange`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExchangeWritten {
    /// The segment names the exchange already: nothing written.
    AsIs,
    /// The default exchange's empty name was left out (`default_as_absent`); the field
    /// would have taken one octet.
    LeftOut,
    /// Written, with the field set, replaced or added.
    Written(ExchangeSet),
}

/// What [`write_with_exchange`] moved: the exchange name's place in the new segment, and
/// how the bytes after it shifted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExchangeSet {
    /// Where the exchange name (the str8's bytes, after its length octet) starts.
    pub exchange_at: usize,
    /// The old segment's bytes from here on moved by `grew` bytes; those before stayed.
    moved_from: usize,
    grew: isize,
}

impl ExchangeSet {
    /// Where the byte at `old` in the old segment is in the new one. Meant for offsets of
    /// other fields (the routing key), not of the exchange name that was replaced.
    pub fn new_offset(&self, old: usize) -> usize {
        if old >= self.moved_from {
            old.saturating_add_signed(self.grew)
        } else {
            old
        }
    }
}

/// Writes into `out` (cleared first) header segment `segment` with
/// delivery-properties.exchange set to `exchange`, adding delivery-properties if the segment
/// has none: the broker "MUST" set it "upon receipt of a message" (0-10,
/// delivery-properties), and qpidd's message sizes count it. Nothing is written when the
/// segment names `exchange` already, or (with `default_as_absent`) when `exchange` is the
/// default exchange's empty name and the segment names none. Entries are checked for
/// framing up to delivery-properties, and that one as far as the exchange field.
pub fn write_with_exchange(
    segment: &[u8],
    exchange: &[u8],
    default_as_absent: bool,
    out: &mut Vec<u8>,
) -> Result<ExchangeWritten, DecodeError> {
    let leave_absent = default_as_absent && exchange.is_empty();
    let name_len = u8::try_from(exchange.len()).map_err(|_| DecodeError::InvalidSize {
        what: "exchange name",
        size: exchange.len() as u64,
    })?;
    out.clear();
    let Some(start) = delivery_properties_at(segment)? else {
        if leave_absent {
            return Ok(ExchangeWritten::LeftOut);
        }
        // size, class and struct codes, two packing-flag octets, the str8.
        let added = 4 + 2 + 2 + 1 + exchange.len();
        out.reserve(added + segment.len());
        out.extend_from_slice(&(added as u32 - 4).to_be_bytes());
        out.extend_from_slice(&[
            DeliveryProperties::CLASS_CODE,
            DeliveryProperties::STRUCT_CODE,
            0,
            EXCHANGE_FLAG,
            name_len,
        ]);
        out.extend_from_slice(exchange);
        out.extend_from_slice(segment);
        return Ok(ExchangeWritten::Written(ExchangeSet {
            exchange_at: added - exchange.len(),
            moved_from: 0,
            grew: added as isize,
        }));
    };
    let size = u32::from_be_bytes([
        segment[start],
        segment[start + 1],
        segment[start + 2],
        segment[start + 3],
    ]) as usize;
    let entry_end = start + 4 + size;
    let flags_at = start + 4 + 2;
    // let-else rather than `ok_or(...)?`: an error built eagerly is dropped on every
    // success, and this runs for every transfer.
    let Some(&[first, second]) = segment.get(flags_at..flags_at + 2) else {
        return Err(DecodeError::Truncated);
    };
    let skipped: usize = FIELDS_BEFORE_EXCHANGE
        .iter()
        .filter(|(bit, _)| first & bit != 0)
        .map(|(_, len)| len)
        .sum();
    // Where the exchange's str8 is, or would go.
    let at = flags_at + 2 + skipped;
    let (old_end, old_len) = if second & EXCHANGE_FLAG != 0 {
        let Some(&old_len) = segment.get(at) else {
            return Err(DecodeError::Truncated);
        };
        let old_len = usize::from(old_len);
        let old_end = at + 1 + old_len;
        if old_end > entry_end {
            return Err(DecodeError::Truncated);
        }
        if &segment[at + 1..old_end] == exchange {
            return Ok(ExchangeWritten::AsIs);
        }
        (old_end, 1 + old_len)
    } else {
        if at > entry_end {
            return Err(DecodeError::Truncated);
        }
        if leave_absent {
            return Ok(ExchangeWritten::LeftOut);
        }
        (at, 0)
    };
    let grew = 1 + exchange.len() as isize - old_len as isize;
    let new_size = u32::try_from(size as isize + grew).map_err(|_| DecodeError::InvalidSize {
        what: "struct32",
        size: size as u64,
    })?;
    // Copied in three pieces around the name, then the entry's size and flag patched in
    // place: fewer, larger copies than piece by piece.
    out.reserve(segment.len() + 1 + exchange.len());
    out.extend_from_slice(&segment[..at]);
    out.push(name_len);
    out.extend_from_slice(exchange);
    out.extend_from_slice(&segment[old_end..]);
    out[start..start + 4].copy_from_slice(&new_size.to_be_bytes());
    out[flags_at + 1] |= EXCHANGE_FLAG;
    Ok(ExchangeWritten::Written(ExchangeSet {
        exchange_at: at + 1,
        moved_from: old_end,
        grew,
    }))
}

/// delivery-properties.timestamp (field 6): the first packing-flag octet's bit 6, after
/// priority, delivery-mode and ttl.
const TIMESTAMP_FLAG: u8 = 0x40;
const FIELDS_BEFORE_TIMESTAMP: [(u8, usize); 3] = [(0x08, 1), (0x10, 1), (0x20, 8)];

/// A copy of header segment `segment` with delivery-properties.timestamp set to `secs`
/// (replaced if set, else added, with delivery-properties if the segment has none): a
/// broker's receive timestamp (qpidd's `--enable-timestamp` sets it "upon receipt", POSIX
/// seconds). Entries are checked for framing up to delivery-properties, and that one as far
/// as the timestamp.
pub fn with_timestamp(segment: &[u8], secs: u64) -> Result<Bytes, DecodeError> {
    let stamp = secs.to_be_bytes();
    let Some(start) = delivery_properties_at(segment)? else {
        let mut out = BytesMut::with_capacity(4 + 2 + 2 + 8 + segment.len());
        out.put_u32(2 + 2 + 8);
        out.put_slice(&[
            DeliveryProperties::CLASS_CODE,
            DeliveryProperties::STRUCT_CODE,
            TIMESTAMP_FLAG,
            0,
        ]);
        out.put_slice(&stamp);
        out.put_slice(segment);
        return Ok(out.freeze());
    };
    let size_field = &segment[start..start + 4];
    let size = u32::from_be_bytes([size_field[0], size_field[1], size_field[2], size_field[3]]);
    let flags_at = start + 4 + 2;
    // delivery_properties_at checked that the flags are there.
    let first = segment[flags_at];
    let skipped: usize = FIELDS_BEFORE_TIMESTAMP
        .iter()
        .filter(|(bit, _)| first & bit != 0)
        .map(|(_, len)| len)
        .sum();
    let at = flags_at + 2 + skipped;
    let entry_end = start + 4 + size as usize;
    let mut out = BytesMut::with_capacity(segment.len() + 8);
    if first & TIMESTAMP_FLAG != 0 {
        if at + 8 > entry_end {
            return Err(DecodeError::Truncated);
        }
        out.put_slice(segment);
        out[at..at + 8].copy_from_slice(&stamp);
    } else {
        if at > entry_end {
            return Err(DecodeError::Truncated);
        }
        let new_size = size.checked_add(8).ok_or(DecodeError::InvalidSize {
            what: "struct32",
            size: u64::from(size),
        })?;
        out.put_slice(&segment[..at]);
        out.put_slice(&stamp);
        out.put_slice(&segment[at..]);
        out[start..start + 4].copy_from_slice(&new_size.to_be_bytes());
        out[flags_at] |= TIMESTAMP_FLAG;
    }
    Ok(out.freeze())
}

/// Where the first delivery-properties entry of `segment` starts (its size field), after
/// checking the framing of the entries before it and that it holds its codes and flags.
fn delivery_properties_at(segment: &[u8]) -> Result<Option<usize>, DecodeError> {
    let mut at = 0;
    while let Some((size, after)) = segment[at..].split_first_chunk::<4>() {
        let size = u32::from_be_bytes(*size) as usize;
        let Some(entry) = after.get(..size) else {
            return Err(DecodeError::Truncated);
        };
        match entry {
            [DeliveryProperties::CLASS_CODE, DeliveryProperties::STRUCT_CODE, _, _, ..] => {
                return Ok(Some(at))
            }
            [DeliveryProperties::CLASS_CODE, DeliveryProperties::STRUCT_CODE, ..] => {
                return Err(DecodeError::Truncated)
            }
            [_, _, ..] => at += 4 + size,
            _ => {
                return Err(DecodeError::InvalidSize {
                    what: "struct32",
                    size: size as u64,
                })
            }
        }
    }
    if at == segment.len() {
        Ok(None)
    } else {
        Err(DecodeError::Truncated)
    }
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

    /// The segment `write_with_exchange` makes, checked by decoding it: everything as before
    /// but delivery-properties.exchange.
    fn with_exchange(raw: &[u8], exchange: &str) -> (Vec<u8>, Option<ExchangeSet>) {
        let mut out = vec![0xee; 3];
        let set = write_with_exchange(raw, exchange.as_bytes(), false, &mut out).unwrap();
        let ExchangeWritten::Written(set) = set else {
            assert!(out.is_empty(), "nothing written when unchanged");
            return (raw.to_vec(), None);
        };
        let at = set.exchange_at;
        assert_eq!(&out[at..at + exchange.len()], exchange.as_bytes());
        assert_eq!(
            usize::from(out[at - 1]),
            exchange.len(),
            "the str8's length"
        );
        let mut expect = MessageHeader::decode(Bytes::copy_from_slice(raw)).unwrap();
        expect
            .delivery
            .get_or_insert_with(Default::default)
            .exchange = Some(Str::from(exchange));
        let got = MessageHeader::decode(Bytes::copy_from_slice(&out)).unwrap();
        assert_eq!(got, expect);
        (out, Some(set))
    }

    /// Where `needle` first occurs in `hay`.
    fn find(hay: &[u8], needle: &[u8]) -> usize {
        hay.windows(needle.len()).position(|w| w == needle).unwrap()
    }

    #[test]
    fn exchange_is_added_and_later_fields_move_by_its_length() {
        let raw = encoded(&sample());
        let (out, set) = with_exchange(&raw, "amq.direct");
        let set = set.unwrap();
        assert_eq!(out.len(), raw.len() + 1 + "amq.direct".len());
        let rk_old = find(&raw, b"rk");
        assert_eq!(&out[set.new_offset(rk_old)..][..2], b"rk");
        // The struct's size and the flag grew; the codes and first flags did not move.
        assert_eq!(set.new_offset(0), 0);
        assert_eq!(&out[4..7], &raw[4..7]);
        assert_eq!((out[3] - raw[3], out[7] ^ raw[7]), (11, EXCHANGE_FLAG));
        // Named already: nothing to do.
        assert_eq!(with_exchange(&out, "amq.direct").1, None);
        // The default exchange is named too, as the empty string.
        let (out, _) = with_exchange(&raw, "");
        assert_eq!(out.len(), raw.len() + 1);
    }

    #[test]
    fn the_default_exchange_may_be_left_absent_but_not_left_wrong() {
        let raw = encoded(&sample());
        let mut out = Vec::new();
        assert_eq!(
            write_with_exchange(&raw, b"", true, &mut out),
            Ok(ExchangeWritten::LeftOut)
        );
        assert!(out.is_empty());
        let mut bare = sample();
        bare.delivery = None;
        let bare = encoded(&bare);
        assert_eq!(
            write_with_exchange(&bare, b"", true, &mut out),
            Ok(ExchangeWritten::LeftOut)
        );
        // A header naming another exchange is still corrected.
        let (named, _) = with_exchange(&raw, "amq.direct");
        let set = write_with_exchange(&named, b"", true, &mut out).unwrap();
        assert!(matches!(set, ExchangeWritten::Written(_)));
        let back = MessageHeader::decode(Bytes::from(out)).unwrap();
        assert_eq!(back.delivery.unwrap().exchange, Some(Str::from("")));
    }

    #[test]
    fn a_different_exchange_is_replaced() {
        let (named, _) = with_exchange(&encoded(&sample()), "amq.direct");
        for other in ["x", "a.much.longer.exchange.name", ""] {
            let (out, set) = with_exchange(&named, other);
            let set = set.unwrap();
            assert_eq!(out.len() + "amq.direct".len(), named.len() + other.len());
            assert_eq!(&out[set.new_offset(find(&named, b"rk"))..][..2], b"rk");
        }
    }

    #[test]
    fn exchange_goes_after_every_field_before_it() {
        let full = MessageHeader {
            delivery: Some(DeliveryProperties {
                discard_unroutable: true,
                immediate: true,
                priority: Some(crate::generated::DeliveryPriority::High),
                delivery_mode: Some(DeliveryMode::Persistent),
                ttl: Some(1),
                timestamp: Some(2),
                expiration: Some(3),
                routing_key: Some(Str::from("key")),
                resume_id: Some(Str::from("resume")),
                resume_ttl: Some(4),
                ..Default::default()
            }),
            ..Default::default()
        };
        let raw = encoded(&full);
        let (out, set) = with_exchange(&raw, "ex");
        assert_eq!(
            &out[set.unwrap().new_offset(find(&raw, b"key"))..][..3],
            b"key"
        );
        // Each optional field before the exchange, alone.
        let alone = [
            DeliveryProperties {
                priority: Some(crate::generated::DeliveryPriority::Low),
                ..Default::default()
            },
            DeliveryProperties {
                delivery_mode: Some(DeliveryMode::NonPersistent),
                ..Default::default()
            },
            DeliveryProperties {
                ttl: Some(9),
                ..Default::default()
            },
            DeliveryProperties {
                timestamp: Some(9),
                ..Default::default()
            },
            DeliveryProperties {
                expiration: Some(9),
                ..Default::default()
            },
        ];
        for d in alone {
            let raw = encoded(&MessageHeader {
                delivery: Some(d),
                ..Default::default()
            });
            with_exchange(&raw, "ex");
        }
    }

    #[test]
    fn exchange_adds_delivery_properties_where_there_are_none() {
        let mut h = sample();
        h.delivery = None;
        let raw = encoded(&h);
        let (out, set) = with_exchange(&raw, "amq.topic");
        let set = set.unwrap();
        assert_eq!(
            &out[set.new_offset(0)..],
            &raw[..],
            "the old entries follow it whole"
        );
        let (empty, _) = with_exchange(&[], "e");
        assert_eq!(&empty[..], &[0, 0, 0, 6, 4, 1, 0, 1, 1, b'e']);
    }

    #[test]
    fn exchange_write_refuses_a_malformed_segment() {
        let raw = encoded(&sample());
        let first = 4 + u32::from_be_bytes([raw[0], raw[1], raw[2], raw[3]]) as usize;
        let mut out = Vec::new();
        for n in 1..first {
            assert!(
                write_with_exchange(&raw[..n], b"e", false, &mut out).is_err(),
                "at {n}"
            );
        }
        assert!(write_with_exchange(&raw[..first], b"e", false, &mut out).is_ok());
        // delivery-properties without its packing flags, or claiming a field it lacks.
        assert!(write_with_exchange(&[0, 0, 0, 2, 4, 1], b"e", false, &mut out).is_err());
        assert!(write_with_exchange(&[0, 0, 0, 4, 4, 1, 0x20, 0], b"e", false, &mut out).is_err());
        assert!(write_with_exchange(&[0, 0, 0, 4, 4, 1, 0, 1], b"e", false, &mut out).is_err());
        assert!(write_with_exchange(&[0, 0, 0, 5, 4, 1, 0, 1, 7], b"e", false, &mut out).is_err());
        // An entry too short for its codes, before delivery-properties.
        assert!(write_with_exchange(&[0, 0, 0, 1, 4], b"e", false, &mut out).is_err());
        let long = vec![b'x'; 256];
        assert!(write_with_exchange(&raw, &long, false, &mut out).is_err());
    }

    /// The segment `with_timestamp` makes, checked by decoding it: everything as before but
    /// delivery-properties.timestamp.
    fn stamped(raw: &[u8], secs: u64) -> Bytes {
        let out = with_timestamp(raw, secs).unwrap();
        let mut expect = MessageHeader::decode(Bytes::copy_from_slice(raw)).unwrap();
        expect
            .delivery
            .get_or_insert_with(Default::default)
            .timestamp = Some(secs);
        assert_eq!(MessageHeader::decode(out.clone()).unwrap(), expect);
        out
    }

    #[test]
    fn timestamp_is_added_replaced_or_given_delivery_properties() {
        let raw = encoded(&sample());
        let out = stamped(&raw, 1_700_000_000);
        assert_eq!(out.len(), raw.len() + 8);
        // Set already: replaced in place.
        let again = stamped(&out, 42);
        assert_eq!(again.len(), out.len());
        let mut bare = sample();
        bare.delivery = None;
        let bare = encoded(&bare);
        let out = stamped(&bare, 7);
        assert_eq!(
            &out[out.len() - bare.len()..],
            &bare[..],
            "the old entries follow"
        );
        assert_eq!(
            &with_timestamp(&[], 1).unwrap()[..],
            &[0, 0, 0, 12, 4, 1, TIMESTAMP_FLAG, 0, 0, 0, 0, 0, 0, 0, 0, 1]
        );
        // After each field before it, and before each field after it.
        let full = MessageHeader {
            delivery: Some(DeliveryProperties {
                discard_unroutable: true,
                priority: Some(crate::generated::DeliveryPriority::High),
                delivery_mode: Some(DeliveryMode::Persistent),
                ttl: Some(1),
                expiration: Some(3),
                exchange: Some(Str::from("ex")),
                routing_key: Some(Str::from("key")),
                ..Default::default()
            }),
            ..Default::default()
        };
        stamped(&encoded(&full), u64::MAX);
        for d in [
            DeliveryProperties {
                ttl: Some(9),
                ..Default::default()
            },
            DeliveryProperties {
                expiration: Some(9),
                ..Default::default()
            },
        ] {
            stamped(
                &encoded(&MessageHeader {
                    delivery: Some(d),
                    ..Default::default()
                }),
                5,
            );
        }
    }

    #[test]
    fn timestamp_write_refuses_a_malformed_segment() {
        let raw = encoded(&sample());
        let first = 4 + u32::from_be_bytes([raw[0], raw[1], raw[2], raw[3]]) as usize;
        for n in 1..first {
            assert!(with_timestamp(&raw[..n], 1).is_err(), "at {n}");
        }
        assert!(with_timestamp(&raw[..first], 1).is_ok());
        // delivery-properties claiming a ttl, or a timestamp, it lacks.
        assert!(with_timestamp(&[0, 0, 0, 4, 4, 1, 0x20, 0], 1).is_err());
        assert!(with_timestamp(&[0, 0, 0, 4, 4, 1, TIMESTAMP_FLAG, 0], 1).is_err());
        assert!(with_timestamp(&[0, 0, 0, 2, 4, 1], 1).is_err());
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
