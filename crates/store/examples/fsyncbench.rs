//! The device's own sync rate, the bound for persistent throughput: `n` 4 KiB writes, each
//! followed by fdatasync, into a pre-zeroed file (as the journal writes) and appended to an
//! empty one. Usage: `cargo run --release -p ferry-store --example fsyncbench [DIR] [N]`.

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::time::Instant;

fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let dir = args.next().unwrap_or_else(|| ".".into());
    let n: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(2000);
    let path = std::path::Path::new(&dir).join("ferry-fsyncbench.tmp");
    let block = vec![0x5au8; 4096];
    for prealloc in [true, false] {
        let mut f = File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)?;
        if prealloc {
            let zeros = vec![0u8; 1 << 20];
            for _ in 0..(n * 4096).div_ceil(zeros.len() as u64) {
                f.write_all(&zeros)?;
            }
            f.sync_all()?;
        }
        let start = Instant::now();
        for i in 0..n {
            f.write_all_at(&block, i * 4096)?;
            f.sync_data()?;
        }
        let secs = start.elapsed().as_secs_f64();
        println!(
            "{}: {n} x (4 KiB write + fdatasync): {:.0}/s, {:.0} us each",
            if prealloc {
                "pre-zeroed (journal)"
            } else {
                "appending"
            },
            n as f64 / secs,
            secs * 1e6 / n as f64
        );
    }
    std::fs::remove_file(&path)
}
