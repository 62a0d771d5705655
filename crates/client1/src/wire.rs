//! What this client writes and reads per message, by hand: the transfer performative and
//! the message's sections around a body, straight into the outbound buffer (no
//! intermediate `Transfer` value, no per-message allocation), and the body's data section
//! found in a received message without decoding the rest.

use bytes::{BufMut, Bytes, BytesMut};
use ferry_amqp1::{Composite, Field, Header, Properties, FRAME_HEADER_SIZE};

/// Descriptor of the transfer performative and of the data section.
const TRANSFER: u8 = 0x14;
const DATA: u8 = 0x75;

/// The octets of a message before and after its body, for a body of a given length:
/// `header? properties? data-constructor`. Encoded once, written in front of every body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Publication {
    /// The sections before the body section.
    sections: Bytes,
    /// `sections` plus the data section's constructor for `body_len`.
    prefix: Bytes,
    body_len: usize,
}

impl Publication {
    /// A message with a header (when `header` is given) and properties (when given) and
    /// one data section of `body_len` octets.
    pub fn new(header: Option<&Header>, properties: Option<&Properties>, body_len: usize) -> Self {
        let mut sections = BytesMut::new();
        if let Some(h) = header {
            h.encode(&mut sections);
        }
        if let Some(p) = properties {
            p.encode(&mut sections);
        }
        let sections = sections.freeze();
        Publication {
            prefix: with_data_constructor(&sections, body_len),
            sections,
            body_len,
        }
    }

    /// A durable or transient message whose properties carry `subject` (the routing key
    /// when sending to an exchange), if given.
    pub fn simple(durable: bool, subject: Option<&str>, body_len: usize) -> Self {
        let header = durable.then(|| Header {
            durable: true,
            ..Header::default()
        });
        let properties = subject.map(|s| Properties {
            subject: Some(s.into()),
            ..Properties::default()
        });
        Publication::new(header.as_ref(), properties.as_ref(), body_len)
    }

    /// The octets in front of a body of `len` octets: encoded in advance for the length
    /// given at construction, built here for any other.
    pub(crate) fn prefix_for(&self, len: usize) -> Bytes {
        if len == self.body_len {
            self.prefix.clone()
        } else {
            with_data_constructor(&self.sections, len)
        }
    }
}

fn with_data_constructor(sections: &[u8], len: usize) -> Bytes {
    let mut out = BytesMut::with_capacity(sections.len() + 8);
    out.put_slice(sections);
    out.put_slice(&[0x00, 0x53, DATA]);
    match u8::try_from(len) {
        Ok(n) => {
            out.put_u8(0xa0);
            out.put_u8(n);
        }
        Err(_) => {
            out.put_u8(0xb0);
            // Bodies are bounded by the peer's max-message-size long before 4 GiB.
            out.put_u32(u32::try_from(len).unwrap_or(u32::MAX));
        }
    }
    out.freeze()
}

/// The fields of one delivery's transfer frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TransferHead {
    pub channel: u16,
    pub handle: u32,
    pub delivery_id: u32,
    pub settled: bool,
}

/// Writes a transfer performative (handle, delivery-id, delivery-tag = the id's four
/// octets, message-format 0, settled, more) as a list8.
fn put_transfer(out: &mut BytesMut, t: &TransferHead, more: bool) {
    out.put_slice(&[0x00, 0x53, TRANSFER, 0xc0]);
    let size_at = out.len();
    out.put_u8(0);
    out.put_u8(if more { 6 } else { 5 });
    t.handle.write(out);
    t.delivery_id.write(out);
    out.put_u8(0xa0);
    out.put_u8(4);
    out.put_u32(t.delivery_id);
    out.put_u8(0x43); // message-format: uint0
    out.put_u8(if t.settled { 0x41 } else { 0x42 });
    if more {
        out.put_u8(0x41);
    }
    // At most 3 + 5 + 5 + 6 + 1 + 1 + 1 octets after the size.
    out[size_at] = (out.len() - size_at - 1) as u8;
}

fn begin_frame(out: &mut BytesMut, channel: u16) -> usize {
    let start = out.len();
    out.put_u32(0);
    out.put_u8(2);
    out.put_u8(0);
    out.put_u16(channel);
    start
}

fn finish_frame(out: &mut BytesMut, start: usize) {
    let size = u32::try_from(out.len() - start).unwrap_or(u32::MAX);
    out[start..start + 4].copy_from_slice(&size.to_be_bytes());
}

/// The largest transfer performative `put_transfer` writes.
pub(crate) const MAX_TRANSFER_HEAD: usize = FRAME_HEADER_SIZE + 4 + 2 + 5 + 5 + 6 + 3;

/// Writes as much of a delivery (`prefix` then `body`, from octet `offset` of the two
/// together) as fits one frame of at most `max_frame` octets; returns the new offset
/// (`prefix.len() + body.len()` once all is written). `max_frame` must exceed
/// [`MAX_TRANSFER_HEAD`].
pub(crate) fn write_transfer_frame(
    out: &mut BytesMut,
    t: &TransferHead,
    prefix: &[u8],
    body: &[u8],
    offset: usize,
    max_frame: usize,
) -> usize {
    let total = prefix.len() + body.len();
    let room = max_frame.saturating_sub(MAX_TRANSFER_HEAD).max(1);
    let end = total.min(offset + room);
    let start = begin_frame(out, t.channel);
    put_transfer(out, t, end < total);
    if offset < prefix.len() {
        out.put_slice(&prefix[offset..end.min(prefix.len())]);
    }
    if end > prefix.len() {
        out.put_slice(&body[offset.max(prefix.len()) - prefix.len()..end - prefix.len()]);
    }
    finish_frame(out, start);
    end
}

/// The body of a message made of sections the scanner can step over and exactly one data
/// section: a slice of `payload`. `None` for anything else (several data sections, an
/// amqp-value body, described values inside a section), which the caller decodes fully.
pub fn data_body(payload: &Bytes) -> Option<Bytes> {
    let b = &payload[..];
    let mut at = 0;
    let mut body = None;
    while at < b.len() {
        // A section: 0x00, a small-ulong descriptor, a value.
        if b.get(at..at + 2)? != [0x00, 0x53] {
            return None;
        }
        let code = *b.get(at + 2)?;
        at += 3;
        let (start, end) = value_extent(b, at)?;
        if code == DATA {
            if body.is_some() {
                return None;
            }
            body = Some((start, end));
        }
        at = end;
    }
    body.map(|(s, e)| payload.slice(s..e))
}

/// Where the value at `at` keeps its octets (after constructor and size), and where it
/// ends. Widths follow the format code's category (its high nibble), as the spec defines
/// them, so any primitive or compound is stepped over without being decoded.
fn value_extent(b: &[u8], at: usize) -> Option<(usize, usize)> {
    let code = *b.get(at)?;
    let at = at + 1;
    let fixed = |w: usize| Some((at, at + w)).filter(|&(_, e)| e <= b.len());
    let sized = |w: usize| {
        let size = b.get(at..at + w)?;
        let n = size.iter().fold(0usize, |n, &o| (n << 8) | usize::from(o));
        let start = at + w;
        start
            .checked_add(n)
            .filter(|&e| e <= b.len())
            .map(|e| (start, e))
    };
    match code >> 4 {
        0x4 => fixed(0),
        0x5 => fixed(1),
        0x6 => fixed(2),
        0x7 => fixed(4),
        0x8 => fixed(8),
        0x9 => fixed(16),
        0xa | 0xc | 0xe => sized(1),
        0xb | 0xd | 0xf => sized(4),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_amqp1::{decode_frame, FrameBody, Message, Performative, RawBody, RawMessage};

    fn frames(mut out: BytesMut) -> Vec<(ferry_amqp1::Transfer, Bytes)> {
        let mut got = Vec::new();
        while let Some(f) = decode_frame(&mut out, u32::MAX).unwrap() {
            let FrameBody::Amqp {
                performative: Performative::Transfer(t),
                payload,
            } = f.decode_body().unwrap()
            else {
                panic!("not a transfer");
            };
            got.push((t, payload));
        }
        got
    }

    #[test]
    fn a_transfer_decodes_as_the_codec_reads_it() {
        let head = TransferHead {
            channel: 3,
            handle: 70_000,
            delivery_id: 0xdead_beef,
            settled: true,
        };
        let p = Publication::simple(true, Some("key"), 5);
        let mut out = BytesMut::new();
        let end = write_transfer_frame(&mut out, &head, &p.prefix_for(5), b"hello", 0, 65_536);
        let got = frames(out);
        assert_eq!(got.len(), 1);
        let (t, payload) = &got[0];
        assert_eq!(end, payload.len());
        assert_eq!(t.handle, 70_000);
        assert_eq!(t.delivery_id, Some(0xdead_beef));
        assert_eq!(
            t.delivery_tag.as_deref(),
            Some(&0xdead_beef_u32.to_be_bytes()[..])
        );
        assert_eq!(
            (t.message_format, t.settled, t.more),
            (Some(0), Some(true), false)
        );
        let m = Message::decode(payload.clone()).unwrap();
        assert!(m.header.unwrap().durable);
        assert_eq!(m.properties.unwrap().subject.unwrap().as_str(), "key");
        assert_eq!(data_body(payload).as_deref(), Some(&b"hello"[..]));
    }

    #[test]
    fn large_deliveries_split_across_frames() {
        let body: Vec<u8> = (0..3000u32).map(|i| i as u8).collect();
        let p = Publication::simple(false, None, body.len());
        let prefix = p.prefix_for(body.len());
        let head = TransferHead {
            channel: 0,
            handle: 1,
            delivery_id: 9,
            settled: false,
        };
        let mut out = BytesMut::new();
        let mut offset = 0;
        let total = prefix.len() + body.len();
        while offset < total {
            let before = out.len();
            offset = write_transfer_frame(&mut out, &head, &prefix, &body, offset, 512);
            assert!(out.len() - before <= 512);
        }
        let got = frames(out);
        assert!(got.len() >= 6);
        let mut joined = BytesMut::new();
        for (i, (t, part)) in got.iter().enumerate() {
            assert_eq!(t.more, i + 1 < got.len());
            assert_eq!(t.settled, Some(false));
            joined.extend_from_slice(part);
        }
        let joined = joined.freeze();
        assert_eq!(data_body(&joined).as_deref(), Some(&body[..]));
        let raw = RawMessage::parse(joined).unwrap();
        assert!(matches!(raw.body(), RawBody::Data(p) if p.to_vec() == [Bytes::from(body)]));
    }

    #[test]
    fn other_lengths_get_their_own_constructor() {
        let p = Publication::simple(false, None, 10);
        for len in [0, 10, 255, 256, 70_000] {
            let body = vec![7u8; len];
            let mut wire = BytesMut::from(&p.prefix_for(len)[..]);
            wire.extend_from_slice(&body);
            let wire = wire.freeze();
            assert_eq!(data_body(&wire).as_deref(), Some(&body[..]), "{len}");
            assert_eq!(
                Message::decode(wire).unwrap().body,
                ferry_amqp1::Body::Data(vec![Bytes::from(body)])
            );
        }
    }

    #[test]
    fn the_scanner_steps_over_sections_and_gives_up_on_the_rest() {
        let mut m = Message::data(&b"abc"[..]);
        m.header = Some(Header::default());
        m.properties = Some(Properties {
            message_id: Some(ferry_amqp1::MessageId::Ulong(7)),
            to: Some("q".into()),
            ..Properties::default()
        });
        let mut ap = ferry_amqp1::ApplicationProperties::new();
        ap.insert("k".into(), ferry_amqp1::Value::Long(-5));
        m.application_properties = Some(ap);
        let mut out = BytesMut::new();
        m.encode(&mut out);
        let wire = out.freeze();
        assert_eq!(data_body(&wire).as_deref(), Some(&b"abc"[..]));
        // Truncated anywhere: never a wrong answer, never a panic.
        for cut in 0..wire.len() {
            let part = wire.slice(..cut);
            assert_ne!(data_body(&part).as_deref(), Some(&b"abc"[..]), "cut {cut}");
        }
        // Two data sections, or none: decoded the long way.
        m.body = ferry_amqp1::Body::Data(vec![Bytes::from_static(b"a"), Bytes::from_static(b"b")]);
        let mut out = BytesMut::new();
        m.encode(&mut out);
        assert_eq!(data_body(&out.freeze()), None);
        m.body = ferry_amqp1::Body::Value(ferry_amqp1::Value::Bool(true));
        let mut out = BytesMut::new();
        m.encode(&mut out);
        assert_eq!(data_body(&out.freeze()), None);
    }
}
