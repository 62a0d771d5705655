//! The event loop that runs a [`Connection`] over a [`Transport`]: read everything the
//! socket has, hand it to the connection, take deliveries from the outbox, write the one
//! outbound buffer with as few system calls as the socket allows, and sleep until the
//! socket, the outbox, an alarm, a SASL step, shutdown or the connection's next deadline
//! wakes it. The only place a connection meets the clock and the socket.

use std::io::IoSlice;
use std::time::Instant;

use bytes::BytesMut;
use tokio::io::Interest;

use super::{Connection, Protocol, READ_CHUNK};
use crate::auth::AuthTask;
use crate::lifecycle::Shutdown;
use crate::transport::Transport;

/// Most input read in one go before processing it: one busy peer cannot starve the others
/// or grow our buffer without bound.
const READ_BATCH: usize = ferry_chunks::FRESH_READ_BUFFER;

/// Pieces of output handed to one `writev`; what does not fit goes with the next.
const WRITE_SLICES: usize = 64;

/// Runs `conn` on `stream` until the peer or the broker ends it.
pub async fn drive<T: Transport, P: Protocol>(
    mut stream: T,
    conn: &mut Connection<P>,
    mut shutdown: Shutdown,
) -> std::io::Result<()> {
    let mut input = BytesMut::with_capacity(READ_CHUNK);
    let mut items = Vec::new();
    let mut auth_task: Option<AuthTask> = None;
    let mut alarm = Some(conn.broker().alarms().subscribe());
    let mut write_closed = false;
    // One timer for the connection's deadlines, re-armed only when a deadline comes earlier
    // than the one it is set for. A deadline that moved later (a heartbeat pushed back by a
    // write) lets it fire early, which costs one idle wake-up; re-arming it on every pass
    // cost a timer registration per batch.
    let timer = tokio::time::sleep(std::time::Duration::ZERO);
    tokio::pin!(timer);
    let mut armed: Option<Instant> = None;
    let result = loop {
        let now = Instant::now();
        if auth_task.is_none() {
            auth_task = conn.take_auth_task();
        }
        conn.poll_flow(&mut input, now);
        let walking = !conn.is_finished() && conn.handle_outbox(&mut items, now);
        if conn.has_output() || stream.wants_write() {
            let mut slices = [IoSlice::new(&[]); WRITE_SLICES];
            let n = conn.output_slices(&mut slices);
            match stream.try_write_vectored(&slices[..n]) {
                Ok(n) => conn.on_transmitted(n, Instant::now()),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) => break Err(e),
            }
        }
        if conn.resume_held_input(&mut input, Instant::now()) {
            continue;
        }
        let all_written = !conn.has_output() && !stream.wants_write();
        if conn.is_done() {
            break Ok(());
        }
        if conn.is_finished() && all_written && !write_closed && conn.half_closes() {
            // Our side is done; the peer's is read to its end (or the linger deadline), so
            // what it still sends cannot reset the connection under it.
            write_closed = true;
            if let Err(e) = stream.close_write() {
                break Err(e);
            }
            continue;
        }
        let want_read = conn.wants_read(input.len()) && auth_task.is_none();
        let interest = match (want_read, all_written) {
            (true, true) => Some(Interest::READABLE),
            (true, false) => Some(Interest::READABLE | Interest::WRITABLE),
            (false, false) => Some(Interest::WRITABLE),
            (false, true) => None,
        };
        if walking {
            // A queue's walk goes on in slices through this outbox; without a yield the next
            // slice would follow at once (the outbox's wake-up is already pending), and tasks
            // queued behind this one on its worker would wait for the whole walk.
            tokio::task::yield_now().await;
        }
        if let Some(at) = conn.poll_timeout() {
            if armed.is_none_or(|set| at < set) {
                timer.as_mut().reset(at.into());
                armed = Some(at);
            }
        }
        let take_deliveries = conn.below_high_water() && !conn.is_finished();
        let outbox = conn.outbox().clone();
        tokio::select! {
            ready = async { match interest {
                Some(i) => stream.ready(i).await,
                None => std::future::pending().await,
            }} => {
                let ready = match ready { Ok(r) => r, Err(e) => break Err(e) };
                if ready.is_readable() && want_read {
                    match read_available(&mut stream, &mut input) {
                        Ok(ReadOutcome::Eof) => {
                            conn.handle_eof(&mut input, Instant::now());
                            break Ok(());
                        }
                        Ok(ReadOutcome::Data) => conn.handle_input(&mut input, Instant::now()),
                        Ok(ReadOutcome::Nothing) => {}
                        Err(e) => break Err(e),
                    }
                }
            }
            _ = outbox.notified(), if take_deliveries => {}
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
                conn.handle_auth(outcome, &mut input, Instant::now());
            }
            _ = &mut timer, if armed.is_some() => {
                armed = None;
                conn.handle_timeout(Instant::now());
            }
            _ = shutdown.wait(), if !conn.shell.is_closing() => {
                conn.handle_shutdown(Instant::now());
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

/// Drains the socket into `input`, up to [`READ_BATCH`] or as much as its room takes.
fn read_available<T: Transport>(
    stream: &mut T,
    input: &mut BytesMut,
) -> std::io::Result<ReadOutcome> {
    let mut got = false;
    loop {
        if input.capacity() - input.len() < READ_CHUNK / 4 {
            // Process what came before making room: after processing, little is left unread
            // to move. Growing a buffer that is full of unread input copies all of it, for
            // every chunk read.
            if got {
                return Ok(ReadOutcome::Data);
            }
            ferry_chunks::reserve_unread(input, READ_CHUNK);
        }
        match stream.try_read_buf(input) {
            Ok(0) => {
                return Ok(if got {
                    ReadOutcome::Data
                } else {
                    ReadOutcome::Eof
                })
            }
            Ok(_) => {
                got = true;
                if input.len() >= READ_BATCH {
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
