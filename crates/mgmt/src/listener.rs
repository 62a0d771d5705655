//! The HTTP listener: a TCP listener that holds at most a fixed number of connections, so
//! a flood of HTTP clients cannot take the file descriptors AMQP clients need, and closes
//! connections idle for [`IDLE_TIMEOUT`] (axum's server sets no timeouts of its own, so a
//! client that sends half a request and waits would otherwise keep its slot for ever).

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::extract::connect_info::Connected;
use axum::serve::{IncomingStream, Listener};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::{Instant, Sleep};

/// HTTP connections served at once; more wait in the kernel's backlog.
pub const MAX_HTTP_CONNECTIONS: usize = 256;

/// A connection that moves no byte either way for this long is closed.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(30);

pub struct BoundedListener {
    inner: TcpListener,
    slots: Arc<Semaphore>,
}

impl BoundedListener {
    pub fn new(inner: TcpListener, max: usize) -> BoundedListener {
        BoundedListener {
            inner,
            slots: Arc::new(Semaphore::new(max)),
        }
    }
}

/// An accepted connection, holding its slot until it is dropped.
pub struct Counted {
    stream: TcpStream,
    _slot: OwnedSemaphorePermit,
    idle: Pin<Box<Sleep>>,
}

impl Counted {
    fn progressed(&mut self) {
        self.idle.as_mut().reset(Instant::now() + IDLE_TIMEOUT);
    }

    /// While waiting for the peer: an error once it has been idle too long.
    fn check_idle(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.idle.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "idle HTTP connection",
            ))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl Listener for BoundedListener {
    type Io = Counted;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Counted, SocketAddr) {
        loop {
            let Ok(slot) = self.slots.clone().acquire_owned().await else {
                // The semaphore is never closed; should it be, stop accepting.
                std::future::pending::<()>().await;
                continue;
            };
            match self.inner.accept().await {
                Ok((stream, peer)) => {
                    let _ = stream.set_nodelay(true);
                    let idle = Box::pin(tokio::time::sleep(IDLE_TIMEOUT));
                    return (
                        Counted {
                            stream,
                            _slot: slot,
                            idle,
                        },
                        peer,
                    );
                }
                Err(e) => {
                    // Out of file descriptors, most likely: back off instead of spinning.
                    tracing::warn!("management: accept failed: {e}");
                    drop(slot);
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.local_addr()
    }
}

impl AsyncRead for Counted {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        match Pin::new(&mut self.stream).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                if buf.filled().len() > before {
                    self.progressed();
                }
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => self.check_idle(cx),
        }
    }
}

impl AsyncWrite for Counted {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match Pin::new(&mut self.stream).poll_write(cx, buf) {
            Poll::Ready(Ok(n)) => {
                self.progressed();
                Poll::Ready(Ok(n))
            }
            Poll::Pending => match self.check_idle(cx) {
                Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
                _ => Poll::Pending,
            },
            other => other,
        }
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match Pin::new(&mut self.stream).poll_write_vectored(cx, bufs) {
            Poll::Ready(Ok(n)) => {
                self.progressed();
                Poll::Ready(Ok(n))
            }
            Poll::Pending => match self.check_idle(cx) {
                Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
                _ => Poll::Pending,
            },
            other => other,
        }
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }
}

/// The client's address, for handlers (guest may log in from loopback only).
#[derive(Debug, Clone, Copy)]
pub struct PeerAddr(pub SocketAddr);

impl Connected<IncomingStream<'_, BoundedListener>> for PeerAddr {
    fn connect_info(stream: IncomingStream<'_, BoundedListener>) -> PeerAddr {
        PeerAddr(*stream.remote_addr())
    }
}
