//! TLS with rustls: the certificate configuration (reloadable on SIGHUP), the client
//! certificate's name for SASL EXTERNAL, and the transport that lets the shared event loop
//! drive a TLS connection.
//!
//! The handshake and the protocol header run through tokio-rustls; afterwards the socket and
//! the rustls state are taken apart and driven like a plain socket: reads decrypt whatever
//! arrived, writes encrypt everything the loop gathers (outbound buffer and spliced bodies)
//! in one go (rustls cuts it into records) and push all queued records out in one `writev`.

use std::io::{IoSlice, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::BytesMut;
use parking_lot::RwLock;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConnection};
use tokio::io::{Interest, Ready};
use tokio::net::TcpStream;
use tokio_rustls::TlsAcceptor;

use crate::transport::{read_slice_clearing_readiness, shutdown_write, Transport};

/// Where the TLS listener's certificate, key and client CA come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsSettings {
    /// PEM: the server certificate, then its chain.
    pub cert_file: PathBuf,
    /// PEM: the private key (PKCS#8, PKCS#1 or SEC1).
    pub key_file: PathBuf,
    /// PEM: CAs that sign client certificates. Without it no client certificate is asked for.
    pub ca_file: Option<PathBuf>,
    /// Refuse clients that present no valid certificate.
    pub require_client_auth: bool,
}

/// The current TLS configuration; [`Tls::reload`] swaps in a new one for new connections.
pub struct Tls {
    settings: TlsSettings,
    current: RwLock<Arc<rustls::ServerConfig>>,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tls")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl Tls {
    pub fn load(settings: TlsSettings) -> Result<Tls, String> {
        let config = build(&settings)?;
        Ok(Tls {
            settings,
            current: RwLock::new(Arc::new(config)),
        })
    }

    /// Re-reads the files. On error the previous configuration stays in force.
    pub fn reload(&self) -> Result<(), String> {
        let config = build(&self.settings)?;
        *self.current.write() = Arc::new(config);
        Ok(())
    }

    pub fn acceptor(&self) -> TlsAcceptor {
        TlsAcceptor::from(self.current.read().clone())
    }
}

fn build(settings: &TlsSettings) -> Result<rustls::ServerConfig, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let certs = read_certs(&settings.cert_file)?;
    let key = PrivateKeyDer::from_pem_file(&settings.key_file)
        .map_err(|e| format!("{}: {e}", settings.key_file.display()))?;
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?;
    let builder = match &settings.ca_file {
        Some(ca_file) => {
            let mut roots = RootCertStore::empty();
            for cert in read_certs(ca_file)? {
                roots
                    .add(cert)
                    .map_err(|e| format!("{}: {e}", ca_file.display()))?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
            let verifier = if settings.require_client_auth {
                verifier
            } else {
                verifier.allow_unauthenticated()
            };
            let verifier = verifier
                .build()
                .map_err(|e| format!("{}: {e}", ca_file.display()))?;
            builder.with_client_cert_verifier(verifier)
        }
        None if settings.require_client_auth => {
            return Err("client authentication needs a CA file to verify certificates".into())
        }
        None => builder.with_no_client_auth(),
    };
    builder
        .with_single_cert(certs, key)
        .map_err(|e| format!("{}: {e}", settings.cert_file.display()))
}

fn read_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("{}: {e}", path.display()))?;
    if certs.is_empty() {
        return Err(format!("{}: no certificate", path.display()));
    }
    Ok(certs)
}

/// The subject common name of the client's (verified) certificate: the identity SASL
/// EXTERNAL logs in as.
pub fn client_identity(conn: &ServerConnection) -> Option<String> {
    identity_of(conn.peer_certificates()?.first()?.as_ref())
}

/// The first subject CN of a DER certificate, if it is a name a user may have: an empty CN,
/// or one with blanks, control characters or `:`, would log in as a user no users file can
/// name and no log line shows plainly, so such a certificate offers no EXTERNAL login.
fn identity_of(der: &[u8]) -> Option<String> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
    let cn = cert.subject().iter_common_name().next()?.as_str().ok()?;
    ferry_auth::validate_user_name(cn).ok()?;
    Some(cn.to_owned())
}

/// A TLS connection after the handshake, driven by the shared event loop.
pub struct TlsTransport {
    tcp: TcpStream,
    tls: ServerConnection,
    /// rustls may hold decrypted bytes the socket's readiness knows nothing about.
    plaintext_waiting: bool,
    /// `close_write` was called: the TCP FIN follows once close_notify is on the wire.
    fin_pending: bool,
}

impl TlsTransport {
    pub fn new(tcp: TcpStream, tls: ServerConnection) -> TlsTransport {
        TlsTransport {
            tcp,
            tls,
            // Whatever arrived with the handshake may already be decrypted.
            plaintext_waiting: true,
            fin_pending: false,
        }
    }

    /// Sends queued records until the socket is full; true when none are left.
    fn flush_records(&mut self) -> std::io::Result<bool> {
        while self.tls.wants_write() {
            match self.tls.write_tls(&mut SocketIo(&self.tcp)) {
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) => return Err(e),
            }
        }
        Ok(true)
    }
}

/// Non-blocking reads on the socket for rustls; a short read forgets the socket's
/// readiness, as plain TCP's do (`transport::read_clearing_readiness`).
struct SocketReader<'a>(&'a mut TcpStream);

impl Read for SocketReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        read_slice_clearing_readiness(self.0, buf)
    }
}

/// Non-blocking writes on the socket for rustls.
struct SocketIo<'a>(&'a TcpStream);

impl Write for SocketIo<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.try_write(buf)
    }

    /// rustls hands over every queued record at once; without this, `Write`'s default
    /// would send only the first, one system call per record.
    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> std::io::Result<usize> {
        self.0.try_write_vectored(bufs)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Plaintext taken from rustls per read call: one full TLS record.
const PLAINTEXT_CHUNK: usize = 16 * 1024;

impl Transport for TlsTransport {
    fn ready(
        &self,
        interest: Interest,
    ) -> impl std::future::Future<Output = std::io::Result<Ready>> + Send + '_ {
        let waiting = self.plaintext_waiting && interest.is_readable();
        async move {
            if waiting {
                return Ok(Ready::READABLE);
            }
            self.tcp.ready(interest).await
        }
    }

    fn try_read_buf(&mut self, buf: &mut BytesMut) -> std::io::Result<usize> {
        loop {
            let start = buf.len();
            buf.resize(start + PLAINTEXT_CHUNK, 0);
            let read = self.tls.reader().read(&mut buf[start..]);
            buf.truncate(start + *read.as_ref().unwrap_or(&0));
            match read {
                // The peer sent close_notify.
                Ok(0) => return Ok(0),
                Ok(n) => {
                    self.plaintext_waiting = true;
                    return Ok(n);
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
            self.plaintext_waiting = false;
            if self.tls.read_tls(&mut SocketReader(&mut self.tcp))? == 0 {
                return Ok(0);
            }
            if let Err(e) = self.tls.process_new_packets() {
                // Tell the peer why (best effort), then drop the connection.
                let _ = self.flush_records();
                return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, e));
            }
            self.plaintext_waiting = true;
        }
    }

    fn try_write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.try_write_vectored(&[IoSlice::new(buf)])
    }

    /// Encrypts the pieces together, so that a delivery's frames and its spliced body share
    /// records instead of taking one record (and one system call) each.
    fn try_write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> std::io::Result<usize> {
        let total: usize = bufs.iter().map(|b| b.len()).sum();
        let mut taken = 0;
        loop {
            if !self.flush_records()? {
                break;
            }
            if self.fin_pending {
                self.fin_pending = false;
                shutdown_write(&self.tcp)?;
                break;
            }
            if taken == total {
                break;
            }
            let mut rest = [IoSlice::new(&[]); GATHERED_PIECES];
            let n = pieces_after(bufs, taken, &mut rest);
            // rustls encrypts into its bounded record queue and says how much it took.
            match self.tls.writer().write_vectored(&rest[..n])? {
                0 => break,
                n => taken += n,
            }
        }
        if taken == 0 && total > 0 {
            return Err(std::io::ErrorKind::WouldBlock.into());
        }
        Ok(taken)
    }

    fn wants_write(&self) -> bool {
        self.tls.wants_write() || self.fin_pending
    }

    fn close_write(&mut self) -> std::io::Result<()> {
        self.tls.send_close_notify();
        self.fin_pending = true;
        Ok(())
    }
}

/// Pieces handed to rustls in one call (the event loop gathers at most 64).
const GATHERED_PIECES: usize = 64;

/// Fills `rest` with what follows the first `skip` bytes of `bufs`, as far as it holds;
/// returns how many it filled.
fn pieces_after<'a>(bufs: &'a [IoSlice<'_>], mut skip: usize, rest: &mut [IoSlice<'a>]) -> usize {
    let mut n = 0;
    for buf in bufs {
        if skip >= buf.len() {
            skip -= buf.len();
            continue;
        }
        let Some(slot) = rest.get_mut(n) else {
            break;
        };
        *slot = IoSlice::new(&buf[skip..]);
        skip = 0;
        n += 1;
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    fn certificate_for(common_name: &str) -> Vec<u8> {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, common_name);
        params.self_signed(&key).unwrap().der().to_vec()
    }

    #[test]
    fn the_identity_is_a_usable_common_name() {
        assert_eq!(
            identity_of(&certificate_for("client1")).as_deref(),
            Some("client1")
        );
        for bad in ["", "two words", "line\nbreak", "a:b"] {
            assert_eq!(identity_of(&certificate_for(bad)), None, "{bad:?}");
        }
        assert_eq!(identity_of(b"not a certificate"), None);
    }

    #[test]
    fn pieces_after_skips_what_was_taken_and_stops_when_full() {
        let bufs = [
            IoSlice::new(b"abc"),
            IoSlice::new(b""),
            IoSlice::new(b"defg"),
            IoSlice::new(b"h"),
        ];
        let flatten = |skip: usize, room: usize| {
            let mut rest = [IoSlice::new(&[]); 4];
            let n = pieces_after(&bufs, skip, &mut rest[..room]);
            rest[..n]
                .iter()
                .flat_map(|s| s.iter().copied())
                .collect::<Vec<u8>>()
        };
        assert_eq!(flatten(0, 4), b"abcdefgh");
        assert_eq!(flatten(2, 4), b"cdefgh");
        assert_eq!(flatten(3, 4), b"defgh");
        assert_eq!(flatten(5, 4), b"fgh");
        assert_eq!(flatten(8, 4), b"");
        assert_eq!(flatten(1, 1), b"bc");
    }

    /// A server transport after a real handshake over loopback, and the client's end taken
    /// apart, so the test sees the records on the wire.
    async fn connected_pair() -> (TlsTransport, TcpStream, rustls::ClientConnection) {
        let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
        let cert_der = CertificateDer::from(cert.cert.der().to_vec());
        let key = PrivateKeyDer::try_from(cert.key_pair.serialize_der()).unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut server = rustls::ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(vec![cert_der.clone()], key)
            .unwrap();
        // Only the test's own records follow the handshake.
        server.send_tls13_tickets = 0;
        let mut roots = RootCertStore::empty();
        roots.add(cert_der).unwrap();
        let client = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let connector = tokio_rustls::TlsConnector::from(Arc::new(client));
        let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
        let (accepted, connected) = tokio::join!(
            async {
                TlsAcceptor::from(Arc::new(server))
                    .accept(listener.accept().await.unwrap().0)
                    .await
            },
            async {
                connector
                    .connect(name, TcpStream::connect(addr).await.unwrap())
                    .await
            },
        );
        let (tcp, tls) = accepted.unwrap().into_inner();
        let (client_tcp, client_tls) = connected.unwrap().into_inner();
        (TlsTransport::new(tcp, tls), client_tcp, client_tls)
    }

    /// Reads `want` plaintext bytes at the client; returns them and how many records they
    /// came in.
    async fn receive(
        tcp: &TcpStream,
        tls: &mut rustls::ClientConnection,
        want: usize,
    ) -> (Vec<u8>, usize) {
        let mut wire = Vec::new();
        let mut plain = Vec::new();
        let mut records = 0;
        while plain.len() < want {
            tcp.readable().await.unwrap();
            let mut chunk = [0u8; 4096];
            match tcp.try_read(&mut chunk) {
                Ok(0) => panic!("the server closed"),
                Ok(n) => wire.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
                Err(e) => panic!("{e}"),
            }
            // Count whole records (5-byte header: type, version, length), then decrypt them.
            while wire.len() >= 5 {
                let len = 5 + usize::from(u16::from_be_bytes([wire[3], wire[4]]));
                if wire.len() < len {
                    break;
                }
                let record: Vec<u8> = wire.drain(..len).collect();
                records += 1;
                // rustls takes at most a few KiB per call.
                let mut rest = &record[..];
                while !rest.is_empty() {
                    tls.read_tls(&mut rest).unwrap();
                    tls.process_new_packets().unwrap();
                }
                let mut buf = vec![0u8; 64 * 1024];
                while let Ok(n) = tls.reader().read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    plain.extend_from_slice(&buf[..n]);
                }
            }
        }
        (plain, records)
    }

    #[tokio::test]
    async fn pieces_written_together_share_records_and_arrive_in_order() {
        let (mut server, client_tcp, mut client_tls) = connected_pair().await;
        let pieces: Vec<Vec<u8>> = (0..40u8).map(|i| vec![i; 10 + usize::from(i)]).collect();
        let slices: Vec<IoSlice<'_>> = pieces.iter().map(|p| IoSlice::new(p)).collect();
        let total: usize = pieces.iter().map(Vec::len).sum();
        // One call takes every piece (the default took only the first).
        assert_eq!(server.try_write_vectored(&slices).unwrap(), total);
        while server.wants_write() {
            server.try_write(&[]).unwrap();
        }
        let (plain, records) = receive(&client_tcp, &mut client_tls, total).await;
        assert_eq!(plain, pieces.concat());
        assert_eq!(records, 1, "1,180 bytes in 40 pieces fit one record");
    }

    #[tokio::test]
    async fn a_large_gathered_write_is_cut_into_full_records() {
        let (mut server, client_tcp, mut client_tls) = connected_pair().await;
        let head = vec![1u8; 100];
        let body: Vec<u8> = (0..40_000u32).map(|i| i as u8).collect();
        let slices = [
            IoSlice::new(&head),
            IoSlice::new(&body),
            IoSlice::new(b"\xce"),
        ];
        let total = head.len() + body.len() + 1;
        let mut written = 0;
        let reader = async { receive(&client_tcp, &mut client_tls, total).await };
        let writer = async {
            while written < total {
                let mut rest = [IoSlice::new(&[]); 3];
                let n = pieces_after(&slices, written, &mut rest);
                match server.try_write_vectored(&rest[..n]) {
                    Ok(n) => written += n,
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                        server.tcp.writable().await.unwrap()
                    }
                    Err(e) => panic!("{e}"),
                }
            }
            while server.wants_write() {
                server.try_write(&[]).unwrap();
            }
        };
        let ((plain, records), ()) = tokio::join!(reader, writer);
        assert_eq!(plain, [&head[..], &body[..], b"\xce"].concat());
        // 40,101 bytes: three records of at most 16 KiB, not one per piece and part.
        assert_eq!(records, 3);
    }
}
