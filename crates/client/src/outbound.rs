//! The connection's single outbound buffer and the writer task that drains it.
//!
//! Every sender (publishers, the reader answering controls, completion flushes) appends
//! encoded frames under one short lock; the writer swaps the whole buffer out and writes
//! it with one `write_all`, so a burst of transfers costs one syscall rather than one
//! each.

use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use bytes::BytesMut;
use ferry_amqp010::{write_control, ConnectionHeartbeat};
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::Notify;

use crate::error::ClientError;

#[derive(Debug, Default)]
struct State {
    buf: BytesMut,
    /// Set once; every later append fails with it.
    error: Option<ClientError>,
}

#[derive(Debug)]
pub(crate) struct Outbound {
    state: Mutex<State>,
    /// Wakes the writer when the buffer goes from empty to not empty.
    wake_writer: Notify,
    /// Wakes senders waiting for the buffer to drop below the high-water mark.
    drained: Notify,
    high_water: usize,
}

impl Outbound {
    pub fn new(high_water: usize) -> Self {
        Outbound {
            state: Mutex::new(State::default()),
            wake_writer: Notify::new(),
            drained: Notify::new(),
            high_water: high_water.max(1),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave the buffer half-written (encoders
        // append atomically), so a poisoned lock is still usable.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Appends what `write` encodes. Never waits: used for controls and small commands
    /// whose volume is bounded by what the peer sends or the caller awaits.
    pub fn append<R>(
        &self,
        write: impl FnOnce(&mut BytesMut) -> Result<R, ClientError>,
    ) -> Result<R, ClientError> {
        match self.append_below(usize::MAX, write)? {
            Some(r) => Ok(r),
            None => Err(ClientError::Closed),
        }
    }

    /// Like [`Outbound::append`], but returns `Ok(None)` without writing when the buffer
    /// already holds `limit` octets or more.
    fn append_below<R>(
        &self,
        limit: usize,
        write: impl FnOnce(&mut BytesMut) -> Result<R, ClientError>,
    ) -> Result<Option<R>, ClientError> {
        let mut s = self.lock();
        if let Some(e) = &s.error {
            return Err(e.clone());
        }
        if s.buf.len() >= limit {
            return Ok(None);
        }
        let was_empty = s.buf.is_empty();
        let r = write(&mut s.buf)?;
        let wake = was_empty && !s.buf.is_empty();
        drop(s);
        if wake {
            self.wake_writer.notify_one();
        }
        Ok(Some(r))
    }

    /// Appends unless the buffer is above the high-water mark (`Ok(None)`: wait with
    /// [`Outbound::writable`] and retry).
    pub fn try_append_bulk<R>(
        &self,
        write: impl FnOnce(&mut BytesMut) -> Result<R, ClientError>,
    ) -> Result<Option<R>, ClientError> {
        self.append_below(self.high_water, write)
    }

    /// Waits until the buffer is below the high-water mark.
    pub async fn writable(&self) -> Result<(), ClientError> {
        loop {
            let drained = self.drained.notified();
            tokio::pin!(drained);
            drained.as_mut().enable();
            {
                let s = self.lock();
                if let Some(e) = &s.error {
                    return Err(e.clone());
                }
                if s.buf.len() < self.high_water {
                    return Ok(());
                }
            }
            drained.await;
        }
    }

    /// Marks the connection dead (first error wins) and wakes everyone waiting on it.
    pub fn fail(&self, error: ClientError) {
        {
            let mut s = self.lock();
            if s.error.is_none() {
                s.error = Some(error);
            }
        }
        self.wake_writer.notify_one();
        self.drained.notify_waiters();
    }

    pub fn error(&self) -> Option<ClientError> {
        self.lock().error.clone()
    }

    /// Swaps the pending octets into `spare` (which must be empty). Once failed, what
    /// was queued before the failure (a `connection.close-ok`, say) is still handed out;
    /// `Err` when nothing is left.
    fn take(&self, spare: &mut BytesMut) -> Result<(), ClientError> {
        let mut s = self.lock();
        std::mem::swap(&mut s.buf, spare);
        match &s.error {
            Some(e) if spare.is_empty() => Err(e.clone()),
            _ => Ok(()),
        }
    }
}

/// Writes the buffer to the socket until the connection fails or closes. With a
/// heartbeat interval, sends `connection.heartbeat` when nothing was written for that
/// long.
pub(crate) async fn run_writer<W: AsyncWrite + Unpin>(
    out: std::sync::Arc<Outbound>,
    mut sink: W,
    heartbeat: Option<Duration>,
) {
    let mut batch = BytesMut::with_capacity(64 * 1024);
    loop {
        if out.take(&mut batch).is_err() {
            break;
        }
        if batch.is_empty() {
            let idle = async {
                match heartbeat {
                    Some(d) => tokio::time::sleep(d).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = out.wake_writer.notified() => {}
                _ = idle => {
                    let _ = out.append(|buf| {
                        write_control(buf, 0, &ConnectionHeartbeat {}.into()).map_err(Into::into)
                    });
                }
            }
            continue;
        }
        if let Err(e) = sink.write_all(&batch).await {
            out.fail(e.into());
            break;
        }
        batch.clear();
        out.drained.notify_waiters();
    }
    let _ = sink.shutdown().await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BufMut;
    use std::sync::Arc;
    use tokio::io::AsyncReadExt;

    #[tokio::test]
    async fn many_appends_reach_the_socket_in_order() {
        let out = Arc::new(Outbound::new(1 << 20));
        let (client, mut server) = tokio::io::duplex(1 << 16);
        let writer = tokio::spawn(run_writer(out.clone(), client, None));
        for i in 0..10_000u32 {
            out.append(|b| {
                b.put_u32(i);
                Ok(())
            })
            .unwrap();
        }
        let mut got = vec![0u8; 40_000];
        server.read_exact(&mut got).await.unwrap();
        for (i, chunk) in got.chunks(4).enumerate() {
            assert_eq!(u32::from_be_bytes(chunk.try_into().unwrap()), i as u32);
        }
        out.fail(ClientError::Closed);
        writer.await.unwrap();
        assert!(matches!(out.append(|_| Ok(())), Err(ClientError::Closed)));
    }

    /// Counts the writes that reach the socket.
    struct CountingSink {
        writes: Arc<std::sync::atomic::AtomicUsize>,
        octets: Arc<std::sync::atomic::AtomicUsize>,
    }

    impl AsyncWrite for CountingSink {
        fn poll_write(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
            buf: &[u8],
        ) -> std::task::Poll<std::io::Result<usize>> {
            use std::sync::atomic::Ordering::Relaxed;
            self.writes.fetch_add(1, Relaxed);
            self.octets.fetch_add(buf.len(), Relaxed);
            std::task::Poll::Ready(Ok(buf.len()))
        }

        fn poll_flush(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            std::task::Poll::Ready(Ok(()))
        }

        fn poll_shutdown(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            std::task::Poll::Ready(Ok(()))
        }
    }

    #[tokio::test]
    async fn a_burst_of_transfers_leaves_in_one_write() {
        use ferry_amqp010::{write_transfer, MessageTransfer};
        use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
        let out = Arc::new(Outbound::new(1 << 24));
        let writes = Arc::new(AtomicUsize::new(0));
        let octets = Arc::new(AtomicUsize::new(0));
        let sink = CountingSink {
            writes: writes.clone(),
            octets: octets.clone(),
        };
        let writer = tokio::spawn(run_writer(out.clone(), sink, None));
        let transfer = MessageTransfer::default();
        let mut expected = 0;
        // The current-thread runtime runs the writer only once this burst yields.
        for _ in 0..1000 {
            expected += out
                .try_append_bulk(|b| {
                    let before = b.len();
                    write_transfer(b, 1, &transfer, false, b"", &[7; 256], 65535)?;
                    Ok(b.len() - before)
                })
                .unwrap()
                .unwrap();
        }
        out.writable().await.unwrap();
        tokio::task::yield_now().await;
        out.fail(ClientError::Closed);
        writer.await.unwrap();
        assert_eq!(octets.load(Relaxed), expected);
        assert_eq!(writes.load(Relaxed), 1, "1000 transfers, one write");
    }

    #[tokio::test]
    async fn high_water_holds_bulk_senders_until_drained() {
        let out = Arc::new(Outbound::new(8));
        let filled = out.try_append_bulk(|b| {
            b.put_slice(&[0; 16]);
            Ok(())
        });
        assert!(matches!(filled, Ok(Some(()))));
        assert!(matches!(out.try_append_bulk(|_| Ok(())), Ok(None)));
        let (client, mut server) = tokio::io::duplex(1024);
        let writer = tokio::spawn(run_writer(out.clone(), client, None));
        out.writable().await.unwrap();
        let mut got = [1u8; 16];
        server.read_exact(&mut got).await.unwrap();
        assert_eq!(got, [0; 16]);
        out.fail(ClientError::Closed);
        writer.await.unwrap();
    }

    #[tokio::test]
    async fn idle_writer_sends_heartbeats() {
        let out = Arc::new(Outbound::new(1024));
        let (client, mut server) = tokio::io::duplex(1024);
        let beat = Some(Duration::from_millis(20));
        let writer = tokio::spawn(run_writer(out.clone(), client, beat));
        let mut got = [0u8; 16];
        server.read_exact(&mut got).await.unwrap();
        assert_eq!(&got[12..14], &[0x01, 0x0a], "connection.heartbeat");
        out.fail(ClientError::Closed);
        writer.await.unwrap();
    }
}
