use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use crate::driver::DriverError;
use crate::stats::{LatencyRecorder, Pacer};

/// How long the receiver waits in one call before checking the clock and its limits.
const POLL: Duration = Duration::from_millis(50);
/// After the sender finishes, how long to wait for stragglers before calling them lost.
pub const DEFAULT_DRAIN_GRACE: Duration = Duration::from_secs(5);

/// Send times carried by each message, nanoseconds since the run's start on the sender's
/// clock: when it was due by the schedule, and when it was actually handed to the sender.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    pub intended_ns: u64,
    pub sent_ns: u64,
}

impl Stamp {
    /// Bytes `encode` writes, for transports that carry the stamp in the body.
    pub const LEN: usize = 16;

    /// Writes the stamp into the first `LEN` bytes; false when `buf` is too short.
    pub fn encode(&self, buf: &mut [u8]) -> bool {
        let Some(dst) = buf.get_mut(..Self::LEN) else {
            return false;
        };
        dst[..8].copy_from_slice(&self.intended_ns.to_le_bytes());
        dst[8..].copy_from_slice(&self.sent_ns.to_le_bytes());
        true
    }

    pub fn decode(buf: &[u8]) -> Option<Stamp> {
        let intended = buf.get(..8)?.try_into().ok()?;
        let sent = buf.get(8..16)?.try_into().ok()?;
        Some(Stamp {
            intended_ns: u64::from_le_bytes(intended),
            sent_ns: u64::from_le_bytes(sent),
        })
    }
}

/// Sends one stamped message per call (to the test queue, for the AMQP client).
pub trait LatencySender: Send {
    fn send(&mut self, stamp: Stamp) -> Result<(), DriverError>;
    /// Waits until everything sent is completed by the peer.
    fn sync(&mut self) -> Result<(), DriverError>;
}

/// Receives the next message's stamp, or None when `timeout` passes without one.
pub trait LatencyReceiver {
    fn receive(&mut self, timeout: Duration) -> Result<Option<Stamp>, DriverError>;

    /// Sends the acknowledgement that the message `receive` last returned made due. The
    /// runner calls it after reading that message's receive time, as qpid-latency-test
    /// times a message before its subscription acknowledges it. Written first, an
    /// acknowledgement wakes the broker, which the kernel may run on this CPU at once,
    /// so the message would be charged the broker's handling of the acknowledgement and
    /// of whatever else had reached it by then (traced: +100 µs for one message in 50).
    fn acknowledge(&mut self) -> Result<(), DriverError> {
        Ok(())
    }
}

/// The bounds and reporting of one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunLimits {
    /// Stop after this many messages.
    pub count: u64,
    /// Messages per second; 0 is back-to-back.
    pub rate: u64,
    /// Stop sending after this long.
    pub time_limit: Option<Duration>,
    /// Interval between min/avg/max lines (printed only with a rate).
    pub report_every: Duration,
    /// Sync after every message.
    pub sync_each: bool,
    pub csv: bool,
    /// After the last send, how long missing messages are waited for before the run fails.
    pub drain_grace: Duration,
    /// Keep every message's times ([`LatencyRun::samples`]), not only the histograms.
    pub keep_samples: bool,
}

/// What a run saw.
#[derive(Debug, Clone)]
pub struct LatencyRun {
    pub sent: u64,
    pub received: u64,
    pub elapsed: Duration,
    pub recorder: LatencyRecorder,
    /// Every message's stamp and receive time (ns since `start`), in arrival order, when
    /// [`RunLimits::keep_samples`] asked for them.
    pub samples: Vec<Sample>,
    /// The run's start on CLOCK_MONOTONIC, in ns (what `perf record -k mono` stamps with).
    pub start_monotonic_ns: u64,
}

/// One message's times, ns since the run's start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    pub stamp: Stamp,
    pub received_ns: u64,
}

/// CLOCK_MONOTONIC now, in ns: the clock `Instant` reads on Linux.
fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes only into `ts`, which lives for the call.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64).saturating_mul(1_000_000_000) + ts.tv_nsec as u64
}

fn ns_since(start: Instant, t: Instant) -> u64 {
    u64::try_from(t.saturating_duration_since(start).as_nanos()).unwrap_or(u64::MAX)
}

/// Sends on a thread of its own while this thread receives, records and reports to `out`.
/// Fails if the sender fails or messages are still missing `drain_grace` after the last
/// was sent.
pub fn run_latency<S: LatencySender, R: LatencyReceiver>(
    limits: &RunLimits,
    mut sender: S,
    receiver: &mut R,
    out: &mut dyn Write,
) -> Result<LatencyRun, DriverError> {
    let start = Instant::now();
    let start_monotonic_ns = monotonic_ns();
    let sent = AtomicU64::new(0);
    let done = AtomicBool::new(false);
    let stop = AtomicBool::new(false);
    let pacer = Pacer::new(limits.rate);

    thread::scope(|scope| {
        let sending = scope.spawn(|| {
            let result = send_loop(limits, pacer, start, &mut sender, &sent, &stop);
            done.store(true, Ordering::Release);
            result
        });

        let mut recorder = LatencyRecorder::new();
        let mut samples = Vec::new();
        let received = receive_loop(
            limits,
            start,
            receiver,
            (&mut recorder, &mut samples),
            &sent,
            &done,
            out,
        );
        if received.is_err() {
            stop.store(true, Ordering::Release);
        }
        let send_result = sending.join().map_err(|_| DriverError::WorkerPanicked)?;
        let received = received?;
        send_result?;
        let elapsed = start.elapsed();
        let total = sent.load(Ordering::Acquire);
        if received < total {
            return Err(DriverError::Timeout(format!(
                "{} of {total} messages",
                total - received
            )));
        }
        write_final(limits, received, elapsed, &recorder, out);
        Ok(LatencyRun {
            sent: total,
            received,
            elapsed,
            recorder,
            samples,
            start_monotonic_ns,
        })
    })
}

fn send_loop<S: LatencySender>(
    limits: &RunLimits,
    mut pacer: Pacer,
    start: Instant,
    sender: &mut S,
    sent: &AtomicU64,
    stop: &AtomicBool,
) -> Result<(), DriverError> {
    let deadline = limits.time_limit.map(|t| start + t);
    for i in 0..limits.count {
        if stop.load(Ordering::Acquire) {
            break;
        }
        let due = pacer.wait_for(start, i);
        let now = Instant::now();
        if deadline.is_some_and(|d| now >= d) {
            break;
        }
        sender.send(Stamp {
            intended_ns: ns_since(start, due),
            sent_ns: ns_since(start, now),
        })?;
        sent.fetch_add(1, Ordering::Release);
        if limits.sync_each {
            sender.sync()?;
        }
    }
    sender.sync()
}

fn receive_loop<R: LatencyReceiver>(
    limits: &RunLimits,
    start: Instant,
    receiver: &mut R,
    (recorder, samples): (&mut LatencyRecorder, &mut Vec<Sample>),
    sent: &AtomicU64,
    done: &AtomicBool,
    out: &mut dyn Write,
) -> Result<u64, DriverError> {
    let mut received = 0u64;
    let mut next_report = start + limits.report_every;
    let mut done_at: Option<Instant> = None;
    loop {
        if let Some(stamp) = receiver.receive(POLL)? {
            let received_ns = ns_since(start, Instant::now());
            recorder.record(stamp.intended_ns, stamp.sent_ns, received_ns);
            if limits.keep_samples {
                samples.push(Sample { stamp, received_ns });
            }
            received += 1;
            receiver.acknowledge()?;
        }
        let now = Instant::now();
        if limits.rate > 0 && now >= next_report {
            let interval = recorder.take_interval();
            let line = if limits.csv {
                interval.csv_line(limits.rate)
            } else {
                interval.text_line()
            };
            let _ = writeln!(out, "{line}");
            next_report += limits.report_every;
        }
        if done.load(Ordering::Acquire) {
            if received >= sent.load(Ordering::Acquire) {
                return Ok(received);
            }
            let since = *done_at.get_or_insert(now);
            if now.duration_since(since) > limits.drain_grace {
                return Ok(received);
            }
        }
    }
}

fn write_final(
    limits: &RunLimits,
    received: u64,
    elapsed: Duration,
    recorder: &LatencyRecorder,
    out: &mut dyn Write,
) {
    let summary = recorder.summary();
    let ms = elapsed.as_secs_f64() * 1000.0;
    let _ = if limits.csv {
        let value = if limits.rate > 0 {
            limits.rate
        } else {
            received
        };
        let p = summary.corrected;
        writeln!(
            out,
            "{value},{:.4},{:.4},{:.4},{:.4},{:.4},{:.4},{:.4}",
            crate::stats::ns_to_ms(p.min_ns),
            crate::stats::ns_to_ms(p.max_ns),
            p.mean_ns / 1e6,
            crate::stats::ns_to_ms(p.p50_ns),
            crate::stats::ns_to_ms(p.p90_ns),
            crate::stats::ns_to_ms(p.p99_ns),
            crate::stats::ns_to_ms(p.p999_ns),
        )
    } else {
        writeln!(
            out,
            "Sent {received} msgs in {ms:.0}ms ({:.0} msgs/s)\n{}",
            received as f64 * 1000.0 / ms.max(f64::MIN_POSITIVE),
            summary.text(limits.rate > 0)
        )
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    struct ChanSender {
        tx: mpsc::Sender<Stamp>,
        fail_at: Option<u64>,
        n: u64,
    }

    impl LatencySender for ChanSender {
        fn send(&mut self, stamp: Stamp) -> Result<(), DriverError> {
            self.n += 1;
            if Some(self.n) == self.fail_at {
                return Err(DriverError::Connection("reset".into()));
            }
            self.tx
                .send(stamp)
                .map_err(|e| DriverError::Connection(e.to_string()))
        }
        fn sync(&mut self) -> Result<(), DriverError> {
            Ok(())
        }
    }

    struct ChanReceiver {
        rx: mpsc::Receiver<Stamp>,
        drop_every: u64,
        n: u64,
    }

    impl LatencyReceiver for ChanReceiver {
        fn receive(&mut self, timeout: Duration) -> Result<Option<Stamp>, DriverError> {
            loop {
                match self.rx.recv_timeout(timeout) {
                    Ok(s) => {
                        self.n += 1;
                        if self.drop_every > 0 && self.n % self.drop_every == 0 {
                            continue;
                        }
                        return Ok(Some(s));
                    }
                    Err(_) => return Ok(None),
                }
            }
        }
    }

    /// Holds the CPU for `ack` in `acknowledge`, as an acknowledgement that wakes the
    /// broker onto the receiver's CPU can.
    struct SlowAckReceiver {
        inner: ChanReceiver,
        ack: Duration,
    }

    impl LatencyReceiver for SlowAckReceiver {
        fn receive(&mut self, timeout: Duration) -> Result<Option<Stamp>, DriverError> {
            self.inner.receive(timeout)
        }

        fn acknowledge(&mut self) -> Result<(), DriverError> {
            let until = Instant::now() + self.ack;
            while Instant::now() < until {
                std::hint::spin_loop();
            }
            Ok(())
        }
    }

    fn pair(fail_at: Option<u64>, drop_every: u64) -> (ChanSender, ChanReceiver) {
        let (tx, rx) = mpsc::channel();
        (
            ChanSender { tx, fail_at, n: 0 },
            ChanReceiver {
                rx,
                drop_every,
                n: 0,
            },
        )
    }

    fn limits(count: u64, rate: u64) -> RunLimits {
        RunLimits {
            count,
            rate,
            time_limit: Some(Duration::from_secs(30)),
            report_every: Duration::from_millis(1000),
            sync_each: false,
            csv: true,
            drain_grace: Duration::from_millis(200),
            keep_samples: false,
        }
    }

    #[test]
    fn stamp_round_trip() {
        let s = Stamp {
            intended_ns: 7,
            sent_ns: u64::MAX,
        };
        let mut buf = [0u8; 20];
        assert!(s.encode(&mut buf));
        assert_eq!(Stamp::decode(&buf), Some(s));
        assert!(!s.encode(&mut [0u8; 15]));
        assert_eq!(Stamp::decode(&buf[..15]), None);
    }

    #[test]
    fn every_message_is_recorded() {
        let (s, mut r) = pair(None, 0);
        let mut out = Vec::new();
        let run = run_latency(&limits(2_000, 0), s, &mut r, &mut out).unwrap();
        assert_eq!(
            (run.sent, run.received, run.recorder.count()),
            (2_000, 2_000, 2_000)
        );
        let out = String::from_utf8(out).unwrap();
        assert!(out.starts_with("2000,"), "{out}");
        assert_eq!(out.trim().split(',').count(), 8);
    }

    #[test]
    fn paced_run_follows_the_schedule() {
        let (s, mut r) = pair(None, 0);
        let mut out = Vec::new();
        let run = run_latency(&limits(50, 10_000), s, &mut r, &mut out).unwrap();
        assert_eq!(run.received, 50);
        // 50 messages at 10 000/s: the last is due 4.9 ms after the start.
        assert!(run.elapsed >= Duration::from_micros(4_900));
    }

    #[test]
    fn a_message_is_timed_before_it_is_acknowledged() {
        let (s, r) = pair(None, 0);
        let ack = Duration::from_millis(5);
        let mut r = SlowAckReceiver { inner: r, ack };
        // 20 ms apart, so each acknowledgement ends long before the next message is sent.
        let run = run_latency(&limits(10, 50), s, &mut r, &mut Vec::new()).unwrap();
        assert_eq!(run.received, 10);
        // Timed after the acknowledgement, every message would take at least `ack`; timed
        // before it, only a thread descheduled for 5 ms at each of the 10 would.
        let fastest = Duration::from_nanos(run.recorder.summary().uncorrected.min_ns);
        assert!(fastest < ack, "fastest message took {fastest:?}");
    }

    #[test]
    fn sender_failure_is_reported() {
        let (s, mut r) = pair(Some(10), 0);
        let err = run_latency(&limits(100, 0), s, &mut r, &mut Vec::new()).unwrap_err();
        assert!(matches!(err, DriverError::Connection(_)));
    }

    #[test]
    fn lost_messages_fail_the_run() {
        let (s, mut r) = pair(None, 10);
        let err = run_latency(&limits(100, 0), s, &mut r, &mut Vec::new()).unwrap_err();
        assert!(matches!(err, DriverError::Timeout(m) if m == "10 of 100 messages"));
    }
}
