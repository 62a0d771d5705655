//! Everything a queue guards with its one mutex: the FIFO, settlement records, consumers and
//! their credit. Dispatch runs here, under that lock, so a publish or a credit grant never needs
//! a second lock to hand messages to a consumer.

use std::collections::HashMap;
use std::hash::BuildHasherDefault;
use std::sync::Arc;

mod entry;
mod grouped;
mod offload;

#[cfg(test)]
pub(crate) use entry::StandIn;
pub(crate) use entry::{Entry, Item, Redelivery};
pub(crate) use offload::OffloadBudget;

use crate::alarm::MemoryMeter;
use crate::id_hash::IdHasher;
use crate::journal::JournalTx;
use crate::limits::LimitScope;
use crate::message::{now_ms, HeaderMatch, Message};
use crate::queue::alerts::Alerts;
use crate::queue::consumer::Consumer;
use crate::queue::entries::Entries;
use crate::queue::features::Features;
use crate::queue::graveyard::Graveyard;
use crate::queue::groups::Groups;
use crate::queue::outbox::{Delivery, OutboxItem};
use crate::queue::timed_delete::TimedDelete;
use crate::queue::QueueStore;
use crate::queue::{HeldPublisher, Queue};
use crate::stats::QueueCounters;
use crate::value::HeaderValue;
use crate::{ConnectionId, ConsumerId, OwnerId};

/// An acquired message not yet accepted, released or rejected. Tracked so that settling twice,
/// or releasing something never acquired, cannot corrupt counters or duplicate a message.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Unsettled {
    pub(crate) size: u64,
    pub(crate) redelivery: Redelivery,
    /// Its priority, for a ring that drops acquired messages too (`ring_drop`).
    pub(crate) priority: u8,
    /// The message's store id, 0 if it is not journaled on this queue.
    pub(crate) stored: u64,
}

/// Most steps the walks of one dispatch pass take together, a step being one entry a
/// browser or a consumer with a filter looks at; see [`QueueState::dispatch`]. About a
/// millisecond of selector evaluations here.
pub(crate) const WALK_STEPS: u32 = 4096;
/// Steps that reading an entry back from the journal costs a walk (a `pread`, against an
/// evaluation in memory).
const DISK_STEPS: u32 = 16;

/// What is left of one dispatch pass's [`WALK_STEPS`], shared by its walks. The consumer
/// that flushes or drains (`complete_for`) walks unbounded.
struct Walks {
    left: u32,
    complete_for: Option<ConsumerId>,
}

impl Walks {
    fn new(complete_for: Option<ConsumerId>) -> Walks {
        Walks {
            left: WALK_STEPS,
            complete_for,
        }
    }

    /// Takes the steps for consumer `id` to look at one entry; false when the pass has used
    /// them up.
    #[inline]
    fn step(&mut self, id: ConsumerId, on_disk: bool) -> bool {
        if self.complete_for == Some(id) {
            return true;
        }
        let cost = if on_disk { DISK_STEPS } else { 1 };
        match self.left.checked_sub(cost) {
            Some(left) => {
                self.left = left;
                true
            }
            None => false,
        }
    }
}

/// Reads the clock at most once per pass, and only if some message has a TTL.
#[derive(Default)]
pub(crate) struct Clock(Option<u64>);

impl Clock {
    pub(crate) fn expired(&mut self, expires_at: Option<u64>) -> bool {
        match expires_at {
            None => false,
            Some(at) => at <= *self.0.get_or_insert_with(now_ms),
        }
    }
}

#[derive(Debug)]
pub(crate) struct QueueState {
    pub(crate) entries: Entries,
    /// Starts at 1 so a browse cursor of 0 means "seen nothing".
    next_position: u64,
    queued_bytes: u64,
    /// Their bodies alone, for RabbitMQ's byte limits.
    queued_body_bytes: u64,
    /// Positions are broker-assigned, so the cheap id hash is safe here.
    unsettled: HashMap<u64, Unsettled, BuildHasherDefault<IdHasher>>,
    unsettled_bytes: u64,
    /// Queued entries carrying a TTL; lets the periodic expiry sweep skip TTL-free queues.
    expiring: usize,
    pub(crate) consumers: Vec<Consumer>,
    /// How many of `consumers` are [`Consumer::is_filtered_acquirer`], so queues without
    /// any skip their walk in one test.
    filtered_acquirers: usize,
    next_rr: usize,
    single_active: bool,
    pub(crate) owner: Option<OwnerId>,
    /// The owner's connection (see `no_local`).
    pub(crate) owner_connection: ConnectionId,
    pub(crate) had_consumers: bool,
    /// A timed auto-delete waiting to happen (see `timed_delete`).
    pub(crate) timed_delete: Option<TimedDelete>,
    /// The last number a sequencing queue gave (see `sequence`).
    pub(crate) sequence: u32,
    /// A 0-10 alternate exchange takes acquired messages too when the queue is deleted
    /// (qpidd, QPID-3481), so such a queue keeps them in `acquired`, by position (beside
    /// `unsettled`, which other queues keep small).
    pub(crate) keep_acquired: bool,
    acquired: HashMap<u64, Message, BuildHasherDefault<IdHasher>>,
    pub(crate) deleted: bool,
    /// When the queue was last declared, consumed from (basic.get) or lost its last consumer,
    /// in milliseconds since the epoch: what `x-expires` counts from.
    pub(crate) last_used: u64,
    /// Expired messages kept for the dead-letter exchange (RabbitMQ semantics, asked for
    /// with `x-dead-letter-exchange`); `Queue::take_expired` hands them out, to be routed
    /// outside the lock. Without it expired messages are dropped, as qpidd does.
    keep_expired: bool,
    pub(crate) expired: Vec<Message>,
    /// A last-value queue's index (qpidd's `qpid.last_value_queue_key`).
    last_value: Option<LastValue>,
    /// The broker's count of bytes held by queues; this queue writes its own shard.
    meter: Arc<MemoryMeter>,
    shard: usize,
    /// Set for a durable queue with a journal. Dequeues are appended under the queue lock,
    /// so the journal sees them in the queue's own order.
    pub(crate) store: Option<QueueStore>,
    /// Set while a transaction's commit holds the lock: its dequeues belong to it.
    pub(crate) journal_tx: Option<Arc<JournalTx>>,
    /// Set for a durable queue when the broker keeps persistent contents within a budget.
    pub(crate) offload: Option<Arc<OffloadBudget>>,
    /// Queued bytes counted in that budget, and queued bytes whose content is on disk only.
    resident: u64,
    on_disk_bytes: u64,
    /// For management: what happened to the queue's messages so far.
    pub(crate) counters: QueueCounters,
    /// Publishers held by this queue's backlog, let go as it drains (see `hold`).
    pub(crate) held: Vec<HeldPublisher>,
    /// Accepted messages for the next publish to free (see `graveyard`).
    pub(crate) graveyard: Graveyard,
    /// qpidd's threshold events, for a queue that asked for them.
    pub(crate) alerts: Option<Box<Alerts>>,
    /// qpidd's message groups, for a queue with `qpid.group_header_key`.
    pub(crate) groups: Option<Box<Groups>>,
}

/// How a settled message left the queue, for the counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Settled {
    Accepted,
    Rejected,
    /// Taken from its consumer by qpidd's ring to make room.
    Overflowed,
}

impl Drop for QueueState {
    fn drop(&mut self) {
        // Whatever a dropped queue still holds is no longer held.
        self.meter
            .sub(self.shard, self.in_memory() + self.unsettled_bytes);
        self.offload_clear();
    }
}

/// Which queued message is the latest for each value of the key header. Positions of
/// messages that left the queue meanwhile no longer match anything, and are pruned now and
/// then.
#[derive(Debug)]
struct LastValue {
    key: String,
    latest: HashMap<Vec<u8>, u64>,
}

/// The key's value in a form that compares as qpidd compares them (its text form).
fn key_bytes(v: &HeaderValue) -> Option<Vec<u8>> {
    match v {
        HeaderValue::Str(s) => Some(s.as_bytes().to_vec()),
        HeaderValue::Bytes(b) => Some(b.to_vec()),
        HeaderValue::Int(i) => Some(i.to_string().into_bytes()),
        HeaderValue::UInt(u) => Some(u.to_string().into_bytes()),
        HeaderValue::Bool(b) => Some(b.to_string().into_bytes()),
        HeaderValue::Float(f) => Some(f.to_string().into_bytes()),
        // A list or table as a last-value key would need a text form qpidd never gave one.
        HeaderValue::Void | HeaderValue::List(_) | HeaderValue::Map(_) | HeaderValue::Other => None,
    }
}

impl QueueState {
    pub(crate) fn new(
        owner: Option<OwnerId>,
        features: &Features,
        meter: Arc<MemoryMeter>,
        shard: usize,
    ) -> QueueState {
        QueueState {
            entries: match &features.fairshare {
                Some(limits) => Entries::new(features.priorities).with_fairshare(limits.clone()),
                None => Entries::new(features.priorities),
            },
            next_position: 1,
            queued_bytes: 0,
            queued_body_bytes: 0,
            unsettled: HashMap::default(),
            unsettled_bytes: 0,
            expiring: 0,
            consumers: Vec::new(),
            filtered_acquirers: 0,
            next_rr: 0,
            single_active: features.single_active_consumer,
            owner,
            owner_connection: 0,
            had_consumers: false,
            timed_delete: None,
            sequence: 0,
            keep_acquired: false,
            acquired: HashMap::default(),
            deleted: false,
            last_used: now_ms(),
            keep_expired: features.dead_letter,
            expired: Vec::new(),
            last_value: features.last_value_key.clone().map(|key| LastValue {
                key,
                latest: HashMap::new(),
            }),
            meter,
            shard,
            store: None,
            journal_tx: None,
            offload: None,
            resident: 0,
            on_disk_bytes: 0,
            counters: QueueCounters::default(),
            held: Vec::new(),
            graveyard: Graveyard::default(),
            alerts: None,
            groups: features.group_key.clone().map(|k| Box::new(Groups::new(k))),
        }
    }

    /// Queued bytes whose content is in memory.
    pub(crate) fn in_memory(&self) -> u64 {
        self.queued_bytes.saturating_sub(self.on_disk_bytes)
    }

    /// The message left the queue for good: journal its dequeue if the store holds it here.
    pub(crate) fn forget(&self, m: &Message) {
        if let Some(id) = m.store_id() {
            self.forget_ids(&[id]);
        }
    }

    fn forget_entry(&self, e: &Entry) {
        if let Some(id) = e.store_id() {
            self.forget_ids(&[id]);
        }
    }

    /// Nothing for a deleted queue: its deletion's record dropped all its messages, and a
    /// cluster's replicated queue taken down with a leadership lives on in the replica, whose
    /// next leader still has the message.
    pub(crate) fn forget_ids(&self, ids: &[u64]) {
        if self.deleted {
            return;
        }
        if let (Some(store), false) = (&self.store, ids.is_empty()) {
            store
                .journal
                .dequeue(store.id, ids, self.journal_tx.as_deref());
        }
    }

    /// An entry its subscription's selector does not match has been taken off the queue.
    fn discard_unselected(&mut self, e: Entry) {
        self.forget_entry(&e);
        if !e.on_disk() {
            self.meter.sub(self.shard, e.size());
        }
        self.counters.unselected += 1;
    }

    /// An expired entry has been taken off the queue: keep it for dead-lettering or drop it.
    fn expire(&mut self, e: Entry) {
        // Read before the journal lets go of it.
        let kept = if self.keep_expired {
            self.content(&e)
        } else {
            None
        };
        self.forget_entry(&e);
        if !e.on_disk() {
            self.meter.sub(self.shard, e.size());
        }
        self.expired.extend(kept);
        self.counters.expired += 1;
    }

    /// Messages and bytes counted against limits: queued, plus acquired-but-unsettled ones
    /// when `scope` counts them; the bytes as the scope counts them (see [`crate::QueueLimits`]).
    pub(crate) fn depth(&self, scope: LimitScope) -> (u64, u64) {
        match scope {
            LimitScope::Depth => (
                (self.entries.len() + self.unsettled.len()) as u64,
                self.queued_bytes + self.unsettled_bytes,
            ),
            LimitScope::Ready => (self.entries.len() as u64, self.queued_body_bytes),
        }
    }

    pub(crate) fn queued_bytes(&self) -> u64 {
        self.queued_bytes
    }

    pub(crate) fn unsettled_count(&self) -> usize {
        self.unsettled.len()
    }

    pub(crate) fn unsettled_bytes(&self) -> u64 {
        self.unsettled_bytes
    }

    pub(crate) fn on_disk_bytes(&self) -> u64 {
        self.on_disk_bytes
    }

    pub(crate) fn push(&mut self, message: Message) {
        self.counters.enqueued += 1;
        self.counters.enqueued_bytes += message.size();
        self.push_entry(message, Redelivery::default(), None);
        self.check_alerts();
    }

    /// Tells a queue's threshold alerts its depth after a change (nothing to do for the
    /// many queues without thresholds). Removals that do not call it are seen at the next
    /// one that does, as the depth is read afresh.
    #[inline]
    pub(crate) fn check_alerts(&mut self) {
        if let Some(alerts) = self.alerts.as_deref_mut() {
            let messages = (self.entries.len() + self.unsettled.len()) as u64;
            alerts.check(messages, self.queued_bytes + self.unsettled_bytes);
        }
    }

    /// A message recovered from the store: it may have been delivered before the restart.
    /// With `on_disk_body`, `message` is a stand-in ([`Message::stub`]) for one the store
    /// kept on disk, whose body had that many bytes.
    pub(crate) fn push_recovered(
        &mut self,
        message: Message,
        on_disk_body: Option<u64>,
        returns: u32,
    ) {
        self.push_entry(message, Redelivery::recovered(returns), on_disk_body);
    }

    fn push_entry(&mut self, message: Message, redelivery: Redelivery, on_disk_body: Option<u64>) {
        let position = self.next_position;
        self.next_position += 1;
        if self.last_value.is_some() {
            self.replace_last_value(&message, position);
        }
        if self.groups.is_some() {
            self.list_in_group(position, &message);
        }
        let item = if let Some(body_size) = on_disk_body {
            Item::on_disk(&message, body_size, redelivery)
        } else if self.offload.is_none() {
            Item::Resident {
                message,
                redelivery,
            }
        } else {
            self.within_budget(message, redelivery)
        };
        let e = Entry { position, item };
        if !e.on_disk() {
            self.meter.add(self.shard, e.size());
        }
        self.account_in(&e);
        self.entries.push_back(e);
    }

    /// A last-value queue drops the queued message this one supersedes (same key value);
    /// one already acquired by a consumer stays with it.
    fn replace_last_value(&mut self, message: &Message, position: u64) {
        let Some(lv) = self.last_value.as_mut() else {
            return;
        };
        let Some(value) = message
            .headers()
            .and_then(|h| h.get(&lv.key))
            .and_then(key_bytes)
        else {
            return;
        };
        let Some(old) = lv.latest.insert(value, position) else {
            // A new key. Keys of messages that left meanwhile are dropped once they
            // outnumber those still held, so the index follows the queue, not its history.
            let held = self.entries.len() + self.unsettled.len();
            if lv.latest.len() > 2 * held + 64 {
                let (entries, unsettled) = (&self.entries, &self.unsettled);
                lv.latest.retain(|_, p| {
                    *p == position || unsettled.contains_key(p) || entries.contains(*p)
                });
            }
            return;
        };
        if let Some(e) = self.entries.remove_position(old) {
            self.account_out(&e);
            if !e.on_disk() {
                self.meter.sub(self.shard, e.size());
            }
            self.forget_entry(&e);
            self.counters.replaced += 1;
        }
    }

    #[cfg(test)]
    pub(crate) fn last_value_keys(&self) -> usize {
        self.last_value.as_ref().map_or(0, |lv| lv.latest.len())
    }

    fn account_in(&mut self, e: &Entry) {
        self.queued_bytes += e.size();
        self.queued_body_bytes += e.body_size();
        if e.expires_at().is_some() {
            self.expiring += 1;
        }
        if e.on_disk() || self.offload.is_some() {
            self.offload_in(e);
        }
    }

    fn account_out(&mut self, e: &Entry) {
        self.queued_bytes = self.queued_bytes.saturating_sub(e.size());
        self.queued_body_bytes = self.queued_body_bytes.saturating_sub(e.body_size());
        if e.expires_at().is_some() {
            self.expiring = self.expiring.saturating_sub(1);
        }
        if e.on_disk() || self.offload.is_some() {
            self.offload_out(e);
        }
    }

    #[inline(always)]
    fn take_next(&mut self) -> Option<Entry> {
        let e = self.entries.pop_front()?;
        self.account_out(&e);
        Some(e)
    }

    /// Makes sure the front entry's content is in memory, reading a batch back from the
    /// journal if need be (what the journal lost is dropped). False only without a journal.
    fn ready_front(&mut self) -> bool {
        while self.entries.front().is_some_and(Entry::on_disk) {
            if self.store.is_none() {
                return false;
            }
            self.load_front();
        }
        true
    }

    /// Puts a message back in position order, ahead of anything newer.
    pub(crate) fn insert_sorted(&mut self, entry: Entry) {
        if !entry.on_disk() {
            self.meter.add(self.shard, entry.size());
        }
        if self.filtered_acquirers > 0 {
            // Filtered consumers that walked past this place look at it again.
            let behind = entry.position.saturating_sub(1);
            for c in self
                .consumers
                .iter_mut()
                .filter(|c| c.is_filtered_acquirer())
            {
                c.cursor = c.cursor.min(behind);
            }
        }
        if let (Some(groups), Some(message)) = (self.groups.as_deref_mut(), entry.message()) {
            let group = groups.group_of(message);
            groups.heads.put_back(entry.position, &group);
        }
        self.account_in(&entry);
        self.entries.insert_sorted(entry);
    }

    /// Records an acquisition, by consumer `by` (0: a get, or an acquire after browsing).
    fn mark_unsettled(&mut self, e: &Entry, by: ConsumerId) {
        if self.groups.is_some() {
            self.hold_group(e, by);
        }
        self.counters.delivered += 1;
        let (size, redelivery) = (e.size(), e.redelivery());
        self.counters.redelivered += u64::from(redelivery.is_redelivered());
        self.unsettled_bytes += size;
        self.unsettled.insert(
            e.position,
            Unsettled {
                size,
                redelivery,
                priority: e.priority(),
                stored: if self.store.is_some() {
                    e.store_id().unwrap_or(0)
                } else {
                    0
                },
            },
        );
        if self.keep_acquired {
            self.keep_acquired_message(e);
        }
    }

    /// Forgets an acquired message; `None` if it was not acquired (or already settled).
    /// Out of line, so queues without a 0-10 alternate exchange pay one branch for it.
    #[cold]
    #[inline(never)]
    fn keep_acquired_message(&mut self, e: &Entry) {
        // A stand-in is not the message; such a (browsed, rare) one stays behind.
        if let Some(m) = e.message() {
            self.acquired.insert(e.position, m.clone());
        }
    }

    /// [`QueueState::settle`] for a queue that keeps acquired messages: out of line, and
    /// taken before anything else, so other queues' settlements pay one branch for it.
    #[cold]
    #[inline(never)]
    fn settle_kept(&mut self, position: u64) -> Option<Unsettled> {
        self.acquired.remove(&position);
        self.settle_record(position)
    }

    pub(crate) fn settle(&mut self, position: u64) -> Option<Unsettled> {
        if self.keep_acquired {
            return self.settle_kept(position);
        }
        self.settle_record(position)
    }

    #[inline(always)]
    fn settle_record(&mut self, position: u64) -> Option<Unsettled> {
        let u = self.unsettled.remove(&position)?;
        if let Some(groups) = self.groups.as_deref_mut() {
            groups.let_go(position);
        }
        self.unsettled_bytes = self.unsettled_bytes.saturating_sub(u.size);
        self.meter.sub(self.shard, u.size);
        Some(u)
    }

    /// The store id of acquired message `position`, if it is journaled on this queue.
    pub(crate) fn unsettled_store_id(&self, position: u64) -> Option<u64> {
        self.unsettled
            .get(&position)
            .map(|u| u.stored)
            .filter(|id| *id != 0)
    }

    /// Settles an acquired message that leaves the queue (accepted or rejected).
    pub(crate) fn settle_done(&mut self, position: u64, how: Settled) -> Option<Unsettled> {
        let u = self.settle(position)?;
        self.left(&u, how);
        Some(u)
    }

    /// Accounts for `u`, already settled, leaving the queue: counted, and its dequeue
    /// journaled.
    pub(crate) fn left(&mut self, u: &Unsettled, how: Settled) {
        self.count_settled(how);
        if u.stored != 0 {
            self.forget_ids(&[u.stored]);
        }
    }

    /// [`QueueState::settle_done`] without the journal's dequeue record: the caller journals
    /// `stored` (with others) before it lets go of the lock.
    pub(crate) fn settle_counted(&mut self, position: u64, how: Settled) -> Option<Unsettled> {
        let u = self.settle(position)?;
        self.count_settled(how);
        Some(u)
    }

    fn count_settled(&mut self, how: Settled) {
        match how {
            Settled::Accepted => self.counters.acked += 1,
            Settled::Rejected => self.counters.rejected += 1,
            Settled::Overflowed => self.counters.overflowed += 1,
        }
        self.check_alerts();
    }

    /// Browse-then-acquire: succeeds only while the message is still queued.
    pub(crate) fn acquire_at(&mut self, position: u64, clock: &mut Clock) -> bool {
        let Some(e) = self.entries.remove_position(position) else {
            return false;
        };
        self.account_out(&e);
        if clock.expired(e.expires_at()) {
            self.expire(e);
            return false;
        }
        if e.on_disk() {
            // Acquired bytes count as held until settled; the browser holds the content.
            self.meter.add(self.shard, e.size());
        }
        self.mark_unsettled(&e, 0);
        true
    }

    /// Removes the next entry without acquiring it (drop-head overflow; in a priority queue
    /// the head is the highest-priority message, as RabbitMQ drops it). Its content, when
    /// `keep` asks for it (a dead letter), is read before the journal forgets the message.
    pub(crate) fn pop_front(&mut self, keep: bool) -> Option<(Message, Option<Message>)> {
        let e = self.take_next()?;
        if !e.on_disk() {
            self.meter.sub(self.shard, e.size());
        }
        self.counters.overflowed += 1;
        let content = if keep { self.content(&e) } else { None };
        Some((e.into_message(), content))
    }

    /// qpidd's ring (`LimitPolicy::Ring`) makes room for a message of `priority`: drops the
    /// oldest message of the lowest level up to its level, available or acquired. False if
    /// there is none.
    pub(crate) fn ring_drop(&mut self, priority: u8) -> bool {
        let level = self.entries.level_of(priority);
        let available = self.entries.lowest_up_to(level);
        let acquired = self
            .unsettled
            .iter()
            .map(|(p, u)| (self.entries.level_of(u.priority), *p))
            .filter(|(l, _)| *l <= level)
            .min();
        match (available, acquired) {
            (Some(a), Some(u)) if u < a => self.settle_done(u.1, Settled::Overflowed).is_some(),
            (None, Some(u)) => self.settle_done(u.1, Settled::Overflowed).is_some(),
            (Some((_, p)), _) => match self.entries.remove_position(p) {
                Some(e) => {
                    self.account_out(&e);
                    if !e.on_disk() {
                        self.meter.sub(self.shard, e.size());
                    }
                    self.forget_entry(&e);
                    self.counters.overflowed += 1;
                    true
                }
                None => false,
            },
            (None, None) => false,
        }
    }

    /// Acquires the front entry, dropping expired ones before it.
    pub(crate) fn take_front(&mut self) -> Option<Entry> {
        let mut clock = Clock::default();
        loop {
            if !self.ready_front() {
                return None;
            }
            let entry = self.take_next()?;
            if !clock.expired(entry.expires_at()) {
                self.mark_unsettled(&entry, 0);
                return Some(entry);
            }
            self.expire(entry);
        }
    }

    /// What a get takes (0-9-1 basic.get, management's get): the front, or on a message-group
    /// queue the first message whose group no consumer holds (gets hold their groups
    /// too, as owner 0, so two gets in a row take a group's messages in order).
    pub(crate) fn take_for_get(&mut self) -> Option<Entry> {
        if self.groups.is_none() {
            return self.take_front();
        }
        self.take_grouped_for_get()
    }

    /// Takes expired messages off the head (where RabbitMQ expires them), keeping them for
    /// dead-lettering; returns whether queued messages with an expiry remain.
    pub(crate) fn expire_head(&mut self, now: u64) -> bool {
        while self.entries.front().is_some_and(|e| e.is_expired_at(now)) {
            if let Some(e) = self.take_next() {
                self.expire(e);
            }
        }
        self.expiring > 0
    }

    /// Takes up to `max` available messages off the front, for management, only those
    /// `filter` matches if there is one: dropped (a purge of a count), or with `reroute`
    /// returned to be routed elsewhere, their contents read back first if kept on disk (what
    /// the journal lost is skipped). Either way the journal forgets them here.
    pub(crate) fn remove_front(
        &mut self,
        max: u64,
        reroute: bool,
        filter: Option<&HeaderMatch>,
    ) -> (u64, Vec<Message>) {
        let mut taken = Vec::new();
        let mut n = 0;
        let mut cursor = 0;
        while n < max {
            let e = match filter {
                None => self.take_next(),
                Some(filter) => self.take_next_matching(filter, &mut cursor),
            };
            let Some(e) = e else { break };
            if reroute {
                taken.extend(self.content(&e));
            }
            self.forget_entry(&e);
            if !e.on_disk() {
                self.meter.sub(self.shard, e.size());
            }
            n += 1;
        }
        if reroute {
            self.counters.rerouted += n;
        } else {
            self.counters.purged += n;
        }
        self.check_alerts();
        (n, taken)
    }

    /// The first available message after `cursor` that `filter` matches, taken off the
    /// queue; `cursor` moves past what was looked at.
    fn take_next_matching(&mut self, filter: &HeaderMatch, cursor: &mut u64) -> Option<Entry> {
        let position = loop {
            let e = self.entries.after(*cursor).next()?;
            *cursor = e.position;
            let hit = match e.message() {
                Some(m) => filter.matches(m),
                None => self.content(e).is_some_and(|m| filter.matches(&m)),
            };
            if hit {
                break e.position;
            }
        };
        let e = self.entries.remove_position(position)?;
        self.account_out(&e);
        Some(e)
    }

    pub(crate) fn purge(&mut self) -> u64 {
        let n = self.entries.len() as u64;
        if self.store.is_some() {
            let ids: Vec<u64> = self.entries.iter().filter_map(Entry::store_id).collect();
            self.forget_ids(&ids);
        }
        self.entries.clear();
        if let Some(groups) = self.groups.as_deref_mut() {
            groups.heads.clear();
        }
        self.meter.sub(self.shard, self.in_memory());
        self.offload_clear();
        self.queued_bytes = 0;
        self.queued_body_bytes = 0;
        self.expiring = 0;
        self.counters.purged += n;
        self.check_alerts();
        n
    }

    pub(crate) fn purge_expired(&mut self, now: u64) -> u64 {
        if self.expiring == 0 {
            return 0;
        }
        let before = self.entries.len();
        let keep = self.keep_expired;
        let mut gone = Vec::new();
        self.entries.retain(|e| {
            let live = !e.is_expired_at(now);
            if !live {
                gone.push(e.clone());
            }
            live
        });
        // Contents of dead letters are read before the journal lets go of them.
        if keep {
            let kept: Vec<Message> = gone.iter().filter_map(|e| self.content(e)).collect();
            self.expired.extend(kept);
        }
        if self.store.is_some() {
            let dequeued: Vec<u64> = gone.iter().filter_map(Entry::store_id).collect();
            self.forget_ids(&dequeued);
        }
        let memory_before = self.in_memory();
        self.queued_bytes = self.entries.iter().map(Entry::size).sum();
        self.queued_body_bytes = self.entries.iter().map(Entry::body_size).sum();
        self.offload_recount();
        self.meter
            .sub(self.shard, memory_before.saturating_sub(self.in_memory()));
        self.expiring = self
            .entries
            .iter()
            .filter(|e| e.expires_at().is_some())
            .count();
        let gone = (before - self.entries.len()) as u64;
        self.counters.expired += gone;
        self.check_alerts();
        gone
    }

    /// Empties the queue for deletion. `keep`: the messages will be routed to the alternate
    /// exchange, so contents on disk are read back now, while the journal holds them. A
    /// queue that keeps acquired messages (`keep_acquired`) hands them over too, in queue
    /// order among the others, and forgets them, so settling them later does nothing (qpidd
    /// reroutes "even acquired messages"); other acquired messages stay tracked, so their
    /// later release can still be routed.
    pub(crate) fn drain_for_delete(&mut self, keep: bool) -> (Vec<Message>, Vec<Consumer>) {
        self.deleted = true;
        // Dropped under the lock: deletion is rare, and nothing else waits for this queue.
        drop(self.clear_graveyard());
        self.meter.sub(self.shard, self.in_memory());
        self.offload_clear();
        self.queued_bytes = 0;
        self.queued_body_bytes = 0;
        self.expiring = 0;
        let entries = self.entries.drain();
        if let Some(groups) = self.groups.as_deref_mut() {
            groups.heads.clear();
        }
        let mut messages: Vec<(u64, Message)> = entries
            .into_iter()
            .filter_map(|e| {
                let position = e.position;
                if keep && e.on_disk() {
                    self.content(&e).map(|m| (position, m))
                } else {
                    Some((position, e.into_message()))
                }
            })
            .collect();
        if !self.acquired.is_empty() {
            for (p, m) in std::mem::take(&mut self.acquired) {
                self.settle(p);
                messages.push((p, m));
            }
            messages.sort_by_key(|(p, _)| *p);
        }
        let messages = messages.into_iter().map(|(_, m)| m).collect();
        self.filtered_acquirers = 0;
        (messages, std::mem::take(&mut self.consumers))
    }

    /// Whether every consumer takes only what its filter matches.
    #[inline]
    pub(crate) fn only_selective_consumers(&self) -> bool {
        self.filtered_acquirers == self.consumers.len()
    }

    /// Keeps `filtered_acquirers` in step after consumers come or go.
    pub(crate) fn count_filtered(&mut self) {
        self.filtered_acquirers = self
            .consumers
            .iter()
            .filter(|c| c.is_filtered_acquirer())
            .count();
    }

    pub(crate) fn consumer_mut(&mut self, id: u64) -> Option<&mut Consumer> {
        self.consumers.iter_mut().find(|c| c.spec.id == id)
    }

    /// Hands out what credit allows. Browsers go first so they see messages before competing
    /// acquirers take them; acquirers share round-robin, starting after the last one served.
    /// The walks that pass over messages (browsers, consumers with a filter) stop after
    /// [`WALK_STEPS`] between them and resume from their consumers' connections (see
    /// [`Consumer::walk_cut`]), so selectors over a deep queue never hold its lock for long.
    pub(crate) fn dispatch(&mut self, queue: &Arc<Queue>) {
        self.dispatch_walking(queue, None);
    }

    /// [`QueueState::dispatch`] with no bound on `consumer`'s walk: 0-10 message.flush and
    /// 1.0 drain must deliver everything its credit allows before they answer, or a match
    /// deep in the queue would look like none. Each entry still costs it one look: the
    /// cursor keeps what was passed over.
    pub(crate) fn dispatch_complete(&mut self, queue: &Arc<Queue>, consumer: ConsumerId) {
        self.dispatch_walking(queue, Some(consumer));
    }

    fn dispatch_walking(&mut self, queue: &Arc<Queue>, complete_for: Option<ConsumerId>) {
        if self.consumers.is_empty() || self.deleted {
            return;
        }
        let mut clock = Clock::default();
        let mut walks = Walks::new(complete_for);
        for c in &mut self.consumers {
            c.begin_pass();
        }
        for ci in 0..self.consumers.len() {
            if self.consumers.get(ci).is_some_and(|c| !c.spec.acquire) {
                self.dispatch_browser(ci, queue, &mut clock, &mut walks);
            }
        }
        if self.groups.is_some() {
            self.dispatch_grouped(queue, &mut clock);
        } else {
            if self.filtered_acquirers > 0 {
                self.dispatch_filtered(queue, &mut clock, &mut walks);
            }
            self.dispatch_acquirers(queue, &mut clock);
        }
        for c in &mut self.consumers {
            c.flush_staged(queue);
        }
    }

    /// The first entry after position `cursor` whose time has not run out (those that ran
    /// out on the way are expired): its position and size.
    fn next_live_after(&mut self, cursor: u64, clock: &mut Clock) -> Option<(u64, u64)> {
        loop {
            let e = self.entries.after(cursor).next()?;
            let (position, size) = (e.position, e.size());
            if !clock.expired(e.expires_at()) {
                return Some((position, size));
            }
            if let Some(e) = self.entries.remove_position(position) {
                self.account_out(&e);
                self.expire(e);
            }
        }
    }

    /// The queued entry at `position`.
    fn entry_at(&self, position: u64) -> Option<&Entry> {
        self.entries.get(position)
    }

    /// Hands `entry`, just taken off the queue, to consumer `ci` (whose credit and window
    /// slot were checked) as an acquired delivery. False if there is no such consumer.
    #[inline]
    fn deliver_acquired(&mut self, ci: usize, entry: Entry, queue: &Arc<Queue>) -> bool {
        let Some(id) = self.consumers.get(ci).map(|c| c.spec.id) else {
            return false;
        };
        self.mark_unsettled(&entry, id);
        let Some(c) = self.consumers.get_mut(ci) else {
            return false;
        };
        c.charge(entry.size());
        c.staged.push(OutboxItem::Deliver(Delivery {
            consumer: id,
            queue: queue.clone(),
            position: entry.position,
            redelivered: entry.redelivered(),
            returns: entry.redelivery().returns(),
            // Resident: dispatch looked at the entry's content under this same lock.
            message: entry.into_message(),
            acquired: true,
            windowed: c.windowed(),
            window_credit: c.window_mode,
        }));
        true
    }

    fn dispatch_browser(
        &mut self,
        ci: usize,
        queue: &Arc<Queue>,
        clock: &mut Clock,
        walks: &mut Walks,
    ) {
        let entries = &self.entries;
        let store = self.store.as_ref();
        let Some(c) = self.consumers.get_mut(ci) else {
            return;
        };
        let mut browsed = 0;
        for e in entries.after(c.cursor) {
            if !walks.step(c.spec.id, e.on_disk()) {
                c.walk_cut = c.has_credit_for(1);
                break;
            }
            if clock.expired(e.expires_at()) {
                c.cursor = e.position;
                continue;
            }
            if !c.has_credit_for(e.size()) {
                break;
            }
            // Browsing leaves the queue as it is: a copy of an on-disk content, read now.
            let message = match e.message() {
                Some(m) => m.clone(),
                None => match offload::load_one(store, e) {
                    Some(m) => m,
                    None => {
                        c.cursor = e.position;
                        continue;
                    }
                },
            };
            if !c.wants(&message) {
                c.cursor = e.position;
                continue;
            }
            // Only for a delivery that is made: a slot taken for a skipped one never returns.
            if !c.reserve(queue) {
                break;
            }
            c.charge(e.size());
            c.cursor = e.position;
            browsed += 1;
            c.staged.push(OutboxItem::Deliver(Delivery {
                consumer: c.spec.id,
                queue: queue.clone(),
                message,
                position: e.position,
                redelivered: e.redelivered(),
                returns: e.redelivery().returns(),
                acquired: false,
                windowed: c.windowed(),
                window_credit: c.window_mode,
            }));
        }
        self.counters.browsed += browsed;
    }

    fn dispatch_acquirers(&mut self, queue: &Arc<Queue>, clock: &mut Clock) {
        while let Some(front) = self.entries.front() {
            if front.on_disk() {
                if !self.ready_front() {
                    break;
                }
                continue;
            }
            if clock.expired(front.expires_at()) {
                if let Some(e) = self.take_next() {
                    self.expire(e);
                }
                continue;
            }
            let size = front.size();
            let Some(ci) = self.next_acquirer(size, queue) else {
                break;
            };
            let Some(entry) = self.take_next() else {
                break;
            };
            self.next_rr = ci + 1;
            if !self.deliver_acquired(ci, entry, queue) {
                break;
            }
        }
    }

    /// The consumer to take the next message, with its settlement-window slot reserved.
    /// Consumers with a filter are left to [`QueueState::dispatch_filtered`].
    #[inline]
    fn next_acquirer(&self, size: u64, queue: &Arc<Queue>) -> Option<usize> {
        self.next_acquirer_where(size, queue, |c| c.spec.filter.is_none())
    }

    /// As [`QueueState::next_acquirer`], among the consumers that want `message` (message
    /// groups walk the queue themselves, so filtered consumers are served there).
    fn next_acquirer_for(&self, message: &Message, size: u64, queue: &Arc<Queue>) -> Option<usize> {
        self.next_acquirer_where(size, queue, |c| c.wants(message))
    }

    #[inline]
    fn next_acquirer_where(
        &self,
        size: u64,
        queue: &Arc<Queue>,
        eligible: impl Fn(&Consumer) -> bool,
    ) -> Option<usize> {
        if self.single_active {
            // The oldest acquiring consumer is the active one; the others wait their turn.
            let active = self.consumers.iter().position(|c| c.spec.acquire)?;
            return self
                .consumers
                .get(active)
                .is_some_and(|c| c.has_credit_for(size) && eligible(c) && c.reserve(queue))
                .then_some(active);
        }
        let n = self.consumers.len();
        // `find` stops at the first consumer that reserved, so no other takes a slot.
        (0..n).map(|k| (self.next_rr + k) % n).find(|&i| {
            self.consumers.get(i).is_some_and(|c| {
                c.spec.acquire && c.has_credit_for(size) && eligible(c) && c.reserve(queue)
            })
        })
    }

    /// Consumers with a filter (JMS selectors), round-robin: each walks the queue in arrival
    /// order (across priority levels too) from its own cursor, taking what it matches while it has credit and passing
    /// over the rest, which it never looks at again (a released message landing behind the
    /// cursor rewinds it: `insert_sorted`). So a selective consumer costs each message one
    /// evaluation, not one per pass. Runs before the unfiltered consumers, which then take
    /// what is left from the front.
    #[cold]
    fn dispatch_filtered(&mut self, queue: &Arc<Queue>, clock: &mut Clock, walks: &mut Walks) {
        let n = self.consumers.len();
        let active = if self.single_active {
            self.consumers.iter().position(|c| c.spec.acquire)
        } else {
            None
        };
        // Each consumer once per pass, starting after the last one served (before this pass).
        let start = self.next_rr;
        for k in 0..n {
            let ci = (start + k) % n;
            let serves = self.consumers.get(ci).is_some_and(|c| {
                c.is_filtered_acquirer() && (!self.single_active || active == Some(ci))
            });
            if serves && self.walk_filtered(ci, queue, clock, walks) {
                self.next_rr = ci + 1;
            }
        }
    }

    /// One filtered consumer's walk (see [`QueueState::dispatch_filtered`]); true if it
    /// took anything.
    fn walk_filtered(
        &mut self,
        ci: usize,
        queue: &Arc<Queue>,
        clock: &mut Clock,
        walks: &mut Walks,
    ) -> bool {
        let mut took = false;
        loop {
            let Some(c) = self.consumers.get(ci) else {
                return took;
            };
            // A dropping consumer clears what it does not match even without credit, up to
            // its next match, so nothing piles up behind a slow subscriber.
            let drops = c.spec.filter.as_ref().is_some_and(|f| f.drop_unmatched);
            if !drops && !c.has_credit_for(1) {
                return took;
            }
            let Some((position, size)) = self.next_live_after(c.cursor, clock) else {
                return took;
            };
            let (Some(c), Some(e)) = (self.consumers.get(ci), self.entry_at(position)) else {
                return took;
            };
            if !walks.step(c.spec.id, e.on_disk()) {
                if let Some(c) = self.consumers.get_mut(ci) {
                    c.walk_cut = true;
                }
                return took;
            }
            let wanted = match e.message() {
                Some(m) => c.wants(m),
                // On disk: looked at through a copy, which becomes its content if taken.
                None => match self.content(e) {
                    Some(m) if c.wants(&m) => {
                        if !self.keep_loaded(position, m) {
                            return took;
                        }
                        continue;
                    }
                    _ => false,
                },
            };
            if drops && !wanted {
                if let Some(e) = self.entries.remove_position(position) {
                    self.account_out(&e);
                    self.discard_unselected(e);
                }
                continue;
            }
            if !wanted {
                if let Some(c) = self.consumers.get_mut(ci) {
                    c.cursor = position;
                }
                continue;
            }
            if !(c.has_credit_for(size) && c.reserve(queue)) {
                return took;
            }
            let Some(entry) = self.entries.remove_position(position) else {
                return took;
            };
            self.account_out(&entry);
            if let Some(c) = self.consumers.get_mut(ci) {
                c.cursor = position;
            }
            if !self.deliver_acquired(ci, entry, queue) {
                return took;
            }
            took = true;
        }
    }
}
