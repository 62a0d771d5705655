use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::thread::JoinHandle;
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

/// One message out, its echo back, repeated; each round trip is one sample. With a rate,
/// round trips are due on a fixed schedule and a late one is charged from its due time.
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

    let pacer = Pacer::new(o.rate);
    let mut recorder = LatencyRecorder::new();
    let start = Instant::now();
    for i in 0..c.count {
        let due = pacer.wait_for(start, i);
        let sent = Instant::now();
        if sent >= deadline {
            break;
        }
        round_trip(&mut s)?;
        recorder.record(
            ns_since(start, due),
            ns_since(start, sent),
            ns_since(start, Instant::now()),
        );
    }
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
