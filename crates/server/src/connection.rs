//! The first bytes of a connection choose its protocol.

use ferry_amqp010::{ProtocolHeader, PROTOCOL_HEADER};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tracing::debug;

use crate::lifecycle::Shutdown;
use crate::shell::{Peer, Services};
use crate::tls::TlsTransport;
use crate::transport::Transport;

/// A freshly accepted stream: read the protocol header from it, then drive it as a
/// [`Transport`].
pub trait Accepted: AsyncRead + AsyncWrite + Unpin + Send {
    type Transport: Transport;
    fn into_transport(self) -> Self::Transport;
}

impl Accepted for TcpStream {
    type Transport = TcpStream;
    fn into_transport(self) -> TcpStream {
        self
    }
}

impl Accepted for tokio_rustls::server::TlsStream<TcpStream> {
    type Transport = TlsTransport;
    fn into_transport(self) -> TlsTransport {
        let (tcp, tls) = self.into_inner();
        TlsTransport::new(tcp, tls)
    }
}

pub async fn run<S: Accepted>(
    mut stream: S,
    peer: Peer,
    services: Services,
    shutdown: Shutdown,
) -> std::io::Result<()> {
    let config = &services.config;
    let mut header = [0u8; 8];
    let read = tokio::time::timeout(config.handshake_timeout, stream.read_exact(&mut header)).await;
    match read {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => return Err(e),
        Err(_) => {
            debug!(peer = %peer.addr, "no protocol header in time");
            return Ok(());
        }
    }
    // 0-9-1 answers its header with connection.start, not with a header of its own.
    if header == ferry_amqp091::PROTOCOL_HEADER {
        let stream = stream.into_transport();
        return crate::amqp091::run(stream, peer, services, shutdown).await;
    }
    // AMQP 1.0 answers with a header of its own: SASL's, or (without SASL) 1.0's, or SASL's
    // to say that a login is needed.
    if header == ferry_amqp1::SASL_PROTOCOL_HEADER || header == ferry_amqp1::PROTOCOL_HEADER {
        let sasl = header == ferry_amqp1::SASL_PROTOCOL_HEADER;
        let stream = stream.into_transport();
        return crate::amqp1::run(stream, peer, services, shutdown, sasl).await;
    }
    // Whatever the peer asked for, it gets the header we speak; only a match continues
    // (AMQP's rule for version negotiation).
    stream.write_all(&PROTOCOL_HEADER).await?;
    stream.flush().await?;
    match ProtocolHeader::parse(&header) {
        Some(h) if h.is_amqp010() => {
            let stream = stream.into_transport();
            crate::amqp010::run(stream, peer, services, shutdown).await
        }
        other => {
            debug!(peer = %peer.addr, ?other, "unsupported protocol header");
            stream.shutdown().await
        }
    }
}
