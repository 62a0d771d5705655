//! qpid-latency-test's sender and receiver over AMQP 1.0: messages go to a queue (declared
//! over 0-10, auto-delete) and come back to this process on a second connection (2 hops).
//! The sender's transfers go settled; `--prefetch N` is the receiver's credit window, its
//! deliveries come unsettled and are accepted every `--ack` messages (default half the
//! prefetch) with one ranged disposition; `--prefetch 0` receives settled deliveries (no
//! acknowledgements) with a window of 10,000.

use std::time::Duration;

use ferry_client::QueueDeclareOptions;
use ferry_client1::{Publication, ReceiveOptions, ReceiverId, SendMode, SenderId};

use super::{run, Admin, Client};
use crate::driver::DriverError;
use crate::latency_test::{AckBatch, LatencyOpts, LatencyReceiver, LatencySender, Stamp};

/// Credit kept open by a receiver that does not acknowledge (`--prefetch 0`).
const UNACKED_WINDOW: u32 = 10_000;

fn queue_name(opts: &LatencyOpts) -> String {
    format!("{}-{}", opts.queue_base_name, std::process::id())
}

pub struct LatencyClient {
    client: Client,
    sender: SenderId,
    publication: Publication,
    body: Vec<u8>,
}

impl LatencyClient {
    pub fn open(opts: &LatencyOpts) -> Result<LatencyClient, DriverError> {
        let mut client = Client::open(&opts.conn)?;
        let len = opts.size.max(Stamp::LEN);
        let sender = client.sender(&queue_name(opts), SendMode::Settled)?;
        Ok(LatencyClient {
            client,
            sender,
            publication: Publication::simple(opts.durable, None, len),
            body: vec![0u8; len],
        })
    }
}

impl LatencySender for LatencyClient {
    fn send(&mut self, stamp: Stamp) -> Result<(), DriverError> {
        stamp.encode(&mut self.body);
        let (conn, p, body, sender) = (
            &mut self.client.conn,
            &self.publication,
            &self.body,
            self.sender,
        );
        run(&self.client.runtime, "sending", async {
            conn.send(sender, p, body).await?;
            // Each message leaves now: batching would add to its latency.
            conn.flush().await
        })
    }

    fn sync(&mut self) -> Result<(), DriverError> {
        let sender = self.sender;
        run(
            &self.client.runtime,
            "syncing",
            self.client.conn.sync(sender),
        )
    }
}

pub struct LatencyReceiverClient {
    client: Client,
    receiver: ReceiverId,
    accepts: AckBatch,
    /// The unaccepted deliveries' ids run from here to `last_unaccepted`.
    first_unaccepted: Option<u32>,
    last_unaccepted: u32,
    /// The 0-10 connection that declared the queue: kept until the receiver consumes it,
    /// as an auto-delete queue goes with its last consumer.
    _admin: Admin,
}

impl LatencyReceiverClient {
    pub fn open(opts: &LatencyOpts) -> Result<LatencyReceiverClient, DriverError> {
        let admin = Admin::open(&opts.conn)?;
        let queue = queue_name(opts);
        let options = QueueDeclareOptions {
            auto_delete: true,
            durable: opts.durable,
            ..Default::default()
        };
        admin.declare(&queue, options, true)?;
        let mut client = Client::open(&opts.conn)?;
        let acks = opts.prefetch > 0;
        let receiver = client.receiver(
            &queue,
            ReceiveOptions {
                settled: !acks,
                credit_window: if acks { opts.prefetch } else { UNACKED_WINDOW },
            },
        )?;
        // The credit goes out now, before the sender starts.
        run(&client.runtime, "granting credit", client.conn.flush())?;
        Ok(LatencyReceiverClient {
            client,
            receiver,
            accepts: AckBatch::new(opts),
            first_unaccepted: None,
            last_unaccepted: 0,
            _admin: admin,
        })
    }
}

impl LatencyReceiver for LatencyReceiverClient {
    fn receive(&mut self, timeout: Duration) -> Result<Option<Stamp>, DriverError> {
        let r = self.receiver;
        let conn = &mut self.client.conn;
        let next = self
            .client
            .runtime
            .block_on(async { tokio::time::timeout(timeout, conn.next_delivery(r)).await });
        let delivery = match next {
            Err(_) => return Ok(None),
            Ok(d) => d?,
        };
        if self.accepts.is_on() && !delivery.settled {
            self.first_unaccepted.get_or_insert(delivery.delivery_id);
            self.last_unaccepted = delivery.delivery_id;
            self.accepts.count();
        }
        let body = delivery.body()?;
        Stamp::decode(&body)
            .map(Some)
            .ok_or_else(|| DriverError::BadReport("latency message shorter than its stamp".into()))
    }

    fn acknowledge(&mut self) -> Result<(), DriverError> {
        if !self.accepts.take_due() {
            return Ok(());
        }
        let Some(first) = self.first_unaccepted.take() else {
            return Ok(());
        };
        self.client.conn.accept_range(first, self.last_unaccepted);
        run(&self.client.runtime, "accepting", self.client.conn.flush())
    }
}
