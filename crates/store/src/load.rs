//! Reading messages back for queues that keep only stand-ins in memory (flow to disk).
//!
//! Where a message is comes from the index under the state lock; a record not yet on disk is
//! copied from the writer's buffers there and then, the rest is read from the segment files
//! after the lock is released, adjacent records in one read. Compaction may move a record and
//! delete its old segment meanwhile: a read that finds something else there (checked by
//! sequence number, checksum and message id) looks the message up again.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::Ordering;

use bytes::Bytes;
use ferry_core::MessageParts;

use crate::index::{Live, Loc};
use crate::record::{self, read_frame, Frame, Record};
use crate::{segment, Shared, State};

/// Looks a moved record up again at most this often.
const ATTEMPTS: usize = 3;

impl State {
    /// The bytes of a frame the writer has not made durable yet.
    fn unwritten(&self, loc: Loc) -> Option<&[u8]> {
        let pending = self.chunks.iter();
        let writing = self.writing.iter().map(|c| &**c);
        pending.chain(writing).find_map(|c| {
            let start = loc.offset.checked_sub(c.offset)? as usize;
            let end = start.checked_add(loc.len as usize)?;
            (c.segment == loc.segment)
                .then(|| c.data.get(start..end))
                .flatten()
        })
    }
}

/// The message a frame holds, if it is message `id`'s record numbered `seq`.
fn decode(frame: &[u8], id: u64, seq: u64) -> Option<MessageParts> {
    let Frame::Record {
        seq: s,
        kind,
        payload,
        ..
    } = read_frame(frame)
    else {
        return None;
    };
    if s != seq {
        return None;
    }
    // Its own allocation: the message must not keep a read buffer alive.
    match Record::decode(kind, Bytes::copy_from_slice(payload)).ok()? {
        Record::Message(m) | Record::TxMessage { message: m, .. } if m.id == id => {
            let mut msg = record::message_from_content(m.content).ok()?;
            msg.store_id = Some(id);
            Some(msg)
        }
        _ => None,
    }
}

pub(crate) fn load(shared: &Shared, ids: &[u64]) -> Vec<Option<MessageParts>> {
    let mut out: Vec<Option<MessageParts>> = vec![None; ids.len()];
    let mut pending: Vec<usize> = (0..ids.len()).collect();
    for _ in 0..ATTEMPTS {
        let mut reads: Vec<(usize, Live)> = Vec::new();
        {
            let st = shared.state.lock();
            let durable = shared.durable.load(Ordering::Acquire);
            for &i in &pending {
                let Some(at) = st.index.messages.at(ids[i]) else {
                    continue;
                };
                if at.seq > durable {
                    out[i] = st.unwritten(at.loc).and_then(|f| decode(f, ids[i], at.seq));
                } else {
                    reads.push((i, at));
                }
            }
        }
        reads.sort_unstable_by_key(|(_, at)| (at.loc.segment, at.loc.offset));
        pending = read_files(shared, ids, &reads, &mut out);
        if pending.is_empty() {
            break;
        }
    }
    out
}

/// Reads messages from the segment files; returns the indexes that found something else
/// there (moved meanwhile).
fn read_files(
    shared: &Shared,
    ids: &[u64],
    reads: &[(usize, Live)],
    out: &mut [Option<MessageParts>],
) -> Vec<usize> {
    let mut retry = Vec::new();
    read_runs(&shared.dir, reads, |i, at, frame| {
        match frame.and_then(|f| decode(f, ids[i], at.seq)) {
            Some(m) => out[i] = Some(m),
            None => retry.push(i),
        }
    });
    retry
}

/// Reads the frames at `reads` (sorted by place) from the segment files, each run of
/// adjacent frames in one read, and hands each to `f` (`None`: it could not be read).
pub(crate) fn read_runs<T: Copy>(
    dir: &Path,
    reads: &[(T, Live)],
    mut f: impl FnMut(T, Live, Option<&[u8]>),
) {
    let mut buf = Vec::new();
    let mut file: Option<(u64, File)> = None;
    let adjacent = |a: &(T, Live), b: &(T, Live)| {
        a.1.loc.segment == b.1.loc.segment && a.1.loc.offset + a.1.loc.len == b.1.loc.offset
    };
    for run in reads.chunk_by(adjacent) {
        let (first, last) = (run[0].1.loc, run[run.len() - 1].1.loc);
        if file.as_ref().is_none_or(|(id, _)| *id != first.segment) {
            let path = segment::segment_path(dir, first.segment);
            file = File::open(path).ok().map(|f| (first.segment, f));
        }
        let len = (last.offset + last.len - first.offset) as usize;
        buf.resize(len, 0);
        let read = file
            .as_ref()
            .is_some_and(|(_, f)| f.read_exact_at(&mut buf, first.offset).is_ok());
        for &(t, at) in run {
            let start = (at.loc.offset - first.offset) as usize;
            f(
                t,
                at,
                buf.get(start..start + at.loc.len as usize).filter(|_| read),
            );
        }
    }
}
