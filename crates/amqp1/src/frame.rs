//! Protocol headers and frames.
//!
//! A frame is an 8-octet header (size of the whole frame, data offset in
//! 4-octet words, frame type, a type-specific word: the channel for AMQP
//! frames), an extended header up to the data offset (unused by the spec,
//! skipped), and the body: for AMQP frames a performative and, for
//! transfers, the message octets; for SASL frames a SASL body. A frame with
//! no body is an empty frame, which peers send to keep an idle connection
//! alive.

use bytes::{Buf, BufMut, Bytes, BytesMut};

use crate::error::{DecodeError, FrameError, FrameSizeTooSmall};
use crate::performative::{Performative, Transfer};
use crate::sasl::SaslFrame;

/// Starts an AMQP 1.0 connection (protocol id 0).
pub const PROTOCOL_HEADER: [u8; 8] = *b"AMQP\x00\x01\x00\x00";
/// Starts a TLS negotiation before the AMQP header (protocol id 2).
pub const TLS_PROTOCOL_HEADER: [u8; 8] = *b"AMQP\x02\x01\x00\x00";
/// Starts a SASL exchange before the AMQP header (protocol id 3).
pub const SASL_PROTOCOL_HEADER: [u8; 8] = *b"AMQP\x03\x01\x00\x00";

/// Size, data offset, type and channel.
pub const FRAME_HEADER_SIZE: usize = 8;

/// The smallest max-frame-size a peer may set, and the largest frame either
/// side may send before open has settled the real one (SASL frames
/// included).
pub const MIN_MAX_FRAME_SIZE: u32 = 512;

/// Most `decode_frame` reserves ahead of the octets that have arrived.
const MAX_RESERVE: usize = 1 << 20;

/// Which layer an AMQP 1.0 protocol header asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProtocolId {
    Amqp,
    Tls,
    Sasl,
}

impl ProtocolId {
    /// Reads an 8-octet protocol header. Anything but `AMQP`, an id of 0, 2
    /// or 3, and version 1.0.0 is an error; the caller answers it with the
    /// header it does support and closes, as the spec says.
    pub fn from_header(header: &[u8; 8]) -> Result<ProtocolId, FrameError> {
        match *header {
            PROTOCOL_HEADER => Ok(ProtocolId::Amqp),
            TLS_PROTOCOL_HEADER => Ok(ProtocolId::Tls),
            SASL_PROTOCOL_HEADER => Ok(ProtocolId::Sasl),
            other => Err(FrameError::BadProtocolHeader(other)),
        }
    }

    pub fn header(self) -> [u8; 8] {
        match self {
            ProtocolId::Amqp => PROTOCOL_HEADER,
            ProtocolId::Tls => TLS_PROTOCOL_HEADER,
            ProtocolId::Sasl => SASL_PROTOCOL_HEADER,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum FrameType {
    Amqp = 0x00,
    Sasl = 0x01,
}

/// One frame; the body shares the read buffer's allocation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    pub frame_type: FrameType,
    /// The channel of an AMQP frame; SASL frames leave it 0 and it is ignored.
    pub channel: u16,
    /// Everything after the data offset; empty for an empty frame.
    pub body: Bytes,
}

/// What a frame's body holds.
#[allow(clippy::large_enum_variant)] // See `Performative`.
#[derive(Debug, Clone, PartialEq)]
pub enum FrameBody {
    /// No body: a keep-alive.
    Empty,
    /// A performative and the octets after it (message data for a transfer,
    /// empty for the others).
    Amqp {
        performative: Performative,
        payload: Bytes,
    },
    Sasl(SaslFrame),
}

impl Frame {
    pub fn is_empty(&self) -> bool {
        self.body.is_empty()
    }

    /// Decodes the body. A SASL frame may hold nothing after its body.
    pub fn decode_body(&self) -> Result<FrameBody, DecodeError> {
        if self.body.is_empty() {
            return Ok(FrameBody::Empty);
        }
        let mut rest = self.body.clone();
        match self.frame_type {
            FrameType::Amqp => {
                let performative = Performative::decode(&mut rest)?;
                Ok(FrameBody::Amqp {
                    performative,
                    payload: rest,
                })
            }
            FrameType::Sasl => {
                let sasl = SaslFrame::decode(&mut rest)?;
                match rest.len() {
                    0 => Ok(FrameBody::Sasl(sasl)),
                    n => Err(DecodeError::SaslPayload(n)),
                }
            }
        }
    }
}

/// Takes one complete frame off the front of `buf`, or returns `Ok(None)` if
/// more octets are needed. `max_frame_size` is the limit this side announced
/// in its open ([`MIN_MAX_FRAME_SIZE`] before that). The header is checked as
/// soon as it has arrived, so an oversized or malformed frame is refused
/// before its body is buffered.
pub fn decode_frame(buf: &mut BytesMut, max_frame_size: u32) -> Result<Option<Frame>, FrameError> {
    let Some(mut header) = buf.get(..4) else {
        return Ok(None);
    };
    let size = header.get_u32();
    if (size as usize) < FRAME_HEADER_SIZE {
        return Err(FrameError::TooSmall(size));
    }
    if size > max_frame_size {
        return Err(FrameError::TooLarge {
            size,
            max: max_frame_size,
        });
    }
    let Some(&[doff, frame_type, ch0, ch1]) = buf.get(4..8) else {
        return Ok(None);
    };
    let body_start = usize::from(doff) * 4;
    if doff < 2 || body_start > size as usize {
        return Err(FrameError::BadDataOffset { doff, size });
    }
    let frame_type = match frame_type {
        0x00 => FrameType::Amqp,
        0x01 => FrameType::Sasl,
        other => return Err(FrameError::UnknownType(other)),
    };
    let size = size as usize;
    if buf.len() < size {
        // Reserve for the rest of the frame, but not more than a modest
        // amount on the header's word alone.
        ferry_chunks::reserve_unread(buf, (size - buf.len()).min(MAX_RESERVE));
        return Ok(None);
    }
    let mut frame = buf.split_to(size);
    frame.advance(body_start);
    Ok(Some(Frame {
        frame_type,
        channel: u16::from_be_bytes([ch0, ch1]),
        body: frame.freeze(),
    }))
}

/// Writes a frame header with a zero size, for [`finish_frame`].
fn begin_frame(out: &mut BytesMut, frame_type: FrameType, channel: u16) -> usize {
    let start = out.len();
    out.put_u32(0);
    out.put_u8(2);
    out.put_u8(frame_type as u8);
    out.put_u16(channel);
    start
}

fn finish_frame(out: &mut BytesMut, start: usize) -> usize {
    let size = out.len() - start;
    // Frames are bounded by max-frame-size, a u32.
    let word = u32::try_from(size).unwrap_or(u32::MAX);
    out[start..start + 4].copy_from_slice(&word.to_be_bytes());
    size
}

/// Appends an AMQP frame holding `performative` and `payload`; returns its
/// size, which the caller checks against the peer's max-frame-size (or uses
/// [`write_transfer`], which splits).
pub fn write_frame(
    out: &mut BytesMut,
    channel: u16,
    performative: &Performative,
    payload: &[u8],
) -> usize {
    let start = begin_frame(out, FrameType::Amqp, channel);
    performative.encode(out);
    out.put_slice(payload);
    finish_frame(out, start)
}

/// Appends a SASL frame.
pub fn write_sasl_frame(out: &mut BytesMut, body: &SaslFrame) -> usize {
    let start = begin_frame(out, FrameType::Sasl, 0);
    body.encode(out);
    finish_frame(out, start)
}

/// Appends an empty frame (a keep-alive).
pub fn write_empty_frame(out: &mut BytesMut) {
    let start = begin_frame(out, FrameType::Amqp, 0);
    finish_frame(out, start);
}

/// Appends a delivery's transfer frames: as many as it takes to fit
/// `payload` into frames of at most `max_frame_size` octets, all but the last
/// with `more` set (the last keeps `transfer.more`, so a caller can stream a
/// delivery in parts). Continuation frames leave out delivery-id,
/// delivery-tag and message-format, as the spec allows. Returns the number of
/// frames; fails, writing nothing, if a frame cannot hold the transfer and at
/// least one payload octet.
pub fn write_transfer(
    out: &mut BytesMut,
    channel: u16,
    transfer: &Transfer,
    payload: &[u8],
    max_frame_size: u32,
) -> Result<usize, FrameSizeTooSmall> {
    let max = max_frame_size as usize;
    let written = out.len();
    let mut rest = payload;
    let mut frames = 0;
    let mut t = transfer.clone();
    loop {
        let start = begin_frame(out, FrameType::Amqp, channel);
        t.more = transfer.more;
        Performative::Transfer(t.clone()).encode(out);
        if out.len() - start + rest.len() <= max {
            out.put_slice(rest);
            finish_frame(out, start);
            return Ok(frames + 1);
        }
        out.truncate(start + FRAME_HEADER_SIZE);
        t.more = true;
        Performative::Transfer(t.clone()).encode(out);
        let used = out.len() - start;
        if used >= max {
            out.truncate(written);
            return Err(FrameSizeTooSmall {
                needed: used + 1,
                max: max_frame_size,
            });
        }
        // Setting `more` never shortens the transfer, so this is less than
        // what is left (the min only guards that reasoning).
        let (now, later) = rest.split_at((max - used).min(rest.len()));
        out.put_slice(now);
        finish_frame(out, start);
        rest = later;
        frames += 1;
        t.delivery_id = None;
        t.delivery_tag = None;
        t.message_format = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::definitions::Role;
    use crate::performative::{Attach, Open};
    use crate::primitive::Str;

    fn buf(b: &[u8]) -> BytesMut {
        BytesMut::from(b)
    }

    #[test]
    fn protocol_headers() {
        assert_eq!(
            ProtocolId::from_header(b"AMQP\x03\x01\x00\x00"),
            Ok(ProtocolId::Sasl)
        );
        assert_eq!(ProtocolId::Tls.header(), *b"AMQP\x02\x01\x00\x00");
        assert_eq!(ProtocolId::Amqp.header(), *b"AMQP\x00\x01\x00\x00");
        let old = *b"AMQP\x00\x00\x09\x01";
        assert_eq!(
            ProtocolId::from_header(&old),
            Err(FrameError::BadProtocolHeader(old))
        );
    }

    #[test]
    fn empty_frame_by_hand() {
        let mut out = BytesMut::new();
        write_empty_frame(&mut out);
        assert_eq!(&out[..], &[0, 0, 0, 8, 2, 0, 0, 0]);
        let f = decode_frame(&mut out, 512).unwrap().unwrap();
        assert!(f.is_empty());
        assert_eq!(f.decode_body(), Ok(FrameBody::Empty));
    }

    #[test]
    fn open_frame_by_hand() {
        let open = Performative::Open(Open {
            container_id: Str::from("x"),
            ..Open::default()
        });
        let mut out = BytesMut::new();
        assert_eq!(write_frame(&mut out, 0, &open, &[]), 17);
        #[rustfmt::skip]
        let expected: &[u8] = &[
            0, 0, 0, 17, 2, 0, 0, 0,
            0x00, 0x53, 0x10, 0xc0, 4, 1, 0xa1, 1, b'x',
        ];
        assert_eq!(&out[..], expected);
        let f = decode_frame(&mut out, 512).unwrap().unwrap();
        assert_eq!(
            f.decode_body(),
            Ok(FrameBody::Amqp {
                performative: open,
                payload: Bytes::new()
            })
        );
    }

    #[test]
    fn extended_header_is_skipped() {
        // doff 3: four octets of extended header before the body.
        let mut b = buf(&[
            0, 0, 0, 17, 3, 0, 0, 5, 0xde, 0xad, 0xbe, 0xef, 0x00, 0x53, 0x17, 0x45, 0xff,
        ]);
        let f = decode_frame(&mut b, 512).unwrap().unwrap();
        assert_eq!(f.channel, 5);
        assert_eq!(&f.body[..], &[0x00, 0x53, 0x17, 0x45, 0xff][..]);
        let Ok(FrameBody::Amqp {
            performative,
            payload,
        }) = f.decode_body()
        else {
            panic!("not decoded");
        };
        assert_eq!(performative.name(), "amqp:end:list");
        assert_eq!(&payload[..], &[0xff]);
    }

    #[test]
    fn incomplete_frames_wait_for_more() {
        let mut whole = BytesMut::new();
        write_sasl_frame(
            &mut whole,
            &SaslFrame::SaslChallenge(crate::sasl::SaslChallenge {
                challenge: Bytes::from_static(b"abc"),
            }),
        );
        for cut in 0..whole.len() {
            let mut b = buf(&whole[..cut]);
            assert_eq!(decode_frame(&mut b, 512), Ok(None), "cut {cut}");
            assert_eq!(b.len(), cut);
        }
        let f = decode_frame(&mut whole, 512).unwrap().unwrap();
        assert_eq!(f.frame_type, FrameType::Sasl);
        assert!(matches!(f.decode_body(), Ok(FrameBody::Sasl(_))));
    }

    #[test]
    fn frame_errors() {
        let mut b = buf(&[0, 0, 0, 7]);
        assert_eq!(decode_frame(&mut b, 512), Err(FrameError::TooSmall(7)));
        let mut b = buf(&[0, 0, 0, 8, 1, 0, 0, 0]);
        assert_eq!(
            decode_frame(&mut b, 512),
            Err(FrameError::BadDataOffset { doff: 1, size: 8 })
        );
        let mut b = buf(&[0, 0, 0, 12, 4, 0, 0, 0]);
        assert_eq!(
            decode_frame(&mut b, 512),
            Err(FrameError::BadDataOffset { doff: 4, size: 12 })
        );
        let mut b = buf(&[0, 0, 0, 8, 2, 7, 0, 0]);
        assert_eq!(decode_frame(&mut b, 512), Err(FrameError::UnknownType(7)));
        // Refused from the size word alone, before the rest arrives.
        let mut b = buf(&[0, 0, 2, 1]);
        assert_eq!(
            decode_frame(&mut b, 512),
            Err(FrameError::TooLarge {
                size: 513,
                max: 512
            })
        );
        let mut b = buf(&[0xff, 0xff, 0xff, 0xff]);
        assert!(decode_frame(&mut b, u32::MAX).unwrap().is_none());
        assert!(b.capacity() < (1 << 21));
        assert_eq!(
            FrameError::TooSmall(0).condition(),
            crate::condition::FRAMING_ERROR
        );
    }

    #[test]
    fn sasl_frames_carry_nothing_else() {
        let mut out = BytesMut::new();
        let start = begin_frame(&mut out, FrameType::Sasl, 0);
        SaslFrame::SaslResponse(crate::sasl::SaslResponse {
            response: Bytes::new(),
        })
        .encode(&mut out);
        out.put_u8(0x40);
        finish_frame(&mut out, start);
        let f = decode_frame(&mut out, 512).unwrap().unwrap();
        assert_eq!(f.decode_body(), Err(DecodeError::SaslPayload(1)));
    }

    #[test]
    fn transfers_are_split_to_the_frame_size() {
        let transfer = Transfer {
            handle: 1,
            delivery_id: Some(7),
            delivery_tag: Some(Bytes::from_static(b"t")),
            message_format: Some(0),
            ..Transfer::default()
        };
        let payload: Vec<u8> = (0..2000u32).map(|i| i as u8).collect();
        let mut out = BytesMut::new();
        let frames = write_transfer(&mut out, 3, &transfer, &payload, 512).unwrap();
        let mut got = Vec::new();
        let mut seen = 0;
        while let Some(f) = decode_frame(&mut out, 512).unwrap() {
            assert!(f.body.len() + 8 <= 512);
            assert_eq!(f.channel, 3);
            let Ok(FrameBody::Amqp {
                performative: Performative::Transfer(t),
                payload,
            }) = f.decode_body()
            else {
                panic!("not a transfer");
            };
            seen += 1;
            assert_eq!(t.more, seen < frames);
            assert_eq!(t.delivery_id.is_some(), seen == 1);
            got.extend_from_slice(&payload);
        }
        assert_eq!(seen, frames);
        assert_eq!(frames, 5);
        assert_eq!(got, payload);

        // A frame that cannot hold even the transfer.
        let big = Transfer {
            delivery_tag: Some(Bytes::from(vec![0; 600])),
            ..transfer
        };
        let mut out = BytesMut::new();
        assert!(write_transfer(&mut out, 0, &big, b"x", 512).is_err());
        assert!(out.is_empty());

        // Exactly filling one frame.
        let attach = Performative::Attach(Attach {
            name: Str::from("l"),
            role: Role::Receiver,
            ..Attach::default()
        });
        let mut out = BytesMut::new();
        let n = write_frame(&mut out, 0, &attach, &[]);
        assert!(n < 512);
    }
}
