//! The byte streams a connection runs over: a TCP socket as it is, or a TLS connection over
//! one (`crate::tls`). The event loop (`shell::driver`) drives either without blocking.

use std::future::Future;
use std::io::IoSlice;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use bytes::BytesMut;
use tokio::io::{AsyncRead, AsyncReadExt, Interest, ReadBuf, Ready};
use tokio::net::TcpStream;

/// A connected byte stream the loop can drive without blocking.
pub trait Transport: Send {
    fn ready(
        &self,
        interest: Interest,
    ) -> impl std::future::Future<Output = std::io::Result<Ready>> + Send + '_;
    /// Appends what can be read now; `Ok(0)` is the end of the stream.
    fn try_read_buf(&mut self, buf: &mut BytesMut) -> std::io::Result<usize>;
    /// Takes what it can of `buf` without waiting; an empty `buf` only flushes.
    fn try_write(&mut self, buf: &[u8]) -> std::io::Result<usize>;
    /// As `try_write`, gathering `bufs` in order; an empty list only flushes.
    fn try_write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> std::io::Result<usize> {
        let first = bufs
            .iter()
            .find(|b| !b.is_empty())
            .map_or(&[][..], |b| &b[..]);
        self.try_write(first)
    }
    /// Bytes the transport holds that still have to reach the socket (TLS records).
    fn wants_write(&self) -> bool;
    /// Says "no more from us" (TCP FIN; TLS close_notify first) while reading goes on, so a
    /// peer still sending when we close sees a clean end rather than a reset. What it
    /// queues (close_notify) goes out through later `try_write(&[])` calls.
    fn close_write(&mut self) -> std::io::Result<()>;
}

impl Transport for TcpStream {
    fn ready(
        &self,
        interest: Interest,
    ) -> impl std::future::Future<Output = std::io::Result<Ready>> + Send + '_ {
        TcpStream::ready(self, interest)
    }

    fn try_read_buf(&mut self, buf: &mut BytesMut) -> std::io::Result<usize> {
        read_clearing_readiness(self, buf)
    }

    fn try_write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        TcpStream::try_write(self, buf)
    }

    fn try_write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> std::io::Result<usize> {
        TcpStream::try_write_vectored(self, bufs)
    }

    fn wants_write(&self) -> bool {
        false
    }

    fn close_write(&mut self) -> std::io::Result<()> {
        shutdown_write(self)
    }
}

/// Reads through `AsyncRead::poll_read` rather than `TcpStream::try_read_buf`. tokio then
/// takes a read that does not fill the buffer as proof that the socket is drained (mio's epoll
/// is edge-triggered) and forgets the readiness, so the event loop waits for the next edge
/// instead of making one more read that can only return EAGAIN. At 10k msg/s that read was
/// half of ferryd's `recvfrom` calls.
fn read_clearing_readiness(tcp: &mut TcpStream, buf: &mut BytesMut) -> std::io::Result<usize> {
    let mut read = std::pin::pin!(tcp.read_buf(buf));
    poll_once(|cx| read.as_mut().poll(cx))
}

/// [`read_clearing_readiness`] into a slice, for rustls's `read_tls`.
pub(crate) fn read_slice_clearing_readiness(
    tcp: &mut TcpStream,
    dst: &mut [u8],
) -> std::io::Result<usize> {
    let mut read = ReadBuf::new(dst);
    poll_once(|cx| Pin::new(&mut *tcp).poll_read(cx, &mut read))?;
    Ok(read.filled().len())
}

/// Polls a socket operation once without waiting: where it would wait, it says `WouldBlock`.
///
/// It runs outside tokio's cooperative budget, as `try_read_buf` does: with the budget spent,
/// `poll_read` would say Pending on a readable socket, and the event loop, whose `ready()`
/// does not count against the budget, would find the socket readable at once and spin
/// without ever yielding.
fn poll_once<T>(
    poll: impl FnMut(&mut Context<'_>) -> Poll<std::io::Result<T>>,
) -> std::io::Result<T> {
    let mut cx = Context::from_waker(Waker::noop());
    let once = std::pin::pin!(tokio::task::unconstrained(std::future::poll_fn(poll)));
    match once.poll(&mut cx) {
        Poll::Ready(result) => result,
        Poll::Pending => Err(std::io::ErrorKind::WouldBlock.into()),
    }
}

/// Half-closes a TCP socket: the peer reads the end of the stream, we can still read.
pub fn shutdown_write(tcp: &TcpStream) -> std::io::Result<()> {
    socket2::SockRef::from(tcp).shutdown(std::net::Shutdown::Write)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio::io::AsyncWriteExt;
    use tokio::net::TcpListener;

    use super::*;

    async fn pair() -> (TcpStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap());
        let (client, accepted) = tokio::join!(client, listener.accept());
        (client.unwrap(), accepted.unwrap().0)
    }

    #[tokio::test]
    async fn a_short_read_forgets_readiness_and_the_next_data_wakes_the_reader() {
        let (mut ours, mut peer) = pair().await;
        let mut buf = BytesMut::with_capacity(4096);
        peer.write_all(b"first").await.unwrap();
        ours.ready(Interest::READABLE).await.unwrap();
        assert_eq!(Transport::try_read_buf(&mut ours, &mut buf).unwrap(), 5);

        // The socket is drained: no cached readiness sends the loop into a read that can
        // only say EAGAIN, and a read now is refused without waiting.
        let idle = tokio::time::timeout(
            Duration::from_millis(50),
            Transport::ready(&ours, Interest::READABLE),
        );
        assert!(idle.await.is_err(), "readiness outlived a drained socket");
        let err = Transport::try_read_buf(&mut ours, &mut buf).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::WouldBlock);

        peer.write_all(b"second").await.unwrap();
        let woke = tokio::time::timeout(
            Duration::from_secs(10),
            Transport::ready(&ours, Interest::READABLE),
        );
        assert!(woke.await.unwrap().unwrap().is_readable());
        assert_eq!(Transport::try_read_buf(&mut ours, &mut buf).unwrap(), 6);
        assert_eq!(&buf[..], b"firstsecond");

        drop(peer);
        ours.ready(Interest::READABLE).await.unwrap();
        assert_eq!(Transport::try_read_buf(&mut ours, &mut buf).unwrap(), 0);
    }

    #[tokio::test]
    async fn reads_go_on_past_the_task_budget() {
        // tokio's cooperative budget (128 operations per task poll) must not turn a read of a
        // readable socket into WouldBlock: the loop's `ready()` would then say readable at
        // once and the loop would spin without ever yielding to refill the budget.
        let (mut ours, mut peer) = pair().await;
        peer.write_all(&[7u8; 64 * 1024]).await.unwrap();
        ours.ready(Interest::READABLE).await.unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        for i in 0..300 {
            // Exactly 16 bytes of room: every read fills it, so readiness stays.
            let mut room = BytesMut::with_capacity(16);
            let got = Transport::try_read_buf(&mut ours, &mut room);
            assert_eq!(got.ok(), Some(16), "read {i}");
        }
        // The same for the reads under TLS.
        for i in 0..300 {
            let got = read_slice_clearing_readiness(&mut ours, &mut [0u8; 16]);
            assert_eq!(got.ok(), Some(16), "slice read {i}");
        }
    }
}
