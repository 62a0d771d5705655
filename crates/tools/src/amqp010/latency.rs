//! qpid-latency-test's sender and receiver over AMQP 0-10: messages go to a queue through
//! the default exchange and come back to this process on a second connection, which
//! accepts them (2 hops, fully acknowledged).

use std::time::Duration;

use bytes::BytesMut;
use ferry_client::{
    AcceptMode, FlowMode, OutgoingMessage, QueueDeclareOptions, SequenceSet, SessionOptions,
    SubscribeOptions, Subscription,
};

use super::{header_segment, subscription_ended, Client};
use crate::driver::DriverError;
use crate::latency_test::{AckBatch, LatencyOpts, LatencyReceiver, LatencySender, Stamp};

pub struct LatencyClient {
    client: Client,
    header: bytes::Bytes,
    body: BytesMut,
}

pub struct LatencyReceiverClient {
    client: Client,
    sub: Subscription,
    unaccepted: SequenceSet,
    accepts: AckBatch,
}

/// How long a received transfer's completion may wait for an accept to carry it.
const COMPLETION_SAFETY_NET: Duration = Duration::from_secs(1);

fn queue_name(opts: &LatencyOpts) -> String {
    format!("{}-{}", opts.queue_base_name, std::process::id())
}

impl LatencyClient {
    /// Declares the test queue (auto-delete: it goes with the receiver) and prepares the
    /// message template.
    pub fn open(opts: &LatencyOpts) -> Result<LatencyClient, DriverError> {
        let client = Client::open(&opts.conn)?;
        let queue = queue_name(opts);
        Ok(LatencyClient {
            header: header_segment(&queue, opts.durable)?,
            body: BytesMut::from(&vec![0u8; opts.size.max(Stamp::LEN)][..]),
            client,
        })
    }
}

impl LatencyReceiverClient {
    pub fn open(opts: &LatencyOpts) -> Result<LatencyReceiverClient, DriverError> {
        // qpid-latency-test's client reports completions with its accepts and on request,
        // never on a timer; the session's timer would add two writes, and two wake-ups of
        // the broker, for every accept at 10k msg/s. It stays, slowed, for a run that
        // stops between accepts.
        let session = SessionOptions {
            completion_delay: COMPLETION_SAFETY_NET,
            ..SessionOptions::default()
        };
        let client = Client::open_with_session(&opts.conn, session)?;
        let queue = queue_name(opts);
        let unlimited = opts.prefetch == 0;
        let options = SubscribeOptions {
            accept_mode: if unlimited {
                AcceptMode::None
            } else {
                AcceptMode::Explicit
            },
            flow_mode: if unlimited {
                FlowMode::Credit
            } else {
                FlowMode::Window
            },
            message_credit: if unlimited { u32::MAX } else { opts.prefetch },
            ..SubscribeOptions::default()
        };
        let sub = client.run("subscribing to the latency queue", async {
            let declare = QueueDeclareOptions {
                auto_delete: true,
                durable: opts.durable,
                ..Default::default()
            };
            client.session.queue_declare(&queue, declare).await?;
            client.session.queue_purge(&queue).await?;
            Ok(client.session.subscribe(&queue, "latency", options).await?)
        })?;
        Ok(LatencyReceiverClient {
            client,
            sub,
            unaccepted: SequenceSet::new(),
            accepts: AckBatch::new(opts),
        })
    }
}

impl LatencySender for LatencyClient {
    fn send(&mut self, stamp: Stamp) -> Result<(), DriverError> {
        let mut body = self.body.clone();
        stamp.encode(&mut body);
        let message = OutgoingMessage::with_raw_header(self.header.clone(), body.freeze());
        let session = &self.client.session;
        self.client.run_and_flush("sending", async {
            session.transfer("", &message).await?;
            Ok(())
        })
    }

    fn sync(&mut self) -> Result<(), DriverError> {
        self.client
            .run("syncing", async { Ok(self.client.session.sync().await?) })
    }
}

impl LatencyReceiver for LatencyReceiverClient {
    fn receive(&mut self, timeout: Duration) -> Result<Option<Stamp>, DriverError> {
        let next = self
            .client
            .block_on(async { tokio::time::timeout(timeout, self.sub.next_transfer()).await });
        let delivery = match next {
            Err(_) => return Ok(None),
            Ok(None) => return Err(subscription_ended(self.sub.session(), "latency")),
            Ok(Some(d)) => d,
        };
        if self.accepts.is_on() {
            self.unaccepted.add(delivery.id);
            self.accepts.count();
        }
        Stamp::decode(&delivery.body)
            .map(Some)
            .ok_or_else(|| DriverError::BadReport("latency message shorter than its stamp".into()))
    }

    fn acknowledge(&mut self) -> Result<(), DriverError> {
        if !self.accepts.take_due() {
            return Ok(());
        }
        let set = std::mem::take(&mut self.unaccepted);
        let session = &self.client.session;
        self.client
            .run_and_flush("accepting", async { Ok(session.accept(&set).await?) })
    }
}
