//! Publisher confirms: every publish on a channel in confirm mode gets a sequence number, and
//! its outcome is reported with basic.ack / basic.nack. Outcomes are known as soon as the core
//! has routed the message, so they are collected per read batch and coalesced: a run of acks
//! becomes one `basic.ack multiple`.

use ferry_amqp091::{BasicAck, BasicNack, Method};

#[derive(Debug, Default)]
pub struct Confirms {
    enabled: bool,
    /// Sequence number of the last publish seen.
    published: u64,
    /// Everything up to here has been reported.
    reported: u64,
    /// Publishes after `reported` that failed (sorted; usually empty).
    nacked: Vec<u64>,
}

impl Confirms {
    pub fn enable(&mut self) {
        self.enabled = true;
    }

    pub fn is_enabled(&self) -> bool {
        self.enabled
    }

    /// Records one publish's outcome; returns its sequence number when confirming.
    pub fn record(&mut self, ok: bool) -> Option<u64> {
        if !self.enabled {
            return None;
        }
        self.published += 1;
        if !ok {
            self.nacked.push(self.published);
        }
        Some(self.published)
    }

    pub fn has_pending(&self) -> bool {
        self.published > self.reported
    }

    /// The methods reporting everything recorded since the last flush, in order: runs of acks
    /// coalesced with `multiple`, each nack on its own.
    pub fn flush(&mut self) -> Vec<Method> {
        let mut out = Vec::new();
        let mut next = self.reported + 1;
        for &nack in &self.nacked {
            if nack > next {
                out.push(ack(nack - 1, nack - 1 > next));
            }
            out.push(Method::BasicNack(BasicNack {
                delivery_tag: nack,
                multiple: false,
                requeue: false,
            }));
            next = nack + 1;
        }
        if self.published >= next {
            out.push(ack(self.published, self.published > next));
        }
        self.nacked.clear();
        self.reported = self.published;
        out
    }
}

fn ack(tag: u64, multiple: bool) -> Method {
    Method::BasicAck(BasicAck {
        delivery_tag: tag,
        multiple,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acked(m: &Method) -> (char, u64, bool) {
        match m {
            Method::BasicAck(a) => ('a', a.delivery_tag, a.multiple),
            Method::BasicNack(n) => ('n', n.delivery_tag, n.multiple),
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn off_until_selected() {
        let mut c = Confirms::default();
        assert_eq!(c.record(true), None);
        assert!(!c.has_pending());
        c.enable();
        assert_eq!(c.record(true), Some(1));
    }

    #[test]
    fn a_run_of_acks_is_one_multiple_ack_and_a_single_one_is_not_multiple() {
        let mut c = Confirms::default();
        c.enable();
        for _ in 0..3 {
            c.record(true);
        }
        let m: Vec<_> = c.flush().iter().map(acked).collect();
        assert_eq!(m, [('a', 3, true)]);
        c.record(true);
        let m: Vec<_> = c.flush().iter().map(acked).collect();
        assert_eq!(m, [('a', 4, false)]);
        assert!(c.flush().is_empty());
    }

    #[test]
    fn nacks_split_the_runs() {
        let mut c = Confirms::default();
        c.enable();
        for ok in [true, true, false, true, false, false, true] {
            c.record(ok);
        }
        let m: Vec<_> = c.flush().iter().map(acked).collect();
        assert_eq!(
            m,
            [
                ('a', 2, true),
                ('n', 3, false),
                ('a', 4, false),
                ('n', 5, false),
                ('n', 6, false),
                ('a', 7, false)
            ]
        );
    }
}
