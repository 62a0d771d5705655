//! Statistics shared by every harness: latency histograms, per-interval lines, rate
//! averages and fixed-rate pacing.

mod interval;
mod latency;
mod pacing;
mod rates;

pub use interval::IntervalStats;
pub use latency::{LatencyRecorder, LatencySummary, Percentiles};
pub use pacing::Pacer;
pub use rates::RateStats;

/// Milliseconds as a float, the unit qpid-latency-test reports in.
pub fn ns_to_ms(ns: u64) -> f64 {
    ns as f64 / 1_000_000.0
}

/// Mbytes/sec as qpid-perftest defines it: bytes per second over 1024 * 1024.
pub fn mbytes_per_sec(msgs_per_sec: f64, size: usize) -> f64 {
    msgs_per_sec * size as f64 / (1024.0 * 1024.0)
}
