//! The journal's two threads: the writer (group commit, reclamation, compaction) and the
//! preallocator (keeps one zero-filled spare segment ready, and notices a full disk).

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use crate::index::Live;
use crate::record::{kind, read_frame, Frame, Record};
use crate::segment::{self, SEGMENT_HEADER};
use crate::{Chunk, Shared};

/// Written buffers kept for reuse, and the largest one worth keeping.
const FREE_BUFFERS: usize = 4;
const FREE_BUFFER_MAX: usize = 4 << 20;

/// The segment being appended to.
struct Current {
    id: u64,
    file: File,
    written: bool,
}

/// Writes everything pending, syncs once, announces the new durable point; repeats. A round
/// takes whatever accumulated while the previous sync ran, so concurrent publishers share
/// syncs and a lone one never waits for a timer.
pub(crate) fn run(shared: Arc<Shared>) {
    let mut current: Option<Current> = None;
    loop {
        let (chunks, last) = {
            let mut st = shared.state.lock();
            while st.chunks.is_empty() {
                if shared.stop.load(Ordering::Acquire) {
                    return;
                }
                shared.work.wait(&mut st);
            }
            (std::mem::take(&mut st.chunks), st.next_seq - 1)
        };
        if !shared.failed.load(Ordering::Acquire) {
            match write_round(&shared, &mut current, &chunks) {
                Ok(()) => {
                    shared.durable.store(last, Ordering::Release);
                    shared.wake(last);
                }
                Err(e) => shared.fail("writing the journal", &e),
            }
        }
        {
            let mut st = shared.state.lock();
            for mut c in chunks {
                if st.free.len() < FREE_BUFFERS && c.data.capacity() <= FREE_BUFFER_MAX {
                    c.data.clear();
                    st.free.push(c.data);
                }
            }
        }
        if !shared.failed.load(Ordering::Acquire) {
            reclaim(&shared);
            compact_if_worth_it(&shared);
        }
    }
}

fn write_round(shared: &Shared, current: &mut Option<Current>, chunks: &[Chunk]) -> io::Result<()> {
    let mut new_entries = false;
    for c in chunks {
        if let Some(first) = c.first_seq {
            let file = open_segment(shared, c.segment, c.capacity)?;
            file.write_all_at(&segment::encode_header(c.segment, first), 0)?;
            if let Some(old) = current.take().filter(|o| o.written) {
                old.file.sync_data()?;
            }
            *current = Some(Current {
                id: c.segment,
                file,
                written: false,
            });
            new_entries = true;
        }
        let Some(cur) = current.as_mut().filter(|cur| cur.id == c.segment) else {
            return Err(io::Error::other(format!(
                "journal segment {} is not open for writing",
                c.segment
            )));
        };
        cur.file.write_all_at(&c.data, c.offset)?;
        cur.written = true;
    }
    if let Some(cur) = current.as_mut().filter(|c| c.written) {
        cur.file.sync_data()?;
        cur.written = false;
    }
    if new_entries {
        segment::sync_dir(&shared.dir)?;
    }
    Ok(())
}

fn no_space(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::StorageFull | io::ErrorKind::QuotaExceeded
    )
}

/// A new segment file: the spare renamed into place when there is one of the right size,
/// else one made here. Without disk space this waits (reclaiming what consumers free)
/// rather than failing: persistent publishes are refused meanwhile, and what is pending here
/// (settlements, declarations) is written once space comes back.
fn open_segment(shared: &Shared, id: u64, capacity: u64) -> io::Result<File> {
    let path = segment::segment_path(&shared.dir, id);
    loop {
        if capacity == shared.segment_size {
            let mut spare = shared.spare.lock();
            if spare.ready {
                // Renamed under the lock: the preallocator renames its new spare into the
                // same name under it too.
                std::fs::rename(segment::spare_path(&shared.dir), &path)?;
                spare.ready = false;
                shared.spare_changed.notify_all();
                drop(spare);
                return File::options().read(true).write(true).open(&path);
            }
            if !shared.full.load(Ordering::Acquire) && !shared.stop.load(Ordering::Acquire) {
                // The preallocator is making one: wait for it rather than zero-fill twice.
                shared
                    .spare_changed
                    .wait_for(&mut spare, Duration::from_millis(100));
                continue;
            }
        }
        match segment::create_zeroed(&path, capacity) {
            Ok(f) => return Ok(f),
            Err(e) if no_space(&e) && !shared.stop.load(Ordering::Acquire) => {
                let _ = std::fs::remove_file(&path);
                if !shared.full.swap(true, Ordering::AcqRel) {
                    tracing::warn!("store: disk full; refusing persistent publishes");
                }
                reclaim(shared);
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(e) => {
                let _ = std::fs::remove_file(&path);
                return Err(e);
            }
        }
    }
}

/// Removes head segments with nothing live left (recycling one as the spare), oldest first:
/// a segment's dequeue and delete records must outlive the records they cancel.
fn reclaim(shared: &Shared) {
    loop {
        let victim = {
            let mut st = shared.state.lock();
            let durable = shared.durable.load(Ordering::Acquire);
            let tail = st.tail.segment;
            let Some((&id, stats)) = st.index.segments.first_key_value() else {
                return;
            };
            let copies_durable = stats.compacted_upto.is_none_or(|upto| upto <= durable);
            if id >= tail || stats.live_bytes > 0 || !copies_durable {
                return;
            }
            let capacity = stats.capacity;
            st.index.segments.remove(&id);
            (id, capacity)
        };
        let (id, capacity) = victim;
        let path = segment::segment_path(&shared.dir, id);
        let mut spare = shared.spare.lock();
        let recycled = capacity == shared.segment_size
            && !spare.ready
            && std::fs::rename(&path, segment::spare_path(&shared.dir)).is_ok();
        if recycled {
            spare.ready = true;
            shared.full.store(false, Ordering::Release);
        } else if let Err(e) = std::fs::remove_file(&path) {
            tracing::warn!("store: cannot remove segment {}: {e}", path.display());
        }
        shared.spare_changed.notify_all();
    }
}

/// When dead space exceeds the live data (plus two segments of slack), the head segment's
/// live records are appended anew so it can go; the segments behind it that are already
/// dead follow it out.
fn compact_if_worth_it(shared: &Shared) {
    let head = {
        let st = shared.state.lock();
        let disk: u64 = st.index.segments.values().map(|s| s.capacity).sum();
        let slack = 2 * shared.segment_size;
        let Some((&id, stats)) = st.index.segments.first_key_value() else {
            return;
        };
        if disk <= 2 * st.index.live_bytes + slack
            || id >= st.tail.segment
            || stats.compacted_upto.is_some()
        {
            return;
        }
        id
    };
    if let Err(e) = compact(shared, head) {
        tracing::warn!("store: cannot compact segment {head}: {e}");
    }
}

fn compact(shared: &Shared, head: u64) -> io::Result<()> {
    let data = Bytes::from(std::fs::read(segment::segment_path(&shared.dir, head))?);
    let Some((_, first)) = segment::decode_header(&data) else {
        return Err(io::Error::other("bad segment header"));
    };
    // Decode outside the lock; the segment is immutable.
    let mut candidates = Vec::new();
    let (mut pos, mut expect) = (SEGMENT_HEADER, first);
    while let Frame::Record {
        seq,
        kind: k,
        payload,
        len,
    } = read_frame(&data[pos..])
    {
        if seq != expect || k == kind::SEGMENT_END {
            break;
        }
        if matches!(
            k,
            kind::MESSAGE
                | kind::TX_MESSAGE
                | kind::EXCHANGE_DECLARE
                | kind::QUEUE_DECLARE
                | kind::BIND
                | kind::EXCHANGE_BIND
        ) {
            let start = pos + crate::record::FRAME_HEADER;
            if let Ok(rec) = Record::decode(k, data.slice(start..start + payload.len())) {
                candidates.push((seq, rec));
            }
        }
        pos += len;
        expect += 1;
    }
    let mut st = shared.state.lock();
    for (seq, rec) in candidates {
        if !st.index.is_current(&rec, head, seq) {
            continue;
        }
        let rec_tx = match &rec {
            Record::TxMessage { tx, .. } => Some(*tx),
            _ => None,
        };
        match rec {
            Record::Message(m) | Record::TxMessage { message: m, .. } => {
                let Some(queues) = st.index.messages.get(&m.id).map(|l| l.queues.to_vec()) else {
                    continue;
                };
                // A copy made before its transaction's commit record stays inside the
                // transaction (it precedes the commit); after, it is a plain message.
                let tx = match &rec_tx {
                    Some(t) if st.open_txs.contains(t) => Some(*t),
                    _ => None,
                };
                let (seq, loc) = st.append(tx.map_or(kind::MESSAGE, |_| kind::TX_MESSAGE), |out| {
                    if let Some(t) = tx {
                        crate::codec::put_u64(out, t);
                    }
                    crate::record::put_message_head(out, m.id, &queues);
                    out.extend_from_slice(&m.content);
                });
                st.index.message(m.id, &queues, Live { loc, seq });
            }
            other => {
                st.record(&other);
            }
        }
    }
    let upto = st.next_seq - 1;
    if let Some(s) = st.index.segments.get_mut(&head) {
        s.compacted_upto = Some(upto);
    }
    shared.appended.store(upto, Ordering::Release);
    drop(st);
    shared.work.notify_one();
    Ok(())
}

/// Keeps one zero-filled spare segment ready. Failing to make one for want of space is how
/// a full disk is noticed before any record depends on that space.
pub(crate) fn preallocate(shared: Arc<Shared>) {
    let tmp = segment::spare_tmp_path(&shared.dir);
    let spare_path = segment::spare_path(&shared.dir);
    loop {
        {
            let mut spare = shared.spare.lock();
            while spare.ready && !spare.stop {
                shared.spare_changed.wait(&mut spare);
            }
            if spare.stop {
                return;
            }
        }
        let made = segment::create_zeroed(&tmp, shared.segment_size).and_then(|_| {
            let mut spare = shared.spare.lock();
            if spare.ready {
                // A dead segment was recycled meanwhile.
                std::fs::remove_file(&tmp)
            } else {
                std::fs::rename(&tmp, &spare_path)?;
                spare.ready = true;
                Ok(())
            }
        });
        match made {
            Ok(()) => {
                if shared.full.swap(false, Ordering::AcqRel) {
                    tracing::info!("store: disk space available again");
                }
                shared.spare_changed.notify_all();
            }
            Err(e) => {
                let _ = std::fs::remove_file(&tmp);
                if !shared.full.swap(true, Ordering::AcqRel) {
                    if no_space(&e) {
                        tracing::warn!("store: disk full; refusing persistent publishes");
                    } else {
                        tracing::error!("store: cannot prepare a journal segment: {e}");
                    }
                }
                // Retry when a segment is freed, or after a while.
                let mut spare = shared.spare.lock();
                if !spare.stop && !spare.ready {
                    shared
                        .spare_changed
                        .wait_for(&mut spare, Duration::from_secs(1));
                }
            }
        }
    }
}
