//! General frame format: type octet, channel, 32-bit payload size, payload,
//! frame-end octet.

use std::ops::Range;

use bytes::{Buf, BufMut, Bytes, BytesMut};

use crate::method::Method;
use crate::properties::ContentHeader;
use crate::reply;
use crate::strings::ShortStr;

/// Sent by the client first; the same octets select 0-9-1 over 0-10.
pub const PROTOCOL_HEADER: [u8; 8] = *b"AMQP\x00\x00\x09\x01";

pub const FRAME_END: u8 = 0xCE;

/// Type, channel and size.
pub const FRAME_HEADER_SIZE: usize = 7;

/// Header plus frame-end: what a frame costs beyond its payload.
pub const FRAME_OVERHEAD: usize = FRAME_HEADER_SIZE + 1;

/// Largest frame either peer must accept before `connection.tune` settles
/// frame-max, and the smallest frame-max a peer may propose.
pub const FRAME_MIN_SIZE: usize = 4096;

/// Most `decode_frame` reserves ahead of the octets that have arrived.
const MAX_RESERVE: usize = 1 << 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum FrameType {
    Method = 1,
    Header = 2,
    Body = 3,
    Heartbeat = 8,
}

impl FrameType {
    pub fn from_u8(v: u8) -> Option<Self> {
        match v {
            1 => Some(FrameType::Method),
            2 => Some(FrameType::Header),
            3 => Some(FrameType::Body),
            8 => Some(FrameType::Heartbeat),
            _ => None,
        }
    }
}

/// One frame; the payload shares the read buffer's allocation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    pub frame_type: FrameType,
    pub channel: u16,
    pub payload: Bytes,
}

impl Frame {
    pub fn encode(&self, out: &mut BytesMut) {
        write_frame(out, self.frame_type, self.channel, &self.payload);
    }
}

/// A frame the connection cannot continue after.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    #[error("unknown frame type {0}")]
    UnknownType(u8),
    #[error("frame of {size} octets exceeds frame-max {max}")]
    TooLarge { size: usize, max: usize },
    #[error("frame-end octet is {0:#04x}, not 0xce")]
    BadFrameEnd(u8),
    #[error("heartbeat on channel {0}, heartbeats belong to channel 0")]
    HeartbeatOnChannel(u16),
}

impl FrameError {
    /// Reply code for the connection.close the server sends (if it sends one:
    /// for a bad frame-end the spec lets it just drop the connection).
    pub fn reply_code(&self) -> u16 {
        match self {
            FrameError::UnknownType(_) => reply::FRAME_ERROR,
            FrameError::TooLarge { .. } => reply::FRAME_ERROR,
            FrameError::BadFrameEnd(_) => reply::FRAME_ERROR,
            FrameError::HeartbeatOnChannel(_) => reply::UNEXPECTED_FRAME,
        }
    }
}

/// Takes one complete frame off the front of `buf`, or returns `Ok(None)` if
/// more octets are needed. `frame_max` is the negotiated frame-max (whole
/// frame, header and frame-end included); callers map the spec's "0 = no
/// limit" to a limit of their own, since buffering is bounded by it. The
/// size is checked from the header, before the payload is buffered.
pub fn decode_frame(buf: &mut BytesMut, frame_max: usize) -> Result<Option<Frame>, FrameError> {
    let Some(header) = buf.get(..FRAME_HEADER_SIZE) else {
        // Reject garbage as soon as its first octet is known.
        return match buf.first() {
            Some(&t) if FrameType::from_u8(t).is_none() => Err(FrameError::UnknownType(t)),
            _ => Ok(None),
        };
    };
    let mut header = header;
    let type_octet = header.get_u8();
    let channel = header.get_u16();
    let size = header.get_u32();
    let frame_type = FrameType::from_u8(type_octet).ok_or(FrameError::UnknownType(type_octet))?;
    let size = usize::try_from(size).unwrap_or(usize::MAX);
    let total = size.saturating_add(FRAME_OVERHEAD);
    if total > frame_max {
        return Err(FrameError::TooLarge {
            size: total,
            max: frame_max,
        });
    }
    if frame_type == FrameType::Heartbeat && channel != 0 {
        return Err(FrameError::HeartbeatOnChannel(channel));
    }
    let Some(&end) = buf.get(total - 1) else {
        // Reserve for the rest of the frame, but not more than a modest
        // amount on the header's word alone.
        ferry_chunks::reserve_unread(buf, (total - buf.len()).min(MAX_RESERVE));
        return Ok(None);
    };
    if end != FRAME_END {
        return Err(FrameError::BadFrameEnd(end));
    }
    let mut frame = buf.split_to(total);
    frame.advance(FRAME_HEADER_SIZE);
    frame.truncate(size);
    Ok(Some(Frame {
        frame_type,
        channel,
        payload: frame.freeze(),
    }))
}

/// Writes just the 7-octet header, for callers that send a large payload from
/// its own buffer (vectored write) and then `FRAME_END`.
pub fn write_frame_header(out: &mut BytesMut, frame_type: FrameType, channel: u16, size: u32) {
    out.put_u8(frame_type as u8);
    out.put_u16(channel);
    out.put_u32(size);
}

/// Appends a whole frame. Panics if `payload` exceeds 4 GiB, which no
/// negotiated frame-max allows.
pub fn write_frame(out: &mut BytesMut, frame_type: FrameType, channel: u16, payload: &[u8]) {
    out.reserve(payload.len() + FRAME_OVERHEAD);
    let size = u32::try_from(payload.len()).unwrap_or(u32::MAX);
    write_frame_header(out, frame_type, channel, size);
    out.put_slice(payload);
    out.put_u8(FRAME_END);
}

/// Encodes into `out` behind a header whose size is filled in afterwards, so
/// the payload is never built in a separate buffer.
fn write_encoded(
    out: &mut BytesMut,
    frame_type: FrameType,
    channel: u16,
    encode: impl FnOnce(&mut BytesMut),
) {
    let start = out.len();
    write_frame_header(out, frame_type, channel, 0);
    encode(out);
    let size = out.len() - start - FRAME_HEADER_SIZE;
    let size = u32::try_from(size).unwrap_or(u32::MAX);
    if let Some(slot) = out.get_mut(start + 3..start + FRAME_HEADER_SIZE) {
        slot.copy_from_slice(&size.to_be_bytes());
    }
    out.put_u8(FRAME_END);
}

/// Appends a method frame; returns its total size, which the caller may
/// check against frame-max (a method with large tables can exceed it).
pub fn write_method(out: &mut BytesMut, channel: u16, method: &Method) -> usize {
    let start = out.len();
    write_encoded(out, FrameType::Method, channel, |o| method.encode(o));
    out.len() - start
}

/// basic.deliver with its exchange and routing key borrowed: they are a queued message's
/// own octets, and building `ShortStr`s of them would copy both for every delivery.
#[derive(Debug, Clone, Copy)]
pub struct DeliverRef<'a> {
    pub consumer_tag: &'a ShortStr,
    pub delivery_tag: u64,
    pub redelivered: bool,
    /// Sent empty if longer than a short string allows (as a `ShortStr` that failed to
    /// build would be).
    pub exchange: &'a [u8],
    pub routing_key: &'a [u8],
}

/// The method frame of [`DeliverRef`], octet for octet what [`write_method`] writes for the
/// same `BasicDeliver`.
pub fn write_deliver(out: &mut BytesMut, channel: u16, d: &DeliverRef<'_>) {
    fn short(out: &mut BytesMut, s: &[u8]) {
        let s = if s.len() > ShortStr::MAX_LEN {
            &[][..]
        } else {
            s
        };
        out.put_u8(s.len() as u8);
        out.put_slice(s);
    }
    write_encoded(out, FrameType::Method, channel, |o| {
        o.put_u16(60);
        o.put_u16(60);
        short(o, d.consumer_tag.as_bytes());
        o.put_u64(d.delivery_tag);
        o.put_u8(u8::from(d.redelivered));
        short(o, d.exchange);
        short(o, d.routing_key);
    });
}

pub fn write_content_header(out: &mut BytesMut, channel: u16, header: &ContentHeader) {
    write_encoded(out, FrameType::Header, channel, |o| header.encode(o));
}

/// Appends body frames carrying `body`, each at most `frame_max` octets
/// (values below `FRAME_MIN_SIZE` are raised to it, as the spec forbids them).
pub fn write_body(out: &mut BytesMut, channel: u16, body: &[u8], frame_max: usize) {
    let chunk = frame_max.max(FRAME_MIN_SIZE) - FRAME_OVERHEAD;
    for part in body.chunks(chunk) {
        write_frame(out, FrameType::Body, channel, part);
    }
}

/// [`write_body`] for `len` octets that `place` puts after each frame's header, a range
/// at a time: into `out`, or beside it (a caller that sends a large body from where it
/// is, without copying).
pub fn write_body_placing(
    out: &mut BytesMut,
    channel: u16,
    len: usize,
    frame_max: usize,
    mut place: impl FnMut(&mut BytesMut, Range<usize>),
) {
    let chunk = frame_max.max(FRAME_MIN_SIZE) - FRAME_OVERHEAD;
    let mut start = 0;
    while start < len {
        let end = len.min(start + chunk);
        // A frame holds at most frame-max octets, a u32.
        let size = u32::try_from(end - start).unwrap_or(u32::MAX);
        write_frame_header(out, FrameType::Body, channel, size);
        place(out, start..end);
        out.put_u8(FRAME_END);
        start = end;
    }
}

/// Method, header and body frames of one message (publish, deliver, return
/// or get-ok). `body_size` is taken from `body`.
pub fn write_content(
    out: &mut BytesMut,
    channel: u16,
    method: &Method,
    properties: &crate::BasicProperties,
    body: &[u8],
    frame_max: usize,
) {
    write_method(out, channel, method);
    // Only the header fields are borrowed; cloning properties would copy the
    // headers table.
    write_encoded(out, FrameType::Header, channel, |o| {
        crate::properties::encode_header_parts(o, method.class_id(), body.len() as u64, properties)
    });
    write_body(out, channel, body, frame_max);
}

/// [`write_content`] for properties already encoded (flags word onwards), as a broker
/// keeps them: the header frame is written from those octets as they are.
pub fn write_content_raw(
    out: &mut BytesMut,
    channel: u16,
    method: &Method,
    properties: &[u8],
    body: &[u8],
    frame_max: usize,
) {
    write_content_raw_head(out, channel, method, properties, body.len());
    write_body(out, channel, body, frame_max);
}

/// The method and header frames of [`write_content_raw`], for a body of `body_len`
/// octets written after them (see [`write_body_placing`]).
pub fn write_content_raw_head(
    out: &mut BytesMut,
    channel: u16,
    method: &Method,
    properties: &[u8],
    body_len: usize,
) {
    write_method(out, channel, method);
    write_raw_content_header(out, channel, properties, body_len);
}

/// The content header frame of [`write_content_raw_head`] alone, for a method frame written
/// otherwise (see [`write_deliver`]).
pub fn write_raw_content_header(
    out: &mut BytesMut,
    channel: u16,
    properties: &[u8],
    body_len: usize,
) {
    write_encoded(out, FrameType::Header, channel, |o| {
        crate::properties::encode_raw_header(o, body_len as u64, properties)
    });
}

pub fn write_heartbeat(out: &mut BytesMut) {
    write_frame(out, FrameType::Heartbeat, 0, &[]);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn buf(b: &[u8]) -> BytesMut {
        BytesMut::from(b)
    }

    #[test]
    fn a_borrowed_deliver_is_written_as_the_method_is() {
        use crate::method::BasicDeliver;
        let tag = ShortStr::from_static("ctag");
        for (exchange, key, redelivered) in [
            (&b""[..], &b"q"[..], true),
            (&b"amq.direct"[..], &b"some.key"[..], false),
        ] {
            let mut borrowed = BytesMut::new();
            let d = DeliverRef {
                consumer_tag: &tag,
                delivery_tag: 1 << 40,
                redelivered,
                exchange,
                routing_key: key,
            };
            write_deliver(&mut borrowed, 7, &d);
            let mut owned = BytesMut::new();
            let m = Method::BasicDeliver(BasicDeliver {
                consumer_tag: tag.clone(),
                delivery_tag: 1 << 40,
                redelivered,
                exchange: ShortStr::new(Bytes::copy_from_slice(exchange)).unwrap(),
                routing_key: ShortStr::new(Bytes::copy_from_slice(key)).unwrap(),
            });
            write_method(&mut owned, 7, &m);
            assert_eq!(borrowed, owned);
        }
        // Too long for a short string: sent empty, not truncated.
        let long = vec![b'k'; 300];
        let mut out = BytesMut::new();
        let d = DeliverRef {
            consumer_tag: &tag,
            delivery_tag: 1,
            redelivered: false,
            exchange: b"x",
            routing_key: &long,
        };
        write_deliver(&mut out, 1, &d);
        assert_eq!(out.len(), 7 + 4 + 5 + 8 + 1 + 2 + 1 + 1);
    }

    #[test]
    fn placed_body_frames_match_copied_ones() {
        let body: Vec<u8> = (0..10_000u32).map(|i| i as u8).collect();
        let mut copied = BytesMut::new();
        write_body(&mut copied, 3, &body, 4096);
        let mut placed = BytesMut::new();
        let mut ranges = Vec::new();
        write_body_placing(&mut placed, 3, body.len(), 4096, |out, r| {
            out.put_slice(&body[r.clone()]);
            ranges.push(r);
        });
        assert_eq!(placed, copied);
        assert_eq!(ranges, [0..4088, 4088..8176, 8176..10_000]);
    }

    #[test]
    fn decodes_a_frame_and_leaves_the_rest() {
        let mut b = buf(&[1, 0, 5, 0, 0, 0, 2, 0xaa, 0xbb, 0xce, 8]);
        let f = decode_frame(&mut b, 4096).unwrap().unwrap();
        assert_eq!(f.frame_type, FrameType::Method);
        assert_eq!(f.channel, 5);
        assert_eq!(&f.payload[..], &[0xaa, 0xbb]);
        assert_eq!(&b[..], &[8]);
        assert_eq!(decode_frame(&mut b, 4096), Ok(None));
    }

    #[test]
    fn incomplete_frames_wait_for_more() {
        let whole = [3, 0, 1, 0, 0, 0, 3, 1, 2, 3, 0xce];
        for cut in 0..whole.len() {
            let mut b = buf(&whole[..cut]);
            assert_eq!(decode_frame(&mut b, 4096), Ok(None), "cut {cut}");
            assert_eq!(b.len(), cut);
        }
    }

    #[test]
    fn frame_errors() {
        let mut b = buf(&[4]);
        assert_eq!(decode_frame(&mut b, 4096), Err(FrameError::UnknownType(4)));
        let mut b = buf(&[1, 0, 0, 0, 0, 0, 1, 0, 0xcd]);
        assert_eq!(
            decode_frame(&mut b, 4096),
            Err(FrameError::BadFrameEnd(0xcd))
        );
        let mut b = buf(&[8, 0, 1, 0, 0, 0, 0, 0xce]);
        assert_eq!(
            decode_frame(&mut b, 4096),
            Err(FrameError::HeartbeatOnChannel(1))
        );
        assert_eq!(FrameError::UnknownType(4).reply_code(), 501);
    }

    #[test]
    fn size_is_checked_from_the_header_alone() {
        // 4089 + 8 = 4097 > 4096, refused before any payload arrives.
        let mut b = buf(&[3, 0, 1, 0, 0, 0x0f, 0xf9]);
        assert_eq!(
            decode_frame(&mut b, 4096),
            Err(FrameError::TooLarge {
                size: 4097,
                max: 4096
            })
        );
        let mut b = buf(&[3, 0, 1, 0xff, 0xff, 0xff, 0xff]);
        assert_eq!(
            decode_frame(&mut b, u32::MAX as usize),
            Err(FrameError::TooLarge {
                size: u32::MAX as usize + 8,
                max: u32::MAX as usize
            })
        );
        // Exactly frame-max is fine.
        let mut b = buf(&[3, 0, 1, 0, 0, 0x0f, 0xf8]);
        assert_eq!(decode_frame(&mut b, 4096), Ok(None));
    }

    #[test]
    fn payload_shares_the_read_buffer() {
        let mut b = buf(&[3, 0, 1, 0, 0, 0, 3, 1, 2, 3, 0xce]);
        let base = b.as_ptr() as usize;
        let f = decode_frame(&mut b, 4096).unwrap().unwrap();
        assert_eq!(f.payload.as_ptr() as usize, base + FRAME_HEADER_SIZE);
    }

    #[test]
    fn writers() {
        let mut out = BytesMut::new();
        write_heartbeat(&mut out);
        assert_eq!(&out[..], &[8, 0, 0, 0, 0, 0, 0, 0xce]);

        let mut out = BytesMut::new();
        write_method(&mut out, 7, &Method::TxSelect(crate::TxSelect {}));
        assert_eq!(&out[..], &[1, 0, 7, 0, 0, 0, 4, 0, 90, 0, 10, 0xce]);

        let mut out = BytesMut::new();
        let body = vec![0x55; 2 * (FRAME_MIN_SIZE - FRAME_OVERHEAD) + 1];
        write_body(&mut out, 1, &body, 0);
        let mut sizes = Vec::new();
        while let Some(f) = decode_frame(&mut out, FRAME_MIN_SIZE).unwrap() {
            sizes.push(f.payload.len());
        }
        assert_eq!(sizes, [4088, 4088, 1]);
        assert!(out.is_empty());
    }
}
