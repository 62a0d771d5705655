//! A deliberately low-level, blocking 0-10 peer for tests that must send what no
//! well-behaved client would: odd commands, bad frames, garbage.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use ferry_amqp010::{
    decode_frame, write_command, write_control, write_transfer, Array, Assembler, Command,
    ConnectionOpen, ConnectionStartOk, ConnectionTune, ConnectionTuneOk, Control, Incoming,
    SessionAttach, SessionCommandPoint, Str, PROTOCOL_HEADER,
};

pub struct Raw {
    pub stream: TcpStream,
    inbuf: BytesMut,
    assemblers: Vec<Assembler>,
    /// Next command id per channel.
    next_id: Vec<u32>,
}

pub const TIMEOUT: Duration = Duration::from_secs(10);

impl Raw {
    pub fn connect(addr: SocketAddr) -> Raw {
        let stream = TcpStream::connect(addr).expect("connect");
        stream.set_read_timeout(Some(TIMEOUT)).expect("timeout");
        stream.set_nodelay(true).expect("nodelay");
        Raw {
            stream,
            inbuf: BytesMut::new(),
            assemblers: (0..16).map(|_| Assembler::new(64 << 20)).collect(),
            next_id: vec![0; 16],
        }
    }

    /// Protocol header, ANONYMOUS login, tune, open.
    pub fn open(addr: SocketAddr) -> Raw {
        let mut raw = Raw::login(addr, "ANONYMOUS", b"");
        raw.expect_control(0, |c| matches!(c, Control::ConnectionOpenOk(_)));
        raw
    }

    /// As [`Raw::open`], logged in as `user` with SASL PLAIN.
    pub fn open_as(addr: SocketAddr, user: &str) -> Raw {
        let mut raw = Raw::login_as(addr, user);
        raw.expect_control(0, |c| matches!(c, Control::ConnectionOpenOk(_)));
        raw
    }

    /// PLAIN login as `user` up to connection.open, without waiting for the answer.
    pub fn login_as(addr: SocketAddr, user: &str) -> Raw {
        let response = format!("\0{user}\0password");
        Raw::login(addr, "PLAIN", response.as_bytes())
    }

    /// Protocol header, start-ok, tune-ok and connection.open; the answer to open is the
    /// caller's to read.
    pub fn login(addr: SocketAddr, mechanism: &str, response: &[u8]) -> Raw {
        let (mut raw, _) = Raw::until_tune(addr, mechanism, response);
        raw.control(
            0,
            ConnectionTuneOk {
                channel_max: Some(16),
                max_frame_size: Some(4096),
                heartbeat: Some(0),
            }
            .into(),
        );
        raw.control(
            0,
            ConnectionOpen {
                virtual_host: Some(Str::from("test")),
                capabilities: Some(Array::of_str16(std::iter::empty::<&str>())),
                insist: false,
            }
            .into(),
        );
        raw
    }

    /// Protocol header and start-ok; returns the broker's connection.tune.
    pub fn until_tune(addr: SocketAddr, mechanism: &str, response: &[u8]) -> (Raw, ConnectionTune) {
        let mut raw = Raw::connect(addr);
        raw.send_bytes(&PROTOCOL_HEADER);
        let mut header = [0u8; 8];
        raw.stream.read_exact(&mut header).expect("protocol header");
        assert_eq!(header, PROTOCOL_HEADER);
        raw.expect_control(0, |c| matches!(c, Control::ConnectionStart(_)));
        raw.control(
            0,
            ConnectionStartOk {
                mechanism: Some(Str::from(mechanism)),
                response: Some(Bytes::copy_from_slice(response)),
                ..Default::default()
            }
            .into(),
        );
        let Control::ConnectionTune(tune) =
            raw.expect_control(0, |c| matches!(c, Control::ConnectionTune(_)))
        else {
            unreachable!()
        };
        (raw, tune)
    }

    pub fn attach(&mut self, channel: u16, name: &str) {
        self.control(
            channel,
            SessionAttach {
                name: Some(Bytes::copy_from_slice(name.as_bytes())),
                force: false,
            }
            .into(),
        );
        self.expect_control(channel, |c| matches!(c, Control::SessionAttached(_)));
        self.control(
            channel,
            SessionCommandPoint {
                command_id: Some(0),
                command_offset: Some(0),
            }
            .into(),
        );
    }

    /// Declares `queue` (no options) on `channel`; returns the command id.
    pub fn declare_queue(&mut self, channel: u16, queue: &str) -> u32 {
        self.command(
            channel,
            ferry_amqp010::QueueDeclare {
                queue: Some(Str::from(queue)),
                ..Default::default()
            }
            .into(),
        )
    }

    /// Subscribes `destination` to `queue` with unlimited message and byte credit.
    pub fn subscribe_unlimited(
        &mut self,
        channel: u16,
        queue: &str,
        destination: &str,
        accept_mode: ferry_amqp010::AcceptMode,
    ) {
        use ferry_amqp010::{CreditUnit, MessageFlow, MessageSubscribe};
        self.command(
            channel,
            MessageSubscribe {
                queue: Some(Str::from(queue)),
                destination: Some(Str::from(destination)),
                accept_mode: Some(accept_mode),
                ..Default::default()
            }
            .into(),
        );
        for unit in [CreditUnit::Message, CreditUnit::Byte] {
            self.command(
                channel,
                MessageFlow {
                    destination: Some(Str::from(destination)),
                    unit: Some(unit),
                    value: Some(u32::MAX),
                }
                .into(),
            );
        }
    }

    pub fn send_bytes(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).expect("write");
    }

    pub fn control(&mut self, channel: u16, control: Control) {
        let mut out = BytesMut::new();
        write_control(&mut out, channel, &control).expect("encode control");
        self.send_bytes(&out);
    }

    /// Sends a command with the sync flag; returns its command id.
    pub fn command(&mut self, channel: u16, command: Command) -> u32 {
        let mut out = BytesMut::new();
        write_command(&mut out, channel, &command, true, 4096).expect("encode command");
        self.send_bytes(&out);
        self.take_id(channel)
    }

    pub fn transfer(
        &mut self,
        channel: u16,
        t: ferry_amqp010::MessageTransfer,
        header: &[u8],
        body: &[u8],
    ) -> u32 {
        let mut out = BytesMut::new();
        write_transfer(&mut out, channel, &t, true, header, body, 4096).expect("encode transfer");
        self.send_bytes(&out);
        self.take_id(channel)
    }

    fn take_id(&mut self, channel: u16) -> u32 {
        let slot = &mut self.next_id[usize::from(channel)];
        let id = *slot;
        *slot += 1;
        id
    }

    /// Next complete item on any channel, or None on EOF / timeout.
    pub fn next(&mut self) -> Option<(u16, Incoming)> {
        let deadline = Instant::now() + TIMEOUT;
        loop {
            match decode_frame(&mut self.inbuf, 1 << 16) {
                Ok(Some(frame)) => {
                    let channel = frame.header.channel;
                    let assembler = self.assemblers.get_mut(usize::from(channel))?;
                    match assembler.push(frame) {
                        Ok(Some(item)) => return Some((channel, item)),
                        Ok(None) => continue,
                        Err(e) => panic!("broker sent an invalid assembly: {e}"),
                    }
                }
                Ok(None) => {}
                Err(e) => panic!("broker sent an invalid frame: {e}"),
            }
            if Instant::now() > deadline {
                return None;
            }
            let mut chunk = [0u8; 65536];
            match self.stream.read(&mut chunk) {
                Ok(0) | Err(_) => return None,
                Ok(n) => self.inbuf.extend_from_slice(&chunk[..n]),
            }
        }
    }

    /// Reads until a control on `channel` satisfies `want`, skipping everything else.
    pub fn expect_control(&mut self, channel: u16, want: impl Fn(&Control) -> bool) -> Control {
        loop {
            match self.next() {
                Some((ch, Incoming::Control(c))) if ch == channel && want(&c) => return c,
                Some(_) => continue,
                None => panic!("connection ended while waiting for a control on channel {channel}"),
            }
        }
    }

    /// Reads until a command on `channel` satisfies `want`, skipping everything else.
    pub fn expect_command(&mut self, channel: u16, want: impl Fn(&Command) -> bool) -> Command {
        loop {
            match self.next() {
                Some((ch, Incoming::Command { command, .. }))
                    if ch == channel && want(&command) =>
                {
                    return command
                }
                Some(_) => continue,
                None => panic!("connection ended while waiting for a command on channel {channel}"),
            }
        }
    }

    /// Reads until the peer closes the socket; returns the connection.close it sent, if any.
    pub fn until_closed(&mut self) -> Option<ferry_amqp010::ConnectionClose> {
        let mut close = None;
        while let Some((_, item)) = self.next() {
            if let Incoming::Control(Control::ConnectionClose(c)) = item {
                close = Some(c);
                // Answer so the broker can drop the socket at once.
                self.control(0, ferry_amqp010::ConnectionCloseOk {}.into());
            }
        }
        close
    }
}
