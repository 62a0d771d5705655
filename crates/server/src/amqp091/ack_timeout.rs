//! RabbitMQ's consumer timeout for one connection: which timeout a delivery waits under, and
//! when the connection's channels are next checked against it.
//!
//! As in RabbitMQ, a consumer's `x-consumer-timeout` argument comes first, then its queue's
//! `x-consumer-timeout` argument, then the broker's `--consumer-timeout`. Milliseconds;
//! ferryd reads 0 as "no timeout", as it reads `--consumer-timeout 0`.

use std::time::{Duration, Instant};

use ferry_core::{Arguments, HeaderValue, Queue};

use super::error::Fault;

pub const ARGUMENT: &str = "x-consumer-timeout";

/// A timeout argument as a client gives it: a non-negative integer of milliseconds (406
/// otherwise, as RabbitMQ refuses a bad queue argument). `Ok(None)`: no argument.
pub fn argument(args: &Arguments) -> Result<Option<Option<Duration>>, Fault> {
    match args.get(ARGUMENT) {
        None => Ok(None),
        Some(HeaderValue::Int(ms)) if *ms >= 0 => Ok(Some(from_millis(*ms as u64))),
        Some(HeaderValue::UInt(ms)) => Ok(Some(from_millis(*ms))),
        Some(v) => Err(Fault::precondition(format!(
            "invalid arg '{ARGUMENT}': {} is not a non-negative integer",
            v.brief()
        ))),
    }
}

fn from_millis(ms: u64) -> Option<Duration> {
    (ms > 0).then(|| Duration::from_millis(ms))
}

/// The timeout for deliveries from `queue` to a consumer without an argument of its own
/// (and for basic.get): the queue's argument, else the broker's. A queue declared over
/// another protocol may carry the argument as a decimal string, which is accepted.
pub fn for_queue(queue: &Queue, broker_default: Option<Duration>) -> Option<Duration> {
    match queue.arguments().get(ARGUMENT).map(HeaderValue::as_u64) {
        Some(Some(ms)) => from_millis(ms),
        // Unreadable (not declared over 0-9-1, which refuses it): as if absent.
        Some(None) | None => broker_default,
    }
}

/// When the connection's channels are next compared with their timeouts. The checks run
/// every tenth of the shortest timeout the connection has used, between 100 ms and a
/// minute, so a delivery times out at most two intervals late (the first check after it
/// marks it; a timeout need not be a whole number of intervals).
#[derive(Debug)]
pub struct AckChecks {
    shortest: Option<Duration>,
    next: Option<Instant>,
}

impl AckChecks {
    pub fn new(broker_default: Option<Duration>, now: Instant) -> Self {
        AckChecks {
            shortest: broker_default,
            next: broker_default.map(|t| now + interval(t)),
        }
    }

    pub fn next(&self) -> Option<Instant> {
        self.next
    }

    /// A consumer (or a get) whose deliveries wait under `timeout`: a timeout shorter than
    /// any before brings the checks forward.
    pub fn in_use(&mut self, timeout: Option<Duration>, now: Instant) {
        let Some(timeout) = timeout else { return };
        if self.shortest.is_some_and(|s| s <= timeout) {
            return;
        }
        self.shortest = Some(timeout);
        let sooner = now + interval(timeout);
        self.next = Some(self.next.map_or(sooner, |next| next.min(sooner)));
    }

    /// A check ran at `now`: the next one is an interval later.
    pub fn checked(&mut self, now: Instant) {
        self.next = self.shortest.map(|t| now + interval(t));
    }
}

fn interval(timeout: Duration) -> Duration {
    (timeout / 10).clamp(Duration::from_millis(100), Duration::from_secs(60))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(v: HeaderValue) -> Arguments {
        ferry_core::Headers(vec![(ARGUMENT.to_owned(), v)])
    }

    #[test]
    fn arguments_are_non_negative_integers_and_zero_means_none() {
        assert_eq!(argument(&Arguments::default()), Ok(None));
        assert_eq!(
            argument(&args(HeaderValue::Int(1500))),
            Ok(Some(Some(Duration::from_millis(1500))))
        );
        assert_eq!(
            argument(&args(HeaderValue::UInt(7))),
            Ok(Some(Some(Duration::from_millis(7))))
        );
        assert_eq!(argument(&args(HeaderValue::Int(0))), Ok(Some(None)));
        for bad in [HeaderValue::Int(-1), HeaderValue::Str("1000".into())] {
            let e = argument(&args(bad)).unwrap_err();
            assert_eq!(e.code, ferry_amqp091::reply::PRECONDITION_FAILED);
        }
    }

    #[test]
    fn a_shorter_timeout_brings_the_next_check_forward_and_a_longer_one_does_not() {
        let t0 = Instant::now();
        let mut checks = AckChecks::new(Some(Duration::from_secs(1800)), t0);
        assert_eq!(checks.next(), Some(t0 + Duration::from_secs(60)));
        checks.in_use(Some(Duration::from_secs(3600)), t0);
        checks.in_use(None, t0);
        assert_eq!(checks.next(), Some(t0 + Duration::from_secs(60)));
        let t1 = t0 + Duration::from_secs(5);
        checks.in_use(Some(Duration::from_secs(2)), t1);
        assert_eq!(checks.next(), Some(t1 + Duration::from_millis(200)));
        let t2 = t1 + Duration::from_secs(1);
        checks.checked(t2);
        assert_eq!(checks.next(), Some(t2 + Duration::from_millis(200)));
    }

    #[test]
    fn without_any_timeout_nothing_is_checked_until_one_is_used() {
        let t0 = Instant::now();
        let mut checks = AckChecks::new(None, t0);
        assert_eq!(checks.next(), None);
        checks.checked(t0);
        assert_eq!(checks.next(), None);
        checks.in_use(Some(Duration::from_millis(50)), t0);
        assert_eq!(checks.next(), Some(t0 + Duration::from_millis(100)));
    }
}
