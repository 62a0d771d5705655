//! `Connection`: connects, negotiates, starts the reader, writer and completion-flush
//! tasks, and opens sessions.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use bytes::Bytes;
use ferry_amqp010::{
    CloseCode, ConnectionClose, Map, SessionAttach, SessionCommandPoint, SessionRequestTimeout, Str,
};
use tokio::net::{TcpStream, ToSocketAddrs};
use tokio::sync::{mpsc, Notify};

use crate::error::ClientError;
use crate::handshake::handshake;
use crate::options::{ConnectOptions, SessionOptions};
use crate::outbound::{run_writer, Outbound};
use crate::reader::{run_reader, ReaderConfig};
use crate::session::{Session, SessionShared};
use crate::subscription::RawDelivery;

/// Handed to the reader task ahead of the traffic that needs it: the registration is
/// queued before the attach or subscribe is written, and the reader drains its queue
/// before processing what it read, so it cannot see the answer first.
#[derive(Debug)]
pub(crate) enum Registration {
    Session {
        channel: u16,
        session: Arc<SessionShared>,
    },
    Destination {
        channel: u16,
        destination: Bytes,
        tx: mpsc::UnboundedSender<Vec<RawDelivery>>,
        /// `Some(batch)`: the reader completes each transfer as it arrives, sending
        /// `session.completed` every `batch` (credit mode, where completion returns no
        /// credit). `None`: completed when the application takes it (window mode).
        complete_on_receipt: Option<u32>,
    },
}

/// A deferred `session.completed`.
#[derive(Debug)]
pub(crate) struct FlushRequest {
    pub at: Instant,
    pub session: Weak<SessionShared>,
}

#[derive(Debug)]
pub(crate) struct ConnShared {
    pub out: Arc<Outbound>,
    pub max_frame_size: usize,
    pub channel_max: u16,
    registrations: mpsc::UnboundedSender<Registration>,
    pub flushes: mpsc::UnboundedSender<FlushRequest>,
    channels: Mutex<BTreeSet<u16>>,
    /// Notified when the reader task has ended (`out.error()` is then set).
    pub finished: Notify,
    name_prefix: String,
    session_seq: AtomicU64,
    session_options: SessionOptions,
    pub server_properties: Map,
}

impl ConnShared {
    pub fn register(&self, r: Registration) -> Result<(), ClientError> {
        self.registrations
            .send(r)
            .map_err(|_| self.out.error().unwrap_or(ClientError::Closed))
    }

    fn alloc_channel(&self) -> Result<u16, ClientError> {
        let mut used = self.channels.lock().unwrap_or_else(|e| e.into_inner());
        let free = (0..self.channel_max.max(1)).find(|c| !used.contains(c));
        match free {
            Some(c) => {
                used.insert(c);
                Ok(c)
            }
            None => Err(ClientError::NoChannel(self.channel_max)),
        }
    }

    pub fn free_channel(&self, channel: u16) {
        self.channels
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&channel);
    }
}

static CONNECTION_SEQ: AtomicU64 = AtomicU64::new(0);

/// An open 0-10 connection. Dropping it (or [`Connection::close`]) closes the
/// connection, ending its sessions.
#[derive(Debug)]
pub struct Connection {
    shared: Arc<ConnShared>,
}

impl Connection {
    pub async fn connect(
        addr: impl ToSocketAddrs,
        options: ConnectOptions,
    ) -> Result<Connection, ClientError> {
        let mut stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(options.tcp_nodelay)?;
        let (negotiated, leftover) = handshake(&mut stream, &options).await?;
        let (read_half, write_half) = stream.into_split();

        let (reg_tx, reg_rx) = mpsc::unbounded_channel();
        let (flush_tx, flush_rx) = mpsc::unbounded_channel();
        let out = Arc::new(Outbound::new(options.write_high_water));
        let seq = CONNECTION_SEQ.fetch_add(1, Ordering::Relaxed);
        let started = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let shared = Arc::new(ConnShared {
            out: out.clone(),
            max_frame_size: usize::from(negotiated.max_frame_size),
            channel_max: negotiated.channel_max,
            registrations: reg_tx,
            flushes: flush_tx,
            channels: Mutex::new(BTreeSet::new()),
            finished: Notify::new(),
            name_prefix: format!("ferry-{}-{started:x}-{seq}", std::process::id()),
            session_seq: AtomicU64::new(0),
            session_options: options.session.clone(),
            server_properties: negotiated.server_properties.clone(),
        });

        let heartbeat = (negotiated.heartbeat > 0)
            .then(|| Duration::from_secs(u64::from(negotiated.heartbeat)));
        tokio::spawn(run_writer(out, write_half, heartbeat));
        tokio::spawn(run_flusher(flush_rx));
        tokio::spawn(run_reader(
            shared.clone(),
            read_half,
            leftover,
            reg_rx,
            ReaderConfig {
                idle_timeout: heartbeat.map(|h| h * 2),
                max_message_size: options.max_message_size,
            },
        ));
        Ok(Connection { shared })
    }

    /// The largest frame both sides accept, as negotiated.
    pub fn max_frame_size(&self) -> usize {
        self.shared.max_frame_size
    }

    pub fn channel_max(&self) -> u16 {
        self.shared.channel_max
    }

    pub fn server_properties(&self) -> &Map {
        &self.shared.server_properties
    }

    /// Why the connection ended, if it has.
    pub fn error(&self) -> Option<ClientError> {
        self.shared.out.error()
    }

    pub async fn session(&self) -> Result<Session, ClientError> {
        self.session_with(self.shared.session_options.clone()).await
    }

    /// Attaches a new session on the lowest free channel, with a name unique to this
    /// process, connection and session.
    pub async fn session_with(&self, options: SessionOptions) -> Result<Session, ClientError> {
        let conn = &self.shared;
        let channel = conn.alloc_channel()?;
        let seq = conn.session_seq.fetch_add(1, Ordering::Relaxed);
        let name = Bytes::from(format!("{}-{seq}", conn.name_prefix));
        let (core, attached) = SessionShared::new(channel, name.clone(), conn.clone(), options);
        let session = Session::new(core.clone());
        let begin = conn
            .register(Registration::Session {
                channel,
                session: core.clone(),
            })
            .and_then(|()| {
                core.control(
                    &SessionAttach {
                        name: Some(name),
                        force: false,
                    }
                    .into(),
                )?;
                // We keep nothing for resuming, so ask for no detached lifetime.
                core.control(&SessionRequestTimeout { timeout: Some(0) }.into())?;
                core.control(
                    &SessionCommandPoint {
                        command_id: Some(0),
                        command_offset: Some(0),
                    }
                    .into(),
                )
            });
        if let Err(e) = begin {
            core.fail(e.clone());
            conn.free_channel(channel);
            return Err(e);
        }
        attached.await.unwrap_or(Err(ClientError::Closed))?;
        Ok(session)
    }

    /// Sends `connection.close` and waits for the server's `close-ok`.
    pub async fn close(self) -> Result<(), ClientError> {
        self.shutdown().await
    }

    async fn shutdown(&self) -> Result<(), ClientError> {
        let sent = self.shared.out.append(|buf| {
            Ok(ferry_amqp010::write_control(
                buf,
                0,
                &ConnectionClose {
                    reply_code: Some(CloseCode::Normal),
                    reply_text: Some(Str::from("")),
                }
                .into(),
            )?)
        });
        if sent.is_ok() {
            loop {
                let finished = self.shared.finished.notified();
                tokio::pin!(finished);
                finished.as_mut().enable();
                if self.shared.out.error().is_some() {
                    break;
                }
                finished.await;
            }
        }
        match self.shared.out.error() {
            None | Some(ClientError::Closed) => Ok(()),
            Some(ClientError::ConnectionClosed { code: 200, .. }) => Ok(()),
            Some(e) => Err(e),
        }
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        // Begin the close; the reader ends the connection on close-ok.
        let _ = self.shared.out.append(|buf| {
            Ok(ferry_amqp010::write_control(
                buf,
                0,
                &ConnectionClose {
                    reply_code: Some(CloseCode::Normal),
                    reply_text: None,
                }
                .into(),
            )?)
        });
    }
}

/// Runs deferred completion flushes in request order. Sessions of one connection
/// normally share one delay, so deadlines arrive in order; a session with a shorter
/// delay behind a longer one is at worst flushed at the longer deadline.
async fn run_flusher(mut rx: mpsc::UnboundedReceiver<FlushRequest>) {
    while let Some(request) = rx.recv().await {
        tokio::time::sleep_until(request.at.into()).await;
        if let Some(session) = request.session.upgrade() {
            session.flush_completions();
        }
    }
}
