//! Broker-wide resource accounting and alarms: bytes of messages held by queues, and the flag
//! publishers check before the broker reads more from them.
//!
//! A memory alarm (raised above a high-water mark of queued bytes, cleared below a low-water
//! mark) and a disk alarm (raised by ferryd while free space is below `--disk-free-limit`)
//! share one mechanism: while any alarm is raised the protocol layers stop reading from
//! connections that publish, and consumers keep draining (RabbitMQ's resource alarms;
//! qpidd's producer flow control).

use std::sync::atomic::{AtomicI64, AtomicU8, Ordering};

use tokio::sync::watch;

/// Shards of the byte count, so queues on different cores do not write one cache line.
const SHARDS: usize = 16;

#[derive(Debug, Default)]
#[repr(align(64))]
struct Shard(AtomicI64);

/// Bytes of messages held by queues (queued and acquired-but-unsettled; a message on N queues
/// counts N times). Each queue updates one shard under its own lock.
#[derive(Debug, Default)]
pub struct MemoryMeter {
    shards: [Shard; SHARDS],
}

impl MemoryMeter {
    pub(crate) fn add(&self, shard: usize, bytes: u64) {
        let delta = i64::try_from(bytes).unwrap_or(i64::MAX);
        self.shards[shard % SHARDS]
            .0
            .fetch_add(delta, Ordering::Relaxed);
    }

    pub(crate) fn sub(&self, shard: usize, bytes: u64) {
        let delta = i64::try_from(bytes).unwrap_or(i64::MAX);
        self.shards[shard % SHARDS]
            .0
            .fetch_sub(delta, Ordering::Relaxed);
    }

    /// The total before clamping at zero, so tests see a sub too many.
    #[cfg(test)]
    pub(crate) fn signed_total(&self) -> i64 {
        self.shards
            .iter()
            .map(|s| s.0.load(Ordering::Relaxed))
            .sum()
    }

    /// The current total (a snapshot: shards are read one after another).
    pub fn bytes(&self) -> u64 {
        let sum: i64 = self
            .shards
            .iter()
            .map(|s| s.0.load(Ordering::Relaxed))
            .sum();
        u64::try_from(sum).unwrap_or(0)
    }
}

/// A reason to stop reading from publishers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Alarm {
    Memory,
    Disk,
}

impl Alarm {
    fn bit(self) -> u8 {
        match self {
            Alarm::Memory => 1,
            Alarm::Disk => 2,
        }
    }
}

/// The raised alarms. Checking is one atomic load; waiting for a change is a watch channel.
#[derive(Debug)]
pub struct Alarms {
    raised: AtomicU8,
    changed: watch::Sender<bool>,
}

impl Default for Alarms {
    fn default() -> Self {
        Alarms {
            raised: AtomicU8::new(0),
            changed: watch::Sender::new(false),
        }
    }
}

impl Alarms {
    /// Raises or clears `alarm`; returns whether that changed anything.
    pub fn set(&self, alarm: Alarm, raised: bool) -> bool {
        let before = if raised {
            self.raised.fetch_or(alarm.bit(), Ordering::SeqCst)
        } else {
            self.raised.fetch_and(!alarm.bit(), Ordering::SeqCst)
        };
        // Read the flags under the channel's lock, so concurrent setters publish in order.
        self.changed.send_if_modified(|blocked| {
            let now = self.raised.load(Ordering::SeqCst) != 0;
            let changed = *blocked != now;
            *blocked = now;
            changed
        });
        (before & alarm.bit() != 0) != raised
    }

    pub fn is_raised(&self, alarm: Alarm) -> bool {
        self.raised.load(Ordering::SeqCst) & alarm.bit() != 0
    }

    /// Whether publishers must wait.
    pub fn blocked(&self) -> bool {
        self.raised.load(Ordering::Relaxed) != 0
    }

    /// The alarms raised now, by name.
    pub fn raised(&self) -> Vec<&'static str> {
        let raised = self.raised.load(Ordering::Relaxed);
        [(Alarm::Memory, "memory"), (Alarm::Disk, "disk")]
            .into_iter()
            .filter(|(a, _)| raised & a.bit() != 0)
            .map(|(_, name)| name)
            .collect()
    }

    /// Why publishers wait, in RabbitMQ's words (0-9-1 connection.blocked carries it).
    pub fn reason(&self) -> &'static str {
        let raised = self.raised.load(Ordering::Relaxed);
        if raised & Alarm::Memory.bit() != 0 {
            "low on memory"
        } else if raised & Alarm::Disk.bit() != 0 {
            "low on disk"
        } else {
            ""
        }
    }

    /// Wakes on every change of [`Alarms::blocked`].
    pub fn subscribe(&self) -> watch::Receiver<bool> {
        self.changed.subscribe()
    }
}

/// When the memory alarm goes on and off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Watermarks {
    /// Raise the alarm when queues hold more than this many bytes.
    pub high: u64,
    /// Clear it again when they hold this many or fewer (at most `high`).
    pub low: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_sum_and_never_go_negative() {
        let m = MemoryMeter::default();
        m.add(1, 100);
        m.add(17, 50);
        m.sub(3, 30);
        assert_eq!(m.bytes(), 120);
        m.sub(2, 1000);
        assert_eq!(m.bytes(), 0);
    }

    #[test]
    fn any_raised_alarm_blocks_and_changes_are_announced() {
        let a = Alarms::default();
        let mut rx = a.subscribe();
        assert!(!a.blocked());
        assert!(a.set(Alarm::Memory, true));
        assert!(!a.set(Alarm::Memory, true), "already raised");
        assert!(a.blocked());
        assert_eq!(a.reason(), "low on memory");
        assert!(rx.has_changed().unwrap());
        assert!(*rx.borrow_and_update());
        a.set(Alarm::Disk, true);
        a.set(Alarm::Memory, false);
        assert!(a.blocked(), "the disk alarm still blocks");
        assert_eq!(a.reason(), "low on disk");
        assert!(!rx.has_changed().unwrap(), "blocked throughout: no wake-up");
        a.set(Alarm::Disk, false);
        assert!(!a.blocked());
        assert!(rx.has_changed().unwrap());
    }
}
