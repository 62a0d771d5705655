//! What the operating system says about this process (Linux `/proc`), for the node view and
//! metrics. Each reading is a small file read; a value that cannot be read is 0.

/// Resident memory in bytes.
pub fn resident_bytes() -> u64 {
    status_kib("VmRSS:") * 1024
}

fn status_kib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix(field))
                .and_then(|v| v.split_whitespace().next())
                .and_then(|n| n.parse().ok())
        })
        .unwrap_or(0)
}

/// Open file descriptors (sockets included).
pub fn open_fds() -> u64 {
    std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count() as u64)
}

/// The soft limit on open files.
pub fn max_fds() -> u64 {
    std::fs::read_to_string("/proc/self/limits")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Max open files"))
                .and_then(|l| l.split_whitespace().nth(3))
                .and_then(|n| n.parse().ok())
        })
        .unwrap_or(0)
}

/// CPU time used (user + system), in seconds.
pub fn cpu_seconds() -> f64 {
    // Fields 14 and 15 of /proc/self/stat, in clock ticks; the name (field 2) may hold
    // spaces, so count from its closing parenthesis. Ticks are 100 a second on Linux.
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return 0.0;
    };
    let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
        return 0.0;
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    (ticks(11) + ticks(12)) as f64 / 100.0
}

/// This machine's name, for RabbitMQ-style node names.
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_has_memory_and_files() {
        assert!(resident_bytes() > 0);
        assert!(open_fds() > 0);
        assert!(max_fds() >= open_fds());
        assert!(!hostname().is_empty());
        assert!(cpu_seconds() >= 0.0);
    }
}
