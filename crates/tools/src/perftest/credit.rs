/// Message credit for one subscriber's iteration, granted a window at a time.
///
/// qpid-perftest grants a subscriber its whole quota at once, so each subscriber on a shared
/// queue takes exactly its share. Granting it all up front lets a broker run arbitrarily far
/// ahead of the subscriber, and Apache Qpid Broker-J cannot take that: while a consumer has
/// credit and the socket drains, its I/O thread keeps sending without reading, so it never
/// sees the subscriber's `session.completed` and fails the session once 65,536 transfers are
/// uncompleted ("Command buffer full"). So the quota is granted in steps: at most `window`
/// messages ahead of what the subscriber has taken, topped up by half a window at a time.
/// The total granted is still exactly the quota.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CreditWindow {
    window: u64,
    quota: u64,
    granted: u64,
    taken: u64,
}

impl CreditWindow {
    /// Default window: far below Broker-J's 65,536, and large enough that top-ups (one
    /// `message.flow` per half window) cost nothing measurable.
    pub const DEFAULT: u32 = 20_000;

    pub fn new(window: u32) -> Self {
        CreditWindow {
            window: u64::from(window.max(2)),
            quota: 0,
            granted: 0,
            taken: 0,
        }
    }

    /// Starts an iteration of `quota` messages; returns the credit to grant first.
    pub fn start(&mut self, quota: u64) -> u32 {
        self.quota = quota;
        self.taken = 0;
        self.granted = quota.min(self.window);
        to_u32(self.granted)
    }

    /// Records one message taken; returns credit to grant now, if any.
    pub fn take(&mut self) -> Option<u32> {
        self.taken += 1;
        let ahead = self.granted.saturating_sub(self.taken);
        let left = self.quota.saturating_sub(self.granted);
        if left == 0 || ahead > self.window / 2 {
            return None;
        }
        let more = left.min(self.window - ahead);
        self.granted += more;
        Some(to_u32(more))
    }

    pub fn granted(&self) -> u64 {
        self.granted
    }

    pub fn taken(&self) -> u64 {
        self.taken
    }

    pub fn quota(&self) -> u64 {
        self.quota
    }
}

fn to_u32(v: u64) -> u32 {
    u32::try_from(v).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_quotas_are_granted_at_once() {
        let mut c = CreditWindow::new(100);
        assert_eq!(c.start(40), 40);
        assert!((0..40).all(|_| c.take().is_none()));
        assert_eq!(c.granted(), 40);
    }

    #[test]
    fn large_quotas_are_granted_a_window_ahead_and_total_exactly_the_quota() {
        let mut c = CreditWindow::new(100);
        assert_eq!(c.start(1_001), 100);
        let mut total = 100u64;
        let mut most_ahead = 0;
        for taken in 1..=1_001u64 {
            if let Some(more) = c.take() {
                total += u64::from(more);
            }
            // Never more than a window ahead of the subscriber, never behind it.
            let ahead = c.granted() - taken;
            most_ahead = most_ahead.max(ahead);
            assert!(ahead <= 100, "{ahead} ahead after {taken}");
            assert!(c.granted() >= taken);
        }
        assert_eq!(total, 1_001);
        assert_eq!(most_ahead, 100);
    }

    #[test]
    fn top_ups_come_by_half_windows() {
        let mut c = CreditWindow::new(100);
        c.start(10_000);
        let grants: Vec<u32> = (0..200).filter_map(|_| c.take()).collect();
        // Taken 50, 100, 150, 200: each time half a window is refilled.
        assert_eq!(grants, vec![50, 50, 50, 50]);
    }

    #[test]
    fn each_iteration_starts_over() {
        let mut c = CreditWindow::new(10);
        c.start(15);
        (0..15).for_each(|_| {
            c.take();
        });
        assert_eq!(c.granted(), 15);
        assert_eq!(c.start(15), 10);
    }
}
