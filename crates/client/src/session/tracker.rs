//! Bookkeeping for the commands this client sends on one session: ids, completion by
//! the server's `session.completed` ranges, results, and who is waiting for what.
//! Pure state, no I/O, so the rules can be tested directly.

use ferry_amqp010::{serial_le, serial_lt, SequenceSet, Struct32};
use tokio::sync::oneshot;

use crate::error::ClientError;

pub(crate) type Reply = Result<Option<Struct32>, ClientError>;

#[derive(Debug)]
struct Waiter {
    id: u32,
    result: Option<Struct32>,
    tx: oneshot::Sender<Reply>,
}

#[derive(Debug, Default)]
pub(crate) struct Tracker {
    /// The id the next command gets; 0-10 numbers a session's commands from 0.
    next: u32,
    /// Every id before this one is complete.
    low: u32,
    /// Completed ids at or after `low` (completion may arrive out of order).
    completed_above: SequenceSet,
    waiters: Vec<Waiter>,
    /// Set once: the session's first failure, returned by every later call.
    error: Option<ClientError>,
}

impl Tracker {
    pub fn check(&self) -> Result<(), ClientError> {
        match &self.error {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }

    pub fn error(&self) -> Option<&ClientError> {
        self.error.as_ref()
    }

    pub fn next_id(&self) -> u32 {
        self.next
    }

    /// Records that the command numbered [`Tracker::next_id`] has been written.
    pub fn sent(&mut self) -> u32 {
        let id = self.next;
        self.next = id.wrapping_add(1);
        id
    }

    /// Commands sent and not yet known to be complete.
    pub fn in_flight(&self) -> u32 {
        self.next.wrapping_sub(self.low)
    }

    pub fn is_complete(&self, id: u32) -> bool {
        serial_lt(id, self.low) || self.completed_above.contains(id)
    }

    /// Registers interest in command `id`'s completion (and result).
    pub fn wait(&mut self, id: u32) -> oneshot::Receiver<Reply> {
        let (tx, rx) = oneshot::channel();
        if let Some(e) = &self.error {
            let _ = tx.send(Err(e.clone()));
        } else if self.is_complete(id) {
            let _ = tx.send(Ok(None));
        } else {
            self.waiters.push(Waiter {
                id,
                result: None,
                tx,
            });
        }
        rx
    }

    /// Applies a `session.completed`. Ids outside what was sent and not yet complete are
    /// ignored (the server repeats ranges until we acknowledge them). Returns whether
    /// anything new completed.
    pub fn completed(&mut self, set: &SequenceSet) -> bool {
        let before = (self.low, self.completed_above.count());
        let last_sent = self.next.wrapping_sub(1);
        for &(lo, hi) in set.ranges() {
            if self.in_flight() == 0 {
                break;
            }
            let lo = if serial_lt(lo, self.low) {
                self.low
            } else {
                lo
            };
            let hi = if serial_lt(last_sent, hi) {
                last_sent
            } else {
                hi
            };
            if serial_le(lo, hi) {
                self.completed_above.add_range(lo, hi);
            }
        }
        while self.completed_above.first() == Some(self.low) {
            let end = self.completed_above.ranges()[0].1;
            self.completed_above.remove_upto(end);
            self.low = end.wrapping_add(1);
        }
        if before == (self.low, self.completed_above.count()) {
            return false;
        }
        let mut i = 0;
        while i < self.waiters.len() {
            if self.is_complete(self.waiters[i].id) {
                let w = self.waiters.swap_remove(i);
                let _ = w.tx.send(Ok(w.result));
            } else {
                i += 1;
            }
        }
        true
    }

    /// Keeps an `execution.result` for a waiter; it is delivered on completion. A result
    /// nobody waits for is dropped, so memory stays bounded.
    pub fn result(&mut self, id: u32, value: Option<Struct32>) {
        if let Some(w) = self.waiters.iter_mut().find(|w| w.id == id) {
            w.result = value;
        }
    }

    /// Records the session's failure and hands it to every waiter.
    pub fn fail(&mut self, error: ClientError) {
        if self.error.is_none() {
            self.error = Some(error);
        }
        if let Some(e) = &self.error {
            for w in self.waiters.drain(..) {
                let _ = w.tx.send(Err(e.clone()));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_amqp010::ErrorCode;

    fn set(ranges: &[(u32, u32)]) -> SequenceSet {
        let mut s = SequenceSet::new();
        for &(lo, hi) in ranges {
            s.add_range(lo, hi);
        }
        s
    }

    fn sent(t: &mut Tracker, n: u32) {
        for _ in 0..n {
            t.sent();
        }
    }

    #[test]
    fn ids_start_at_zero_and_complete_by_ranges() {
        let mut t = Tracker::default();
        assert_eq!(t.sent(), 0);
        sent(&mut t, 9);
        assert_eq!(t.in_flight(), 10);
        assert!(t.completed(&set(&[(0, 2), (5, 6)])));
        assert_eq!(t.in_flight(), 7);
        assert!(t.is_complete(5) && !t.is_complete(3));
        assert!(
            !t.completed(&set(&[(0, 2), (5, 6)])),
            "a repeat changes nothing"
        );
        assert!(t.completed(&set(&[(0, 4)])));
        assert_eq!(t.in_flight(), 3);
        // Ids never sent are not completed by an over-wide range.
        assert!(t.completed(&set(&[(7, 100)])));
        assert_eq!(t.in_flight(), 0);
        assert_eq!(t.sent(), 10);
        assert!(!t.is_complete(10));
    }

    #[test]
    fn waiters_get_results_on_completion() {
        let mut t = Tracker::default();
        sent(&mut t, 3);
        let mut w1 = t.wait(1);
        let mut w2 = t.wait(2);
        let value = Struct32 {
            class_code: 8,
            struct_code: 1,
            body: Default::default(),
        };
        t.result(1, Some(value.clone()));
        assert!(w1.try_recv().is_err(), "a result alone does not complete");
        t.completed(&set(&[(1, 1)]));
        assert_eq!(w1.try_recv().unwrap().unwrap(), Some(value));
        assert!(w2.try_recv().is_err());
        t.completed(&set(&[(0, 2)]));
        assert_eq!(w2.try_recv().unwrap().unwrap(), None);
        let mut done = t.wait(0);
        assert_eq!(done.try_recv().unwrap().unwrap(), None);
    }

    #[test]
    fn failure_reaches_current_and_later_waiters() {
        let mut t = Tracker::default();
        sent(&mut t, 2);
        let mut w = t.wait(1);
        let e = ClientError::Exception {
            code: ErrorCode::NotFound,
            command_id: 1,
            description: "no queue".into(),
        };
        t.fail(e.clone());
        t.fail(ClientError::Closed);
        assert!(matches!(
            w.try_recv().unwrap(),
            Err(ClientError::Exception { command_id: 1, .. })
        ));
        assert!(matches!(t.check(), Err(ClientError::Exception { .. })));
        let mut later = t.wait(5);
        assert!(later.try_recv().unwrap().is_err());
    }

    #[test]
    fn ids_wrap_around() {
        let mut t = Tracker {
            next: u32::MAX - 1,
            low: u32::MAX - 1,
            ..Default::default()
        };
        sent(&mut t, 4);
        assert_eq!(t.in_flight(), 4);
        assert!(t.completed(&set(&[(u32::MAX - 1, 1)])));
        assert_eq!(t.in_flight(), 0);
    }
}
