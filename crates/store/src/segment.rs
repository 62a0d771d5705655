//! Segment files: `journal/<id as 16 hex digits>.jnl`, each a 64-byte header followed by
//! frames. Segments are pre-filled with zeros to their full size, so appending overwrites
//! allocated blocks and fdatasync has no file-size metadata to flush; the zeros read as "no
//! more data".

use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

pub const SEGMENT_HEADER: usize = 64;
const MAGIC: &[u8; 8] = b"FERRYJNL";
const VERSION: u32 = 1;

pub fn segment_path(dir: &Path, id: u64) -> PathBuf {
    dir.join(format!("{id:016x}.jnl"))
}

/// The id of a segment file name, if it is one.
pub fn segment_id(name: &str) -> Option<u64> {
    let hex = name.strip_suffix(".jnl")?;
    if hex.len() != 16 {
        return None;
    }
    u64::from_str_radix(hex, 16).ok()
}

/// The ready-made empty segment the writer renames into place when it needs a new one.
pub fn spare_path(dir: &Path) -> PathBuf {
    dir.join("spare.seg")
}

pub fn spare_tmp_path(dir: &Path) -> PathBuf {
    dir.join("spare.tmp")
}

pub fn encode_header(id: u64, first_seq: u64) -> [u8; SEGMENT_HEADER] {
    let mut h = [0u8; SEGMENT_HEADER];
    h[..8].copy_from_slice(MAGIC);
    h[8..12].copy_from_slice(&VERSION.to_le_bytes());
    h[16..24].copy_from_slice(&id.to_le_bytes());
    h[24..32].copy_from_slice(&first_seq.to_le_bytes());
    let crc = crc32c::crc32c(&h[..32]);
    h[32..36].copy_from_slice(&crc.to_le_bytes());
    h
}

/// (segment id, sequence number of its first record), if the header is intact.
pub fn decode_header(h: &[u8]) -> Option<(u64, u64)> {
    let h = h.get(..SEGMENT_HEADER)?;
    let crc = u32::from_le_bytes(h[32..36].try_into().ok()?);
    if &h[..8] != MAGIC || crc32c::crc32c(&h[..32]) != crc {
        return None;
    }
    if u32::from_le_bytes(h[8..12].try_into().ok()?) != VERSION {
        return None;
    }
    let id = u64::from_le_bytes(h[16..24].try_into().ok()?);
    let first = u64::from_le_bytes(h[24..32].try_into().ok()?);
    Some((id, first))
}

/// Creates `path` holding `size` zero bytes, on stable storage. Writing the zeros (rather
/// than `set_len`, which leaves a hole) allocates the blocks now, so a full disk shows up
/// here, before any record depends on the space.
pub fn create_zeroed(path: &Path, size: u64) -> io::Result<File> {
    let mut f = File::options()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)?;
    let zeros = vec![0u8; 1 << 20];
    let mut left = size;
    while left > 0 {
        let n = left.min(zeros.len() as u64) as usize;
        f.write_all(&zeros[..n])?;
        left -= n as u64;
    }
    f.sync_all()?;
    Ok(f)
}

/// Makes a rename or unlink in `dir` durable.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_headers_round_trip() {
        let p = segment_path(Path::new("/d"), 0x1f);
        assert_eq!(p, Path::new("/d/000000000000001f.jnl"));
        assert_eq!(segment_id("000000000000001f.jnl"), Some(0x1f));
        assert_eq!(segment_id("spare.seg"), None);
        assert_eq!(segment_id("1f.jnl"), None);
        let h = encode_header(7, 1234);
        assert_eq!(decode_header(&h), Some((7, 1234)));
        let mut bad = h;
        bad[20] ^= 1;
        assert_eq!(decode_header(&bad), None);
        assert_eq!(decode_header(&[0u8; SEGMENT_HEADER]), None);
        assert_eq!(decode_header(&h[..10]), None);
    }
}
