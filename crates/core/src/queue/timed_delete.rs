//! qpidd's timed auto-delete (`qpid.auto_delete_timeout`): when an auto-delete queue falls
//! unused (its exclusive owner's session ended, or its last consumer left), it is deleted
//! that long afterwards rather than at once, unless it is used again meanwhile.
//!
//! As in qpidd (`Queue::scheduleAutoDelete`, `AutoDeleteTask`): a new consumer or a new
//! exclusive owner cancels the pending deletion; a redeclaration does not cancel it, but
//! when the time comes the deletion is put off by another timeout instead of happening.
//! The broker's housekeeping (the `x-expires` sweep) asks for the deadline and deletes.

use super::{Queue, QueueState};

/// A pending deletion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TimedDelete {
    /// When, in milliseconds since the epoch.
    pub(crate) at: u64,
    /// Declared again (not passively) since it was scheduled: put off once more when due.
    redeclared: bool,
}

impl Queue {
    /// The queue fell unused: schedules its deletion if it has a timeout, and says so
    /// (false: delete it now).
    pub(super) fn schedule_delete(&self, st: &mut QueueState, now: u64) -> bool {
        let Some(timeout) = self.features.auto_delete_timeout else {
            return false;
        };
        st.timed_delete = Some(TimedDelete {
            at: now.saturating_add(timeout),
            redeclared: false,
        });
        true
    }

    /// A non-passive redeclaration, which a pending deletion notices when it falls due.
    pub(crate) fn redeclared(&self) {
        if self.features.auto_delete_timeout.is_some() {
            if let Some(t) = self.lock().timed_delete.as_mut() {
                t.redeclared = true;
            }
        }
    }

    /// Whether a pending deletion falls due by `now` on a queue still unused. One that was
    /// used again is cancelled; one redeclared meanwhile is put off by another timeout.
    pub(super) fn timed_delete_due(&self, st: &mut QueueState, now: u64) -> bool {
        let Some(t) = st.timed_delete else {
            return false;
        };
        if t.at > now {
            return false;
        }
        if st.owner.is_some() || !st.consumers.is_empty() {
            st.timed_delete = None;
            return false;
        }
        if t.redeclared {
            self.schedule_delete(st, now);
            return false;
        }
        true
    }

    /// Whether the queue asks the broker's housekeeping to come back at some deadline
    /// (`x-expires`, or a timed auto-delete).
    pub(crate) fn has_deadlines(&self) -> bool {
        self.features.expires.is_some() || self.features.auto_delete_timeout.is_some()
    }
}
