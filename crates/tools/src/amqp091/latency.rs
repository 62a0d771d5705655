//! qpid-latency-test's sender and receiver over AMQP 0-9-1: messages go to a queue through
//! the default exchange and come back to this process on a second connection, whose
//! consumer acknowledges them (2 hops). `--prefetch N` is the consumer's basic.qos and
//! acknowledgements go every `--ack` messages (default half the prefetch) with `multiple`;
//! `--prefetch 0` consumes with no-ack.

use std::time::Duration;

use ferry_client091::{ConsumeOptions, Publication, QueueOptions};

use super::{declare_and_purge, properties, run, Client};
use crate::driver::DriverError;
use crate::latency_test::{AckBatch, LatencyOpts, LatencyReceiver, LatencySender, Stamp};

const TAG: &str = "latency";

fn queue_name(opts: &LatencyOpts) -> String {
    format!("{}-{}", opts.queue_base_name, std::process::id())
}

pub struct LatencyClient {
    client: Client,
    publication: Publication,
    body: Vec<u8>,
}

impl LatencyClient {
    pub fn open(opts: &LatencyOpts) -> Result<LatencyClient, DriverError> {
        let client = Client::open(&opts.conn)?;
        let len = opts.size.max(Stamp::LEN);
        Ok(LatencyClient {
            publication: Publication::new(
                client.channel,
                "",
                &queue_name(opts),
                properties(opts.durable),
                len,
            )?,
            body: vec![0u8; len],
            client,
        })
    }
}

impl LatencySender for LatencyClient {
    fn send(&mut self, stamp: Stamp) -> Result<(), DriverError> {
        stamp.encode(&mut self.body);
        let (conn, p, body) = (&mut self.client.conn, &self.publication, &self.body);
        run(&self.client.runtime, "sending", async {
            conn.publish(p, body).await?;
            // Each message leaves now: batching would add to its latency.
            conn.flush().await
        })
    }

    fn sync(&mut self) -> Result<(), DriverError> {
        let ch = self.client.channel;
        run(&self.client.runtime, "syncing", self.client.conn.sync(ch))
    }
}

pub struct LatencyReceiverClient {
    client: Client,
    acks: AckBatch,
    /// The newest delivery not yet acknowledged; `multiple` covers the rest.
    last_tag: u64,
}

impl LatencyReceiverClient {
    pub fn open(opts: &LatencyOpts) -> Result<LatencyReceiverClient, DriverError> {
        let mut client = Client::open(&opts.conn)?;
        let queue = queue_name(opts);
        let no_ack = opts.prefetch == 0;
        let prefetch = u16::try_from(opts.prefetch)
            .map_err(|_| DriverError::Refused("--prefetch over 0-9-1 is at most 65535".into()))?;
        let (ch, conn) = (client.channel, &mut client.conn);
        run(&client.runtime, "subscribing to the latency queue", async {
            let options = QueueOptions {
                auto_delete: true,
                durable: opts.durable,
                ..Default::default()
            };
            declare_and_purge(conn, ch, &queue, options).await?;
            if !no_ack {
                conn.qos(ch, prefetch, false).await?;
            }
            let consume = ConsumeOptions {
                no_ack,
                ..Default::default()
            };
            conn.consume(ch, &queue, TAG, consume).await
        })?;
        Ok(LatencyReceiverClient {
            client,
            acks: AckBatch::new(opts),
            last_tag: 0,
        })
    }
}

impl LatencyReceiver for LatencyReceiverClient {
    fn receive(&mut self, timeout: Duration) -> Result<Option<Stamp>, DriverError> {
        let ch = self.client.channel;
        let conn = &mut self.client.conn;
        let next = self
            .client
            .runtime
            .block_on(async { tokio::time::timeout(timeout, conn.next_delivery(ch, TAG)).await });
        let delivery = match next {
            Err(_) => return Ok(None),
            Ok(d) => d?,
        };
        if self.acks.is_on() {
            self.acks.count();
            self.last_tag = delivery.delivery_tag;
        }
        Stamp::decode(&delivery.body)
            .map(Some)
            .ok_or_else(|| DriverError::BadReport("latency message shorter than its stamp".into()))
    }

    fn acknowledge(&mut self) -> Result<(), DriverError> {
        if !self.acks.take_due() {
            return Ok(());
        }
        self.client
            .conn
            .ack(self.client.channel, self.last_tag, true);
        run(
            &self.client.runtime,
            "acknowledging",
            self.client.conn.flush(),
        )
    }
}
