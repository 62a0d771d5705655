//! How a latency receiver batches its acknowledgements, whatever the protocol.

use super::LatencyOpts;

/// One acknowledgement for every `--ack` messages (half the prefetch when 0), or none at all
/// when the prefetch is 0 and deliveries come needing none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AckBatch {
    every: u32,
    pending: u32,
}

impl AckBatch {
    pub fn new(opts: &LatencyOpts) -> Self {
        AckBatch {
            every: if opts.prefetch == 0 {
                0
            } else {
                opts.ack_every().max(1)
            },
            pending: 0,
        }
    }

    /// Whether deliveries are acknowledged at all.
    pub fn is_on(&self) -> bool {
        self.every > 0
    }

    /// One more delivery waiting for its acknowledgement.
    pub fn count(&mut self) {
        self.pending += 1;
    }

    /// True, starting the next batch, once a batch's worth of deliveries is waiting.
    pub fn take_due(&mut self) -> bool {
        if self.every == 0 || self.pending < self.every {
            return false;
        }
        self.pending = 0;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Cli, Command};
    use clap::Parser;

    fn batch(args: &[&str]) -> AckBatch {
        let argv = [&["ferry", "latency-test"][..], args].concat();
        let Command::LatencyTest(opts) = Cli::try_parse_from(argv).unwrap().command else {
            unreachable!()
        };
        AckBatch::new(&opts)
    }

    fn due_at(mut b: AckBatch, n: u32) -> Vec<u32> {
        (1..=n)
            .filter(|_| {
                b.count();
                b.take_due()
            })
            .collect()
    }

    #[test]
    fn half_the_prefetch_unless_told() {
        assert_eq!(due_at(batch(&["--prefetch", "100"]), 100), [50, 100]);
        assert_eq!(
            due_at(batch(&["--prefetch", "100", "--ack", "30"]), 60),
            [30, 60]
        );
        assert_eq!(due_at(batch(&["--prefetch", "1"]), 2), [1, 2]);
    }

    #[test]
    fn no_prefetch_no_acknowledgements() {
        let b = batch(&["--prefetch", "0"]);
        assert!(!b.is_on());
        assert!(due_at(b, 1_000).is_empty());
    }
}
