//! The cluster transport: length-prefixed frames over TCP on the cluster port, each
//! connection opened with a mutual challenge-response over the shared secret
//! (HMAC-SHA256), so nothing is accepted from a peer that does not hold it. Traffic is not
//! encrypted: the cluster network is meant to be private (docs/CLUSTER.md).
//!
//! Frame: `len u32 | kind u8 | payload` (postcard). A connection carries one request at a
//! time, answered in order.

use std::time::Duration;

use hmac::{Hmac, Mac};
use serde::de::DeserializeOwned;
use serde::Serialize;
use sha2::Sha256;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Larger frames are refused: a snapshot goes in chunks of a few MiB.
pub const MAX_FRAME: usize = 256 << 20;
const PROTOCOL: &[u8] = b"ferry-cluster-1";
/// How long a peer has to finish the handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);

pub mod kind {
    pub const APPEND: u8 = 1;
    pub const VOTE: u8 = 2;
    pub const SNAPSHOT: u8 = 3;
    pub const ADMIN: u8 = 10;
}

#[derive(Debug, thiserror::Error)]
pub enum NetError {
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("frame of {0} bytes is too large")]
    TooLarge(usize),
    #[error("undecodable frame: {0}")]
    Decode(#[from] postcard::Error),
    #[error("peer failed authentication (wrong cluster name or secret)")]
    Auth,
    #[error("timed out")]
    Timeout,
    #[error("unexpected frame kind {0}")]
    Kind(u8),
}

type HmacSha256 = Hmac<Sha256>;

/// The shared secret and cluster name every member proves it knows.
#[derive(Clone)]
pub struct Credentials {
    pub cluster: String,
    pub secret: Vec<u8>,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("cluster", &self.cluster)
            .finish_non_exhaustive()
    }
}

impl Credentials {
    fn mac(&self, role: &[u8], nonce: &[u8], node: u64) -> [u8; 32] {
        let mut m = match HmacSha256::new_from_slice(&self.secret) {
            Ok(m) => m,
            // HMAC takes keys of any length.
            Err(_) => unreachable!("HMAC accepts any key length"),
        };
        m.update(PROTOCOL);
        m.update(&(self.cluster.len() as u32).to_le_bytes());
        m.update(self.cluster.as_bytes());
        m.update(role);
        m.update(nonce);
        m.update(&node.to_le_bytes());
        m.finalize().into_bytes().into()
    }
}

fn verify(expected: &[u8; 32], got: &[u8]) -> bool {
    // Constant time: no early exit on the first differing byte.
    got.len() == 32
        && expected
            .iter()
            .zip(got)
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
}

fn nonce() -> Result<[u8; 32], NetError> {
    let mut n = [0u8; 32];
    getrandom::fill(&mut n).map_err(|e| NetError::Io(std::io::Error::other(e.to_string())))?;
    Ok(n)
}

/// The handshake's proof: the connecting node's id, its nonce, and its HMAC over ours.
/// (The one payload decoded before the peer is authenticated.)
pub type Proof = (u64, Vec<u8>, Vec<u8>);

const HEADER: usize = 5;

/// Appends one frame to `out`.
pub fn encode_frame(kind: u8, payload: &[u8], out: &mut Vec<u8>) -> Result<(), NetError> {
    if payload.len() > MAX_FRAME {
        return Err(NetError::TooLarge(payload.len()));
    }
    out.reserve(payload.len() + HEADER);
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.push(kind);
    out.extend_from_slice(payload);
    Ok(())
}

/// A frame header: the payload's length and the frame's kind. A length past [`MAX_FRAME`]
/// is refused here, before anything is allocated for the payload.
pub fn parse_header(head: [u8; HEADER]) -> Result<(usize, u8), NetError> {
    let len = u32::from_le_bytes([head[0], head[1], head[2], head[3]]) as usize;
    if len > MAX_FRAME {
        return Err(NetError::TooLarge(len));
    }
    Ok((len, head[4]))
}

/// The first frame in `bytes`, as [`read_frame`] would read it from a stream carrying them:
/// its kind, its payload and the bytes after it. A frame cut short is an `UnexpectedEof`, as
/// a stream closed there would give.
pub fn split_frame(bytes: &[u8]) -> Result<(u8, &[u8], &[u8]), NetError> {
    let eof = || NetError::Io(std::io::ErrorKind::UnexpectedEof.into());
    let head = bytes.first_chunk::<HEADER>().ok_or_else(eof)?;
    let (len, kind) = parse_header(*head)?;
    let body = &bytes[HEADER..];
    if body.len() < len {
        return Err(eof());
    }
    let (payload, rest) = body.split_at(len);
    Ok((kind, payload, rest))
}

/// A frame's payload decoded.
pub fn decode<T: DeserializeOwned>(payload: &[u8]) -> Result<T, NetError> {
    // Bounded by the frame size: postcard offers a sequence's length as a preallocation
    // hint only when that many bytes remain (serde caps the hint at 1 MiB besides).
    Ok(postcard::from_bytes(payload)?)
}

pub async fn write_frame(s: &mut TcpStream, kind: u8, payload: &[u8]) -> Result<(), NetError> {
    let mut buf = Vec::new();
    encode_frame(kind, payload, &mut buf)?;
    s.write_all(&buf).await?;
    Ok(())
}

pub async fn read_frame(s: &mut TcpStream) -> Result<(u8, Vec<u8>), NetError> {
    read_frame_within(s, MAX_FRAME).await
}

/// Handshake frames hold a nonce, a node id and a MAC: a peer that has proved nothing yet
/// must not make a node buffer more than that.
const HANDSHAKE_FRAME_MAX: usize = 1024;

async fn read_frame_within(s: &mut TcpStream, max: usize) -> Result<(u8, Vec<u8>), NetError> {
    let mut head = [0u8; HEADER];
    s.read_exact(&mut head).await?;
    let (len, kind) = parse_header(head)?;
    if len > max {
        return Err(NetError::TooLarge(len));
    }
    let mut payload = vec![0u8; len];
    s.read_exact(&mut payload).await?;
    Ok((kind, payload))
}

pub async fn send<T: Serialize>(s: &mut TcpStream, kind: u8, value: &T) -> Result<(), NetError> {
    let bytes = postcard::to_allocvec(value)?;
    write_frame(s, kind, &bytes).await
}

pub async fn recv<T: DeserializeOwned>(s: &mut TcpStream, want: u8) -> Result<T, NetError> {
    let (kind, payload) = read_frame(s).await?;
    if kind != want {
        return Err(NetError::Kind(kind));
    }
    decode(&payload)
}

async fn recv_handshake<T: DeserializeOwned>(s: &mut TcpStream, want: u8) -> Result<T, NetError> {
    let (kind, payload) = read_frame_within(s, HANDSHAKE_FRAME_MAX).await?;
    if kind != want {
        return Err(NetError::Kind(kind));
    }
    decode(&payload)
}

const HELLO: u8 = 100;
pub const PROOF: u8 = 101;
const WELCOME: u8 = 102;

/// The accepting side: challenges the peer, checks its proof, proves itself. Returns the
/// peer's node id (0 for a management client).
pub async fn accept_handshake(s: &mut TcpStream, creds: &Credentials) -> Result<u64, NetError> {
    let fut = async {
        let challenge = nonce()?;
        write_frame(s, HELLO, &challenge).await?;
        let (node, their_nonce, proof): Proof = recv_handshake(s, PROOF).await?;
        if !verify(&creds.mac(b"client", &challenge, node), &proof) {
            return Err(NetError::Auth);
        }
        let answer = creds.mac(b"server", &their_nonce, node);
        write_frame(s, WELCOME, &answer).await?;
        Ok(node)
    };
    tokio::time::timeout(HANDSHAKE_TIMEOUT, fut)
        .await
        .map_err(|_| NetError::Timeout)?
}

/// The connecting side, as node `me` (0: a management client).
/// (`source`: connect from that address, a node's own interface, so peers and test proxies
/// see which node it is.)
pub async fn connect(
    addr: &str,
    creds: &Credentials,
    me: u64,
    source: Option<std::net::IpAddr>,
    timeout: Duration,
) -> Result<TcpStream, NetError> {
    let fut = async {
        let mut s = match source {
            None => TcpStream::connect(addr).await?,
            Some(ip) => {
                let target = tokio::net::lookup_host(addr)
                    .await?
                    .find(|a| a.is_ipv4() == ip.is_ipv4())
                    .ok_or_else(|| std::io::Error::other(format!("{addr}: no address")))?;
                let socket = if ip.is_ipv4() {
                    tokio::net::TcpSocket::new_v4()?
                } else {
                    tokio::net::TcpSocket::new_v6()?
                };
                socket.bind(std::net::SocketAddr::new(ip, 0))?;
                socket.connect(target).await?
            }
        };
        s.set_nodelay(true)?;
        let (kind, challenge) = read_frame_within(&mut s, HANDSHAKE_FRAME_MAX).await?;
        if kind != HELLO {
            return Err(NetError::Kind(kind));
        }
        let mine = nonce()?;
        let proof = creds.mac(b"client", &challenge, me);
        send(&mut s, PROOF, &(me, mine.to_vec(), proof.to_vec())).await?;
        let (kind, answer) = read_frame_within(&mut s, HANDSHAKE_FRAME_MAX).await?;
        if kind != WELCOME {
            return Err(NetError::Kind(kind));
        }
        if !verify(&creds.mac(b"server", &mine, me), &answer) {
            return Err(NetError::Auth);
        }
        Ok(s)
    };
    tokio::time::timeout(timeout, fut)
        .await
        .map_err(|_| NetError::Timeout)?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_frame_reads_what_encode_frame_wrote() {
        let mut bytes = Vec::new();
        encode_frame(kind::VOTE, b"abc", &mut bytes).unwrap();
        encode_frame(kind::ADMIN, b"", &mut bytes).unwrap();
        let (k, payload, rest) = split_frame(&bytes).unwrap();
        assert_eq!((k, payload), (kind::VOTE, &b"abc"[..]));
        let (k, payload, rest) = split_frame(rest).unwrap();
        assert_eq!((k, payload, rest), (kind::ADMIN, &b""[..], &b""[..]));
        let cut = |r: Result<(u8, &[u8], &[u8]), NetError>| matches!(r, Err(NetError::Io(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof);
        assert!(cut(split_frame(&bytes[..4])));
        assert!(cut(split_frame(&bytes[..7])));
        let mut huge = ((MAX_FRAME + 1) as u32).to_le_bytes().to_vec();
        huge.push(kind::APPEND);
        assert!(matches!(split_frame(&huge), Err(NetError::TooLarge(_))));
    }

    #[tokio::test]
    async fn handshake_needs_the_secret() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let good = Credentials {
            cluster: "c".into(),
            secret: b"s3cret".to_vec(),
        };
        let server = good.clone();
        tokio::spawn(async move {
            loop {
                let (mut s, _) = listener.accept().await.unwrap();
                let creds = server.clone();
                tokio::spawn(async move {
                    let _ = accept_handshake(&mut s, &creds).await;
                });
            }
        });
        let t = Duration::from_secs(2);
        assert!(connect(&addr, &good, 7, None, t).await.is_ok());
        let bad = Credentials {
            cluster: "c".into(),
            secret: b"other".to_vec(),
        };
        assert!(connect(&addr, &bad, 7, None, t).await.is_err());
        let other = Credentials {
            cluster: "d".into(),
            secret: b"s3cret".to_vec(),
        };
        assert!(connect(&addr, &other, 7, None, t).await.is_err());
    }

    #[tokio::test]
    async fn an_unproven_peer_cannot_make_the_handshake_buffer_a_large_frame() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let creds = Credentials {
            cluster: "c".into(),
            secret: b"s3cret".to_vec(),
        };
        let accepting = tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            accept_handshake(&mut s, &creds).await
        });
        let mut peer = TcpStream::connect(addr).await.unwrap();
        let (kind, _challenge) = read_frame(&mut peer).await.unwrap();
        assert_eq!(kind, HELLO);
        // Announces a 1 MiB proof and sends nothing more: refused from the header alone.
        let mut head = ((1u32 << 20).to_le_bytes()).to_vec();
        head.push(PROOF);
        peer.write_all(&head).await.unwrap();
        let r = tokio::time::timeout(Duration::from_secs(2), accepting)
            .await
            .expect("refused at once, not after the handshake's time-out")
            .unwrap();
        assert!(
            matches!(r, Err(NetError::TooLarge(n)) if n == 1 << 20),
            "{r:?}"
        );
    }
}
