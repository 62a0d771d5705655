use hdrhistogram::Histogram;

use super::{ns_to_ms, IntervalStats};

/// Highest latency a histogram tracks; anything slower is clamped to it. An hour covers
/// any bounded run, and three significant digits keep the histogram small (tens of KiB).
const HIGHEST_NS: u64 = 3_600_000_000_000;
const SIGNIFICANT_DIGITS: u8 = 3;

fn new_histogram() -> Histogram<u64> {
    // The bounds are constants known to be valid, so this cannot fail at run time.
    Histogram::new_with_bounds(1, HIGHEST_NS, SIGNIFICANT_DIGITS)
        .expect("constant histogram bounds are valid")
}

/// Records latencies two ways:
///
/// * from the *intended* send time of a fixed-rate schedule: when the system under test
///   stalls, the messages that should have been sent during the stall are charged the wait
///   they would have seen. This is the coordinated-omission-safe figure and the one reported
///   by default;
/// * from the *actual* send time, which is what qpid-latency-test measures and which hides
///   stalls (the sender simply stops sending while the peer is slow).
///
/// Without a rate (back-to-back sending) the two are the same.
#[derive(Debug, Clone)]
pub struct LatencyRecorder {
    from_intended: Histogram<u64>,
    from_sent: Histogram<u64>,
    /// How far behind its schedule the sender was: the part of the corrected figure that
    /// the sending side (its thread not getting a CPU in time) rather than the path added.
    send_lateness: Histogram<u64>,
    interval: IntervalStats,
}

impl Default for LatencyRecorder {
    fn default() -> Self {
        Self::new()
    }
}

impl LatencyRecorder {
    pub fn new() -> Self {
        LatencyRecorder {
            from_intended: new_histogram(),
            from_sent: new_histogram(),
            send_lateness: new_histogram(),
            interval: IntervalStats::default(),
        }
    }

    /// Times are nanoseconds on one clock. A receive time before a send time (clocks of
    /// different hosts, or a peer's bad stamp) records as zero rather than wrapping.
    pub fn record(&mut self, intended_ns: u64, sent_ns: u64, received_ns: u64) {
        let corrected = received_ns.saturating_sub(intended_ns.min(sent_ns));
        let raw = received_ns.saturating_sub(sent_ns);
        self.from_intended.saturating_record(corrected);
        self.from_sent.saturating_record(raw);
        self.send_lateness
            .saturating_record(sent_ns.saturating_sub(intended_ns));
        self.interval.update(corrected);
    }

    /// A sample whose intended and actual send time are the same (back-to-back sending).
    pub fn record_unpaced(&mut self, sent_ns: u64, received_ns: u64) {
        self.record(sent_ns, sent_ns, received_ns);
    }

    pub fn count(&self) -> u64 {
        self.from_intended.len()
    }

    /// The interval figures since the previous call, for per-interval report lines.
    pub fn take_interval(&mut self) -> IntervalStats {
        std::mem::take(&mut self.interval)
    }

    /// Folds another recorder in, e.g. one per receiving thread.
    pub fn merge(&mut self, other: &LatencyRecorder) {
        // Same bounds on both sides, so addition cannot go out of range.
        let _ = self.from_intended.add(&other.from_intended);
        let _ = self.from_sent.add(&other.from_sent);
        let _ = self.send_lateness.add(&other.send_lateness);
        self.interval.absorb(&other.interval);
    }

    pub fn summary(&self) -> LatencySummary {
        LatencySummary {
            corrected: Percentiles::of(&self.from_intended),
            uncorrected: Percentiles::of(&self.from_sent),
            send_lateness: Percentiles::of(&self.send_lateness),
        }
    }
}

/// The figures of one histogram, in nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Percentiles {
    pub count: u64,
    pub min_ns: u64,
    pub mean_ns: f64,
    pub max_ns: u64,
    pub p50_ns: u64,
    pub p90_ns: u64,
    pub p99_ns: u64,
    pub p999_ns: u64,
}

impl Percentiles {
    pub fn of(h: &Histogram<u64>) -> Self {
        if h.is_empty() {
            return Percentiles {
                count: 0,
                min_ns: 0,
                mean_ns: 0.0,
                max_ns: 0,
                p50_ns: 0,
                p90_ns: 0,
                p99_ns: 0,
                p999_ns: 0,
            };
        }
        Percentiles {
            count: h.len(),
            min_ns: h.min(),
            mean_ns: h.mean(),
            max_ns: h.max(),
            p50_ns: h.value_at_quantile(0.50),
            p90_ns: h.value_at_quantile(0.90),
            p99_ns: h.value_at_quantile(0.99),
            p999_ns: h.value_at_quantile(0.999),
        }
    }

    /// `min=.. avg=.. max=.. p50=.. p90=.. p99=.. p99.9=..` in milliseconds.
    pub fn text(&self) -> String {
        format!(
            "min={:.4} avg={:.4} max={:.4} p50={:.4} p90={:.4} p99={:.4} p99.9={:.4}",
            ns_to_ms(self.min_ns),
            self.mean_ns / 1_000_000.0,
            ns_to_ms(self.max_ns),
            ns_to_ms(self.p50_ns),
            ns_to_ms(self.p90_ns),
            ns_to_ms(self.p99_ns),
            ns_to_ms(self.p999_ns),
        )
    }

    pub const CSV_HEADER: &'static str = "min_ms,avg_ms,max_ms,p50_ms,p90_ms,p99_ms,p999_ms";

    pub fn csv(&self) -> String {
        format!(
            "{:.4},{:.4},{:.4},{:.4},{:.4},{:.4},{:.4}",
            ns_to_ms(self.min_ns),
            self.mean_ns / 1_000_000.0,
            ns_to_ms(self.max_ns),
            ns_to_ms(self.p50_ns),
            ns_to_ms(self.p90_ns),
            ns_to_ms(self.p99_ns),
            ns_to_ms(self.p999_ns),
        )
    }
}

/// Both views of a run; `corrected` is the one to quote.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LatencySummary {
    pub corrected: Percentiles,
    pub uncorrected: Percentiles,
    /// Sent time minus due time; all zero when unpaced.
    pub send_lateness: Percentiles,
}

impl LatencySummary {
    /// The report block printed after a run, in milliseconds.
    pub fn text(&self, paced: bool) -> String {
        let mut out = format!(
            "Latency(ms) over {} samples: {}",
            self.corrected.count,
            self.corrected.text()
        );
        if paced {
            out.push_str(&format!(
                "\n  (from actual send time, not corrected for coordinated omission: {})",
                self.uncorrected.text()
            ));
            let l = &self.send_lateness;
            out.push_str(&format!(
                "\n  (sender behind its schedule: p50={:.4} p99={:.4} p99.9={:.4} max={:.4})",
                ns_to_ms(l.p50_ns),
                ns_to_ms(l.p99_ns),
                ns_to_ms(l.p999_ns),
                ns_to_ms(l.max_ns),
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const US: u64 = 1_000;
    const MS: u64 = 1_000_000;

    fn within(actual: u64, expected: u64, rel: f64) -> bool {
        (actual as f64 - expected as f64).abs() <= expected as f64 * rel
    }

    #[test]
    fn percentiles_of_a_uniform_series() {
        let mut r = LatencyRecorder::new();
        for i in 1..=10_000u64 {
            r.record_unpaced(0, i * US);
        }
        let p = r.summary().corrected;
        assert_eq!(p.count, 10_000);
        // Three significant digits: every figure within 0.1% of the exact order statistic.
        assert!(within(p.min_ns, US, 0.001), "min {}", p.min_ns);
        assert!(within(p.max_ns, 10_000 * US, 0.001), "max {}", p.max_ns);
        assert!(within(p.p50_ns, 5_000 * US, 0.001), "p50 {}", p.p50_ns);
        assert!(within(p.p90_ns, 9_000 * US, 0.001), "p90 {}", p.p90_ns);
        assert!(within(p.p99_ns, 9_900 * US, 0.001), "p99 {}", p.p99_ns);
        assert!(within(p.p999_ns, 9_990 * US, 0.001), "p99.9 {}", p.p999_ns);
        assert!((p.mean_ns - 5_000.5 * US as f64).abs() < 5.0 * US as f64);
    }

    #[test]
    fn percentiles_pick_out_a_tail() {
        let mut r = LatencyRecorder::new();
        // 98.5% fast, 1.5% slow: p90 is fast, p99 lands in the slow group.
        for i in 0..1000u64 {
            let lat = if i % 200 < 3 { 50 * MS } else { 100 * US };
            r.record_unpaced(0, lat);
        }
        let p = r.summary().corrected;
        assert!(within(p.p50_ns, 100 * US, 0.001));
        assert!(within(p.p90_ns, 100 * US, 0.001));
        assert!(within(p.p99_ns, 50 * MS, 0.001));
        assert!(within(p.max_ns, 50 * MS, 0.001));
    }

    /// A closed-loop sender at 1000 msg/s whose peer answers in 100 µs but stalls once for
    /// 100 ms. Measured from the actual send time only one sample is slow; measured from the
    /// schedule, the ~100 sends the stall delayed are all charged their wait.
    #[test]
    fn coordinated_omission_is_corrected() {
        let interval = MS;
        let mut r = LatencyRecorder::new();
        let mut free_at = 0u64;
        for i in 0..10_000u64 {
            let intended = i * interval;
            let sent = intended.max(free_at);
            let service = if i == 5_000 { 100 * MS } else { 100 * US };
            let received = sent + service;
            free_at = received;
            r.record(intended, sent, received);
        }
        let s = r.summary();
        assert!(within(s.uncorrected.p99_ns, 100 * US, 0.001));
        assert!(within(s.uncorrected.max_ns, 100 * MS, 0.001));
        // 100 delayed sends out of 10 000 is 1%: the corrected p99 sits in the stall.
        assert!(s.corrected.p99_ns > MS, "p99 {}", s.corrected.p99_ns);
        assert!(
            s.corrected.p999_ns > 80 * MS,
            "p99.9 {}",
            s.corrected.p999_ns
        );
        assert!(within(s.corrected.max_ns, 100 * MS, 0.001));
        assert!(within(s.corrected.p50_ns, 100 * US, 0.001));
    }

    #[test]
    fn sender_lateness_is_kept_apart() {
        let mut r = LatencyRecorder::new();
        // Due at 0, sent 300 µs late, back 100 µs after sending.
        r.record(0, 300 * US, 400 * US);
        let s = r.summary();
        assert!(within(s.corrected.max_ns, 400 * US, 0.001));
        assert!(within(s.uncorrected.max_ns, 100 * US, 0.001));
        assert!(within(s.send_lateness.max_ns, 300 * US, 0.001));
        assert!(
            s.text(true).contains("sender behind its schedule: p50=0.3"),
            "{}",
            s.text(true)
        );
        assert!(!s.text(false).contains("behind"));
    }

    #[test]
    fn unpaced_runs_report_the_same_both_ways() {
        let mut r = LatencyRecorder::new();
        for i in 1..100u64 {
            r.record_unpaced(i, i + i * US);
        }
        let s = r.summary();
        assert_eq!(s.corrected, s.uncorrected);
    }

    #[test]
    fn interval_resets_but_histogram_accumulates() {
        let mut r = LatencyRecorder::new();
        r.record_unpaced(0, 2 * MS);
        assert_eq!(r.take_interval().count(), 1);
        r.record_unpaced(0, 4 * MS);
        let iv = r.take_interval();
        assert_eq!(iv.min_avg_max_ms(), Some((4.0, 4.0, 4.0)));
        assert_eq!(r.count(), 2);
    }

    #[test]
    fn clock_skew_records_zero_not_wraparound() {
        let mut r = LatencyRecorder::new();
        r.record(10 * MS, 10 * MS, 5 * MS);
        assert_eq!(r.summary().corrected.max_ns, 0);
    }

    #[test]
    fn merge_adds_counts() {
        let mut a = LatencyRecorder::new();
        let mut b = LatencyRecorder::new();
        a.record_unpaced(0, MS);
        b.record_unpaced(0, 3 * MS);
        a.merge(&b);
        assert_eq!(a.count(), 2);
        assert_eq!(a.take_interval().min_avg_max_ms(), Some((1.0, 2.0, 3.0)));
    }
}
