//! The journal's two threads: the writer (group commit, reclamation, compaction) and the
//! preallocator (keeps one zero-filled spare segment ready, and notices a full disk).

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use parking_lot::MutexGuard;

use crate::index::Live;
use crate::record::{kind, read_frame, Frame, Record, FRAME_HEADER};
use crate::segment;
use crate::{load, Chunk, Shared};

/// Bytes of live records compaction reads (and copies) at a time.
const COMPACT_BATCH: u64 = 1 << 20;

/// Written buffers kept for reuse, and the largest one worth keeping.
const FREE_BUFFERS: usize = 4;
const FREE_BUFFER_MAX: usize = 4 << 20;

/// The fraction of the tail segment written before the preallocator is asked to zero-fill
/// the next one, if no dead segment was recycled into the spare by then (1 / this).
const SPARE_WANTED_AT: u64 = 2;

/// A head segment whose live records take at most 1 / this of it is compacted as soon as
/// the writer has moved past it: copying them costs at most that much per segment written.
const LITTLE_LIVE: u64 = 64;

/// The segment being appended to.
struct Current {
    id: u64,
    file: File,
    written: bool,
}

/// Bounds of how long the writer, having seen the first records of a round, looks for the
/// kick that ends the burst before it sleeps (only while the rounds are kicked: see [`run`]
/// and [`KickSpin`]). Beyond the upper bound (the default of `StoreConfig::kick_spin_max`),
/// looking costs more CPU than the wake-up it saves (25-30 us here) is worth.
pub(crate) const KICK_SPIN_MIN: Duration = Duration::from_micros(150);
pub(crate) const KICK_SPIN_MAX: Duration = Duration::from_micros(500);

/// How long to look for the kick, learned from the rounds the writer had to look for: twice
/// the time from first seeing a round's records to its kick, or the last limit less an
/// eighth if that is longer (one quick round does not undo what the slow ones taught),
/// within [`KICK_SPIN_MIN`] and `StoreConfig::kick_spin_max`. On a slower host a confirming
/// publisher's round took longer than a fixed 150 us look from the writer's first sight of
/// its records (often a consumer's ack that came during the last sync) to its kick, so the
/// look gave up just before the kick and the writer paid the wake-up anyway on most round
/// trips (docs/STORE.md has the measurements).
#[derive(Debug, Clone, Copy)]
struct KickSpin {
    limit: Duration,
    max: Duration,
}

impl KickSpin {
    fn new(max: Duration) -> KickSpin {
        KickSpin {
            limit: KICK_SPIN_MIN,
            max: max.max(KICK_SPIN_MIN),
        }
    }

    fn limit(self) -> Duration {
        self.limit
    }

    /// Learns from a round whose kick came `took` after the writer first saw its records. A
    /// kick later than the longest look could not have been caught by looking, and the
    /// records first seen were most likely not its burst's (a consumer's acks): nothing to
    /// learn.
    fn kicked_after(&mut self, took: Duration) {
        if took > self.max {
            return;
        }
        let decayed = self.limit - self.limit / 8;
        self.limit = took
            .saturating_mul(2)
            .max(decayed)
            .clamp(KICK_SPIN_MIN, self.max);
    }
}

/// Writes everything pending, syncs once, announces the new durable point; repeats. A round
/// takes whatever accumulated while the previous sync ran, so concurrent publishers share
/// syncs and a lone one never waits for a timer.
pub(crate) fn run(shared: Arc<Shared>) {
    let mut current: Option<Current> = None;
    // The last round went because somebody waited for it: the next burst is likely to end
    // with a kick too.
    let mut kicked_last = false;
    let mut kick_spin = KickSpin::new(shared.kick_spin_max);
    loop {
        let (chunks, marked, last) = {
            let mut st = shared.state.lock();
            // When the writer first saw this round's records.
            let mut burst_seen: Option<Instant> = None;
            loop {
                let stopping = shared.stop.load(Ordering::Acquire);
                if st.chunks.is_empty() {
                    if stopping {
                        return;
                    }
                    shared.work.wait(&mut st);
                    continue;
                }
                let first_sight = burst_seen.is_none();
                let seen = *burst_seen.get_or_insert_with(Instant::now);
                if stopping || shared.kicked.swap(false, Ordering::AcqRel) {
                    kicked_last = !stopping;
                    // A kick already there when the records were first seen (several
                    // publishers, or one that kicked during the last sync) says nothing of
                    // how long to look.
                    if kicked_last && !first_sight {
                        kick_spin.kicked_after(seen.elapsed());
                        shared
                            .kick_spin_micros
                            .store(kick_spin.limit().as_micros() as u64, Ordering::Relaxed);
                    }
                    break;
                }
                // A publisher waiting for confirms kicks once it has appended its whole read
                // batch, up to a few hundred microseconds after its records are first seen
                // (`KickSpin` learns how long). Sleeping until then puts a second wake-up
                // (about 25-30 us here) between the kick and the sync, on every round trip of
                // its window; yielding meanwhile leaves the CPU to whatever else is runnable. Either way the flag is looked at again under
                // the lock above: a kick that came just after the spin gave up notified
                // nobody, and must not wait for the timer.
                if kicked_last {
                    kicked_last = false;
                    MutexGuard::unlocked(&mut st, || spin_for(&shared.kicked, kick_spin.limit()));
                    continue;
                }
                // Records nobody waits for yet go out with the next kick (see
                // `Shared::kick`), or after this long.
                if shared
                    .work
                    .wait_for(&mut st, shared.unawaited_records_delay)
                    .timed_out()
                {
                    break;
                }
            }
            let mut taken = std::mem::take(&mut st.chunks);
            let marked = taken.last_mut().is_some_and(append_end_marker);
            let chunks: Vec<Arc<Chunk>> = taken.into_iter().map(Arc::new).collect();
            // Readable by `load` until it is on disk.
            st.writing.clone_from(&chunks);
            (chunks, marked, st.next_seq - 1)
        };
        if !shared.failed.load(Ordering::Acquire) {
            match write_round(&shared, &mut current, &chunks, marked) {
                Ok(()) => {
                    shared.syncs.fetch_add(1, Ordering::Relaxed);
                    shared.durable.store(last, Ordering::Release);
                    shared.wake(last);
                }
                Err(e) => shared.fail("writing the journal", &e),
            }
        }
        let tail = {
            let mut st = shared.state.lock();
            st.writing.clear();
            for c in chunks {
                // `load` copies under the state lock, so nobody else holds a chunk now.
                let Ok(mut c) = Arc::try_unwrap(c) else {
                    continue;
                };
                if st.free.len() < FREE_BUFFERS && c.data.capacity() <= FREE_BUFFER_MAX {
                    c.data.clear();
                    st.free.push(c.data);
                }
            }
            st.tail
        };
        if !shared.failed.load(Ordering::Acquire) {
            reclaim(&shared);
            compact_if_worth_it(&shared);
            if tail.offset >= tail.capacity / SPARE_WANTED_AT {
                want_spare(&shared);
            }
        }
    }
}

/// Whether `flag` is set within `limit`, yielding the CPU between looks.
fn spin_for(flag: &AtomicBool, limit: Duration) -> bool {
    let until = Instant::now() + limit;
    loop {
        if flag.load(Ordering::Acquire) {
            return true;
        }
        if Instant::now() >= until {
            return false;
        }
        std::thread::yield_now();
    }
}

/// Asks the preallocator for a zero-filled spare segment unless one is ready. The writer
/// asks only once the tail segment is partly written: by then a consumer that keeps up has
/// usually emptied the head segment, and reclamation recycled it as the spare. Zero-filling a
/// segment per segment written costs a CPU copy and a device write of the whole segment,
/// which slow the syncs publishers wait for (and the file deleted in its place is discarded).
fn want_spare(shared: &Shared) {
    let mut spare = shared.spare.lock();
    if !spare.ready && !spare.wanted {
        spare.wanted = true;
        shared.spare_changed.notify_all();
    }
}

/// Puts the zero frame header that ends the round's data (see `write_round`) into the last
/// chunk's buffer, when it has the room: the round is then one write instead of two. Done
/// under the state lock, so only without growing the buffer (a copy there would hold up
/// every publisher); `load` reads records by their offsets and never sees it.
fn append_end_marker(last: &mut Chunk) -> bool {
    if last.data.capacity() - last.data.len() < FRAME_HEADER {
        return false;
    }
    last.data.extend_from_slice(&[0u8; FRAME_HEADER]);
    true
}

/// `marked`: the last chunk's data already ends with the end marker.
fn write_round(
    shared: &Shared,
    current: &mut Option<Current>,
    chunks: &[Arc<Chunk>],
    marked: bool,
) -> io::Result<()> {
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
    if let Some(last) = chunks.last().filter(|_| !marked) {
        // A zero frame header after the round's last frame reads as the end of the data.
        // Without it a recycled tail segment holds stale bytes of its earlier life there,
        // which recovery cannot tell from a torn write. `State::append` keeps room for it;
        // the next round overwrites it. A write of its own when the buffer had no room.
        if let Some(cur) = current.as_mut().filter(|cur| cur.id == last.segment) {
            cur.file
                .write_all_at(&[0u8; FRAME_HEADER], last.offset + last.data.len() as u64)?;
        }
    }
    if let Some(cur) = current.as_mut().filter(|c| c.written) {
        #[cfg(test)]
        shared.sync_hold.pass();
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
                // The preallocator is making one (asked now if it was not yet): wait for it
                // rather than zero-fill twice.
                if !spare.wanted {
                    spare.wanted = true;
                    shared.spare_changed.notify_all();
                }
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
            if id >= tail || !stats.can_go(durable) {
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
            spare.wanted = false;
            shared.full.store(false, Ordering::Release);
        } else if let Err(e) = std::fs::remove_file(&path) {
            tracing::warn!("store: cannot remove segment {}: {e}", path.display());
        }
        shared.spare_changed.notify_all();
    }
}

/// When dead space exceeds the live data (plus two segments of slack), or the head segment
/// holds little that is live, the head segment's live records are appended anew so it can
/// go; the segments behind it that are already dead follow it out.
fn compact_if_worth_it(shared: &Shared) {
    let head = {
        let st = shared.state.lock();
        let disk: u64 = st.index.segments.values().map(|s| s.capacity).sum();
        let slack = 2 * shared.segment_size;
        let Some((&id, stats)) = st.index.segments.first_key_value() else {
            return;
        };
        // The first segment holds the declarations, which live as long as their queues: a
        // head kept only by a few such records is copied forward as soon as the writer has
        // moved past it, so dead segments go (and are recycled as the spare) one at a time
        // instead of piling up behind it.
        let little = stats.live_bytes <= stats.capacity / LITTLE_LIVE;
        // The tail can move past a segment whose last records are still pending (appended
        // while this round was syncing): they are not on disk to be read yet, and reading
        // them found "live records unreadable" (10 times in a run of 1M persistent
        // messages, about one per segment). The next round writes them.
        if (!little && disk <= 2 * st.index.live_bytes + slack)
            || id >= st.tail.segment
            || st.chunks.iter().any(|c| c.segment <= id)
            || stats.compacted_upto.is_some()
        {
            return;
        }
        id
    };
    if let Err(e) = compact(shared, head) {
        #[cfg(test)]
        shared.compaction_failures.fetch_add(1, Ordering::Relaxed);
        tracing::warn!("store: cannot compact segment {head}: {e}");
    }
}

/// Copies the live records of segment `head` to the tail, reading them where they are a
/// batch at a time: compaction never holds much of a segment in memory.
fn compact(shared: &Shared, head: u64) -> io::Result<()> {
    let mut live = shared.state.lock().index.live_in(head);
    live.sort_unstable_by_key(|l| l.loc.offset);
    let (mut unread, mut held) = (0, 0);
    let mut rest = &live[..];
    while !rest.is_empty() {
        let mut bytes = 0;
        let n = rest
            .iter()
            .take_while(|l| {
                bytes += l.loc.len;
                bytes <= COMPACT_BATCH
            })
            .count()
            .max(1);
        let (batch, next) = rest.split_at(n);
        rest = next;
        let reads: Vec<((), Live)> = batch.iter().map(|l| ((), *l)).collect();
        let mut copies = Vec::new();
        load::read_runs(&shared.dir, &reads, |(), at, frame| {
            let rec = frame.and_then(|f| match read_frame(f) {
                Frame::Record {
                    seq, kind, payload, ..
                } if seq == at.seq => Record::decode(kind, Bytes::copy_from_slice(payload)).ok(),
                _ => None,
            });
            match rec {
                Some(rec) => copies.push((at.seq, rec)),
                None => unread += 1,
            }
        });
        held += copy_forward(shared, head, copies);
    }
    if held > 0 {
        // Messages an open transaction is dequeueing: compaction tries again later.
        return Ok(());
    }
    if unread > 0 {
        // Those stay live where they are; the segment is not reclaimed.
        return Err(io::Error::other(format!(
            "{unread} live records unreadable"
        )));
    }
    let mut st = shared.state.lock();
    let upto = st.next_seq - 1;
    if let Some(s) = st.index.segments.get_mut(&head) {
        s.compacted_upto = Some(upto);
    }
    Ok(())
}

/// Appends copies of records of segment `head` that are still live there; returns how many
/// it left there for now.
fn copy_forward(shared: &Shared, head: u64, candidates: Vec<(u64, Record)>) -> usize {
    let mut held = 0;
    let mut st = shared.state.lock();
    for (seq, rec) in candidates {
        if !st.index.is_current(&rec, head, seq) {
            continue;
        }
        if let Record::Message(m) | Record::TxMessage { message: m, .. } = &rec {
            if st.dequeue_pending(m.id) {
                // A copy now would follow the transaction's dequeue record and outlive it.
                held += 1;
                continue;
            }
        }
        let rec_tx = match &rec {
            Record::TxMessage { tx, .. } => Some(*tx),
            _ => None,
        };
        match rec {
            Record::Message(m) | Record::TxMessage { message: m, .. } => {
                let Some(queues) = st.index.messages.get(m.id).map(|l| l.queues.to_vec()) else {
                    continue;
                };
                // A copy made before its transaction's commit record stays inside the
                // transaction (it precedes the commit); after, it is a plain message.
                let tx = match &rec_tx {
                    Some(t) if st.open_txs.contains_key(t) => Some(*t),
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
            // A copy stands for this one binding: as `BIND` it would displace the others
            // under its key that are live too. It takes the place of the record it copies,
            // found by where that is rather than by its arguments.
            Record::Bind(k, arguments) | Record::BindVariant(k, arguments) => {
                let copy = Record::BindVariant(k.clone(), arguments);
                let (to, loc) = st.append(kind::BIND_VARIANT, |out| copy.encode(out));
                st.index
                    .relocate_binding(&k, head, seq, Live { loc, seq: to });
            }
            Record::ExchangeBind(k, arguments) | Record::ExchangeBindVariant(k, arguments) => {
                let copy = Record::ExchangeBindVariant(k.clone(), arguments);
                let (to, loc) = st.append(kind::EXCHANGE_BIND_VARIANT, |out| copy.encode(out));
                st.index
                    .relocate_exchange_binding(&k, head, seq, Live { loc, seq: to });
            }
            other => {
                st.record(&other);
            }
        }
    }
    shared.appended.store(st.next_seq - 1, Ordering::Release);
    drop(st);
    shared.work.notify_one();
    held
}

/// Makes a zero-filled spare segment whenever the writer asks for one and none is ready.
/// Failing to make one for want of space is how a full disk is noticed before any record
/// depends on that space.
pub(crate) fn preallocate(shared: Arc<Shared>) {
    let tmp = segment::spare_tmp_path(&shared.dir);
    let spare_path = segment::spare_path(&shared.dir);
    loop {
        {
            let mut spare = shared.spare.lock();
            while (spare.ready || !spare.wanted) && !spare.stop {
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
                spare.wanted = false;
                shared.zero_filled.fetch_add(1, Ordering::Relaxed);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_spin_sees_a_kick_from_another_thread_and_gives_up_without_one() {
        let flag = Arc::new(AtomicBool::new(false));
        let started = Instant::now();
        assert!(!spin_for(&flag, Duration::from_micros(200)));
        assert!(started.elapsed() >= Duration::from_micros(200));
        let kicker = {
            let flag = flag.clone();
            std::thread::spawn(move || flag.store(true, Ordering::Release))
        };
        // Long enough that only a missed kick, never a slow machine, fails this.
        assert!(spin_for(&flag, Duration::from_secs(10)));
        kicker.join().unwrap();
    }

    #[test]
    fn the_spin_outlasts_the_slow_rounds_and_forgets_them_slowly() {
        let mut spin = KickSpin::new(KICK_SPIN_MAX);
        assert_eq!(spin.limit(), KICK_SPIN_MIN);
        spin.kicked_after(Duration::from_micros(170));
        assert_eq!(spin.limit(), Duration::from_micros(340));
        // One quick round takes an eighth off, not all of it.
        spin.kicked_after(Duration::from_micros(10));
        assert_eq!(spin.limit(), Duration::from_nanos(297_500));
        for _ in 0..20 {
            spin.kicked_after(Duration::from_micros(10));
        }
        assert_eq!(spin.limit(), KICK_SPIN_MIN);
        spin.kicked_after(KICK_SPIN_MAX);
        assert_eq!(spin.limit(), KICK_SPIN_MAX);
        spin.kicked_after(Duration::from_micros(10));
        let decayed = spin.limit();
        assert!(decayed < KICK_SPIN_MAX);
        // Too late to have been caught: nothing learned.
        spin.kicked_after(Duration::from_secs(3));
        assert_eq!(spin.limit(), decayed);
    }

    fn chunk(data: Vec<u8>) -> Chunk {
        Chunk {
            segment: 1,
            offset: 64,
            capacity: 1 << 20,
            first_seq: None,
            data,
        }
    }

    #[test]
    fn the_end_marker_goes_into_the_buffer_only_when_it_fits_without_growing_it() {
        let mut roomy = Vec::with_capacity(100);
        roomy.extend_from_slice(&[5u8; 40]);
        let mut c = chunk(roomy);
        assert!(append_end_marker(&mut c));
        assert_eq!(c.data.len(), 40 + FRAME_HEADER);
        assert_eq!(c.data.capacity(), 100);
        assert!(c.data[40..].iter().all(|b| *b == 0));
        assert_eq!(read_frame(&c.data[40..]), Frame::End);

        let mut tight = Vec::with_capacity(50);
        tight.extend_from_slice(&[5u8; 40]);
        let mut c = chunk(tight);
        assert!(!append_end_marker(&mut c));
        assert_eq!(c.data, vec![5u8; 40]);
        assert_eq!(c.data.capacity(), 50);
    }
}
