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

/// Physical memory, from /proc/meminfo (Linux); `None` where that cannot be read.
pub fn total_memory() -> Option<u64> {
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
}
