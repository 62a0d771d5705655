//! Writing controls, commands and message transfers as frames.

use std::ops::Range;

use bytes::{BufMut, BytesMut};

use crate::codec;
use crate::error::EncodeError;
use crate::frame::{FrameHeader, FRAME_HEADER_SIZE, MAX_FRAME_SIZE};
use crate::generated::{Command, Control, MessageTransfer, SegmentType};
use crate::ops::CommandHeader;

fn payload_limit(max_frame_size: usize) -> Result<usize, EncodeError> {
    let max = max_frame_size.min(MAX_FRAME_SIZE);
    if max <= FRAME_HEADER_SIZE {
        return Err(EncodeError::FrameSizeTooSmall(max_frame_size));
    }
    Ok(max - FRAME_HEADER_SIZE)
}

/// Controls travel on track 0, everything else on track 1.
fn track_of(segment_type: SegmentType) -> u8 {
    match segment_type {
        SegmentType::Control => 0,
        _ => 1,
    }
}

struct Segment {
    channel: u16,
    segment_type: SegmentType,
    first_segment: bool,
    last_segment: bool,
}

impl Segment {
    fn header(&self, first_frame: bool, last_frame: bool, payload_len: usize) -> FrameHeader {
        FrameHeader {
            first_segment: self.first_segment,
            last_segment: self.last_segment,
            first_frame,
            last_frame,
            segment_type: self.segment_type,
            track: track_of(self.segment_type),
            channel: self.channel,
            // Callers keep payload_len within the frame limit, which fits a u16.
            size: (payload_len + FRAME_HEADER_SIZE) as u16,
        }
    }

    /// Writes `payload` as frames of at most `max_payload` octets (one empty frame if
    /// the payload is empty).
    fn write_frames(&self, out: &mut BytesMut, payload: &[u8], max_payload: usize) {
        out.reserve(payload.len() + payload.len().div_ceil(max_payload) * FRAME_HEADER_SIZE);
        self.write_frames_placing(out, payload.len(), max_payload, |out, range| {
            out.put_slice(&payload[range]);
        });
    }

    /// [`Segment::write_frames`] for a payload of `len` octets that `place` puts after
    /// each frame's header, a range of it at a time.
    fn write_frames_placing(
        &self,
        out: &mut BytesMut,
        len: usize,
        max_payload: usize,
        mut place: impl FnMut(&mut BytesMut, Range<usize>),
    ) {
        if len == 0 {
            self.header(true, true, 0).write(out);
            return;
        }
        let mut start = 0;
        while start < len {
            let end = len.min(start + max_payload);
            self.header(start == 0, end == len, end - start).write(out);
            place(out, start..end);
            start = end;
        }
    }

    /// Encodes the payload straight after a placeholder header and patches the header
    /// in; only a payload too big for one frame is moved to be split.
    fn write_encoded(
        &self,
        out: &mut BytesMut,
        max_frame_size: usize,
        encode: impl FnOnce(&mut BytesMut) -> Result<(), EncodeError>,
    ) -> Result<(), EncodeError> {
        let max_payload = payload_limit(max_frame_size)?;
        codec::atomically(out, |out| {
            let start = out.len();
            out.put_bytes(0, FRAME_HEADER_SIZE);
            encode(out)?;
            let len = out.len() - start - FRAME_HEADER_SIZE;
            if len <= max_payload {
                let h = self.header(true, true, len).to_bytes();
                out[start..start + FRAME_HEADER_SIZE].copy_from_slice(&h);
            } else {
                let payload = out.split_off(start + FRAME_HEADER_SIZE).freeze();
                out.truncate(start);
                self.write_frames(out, &payload, max_payload);
            }
            Ok(())
        })
    }
}

/// Writes a control on `channel`, split into frames of at most 64 KiB if needed.
pub fn write_control(
    out: &mut BytesMut,
    channel: u16,
    control: &Control,
) -> Result<(), EncodeError> {
    write_control_framed(out, channel, control, MAX_FRAME_SIZE)
}

/// [`write_control`] with a frame size limit.
pub fn write_control_framed(
    out: &mut BytesMut,
    channel: u16,
    control: &Control,
    max_frame_size: usize,
) -> Result<(), EncodeError> {
    let seg = Segment {
        channel,
        segment_type: SegmentType::Control,
        first_segment: true,
        last_segment: true,
    };
    seg.write_encoded(out, max_frame_size, |out| control.encode(out))
}

/// Writes a command with no header or body segments.
pub fn write_command(
    out: &mut BytesMut,
    channel: u16,
    command: &Command,
    sync: bool,
    max_frame_size: usize,
) -> Result<(), EncodeError> {
    let seg = Segment {
        channel,
        segment_type: SegmentType::Command,
        first_segment: true,
        last_segment: true,
    };
    seg.write_encoded(out, max_frame_size, |out| {
        command.encode(CommandHeader::sync(sync), out)
    })
}

/// Writes a message.transfer: the command segment, the header segment as given, and
/// the body segment. Like qpidd, an empty body sends no body segment; the header
/// segment then ends the assembly.
#[allow(clippy::too_many_arguments)]
pub fn write_transfer(
    out: &mut BytesMut,
    channel: u16,
    transfer: &MessageTransfer,
    sync: bool,
    header_segment: &[u8],
    body: &[u8],
    max_frame_size: usize,
) -> Result<(), EncodeError> {
    let body = (!body.is_empty()).then_some(body);
    write_segments(
        out,
        channel,
        transfer,
        sync,
        header_segment,
        body,
        max_frame_size,
    )
}

/// [`write_transfer`] with a body segment even when the body is empty: a zero-length body
/// segment is a message with an empty body, where no body segment is a message without one
/// (qpid clients tell them apart, as `""` and `None`).
pub fn write_transfer_with_body_segment(
    out: &mut BytesMut,
    channel: u16,
    transfer: &MessageTransfer,
    sync: bool,
    header_segment: &[u8],
    body: &[u8],
    max_frame_size: usize,
) -> Result<(), EncodeError> {
    write_segments(
        out,
        channel,
        transfer,
        sync,
        header_segment,
        Some(body),
        max_frame_size,
    )
}

fn write_segments(
    out: &mut BytesMut,
    channel: u16,
    transfer: &MessageTransfer,
    sync: bool,
    header_segment: &[u8],
    body: Option<&[u8]>,
    max_frame_size: usize,
) -> Result<(), EncodeError> {
    let body_len = body.map(<[u8]>::len);
    if let Some(body) = body {
        out.reserve(
            body.len() + body.len().div_ceil(payload_limit(max_frame_size)?) * FRAME_HEADER_SIZE,
        );
    }
    write_transfer_placing_body(
        out,
        TransferHead {
            channel,
            transfer,
            sync,
            header_segment,
            max_frame_size,
        },
        body_len,
        |out, range| {
            if let Some(body) = body {
                out.put_slice(&body[range]);
            }
        },
    )
}

/// What a message.transfer says besides its body.
pub struct TransferHead<'a> {
    pub channel: u16,
    pub transfer: &'a MessageTransfer,
    pub sync: bool,
    /// The encoded header segment (delivery- and message-properties).
    pub header_segment: &'a [u8],
    pub max_frame_size: usize,
}

/// [`write_transfer`] for a body the caller places itself: `body_len` octets (`None`: no
/// body segment), put after each body frame's header by `place`, a range at a time, into
/// the buffer or beside it (a caller that sends a large body from where it is, without
/// copying). Nothing is written if the command cannot be encoded; `place` is called only
/// after everything before the body is written.
pub fn write_transfer_placing_body(
    out: &mut BytesMut,
    head: TransferHead<'_>,
    body_len: Option<usize>,
    place: impl FnMut(&mut BytesMut, Range<usize>),
) -> Result<(), EncodeError> {
    let TransferHead {
        channel,
        transfer,
        sync,
        header_segment,
        max_frame_size,
    } = head;
    let max_payload = payload_limit(max_frame_size)?;
    let body = body_len;
    codec::atomically(out, |out| {
        let command = Segment {
            channel,
            segment_type: SegmentType::Command,
            first_segment: true,
            last_segment: false,
        };
        command.write_encoded(out, max_frame_size, |out| {
            out.put_u8(MessageTransfer::CLASS_CODE);
            out.put_u8(MessageTransfer::CODE);
            CommandHeader::sync(sync).encode(out)?;
            transfer.write_fields(out)
        })?;
        let header = Segment {
            channel,
            segment_type: SegmentType::Header,
            first_segment: false,
            last_segment: body.is_none(),
        };
        header.write_frames(out, header_segment, max_payload);
        Ok(())
    })?;
    if let Some(len) = body {
        let body_segment = Segment {
            channel,
            segment_type: SegmentType::Body,
            first_segment: false,
            last_segment: true,
        };
        body_segment.write_frames_placing(out, len, max_payload, place);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::decode_frame;
    use crate::generated::{ConnectionHeartbeat, ExecutionSync};

    #[test]
    fn heartbeat_bytes() {
        let mut out = BytesMut::new();
        write_control(&mut out, 0, &ConnectionHeartbeat {}.into()).unwrap();
        assert_eq!(
            &out[..],
            &[0x0f, 0, 0, 16, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, 0x0a, 0x00, 0x00]
        );
    }

    #[test]
    fn sync_command_bytes() {
        let mut out = BytesMut::new();
        write_command(&mut out, 3, &ExecutionSync {}.into(), true, 4096).unwrap();
        assert_eq!(
            &out[..],
            &[0x0f, 1, 0, 18, 0, 1, 0, 3, 0, 0, 0, 0, 0x03, 0x01, 0x01, 0x01, 0x00, 0x00]
        );
    }

    #[test]
    fn frame_size_too_small() {
        let mut out = BytesMut::new();
        assert_eq!(
            write_command(&mut out, 0, &ExecutionSync {}.into(), false, 12),
            Err(EncodeError::FrameSizeTooSmall(12))
        );
        assert!(out.is_empty());
    }

    #[test]
    fn transfer_splits_body_into_frames() {
        let mut out = BytesMut::new();
        let body = vec![7u8; 50];
        write_transfer(
            &mut out,
            1,
            &MessageTransfer::default(),
            false,
            b"hdr",
            &body,
            32,
        )
        .unwrap();
        let mut frames = Vec::new();
        while let Some(f) = decode_frame(&mut out, 32).unwrap() {
            frames.push(f);
        }
        assert!(out.is_empty());
        let kinds: Vec<_> = frames
            .iter()
            .map(|f| {
                let h = f.header;
                (
                    h.segment_type,
                    h.first_segment,
                    h.last_segment,
                    h.first_frame,
                    h.last_frame,
                    f.payload.len(),
                )
            })
            .collect();
        assert_eq!(
            kinds,
            vec![
                (SegmentType::Command, true, false, true, true, 6),
                (SegmentType::Header, false, false, true, true, 3),
                (SegmentType::Body, false, true, true, false, 20),
                (SegmentType::Body, false, true, false, false, 20),
                (SegmentType::Body, false, true, false, true, 10),
            ]
        );
        assert!(frames
            .iter()
            .all(|f| f.header.track == 1 && f.header.channel == 1));
    }

    #[test]
    fn empty_body_ends_with_the_header_segment() {
        let mut out = BytesMut::new();
        write_transfer(
            &mut out,
            0,
            &MessageTransfer::default(),
            false,
            b"",
            b"",
            4096,
        )
        .unwrap();
        let first = decode_frame(&mut out, 4096).unwrap().unwrap();
        let header = decode_frame(&mut out, 4096).unwrap().unwrap();
        assert!(!first.header.last_segment);
        assert_eq!(header.header.segment_type, SegmentType::Header);
        assert!(header.header.last_segment && header.payload.is_empty());
        assert!(out.is_empty());
    }

    #[test]
    fn an_empty_body_segment_can_be_kept() {
        let mut out = BytesMut::new();
        let t = MessageTransfer::default();
        write_transfer_with_body_segment(&mut out, 0, &t, false, b"h", b"", 4096).unwrap();
        let _command = decode_frame(&mut out, 4096).unwrap().unwrap();
        let header = decode_frame(&mut out, 4096).unwrap().unwrap();
        let body = decode_frame(&mut out, 4096).unwrap().unwrap();
        assert!(!header.header.last_segment);
        assert_eq!(body.header.segment_type, SegmentType::Body);
        assert!(body.header.last_segment && body.payload.is_empty());
        assert!(out.is_empty());
    }
}
