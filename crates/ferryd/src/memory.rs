//! `--memory-high-watermark` and `--memory-low-watermark`: a size in bytes (`512MiB`, `2GB`,
//! `1073741824`) or a fraction of the machine's memory (`0.4`, RabbitMQ's default form).

use ferry_core::Watermarks;

/// A watermark as written on the command line.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Mark {
    Bytes(u64),
    /// Of total memory, in (0, 1].
    Fraction(f64),
}

pub fn parse(text: &str) -> Result<Mark, String> {
    let t = text.trim();
    if t.contains('.') {
        let f: f64 = t
            .parse()
            .map_err(|_| format!("{text:?} is neither a size nor a fraction of memory"))?;
        if !(0.0..=1.0).contains(&f) {
            return Err(format!(
                "{text:?}: a fraction of memory must be from 0 to 1"
            ));
        }
        return Ok(Mark::Fraction(f));
    }
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, unit) = t.split_at(split);
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("{text:?} is neither a size nor a fraction of memory"))?;
    let scale: u64 = match unit.trim() {
        "" | "B" => 1,
        "KB" | "kB" => 1000,
        "MB" => 1000 * 1000,
        "GB" => 1000 * 1000 * 1000,
        "KiB" | "K" => 1 << 10,
        "MiB" | "M" => 1 << 20,
        "GiB" | "G" => 1 << 30,
        other => {
            return Err(format!(
                "{text:?}: unknown unit {other:?} (B, KB, MB, GB, KiB, MiB, GiB)"
            ))
        }
    };
    n.checked_mul(scale)
        .map(Mark::Bytes)
        .ok_or_else(|| format!("{text:?} is too large"))
}

/// The memory ferryd may use: physical memory (/proc/meminfo) or, in a container, its
/// cgroup's limit if lower, so that fractional watermarks mean what they say under
/// Docker or Kubernetes. `None` where neither can be read (not Linux).
pub fn total_memory() -> Option<u64> {
    let physical = physical_memory();
    let limit = std::fs::read_to_string("/proc/self/cgroup")
        .ok()
        .and_then(|groups| cgroup_limit(&groups, |p| std::fs::read_to_string(p).ok()));
    match (physical, limit) {
        (Some(p), Some(l)) => Some(p.min(l)),
        (p, l) => p.or(l),
    }
}

fn physical_memory() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kib: u64 = info
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    kib.checked_mul(1024)
}

const CGROUP_ROOT: &str = "/sys/fs/cgroup";

/// The lowest memory limit on this process's cgroup and its ancestors, from the contents
/// of /proc/self/cgroup; `read` reads a file. cgroup v2 (`0::/path`, `memory.max`) and v1
/// (`N:...memory...:/path`, `memory/.../memory.limit_in_bytes`). Inside a container's
/// cgroup namespace the path is `/`, where the container's own limit is found.
fn cgroup_limit(groups: &str, read: impl Fn(&str) -> Option<String>) -> Option<u64> {
    let mut lowest: Option<u64> = None;
    for line in groups.lines() {
        let mut fields = line.splitn(3, ':');
        let (Some(id), Some(controllers), Some(path)) =
            (fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        let (dir, file) = if id == "0" && controllers.is_empty() {
            (CGROUP_ROOT.to_owned(), "memory.max")
        } else if controllers.split(',').any(|c| c == "memory") {
            (format!("{CGROUP_ROOT}/memory"), "memory.limit_in_bytes")
        } else {
            continue;
        };
        let mut at = path.trim_end_matches('/');
        loop {
            let limit = read(&format!("{dir}{at}/{file}")).and_then(|t| parse_limit(&t));
            if let Some(l) = limit {
                lowest = Some(lowest.map_or(l, |x| x.min(l)));
            }
            match at.rfind('/') {
                Some(i) => at = &at[..i],
                None => break,
            }
        }
    }
    lowest
}

/// A cgroup memory limit file: a byte count, or `max` (v2). v1 writes "no limit" as a huge
/// number (about 2^63), which no machine has.
fn parse_limit(text: &str) -> Option<u64> {
    let n: u64 = text.trim().parse().ok()?;
    (n < 1 << 62).then_some(n)
}

/// `--store-memory-budget` in bytes; `None` for 0 (no budget).
pub fn budget(mark: Mark, total: Option<u64>) -> Result<Option<u64>, String> {
    resolve(mark, total).map(|b| Some(b).filter(|b| *b > 0))
}

fn resolve(mark: Mark, total: Option<u64>) -> Result<u64, String> {
    match mark {
        Mark::Bytes(n) => Ok(n),
        Mark::Fraction(f) => {
            let total = total
                .ok_or("cannot read the machine's memory size; give the watermark in bytes")?;
            Ok((total as f64 * f) as u64)
        }
    }
}

/// The watermarks to run with; `None` when the high one is 0 (the alarm is off). The low one
/// defaults to 80% of the high one.
pub fn watermarks(
    high: Mark,
    low: Option<Mark>,
    total: Option<u64>,
) -> Result<Option<Watermarks>, String> {
    let high = resolve(high, total)?;
    if high == 0 {
        return Ok(None);
    }
    let low = match low {
        Some(mark) => resolve(mark, total)?,
        None => high / 10 * 8,
    };
    if low > high {
        return Err(format!(
            "the memory low-water mark ({low} bytes) is above the high-water mark ({high} bytes)"
        ));
    }
    Ok(Some(Watermarks { high, low }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_fractions() {
        assert_eq!(parse("1073741824"), Ok(Mark::Bytes(1 << 30)));
        assert_eq!(parse("512MiB"), Ok(Mark::Bytes(512 << 20)));
        assert_eq!(parse("2GB"), Ok(Mark::Bytes(2_000_000_000)));
        assert_eq!(parse("64K"), Ok(Mark::Bytes(64 << 10)));
        assert_eq!(parse("0.4"), Ok(Mark::Fraction(0.4)));
        assert_eq!(parse("0"), Ok(Mark::Bytes(0)));
        assert!(parse("1.5").is_err());
        assert!(parse("12 parsecs").is_err());
        assert!(parse("lots").is_err());
        assert!(parse("99999999999999GiB").is_err());
    }

    #[test]
    fn watermarks_resolve_against_total_memory() {
        let total = Some(10_000);
        let w = watermarks(Mark::Fraction(0.4), None, total)
            .unwrap()
            .unwrap();
        assert_eq!((w.high, w.low), (4000, 3200));
        let w = watermarks(Mark::Bytes(100), Some(Mark::Bytes(50)), None)
            .unwrap()
            .unwrap();
        assert_eq!((w.high, w.low), (100, 50));
        assert_eq!(watermarks(Mark::Bytes(0), None, total), Ok(None));
        assert!(watermarks(Mark::Fraction(0.4), None, None).is_err());
        assert!(watermarks(Mark::Bytes(10), Some(Mark::Bytes(20)), None).is_err());
        assert!(
            total_memory().is_some_and(|m| m > 0),
            "Linux test machines have /proc"
        );
    }

    fn files(entries: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: std::collections::HashMap<String, String> = entries
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |p| map.get(p).cloned()
    }

    #[test]
    fn cgroup_v2_limit_of_the_group_or_an_ancestor() {
        let groups = "0::/kubepods/pod1/ctr\n";
        let read = files(&[
            ("/sys/fs/cgroup/kubepods/pod1/ctr/memory.max", "max\n"),
            ("/sys/fs/cgroup/kubepods/pod1/memory.max", "2147483648\n"),
            ("/sys/fs/cgroup/kubepods/memory.max", "8589934592\n"),
        ]);
        assert_eq!(cgroup_limit(groups, read), Some(2 << 30));
    }

    #[test]
    fn cgroup_v2_inside_a_container_namespace() {
        let read = files(&[("/sys/fs/cgroup/memory.max", "536870912\n")]);
        assert_eq!(cgroup_limit("0::/\n", read), Some(512 << 20));
    }

    #[test]
    fn cgroup_v1_memory_controller() {
        let groups = "5:devices:/\n4:memory:/docker/abc\n3:cpu,cpuacct:/docker/abc\n";
        let read = files(&[
            (
                "/sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes",
                "1073741824\n",
            ),
            (
                "/sys/fs/cgroup/memory/memory.limit_in_bytes",
                "9223372036854771712\n",
            ),
        ]);
        assert_eq!(cgroup_limit(groups, read), Some(1 << 30));
    }

    #[test]
    fn no_limit_anywhere_is_none() {
        let read = files(&[
            (
                "/sys/fs/cgroup/memory/p/memory.limit_in_bytes",
                "9223372036854771712\n",
            ),
            ("/sys/fs/cgroup/memory.max", "max\n"),
        ]);
        assert_eq!(cgroup_limit("4:memory:/p\n0::/\n", &read), None);
        assert_eq!(cgroup_limit("", &read), None);
        assert_eq!(cgroup_limit("garbage without colons", &read), None);
    }
}
