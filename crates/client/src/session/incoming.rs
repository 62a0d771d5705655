//! Completion of the commands the server sends us (mostly transfers): which ids to
//! report in the next `session.completed`, and when.

use ferry_amqp010::SequenceSet;

/// Ask the server to acknowledge (timely-reply) once the set we keep repeating gets
/// this fragmented or this long, so it can be trimmed.
const TIMELY_RANGES: usize = 8;
const TIMELY_COUNT: u64 = 4096;

#[derive(Debug, Default)]
pub(crate) struct IncomingCompletion {
    /// Completed and not yet known-completed by the server. 0-10 has every
    /// `session.completed` repeat the whole set until the peer confirms it.
    completed: SequenceSet,
    /// Completions since the last `session.completed` went out.
    unsent: u32,
    /// A deferred flush has been requested and not yet run.
    pub flush_scheduled: bool,
}

impl IncomingCompletion {
    /// Returns how many completions are waiting to be sent.
    pub fn complete(&mut self, id: u32) -> u32 {
        self.completed.add(id);
        self.unsent = self.unsent.saturating_add(1);
        self.unsent
    }

    pub fn complete_set(&mut self, ids: &SequenceSet) {
        for &(lo, hi) in ids.ranges() {
            self.completed.add_range(lo, hi);
        }
        self.unsent = self.unsent.saturating_add(1);
    }

    /// What the next `session.completed` carries (`None` if nothing new), and whether
    /// to set timely-reply.
    pub fn take(&mut self) -> Option<(SequenceSet, bool)> {
        if self.unsent == 0 {
            return None;
        }
        Some(self.snapshot())
    }

    /// The whole set regardless of what was sent (answering `session.flush`).
    pub fn snapshot(&mut self) -> (SequenceSet, bool) {
        self.unsent = 0;
        let timely =
            self.completed.ranges().len() > TIMELY_RANGES || self.completed.count() > TIMELY_COUNT;
        (self.completed.clone(), timely)
    }

    pub fn known_completed(&mut self, ids: &SequenceSet) {
        for &(lo, hi) in ids.ranges() {
            self.completed.remove_range(lo, hi);
        }
    }

    #[cfg(test)]
    pub fn pending(&self) -> &SequenceSet {
        &self.completed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeats_until_known_completed() {
        let mut c = IncomingCompletion::default();
        assert_eq!(c.take(), None);
        assert_eq!(c.complete(0), 1);
        assert_eq!(c.complete(1), 2);
        c.complete(3);
        let (set, timely) = c.take().unwrap();
        assert_eq!(set.ranges(), &[(0, 1), (3, 3)]);
        assert!(!timely);
        assert_eq!(c.take(), None, "nothing new since");
        c.complete(2);
        assert_eq!(c.take().unwrap().0.ranges(), &[(0, 3)]);
        c.known_completed(&SequenceSet::from_range(0, 2));
        assert_eq!(c.pending().ranges(), &[(3, 3)]);
    }

    #[test]
    fn long_sets_ask_for_a_timely_reply() {
        let mut c = IncomingCompletion::default();
        for id in 0..=TIMELY_COUNT as u32 {
            c.complete(id);
        }
        assert!(c.take().unwrap().1);
        let mut c = IncomingCompletion::default();
        for id in (0..40).step_by(2) {
            c.complete(id);
        }
        assert!(c.take().unwrap().1);
    }
}
