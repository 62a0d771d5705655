//! A queue's entry for one available message: the message itself, or, while its content is
//! kept on disk only (flow to disk), a stand-in holding the few fields the queue needs in
//! the meantime. The stand-in is a small allocation of its own rather than a `Message` with
//! empty parts: a deep queue on disk holds millions of them, and an empty `Message` costs
//! four times as much.

use std::num::NonZeroU64;
use std::sync::Arc;

use crate::message::{Message, Sequenced};
use crate::ConnectionId;

#[derive(Debug, Clone)]
pub(crate) struct Entry {
    pub(crate) position: u64,
    pub(crate) item: Item,
}

/// Sixteen bytes, so an entry stays at 24: `redelivered` rides in each variant, and a
/// stand-in's priority beside its pointer, in what would be padding.
#[derive(Debug, Clone)]
pub(crate) enum Item {
    Resident {
        message: Arc<Message>,
        redelivered: bool,
    },
    OnDisk {
        stand_in: Box<StandIn>,
        priority: u8,
        redelivered: bool,
    },
}

impl Item {
    /// A stand-in for `m`, whose content the journal holds.
    pub(crate) fn on_disk(m: &Message, redelivered: bool) -> Item {
        Item::OnDisk {
            stand_in: Box::new(StandIn::of(m)),
            priority: m.priority,
            redelivered,
        }
    }
}

/// What a queue keeps of a journaled message whose content is on disk only: 40 bytes, a
/// 48-byte malloc chunk. Headers are not kept: a last-value queue takes the key from the
/// message before it becomes a stand-in, and the journal gives them back with the content.
#[derive(Debug, Clone)]
pub(crate) struct StandIn {
    /// The store's id for the message; 0 (never a store's) if unknown, which a load
    /// answers with nothing.
    pub(crate) store_id: u64,
    pub(crate) size: u64,
    /// The expiry the queue gave it, which may differ from the journaled one. An expiry
    /// at the epoch itself is kept as 1 ms after it: both are long past.
    expires_at: Option<NonZeroU64>,
    /// Not journaled; a no-local queue still needs it once the content is back.
    pub(crate) publisher: ConnectionId,
    /// A sequencing queue's number for it, not journaled either.
    pub(crate) sequence: Option<Arc<Sequenced>>,
}

impl StandIn {
    fn of(m: &Message) -> StandIn {
        StandIn {
            store_id: m.stored.get().unwrap_or(0),
            size: m.size,
            expires_at: m
                .expires_at
                .map(|at| NonZeroU64::new(at).unwrap_or(NonZeroU64::MIN)),
            publisher: m.publisher,
            sequence: m.sequence.clone(),
        }
    }

    pub(crate) fn expires_at(&self) -> Option<u64> {
        self.expires_at.map(NonZeroU64::get)
    }

    /// The journaled message `m` with what the queue gave it and the journal does not
    /// keep.
    pub(crate) fn restore(&self, mut m: Message) -> Message {
        m.expires_at = self.expires_at();
        m.publisher = self.publisher;
        m.sequence = self.sequence.clone();
        m
    }
}

impl Entry {
    pub(crate) fn resident(position: u64, message: Arc<Message>, redelivered: bool) -> Entry {
        Entry {
            position,
            item: Item::Resident {
                message,
                redelivered,
            },
        }
    }

    /// The message if its content is in memory.
    #[inline]
    pub(crate) fn message(&self) -> Option<&Arc<Message>> {
        match &self.item {
            Item::Resident { message, .. } => Some(message),
            Item::OnDisk { .. } => None,
        }
    }

    #[inline]
    pub(crate) fn on_disk(&self) -> bool {
        matches!(self.item, Item::OnDisk { .. })
    }

    /// Bytes counted against limits and credit (see `Message::size`).
    #[inline]
    pub(crate) fn size(&self) -> u64 {
        match &self.item {
            Item::Resident { message, .. } => message.size,
            Item::OnDisk { stand_in, .. } => stand_in.size,
        }
    }

    #[inline]
    pub(crate) fn expires_at(&self) -> Option<u64> {
        match &self.item {
            Item::Resident { message, .. } => message.expires_at,
            Item::OnDisk { stand_in, .. } => stand_in.expires_at(),
        }
    }

    pub(crate) fn is_expired_at(&self, now_ms: u64) -> bool {
        self.expires_at().is_some_and(|at| at <= now_ms)
    }

    #[inline]
    pub(crate) fn priority(&self) -> u8 {
        match &self.item {
            Item::Resident { message, .. } => message.priority,
            Item::OnDisk { priority, .. } => *priority,
        }
    }

    #[inline]
    pub(crate) fn redelivered(&self) -> bool {
        match &self.item {
            Item::Resident { redelivered, .. } | Item::OnDisk { redelivered, .. } => *redelivered,
        }
    }

    /// The store's id for the message, if a journal recorded it.
    pub(crate) fn store_id(&self) -> Option<u64> {
        match &self.item {
            Item::Resident { message, .. } => message.stored.get(),
            Item::OnDisk { stand_in, .. } => Some(stand_in.store_id).filter(|id| *id != 0),
        }
    }

    /// The message, or for a stand-in a [`Message::stub`]-like message with its store id,
    /// size and expiry, for the paths that hand over an entry they drop (a drop-head
    /// overflow, a deleted queue without an alternate exchange) as a message.
    #[inline]
    pub(crate) fn into_message(self) -> Arc<Message> {
        match self.item {
            Item::Resident { message, .. } => message,
            Item::OnDisk {
                stand_in, priority, ..
            } => (*stand_in).into_stub(priority),
        }
    }
}

impl StandIn {
    /// Out of line, so that taking a resident entry's message stays a move.
    #[cold]
    #[inline(never)]
    fn into_stub(self, priority: u8) -> Arc<Message> {
        let m = Message {
            size: self.size,
            priority,
            persistent: true,
            ..Message::default()
        };
        m.stored.set(self.store_id);
        Arc::new(self.restore(m))
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;

    #[test]
    fn an_entry_stays_small_and_a_stand_in_keeps_what_the_journal_does_not() {
        assert_eq!(std::mem::size_of::<Entry>(), 24);
        assert_eq!(std::mem::size_of::<StandIn>(), 40);
        let mut m = Message::new("x", "k", Bytes::from_static(b"body"));
        m.expires_at = Some(9);
        m.publisher = 3;
        m.priority = 7;
        m.sequence = Some(Arc::new(Sequenced {
            key: "n".into(),
            number: 5,
        }));
        m.stored.set(42);
        let e = Entry {
            position: 1,
            item: Item::on_disk(&m, true),
        };
        assert!(e.on_disk() && e.message().is_none() && e.redelivered());
        assert_eq!(
            (e.size(), e.priority(), e.expires_at(), e.store_id()),
            (4, 7, Some(9), Some(42))
        );
        let Item::OnDisk { stand_in: s, .. } = &e.item else {
            panic!("a stand-in")
        };
        // The journal's copy carries neither the queue's expiry nor the publisher.
        let back = s.restore(Message::new("x", "k", Bytes::from_static(b"body")));
        assert_eq!((back.expires_at, back.publisher), (Some(9), 3));
        assert_eq!(back.sequence.map(|s| s.number), Some(5));
        let stub = e.into_message();
        assert_eq!(
            (stub.stored.get(), stub.size, stub.priority),
            (Some(42), 4, 7)
        );
        // An expiry at the epoch stays an expiry long past.
        m.expires_at = Some(0);
        let e = Entry {
            position: 2,
            item: Item::on_disk(&m, false),
        };
        assert_eq!(e.expires_at(), Some(1));
        assert!(e.is_expired_at(1) && !e.redelivered());
    }
}
