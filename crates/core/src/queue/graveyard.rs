//! Accepted messages freed on the publisher's thread.
//!
//! A message is allocated on the worker thread that read it from its publisher and, once its
//! consumer accepts it, was freed on the worker thread that read the accept. glibc returns a
//! freed block to the arena it came from, under that arena's lock, so with publisher and
//! consumer on different workers both threads took one lock once per message and met on it
//! (docs/INTERNALS.md, a message's path). Instead, an accept leaves small messages
//! here, under the queue lock it takes anyway, and the next publish to the queue takes them
//! all out under its lock and drops them once it has let go of it: on the publisher's thread,
//! in the arena they came from.
//!
//! Bounded per queue in count and bytes, and only messages in one allocation (a large body
//! shares its publisher's read buffer, which must not be kept alive). Only a queue with
//! consumers keeps any: the last consumer's going frees them, and so does deletion. A queue
//! whose publishers stopped keeps at most the bound until then.

use std::cell::RefCell;

use super::QueueState;
use crate::message::Message;

/// Most accepted messages a queue keeps for its publishes to free.
pub(crate) const GRAVEYARD_MAX_MESSAGES: usize = 64;
/// Most bytes of them (message sizes as the queue counts them).
pub(crate) const GRAVEYARD_MAX_BYTES: u64 = 16 << 10;

#[derive(Debug, Default)]
pub(crate) struct Graveyard {
    /// With each message its size, so that nothing under the lock reads the message itself
    /// (its memory is likely in the other thread's cache).
    messages: Vec<(Message, u64)>,
    bytes: u64,
}

thread_local! {
    /// The emptied vector a publish swaps with a queue's graveyard, so that in the steady
    /// state neither side allocates one.
    static SPARE: RefCell<Vec<(Message, u64)>> = const { RefCell::new(Vec::new()) };
}

/// An accepted message's handle on its way to a graveyard, with what the graveyard needs to
/// know of it, found out before the queue lock is taken.
#[derive(Debug, Default)]
pub(crate) struct Corpse {
    message: Option<Message>,
    /// `None` for a message a graveyard must not keep.
    size: Option<u64>,
}

impl Corpse {
    pub(crate) fn new(message: Message) -> Corpse {
        let size = message.is_compact().then(|| message.size());
        Corpse {
            message: Some(message),
            size,
        }
    }
}

impl Graveyard {
    /// Keeps the message if it is small and there is room; otherwise leaves it in `corpse`,
    /// for the caller to drop (after unlocking) as before.
    pub(crate) fn bury(&mut self, corpse: &mut Corpse) {
        let Some(size) = corpse.size else { return };
        if self.messages.len() >= GRAVEYARD_MAX_MESSAGES || self.bytes + size > GRAVEYARD_MAX_BYTES
        {
            return;
        }
        if let Some(m) = corpse.message.take() {
            self.bytes += size;
            self.messages.push((m, size));
        }
    }

    /// Under the queue lock: moves the kept messages into this thread's spare vector, for
    /// [`free_taken`] to drop once the lock is released.
    pub(crate) fn take(&mut self) {
        if self.messages.is_empty() {
            return;
        }
        SPARE.with(|spare| {
            // Only an emptied spare: what it held would come back uncounted.
            if let Ok(mut spare) = spare.try_borrow_mut() {
                if spare.is_empty() {
                    std::mem::swap(&mut *spare, &mut self.messages);
                    self.bytes = 0;
                }
            }
        });
    }

    /// Frees what is kept, here and now, and the room for it (for rare paths: the queue lost
    /// its consumers or is deleted).
    pub(crate) fn clear(&mut self) {
        self.messages = Vec::new();
        self.bytes = 0;
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.messages.len()
    }
}

/// Drops what [`Graveyard::take`] moved out on this thread, keeping the vector's room.
pub(crate) fn free_taken() {
    SPARE.with(|spare| {
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
        g.bury(&mut corpse);
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
        let fits = GRAVEYARD_MAX_BYTES / m.size();
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
        assert!(!large.is_compact());
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
        g.take();
        assert_eq!(g.len(), 0);
        assert_eq!(m.handles(), 4, "taken, not yet freed");
        free_taken();
        assert_eq!(m.handles(), 1);
        let fill = message(1000);
        let fits = GRAVEYARD_MAX_BYTES / fill.size();
        for _ in 0..fits {
            assert!(bury_clone(&mut g, &fill));
        }
        g.clear();
        assert_eq!(fill.handles(), 1);
    }

    #[test]
    fn a_take_while_the_spare_is_in_use_takes_nothing() {
        let mut first = Graveyard::default();
        let mut second = Graveyard::default();
        let m = message(100);
        assert!(bury_clone(&mut first, &m));
        assert!(bury_clone(&mut second, &m));
        first.take();
        second.take();
        assert_eq!(second.len(), 1, "the spare still held the first's");
        free_taken();
        assert_eq!(m.handles(), 2);
        second.take();
        free_taken();
        assert_eq!(m.handles(), 1);
    }
}
