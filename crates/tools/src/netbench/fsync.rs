//! How fast the device behind a directory makes an append durable: write `size` bytes at
//! the end of a file, `fdatasync` it, repeat. This bounds any store that syncs before it
//! confirms (one sync per confirm, or per group of confirms with group commit).

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::error::{IoContext, ToolError};
use crate::stats::{LatencyRecorder, Percentiles};

#[derive(Debug, Clone)]
pub struct FsyncRow {
    pub size: u32,
    pub syncs: u64,
    pub secs: f64,
    pub latency: Percentiles,
    pub dir: PathBuf,
}

impl FsyncRow {
    pub const CSV_HEADER: &'static str = "test,size,count,seconds,syncs_per_sec";

    pub fn syncs_per_sec(&self) -> f64 {
        self.syncs as f64 / self.secs.max(f64::MIN_POSITIVE)
    }

    pub fn render(&self, csv: bool) -> String {
        if csv {
            format!(
                "{},{}\nfsync,{},{},{:.6},{:.0},{}\n",
                Self::CSV_HEADER,
                Percentiles::CSV_HEADER,
                self.size,
                self.syncs,
                self.secs,
                self.syncs_per_sec(),
                self.latency.csv()
            )
        } else {
            format!(
                "fsync: {} appends of {} bytes, each followed by fdatasync, in {}: {:.0}/s\n\
                 Latency(ms) of append + fdatasync: {}\n",
                self.syncs,
                self.size,
                self.dir.display(),
                self.syncs_per_sec(),
                self.latency.text()
            )
        }
    }
}

/// Removes the scratch file however the run ends.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

pub fn run_fsync(
    dir: &Path,
    size: u32,
    count: u64,
    time_limit: std::time::Duration,
) -> Result<FsyncRow, ToolError> {
    let path = dir.join(format!(".ferry-fsync-{}", std::process::id()));
    let mut file: File = OpenOptions::new()
        .create_new(true)
        .append(true)
        .open(&path)
        .ctx(&format!("creating {}", path.display()))?;
    let _scratch = Scratch(path);
    let block = vec![0x5Au8; size as usize];
    let mut recorder = LatencyRecorder::new();
    let start = Instant::now();
    let deadline = start + time_limit;
    let mut syncs = 0u64;
    while syncs < count && Instant::now() < deadline {
        let t0 = Instant::now();
        file.write_all(&block).ctx("appending")?;
        file.sync_data().ctx("fdatasync")?;
        let ns = u64::try_from(t0.elapsed().as_nanos()).unwrap_or(u64::MAX);
        recorder.record_unpaced(0, ns);
        syncs += 1;
    }
    Ok(FsyncRow {
        size,
        syncs,
        secs: start.elapsed().as_secs_f64(),
        latency: recorder.summary().corrected,
        dir: dir.to_path_buf(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn appends_and_syncs_then_cleans_up() {
        let dir = std::env::temp_dir();
        let row = run_fsync(&dir, 512, 20, std::time::Duration::from_secs(30)).unwrap();
        assert_eq!(row.syncs, 20);
        assert_eq!(row.latency.count, 20);
        assert!(row.syncs_per_sec() > 0.0);
        let csv = row.render(true);
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines[0].split(',').count(), lines[1].split(',').count());
        assert!(lines[1].starts_with("fsync,512,20,"));
        let leftovers = std::fs::read_dir(&dir)
            .unwrap()
            .filter_map(Result::ok)
            .any(|e| e.file_name() == *format!(".ferry-fsync-{}", std::process::id()));
        assert!(!leftovers, "the scratch file was left behind");
    }

    #[test]
    fn a_missing_directory_is_an_error() {
        let dir = Path::new("/nonexistent/ferry-fsync-test");
        assert!(run_fsync(dir, 512, 1, std::time::Duration::from_secs(1)).is_err());
    }
}
