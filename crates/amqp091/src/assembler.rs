//! Per-channel reassembly of content: a content-bearing method frame, one
//! header frame, then body frames until `body_size` octets have arrived.

use bytes::Bytes;
use ferry_chunks::Chunks;

use crate::codec::DecodeError;
use crate::frame::{Frame, FrameType};
use crate::method::{BasicPublish, Method};
use crate::properties::{RawContentHeader, RawProperties};
use crate::reply;

/// What the assembler was waiting for when a frame arrived out of turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expecting {
    Method,
    Header,
    Body,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AssemblyError {
    #[error(transparent)]
    Decode(#[from] DecodeError),
    #[error("{got:?} frame while expecting a {expecting:?} frame")]
    UnexpectedFrame {
        got: FrameType,
        expecting: Expecting,
    },
    #[error("message body of {size} octets exceeds the {max}-octet limit")]
    TooLarge { size: u64, max: u64 },
    #[error("body frames carry {received} octets, the header announced {declared}")]
    BodyOverrun { declared: u64, received: u64 },
}

impl AssemblyError {
    /// `TooLarge` is a channel error (the spec's content-too-large; RabbitMQ
    /// answers its own size limit with 406 precondition-failed); the rest
    /// close the connection.
    pub fn reply_code(&self) -> u16 {
        match self {
            AssemblyError::Decode(e) => e.reply_code(),
            AssemblyError::TooLarge { .. } => reply::CONTENT_TOO_LARGE,
            AssemblyError::UnexpectedFrame { .. } | AssemblyError::BodyOverrun { .. } => {
                reply::UNEXPECTED_FRAME
            }
        }
    }
}

/// A complete message: its method, header (properties still encoded, as a broker passes
/// them on; [`crate::RawProperties::decode`] for the values) and body.
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    pub method: Method,
    pub header: RawContentHeader,
    pub body: Bytes,
}

/// A basic.publish and its content, as a broker takes it.
#[derive(Debug, Clone, PartialEq)]
pub struct Publication {
    pub method: BasicPublish,
    pub properties: RawProperties,
    pub body: Bytes,
}

/// A complete message as a broker takes it: a publish, or content that came with another
/// method (basic.deliver, get-ok or return: the server's to send, not a client's).
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum Content {
    Publish(Publication),
    Other(Method),
}

/// What a frame completed.
// Messages are the common case; boxing them would add an allocation per
// message to save a memcpy for the rarer plain methods.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum Assembled {
    Method(Method),
    Message(Message),
}

/// What [`ContentAssembler::feed`] made of a frame. What a frame completes stays in the
/// assembler until taken ([`ContentAssembler::take_method`], [`ContentAssembler::take_message`],
/// [`ContentAssembler::take_content`]), so that a message of a few hundred bytes is not moved
/// through every return between the frame and its use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AssemblyProgress {
    /// More frames to come.
    Incomplete,
    /// A method without content is ready.
    MethodReady,
    /// A message is ready.
    MessageReady,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    Header,
    Body,
}

/// A content-bearing method and as much of its content as has come, or all of it.
struct Pending {
    method: Method,
    /// The content header, once its frame has come (default until then).
    header: RawContentHeader,
    stage: Stage,
    body: Chunks,
    /// All of it came: the message waits to be taken.
    complete: bool,
}

/// What the assembler holds between frames: nothing, or what it has of a method or message.
enum Slot {
    Idle,
    /// A method without content, not yet taken.
    Method(Method),
    /// A message being assembled, or complete and not yet taken.
    Content(Pending),
}

/// One per channel. Heartbeats belong to channel 0 and are not accepted here.
pub struct ContentAssembler {
    max_body_size: u64,
    /// The message being assembled stays here, filled in place, until it is taken (boxing
    /// it would allocate per message instead); a broker takes its parts out where they lie.
    slot: Slot,
}

impl ContentAssembler {
    pub fn new(max_body_size: u64) -> Self {
        ContentAssembler {
            max_body_size,
            slot: Slot::Idle,
        }
    }

    /// True between messages (a complete one waiting to be taken counts as between).
    pub fn is_idle(&self) -> bool {
        !matches!(&self.slot, Slot::Content(p) if !p.complete)
    }

    /// The body size a message being assembled announced, once its header has come: what
    /// it will hold when it is complete. Zero otherwise.
    pub fn unfinished_body(&self) -> u64 {
        match &self.slot {
            Slot::Content(p) if !p.complete && p.stage == Stage::Body => p.header.body_size,
            _ => 0,
        }
    }

    /// Drops a partial message (e.g. when the channel closes).
    pub fn reset(&mut self) {
        self.slot = Slot::Idle;
    }

    /// Feeds one frame of this channel and hands back what it completed. On error the
    /// partial message is dropped and the assembler is idle again.
    pub fn push(&mut self, frame: Frame) -> Result<Option<Assembled>, AssemblyError> {
        Ok(match self.feed(frame)? {
            AssemblyProgress::Incomplete => None,
            AssemblyProgress::MethodReady => self.take_method().map(Assembled::Method),
            AssemblyProgress::MessageReady => self.take_message().map(Assembled::Message),
        })
    }

    /// Feeds one frame of this channel; what it completes stays here until taken (a piece
    /// not taken is dropped by the next frame). On error the partial message is dropped
    /// and the assembler is idle again.
    pub fn feed(&mut self, frame: Frame) -> Result<AssemblyProgress, AssemblyError> {
        let result = self.step(frame);
        if result.is_err() {
            self.slot = Slot::Idle;
        }
        result
    }

    /// The method the last frame completed, if it had no content.
    pub fn take_method(&mut self) -> Option<Method> {
        match std::mem::replace(&mut self.slot, Slot::Idle) {
            Slot::Method(m) => Some(m),
            other => {
                self.slot = other;
                None
            }
        }
    }

    /// The message the last frame completed.
    pub fn take_message(&mut self) -> Option<Message> {
        match std::mem::replace(&mut self.slot, Slot::Idle) {
            Slot::Content(p) if p.complete => Some(Message {
                method: p.method,
                header: p.header,
                body: p.body.finish(),
            }),
            other => {
                self.slot = other;
                None
            }
        }
    }

    /// The message the last frame completed, as a broker takes it. A publish's parts are
    /// taken out where they lie: moving the whole message out first would copy it again.
    pub fn take_content(&mut self) -> Option<Content> {
        let Slot::Content(p) = &mut self.slot else {
            return None;
        };
        if !p.complete {
            return None;
        }
        let Method::BasicPublish(method) = &mut p.method else {
            return match std::mem::replace(&mut self.slot, Slot::Idle) {
                Slot::Content(p) => Some(Content::Other(p.method)),
                other => {
                    self.slot = other;
                    None
                }
            };
        };
        let publication = Publication {
            method: std::mem::take(method),
            properties: std::mem::take(&mut p.header.properties),
            body: std::mem::take(&mut p.body).finish(),
        };
        // Dropped in place: what is left is a few empty fields.
        self.slot = Slot::Idle;
        Some(Content::Publish(publication))
    }

    fn step(&mut self, frame: Frame) -> Result<AssemblyProgress, AssemblyError> {
        let got = frame.frame_type;
        let unexpected = |expecting| AssemblyError::UnexpectedFrame { got, expecting };
        let pending = match &mut self.slot {
            Slot::Content(p) if !p.complete => p,
            _ => return self.start(frame),
        };
        match (pending.stage, got) {
            (Stage::Header, FrameType::Header) => {
                // Decoding accepts only the basic class, the class of every
                // content-bearing method, so header and method always agree.
                let header = RawContentHeader::decode(frame.payload)?;
                if header.body_size > self.max_body_size {
                    return Err(AssemblyError::TooLarge {
                        size: header.body_size,
                        max: self.max_body_size,
                    });
                }
                let body_size = header.body_size;
                pending.header = header;
                if body_size > 0 {
                    pending.stage = Stage::Body;
                    return Ok(AssemblyProgress::Incomplete);
                }
            }
            (Stage::Header, _) => return Err(unexpected(Expecting::Header)),
            (Stage::Body, FrameType::Body) => {
                let declared = pending.header.body_size;
                let received = (pending.body.len() + frame.payload.len()) as u64;
                if received > declared {
                    return Err(AssemblyError::BodyOverrun { declared, received });
                }
                pending.body.push(frame.payload);
                if received < declared {
                    return Ok(AssemblyProgress::Incomplete);
                }
            }
            (Stage::Body, _) => return Err(unexpected(Expecting::Body)),
        }
        debug_assert_eq!(pending.body.len() as u64, pending.header.body_size);
        pending.complete = true;
        Ok(AssemblyProgress::MessageReady)
    }

    /// A frame between messages: it must be a method. Whatever was not taken goes.
    fn start(&mut self, frame: Frame) -> Result<AssemblyProgress, AssemblyError> {
        if frame.frame_type != FrameType::Method {
            return Err(AssemblyError::UnexpectedFrame {
                got: frame.frame_type,
                expecting: Expecting::Method,
            });
        }
        let method = Method::decode(frame.payload)?;
        if !method.has_content() {
            self.slot = Slot::Method(method);
            return Ok(AssemblyProgress::MethodReady);
        }
        self.slot = Slot::Content(Pending {
            method,
            header: RawContentHeader::default(),
            stage: Stage::Header,
            body: Chunks::Empty,
            complete: false,
        });
        Ok(AssemblyProgress::Incomplete)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::{decode_frame, write_content, write_method};
    use crate::method::{BasicAck, BasicPublish};
    use crate::properties::BasicProperties;
    use crate::strings::ShortStr;
    use bytes::BytesMut;

    fn publish() -> Method {
        Method::BasicPublish(BasicPublish {
            routing_key: ShortStr::from_static("q"),
            ..Default::default()
        })
    }

    fn frames(out: &mut BytesMut) -> Vec<Frame> {
        let mut v = Vec::new();
        while let Some(f) = decode_frame(out, 4096).unwrap() {
            v.push(f);
        }
        v
    }

    fn content(body: &[u8]) -> Vec<Frame> {
        let mut out = BytesMut::new();
        let props = BasicProperties {
            priority: Some(3),
            ..Default::default()
        };
        write_content(&mut out, 1, &publish(), &props, body, 4096);
        frames(&mut out)
    }

    fn feed(a: &mut ContentAssembler, fs: Vec<Frame>) -> Vec<Assembled> {
        let mut done = Vec::new();
        for f in fs {
            if let Some(x) = a.push(f).unwrap() {
                done.push(x);
            }
        }
        done
    }

    #[test]
    fn non_content_methods_pass_straight_through() {
        let mut out = BytesMut::new();
        let ack = Method::BasicAck(BasicAck {
            delivery_tag: 9,
            multiple: true,
        });
        write_method(&mut out, 1, &ack);
        let mut a = ContentAssembler::new(1 << 20);
        assert_eq!(feed(&mut a, frames(&mut out)), [Assembled::Method(ack)]);
    }

    #[test]
    fn single_frame_body_is_zero_copy() {
        let fs = content(b"hello");
        assert_eq!(fs.len(), 3);
        let body_ptr = fs[2].payload.as_ptr();
        let mut a = ContentAssembler::new(1 << 20);
        let done = feed(&mut a, fs);
        let [Assembled::Message(m)] = &done[..] else {
            panic!("expected one message, got {done:?}");
        };
        assert_eq!(m.method, publish());
        assert_eq!(m.header.body_size, 5);
        assert_eq!(m.header.properties.summary().priority, Some(3));
        assert_eq!(&m.body[..], b"hello");
        assert_eq!(m.body.as_ptr(), body_ptr);
        assert!(a.is_idle());
    }

    #[test]
    fn multi_frame_and_empty_bodies() {
        let big: Vec<u8> = (0..10_000u32).map(|i| i as u8).collect();
        let fs = content(&big);
        assert_eq!(fs.len(), 2 + 3);
        let mut a = ContentAssembler::new(1 << 20);
        let done = feed(&mut a, fs);
        let [Assembled::Message(m)] = &done[..] else {
            panic!("expected one message");
        };
        assert_eq!(&m.body[..], &big[..]);

        let done = feed(&mut a, content(b""));
        let [Assembled::Message(m)] = &done[..] else {
            panic!("expected one message");
        };
        assert!(m.body.is_empty());
    }

    #[test]
    fn a_publication_is_taken_where_it_was_assembled() {
        let fs = content(b"hello");
        let body_ptr = fs[2].payload.as_ptr();
        let mut a = ContentAssembler::new(1 << 20);
        let mut progress = Vec::new();
        for f in fs {
            progress.push(a.feed(f).unwrap());
        }
        use AssemblyProgress::{Incomplete, MessageReady};
        assert_eq!(progress, [Incomplete, Incomplete, MessageReady]);
        assert!(a.is_idle());
        assert_eq!(a.take_method(), None);
        let Some(Content::Publish(p)) = a.take_content() else {
            panic!("a publish to take");
        };
        assert_eq!(Method::BasicPublish(p.method), publish());
        assert_eq!(p.properties.summary().priority, Some(3));
        assert_eq!(&p.body[..], b"hello");
        assert_eq!(p.body.as_ptr(), body_ptr);
        // Taken once: nothing is left to take.
        assert_eq!(a.take_content(), None);
        assert_eq!(a.take_message(), None);
    }

    #[test]
    fn taking_before_the_end_takes_nothing_and_leaves_the_message_assembling() {
        let big: Vec<u8> = (0..10_000u32).map(|i| i as u8).collect();
        let fs = content(&big);
        let mut a = ContentAssembler::new(1 << 20);
        for f in &fs[..fs.len() - 1] {
            assert_eq!(a.feed(f.clone()), Ok(AssemblyProgress::Incomplete));
            assert_eq!(a.take_content(), None);
            assert_eq!(a.take_message(), None);
            assert_eq!(a.take_method(), None);
            assert!(!a.is_idle());
        }
        let last = fs.last().expect("frames").clone();
        assert_eq!(a.feed(last), Ok(AssemblyProgress::MessageReady));
        assert!(
            a.is_idle(),
            "a complete message waiting to be taken is between messages"
        );
        let m = a.take_message().expect("the message");
        assert_eq!(&m.body[..], &big[..]);
    }

    #[test]
    fn content_with_a_method_other_than_publish_is_handed_back_whole() {
        let deliver = Method::BasicDeliver(crate::method::BasicDeliver {
            delivery_tag: 7,
            ..Default::default()
        });
        let mut out = BytesMut::new();
        write_content(
            &mut out,
            1,
            &deliver,
            &BasicProperties::default(),
            b"x",
            4096,
        );
        let mut a = ContentAssembler::new(1 << 20);
        let mut last = None;
        for f in frames(&mut out) {
            last = Some(a.feed(f).unwrap());
        }
        assert_eq!(last, Some(AssemblyProgress::MessageReady));
        assert_eq!(a.take_content(), Some(Content::Other(deliver)));
        assert_eq!(a.take_content(), None);
    }

    #[test]
    fn a_piece_not_taken_gives_way_to_the_next_frame() {
        let mut a = ContentAssembler::new(1 << 20);
        for f in content(b"first") {
            a.feed(f).unwrap();
        }
        let mut out = BytesMut::new();
        let ack = Method::BasicAck(BasicAck {
            delivery_tag: 1,
            multiple: false,
        });
        write_method(&mut out, 1, &ack);
        let fs = frames(&mut out);
        assert_eq!(a.feed(fs[0].clone()), Ok(AssemblyProgress::MethodReady));
        assert_eq!(a.take_message(), None);
        assert_eq!(a.take_method(), Some(ack));
        assert_eq!(a.take_method(), None);
        // An untaken method, then a message: the message is what is there to take.
        a.feed(fs[0].clone()).unwrap();
        assert_eq!(feed(&mut a, content(b"second")).len(), 1);
        // A header or body frame after a completed message is out of turn.
        let again = content(b"third");
        for f in &again[..2] {
            a.feed(f.clone()).unwrap();
        }
        a.feed(again[2].clone()).unwrap();
        assert!(matches!(
            a.feed(again[2].clone()),
            Err(AssemblyError::UnexpectedFrame {
                expecting: Expecting::Method,
                ..
            })
        ));
        assert_eq!(a.take_message(), None, "an error leaves the assembler idle");
    }

    #[test]
    fn size_limit_is_enforced_at_the_header() {
        let mut a = ContentAssembler::new(4);
        let mut fs = content(b"hello").into_iter();
        assert_eq!(a.push(fs.next().unwrap()), Ok(None));
        let err = a.push(fs.next().unwrap()).unwrap_err();
        assert_eq!(err, AssemblyError::TooLarge { size: 5, max: 4 });
        assert_eq!(err.reply_code(), 311);
        assert!(a.is_idle());
    }

    #[test]
    fn out_of_order_frames_are_unexpected() {
        let fs = content(b"hello");
        let mut a = ContentAssembler::new(1 << 20);
        // Header or body with no method before it.
        for f in [&fs[1], &fs[2]] {
            let err = a.push(f.clone()).unwrap_err();
            assert!(matches!(
                err,
                AssemblyError::UnexpectedFrame {
                    expecting: Expecting::Method,
                    ..
                }
            ));
            assert_eq!(err.reply_code(), 505);
        }
        // A method (or body) where the header belongs.
        a.push(fs[0].clone()).unwrap();
        assert!(matches!(
            a.push(fs[0].clone()),
            Err(AssemblyError::UnexpectedFrame {
                expecting: Expecting::Header,
                ..
            })
        ));
        // A method in the middle of a body.
        let big = content(&[0; 5000]);
        a.push(big[0].clone()).unwrap();
        a.push(big[1].clone()).unwrap();
        a.push(big[2].clone()).unwrap();
        assert!(matches!(
            a.push(fs[0].clone()),
            Err(AssemblyError::UnexpectedFrame {
                expecting: Expecting::Body,
                ..
            })
        ));
        // And the assembler recovers afterwards.
        assert_eq!(feed(&mut a, fs).len(), 1);
    }

    #[test]
    fn body_longer_than_announced_is_an_error() {
        let mut fs = content(b"hello");
        let mut a = ContentAssembler::new(1 << 20);
        fs[2].payload = Bytes::from_static(b"hello!");
        a.push(fs[0].clone()).unwrap();
        a.push(fs[1].clone()).unwrap();
        assert_eq!(
            a.push(fs[2].clone()),
            Err(AssemblyError::BodyOverrun {
                declared: 5,
                received: 6
            })
        );
    }

    #[test]
    fn heartbeat_is_not_a_channel_frame() {
        let mut a = ContentAssembler::new(1);
        let hb = Frame {
            frame_type: FrameType::Heartbeat,
            channel: 0,
            payload: Bytes::new(),
        };
        assert!(a.push(hb).is_err());
    }

    #[test]
    fn undecodable_method_is_a_decode_error() {
        let mut a = ContentAssembler::new(1);
        let f = Frame {
            frame_type: FrameType::Method,
            channel: 1,
            payload: Bytes::from_static(&[0, 99, 0, 1]),
        };
        let err = a.push(f).unwrap_err();
        assert_eq!(err, AssemblyError::Decode(DecodeError::UnknownClass(99)));
        assert_eq!(err.reply_code(), 540);
    }
}
