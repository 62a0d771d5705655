//! Shared pieces queued ahead of the outbound buffer: a large message body goes out from
//! the buffer it already lives in (one `writev` with the frames around it) instead of
//! being copied into the connection's buffer first.

use std::collections::VecDeque;
use std::io::IoSlice;

use bytes::{Buf, Bytes, BytesMut};

/// Bodies at least this long are spliced rather than copied: below it a copy costs less
/// than the extra piece (its reference count, an iovec, splitting the buffer).
pub const SPLICE_MIN: usize = 8 * 1024;

/// Where a delivery is written: the outbound buffer, and the pieces queued ahead of it.
pub struct Sink<'a> {
    pub out: &'a mut BytesMut,
    pub spliced: &'a mut Spliced,
}

/// What goes out before the connection's outbound buffer, oldest first. Everything here
/// precedes every byte in the buffer.
#[derive(Default)]
pub struct Spliced {
    pieces: VecDeque<Bytes>,
    len: usize,
}

impl Spliced {
    /// Queues `piece` after everything written to `out` so far (which moves here first,
    /// without copying: it is split off the buffer).
    pub fn splice(&mut self, out: &mut BytesMut, piece: Bytes) {
        if !out.is_empty() {
            self.push(out.split().freeze());
        }
        self.push(piece);
    }

    /// Before about `needed` more bytes are written to `out`: if they do not fit in its room
    /// and it holds unsent bytes, those move here (split off, not copied), so that growing
    /// the buffer moves nothing. Growing a buffer that holds unsent bytes copies all of them,
    /// and a consumer that falls behind leaves most of a buffer unsent.
    pub fn make_room(&mut self, out: &mut BytesMut, needed: usize) {
        if out.capacity() - out.len() < needed && !out.is_empty() {
            self.push(out.split().freeze());
        }
    }

    fn push(&mut self, piece: Bytes) {
        if !piece.is_empty() {
            self.len += piece.len();
            self.pieces.push_back(piece);
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The next bytes to send, `out`'s once nothing is spliced.
    #[cfg(test)]
    pub fn front<'a>(&'a self, out: &'a BytesMut) -> &'a [u8] {
        self.pieces.front().map_or(&out[..], |p| &p[..])
    }

    /// Fills `slices` with the pieces and then `out`, in order; returns how many it filled.
    pub fn io_slices<'a>(&'a self, out: &'a BytesMut, slices: &mut [IoSlice<'a>]) -> usize {
        let pieces = self.pieces.iter().map(|p| &p[..]);
        let all = pieces.chain(std::iter::once(&out[..]).filter(|o| !o.is_empty()));
        let mut n = 0;
        for (slot, bytes) in slices.iter_mut().zip(all) {
            *slot = IoSlice::new(bytes);
            n += 1;
        }
        n
    }

    /// `n` bytes went out: the pieces first, then `out`.
    pub fn advance(&mut self, out: &mut BytesMut, mut n: usize) {
        while n > 0 {
            let Some(front) = self.pieces.front_mut() else {
                out.advance(n);
                return;
            };
            let step = n.min(front.len());
            front.advance(step);
            self.len -= step;
            n -= step;
            if front.is_empty() {
                self.pieces.pop_front();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flatten(s: &Spliced, out: &BytesMut) -> Vec<u8> {
        let mut slices = [IoSlice::new(&[]); 8];
        let n = s.io_slices(out, &mut slices);
        slices[..n].iter().flat_map(|s| s.iter().copied()).collect()
    }

    #[test]
    fn pieces_keep_their_place_between_buffered_bytes() {
        let mut s = Spliced::default();
        let mut out = BytesMut::from(&b"head"[..]);
        s.splice(&mut out, Bytes::from_static(b"BODY"));
        out.extend_from_slice(b"tail");
        assert_eq!(flatten(&s, &out), b"headBODYtail");
        assert_eq!((s.len(), s.front(&out)), (8, &b"head"[..]));
    }

    #[test]
    fn unsent_bytes_move_aside_rather_than_being_copied_when_the_buffer_is_full() {
        let mut s = Spliced::default();
        let mut out = BytesMut::with_capacity(16);
        out.extend_from_slice(b"0123456789");
        let before = out.as_ptr();
        s.make_room(&mut out, 4);
        assert_eq!((s.len(), out.len()), (0, 10), "room enough: nothing moves");
        s.make_room(&mut out, 8);
        assert_eq!((s.len(), out.len()), (10, 0));
        assert_eq!(s.front(&out).as_ptr(), before, "split off, not copied");
        out.extend_from_slice(b"abcdefgh");
        assert_eq!(flatten(&s, &out), b"0123456789abcdefgh");
        let mut empty = BytesMut::new();
        s.make_room(&mut empty, 100);
        assert_eq!(s.len(), 10, "an empty buffer has nothing to move");
    }

    #[test]
    fn partial_writes_advance_across_pieces_into_the_buffer() {
        let mut s = Spliced::default();
        let mut out = BytesMut::from(&b"ab"[..]);
        s.splice(&mut out, Bytes::from_static(b"CDE"));
        s.splice(&mut out, Bytes::new());
        out.extend_from_slice(b"fg");
        s.advance(&mut out, 3);
        assert_eq!(flatten(&s, &out), b"DEfg");
        s.advance(&mut out, 3);
        assert!(s.is_empty());
        assert_eq!(flatten(&s, &out), b"g");
        assert_eq!(s.front(&out), b"g");
    }
}
