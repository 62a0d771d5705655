//! Netbench results as text or CSV rows (the bench script collects the CSV).

use crate::stats::{LatencySummary, Percentiles};

/// A latency measurement (pingpong round trips, relay one-way).
#[derive(Debug, Clone, PartialEq)]
pub struct LatencyRow {
    pub test: &'static str,
    pub size: u32,
    pub rate: u64,
    pub nodelay: bool,
    pub summary: LatencySummary,
}

impl LatencyRow {
    pub const CSV_HEADER_PREFIX: &'static str = "test,size,count,rate,nodelay";

    pub fn render(&self, csv: bool) -> String {
        let p = &self.summary.corrected;
        if csv {
            format!(
                "{},{}\n{},{},{},{},{},{}\n",
                Self::CSV_HEADER_PREFIX,
                Percentiles::CSV_HEADER,
                self.test,
                self.size,
                p.count,
                self.rate,
                self.nodelay,
                p.csv()
            )
        } else {
            let rate = if self.rate == 0 {
                "back-to-back".to_string()
            } else {
                format!("{} msg/s", self.rate)
            };
            format!(
                "{}: {} bytes, {rate}, TCP_NODELAY {}\n{}\n",
                self.test,
                self.size,
                if self.nodelay { "on" } else { "off" },
                self.summary.text(self.rate > 0)
            )
        }
    }
}

/// A throughput measurement (stream, relay).
#[derive(Debug, Clone, PartialEq)]
pub struct ThroughputRow {
    pub test: &'static str,
    pub size: u32,
    pub batch: u32,
    /// Messages the receiving end got in full.
    pub messages: u64,
    pub secs: f64,
}

impl ThroughputRow {
    pub const CSV_HEADER: &'static str =
        "test,size,count,batch,seconds,msgs_per_sec,mbytes_per_sec";

    pub fn msgs_per_sec(&self) -> f64 {
        self.messages as f64 / self.secs
    }

    /// In qpid-perftest's Mbytes (2^20 bytes), so the figures line up with its.
    pub fn mbytes_per_sec(&self) -> f64 {
        crate::stats::mbytes_per_sec(self.msgs_per_sec(), self.size as usize)
    }

    pub fn render(&self, csv: bool) -> String {
        if csv {
            format!(
                "{}\n{},{},{},{},{:.6},{:.0},{:.2}\n",
                Self::CSV_HEADER,
                self.test,
                self.size,
                self.messages,
                self.batch,
                self.secs,
                self.msgs_per_sec(),
                self.mbytes_per_sec()
            )
        } else {
            format!(
                "{}: {} messages of {} bytes, {} per write, in {:.3} s\n{:.0} msgs/s  {:.2} Mbytes/s\n",
                self.test,
                self.messages,
                self.size,
                self.batch,
                self.secs,
                self.msgs_per_sec(),
                self.mbytes_per_sec()
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn throughput_csv_row() {
        let r = ThroughputRow {
            test: "stream",
            size: 1024,
            batch: 64,
            messages: 2048,
            secs: 0.5,
        };
        assert_eq!(r.msgs_per_sec(), 4096.0);
        assert_eq!(r.mbytes_per_sec(), 4.0);
        assert_eq!(
            r.render(true),
            "test,size,count,batch,seconds,msgs_per_sec,mbytes_per_sec\nstream,1024,2048,64,0.500000,4096,4.00\n"
        );
    }

    #[test]
    fn latency_csv_has_matching_columns() {
        let mut rec = crate::stats::LatencyRecorder::new();
        rec.record_unpaced(0, 1_000_000);
        let row = LatencyRow {
            test: "pingpong",
            size: 8,
            rate: 0,
            nodelay: true,
            summary: rec.summary(),
        };
        let out = row.render(true);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0].split(',').count(), lines[1].split(',').count());
        // Histogram buckets put 1 ms within 0.1%.
        assert!(lines[1].starts_with("pingpong,8,1,0,true,"), "{out}");
        let min: f64 = lines[1].split(',').nth(5).unwrap().parse().unwrap();
        assert!((min - 1.0).abs() < 0.001, "{out}");
    }
}
