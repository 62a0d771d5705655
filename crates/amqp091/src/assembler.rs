//! Per-channel reassembly of content: a content-bearing method frame, one
//! header frame, then body frames until `body_size` octets have arrived.

use bytes::Bytes;
use ferry_chunks::Chunks;

use crate::codec::DecodeError;
use crate::frame::{Frame, FrameType};
use crate::method::Method;
use crate::properties::RawContentHeader;
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

/// What a frame completed.
// Messages are the common case; boxing them would add an allocation per
// message to save a memcpy for the rarer plain methods.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum Assembled {
    Method(Method),
    Message(Message),
}

/// A content-bearing method and as much of its content as has come.
struct Pending {
    method: Method,
    /// The content header, once its frame has come (default until then).
    header: RawContentHeader,
    have_header: bool,
    body: Chunks,
}

/// One per channel. Heartbeats belong to channel 0 and are not accepted here.
pub struct ContentAssembler {
    max_body_size: u64,
    /// A method is a few hundred bytes: the message being assembled stays where it is, filled
    /// in place, and moves only once, out, when complete (boxing it would allocate per
    /// message instead).
    pending: Option<Pending>,
}

impl ContentAssembler {
    pub fn new(max_body_size: u64) -> Self {
        ContentAssembler {
            max_body_size,
            pending: None,
        }
    }

    /// True between messages.
    pub fn is_idle(&self) -> bool {
        self.pending.is_none()
    }

    /// Drops a partial message (e.g. when the channel closes).
    pub fn reset(&mut self) {
        self.pending = None;
    }

    /// Feeds one frame of this channel. On error the partial message is
    /// dropped and the assembler is idle again.
    pub fn push(&mut self, frame: Frame) -> Result<Option<Assembled>, AssemblyError> {
        let result = self.step(frame);
        if result.is_err() {
            self.pending = None;
        }
        result
    }

    fn step(&mut self, frame: Frame) -> Result<Option<Assembled>, AssemblyError> {
        let got = frame.frame_type;
        let unexpected = |expecting| AssemblyError::UnexpectedFrame { got, expecting };
        let Some(pending) = &mut self.pending else {
            if got != FrameType::Method {
                return Err(unexpected(Expecting::Method));
            }
            let method = Method::decode(frame.payload)?;
            if !method.has_content() {
                return Ok(Some(Assembled::Method(method)));
            }
            self.pending = Some(Pending {
                method,
                header: RawContentHeader::default(),
                have_header: false,
                body: Chunks::Empty,
            });
            return Ok(None);
        };
        let body_size = match (pending.have_header, got) {
            (false, FrameType::Header) => {
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
                pending.have_header = true;
                if body_size > 0 {
                    return Ok(None);
                }
                body_size
            }
            (false, _) => return Err(unexpected(Expecting::Header)),
            (true, FrameType::Body) => {
                let declared = pending.header.body_size;
                let received = (pending.body.len() + frame.payload.len()) as u64;
                if received > declared {
                    return Err(AssemblyError::BodyOverrun { declared, received });
                }
                pending.body.push(frame.payload);
                if received < declared {
                    return Ok(None);
                }
                declared
            }
            (true, _) => return Err(unexpected(Expecting::Body)),
        };
        debug_assert_eq!(pending.body.len() as u64, body_size);
        Ok(self.pending.take().map(|p| {
            Assembled::Message(Message {
                method: p.method,
                header: p.header,
                body: p.body.finish(),
            })
        }))
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
