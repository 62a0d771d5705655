//! One connection, driven by whoever owns it: no background tasks. Every call appends to
//! one outbound buffer; calls that must wait (a reply, a delivery, room in the confirm
//! window) write what is buffered and read whatever has arrived, decoding all of it, so
//! publishes, acks and deliveries travel in large batches in both directions.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes, BytesMut};
use ferry_amqp091::{
    decode_frame, write_body, write_frame, write_heartbeat, write_method, Assembled,
    BasicProperties, ContentAssembler, ContentHeader, FieldTable, FieldValue, FrameType, LongStr,
    Method, ShortStr, PROTOCOL_HEADER,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, ToSocketAddrs};

use crate::confirms::ConfirmTracker;
use crate::error::ClientError;
use crate::options::ConnectOptions;

/// Read-buffer space kept free before each read.
const READ_RESERVE: usize = 64 * 1024;
/// While writing, what has arrived is read into memory only up to this much, so a peer
/// that floods us while we write cannot grow the buffer without bound.
const READ_WHILE_WRITING_MAX: usize = 16 << 20;

/// A message delivered to one of our consumers.
#[derive(Debug, Clone)]
pub struct Delivery {
    pub channel: u16,
    pub consumer_tag: ShortStr,
    pub delivery_tag: u64,
    pub redelivered: bool,
    pub properties: BasicProperties,
    pub body: Bytes,
}

#[derive(Debug)]
struct Consumer {
    tag: ShortStr,
    queue: VecDeque<Delivery>,
    cancelled: bool,
}

struct Channel {
    assembler: ContentAssembler,
    /// Replies to synchronous methods, in arrival order.
    replies: VecDeque<Method>,
    consumers: Vec<Consumer>,
    confirms: Option<ConfirmTracker>,
    confirm_window: u64,
    /// Set when the channel is closed, by either side.
    closed: Option<ClientError>,
    returned: u64,
}

impl Channel {
    fn new(max_body: u64) -> Self {
        Channel {
            assembler: ContentAssembler::new(max_body),
            replies: VecDeque::new(),
            consumers: Vec::new(),
            confirms: None,
            confirm_window: 0,
            closed: None,
            returned: 0,
        }
    }

    fn consumer(&mut self, tag: &[u8]) -> Option<&mut Consumer> {
        self.consumers.iter_mut().find(|c| c.tag.as_bytes() == tag)
    }
}

/// A message's method and header frames, encoded once and copied for every publish of a
/// body of the same length.
#[derive(Debug, Clone)]
pub struct Publication {
    channel: u16,
    method: Bytes,
    properties: BasicProperties,
    body_len: usize,
    header: Bytes,
}

impl Publication {
    pub fn new(
        channel: u16,
        exchange: &str,
        routing_key: &str,
        properties: BasicProperties,
        body_len: usize,
    ) -> Result<Self, ClientError> {
        let mut method = BytesMut::new();
        write_method(
            &mut method,
            channel,
            &Method::BasicPublish(ferry_amqp091::BasicPublish {
                exchange: ShortStr::try_from(exchange)?,
                routing_key: ShortStr::try_from(routing_key)?,
                ..Default::default()
            }),
        );
        let header = header_frame(channel, &properties, body_len);
        Ok(Publication {
            channel,
            method: method.freeze(),
            properties,
            body_len,
            header,
        })
    }

    pub fn channel(&self) -> u16 {
        self.channel
    }
}

fn header_frame(channel: u16, properties: &BasicProperties, body_len: usize) -> Bytes {
    let mut payload = BytesMut::new();
    ContentHeader::basic(body_len as u64, properties.clone()).encode(&mut payload);
    let mut frame = BytesMut::new();
    write_frame(&mut frame, FrameType::Header, channel, &payload);
    frame.freeze()
}

/// What the server said about itself and what was agreed.
#[derive(Debug, Clone, Default)]
pub struct ServerInfo {
    pub properties: FieldTable,
    pub frame_max: u32,
    pub channel_max: u16,
    pub heartbeat: u16,
}

pub struct Connection {
    stream: TcpStream,
    rbuf: BytesMut,
    wbuf: BytesMut,
    frame_max: usize,
    flush_at: usize,
    max_body: u64,
    /// Index = channel number; 0 holds the connection's own replies.
    channels: Vec<Option<Channel>>,
    channel_max: u16,
    failed: Option<ClientError>,
    heartbeat: Option<Duration>,
    last_write: Instant,
    last_read: Instant,
    blocked: bool,
    info: ServerInfo,
}

macro_rules! expect_reply {
    ($reply:expr, $variant:ident) => {
        match $reply {
            Method::$variant(m) => Ok(m),
            other => Err(ClientError::Protocol(format!(
                "expected {}, got {}",
                stringify!($variant),
                other.name()
            ))),
        }
    };
}

impl Connection {
    /// Connects, authenticates with PLAIN, tunes and opens the virtual host.
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
        let mut stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(options.tcp_nodelay)?;
        stream.write_all(&PROTOCOL_HEADER).await?;
        let now = Instant::now();
        let mut conn = Connection {
            stream,
            rbuf: BytesMut::with_capacity(READ_RESERVE),
            wbuf: BytesMut::with_capacity(options.flush_at * 2),
            frame_max: options.frame_max.max(4096) as usize,
            flush_at: options.flush_at.max(1),
            max_body: options.max_body_size,
            channels: vec![Some(Channel::new(0))],
            channel_max: 0,
            failed: None,
            heartbeat: None,
            last_write: now,
            last_read: now,
            blocked: false,
            info: ServerInfo::default(),
        };
        conn.handshake(options).await?;
        Ok(conn)
    }

    async fn handshake(&mut self, options: &ConnectOptions) -> Result<(), ClientError> {
        let start = expect_reply!(self.await_reply(0).await?, ConnectionStart)?;
        if !start
            .mechanisms
            .as_bytes()
            .split(|b| *b == b' ')
            .any(|m| m == b"PLAIN")
        {
            return Err(ClientError::Protocol(format!(
                "the server offers no PLAIN mechanism ({})",
                String::from_utf8_lossy(start.mechanisms.as_bytes())
            )));
        }
        let user = options.username.as_deref().unwrap_or("guest");
        let password = options.password.as_deref().unwrap_or("guest");
        let response = format!("\0{user}\0{password}");
        self.send_method(
            0,
            &Method::ConnectionStartOk(ferry_amqp091::ConnectionStartOk {
                client_properties: client_properties()?,
                mechanism: ShortStr::from_static("PLAIN"),
                response: LongStr::try_from(response.as_str())?,
                locale: ShortStr::from_static("en_US"),
            }),
        );
        let tune = match self.await_reply(0).await? {
            Method::ConnectionTune(t) => t,
            Method::ConnectionSecure(_) => {
                return Err(ClientError::Protocol(
                    "the server asked for a SASL challenge PLAIN does not have".into(),
                ))
            }
            other => {
                return Err(ClientError::Protocol(format!(
                    "expected connection.tune, got {}",
                    other.name()
                )))
            }
        };
        let ours = options.frame_max.max(4096);
        let frame_max = match tune.frame_max {
            0 => ours,
            theirs => theirs.min(ours),
        };
        let channel_max = match tune.channel_max {
            0 => 2047,
            n => n,
        };
        let heartbeat = match (options.heartbeat, tune.heartbeat) {
            (0, _) => 0,
            (ours, 0) => ours,
            (ours, theirs) => ours.min(theirs),
        };
        self.send_method(
            0,
            &Method::ConnectionTuneOk(ferry_amqp091::ConnectionTuneOk {
                channel_max,
                frame_max,
                heartbeat,
            }),
        );
        self.frame_max = frame_max as usize;
        self.channel_max = channel_max;
        self.heartbeat = (heartbeat > 0).then(|| Duration::from_secs(u64::from(heartbeat)));
        self.send_method(
            0,
            &Method::ConnectionOpen(ferry_amqp091::ConnectionOpen {
                virtual_host: ShortStr::try_from(options.virtual_host.as_str())?,
                ..Default::default()
            }),
        );
        expect_reply!(self.await_reply(0).await?, ConnectionOpenOk)?;
        self.info = ServerInfo {
            properties: start.server_properties,
            frame_max,
            channel_max,
            heartbeat,
        };
        Ok(())
    }

    pub fn server(&self) -> &ServerInfo {
        &self.info
    }

    /// The server has sent `connection.blocked` (a resource alarm) and not yet unblocked.
    pub fn is_blocked(&self) -> bool {
        self.blocked
    }

    /// Why the connection ended, if it has.
    pub fn error(&self) -> Option<&ClientError> {
        self.failed.as_ref()
    }

    // ---- channels and synchronous methods ----

    pub async fn open_channel(&mut self) -> Result<u16, ClientError> {
        self.check(0)?;
        let id = (1..self.channels.len())
            .find(|&i| self.channels[i].is_none())
            .unwrap_or(self.channels.len());
        if id > usize::from(self.channel_max) {
            return Err(ClientError::Protocol(format!(
                "all {} channels are in use",
                self.channel_max
            )));
        }
        let channel = Channel::new(self.max_body);
        if id == self.channels.len() {
            self.channels.push(Some(channel));
        } else {
            self.channels[id] = Some(channel);
        }
        let id = id as u16;
        let reply = self
            .rpc(id, Method::ChannelOpen(Default::default()))
            .await?;
        expect_reply!(reply, ChannelOpenOk)?;
        Ok(id)
    }

    /// Closes a channel; unacknowledged deliveries on it go back to their queues.
    pub async fn close_channel(&mut self, channel: u16) -> Result<(), ClientError> {
        self.check(channel)?;
        let reply = self
            .rpc(
                channel,
                Method::ChannelClose(ferry_amqp091::ChannelClose {
                    reply_code: ferry_amqp091::reply::REPLY_SUCCESS,
                    ..Default::default()
                }),
            )
            .await;
        if let Some(slot) = self.channels.get_mut(usize::from(channel)) {
            *slot = None;
        }
        expect_reply!(reply?, ChannelCloseOk).map(drop)
    }

    /// `queue.declare`; returns the queue's name (the server's choice for an empty name)
    /// and its message and consumer counts.
    pub async fn queue_declare(
        &mut self,
        channel: u16,
        queue: &str,
        options: crate::QueueOptions,
        arguments: FieldTable,
    ) -> Result<ferry_amqp091::QueueDeclareOk, ClientError> {
        let reply = self
            .rpc(
                channel,
                Method::QueueDeclare(ferry_amqp091::QueueDeclare {
                    queue: ShortStr::try_from(queue)?,
                    passive: options.passive,
                    durable: options.durable,
                    exclusive: options.exclusive,
                    auto_delete: options.auto_delete,
                    arguments,
                    ..Default::default()
                }),
            )
            .await?;
        expect_reply!(reply, QueueDeclareOk)
    }

    /// `queue.purge`; returns how many messages it removed.
    pub async fn queue_purge(&mut self, channel: u16, queue: &str) -> Result<u32, ClientError> {
        let reply = self
            .rpc(
                channel,
                Method::QueuePurge(ferry_amqp091::QueuePurge {
                    queue: ShortStr::try_from(queue)?,
                    ..Default::default()
                }),
            )
            .await?;
        Ok(expect_reply!(reply, QueuePurgeOk)?.message_count)
    }

    pub async fn queue_delete(&mut self, channel: u16, queue: &str) -> Result<u32, ClientError> {
        let reply = self
            .rpc(
                channel,
                Method::QueueDelete(ferry_amqp091::QueueDelete {
                    queue: ShortStr::try_from(queue)?,
                    ..Default::default()
                }),
            )
            .await?;
        Ok(expect_reply!(reply, QueueDeleteOk)?.message_count)
    }

    pub async fn queue_bind(
        &mut self,
        channel: u16,
        queue: &str,
        exchange: &str,
        routing_key: &str,
    ) -> Result<(), ClientError> {
        let reply = self
            .rpc(
                channel,
                Method::QueueBind(ferry_amqp091::QueueBind {
                    queue: ShortStr::try_from(queue)?,
                    exchange: ShortStr::try_from(exchange)?,
                    routing_key: ShortStr::try_from(routing_key)?,
                    ..Default::default()
                }),
            )
            .await?;
        expect_reply!(reply, QueueBindOk).map(drop)
    }

    /// `exchange.declare`; with `passive`, only checks that the exchange exists.
    pub async fn exchange_declare(
        &mut self,
        channel: u16,
        exchange: &str,
        kind: &str,
        passive: bool,
        durable: bool,
    ) -> Result<(), ClientError> {
        let reply = self
            .rpc(
                channel,
                Method::ExchangeDeclare(ferry_amqp091::ExchangeDeclare {
                    exchange: ShortStr::try_from(exchange)?,
                    kind: ShortStr::try_from(kind)?,
                    passive,
                    durable,
                    ..Default::default()
                }),
            )
            .await?;
        expect_reply!(reply, ExchangeDeclareOk).map(drop)
    }

    /// `basic.qos` with a per-consumer (`global = false`) or per-channel count; it
    /// applies to consumers started after it.
    pub async fn qos(
        &mut self,
        channel: u16,
        prefetch_count: u16,
        global: bool,
    ) -> Result<(), ClientError> {
        let reply = self
            .rpc(
                channel,
                Method::BasicQos(ferry_amqp091::BasicQos {
                    prefetch_size: 0,
                    prefetch_count,
                    global,
                }),
            )
            .await?;
        expect_reply!(reply, BasicQosOk).map(drop)
    }

    /// Starts a consumer under `tag` (chosen by the caller, unique on the channel).
    pub async fn consume(
        &mut self,
        channel: u16,
        queue: &str,
        tag: &str,
        options: crate::ConsumeOptions,
    ) -> Result<(), ClientError> {
        let tag = ShortStr::try_from(tag)?;
        self.check(channel)?;
        // Registered before the reply, since deliveries may follow consume-ok at once.
        self.channel_mut(channel)?.consumers.push(Consumer {
            tag: tag.clone(),
            queue: VecDeque::new(),
            cancelled: false,
        });
        let reply = self
            .rpc(
                channel,
                Method::BasicConsume(ferry_amqp091::BasicConsume {
                    queue: ShortStr::try_from(queue)?,
                    consumer_tag: tag.clone(),
                    no_ack: options.no_ack,
                    exclusive: options.exclusive,
                    ..Default::default()
                }),
            )
            .await;
        match reply.and_then(|r| expect_reply!(r, BasicConsumeOk)) {
            Ok(ok) if ok.consumer_tag == tag => Ok(()),
            Ok(ok) => Err(ClientError::Protocol(format!(
                "consume-ok for {}, asked for {tag}",
                ok.consumer_tag
            ))),
            Err(e) => {
                if let Ok(ch) = self.channel_mut(channel) {
                    ch.consumers.retain(|c| c.tag != tag);
                }
                Err(e)
            }
        }
    }

    /// Cancels a consumer; returns the deliveries it had received and not yet handed out,
    /// for the caller to acknowledge or give back.
    pub async fn cancel(&mut self, channel: u16, tag: &str) -> Result<Vec<Delivery>, ClientError> {
        let tag = ShortStr::try_from(tag)?;
        let reply = self
            .rpc(
                channel,
                Method::BasicCancel(ferry_amqp091::BasicCancel {
                    consumer_tag: tag.clone(),
                    nowait: false,
                }),
            )
            .await?;
        expect_reply!(reply, BasicCancelOk)?;
        let ch = self.channel_mut(channel)?;
        let pos = ch.consumers.iter().position(|c| c.tag == tag);
        Ok(pos
            .map(|i| ch.consumers.remove(i).queue.into_iter().collect())
            .unwrap_or_default())
    }

    /// Puts the channel in confirm mode; `publish` then waits whenever `window` messages
    /// are unconfirmed (0: no limit).
    pub async fn confirm_select(&mut self, channel: u16, window: u32) -> Result<(), ClientError> {
        let reply = self
            .rpc(
                channel,
                Method::ConfirmSelect(ferry_amqp091::ConfirmSelect { nowait: false }),
            )
            .await?;
        expect_reply!(reply, ConfirmSelectOk)?;
        let ch = self.channel_mut(channel)?;
        ch.confirms = Some(ConfirmTracker::default());
        ch.confirm_window = u64::from(window);
        Ok(())
    }

    pub async fn tx_select(&mut self, channel: u16) -> Result<(), ClientError> {
        let reply = self
            .rpc(channel, Method::TxSelect(Default::default()))
            .await?;
        expect_reply!(reply, TxSelectOk).map(drop)
    }

    pub async fn tx_commit(&mut self, channel: u16) -> Result<(), ClientError> {
        let reply = self
            .rpc(channel, Method::TxCommit(Default::default()))
            .await?;
        expect_reply!(reply, TxCommitOk).map(drop)
    }

    pub async fn tx_rollback(&mut self, channel: u16) -> Result<(), ClientError> {
        let reply = self
            .rpc(channel, Method::TxRollback(Default::default()))
            .await?;
        expect_reply!(reply, TxRollbackOk).map(drop)
    }

    /// A round trip on `channel`: when it returns, the server has processed everything
    /// sent on the channel before it (it handles a channel's frames in order). Without
    /// publisher confirms this is how a publisher knows its messages were taken.
    pub async fn sync(&mut self, channel: u16) -> Result<(), ClientError> {
        self.exchange_declare(channel, "amq.direct", "direct", true, false)
            .await
    }

    // ---- publishing ----

    /// Publishes one message (buffered; written once `flush_at` octets are waiting or a
    /// call has to wait). In confirm mode, first waits while the window is full, and
    /// returns the message's sequence number.
    pub async fn publish(
        &mut self,
        p: &Publication,
        body: &[u8],
    ) -> Result<Option<u64>, ClientError> {
        let channel = p.channel;
        self.check(channel)?;
        while !self.window_has_room(channel)? {
            self.read_more().await?;
            self.check(channel)?;
        }
        let seq = self.write_publish(p, body)?;
        if self.wbuf.len() >= self.flush_at {
            self.flush().await?;
        }
        Ok(seq)
    }

    /// [`Connection::publish`] without waiting: false, with nothing queued, when it would
    /// have to wait for confirms or write the buffer first. What it queues goes out with
    /// the next call that writes.
    pub fn try_publish(&mut self, p: &Publication, body: &[u8]) -> Result<bool, ClientError> {
        self.check(p.channel)?;
        let room = self.wbuf.len() + p.method.len() + p.header.len() + body.len() + 64;
        if room >= self.flush_at || !self.window_has_room(p.channel)? {
            return Ok(false);
        }
        self.write_publish(p, body)?;
        Ok(true)
    }

    /// Whether the confirm window (if any) has room; fails once the broker nacked.
    fn window_has_room(&mut self, channel: u16) -> Result<bool, ClientError> {
        let ch = self.channel_mut(channel)?;
        match &ch.confirms {
            Some(c) if c.nacked() > 0 => Err(ClientError::Nacked { count: c.nacked() }),
            Some(c) => Ok(ch.confirm_window == 0 || c.outstanding() < ch.confirm_window),
            None => Ok(true),
        }
    }

    fn write_publish(&mut self, p: &Publication, body: &[u8]) -> Result<Option<u64>, ClientError> {
        let channel = p.channel;
        self.wbuf.extend_from_slice(&p.method);
        if body.len() == p.body_len {
            self.wbuf.extend_from_slice(&p.header);
        } else {
            self.wbuf
                .extend_from_slice(&header_frame(channel, &p.properties, body.len()));
        }
        write_body(&mut self.wbuf, channel, body, self.frame_max);
        Ok(self
            .channel_mut(channel)?
            .confirms
            .as_mut()
            .map(|c| c.published()))
    }

    /// Waits until the broker has confirmed everything published on `channel`; fails if
    /// it refused any of it.
    pub async fn wait_confirms(&mut self, channel: u16) -> Result<(), ClientError> {
        loop {
            self.check(channel)?;
            let ch = self.channel_mut(channel)?;
            let Some(c) = &ch.confirms else {
                return Err(ClientError::Protocol(format!(
                    "channel {channel} is not in confirm mode"
                )));
            };
            if c.nacked() > 0 {
                return Err(ClientError::Nacked { count: c.nacked() });
            }
            if c.outstanding() == 0 {
                return Ok(());
            }
            self.read_more().await?;
        }
    }

    /// Unconfirmed messages on a channel in confirm mode.
    pub fn unconfirmed(&self, channel: u16) -> u64 {
        self.channel_ref(channel)
            .and_then(|c| c.confirms.as_ref())
            .map_or(0, |c| c.outstanding())
    }

    /// Mandatory messages the broker returned as unroutable on this channel so far.
    pub fn returned(&self, channel: u16) -> u64 {
        self.channel_ref(channel).map_or(0, |c| c.returned)
    }

    // ---- consuming ----

    /// The next delivery for consumer `tag`, reading the socket as needed. Cancel-safe:
    /// wrap it in `tokio::time::timeout` to bound the wait.
    pub async fn next_delivery(
        &mut self,
        channel: u16,
        tag: &str,
    ) -> Result<Delivery, ClientError> {
        loop {
            if let Some(d) = self.try_next_delivery(channel, tag)? {
                return Ok(d);
            }
            self.read_more().await?;
        }
    }

    /// A delivery already received for consumer `tag`, without any I/O.
    pub fn try_next_delivery(
        &mut self,
        channel: u16,
        tag: &str,
    ) -> Result<Option<Delivery>, ClientError> {
        self.check(channel)?;
        let ch = self.channel_mut(channel)?;
        let Some(c) = ch.consumer(tag.as_bytes()) else {
            return Err(ClientError::Protocol(format!("no consumer {tag}")));
        };
        match c.queue.pop_front() {
            Some(d) => Ok(Some(d)),
            None if c.cancelled => Err(ClientError::ConsumerCancelled(tag.to_string())),
            None => Ok(None),
        }
    }

    /// `basic.ack` (buffered; see [`Connection::flush`]).
    pub fn ack(&mut self, channel: u16, delivery_tag: u64, multiple: bool) {
        self.send_method(
            channel,
            &Method::BasicAck(ferry_amqp091::BasicAck {
                delivery_tag,
                multiple,
            }),
        );
    }

    /// `basic.nack` (buffered).
    pub fn nack(&mut self, channel: u16, delivery_tag: u64, multiple: bool, requeue: bool) {
        self.send_method(
            channel,
            &Method::BasicNack(ferry_amqp091::BasicNack {
                delivery_tag,
                multiple,
                requeue,
            }),
        );
    }

    // ---- closing ----

    /// `connection.close`, waiting for the server's close-ok.
    pub async fn close(mut self) -> Result<(), ClientError> {
        if self.failed.is_some() {
            return Ok(());
        }
        self.send_method(
            0,
            &Method::ConnectionClose(ferry_amqp091::ConnectionClose {
                reply_code: ferry_amqp091::reply::REPLY_SUCCESS,
                ..Default::default()
            }),
        );
        loop {
            match self.read_more().await {
                Ok(()) => {}
                Err(ClientError::Closed) => return Ok(()),
                Err(e) => return Err(e),
            }
        }
    }

    // ---- I/O ----

    fn send_method(&mut self, channel: u16, method: &Method) {
        write_method(&mut self.wbuf, channel, method);
    }

    /// Writes everything buffered. While the socket is full, reads what the server sends
    /// meanwhile, so neither side can wait on the other with both buffers full.
    pub async fn flush(&mut self) -> Result<(), ClientError> {
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
            Ok(n) => {
                self.last_read = Instant::now();
                Ok(n)
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => Ok(0),
            Err(e) => Err(self.fail(e.into())),
        }
    }

    /// Writes what is buffered, then waits for the server to send something and decodes
    /// all of it. Keeps heartbeats going when they were agreed.
    async fn read_more(&mut self) -> Result<(), ClientError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        self.flush().await?;
        loop {
            // Sent before every wait, not only when a wait times out: a server whose own
            // heartbeats arrive more often than our time-out would otherwise never see ours.
            let mut wait = None;
            if let Some(h) = self.heartbeat {
                if self.last_write.elapsed() >= h / 2 {
                    write_heartbeat(&mut self.wbuf);
                    self.flush().await?;
                }
                wait = Some((h / 2).saturating_sub(self.last_write.elapsed()));
            }
            self.make_read_room();
            // `read_buf` rather than `readable` + `try_read_buf`: a read that does not fill the
            // buffer then clears tokio's readiness (epoll is edge-triggered), so the next wait
            // is for the next edge, not one more read that can only return EAGAIN. It is
            // cancel safe: a timed-out wait has read nothing.
            let read = self.stream.read_buf(&mut self.rbuf);
            let read = match wait {
                None => Some(read.await),
                Some(w) => tokio::time::timeout(w, read).await.ok(),
            };
            match read {
                Some(Ok(0)) => return Err(self.fail(eof())),
                Some(Ok(_)) => {
                    self.last_read = Instant::now();
                    return self.process_or_fail();
                }
                Some(Err(e)) => return Err(self.fail(e.into())),
                // Silence is judged only after a wait found nothing to read: a client that
                // has not read for a while (publishing only) has the server's heartbeats
                // waiting in the socket.
                None => {
                    let silent = self
                        .heartbeat
                        .is_some_and(|h| self.last_read.elapsed() > h * 2);
                    if silent {
                        let e = ClientError::Protocol("no heartbeat from the server".into());
                        return Err(self.fail(e));
                    }
                }
            }
        }
    }

    fn fail(&mut self, e: ClientError) -> ClientError {
        self.failed.get_or_insert(e).clone()
    }

    fn process_or_fail(&mut self) -> Result<(), ClientError> {
        let result = self.process();
        if let Err(e) = result {
            return Err(self.fail(e));
        }
        match &self.failed {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }

    /// Decodes every complete frame in the read buffer.
    fn process(&mut self) -> Result<(), ClientError> {
        while let Some(frame) = decode_frame(&mut self.rbuf, self.frame_max)
            .map_err(|e| ClientError::Protocol(e.to_string()))?
        {
            if frame.frame_type == FrameType::Heartbeat {
                continue;
            }
            let channel = frame.channel;
            if channel == 0 {
                if frame.frame_type != FrameType::Method {
                    return Err(ClientError::Protocol(format!(
                        "{:?} frame on channel 0",
                        frame.frame_type
                    )));
                }
                let method = Method::decode(frame.payload)
                    .map_err(|e| ClientError::Protocol(e.to_string()))?;
                self.connection_method(method);
                continue;
            }
            let ch = self
                .channels
                .get_mut(usize::from(channel))
                .and_then(Option::as_mut)
                .ok_or_else(|| {
                    ClientError::Protocol(format!("frame for unopened channel {channel}"))
                })?;
            match ch
                .assembler
                .push(frame)
                .map_err(|e| ClientError::Protocol(e.to_string()))?
            {
                None => {}
                Some(Assembled::Method(m)) => self.channel_method(channel, m)?,
                Some(Assembled::Message(m)) => self.channel_content(channel, m)?,
            }
        }
        Ok(())
    }

    fn connection_method(&mut self, method: Method) {
        match method {
            Method::ConnectionClose(c) => {
                self.send_method(0, &Method::ConnectionCloseOk(Default::default()));
                // Best effort: the close-ok goes out if the socket takes it now.
                if let Ok(n) = self.stream.try_write(&self.wbuf) {
                    self.wbuf.advance(n);
                }
                self.fail(ClientError::ConnectionClosed {
                    code: c.reply_code,
                    text: c.reply_text.to_string(),
                });
            }
            Method::ConnectionCloseOk(_) => {
                self.fail(ClientError::Closed);
            }
            Method::ConnectionBlocked(_) => self.blocked = true,
            Method::ConnectionUnblocked(_) => self.blocked = false,
            other => {
                if let Some(Some(ch)) = self.channels.get_mut(0) {
                    ch.replies.push_back(other);
                }
            }
        }
    }

    fn channel_method(&mut self, channel: u16, method: Method) -> Result<(), ClientError> {
        let ch = self.channel_mut(channel)?;
        match method {
            Method::BasicAck(a) => confirm(ch, channel, a.delivery_tag, a.multiple, false)?,
            Method::BasicNack(n) => confirm(ch, channel, n.delivery_tag, n.multiple, true)?,
            Method::BasicCancel(c) => {
                // The server cancelled a consumer (its queue went away).
                if let Some(consumer) = ch.consumer(c.consumer_tag.as_bytes()) {
                    consumer.cancelled = true;
                }
            }
            Method::ChannelClose(c) => {
                ch.closed = Some(ClientError::ChannelClosed {
                    channel,
                    code: c.reply_code,
                    text: c.reply_text.to_string(),
                });
                self.send_method(channel, &Method::ChannelCloseOk(Default::default()));
            }
            Method::ChannelFlow(f) => {
                self.send_method(
                    channel,
                    &Method::ChannelFlowOk(ferry_amqp091::ChannelFlowOk { active: f.active }),
                );
            }
            other => ch.replies.push_back(other),
        }
        Ok(())
    }

    fn channel_content(
        &mut self,
        channel: u16,
        message: ferry_amqp091::Message,
    ) -> Result<(), ClientError> {
        let ch = self.channel_mut(channel)?;
        match message.method {
            Method::BasicDeliver(d) => {
                let Some(consumer) = ch.consumer(d.consumer_tag.as_bytes()) else {
                    return Err(ClientError::Protocol(format!(
                        "delivery for unknown consumer {}",
                        d.consumer_tag
                    )));
                };
                consumer.queue.push_back(Delivery {
                    channel,
                    consumer_tag: d.consumer_tag,
                    delivery_tag: d.delivery_tag,
                    redelivered: d.redelivered,
                    properties: message.header.properties.decode(),
                    body: message.body,
                });
            }
            Method::BasicReturn(_) => ch.returned += 1,
            other => {
                return Err(ClientError::Protocol(format!(
                    "unexpected content-bearing {}",
                    other.name()
                )))
            }
        }
        Ok(())
    }

    fn check(&self, channel: u16) -> Result<(), ClientError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        match self.channel_ref(channel) {
            None => Err(ClientError::Protocol(format!(
                "channel {channel} is not open"
            ))),
            Some(ch) => match &ch.closed {
                Some(e) => Err(e.clone()),
                None => Ok(()),
            },
        }
    }

    fn channel_ref(&self, channel: u16) -> Option<&Channel> {
        self.channels
            .get(usize::from(channel))
            .and_then(Option::as_ref)
    }

    fn channel_mut(&mut self, channel: u16) -> Result<&mut Channel, ClientError> {
        self.channels
            .get_mut(usize::from(channel))
            .and_then(Option::as_mut)
            .ok_or_else(|| ClientError::Protocol(format!("channel {channel} is not open")))
    }

    /// Sends a synchronous method and waits for the channel's next reply.
    async fn rpc(&mut self, channel: u16, method: Method) -> Result<Method, ClientError> {
        self.check(channel)?;
        self.send_method(channel, &method);
        self.await_reply(channel).await
    }

    async fn await_reply(&mut self, channel: u16) -> Result<Method, ClientError> {
        loop {
            if let Some(reply) = self
                .channel_mut(channel)
                .ok()
                .and_then(|c| c.replies.pop_front())
            {
                return Ok(reply);
            }
            self.check(channel)?;
            self.read_more().await?;
        }
    }
}

fn confirm(
    ch: &mut Channel,
    channel: u16,
    tag: u64,
    multiple: bool,
    nack: bool,
) -> Result<(), ClientError> {
    match ch.confirms.as_mut() {
        Some(c) => c
            .confirm(tag, multiple, nack)
            .map_err(ClientError::Protocol),
        None => Err(ClientError::Protocol(format!(
            "publisher confirm on channel {channel}, which is not in confirm mode"
        ))),
    }
}

fn eof() -> ClientError {
    std::io::Error::new(
        std::io::ErrorKind::UnexpectedEof,
        "the server closed the connection",
    )
    .into()
}

/// Announces the extensions this client handles, so servers use them.
fn client_properties() -> Result<FieldTable, ClientError> {
    let mut capabilities = FieldTable::new();
    for name in [
        "publisher_confirms",
        "consumer_cancel_notify",
        "basic.nack",
        "connection.blocked",
        "exchange_exchange_bindings",
    ] {
        capabilities.insert(ShortStr::try_from(name)?, FieldValue::Bool(true));
    }
    let mut props = FieldTable::new();
    props.insert(
        ShortStr::from_static("product"),
        FieldValue::string("ferry-client091")?,
    );
    props.insert(
        ShortStr::from_static("version"),
        FieldValue::string(env!("CARGO_PKG_VERSION"))?,
    );
    props.insert(
        ShortStr::from_static("capabilities"),
        FieldValue::Table(capabilities),
    );
    Ok(props)
}
