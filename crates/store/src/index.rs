//! Which records are still needed, and where they are. The same `apply` runs when a record
//! is appended and when recovery reads it back, so the live state after a restart is the
//! state before it.
//!
//! Liveness: a declaration or binding is live until deleted (or its exchange or queue is);
//! a message record is live while some queue still references it, and the latest count of
//! its returns to a queue (`Returned`) while that queue does. Dequeue, delete and unbind
//! records are never live themselves: they only matter while the records they cancel exist,
//! and segments are deleted oldest first, so a cancelling record always outlives what it
//! cancels. A segment with no live record left at the head of the journal can go; one that
//! still holds a few is compacted (its live records appended anew) first.

use std::collections::{BTreeMap, HashMap, HashSet};

use std::hash::BuildHasherDefault;

use ferry_core::{IdHasher, IdMap};

use crate::binding_index::BindingRecords;
use crate::record::{BindingKey, ExchangeBindingKey, PreparedRec, Record};

mod dense;
mod messages;

pub use messages::Messages;

/// Where a frame is: segment, offset of the frame in the file, frame length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Loc {
    pub segment: u64,
    pub offset: u64,
    pub len: u64,
}

/// The frame currently standing for a live object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Live {
    pub loc: Loc,
    pub seq: u64,
}

/// Queues still referencing a message; nearly always one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refs {
    One(u64),
    Many(Vec<u64>),
}

impl Refs {
    fn from_ids(ids: &[u64]) -> Option<Refs> {
        match ids {
            [] => None,
            [one] => Some(Refs::One(*one)),
            many => Some(Refs::Many(many.to_vec())),
        }
    }

    /// Drops `queue`; true if no queue is left.
    fn remove(&mut self, queue: u64) -> bool {
        match self {
            Refs::One(q) => *q == queue,
            Refs::Many(qs) => {
                qs.retain(|q| *q != queue);
                qs.is_empty()
            }
        }
    }

    pub fn contains(&self, queue: u64) -> bool {
        match self {
            Refs::One(q) => *q == queue,
            Refs::Many(qs) => qs.contains(&queue),
        }
    }

    pub fn to_vec(&self) -> Vec<u64> {
        match self {
            Refs::One(q) => vec![*q],
            Refs::Many(qs) => qs.clone(),
        }
    }

    fn retain(&mut self, keep: impl Fn(u64) -> bool) -> bool {
        match self {
            Refs::One(q) => keep(*q),
            Refs::Many(qs) => {
                qs.retain(|q| keep(*q));
                !qs.is_empty()
            }
        }
    }
}

#[derive(Debug, Clone)]
pub struct LiveMessage {
    pub at: Live,
    pub queues: Refs,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SegmentStats {
    /// Bytes of live frames.
    pub live_bytes: u64,
    /// Size of the file.
    pub capacity: u64,
    /// Set once the segment's live records were appended anew: it can be deleted when the
    /// journal is durable up to this point.
    pub compacted_upto: Option<u64>,
    /// The latest record that made a record here dead (a dequeue, a delete, a transaction's
    /// commit). The segment can go only once that record is durable: a dequeue lost in a
    /// crash must find what it dequeued still on disk.
    pub dead_upto: u64,
}

impl SegmentStats {
    /// Whether the segment holds nothing that a restart from the journal durable up to
    /// `durable` could still need.
    pub fn can_go(&self, durable: u64) -> bool {
        self.live_bytes == 0
            && self.dead_upto <= durable
            && self.compacted_upto.is_none_or(|upto| upto <= durable)
    }
}

#[derive(Debug, Default)]
pub struct Index {
    pub exchanges: HashMap<String, Live>,
    pub queues: IdMap<Live>,
    /// By (exchange, queue, key): each binding under it, with its arguments (see
    /// [`kind::BIND_VARIANT`](crate::record::kind::BIND_VARIANT)).
    pub bindings: BindingRecords<(String, u64, String)>,
    /// The same for exchange-to-exchange bindings (see
    /// [`kind::EXCHANGE_BIND_VARIANT`](crate::record::kind::EXCHANGE_BIND_VARIANT)).
    pub exchange_bindings: BindingRecords<ExchangeBindingKey>,
    pub messages: Messages,
    /// Prepared transactions not yet committed or aborted, with where their prepare record
    /// is: that record is live until then.
    pub prepared: HashMap<u64, (PreparedRec, Live)>,
    /// (queue, message) → the count of its latest `Returned` record, and where that is.
    pub returns: Returns,
    pub segments: BTreeMap<u64, SegmentStats>,
    pub live_bytes: u64,
    /// Recovery: queues deleted, swept from message references once at the end.
    deleted_queues: HashSet<u64>,
}

/// See [`Index::returns`]. Keyed by store ids, which the store assigns. `IdHasher` keeps
/// the last id written, so a key hashes by its message id: unique, which is all it needs.
pub type Returns = HashMap<(u64, u64), (u32, Live), BuildHasherDefault<IdHasher>>;

/// Keeps the counts of (queue, message) pairs for which `keep` holds; returns where the
/// others' records are.
fn retain_returns(returns: &mut Returns, keep: impl Fn(u64, u64) -> bool) -> Vec<Live> {
    let mut dropped = Vec::new();
    if !returns.is_empty() {
        returns.retain(|(queue, id), (_, at)| {
            let kept = keep(*queue, *id);
            if !kept {
                dropped.push(*at);
            }
            kept
        });
    }
    dropped
}

fn binding_id(k: &BindingKey) -> (String, u64, String) {
    (k.exchange.clone(), k.queue, k.key.clone())
}

impl Index {
    pub fn add_segment(&mut self, id: u64, capacity: u64) {
        self.segments.entry(id).or_default().capacity = capacity;
    }

    fn account(&mut self, at: Live) {
        if let Some(s) = self.segments.get_mut(&at.loc.segment) {
            s.live_bytes += at.loc.len;
        }
        self.live_bytes += at.loc.len;
    }

    /// The record at `at` is dead from the record numbered `by` on.
    fn unaccount(&mut self, at: Live, by: u64) {
        if let Some(s) = self.segments.get_mut(&at.loc.segment) {
            s.live_bytes = s.live_bytes.saturating_sub(at.loc.len);
            s.dead_upto = s.dead_upto.max(by);
        }
        self.live_bytes = self.live_bytes.saturating_sub(at.loc.len);
    }

    /// Applies a record found at `at`. `recovering` defers the sweep of deleted queues'
    /// message references to [`Index::finish_recovery`] (ids are never reused, so no later
    /// record can refer to a deleted queue).
    pub fn apply(&mut self, rec: &Record, at: Live, recovering: bool) {
        match rec {
            Record::ExchangeDeclare(e) => {
                if let Some(old) = self.exchanges.insert(e.name.clone(), at) {
                    self.unaccount(old, at.seq);
                }
                self.account(at);
            }
            Record::ExchangeDelete(name) => {
                if let Some(old) = self.exchanges.remove(name) {
                    self.unaccount(old, at.seq);
                }
                let mut gone = self.bindings.remove_where(|(ex, _, _)| ex == name);
                let linked = |b: &ExchangeBindingKey| &b.source == name || &b.destination == name;
                gone.extend(self.exchange_bindings.remove_where(linked));
                self.unaccount_all(gone, at.seq);
            }
            Record::QueueDeclare(q) => {
                if let Some(old) = self.queues.insert(q.id, at) {
                    self.unaccount(old, at.seq);
                }
                self.account(at);
            }
            Record::QueueDelete(id) => {
                if let Some(old) = self.queues.remove(id) {
                    self.unaccount(old, at.seq);
                }
                let gone = self.bindings.remove_where(|(_, q, _)| q == id);
                self.unaccount_all(gone, at.seq);
                if recovering {
                    self.deleted_queues.insert(*id);
                } else {
                    self.sweep_messages(|q| q != *id, at.seq);
                }
            }
            Record::Bind(k, args) => {
                let gone = self.bindings.replace(binding_id(k), args, at);
                self.unaccount_all(gone, at.seq);
                self.account(at);
            }
            Record::BindVariant(k, args) => {
                let gone = self.bindings.add(binding_id(k), args, at);
                self.unaccount_all(gone, at.seq);
                self.account(at);
            }
            Record::Unbind(k) => {
                let gone = self.bindings.remove_all(&binding_id(k));
                self.unaccount_all(gone, at.seq);
            }
            Record::UnbindVariant(k, args) => {
                let gone = self.bindings.remove_one(&binding_id(k), args);
                self.unaccount_all(gone, at.seq);
            }
            // Applied as they are appended: in memory the commit always completes. Recovery
            // holds them back until it reads the commit (see `recover::Replay`).
            Record::Message(m) | Record::TxMessage { message: m, .. } => {
                self.message(m.id, &m.queues, at)
            }
            Record::Dequeue { queue, messages }
            | Record::TxDequeue {
                queue, messages, ..
            } => {
                for id in messages {
                    self.dequeue(*queue, *id, at.seq);
                }
            }
            Record::TxCommit(tx) => {
                if let Some((p, old)) = self.prepared.remove(tx) {
                    self.unaccount(old, at.seq);
                    for (queue, id) in p.dequeues {
                        self.dequeue(queue, id, at.seq);
                    }
                }
            }
            Record::TxPrepare(p) => {
                // A later copy (compaction) replaces the earlier one.
                if let Some((_, old)) = self.prepared.insert(p.tx, (p.clone(), at)) {
                    self.unaccount(old, at.seq);
                }
                self.account(at);
            }
            Record::TxAbort(tx) => {
                if let Some((p, old)) = self.prepared.remove(tx) {
                    self.unaccount(old, at.seq);
                    for id in p.messages {
                        self.forget_message(id, at.seq);
                    }
                }
            }
            Record::ExchangeBind(k, args) => {
                let gone = self.exchange_bindings.replace(k.clone(), args, at);
                self.unaccount_all(gone, at.seq);
                self.account(at);
            }
            Record::ExchangeBindVariant(k, args) => {
                let gone = self.exchange_bindings.add(k.clone(), args, at);
                self.unaccount_all(gone, at.seq);
                self.account(at);
            }
            Record::ExchangeUnbind(k) => {
                let gone = self.exchange_bindings.remove_all(k);
                self.unaccount_all(gone, at.seq);
            }
            Record::ExchangeUnbindVariant(k, args) => {
                let gone = self.exchange_bindings.remove_one(k, args);
                self.unaccount_all(gone, at.seq);
            }
            Record::Returned {
                queue,
                message,
                returns,
            } => {
                // Recovery may meet the count before the message: compaction copies a
                // message forward past the counts that followed it. It sweeps counts
                // left without their message at the end.
                if !recovering && !self.is_referenced(*queue, *message) {
                    return;
                }
                if let Some((_, old)) = self.returns.insert((*queue, *message), (*returns, at)) {
                    self.unaccount(old, at.seq);
                }
                self.account(at);
            }
        }
    }

    /// A message record for `queues`; a later record of the same message (a compacted copy)
    /// replaces the earlier one.
    pub fn message(&mut self, id: u64, queues: &[u64], at: Live) {
        let Some(queues) = Refs::from_ids(queues) else {
            return;
        };
        if let Some(old) = self.messages.insert(id, LiveMessage { at, queues }) {
            self.unaccount(old, at.seq);
        }
        self.account(at);
    }

    /// `queue` no longer references message `id`, from the record numbered `by` on.
    pub fn dequeue(&mut self, queue: u64, id: u64, by: u64) {
        if let Some(at) = self.messages.dequeue(id, queue) {
            self.unaccount(at, by);
        }
        if !self.returns.is_empty() {
            if let Some((_, at)) = self.returns.remove(&(queue, id)) {
                self.unaccount(at, by);
            }
        }
    }

    /// How many times message `id` came back to `queue`, as far as the journal says.
    pub fn returns_of(&self, queue: u64, id: u64) -> u32 {
        if self.returns.is_empty() {
            return 0;
        }
        self.returns.get(&(queue, id)).map_or(0, |(n, _)| *n)
    }

    /// Message `id` is gone from every queue, from the record numbered `by` on.
    pub fn forget_message(&mut self, id: u64, by: u64) {
        let queues = self.messages.get(id).map(|m| m.queues.to_vec());
        for queue in queues.unwrap_or_default() {
            self.dequeue(queue, id, by);
        }
    }

    /// Whether a dequeue of `id` from `queue` would change anything.
    pub fn is_referenced(&self, queue: u64, id: u64) -> bool {
        self.messages.is_referenced(id, queue)
    }

    /// A binding's live record at (`segment`, `seq`) was copied to `to` (compaction).
    pub fn relocate_binding(&mut self, k: &BindingKey, segment: u64, seq: u64, to: Live) {
        let old = self.bindings.relocate(&binding_id(k), segment, seq, to);
        self.relocated(old, to);
    }

    /// The same for an exchange-to-exchange binding.
    pub fn relocate_exchange_binding(
        &mut self,
        k: &ExchangeBindingKey,
        segment: u64,
        seq: u64,
        to: Live,
    ) {
        let old = self.exchange_bindings.relocate(k, segment, seq, to);
        self.relocated(old, to);
    }

    fn relocated(&mut self, old: Option<Live>, to: Live) {
        if let Some(old) = old {
            self.unaccount(old, to.seq);
            self.account(to);
        }
    }

    fn unaccount_all(&mut self, gone: impl IntoIterator<Item = Live>, by: u64) {
        for old in gone {
            self.unaccount(old, by);
        }
    }

    /// Keeps only references to queues for which `keep` holds; messages left without any
    /// die.
    fn sweep_messages(&mut self, keep: impl Fn(u64) -> bool, by: u64) {
        for (_, at) in self.messages.sweep(&keep) {
            self.unaccount(at, by);
        }
        for at in retain_returns(&mut self.returns, |queue, _| keep(queue)) {
            self.unaccount(at, by);
        }
    }

    /// Drops references to queues that were deleted or whose declaration is gone (and
    /// bindings to them), once every segment has been read.
    pub fn finish_recovery(&mut self) {
        let queues: HashSet<u64> = self.queues.keys().copied().collect();
        self.deleted_queues.clear();
        // Everything read back is on disk: nothing it cancels waits for durability.
        self.sweep_messages(|q| queues.contains(&q), 0);
        let gone = self.bindings.remove_where(|(_, q, _)| !queues.contains(q));
        self.unaccount_all(gone, 0);
        // Counts whose message was dequeued before them, or never read back.
        let messages = &self.messages;
        let orphans = retain_returns(&mut self.returns, |queue, id| {
            messages.is_referenced(id, queue)
        });
        for at in orphans {
            self.unaccount(at, 0);
        }
    }

    /// Where the live declarations and bindings are.
    pub fn topology(&self) -> impl Iterator<Item = &Live> {
        self.exchanges
            .values()
            .chain(self.queues.values())
            .chain(self.bindings.lives())
            .chain(self.exchange_bindings.lives())
    }

    /// Every live record in `segment`: what compaction copies forward.
    pub fn live_in(&self, segment: u64) -> Vec<Live> {
        self.topology()
            .copied()
            .chain(self.messages.places())
            .chain(self.prepared.values().map(|(_, at)| *at))
            .chain(self.returns.values().map(|(_, at)| *at))
            .filter(|l| l.loc.segment == segment)
            .collect()
    }

    /// Whether the live record standing for this frame is at `seq` in `segment`: what
    /// compaction copies forward and recovery restores.
    pub fn is_current(&self, rec: &Record, segment: u64, seq: u64) -> bool {
        let here = |l: Option<&Live>| l.is_some_and(|l| l.loc.segment == segment && l.seq == seq);
        match rec {
            Record::ExchangeDeclare(e) => here(self.exchanges.get(&e.name)),
            Record::QueueDeclare(q) => here(self.queues.get(&q.id)),
            Record::Bind(k, _) | Record::BindVariant(k, _) => {
                self.bindings.is_at(&binding_id(k), segment, seq)
            }
            Record::ExchangeBind(k, _) | Record::ExchangeBindVariant(k, _) => {
                self.exchange_bindings.is_at(k, segment, seq)
            }
            Record::Message(m) | Record::TxMessage { message: m, .. } => {
                here(self.messages.at(m.id).as_ref())
            }
            Record::TxPrepare(p) => here(self.prepared.get(&p.tx).map(|(_, at)| at)),
            Record::Returned { queue, message, .. } => {
                here(self.returns.get(&(*queue, *message)).map(|(_, at)| at))
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{MessageRec, QueueRec};
    use bytes::Bytes;
    use ferry_core::{Arguments, HeaderValue, QueueLimits};

    fn at(segment: u64, seq: u64, len: u64) -> Live {
        Live {
            loc: Loc {
                segment,
                offset: 0,
                len,
            },
            seq,
        }
    }

    fn queue(id: u64) -> Record {
        Record::QueueDeclare(QueueRec {
            id,
            name: format!("q{id}"),
            auto_delete: false,
            alternate: None,
            limits: QueueLimits::default(),
            arguments: Arguments::new(),
        })
    }

    fn message(id: u64, queues: &[u64]) -> Record {
        Record::Message(MessageRec {
            id,
            queues: queues.to_vec(),
            content: Bytes::new(),
        })
    }

    #[test]
    fn a_message_lives_until_every_queue_dequeued_it() {
        let mut ix = Index::default();
        ix.add_segment(1, 1000);
        ix.add_segment(2, 1000);
        ix.apply(&queue(1), at(1, 1, 10), false);
        ix.apply(&queue(2), at(1, 2, 10), false);
        ix.apply(&message(3, &[1, 2]), at(1, 3, 100), false);
        assert_eq!(ix.segments[&1].live_bytes, 120);
        let dq = |q, m: u64| Record::Dequeue {
            queue: q,
            messages: vec![m],
        };
        ix.apply(&dq(1, 3), at(2, 4, 20), false);
        assert!(ix.is_referenced(2, 3) && !ix.is_referenced(1, 3));
        ix.apply(&dq(1, 3), at(2, 5, 20), false);
        ix.apply(&dq(2, 3), at(2, 6, 20), false);
        assert!(ix.messages.is_empty());
        assert_eq!(ix.segments[&1].live_bytes, 20);
        assert_eq!(ix.segments[&2].live_bytes, 0, "dequeues are never live");
        assert_eq!(ix.live_bytes, 20);
    }

    #[test]
    fn a_segment_can_go_once_what_emptied_it_is_durable() {
        let mut ix = Index::default();
        ix.add_segment(1, 1000);
        ix.add_segment(2, 1000);
        ix.apply(&queue(1), at(2, 1, 10), false);
        ix.apply(&message(2, &[1]), at(1, 2, 100), false);
        assert!(!ix.segments[&1].can_go(u64::MAX), "a live message");
        ix.dequeue(1, 2, 9);
        assert!(!ix.segments[&1].can_go(8), "the dequeue may yet be lost");
        assert!(ix.segments[&1].can_go(9));
    }

    #[test]
    fn deleting_a_queue_frees_its_messages_and_bindings() {
        let mut ix = Index::default();
        ix.add_segment(1, 1000);
        ix.apply(&queue(1), at(1, 1, 10), false);
        let k = BindingKey {
            exchange: "amq.direct".into(),
            queue: 1,
            key: "k".into(),
        };
        ix.apply(&Record::Bind(k, Arguments::new()), at(1, 2, 10), false);
        ix.apply(&message(3, &[1]), at(1, 3, 100), false);
        ix.apply(&Record::QueueDelete(1), at(1, 4, 10), false);
        assert!(ix.messages.is_empty() && ix.bindings.is_empty() && ix.queues.is_empty());
        assert_eq!(ix.live_bytes, 0);
    }

    #[test]
    fn exchange_bindings_under_one_key_are_live_one_by_one() {
        let mut ix = Index::default();
        ix.add_segment(1, 1000);
        ix.add_segment(2, 1000);
        let k = ExchangeBindingKey {
            source: "hdr".into(),
            destination: "d".into(),
            key: String::new(),
        };
        let args = |v: i64| -> Arguments { [("n", HeaderValue::Int(v))].into_iter().collect() };
        let bind = |v| Record::ExchangeBindVariant(k.clone(), args(v));
        // An older ferryd's binding (type 12), then two more under the key (type 19).
        ix.apply(
            &Record::ExchangeBind(k.clone(), args(0)),
            at(1, 1, 10),
            false,
        );
        ix.apply(&bind(1), at(1, 2, 20), false);
        ix.apply(&bind(2), at(2, 3, 40), false);
        assert_eq!(ix.live_bytes, 70);
        let unbind_one = Record::ExchangeUnbindVariant(k.clone(), args(1));
        ix.apply(&unbind_one, at(2, 4, 20), false);
        assert_eq!(
            ix.segments[&1].live_bytes, 10,
            "only the binding unbound goes"
        );
        assert_eq!(ix.segments[&2].live_bytes, 40, "unbinds are never live");
        assert!(ix.is_current(&bind(2), 2, 3));
        assert!(!ix.is_current(&bind(1), 1, 2));
        // A type 12 replaces every binding under its key, as it did when it was written.
        ix.apply(
            &Record::ExchangeBind(k.clone(), args(3)),
            at(2, 5, 10),
            false,
        );
        let live = |ix: &Index| (ix.segments[&1].live_bytes, ix.segments[&2].live_bytes);
        assert_eq!(live(&ix), (0, 10));
        ix.apply(&bind(4), at(2, 6, 20), false);
        // The destination's deletion takes its bindings with it.
        ix.apply(&Record::ExchangeDelete("d".into()), at(2, 7, 10), false);
        assert_eq!(live(&ix), (0, 0));
        assert_eq!(ix.live_bytes, 0);
    }

    fn returned(queue: u64, message: u64, returns: u32) -> Record {
        Record::Returned {
            queue,
            message,
            returns,
        }
    }

    #[test]
    fn a_messages_count_lives_while_the_message_is_on_its_queue() {
        let mut ix = Index::default();
        ix.add_segment(1, 1000);
        ix.add_segment(2, 1000);
        ix.apply(&queue(1), at(1, 1, 10), false);
        ix.apply(&queue(2), at(1, 2, 10), false);
        ix.apply(&message(3, &[1, 2]), at(1, 3, 100), false);
        ix.apply(&returned(1, 3, 1), at(2, 4, 20), false);
        ix.apply(&returned(1, 3, 2), at(2, 5, 20), false);
        ix.apply(&returned(2, 3, 1), at(2, 6, 20), false);
        assert_eq!((ix.returns_of(1, 3), ix.returns_of(2, 3)), (2, 1));
        assert_eq!(ix.segments[&2].live_bytes, 40, "the latest count per queue");
        assert!(ix.is_current(&returned(1, 3, 2), 2, 5));
        assert!(!ix.is_current(&returned(1, 3, 1), 2, 4));
        assert_eq!(ix.live_in(2).len(), 2);
        // A count for a message its queue no longer has is not kept.
        ix.apply(&returned(1, 9, 1), at(2, 7, 20), false);
        assert_eq!(ix.returns_of(1, 9), 0);
        ix.dequeue(1, 3, 8);
        assert_eq!((ix.returns_of(1, 3), ix.returns_of(2, 3)), (0, 1));
        assert_eq!(ix.segments[&2].dead_upto, 8);
        ix.apply(&Record::QueueDelete(2), at(2, 9, 10), false);
        assert!(ix.returns.is_empty(), "a deleted queue's counts go with it");
        assert_eq!(ix.segments[&2].live_bytes, 0);
        assert_eq!(ix.live_bytes, 10);
    }

    #[test]
    fn recovery_keeps_a_count_read_before_its_messages_copy_and_drops_orphans() {
        let mut ix = Index::default();
        ix.add_segment(2, 1000);
        ix.add_segment(3, 1000);
        ix.apply(&queue(1), at(2, 1, 10), true);
        // Compaction copied message 5 forward past its count.
        ix.apply(&returned(1, 5, 3), at(2, 6, 20), true);
        // Message 7 was dequeued, and its record is gone with its segment.
        ix.apply(&returned(1, 7, 1), at(2, 8, 20), true);
        // A queue that is gone.
        ix.apply(&returned(4, 5, 1), at(2, 10, 20), true);
        ix.apply(&message(5, &[1, 4]), at(3, 11, 100), true);
        ix.finish_recovery();
        assert_eq!(ix.returns_of(1, 5), 3);
        assert_eq!((ix.returns_of(1, 7), ix.returns_of(4, 5)), (0, 0));
        assert_eq!(ix.returns.len(), 1);
        assert_eq!(ix.segments[&2].live_bytes, 30);
        assert_eq!(ix.live_bytes, 130);
    }

    #[test]
    fn a_copy_replaces_the_original_and_recovery_sweeps_unknown_queues() {
        let mut ix = Index::default();
        ix.add_segment(1, 1000);
        ix.add_segment(5, 1000);
        // The queue's declaration was compacted forward: messages come first on recovery.
        ix.apply(&message(3, &[1, 2]), at(1, 3, 100), true);
        ix.apply(&message(3, &[1]), at(5, 9, 90), true);
        ix.apply(&queue(1), at(5, 10, 10), true);
        ix.apply(&message(4, &[7]), at(5, 11, 50), true);
        ix.finish_recovery();
        assert_eq!(ix.messages.len(), 1);
        assert_eq!(ix.messages.at(3).map(|l| l.loc.segment), Some(5));
        assert!(ix.is_current(&message(3, &[1]), 5, 9));
        assert!(!ix.is_current(&message(3, &[1]), 1, 3));
        assert_eq!(ix.segments[&1].live_bytes, 0);
        assert_eq!(ix.segments[&5].live_bytes, 100);
    }
}
