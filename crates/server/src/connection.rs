//! The first bytes of a connection choose its protocol.

use std::net::SocketAddr;
use std::sync::Arc;

use ferry_amqp010::{ProtocolHeader, PROTOCOL_HEADER};
use ferry_core::Broker;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tracing::debug;

use crate::auth::AuthService;
use crate::config::ServerConfig;
use crate::listener::Shutdown;

/// What a connection task needs besides its socket.
#[derive(Clone)]
pub struct Services {
    pub broker: Arc<Broker>,
    pub config: Arc<ServerConfig>,
    pub auth: Arc<AuthService>,
}

/// Who is on the other end: the address, and the name in the TLS client certificate when
/// one was presented and verified (the identity SASL EXTERNAL logs in as).
#[derive(Debug, Clone)]
pub struct Peer {
    pub addr: SocketAddr,
    pub client_identity: Option<String>,
}

pub async fn run(
    mut stream: TcpStream,
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
        return crate::amqp091::run(stream, peer, services, shutdown).await;
    }
    // Whatever the peer asked for, it gets the header we speak; only a match continues
    // (AMQP's rule for version negotiation).
    stream.write_all(&PROTOCOL_HEADER).await?;
    match ProtocolHeader::parse(&header) {
        Some(h) if h.is_amqp010() => crate::amqp010::run(stream, peer, services, shutdown).await,
        other => {
            debug!(peer = %peer.addr, ?other, "unsupported protocol header");
            stream.shutdown().await
        }
    }
}
