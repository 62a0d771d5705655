//! How a payload that arrives in several frames becomes one buffer: the one strategy both
//! AMQP codecs use for message bodies (and 0-10 for every segment).
//!
//! Frames are kept as received (slices of the read buffer, no copy) and joined once, when
//! the payload is complete, into an allocation of exactly its final size. Growing one buffer
//! as frames arrive would copy repeatedly and could leave up to twice the payload's size
//! allocated for as long as the message lives in a queue; reserving what a header announces
//! would let a peer make us allocate what it never sends. A payload that arrived in one
//! frame stays that frame's slice.

use bytes::{Bytes, BytesMut};

#[derive(Debug, Default)]
pub enum Chunks {
    #[default]
    Empty,
    One(Bytes),
    Many {
        parts: Vec<Bytes>,
        len: usize,
    },
}

impl Chunks {
    /// Octets received so far.
    pub fn len(&self) -> usize {
        match self {
            Chunks::Empty => 0,
            Chunks::One(b) => b.len(),
            Chunks::Many { len, .. } => *len,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn push(&mut self, b: Bytes) {
        if b.is_empty() {
            return;
        }
        *self = match std::mem::take(self) {
            Chunks::Empty => Chunks::One(b),
            Chunks::One(first) => Chunks::Many {
                len: first.len() + b.len(),
                parts: vec![first, b],
            },
            Chunks::Many { mut parts, len } => {
                let len = len + b.len();
                parts.push(b);
                Chunks::Many { parts, len }
            }
        };
    }

    /// The whole payload.
    pub fn finish(self) -> Bytes {
        match self {
            Chunks::Empty => Bytes::new(),
            Chunks::One(b) => b,
            Chunks::Many { parts, len } => {
                let mut joined = BytesMut::with_capacity(len);
                for part in &parts {
                    joined.extend_from_slice(part);
                }
                joined.freeze()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_part_stays_the_same_slice() {
        let frame = Bytes::from_static(b"whole body");
        let mut c = Chunks::default();
        c.push(Bytes::new());
        c.push(frame.clone());
        assert_eq!(c.len(), 10);
        let body = c.finish();
        assert_eq!(body.as_ptr(), frame.as_ptr(), "no copy for one frame");
    }

    #[test]
    fn many_parts_join_into_exactly_their_size() {
        let mut c = Chunks::default();
        for part in ["ab", "", "cde", "f"] {
            c.push(Bytes::from_static(part.as_bytes()));
        }
        assert_eq!(c.len(), 6);
        let body = c.finish();
        assert_eq!(&body[..], b"abcdef");
        assert!(Chunks::default().finish().is_empty());
    }
}
