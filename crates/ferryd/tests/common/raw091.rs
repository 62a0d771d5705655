//! A minimal blocking AMQP 0-9-1 peer, enough to publish and consume across protocols.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};

use bytes::{Bytes, BytesMut};
use ferry_amqp091::{
    decode_frame, write_content, write_method, Assembled, BasicAck, BasicConsume, BasicGet,
    BasicProperties, BasicPublish, ChannelOpen, ConnectionOpen, ConnectionStartOk, ConnectionTune,
    ConnectionTuneOk, ContentAssembler, FieldTable, LongStr, Message, Method, QueueDeclare,
    ShortStr, PROTOCOL_HEADER,
};

const FRAME_MAX: usize = 131_072;

pub struct Raw091 {
    stream: TcpStream,
    inbuf: BytesMut,
    assemblers: Vec<ContentAssembler>,
}

pub fn short(s: &str) -> ShortStr {
    ShortStr::new(Bytes::copy_from_slice(s.as_bytes())).expect("short string")
}

impl Raw091 {
    /// Connects, logs in with PLAIN and opens channel 1.
    pub fn open(addr: SocketAddr) -> Raw091 {
        Raw091::open_as(addr, "guest")
    }

    /// As [`Raw091::open`], logged in as `user`.
    pub fn open_as(addr: SocketAddr, user: &str) -> Raw091 {
        let mut raw = Raw091::login_as(addr, user);
        raw.expect(0, |m| matches!(m, Method::ConnectionOpenOk(_)));
        raw.method(1, ChannelOpen::default().into());
        raw.expect(1, |m| matches!(m, Method::ChannelOpenOk(_)));
        raw
    }

    /// Header, PLAIN login as `user`, tune-ok and connection.open; the answer to open is the
    /// caller's to read.
    pub fn login_as(addr: SocketAddr, user: &str) -> Raw091 {
        Raw091::login(addr, user, 0)
    }

    /// As [`Raw091::login_as`], asking for heartbeats every `heartbeat` seconds.
    pub fn login(addr: SocketAddr, user: &str, heartbeat: u16) -> Raw091 {
        let (mut raw, tune) = Raw091::until_tune(addr, user);
        // Accept the server's frame size: asking for more than offered is a connection error.
        raw.method(
            0,
            ConnectionTuneOk {
                channel_max: 16,
                frame_max: tune.frame_max.min(FRAME_MAX as u32),
                heartbeat,
            }
            .into(),
        );
        raw.method(
            0,
            ConnectionOpen {
                virtual_host: short("/"),
                ..Default::default()
            }
            .into(),
        );
        raw
    }

    /// Protocol header and start-ok; returns the broker's connection.tune.
    pub fn until_tune(addr: SocketAddr, user: &str) -> (Raw091, ConnectionTune) {
        let stream = TcpStream::connect(addr).expect("connect");
        stream
            .set_read_timeout(Some(super::raw::TIMEOUT))
            .expect("timeout");
        // Handshake frames go out back to back: without this Nagle holds the second until the
        // first is acknowledged (40 ms of delayed ACK per connection).
        stream.set_nodelay(true).expect("nodelay");
        let mut raw = Raw091 {
            stream,
            inbuf: BytesMut::new(),
            assemblers: (0..4).map(|_| ContentAssembler::new(64 << 20)).collect(),
        };
        raw.stream.write_all(&PROTOCOL_HEADER).expect("header");
        raw.expect(0, |m| matches!(m, Method::ConnectionStart(_)));
        let password = if user == "guest" { "guest" } else { "password" };
        let response = format!("\0{user}\0{password}");
        // As RabbitMQ clients do: announce that connection.blocked is understood.
        let mut capabilities = ferry_amqp091::FieldTable::new();
        capabilities.push(
            short("connection.blocked"),
            ferry_amqp091::FieldValue::Bool(true),
        );
        let mut client_properties = ferry_amqp091::FieldTable::new();
        client_properties.push(
            short("capabilities"),
            ferry_amqp091::FieldValue::Table(capabilities),
        );
        raw.method(
            0,
            ConnectionStartOk {
                client_properties,
                mechanism: short("PLAIN"),
                response: LongStr::new(Bytes::from(response)).expect("response"),
                locale: short("en_US"),
            }
            .into(),
        );
        let Method::ConnectionTune(tune) =
            raw.expect(0, |m| matches!(m, Method::ConnectionTune(_)))
        else {
            unreachable!()
        };
        (raw, tune)
    }

    pub fn method(&mut self, channel: u16, method: Method) {
        let mut out = BytesMut::new();
        write_method(&mut out, channel, &method);
        self.stream.write_all(&out).expect("write");
    }

    pub fn publish(&mut self, exchange: &str, key: &str, props: &BasicProperties, body: &[u8]) {
        self.publish_with(
            BasicPublish {
                exchange: short(exchange),
                routing_key: short(key),
                ..Default::default()
            },
            props,
            body,
        );
    }

    pub fn publish_with(&mut self, publish: BasicPublish, props: &BasicProperties, body: &[u8]) {
        let mut out = BytesMut::new();
        let publish = Method::BasicPublish(publish);
        write_content(&mut out, 1, &publish, props, body, 4096);
        self.stream.write_all(&out).expect("write");
    }

    pub fn consume(&mut self, queue: &str) {
        self.method(
            1,
            BasicConsume {
                queue: short(queue),
                consumer_tag: short("c"),
                no_ack: true,
                ..Default::default()
            }
            .into(),
        );
        self.expect(1, |m| matches!(m, Method::BasicConsumeOk(_)));
    }

    /// Sends a method on channel 1 and waits for the reply `want` picks.
    pub fn call(&mut self, method: impl Into<Method>, want: impl Fn(&Method) -> bool) -> Method {
        self.method(1, method.into());
        self.expect(1, want)
    }

    /// Declares a queue on channel 1 with these arguments.
    pub fn declare_queue(&mut self, name: &str, arguments: FieldTable) {
        self.call(
            QueueDeclare {
                queue: short(name),
                arguments,
                ..Default::default()
            },
            |m| matches!(m, Method::QueueDeclareOk(_)),
        );
    }

    /// basic.get on channel 1: the message, or `None` for get-empty.
    pub fn get(&mut self, queue: &str, no_ack: bool) -> Option<Message> {
        self.method(
            1,
            BasicGet {
                queue: short(queue),
                no_ack,
                ..Default::default()
            }
            .into(),
        );
        loop {
            match self.next() {
                Some((1, Assembled::Message(m))) => return Some(m),
                Some((1, Assembled::Method(Method::BasicGetEmpty(_)))) => return None,
                Some((1, Assembled::Method(m))) => panic!("unexpected {m:?} after basic.get"),
                Some(_) => continue,
                None => panic!("connection ended while waiting for get-ok"),
            }
        }
    }

    pub fn ack(&mut self, delivery_tag: u64, multiple: bool) {
        self.method(
            1,
            BasicAck {
                delivery_tag,
                multiple,
            }
            .into(),
        );
    }

    /// Waits for channel 1 to be closed by the broker; returns the reply code.
    pub fn channel_closed(&mut self) -> u16 {
        match self.expect(1, |m| matches!(m, Method::ChannelClose(_))) {
            Method::ChannelClose(c) => c.reply_code,
            _ => unreachable!(),
        }
    }

    /// The next method or message on any channel; `None` once the broker closed the socket
    /// (or nothing came for the read timeout).
    pub fn next(&mut self) -> Option<(u16, Assembled)> {
        loop {
            match decode_frame(&mut self.inbuf, FRAME_MAX) {
                Ok(Some(frame)) => {
                    let channel = frame.channel;
                    let assembler = self.assemblers.get_mut(usize::from(channel))?;
                    match assembler.push(frame) {
                        Ok(Some(done)) => return Some((channel, done)),
                        Ok(None) => continue,
                        Err(e) => panic!("broker sent invalid content: {e}"),
                    }
                }
                Ok(None) => {}
                Err(e) => panic!("broker sent an invalid frame: {e}"),
            }
            let mut chunk = [0u8; 65536];
            match self.stream.read(&mut chunk) {
                Ok(0) | Err(_) => return None,
                Ok(n) => self.inbuf.extend_from_slice(&chunk[..n]),
            }
        }
    }

    /// A second handle on the socket, for writing from another thread.
    pub fn writer(&self) -> TcpStream {
        self.stream.try_clone().expect("clone socket")
    }

    pub fn set_read_timeout(&mut self, timeout: std::time::Duration) {
        self.stream
            .set_read_timeout(Some(timeout))
            .expect("timeout");
    }

    /// Reads and discards whatever comes until the broker closes the socket; false if it is
    /// still open after `limit`.
    pub fn discard_until_closed(&mut self, limit: std::time::Duration) -> bool {
        let deadline = std::time::Instant::now() + limit;
        let mut chunk = [0u8; 65536];
        while std::time::Instant::now() < deadline {
            match self.stream.read(&mut chunk) {
                Ok(0) => return true,
                Ok(_) => {}
                Err(e)
                    if e.kind() == std::io::ErrorKind::WouldBlock
                        || e.kind() == std::io::ErrorKind::TimedOut => {}
                Err(_) => return true,
            }
        }
        false
    }

    pub fn expect(&mut self, channel: u16, want: impl Fn(&Method) -> bool) -> Method {
        loop {
            match self.next() {
                Some((ch, Assembled::Method(m))) if ch == channel && want(&m) => return m,
                Some(_) => continue,
                None => panic!("connection ended while waiting on channel {channel}"),
            }
        }
    }

    /// The next message delivered on channel 1.
    pub fn delivery(&mut self) -> Message {
        loop {
            match self.next() {
                Some((1, Assembled::Message(m))) => return m,
                Some(_) => continue,
                None => panic!("connection ended while waiting for a delivery"),
            }
        }
    }
}
