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
    /// How long after the last write we send a heartbeat; `None` for never.
    send_every: Option<Duration>,
    /// How long the peer may be silent before it is taken for gone; `None` for ever.
    silent_after: Option<Duration>,
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
            send_every: None,
            silent_after: None,
            last_read: now,
            next_heartbeat: now,
            closing_since: None,
            finished_at: None,
        }
    }

    /// Heartbeats of `heartbeat` seconds (0-10, 0-9-1): ours half an interval after the last
    /// write, the peer gone after two silent intervals.
    pub fn open(&mut self, now: Instant, heartbeat: u16) {
        let interval = (heartbeat > 0).then(|| Duration::from_secs(u64::from(heartbeat)));
        self.idle(now, interval.map(|i| i / 2), interval.map(|i| i * 2));
    }

    /// Heartbeats with the two directions set apart (AMQP 1.0's idle-time-out: each peer
    /// says how long it waits, and the other sends at least twice as often).
    pub fn idle(
        &mut self,
        now: Instant,
        send_every: Option<Duration>,
        silent_after: Option<Duration>,
    ) {
        self.send_every = send_every.filter(|d| !d.is_zero());
        self.silent_after = silent_after.filter(|d| !d.is_zero());
        self.last_read = now;
        self.wrote(now);
    }

    pub fn read(&mut self, now: Instant) {
        self.last_read = now;
    }

    pub fn wrote(&mut self, now: Instant) {
        if let Some(every) = self.send_every {
            self.next_heartbeat = now + every;
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
                let heartbeat = self.send_every.map(|_| self.next_heartbeat);
                let silence = self
                    .silent_after
                    .filter(|_| !flow_blocked)
                    .map(|after| self.last_read + after);
                match (heartbeat, silence) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                }
            }
            _ => Some(self.handshake_deadline),
        }
    }

    pub fn handshake_over(&self, now: Instant) -> bool {
        now >= self.handshake_deadline
    }

    pub fn heartbeat_due(&self, now: Instant) -> bool {
        self.send_every.is_some() && now >= self.next_heartbeat
    }

    /// Silent for longer than allowed (two heartbeat intervals): the peer is gone.
    pub fn peer_silent(&self, now: Instant) -> bool {
        self.silent_after
            .is_some_and(|after| now >= self.last_read + after)
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
    fn idle_timeouts_set_each_direction_apart() {
        let t0 = Instant::now();
        let mut t = Timers::new(t0, 10 * S);
        // We send every 5 s; the peer may be silent for 3 s.
        t.idle(t0, Some(5 * S), Some(3 * S));
        assert_eq!(t.next(Phase::Open, false), Some(t0 + 3 * S));
        assert!(t.peer_silent(t0 + 3 * S) && !t.heartbeat_due(t0 + 3 * S));
        t.read(t0 + 2 * S);
        assert_eq!(t.next(Phase::Open, false), Some(t0 + 5 * S));
        assert!(t.heartbeat_due(t0 + 5 * S));
        // Either direction may be off.
        t.idle(t0, None, Some(4 * S));
        assert_eq!(t.next(Phase::Open, false), Some(t0 + 4 * S));
        assert!(!t.heartbeat_due(t0 + 100 * S));
        t.idle(t0, Some(S), None);
        assert_eq!(t.next(Phase::Open, true), Some(t0 + S));
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
