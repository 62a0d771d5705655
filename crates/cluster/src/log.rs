//! The Raft log on disk: `--data-dir/raft/log-<n>.seg` files of crc32c-framed records
//! (`crc u32 | len u32 | kind u8 | payload`), written by one thread with group commit: it
//! takes everything appended meanwhile, writes it, calls `fdatasync` once and only then
//! tells openraft the entries are durable (so a follower acknowledges, and a leader counts
//! itself, only for entries on its disk). The vote lives in `raft/vote`, replaced
//! atomically. Entries stay in memory until a snapshot lets openraft purge them.
//!
//! Truncation and purging are records too, so replaying the files in order rebuilds the
//! log. A torn or corrupt record ends the replay (the file is cut there): what follows was
//! never acknowledged.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::ops::RangeBounds;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::Arc;

use openraft::storage::{LogFlushed, LogState, RaftLogStorage};
use openraft::{ErrorSubject, ErrorVerb, OptionalSend, RaftLogReader};
use parking_lot::Mutex;

use crate::types::{storage_error, Entry, LogId, NodeId, StorageError, TypeConfig, Vote};

const KIND_ENTRY: u8 = 1;
const KIND_TRUNCATE: u8 = 2;
const KIND_PURGE: u8 = 3;
const HEADER: usize = 9;
/// A segment file is closed and a new one started past this size.
const SEGMENT_BYTES: u64 = 64 << 20;
/// Larger records are corrupt (openraft batches are far smaller).
const MAX_RECORD: usize = 512 << 20;

struct Memory {
    entries: BTreeMap<u64, Entry>,
    last_purged: Option<LogId>,
    vote: Option<Vote>,
}

enum Job {
    /// Records, who waits for them to be durable, and the highest entry index among them.
    Write(Vec<u8>, Option<LogFlushed<TypeConfig>>, u64),
    /// Openraft purged the log up to here: record that in `raft/purged`, then delete
    /// segment files holding only entries up to it.
    Reclaim(LogId),
}

/// The log store handed to openraft; clones share it (openraft's log reader is one).
#[derive(Clone)]
pub struct LogStore {
    dir: PathBuf,
    mem: Arc<Mutex<Memory>>,
    writer: mpsc::Sender<Job>,
}

fn frame(kind: u8, payload: &[u8], out: &mut Vec<u8>) {
    let start = out.len();
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.push(kind);
    out.extend_from_slice(payload);
    let crc = crc32c::crc32c(&out[start + 4..]);
    out[start..start + 4].copy_from_slice(&crc.to_le_bytes());
}

/// Drops the entries up to and including `index`. A record can claim any index, the last
/// possible one too: nothing comes after that.
fn purge_upto(entries: &mut BTreeMap<u64, Entry>, index: u64) {
    *entries = match index.checked_add(1) {
        Some(next) => entries.split_off(&next),
        None => BTreeMap::new(),
    };
}

fn io(
    subject: ErrorSubject<NodeId>,
    verb: ErrorVerb,
    e: impl std::error::Error + 'static,
) -> StorageError {
    storage_error(subject, verb, &e)
}

/// Segment files in order: (number, path).
fn segments(dir: &Path) -> std::io::Result<Vec<(u64, PathBuf)>> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir)? {
        let path = e?.path();
        let n = path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_prefix("log-"))
            .and_then(|n| n.strip_suffix(".seg"))
            .and_then(|n| u64::from_str_radix(n, 16).ok());
        if let Some(n) = n {
            out.push((n, path));
        }
    }
    out.sort();
    Ok(out)
}

fn segment_path(dir: &Path, n: u64) -> PathBuf {
    dir.join(format!("log-{n:016x}.seg"))
}

fn sync_dir(dir: &Path) -> std::io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Writes `bytes` to `path` atomically and durably (temporary file, fsync, rename, fsync
/// of the directory).
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension("tmp");
    let mut f = File::create(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)?;
    if let Some(dir) = path.parent() {
        sync_dir(dir)?;
    }
    Ok(())
}

/// One segment's replay: applies its records to `mem`; returns the offset of the first bad
/// record, if any, and the highest entry index seen.
fn replay(data: &[u8], mem: &mut Memory) -> (Option<usize>, u64) {
    let mut at = 0;
    let mut max = 0;
    while at < data.len() {
        if data.len() - at < HEADER {
            return (Some(at), max);
        }
        let crc = u32::from_le_bytes([data[at], data[at + 1], data[at + 2], data[at + 3]]);
        let len =
            u32::from_le_bytes([data[at + 4], data[at + 5], data[at + 6], data[at + 7]]) as usize;
        if len > MAX_RECORD || data.len() - at - HEADER < len {
            return (Some(at), max);
        }
        if crc32c::crc32c(&data[at + 4..at + HEADER + len]) != crc {
            return (Some(at), max);
        }
        let kind = data[at + 8];
        let payload = &data[at + HEADER..at + HEADER + len];
        let ok = match kind {
            KIND_ENTRY => match postcard::from_bytes::<Entry>(payload) {
                Ok(e) => {
                    let index = e.log_id.index;
                    // A later write of an index replaces it and everything after it.
                    mem.entries.split_off(&index);
                    max = max.max(index);
                    mem.entries.insert(index, e);
                    true
                }
                Err(_) => false,
            },
            KIND_TRUNCATE => match postcard::from_bytes::<u64>(payload) {
                Ok(index) => {
                    mem.entries.split_off(&index);
                    true
                }
                Err(_) => false,
            },
            KIND_PURGE => match postcard::from_bytes::<LogId>(payload) {
                Ok(id) => {
                    purge_upto(&mut mem.entries, id.index);
                    mem.last_purged = Some(id);
                    true
                }
                Err(_) => false,
            },
            _ => false,
        };
        if !ok {
            return (Some(at), max);
        }
        at += HEADER + len;
    }
    (None, max)
}

/// What one segment leaves when replayed on its own into an empty log (see
/// [`replay_records`]).
#[derive(Debug, Default)]
pub struct Replayed {
    pub entries: BTreeMap<u64, Entry>,
    pub last_purged: Option<LogId>,
    /// Where the first torn or corrupt record starts: the replay stopped there.
    pub bad_at: Option<usize>,
}

/// Replays one segment file's bytes as [`LogStore::open`] replays each segment, from an
/// empty log. (For tests and fuzzing: `open` replays into the log it is building.)
pub fn replay_records(data: &[u8]) -> Replayed {
    let mut mem = Memory {
        entries: BTreeMap::new(),
        last_purged: None,
        vote: None,
    };
    let (bad_at, _) = replay(data, &mut mem);
    Replayed {
        entries: mem.entries,
        last_purged: mem.last_purged,
        bad_at,
    }
}

/// A file written whole by `write_atomic` (the vote, the purge point): absent is `None`, but
/// one that cannot be read or decoded stops the node. Starting without its vote would let
/// it vote twice in a term.
fn read_small_file<T: serde::de::DeserializeOwned>(path: &Path) -> std::io::Result<Option<T>> {
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    postcard::from_bytes(&bytes).map(Some).map_err(|e| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("{}: {e}", path.display()),
        )
    })
}

impl LogStore {
    /// Opens (or creates) the log under `dir`, replaying what is there.
    pub fn open(dir: &Path) -> std::io::Result<LogStore> {
        std::fs::create_dir_all(dir)?;
        let mut mem = Memory {
            entries: BTreeMap::new(),
            last_purged: None,
            vote: None,
        };
        mem.vote = read_small_file(&dir.join("vote"))?;
        mem.last_purged = read_small_file(&dir.join("purged"))?;
        let segs = segments(dir)?;
        let mut maxes = Vec::new();
        let mut cut_from = None;
        for (i, (n, path)) in segs.iter().enumerate() {
            let mut data = Vec::new();
            File::open(path)?.read_to_end(&mut data)?;
            let (bad, max) = replay(&data, &mut mem);
            maxes.push((*n, path.clone(), max));
            if let Some(at) = bad {
                tracing::warn!(file = %path.display(), at, "raft log: torn or corrupt record; the log ends there");
                OpenOptions::new()
                    .write(true)
                    .open(path)?
                    .set_len(at as u64)?;
                cut_from = Some(i + 1);
                break;
            }
        }
        if let Some(p) = mem.last_purged {
            purge_upto(&mut mem.entries, p.index);
        }
        if let Some(from) = cut_from {
            for (_, path) in &segs[from..] {
                let _ = std::fs::rename(path, path.with_extension("discarded"));
            }
        }
        let next = match segs.last() {
            None => 1,
            Some((n, path)) => n.checked_add(1).ok_or_else(|| {
                std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("{}: no segment number can follow it", path.display()),
                )
            })?,
        };
        let (tx, rx) = mpsc::channel();
        let wdir = dir.to_path_buf();
        std::thread::Builder::new()
            .name("raft-log".into())
            .spawn(move || writer(wdir, next, maxes, rx))?;
        tracing::info!(
            entries = mem.entries.len(),
            last = mem.entries.keys().next_back().copied().unwrap_or(0),
            "raft log opened"
        );
        Ok(LogStore {
            dir: dir.to_path_buf(),
            mem: Arc::new(Mutex::new(mem)),
            writer: tx,
        })
    }

    fn send(&self, job: Job) -> Result<(), StorageError> {
        self.writer.send(job).map_err(|_| {
            io(
                ErrorSubject::Logs,
                ErrorVerb::Write,
                std::io::Error::other("raft log writer stopped"),
            )
        })
    }

    fn record(&self, kind: u8, payload: &impl serde::Serialize) -> Result<Vec<u8>, StorageError> {
        let bytes = postcard::to_allocvec(payload)
            .map_err(|e| io(ErrorSubject::Logs, ErrorVerb::Write, e))?;
        let mut out = Vec::with_capacity(bytes.len() + HEADER);
        frame(kind, &bytes, &mut out);
        Ok(out)
    }
}

/// The writer thread: group commit over the current segment.
fn writer(
    dir: PathBuf,
    mut next: u64,
    mut segs: Vec<(u64, PathBuf, u64)>,
    rx: mpsc::Receiver<Job>,
) {
    let mut current: Option<(File, u64, u64, u64)> = None; // file, number, size, max index
    while let Ok(first) = rx.recv() {
        let mut jobs = vec![first];
        while let Ok(j) = rx.try_recv() {
            jobs.push(j);
        }
        let mut buf = Vec::new();
        let mut callbacks = Vec::new();
        let mut reclaim = None;
        let mut top = 0;
        for j in jobs {
            match j {
                Job::Write(bytes, cb, max) => {
                    buf.extend_from_slice(&bytes);
                    callbacks.extend(cb);
                    top = top.max(max);
                }
                Job::Reclaim(upto) => reclaim = Some(upto),
            }
        }
        let result = (|| -> std::io::Result<()> {
            if buf.is_empty() {
                return Ok(());
            }
            if current.as_ref().is_none_or(|c| c.2 >= SEGMENT_BYTES) {
                if let Some((f, n, _, max)) = current.take() {
                    f.sync_data()?;
                    segs.push((n, segment_path(&dir, n), max));
                }
                let path = segment_path(&dir, next);
                let f = OpenOptions::new().create(true).append(true).open(&path)?;
                sync_dir(&dir)?;
                current = Some((f, next, 0, 0));
                next += 1;
            }
            if let Some((f, _, size, max)) = current.as_mut() {
                f.write_all(&buf)?;
                f.sync_data()?;
                *size += buf.len() as u64;
                *max = (*max).max(top);
            }
            Ok(())
        })();
        let failed = result.as_ref().err().map(|e| e.to_string());
        if let Some(e) = &failed {
            tracing::error!("raft log: write failed: {e}");
        }
        for cb in callbacks {
            cb.log_io_completed(match &failed {
                None => Ok(()),
                Some(e) => Err(std::io::Error::other(e.clone())),
            });
        }
        if let Some(purged) = reclaim {
            // The purge point outlives the segments that recorded it.
            let saved = postcard::to_allocvec(&purged)
                .map_err(std::io::Error::other)
                .and_then(|b| write_atomic(&dir.join("purged"), &b));
            if let Err(e) = saved {
                tracing::error!("raft log: cannot record the purge point: {e}");
                continue;
            }
            let upto = purged.index;
            // Closed segments whose entries all lie at or below the purge point.
            segs.retain(|(_, path, max)| {
                if *max != 0 && *max <= upto {
                    let _ = std::fs::remove_file(path);
                    false
                } else {
                    true
                }
            });
        }
    }
    if let Some((f, _, _, _)) = current {
        let _ = f.sync_data();
    }
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, StorageError> {
        let mem = self.mem.lock();
        Ok(mem.entries.range(range).map(|(_, e)| e.clone()).collect())
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = LogStore;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, StorageError> {
        let mem = self.mem.lock();
        let last = mem
            .entries
            .values()
            .next_back()
            .map(|e| e.log_id)
            .or(mem.last_purged);
        Ok(LogState {
            last_purged_log_id: mem.last_purged,
            last_log_id: last,
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote) -> Result<(), StorageError> {
        let bytes =
            postcard::to_allocvec(vote).map_err(|e| io(ErrorSubject::Vote, ErrorVerb::Write, e))?;
        let path = self.dir.join("vote");
        tokio::task::spawn_blocking(move || write_atomic(&path, &bytes))
            .await
            .map_err(|e| io(ErrorSubject::Vote, ErrorVerb::Write, e))?
            .map_err(|e| io(ErrorSubject::Vote, ErrorVerb::Write, e))?;
        self.mem.lock().vote = Some(*vote);
        Ok(())
    }

    async fn read_vote(&mut self) -> Result<Option<Vote>, StorageError> {
        Ok(self.mem.lock().vote)
    }

    async fn append<I>(
        &mut self,
        entries: I,
        callback: LogFlushed<TypeConfig>,
    ) -> Result<(), StorageError>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let mut buf = Vec::new();
        let top = {
            let mut mem = self.mem.lock();
            let mut top = 0;
            for e in entries {
                top = e.log_id.index;
                let bytes = postcard::to_allocvec(&e)
                    .map_err(|err| io(ErrorSubject::Log(e.log_id), ErrorVerb::Write, err))?;
                frame(KIND_ENTRY, &bytes, &mut buf);
                mem.entries.insert(e.log_id.index, e);
            }
            top
        };
        self.send(Job::Write(buf, Some(callback), top))
    }

    async fn truncate(&mut self, log_id: LogId) -> Result<(), StorageError> {
        let rec = self.record(KIND_TRUNCATE, &log_id.index)?;
        self.mem.lock().entries.split_off(&log_id.index);
        self.send(Job::Write(rec, None, 0))
    }

    async fn purge(&mut self, log_id: LogId) -> Result<(), StorageError> {
        let rec = self.record(KIND_PURGE, &log_id)?;
        {
            let mut mem = self.mem.lock();
            purge_upto(&mut mem.entries, log_id.index);
            mem.last_purged = Some(log_id);
        }
        self.send(Job::Write(rec, None, 0))?;
        self.send(Job::Reclaim(log_id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use openraft::{CommittedLeaderId, EntryPayload};

    fn entry(term: u64, index: u64) -> Entry {
        Entry {
            log_id: LogId::new(CommittedLeaderId::new(term, 1), index),
            payload: EntryPayload::Blank,
        }
    }

    fn rec(kind: u8, payload: &impl serde::Serialize, out: &mut Vec<u8>) {
        frame(kind, &postcard::to_allocvec(payload).unwrap(), out);
    }

    fn empty() -> Memory {
        Memory {
            entries: BTreeMap::new(),
            last_purged: None,
            vote: None,
        }
    }

    #[test]
    fn replay_applies_truncation_and_purge_and_stops_at_a_torn_record() {
        let mut data = Vec::new();
        for i in 1..=5 {
            rec(KIND_ENTRY, &entry(1, i), &mut data);
        }
        // A new leader overwrote 4 and 5.
        rec(KIND_TRUNCATE, &4u64, &mut data);
        rec(KIND_ENTRY, &entry(2, 4), &mut data);
        rec(
            KIND_PURGE,
            &LogId::new(CommittedLeaderId::new(1, 1), 2),
            &mut data,
        );
        let good = data.len();
        rec(KIND_ENTRY, &entry(2, 5), &mut data);
        data.truncate(data.len() - 3);
        let mut mem = empty();
        let (bad, max) = replay(&data, &mut mem);
        assert_eq!(bad, Some(good));
        assert_eq!(max, 5);
        assert_eq!(mem.entries.keys().copied().collect::<Vec<_>>(), vec![3, 4]);
        assert_eq!(mem.entries[&4].log_id.leader_id.term, 2);
        assert_eq!(mem.last_purged.map(|l| l.index), Some(2));
    }

    #[test]
    fn a_flipped_bit_ends_the_log() {
        let mut data = Vec::new();
        rec(KIND_ENTRY, &entry(1, 1), &mut data);
        let second = data.len();
        rec(KIND_ENTRY, &entry(1, 2), &mut data);
        let last = data.len() - 1;
        data[last] ^= 1;
        let mut mem = empty();
        assert_eq!(replay(&data, &mut mem).0, Some(second));
        assert_eq!(mem.entries.len(), 1);
    }

    #[tokio::test]
    async fn a_reopened_log_has_its_entries_vote_and_purge_point() {
        let dir = std::env::temp_dir().join(format!("ferry-raftlog-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        {
            let mut log = LogStore::open(&dir).unwrap();
            let mut bytes = Vec::new();
            for i in 1..=3 {
                let e = entry(1, i);
                frame(KIND_ENTRY, &postcard::to_allocvec(&e).unwrap(), &mut bytes);
            }
            log.send(Job::Write(bytes, None, 3)).unwrap();
            log.save_vote(&Vote::new(1, 1)).await.unwrap();
            log.purge(LogId::new(CommittedLeaderId::new(1, 1), 1))
                .await
                .unwrap();
            // The writer thread finishes what was sent before the store goes.
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
        let mut log = LogStore::open(&dir).unwrap();
        let state = log.get_log_state().await.unwrap();
        assert_eq!(state.last_log_id.map(|l| l.index), Some(3));
        assert_eq!(state.last_purged_log_id.map(|l| l.index), Some(1));
        assert_eq!(log.read_vote().await.unwrap(), Some(Vote::new(1, 1)));
        assert_eq!(log.try_get_log_entries(0..10).await.unwrap().len(), 2);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Entries 1 to 5, 4 and 5 overwritten by a later term, a purge up to 2.
    fn segment() -> Vec<u8> {
        let mut data = Vec::new();
        for i in 1..=5 {
            rec(KIND_ENTRY, &entry(1, i), &mut data);
        }
        rec(KIND_TRUNCATE, &4u64, &mut data);
        rec(KIND_ENTRY, &entry(2, 4), &mut data);
        rec(
            KIND_PURGE,
            &LogId::new(CommittedLeaderId::new(1, 1), 2),
            &mut data,
        );
        data
    }

    #[test]
    fn replay_records_replays_a_segment_from_an_empty_log() {
        let mut data = segment();
        let good = data.len();
        let whole = replay_records(&data);
        assert_eq!(whole.bad_at, None);
        assert_eq!(
            whole.entries.keys().copied().collect::<Vec<_>>(),
            vec![3, 4]
        );
        assert_eq!(whole.last_purged.map(|l| l.index), Some(2));
        data.extend_from_slice(&[1, 2, 3]);
        let torn = replay_records(&data);
        assert_eq!(torn.bad_at, Some(good));
        assert_eq!(torn.entries.len(), 2);
    }

    /// `cargo test -p ferry-cluster -- --ignored write_raft_log_replay_seeds`
    #[test]
    #[ignore = "writes fuzz/seeds/raft_log_replay"]
    fn write_raft_log_replay_seeds() {
        use crate::samples::{entries, write_seed};
        write_seed("raft_log_replay", "segment", &segment());
        let mut data = Vec::new();
        for e in entries() {
            rec(KIND_ENTRY, &e, &mut data);
        }
        write_seed("raft_log_replay", "membership_and_ops", &data);
        let mut torn = segment();
        rec(KIND_ENTRY, &entry(2, 5), &mut torn);
        torn.truncate(torn.len() - 3);
        write_seed("raft_log_replay", "torn_tail", &torn);
        let mut last = Vec::new();
        rec(KIND_ENTRY, &entry(1, 1), &mut last);
        let end = LogId::new(CommittedLeaderId::new(1, 1), u64::MAX);
        rec(KIND_PURGE, &end, &mut last);
        write_seed("raft_log_replay", "purge_last_index", &last);
    }

    /// `index + 1` overflowed here: a panic in debug builds, and in release a purge that
    /// kept every entry while recording the purge point past them.
    #[test]
    fn a_purge_up_to_the_last_possible_index_drops_everything() {
        let mut data = Vec::new();
        rec(KIND_ENTRY, &entry(1, 1), &mut data);
        rec(
            KIND_PURGE,
            &LogId::new(CommittedLeaderId::new(1, 1), u64::MAX),
            &mut data,
        );
        let r = replay_records(&data);
        assert_eq!(r.bad_at, None);
        assert!(r.entries.is_empty());
        assert_eq!(r.last_purged.map(|l| l.index), Some(u64::MAX));
    }

    #[test]
    fn an_unreadable_vote_stops_the_node_instead_of_being_forgotten() {
        let dir = std::env::temp_dir().join(format!("ferry-raft-vote-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        // A vote's encoding cut short: decoding runs out of input.
        std::fs::write(dir.join("vote"), [0x05]).unwrap();
        let err = LogStore::open(&dir).err().expect("refused");
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidData);
        assert!(err.to_string().contains("vote"), "{err}");
        std::fs::remove_file(dir.join("vote")).unwrap();
        assert!(LogStore::open(&dir).is_ok());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
