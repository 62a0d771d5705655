//! A queue's entry for one available message: the message itself, or, while its content is
//! kept on disk only (flow to disk), a stand-in holding the few fields the queue needs in
//! the meantime. The stand-in is a small allocation of its own rather than a `Message` with
//! empty parts: a deep queue on disk holds millions of them, and an empty `Message` costs
//! four times as much.

use std::num::NonZeroU64;
use std::sync::Arc;

use crate::message::{Message, MessageParts, Sequenced, TraceEdit};
use crate::ConnectionId;

#[derive(Debug, Clone)]
pub(crate) struct Entry {
    pub(crate) position: u64,
    pub(crate) item: Item,
}

/// Whether a message was delivered before, and how many times it came back to the queue
/// after a delivery (for `x-delivery-limit`): two bytes, so it rides in an entry's padding.
/// The count saturates at [`Redelivery::MAX_RETURNS`], which a limit must stay below to act.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Redelivery(u16);

impl Redelivery {
    pub(crate) const MAX_RETURNS: u16 = u16::MAX >> 1;

    /// Recovered from the store: marked redelivered (it may have gone out before the
    /// restart), with the returns the store counted.
    pub(crate) fn recovered(returns: u32) -> Redelivery {
        let returns =
            u16::try_from(returns).map_or(Self::MAX_RETURNS, |n| n.min(Self::MAX_RETURNS));
        Redelivery(returns << 1 | 1)
    }

    pub(crate) fn is_redelivered(self) -> bool {
        self.0 & 1 != 0
    }

    /// Times it came back after a delivery.
    pub(crate) fn returns(self) -> u16 {
        self.0 >> 1
    }

    /// Came back after a delivery: redelivered, one more return.
    pub(crate) fn returned(self) -> Redelivery {
        let returns = (self.returns() + 1).min(Self::MAX_RETURNS);
        Redelivery(returns << 1 | 1)
    }
}

impl From<bool> for Redelivery {
    fn from(redelivered: bool) -> Redelivery {
        Redelivery(u16::from(redelivered))
    }
}

/// Sixteen bytes, so an entry stays at 24: the redelivery count rides in each variant, and a
/// stand-in's priority and publisher beside its pointer, in what would be padding.
#[derive(Debug, Clone)]
pub(crate) enum Item {
    Resident {
        message: Message,
        redelivery: Redelivery,
    },
    OnDisk {
        stand_in: Box<StandIn>,
        /// The publishing connection when it fits (nearly always: ids count up from 1);
        /// otherwise 0 and the stand-in's [`Rest`] keeps it.
        publisher: u32,
        priority: u8,
        redelivery: Redelivery,
    },
}

impl Item {
    /// A stand-in for `m`, whose content the journal holds. `body_size` is `m`'s, or, for a
    /// [`Message::stub`], the original's.
    pub(crate) fn on_disk(m: &Message, body_size: u64, redelivery: Redelivery) -> Item {
        let publisher = u32::try_from(m.publisher()).ok();
        let expires_at = m
            .expires_at()
            .map(|at| NonZeroU64::new(at).unwrap_or(NonZeroU64::MIN));
        let size = m.size();
        let (size32, body_size32) = (fits32(size), fits32(body_size));
        let rest = (expires_at.is_some()
            || m.sequence().is_some()
            || m.trace().is_some()
            || publisher.is_none()
            || size32.is_none()
            || body_size32.is_none())
        .then(|| {
            Box::new(Rest {
                expires_at,
                publisher: m.publisher(),
                sequence: m.sequence().cloned(),
                trace: m.trace().cloned(),
                size,
                body_size,
            })
        });
        Item::OnDisk {
            stand_in: Box::new(StandIn {
                store_id: m.store_id().unwrap_or(0),
                size: size32.unwrap_or(IN_REST),
                body_size: body_size32.unwrap_or(IN_REST),
                rest,
            }),
            publisher: publisher.unwrap_or(0),
            priority: m.priority(),
            redelivery,
        }
    }

    /// The stand-in and what rides beside it, if the content is on disk.
    #[inline]
    pub(crate) fn on_disk_part(&self) -> Option<OnDiskPart<'_>> {
        match self {
            Item::Resident { .. } => None,
            Item::OnDisk {
                stand_in,
                publisher,
                ..
            } => Some(OnDiskPart {
                stand_in,
                publisher: *publisher,
            }),
        }
    }
}

/// What a queue keeps of a journaled message whose content is on disk only: 24 bytes, a
/// 32-byte malloc chunk, for a message without expiry or sequence number (a deep queue on
/// disk holds millions of them). Headers are not kept: a last-value queue takes the key
/// from the message before it becomes a stand-in, and the journal gives them back with the
/// content.
#[derive(Debug, Clone)]
pub(crate) struct StandIn {
    /// The store's id for the message; 0 (never a store's) if unknown, which a load
    /// answers with nothing.
    pub(crate) store_id: u64,
    /// [`Message::size`] and the body's length, each when it fits 32 bits; [`IN_REST`] says
    /// the [`Rest`] holds it (a message of 4 GiB, far above ferryd's default maximum).
    size: u32,
    body_size: u32,
    rest: Option<Box<Rest>>,
}

/// A stand-in's 32-bit size that says the real one is in its [`Rest`].
const IN_REST: u32 = u32::MAX;

fn fits32(n: u64) -> Option<u32> {
    u32::try_from(n).ok().filter(|n| *n != IN_REST)
}

/// The rarer fields a stand-in keeps in an allocation of their own.
#[derive(Debug, Clone)]
struct Rest {
    /// The expiry the queue gave it, which may differ from the journaled one. An expiry
    /// at the epoch itself is kept as 1 ms after it: both are long past.
    expires_at: Option<NonZeroU64>,
    /// Not journaled; a no-local queue still needs it once the content is back. Kept here
    /// only when it does not fit the entry's 32 bits.
    publisher: ConnectionId,
    /// A sequencing queue's number for it, not journaled either.
    sequence: Option<Arc<Sequenced>>,
    /// What tracing did to its `x-qpid.trace`, not journaled either.
    trace: Option<Arc<TraceEdit>>,
    size: u64,
    body_size: u64,
}

/// An on-disk entry's stand-in with the publisher kept beside it.
#[derive(Clone, Copy)]
pub(crate) struct OnDiskPart<'a> {
    pub(crate) stand_in: &'a StandIn,
    publisher: u32,
}

impl StandIn {
    pub(crate) fn size(&self) -> u64 {
        self.wide(self.size, |r| r.size)
    }

    pub(crate) fn body_size(&self) -> u64 {
        self.wide(self.body_size, |r| r.body_size)
    }

    fn wide(&self, narrow: u32, in_rest: fn(&Rest) -> u64) -> u64 {
        match (narrow, &self.rest) {
            (IN_REST, Some(rest)) => in_rest(rest),
            _ => u64::from(narrow),
        }
    }

    pub(crate) fn expires_at(&self) -> Option<u64> {
        self.rest
            .as_ref()
            .and_then(|r| r.expires_at)
            .map(NonZeroU64::get)
    }
}

impl OnDiskPart<'_> {
    /// The journaled message `m` with what the queue gave it and the journal does not
    /// keep.
    pub(crate) fn restore(&self, mut m: MessageParts) -> Message {
        match &self.stand_in.rest {
            Some(rest) => {
                m.expires_at = rest.expires_at.map(NonZeroU64::get);
                m.publisher = rest.publisher;
                m.sequence = rest.sequence.clone();
                m.trace = rest.trace.clone();
            }
            None => {
                m.expires_at = None;
                m.publisher = ConnectionId::from(self.publisher);
                m.sequence = None;
                m.trace = None;
            }
        }
        m.build()
    }
}

impl Entry {
    pub(crate) fn resident(position: u64, message: Message, redelivery: Redelivery) -> Entry {
        Entry {
            position,
            item: Item::Resident {
                message,
                redelivery,
            },
        }
    }

    /// The message if its content is in memory.
    #[inline]
    pub(crate) fn message(&self) -> Option<&Message> {
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
            Item::Resident { message, .. } => message.size(),
            Item::OnDisk { stand_in, .. } => stand_in.size(),
        }
    }

    /// The body's bytes, which RabbitMQ's byte limits count.
    #[inline]
    pub(crate) fn body_size(&self) -> u64 {
        match &self.item {
            Item::Resident { message, .. } => message.body_size(),
            Item::OnDisk { stand_in, .. } => stand_in.body_size(),
        }
    }

    #[inline]
    pub(crate) fn expires_at(&self) -> Option<u64> {
        match &self.item {
            Item::Resident { message, .. } => message.expires_at(),
            Item::OnDisk { stand_in, .. } => stand_in.expires_at(),
        }
    }

    pub(crate) fn is_expired_at(&self, now_ms: u64) -> bool {
        self.expires_at().is_some_and(|at| at <= now_ms)
    }

    #[inline]
    pub(crate) fn priority(&self) -> u8 {
        match &self.item {
            Item::Resident { message, .. } => message.priority(),
            Item::OnDisk { priority, .. } => *priority,
        }
    }

    #[inline]
    pub(crate) fn redelivered(&self) -> bool {
        self.redelivery().is_redelivered()
    }

    #[inline]
    pub(crate) fn redelivery(&self) -> Redelivery {
        match &self.item {
            Item::Resident { redelivery, .. } | Item::OnDisk { redelivery, .. } => *redelivery,
        }
    }

    /// The store's id for the message, if a journal recorded it.
    pub(crate) fn store_id(&self) -> Option<u64> {
        match &self.item {
            Item::Resident { message, .. } => message.store_id(),
            Item::OnDisk { stand_in, .. } => Some(stand_in.store_id).filter(|id| *id != 0),
        }
    }

    /// The message, or for a stand-in a [`Message::stub`]-like message with its store id,
    /// size and expiry, for the paths that hand over an entry they drop (a drop-head
    /// overflow, a deleted queue without an alternate exchange) as a message.
    #[inline]
    pub(crate) fn into_message(self) -> Message {
        match self.item {
            Item::Resident { message, .. } => message,
            Item::OnDisk {
                ref stand_in,
                publisher,
                priority,
                ..
            } => OnDiskPart {
                stand_in,
                publisher,
            }
            .into_stub(priority),
        }
    }
}

impl OnDiskPart<'_> {
    /// Out of line, so that taking a resident entry's message stays a move.
    #[cold]
    #[inline(never)]
    fn into_stub(self, priority: u8) -> Message {
        self.restore(MessageParts {
            size: Some(self.stand_in.size()),
            priority,
            persistent: true,
            store_id: Some(self.stand_in.store_id).filter(|id| *id != 0),
            ..MessageParts::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;

    #[test]
    fn an_entry_stays_small_and_a_stand_in_keeps_what_the_journal_does_not() {
        assert_eq!(std::mem::size_of::<Entry>(), 24);
        assert_eq!(std::mem::size_of::<StandIn>(), 24);
        let mut m = MessageParts::new("x", "k", Bytes::from_static(b"body"));
        m.expires_at = Some(9);
        m.publisher = 3;
        m.priority = 7;
        m.sequence = Some(Arc::new(Sequenced {
            key: "n".into(),
            number: 5,
        }));
        m.store_id = Some(42);
        let e = Entry {
            position: 1,
            item: Item::on_disk(&m.clone().build(), 4, true.into()),
        };
        assert!(e.on_disk() && e.message().is_none() && e.redelivered());
        assert_eq!(
            (
                e.size(),
                e.body_size(),
                e.priority(),
                e.expires_at(),
                e.store_id()
            ),
            (4, 4, 7, Some(9), Some(42))
        );
        // The journal's copy carries neither the queue's expiry nor the publisher.
        let back = e
            .item
            .on_disk_part()
            .expect("a stand-in")
            .restore(MessageParts::new("x", "k", Bytes::from_static(b"body")));
        assert_eq!((back.expires_at(), back.publisher()), (Some(9), 3));
        assert_eq!(back.sequence().map(|s| s.number), Some(5));
        let stub = e.into_message();
        assert_eq!(
            (
                stub.store_id(),
                stub.size(),
                stub.priority(),
                stub.publisher()
            ),
            (Some(42), 4, 7, 3)
        );
        // Sizes that do not fit 32 bits go to the rarer fields' allocation.
        let mut big = MessageParts::new("x", "k", Bytes::from_static(b"body"));
        big.size = Some(5 << 32);
        let e = Entry::resident(1, big.build(), false.into());
        let on_disk = Entry {
            position: 1,
            item: Item::on_disk(e.message().expect("resident"), 4, false.into()),
        };
        assert_eq!((on_disk.size(), on_disk.body_size()), (5 << 32, 4));
        // An expiry at the epoch stays an expiry long past.
        m.expires_at = Some(0);
        let e = Entry {
            position: 2,
            item: Item::on_disk(&m.build(), 4, false.into()),
        };
        assert_eq!(e.expires_at(), Some(1));
        assert!(e.is_expired_at(1) && !e.redelivered());
    }

    #[test]
    fn a_plain_stand_in_has_no_second_allocation_and_a_huge_publisher_is_kept_whole() {
        let mut m = MessageParts::new("x", "k", Bytes::from_static(b"body"));
        m.publisher = 77;
        m.store_id = Some(5);
        let e = Entry {
            position: 1,
            item: Item::on_disk(&m.clone().build(), 4, false.into()),
        };
        let part = e.item.on_disk_part().unwrap();
        assert!(
            part.stand_in.rest.is_none(),
            "no expiry, no sequence: 24 B only"
        );
        let mut journaled = MessageParts::new("x", "k", Bytes::from_static(b"body"));
        journaled.expires_at = Some(123);
        let back = part.restore(journaled);
        assert_eq!(
            (
                back.publisher(),
                back.expires_at(),
                back.sequence().is_none()
            ),
            (77, None, true),
            "the queue's own (no) expiry wins over the journaled one"
        );
        m.publisher = u64::from(u32::MAX) + 9;
        let e = Entry {
            position: 2,
            item: Item::on_disk(&m.build(), 4, false.into()),
        };
        let part = e.item.on_disk_part().unwrap();
        assert!(part.stand_in.rest.is_some());
        let back = part.restore(MessageParts::new("x", "k", Bytes::from_static(b"body")));
        assert_eq!(back.publisher(), u64::from(u32::MAX) + 9);
        assert_eq!(e.into_message().publisher(), u64::from(u32::MAX) + 9);
    }
}
