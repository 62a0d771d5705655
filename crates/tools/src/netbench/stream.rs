use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::time::Instant;

use super::pingpong::{far_end, join_server};
use super::report::ThroughputRow;
use super::wire::{configure, Hello, Kind};
use super::{CommonOpts, StreamOpts};
use crate::error::{IoContext, ToolError};

/// Largest buffer one batched write may need; a larger --size × --batch is refused.
const MAX_BATCH_BYTES: usize = 64 * 1024 * 1024;

pub(super) fn batch_buffer(size: u32, batch: u32) -> Result<Vec<u8>, ToolError> {
    let len = (size as usize)
        .checked_mul(batch as usize)
        .filter(|l| *l <= MAX_BATCH_BYTES)
        .ok_or_else(|| {
            ToolError::InvalidOptions(format!(
                "--size × --batch must be at most {MAX_BATCH_BYTES} bytes"
            ))
        })?;
    Ok(vec![0x5Au8; len])
}

/// Writes up to `c.count` messages in batches until the count or the time limit, then
/// closes the write side. Returns the messages written.
pub(super) fn produce(
    s: &mut TcpStream,
    c: &CommonOpts,
    buf: &[u8],
    batch: u32,
    start: Instant,
) -> Result<u64, ToolError> {
    let size = c.size as usize;
    let deadline = start + c.time_limit();
    let mut sent = 0u64;
    while sent < c.count && Instant::now() < deadline {
        let n = (c.count - sent).min(u64::from(batch));
        s.write_all(&buf[..n as usize * size]).ctx("stream write")?;
        sent += n;
    }
    s.shutdown(Shutdown::Write).ctx("closing the write side")?;
    Ok(sent)
}

/// One-way throughput: the clock runs from the first write until the far end reports
/// having read every byte.
pub fn run_stream(o: &StreamOpts) -> Result<ThroughputRow, ToolError> {
    let c = &o.common;
    let buf = batch_buffer(c.size, o.batch)?;
    let (mut s, server) = far_end(o.connect.as_deref(), c.tcp_nodelay)?;
    configure(&s, c.tcp_nodelay, c.io_timeout())?;
    Hello {
        kind: Kind::Sink,
        size: c.size,
        count: c.count,
    }
    .write_to(&mut s)?;

    let start = Instant::now();
    let sent = produce(&mut s, c, &buf, o.batch, start)?;
    let mut reply = [0u8; 8];
    s.read_exact(&mut reply)
        .ctx("reading the sink's byte count")?;
    let secs = start.elapsed().as_secs_f64();
    join_server(server)?;

    let received = u64::from_le_bytes(reply);
    let expected = sent * u64::from(c.size);
    if received != expected {
        return Err(ToolError::Protocol(format!(
            "sink read {received} bytes, {expected} were sent"
        )));
    }
    Ok(ThroughputRow {
        test: "stream",
        size: c.size,
        batch: o.batch,
        messages: sent,
        secs,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(size: u32, count: u64, batch: u32) -> StreamOpts {
        StreamOpts {
            common: CommonOpts {
                size,
                count,
                time_limit: 60,
                tcp_nodelay: false,
                csv: false,
            },
            batch,
            connect: None,
        }
    }

    #[test]
    fn every_message_arrives() {
        for batch in [1, 64] {
            let r = run_stream(&opts(256, 5_000, batch)).unwrap();
            assert_eq!(r.messages, 5_000);
            assert!(r.secs > 0.0);
        }
    }

    #[test]
    fn a_partial_last_batch_is_sent() {
        let r = run_stream(&opts(100, 1_000, 64)).unwrap();
        assert_eq!(r.messages, 1_000);
    }

    #[test]
    fn oversized_batches_are_refused() {
        assert!(matches!(
            run_stream(&opts(16 * 1024 * 1024, 10, 8)),
            Err(ToolError::InvalidOptions(_))
        ));
    }
}
