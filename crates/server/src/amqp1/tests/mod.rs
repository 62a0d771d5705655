//! The 1.0 layer driven frame by frame, without sockets: each test sends what a client
//! would and checks the frames that come back, with a clock of its own.

mod connection;
mod links;
mod messages;
mod selectors;
mod sessions;
mod shared_subscriptions;
mod subscriptions;
mod transactions;

use bytes::{Bytes, BytesMut};
use ferry_amqp1::{
    decode_frame, write_frame, write_sasl_frame, Attach, Begin, Body, DeliveryState, Disposition,
    Flow, FrameBody, LinkTarget, Message, Open, Performative, ReceiverSettleMode, Role, SaslFrame,
    SaslInit, SenderSettleMode, Source, Symbol, Target, Transfer, PROTOCOL_HEADER,
    SASL_PROTOCOL_HEADER,
};
use ferry_core::Broker;
use std::sync::Arc;

use super::{connection, Amqp1};
use crate::config::ServerConfig;
use crate::shell::testing::{peer, services, services_with_acl, Wire};
use crate::shell::Phase;

type Client = Wire<Amqp1>;

/// What the connection sent, decoded.
#[allow(clippy::large_enum_variant)] // See `Performative`.
#[derive(Debug, Clone, PartialEq)]
enum Item {
    Header([u8; 8]),
    Sasl(SaslFrame),
    Empty,
    Frame(u16, Performative, Bytes),
}

fn decode(mut out: BytesMut) -> Vec<Item> {
    let mut items = Vec::new();
    while !out.is_empty() {
        if out.starts_with(b"AMQP") && out.len() >= 8 {
            let h = out.split_to(8);
            items.push(Item::Header(h[..].try_into().expect("8 octets")));
            continue;
        }
        let frame = decode_frame(&mut out, u32::MAX)
            .expect("well-formed output")
            .expect("whole frames");
        items.push(match frame.decode_body().expect("decodes") {
            FrameBody::Empty => Item::Empty,
            FrameBody::Sasl(s) => Item::Sasl(s),
            FrameBody::Amqp {
                performative,
                payload,
            } => Item::Frame(frame.channel, performative, payload),
        });
    }
    items
}

fn frame(channel: u16, p: impl Into<Performative>) -> BytesMut {
    let mut out = BytesMut::new();
    write_frame(&mut out, channel, &p.into(), &[]);
    out
}

fn sasl(f: impl Into<SaslFrame>) -> BytesMut {
    let mut out = BytesMut::new();
    write_sasl_frame(&mut out, &f.into());
    out
}

impl Client {
    fn exchange(&mut self, bytes: BytesMut) -> Vec<Item> {
        self.send(&bytes);
        decode(self.take_output())
    }

    fn perform(&mut self, channel: u16, p: impl Into<Performative>) -> Vec<Item> {
        self.exchange(frame(channel, p))
    }

    fn broker(&self) -> Arc<Broker> {
        self.conn.broker().clone()
    }

    fn begin(&mut self, channel: u16) {
        let begin = Begin {
            next_outgoing_id: 0,
            incoming_window: 1000,
            outgoing_window: 1000,
            ..Begin::default()
        };
        let got = self.perform(channel, begin);
        assert!(
            matches!(&got[..], [Item::Frame(ch, Performative::Begin(b), _)] if *ch == channel && b.remote_channel == Some(channel)),
            "{got:?}"
        );
    }

    /// Attaches a link on which the client sends to `address` (`None`: the relay).
    fn attach_sender(&mut self, channel: u16, handle: u32, address: Option<&str>) -> Vec<Item> {
        let attach = Attach {
            name: format!("sender-{handle}").into(),
            handle,
            role: Role::Sender,
            source: Some(Source::default()),
            target: Some(LinkTarget::Target(Target {
                address: address.map(Into::into),
                ..Target::default()
            })),
            initial_delivery_count: Some(0),
            ..Attach::default()
        };
        self.perform(channel, attach)
    }

    /// Attaches a link on which the client receives from `source`.
    fn attach_receiver_from(
        &mut self,
        channel: u16,
        handle: u32,
        source: Source,
        settled: bool,
    ) -> Vec<Item> {
        let attach = Attach {
            name: format!("receiver-{handle}").into(),
            handle,
            role: Role::Receiver,
            snd_settle_mode: if settled {
                SenderSettleMode::Settled
            } else {
                SenderSettleMode::Unsettled
            },
            rcv_settle_mode: ReceiverSettleMode::First,
            source: Some(source),
            target: Some(LinkTarget::Target(Target::default())),
            ..Attach::default()
        };
        self.perform(channel, attach)
    }

    fn attach_receiver(&mut self, channel: u16, handle: u32, address: &str) -> Vec<Item> {
        let source = Source {
            address: Some(address.into()),
            ..Source::default()
        };
        self.attach_receiver_from(channel, handle, source, false)
    }

    /// Grants `credit` on a receiving link whose delivery count (as the client sees it) is
    /// `count`.
    fn credit(&mut self, channel: u16, handle: u32, count: u32, credit: u32) -> Vec<Item> {
        let flow = Flow {
            next_incoming_id: Some(0),
            incoming_window: 10_000,
            next_outgoing_id: 0,
            outgoing_window: 10_000,
            handle: Some(handle),
            delivery_count: Some(count),
            link_credit: Some(credit),
            ..Flow::default()
        };
        self.perform(channel, flow)
    }

    /// Sends one message as one transfer.
    fn transfer(
        &mut self,
        channel: u16,
        handle: u32,
        id: u32,
        settled: bool,
        message: &Message,
    ) -> Vec<Item> {
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
        write_frame(&mut out, channel, &t.into(), &payload);
        self.exchange(out)
    }

    fn settle(
        &mut self,
        channel: u16,
        first: u32,
        last: Option<u32>,
        state: DeliveryState,
    ) -> Vec<Item> {
        let d = Disposition {
            role: Role::Receiver,
            first,
            last,
            settled: true,
            state: Some(state),
            batchable: false,
        };
        self.perform(channel, d)
    }
}

/// A connection through SASL ANONYMOUS and open; `idle` is the client's idle-time-out.
async fn open_with(config: ServerConfig, idle: Option<u32>) -> Client {
    open_on(services(config), idle).await
}

/// An open connection to the broker of `services` (connections opened on clones of them
/// share it).
async fn open_on(services: crate::shell::Services, idle: Option<u32>) -> Client {
    let mut c = Wire::new(|now| connection(services, peer(), now, true));
    let hello = decode(c.take_output());
    assert!(
        matches!(
            &hello[..],
            [
                Item::Header(SASL_PROTOCOL_HEADER),
                Item::Sasl(SaslFrame::SaslMechanisms(_))
            ]
        ),
        "{hello:?}"
    );
    c.send(&sasl(SaslInit {
        mechanism: Symbol::from("ANONYMOUS"),
        initial_response: None,
        hostname: None,
    }));
    assert_eq!(c.conn.shell.phase, Phase::Authenticating);
    c.finish_auth().await;
    let outcome = decode(c.take_output());
    assert!(
        matches!(&outcome[..], [Item::Sasl(SaslFrame::SaslOutcome(o))] if o.code == ferry_amqp1::SaslCode::Ok),
        "{outcome:?}"
    );
    c.send(&PROTOCOL_HEADER);
    let open = Open {
        container_id: "test-client".into(),
        max_frame_size: 65_536,
        idle_time_out: idle,
        ..Open::default()
    };
    let got = c.exchange(frame(0, open));
    assert!(
        matches!(
            &got[..],
            [
                Item::Header(PROTOCOL_HEADER),
                Item::Frame(0, Performative::Open(_), _)
            ]
        ),
        "{got:?}"
    );
    assert_eq!(c.conn.shell.phase, Phase::Open);
    c
}

async fn open() -> Client {
    open_with(ServerConfig::default(), None).await
}

fn declare(c: &Client, name: &str) {
    c.broker()
        .declare_queue(name, ferry_core::QueueOptions::default(), false, 1)
        .expect("declares");
}

fn transfers(items: &[Item]) -> Vec<(Transfer, Bytes)> {
    items
        .iter()
        .filter_map(|i| match i {
            Item::Frame(_, Performative::Transfer(t), p) => Some((t.clone(), p.clone())),
            _ => None,
        })
        .collect()
}

fn dispositions(items: &[Item]) -> Vec<Disposition> {
    items
        .iter()
        .filter_map(|i| match i {
            Item::Frame(_, Performative::Disposition(d), _) => Some(d.clone()),
            _ => None,
        })
        .collect()
}

fn flows(items: &[Item]) -> Vec<Flow> {
    items
        .iter()
        .filter_map(|i| match i {
            Item::Frame(_, Performative::Flow(f), _) => Some(f.clone()),
            _ => None,
        })
        .collect()
}

fn body_of(payload: &Bytes) -> Bytes {
    match Message::decode(payload.clone()).expect("a message").body {
        Body::Data(parts) => parts.concat().into(),
        other => panic!("not a data body: {other:?}"),
    }
}

fn error_of(items: &[Item]) -> Option<String> {
    items
        .iter()
        .find_map(|i| match i {
            Item::Frame(_, Performative::Close(c), _) => c.error.as_ref(),
            Item::Frame(_, Performative::End(e), _) => e.error.as_ref(),
            Item::Frame(_, Performative::Detach(d), _) => d.error.as_ref(),
            _ => None,
        })
        .map(|e| e.condition.as_str().to_owned())
}
