//! An in-process fake 0-10 server driven step by step by each test, built on the codec.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use ferry_amqp010::{
    decode_frame, write_command, write_control_framed, write_transfer, Array, Assembler, Command,
    CommandHeader, ConnectionOpenOk, ConnectionStart, ConnectionStartOk, ConnectionTune, Control,
    Incoming, MessageTransfer, SequenceSet, SessionAttached, SessionCommandPoint, SessionCompleted,
    PROTOCOL_HEADER,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::{ConnectOptions, Connection};

pub const STEP: Duration = Duration::from_secs(5);

pub struct Listener {
    listener: TcpListener,
    pub addr: SocketAddr,
}

impl Listener {
    pub async fn bind() -> Listener {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        Listener { listener, addr }
    }

    pub async fn accept(&self) -> Peer {
        let (stream, _) = self.listener.accept().await.unwrap();
        Peer {
            stream,
            buf: BytesMut::new(),
            assemblers: HashMap::new(),
            max_frame: 65535,
            next_out: HashMap::new(),
            next_in: HashMap::new(),
        }
    }
}

#[derive(Debug)]
pub enum Item {
    Control(Control),
    Command {
        id: u32,
        sync: bool,
        command: Command,
        header: Option<Bytes>,
        body: Bytes,
    },
}

/// The server's side of one connection.
pub struct Peer {
    pub stream: TcpStream,
    buf: BytesMut,
    assemblers: HashMap<u16, Assembler>,
    pub max_frame: usize,
    /// Server command ids per channel.
    next_out: HashMap<u16, u32>,
    /// Client command ids per channel, as the server counts them.
    next_in: HashMap<u16, u32>,
}

impl Peer {
    pub async fn read_protocol_header(&mut self) {
        let mut h = [0u8; 8];
        tokio::time::timeout(STEP, self.stream.read_exact(&mut h))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(h, PROTOCOL_HEADER);
    }

    /// The usual negotiation; returns the client's start-ok.
    pub async fn handshake(&mut self, tune: ConnectionTune) -> ConnectionStartOk {
        self.read_protocol_header().await;
        self.stream.write_all(&PROTOCOL_HEADER).await.unwrap();
        self.control(
            0,
            ConnectionStart {
                server_properties: None,
                mechanisms: Some(Array::of_str16(["ANONYMOUS", "PLAIN"])),
                locales: Some(Array::of_str16(["en_US"])),
            },
        )
        .await;
        let Control::ConnectionStartOk(start_ok) = self.expect_control().await.1 else {
            panic!("expected start-ok")
        };
        self.control(0, tune.clone()).await;
        let Control::ConnectionTuneOk(tune_ok) = self.expect_control().await.1 else {
            panic!("expected tune-ok")
        };
        if let Some(f) = tune_ok.max_frame_size {
            self.max_frame = usize::from(f);
        }
        let Control::ConnectionOpen(_) = self.expect_control().await.1 else {
            panic!("expected open")
        };
        self.control(0, ConnectionOpenOk::default()).await;
        start_ok
    }

    pub async fn next(&mut self) -> Option<(u16, Item)> {
        loop {
            while let Some(frame) = decode_frame(&mut self.buf, 65535).unwrap() {
                let channel = frame.header.channel;
                let asm = self
                    .assemblers
                    .entry(channel)
                    .or_insert_with(|| Assembler::new(1 << 24));
                match asm.push(frame).unwrap() {
                    None => {}
                    Some(Incoming::Control(c)) => {
                        if let Control::SessionCommandPoint(p) = &c {
                            self.next_in.insert(channel, p.command_id.unwrap_or(0));
                        }
                        return Some((channel, Item::Control(c)));
                    }
                    Some(Incoming::Command {
                        header,
                        command,
                        message_header,
                        body,
                        ..
                    }) => {
                        let next = self.next_in.entry(channel).or_insert(0);
                        let id = *next;
                        *next += 1;
                        let CommandHeader { sync } = header;
                        return Some((
                            channel,
                            Item::Command {
                                id,
                                sync,
                                command,
                                header: message_header,
                                body,
                            },
                        ));
                    }
                }
            }
            self.buf.reserve(65536);
            let n = tokio::time::timeout(STEP, self.stream.read_buf(&mut self.buf))
                .await
                .expect("client went quiet")
                .unwrap();
            if n == 0 {
                return None;
            }
        }
    }

    /// The next control matching `want`, skipping others.
    pub async fn control_where(&mut self, want: impl Fn(&Control) -> bool) -> (u16, Control) {
        loop {
            let (ch, c) = self.expect_control().await;
            if want(&c) {
                return (ch, c);
            }
        }
    }

    pub async fn expect_control(&mut self) -> (u16, Control) {
        match self.next().await {
            Some((ch, Item::Control(c))) => (ch, c),
            other => panic!("expected a control, got {other:?}"),
        }
    }

    /// The next command, skipping controls.
    pub async fn expect_command(&mut self) -> (u16, u32, bool, Command, Option<Bytes>, Bytes) {
        loop {
            match self.next().await {
                Some((
                    ch,
                    Item::Command {
                        id,
                        sync,
                        command,
                        header,
                        body,
                    },
                )) => return (ch, id, sync, command, header, body),
                Some(_) => {}
                None => panic!("connection closed while expecting a command"),
            }
        }
    }

    pub async fn control(&mut self, channel: u16, control: impl Into<Control>) {
        let mut out = BytesMut::new();
        self.encode_control(&mut out, channel, control);
        self.write_raw(&out).await;
    }

    /// Sends a command and returns the id the client will give it.
    pub async fn command(&mut self, channel: u16, command: impl Into<Command>, sync: bool) -> u32 {
        let mut out = BytesMut::new();
        write_command(&mut out, channel, &command.into(), sync, self.max_frame).unwrap();
        self.write_raw(&out).await;
        self.take_id(channel)
    }

    pub async fn transfer(
        &mut self,
        channel: u16,
        destination: &str,
        header: &[u8],
        body: &[u8],
    ) -> u32 {
        let mut out = BytesMut::new();
        let id = self.encode_transfer(&mut out, channel, destination, header, body);
        self.write_raw(&out).await;
        id
    }

    /// The `encode_` methods append to `out` without writing, so that several items can go
    /// out in one write and reach the client in one read.
    pub fn encode_control(&self, out: &mut BytesMut, channel: u16, control: impl Into<Control>) {
        write_control_framed(out, channel, &control.into(), self.max_frame).unwrap();
    }

    /// Returns the id the client will give the transfer.
    pub fn encode_transfer(
        &mut self,
        out: &mut BytesMut,
        channel: u16,
        destination: &str,
        header: &[u8],
        body: &[u8],
    ) -> u32 {
        let t = MessageTransfer {
            destination: Some(destination.into()),
            ..Default::default()
        };
        write_transfer(out, channel, &t, false, header, body, self.max_frame).unwrap();
        self.take_id(channel)
    }

    pub async fn write_raw(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).await.unwrap();
    }

    fn take_id(&mut self, channel: u16) -> u32 {
        let next = self.next_out.entry(channel).or_insert(0);
        let id = *next;
        *next += 1;
        id
    }

    /// Answers the client's attach (attach, request-timeout, command-point); returns the
    /// channel and session name.
    pub async fn attach(&mut self) -> (u16, Bytes) {
        // Skips the request-timeout and command-point of earlier attaches.
        let (channel, a) = loop {
            match self.expect_control().await {
                (ch, Control::SessionAttach(a)) => break (ch, a),
                (_, Control::SessionRequestTimeout(_) | Control::SessionCommandPoint(_)) => {}
                (_, c) => panic!("expected attach, got {c:?}"),
            }
        };
        let name = a.name.unwrap();
        self.control(
            channel,
            SessionAttached {
                name: Some(name.clone()),
            },
        )
        .await;
        self.control(
            channel,
            SessionCommandPoint {
                command_id: Some(0),
                command_offset: Some(0),
            },
        )
        .await;
        self.next_out.insert(channel, 0);
        (channel, name)
    }

    pub async fn complete(&mut self, channel: u16, lo: u32, hi: u32) {
        self.control(
            channel,
            SessionCompleted {
                commands: Some(SequenceSet::from_range(lo, hi)),
                timely_reply: false,
            },
        )
        .await;
    }
}

/// A client connected to a fresh fake server that has done the handshake.
pub async fn connected(options: ConnectOptions, tune: ConnectionTune) -> (Connection, Peer) {
    let listener = Listener::bind().await;
    let addr = listener.addr;
    let server = async {
        let mut peer = listener.accept().await;
        peer.handshake(tune).await;
        peer
    };
    let (conn, peer) = tokio::join!(Connection::connect(addr, options), server);
    (conn.unwrap(), peer)
}

pub fn default_tune() -> ConnectionTune {
    ConnectionTune {
        channel_max: Some(32),
        max_frame_size: Some(65535),
        heartbeat_min: Some(0),
        heartbeat_max: Some(120),
    }
}
