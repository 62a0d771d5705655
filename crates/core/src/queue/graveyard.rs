//! Accepted messages freed on the publisher's thread.
//!
//! A message is allocated on the worker thread that read it from its publisher and, once its
//! consumer accepts it, was freed on the worker thread that read the accept. glibc returns a
//! freed block to the arena it came from, under that arena's lock, so with publisher and
//! consumer on different workers both threads took one lock once per message and met on it
//! (docs/INTERNALS.md, a message's path). Instead, an accept leaves small messages here,
//! under the queue lock it takes anyway, and the queue's next publish takes them all out under
//! its lock and drops them once it has let go of it: on the publisher's worker, which with one
//! publisher per queue is the thread, and the arena, that allocated them.
//!
//! Bounded per queue: 64 messages and 16 KiB of their allocations. Not counted in the broker's
//! memory meter: they are no longer the queue's, and counted they could hold the memory alarm
//! up with the publishers it blocks being the only ones to free them. Only messages that are
//! one allocation: a large body shares its publisher's read buffer, which must not be kept
//! alive.
//!
//! Only a queue with consumers keeps any; the last consumer's going frees them, and so does
//! deletion. Publishes that do not go through `Queue::push` (a transaction's commit) leave the
//! graveyard for the next one that does. What no publish took for a whole period of the
//! broker's once-a-second sweep ([`Queue::sweep_graveyard`]) is freed there, so a queue whose
//! publishers stopped keeps nothing for long.

use std::cell::RefCell;

use super::{Queue, QueueState};
use crate::message::Message;

/// Most accepted messages a queue keeps for its next publish to free.
pub(crate) const GRAVEYARD_MAX_MESSAGES: usize = 64;
/// Most bytes of their allocations.
pub(crate) const GRAVEYARD_MAX_BYTES: u64 = 16 << 10;

/// Kept messages, each with the bytes of its allocation.
type Buried = Vec<(Message, u64)>;

#[derive(Debug, Default)]
pub(crate) struct Graveyard {
    /// With each message its size, so that nothing under the lock reads the message itself
    /// (its memory is likely in the other thread's cache).
    messages: Buried,
    bytes: u64,
    /// A sweep found messages here; no publish has taken them since.
    stale: bool,
}

thread_local! {
    /// The emptied vector a publish swaps with a queue's graveyard, so that in the steady
    /// state neither side allocates one.
    static SPARE: RefCell<Buried> = const { RefCell::new(Vec::new()) };
}

/// An accepted message's handle on its way to a graveyard, with what the graveyard needs to
/// know of it, found out before the queue lock is taken.
#[derive(Debug, Default)]
pub(crate) struct Corpse {
    message: Option<Message>,
    /// The allocation's bytes; 0 for a message a graveyard must not keep.
    bytes: u64,
}

impl Corpse {
    pub(crate) fn new(message: Message) -> Corpse {
        let bytes = message.compact_bytes().unwrap_or(0);
        Corpse {
            message: Some(message),
            bytes,
        }
    }
}

impl Graveyard {
    /// Keeps the message if it may and there is room, returning the bytes kept; otherwise
    /// leaves it in `corpse`, for the caller to drop (after unlocking) as before, and returns 0.
    fn bury(&mut self, corpse: &mut Corpse) -> u64 {
        let bytes = corpse.bytes;
        if bytes == 0
            || self.messages.len() >= GRAVEYARD_MAX_MESSAGES
            || self.bytes + bytes > GRAVEYARD_MAX_BYTES
        {
            return 0;
        }
        let Some(m) = corpse.message.take() else {
            return 0;
        };
        self.bytes += bytes;
        self.messages.push((m, bytes));
        bytes
    }

    /// Moves the kept messages into this thread's spare vector, for [`free_taken`] to drop
    /// once the lock is released; returns the bytes that left.
    fn take(&mut self) -> u64 {
        if self.messages.is_empty() {
            return 0;
        }
        SPARE
            .try_with(|spare| {
                // Only an emptied spare: what it held would come back uncounted.
                let Ok(mut spare) = spare.try_borrow_mut() else {
                    return 0;
                };
                if !spare.is_empty() {
                    return 0;
                }
                std::mem::swap(&mut *spare, &mut self.messages);
                self.stale = false;
                std::mem::take(&mut self.bytes)
            })
            .unwrap_or(0)
    }

    /// Everything kept, and the room for it, for the caller to drop once unlocked.
    fn clear(&mut self) -> Buried {
        self.bytes = 0;
        self.stale = false;
        std::mem::take(&mut self.messages)
    }

    /// For the periodic sweep: if no publish has taken anything since the last sweep found
    /// messages here, everything here (those, and any kept since), for the caller to drop
    /// once unlocked. Otherwise marks what is here now for the next sweep.
    fn sweep(&mut self) -> Buried {
        if self.stale {
            return self.clear();
        }
        self.stale = !self.messages.is_empty();
        Vec::new()
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.messages.len()
    }
}

/// Drops what [`QueueState::take_graveyard`] moved out on this thread, keeping the vector's
/// room.
pub(crate) fn free_taken() {
    let _ = SPARE.try_with(|spare| {
        if let Ok(mut spare) = spare.try_borrow_mut() {
            spare.clear();
        }
    });
}

impl QueueState {
    /// Leaves an accepted message's handle for the queue's next publish to drop, if the
    /// queue has consumers (so publishes are likely to follow) and there is room.
    pub(crate) fn bury(&mut self, corpse: &mut Corpse) {
        if !self.consumers.is_empty() {
            self.graveyard.bury(corpse);
        }
    }

    /// For a publish, under the lock: the kept messages go to this thread's spare vector,
    /// to be dropped by [`free_taken`] after unlocking. False if nothing went, and
    /// there is nothing to free (most publishes: accepts come a run at a time).
    pub(crate) fn take_graveyard(&mut self) -> bool {
        self.graveyard.take() != 0
    }

    /// Everything kept, for the caller to drop (after unlocking where it can).
    pub(crate) fn clear_graveyard(&mut self) -> Buried {
        self.graveyard.clear()
    }
}

impl Queue {
    /// The broker's periodic sweep: frees what the graveyard kept if no publish has taken it
    /// since the last sweep.
    pub(crate) fn sweep_graveyard(&self) {
        let stale = self.lock().graveyard.sweep();
        drop(stale);
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;

    fn message(body_len: usize) -> Message {
        Message::new("", "q", Bytes::from(vec![7u8; body_len]))
    }

    /// Buries a second handle to `m`; true if the graveyard kept it.
    fn bury_clone(g: &mut Graveyard, m: &Message) -> bool {
        let mut corpse = Corpse::new(m.clone());
        let kept = g.bury(&mut corpse);
        assert_eq!(kept != 0, corpse.message.is_none());
        corpse.message.is_none()
    }

    #[test]
    fn keeps_at_most_the_count_bound() {
        let mut g = Graveyard::default();
        let m = message(8);
        for _ in 0..GRAVEYARD_MAX_MESSAGES {
            assert!(bury_clone(&mut g, &m));
        }
        assert!(!bury_clone(&mut g, &m), "one past the count bound");
        assert_eq!(g.len(), GRAVEYARD_MAX_MESSAGES);
        assert_eq!(m.handles(), 1 + GRAVEYARD_MAX_MESSAGES as u32);
    }

    #[test]
    fn keeps_at_most_the_byte_bound() {
        let mut g = Graveyard::default();
        let m = message(1000);
        let fits = GRAVEYARD_MAX_BYTES / m.allocated() as u64;
        for _ in 0..fits {
            assert!(bury_clone(&mut g, &m));
        }
        assert!(!bury_clone(&mut g, &m), "one past the byte bound");
        assert_eq!(g.len() as u64, fits);
    }

    #[test]
    fn leaves_a_large_body_to_the_caller() {
        let mut g = Graveyard::default();
        let large = message(crate::message::INLINE_BODY_MAX);
        assert_eq!(large.compact_bytes(), None);
        assert!(!bury_clone(&mut g, &large));
        assert_eq!(g.len(), 0);
    }

    #[test]
    fn take_then_free_lets_go_on_this_thread_and_the_count_restarts() {
        let mut g = Graveyard::default();
        let m = message(100);
        for _ in 0..3 {
            assert!(bury_clone(&mut g, &m));
        }
        assert_eq!(g.take(), 3 * m.allocated() as u64);
        assert_eq!(g.len(), 0);
        assert_eq!(m.handles(), 4, "taken, not yet freed");
        free_taken();
        assert_eq!(m.handles(), 1);
        let fill = message(1000);
        let fits = GRAVEYARD_MAX_BYTES / fill.allocated() as u64;
        for _ in 0..fits {
            assert!(bury_clone(&mut g, &fill));
        }
        let cleared = g.clear();
        assert_eq!(cleared.len() as u64, fits);
        assert_eq!(fill.handles(), 1 + fits as u32, "the caller drops them");
        drop(cleared);
        assert_eq!(fill.handles(), 1);
    }

    #[test]
    fn a_sweep_frees_only_what_a_whole_period_left_untaken() {
        let mut g = Graveyard::default();
        let m = message(100);
        assert!(g.sweep().is_empty(), "nothing kept, nothing marked");
        assert!(bury_clone(&mut g, &m));
        assert!(g.sweep().is_empty(), "first sweep only marks");
        g.take();
        free_taken();
        assert!(bury_clone(&mut g, &m));
        assert!(g.sweep().is_empty(), "a publish took the marked ones");
        assert_eq!(g.sweep().len(), 1, "untaken for a whole period");
        assert_eq!(g.len(), 0);
        assert!(bury_clone(&mut g, &m));
        assert!(g.sweep().is_empty(), "the clear unmarked it");
    }

    #[test]
    fn a_take_while_the_spare_is_in_use_takes_nothing() {
        let mut first = Graveyard::default();
        let mut second = Graveyard::default();
        let m = message(100);
        assert!(bury_clone(&mut first, &m));
        assert!(bury_clone(&mut second, &m));
        assert_ne!(first.take(), 0);
        assert_eq!(second.take(), 0, "the spare still held the first's");
        assert_eq!(second.len(), 1);
        free_taken();
        assert_eq!(m.handles(), 2);
        second.take();
        free_taken();
        assert_eq!(m.handles(), 1);
    }
}
