//! Authentication and TLS against a real ferryd: SASL mechanisms and their refusals over both
//! protocols, TLS for both protocols, EXTERNAL with a client certificate, required client
//! certificates, and certificate reload on SIGHUP. Certificates are made at test time.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use bytes::{Bytes, BytesMut};
use common::http::Http;
use common::Ferryd;
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

const TIMEOUT: Duration = Duration::from_secs(15);

/// A temporary directory removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir =
            std::env::temp_dir().join(format!("ferry-security-{tag}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }

    fn arg(&self, name: &str) -> String {
        self.path(name).to_str().unwrap().to_owned()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A users file with alice/wonderland (cheap iterations: tests, not security).
fn users_file(dir: &TempDir) -> String {
    let mut users = ferry_auth::Users::default();
    let alice = ferry_auth::Credentials::new("wonderland", ferry_auth::MIN_ITERATIONS).unwrap();
    users.insert("alice", alice).unwrap();
    users.save(&dir.path("users")).unwrap();
    dir.arg("users")
}

/// ferryd with --auth yes and the users file in `dir`.
fn secure_broker(dir: &TempDir, extra: &[&str]) -> Ferryd {
    let users = users_file(dir);
    let mut args = vec!["--auth", "yes", "--users-file", &users];
    args.extend_from_slice(extra);
    Ferryd::start_with(&args)
}

// ---------------------------------------------------------------- streams

enum Stream {
    Tcp(TcpStream),
    Tls(Box<rustls::StreamOwned<rustls::ClientConnection, TcpStream>>),
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.read(buf),
            Stream::Tls(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.write(buf),
            Stream::Tls(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Stream::Tcp(s) => s.flush(),
            Stream::Tls(s) => s.flush(),
        }
    }
}

fn tcp(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(TIMEOUT)).unwrap();
    s
}

fn plain(addr: SocketAddr) -> Stream {
    Stream::Tcp(tcp(addr))
}

// ---------------------------------------------------------------- certificates

struct Pki {
    dir: TempDir,
    ca: rcgen::Certificate,
    ca_key: rcgen::KeyPair,
}

impl Pki {
    fn new() -> Pki {
        let dir = TempDir::new("pki");
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "Ferry test CA");
        params.key_usages = vec![
            rcgen::KeyUsagePurpose::KeyCertSign,
            rcgen::KeyUsagePurpose::CrlSign,
        ];
        let ca = params.self_signed(&ca_key).unwrap();
        std::fs::write(dir.path("ca.pem"), ca.pem()).unwrap();
        Pki { dir, ca, ca_key }
    }

    /// Writes `<name>.pem` and `<name>.key`, signed by the CA.
    fn issue(&self, name: &str, common_name: &str, server: bool) -> (PathBuf, PathBuf) {
        let key = rcgen::KeyPair::generate().unwrap();
        let sans = if server {
            vec!["localhost".to_string(), "127.0.0.1".to_string()]
        } else {
            vec![]
        };
        let mut params = rcgen::CertificateParams::new(sans).unwrap();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, common_name);
        params.extended_key_usages = vec![if server {
            rcgen::ExtendedKeyUsagePurpose::ServerAuth
        } else {
            rcgen::ExtendedKeyUsagePurpose::ClientAuth
        }];
        let cert = params.signed_by(&key, &self.ca, &self.ca_key).unwrap();
        let (cert_path, key_path) = (
            self.dir.path(&format!("{name}.pem")),
            self.dir.path(&format!("{name}.key")),
        );
        std::fs::write(&cert_path, cert.pem()).unwrap();
        std::fs::write(&key_path, key.serialize_pem()).unwrap();
        (cert_path, key_path)
    }

    fn client_config(&self, client: Option<(&Path, &Path)>) -> Arc<rustls::ClientConfig> {
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::{CertificateDer, PrivateKeyDer};
        let mut roots = rustls::RootCertStore::empty();
        roots.add(self.ca.der().clone()).unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots);
        let config = match client {
            Some((cert, key)) => {
                let certs = CertificateDer::pem_file_iter(cert)
                    .unwrap()
                    .collect::<Result<Vec<_>, _>>()
                    .unwrap();
                let key = PrivateKeyDer::from_pem_file(key).unwrap();
                builder.with_client_auth_cert(certs, key).unwrap()
            }
            None => builder.with_no_client_auth(),
        };
        Arc::new(config)
    }
}

fn tls(addr: SocketAddr, config: Arc<rustls::ClientConfig>) -> Stream {
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let conn = rustls::ClientConnection::new(config, name).unwrap();
    Stream::Tls(Box::new(rustls::StreamOwned::new(conn, tcp(addr))))
}

/// A TLS broker: server certificate from `pki`, plus `extra` options.
fn tls_broker(pki: &Pki, users: &TempDir, extra: &[&str]) -> Ferryd {
    let (cert, key) = pki.issue("server", "localhost", true);
    let users = users_file(users);
    let (cert, key) = (cert.to_str().unwrap(), key.to_str().unwrap());
    let mut args = vec![
        "--auth",
        "yes",
        "--users-file",
        &users,
        "--ssl-port",
        "0",
        "--ssl-cert-file",
        cert,
        "--ssl-key-file",
        key,
    ];
    args.extend_from_slice(extra);
    Ferryd::start_tls(&args)
}

// ---------------------------------------------------------------- SASL clients

trait Sasl {
    fn mechanism(&self) -> &'static str;
    fn initial(&mut self) -> Vec<u8>;
    fn respond(&mut self, challenge: &[u8]) -> Vec<u8>;
}

struct Plain(&'static str, &'static str);

impl Sasl for Plain {
    fn mechanism(&self) -> &'static str {
        "PLAIN"
    }
    fn initial(&mut self) -> Vec<u8> {
        format!("\0{}\0{}", self.0, self.1).into_bytes()
    }
    fn respond(&mut self, _: &[u8]) -> Vec<u8> {
        panic!("PLAIN got a challenge")
    }
}

/// ANONYMOUS or EXTERNAL: an empty response.
struct Empty(&'static str);

impl Sasl for Empty {
    fn mechanism(&self) -> &'static str {
        self.0
    }
    fn initial(&mut self) -> Vec<u8> {
        Vec::new()
    }
    fn respond(&mut self, _: &[u8]) -> Vec<u8> {
        panic!("{} got a challenge", self.0)
    }
}

/// SCRAM-SHA-256 client written from RFC 5802; checks the server's signature.
struct Scram {
    user: &'static str,
    password: &'static str,
    first_bare: String,
    auth_message: String,
    salted: [u8; 32],
    verified: bool,
}

impl Scram {
    fn new(user: &'static str, password: &'static str) -> Scram {
        Scram {
            user,
            password,
            first_bare: format!("n={user},r=fyko+d2lbbFgONRv9qkxdawL"),
            auth_message: String::new(),
            salted: [0; 32],
            verified: false,
        }
    }
}

fn hmac(key: &[u8], data: &[u8]) -> Vec<u8> {
    let mut m = Hmac::<Sha256>::new_from_slice(key).unwrap();
    m.update(data);
    m.finalize().into_bytes().to_vec()
}

impl Sasl for Scram {
    fn mechanism(&self) -> &'static str {
        "SCRAM-SHA-256"
    }
    fn initial(&mut self) -> Vec<u8> {
        let _ = self.user;
        format!("n,,{}", self.first_bare).into_bytes()
    }
    fn respond(&mut self, challenge: &[u8]) -> Vec<u8> {
        let text = std::str::from_utf8(challenge).unwrap().to_owned();
        if let Some(signature) = text.strip_prefix("v=") {
            let server_key = hmac(&self.salted, b"Server Key");
            let expected = hmac(&server_key, self.auth_message.as_bytes());
            assert_eq!(B64.decode(signature).unwrap(), expected, "server signature");
            self.verified = true;
            return Vec::new();
        }
        let mut nonce = "";
        let mut salt = Vec::new();
        let mut iterations = 0;
        for attr in text.split(',') {
            match attr.split_at(2) {
                ("r=", v) => nonce = v,
                ("s=", v) => salt = B64.decode(v).unwrap(),
                ("i=", v) => iterations = v.parse().unwrap(),
                _ => {}
            }
        }
        pbkdf2::pbkdf2_hmac::<Sha256>(
            self.password.as_bytes(),
            &salt,
            iterations,
            &mut self.salted,
        );
        let without_proof = format!("c=biws,r={nonce}");
        self.auth_message = format!("{},{text},{without_proof}", self.first_bare);
        let client_key = hmac(&self.salted, b"Client Key");
        let stored = Sha256::digest(&client_key);
        let signature = hmac(&stored, self.auth_message.as_bytes());
        let proof: Vec<u8> = client_key
            .iter()
            .zip(signature)
            .map(|(a, b)| a ^ b)
            .collect();
        format!("{without_proof},p={}", B64.encode(proof)).into_bytes()
    }
}

/// How a login ended.
#[derive(Debug, PartialEq, Eq)]
enum Login {
    /// connection.open-ok arrived.
    Open,
    /// connection.close with this code and text.
    Closed(u16, String),
    /// The socket closed without a connection.close.
    Dropped,
}

// ---------------------------------------------------------------- AMQP 0-10

mod amqp010 {
    use super::*;
    use ferry_amqp010::{
        decode_frame, write_control, Array, Assembler, ConnectionOpen, ConnectionSecureOk,
        ConnectionStartOk, ConnectionTuneOk, Control, Incoming, Str, PROTOCOL_HEADER,
    };

    fn next(s: &mut Stream, inbuf: &mut BytesMut, asm: &mut Assembler) -> Option<Control> {
        loop {
            match decode_frame(inbuf, 1 << 16) {
                Ok(Some(frame)) => match asm.push(frame) {
                    Ok(Some(Incoming::Control(c))) => return Some(c),
                    Ok(_) => continue,
                    Err(e) => panic!("bad assembly: {e}"),
                },
                Ok(None) => {}
                Err(e) => panic!("bad frame: {e}"),
            }
            let mut chunk = [0u8; 16384];
            match s.read(&mut chunk) {
                Ok(0) | Err(_) => return None,
                Ok(n) => inbuf.extend_from_slice(&chunk[..n]),
            }
        }
    }

    fn send(s: &mut Stream, c: Control) {
        let mut out = BytesMut::new();
        write_control(&mut out, 0, &c).unwrap();
        s.write_all(&out).unwrap();
        s.flush().unwrap();
    }

    /// Logs in with `sasl`; returns the mechanisms offered and the outcome.
    pub fn login(mut s: Stream, sasl: &mut dyn Sasl) -> (Vec<String>, Login) {
        s.write_all(&PROTOCOL_HEADER).unwrap();
        s.flush().unwrap();
        let mut header = [0u8; 8];
        s.read_exact(&mut header).unwrap();
        assert_eq!(header, PROTOCOL_HEADER);
        let mut inbuf = BytesMut::new();
        let mut asm = Assembler::new(1 << 20);
        let Some(Control::ConnectionStart(start)) = next(&mut s, &mut inbuf, &mut asm) else {
            panic!("no connection.start");
        };
        let offered = start
            .mechanisms
            .unwrap()
            .strs()
            .map(|m| m.to_str_lossy().into_owned())
            .collect();
        send(
            &mut s,
            ConnectionStartOk {
                mechanism: Some(Str::from(sasl.mechanism())),
                response: Some(Bytes::from(sasl.initial())),
                ..Default::default()
            }
            .into(),
        );
        loop {
            match next(&mut s, &mut inbuf, &mut asm) {
                Some(Control::ConnectionSecure(c)) => {
                    let response = sasl.respond(&c.challenge.unwrap_or_default());
                    send(
                        &mut s,
                        ConnectionSecureOk {
                            response: Some(response.into()),
                        }
                        .into(),
                    );
                }
                Some(Control::ConnectionTune(_)) => break,
                Some(Control::ConnectionClose(c)) => {
                    let code = c.reply_code.map(|c| c.code()).unwrap_or(0);
                    let text = c.reply_text.unwrap_or_default().to_str_lossy().into_owned();
                    return (offered, Login::Closed(code, text));
                }
                Some(other) => panic!("unexpected {}", other.name()),
                None => return (offered, Login::Dropped),
            }
        }
        send(
            &mut s,
            ConnectionTuneOk {
                channel_max: Some(8),
                max_frame_size: Some(4096),
                heartbeat: Some(0),
            }
            .into(),
        );
        send(
            &mut s,
            ConnectionOpen {
                virtual_host: Some(Str::from("")),
                capabilities: Some(Array::of_str16(std::iter::empty::<&str>())),
                insist: false,
            }
            .into(),
        );
        match next(&mut s, &mut inbuf, &mut asm) {
            Some(Control::ConnectionOpenOk(_)) => (offered, Login::Open),
            other => panic!("expected open-ok, got {other:?}"),
        }
    }
}

// ---------------------------------------------------------------- AMQP 0-9-1

mod amqp091 {
    use super::*;
    use ferry_amqp091::{
        decode_frame, write_content, write_method, Assembled, BasicConsume, BasicProperties,
        BasicPublish, ChannelOpen, ConnectionOpen, ConnectionSecureOk, ConnectionStartOk,
        ConnectionTuneOk, ContentAssembler, FieldTable, FieldValue, LongStr, Method, QueueDeclare,
        ShortStr, PROTOCOL_HEADER,
    };

    pub struct Conn {
        s: Stream,
        inbuf: BytesMut,
        asm: Vec<ContentAssembler>,
    }

    fn short(s: &str) -> ShortStr {
        ShortStr::new(Bytes::copy_from_slice(s.as_bytes())).unwrap()
    }

    impl Conn {
        fn next(&mut self) -> Option<(u16, Assembled)> {
            loop {
                match decode_frame(&mut self.inbuf, 1 << 17) {
                    Ok(Some(frame)) => {
                        let ch = usize::from(frame.channel);
                        match self.asm[ch].push(frame) {
                            Ok(Some(done)) => return Some((ch as u16, done)),
                            Ok(None) => continue,
                            Err(e) => panic!("bad content: {e}"),
                        }
                    }
                    Ok(None) => {}
                    Err(e) => panic!("bad frame: {e}"),
                }
                let mut chunk = [0u8; 65536];
                match self.s.read(&mut chunk) {
                    Ok(0) | Err(_) => return None,
                    Ok(n) => self.inbuf.extend_from_slice(&chunk[..n]),
                }
            }
        }

        /// Whether the connection still answers: channel 1 opens.
        pub fn opens_a_channel(&mut self) -> bool {
            self.send(1, ChannelOpen::default().into());
            matches!(self.method(), Some(Method::ChannelOpenOk(_)))
        }

        /// The broker's connection.close, when that is what comes next: (code, text).
        pub fn close_received(&mut self) -> Option<(u16, String)> {
            match self.method()? {
                Method::ConnectionClose(close) => Some((
                    close.reply_code,
                    String::from_utf8_lossy(close.reply_text.as_bytes()).into_owned(),
                )),
                other => panic!("expected connection.close, got {}", other.name()),
            }
        }

        fn method(&mut self) -> Option<Method> {
            match self.next()? {
                (_, Assembled::Method(m)) => Some(m),
                (_, Assembled::Message(_)) => panic!("unexpected message"),
            }
        }

        fn send(&mut self, channel: u16, m: Method) {
            let mut out = BytesMut::new();
            write_method(&mut out, channel, &m);
            self.s.write_all(&out).unwrap();
            self.s.flush().unwrap();
        }

        /// Declares a queue, publishes `count` messages of `size` bytes to it and consumes
        /// them back: data both ways over whatever the stream is.
        pub fn round_trip(&mut self, count: usize, size: usize) {
            self.send(1, ChannelOpen::default().into());
            assert!(matches!(self.method(), Some(Method::ChannelOpenOk(_))));
            let queue = format!("q-{}", std::process::id());
            self.send(
                1,
                QueueDeclare {
                    queue: short(&queue),
                    auto_delete: true,
                    ..Default::default()
                }
                .into(),
            );
            assert!(matches!(self.method(), Some(Method::QueueDeclareOk(_))));
            let body: Vec<u8> = (0..size).map(|i| (i % 251) as u8).collect();
            let mut out = BytesMut::new();
            for _ in 0..count {
                let publish = Method::BasicPublish(BasicPublish {
                    routing_key: short(&queue),
                    ..Default::default()
                });
                write_content(
                    &mut out,
                    1,
                    &publish,
                    &BasicProperties::default(),
                    &body,
                    4096,
                );
            }
            self.s.write_all(&out).unwrap();
            self.send(
                1,
                BasicConsume {
                    queue: short(&queue),
                    consumer_tag: short("c"),
                    no_ack: true,
                    ..Default::default()
                }
                .into(),
            );
            let mut got = 0;
            while got < count {
                match self.next() {
                    Some((1, Assembled::Message(m))) => {
                        assert_eq!(m.body.as_ref(), &body[..]);
                        got += 1;
                    }
                    Some(_) => {}
                    None => panic!("connection ended after {got} of {count} messages"),
                }
            }
        }
    }

    pub fn amqplain(user: &str, password: &str) -> Vec<u8> {
        let mut t = FieldTable::new();
        let text = |s: &str| FieldValue::LongStr(LongStr::new(s.as_bytes().to_vec()).unwrap());
        t.push(short("LOGIN"), text(user));
        t.push(short("PASSWORD"), text(password));
        let mut out = BytesMut::new();
        t.encode(&mut out);
        out[4..].to_vec()
    }

    /// Logs in; `failure_close` announces the authentication_failure_close capability.
    /// `raw_response` replaces the SASL client's initial response (AMQPLAIN).
    pub fn login(
        s: Stream,
        sasl: &mut dyn Sasl,
        mechanism: Option<&str>,
        raw_response: Option<Vec<u8>>,
        failure_close: bool,
    ) -> (Vec<String>, Login, Option<Conn>) {
        login_then(s, sasl, mechanism, raw_response, failure_close, &mut || {})
    }

    /// As [`login`], running `before_open` between tune-ok and connection.open.
    pub fn login_then(
        s: Stream,
        sasl: &mut dyn Sasl,
        mechanism: Option<&str>,
        raw_response: Option<Vec<u8>>,
        failure_close: bool,
        before_open: &mut dyn FnMut(),
    ) -> (Vec<String>, Login, Option<Conn>) {
        let mut c = Conn {
            s,
            inbuf: BytesMut::new(),
            asm: (0..2).map(|_| ContentAssembler::new(1 << 24)).collect(),
        };
        c.s.write_all(&PROTOCOL_HEADER).unwrap();
        c.s.flush().unwrap();
        let Some(Method::ConnectionStart(start)) = c.method() else {
            panic!("no connection.start");
        };
        let offered = String::from_utf8_lossy(start.mechanisms.as_bytes())
            .split(' ')
            .map(str::to_owned)
            .collect();
        let mut caps = FieldTable::new();
        caps.push(
            short("authentication_failure_close"),
            FieldValue::Bool(failure_close),
        );
        let mut props = FieldTable::new();
        props.push(short("capabilities"), FieldValue::Table(caps));
        let response = raw_response.unwrap_or_else(|| sasl.initial());
        c.send(
            0,
            ConnectionStartOk {
                client_properties: props,
                mechanism: short(mechanism.unwrap_or(sasl.mechanism())),
                response: LongStr::new(response).unwrap(),
                locale: short("en_US"),
            }
            .into(),
        );
        loop {
            match c.method() {
                Some(Method::ConnectionSecure(sec)) => {
                    let response = sasl.respond(sec.challenge.as_bytes());
                    c.send(
                        0,
                        ConnectionSecureOk {
                            response: LongStr::new(response).unwrap(),
                        }
                        .into(),
                    );
                }
                Some(Method::ConnectionTune(t)) => {
                    c.send(
                        0,
                        ConnectionTuneOk {
                            channel_max: 8,
                            frame_max: t.frame_max,
                            heartbeat: 0,
                        }
                        .into(),
                    );
                    break;
                }
                Some(Method::ConnectionClose(close)) => {
                    let text = String::from_utf8_lossy(close.reply_text.as_bytes()).into_owned();
                    return (offered, Login::Closed(close.reply_code, text), None);
                }
                Some(other) => panic!("unexpected {}", other.name()),
                None => return (offered, Login::Dropped, None),
            }
        }
        before_open();
        c.send(
            0,
            ConnectionOpen {
                virtual_host: short("/"),
                ..Default::default()
            }
            .into(),
        );
        match c.method() {
            Some(Method::ConnectionOpenOk(_)) => (offered, Login::Open, Some(c)),
            Some(Method::ConnectionClose(close)) => {
                let text = String::from_utf8_lossy(close.reply_text.as_bytes()).into_owned();
                (offered, Login::Closed(close.reply_code, text), None)
            }
            other => panic!("expected open-ok, got {other:?}"),
        }
    }

    pub fn simple(s: Stream, sasl: &mut dyn Sasl) -> Login {
        login(s, sasl, None, None, true).1
    }
}

// ---------------------------------------------------------------- tests

const REFUSED_010: &str = "not-allowed: authentication failed";

#[test]
fn plain_logins_over_0_10() {
    let dir = TempDir::new("plain010");
    let b = secure_broker(&dir, &[]);
    let (offered, ok) = amqp010::login(plain(b.addr), &mut Plain("alice", "wonderland"));
    assert_eq!(offered, ["SCRAM-SHA-256", "PLAIN"]);
    assert_eq!(ok, Login::Open);
    let started = Instant::now();
    let (_, wrong) = amqp010::login(plain(b.addr), &mut Plain("alice", "nope"));
    let (_, unknown) = amqp010::login(plain(b.addr), &mut Plain("nobody", "wonderland"));
    // 320 connection-forced: 0-10's close codes have no not-allowed.
    assert_eq!(wrong, Login::Closed(320, REFUSED_010.into()));
    assert_eq!(
        unknown, wrong,
        "an unknown user must look like a wrong password"
    );
    assert!(
        started.elapsed() >= Duration::from_millis(1900),
        "refusals are delayed"
    );
    let (_, log) = b.terminate();
    assert!(log.contains("login refused: wrong password"), "{log}");
    assert!(log.contains("login refused: unknown user"), "{log}");
}

#[test]
fn plain_and_amqplain_over_0_9_1() {
    let dir = TempDir::new("plain091");
    let b = secure_broker(&dir, &[]);
    let (offered, ok, _) = amqp091::login(
        plain(b.addr),
        &mut Plain("alice", "wonderland"),
        None,
        None,
        true,
    );
    assert_eq!(offered, ["SCRAM-SHA-256", "PLAIN", "AMQPLAIN"]);
    assert_eq!(ok, Login::Open);
    let amqplain = |user, pw| {
        let raw = Some(amqp091::amqplain(user, pw));
        let mut unused = Plain("", "");
        amqp091::login(plain(b.addr), &mut unused, Some("AMQPLAIN"), raw, true).1
    };
    assert_eq!(amqplain("alice", "wonderland"), Login::Open);
    let wrong = amqp091::simple(plain(b.addr), &mut Plain("alice", "nope"));
    let unknown = amqplain("nobody", "wonderland");
    let refused = "ACCESS_REFUSED - Login was refused using authentication mechanism";
    let Login::Closed(403, text) = &wrong else {
        panic!("wrong password: {wrong:?}");
    };
    assert!(text.starts_with(refused), "{text}");
    assert!(matches!(&unknown, Login::Closed(403, t) if t.starts_with(refused)));
    // Without authentication_failure_close the socket just closes.
    let (_, silent, _) = amqp091::login(plain(b.addr), &mut Plain("alice", "x"), None, None, false);
    assert_eq!(silent, Login::Dropped);
}

#[test]
fn a_rabbitmq_password_hash_admits_plain_and_amqplain_but_not_scram() {
    let dir = TempDir::new("rabbithash");
    users_file(&dir);
    let mut users = ferry_auth::Users::load(&dir.path("users"))
        .unwrap()
        .unwrap();
    let hash = ferry_auth::RabbitHash::derive(ferry_auth::RabbitAlgorithm::Sha256, [7; 4], "hutch");
    users.insert("peter", hash).unwrap();
    users.save(&dir.path("users")).unwrap();
    let b = Ferryd::start_with(&["--auth", "yes", "--users-file", &dir.arg("users")]);
    let (_, ok) = amqp010::login(plain(b.addr), &mut Plain("peter", "hutch"));
    assert_eq!(ok, Login::Open);
    assert_eq!(
        amqp091::simple(plain(b.addr), &mut Plain("peter", "hutch")),
        Login::Open
    );
    let raw = Some(amqp091::amqplain("peter", "hutch"));
    let mut unused = Plain("", "");
    let (_, amqplain, _) = amqp091::login(plain(b.addr), &mut unused, Some("AMQPLAIN"), raw, true);
    assert_eq!(amqplain, Login::Open);
    // A wrong password, and SCRAM (which needs keys a hash cannot give), are refused as an
    // unknown user's login is.
    let (_, wrong) = amqp010::login(plain(b.addr), &mut Plain("peter", "hutc"));
    assert_eq!(wrong, Login::Closed(320, REFUSED_010.into()));
    let scram = amqp010::login(plain(b.addr), &mut Scram::new("peter", "hutch")).1;
    assert_eq!(scram, wrong);
    let wrong = amqp091::simple(plain(b.addr), &mut Plain("peter", "hutc"));
    assert!(matches!(wrong, Login::Closed(403, _)), "{wrong:?}");
    let (_, log) = b.terminate();
    assert!(log.contains("login refused: wrong password"), "{log}");
    assert!(
        log.contains("RabbitMQ password hash, which SCRAM cannot use"),
        "{log}"
    );

    // With --sasl-mechanisms leaving SCRAM out, only PLAIN and AMQPLAIN are offered (a
    // client that picks SCRAM whenever offered then uses PLAIN), and SCRAM is refused.
    let b = Ferryd::start_with(&[
        "--auth",
        "yes",
        "--users-file",
        &dir.arg("users"),
        "--sasl-mechanisms",
        "PLAIN,AMQPLAIN",
    ]);
    let (offered, ok) = amqp010::login(plain(b.addr), &mut Plain("peter", "hutch"));
    assert_eq!(offered, ["PLAIN"]);
    assert_eq!(ok, Login::Open);
    let (offered, ok, _) = amqp091::login(
        plain(b.addr),
        &mut Plain("peter", "hutch"),
        None,
        None,
        true,
    );
    assert_eq!(offered, ["PLAIN", "AMQPLAIN"]);
    assert_eq!(ok, Login::Open);
    let scram = amqp010::login(plain(b.addr), &mut Scram::new("alice", "wonderland")).1;
    assert_eq!(scram, Login::Closed(320, REFUSED_010.into()));
    let (_, log) = b.terminate();
    assert!(log.contains("mechanism not offered"), "{log}");
}

#[test]
fn scram_sha_256_over_both_protocols() {
    let dir = TempDir::new("scram");
    let b = secure_broker(&dir, &[]);
    let mut good = Scram::new("alice", "wonderland");
    assert_eq!(amqp010::login(plain(b.addr), &mut good).1, Login::Open);
    assert!(good.verified, "the server proved it knows the key");
    let mut good = Scram::new("alice", "wonderland");
    assert_eq!(amqp091::simple(plain(b.addr), &mut good), Login::Open);
    assert!(good.verified);
    let wrong = amqp010::login(plain(b.addr), &mut Scram::new("alice", "nope")).1;
    let unknown = amqp010::login(plain(b.addr), &mut Scram::new("ghost", "wonderland")).1;
    assert_eq!(wrong, Login::Closed(320, REFUSED_010.into()));
    assert_eq!(unknown, wrong);
    let wrong = amqp091::simple(plain(b.addr), &mut Scram::new("alice", "nope"));
    assert!(matches!(wrong, Login::Closed(403, _)), "{wrong:?}");
}

#[test]
fn anonymous_is_refused_with_auth_and_accepted_without() {
    let dir = TempDir::new("anon");
    let b = secure_broker(&dir, &[]);
    let refused = amqp010::login(plain(b.addr), &mut Empty("ANONYMOUS")).1;
    assert_eq!(refused, Login::Closed(320, REFUSED_010.into()));
    let refused = amqp091::simple(plain(b.addr), &mut Empty("ANONYMOUS"));
    assert!(matches!(refused, Login::Closed(403, _)));
    // EXTERNAL needs a certificate, so it is neither offered nor accepted here.
    let refused = amqp010::login(plain(b.addr), &mut Empty("EXTERNAL")).1;
    assert_eq!(refused, Login::Closed(320, REFUSED_010.into()));

    let enabled = secure_broker(&dir, &["--allow-anonymous", "yes"]);
    let (offered, ok) = amqp010::login(plain(enabled.addr), &mut Empty("ANONYMOUS"));
    assert_eq!(ok, Login::Open);
    assert!(offered.contains(&"ANONYMOUS".to_string()));

    let open = Ferryd::start_with(&["--auth", "no"]);
    let (offered, ok) = amqp010::login(plain(open.addr), &mut Empty("ANONYMOUS"));
    assert_eq!(ok, Login::Open);
    assert_eq!(offered, ["PLAIN", "ANONYMOUS"]);
    let any = amqp091::simple(plain(open.addr), &mut Plain("whoever", "whatever"));
    assert_eq!(any, Login::Open);
}

#[test]
fn builtin_guest_without_a_users_file() {
    let dir = TempDir::new("guest");
    let missing = dir.arg("no-users-here");
    let b = Ferryd::start_with(&["--auth", "yes", "--users-file", &missing]);
    assert_eq!(
        amqp010::login(plain(b.addr), &mut Plain("guest", "guest")).1,
        Login::Open
    );
    assert_eq!(
        amqp091::simple(plain(b.addr), &mut Plain("guest", "guest")),
        Login::Open
    );
    let (_, log) = b.terminate();
    assert!(
        log.contains(
            "only the built-in user guest (password guest) may log in, and only from loopback"
        ),
        "{log}"
    );
    // Remote guests are refused by the policy every login goes through.
    assert!(!ferry_server_policy_allows_guest_from("192.0.2.1"));
}

fn ferry_server_policy_allows_guest_from(ip: &str) -> bool {
    ferry_server::allowed_from("guest", ip.parse().unwrap())
}

#[test]
fn users_added_while_running_can_log_in() {
    let dir = TempDir::new("live");
    let b = secure_broker(&dir, &[]);
    let path = dir.path("users");
    let mut users = ferry_auth::Users::load(&path).unwrap().unwrap();
    let bob = ferry_auth::Credentials::new("builder", ferry_auth::MIN_ITERATIONS).unwrap();
    users.insert("bob", bob).unwrap();
    users.save(&path).unwrap();
    assert_eq!(
        amqp010::login(plain(b.addr), &mut Plain("bob", "builder")).1,
        Login::Open
    );
}

/// Management deletes a user after their password was checked but before their
/// connection.open: the deletion found no connection of theirs to close, so the open is
/// refused (530, as RabbitMQ refuses an open it no longer finds the user for).
#[test]
fn a_user_deleted_while_their_connection_opens_is_refused() {
    let dir = TempDir::new("deleted-opening");
    let users_path = dir.path("users");
    let mut users = ferry_auth::Users::default();
    for (name, password) in [
        ("alice", "wonderland"),
        ("bob", "builder"),
        ("root", "admin-pw"),
    ] {
        let credentials =
            ferry_auth::Credentials::new(password, ferry_auth::MIN_ITERATIONS).unwrap();
        users.insert(name, credentials).unwrap();
    }
    users
        .set_tags("root", &["administrator".to_owned()])
        .unwrap();
    users.save(&users_path).unwrap();
    let users_arg = dir.arg("users");
    let b = Ferryd::start_mgmt(&["--auth", "yes", "--users-file", &users_arg]);
    let admin = Http::as_user(b.mgmt_addr.unwrap(), "root", "admin-pw");
    let (_, login, _) = amqp091::login_then(
        plain(b.addr),
        &mut Plain("alice", "wonderland"),
        None,
        None,
        true,
        &mut || {
            admin.delete("/api/users/alice").expect(204);
        },
    );
    match login {
        Login::Closed(530, text) => assert!(text.contains("user 'alice' was deleted"), "{text}"),
        other => panic!("expected the open refused with 530, got {other:?}"),
    }
    // Only the deleted user's logins: bob's connection opens and works.
    let (_, login, conn) = amqp091::login(
        plain(b.addr),
        &mut Plain("bob", "builder"),
        None,
        None,
        true,
    );
    assert_eq!(login, Login::Open);
    conn.unwrap().round_trip(1, 10);
}

/// `ferry user remove` edits the users file while ferryd runs: the removed user's open
/// connection is closed within the file watcher's second (as management's delete closes
/// it), and another user's carries on.
#[test]
fn a_user_removed_from_the_users_file_is_cut_off() {
    let dir = TempDir::new("removed-from-file");
    let b = secure_broker(&dir, &[]);
    let path = dir.path("users");
    let mut users = ferry_auth::Users::load(&path).unwrap().unwrap();
    let bob = ferry_auth::Credentials::new("builder", ferry_auth::MIN_ITERATIONS).unwrap();
    users.insert("bob", bob).unwrap();
    users.save(&path).unwrap();
    let open = |user: &'static str, password: &'static str| {
        let (_, login, conn) =
            amqp091::login(plain(b.addr), &mut Plain(user, password), None, None, true);
        assert_eq!(login, Login::Open, "{user}");
        conn.unwrap()
    };
    let mut alice = open("alice", "wonderland");
    let mut bob = open("bob", "builder");
    alice.round_trip(1, 10);
    // As `ferry user remove alice` saves it. A login re-reads the file at once, so the
    // removal may be noticed there rather than by the watcher.
    let alice_record = users.get("alice").unwrap().clone();
    users.remove("alice");
    users.save(&path).unwrap();
    let _bob_again = open("bob", "builder");
    // alice added back (her record as it was) and logged in again before the watcher acts:
    // that connection is somebody new, and stays.
    users.insert("alice", alice_record).unwrap();
    users.save(&path).unwrap();
    let mut alice_again = open("alice", "wonderland");
    let (code, text) = alice.close_received().expect("alice's connection closed");
    assert_eq!(code, 320, "{text}");
    assert!(
        text.contains("user 'alice' was removed from the users file"),
        "{text}"
    );
    bob.round_trip(1, 10);
    // Past the watcher's next look too.
    std::thread::sleep(Duration::from_millis(1500));
    assert!(alice_again.opens_a_channel());
}

#[test]
fn tls_carries_both_protocols() {
    let pki = Pki::new();
    let dir = TempDir::new("tls");
    let b = tls_broker(&pki, &dir, &[]);
    let tls_addr = b.tls_addr.unwrap();
    let config = pki.client_config(None);
    let (offered, ok) = amqp010::login(
        tls(tls_addr, config.clone()),
        &mut Plain("alice", "wonderland"),
    );
    assert_eq!(ok, Login::Open);
    assert!(
        !offered.contains(&"EXTERNAL".to_string()),
        "no client certificate"
    );
    let (_, ok, conn) = amqp091::login(
        tls(tls_addr, config.clone()),
        &mut Scram::new("alice", "wonderland"),
        None,
        None,
        true,
    );
    assert_eq!(ok, Login::Open);
    // Enough data both ways to fill many TLS records and the socket buffers.
    conn.unwrap().round_trip(200, 20_000);
    let wrong = amqp010::login(tls(tls_addr, config), &mut Plain("alice", "nope")).1;
    assert_eq!(wrong, Login::Closed(320, REFUSED_010.into()));
    // The plain port still works beside it.
    assert_eq!(
        amqp010::login(plain(b.addr), &mut Plain("alice", "wonderland")).1,
        Login::Open
    );
}

#[test]
fn require_encryption_closes_the_plain_port_to_everyone() {
    let pki = Pki::new();
    let dir = TempDir::new("require-encryption");
    let b = tls_broker(&pki, &dir, &["--require-encryption"]);
    for header in [
        &ferry_amqp010::PROTOCOL_HEADER[..],
        &ferry_amqp091::PROTOCOL_HEADER[..],
    ] {
        let mut s = tcp(b.addr);
        let _ = s.write_all(header);
        let mut buf = [0u8; 8];
        // Closed at once: end of stream or a reset, not an answer and not a timeout.
        match s.read(&mut buf) {
            Ok(0) => {}
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
            other => panic!("an unencrypted client was not turned away: {other:?}"),
        }
    }
    let tls_addr = b.tls_addr.unwrap();
    let config = pki.client_config(None);
    let ok = amqp010::login(
        tls(tls_addr, config.clone()),
        &mut Plain("alice", "wonderland"),
    )
    .1;
    assert_eq!(ok, Login::Open);
    let (_, ok, _) = amqp091::login(
        tls(tls_addr, config),
        &mut Plain("alice", "wonderland"),
        None,
        None,
        true,
    );
    assert_eq!(ok, Login::Open);
    let (_, log) = b.terminate();
    assert!(log.contains("refusing unencrypted connection"), "{log}");
}

#[test]
fn external_logs_in_as_the_certificate_common_name() {
    let pki = Pki::new();
    let dir = TempDir::new("external");
    let ca = pki.dir.arg("ca.pem");
    let b = tls_broker(&pki, &dir, &["--ssl-ca-file", &ca]);
    let (cert, key) = pki.issue("client", "app1", false);
    let with_cert = pki.client_config(Some((&cert, &key)));
    let tls_addr = b.tls_addr.unwrap();
    let (offered, ok) = amqp010::login(tls(tls_addr, with_cert.clone()), &mut Empty("EXTERNAL"));
    assert_eq!(ok, Login::Open);
    assert_eq!(offered[0], "EXTERNAL");
    let (offered, ok, _) = amqp091::login(
        tls(tls_addr, with_cert),
        &mut Empty("EXTERNAL"),
        None,
        None,
        true,
    );
    assert_eq!(ok, Login::Open);
    assert_eq!(offered[0], "EXTERNAL");
    // Client certificates are optional without --ssl-require-client-authentication.
    let without = pki.client_config(None);
    let refused = amqp010::login(tls(tls_addr, without.clone()), &mut Empty("EXTERNAL")).1;
    assert_eq!(refused, Login::Closed(320, REFUSED_010.into()));
    assert_eq!(
        amqp010::login(tls(tls_addr, without), &mut Plain("alice", "wonderland")).1,
        Login::Open
    );
    let (_, log) = b.terminate();
    assert!(log.contains("user=app1"), "{log}");
}

#[test]
fn required_client_certificates_turn_away_clients_without_one() {
    let pki = Pki::new();
    let dir = TempDir::new("require");
    let ca = pki.dir.arg("ca.pem");
    let b = tls_broker(
        &pki,
        &dir,
        &["--ssl-ca-file", &ca, "--ssl-require-client-authentication"],
    );
    let tls_addr = b.tls_addr.unwrap();
    let mut s = tls(tls_addr, pki.client_config(None));
    // TLS 1.3: the client learns of the refusal when it reads.
    let _ = s.write_all(&ferry_amqp010::PROTOCOL_HEADER);
    let _ = s.flush();
    let mut buf = [0u8; 8];
    assert!(
        s.read_exact(&mut buf).is_err(),
        "a client without a certificate got in"
    );
    let (cert, key) = pki.issue("client", "app2", false);
    let with_cert = pki.client_config(Some((&cert, &key)));
    assert_eq!(
        amqp010::login(tls(tls_addr, with_cert), &mut Empty("EXTERNAL")).1,
        Login::Open
    );
    // A certificate from another CA is refused too.
    let other = Pki::new();
    let (cert, key) = other.issue("client", "mallory", false);
    let mut s = tls(tls_addr, pki.client_config(Some((&cert, &key))));
    let _ = s.write_all(&ferry_amqp010::PROTOCOL_HEADER);
    let _ = s.flush();
    assert!(
        s.read_exact(&mut buf).is_err(),
        "a foreign certificate got in"
    );
    let (_, log) = b.terminate();
    assert!(log.contains("TLS handshake failed"), "{log}");
}

#[test]
fn sighup_reloads_the_certificate_for_new_connections() {
    let first = Pki::new();
    let dir = TempDir::new("reload");
    let b = tls_broker(&first, &dir, &[]);
    let tls_addr = b.tls_addr.unwrap();
    let login = |pki: &Pki| {
        let config = pki.client_config(None);
        let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
        let mut conn = rustls::ClientConnection::new(config, name).unwrap();
        let mut sock = tcp(tls_addr);
        // Just the handshake: does the server's certificate chain to this CA?
        while conn.is_handshaking() {
            if conn.complete_io(&mut sock).is_err() {
                return false;
            }
        }
        true
    };
    assert!(login(&first));
    let mut kept = tls(tls_addr, first.client_config(None));
    if let Stream::Tls(t) = &mut kept {
        while t.conn.is_handshaking() {
            t.conn.complete_io(&mut t.sock).unwrap();
        }
    }
    let second = Pki::new();
    let (cert, key) = second.issue("server", "localhost", true);
    let server_cert = first.dir.path("server.pem");
    let server_key = first.dir.path("server.key");
    // A broken file first: the reload fails and the old certificate stays.
    std::fs::write(&server_cert, "not a certificate").unwrap();
    b.signal("HUP");
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        login(&first),
        "a failed reload must keep the old certificate"
    );
    std::fs::copy(&cert, &server_cert).unwrap();
    std::fs::copy(&key, &server_key).unwrap();
    b.signal("HUP");
    let deadline = Instant::now() + TIMEOUT;
    while !login(&second) {
        assert!(
            Instant::now() < deadline,
            "the new certificate was not picked up"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(!login(&first), "new connections get the new certificate");
    // A connection made before the reload carries on.
    assert_eq!(
        amqp010::login(kept, &mut Plain("alice", "wonderland")).1,
        Login::Open
    );
    let (status, log) = b.terminate();
    assert!(status.success(), "{status}: {log}");
    assert!(log.contains("TLS files not reloaded"), "{log}");
    assert!(
        log.contains("TLS certificate, key and CA files reloaded"),
        "{log}"
    );
}

// ---------------------------------------------------------------- AMQP 1.0
/// Runs `sasl` over the 1.0 SASL layer; on success the connection opens a session.
fn amqp1_login(addr: SocketAddr, sasl: &mut dyn Sasl) -> common::amqp1::SaslResult {
    let mut c = common::amqp1::Amqp1::new(Box::new(plain(addr)));
    let mechanism = sasl.mechanism();
    let initial = sasl.initial();
    let result = c.sasl(mechanism, initial, |challenge| sasl.respond(challenge));
    if result == common::amqp1::SaslResult::Ok {
        c.open_and_begin();
    }
    result
}

#[test]
fn sasl_over_amqp1() {
    use common::amqp1::SaslResult;
    let dir = TempDir::new("amqp1");
    let b = secure_broker(&dir, &[]);
    let mut scram = Scram::new("alice", "wonderland");
    assert_eq!(amqp1_login(b.addr, &mut scram), SaslResult::Ok);
    assert!(scram.verified, "the server proved it knows the key");
    assert_eq!(
        amqp1_login(b.addr, &mut Plain("alice", "wonderland")),
        SaslResult::Ok
    );
    let auth = SaslResult::Refused(ferry_amqp1::SaslCode::Auth);
    assert_eq!(amqp1_login(b.addr, &mut Plain("alice", "nope")), auth);
    assert_eq!(amqp1_login(b.addr, &mut Scram::new("alice", "nope")), auth);
    assert_eq!(amqp1_login(b.addr, &mut Empty("ANONYMOUS")), auth);
    // Without SASL, where a login is required: the SASL header, and the end.
    let mut s = tcp(b.addr);
    s.write_all(b"AMQP\x00\x01\x00\x00").unwrap();
    let mut reply = Vec::new();
    let _ = s.read_to_end(&mut reply);
    assert_eq!(reply, b"AMQP\x03\x01\x00\x00");
}
