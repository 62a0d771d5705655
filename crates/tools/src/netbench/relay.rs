//! Producer → relay → consumer over loopback TCP. The relay does the least a broker can:
//! read whatever bytes have arrived and write them on. What this reaches on a machine is
//! the most a broker between two clients could.

use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use super::report::{LatencyRow, ThroughputRow};
use super::stream::{batch_buffer, produce};
use super::wire::{configure, is_timeout};
use super::RelayOpts;
use crate::driver::DriverError;
use crate::error::{IoContext, ToolError};
use crate::latency_test::{run_latency, LatencyReceiver, LatencySender, RunLimits, Stamp};

const RELAY_BUF: usize = 256 * 1024;

fn loopback_listener() -> Result<(TcpListener, SocketAddr), ToolError> {
    let l = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).ctx("binding 127.0.0.1:0")?;
    let a = l.local_addr().ctx("listener address")?;
    Ok((l, a))
}

/// Accepts the producer, connects to the consumer and forwards until the producer closes.
fn spawn_relay(
    from: TcpListener,
    to: SocketAddr,
    nodelay: bool,
    timeout: Duration,
) -> JoinHandle<Result<u64, ToolError>> {
    thread::spawn(move || {
        let (mut inbound, _) = from.accept().ctx("relay accepting the producer")?;
        let mut outbound = TcpStream::connect(to).ctx("relay connecting to the consumer")?;
        configure(&inbound, nodelay, timeout)?;
        configure(&outbound, nodelay, timeout)?;
        let mut buf = vec![0u8; RELAY_BUF];
        let mut total = 0u64;
        loop {
            let n = inbound.read(&mut buf).ctx("relay read")?;
            if n == 0 {
                break;
            }
            outbound.write_all(&buf[..n]).ctx("relay write")?;
            total += n as u64;
        }
        outbound.shutdown(Shutdown::Write).ctx("relay closing")?;
        Ok(total)
    })
}

fn join<T>(h: JoinHandle<Result<T, ToolError>>, who: &'static str) -> Result<T, ToolError> {
    h.join().map_err(|_| ToolError::WorkerPanicked(who))?
}

/// Throughput through the relay: from the producer's first write to the consumer's last
/// byte.
pub fn run_relay_throughput(o: &RelayOpts) -> Result<ThroughputRow, ToolError> {
    let c = &o.common;
    let buf = batch_buffer(c.size, o.batch)?;
    let (consumer_l, consumer_addr) = loopback_listener()?;
    let (relay_l, relay_addr) = loopback_listener()?;
    let timeout = c.io_timeout();
    let nodelay = c.tcp_nodelay;

    let consumer = thread::spawn(move || -> Result<(u64, Instant), ToolError> {
        let (mut s, _) = consumer_l.accept().ctx("consumer accepting the relay")?;
        configure(&s, nodelay, timeout)?;
        let mut buf = vec![0u8; RELAY_BUF];
        let mut total = 0u64;
        let mut last = Instant::now();
        loop {
            let n = s.read(&mut buf).ctx("consumer read")?;
            if n == 0 {
                return Ok((total, last));
            }
            total += n as u64;
            last = Instant::now();
        }
    });
    let relay = spawn_relay(relay_l, consumer_addr, nodelay, timeout);

    let mut producer = TcpStream::connect(relay_addr).ctx("producer connecting")?;
    configure(&producer, nodelay, timeout)?;
    let start = Instant::now();
    let sent = produce(&mut producer, c, &buf, o.batch, start)?;
    join(relay, "relay")?;
    let (received, last) = join(consumer, "consumer")?;

    let expected = sent * u64::from(c.size);
    if received != expected {
        return Err(ToolError::Protocol(format!(
            "consumer read {received} bytes, {expected} were sent"
        )));
    }
    Ok(ThroughputRow {
        test: "relay",
        size: c.size,
        batch: o.batch,
        messages: sent,
        secs: last
            .saturating_duration_since(start)
            .as_secs_f64()
            .max(f64::MIN_POSITIVE),
    })
}

struct TcpStampSender {
    s: TcpStream,
    buf: Vec<u8>,
}

impl LatencySender for TcpStampSender {
    fn send(&mut self, stamp: Stamp) -> Result<(), DriverError> {
        stamp.encode(&mut self.buf);
        self.s
            .write_all(&self.buf)
            .map_err(|e| DriverError::Connection(e.to_string()))
    }

    fn sync(&mut self) -> Result<(), DriverError> {
        Ok(())
    }
}

/// Reads fixed-size messages, keeping a partial one across timeouts.
struct TcpStampReceiver {
    s: TcpStream,
    buf: Vec<u8>,
    filled: usize,
    timeout: Option<Duration>,
}

impl LatencyReceiver for TcpStampReceiver {
    fn receive(&mut self, timeout: Duration) -> Result<Option<Stamp>, DriverError> {
        let conn = |e: io::Error| DriverError::Connection(e.to_string());
        if self.timeout != Some(timeout) {
            self.s.set_read_timeout(Some(timeout)).map_err(conn)?;
            self.timeout = Some(timeout);
        }
        while self.filled < self.buf.len() {
            match self.s.read(&mut self.buf[self.filled..]) {
                Ok(0) => return Err(DriverError::Connection("relay closed the stream".into())),
                Ok(n) => self.filled += n,
                Err(e) if is_timeout(&e) => return Ok(None),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(conn(e)),
            }
        }
        self.filled = 0;
        Stamp::decode(&self.buf)
            .map(Some)
            .ok_or_else(|| DriverError::Connection("short message".into()))
    }
}

/// One-way latency through the relay at a fixed rate, measured with the latency-test
/// runner (so from each message's scheduled send time).
pub fn run_relay_latency(o: &RelayOpts) -> Result<LatencyRow, ToolError> {
    let c = &o.common;
    if (c.size as usize) < Stamp::LEN {
        return Err(ToolError::InvalidOptions(format!(
            "relay --latency needs --size of at least {} bytes",
            Stamp::LEN
        )));
    }
    let (consumer_l, consumer_addr) = loopback_listener()?;
    let (relay_l, relay_addr) = loopback_listener()?;
    let timeout = c.io_timeout();
    let relay = spawn_relay(relay_l, consumer_addr, c.tcp_nodelay, timeout);

    let producer = TcpStream::connect(relay_addr).ctx("producer connecting")?;
    configure(&producer, c.tcp_nodelay, timeout)?;
    let (consumer, _) = consumer_l.accept().ctx("consumer accepting the relay")?;
    configure(&consumer, c.tcp_nodelay, timeout)?;

    let limits = RunLimits {
        count: c.count,
        rate: o.rate,
        time_limit: Some(c.time_limit()),
        report_every: Duration::from_secs(1),
        sync_each: false,
        csv: false,
        drain_grace: Duration::from_secs(5),
        keep_samples: false,
    };
    let sender = TcpStampSender {
        s: producer,
        buf: vec![0x3Cu8; c.size as usize],
    };
    let mut receiver = TcpStampReceiver {
        s: consumer,
        buf: vec![0u8; c.size as usize],
        filled: 0,
        timeout: None,
    };
    // The runner's interval lines are for long broker runs; netbench prints one summary.
    let run = run_latency(&limits, sender, &mut receiver, &mut io::sink())?;
    // The sender was dropped with the runner, closing the producer: the relay ends.
    join(relay, "relay")?;
    Ok(LatencyRow {
        test: "relay-latency",
        size: c.size,
        rate: o.rate,
        nodelay: c.tcp_nodelay,
        summary: run.recorder.summary(),
    })
}

#[cfg(test)]
mod tests {
    use super::super::CommonOpts;
    use super::*;

    fn opts(size: u32, count: u64, batch: u32, latency: bool, rate: u64) -> RelayOpts {
        RelayOpts {
            common: CommonOpts {
                size,
                count,
                time_limit: 60,
                tcp_nodelay: true,
                csv: false,
            },
            batch,
            latency,
            rate,
        }
    }

    #[test]
    fn throughput_delivers_every_byte() {
        for batch in [1, 64] {
            let r = run_relay_throughput(&opts(256, 5_000, batch, false, 0)).unwrap();
            assert_eq!(r.messages, 5_000);
        }
    }

    #[test]
    fn latency_records_every_message() {
        let row = run_relay_latency(&opts(64, 2_000, 1, true, 20_000)).unwrap();
        assert_eq!(row.summary.corrected.count, 2_000);
        assert!(row.summary.corrected.p50_ns > 0);
        // Back-to-back as well: the stream of stamps stays framed.
        let row = run_relay_latency(&opts(17, 2_000, 1, true, 0)).unwrap();
        assert_eq!(row.summary.corrected.count, 2_000);
    }

    #[test]
    fn latency_needs_room_for_the_stamp() {
        assert!(matches!(
            run_relay_latency(&opts(8, 10, 1, true, 0)),
            Err(ToolError::InvalidOptions(_))
        ));
    }
}
