//! The byte streams a connection runs over: a TCP socket as it is, or a TLS connection over
//! one (`crate::tls`). The event loop (`shell::driver`) drives either without blocking.

use std::io::IoSlice;

use bytes::BytesMut;
use tokio::io::{Interest, Ready};
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
        TcpStream::try_read_buf(self, buf)
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

/// Half-closes a TCP socket: the peer reads the end of the stream, we can still read.
pub fn shutdown_write(tcp: &TcpStream) -> std::io::Result<()> {
    socket2::SockRef::from(tcp).shutdown(std::net::Shutdown::Write)
}
