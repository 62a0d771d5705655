//! The per-connection event loop both protocol layers run: read everything the socket has,
//! let the protocol process it, take deliveries from the outbox, write the one outbound
//! buffer with as few system calls as the socket allows, and keep the timers (handshake,
//! heartbeat, close grace, shutdown).

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Buf, BytesMut};
use ferry_core::{Broker, Outbox, OutboxItem};
use tokio::io::{Interest, Ready};
use tokio::net::TcpStream;

use crate::auth::{AuthOutcome, AuthTask};
use crate::config::ServerConfig;
use crate::listener::Shutdown;

/// Read this much at a time; a full-size frame of either protocol fits.
pub const READ_CHUNK: usize = 64 * 1024;
/// Input held unprocessed for a publisher an alarm paused (one read batch).
const BLOCKED_INPUT: usize = 4 * READ_CHUNK;
/// How long a connection waits for the peer's close-ok after sending its close.
pub const CLOSE_GRACE: Duration = Duration::from_secs(2);

/// Why the loop asks the protocol to close the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CloseReason {
    HandshakeTimeout,
    Shutdown,
}

/// A connected byte stream the loop can drive without blocking: a TCP socket as it is, or a
/// TLS connection over one (`crate::tls`).
pub trait Transport: Send {
    fn ready(
        &self,
        interest: Interest,
    ) -> impl std::future::Future<Output = std::io::Result<Ready>> + Send + '_;
    /// Appends what can be read now; `Ok(0)` is the end of the stream.
    fn try_read_buf(&mut self, buf: &mut BytesMut) -> std::io::Result<usize>;
    /// Takes what it can of `buf` without waiting; an empty `buf` only flushes.
    fn try_write(&mut self, buf: &[u8]) -> std::io::Result<usize>;
    /// Bytes the transport holds that still have to reach the socket (TLS records).
    fn wants_write(&self) -> bool;
}

impl Transport for TcpStream {
    fn ready(
        &self,
        interest: Interest,
    ) -> impl std::future::Future<Output = std::io::Result<Ready>> + Send + '_ {
        TcpStream::ready(self, interest)
    }

    fn try_read_buf(&mut self, buf: &mut BytesMut) -> std::io::Result<usize> {
        TcpStream::try_read_buf(self, buf)
    }

    fn try_write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        TcpStream::try_write(self, buf)
    }

    fn wants_write(&self) -> bool {
        false
    }
}

/// What a protocol layer provides to the loop.
pub trait ProtocolConnection {
    fn config(&self) -> &ServerConfig;
    fn outbox(&self) -> &Arc<Outbox>;
    fn out(&mut self) -> &mut BytesMut;
    fn on_outbox_item(&mut self, item: OutboxItem);
    /// Processes every complete frame in `inbuf`, appending replies to `out`.
    fn process(&mut self, inbuf: &mut BytesMut);
    /// The handshake is done (heartbeats apply, the handshake timer does not).
    fn is_open(&self) -> bool;
    /// Nothing more will be read: flush `out` and end.
    fn is_finished(&self) -> bool;
    /// Negotiated heartbeat interval in seconds; 0 for none.
    fn heartbeat(&self) -> u16;
    /// When we sent our connection close, if we did.
    fn closing_since(&self) -> Option<Instant>;
    fn write_heartbeat(&mut self);
    /// Sends the protocol's connection close for `reason` and starts closing.
    fn close(&mut self, reason: CloseReason);
    /// Releases everything the connection holds (idempotent).
    fn teardown(&mut self);
    /// A SASL step `process` started; the loop awaits it and reads nothing meanwhile.
    fn take_auth_task(&mut self) -> Option<AuthTask>;
    /// The SASL step finished.
    fn on_auth_done(&mut self, outcome: AuthOutcome);
    fn broker(&self) -> &Broker;
    /// The connection has published: while a resource alarm is raised nothing more is read
    /// from it.
    fn is_publisher(&self) -> bool;
    /// A resource alarm stopped (true) or resumed (false) reading from this publisher.
    fn set_flow_blocked(&mut self, blocked: bool);
}

/// Runs `conn` on `stream` until the peer or the broker ends it.
pub async fn drive<T: Transport, C: ProtocolConnection>(
    mut stream: T,
    conn: &mut C,
    mut shutdown: Shutdown,
) -> std::io::Result<()> {
    let mut inbuf = BytesMut::with_capacity(READ_CHUNK);
    let mut items = Vec::new();
    let handshake_deadline = tokio::time::Instant::now() + conn.config().handshake_timeout;
    let high_water = conn.config().write_high_water;
    let mut last_read = Instant::now();
    let mut last_write = Instant::now();
    let mut heartbeat_tick: Option<tokio::time::Interval> = None;
    let mut auth_task: Option<AuthTask> = None;
    let mut alarm = Some(conn.broker().alarms().subscribe());
    let mut flow_blocked = false;
    let result = loop {
        if auth_task.is_none() {
            auth_task = conn.take_auth_task();
        }
        // Resource alarms: stop reading from publishers, and pick up where we left off once
        // the alarm clears (bytes already read wait in `inbuf`).
        let block = conn.is_publisher() && conn.broker().alarms().blocked();
        if block != flow_blocked {
            flow_blocked = block;
            conn.set_flow_blocked(block);
            if !block {
                last_read = Instant::now();
                conn.process(&mut inbuf);
            }
        }
        // Deliveries first, then write as much as the socket takes without waiting.
        if conn.out().len() < high_water {
            conn.outbox().take(&mut items);
            for item in items.drain(..) {
                conn.on_outbox_item(item);
            }
        }
        if !conn.out().is_empty() || stream.wants_write() {
            match stream.try_write(conn.out()) {
                Ok(n) => {
                    conn.out().advance(n);
                    last_write = Instant::now();
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) => break Err(e),
            }
        }
        let all_written = conn.out().is_empty() && !stream.wants_write();
        if conn.is_finished() && all_written {
            break Ok(());
        }
        if conn.is_open() && heartbeat_tick.is_none() && conn.heartbeat() > 0 {
            let period = Duration::from_secs(u64::from(conn.heartbeat()));
            let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            heartbeat_tick = Some(tick);
        }
        // Above the high-water mark we neither read nor take deliveries: a peer that never
        // reads costs at most this buffer plus its credit.
        let below_high_water = conn.out().len() < high_water;
        // A publisher paused by an alarm is still read, without processing, up to one batch:
        // enough to notice that it went away, not enough to matter.
        let want_read = below_high_water
            && !conn.is_finished()
            && auth_task.is_none()
            && (!flow_blocked || inbuf.len() < BLOCKED_INPUT);
        let interest = match (want_read, all_written) {
            (true, true) => Some(Interest::READABLE),
            (true, false) => Some(Interest::READABLE | Interest::WRITABLE),
            (false, false) => Some(Interest::WRITABLE),
            (false, true) => None,
        };
        let open = conn.is_open();
        let closing_since = conn.closing_since();
        let outbox = conn.outbox().clone();
        tokio::select! {
            ready = async { match interest {
                Some(i) => stream.ready(i).await,
                None => std::future::pending().await,
            }} => {
                let ready = match ready { Ok(r) => r, Err(e) => break Err(e) };
                if ready.is_readable() && want_read {
                    match read_available(&mut stream, &mut inbuf) {
                        Ok(ReadOutcome::Eof) => break Ok(()),
                        Ok(ReadOutcome::Data) if flow_blocked => {}
                        Ok(ReadOutcome::Data) => {
                            last_read = Instant::now();
                            conn.process(&mut inbuf);
                            if conn.is_publisher() {
                                // Per batch read, not per tick: a fast publisher overshoots
                                // the high-water mark by one batch, not by a tick's worth.
                                crate::listener::check_memory_alarm(conn.broker());
                            }
                        }
                        Ok(ReadOutcome::Nothing) => {}
                        Err(e) => break Err(e),
                    }
                }
            }
            _ = outbox.notified(), if below_high_water => {}
            changed = async { match alarm.as_mut() {
                Some(rx) => rx.changed().await,
                None => std::future::pending().await,
            }}, if conn.is_publisher() => {
                if changed.is_err() {
                    alarm = None;
                }
            }
            outcome = async { match auth_task.as_mut() {
                Some(task) => task.await,
                None => std::future::pending().await,
            }}, if auth_task.is_some() => {
                auth_task = None;
                conn.on_auth_done(outcome);
                // Whatever the client sent meanwhile waited in the buffer.
                if !inbuf.is_empty() {
                    conn.process(&mut inbuf);
                }
            }
            _ = tokio::time::sleep_until(handshake_deadline), if !open && closing_since.is_none() => {
                conn.close(CloseReason::HandshakeTimeout);
            }
            _ = async { match heartbeat_tick.as_mut() {
                Some(t) => { t.tick().await; }
                None => std::future::pending().await,
            }} => {
                let period = Duration::from_secs(u64::from(conn.heartbeat()));
                // While an alarm keeps us from reading, the peer's heartbeats wait unread.
                if !flow_blocked && last_read.elapsed() > period * 2 {
                    tracing::debug!("missed heartbeats: closing");
                    break Ok(());
                }
                if last_write.elapsed() >= period {
                    conn.write_heartbeat();
                }
            }
            _ = shutdown.wait(), if closing_since.is_none() => {
                conn.close(CloseReason::Shutdown);
            }
            _ = async { match closing_since {
                Some(since) => tokio::time::sleep_until((since + CLOSE_GRACE).into()).await,
                None => std::future::pending().await,
            }} => {
                break Ok(());
            }
        }
    };
    conn.teardown();
    result
}

enum ReadOutcome {
    Data,
    Nothing,
    Eof,
}

/// Drains the socket into `inbuf`, up to a bound so one busy peer cannot starve the others
/// or grow our buffer.
fn read_available<T: Transport>(
    stream: &mut T,
    inbuf: &mut BytesMut,
) -> std::io::Result<ReadOutcome> {
    let mut got = false;
    loop {
        if inbuf.capacity() - inbuf.len() < READ_CHUNK / 4 {
            inbuf.reserve(READ_CHUNK);
        }
        match stream.try_read_buf(inbuf) {
            Ok(0) => {
                return Ok(if got {
                    ReadOutcome::Data
                } else {
                    ReadOutcome::Eof
                })
            }
            Ok(_) => {
                got = true;
                if inbuf.len() >= 4 * READ_CHUNK {
                    return Ok(ReadOutcome::Data);
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                return Ok(if got {
                    ReadOutcome::Data
                } else {
                    ReadOutcome::Nothing
                })
            }
            Err(e) => return Err(e),
        }
    }
}
