//! The client against a scripted peer on a loopback socket: the peer's side is written
//! frame by frame with the codec, so each test says exactly what a broker sends.

use bytes::{Bytes, BytesMut};
use ferry_amqp1::{
    decode_frame, write_frame, write_sasl_frame, write_transfer, Attach, Begin, Close, Detach,
    Disposition, Flow, FrameBody, LinkTarget, Open, Performative, Rejected, Role, SaslCode,
    SaslFrame, SaslMechanisms, SaslOutcome, Source, Symbol, Target, Transfer, PROTOCOL_HEADER,
    SASL_PROTOCOL_HEADER,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::*;

struct Peer {
    stream: TcpStream,
    rbuf: BytesMut,
    /// What the peer's open says, in milliseconds.
    idle_time_out: Option<u32>,
}

impl Peer {
    async fn read_header(&mut self) -> [u8; 8] {
        while self.rbuf.len() < 8 {
            assert!(self.stream.read_buf(&mut self.rbuf).await.unwrap() > 0);
        }
        let h = self.rbuf.split_to(8);
        h[..].try_into().unwrap()
    }

    async fn next(&mut self) -> Option<FrameBody> {
        loop {
            if let Some(f) = decode_frame(&mut self.rbuf, u32::MAX).unwrap() {
                let body = f.decode_body().unwrap();
                if body == FrameBody::Empty {
                    continue;
                }
                return Some(body);
            }
            if self.stream.read_buf(&mut self.rbuf).await.unwrap_or(0) == 0 {
                return None;
            }
        }
    }

    async fn next_amqp(&mut self) -> (Performative, Bytes) {
        match self.next().await {
            Some(FrameBody::Amqp {
                performative,
                payload,
            }) => (performative, payload),
            other => panic!("expected an AMQP frame, got {other:?}"),
        }
    }

    /// The next frame `pick` takes, skipping others.
    async fn expect<T>(&mut self, pick: impl Fn(Performative) -> Option<T>) -> T {
        loop {
            let (p, _) = self.next_amqp().await;
            if let Some(t) = pick(p) {
                return t;
            }
        }
    }

    async fn send(&mut self, p: impl Into<Performative>) {
        let mut out = BytesMut::new();
        write_frame(&mut out, 0, &p.into(), &[]);
        self.stream.write_all(&out).await.unwrap();
    }

    /// The server's side of SASL (answering `mechanism`'s init with `code`), open (with
    /// `max_frame`) and begin (with `window`).
    async fn handshake(&mut self, max_frame: u32, window: u32) -> Bytes {
        assert_eq!(self.read_header().await, SASL_PROTOCOL_HEADER);
        let mut out = BytesMut::from(&SASL_PROTOCOL_HEADER[..]);
        write_sasl_frame(
            &mut out,
            &SaslMechanisms {
                sasl_server_mechanisms: vec![
                    Symbol::from_static("PLAIN"),
                    Symbol::from_static("ANONYMOUS"),
                ],
            }
            .into(),
        );
        self.stream.write_all(&out).await.unwrap();
        let Some(FrameBody::Sasl(SaslFrame::SaslInit(init))) = self.next().await else {
            panic!("no sasl-init");
        };
        let mut out = BytesMut::new();
        write_sasl_frame(
            &mut out,
            &SaslOutcome {
                code: SaslCode::Ok,
                additional_data: None,
            }
            .into(),
        );
        self.stream.write_all(&out).await.unwrap();
        assert_eq!(self.read_header().await, PROTOCOL_HEADER);
        self.stream.write_all(&PROTOCOL_HEADER).await.unwrap();
        let open = self.expect(|p| match p {
            Performative::Open(o) => Some(o),
            _ => None,
        });
        let open = open.await;
        assert_eq!(open.max_frame_size, 65_536);
        self.send(Open {
            container_id: "peer".into(),
            max_frame_size: max_frame,
            idle_time_out: self.idle_time_out,
            ..Open::default()
        })
        .await;
        let begin = self
            .expect(|p| match p {
                Performative::Begin(b) => Some(b),
                _ => None,
            })
            .await;
        assert_eq!(begin.remote_channel, None);
        self.send(Begin {
            remote_channel: Some(0),
            next_outgoing_id: 0,
            incoming_window: window,
            outgoing_window: 1000,
            ..Begin::default()
        })
        .await;
        let mut response = init.initial_response.unwrap_or_default();
        let mut m = BytesMut::from(init.mechanism.as_bytes());
        m.extend_from_slice(b":");
        m.extend_from_slice(&response);
        response = m.freeze();
        response
    }

    /// Answers the client's next attach as the other end; returns it.
    async fn answer_attach(&mut self, refuse: bool) -> Attach {
        let a = self
            .expect(|p| match p {
                Performative::Attach(a) => Some(a),
                _ => None,
            })
            .await;
        let role = match a.role {
            Role::Sender => Role::Receiver,
            Role::Receiver => Role::Sender,
        };
        let mut reply = Attach {
            name: a.name.clone(),
            handle: a.handle + 10,
            role,
            source: a.source.clone(),
            target: a.target.clone(),
            initial_delivery_count: (role == Role::Sender).then_some(0),
            ..Attach::default()
        };
        if refuse {
            reply.target = None;
            reply.source = None;
        }
        self.send(reply).await;
        a
    }

    fn flow(handle: u32, delivery_count: u32, credit: u32, window: u32) -> Flow {
        Flow {
            next_incoming_id: Some(0),
            incoming_window: window,
            next_outgoing_id: 0,
            outgoing_window: 1000,
            handle: Some(handle),
            delivery_count: Some(delivery_count),
            link_credit: Some(credit),
            ..Flow::default()
        }
    }
}

async fn pair() -> (TcpListener, String) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap().to_string();
    (l, addr)
}

async fn accept(l: TcpListener) -> Peer {
    let (stream, _) = l.accept().await.unwrap();
    Peer {
        stream,
        rbuf: BytesMut::new(),
        idle_time_out: None,
    }
}

fn plain() -> ConnectOptions {
    ConnectOptions {
        username: Some("alice".into()),
        password: Some("secret".into()),
        ..ConnectOptions::default()
    }
}

#[tokio::test]
async fn plain_login_and_anonymous_without_credentials() {
    let (l, addr) = pair().await;
    let peer = tokio::spawn(async move {
        let mut p = accept(l).await;
        let response = p.handshake(4096, 100).await;
        assert_eq!(&response[..], b"PLAIN:\0alice\0secret");
        p.expect(|p| matches!(p, Performative::Close(_)).then_some(()))
            .await;
        p.send(Close { error: None }).await;
    });
    let conn = Connection::connect(&addr, &plain()).await.unwrap();
    assert_eq!(conn.peer().container_id, "peer");
    assert_eq!(conn.peer().mechanism.as_deref(), Some("PLAIN"));
    conn.close().await.unwrap();
    peer.await.unwrap();

    let (l, addr) = pair().await;
    let peer = tokio::spawn(async move {
        let mut p = accept(l).await;
        let response = p.handshake(4096, 100).await;
        assert!(response.starts_with(b"ANONYMOUS:"));
    });
    let conn = Connection::connect(&addr, &ConnectOptions::default()).await;
    assert!(conn.is_ok(), "{:?}", conn.err());
    peer.await.unwrap();
}

#[tokio::test]
async fn unsettled_sends_wait_for_the_window_and_report_outcomes() {
    let (l, addr) = pair().await;
    let peer = tokio::spawn(async move {
        let mut p = accept(l).await;
        // Frames of 512 octets: a 1000-octet body takes three.
        p.handshake(512, 100).await;
        let a = p.answer_attach(false).await;
        assert_eq!(a.role, Role::Sender);
        assert_eq!(a.snd_settle_mode, ferry_amqp1::SenderSettleMode::Unsettled);
        p.send(Peer::flow(a.handle + 10, 0, 10, 100)).await;
        // Two deliveries fill the window of 2: the third waits for a settlement.
        let mut ids = Vec::new();
        let mut frames = 0;
        while ids.len() < 2 {
            let (t, _) = p.next_amqp().await;
            let Performative::Transfer(t) = t else {
                panic!("not a transfer")
            };
            frames += 1;
            assert_eq!(t.settled, Some(false));
            if !t.more {
                ids.push(t.delivery_id.unwrap());
            }
        }
        assert_eq!((ids.clone(), frames), (vec![0, 1], 6));
        p.send(Disposition {
            role: Role::Receiver,
            first: 0,
            last: Some(1),
            settled: true,
            state: Some(ferry_amqp1::DeliveryState::Accepted(
                ferry_amqp1::Accepted {},
            )),
            batchable: false,
        })
        .await;
        let mut last = None;
        while last.is_none() {
            let Performative::Transfer(t) = p.next_amqp().await.0 else {
                panic!()
            };
            if !t.more {
                last = t.delivery_id;
            }
        }
        assert_eq!(last, Some(2));
        p.send(Disposition {
            role: Role::Receiver,
            first: 2,
            last: None,
            settled: true,
            state: Some(ferry_amqp1::DeliveryState::Rejected(Rejected {
                error: None,
            })),
            batchable: false,
        })
        .await;
        // Settling what was never sent is the client's to refuse.
        p.send(Disposition {
            role: Role::Receiver,
            first: 7,
            last: None,
            settled: true,
            state: None,
            batchable: false,
        })
        .await;
        let close = p
            .expect(|p| match p {
                Performative::Close(c) => Some(c),
                _ => None,
            })
            .await;
        assert_eq!(
            close.error.unwrap().condition.as_str(),
            "amqp:connection:framing-error"
        );
    });
    let mut conn = Connection::connect(&addr, &plain()).await.unwrap();
    let tx = conn
        .attach_sender("tx", "q", SendMode::Unsettled { window: 2 })
        .await
        .unwrap();
    let p = Publication::simple(true, None, 1000);
    let body = vec![1u8; 1000];
    for _ in 0..3 {
        conn.send(tx, &p, &body).await.unwrap();
    }
    assert_eq!(conn.unsettled(tx), 1);
    let err = conn.wait_settled(tx).await.unwrap_err();
    assert!(
        matches!(
            err,
            ClientError::NotAccepted {
                count: 1,
                outcome: "rejected",
                ..
            }
        ),
        "{err}"
    );
    // Then the bad disposition ends the connection.
    let err = conn.wait_settled(tx).await.unwrap_err();
    assert!(matches!(err, ClientError::NotAccepted { .. }), "{err}");
    let err = loop {
        match conn.sync(tx).await {
            Err(e @ ClientError::Protocol(_)) => break e,
            Err(ClientError::NotAccepted { .. }) | Ok(()) => {
                // The not-accepted error is sticky per link; a sync still needs the socket.
                if let Some(e) = conn.error() {
                    break e.clone();
                }
                tokio::task::yield_now().await;
            }
            Err(e) => break e,
        }
    };
    assert!(matches!(err, ClientError::Protocol(_)), "{err}");
    peer.await.unwrap();
}

#[tokio::test]
async fn receivers_refill_credit_in_batches_and_accept_in_ranges() {
    let (l, addr) = pair().await;
    let peer = tokio::spawn(async move {
        let mut p = accept(l).await;
        p.handshake(4096, 100).await;
        let a = p.answer_attach(false).await;
        assert_eq!(a.role, Role::Receiver);
        let f = p
            .expect(|p| match p {
                Performative::Flow(f) => Some(f),
                _ => None,
            })
            .await;
        assert_eq!((f.delivery_count, f.link_credit), (Some(0), Some(4)));
        let handle = a.handle + 10;
        for id in 0..4u32 {
            let t = Transfer {
                handle,
                delivery_id: Some(id),
                delivery_tag: Some(Bytes::copy_from_slice(&id.to_be_bytes())),
                message_format: Some(0),
                settled: Some(false),
                ..Transfer::default()
            };
            let mut payload = BytesMut::new();
            ferry_amqp1::Message::data(vec![id as u8; 100 * id as usize]).encode(&mut payload);
            let mut out = BytesMut::new();
            write_transfer(&mut out, 0, &t, &payload, 128).unwrap();
            p.stream.write_all(&out).await.unwrap();
        }
        // Half the window taken: refilled to 4, less what is queued when the flow is
        // written (flows go out with the next write, so by then all 4 were taken). The
        // acceptances go as one range.
        let (mut flow, mut disposition) = (None, None);
        while flow.is_none() || disposition.is_none() {
            match p.next_amqp().await.0 {
                Performative::Flow(f) => flow = Some(f),
                Performative::Disposition(d) => disposition = Some(d),
                other => panic!("unexpected {}", other.name()),
            }
        }
        let (f, d) = (flow.unwrap(), disposition.unwrap());
        assert_eq!((f.delivery_count, f.link_credit), (Some(4), Some(4)));
        assert_eq!(
            (d.role, d.first, d.last, d.settled),
            (Role::Receiver, 0, Some(3), true)
        );
        // Then a manual-credit link: one credit, two transfers.
        let a = p.answer_attach(false).await;
        let f = p
            .expect(|p| match p {
                Performative::Flow(f) if f.handle == Some(a.handle) => Some(f),
                _ => None,
            })
            .await;
        assert_eq!((f.delivery_count, f.link_credit), (Some(0), Some(1)));
        for id in 4..6u32 {
            let t = Transfer {
                handle: a.handle + 10,
                delivery_id: Some(id),
                delivery_tag: Some(Bytes::copy_from_slice(&id.to_be_bytes())),
                settled: Some(true),
                ..Transfer::default()
            };
            let mut out = BytesMut::new();
            write_transfer(&mut out, 0, &t, &[0x00, 0x53, 0x75, 0xa0, 0], 4096).unwrap();
            p.stream.write_all(&out).await.unwrap();
        }
        p.expect(|p| matches!(p, Performative::Close(_)).then_some(()))
            .await;
    });
    let mut conn = Connection::connect(&addr, &plain()).await.unwrap();
    let rx = conn
        .attach_receiver(
            "rx",
            "q",
            ReceiveOptions {
                settled: false,
                credit_window: 4,
            },
        )
        .await
        .unwrap();
    let mut ids = Vec::new();
    for i in 0..4u32 {
        let d = conn.next_delivery(rx).await.unwrap();
        assert_eq!(d.delivery_id, i);
        assert_eq!(d.body().unwrap().len(), 100 * i as usize);
        assert!(!d.settled);
        ids.push(d.delivery_id);
    }
    for id in ids {
        conn.accept(id);
    }
    conn.flush().await.unwrap();
    let rx = conn
        .attach_receiver(
            "manual",
            "q",
            ReceiveOptions {
                settled: true,
                credit_window: 0,
            },
        )
        .await
        .unwrap();
    conn.add_credit(rx, 1).unwrap();
    let d = conn.next_delivery(rx).await.unwrap();
    assert!(d.settled);
    assert!(d.body().unwrap().is_empty());
    let err = conn.next_delivery(rx).await.unwrap_err();
    assert!(
        matches!(err, ClientError::Protocol(ref t) if t.contains("beyond its credit")),
        "{err}"
    );
    peer.await.unwrap();
}

#[tokio::test]
async fn refused_links_and_closes_carry_the_peers_reason() {
    let (l, addr) = pair().await;
    let peer = tokio::spawn(async move {
        let mut p = accept(l).await;
        p.handshake(4096, 100).await;
        let a = p.answer_attach(true).await;
        p.send(Detach {
            handle: a.handle + 10,
            closed: true,
            error: Some(ferry_amqp1::Error::new(
                ferry_amqp1::condition::NOT_FOUND,
                "no queue nowhere",
            )),
        })
        .await;
        let d = p
            .expect(|p| match p {
                Performative::Detach(d) => Some(d),
                _ => None,
            })
            .await;
        assert_eq!(d.handle, a.handle);
        p.send(Close {
            error: Some(ferry_amqp1::Error::new(
                ferry_amqp1::condition::RESOURCE_LIMIT_EXCEEDED,
                "enough",
            )),
        })
        .await;
        p.expect(|p| matches!(p, Performative::Close(_)).then_some(()))
            .await;
    });
    let mut conn = Connection::connect(&addr, &plain()).await.unwrap();
    let err = conn
        .attach_sender("tx", "nowhere", SendMode::Settled)
        .await
        .unwrap_err();
    match err {
        ClientError::LinkDetached {
            link,
            condition,
            description,
        } => {
            assert_eq!(link, "tx");
            assert_eq!(condition, "amqp:not-found");
            assert_eq!(description, "no queue nowhere");
        }
        other => panic!("{other}"),
    }
    let err = conn
        .attach_receiver("rx", "q", ReceiveOptions::default())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, ClientError::ConnectionClosed { condition, .. } if condition == "amqp:resource-limit-exceeded"),
        "{err}"
    );
    peer.await.unwrap();
    let _ = (
        Source::default(),
        Target::default(),
        LinkTarget::Target(Target::default()),
    );
}

#[tokio::test]
async fn credit_that_arrives_while_writing_is_not_waited_for_again() {
    // The client waits for credit with a large write pending; the peer reads nothing until
    // it has granted more. The grant is decoded while the write drains, and the client must
    // act on it rather than wait for more input (the peer sends nothing more until it gets
    // the second message).
    let (l, addr) = pair().await;
    let peer = tokio::spawn(async move {
        let mut p = accept(l).await;
        p.handshake(65_536, 1_000_000).await;
        let a = p.answer_attach(false).await;
        p.send(Peer::flow(a.handle + 10, 0, 1, 1_000_000)).await;
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        p.send(Peer::flow(a.handle + 10, 0, 2, 1_000_000)).await;
        let mut done = 0;
        while done < 2 {
            let Performative::Transfer(t) = p.next_amqp().await.0 else {
                continue;
            };
            if !t.more {
                done += 1;
            }
        }
        p.expect(|p| matches!(p, Performative::Close(_)).then_some(()))
            .await;
        p.send(Close { error: None }).await;
    });
    let options = ConnectOptions {
        flush_at: 64 << 20,
        ..plain()
    };
    let mut conn = Connection::connect(&addr, &options).await.unwrap();
    let tx = conn
        .attach_sender("tx", "q", SendMode::Settled)
        .await
        .unwrap();
    let body = vec![5u8; 8 << 20];
    let p = Publication::simple(false, None, body.len());
    let sent = tokio::time::timeout(std::time::Duration::from_secs(20), async {
        conn.send(tx, &p, &body).await.unwrap();
        conn.send(tx, &p, &body).await.unwrap();
        conn.flush().await.unwrap();
    })
    .await;
    assert!(
        sent.is_ok(),
        "the second send waited for input that never came"
    );
    conn.close().await.unwrap();
    peer.await.unwrap();
}

#[tokio::test]
async fn keepalives_go_out_even_when_the_peer_sends_more_often() {
    let (l, addr) = pair().await;
    let peer = tokio::spawn(async move {
        let mut p = accept(l).await;
        // The client must send something every 300 ms (half of 600).
        p.idle_time_out = Some(600);
        p.handshake(4096, 100).await;
        p.answer_attach(false).await;
        // Empty frames every 50 ms for 1.2 s: each wakes the client well before its own
        // keepalive time-out would.
        let mut empty = BytesMut::new();
        ferry_amqp1::write_empty_frame(&mut empty);
        let mut from_client = 0;
        for _ in 0..24 {
            p.stream.write_all(&empty).await.unwrap();
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            let mut chunk = [0u8; 4096];
            while let Ok(Ok(n)) = tokio::time::timeout(
                std::time::Duration::from_millis(1),
                p.stream.read(&mut chunk),
            )
            .await
            {
                assert!(n > 0, "the client closed");
                p.rbuf.extend_from_slice(&chunk[..n]);
            }
            while let Some(f) = decode_frame(&mut p.rbuf, u32::MAX).unwrap() {
                if f.decode_body().unwrap() == FrameBody::Empty {
                    from_client += 1;
                }
            }
        }
        from_client
    });
    let mut conn = Connection::connect(&addr, &plain()).await.unwrap();
    let rx = conn
        .attach_receiver(
            "rx",
            "q",
            ReceiveOptions {
                settled: true,
                credit_window: 1,
            },
        )
        .await
        .unwrap();
    // Nothing is ever delivered: the client waits through the peer's frames until the
    // peer hangs up.
    let waited = tokio::time::timeout(std::time::Duration::from_secs(20), conn.next_delivery(rx));
    let (from_client, _) = tokio::join!(peer, waited);
    let from_client = from_client.unwrap();
    assert!(
        from_client >= 2,
        "{from_client} keepalives from the client in 1.2 s"
    );
}
