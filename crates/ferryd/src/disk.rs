//! `--disk-free-limit`: the disk alarm. While the data directory's file system has less free
//! space than the limit, the broker raises `Alarm::Disk` and stops reading from publishers
//! (0-9-1 clients get `connection.blocked` "low on disk"), as RabbitMQ's disk alarm does, so a
//! disk fills with room to spare for settlements and recovery instead of to the last byte.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use ferry_core::{Alarm, Broker};
use tracing::{info, warn};

/// How often free space is measured: a statvfs call, cheap enough to do often.
const CHECK_EVERY: Duration = Duration::from_millis(500);

/// Bytes an unprivileged process may still write on the file system holding `path`.
pub fn free_bytes(path: &Path) -> Option<u64> {
    let c_path = CString::new(path.as_os_str().as_bytes()).ok()?;
    // SAFETY: statvfs writes into the zeroed struct we own and reads the NUL-terminated path.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c_path.as_ptr(), &mut st) } != 0 {
        return None;
    }
    block_bytes(st.f_bavail, st.f_frsize)
}

// The fields are narrower than u64 on 32-bit targets, hence the conversions.
#[allow(clippy::useless_conversion)]
fn block_bytes(blocks: libc::fsblkcnt_t, size: libc::c_ulong) -> Option<u64> {
    u64::from(blocks).checked_mul(u64::from(size))
}

/// Measures `dir`'s free space for as long as the process runs, raising and clearing the
/// broker's disk alarm. A limit of 0 turns the alarm off.
pub fn watch(broker: Arc<Broker>, dir: PathBuf, limit: u64) {
    if limit == 0 {
        return;
    }
    let spawned = std::thread::Builder::new()
        .name("disk-alarm".into())
        .spawn(move || loop {
            if let Some(free) = free_bytes(&dir) {
                let raise = free < limit;
                if broker.alarms().set(Alarm::Disk, raise) {
                    if raise {
                        warn!(free, limit, dir = %dir.display(),
                            "disk alarm: free space below --disk-free-limit; publishers are paused");
                    } else {
                        info!(free, limit, "disk alarm cleared; publishers resume");
                    }
                }
            }
            std::thread::sleep(CHECK_EVERY);
        });
    if let Err(e) = spawned {
        warn!("disk alarm not watched: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_space_of_a_real_directory() {
        let free = free_bytes(&std::env::temp_dir()).expect("statvfs of the temp dir");
        assert!(free > 0);
        assert_eq!(free_bytes(Path::new("/no/such/dir/at/all")), None);
    }
}
