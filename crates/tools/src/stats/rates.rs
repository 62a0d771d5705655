/// Per-client rates reported to the perftest controller, averaged as qpid-perftest does.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RateStats {
    values: Vec<f64>,
}

impl RateStats {
    pub fn push(&mut self, rate: f64) {
        self.values.push(rate);
    }

    pub fn values(&self) -> &[f64] {
        &self.values
    }

    pub fn sum(&self) -> f64 {
        self.values.iter().sum()
    }

    /// Zero for no values rather than NaN, so an empty report still prints a number.
    pub fn mean(&self) -> f64 {
        if self.values.is_empty() {
            0.0
        } else {
            self.sum() / self.values.len() as f64
        }
    }

    /// Sample standard deviation (n - 1), zero for fewer than two values.
    pub fn stdev(&self) -> f64 {
        if self.values.len() <= 1 {
            return 0.0;
        }
        let avg = self.mean();
        let ssq: f64 = self.values.iter().map(|x| (x - avg) * (x - avg)).sum();
        (ssq / (self.values.len() - 1) as f64).sqrt()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mean_and_sample_stdev() {
        let mut r = RateStats::default();
        for v in [2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0] {
            r.push(v);
        }
        assert_eq!(r.mean(), 5.0);
        // Sum of squared deviations is 32; 32 / 7 under the root.
        assert!((r.stdev() - (32.0f64 / 7.0).sqrt()).abs() < 1e-12);
    }

    #[test]
    fn degenerate_inputs() {
        let mut r = RateStats::default();
        assert_eq!(r.mean(), 0.0);
        r.push(3.0);
        assert_eq!(r.stdev(), 0.0);
    }
}
