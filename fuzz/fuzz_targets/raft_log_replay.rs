#![no_main]
// Arbitrary bytes as a Raft log segment, replayed as a node replays its log at start-up.
// Nothing may panic; a torn or corrupt record ends the replay, so the bytes before it must
// replay cleanly to the same log. The bytes are replayed twice: as they are, and with every
// record's crc32c made to match, since random bytes almost never pass the checksum and the
// payload decoders and truncate/purge handling would otherwise go untested.
use ferry_cluster::{replay_records, Replayed};

const HEADER: usize = 9;

fn summary(r: &Replayed) -> (Vec<(u64, u64, u64)>, Option<(u64, u64)>) {
    let entries = r
        .entries
        .iter()
        .map(|(i, e)| (*i, e.log_id.leader_id.term, e.log_id.index))
        .collect();
    let purged = r.last_purged.map(|l| (l.leader_id.term, l.index));
    (entries, purged)
}

fn check(data: &[u8]) {
    let r = replay_records(data);
    for (i, e) in &r.entries {
        assert_eq!(*i, e.log_id.index, "an entry is kept under another index");
    }
    if let Some(at) = r.bad_at {
        assert!(at < data.len(), "the bad record starts past the end");
        let before = replay_records(&data[..at]);
        assert_eq!(
            before.bad_at, None,
            "the bytes before the bad record do not replay"
        );
        assert_eq!(
            summary(&before),
            summary(&r),
            "the bad record changed the log"
        );
    }
}

/// `data` with each whole record's checksum recomputed.
fn with_good_checksums(data: &[u8]) -> Vec<u8> {
    let mut out = data.to_vec();
    let mut at = 0;
    while let Some(head) = out.get(at..at + HEADER) {
        let len = u32::from_le_bytes([head[4], head[5], head[6], head[7]]) as usize;
        let Some(end) = (at + HEADER).checked_add(len).filter(|e| *e <= out.len()) else {
            break;
        };
        let crc = crc32c::crc32c(&out[at + 4..end]);
        out[at..at + 4].copy_from_slice(&crc.to_le_bytes());
        at = end;
    }
    out
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    check(data);
    check(&with_good_checksums(data));
});
