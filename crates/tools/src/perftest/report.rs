use std::fmt::Write as _;

use super::{DriverError, Plan};
use crate::stats::{mbytes_per_sec, RateStats};

/// The body a publisher or subscriber sends the controller: its rate in transfers/sec.
pub fn format_rate_report(rate: f64) -> String {
    format!("{rate}")
}

pub fn parse_rate_report(body: &str) -> Result<f64, DriverError> {
    body.trim()
        .parse::<f64>()
        .ok()
        .filter(|r| r.is_finite() && *r >= 0.0)
        .ok_or_else(|| DriverError::BadReport(body.to_string()))
}

/// One iteration as the controller saw it.
#[derive(Debug, Clone, PartialEq)]
pub struct IterationResult {
    pub transfers: usize,
    pub size: usize,
    /// From the controller sending "start" to the last subscriber's report.
    pub secs: f64,
    pub pub_rates: RateStats,
    pub sub_rates: RateStats,
}

impl IterationResult {
    /// Total transfers/sec: every transfer of the plan over the controller's wall time.
    pub fn transfers_per_sec(&self) -> f64 {
        self.transfers as f64 / self.secs
    }

    pub fn mbytes_per_sec(&self) -> f64 {
        mbytes_per_sec(self.transfers_per_sec(), self.size)
    }

    /// `pubs/sec subs/sec transfers/sec Mbytes/sec`, tab-separated; pubs and subs are the
    /// mean per-client rates.
    pub fn summary_line(&self) -> String {
        format!(
            "{}\t{}\t{}\t{}",
            fmt_g(self.pub_rates.mean()),
            fmt_g(self.sub_rates.mean()),
            fmt_g(self.transfers_per_sec()),
            fmt_g(self.mbytes_per_sec())
        )
    }

    /// The long form printed without --summary.
    pub fn full_text(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "\nTotal {} transfers of {} bytes in {} seconds.",
            self.transfers,
            self.size,
            fmt_g(self.secs)
        );
        let _ = writeln!(out, "\nPublish transfers/sec:");
        rates_block(&mut out, &self.pub_rates);
        let _ = writeln!(out, "\nSubscribe transfers/sec:");
        rates_block(&mut out, &self.sub_rates);
        let _ = writeln!(
            out,
            "\nTotal transfers/sec:      {}",
            fmt_g(self.transfers_per_sec())
        );
        let _ = writeln!(out, "Total Mbytes/sec: {}", fmt_g(self.mbytes_per_sec()));
        out
    }
}

fn rates_block(out: &mut String, rates: &RateStats) {
    for v in rates.values() {
        let _ = writeln!(out, "{}", fmt_g(*v));
    }
    let _ = write!(out, "Average: {}", fmt_g(rates.mean()));
    if rates.values().len() > 1 {
        let _ = write!(out, " (std.dev. {})", fmt_g(rates.stdev()));
    }
    out.push('\n');
}

/// All iterations of a run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PerftestReport {
    pub iterations: Vec<IterationResult>,
}

impl PerftestReport {
    pub fn iteration_text(plan: &Plan, it: &IterationResult) -> String {
        if plan.summary {
            format!("{}\n", it.summary_line())
        } else {
            it.full_text()
        }
    }

    /// The `Averages:` block printed after more than one iteration, else None.
    pub fn averages_text(&self) -> Option<String> {
        let n = self.iterations.len();
        if n <= 1 {
            return None;
        }
        let avg = |f: &dyn Fn(&IterationResult) -> f64| {
            self.iterations.iter().map(f).sum::<f64>() / n as f64
        };
        Some(format!(
            "Averages: \n{}\t{}\t{}\t{}\n",
            fmt_g(avg(&|i| i.pub_rates.mean())),
            fmt_g(avg(&|i| i.sub_rates.mean())),
            fmt_g(avg(&|i| i.transfers_per_sec())),
            fmt_g(avg(&|i| i.mbytes_per_sec())),
        ))
    }
}

/// A number as C++'s default ostream prints it (`%g`, six significant digits), so scripts
/// written for qpid-perftest's output read ours unchanged.
pub fn fmt_g(v: f64) -> String {
    if v == 0.0 {
        return "0".to_string();
    }
    if !v.is_finite() {
        return format!("{v}");
    }
    let sci = format!("{v:.5e}");
    let Some((mantissa, exp)) = sci.split_once('e') else {
        return sci;
    };
    let exp: i32 = exp.parse().unwrap_or(0);
    if (-4..6).contains(&exp) {
        let decimals = usize::try_from(5 - exp).unwrap_or(0);
        trim_zeros(format!("{v:.decimals$}"))
    } else {
        let sign = if exp < 0 { '-' } else { '+' };
        format!(
            "{}e{sign}{:02}",
            trim_zeros(mantissa.to_string()),
            exp.abs()
        )
    }
}

fn trim_zeros(s: String) -> String {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rates(v: &[f64]) -> RateStats {
        let mut r = RateStats::default();
        v.iter().for_each(|x| r.push(*x));
        r
    }

    #[test]
    fn g_format_matches_cpp_ostream() {
        assert_eq!(fmt_g(0.0), "0");
        assert_eq!(fmt_g(165_000.0), "165000");
        assert_eq!(fmt_g(1_234_567.0), "1.23457e+06");
        assert_eq!(fmt_g(999_999.7), "1e+06");
        assert_eq!(fmt_g(40.283203125), "40.2832");
        assert_eq!(fmt_g(0.5), "0.5");
        assert_eq!(fmt_g(0.000012345), "1.2345e-05");
        assert_eq!(fmt_g(-2.5), "-2.5");
    }

    #[test]
    fn perftest_arithmetic() {
        // 1 pub, 1 sub, 100 000 messages of 256 bytes in 1.25 s: 200 000 transfers.
        let it = IterationResult {
            transfers: 200_000,
            size: 256,
            secs: 1.25,
            pub_rates: rates(&[100_000.0]),
            sub_rates: rates(&[90_000.0]),
        };
        assert_eq!(it.transfers_per_sec(), 160_000.0);
        assert_eq!(it.mbytes_per_sec(), 160_000.0 * 256.0 / 1_048_576.0);
        assert_eq!(it.summary_line(), "100000\t90000\t160000\t39.0625");
    }

    #[test]
    fn full_text_lists_each_client() {
        let it = IterationResult {
            transfers: 40,
            size: 8,
            secs: 2.0,
            pub_rates: rates(&[10.0, 30.0]),
            sub_rates: rates(&[5.0]),
        };
        let t = it.full_text();
        assert!(
            t.contains("Total 40 transfers of 8 bytes in 2 seconds."),
            "{t}"
        );
        assert!(
            t.contains("10\n30\nAverage: 20 (std.dev. 14.1421)\n"),
            "{t}"
        );
        assert!(t.contains("5\nAverage: 5\n"), "{t}");
        assert!(t.contains("Total transfers/sec:      20\n"), "{t}");
        assert!(t.contains("Total Mbytes/sec: 0.000152588\n"), "{t}");
    }

    #[test]
    fn averages_over_iterations() {
        let mk = |secs| IterationResult {
            transfers: 1000,
            size: 1024,
            secs,
            pub_rates: rates(&[1.0]),
            sub_rates: rates(&[3.0]),
        };
        let r = PerftestReport {
            iterations: vec![mk(1.0), mk(0.5)],
        };
        assert_eq!(
            r.averages_text().unwrap(),
            "Averages: \n1\t3\t1500\t1.46484\n"
        );
        let one = PerftestReport {
            iterations: vec![mk(1.0)],
        };
        assert_eq!(one.averages_text(), None);
    }

    #[test]
    fn rate_reports_round_trip_and_reject_junk() {
        assert_eq!(
            parse_rate_report(&format_rate_report(1234.5)).unwrap(),
            1234.5
        );
        assert!(parse_rate_report("ready").is_err());
        assert!(parse_rate_report("-1").is_err());
        assert!(parse_rate_report("inf").is_err());
    }
}
