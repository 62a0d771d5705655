use super::ns_to_ms;

/// Exact min/avg/max over one reporting interval, as qpid-latency-test prints them.
///
/// Kept apart from the histogram because these lines must be exact (a histogram bucket
/// would round the max) and must reset each interval while the histogram accumulates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IntervalStats {
    count: u64,
    min_ns: u64,
    max_ns: u64,
    total_ns: u128,
}

impl Default for IntervalStats {
    fn default() -> Self {
        IntervalStats {
            count: 0,
            min_ns: u64::MAX,
            max_ns: 0,
            total_ns: 0,
        }
    }
}

impl IntervalStats {
    pub fn update(&mut self, latency_ns: u64) {
        self.count += 1;
        self.min_ns = self.min_ns.min(latency_ns);
        self.max_ns = self.max_ns.max(latency_ns);
        self.total_ns += u128::from(latency_ns);
    }

    /// Folds in another interval, e.g. from a second receiving thread.
    pub fn absorb(&mut self, other: &IntervalStats) {
        self.count += other.count;
        self.min_ns = self.min_ns.min(other.min_ns);
        self.max_ns = self.max_ns.max(other.max_ns);
        self.total_ns += other.total_ns;
    }

    pub fn count(&self) -> u64 {
        self.count
    }

    /// None when the interval saw no samples: qpid reports that as a stall.
    pub fn min_avg_max_ms(&self) -> Option<(f64, f64, f64)> {
        if self.count == 0 {
            return None;
        }
        let avg_ns = self.total_ns as f64 / self.count as f64;
        Some((
            ns_to_ms(self.min_ns),
            avg_ns / 1_000_000.0,
            ns_to_ms(self.max_ns),
        ))
    }

    /// `Latency(ms): min=.., max=.., avg=..`, or the stall line.
    pub fn text_line(&self) -> String {
        match self.min_avg_max_ms() {
            Some((min, avg, max)) => {
                format!("Latency(ms): min={min:.4}, max={max:.4}, avg={avg:.4}")
            }
            None => "Stalled: no samples for interval".to_string(),
        }
    }

    /// `rate,min,max,avg` as qpid-latency-test's `--csv` prints it; `value` is the rate
    /// (or the count when no rate was set).
    pub fn csv_line(&self, value: u64) -> String {
        match self.min_avg_max_ms() {
            Some((min, avg, max)) => format!("{value},{min:.4},{max:.4},{avg:.4}"),
            None => format!("{value},,,Stalled"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn min_avg_max_are_exact() {
        let mut s = IntervalStats::default();
        for ns in [1_500_000, 500_000, 4_000_000] {
            s.update(ns);
        }
        assert_eq!(s.count(), 3);
        assert_eq!(s.min_avg_max_ms(), Some((0.5, 2.0, 4.0)));
        assert_eq!(
            s.text_line(),
            "Latency(ms): min=0.5000, max=4.0000, avg=2.0000"
        );
        assert_eq!(s.csv_line(10000), "10000,0.5000,4.0000,2.0000");
    }

    #[test]
    fn empty_interval_is_a_stall() {
        let s = IntervalStats::default();
        assert_eq!(s.min_avg_max_ms(), None);
        assert_eq!(s.text_line(), "Stalled: no samples for interval");
    }
}
