//! Publisher confirms: every publish on a channel in confirm mode gets a sequence number, and
//! its outcome is reported with basic.ack / basic.nack. Outcomes are known as soon as the core
//! has routed the message, except for persistent messages the journal recorded: those are
//! acked only once the journal is durable up to their sync point. Outcomes are collected per
//! read batch (and per journal wake-up) and coalesced: a run of acks becomes one
//! `basic.ack multiple`. Confirms go out in publish order, so a transient message published
//! after a persistent one waits for the persistent one's sync too.

use std::collections::VecDeque;

use ferry_amqp091::{BasicAck, BasicNack, Method};
use ferry_core::SyncPoint;

#[derive(Debug, Default)]
pub struct Confirms {
    enabled: bool,
    /// Sequence number of the last publish seen.
    published: u64,
    /// Everything up to here has been reported.
    reported: u64,
    /// Publishes after `reported` that failed (sorted; usually empty).
    nacked: Vec<u64>,
    /// Publishes not yet on stable storage, with the point they wait for (both ascending).
    unsynced: VecDeque<(u64, SyncPoint)>,
}

impl Confirms {
    pub fn enable(&mut self) {
        self.enabled = true;
    }

    pub fn is_enabled(&self) -> bool {
        self.enabled
    }

    /// Records one publish's outcome (`sync`: the journal point it waits for); returns its
    /// sequence number when confirming.
    pub fn record(&mut self, ok: bool, sync: Option<SyncPoint>) -> Option<u64> {
        if !self.enabled {
            return None;
        }
        self.published += 1;
        if !ok {
            self.nacked.push(self.published);
        } else if let Some(point) = sync {
            self.unsynced.push_back((self.published, point));
        }
        Some(self.published)
    }

    /// The point the last unsynced publish waits for.
    pub fn last_unsynced_point(&self) -> Option<SyncPoint> {
        self.unsynced.back().map(|(_, p)| *p)
    }

    /// The journal failed: publishes it had not made durable are nacked.
    pub fn fail_unsynced(&mut self) {
        self.nacked
            .extend(self.unsynced.drain(..).map(|(tag, _)| tag));
        self.nacked.sort_unstable();
    }

    /// The last sequence number that may be reported with the journal durable up to
    /// `durable`.
    fn reportable(&mut self, durable: SyncPoint) -> u64 {
        while self.unsynced.front().is_some_and(|(_, p)| *p <= durable) {
            self.unsynced.pop_front();
        }
        self.unsynced
            .front()
            .map_or(self.published, |(tag, _)| tag - 1)
    }

    pub fn has_pending(&self) -> bool {
        self.published > self.reported
    }

    /// The methods reporting everything recorded since the last flush that the journal
    /// (durable up to `durable`) allows, in order: runs of acks coalesced with `multiple`,
    /// each nack on its own.
    pub fn flush(&mut self, durable: SyncPoint) -> Vec<Method> {
        let limit = self.reportable(durable);
        let mut out = Vec::new();
        if limit <= self.reported {
            return out;
        }
        let mut next = self.reported + 1;
        let cut = self.nacked.partition_point(|&n| n <= limit);
        for &nack in &self.nacked[..cut] {
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
        if limit >= next {
            out.push(ack(limit, limit > next));
        }
        self.nacked.drain(..cut);
        self.reported = limit;
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
        assert_eq!(c.record(true, None), None);
        assert!(!c.has_pending());
        c.enable();
        assert_eq!(c.record(true, None), Some(1));
    }

    #[test]
    fn a_run_of_acks_is_one_multiple_ack_and_a_single_one_is_not_multiple() {
        let mut c = Confirms::default();
        c.enable();
        for _ in 0..3 {
            c.record(true, None);
        }
        let m: Vec<_> = c.flush(SyncPoint(0)).iter().map(acked).collect();
        assert_eq!(m, [('a', 3, true)]);
        c.record(true, None);
        let m: Vec<_> = c.flush(SyncPoint(0)).iter().map(acked).collect();
        assert_eq!(m, [('a', 4, false)]);
        assert!(c.flush(SyncPoint(0)).is_empty());
    }

    #[test]
    fn nacks_split_the_runs() {
        let mut c = Confirms::default();
        c.enable();
        for ok in [true, true, false, true, false, false, true] {
            c.record(ok, None);
        }
        let m: Vec<_> = c.flush(SyncPoint(0)).iter().map(acked).collect();
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

    #[test]
    fn acks_wait_for_the_sync_of_earlier_persistent_publishes() {
        let mut c = Confirms::default();
        c.enable();
        c.record(true, None);
        c.record(true, Some(SyncPoint(10)));
        c.record(false, None);
        c.record(true, None);
        c.record(true, Some(SyncPoint(20)));
        assert_eq!(c.last_unsynced_point(), Some(SyncPoint(20)));
        let m: Vec<_> = c.flush(SyncPoint(5)).iter().map(acked).collect();
        assert_eq!(
            m,
            [('a', 1, false)],
            "2 is not durable yet; 3 and 4 wait behind it"
        );
        let m: Vec<_> = c.flush(SyncPoint(10)).iter().map(acked).collect();
        assert_eq!(m, [('a', 2, false), ('n', 3, false), ('a', 4, false)]);
        assert!(c.has_pending());
        assert!(c.flush(SyncPoint(19)).is_empty());
        let m: Vec<_> = c.flush(SyncPoint(25)).iter().map(acked).collect();
        assert_eq!(m, [('a', 5, false)]);
        assert!(!c.has_pending());
    }

    #[test]
    fn a_failed_journal_nacks_what_it_did_not_make_durable() {
        let mut c = Confirms::default();
        c.enable();
        c.record(true, Some(SyncPoint(1)));
        c.record(true, Some(SyncPoint(2)));
        c.record(true, None);
        c.fail_unsynced();
        let m: Vec<_> = c.flush(SyncPoint(1)).iter().map(acked).collect();
        assert_eq!(m, [('n', 1, false), ('n', 2, false), ('a', 3, false)]);
    }
}
