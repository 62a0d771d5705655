//! The reader task: owns the socket's read half, cuts frames, assembles them per
//! channel and dispatches. Per-channel state (assembler, incoming command ids,
//! destinations) lives only here, so dispatching a transfer needs no lock of its own.
//! Consecutive transfers for one destination are handed over as a batch: one channel send
//! per run of them in a read, rather than one per message.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use ferry_amqp010::{
    decode_frame, write_control, Assembler, AssemblyError, Command, CommandHeader,
    ConnectionCloseOk, Control, DetachCode, Incoming, SessionDetached, SessionTimeout,
};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::mpsc;

use crate::connection::{ConnShared, Registration};
use crate::error::ClientError;
use crate::handshake::closed;
use crate::session::SessionShared;
use crate::subscription::RawDelivery;

const READ_RESERVE: usize = 64 * 1024;

pub(crate) struct ReaderConfig {
    /// No octets for this long ends the connection (twice the heartbeat).
    pub idle_timeout: Option<Duration>,
    pub max_message_size: usize,
}

/// Looked up for every frame read, so not SipHash: the keys are our own channel numbers
/// and the destination names we subscribed with.
type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

struct Channel {
    assembler: Assembler,
    session: Option<Arc<SessionShared>>,
    /// The id the server's next command gets (set by its `session.command-point`).
    next_in: u32,
    destinations: FastMap<Bytes, Destination>,
}

struct Destination {
    tx: mpsc::UnboundedSender<Vec<RawDelivery>>,
    complete_on_receipt: Option<u32>,
}

/// Transfers read for one destination and not yet handed over. Sent before the reader
/// waits for the socket and before it acts on anything but another transfer, so the
/// application sees deliveries in order, and before whatever the server sent after them
/// (an exception, the session's or connection's end).
pub(crate) struct Batch {
    pub tx: mpsc::UnboundedSender<Vec<RawDelivery>>,
    pub session: Arc<SessionShared>,
    pub deliveries: Vec<RawDelivery>,
}

impl Batch {
    pub fn send(self) {
        if let Err(mpsc::error::SendError(unwanted)) = self.tx.send(self.deliveries) {
            // The subscription is gone; the server still needs these completed.
            for d in unwanted.iter().filter(|d| !d.completed) {
                self.session
                    .complete_incoming(d.id, if d.sync { 1 } else { u32::MAX });
            }
        }
    }
}

/// What the connection loop must do after a frame.
enum Next {
    Continue,
    /// Our `connection.close` was answered.
    Done,
}

struct Reader {
    conn: Arc<ConnShared>,
    channels: FastMap<u16, Channel>,
    max_message_size: usize,
    batch: Option<Batch>,
}

pub(crate) async fn run_reader<R: AsyncRead + Unpin>(
    conn: Arc<ConnShared>,
    mut source: R,
    mut buf: BytesMut,
    mut registrations: mpsc::UnboundedReceiver<Registration>,
    config: ReaderConfig,
) {
    let mut reader = Reader {
        conn: conn.clone(),
        channels: FastMap::default(),
        max_message_size: config.max_message_size,
        batch: None,
    };
    let result = async {
        loop {
            while let Ok(r) = registrations.try_recv() {
                reader.register(r);
            }
            while let Some(frame) = decode_frame(&mut buf, conn.max_frame_size)? {
                if let Next::Done = reader.frame(frame)? {
                    return Ok::<(), ClientError>(());
                }
            }
            reader.hand_over();
            if buf.capacity() - buf.len() < READ_RESERVE / 4 {
                buf.reserve(READ_RESERVE);
            }
            let read = source.read_buf(&mut buf);
            let n = match config.idle_timeout {
                Some(t) => tokio::time::timeout(t, read)
                    .await
                    .map_err(|_| ClientError::HeartbeatTimeout)??,
                None => read.await?,
            };
            if n == 0 {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    "the server closed the connection",
                )
                .into());
            }
            // Registrations queued before what was just read was sent.
            while let Ok(r) = registrations.try_recv() {
                reader.register(r);
            }
        }
    }
    .await;
    reader.hand_over();
    let error = result.err().unwrap_or(ClientError::Closed);
    tracing::debug!(%error, "connection ended");
    conn.out.fail(error.clone());
    registrations.close();
    while let Ok(r) = registrations.try_recv() {
        reader.register(r);
    }
    for (channel, ch) in reader.channels.drain() {
        if let Some(s) = ch.session {
            s.fail(error.clone());
            conn.free_channel(channel);
        }
    }
    conn.finished.notify_waiters();
}

impl Reader {
    fn hand_over(&mut self) {
        if let Some(batch) = self.batch.take() {
            batch.send();
        }
    }

    fn channel(&mut self, channel: u16) -> &mut Channel {
        let max = self.max_message_size;
        self.channels.entry(channel).or_insert_with(|| Channel {
            assembler: Assembler::new(max),
            session: None,
            next_in: 0,
            destinations: FastMap::default(),
        })
    }

    fn register(&mut self, r: Registration) {
        match r {
            Registration::Session { channel, session } => {
                let ch = self.channel(channel);
                ch.session = Some(session);
                ch.next_in = 0;
                ch.destinations.clear();
            }
            Registration::Destination {
                channel,
                destination,
                tx,
                complete_on_receipt,
            } => {
                if let Some(ch) = self.channels.get_mut(&channel) {
                    ch.destinations.insert(
                        destination,
                        Destination {
                            tx,
                            complete_on_receipt,
                        },
                    );
                }
            }
        }
    }

    fn frame(&mut self, frame: ferry_amqp010::Frame) -> Result<Next, ClientError> {
        let channel = frame.header.channel;
        let ch = self.channel(channel);
        match ch.assembler.push(frame) {
            Ok(None) => Ok(Next::Continue),
            Ok(Some(Incoming::Control(c))) => {
                self.hand_over();
                self.control(channel, c)
            }
            Ok(Some(Incoming::Command {
                header,
                command,
                message_header,
                body,
                ..
            })) => {
                if !matches!(command, Command::MessageTransfer(_)) {
                    self.hand_over();
                }
                self.command(channel, header, command, message_header, body);
                Ok(Next::Continue)
            }
            Err(AssemblyError::Command(e)) => {
                self.hand_over();
                // It still took an id; complete it so the server's books balance.
                tracing::warn!(error = %e, channel, "undecodable command from the server");
                if let Some(ch) = self.channels.get_mut(&channel) {
                    let id = ch.next_in;
                    ch.next_in = id.wrapping_add(1);
                    if let Some(s) = &ch.session {
                        s.complete_incoming(id, 1);
                    }
                }
                Ok(Next::Continue)
            }
            Err(e) => Err(e.into()),
        }
    }

    fn control(&mut self, channel: u16, control: Control) -> Result<Next, ClientError> {
        match control {
            Control::ConnectionClose(c) => {
                let _ = self
                    .conn
                    .out
                    .append(|buf| Ok(write_control(buf, 0, &ConnectionCloseOk {}.into())?));
                return Err(closed(&c));
            }
            Control::ConnectionCloseOk(_) => return Ok(Next::Done),
            Control::ConnectionHeartbeat(_) => return Ok(Next::Continue),
            _ => {}
        }
        let Some(ch) = self.channels.get_mut(&channel) else {
            return Ok(Next::Continue);
        };
        let Some(session) = ch.session.clone() else {
            tracing::debug!(channel, control = control.name(), "control for no session");
            return Ok(Next::Continue);
        };
        match control {
            Control::SessionAttached(_) => session.on_attached(),
            Control::SessionDetached(d) => {
                self.end_session(channel);
                session.on_detached(d.code);
            }
            Control::SessionDetach(_) => {
                let _ = session.control_on_channel(
                    &SessionDetached {
                        name: Some(session.name.clone()),
                        code: Some(DetachCode::Normal),
                    }
                    .into(),
                );
                self.end_session(channel);
                session.on_detached(None);
            }
            Control::SessionCommandPoint(p) => ch.next_in = p.command_id.unwrap_or_default(),
            Control::SessionCompleted(c) => {
                if let Some(commands) = c.commands {
                    session.on_completed(&commands);
                    if c.timely_reply {
                        session.known_completed_reply(commands);
                    }
                }
            }
            Control::SessionKnownCompleted(k) => {
                if let Some(commands) = k.commands {
                    session.on_known_completed(&commands);
                }
            }
            Control::SessionFlush(f) => session.on_flush(&f, ch.next_in),
            Control::SessionRequestTimeout(_) => {
                // Nothing is kept for resuming, so the only honest lifetime is zero.
                let _ = session.control(&SessionTimeout { timeout: Some(0) }.into());
            }
            Control::SessionGap(g) => {
                if let Some(ids) = g.commands {
                    session.complete_incoming_set(&ids);
                }
            }
            Control::SessionTimeout(_)
            | Control::SessionExpected(_)
            | Control::SessionConfirmed(_) => {}
            other => {
                return Err(ClientError::Protocol(format!(
                    "unexpected {} on channel {channel}",
                    other.name()
                )))
            }
        }
        Ok(Next::Continue)
    }

    fn end_session(&mut self, channel: u16) {
        if self.channels.remove(&channel).is_some() {
            self.conn.free_channel(channel);
        }
    }

    fn command(
        &mut self,
        channel: u16,
        header: CommandHeader,
        command: Command,
        message_header: Option<Bytes>,
        body: Bytes,
    ) {
        let Some(ch) = self.channels.get_mut(&channel) else {
            return;
        };
        let Some(session) = &ch.session else {
            tracing::debug!(channel, command = command.name(), "command for no session");
            return;
        };
        let id = ch.next_in;
        ch.next_in = id.wrapping_add(1);
        // A sync command wants its completion now; others are batched.
        let threshold = if header.sync { 1 } else { u32::MAX };
        match command {
            Command::MessageTransfer(t) => {
                let destination = t.destination.unwrap_or_default();
                let wanted = ch.destinations.get(destination.as_bytes());
                if let Some(dest) = wanted.filter(|d| !d.tx.is_closed()) {
                    let on_receipt = dest.complete_on_receipt;
                    let delivery = RawDelivery {
                        id,
                        destination,
                        header: message_header,
                        body,
                        sync: header.sync,
                        completed: on_receipt.is_some(),
                    };
                    match &mut self.batch {
                        Some(batch) if batch.tx.same_channel(&dest.tx) => {
                            batch.deliveries.push(delivery)
                        }
                        other => {
                            let fresh = Batch {
                                tx: dest.tx.clone(),
                                session: session.clone(),
                                deliveries: vec![delivery],
                            };
                            if let Some(previous) = other.replace(fresh) {
                                previous.send();
                            }
                        }
                    }
                    // In credit mode completion returns no credit, so it is reported as
                    // transfers arrive, however slowly the application takes them: brokers
                    // keep every uncompleted transfer (Broker-J fails the session past
                    // 65,536). In window mode completion is what refunds credit, so it
                    // waits for the application (see Subscription).
                    if let Some(batch) = on_receipt {
                        session.complete_incoming(id, threshold.min(batch));
                    }
                    return;
                }
                ch.destinations.remove(destination.as_bytes());
                tracing::debug!(id, ?destination, "transfer for no subscription");
                session.complete_incoming(id, threshold);
            }
            Command::ExecutionResult(r) => {
                if let Some(command_id) = r.command_id {
                    session.on_result(command_id, r.value);
                }
                session.complete_incoming(id, threshold);
            }
            Command::ExecutionException(e) => {
                tracing::debug!(?e, "execution exception");
                session.on_exception(&e);
                session.complete_incoming(id, 1);
            }
            _ => session.complete_incoming(id, threshold),
        }
    }
}
