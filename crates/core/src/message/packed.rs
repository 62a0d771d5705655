//! The single allocation a message lives in: a 24-byte head, the 8-byte trailers its flags
//! announce, then the content bytes.
//!
//! A deep queue holds millions of messages, so what one costs beyond its content matters
//! (issue 15's budget: 64 B with the queue's own entry). `Arc<struct>` with a `Bytes` per
//! part cost some 300 B: two reference counts, four 32-byte `Bytes` handles, an expiry, a
//! store id and more in every message, and small messages kept the 64 KiB read buffer they
//! arrived in alive. Here a message is one pointer; the count is 4 bytes; lengths stand in for
//! handles; fields most messages lack live in trailers or in an [`Ext`] box only messages that
//! have them pay for; and small content is copied in, so no buffer is pinned.
//!
//! This is the crate's only `unsafe` code. It owns the layout; `super` decides what goes where.

use std::alloc::{self, Layout};
use std::mem::size_of;
use std::ptr::{self, NonNull};
use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};

use super::Ext;

/// Bits of [`Head::flags`].
pub(super) mod flag {
    pub const PERSISTENT: u16 = 1 << 0;
    pub const BODY_SEGMENT: u16 = 1 << 1;
    /// Two bits: which protocol's header the content holds (`super::KIND_*`).
    pub const KIND_SHIFT: u16 = 2;
    pub const KIND_MASK: u16 = 3 << KIND_SHIFT;
    /// The routing key is copied at the start of the content (else it lies inside the
    /// header at `rk_at`, or in the [`super::Ext`] with `RK_EXT`).
    pub const RK_EXTRA: u16 = 1 << 4;
    /// The exchange name is copied after an extra routing key (else inside the header at
    /// `ex_at`, or in the `Ext` with `EX_EXT`).
    pub const EX_EXTRA: u16 = 1 << 5;
    pub const RK_EXT: u16 = 1 << 6;
    pub const EX_EXT: u16 = 1 << 7;
    pub const HEADER_EXT: u16 = 1 << 8;
    pub const BODY_EXT: u16 = 1 << 9;
    /// Trailer: a pointer to a boxed [`super::Ext`].
    pub const HAS_EXT: u16 = 1 << 10;
    /// Trailer: the store id slot (an `AtomicU64`, 0 while unset).
    pub const STORED: u16 = 1 << 11;
    /// Trailer: the expiry, in milliseconds since the epoch.
    pub const EXPIRES: u16 = 1 << 12;
    /// The publisher id did not fit `Head::publisher`; the `Ext` has it.
    pub const PUBLISHER_EXT: u16 = 1 << 13;
    /// The size counted against limits is not header + body; the `Ext` has it.
    pub const SIZE_EXT: u16 = 1 << 14;
    /// The size counted is header + body + 1, kept without an `Ext`: a 0-10 header that
    /// leaves out the default exchange's name, whose field qpidd counts (one octet). The
    /// top bit, so that `size` adds it without a branch.
    pub const SIZE_PLUS_ONE: u16 = 1 << 15;
    /// What `Packed::new` sets from its arguments; a caller's own bits for these are ignored.
    pub const TRAILERS: u16 = HAS_EXT | STORED | EXPIRES;
}

/// 24 bytes, so that a 256-byte message with a 16-byte header costs a 304-byte malloc chunk.
#[repr(C)]
pub(super) struct Head {
    refs: AtomicU32,
    pub(super) body_len: u32,
    pub(super) header_len: u32,
    /// The publishing connection, when it fits (ids count up from 1); see `PUBLISHER_EXT`.
    pub(super) publisher: u32,
    pub(super) flags: u16,
    pub(super) rk_len: u16,
    pub(super) ex_len: u8,
    /// Offsets inside the header of a routing key or exchange name that were not copied.
    pub(super) rk_at: u8,
    pub(super) ex_at: u8,
    pub(super) priority: u8,
}

const HEAD: usize = size_of::<Head>();
const TRAILER: usize = 8;
const ALIGN: usize = 8;
/// Past this many references a count could wrap; as with `Arc`, that is a leak gone mad.
const MAX_REFS: u32 = i32::MAX as u32;

const _: () = assert!(HEAD == 24 && HEAD % ALIGN == 0);
const _: () = assert!(size_of::<*mut Ext>() == TRAILER);

/// The head's fields as a builder sets them.
pub(super) struct HeadFields {
    pub body_len: u32,
    pub header_len: u32,
    pub publisher: u32,
    pub flags: u16,
    pub rk_len: u16,
    pub ex_len: u8,
    pub rk_at: u8,
    pub ex_at: u8,
    pub priority: u8,
}

/// A counted reference to one message allocation.
pub(super) struct Packed(NonNull<Head>);

// SAFETY: the content bytes and the head (but for its atomics) are never written after
// `Packed::new` returns; the count and the store slot are atomics; `Ext` is `Send + Sync`.
unsafe impl Send for Packed {}
unsafe impl Sync for Packed {}

const fn assert_send_sync<T: Send + Sync>() {}
const _: () = assert_send_sync::<Ext>();

fn trailers(flags: u16) -> usize {
    (flags & flag::TRAILERS).count_ones() as usize * TRAILER
}

/// How many content bytes follow the trailers, from the head alone.
fn content_len(h: &Head) -> usize {
    let f = h.flags;
    let mut n = 0;
    if f & flag::RK_EXTRA != 0 {
        n += usize::from(h.rk_len);
    }
    if f & flag::EX_EXTRA != 0 {
        n += usize::from(h.ex_len);
    }
    if f & flag::HEADER_EXT == 0 {
        n += h.header_len as usize;
    }
    if f & flag::BODY_EXT == 0 {
        n += h.body_len as usize;
    }
    n
}

fn layout(total: usize) -> Layout {
    match Layout::from_size_align(total, ALIGN) {
        Ok(l) => l,
        // The parts are slices already in memory; together they cannot come near isize::MAX.
        Err(_) => panic!("message of {total} bytes"),
    }
}

impl Packed {
    /// One allocation with `fields`, the trailers given, and `parts` concatenated as the
    /// content. The parts' lengths must agree with `fields` (see `content_len`).
    pub(super) fn new(
        mut fields: HeadFields,
        ext: Option<Box<Ext>>,
        stored: Option<u64>,
        expires: Option<u64>,
        parts: [&[u8]; 4],
    ) -> Packed {
        fields.flags &= !flag::TRAILERS;
        if ext.is_some() {
            fields.flags |= flag::HAS_EXT;
        }
        if stored.is_some() {
            fields.flags |= flag::STORED;
        }
        if expires.is_some() {
            fields.flags |= flag::EXPIRES;
        }
        let head = Head {
            refs: AtomicU32::new(1),
            body_len: fields.body_len,
            header_len: fields.header_len,
            publisher: fields.publisher,
            flags: fields.flags,
            rk_len: fields.rk_len,
            ex_len: fields.ex_len,
            rk_at: fields.rk_at,
            ex_at: fields.ex_at,
            priority: fields.priority,
        };
        // The callers in `super` derive the head's lengths from these very parts.
        let len = content_len(&head);
        assert!(
            parts.iter().map(|p| p.len()).sum::<usize>() == len,
            "message parts disagree with the head"
        );
        let start = HEAD + trailers(head.flags);
        let layout = layout(start + len);
        // SAFETY: the layout is non-zero (HEAD > 0) and 8-aligned. Every write below stays
        // inside it: the head at 0, each trailer at HEAD + 8k for the k-th flag present,
        // the parts back to back from `start`, `len` bytes in all.
        unsafe {
            let base = alloc::alloc(layout);
            if base.is_null() {
                alloc::handle_alloc_error(layout);
            }
            ptr::write(base.cast::<Head>(), head);
            let mut at = base.add(HEAD);
            if let Some(ext) = ext {
                ptr::write(at.cast::<*mut Ext>(), Box::into_raw(ext));
                at = at.add(TRAILER);
            }
            if let Some(id) = stored {
                ptr::write(at.cast::<AtomicU64>(), AtomicU64::new(id));
                at = at.add(TRAILER);
            }
            if let Some(t) = expires {
                ptr::write(at.cast::<u64>(), t);
                at = at.add(TRAILER);
            }
            debug_assert_eq!(at, base.add(start));
            for part in parts {
                // Most messages have an empty part or two: no call for those.
                if !part.is_empty() {
                    ptr::copy_nonoverlapping(part.as_ptr(), at, part.len());
                    at = at.add(part.len());
                }
            }
            Packed(NonNull::new_unchecked(base.cast::<Head>()))
        }
    }

    #[inline]
    pub(super) fn head(&self) -> &Head {
        // SAFETY: the head was written by `new` and lives until the last reference drops.
        unsafe { self.0.as_ref() }
    }

    /// The `k`-th trailer's address (k counts only the trailers present).
    #[inline]
    fn trailer(&self, k: usize) -> *const u8 {
        // SAFETY: callers pass k below the number of trailers present, so the address is
        // inside the allocation.
        unsafe { self.0.as_ptr().cast::<u8>().add(HEAD + k * TRAILER) }
    }

    #[inline]
    pub(super) fn content(&self) -> &[u8] {
        let h = self.head();
        let start = HEAD + trailers(h.flags);
        // SAFETY: `new` wrote `content_len` bytes from `start`; they are never written again.
        unsafe {
            std::slice::from_raw_parts(self.0.as_ptr().cast::<u8>().add(start), content_len(h))
        }
    }

    #[inline]
    pub(super) fn ext(&self) -> Option<&Ext> {
        if self.head().flags & flag::HAS_EXT == 0 {
            return None;
        }
        // SAFETY: with HAS_EXT the first trailer holds the pointer `Box::into_raw` gave; the
        // box is freed only when the allocation is.
        unsafe { Some(&**self.trailer(0).cast::<*mut Ext>()) }
    }

    #[inline]
    pub(super) fn store_slot(&self) -> Option<&AtomicU64> {
        let f = self.head().flags;
        if f & flag::STORED == 0 {
            return None;
        }
        let k = usize::from(f & flag::HAS_EXT != 0);
        // SAFETY: with STORED, trailer k (after the ext pointer, if any) is the slot `new`
        // wrote; 8-aligned as the allocation is and HEAD is a multiple of 8.
        unsafe { Some(&*self.trailer(k).cast::<AtomicU64>()) }
    }

    #[inline]
    pub(super) fn expires(&self) -> Option<u64> {
        let f = self.head().flags;
        if f & flag::EXPIRES == 0 {
            return None;
        }
        let k = usize::from(f & flag::HAS_EXT != 0) + usize::from(f & flag::STORED != 0);
        // SAFETY: with EXPIRES, trailer k is the expiry `new` wrote, never written again.
        unsafe { Some(ptr::read(self.trailer(k).cast::<u64>())) }
    }

    /// Bytes of the allocation (malloc adds its own header and rounding).
    pub(super) fn allocated(&self) -> usize {
        let h = self.head();
        HEAD + trailers(h.flags) + content_len(h)
    }

    #[inline]
    pub(super) fn ptr_eq(a: &Packed, b: &Packed) -> bool {
        a.0 == b.0
    }
}

impl Clone for Packed {
    #[inline]
    fn clone(&self) -> Packed {
        // Relaxed as in `Arc`: a new reference is made from an existing one, which keeps the
        // allocation alive meanwhile.
        let old = self.head().refs.fetch_add(1, Ordering::Relaxed);
        if old > MAX_REFS {
            std::process::abort();
        }
        Packed(self.0)
    }
}

impl Packed {
    /// How many handles share the allocation, for tests of who lets go of messages.
    #[cfg(test)]
    pub(super) fn handles(&self) -> u32 {
        self.head().refs.load(Ordering::Relaxed)
    }
}

impl Drop for Packed {
    #[inline]
    fn drop(&mut self) {
        if self.head().refs.fetch_sub(1, Ordering::Release) != 1 {
            return;
        }
        // As in `Arc`: every other reference's use happens before the free.
        fence(Ordering::Acquire);
        let h = self.head();
        let total = HEAD + trailers(h.flags) + content_len(h);
        let has_ext = h.flags & flag::HAS_EXT != 0;
        // SAFETY: this was the last reference. The ext pointer came from `Box::into_raw`
        // and is dropped once, here; the layout is the one `new` allocated with.
        unsafe {
            if has_ext {
                drop(Box::from_raw(*self.trailer(0).cast::<*mut Ext>()));
            }
            alloc::dealloc(self.0.as_ptr().cast::<u8>(), layout(total));
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    fn fields(flags: u16, header_len: u32, body_len: u32) -> HeadFields {
        HeadFields {
            body_len,
            header_len,
            publisher: 9,
            flags,
            rk_len: 0,
            ex_len: 0,
            rk_at: 0,
            ex_at: 0,
            priority: 3,
        }
    }

    #[test]
    fn content_and_trailers_read_back_in_every_combination() {
        for mask in 0..8u8 {
            let ext = (mask & 1 != 0).then(|| Box::new(Ext::default()));
            let stored = (mask & 2 != 0).then_some(77);
            let expires = (mask & 4 != 0).then_some(u64::MAX - 1);
            let p = Packed::new(
                fields(flag::PERSISTENT, 3, 5),
                ext,
                stored,
                expires,
                [b"", b"", b"hdr", b"body!"],
            );
            assert_eq!(p.content(), b"hdrbody!");
            assert_eq!(p.ext().is_some(), mask & 1 != 0);
            assert_eq!(p.store_slot().map(|s| s.load(Ordering::Relaxed)), stored);
            assert_eq!(p.expires(), expires);
            assert_eq!(p.head().priority, 3);
            assert_eq!(p.head().flags & flag::PERSISTENT, flag::PERSISTENT);
        }
    }

    /// An ext holding something counted, and that something: its count tells when the ext
    /// is dropped.
    fn counted_ext() -> (Box<Ext>, Arc<super::super::Sequenced>) {
        let seq = Arc::new(super::super::Sequenced {
            key: "k".into(),
            number: 1,
        });
        let ext = Ext {
            sequence: Some(seq.clone()),
            ..Ext::default()
        };
        (Box::new(ext), seq)
    }

    #[test]
    fn the_last_reference_frees_the_ext_and_not_before() {
        let (ext, seq) = counted_ext();
        let p = Packed::new(
            fields(0, 0, 1),
            Some(ext),
            Some(0),
            None,
            [b"", b"", b"", b"x"],
        );
        let q = p.clone();
        assert!(Packed::ptr_eq(&p, &q));
        drop(p);
        assert_eq!(Arc::strong_count(&seq), 2, "one clone still holds the ext");
        q.store_slot().unwrap().store(5, Ordering::Relaxed);
        drop(q);
        assert_eq!(
            Arc::strong_count(&seq),
            1,
            "the ext went with the last reference"
        );
    }

    #[test]
    fn references_from_many_threads_free_once() {
        let (ext, seq) = counted_ext();
        let body = vec![7u8; 300];
        let p = Packed::new(
            fields(0, 0, 300),
            Some(ext),
            None,
            Some(1),
            [b"", b"", b"", &body],
        );
        std::thread::scope(|s| {
            for _ in 0..4 {
                let mine = p.clone();
                s.spawn(move || {
                    for _ in 0..10_000 {
                        let c = mine.clone();
                        assert_eq!(c.content().len(), 300);
                    }
                });
            }
        });
        drop(p);
        assert_eq!(Arc::strong_count(&seq), 1);
    }

    #[test]
    #[should_panic(expected = "disagree")]
    fn parts_that_disagree_with_the_head_are_refused() {
        let _ = Packed::new(fields(0, 3, 5), None, None, None, [b"", b"", b"hdr", b"b"]);
    }
}
