//! Reading the journal back on start, and putting what is live into a broker.
//!
//! The journal is read as one sequence of frames across segments, each frame's sequence
//! number one more than the last. The first frame that is torn, fails its checksum, does not
//! decode, or breaks the sequence ends the journal: what follows was never confirmed (a
//! confirm covers a whole prefix), so the segment is cut there and later segments are set
//! aside as `*.discarded`. The state recovered is therefore the state after a prefix of the
//! journal that includes every confirmed record.
//!
//! Transactions: the records of a commit (`TX_MESSAGE`, `TX_DEQUEUE`) are held back until
//! the transaction's `TX_COMMIT` record is read, then applied in their order; a transaction
//! whose commit record is missing (the broker died mid-commit, or the tail was cut) leaves
//! no trace. The broker appends the commit record before any consumer can see the commit's
//! messages, so no record outside the transaction refers to them before it. A transaction
//! with a `TX_PREPARE` record (XA) and neither `TX_COMMIT` nor `TX_ABORT` is in doubt: its
//! messages are held for it rather than queued, and the broker gets it back as a prepared
//! branch (`Broker::restore_prepared`).
//!
//! Redelivery rule: every recovered message is marked redelivered. The store does not record
//! deliveries (that would cost a write per delivery), so any recovered message may have been
//! delivered before the restart; saying so is the conservative answer 0-10 and 0-9-1 allow.
//! It does record returns to queues with a delivery limit (`RETURNED`): such a message comes
//! back with the count its limit judges it by.

use std::collections::HashMap;
use std::io::Read;
use std::path::Path;
use std::time::{Duration, Instant};

use bytes::Bytes;
use std::sync::Arc;

use ferry_core::{
    Arguments, Broker, ExchangeOptions, Message, Queue, QueueOptions, Restored, RestoredMessage,
};

use crate::index::{Index, Live, LiveMessage, Loc};
use crate::record::{
    self, BindingKey, ExchangeBindingKey, ExchangeRec, Frame, PreparedRec, QueueRec, Record,
};
use crate::segment::{self, SEGMENT_HEADER};
use crate::StoreError;

/// What recovery found, beyond the index the writer continues with.
pub(crate) struct Found {
    pub(crate) index: Index,
    pub(crate) next_seq: u64,
    pub(crate) next_segment: u64,
}

/// Figures about a recovery, for the log and for benchmarks.
#[derive(Debug, Clone, Default)]
pub struct RecoveryStats {
    pub segments: usize,
    pub bytes_read: u64,
    pub records: u64,
    pub messages: u64,
    /// Recovered messages whose content stayed on disk (over the memory budget).
    pub messages_on_disk: u64,
    pub queues: usize,
    /// Where the journal was cut: segment id and offset of the first bad frame.
    pub cut_at: Option<(u64, u64)>,
    pub segments_discarded: usize,
    /// Transactions whose commit record never made it: their records were ignored.
    pub transactions_discarded: usize,
    /// Prepared distributed transactions waiting for their outcome: restored as prepared
    /// branches.
    pub transactions_in_doubt: usize,
    pub elapsed: Duration,
}

/// The live durable state, ready to be put into a broker.
pub struct Recovered {
    exchanges: Vec<ExchangeRec>,
    queues: Vec<(QueueRec, Vec<RestoredMessage>)>,
    bindings: Vec<(BindingKey, Arguments)>,
    exchange_bindings: Vec<(ExchangeBindingKey, Arguments)>,
    in_doubt: Vec<InDoubt>,
    pub stats: RecoveryStats,
}

/// A prepared distributed transaction found in the journal without its outcome.
struct InDoubt {
    tx: u64,
    branch: Bytes,
    /// Its messages (with their store ids), each with the queues it goes to on commit.
    messages: Vec<(Message, Vec<u64>)>,
    /// (queue, message) pairs it dequeues on commit: queued, and held for it.
    dequeues: Vec<(u64, u64)>,
}

/// Reads segments into one reused buffer: recovery reads the whole journal, and a fresh
/// allocation per segment would cost a page fault per 4 KiB.
#[derive(Default)]
struct SegmentReader {
    buf: Vec<u8>,
}

impl SegmentReader {
    fn read(&mut self, dir: &Path, id: u64) -> Result<&[u8], StoreError> {
        let path = segment::segment_path(dir, id);
        self.buf.clear();
        std::fs::File::open(&path)
            .and_then(|mut f| f.read_to_end(&mut self.buf))
            .map_err(|e| StoreError::io("cannot read", &path, e))?;
        Ok(&self.buf)
    }
}

/// Calls `f` with each frame of a segment's valid run, from the frame numbered `first`;
/// `f` returns false for a frame whose payload does not decode. Returns where and why the
/// run ended (`true`: at a bad frame rather than the clean end of the data).
fn frames(
    data: &[u8],
    id: u64,
    first: u64,
    mut f: impl FnMut(u8, &[u8], Live) -> bool,
) -> (u64, u64, bool) {
    let (mut pos, mut seq) = (SEGMENT_HEADER, first);
    loop {
        let Some(rest) = data.get(pos..) else {
            return (pos as u64, seq, false);
        };
        match record::read_frame(rest) {
            Frame::Record {
                seq: s,
                kind,
                payload,
                len,
            } => {
                if s != seq || kind == record::kind::SEGMENT_END {
                    // The end marker, or stale bytes of a recycled file after a segment that
                    // ended at the end of the journal.
                    return (pos as u64, seq, false);
                }
                let loc = Loc {
                    segment: id,
                    offset: pos as u64,
                    len: len as u64,
                };
                if !f(kind, payload, Live { loc, seq }) {
                    return (pos as u64, seq, true);
                }
                pos += len;
                seq += 1;
            }
            Frame::End => return (pos as u64, seq, false),
            Frame::Torn | Frame::Corrupt => return (pos as u64, seq, true),
        }
    }
}

fn segment_ids(dir: &Path) -> Result<Vec<u64>, StoreError> {
    let entries = std::fs::read_dir(dir).map_err(|e| StoreError::io("cannot list", dir, e))?;
    let mut ids: Vec<u64> = entries
        .filter_map(|e| e.ok())
        .filter_map(|e| segment::segment_id(&e.file_name().to_string_lossy()))
        .collect();
    ids.sort_unstable();
    Ok(ids)
}

fn set_aside(dir: &Path, id: u64) {
    let path = segment::segment_path(dir, id);
    let to = path.with_extension("discarded");
    if let Err(e) = std::fs::rename(&path, &to) {
        tracing::warn!("store: cannot set aside {}: {e}", path.display());
    }
}

/// Applies records in journal order, holding each transaction's back until its commit.
#[derive(Default)]
struct Replay {
    index: Index,
    open: HashMap<u64, Vec<(Record, Live)>>,
}

impl Replay {
    fn apply(&mut self, rec: Record, at: Live) {
        match rec {
            Record::TxMessage { tx, .. }
            | Record::TxDequeue { tx, .. }
            | Record::TxPrepare(PreparedRec { tx, .. }) => {
                self.open.entry(tx).or_default().push((rec, at));
            }
            Record::TxCommit(tx) => {
                for (rec, at) in self.open.remove(&tx).unwrap_or_default() {
                    self.index.apply(&rec, at, true);
                }
                self.index.apply(&rec, at, true);
            }
            Record::TxAbort(tx) => {
                // A prepared transaction's messages may also have been copied by compaction
                // as plain records (a copy made while no table said the transaction was
                // open): its prepare record names them, and they go too.
                let held = self.open.remove(&tx).unwrap_or_default();
                for (rec, _) in held {
                    if let Record::TxPrepare(p) = rec {
                        for id in p.messages {
                            self.index.forget_message(id, at.seq);
                        }
                    }
                }
            }
            rec => self.index.apply(&rec, at, true),
        }
    }

    /// The index, and how many transactions never committed. A prepared transaction stays
    /// in doubt: its messages are live (held for it, in no queue) and its prepare record
    /// lists what it dequeues, which stays queued until it commits.
    fn finish(mut self) -> (Index, usize) {
        let mut unfinished = 0;
        for (_, records) in self.open.drain() {
            if !records
                .iter()
                .any(|(r, _)| matches!(r, Record::TxPrepare(_)))
            {
                unfinished += 1;
                continue;
            }
            for (rec, at) in records {
                if !matches!(rec, Record::TxDequeue { .. }) {
                    self.index.apply(&rec, at, true);
                }
            }
        }
        self.index.finish_recovery();
        (self.index, unfinished)
    }
}

pub(crate) fn recover(
    dir: &Path,
    memory_budget: Option<u64>,
) -> Result<(Recovered, Found), StoreError> {
    let started = Instant::now();
    let _ = std::fs::remove_file(segment::spare_tmp_path(dir));
    let ids = segment_ids(dir)?;
    let mut stats = RecoveryStats::default();
    let mut replay = Replay::default();
    let mut reader = SegmentReader::default();
    let mut expect: Option<u64> = None;
    let mut kept = Vec::new();
    let mut ended = false;
    for &id in &ids {
        if ended {
            tracing::warn!("store: segment {id} follows the end of the journal; set aside");
            set_aside(dir, id);
            stats.segments_discarded += 1;
            continue;
        }
        let data = reader.read(dir, id)?;
        stats.bytes_read += data.len() as u64;
        let first = match segment::decode_header(data) {
            Some((hid, first)) if hid == id && expect.is_none_or(|e| e == first) => first,
            _ => {
                // A segment begun in the round the broker died in, or one after a hole.
                tracing::warn!("store: segment {id} does not continue the journal; set aside");
                set_aside(dir, id);
                stats.segments_discarded += 1;
                ended = true;
                continue;
            }
        };
        replay.index.add_segment(id, data.len() as u64);
        // Message contents stay on disk until the second pass reads the live ones.
        let (end, next, bad) = frames(data, id, first, |kind, payload, at| {
            let Ok(rec) = Record::decode_head(kind, payload) else {
                return false;
            };
            stats.records += 1;
            replay.apply(rec, at);
            true
        });
        stats.segments += 1;
        kept.push(id);
        expect = Some(next);
        if bad {
            ended = true;
            stats.cut_at = Some((id, end));
            let path = segment::segment_path(dir, id);
            tracing::warn!(
                "store: journal ends with a torn or corrupt record in segment {id} at offset \
                 {end}; cutting it there"
            );
            let cut = std::fs::OpenOptions::new()
                .write(true)
                .open(&path)
                .and_then(|f| {
                    f.set_len(end)?;
                    f.sync_all()
                });
            if let Err(e) = cut {
                return Err(StoreError::io("cannot truncate", &path, e));
            }
        }
    }
    if stats.segments_discarded > 0 || stats.cut_at.is_some() {
        segment::sync_dir(dir).map_err(|e| StoreError::io("cannot sync", dir, e))?;
    }
    let (index, unfinished) = replay.finish();
    if unfinished > 0 {
        tracing::warn!(
            "store: {unfinished} transaction(s) without a commit record (the broker stopped \
             mid-commit); ignored"
        );
    }
    stats.transactions_discarded = unfinished;
    let recovered = rebuild(dir, &index, &mut reader, memory_budget, stats, started)?;
    let found = Found {
        index,
        next_seq: expect.unwrap_or(1).max(1),
        next_segment: ids.last().map_or(1, |last| last + 1),
    };
    Ok((recovered, found))
}

/// A live record's segment and offset, with the message's id and index entry if it is one.
type Wanted = (u64, u64, Option<(u64, LiveMessage)>);

/// Second pass: reads the live topology and messages back into objects, going straight to
/// each live record's place, segment by segment.
fn rebuild(
    dir: &Path,
    index: &Index,
    reader: &mut SegmentReader,
    memory_budget: Option<u64>,
    mut stats: RecoveryStats,
    started: Instant,
) -> Result<Recovered, StoreError> {
    // Sorted by place, the reads go front to back.
    let mut wanted: Vec<Wanted> = index
        .messages
        .iter()
        .map(|(id, m)| (m.at.loc.segment, m.at.loc.offset, Some((id, m))))
        .collect();
    wanted.extend(
        index
            .topology()
            .map(|l| (l.loc.segment, l.loc.offset, None)),
    );
    wanted.sort_unstable_by_key(|(segment, offset, _)| (*segment, *offset));
    let mut exchanges: Vec<(u64, ExchangeRec)> = Vec::new();
    let mut queues: HashMap<u64, QueueRec> = HashMap::new();
    let mut bindings = Vec::new();
    let mut exchange_bindings = Vec::new();
    let mut messages: HashMap<u64, Vec<(u64, RestoredMessage)>> = HashMap::new();
    // A prepared transaction's own messages go to it, not to queues; the messages it
    // dequeues stay queued until it completes. Both come back into memory whatever the
    // budget: the transaction holds them as messages, not stand-ins.
    let mut in_doubt: HashMap<u64, InDoubt> = HashMap::new();
    let mut owner: HashMap<u64, u64> = HashMap::new();
    let mut held = std::collections::HashSet::new();
    for (p, _) in index.prepared.values() {
        owner.extend(p.messages.iter().map(|id| (*id, p.tx)));
        held.extend(p.dequeues.iter().map(|(_, id)| *id));
        in_doubt.insert(
            p.tx,
            InDoubt {
                tx: p.tx,
                branch: p.branch.clone(),
                messages: Vec::new(),
                dequeues: p.dequeues.clone(),
            },
        );
    }
    // Oldest first, contents come back into memory until the budget is spent.
    let mut budget = memory_budget.unwrap_or(u64::MAX);
    let mut bad_messages = 0u64;
    for per_segment in wanted.chunk_by(|a, b| a.0 == b.0) {
        let data = reader.read(dir, per_segment[0].0)?;
        for (_, offset, live) in per_segment {
            let offset = *offset;
            let Some(Frame::Record {
                kind, payload, seq, ..
            }) = data.get(offset as usize..).map(record::read_frame)
            else {
                // Read back as it was read a moment ago: only a concurrent writer could
                // change it, and the directory is locked.
                bad_messages += 1;
                continue;
            };
            // Its own allocation: a message must not keep a whole segment alive.
            let Ok(rec) = Record::decode(kind, Bytes::copy_from_slice(payload)) else {
                bad_messages += 1;
                continue;
            };
            match (rec, live.as_ref()) {
                (
                    Record::Message(m) | Record::TxMessage { message: m, .. },
                    Some(&(id, ref live)),
                ) => {
                    let Ok(mut msg) = record::message_from_content(m.content) else {
                        bad_messages += 1;
                        continue;
                    };
                    msg.store_id = Some(id);
                    let msg = msg.build();
                    if let Some(t) = owner.get(&id).and_then(|t| in_doubt.get_mut(t)) {
                        t.messages.push((msg, live.queues.to_vec()));
                        stats.messages += 1;
                        continue;
                    }
                    let in_memory = msg.size() <= budget || held.contains(&id);
                    let body_size = msg.body_size();
                    let restored = |m: &Message, queue: u64| RestoredMessage {
                        message: if in_memory {
                            Restored::InMemory(m.clone())
                        } else {
                            Restored::OnDisk {
                                stub: m.clone(),
                                body_size,
                            }
                        },
                        returns: index.returns_of(queue, id),
                    };
                    let msg = if in_memory {
                        budget = budget.saturating_sub(msg.size());
                        msg
                    } else {
                        stats.messages_on_disk += 1;
                        msg.stub()
                    };
                    for q in live.queues.to_vec() {
                        messages.entry(q).or_default().push((id, restored(&msg, q)));
                    }
                    stats.messages += 1;
                }
                (Record::ExchangeDeclare(e), None) => exchanges.push((seq, e)),
                (Record::QueueDeclare(q), None) => {
                    queues.insert(q.id, q);
                }
                (Record::Bind(k, args) | Record::BindVariant(k, args), None) => {
                    bindings.push((k, args))
                }
                (Record::ExchangeBind(k, args) | Record::ExchangeBindVariant(k, args), None) => {
                    exchange_bindings.push((seq, k, args))
                }
                _ => bad_messages += 1,
            }
        }
    }
    if bad_messages > 0 {
        tracing::error!("store: {bad_messages} live records could not be decoded; skipped");
    }
    exchanges.sort_by_key(|(seq, _)| *seq);
    let mut queue_list: Vec<(QueueRec, Vec<RestoredMessage>)> = queues
        .into_values()
        .map(|q| {
            let mut msgs = messages.remove(&q.id).unwrap_or_default();
            // Ids follow the order messages were first journaled, which compaction keeps.
            msgs.sort_unstable_by_key(|(id, _)| *id);
            (q, msgs.into_iter().map(|(_, m)| m).collect())
        })
        .collect();
    queue_list.sort_by_key(|(q, _)| q.id);
    stats.queues = queue_list.len();
    let mut in_doubt: Vec<InDoubt> = in_doubt.into_values().collect();
    in_doubt.sort_by_key(|t| t.tx);
    for t in &mut in_doubt {
        t.messages.sort_by_key(|(m, _)| m.store_id());
    }
    stats.transactions_in_doubt = in_doubt.len();
    stats.elapsed = started.elapsed();
    Ok(Recovered {
        exchanges: exchanges.into_iter().map(|(_, e)| e).collect(),
        queues: queue_list,
        bindings,
        exchange_bindings: {
            exchange_bindings.sort_by_key(|(seq, _, _)| *seq);
            exchange_bindings
                .into_iter()
                .map(|(_, k, args)| (k, args))
                .collect()
        },
        in_doubt,
        stats,
    })
}

impl Recovered {
    /// Recreates the durable exchanges, queues (with their messages, marked redelivered)
    /// and bindings in `broker`, journaling nothing. An alternate exchange that no longer
    /// exists is dropped with a warning rather than failing the start.
    pub fn restore(self, broker: &Broker) {
        let mut pending = self.exchanges;
        loop {
            let before = pending.len();
            pending.retain(|e| {
                let ready = e
                    .alternate
                    .as_deref()
                    .is_none_or(|alt| broker.exchange(alt).is_some());
                if ready {
                    restore_exchange(broker, e, e.alternate.clone());
                }
                !ready
            });
            if pending.is_empty() || pending.len() == before {
                break;
            }
        }
        for e in &pending {
            tracing::warn!(
                "store: exchange {}: alternate exchange {:?} is gone; restored without it",
                e.name,
                e.alternate
            );
            restore_exchange(broker, e, None);
        }
        for (k, args) in self.exchange_bindings {
            if let Err(e) =
                broker.restore_exchange_binding(&k.destination, &k.source, &k.key, &args)
            {
                tracing::warn!(
                    "store: cannot restore binding {} -> {} ({}): {e}",
                    k.source,
                    k.destination,
                    k.key
                );
            }
        }
        let mut names = HashMap::new();
        let mut restored: HashMap<u64, Arc<Queue>> = HashMap::new();
        for (q, messages) in self.queues {
            // A RabbitMQ dead letter exchange may be missing: the queue keeps its name
            // (in its arguments) and finds it when it is declared again.
            let dead_letters_by_name = q.arguments.get("x-dead-letter-exchange").is_some();
            let alternate = q.alternate.clone().filter(|alt| {
                let exists = broker.exchange(alt).is_some();
                if !exists && !dead_letters_by_name {
                    tracing::warn!(
                        "store: queue {}: alternate exchange {alt} is gone; restored without it",
                        q.name
                    );
                }
                exists
            });
            let opts = QueueOptions {
                durable: true,
                exclusive_owner: None,
                connection: 0,
                auto_delete: q.auto_delete,
                alternate_exchange: alternate,
                limits: q.limits,
                arguments: q.arguments,
                // Quotas count what users declare; a recovered queue was declared before.
                quota: None,
                // The broker's own queues are never durable.
                system: false,
            };
            match broker.restore_queue(&q.name, opts, q.id) {
                Ok(queue) => {
                    queue.restore(messages);
                    restored.insert(q.id, queue);
                    names.insert(q.id, q.name);
                }
                Err(e) => tracing::error!("store: cannot restore queue {}: {e}", q.name),
            }
        }
        for (k, args) in self.bindings {
            let Some(queue) = names.get(&k.queue) else {
                continue;
            };
            if let Err(e) = broker.restore_binding(queue, &k.exchange, &k.key, &args) {
                tracing::warn!(
                    "store: cannot restore binding {queue} -> {} ({}): {e}",
                    k.exchange,
                    k.key
                );
            }
        }
        Self::restore_in_doubt(self.in_doubt, broker, &restored);
    }

    /// Prepared distributed transactions come back as prepared branches, holding the
    /// messages they dequeue. Called once queues hold their messages.
    fn restore_in_doubt(
        in_doubt: Vec<InDoubt>,
        broker: &Broker,
        queues: &HashMap<u64, Arc<Queue>>,
    ) {
        for t in in_doubt {
            let routed = t
                .messages
                .into_iter()
                .map(|(m, ids)| {
                    (
                        ids.iter()
                            .filter_map(|id| queues.get(id).cloned())
                            .collect(),
                        m,
                    )
                })
                .collect();
            let mut held: HashMap<u64, Vec<u64>> = HashMap::new();
            for (queue, id) in t.dequeues {
                held.entry(queue).or_default().push(id);
            }
            let held = held
                .into_iter()
                .filter_map(|(queue, ids)| Some((queues.get(&queue)?.clone(), ids)))
                .collect();
            if let Err(e) = broker.restore_prepared(&t.branch, t.tx, routed, held) {
                tracing::error!("store: cannot restore prepared transaction {}: {e}", t.tx);
            }
        }
    }

    /// Recovered queues by name, with their message counts (tests and logs).
    pub fn queue_counts(&self) -> Vec<(String, usize)> {
        self.queues
            .iter()
            .map(|(q, m)| (q.name.clone(), m.len()))
            .collect()
    }
}

fn restore_exchange(broker: &Broker, e: &ExchangeRec, alternate: Option<String>) {
    let opts = ExchangeOptions {
        durable: true,
        auto_delete: e.auto_delete,
        alternate_exchange: alternate,
        arguments: e.arguments.clone(),
        internal: e.internal,
    };
    if let Err(err) = broker.restore_exchange(&e.name, e.kind, opts) {
        tracing::error!("store: cannot restore exchange {}: {err}", e.name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::Loc;
    use crate::record::{MessageRec, QueueRec};
    use ferry_core::QueueLimits;

    fn at(seq: u64) -> Live {
        Live {
            loc: Loc {
                segment: 1,
                offset: seq * 100,
                len: 100,
            },
            seq,
        }
    }

    fn message(id: u64) -> MessageRec {
        MessageRec {
            id,
            queues: vec![1],
            content: Bytes::new(),
        }
    }

    /// An aborted prepared transaction leaves none of its messages, even one that was
    /// copied forward as a plain message record before the abort.
    #[test]
    fn an_abort_forgets_the_prepared_messages_whatever_their_records() {
        let mut replay = Replay::default();
        replay.index.add_segment(1, 1 << 20);
        replay.apply(
            Record::QueueDeclare(QueueRec {
                id: 1,
                name: "q".into(),
                auto_delete: false,
                alternate: None,
                limits: QueueLimits::default(),
                arguments: Arguments::new(),
            }),
            at(1),
        );
        replay.apply(Record::Message(message(2)), at(2));
        replay.apply(
            Record::TxMessage {
                tx: 3,
                message: message(3),
            },
            at(3),
        );
        let prepared = PreparedRec {
            tx: 3,
            branch: Bytes::from_static(b"x"),
            dequeues: vec![(1, 2)],
            messages: vec![3],
        };
        replay.apply(Record::TxPrepare(prepared), at(4));
        // The compaction copy, plain.
        replay.apply(Record::Message(message(3)), at(5));
        replay.apply(Record::TxAbort(3), at(6));
        let (index, unfinished) = replay.finish();
        assert_eq!(unfinished, 0);
        assert!(index.prepared.is_empty());
        assert!(
            index.messages.get(3).is_none(),
            "the aborted message is gone"
        );
        assert!(
            index.messages.get(2).is_some(),
            "the one it would have dequeued stays"
        );
    }
}
