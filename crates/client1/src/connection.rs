//! One connection with one session, driven by whoever owns it: no background tasks. Every
//! call appends frames to one outbound buffer; calls that must wait (an attach, credit,
//! room in the settlement window, a delivery) write what is buffered and read whatever
//! has arrived, decoding all of it, so transfers, flows and dispositions travel in large
//! batches both ways.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes, BytesMut};
use ferry_amqp1::{
    decode_frame, write_empty_frame, write_frame, write_sasl_frame, Accepted, Attach, Begin, Close,
    DeliveryState, Detach, Disposition, End, Flow, FrameBody, FrameType, LinkTarget, Message, Open,
    Performative, ReceiverSettleMode, Role, SaslCode, SaslFrame, SaslInit, SenderSettleMode,
    Source, Symbol, Target, Transfer, MIN_MAX_FRAME_SIZE, PROTOCOL_HEADER, SASL_PROTOCOL_HEADER,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, ToSocketAddrs};

use crate::error::ClientError;
use crate::options::{ConnectOptions, Mechanism, ReceiveOptions, SendMode};
use crate::settle::{Outgoing, Ranges};
use crate::wire::{self, Publication, TransferHead, MAX_TRANSFER_HEAD};

/// Read-buffer space kept free before each read.
const READ_RESERVE: usize = 64 * 1024;
/// While writing, what has arrived is read into memory only up to this much.
const READ_WHILE_WRITING_MAX: usize = 16 << 20;
/// The one session's channel.
const CHANNEL: u16 = 0;
/// More than a transfer performative and frame header take (handle, delivery id and tag,
/// format, settled: a few dozen octets), so a message this much below max-frame-size
/// fits one frame.
const TRANSFER_HEAD_MAX: usize = 256;
/// Handles the peer may use (our `begin.handle-max`).
const HANDLE_MAX: u32 = 1023;
/// What we tell the peer of our outgoing window: we never hold transfers back for it.
const OUTGOING_WINDOW: u32 = i32::MAX as u32;

/// A sending link, by its index on the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SenderId(u16);

/// A receiving link, by its index on the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ReceiverId(u16);

/// A message delivered on one of our receiving links, its transfers joined.
#[derive(Debug, Clone)]
pub struct Delivery {
    pub delivery_id: u32,
    /// The sender settled it (at most once): nothing to settle.
    pub settled: bool,
    /// The message's octets (its sections), a slice of what was read when it came in one
    /// frame.
    pub payload: Bytes,
}

impl Delivery {
    /// The message body: its data section (a slice of the payload when there is one), or
    /// its data sections joined.
    pub fn body(&self) -> Result<Bytes, ClientError> {
        if let Some(b) = wire::data_body(&self.payload) {
            return Ok(b);
        }
        let raw = ferry_amqp1::RawMessage::parse(self.payload.clone())?;
        match raw.body() {
            ferry_amqp1::RawBody::Data(parts) if parts.len() == 1 => {
                Ok(parts.first().unwrap_or_default())
            }
            ferry_amqp1::RawBody::Data(parts) => {
                Ok(Bytes::from(parts.iter().flatten().collect::<Vec<u8>>()))
            }
            ferry_amqp1::RawBody::Empty => Ok(Bytes::new()),
            _ => Err(ClientError::Protocol(
                "the message body is not made of data sections".into(),
            )),
        }
    }

    /// Every section, decoded.
    pub fn message(&self) -> Result<Message, ClientError> {
        Ok(Message::decode(self.payload.clone())?)
    }
}

#[derive(Debug, Clone)]
enum LinkState {
    /// Our attach is out; the peer's is awaited.
    Attaching,
    Attached,
    /// The peer answered with a null terminus: its detach, with the reason, follows.
    Refused,
    /// Detached by us (waiting for the peer's detach) or by the peer.
    Detached(Option<ClientError>),
}

#[derive(Debug)]
struct SenderLink {
    mode: SendMode,
    delivery_count: u32,
    credit: u32,
    /// Sent unsettled and not yet settled by the peer.
    outstanding: u64,
    /// Flows the peer sent for this link (a `sync` waits for the next).
    flows_received: u64,
    /// Settled by the peer with an outcome other than accepted.
    not_accepted: u64,
    last_outcome: &'static str,
}

#[derive(Debug)]
struct ReceiverLink {
    options: ReceiveOptions,
    /// The sender's delivery-count as far as we know it.
    delivery_count: u32,
    /// Credit left as the sender sees it.
    credit: u32,
    queue: VecDeque<Delivery>,
    /// A delivery whose transfers are still arriving.
    partial: Option<(Delivery, BytesMut)>,
}

#[derive(Debug)]
enum Role2 {
    Sender(SenderLink),
    Receiver(ReceiverLink),
}

#[derive(Debug)]
struct Link {
    name: String,
    handle: u32,
    state: LinkState,
    role: Role2,
}

impl Link {
    fn check(&self) -> Result<(), ClientError> {
        match &self.state {
            LinkState::Detached(Some(e)) => Err(e.clone()),
            LinkState::Detached(None) => Err(ClientError::LinkDetached {
                link: self.name.clone(),
                condition: String::new(),
                description: "detached".into(),
            }),
            _ => Ok(()),
        }
    }
}

/// What the peer said about itself in its open.
#[derive(Debug, Clone, Default)]
pub struct PeerInfo {
    pub container_id: String,
    pub max_frame_size: u32,
    pub offered_capabilities: Vec<String>,
    /// The SASL mechanism used, if any.
    pub mechanism: Option<String>,
}

pub struct Connection {
    stream: TcpStream,
    rbuf: BytesMut,
    wbuf: BytesMut,
    flush_at: usize,
    /// The largest frame we accept (announced in our open).
    our_max_frame: u32,
    /// The largest frame the peer accepts.
    max_frame: usize,
    max_message: usize,
    failed: Option<ClientError>,
    /// Send an empty frame after this long without writing (half the peer's idle time-out).
    keepalive: Option<Duration>,
    last_write: Instant,
    info: PeerInfo,
    session_mapped: bool,
    // ---- the session's flow state
    next_outgoing_id: u32,
    remote_incoming_window: u32,
    next_incoming_id: u32,
    incoming_window: u32,
    incoming_left: u32,
    next_delivery_id: u32,
    outgoing: Outgoing,
    to_accept: Ranges,
    // ---- links
    links: Vec<Link>,
    /// The peer's handle → index into `links`.
    remote: Vec<Option<u16>>,
    /// A flow (session fields, and link fields for these) is owed.
    flows_due: Vec<u16>,
    session_flow_due: bool,
    /// Reads decoded so far: a wait that decoded input while writing has news already.
    reads: u64,
}

impl Connection {
    /// Connects, logs in (SASL), opens the connection and begins the session.
    pub async fn connect(
        addr: impl ToSocketAddrs,
        options: &ConnectOptions,
    ) -> Result<Connection, ClientError> {
        tokio::time::timeout(options.connect_timeout, Self::connect_inner(addr, options))
            .await
            .map_err(|_| ClientError::Protocol("timed out connecting".into()))?
    }

    async fn connect_inner(
        addr: impl ToSocketAddrs,
        options: &ConnectOptions,
    ) -> Result<Connection, ClientError> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(options.tcp_nodelay)?;
        let mut conn = Connection {
            stream,
            rbuf: BytesMut::with_capacity(READ_RESERVE),
            wbuf: BytesMut::with_capacity(options.flush_at * 2),
            flush_at: options.flush_at.max(1),
            our_max_frame: options.max_frame_size.max(MIN_MAX_FRAME_SIZE),
            max_frame: MIN_MAX_FRAME_SIZE as usize,
            max_message: options.max_message_size,
            failed: None,
            keepalive: None,
            last_write: Instant::now(),
            info: PeerInfo::default(),
            session_mapped: false,
            next_outgoing_id: 0,
            remote_incoming_window: 0,
            next_incoming_id: 0,
            incoming_window: options.incoming_window.max(2),
            incoming_left: options.incoming_window.max(2),
            next_delivery_id: 0,
            outgoing: Outgoing::new(0),
            to_accept: Ranges::default(),
            links: Vec::new(),
            remote: Vec::new(),
            flows_due: Vec::new(),
            session_flow_due: false,
            reads: 0,
        };
        if options.mechanism != Mechanism::None {
            conn.sasl(options).await?;
        }
        conn.open(options).await?;
        Ok(conn)
    }

    async fn read_header(&mut self) -> Result<[u8; 8], ClientError> {
        while self.rbuf.len() < 8 {
            if self.stream.read_buf(&mut self.rbuf).await? == 0 {
                return Err(eof());
            }
        }
        let h = self.rbuf.split_to(8);
        let mut header = [0u8; 8];
        header.copy_from_slice(&h);
        Ok(header)
    }

    async fn sasl(&mut self, options: &ConnectOptions) -> Result<(), ClientError> {
        self.stream.write_all(&SASL_PROTOCOL_HEADER).await?;
        let header = self.read_header().await?;
        if header != SASL_PROTOCOL_HEADER {
            return Err(ClientError::Sasl(format!(
                "the server answered the SASL header with {header:?}"
            )));
        }
        let offered = match self.next_sasl().await? {
            SaslFrame::SaslMechanisms(m) => m.sasl_server_mechanisms,
            other => {
                return Err(ClientError::Sasl(format!(
                    "expected sasl-mechanisms, got {}",
                    other.name()
                )))
            }
        };
        let offers = |name: &str| offered.iter().any(|m| m.as_str() == name);
        let plain = match options.mechanism {
            Mechanism::Plain => true,
            Mechanism::Anonymous => false,
            _ => options.username.is_some() && offers("PLAIN") || !offers("ANONYMOUS"),
        };
        let (mechanism, response) = if plain {
            let user = options.username.as_deref().unwrap_or("guest");
            let password = options.password.as_deref().unwrap_or("guest");
            ("PLAIN", Bytes::from(format!("\0{user}\0{password}")))
        } else {
            ("ANONYMOUS", Bytes::from_static(b"anonymous"))
        };
        if !offers(mechanism) {
            let names: Vec<&str> = offered.iter().map(|m| m.as_str()).collect();
            return Err(ClientError::Sasl(format!(
                "the server does not offer {mechanism} (it offers {})",
                names.join(" ")
            )));
        }
        let mut out = BytesMut::new();
        write_sasl_frame(
            &mut out,
            &SaslInit {
                mechanism: Symbol::from_static(mechanism),
                initial_response: Some(response),
                hostname: options.hostname.as_deref().map(Into::into),
            }
            .into(),
        );
        self.stream.write_all(&out).await?;
        match self.next_sasl().await? {
            SaslFrame::SaslOutcome(o) if o.code == SaslCode::Ok => {
                self.info.mechanism = Some(mechanism.to_string());
                Ok(())
            }
            SaslFrame::SaslOutcome(o) => Err(ClientError::Sasl(format!(
                "{mechanism} refused ({:?})",
                o.code
            ))),
            SaslFrame::SaslChallenge(_) => Err(ClientError::Sasl(format!(
                "a challenge for {mechanism}, which has none"
            ))),
            other => Err(ClientError::Sasl(format!(
                "expected sasl-outcome, got {}",
                other.name()
            ))),
        }
    }

    async fn next_sasl(&mut self) -> Result<SaslFrame, ClientError> {
        loop {
            if let Some(frame) = decode_frame(&mut self.rbuf, MIN_MAX_FRAME_SIZE)? {
                if frame.frame_type != FrameType::Sasl {
                    return Err(ClientError::Sasl("an AMQP frame during SASL".into()));
                }
                return match frame.decode_body()? {
                    FrameBody::Sasl(s) => Ok(s),
                    _ => Err(ClientError::Sasl("an empty SASL frame".into())),
                };
            }
            if self.stream.read_buf(&mut self.rbuf).await? == 0 {
                return Err(eof());
            }
        }
    }

    async fn open(&mut self, options: &ConnectOptions) -> Result<(), ClientError> {
        self.wbuf.extend_from_slice(&PROTOCOL_HEADER);
        let open = Open {
            // Unique per connection: brokers identify links by container and link name,
            // and Broker-J takes a link over ("steals" it) from another connection of the
            // same container.
            container_id: container_id().into(),
            hostname: options.hostname.as_deref().map(Into::into),
            max_frame_size: self.our_max_frame,
            channel_max: 0,
            ..Open::default()
        };
        write_frame(&mut self.wbuf, 0, &open.into(), &[]);
        let begin = Begin {
            remote_channel: None,
            next_outgoing_id: self.next_outgoing_id,
            incoming_window: self.incoming_window,
            outgoing_window: OUTGOING_WINDOW,
            handle_max: HANDLE_MAX,
            ..Begin::default()
        };
        write_frame(&mut self.wbuf, CHANNEL, &begin.into(), &[]);
        self.flush().await?;
        let header = self.read_header().await?;
        if header != PROTOCOL_HEADER {
            return Err(ClientError::Protocol(format!(
                "the server answered the AMQP header with {header:?}"
            )));
        }
        // The header's read may have brought the open and begin along.
        self.process_or_fail()?;
        while !self.session_mapped {
            self.read_more().await?;
        }
        Ok(())
    }

    pub fn peer(&self) -> &PeerInfo {
        &self.info
    }

    /// Why the connection ended, if it has.
    pub fn error(&self) -> Option<&ClientError> {
        self.failed.as_ref()
    }

    // ---- links

    fn new_link(&mut self, name: String, role: Role2) -> Result<u16, ClientError> {
        self.check()?;
        let index = u16::try_from(self.links.len())
            .ok()
            .filter(|&i| u32::from(i) <= HANDLE_MAX)
            .ok_or_else(|| ClientError::Protocol("too many links on one session".into()))?;
        self.links.push(Link {
            name,
            handle: u32::from(index),
            state: LinkState::Attaching,
            role,
        });
        Ok(index)
    }

    async fn await_attached(&mut self, index: u16) -> Result<(), ClientError> {
        loop {
            let link = &self.links[usize::from(index)];
            link.check()?;
            if matches!(link.state, LinkState::Attached) {
                return Ok(());
            }
            self.read_more().await?;
        }
    }

    /// Attaches a link that sends to `address` (a queue, an exchange, ...) and waits for
    /// the peer's answer.
    pub async fn attach_sender(
        &mut self,
        name: &str,
        address: &str,
        mode: SendMode,
    ) -> Result<SenderId, ClientError> {
        let index = self.new_link(
            name.to_string(),
            Role2::Sender(SenderLink {
                mode,
                delivery_count: 0,
                credit: 0,
                outstanding: 0,
                flows_received: 0,
                not_accepted: 0,
                last_outcome: "",
            }),
        )?;
        let attach = Attach {
            name: name.into(),
            handle: u32::from(index),
            role: Role::Sender,
            snd_settle_mode: match mode {
                SendMode::Settled => SenderSettleMode::Settled,
                SendMode::Unsettled { .. } => SenderSettleMode::Unsettled,
            },
            rcv_settle_mode: ReceiverSettleMode::First,
            source: Some(Source::default()),
            target: Some(LinkTarget::Target(Target {
                address: Some(address.into()),
                ..Target::default()
            })),
            initial_delivery_count: Some(0),
            ..Attach::default()
        };
        write_frame(&mut self.wbuf, CHANNEL, &attach.into(), &[]);
        self.await_attached(index).await?;
        Ok(SenderId(index))
    }

    /// Attaches a link that receives from `address` and, with a credit window, grants it.
    pub async fn attach_receiver(
        &mut self,
        name: &str,
        address: &str,
        options: ReceiveOptions,
    ) -> Result<ReceiverId, ClientError> {
        let index = self.new_link(
            name.to_string(),
            Role2::Receiver(ReceiverLink {
                options,
                delivery_count: 0,
                credit: 0,
                queue: VecDeque::new(),
                partial: None,
            }),
        )?;
        let attach = Attach {
            name: name.into(),
            handle: u32::from(index),
            role: Role::Receiver,
            snd_settle_mode: if options.settled {
                SenderSettleMode::Settled
            } else {
                SenderSettleMode::Unsettled
            },
            rcv_settle_mode: ReceiverSettleMode::First,
            source: Some(Source {
                address: Some(address.into()),
                ..Source::default()
            }),
            target: Some(LinkTarget::Target(Target::default())),
            ..Attach::default()
        };
        write_frame(&mut self.wbuf, CHANNEL, &attach.into(), &[]);
        self.await_attached(index).await?;
        if options.credit_window > 0 {
            self.add_credit(ReceiverId(index), options.credit_window)?;
        }
        Ok(ReceiverId(index))
    }

    /// Detaches (closes) a link and waits for the peer's detach.
    pub async fn detach(&mut self, index: u16) -> Result<(), ClientError> {
        let link = self
            .links
            .get_mut(usize::from(index))
            .ok_or_else(|| ClientError::Protocol(format!("no link {index}")))?;
        link.check()?;
        link.state = LinkState::Detached(None);
        let detach = Detach {
            handle: link.handle,
            closed: true,
            error: None,
        };
        write_frame(&mut self.wbuf, CHANNEL, &detach.into(), &[]);
        let name = link.name.clone();
        loop {
            // The peer's detach unmaps its handle.
            if !self.remote.contains(&Some(index)) {
                return Ok(());
            }
            self.check()?;
            self.read_more().await.map_err(|e| match e {
                ClientError::Closed => ClientError::LinkDetached {
                    link: name.clone(),
                    condition: String::new(),
                    description: "the connection closed".into(),
                },
                e => e,
            })?;
        }
    }

    pub async fn detach_sender(&mut self, s: SenderId) -> Result<(), ClientError> {
        self.detach(s.0).await
    }

    pub async fn detach_receiver(&mut self, r: ReceiverId) -> Result<(), ClientError> {
        self.detach(r.0).await
    }

    fn sender(&self, s: SenderId) -> Result<&SenderLink, ClientError> {
        let link = self
            .links
            .get(usize::from(s.0))
            .ok_or_else(|| ClientError::Protocol(format!("no link {}", s.0)))?;
        link.check()?;
        match &link.role {
            Role2::Sender(snd) => Ok(snd),
            Role2::Receiver(_) => Err(ClientError::Protocol(format!("link {} receives", s.0))),
        }
    }

    fn sender_mut(&mut self, s: SenderId) -> Result<&mut SenderLink, ClientError> {
        let link = self
            .links
            .get_mut(usize::from(s.0))
            .ok_or_else(|| ClientError::Protocol(format!("no link {}", s.0)))?;
        link.check()?;
        match &mut link.role {
            Role2::Sender(snd) => Ok(snd),
            Role2::Receiver(_) => Err(ClientError::Protocol(format!("link {} receives", s.0))),
        }
    }

    fn receiver_mut(&mut self, r: ReceiverId) -> Result<&mut ReceiverLink, ClientError> {
        let link = self
            .links
            .get_mut(usize::from(r.0))
            .ok_or_else(|| ClientError::Protocol(format!("no link {}", r.0)))?;
        link.check()?;
        match &mut link.role {
            Role2::Receiver(rcv) => Ok(rcv),
            Role2::Sender(_) => Err(ClientError::Protocol(format!("link {} sends", r.0))),
        }
    }

    fn not_accepted_error(&self, s: SenderId) -> Option<ClientError> {
        let link = self.links.get(usize::from(s.0))?;
        match &link.role {
            Role2::Sender(snd) if snd.not_accepted > 0 => Some(ClientError::NotAccepted {
                link: link.name.clone(),
                count: snd.not_accepted,
                outcome: snd.last_outcome,
            }),
            _ => None,
        }
    }

    // ---- sending

    /// Sends one message: `publication`'s sections around `body` (buffered; written once
    /// `flush_at` octets wait or a call has to wait). Waits for credit, for room in the
    /// session's window and, on an unsettled link, while its window of unsettled
    /// deliveries is full. Returns the delivery id.
    pub async fn send(
        &mut self,
        s: SenderId,
        publication: &Publication,
        body: &[u8],
    ) -> Result<u32, ClientError> {
        let prefix = publication.prefix_for(body.len());
        self.send_raw(s, &prefix, body).await
    }

    /// Sends a message encoded by the caller.
    pub async fn send_message(
        &mut self,
        s: SenderId,
        message: &Message,
    ) -> Result<u32, ClientError> {
        let mut payload = BytesMut::new();
        message.encode(&mut payload);
        self.send_raw(s, &payload, &[]).await
    }

    /// [`Connection::send`] without waiting: `None`, with nothing sent, when it would have
    /// to wait (no credit, a full window, a message needing more than one frame, or the
    /// buffer due to be written first). What it queues goes out with the next call that
    /// writes.
    pub fn try_send(
        &mut self,
        s: SenderId,
        publication: &Publication,
        body: &[u8],
    ) -> Result<Option<u32>, ClientError> {
        let prefix = publication.prefix_for(body.len());
        let total = prefix.len() + body.len();
        let one_frame = total + TRANSFER_HEAD_MAX <= self.max_frame;
        if !one_frame || self.wbuf.len() + total >= self.flush_at || !self.can_send_now(s)? {
            return Ok(None);
        }
        let (id, head) = self.begin_delivery(s)?;
        let written =
            wire::write_transfer_frame(&mut self.wbuf, &head, &prefix, body, 0, self.max_frame);
        debug_assert_eq!(written, total, "checked to fit one frame above");
        self.remote_incoming_window -= 1;
        self.next_outgoing_id = self.next_outgoing_id.wrapping_add(1);
        Ok(Some(id))
    }

    /// Credit, the link's unsettled window and the session window all have room.
    fn can_send_now(&self, s: SenderId) -> Result<bool, ClientError> {
        self.check()?;
        if let Some(e) = self.not_accepted_error(s) {
            return Err(e);
        }
        let snd = self.sender(s)?;
        let full = match snd.mode {
            SendMode::Unsettled { window } if window > 0 => snd.outstanding >= u64::from(window),
            _ => false,
        };
        Ok(snd.credit > 0 && !full && self.remote_incoming_window > 0)
    }

    /// Takes a credit and a delivery id for the next delivery on `s`.
    fn begin_delivery(&mut self, s: SenderId) -> Result<(u32, TransferHead), ClientError> {
        let id = self.next_delivery_id;
        self.next_delivery_id = id.wrapping_add(1);
        let snd = self.sender_mut(s)?;
        snd.credit -= 1;
        snd.delivery_count = snd.delivery_count.wrapping_add(1);
        let settled = snd.mode == SendMode::Settled;
        if !settled {
            snd.outstanding += 1;
        }
        self.outgoing.sent(id, s.0, settled);
        let head = TransferHead {
            channel: CHANNEL,
            handle: u32::from(s.0),
            delivery_id: id,
            settled,
        };
        Ok((id, head))
    }

    async fn send_raw(
        &mut self,
        s: SenderId,
        prefix: &[u8],
        body: &[u8],
    ) -> Result<u32, ClientError> {
        while !self.can_send_now(s)? {
            self.read_more().await?;
        }
        let (id, head) = self.begin_delivery(s)?;
        let total = prefix.len() + body.len();
        let mut offset = 0;
        loop {
            offset = wire::write_transfer_frame(
                &mut self.wbuf,
                &head,
                prefix,
                body,
                offset,
                self.max_frame,
            );
            self.remote_incoming_window -= 1;
            self.next_outgoing_id = self.next_outgoing_id.wrapping_add(1);
            if offset >= total {
                break;
            }
            // The rest of a large delivery waits for room in the session window.
            while self.remote_incoming_window == 0 {
                self.read_more().await?;
            }
        }
        if self.wbuf.len() >= self.flush_at {
            self.flush().await?;
        }
        Ok(id)
    }

    /// Waits until the peer has settled everything sent unsettled on `s`; fails if it
    /// settled any of it with another outcome than accepted.
    pub async fn wait_settled(&mut self, s: SenderId) -> Result<(), ClientError> {
        loop {
            self.check()?;
            if let Some(e) = self.not_accepted_error(s) {
                return Err(e);
            }
            if self.sender(s)?.outstanding == 0 {
                return Ok(());
            }
            self.read_more().await?;
        }
    }

    /// Deliveries sent unsettled on `s` that the peer has not settled yet.
    pub fn unsettled(&self, s: SenderId) -> u64 {
        self.sender(s).map_or(0, |snd| snd.outstanding)
    }

    /// Credit the peer has given link `s` and we have not used.
    pub fn credit(&self, s: SenderId) -> u32 {
        self.sender(s).map_or(0, |snd| snd.credit)
    }

    /// A round trip on link `s`: a flow with `echo` set, answered by the peer's flow. The
    /// peer has then read everything sent before it (frames are processed in order).
    pub async fn sync(&mut self, s: SenderId) -> Result<(), ClientError> {
        let snd = self.sender_mut(s)?;
        let flow = Flow {
            handle: Some(u32::from(s.0)),
            delivery_count: Some(snd.delivery_count),
            link_credit: Some(snd.credit),
            echo: true,
            ..Flow::default()
        };
        let mark = snd.flows_received;
        self.write_flow(flow);
        loop {
            if self.sender(s)?.flows_received > mark {
                return Ok(());
            }
            self.read_more().await?;
        }
    }

    // ---- receiving

    /// Grants `n` more credit on link `r` (buffered).
    pub fn add_credit(&mut self, r: ReceiverId, n: u32) -> Result<(), ClientError> {
        let rcv = self.receiver_mut(r)?;
        rcv.credit = rcv.credit.saturating_add(n);
        self.owe_flow(r.0);
        Ok(())
    }

    /// The next delivery on link `r`, reading the socket as needed. Cancel-safe: wrap it in
    /// `tokio::time::timeout` to bound the wait.
    pub async fn next_delivery(&mut self, r: ReceiverId) -> Result<Delivery, ClientError> {
        loop {
            if let Some(d) = self.try_next_delivery(r)? {
                return Ok(d);
            }
            self.read_more().await?;
        }
    }

    /// A delivery already received on link `r`, without any I/O.
    pub fn try_next_delivery(&mut self, r: ReceiverId) -> Result<Option<Delivery>, ClientError> {
        self.check()?;
        let rcv = self.receiver_mut(r)?;
        let Some(d) = rcv.queue.pop_front() else {
            return Ok(None);
        };
        let window = rcv.options.credit_window;
        if window > 0 {
            let held = rcv.credit.saturating_add(rcv.queue.len() as u32);
            if held <= window / 2 {
                rcv.credit = window.saturating_sub(rcv.queue.len() as u32);
                self.owe_flow(r.0);
            }
        }
        Ok(Some(d))
    }

    /// Deliveries received on `r` and not yet taken.
    pub fn queued(&self, r: ReceiverId) -> usize {
        match self.links.get(usize::from(r.0)).map(|l| &l.role) {
            Some(Role2::Receiver(rcv)) => rcv.queue.len(),
            _ => 0,
        }
    }

    /// Accepts (and settles) received delivery `id` (buffered; consecutive ids go out as
    /// one disposition).
    pub fn accept(&mut self, id: u32) {
        self.to_accept.push(id);
    }

    /// Accepts deliveries `first..=last` (buffered).
    pub fn accept_range(&mut self, first: u32, last: u32) {
        self.to_accept.push_range(first, last);
    }

    /// Settles delivery `id` with `state` (rejected, released, modified) at once
    /// (buffered).
    pub fn settle(&mut self, id: u32, state: DeliveryState) {
        self.write_owed();
        let d = Disposition {
            role: Role::Receiver,
            first: id,
            last: None,
            settled: true,
            state: Some(state),
            batchable: false,
        };
        write_frame(&mut self.wbuf, CHANNEL, &d.into(), &[]);
    }

    // ---- closing

    /// Closes the connection and waits for the peer's close.
    pub async fn close(mut self) -> Result<(), ClientError> {
        if self.failed.is_some() {
            return Ok(());
        }
        write_frame(&mut self.wbuf, 0, &Close { error: None }.into(), &[]);
        loop {
            match self.read_more().await {
                Ok(()) => {}
                Err(ClientError::Closed) => return Ok(()),
                Err(e) => return Err(e),
            }
        }
    }

    // ---- flows and dispositions owed

    fn owe_flow(&mut self, index: u16) {
        if !self.flows_due.contains(&index) {
            self.flows_due.push(index);
        }
    }

    /// The session's fields of a flow, with the incoming window refreshed.
    fn write_flow(&mut self, mut flow: Flow) {
        self.incoming_left = self.incoming_window;
        self.session_flow_due = false;
        flow.next_incoming_id = Some(self.next_incoming_id);
        flow.incoming_window = self.incoming_window;
        flow.next_outgoing_id = self.next_outgoing_id;
        flow.outgoing_window = OUTGOING_WINDOW;
        write_frame(&mut self.wbuf, CHANNEL, &flow.into(), &[]);
    }

    /// Writes the dispositions and flows the calls since the last write have owed.
    fn write_owed(&mut self) {
        if !self.to_accept.is_empty() {
            let runs: Vec<(u32, u32)> = self.to_accept.drain().collect();
            for (first, last) in runs {
                let d = Disposition {
                    role: Role::Receiver,
                    first,
                    last: (last != first).then_some(last),
                    settled: true,
                    state: Some(DeliveryState::Accepted(Accepted {})),
                    batchable: false,
                };
                write_frame(&mut self.wbuf, CHANNEL, &d.into(), &[]);
            }
        }
        let due = std::mem::take(&mut self.flows_due);
        for index in &due {
            let Some(link) = self.links.get(usize::from(*index)) else {
                continue;
            };
            if !matches!(link.state, LinkState::Attached) {
                continue;
            }
            if let Role2::Receiver(rcv) = &link.role {
                let flow = Flow {
                    handle: Some(link.handle),
                    delivery_count: Some(rcv.delivery_count),
                    link_credit: Some(rcv.credit),
                    ..Flow::default()
                };
                self.write_flow(flow);
            }
        }
        self.flows_due = due;
        self.flows_due.clear();
        if self.session_flow_due {
            self.write_flow(Flow::default());
        }
    }

    // ---- I/O

    /// Writes everything buffered (and owed). While the socket is full, reads what the
    /// peer sends meanwhile, so neither side can wait on the other with both buffers full.
    pub async fn flush(&mut self) -> Result<(), ClientError> {
        self.write_owed();
        while !self.wbuf.is_empty() {
            match self.stream.try_write(&self.wbuf) {
                Ok(n) => {
                    self.wbuf.advance(n);
                    self.last_write = Instant::now();
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    if self.rbuf.len() >= READ_WHILE_WRITING_MAX {
                        let r = self.stream.writable().await;
                        r.map_err(|e| self.fail(e.into()))?;
                        continue;
                    }
                    let readable = tokio::select! {
                        r = self.stream.writable() => r.map(|()| false),
                        r = self.stream.readable() => r.map(|()| true),
                    };
                    match readable {
                        Ok(true) => {
                            if self.try_read()? > 0 {
                                self.process_or_fail()?;
                                self.write_owed();
                            }
                        }
                        Ok(false) => {}
                        Err(e) => return Err(self.fail(e.into())),
                    }
                }
                Err(e) => return Err(self.fail(e.into())),
            }
        }
        Ok(())
    }

    fn make_read_room(&mut self) {
        if self.rbuf.capacity() - self.rbuf.len() < READ_RESERVE / 4 {
            self.rbuf.reserve(READ_RESERVE);
        }
    }

    fn try_read(&mut self) -> Result<usize, ClientError> {
        self.make_read_room();
        match self.stream.try_read_buf(&mut self.rbuf) {
            Ok(0) => Err(self.fail(eof())),
            Ok(n) => Ok(n),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => Ok(0),
            Err(e) => Err(self.fail(e.into())),
        }
    }

    /// Writes what is buffered, then waits for the peer to send something and decodes all
    /// of it. Keeps the peer's idle time-out satisfied with empty frames.
    async fn read_more(&mut self) -> Result<(), ClientError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        let reads = self.reads;
        self.flush().await?;
        if self.reads != reads {
            // Writing made us read (the socket was full), and what came may be what the
            // caller waits for (credit, a settlement): it looks before waiting again.
            return Ok(());
        }
        loop {
            // Before every wait: a peer that sends more often than our time-out would
            // otherwise keep us from ever reaching the check.
            let mut wait = None;
            if let Some(k) = self.keepalive {
                if self.last_write.elapsed() >= k {
                    write_empty_frame(&mut self.wbuf);
                    self.flush().await?;
                }
                wait = Some(k.saturating_sub(self.last_write.elapsed()));
            }
            self.make_read_room();
            // A short `read_buf` clears readiness, where `try_read_buf` would leave it set
            // and cost one more read returning EAGAIN; cancel safe under the time-out.
            let read = self.stream.read_buf(&mut self.rbuf);
            let read = match wait {
                None => Some(read.await),
                Some(w) => tokio::time::timeout(w, read).await.ok(),
            };
            match read {
                Some(Ok(0)) => return Err(self.fail(eof())),
                Some(Ok(_)) => return self.process_or_fail(),
                Some(Err(e)) => return Err(self.fail(e.into())),
                None => {}
            }
        }
    }

    fn fail(&mut self, e: ClientError) -> ClientError {
        self.failed.get_or_insert(e).clone()
    }

    fn check(&self) -> Result<(), ClientError> {
        match &self.failed {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }

    fn process_or_fail(&mut self) -> Result<(), ClientError> {
        self.reads += 1;
        if let Err(e) = self.process() {
            // A protocol error of the peer's: tell it why, best effort, and stop.
            if let ClientError::Protocol(text) = &e {
                let close = Close {
                    error: Some(ferry_amqp1::Error::new(
                        ferry_amqp1::condition::FRAMING_ERROR,
                        text.as_str(),
                    )),
                };
                write_frame(&mut self.wbuf, 0, &close.into(), &[]);
                if let Ok(n) = self.stream.try_write(&self.wbuf) {
                    self.wbuf.advance(n);
                }
            }
            return Err(self.fail(e));
        }
        self.check()
    }

    /// Decodes every complete frame in the read buffer.
    fn process(&mut self) -> Result<(), ClientError> {
        while let Some(frame) = decode_frame(&mut self.rbuf, self.our_max_frame)? {
            if frame.frame_type != FrameType::Amqp {
                return Err(ClientError::Protocol("a SASL frame after SASL".into()));
            }
            let FrameBody::Amqp {
                performative,
                payload,
            } = frame.decode_body()?
            else {
                continue; // an empty frame: the peer's keep-alive
            };
            if frame.channel != CHANNEL
                && !matches!(performative, Performative::Open(_) | Performative::Close(_))
            {
                return Err(ClientError::Protocol(format!(
                    "{} on channel {}, where no session was begun",
                    performative.name(),
                    frame.channel
                )));
            }
            self.performative(performative, payload)?;
        }
        Ok(())
    }

    fn performative(&mut self, p: Performative, payload: Bytes) -> Result<(), ClientError> {
        match p {
            Performative::Transfer(t) => self.transfer(t, payload),
            Performative::Disposition(d) => self.disposition(d),
            Performative::Flow(f) => self.flow(f),
            Performative::Open(o) => {
                self.max_frame = o.max_frame_size.max(MIN_MAX_FRAME_SIZE) as usize;
                if self.max_frame <= MAX_TRANSFER_HEAD {
                    return Err(ClientError::Protocol("max-frame-size too small".into()));
                }
                self.keepalive = o
                    .idle_time_out
                    .filter(|&ms| ms > 0)
                    .map(|ms| Duration::from_millis(u64::from(ms) / 2));
                self.info.container_id = o.container_id.to_string();
                self.info.max_frame_size = o.max_frame_size;
                self.info.offered_capabilities = o
                    .offered_capabilities
                    .iter()
                    .map(|c| c.to_string())
                    .collect();
                Ok(())
            }
            Performative::Begin(b) => {
                if b.remote_channel != Some(CHANNEL) || self.session_mapped {
                    return Err(ClientError::Protocol("an unexpected begin".into()));
                }
                self.session_mapped = true;
                self.next_incoming_id = b.next_outgoing_id;
                self.remote_incoming_window = b.incoming_window;
                Ok(())
            }
            Performative::Attach(a) => self.attached(a),
            Performative::Detach(d) => self.detached(d),
            Performative::End(e) => {
                let err = ClientError::from_peer_error(e.error, |condition, description| {
                    ClientError::SessionEnded {
                        condition,
                        description,
                    }
                });
                write_frame(&mut self.wbuf, CHANNEL, &End { error: None }.into(), &[]);
                self.fail(err);
                Ok(())
            }
            Performative::Close(c) => {
                let err = match c.error {
                    None => ClientError::Closed,
                    e => ClientError::from_peer_error(e, |condition, description| {
                        ClientError::ConnectionClosed {
                            condition,
                            description,
                        }
                    }),
                };
                if !matches!(self.failed, Some(ClientError::Closed)) {
                    write_frame(&mut self.wbuf, 0, &Close { error: None }.into(), &[]);
                    if let Ok(n) = self.stream.try_write(&self.wbuf) {
                        self.wbuf.advance(n);
                    }
                }
                self.fail(err);
                Ok(())
            }
        }
    }

    fn link_by_remote(&self, handle: u32) -> Result<u16, ClientError> {
        self.remote
            .get(handle as usize)
            .copied()
            .flatten()
            .ok_or_else(|| ClientError::Protocol(format!("no link is attached as handle {handle}")))
    }

    fn attached(&mut self, a: Attach) -> Result<(), ClientError> {
        if a.handle > HANDLE_MAX {
            return Err(ClientError::Protocol(format!(
                "handle {} exceeds our handle-max",
                a.handle
            )));
        }
        let name = a.name.as_str();
        let index = self
            .links
            .iter()
            .position(|l| l.name == name && matches!(l.state, LinkState::Attaching))
            .ok_or_else(|| ClientError::Protocol(format!("an attach for unknown link {name}")))?;
        let slot = a.handle as usize;
        if self.remote.len() <= slot {
            self.remote.resize(slot + 1, None);
        }
        if self.remote[slot].is_some() {
            return Err(ClientError::Protocol(format!("handle {slot} is in use")));
        }
        self.remote[slot] = Some(index as u16);
        let link = &mut self.links[index];
        let refused = match (&mut link.role, a.role) {
            (Role2::Sender(_), Role::Receiver) => a.target.is_none(),
            (Role2::Receiver(r), Role::Sender) => {
                r.delivery_count = a.initial_delivery_count.unwrap_or(0);
                a.source.is_none()
            }
            _ => {
                return Err(ClientError::Protocol(format!(
                    "the peer attached link {name} with our own role"
                )))
            }
        };
        link.state = if refused {
            LinkState::Refused
        } else {
            LinkState::Attached
        };
        Ok(())
    }

    fn detached(&mut self, d: Detach) -> Result<(), ClientError> {
        let index = self.link_by_remote(d.handle)?;
        self.remote[d.handle as usize] = None;
        let link = &mut self.links[usize::from(index)];
        let name = link.name.clone();
        let ours = matches!(link.state, LinkState::Detached(None));
        if !ours {
            let err = ClientError::from_peer_error(d.error, |condition, description| {
                ClientError::LinkDetached {
                    link: name,
                    condition,
                    description,
                }
            });
            link.state = LinkState::Detached(Some(err));
            let reply = Detach {
                handle: link.handle,
                closed: d.closed,
                error: None,
            };
            write_frame(&mut self.wbuf, CHANNEL, &reply.into(), &[]);
        }
        Ok(())
    }

    fn flow(&mut self, f: Flow) -> Result<(), ClientError> {
        // Room the peer gives our transfers: from its next-incoming-id (our first transfer
        // id when it has seen none) on, incoming-window frames.
        let expected = f.next_incoming_id.unwrap_or(0);
        self.remote_incoming_window = expected
            .wrapping_add(f.incoming_window)
            .wrapping_sub(self.next_outgoing_id);
        if self.remote_incoming_window > i32::MAX as u32 {
            self.remote_incoming_window = 0;
        }
        let Some(handle) = f.handle else {
            if f.echo {
                self.session_flow_due = true;
            }
            return Ok(());
        };
        let index = self.link_by_remote(handle)?;
        let link = &mut self.links[usize::from(index)];
        let handle = link.handle;
        let mut reply = None;
        match &mut link.role {
            Role2::Sender(s) => {
                s.flows_received += 1;
                // The peer's view: credit from its delivery-count (ours when it has seen
                // nothing yet).
                let count = f.delivery_count.unwrap_or(0);
                let credit = f.link_credit.unwrap_or(0);
                s.credit = count.wrapping_add(credit).wrapping_sub(s.delivery_count);
                if s.credit > i32::MAX as u32 {
                    s.credit = 0;
                }
                if f.drain && s.credit > 0 {
                    // Nothing is waiting to go: the credit is used up at once.
                    s.delivery_count = s.delivery_count.wrapping_add(s.credit);
                    s.credit = 0;
                }
                if f.drain || f.echo {
                    reply = Some(Flow {
                        handle: Some(handle),
                        delivery_count: Some(s.delivery_count),
                        link_credit: Some(s.credit),
                        ..Flow::default()
                    });
                }
            }
            Role2::Receiver(r) => {
                if let Some(count) = f.delivery_count {
                    // The sender moved its count on (a drain): our credit shrinks to match.
                    let end = r.delivery_count.wrapping_add(r.credit);
                    r.credit = end.wrapping_sub(count);
                    if r.credit > i32::MAX as u32 {
                        r.credit = 0;
                    }
                    r.delivery_count = count;
                }
                if f.echo {
                    self.owe_flow(index);
                }
            }
        }
        if let Some(flow) = reply {
            self.write_flow(flow);
        }
        Ok(())
    }

    fn transfer(&mut self, t: Transfer, payload: Bytes) -> Result<(), ClientError> {
        self.next_incoming_id = self.next_incoming_id.wrapping_add(1);
        self.incoming_left = self.incoming_left.saturating_sub(1);
        if self.incoming_left <= self.incoming_window / 2 {
            self.session_flow_due = true;
        }
        let index = self.link_by_remote(t.handle)?;
        let max_message = self.max_message;
        let link = &mut self.links[usize::from(index)];
        let Role2::Receiver(r) = &mut link.role else {
            return Err(ClientError::Protocol(format!(
                "a transfer on link {}, which sends",
                link.name
            )));
        };
        if t.aborted {
            r.partial = None;
            return Ok(());
        }
        let delivery = match r.partial.take() {
            None => {
                let Some(id) = t.delivery_id else {
                    return Err(ClientError::Protocol(
                        "a transfer without a delivery-id".into(),
                    ));
                };
                if r.credit == 0 {
                    return Err(ClientError::Protocol(format!(
                        "a transfer on link {} beyond its credit",
                        link.name
                    )));
                }
                r.credit -= 1;
                r.delivery_count = r.delivery_count.wrapping_add(1);
                let d = Delivery {
                    delivery_id: id,
                    settled: t.settled.unwrap_or(false),
                    payload,
                };
                if t.more {
                    let buf = BytesMut::from(&d.payload[..]);
                    r.partial = Some((d, buf));
                    return Ok(());
                }
                d
            }
            Some((mut d, mut buf)) => {
                if buf.len() + payload.len() > max_message {
                    return Err(ClientError::Protocol(format!(
                        "a delivery larger than {max_message} octets"
                    )));
                }
                buf.extend_from_slice(&payload);
                d.settled |= t.settled.unwrap_or(false);
                if t.more {
                    r.partial = Some((d, buf));
                    return Ok(());
                }
                d.payload = buf.freeze();
                d
            }
        };
        r.queue.push_back(delivery);
        Ok(())
    }

    fn disposition(&mut self, d: Disposition) -> Result<(), ClientError> {
        if d.role != Role::Receiver {
            // The peer settling deliveries it sent us: we settle on accepting, nothing to do.
            return Ok(());
        }
        let last = d.last.unwrap_or(d.first);
        let outcome: Option<&'static str> = match &d.state {
            Some(DeliveryState::Accepted(_)) | None => None,
            Some(DeliveryState::Rejected(_)) => Some("rejected"),
            Some(DeliveryState::Released(_)) => Some("released"),
            Some(DeliveryState::Modified(_)) => Some("modified"),
            Some(DeliveryState::Received(_)) => return Ok(()),
            Some(other) => {
                return Err(ClientError::Protocol(format!(
                    "disposition state {other:?} for a non-transactional delivery"
                )))
            }
        };
        if !d.settled {
            if d.state.is_none() {
                return Ok(());
            }
            // An outcome the peer leaves for us to settle (receiver settle mode second).
            let reply = Disposition {
                role: Role::Sender,
                first: d.first,
                last: d.last,
                settled: true,
                state: None,
                batchable: false,
            };
            write_frame(&mut self.wbuf, CHANNEL, &reply.into(), &[]);
        }
        let links = &mut self.links;
        self.outgoing
            .settle(d.first, last, |index| {
                if let Some(Role2::Sender(s)) =
                    links.get_mut(usize::from(index)).map(|l| &mut l.role)
                {
                    s.outstanding = s.outstanding.saturating_sub(1);
                    if let Some(o) = outcome {
                        s.not_accepted += 1;
                        s.last_outcome = o;
                    }
                }
            })
            .map_err(ClientError::Protocol)
    }
}

fn container_id() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(1);
    format!(
        "ferry-client1-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

fn eof() -> ClientError {
    std::io::Error::new(
        std::io::ErrorKind::UnexpectedEof,
        "the peer closed the connection",
    )
    .into()
}
