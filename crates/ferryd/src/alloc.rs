//! How the C allocator (glibc malloc, which ferryd uses) hands memory back to the kernel.
//!
//! By default glibc gives the free top of a heap back as soon as it exceeds 128 KiB (raised
//! a little as it sees large blocks freed), and gives an allocation above its mmap threshold
//! a mapping of its own, unmapped when freed. A broker's working memory rises and falls by
//! megabytes all the time: a queue's backlog filling and draining around the producer flow
//! control hold, the read buffers of large messages. Each fall was handed back
//! (`madvise`), and each rise faulted the same pages in again, zeroed: on a broker that had
//! already been through such a load, a 0-10 perftest at 32 KiB took about one page fault
//! per transfer, and a quarter more broker CPU per transfer than without the hold; with
//! large messages at 10k msg/s the re-faults came in bursts that sat in the latency tail.
//!
//! ferryd therefore keeps up to [`TRIM_THRESHOLD`] free at the top of each heap and serves
//! allocations up to [`MMAP_THRESHOLD`] from its heaps. What an idle broker keeps resident
//! after a burst grows by at most that much per heap (one per busy thread). An operator's
//! own `MALLOC_*_` environment settings or `GLIBC_TUNABLES` take precedence.

/// Free memory at the top of a heap beyond this is given back to the kernel: several times
/// the default backlog hold (16 MiB), whose fill-and-drain cycle is what it must outlast.
pub const TRIM_THRESHOLD: usize = 64 << 20;
/// Larger allocations get a mapping of their own (and give it back when freed).
pub const MMAP_THRESHOLD: usize = 4 << 20;

/// Applies the thresholds, unless the environment already sets the allocator's; returns
/// whether it did. Call before any thread starts, so every heap follows them.
pub fn keep_freed_memory() -> bool {
    let configured = std::env::vars_os().any(|(k, _)| {
        let k = k.to_string_lossy();
        k == "GLIBC_TUNABLES" || (k.starts_with("MALLOC_") && k.ends_with('_'))
    });
    if configured {
        return false;
    }
    set_thresholds()
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn set_thresholds() -> bool {
    // Both fit in a c_int; setting either turns glibc's own adjustment of them off.
    let mmap = libc::c_int::try_from(MMAP_THRESHOLD).unwrap_or(libc::c_int::MAX);
    let trim = libc::c_int::try_from(TRIM_THRESHOLD).unwrap_or(libc::c_int::MAX);
    // SAFETY: mallopt only changes the allocator's parameters; it takes plain integers.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, mmap) == 1
            && libc::mallopt(libc::M_TRIM_THRESHOLD, trim) == 1
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn set_thresholds() -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[test]
    fn glibc_takes_the_thresholds() {
        // It refuses an mmap threshold above HEAP_MAX_SIZE / 2 (32 MiB on 64-bit).
        assert!(set_thresholds());
    }
}
