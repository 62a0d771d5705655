use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread::{self, JoinHandle};
use std::time::Instant;

use super::report::LatencyRow;
use super::serve;
use super::wire::{configure, Hello, Kind};
use super::PingpongOpts;
use crate::error::{IoContext, ToolError};
use crate::stats::{LatencyRecorder, Pacer};

#[derive(Debug, Clone)]
pub struct PingpongResult {
    pub row: LatencyRow,
    pub recorder: LatencyRecorder,
}

/// The server end: an in-process one, or `--connect`'s address.
pub(super) type Server = Option<JoinHandle<Result<(), ToolError>>>;

pub(super) fn far_end(
    connect: Option<&str>,
    nodelay: bool,
) -> Result<(TcpStream, Server), ToolError> {
    match connect {
        Some(addr) => {
            let s = TcpStream::connect(addr).ctx(&format!("connecting to {addr}"))?;
            Ok((s, None))
        }
        None => {
            let (addr, handle): (SocketAddr, _) = serve::spawn_one(nodelay)?;
            let s = TcpStream::connect(addr).ctx("connecting to the in-process server")?;
            Ok((s, Some(handle)))
        }
    }
}

pub(super) fn join_server(server: Server) -> Result<(), ToolError> {
    match server {
        Some(h) => h
            .join()
            .map_err(|_| ToolError::WorkerPanicked("netbench server"))?,
        None => Ok(()),
    }
}

fn ns_since(start: Instant, t: Instant) -> u64 {
    u64::try_from(t.saturating_duration_since(start).as_nanos()).unwrap_or(u64::MAX)
}

/// One message out, its echo back; each round trip is one sample. Back-to-back (no rate) the
/// next message goes as soon as the echo is in. With a rate, messages go out on a fixed
/// schedule from one thread while this one reads the echoes (open loop, as the broker
/// latency test runs), and each is charged from its due time: a late echo then delays only
/// the messages in flight with it, not every later round trip, which in a closed loop
/// would each inherit the stall until the schedule caught up.
pub fn run_pingpong(o: &PingpongOpts) -> Result<PingpongResult, ToolError> {
    let c = &o.common;
    let (mut s, server) = far_end(o.connect.as_deref(), c.tcp_nodelay)?;
    configure(&s, c.tcp_nodelay, c.io_timeout())?;
    let total = o.warmup.saturating_add(c.count);
    Hello {
        kind: Kind::Echo,
        size: c.size,
        count: total,
    }
    .write_to(&mut s)?;

    let out = vec![0xA5u8; c.size as usize];
    let mut back = vec![0u8; c.size as usize];
    let deadline = Instant::now() + c.time_limit();
    let mut round_trip = |s: &mut TcpStream| -> Result<(), ToolError> {
        s.write_all(&out).ctx("pingpong write")?;
        s.read_exact(&mut back).ctx("pingpong read")
    };
    for _ in 0..o.warmup {
        if Instant::now() >= deadline {
            break;
        }
        round_trip(&mut s)?;
    }

    let recorder = if o.rate == 0 {
        back_to_back(&mut s, c.count, deadline, &mut round_trip)?
    } else {
        paced(&s, o.rate, c.count, deadline, &out, &mut back)?
    };
    // Closing tells a server expecting more round trips that the run stopped early.
    drop(s);
    join_server(server)?;
    Ok(PingpongResult {
        row: LatencyRow {
            test: "pingpong",
            size: c.size,
            rate: o.rate,
            nodelay: c.tcp_nodelay,
            summary: recorder.summary(),
        },
        recorder,
    })
}

fn back_to_back(
    s: &mut TcpStream,
    count: u64,
    deadline: Instant,
    round_trip: &mut impl FnMut(&mut TcpStream) -> Result<(), ToolError>,
) -> Result<LatencyRecorder, ToolError> {
    let mut recorder = LatencyRecorder::new();
    let start = Instant::now();
    for _ in 0..count {
        let sent = Instant::now();
        if sent >= deadline {
            break;
        }
        round_trip(s)?;
        recorder.record_unpaced(ns_since(start, sent), ns_since(start, Instant::now()));
    }
    Ok(recorder)
}

/// Open-loop round trips at `rate`: a writer thread sends message `i` when it is due and
/// notes when it really went; echoes come back in order on the stream, so the reader
/// knows which message each one answers without a stamp in the body (8-byte messages have
/// no room for one).
fn paced(
    s: &TcpStream,
    rate: u64,
    count: u64,
    deadline: Instant,
    out: &[u8],
    back: &mut [u8],
) -> Result<LatencyRecorder, ToolError> {
    let pacer = Pacer::new(rate);
    // Never more messages than fit before the deadline, so the send-time table stays small.
    let limit = deadline.saturating_duration_since(Instant::now());
    let fit = u64::try_from(limit.as_micros() * u128::from(rate) / 1_000_000)
        .unwrap_or(u64::MAX)
        .saturating_add(1);
    let n = usize::try_from(count.min(fit)).unwrap_or(usize::MAX);
    let sent_at: Vec<AtomicU64> = (0..n).map(|_| AtomicU64::new(0)).collect();
    let mut writer = s.try_clone().ctx("cloning the pingpong socket")?;
    let mut reader = s.try_clone().ctx("cloning the pingpong socket")?;
    let start = Instant::now();
    let mut recorder = LatencyRecorder::new();
    let written = thread::scope(|scope| {
        let sending = scope.spawn(|| -> Result<u64, ToolError> {
            let mut pacer = pacer;
            let mut written = 0u64;
            for (i, slot) in sent_at.iter().enumerate() {
                pacer.wait_for(start, i as u64);
                let now = Instant::now();
                if now >= deadline {
                    break;
                }
                slot.store(ns_since(start, now), Ordering::Release);
                writer.write_all(out).ctx("pingpong write")?;
                written += 1;
            }
            // The server then echoes what it has and closes: the reader sees the end.
            writer
                .shutdown(Shutdown::Write)
                .ctx("closing the pingpong write side")?;
            Ok(written)
        });
        for (i, slot) in sent_at.iter().enumerate() {
            match reader.read_exact(back) {
                Ok(()) => {}
                Err(e) if e.kind() == ErrorKind::UnexpectedEof => break,
                Err(e) => return Err(ToolError::io("pingpong read", e)),
            }
            let received = ns_since(start, Instant::now());
            let intended = u64::try_from(pacer.due_offset(i as u64).as_nanos()).unwrap_or(u64::MAX);
            recorder.record(intended, slot.load(Ordering::Acquire), received);
        }
        sending
            .join()
            .map_err(|_| ToolError::WorkerPanicked("pingpong writer"))?
    })?;
    if recorder.count() != written {
        return Err(ToolError::Protocol(format!(
            "{} echoes for {written} messages",
            recorder.count()
        )));
    }
    Ok(recorder)
}

#[cfg(test)]
mod tests {
    use super::super::CommonOpts;
    use super::*;

    pub(crate) fn common(size: u32, count: u64) -> CommonOpts {
        CommonOpts {
            size,
            count,
            time_limit: 60,
            tcp_nodelay: true,
            csv: false,
        }
    }

    #[test]
    fn round_trips_are_all_recorded() {
        let o = PingpongOpts {
            common: common(256, 3_000),
            rate: 0,
            warmup: 100,
            connect: None,
        };
        let r = run_pingpong(&o).unwrap();
        let p = r.row.summary.corrected;
        assert_eq!(p.count, 3_000);
        assert!(
            p.min_ns > 0 && p.min_ns <= p.p50_ns && p.p50_ns <= p.p99_ns && p.p99_ns <= p.max_ns
        );
    }

    #[test]
    fn paced_round_trips_and_a_large_message() {
        let o = PingpongOpts {
            common: common(100_000, 200),
            rate: 20_000,
            warmup: 10,
            connect: None,
        };
        let r = run_pingpong(&o).unwrap();
        assert_eq!(r.recorder.count(), 200);
    }

    #[test]
    fn paced_run_cut_short_by_its_time_limit_reads_every_echo() {
        // 1000/s for at most 1 s: about 1000 of the 1 000 000 asked for go out, and the
        // run ends with every one of them answered rather than waiting for the rest.
        let mut o = PingpongOpts {
            common: common(64, 1_000_000),
            rate: 1_000,
            warmup: 10,
            connect: None,
        };
        o.common.time_limit = 1;
        let r = run_pingpong(&o).unwrap();
        let n = r.recorder.count();
        assert!((500..=1_001).contains(&n), "{n} round trips");
        let s = r.row.summary;
        assert!(s.corrected.min_ns > 0);
        assert!(s.corrected.max_ns >= s.uncorrected.max_ns);
    }

    #[test]
    fn against_a_separate_server() {
        let (addr, h) = serve::spawn_one(false).unwrap();
        let o = PingpongOpts {
            common: common(8, 500),
            rate: 0,
            warmup: 0,
            connect: Some(addr.to_string()),
        };
        assert_eq!(run_pingpong(&o).unwrap().recorder.count(), 500);
        h.join().unwrap().unwrap();
    }

    #[test]
    fn a_missing_server_is_an_error() {
        // Bind then drop to find a port nothing listens on.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let o = PingpongOpts {
            common: common(8, 10),
            rate: 0,
            warmup: 0,
            connect: Some(format!("127.0.0.1:{port}")),
        };
        assert!(matches!(run_pingpong(&o), Err(ToolError::Io { .. })));
    }
}
