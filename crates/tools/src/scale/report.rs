//! What `ferry scale` measured, as text or one CSV row, and the broker's resident memory.

use std::fmt::Write as _;
use std::time::Duration;

/// Resident memory of process `pid` in KiB (VmRSS in /proc/PID/status), if it can be read.
pub fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|n| n.parse().ok())
}

#[derive(Debug, Default, Clone, PartialEq)]
pub struct ScaleReport {
    pub connections: usize,
    pub queues: usize,
    pub declare_connections: usize,
    pub window: usize,
    pub open: Duration,
    pub declare: Duration,
    pub one_by_one: usize,
    /// Mean time to declare (and bind) one queue awaiting each reply, with the others there.
    pub one_by_one_mean: Duration,
    /// The broker's RSS before the load, with the connections, with the queues too, and
    /// after everything was removed (KiB); `None` without --broker-pid.
    pub rss_start: Option<u64>,
    pub rss_connections: Option<u64>,
    pub rss_queues: Option<u64>,
    pub rss_end: Option<u64>,
    pub answered: usize,
    pub answer: Duration,
    pub delete: Duration,
    pub close: Duration,
    /// The command run while the load existed: its exit code, if one was run.
    pub command_status: Option<i32>,
}

fn per_sec(n: usize, d: Duration) -> f64 {
    let s = d.as_secs_f64();
    if s > 0.0 {
        n as f64 / s
    } else {
        0.0
    }
}

/// KiB gained between two readings, per item (None when either is missing or n is 0).
fn per_item(before: Option<u64>, after: Option<u64>, n: usize) -> Option<f64> {
    let (b, a) = (before?, after?);
    (n > 0).then(|| (a as f64 - b as f64) / n as f64)
}

fn opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map_or_else(String::new, |v| v.to_string())
}

impl ScaleReport {
    pub fn rss_per_connection_kib(&self) -> Option<f64> {
        per_item(self.rss_start, self.rss_connections, self.connections)
    }

    pub fn rss_per_queue_kib(&self) -> Option<f64> {
        per_item(
            self.rss_connections,
            self.rss_queues,
            self.queues + self.one_by_one,
        )
    }

    pub fn declares_per_sec(&self) -> f64 {
        per_sec(self.queues, self.declare)
    }

    pub const CSV_HEADER: &'static str = "connections,queues,declare_connections,window,\
open_secs,opens_per_sec,declare_secs,declares_per_sec,one_by_one,one_by_one_ms,\
rss_start_kib,rss_connections_kib,rss_queues_kib,rss_end_kib,rss_per_connection_kib,\
rss_per_queue_kib,answered,answer_secs,delete_secs,deletes_per_sec,close_secs,command_status";

    pub fn csv_row(&self) -> String {
        let f2 = |v: Option<f64>| v.map_or_else(String::new, |v| format!("{v:.2}"));
        format!(
            "{},{},{},{},{:.3},{:.0},{:.3},{:.0},{},{:.3},{},{},{},{},{},{},{},{:.3},{:.3},{:.0},{:.3},{}",
            self.connections,
            self.queues,
            self.declare_connections,
            self.window,
            self.open.as_secs_f64(),
            per_sec(self.connections, self.open),
            self.declare.as_secs_f64(),
            self.declares_per_sec(),
            self.one_by_one,
            self.one_by_one_mean.as_secs_f64() * 1e3,
            opt(self.rss_start),
            opt(self.rss_connections),
            opt(self.rss_queues),
            opt(self.rss_end),
            f2(self.rss_per_connection_kib()),
            f2(self.rss_per_queue_kib()),
            self.answered,
            self.answer.as_secs_f64(),
            self.delete.as_secs_f64(),
            per_sec(self.queues + self.one_by_one, self.delete),
            self.close.as_secs_f64(),
            opt(self.command_status),
        )
    }

    pub fn text(&self) -> String {
        let mut t = String::new();
        let _ = writeln!(
            t,
            "connections: {} opened in {:.2}s ({:.0}/s), each with a session",
            self.connections,
            self.open.as_secs_f64(),
            per_sec(self.connections, self.open)
        );
        let _ = writeln!(
            t,
            "queues: {} declared and bound in {:.2}s ({:.0}/s; {} connections, {} in flight each)",
            self.queues,
            self.declare.as_secs_f64(),
            self.declares_per_sec(),
            self.declare_connections,
            self.window
        );
        if self.one_by_one > 0 {
            let _ = writeln!(
                t,
                "one by one: {} more, {:.3} ms each awaiting every reply",
                self.one_by_one,
                self.one_by_one_mean.as_secs_f64() * 1e3
            );
        }
        if let Some(start) = self.rss_start {
            let _ = writeln!(
                t,
                "broker RSS: {} KiB before, {} with the connections, {} with the queues, {} after \
                 removing both",
                start,
                opt(self.rss_connections),
                opt(self.rss_queues),
                opt(self.rss_end)
            );
            let f2 = |v: Option<f64>| v.map_or_else(|| "?".into(), |v| format!("{v:.2}"));
            let _ = writeln!(
                t,
                "broker RSS per connection: {} KiB; per queue: {} KiB",
                f2(self.rss_per_connection_kib()),
                f2(self.rss_per_queue_kib())
            );
        }
        let _ = writeln!(
            t,
            "answered: {}/{} sessions in {:.2}s; queues deleted in {:.2}s; connections closed \
             in {:.2}s",
            self.answered,
            self.connections,
            self.answer.as_secs_f64(),
            self.delete.as_secs_f64(),
            self.close.as_secs_f64()
        );
        if let Some(code) = self.command_status {
            let _ = writeln!(t, "command exit status: {code}");
        }
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_item_figures_come_from_the_readings_around_each_step() {
        let r = ScaleReport {
            connections: 100,
            queues: 40,
            one_by_one: 10,
            rss_start: Some(1000),
            rss_connections: Some(3000),
            rss_queues: Some(3500),
            declare: Duration::from_millis(500),
            ..Default::default()
        };
        assert_eq!(r.rss_per_connection_kib(), Some(20.0));
        assert_eq!(r.rss_per_queue_kib(), Some(10.0));
        assert_eq!(r.declares_per_sec(), 80.0);
        let row = r.csv_row();
        assert_eq!(
            row.split(',').count(),
            ScaleReport::CSV_HEADER.split(',').count(),
            "{row}"
        );
        assert!(row.contains(",20.00,10.00,"), "{row}");
    }

    #[test]
    fn without_a_broker_pid_memory_columns_are_empty() {
        let r = ScaleReport {
            connections: 5,
            ..Default::default()
        };
        assert_eq!(r.rss_per_connection_kib(), None);
        assert!(r.csv_row().contains(",,,,,,"));
        assert!(!r.text().contains("RSS"));
    }

    #[test]
    fn this_process_has_a_resident_size() {
        assert!(rss_kib(std::process::id()).is_some_and(|k| k > 0));
    }
}
