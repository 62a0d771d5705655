//! Flow to disk: durable queues keep the content of persistent messages in memory only up
//! to a broker-wide budget (plus a read-ahead window per queue, so a queue whose consumers
//! keep up never touches the disk). Beyond it a queued message is a stand-in
//! ([`StandIn`]) and its content lives in the journal only, whose segments stay until
//! the message is dequeued. The queue reads contents back in batches as they come near the
//! front, before anyone but the queue sees them; walks that may take a message from
//! further back (a selective consumer's, a message group's first messages) read that one
//! back as a copy and keep it only when it is taken.

use std::sync::atomic::{AtomicU64, Ordering};

use super::{Entry, Item, QueueState, Redelivery};
use crate::message::Message;
use crate::queue::QueueStore;

/// Most entries, and bytes, read back from the journal in one go.
const LOAD_BATCH: usize = 256;
const LOAD_BATCH_BYTES: u64 = 1 << 20;

/// The broker-wide budget and what is spent of it.
#[derive(Debug)]
pub(crate) struct OffloadBudget {
    budget: u64,
    /// Each queue keeps this much content in memory whatever the budget.
    window: u64,
    /// Content bytes of journaled messages queued in memory, over all durable queues.
    resident: AtomicU64,
}

impl OffloadBudget {
    pub(crate) fn new(budget: u64) -> OffloadBudget {
        OffloadBudget {
            budget,
            window: (budget / 4).clamp(64 << 10, 4 << 20),
            resident: AtomicU64::new(0),
        }
    }

    #[cfg(test)]
    pub(crate) fn resident(&self) -> u64 {
        self.resident.load(Ordering::Relaxed)
    }
}

impl QueueState {
    /// A new entry's item for `m`: the message itself, or a stand-in if its content stays
    /// on disk.
    pub(super) fn within_budget(&self, m: Message, redelivery: Redelivery) -> Item {
        if self.admits_resident(&m) {
            Item::Resident {
                message: m,
                redelivery,
            }
        } else {
            Item::on_disk(&m, m.body_size(), redelivery)
        }
    }

    /// Whether a new entry for `m` keeps its content in memory.
    fn admits_resident(&self, m: &Message) -> bool {
        let Some(b) = &self.offload else {
            return true;
        };
        m.store_id().is_none()
            || self.resident < b.window
            || b.resident.load(Ordering::Relaxed).saturating_add(m.size()) <= b.budget
    }

    /// Bytes of `e` counted in the budget: journaled content held in memory.
    fn budgeted(&self, e: &Entry) -> u64 {
        match e.message() {
            Some(m) if self.offload.is_some() && m.store_id().is_some() => m.size(),
            _ => 0,
        }
    }

    /// Counts an entry joining the queue's available messages.
    pub(super) fn offload_in(&mut self, e: &Entry) {
        if e.on_disk() {
            self.on_disk_bytes += e.size();
            return;
        }
        let n = self.budgeted(e);
        if let (Some(b), true) = (&self.offload, n > 0) {
            self.resident += n;
            b.resident.fetch_add(n, Ordering::Relaxed);
        }
    }

    /// Counts an entry leaving them.
    pub(super) fn offload_out(&mut self, e: &Entry) {
        if e.on_disk() {
            self.on_disk_bytes = self.on_disk_bytes.saturating_sub(e.size());
            return;
        }
        let n = self.budgeted(e);
        if let (Some(b), true) = (&self.offload, n > 0) {
            self.resident = self.resident.saturating_sub(n);
            b.resident.fetch_sub(n, Ordering::Relaxed);
        }
    }

    /// Forgets every count: the available messages are all gone.
    pub(super) fn offload_clear(&mut self) {
        if let Some(b) = &self.offload {
            b.resident.fetch_sub(self.resident, Ordering::Relaxed);
        }
        self.resident = 0;
        self.on_disk_bytes = 0;
    }

    /// Recounts after entries left in bulk (expiry sweep).
    pub(super) fn offload_recount(&mut self) {
        self.offload_clear();
        let (mut resident, mut on_disk) = (0, 0);
        for e in self.entries.iter() {
            if e.on_disk() {
                on_disk += e.size();
            } else {
                resident += self.budgeted(e);
            }
        }
        if let Some(b) = &self.offload {
            b.resident.fetch_add(resident, Ordering::Relaxed);
        }
        self.resident = resident;
        self.on_disk_bytes = on_disk;
    }

    /// The whole message an entry stands for: its own if in memory, else read back from
    /// the journal (`None` if the journal lost it).
    pub(crate) fn content(&self, e: &Entry) -> Option<Message> {
        match e.message() {
            Some(m) => Some(m.clone()),
            None => load_one(self.store.as_ref(), e),
        }
    }

    /// Reads back the on-disk entries at the front of the queue, a batch at a time. Entries
    /// the journal no longer holds are dropped (and logged), so the front entry is in
    /// memory afterwards or gone.
    pub(super) fn load_front(&mut self) {
        let Some(store) = self.store.clone() else {
            return;
        };
        let (mut ids, mut positions, mut bytes) = (Vec::new(), Vec::new(), 0);
        for e in self.entries.iter() {
            if ids.len() >= LOAD_BATCH || bytes >= LOAD_BATCH_BYTES {
                break;
            }
            if let Some(part) = e.item.on_disk_part() {
                // An id of 0 is never a store's: the load answers `None`, the entry goes.
                ids.push(part.stand_in.store_id);
                positions.push(e.position);
                bytes += part.stand_in.size();
            }
        }
        if ids.is_empty() {
            return;
        }
        let mut loaded = store.journal.load(&ids).into_iter();
        let mut lost = Vec::new();
        let mut gained = Vec::new();
        let mut wanted = positions.iter().peekable();
        for e in self.entries.iter_mut() {
            let Some(&&p) = wanted.peek() else {
                break;
            };
            if e.position != p {
                continue;
            }
            wanted.next();
            let got = loaded.next().flatten();
            let Some(part) = e.item.on_disk_part() else {
                continue;
            };
            let redelivery = e.redelivery();
            match got {
                Some(m) => {
                    let message = part.restore(m);
                    gained.push(message.size());
                    e.item = Item::Resident {
                        message,
                        redelivery,
                    };
                }
                None => lost.push(e.position),
            }
        }
        for size in gained {
            self.count_read_back(size);
        }
        for position in lost {
            tracing::error!(
                position,
                "the journal lost a queued message's content; dropping it"
            );
            if let Some(e) = self.entries.remove_position(position) {
                self.account_out(&e);
            }
        }
    }

    /// Makes `message`, the content of the on-disk entry at `position` already read back
    /// (`content`), that entry's content in memory: a message taken from behind the front
    /// (a consumer's filter matched it, or it is the first of a group a consumer takes).
    /// False if no such entry is on disk.
    pub(super) fn keep_loaded(&mut self, position: u64, message: Message) -> bool {
        let Some(e) = self.entries.get_mut(position).filter(|e| e.on_disk()) else {
            return false;
        };
        let size = message.size();
        let redelivery = e.redelivery();
        e.item = Item::Resident {
            message,
            redelivery,
        };
        self.count_read_back(size);
        true
    }

    /// Accounts for `size` bytes of content read back into memory.
    fn count_read_back(&mut self, size: u64) {
        self.on_disk_bytes = self.on_disk_bytes.saturating_sub(size);
        self.meter.add(self.shard, size);
        if let Some(b) = &self.offload {
            self.resident += size;
            b.resident.fetch_add(size, Ordering::Relaxed);
        }
    }
}

/// Reads one on-disk entry's message back from the journal.
pub(super) fn load_one(store: Option<&QueueStore>, e: &Entry) -> Option<Message> {
    let part = match &e.item {
        Item::OnDisk { .. } => e.item.on_disk_part()?,
        Item::Resident { message, .. } => return Some(message.clone()),
    };
    let m = store?
        .journal
        .load(&[part.stand_in.store_id])
        .pop()
        .flatten()?;
    Some(part.restore(m))
}
