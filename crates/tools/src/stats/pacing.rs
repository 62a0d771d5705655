use std::thread;
use std::time::{Duration, Instant};

/// How early, at least and at most, the pacer wakes before a message's due time; it then
/// yields until the due time. The margin in between is learned from how late this machine's
/// timer wake-ups really are (see `WakeMargin`). Spinning the last 500 µs, as it once did,
/// kept the sender on a CPU all the time at 10k msg/s (75-99% of one): on a 2-CPU machine
/// that took half the CPUs from the broker and the receiver whose latency it was measuring.
const MIN_MARGIN: Duration = Duration::from_micros(20);
const MAX_MARGIN: Duration = Duration::from_micros(200);
/// Headroom above the learned wake-up lateness.
const HEADROOM_NS: u64 = 5_000;

/// A fixed-rate send schedule: message `i` is due at `start + i / rate`.
///
/// Due times come from the schedule, never from when the previous send happened, so a
/// stall does not push the rest of the run later (which would hide it); the latency
/// recorder charges each message from its due time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pacer {
    rate: u64,
    margin: WakeMargin,
}

impl Pacer {
    /// `rate` messages per second; 0 means back-to-back.
    pub fn new(rate: u64) -> Self {
        Pacer {
            rate,
            margin: WakeMargin::default(),
        }
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
    pub fn wait_for(&mut self, start: Instant, i: u64) -> Instant {
        if self.rate == 0 {
            return Instant::now();
        }
        let due = start + self.due_offset(i);
        let mut first = true;
        loop {
            let now = Instant::now();
            if now >= due {
                return due;
            }
            let left = due - now;
            let margin = self.margin.get();
            if left > margin {
                let asked = left - margin;
                precise_sleep(asked);
                self.margin.observe(now.elapsed().saturating_sub(asked));
            } else {
                if first {
                    self.margin.unobserved_gap();
                }
                thread::yield_now();
            }
            first = false;
        }
    }
}

/// How long before a due time the sender must ask to be woken so that it is awake in time.
///
/// A sleeping thread wakes later than asked by a machine-dependent amount: a few µs on bare
/// metal, 30-40 µs in the 2-vCPU virtual machine the benchmarks ran on. A fixed margin
/// either leaves the sender late (and the coordinated-omission-corrected latency charges
/// that lateness to the broker) or spins longer than needed. The estimate tracks a high
/// quantile of observed lateness: it rises by 1/8 of the gap to a later wake-up and falls by
/// 1/64 of the gap to an earlier one, which settles where 8 of 9 wake-ups are earlier.
/// Samples are capped so that one descheduled sleep does not make the pacer spin for long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct WakeMargin {
    lateness_ns: u64,
}

impl Default for WakeMargin {
    fn default() -> Self {
        WakeMargin {
            lateness_ns: duration_ns(MIN_MARGIN) - HEADROOM_NS,
        }
    }
}

impl WakeMargin {
    fn get(&self) -> Duration {
        Duration::from_nanos(self.lateness_ns + HEADROOM_NS).clamp(MIN_MARGIN, MAX_MARGIN)
    }

    /// A whole gap between messages spent yielding, because the margin had grown to the
    /// gap itself, says nothing about how late a wake-up would be. Only sleeps teach the
    /// estimate, so without this a few late wake-ups in a row could leave the margin above
    /// the gap for the rest of the run: the sender would then never sleep and yield on a
    /// CPU all the time, which is what the margin exists to avoid. Counting such a gap as an
    /// on-time wake-up lets the estimate fall until the pacer sleeps again and measures.
    /// Where the gap is shorter than a wake-up is late (above 20k msg/s here), the pacer now
    /// sleeps now and then and sends that late; the sender-lateness line reports it and the
    /// corrected latency charges it.
    fn unobserved_gap(&mut self) {
        self.observe(Duration::ZERO);
    }

    fn observe(&mut self, late: Duration) {
        let late = duration_ns(late).min(duration_ns(MAX_MARGIN));
        let est = self.lateness_ns;
        self.lateness_ns = if late > est {
            est + (late - est) / 8
        } else {
            est - (est - late) / 64
        };
    }
}

fn duration_ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
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
        let mut p = Pacer::new(1_000);
        let start = Instant::now() - Duration::from_secs(1);
        // Message 10 was due 990 ms ago: no wait, and the due time is the scheduled one.
        assert_eq!(p.wait_for(start, 10), start + Duration::from_millis(10));
    }

    fn settle(margin: &mut WakeMargin, late_us: u64, n: usize) {
        for _ in 0..n {
            margin.observe(Duration::from_micros(late_us));
        }
    }

    #[test]
    fn the_margin_learns_how_late_wake_ups_are() {
        let mut m = WakeMargin::default();
        assert_eq!(m.get(), MIN_MARGIN);
        settle(&mut m, 36, 200);
        let got = m.get().as_micros();
        assert!(
            (39..=41).contains(&got),
            "margin {got} µs for 36 µs wake-ups"
        );
    }

    #[test]
    fn the_margin_never_goes_below_its_floor() {
        let mut m = WakeMargin::default();
        settle(&mut m, 0, 1_000);
        assert_eq!(m.get(), MIN_MARGIN);
    }

    #[test]
    fn the_margin_settles_near_a_high_quantile() {
        // Eight wake-ups 30 µs late for every one 60 µs late: the estimate stays between
        // them, near the upper end.
        let mut m = WakeMargin::default();
        for _ in 0..200 {
            settle(&mut m, 30, 8);
            m.observe(Duration::from_micros(60));
        }
        let got = m.get().as_micros();
        assert!((40..=60).contains(&got), "margin {got} µs");
    }

    #[test]
    fn a_margin_as_wide_as_the_gap_comes_back_down() {
        // Wake-ups 200 µs late have pushed the margin to its cap. Each message below is due
        // 10 µs after a fresh start, inside the margin, so the pacer never sleeps and
        // measures nothing (and no real wake-up can push the margin back up); the margin
        // must fall anyway rather than keep it yielding for the rest of the run. A fresh
        // start per message keeps a descheduled test thread from arriving past every due
        // time, where there is nothing to wait for.
        let mut p = Pacer::new(100_000);
        settle(&mut p.margin, 200, 100);
        assert_eq!(p.margin.get(), MAX_MARGIN);
        for _ in 0..2_000 {
            p.wait_for(Instant::now(), 1);
        }
        assert!(
            p.margin.get() < Duration::from_micros(100),
            "margin {:?} after 2,000 gaps",
            p.margin.get()
        );
    }

    #[test]
    fn one_long_stall_is_capped_and_forgotten() {
        let mut m = WakeMargin::default();
        settle(&mut m, 36, 200);
        m.observe(Duration::from_millis(50));
        assert!(m.get() <= MAX_MARGIN);
        settle(&mut m, 36, 400);
        assert!(
            m.get().as_micros() <= 42,
            "margin {:?} after the stall",
            m.get()
        );
    }
}
