use std::thread;
use std::time::{Duration, Instant};

/// Below this much waiting the pacer yields instead of sleeping. It sleeps (with 1 ns timer
/// slack, see `precise_sleep`) until this close to the due time and yields the rest: a
/// thread woken by a timer on this kind of machine is ~20 µs late, so 20 µs of spinning puts
/// the median send within a few µs of its due time for ~2% more CPU. It used to spin the
/// last 500 µs, which at 10k msg/s (100 µs apart) kept the sender on a CPU all the time
/// (75-99% of one, measured per thread): on a 2-CPU machine that took half the CPUs from the
/// broker and the receiver whose latency it was measuring.
const SPIN_BELOW: Duration = Duration::from_micros(20);

/// A fixed-rate send schedule: message `i` is due at `start + i / rate`.
///
/// Due times come from the schedule, never from when the previous send happened, so a
/// stall does not push the rest of the run later (which would hide it); the latency
/// recorder charges each message from its due time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pacer {
    rate: u64,
}

impl Pacer {
    /// `rate` messages per second; 0 means back-to-back.
    pub fn new(rate: u64) -> Self {
        Pacer { rate }
    }

    pub fn is_paced(&self) -> bool {
        self.rate > 0
    }

    pub fn rate(&self) -> u64 {
        self.rate
    }

    /// Offset of message `i`'s due time from the start; zero when unpaced.
    pub fn due_offset(&self, i: u64) -> Duration {
        if self.rate == 0 {
            return Duration::ZERO;
        }
        // Computed from i rather than accumulated so rounding does not drift.
        let ns = u128::from(i) * 1_000_000_000 / u128::from(self.rate);
        Duration::from_nanos(u64::try_from(ns).unwrap_or(u64::MAX))
    }

    /// Waits until message `i` is due and returns its due time. Unpaced, returns now.
    pub fn wait_for(&self, start: Instant, i: u64) -> Instant {
        if self.rate == 0 {
            return Instant::now();
        }
        let due = start + self.due_offset(i);
        loop {
            let now = Instant::now();
            if now >= due {
                return due;
            }
            let left = due - now;
            if left > SPIN_BELOW {
                precise_sleep(left - SPIN_BELOW);
            } else {
                thread::yield_now();
            }
        }
    }
}

/// Sleeps with the thread's timer slack at 1 ns: Linux lets a sleeping thread wake up to
/// 50 µs late by default to batch timers, half the gap between messages at 10k/s.
fn precise_sleep(d: Duration) {
    #[cfg(target_os = "linux")]
    {
        thread_local! {
            static SLACK: () = {
                // SAFETY: prctl(PR_SET_TIMERSLACK) takes an integer argument and changes
                // only the calling thread's timer slack.
                unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };
            };
        }
        SLACK.with(|_| {});
    }
    thread::sleep(d);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn due_times_follow_the_schedule() {
        let p = Pacer::new(3);
        assert_eq!(p.due_offset(0), Duration::ZERO);
        assert_eq!(p.due_offset(1), Duration::from_nanos(333_333_333));
        assert_eq!(p.due_offset(3), Duration::from_secs(1));
        assert_eq!(p.due_offset(3_000_000), Duration::from_secs(1_000_000));
    }

    #[test]
    fn unpaced_is_back_to_back() {
        let p = Pacer::new(0);
        assert!(!p.is_paced());
        assert_eq!(p.due_offset(1_000), Duration::ZERO);
    }

    #[test]
    fn a_late_caller_gets_the_past_due_time() {
        let p = Pacer::new(1_000);
        let start = Instant::now() - Duration::from_secs(1);
        // Message 10 was due 990 ms ago: no wait, and the due time is the scheduled one.
        assert_eq!(p.wait_for(start, 10), start + Duration::from_millis(10));
    }
}
