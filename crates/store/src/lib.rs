//! `ferry-store`: ferryd's durable store.
//!
//! One journal per data directory (locked with `flock`, so two brokers cannot share it): a
//! sequence of pre-allocated segment files holding checksummed frames (see [`record`]).
//! Durable declarations, bindings, persistent messages (each stored once, with the list of
//! durable queues referencing it) and dequeues are appended to an in-memory buffer by the
//! threads that cause them; one writer thread writes everything pending, calls fdatasync, and
//! announces "durable up to N" (group commit: a lone publisher waits for one sync, many
//! publishers share each sync, no timer). Connections waiting for a point are woken once per
//! registration through their outbox.
//!
//! Space follows the backlog: segments at the head of the journal whose records are all dead
//! are recycled as the next spare segment or deleted; when dead space grows beyond the live
//! data, the head segment's live records are copied to the tail first (compaction). On start,
//! [`Store::open`] reads every segment, stops at a torn or corrupt frame at the tail (and cuts
//! the file there), and returns what is live for [`Recovered::restore`].

mod binding_index;
mod codec;
mod index;
mod load;
pub mod record;
mod recover;
mod segment;
mod writer;

use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use bytes::Bytes;
use ferry_core::{
    Arguments, BindingIdentity, BrokerError, DurableWaiter, ExchangeDefinition, Journal,
    JournalStats, JournalTx, Message, MessageParts, QueueDefinition, SyncPoint,
};
use parking_lot::{Condvar, Mutex, MutexGuard};

use index::{Index, Live, Loc};
use record::{
    kind, write_frame, BindingKey, ExchangeBindingKey, ExchangeRec, PreparedRec, QueueRec, Record,
    FRAME_HEADER,
};
use segment::SEGMENT_HEADER;

pub use codec::DecodeError;
pub use record::{read_frame, Frame};
pub use recover::{Recovered, RecoveryStats};

/// How the store is laid out and behaves.
#[derive(Debug, Clone)]
pub struct StoreConfig {
    /// Size of a segment file. A record larger than this gets a segment of its own size.
    pub segment_size: u64,
    /// Content bytes of recovered messages kept in memory (the broker's
    /// `persistent_memory_budget`); the rest come back as stand-ins that queues read back on
    /// delivery. `None`: all in memory.
    pub memory_budget: Option<u64>,
    /// Longest a record waits to be written when no connection asked for it (0-9-1 acks,
    /// expiry, deletes): they go out with the next requested sync, or after this long.
    pub unawaited_records_delay: Duration,
    /// Longest the writer looks for a connection's ask for a sync before it sleeps (see
    /// `writer::KickSpin`); tests that cannot time a burst to the microsecond raise it.
    pub kick_spin_max: Duration,
}

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig {
            segment_size: 32 << 20,
            memory_budget: None,
            unawaited_records_delay: Duration::from_millis(2),
            kick_spin_max: writer::KICK_SPIN_MAX,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("data directory {0} is in use by another broker")]
    Locked(PathBuf),
    #[error("{what} {path}: {source}")]
    Io {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
}

impl StoreError {
    fn io(what: &'static str, path: &Path, source: std::io::Error) -> StoreError {
        StoreError::Io {
            what,
            path: path.to_path_buf(),
            source,
        }
    }
}

/// A pending write: bytes for one segment, starting at `offset`.
struct Chunk {
    segment: u64,
    offset: u64,
    capacity: u64,
    /// Set when the chunk begins the segment: the sequence number its header records.
    first_seq: Option<u64>,
    data: Vec<u8>,
}

/// Where the next frame goes.
#[derive(Debug, Clone, Copy)]
struct Tail {
    segment: u64,
    offset: u64,
    capacity: u64,
}

struct State {
    next_seq: u64,
    tail: Tail,
    chunks: Vec<Chunk>,
    /// What the writer took and has not made durable yet.
    writing: Vec<Arc<Chunk>>,
    /// Buffers of written chunks, kept for reuse.
    free: Vec<Vec<u8>>,
    index: Index,
    segment_size: u64,
    /// Transactions with records appended and no commit record yet.
    open_txs: HashMap<u64, OpenTx>,
}

/// What an open transaction has journaled.
#[derive(Debug, Default)]
struct OpenTx {
    /// The dequeues (queue, message) it holds back: those take effect in the index with the
    /// commit record, so that nothing the transaction dequeues can leave the disk before it.
    dequeues: Vec<(u64, u64)>,
    /// Its messages: an abort lets go of them.
    messages: Vec<u64>,
}

impl State {
    /// Appends one frame; returns its sequence number and place. The layout is decided here,
    /// under the lock, so the index knows where every record lives before it is written.
    /// Every segment keeps room for one frame header after its last frame: the end marker
    /// written when the journal moves on, or the zeros written after each round's last frame.
    fn append(&mut self, kind: u8, payload: impl FnOnce(&mut Vec<u8>)) -> (u64, Loc) {
        let seq = self.next_seq;
        self.next_seq += 1;
        let tail = self.tail;
        let fresh = tail.offset == SEGMENT_HEADER as u64;
        if self.chunks.last().is_none_or(|c| c.segment != tail.segment) {
            let data = self.free.pop().unwrap_or_default();
            self.chunks.push(Chunk {
                segment: tail.segment,
                offset: tail.offset,
                capacity: tail.capacity,
                first_seq: fresh.then_some(seq),
                data,
            });
            if fresh {
                self.index.add_segment(tail.segment, tail.capacity);
            }
        }
        let Some(chunk) = self.chunks.last_mut() else {
            unreachable!("a chunk for the tail was just ensured");
        };
        let start = chunk.data.len();
        write_frame(&mut chunk.data, seq, kind, payload);
        let len = (chunk.data.len() - start) as u64;
        let end_marker = FRAME_HEADER as u64;
        if tail.offset + len + end_marker > tail.capacity {
            if fresh {
                // A frame larger than a whole segment gets a segment of its own size.
                let capacity = SEGMENT_HEADER as u64 + len + end_marker;
                chunk.capacity = capacity;
                self.tail.capacity = capacity;
                self.index.add_segment(tail.segment, capacity);
            } else {
                let frame = chunk.data.split_off(start);
                write_frame(&mut chunk.data, seq, kind::SEGMENT_END, |_| {});
                let capacity = self
                    .segment_size
                    .max(SEGMENT_HEADER as u64 + len + end_marker);
                self.tail = Tail {
                    segment: tail.segment + 1,
                    offset: SEGMENT_HEADER as u64,
                    capacity,
                };
                self.index.add_segment(self.tail.segment, capacity);
                self.chunks.push(Chunk {
                    segment: self.tail.segment,
                    offset: self.tail.offset,
                    capacity,
                    first_seq: Some(seq),
                    data: frame,
                });
            }
        }
        let loc = Loc {
            segment: self.tail.segment,
            offset: self.tail.offset,
            len,
        };
        self.tail.offset += len;
        (seq, loc)
    }

    /// The name of the transaction the next record belongs to, if any: the sequence number
    /// of its first record, which is unique for ever.
    fn open_tx(&mut self, tx: Option<&JournalTx>) -> Option<u64> {
        let t = tx?.get_or_set(self.next_seq);
        self.open_txs.entry(t).or_default();
        Some(t)
    }

    /// Whether an open transaction holds back a dequeue of message `id`. Compaction leaves
    /// such a message where it is: a copy made now would come after the dequeue record and
    /// outlive it.
    /// A prepared transaction does not hold anything back: its prepare record, which
    /// compaction copies forward, lists its dequeues.
    fn dequeue_pending(&self, id: u64) -> bool {
        self.open_txs.iter().any(|(t, open)| {
            !self.index.prepared.contains_key(t) && open.dequeues.iter().any(|(_, m)| *m == id)
        })
    }

    /// Appends a topology record and applies it to the index.
    fn record(&mut self, rec: &Record) -> u64 {
        let (seq, loc) = self.append(rec.kind(), |out| rec.encode(out));
        self.index.apply(rec, Live { loc, seq }, false);
        seq
    }
}

/// The spare segment: whether one is ready, whether the preallocator should make one, and
/// whether it should stop.
#[derive(Debug, Default)]
struct Spare {
    ready: bool,
    /// Asked for by the writer (see `writer::want_spare`): a dead segment recycled in time
    /// saves zero-filling a new one.
    wanted: bool,
    stop: bool,
}

struct Shared {
    /// The `journal` directory.
    dir: PathBuf,
    segment_size: u64,
    unawaited_records_delay: Duration,
    kick_spin_max: Duration,
    state: Mutex<State>,
    /// The writer waits here for pending chunks.
    work: Condvar,
    /// Somebody waits for what is pending: write it now. Set under the state lock (see
    /// [`Shared::kick`]).
    kicked: AtomicBool,
    durable: AtomicU64,
    appended: AtomicU64,
    /// Syncs done, for the messages-per-sync figure (group commit at work).
    syncs: AtomicU64,
    failed: AtomicBool,
    /// No room for another segment: persistent publishes and durable declares are refused
    /// until space comes back.
    full: AtomicBool,
    stop: AtomicBool,
    waiters: Mutex<Vec<(SyncPoint, Arc<dyn DurableWaiter>)>>,
    spare: Mutex<Spare>,
    spare_changed: Condvar,
    /// Spare segments the preallocator zero-filled (recycled ones not counted).
    zero_filled: AtomicU64,
    /// How long the writer now looks for a kick, in microseconds (see `writer::KickSpin`).
    kick_spin_micros: AtomicU64,
    #[cfg(test)]
    sync_hold: tests::SyncHold,
    /// Compactions that failed (each also logged).
    #[cfg(test)]
    compaction_failures: AtomicU64,
}

impl Shared {
    /// Asks the writer to write and sync what is pending now. Appends do not do this
    /// themselves: a connection appends a whole read batch and then asks once (through
    /// [`Journal::notify_when_durable`]), so a burst of publishes shares one sync instead of
    /// the first record starting a sync the rest must queue behind.
    fn kick(&self) {
        {
            // Under the lock the writer checks the flag with, so the wake-up cannot fall
            // between its check and its wait.
            let _st = self.state.lock();
            self.kicked.store(true, Ordering::Release);
        }
        self.work.notify_one();
    }

    fn refuse(&self) -> Result<(), BrokerError> {
        if self.failed.load(Ordering::Acquire) {
            return Err(BrokerError::ResourceLimitExceeded(
                "the store failed (I/O error); nothing more can be made durable".into(),
            ));
        }
        if self.full.load(Ordering::Acquire) {
            return Err(BrokerError::ResourceLimitExceeded(
                "the store is full: no disk space for the journal".into(),
            ));
        }
        Ok(())
    }

    /// Wakes the connections waiting for points up to `durable` (all of them once failed).
    fn wake(&self, durable: u64) {
        let failed = self.failed.load(Ordering::Acquire);
        let mut woken: Vec<Arc<dyn DurableWaiter>> = Vec::new();
        self.waiters.lock().retain(|(point, waiter)| {
            if failed || point.0 <= durable {
                if !woken.iter().any(|w| Arc::ptr_eq(w, waiter)) {
                    woken.push(waiter.clone());
                }
                false
            } else {
                true
            }
        });
        for waiter in woken {
            waiter.wake();
        }
    }

    fn fail(&self, what: &str, e: &std::io::Error) {
        if !self.failed.swap(true, Ordering::AcqRel) {
            tracing::error!(
                "store: {what} failed: {e}; persistent publishes are refused from now on, \
                 messages not yet confirmed are not durable"
            );
        }
        self.wake(self.durable.load(Ordering::Acquire));
    }
}

/// The durable store; the broker's [`Journal`].
pub struct Store {
    shared: Arc<Shared>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    /// The `flock` on the data directory, held until the store is closed.
    lock: Mutex<Option<File>>,
}

impl Store {
    /// Opens (creating if needed) the store in `data_dir`, recovers what the journal holds,
    /// and starts the writer. Restore the result into a broker with [`Recovered::restore`].
    pub fn open(
        data_dir: &Path,
        config: StoreConfig,
    ) -> Result<(Arc<Store>, Recovered), StoreError> {
        std::fs::create_dir_all(data_dir)
            .map_err(|e| StoreError::io("cannot create data directory", data_dir, e))?;
        let lock_path = data_dir.join("lock");
        let lock = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(|e| StoreError::io("cannot open lock file", &lock_path, e))?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(StoreError::Locked(data_dir.to_path_buf()))
            }
            Err(std::fs::TryLockError::Error(e)) => {
                return Err(StoreError::io("cannot lock", &lock_path, e))
            }
        }
        let dir = data_dir.join("journal");
        std::fs::create_dir_all(&dir)
            .map_err(|e| StoreError::io("cannot create journal directory", &dir, e))?;
        let segment_size = config.segment_size.max(4096);
        let (recovered, found) = recover::recover(&dir, config.memory_budget)?;
        let spare_ready = segment::spare_path(&dir)
            .metadata()
            .is_ok_and(|m| m.len() == segment_size);
        let state = State {
            next_seq: found.next_seq,
            tail: Tail {
                segment: found.next_segment,
                offset: SEGMENT_HEADER as u64,
                capacity: segment_size,
            },
            chunks: Vec::new(),
            writing: Vec::new(),
            free: Vec::new(),
            segment_size,
            // Prepared transactions recovered in doubt stay open until their outcome.
            open_txs: found
                .index
                .prepared
                .values()
                .map(|(p, _)| {
                    let open = OpenTx {
                        dequeues: p.dequeues.clone(),
                        messages: p.messages.clone(),
                    };
                    (p.tx, open)
                })
                .collect(),
            index: found.index,
        };
        let last = found.next_seq - 1;
        let shared = Arc::new(Shared {
            dir,
            segment_size,
            unawaited_records_delay: config.unawaited_records_delay,
            kick_spin_max: config.kick_spin_max,
            state: Mutex::new(state),
            work: Condvar::new(),
            kicked: AtomicBool::new(false),
            syncs: AtomicU64::new(0),
            durable: AtomicU64::new(last),
            appended: AtomicU64::new(last),
            failed: AtomicBool::new(false),
            full: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            waiters: Mutex::new(Vec::new()),
            spare: Mutex::new(Spare {
                ready: spare_ready,
                wanted: !spare_ready,
                stop: false,
            }),
            spare_changed: Condvar::new(),
            zero_filled: AtomicU64::new(0),
            kick_spin_micros: AtomicU64::new(writer::KICK_SPIN_MIN.as_micros() as u64),
            #[cfg(test)]
            sync_hold: tests::SyncHold::default(),
            #[cfg(test)]
            compaction_failures: AtomicU64::new(0),
        });
        let spawn = |name: &str, f: fn(Arc<Shared>)| {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name(name.into())
                .spawn(move || f(shared))
                .map_err(|e| StoreError::io("cannot start thread", Path::new(name), e))
        };
        let threads = vec![
            spawn("ferry-journal", writer::run)?,
            spawn("ferry-prealloc", writer::preallocate)?,
        ];
        let store = Arc::new(Store {
            shared,
            threads: Mutex::new(threads),
            lock: Mutex::new(Some(lock)),
        });
        Ok((store, recovered))
    }

    /// Writes everything pending, then stops the store's threads. Appends after this are
    /// not written.
    pub fn close(&self) {
        self.shared.stop.store(true, Ordering::Release);
        {
            let _st = self.shared.state.lock();
            self.shared.work.notify_all();
        }
        {
            let mut spare = self.shared.spare.lock();
            spare.stop = true;
            self.shared.spare_changed.notify_all();
        }
        for t in self.threads.lock().drain(..) {
            let _ = t.join();
        }
        // Another broker may use the directory now.
        self.lock.lock().take();
    }

    /// Disk space in use by segment files, and bytes of live records in them.
    pub fn usage(&self) -> (u64, u64) {
        let st = self.shared.state.lock();
        let disk = st.index.segments.values().map(|s| s.capacity).sum();
        (disk, st.index.live_bytes)
    }

    /// Number of segment files, the spare not included.
    pub fn segment_count(&self) -> usize {
        self.shared.state.lock().index.segments.len()
    }

    /// Rounds of write + sync the writer has done since the store opened.
    pub fn syncs(&self) -> u64 {
        self.shared.syncs.load(Ordering::Relaxed)
    }

    /// Segments zero-filled since the store opened; a dead segment recycled as the next one
    /// costs none.
    pub fn segments_zero_filled(&self) -> u64 {
        self.shared.zero_filled.load(Ordering::Relaxed)
    }

    pub fn is_full(&self) -> bool {
        self.shared.full.load(Ordering::Acquire)
    }

    /// Blocks until everything appended so far is durable (or the store failed).
    pub fn sync(&self) {
        let target = self.shared.appended.load(Ordering::Acquire);
        self.shared.kick();
        while self.shared.durable.load(Ordering::Acquire) < target
            && !self.shared.failed.load(Ordering::Acquire)
        {
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Appends, and publishes how far the journal goes.
    fn with_state<R>(&self, f: impl FnOnce(&mut State) -> R) -> R {
        let mut st = self.shared.state.lock();
        let idle = st.chunks.is_empty();
        let r = f(&mut st);
        self.appended_up_to(st, idle);
        r
    }

    /// Publishes how far the journal goes, releasing the state lock. The first record after
    /// an idle spell wakes the writer, which then waits briefly for a kick (see
    /// [`Shared::kick`]); the rest of a burst wakes nobody.
    fn appended_up_to(&self, st: MutexGuard<'_, State>, was_idle: bool) {
        self.shared
            .appended
            .store(st.next_seq - 1, Ordering::Release);
        let wake = was_idle && !st.chunks.is_empty();
        drop(st);
        if wake {
            self.shared.work.notify_one();
        }
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        self.close();
    }
}

impl Journal for Store {
    fn declare_exchange(&self, e: &ExchangeDefinition) -> Result<(), BrokerError> {
        self.shared.refuse()?;
        let rec = Record::ExchangeDeclare(ExchangeRec {
            name: e.name.to_owned(),
            kind: e.kind,
            auto_delete: e.auto_delete,
            internal: e.internal,
            alternate: e.alternate_exchange.map(str::to_owned),
            arguments: e.arguments.clone(),
        });
        self.with_state(|st| st.record(&rec));
        Ok(())
    }

    fn delete_exchange(&self, name: &str) {
        let rec = Record::ExchangeDelete(name.to_owned());
        self.with_state(|st| st.record(&rec));
    }

    fn declare_queue(&self, q: &QueueDefinition) -> Result<u64, BrokerError> {
        self.shared.refuse()?;
        Ok(self.with_state(|st| {
            // The declaration's own sequence number is the queue's id: unique for ever.
            let id = st.next_seq;
            st.record(&Record::QueueDeclare(QueueRec {
                id,
                name: q.name.to_owned(),
                auto_delete: q.auto_delete,
                alternate: q.alternate_exchange.map(str::to_owned),
                limits: q.limits,
                arguments: q.arguments.clone(),
            }));
            id
        }))
    }

    fn delete_queue(&self, queue: u64) {
        self.with_state(|st| st.record(&Record::QueueDelete(queue)));
    }

    fn bind(
        &self,
        exchange: &str,
        queue: u64,
        key: &str,
        arguments: &Arguments,
        identity: BindingIdentity,
    ) -> Result<(), BrokerError> {
        self.shared.refuse()?;
        let k = binding_key(exchange, queue, key);
        let rec = match identity {
            BindingIdentity::Key => Record::Bind(k, arguments.clone()),
            BindingIdentity::KeyAndArguments => Record::BindVariant(k, arguments.clone()),
        };
        self.with_state(|st| st.record(&rec));
        Ok(())
    }

    fn unbind(&self, exchange: &str, queue: u64, key: &str, only: Option<&Arguments>) {
        let k = binding_key(exchange, queue, key);
        let rec = match only {
            None => Record::Unbind(k),
            Some(arguments) => Record::UnbindVariant(k, arguments.clone()),
        };
        self.with_state(|st| st.record(&rec));
    }

    fn bind_exchange(
        &self,
        destination: &str,
        source: &str,
        key: &str,
        arguments: &Arguments,
    ) -> Result<(), BrokerError> {
        self.shared.refuse()?;
        let k = exchange_binding_key(destination, source, key);
        let rec = Record::ExchangeBindVariant(k, arguments.clone());
        self.with_state(|st| st.record(&rec));
        Ok(())
    }

    fn unbind_exchange(
        &self,
        destination: &str,
        source: &str,
        key: &str,
        only: Option<&Arguments>,
    ) {
        let k = exchange_binding_key(destination, source, key);
        let rec = match only {
            None => Record::ExchangeUnbind(k),
            Some(arguments) => Record::ExchangeUnbindVariant(k, arguments.clone()),
        };
        self.with_state(|st| st.record(&rec));
    }

    fn enqueue(
        &self,
        message: &Message,
        queues: &[u64],
        tx: Option<&JournalTx>,
    ) -> Result<(u64, SyncPoint), BrokerError> {
        self.shared.refuse()?;
        Ok(self.with_state(|st| {
            // A queue deleted meanwhile must not keep the message alive in the store.
            let filtered: Vec<u64>;
            let queues = if queues.iter().all(|q| st.index.queues.contains_key(q)) {
                queues
            } else {
                filtered = queues
                    .iter()
                    .copied()
                    .filter(|q| st.index.queues.contains_key(q))
                    .collect();
                &filtered
            };
            let id = st.next_seq;
            let (seq, loc) = match st.open_tx(tx) {
                None => st.append(kind::MESSAGE, |out| {
                    record::put_message_head(out, id, queues);
                    record::put_message_content(out, message);
                }),
                Some(t) => {
                    if let Some(open) = st.open_txs.get_mut(&t) {
                        open.messages.push(id);
                    }
                    st.append(kind::TX_MESSAGE, |out| {
                        codec::put_u64(out, t);
                        record::put_message_head(out, id, queues);
                        record::put_message_content(out, message);
                    })
                }
            };
            st.index.message(id, queues, Live { loc, seq });
            (id, SyncPoint(seq))
        }))
    }

    fn dequeue(&self, queue: u64, messages: &[u64], tx: Option<&JournalTx>) {
        let mut st = self.shared.state.lock();
        if !messages.iter().any(|id| st.index.is_referenced(queue, *id)) {
            return;
        }
        let idle = st.chunks.is_empty();
        match st.open_tx(tx) {
            None => {
                let (seq, _) = st.append(kind::DEQUEUE, |out| {
                    codec::put_u64(out, queue);
                    record::put_ids(out, messages);
                });
                for id in messages {
                    st.index.dequeue(queue, *id, seq);
                }
            }
            Some(t) => {
                st.append(kind::TX_DEQUEUE, |out| {
                    codec::put_u64(out, t);
                    codec::put_u64(out, queue);
                    record::put_ids(out, messages);
                });
                let open = st.open_txs.entry(t).or_default();
                open.dequeues.extend(messages.iter().map(|id| (queue, *id)));
            }
        }
        self.appended_up_to(st, idle);
    }

    fn returned(&self, queue: u64, returns: &[(u64, u32)]) {
        let mut st = self.shared.state.lock();
        let idle = st.chunks.is_empty();
        for &(message, returns) in returns {
            if st.index.is_referenced(queue, message) {
                st.record(&Record::Returned {
                    queue,
                    message,
                    returns,
                });
            }
        }
        self.appended_up_to(st, idle);
    }

    fn commit_tx(&self, tx: &JournalTx) -> Option<SyncPoint> {
        let t = tx.id()?;
        Some(self.with_state(|st| {
            let open = st.open_txs.remove(&t).unwrap_or_default();
            let seq = st.record(&Record::TxCommit(t));
            for (queue, id) in open.dequeues {
                st.index.dequeue(queue, id, seq);
            }
            SyncPoint(seq)
        }))
    }

    fn prepare_tx(&self, tx: &JournalTx, branch: &[u8]) -> Result<Option<SyncPoint>, BrokerError> {
        self.shared.refuse()?;
        Ok(Some(self.with_state(|st| {
            let t = st.open_tx(Some(tx)).unwrap_or_default();
            let open = st.open_txs.get(&t);
            let rec = Record::TxPrepare(PreparedRec {
                tx: t,
                branch: Bytes::copy_from_slice(branch),
                dequeues: open.map(|o| o.dequeues.clone()).unwrap_or_default(),
                messages: open.map(|o| o.messages.clone()).unwrap_or_default(),
            });
            SyncPoint(st.record(&rec))
        })))
    }

    fn abort_tx(&self, tx: &JournalTx) {
        let Some(t) = tx.id() else {
            return;
        };
        self.with_state(|st| {
            let open = st.open_txs.remove(&t).unwrap_or_default();
            let seq = st.record(&Record::TxAbort(t));
            // A transaction that failed before its prepare record: the index took its
            // messages as they were appended.
            for id in open.messages {
                st.index.forget_message(id, seq);
            }
        });
    }

    fn load(&self, messages: &[u64]) -> Vec<Option<MessageParts>> {
        load::load(&self.shared, messages)
    }

    fn appended(&self) -> SyncPoint {
        SyncPoint(self.shared.appended.load(Ordering::Acquire))
    }

    fn durable(&self) -> SyncPoint {
        SyncPoint(self.shared.durable.load(Ordering::Acquire))
    }

    fn is_failed(&self) -> bool {
        self.shared.failed.load(Ordering::Acquire)
    }

    fn stats(&self) -> JournalStats {
        let (disk_bytes, live_bytes) = self.usage();
        let appended = self.shared.appended.load(Ordering::Acquire);
        JournalStats {
            segments: self.segment_count() as u64,
            disk_bytes,
            live_bytes,
            // Every record takes the next sequence number.
            records: appended,
            syncs: self.syncs(),
            appended,
            durable: self.shared.durable.load(Ordering::Acquire),
            failed: self.is_failed(),
        }
    }

    fn notify_when_durable(&self, point: SyncPoint, waiter: Arc<dyn DurableWaiter>) {
        let now = {
            let mut waiters = self.shared.waiters.lock();
            // Checked under the waiters lock: the writer publishes `durable` before taking
            // it, so a point it has passed is seen here or handled by its wake.
            let done = self.shared.durable.load(Ordering::Acquire) >= point.0
                || self.shared.failed.load(Ordering::Acquire);
            if !done {
                waiters.push((point, waiter.clone()));
            }
            done
        };
        if now {
            waiter.wake();
        } else {
            self.shared.kick();
        }
    }
}

fn binding_key(exchange: &str, queue: u64, key: &str) -> BindingKey {
    BindingKey {
        exchange: exchange.to_owned(),
        queue,
        key: key.to_owned(),
    }
}

fn exchange_binding_key(destination: &str, source: &str, key: &str) -> ExchangeBindingKey {
    ExchangeBindingKey {
        source: source.to_owned(),
        destination: destination.to_owned(),
        key: key.to_owned(),
    }
}

#[cfg(test)]
mod tests;

/// Fuzzing entry point: arbitrary bytes as the contents of a segment, read the way recovery
/// reads them (frames, then record payloads, then message contents, built into messages and
/// read back as a queue and a delivery would). Nothing may panic.
#[doc(hidden)]
pub fn fuzz_decode(data: &[u8]) {
    let bytes = bytes::Bytes::copy_from_slice(data);
    let mut pos = 0;
    while let Some(rest) = data.get(pos..) {
        match read_frame(rest) {
            Frame::Record {
                kind, payload, len, ..
            } => {
                let start = pos + FRAME_HEADER;
                if let Ok(Record::Message(m)) =
                    Record::decode(kind, bytes.slice(start..start + payload.len()))
                {
                    fuzz_message(m.content);
                }
                pos += len;
            }
            Frame::End | Frame::Torn | Frame::Corrupt => break,
        }
    }
    let _ = segment::decode_header(data);
    // Payloads without the checksum in the way: every record type over the raw bytes.
    for kind in 0..=kind::LAST + 1 {
        let _ = Record::decode(kind, bytes.clone());
        let _ = Record::decode_head(kind, data);
    }
    fuzz_message(bytes);
}

fn fuzz_message(content: bytes::Bytes) {
    let Ok(mut parts) = record::message_from_content(content) else {
        return;
    };
    parts.store_id = Some(1);
    let m = parts.build();
    let _ = (
        m.size(),
        m.routing_key(),
        m.exchange(),
        m.header(),
        m.body(),
    );
    let _ = (m.expires_at(), m.store_id(), m.headers(), m.deaths());
    let _ = m.derive(|p| p.routing_key = Some(bytes::Bytes::from_static(b"k")));
}
