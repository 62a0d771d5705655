//! A minimal blocking AMQP 1.0 peer built on ferry-amqp1: SASL, open, one session, links
//! both ways, transfers and dispositions. Enough to check ferryd from the outside.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};

use bytes::{Bytes, BytesMut};
use ferry_amqp1::{
    decode_frame, write_frame, write_sasl_frame, Attach, Begin, DeliveryState, Disposition, Flow,
    FrameBody, LinkTarget, Message, Open, Performative, ReceiverSettleMode, Role, SaslCode,
    SaslFrame, SaslInit, SaslResponse, SenderSettleMode, Source, Symbol, Target, Transfer,
    PROTOCOL_HEADER, SASL_PROTOCOL_HEADER,
};

const MAX_FRAME: u32 = 65_536;

/// A connection with one session on channel 0.
pub struct Amqp1 {
    stream: Box<dyn Stream>,
    inbuf: BytesMut,
    next_delivery: u32,
    /// Transfers that arrived while waiting for something else, in order.
    queued: Vec<(Transfer, Bytes)>,
    /// Other frames that arrived while waiting for transfers.
    others: Vec<Performative>,
}

pub trait Stream: Read + Write + Send {}
impl<T: Read + Write + Send> Stream for T {}

/// A delivery received, its transfers joined.
#[derive(Debug)]
pub struct Received {
    pub delivery_id: u32,
    pub handle: u32,
    pub settled: bool,
    pub payload: Bytes,
}

impl Received {
    pub fn message(&self) -> Message {
        Message::decode(self.payload.clone()).expect("a message")
    }
}

/// How a SASL exchange went.
#[derive(Debug, PartialEq)]
pub enum SaslResult {
    Ok,
    Refused(SaslCode),
    /// The connection ended during the exchange.
    Dropped,
}

pub fn tcp(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(super::raw::TIMEOUT))
        .expect("timeout");
    s.set_nodelay(true).expect("nodelay");
    s
}

impl Amqp1 {
    /// SASL ANONYMOUS, open, begin.
    pub fn open(addr: SocketAddr) -> Amqp1 {
        let mut c = Amqp1::new(Box::new(tcp(addr)));
        let result = c.sasl("ANONYMOUS", Vec::new(), |_| Vec::new());
        assert_eq!(result, SaslResult::Ok);
        c.open_and_begin();
        c
    }

    pub fn new(stream: Box<dyn Stream>) -> Amqp1 {
        Amqp1 {
            stream,
            inbuf: BytesMut::new(),
            next_delivery: 0,
            queued: Vec::new(),
            others: Vec::new(),
        }
    }

    /// The SASL layer: mechanism, initial response, and an answer for each challenge.
    pub fn sasl(
        &mut self,
        mechanism: &str,
        initial: Vec<u8>,
        mut respond: impl FnMut(&[u8]) -> Vec<u8>,
    ) -> SaslResult {
        self.write_raw(&SASL_PROTOCOL_HEADER);
        let Some(header) = self.read_header() else {
            return SaslResult::Dropped;
        };
        assert_eq!(header, SASL_PROTOCOL_HEADER);
        let Some(SaslFrame::SaslMechanisms(_)) = self.next_sasl() else {
            panic!("no sasl-mechanisms");
        };
        let init = SaslInit {
            mechanism: Symbol::from(mechanism),
            initial_response: Some(Bytes::from(initial)),
            hostname: None,
        };
        let mut out = BytesMut::new();
        write_sasl_frame(&mut out, &init.into());
        self.write_raw(&out);
        loop {
            match self.next_sasl() {
                Some(SaslFrame::SaslChallenge(c)) => {
                    let response = SaslResponse {
                        response: Bytes::from(respond(&c.challenge)),
                    };
                    let mut out = BytesMut::new();
                    write_sasl_frame(&mut out, &response.into());
                    self.write_raw(&out);
                }
                Some(SaslFrame::SaslOutcome(o)) if o.code == SaslCode::Ok => {
                    if let Some(data) = &o.additional_data {
                        respond(data);
                    }
                    return SaslResult::Ok;
                }
                Some(SaslFrame::SaslOutcome(o)) => return SaslResult::Refused(o.code),
                Some(other) => panic!("unexpected {}", other.name()),
                None => return SaslResult::Dropped,
            }
        }
    }

    /// The AMQP header, open and a session on channel 0; returns the broker's open.
    pub fn open_and_begin(&mut self) -> Open {
        self.write_raw(&PROTOCOL_HEADER);
        let header = self.read_header().expect("an AMQP header");
        assert_eq!(header, PROTOCOL_HEADER);
        self.send(
            0,
            Open {
                container_id: "ferry-test".into(),
                max_frame_size: MAX_FRAME,
                ..Open::default()
            },
        );
        let Some((0, Performative::Open(open), _)) = self.next() else {
            panic!("no open from the broker");
        };
        self.send(
            0,
            Begin {
                next_outgoing_id: 0,
                incoming_window: 100_000,
                outgoing_window: 100_000,
                ..Begin::default()
            },
        );
        assert!(matches!(self.next(), Some((0, Performative::Begin(_), _))));
        open
    }

    fn write_raw(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).expect("write");
        self.stream.flush().expect("flush");
    }

    pub fn send(&mut self, channel: u16, p: impl Into<Performative>) {
        let mut out = BytesMut::new();
        write_frame(&mut out, channel, &p.into(), &[]);
        self.write_raw(&out);
    }

    fn fill(&mut self) -> bool {
        let mut chunk = [0u8; 65_536];
        match self.stream.read(&mut chunk) {
            Ok(0) | Err(_) => false,
            Ok(n) => {
                self.inbuf.extend_from_slice(&chunk[..n]);
                true
            }
        }
    }

    fn read_header(&mut self) -> Option<[u8; 8]> {
        while self.inbuf.len() < 8 {
            if !self.fill() {
                return None;
            }
        }
        let h = self.inbuf.split_to(8);
        Some(h[..].try_into().expect("8 octets"))
    }

    fn next_body(&mut self) -> Option<(u16, FrameBody)> {
        loop {
            if let Some(frame) = decode_frame(&mut self.inbuf, u32::MAX).expect("framing") {
                let body = frame.decode_body().expect("decodes");
                if body == FrameBody::Empty {
                    continue;
                }
                return Some((frame.channel, body));
            }
            if !self.fill() {
                return None;
            }
        }
    }

    fn next_sasl(&mut self) -> Option<SaslFrame> {
        match self.next_body()? {
            (_, FrameBody::Sasl(s)) => Some(s),
            other => panic!("expected a SASL frame: {other:?}"),
        }
    }

    /// The next frame from the broker (keep-alives skipped).
    pub fn next(&mut self) -> Option<(u16, Performative, Bytes)> {
        match self.next_body()? {
            (
                channel,
                FrameBody::Amqp {
                    performative,
                    payload,
                },
            ) => Some((channel, performative, payload)),
            other => panic!("expected an AMQP frame: {other:?}"),
        }
    }

    /// Frames until one satisfies `want`; transfers on the way are kept for
    /// [`Amqp1::receive`], other frames for [`Amqp1::take_others`].
    pub fn wait_for(&mut self, want: impl Fn(&Performative) -> bool) -> Performative {
        self.wait_for_frame(want).0
    }

    /// As [`Amqp1::wait_for`], with the frame's payload.
    pub fn wait_for_frame(
        &mut self,
        want: impl Fn(&Performative) -> bool,
    ) -> (Performative, Bytes) {
        loop {
            let (_, p, payload) = self.next().expect("the broker answers");
            if want(&p) {
                return (p, payload);
            }
            match p {
                Performative::Transfer(t) => self.queued.push((t, payload)),
                other => self.others.push(other),
            }
        }
    }

    pub fn take_others(&mut self) -> Vec<Performative> {
        std::mem::take(&mut self.others)
    }

    /// Attaches a link on which we send to `address`; returns the broker's attach.
    pub fn sender(&mut self, handle: u32, address: &str) -> Attach {
        self.send(
            0,
            Attach {
                name: format!("sender-{handle}").into(),
                handle,
                role: Role::Sender,
                source: Some(Source::default()),
                target: Some(LinkTarget::Target(Target {
                    address: Some(address.into()),
                    ..Target::default()
                })),
                initial_delivery_count: Some(0),
                ..Attach::default()
            },
        );
        let Performative::Attach(a) = self.wait_for(|p| matches!(p, Performative::Attach(_)))
        else {
            unreachable!()
        };
        a
    }

    /// Attaches a link on which we receive from `address` and grants `credit`.
    pub fn receiver(&mut self, handle: u32, address: &str, credit: u32) -> Attach {
        self.send(
            0,
            Attach {
                name: format!("receiver-{handle}").into(),
                handle,
                role: Role::Receiver,
                snd_settle_mode: SenderSettleMode::Unsettled,
                rcv_settle_mode: ReceiverSettleMode::First,
                source: Some(Source {
                    address: Some(address.into()),
                    ..Source::default()
                }),
                target: Some(LinkTarget::Target(Target::default())),
                ..Attach::default()
            },
        );
        let Performative::Attach(a) = self.wait_for(|p| matches!(p, Performative::Attach(_)))
        else {
            unreachable!()
        };
        if a.source.is_some() {
            self.credit(handle, 0, credit);
        }
        a
    }

    pub fn credit(&mut self, handle: u32, delivery_count: u32, credit: u32) {
        self.send(
            0,
            Flow {
                next_incoming_id: Some(0),
                incoming_window: 100_000,
                next_outgoing_id: self.next_delivery,
                outgoing_window: 100_000,
                handle: Some(handle),
                delivery_count: Some(delivery_count),
                link_credit: Some(credit),
                ..Flow::default()
            },
        );
    }

    /// Sends `message` unsettled on link `handle` and waits for the broker's settlement.
    pub fn publish(&mut self, handle: u32, message: &Message) -> DeliveryState {
        let id = self.transfer(handle, message, false);
        let d = self.wait_for(
            |p| matches!(p, Performative::Disposition(d) if d.first <= id && d.last.unwrap_or(d.first) >= id),
        );
        let Performative::Disposition(d) = d else {
            unreachable!()
        };
        assert!(d.settled);
        d.state.expect("an outcome")
    }

    /// Sends `message` on link `handle` (one frame); returns its delivery id.
    pub fn transfer(&mut self, handle: u32, message: &Message, settled: bool) -> u32 {
        let id = self.next_delivery;
        self.next_delivery += 1;
        let mut payload = BytesMut::new();
        message.encode(&mut payload);
        let t = Transfer {
            handle,
            delivery_id: Some(id),
            delivery_tag: Some(Bytes::copy_from_slice(&id.to_be_bytes())),
            message_format: Some(0),
            settled: Some(settled),
            ..Transfer::default()
        };
        let mut out = BytesMut::new();
        ferry_amqp1::write_transfer(&mut out, 0, &t, &payload, MAX_FRAME).expect("fits");
        self.write_raw(&out);
        id
    }

    /// The next delivery (its transfers joined).
    pub fn receive(&mut self) -> Received {
        let mut first: Option<Transfer> = None;
        let mut payload = BytesMut::new();
        loop {
            let (t, part) = if self.queued.is_empty() {
                let (Performative::Transfer(t), part) =
                    self.wait_for_frame(|p| matches!(p, Performative::Transfer(_)))
                else {
                    unreachable!()
                };
                (t, part)
            } else {
                self.queued.remove(0)
            };
            payload.extend_from_slice(&part);
            let more = t.more;
            if first.is_none() {
                first = Some(t);
            }
            if !more {
                let t = first.expect("a first transfer");
                return Received {
                    delivery_id: t.delivery_id.expect("an id"),
                    handle: t.handle,
                    settled: t.settled.unwrap_or(false),
                    payload: payload.freeze(),
                };
            }
        }
    }

    /// Settles our received delivery `id` with `state`.
    pub fn settle(&mut self, id: u32, state: DeliveryState) {
        self.send(
            0,
            Disposition {
                role: Role::Receiver,
                first: id,
                last: None,
                settled: true,
                state: Some(state),
                batchable: false,
            },
        );
    }

    pub fn close(mut self) {
        self.send(0, ferry_amqp1::Close { error: None });
        let _ = self.wait_for(|p| matches!(p, Performative::Close(_)));
    }
}
