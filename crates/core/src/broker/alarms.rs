//! The memory meter and the resource alarms publishers wait on.

use super::Broker;
use crate::alarm::{Alarm, Alarms};

impl Broker {
    /// Bytes of messages held by queues now (queued or delivered and unsettled).
    pub fn memory_used(&self) -> u64 {
        self.memory.bytes()
    }

    /// The resource alarms publishers wait on.
    pub fn alarms(&self) -> &Alarms {
        &self.alarms
    }

    /// Raises the memory alarm above the high-water mark and clears it at or below the low
    /// one; returns the alarm's new state when it changed. Called periodically.
    pub fn check_memory(&self) -> Option<bool> {
        let marks = self.config.memory_watermarks?;
        let used = self.memory.bytes();
        let raised = self.alarms.is_raised(Alarm::Memory);
        let want = if raised {
            used > marks.low.min(marks.high)
        } else {
            used > marks.high
        };
        (want != raised && self.alarms.set(Alarm::Memory, want)).then_some(want)
    }
}
