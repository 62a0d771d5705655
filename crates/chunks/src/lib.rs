//! How a payload that arrives in several frames becomes one buffer: the one strategy both
//! AMQP codecs use for message bodies (and 0-10 for every segment).
//!
//! Frames are kept as received (slices of the read buffer, no copy) and joined once, when
//! the payload is complete, into an allocation of exactly its final size. Growing one buffer
//! as frames arrive would copy repeatedly and could leave up to twice the payload's size
//! allocated for as long as the message lives in a queue; reserving what a header announces
//! would let a peer make us allocate what it never sends. A payload that arrived in one
//! frame stays that frame's slice; small parts of a longer one are copied as they come
//! ([`SMALL_PART`]), so that what a payload holds stays near what it counts.
//!
//! The read buffers those frames are cut from make room with [`reserve_unread`], used by
//! every codec and by the server's read loop.

use bytes::{Bytes, BytesMut};

#[derive(Debug, Default)]
pub enum Chunks {
    #[default]
    Empty,
    One(Bytes),
    /// Boxed: every segment and body starts as a `Chunks`, most stay one part, and moving
    /// them about costs by the size of the largest variant.
    Many(Box<Parts>),
}

#[derive(Debug, Default)]
pub struct Parts {
    /// Large parts as received; the payload is these, then `small`.
    parts: Vec<Bytes>,
    /// The small parts since the last large one, copied.
    small: BytesMut,
    len: usize,
}

/// Parts of a payload shorter than this are copied as they arrive rather than kept as
/// slices, once the payload has more than one part. A slice keeps its whole read buffer
/// (up to [`FRESH_READ_BUFFER`]) allocated: a peer sending a message an octet at a time,
/// with other traffic between, would hold a read buffer per octet counted against the
/// message's size, and each slice costs its handle besides. Kept parts are at least this
/// long, so what they hold is at most a small multiple of what they count. Full frames of
/// every protocol (64 KiB and up) stay slices; a message in one frame is never copied.
pub const SMALL_PART: usize = 32 * 1024;

impl Chunks {
    /// Octets received so far.
    pub fn len(&self) -> usize {
        match self {
            Chunks::Empty => 0,
            Chunks::One(b) => b.len(),
            Chunks::Many(many) => many.len,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn push(&mut self, b: Bytes) {
        if b.is_empty() {
            return;
        }
        // In place: this runs for every segment and body frame, and taking the whole value
        // out and writing it back cost more than the rest of it.
        match self {
            // Written over without a drop: an Empty owns nothing, and the drop glue of a
            // Chunks (which a Many needs) is not worth a call on every segment.
            Chunks::Empty => std::mem::forget(std::mem::replace(self, Chunks::One(b))),
            Chunks::One(first) => {
                let first = std::mem::take(first);
                let mut many = Box::<Parts>::default();
                many.push(first);
                many.push(b);
                *self = Chunks::Many(many);
            }
            Chunks::Many(many) => many.push(b),
        }
    }

    /// The whole payload, in an allocation of exactly its size when it came in parts.
    pub fn finish(self) -> Bytes {
        match self {
            Chunks::Empty => Bytes::new(),
            Chunks::One(b) => b,
            Chunks::Many(many) => {
                let Parts { parts, small, len } = *many;
                if parts.is_empty() && small.capacity() == len {
                    return small.freeze();
                }
                let mut joined = BytesMut::with_capacity(len);
                for part in &parts {
                    joined.extend_from_slice(part);
                }
                joined.extend_from_slice(&small);
                joined.freeze()
            }
        }
    }
}

impl Parts {
    fn push(&mut self, b: Bytes) {
        self.len += b.len();
        if b.len() < SMALL_PART {
            self.small.extend_from_slice(&b);
            return;
        }
        if !self.small.is_empty() {
            self.parts.push(self.small.split().freeze());
        }
        self.parts.push(b);
    }
}

/// The least a read buffer is given when it has to move: a connection's batch of reads
/// (its driver reads at most this much before processing it), so that a connection whose
/// frames keep its buffer (large bodies are kept as slices of it) moves a partial frame to
/// a new buffer once per batch rather than once or twice per frame.
pub const FRESH_READ_BUFFER: usize = 256 * 1024;

/// Makes room for `additional` more octets at the end of a read buffer, copying at most the
/// octets still unread in it.
///
/// `BytesMut::reserve` reuses the allocation when it can. When it cannot, and every frame
/// split off it earlier has been dropped, it grows that allocation with `realloc`, which
/// copies everything the buffer ever held: the octets already consumed as well as the few
/// still unread. A connection carrying 32 KiB messages over AMQP 1.0 spent more of its time
/// in those copies than in anything else; here the unread octets move to a fresh buffer
/// instead.
pub fn reserve_unread(buf: &mut BytesMut, additional: usize) {
    if buf.try_reclaim(additional) {
        return;
    }
    let needed = buf.len().saturating_add(additional);
    let mut fresh = BytesMut::with_capacity(needed.max(FRESH_READ_BUFFER));
    fresh.extend_from_slice(buf);
    *buf = fresh;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Counts this thread's `realloc` calls: growing an allocation in place is what copies
    /// the octets consumed before the unread ones.
    mod counting {
        use std::alloc::{GlobalAlloc, Layout, System};
        use std::cell::Cell;

        pub struct Counting;

        thread_local! {
            pub static REALLOCS: Cell<usize> = const { Cell::new(0) };
        }

        // SAFETY: every call is passed straight to `System`.
        unsafe impl GlobalAlloc for Counting {
            unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
                unsafe { System.alloc(layout) }
            }
            unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
                unsafe { System.dealloc(ptr, layout) }
            }
            unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
                REALLOCS.with(|n| n.set(n.get() + 1));
                unsafe { System.realloc(ptr, layout, new_size) }
            }
        }

        #[global_allocator]
        static ALLOCATOR: Counting = Counting;
    }

    #[test]
    fn room_for_more_keeps_the_unread_octets_and_not_the_consumed_ones() {
        for keep_split in [false, true] {
            let mut buf = BytesMut::with_capacity(64);
            buf.extend_from_slice(&[7u8; 60]);
            buf.extend_from_slice(b"rest");
            let consumed = buf.split_to(60).freeze();
            // Dropped at once unless kept: the buffer is then its allocation's only owner,
            // the case `BytesMut::reserve` grows with `realloc`.
            let held = keep_split.then_some(consumed);
            let before = counting::REALLOCS.with(|n| n.get());
            reserve_unread(&mut buf, 100);
            let reallocs = counting::REALLOCS.with(|n| n.get()) - before;
            assert_eq!(reallocs, 0, "the consumed octets were not copied along");
            assert_eq!(&buf[..], b"rest");
            assert!(
                buf.capacity() >= FRESH_READ_BUFFER,
                "room for a batch of reads"
            );
            if let Some(held) = held {
                assert_eq!(&held[..], &[7u8; 60][..], "what was split off is untouched");
            }
        }
    }

    #[test]
    fn room_that_is_there_is_reused() {
        let mut buf = BytesMut::with_capacity(256);
        buf.extend_from_slice(b"abc");
        let at = buf.as_ptr();
        reserve_unread(&mut buf, 100);
        assert_eq!(buf.as_ptr(), at);
        assert_eq!(&buf[..], b"abc");
    }

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
    fn small_parts_are_copied_and_large_ones_kept_in_order() {
        // A read buffer holding one octet of the message among other traffic: once copied,
        // the buffer is not kept alive by the message.
        let buffer = Bytes::from(vec![9u8; 200_000]);
        let large = Bytes::from(vec![5u8; SMALL_PART]);
        let mut c = Chunks::default();
        c.push(Bytes::from_static(b"a"));
        c.push(buffer.slice(10..11));
        c.push(large.clone());
        c.push(buffer.slice(20..22));
        assert_eq!(c.len(), 1 + 1 + SMALL_PART + 2);
        let Chunks::Many(many) = &c else {
            panic!("{c:?}");
        };
        let Parts { parts, small, .. } = &**many;
        assert_eq!(parts.len(), 2, "the first small parts, then the large one");
        assert_eq!(parts[0][..], b"a\x09"[..]);
        assert_eq!(
            parts[1].as_ptr(),
            large.as_ptr(),
            "a large part is not copied"
        );
        assert_eq!(small[..], [9u8, 9][..]);
        let mut expected = b"a\x09".to_vec();
        expected.extend_from_slice(&large);
        expected.extend_from_slice(&[9, 9]);
        assert_eq!(c.finish()[..], expected[..]);
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
