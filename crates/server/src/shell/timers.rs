//! A connection's deadlines: finishing the handshake, heartbeats both ways, waiting for
//! close-ok, and lingering after the end. Pure bookkeeping over times the caller supplies.

use std::time::{Duration, Instant};

use super::Phase;

/// How long a connection waits for the peer's close-ok after sending its close.
pub const CLOSE_GRACE: Duration = Duration::from_secs(2);
/// How long a finished connection keeps reading (and discarding) what the peer still sends,
/// waiting for it to close its side.
pub const LINGER: Duration = Duration::from_secs(2);

#[derive(Debug, Clone)]
pub struct Timers {
    handshake_deadline: Instant,
    /// Negotiated heartbeat in seconds; 0 for none.
    heartbeat: u16,
    last_read: Instant,
    /// We write a heartbeat if nothing else went out by then: half an interval after the
    /// last write, as RabbitMQ does, so the peer never sees a whole interval of silence.
    next_heartbeat: Instant,
    closing_since: Option<Instant>,
    finished_at: Option<Instant>,
}

impl Timers {
    pub fn new(now: Instant, handshake_timeout: Duration) -> Timers {
        Timers {
            handshake_deadline: now + handshake_timeout,
            heartbeat: 0,
            last_read: now,
            next_heartbeat: now,
            closing_since: None,
            finished_at: None,
        }
    }

    fn interval(&self) -> Option<Duration> {
        (self.heartbeat > 0).then(|| Duration::from_secs(u64::from(self.heartbeat)))
    }

    pub fn open(&mut self, now: Instant, heartbeat: u16) {
        self.heartbeat = heartbeat;
        self.last_read = now;
        self.wrote(now);
    }

    pub fn read(&mut self, now: Instant) {
        self.last_read = now;
    }

    pub fn wrote(&mut self, now: Instant) {
        if let Some(interval) = self.interval() {
            self.next_heartbeat = now + interval / 2;
        }
    }

    pub fn closing(&mut self, now: Instant) {
        self.closing_since.get_or_insert(now);
    }

    pub fn finished(&mut self, now: Instant) {
        self.finished_at.get_or_insert(now);
    }

    /// The next deadline that matters in `phase`.
    pub fn next(&self, phase: Phase, flow_blocked: bool) -> Option<Instant> {
        match phase {
            Phase::Finished => self.finished_at.map(|at| at + LINGER),
            Phase::Closing => self.closing_since.map(|at| at + CLOSE_GRACE),
            Phase::Open => {
                let interval = self.interval()?;
                let silence = (!flow_blocked).then(|| self.last_read + interval * 2);
                Some(silence.map_or(self.next_heartbeat, |s| s.min(self.next_heartbeat)))
            }
            _ => Some(self.handshake_deadline),
        }
    }

    pub fn handshake_over(&self, now: Instant) -> bool {
        now >= self.handshake_deadline
    }

    pub fn heartbeat_due(&self, now: Instant) -> bool {
        self.interval().is_some() && now >= self.next_heartbeat
    }

    /// Two intervals without a byte from the peer: it is gone.
    pub fn peer_silent(&self, now: Instant) -> bool {
        self.interval()
            .is_some_and(|interval| now >= self.last_read + interval * 2)
    }

    pub fn close_grace_over(&self, now: Instant) -> bool {
        self.closing_since.is_some_and(|at| now >= at + CLOSE_GRACE)
    }

    pub fn linger_over(&self, now: Instant) -> bool {
        self.finished_at.is_some_and(|at| now >= at + LINGER)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn heartbeats_fall_due_half_an_interval_after_the_last_write() {
        let t0 = Instant::now();
        let mut t = Timers::new(t0, 10 * S);
        t.open(t0, 4);
        assert_eq!(t.next(Phase::Open, false), Some(t0 + 2 * S));
        assert!(!t.heartbeat_due(t0 + S));
        assert!(t.heartbeat_due(t0 + 2 * S));
        // A write pushes it back; a read does not.
        t.wrote(t0 + 3 * S);
        t.read(t0 + 3 * S);
        assert_eq!(t.next(Phase::Open, false), Some(t0 + 5 * S));
    }

    #[test]
    fn two_silent_intervals_mean_the_peer_is_gone_unless_we_stopped_reading() {
        let t0 = Instant::now();
        let mut t = Timers::new(t0, 10 * S);
        t.open(t0, 1);
        t.wrote(t0 + 5 * S);
        assert!(t.peer_silent(t0 + 2 * S));
        assert!(!t.peer_silent(t0 + S));
        // An alarm stopped reading: only the heartbeat we owe is a deadline.
        assert_eq!(t.next(Phase::Open, true), Some(t0 + 5 * S + S / 2));
        assert_eq!(t.next(Phase::Open, false), Some(t0 + 2 * S));
    }

    #[test]
    fn without_heartbeats_an_open_connection_has_no_deadline() {
        let t0 = Instant::now();
        let mut t = Timers::new(t0, 10 * S);
        assert_eq!(t.next(Phase::AwaitStartOk, false), Some(t0 + 10 * S));
        t.open(t0 + S, 0);
        assert_eq!(t.next(Phase::Open, false), None);
        assert!(!t.heartbeat_due(t0 + 100 * S));
        assert!(!t.peer_silent(t0 + 100 * S));
    }

    #[test]
    fn closing_and_lingering_are_bounded() {
        let t0 = Instant::now();
        let mut t = Timers::new(t0, 10 * S);
        t.closing(t0);
        t.closing(t0 + S);
        assert_eq!(t.next(Phase::Closing, false), Some(t0 + CLOSE_GRACE));
        assert!(t.close_grace_over(t0 + CLOSE_GRACE));
        t.finished(t0 + S);
        assert_eq!(t.next(Phase::Finished, false), Some(t0 + S + LINGER));
        assert!(!t.linger_over(t0 + S));
        assert!(t.linger_over(t0 + S + LINGER));
    }
}
