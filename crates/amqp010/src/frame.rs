//! The protocol header and 12-octet frame headers.

use bytes::{Buf, BufMut, Bytes, BytesMut};

use crate::error::FrameError;
use crate::generated::SegmentType;

/// What a 0-10 peer sends first: `AMQP`, class 1, instance 1, version 0-10.
pub const PROTOCOL_HEADER: [u8; 8] = *b"AMQP\x01\x01\x00\x0a";

pub const FRAME_HEADER_SIZE: usize = 12;

/// The largest frame the 16-bit size field can describe.
pub const MAX_FRAME_SIZE: usize = u16::MAX as usize;

/// The frame size every peer must accept before `connection.tune` agrees on another.
pub const MIN_MAX_FRAME_SIZE: usize = 4096;

/// An 8-octet `AMQP` protocol header, whichever version it asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProtocolHeader {
    pub class: u8,
    pub instance: u8,
    pub major: u8,
    pub minor: u8,
}

impl ProtocolHeader {
    pub const AMQP_0_10: ProtocolHeader = ProtocolHeader {
        class: 1,
        instance: 1,
        major: 0,
        minor: 10,
    };

    /// `None` unless `bytes` holds at least 8 octets starting with `AMQP`.
    pub fn parse(bytes: &[u8]) -> Option<ProtocolHeader> {
        match bytes {
            [b'A', b'M', b'Q', b'P', class, instance, major, minor, ..] => Some(ProtocolHeader {
                class: *class,
                instance: *instance,
                major: *major,
                minor: *minor,
            }),
            _ => None,
        }
    }

    pub fn is_amqp010(&self) -> bool {
        *self == Self::AMQP_0_10
    }

    pub fn to_bytes(self) -> [u8; 8] {
        [
            b'A',
            b'M',
            b'Q',
            b'P',
            self.class,
            self.instance,
            self.major,
            self.minor,
        ]
    }
}

const FIRST_SEGMENT: u8 = 0x08;
const LAST_SEGMENT: u8 = 0x04;
const FIRST_FRAME: u8 = 0x02;
const LAST_FRAME: u8 = 0x01;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameHeader {
    pub first_segment: bool,
    pub last_segment: bool,
    pub first_frame: bool,
    pub last_frame: bool,
    pub segment_type: SegmentType,
    pub track: u8,
    pub channel: u16,
    /// Frame size including this header.
    pub size: u16,
}

impl FrameHeader {
    /// Checks the reserved bits the way qpidd does: the version and reserved bits of the
    /// flags octet, octet 4 and the high nibble of octet 5 must be zero. The last four
    /// octets are not checked, as qpidd does not either.
    pub fn parse(h: &[u8; FRAME_HEADER_SIZE]) -> Result<FrameHeader, FrameError> {
        let flags = h[0];
        if flags & 0xf0 != 0 || h[4] != 0 || h[5] & 0xf0 != 0 {
            return Err(FrameError::ReservedBits);
        }
        let segment_type = SegmentType::from_code(h[1]).ok_or(FrameError::SegmentType(h[1]))?;
        let size = u16::from_be_bytes([h[2], h[3]]);
        if usize::from(size) < FRAME_HEADER_SIZE {
            return Err(FrameError::TooSmall(size));
        }
        Ok(FrameHeader {
            first_segment: flags & FIRST_SEGMENT != 0,
            last_segment: flags & LAST_SEGMENT != 0,
            first_frame: flags & FIRST_FRAME != 0,
            last_frame: flags & LAST_FRAME != 0,
            segment_type,
            track: h[5],
            channel: u16::from_be_bytes([h[6], h[7]]),
            size,
        })
    }

    pub fn payload_len(&self) -> usize {
        usize::from(self.size).saturating_sub(FRAME_HEADER_SIZE)
    }

    pub fn to_bytes(&self) -> [u8; FRAME_HEADER_SIZE] {
        let mut flags = 0;
        for (set, bit) in [
            (self.first_segment, FIRST_SEGMENT),
            (self.last_segment, LAST_SEGMENT),
            (self.first_frame, FIRST_FRAME),
            (self.last_frame, LAST_FRAME),
        ] {
            if set {
                flags |= bit;
            }
        }
        let [s0, s1] = self.size.to_be_bytes();
        let [c0, c1] = self.channel.to_be_bytes();
        [
            flags,
            self.segment_type.code(),
            s0,
            s1,
            0,
            self.track & 0x0f,
            c0,
            c1,
            0,
            0,
            0,
            0,
        ]
    }

    pub fn write(&self, out: &mut BytesMut) {
        out.put_slice(&self.to_bytes());
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    pub header: FrameHeader,
    pub payload: Bytes,
}

/// Cuts the next frame off the front of `buf`. `Ok(None)` means more bytes are needed
/// (and `buf` is untouched); the payload shares `buf`'s memory.
pub fn decode_frame(
    buf: &mut BytesMut,
    max_frame_size: usize,
) -> Result<Option<Frame>, FrameError> {
    let Some(head) = buf.get(..FRAME_HEADER_SIZE) else {
        return Ok(None);
    };
    let mut h = [0u8; FRAME_HEADER_SIZE];
    h.copy_from_slice(head);
    let header = FrameHeader::parse(&h)?;
    let size = usize::from(header.size);
    if size > max_frame_size {
        return Err(FrameError::TooLarge {
            size: header.size,
            max: max_frame_size,
        });
    }
    if buf.len() < size {
        // Reserve once so the rest of the frame arrives without reallocating piecemeal.
        ferry_chunks::reserve_unread(buf, size - buf.len());
        return Ok(None);
    }
    // One cut and an advance: a second cut (`split_off`) would count the shared read buffer
    // up once more and down again when the header part is dropped, three times a message.
    let mut frame = buf.split_to(size);
    frame.advance(FRAME_HEADER_SIZE);
    Ok(Some(Frame {
        header,
        payload: frame.freeze(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protocol_headers() {
        let h = ProtocolHeader::parse(&PROTOCOL_HEADER).unwrap();
        assert!(h.is_amqp010());
        assert_eq!(h.to_bytes(), PROTOCOL_HEADER);
        let old = ProtocolHeader::parse(b"AMQP\x00\x00\x09\x01").unwrap();
        assert!(!old.is_amqp010());
        assert_eq!((old.major, old.minor), (9, 1));
        assert_eq!(ProtocolHeader::parse(b"AMQP\x01\x01\x00"), None);
        assert_eq!(ProtocolHeader::parse(b"HTTP/1.1"), None);
    }

    /// A one-frame control segment (all four flags, track 0) with a 2-octet payload.
    const HEARTBEAT: [u8; 14] = [
        0x0f, 0x00, 0x00, 0x0e, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x0a,
    ];

    #[test]
    fn decodes_a_known_frame() {
        let mut buf = BytesMut::from(&HEARTBEAT[..]);
        buf.extend_from_slice(b"next");
        let f = decode_frame(&mut buf, 4096).unwrap().unwrap();
        assert!(f.header.first_segment && f.header.last_segment);
        assert!(f.header.first_frame && f.header.last_frame);
        assert_eq!(f.header.segment_type, SegmentType::Control);
        assert_eq!(
            (f.header.track, f.header.channel, f.header.size),
            (0, 0, 14)
        );
        assert_eq!(&f.payload[..], &[0x01, 0x0a]);
        assert_eq!(&buf[..], b"next");
        assert_eq!(f.header.to_bytes()[..], HEARTBEAT[..12]);
    }

    #[test]
    fn partial_frames_wait_for_more() {
        for n in 0..HEARTBEAT.len() {
            let mut buf = BytesMut::from(&HEARTBEAT[..n]);
            assert_eq!(decode_frame(&mut buf, 4096), Ok(None), "at {n}");
            assert_eq!(buf.len(), n);
        }
    }

    #[test]
    fn flags_channel_and_track_positions() {
        let h = FrameHeader {
            first_segment: true,
            last_segment: false,
            first_frame: false,
            last_frame: true,
            segment_type: SegmentType::Body,
            track: 1,
            channel: 0x0102,
            size: 0x0304,
        };
        let b = h.to_bytes();
        assert_eq!(b, [0x09, 3, 3, 4, 0, 1, 1, 2, 0, 0, 0, 0]);
        assert_eq!(FrameHeader::parse(&b), Ok(h));
    }

    #[test]
    fn bad_headers() {
        let mut h = HEARTBEAT;
        h[3] = 11;
        assert_eq!(
            decode_frame(&mut BytesMut::from(&h[..]), 4096),
            Err(FrameError::TooSmall(11))
        );
        let mut h = HEARTBEAT;
        h[2] = 0x10;
        assert!(matches!(
            decode_frame(&mut BytesMut::from(&h[..]), 4096),
            Err(FrameError::TooLarge { .. })
        ));
        for (i, v) in [(0usize, 0x4f), (0, 0x1f), (4, 1), (5, 0x10)] {
            let mut h = HEARTBEAT;
            h[i] = v;
            assert_eq!(
                decode_frame(&mut BytesMut::from(&h[..]), 4096),
                Err(FrameError::ReservedBits)
            );
        }
        let mut h = HEARTBEAT;
        h[1] = 4;
        assert_eq!(
            decode_frame(&mut BytesMut::from(&h[..]), 4096),
            Err(FrameError::SegmentType(4))
        );
    }
}
