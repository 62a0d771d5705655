//! Frames to segments to complete controls and commands (with a message's header and
//! body segments), for one channel.

use bytes::Bytes;
use ferry_chunks::Chunks;

use crate::error::{AssemblyError, CommandError, CommandErrorKind, DecodeError, FrameError};
use crate::frame::Frame;
use crate::generated::{Command, Control, SegmentType};
use crate::ops::CommandHeader;

/// A message body: one slice of the received frame when it arrived in one frame,
/// otherwise the frames' payloads joined once.
pub type Body = Bytes;

/// Default limit for one control or command segment (message.transfer's header and body
/// count against the message limit instead).
pub const DEFAULT_MAX_COMMAND_SIZE: usize = 1 << 20;

/// A complete item from the peer.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    Control(Control),
    Command {
        header: CommandHeader,
        command: Command,
        /// The raw header segment, if one was sent.
        message_header: Option<Bytes>,
        /// Empty if no body segment was sent, or an empty one.
        body: Body,
        /// A body segment was sent (it may be empty; qpidd forwards one as received).
        body_segment: bool,
    },
}

#[derive(Debug)]
struct Partial {
    segment_type: SegmentType,
    first_segment: bool,
    last_segment: bool,
    /// `None` while discarding the rest of a failed command's assembly.
    data: Option<Chunks>,
}

#[derive(Debug, Default)]
enum Pending {
    #[default]
    Idle,
    /// A command segment arrived without `last_segment`: header and body may follow.
    Message {
        header: CommandHeader,
        command: Command,
        class_code: u8,
        code: u8,
        message_header: Option<Bytes>,
        /// Header and body octets so far, against the message size limit.
        size: usize,
    },
    /// The command failed; drop its remaining segments.
    Skipping,
}

#[derive(Debug, Default)]
struct Track {
    partial: Option<Partial>,
    pending: Pending,
}

/// Assembles one channel's frames. Track 0 carries controls and track 1 commands; each
/// has its own segment in progress, since the spec lets controls interleave with the
/// frames of a command assembly.
#[derive(Debug)]
pub struct Assembler {
    max_message_size: usize,
    max_command_size: usize,
    tracks: [Track; 2],
    /// The header and body octets of its message so far, if the last frame pushed was
    /// part of a message's header or body; zero otherwise.
    message_so_far: usize,
}

impl Assembler {
    /// `max_message_size` bounds the header plus body of one message.
    pub fn new(max_message_size: usize) -> Self {
        Assembler {
            max_message_size,
            max_command_size: DEFAULT_MAX_COMMAND_SIZE,
            tracks: Default::default(),
            message_so_far: 0,
        }
    }

    pub fn with_max_command_size(mut self, limit: usize) -> Self {
        self.max_command_size = limit;
        self
    }

    /// Whether no segment or assembly is in progress.
    pub fn is_idle(&self) -> bool {
        self.tracks
            .iter()
            .all(|t| t.partial.is_none() && matches!(t.pending, Pending::Idle))
    }

    /// Octets of the message being assembled on the command track: its header and body so
    /// far (the command itself is bounded apart). Zero between messages.
    pub fn unfinished_message(&self) -> usize {
        let track = &self.tracks[1];
        let Pending::Message { size, .. } = &track.pending else {
            return 0;
        };
        let segment = track
            .partial
            .as_ref()
            .and_then(|p| p.data.as_ref())
            .map_or(0, Chunks::len);
        size + segment
    }

    /// The header and body octets of its message so far, if the last frame pushed belonged
    /// to a message's header or body (zero otherwise): a cheap look, for each frame, at
    /// whether a message has grown large.
    pub fn message_so_far(&self) -> usize {
        self.message_so_far
    }

    /// Gives up the message being assembled, as when it is too large: its data goes, and its
    /// remaining segments are skipped. Returns its command's class and code, if a message was
    /// being assembled.
    pub fn abandon_message(&mut self) -> Option<(u8, u8)> {
        let track = &mut self.tracks[1];
        let Pending::Message {
            class_code, code, ..
        } = &track.pending
        else {
            return None;
        };
        let codes = (*class_code, *code);
        // As after a message too large: the rest of its segments are dropped, and the
        // assembly ends with the last of them.
        if let Some(p) = track.partial.as_mut() {
            p.data = None;
        }
        track.pending = Pending::Skipping;
        Some(codes)
    }

    /// Feeds one frame; returns an item when the frame completes one.
    ///
    /// After a [`AssemblyError::Command`] the assembler stays usable (the failed
    /// command's remaining segments are skipped). After [`AssemblyError::Framing`] the
    /// connection must be closed.
    pub fn push(&mut self, frame: Frame) -> Result<Option<Incoming>, AssemblyError> {
        self.message_so_far = 0;
        let h = frame.header;
        let expected_track = match h.segment_type {
            SegmentType::Control => 0,
            _ => 1,
        };
        if h.track != expected_track {
            return Err(FrameError::Track(h.track).into());
        }
        let max_message_size = self.max_message_size;
        let max_command_size = self.max_command_size;
        let Some(track) = self.tracks.get_mut(usize::from(h.track)) else {
            return Err(FrameError::Track(h.track).into());
        };

        match &track.partial {
            None => {
                if !h.first_frame {
                    return Err(FrameError::FrameOrder("continuation without a first frame").into());
                }
                let discard = start_segment(
                    &track.pending,
                    h.segment_type,
                    h.first_segment,
                    h.last_segment,
                )?;
                track.partial = Some(Partial {
                    segment_type: h.segment_type,
                    first_segment: h.first_segment,
                    last_segment: h.last_segment,
                    data: (!discard).then(Chunks::default),
                });
            }
            Some(p) => {
                if h.first_frame {
                    return Err(FrameError::FrameOrder("first frame inside a segment").into());
                }
                if p.segment_type != h.segment_type
                    || p.first_segment != h.first_segment
                    || p.last_segment != h.last_segment
                {
                    return Err(FrameError::FrameOrder("segment flags changed mid-segment").into());
                }
            }
        }

        let Some(partial) = track.partial.as_mut() else {
            return Ok(None);
        };
        let mut error = None;
        if let Some(data) = partial.data.as_mut() {
            data.push(frame.payload);
            match partial.segment_type {
                SegmentType::Control | SegmentType::Command => {
                    if data.len() > max_command_size {
                        let what = if partial.segment_type == SegmentType::Control {
                            "control"
                        } else {
                            "command"
                        };
                        return Err(FrameError::SegmentTooLarge {
                            what,
                            limit: max_command_size,
                        }
                        .into());
                    }
                }
                SegmentType::Header | SegmentType::Body => {
                    if let Pending::Message {
                        size,
                        class_code,
                        code,
                        ..
                    } = &track.pending
                    {
                        let total = size + data.len();
                        self.message_so_far = total;
                        if total > max_message_size {
                            error = Some(CommandError {
                                class_code: Some(*class_code),
                                code: Some(*code),
                                error: CommandErrorKind::MessageTooLarge {
                                    size: total,
                                    limit: max_message_size,
                                },
                            });
                            partial.data = None;
                            track.pending = Pending::Skipping;
                        }
                    }
                }
            }
        }

        let done = if h.last_frame {
            track.partial.take()
        } else {
            None
        };
        if let Some(e) = error {
            // The failed command's data was dropped above, so finishing its segment only
            // ends the assembly if the segment was the last: nothing comes of it.
            if let Some(done) = done {
                let _ = finish_segment(track, done);
            }
            return Err(AssemblyError::Command(e));
        }
        // Returned as it comes: holding the result to look at first copied an item of a
        // few hundred bytes on every frame.
        match done {
            Some(done) => finish_segment(track, done),
            None => Ok(None),
        }
    }
}

/// Checks that a segment may start here; returns whether its data is to be discarded.
fn start_segment(
    pending: &Pending,
    segment_type: SegmentType,
    first_segment: bool,
    last_segment: bool,
) -> Result<bool, FrameError> {
    match pending {
        Pending::Idle => {
            if !first_segment {
                return Err(FrameError::SegmentOrder(
                    "assembly must start with a first segment",
                ));
            }
            match segment_type {
                SegmentType::Control if !last_segment => {
                    Err(FrameError::SegmentOrder("a control is a single segment"))
                }
                SegmentType::Control | SegmentType::Command => Ok(false),
                _ => Err(FrameError::SegmentOrder("header or body without a command")),
            }
        }
        Pending::Message { message_header, .. } => {
            check_continuation(
                segment_type,
                first_segment,
                last_segment,
                message_header.is_some(),
            )?;
            Ok(false)
        }
        Pending::Skipping => {
            // Skipped segments still have to be well-formed to find where the assembly ends.
            if first_segment || !matches!(segment_type, SegmentType::Header | SegmentType::Body) {
                return Err(FrameError::SegmentOrder(
                    "new assembly before the last one ended",
                ));
            }
            Ok(true)
        }
    }
}

fn check_continuation(
    segment_type: SegmentType,
    first_segment: bool,
    last_segment: bool,
    have_header: bool,
) -> Result<(), FrameError> {
    if first_segment {
        return Err(FrameError::SegmentOrder(
            "new assembly before the last one ended",
        ));
    }
    match segment_type {
        SegmentType::Header if have_header => {
            Err(FrameError::SegmentOrder("second header segment"))
        }
        SegmentType::Header => Ok(()),
        SegmentType::Body if !last_segment => Err(FrameError::SegmentOrder(
            "body segment must end the assembly",
        )),
        SegmentType::Body => Ok(()),
        _ => Err(FrameError::SegmentOrder(
            "only header and body segments follow a command",
        )),
    }
}

fn finish_segment(track: &mut Track, done: Partial) -> Result<Option<Incoming>, AssemblyError> {
    let Some(data) = done.data else {
        if done.last_segment {
            track.pending = Pending::Idle;
        }
        return Ok(None);
    };
    let payload = data.finish();
    match done.segment_type {
        SegmentType::Control => Control::decode(payload)
            .map(|c| Some(Incoming::Control(c)))
            .map_err(AssemblyError::Control),
        SegmentType::Command => {
            let class_code = payload.first().copied();
            let code = payload.get(1).copied();
            match Command::decode(payload) {
                Ok((header, command)) if done.last_segment => Ok(Some(Incoming::Command {
                    header,
                    command,
                    message_header: None,
                    body: Bytes::new(),
                    body_segment: false,
                })),
                Ok((header, command)) => {
                    track.pending = Pending::Message {
                        header,
                        command,
                        class_code: class_code.unwrap_or_default(),
                        code: code.unwrap_or_default(),
                        message_header: None,
                        size: 0,
                    };
                    Ok(None)
                }
                Err(error) => {
                    if !done.last_segment {
                        track.pending = Pending::Skipping;
                    }
                    Err(command_error(class_code, code, error))
                }
            }
        }
        SegmentType::Header | SegmentType::Body => {
            let body_segment = done.segment_type == SegmentType::Body;
            if !done.last_segment {
                // A header segment with the body to follow: noted in place, since moving the
                // pending command out and back would copy it (some 200 octets) twice a message.
                let Pending::Message {
                    message_header,
                    size,
                    ..
                } = &mut track.pending
                else {
                    return Err(without_command());
                };
                *size += payload.len();
                *message_header = Some(payload);
                return Ok(None);
            }
            let Pending::Message {
                header,
                command,
                message_header,
                ..
            } = std::mem::take(&mut track.pending)
            else {
                return Err(without_command());
            };
            let (message_header, body) = if body_segment {
                (message_header, payload)
            } else {
                (Some(payload), Bytes::new())
            };
            Ok(Some(Incoming::Command {
                header,
                command,
                message_header,
                body,
                body_segment,
            }))
        }
    }
}

/// start_segment admits header and body segments only after a command.
fn without_command() -> AssemblyError {
    FrameError::SegmentOrder("header or body without a command").into()
}

fn command_error(class_code: Option<u8>, code: Option<u8>, error: DecodeError) -> AssemblyError {
    AssemblyError::Command(CommandError {
        class_code,
        code,
        error: CommandErrorKind::Decode(error),
    })
}

#[cfg(test)]
mod tests;
