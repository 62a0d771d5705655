//! qpid-perftest's clients over AMQP 0-9-1.
//!
//! The same control queues and steps as over 0-10, mapped onto 0-9-1:
//! - a publisher's messages go to the default exchange (shared mode) or amq.fanout /
//!   amq.topic, persistent when `--durable yes`; with `--confirm N` its channel is in
//!   confirm mode with at most N unconfirmed; with `--tx N` it commits every N;
//! - a subscriber consumes with `basic.qos` prefetch `--prefetch` and acknowledges every
//!   `--sub-ack N` messages with `multiple`; with `--sub-ack 0` (qpid-perftest's unconfirmed
//!   mode) it consumes with no-ack, except where several subscribers share a queue (below);
//! - "one credit" on pub_start and sub_iteration becomes a consumer with prefetch 1 that
//!   acknowledges its control message only when it wants the next one.
//!
//! Each subscriber must end an iteration with exactly its quota, as with qpid-perftest's
//! message credit. 0-9-1 has no credit, so where several subscribers share a queue a
//! subscriber that has its quota cancels its consumer and gives back (requeues) whatever
//! it was sent beyond it, for the others; those consumers must acknowledge for that, so
//! they do even with `--sub-ack 0` (every prefetch/2). Control messages travel on a
//! channel of their own, never in confirm mode or a transaction.

use std::collections::HashSet;

use ferry_client091::{ConsumeOptions, Delivery, Publication, QueueOptions};

use super::{declare_and_purge, declare_and_purge_with, properties, run, send_text, Client};
use crate::driver::DriverError;
use crate::perftest::{
    ControllerOps, Mode, PerftestConnector, Plan, PublisherOps, Received, SubscriberOps,
};

pub struct Connector {
    pub conn: crate::conn::ConnectionOpts,
}

/// A second channel on a client, for control messages.
struct Control {
    channel: u16,
    /// The control message taken and not yet acknowledged (see the module comment).
    held: Option<u64>,
}

fn text(d: &Delivery) -> String {
    String::from_utf8_lossy(&d.body).into_owned()
}

fn no_ack() -> ConsumeOptions {
    ConsumeOptions {
        no_ack: true,
        ..Default::default()
    }
}

impl Client {
    fn control_channel(&mut self) -> Result<Control, DriverError> {
        let channel = run(&self.runtime, "opening a channel", self.conn.open_channel())?;
        Ok(Control {
            channel,
            held: None,
        })
    }

    /// Starts a prefetch-1 consumer on control queue `queue`, tagged with its name.
    fn consume_one_at_a_time(&mut self, control: &Control, queue: &str) -> Result<(), DriverError> {
        let conn = &mut self.conn;
        run(&self.runtime, "consuming a control queue", async {
            conn.qos(control.channel, 1, false).await?;
            conn.consume(control.channel, queue, queue, ConsumeOptions::default())
                .await
        })
    }

    /// Acknowledges the control message held since last time, then takes the next one.
    fn next_control(&mut self, control: &mut Control, queue: &str) -> Result<String, DriverError> {
        if let Some(tag) = control.held.take() {
            self.conn.ack(control.channel, tag, false);
        }
        let d = run(
            &self.runtime,
            queue,
            self.conn.next_delivery(control.channel, queue),
        )?;
        control.held = Some(d.delivery_tag);
        Ok(text(&d))
    }
}

impl PerftestConnector for Connector {
    type Publisher = Publisher;
    type Subscriber = Subscriber;
    type Controller = Controller;

    fn setup(&self, plan: &Plan) -> Result<(), DriverError> {
        let mut client = Client::open(&self.conn)?;
        let mut controls = vec!["pub_start", "pub_done", "sub_ready", "sub_done"];
        if plan.iterations > 1 {
            controls.push("sub_iteration");
        }
        let (ch, conn) = (client.channel, &mut client.conn);
        run(&client.runtime, "declaring the test queues", async {
            for name in controls {
                declare_and_purge(conn, ch, &plan.control_queue(name), QueueOptions::default())
                    .await?;
            }
            if plan.mode == Mode::Shared {
                let durable = QueueOptions {
                    durable: plan.durable || plan.queue_type.is_some(),
                    ..Default::default()
                };
                let mut arguments = ferry_client091::FieldTable::new();
                if let Some(t) = &plan.queue_type {
                    arguments.insert(
                        ferry_client091::ShortStr::try_from("x-queue-type")?,
                        ferry_client091::FieldValue::string(t)?,
                    );
                }
                for i in 0..plan.qt {
                    let q = plan.queue_or_topic(i);
                    declare_and_purge_with(conn, ch, &q, durable, arguments.clone()).await?;
                }
            }
            Ok(())
        })
    }

    fn publisher(&self, plan: &Plan, key: &str) -> Result<Publisher, DriverError> {
        let mut client = Client::open(&self.conn)?;
        let control = client.control_channel()?;
        let start_queue = plan.control_queue("pub_start");
        client.consume_one_at_a_time(&control, &start_queue)?;
        if plan.confirm > 0 {
            let (ch, conn) = (client.channel, &mut client.conn);
            run(
                &client.runtime,
                "confirm.select",
                conn.confirm_select(ch, plan.confirm),
            )?;
        }
        let publication = Publication::new(
            client.channel,
            plan.exchange(),
            key,
            properties(plan.durable),
            plan.body_len(),
        )?;
        Ok(Publisher {
            publication,
            body: vec![b'X'; plan.body_len()],
            start_queue,
            done_queue: plan.control_queue("pub_done"),
            control,
            confirming: plan.confirm > 0,
            transactional: false,
            client,
        })
    }

    fn subscriber(&self, plan: &Plan, key: &str) -> Result<Subscriber, DriverError> {
        let mut client = Client::open(&self.conn)?;
        let control = client.control_channel()?;
        let shares_queue = plan.mode == Mode::Shared && plan.nsubs > 1;
        let acks = plan.sub_ack > 0 || plan.tx_sub > 0 || shares_queue;
        let ack_every = match plan.sub_ack {
            0 if acks => (plan.prefetch / 2).max(1) as usize,
            n => n,
        };
        let (ch, conn) = (client.channel, &mut client.conn);
        let queue = run(&client.runtime, "subscribing", async {
            if plan.mode == Mode::Shared {
                return Ok(key.to_string());
            }
            // A private queue per subscriber, gone with its connection.
            let options = QueueOptions {
                exclusive: true,
                auto_delete: true,
                durable: plan.durable,
                ..Default::default()
            };
            let ok = conn
                .queue_declare(ch, "", options, Default::default())
                .await?;
            let queue = ok.queue.to_string();
            conn.queue_bind(ch, &queue, plan.exchange(), key).await?;
            Ok(queue)
        })?;
        if plan.iterations > 1 {
            client.consume_one_at_a_time(&control, &plan.control_queue("sub_iteration"))?;
        }
        let mut s = Subscriber {
            client,
            control,
            queue,
            tag: String::new(),
            generation: 0,
            acks,
            ack_every,
            shares_queue,
            prefetch: u16::try_from(plan.prefetch).unwrap_or(u16::MAX),
            quota: plan.sub_quota as u64,
            taken: 0,
            last_tag: None,
            unacked: 0,
            transactional: false,
            ready_queue: plan.control_queue("sub_ready"),
            done_queue: plan.control_queue("sub_done"),
            iteration_queue: plan.control_queue("sub_iteration"),
        };
        s.start_consuming()?;
        Ok(s)
    }

    fn controller(&self, plan: &Plan) -> Result<Controller, DriverError> {
        Ok(Controller {
            client: Client::open(&self.conn)?,
            consuming: HashSet::new(),
            ready_queue: plan.control_queue("sub_ready"),
        })
    }
}

pub struct Publisher {
    client: Client,
    control: Control,
    publication: Publication,
    /// The body template; each message carries its sequence number in front.
    body: Vec<u8>,
    start_queue: String,
    done_queue: String,
    confirming: bool,
    transactional: bool,
}

impl PublisherOps for Publisher {
    fn await_start(&mut self) -> Result<String, DriverError> {
        let queue = self.start_queue.clone();
        self.client.next_control(&mut self.control, &queue)
    }

    fn publish(&mut self, seq: u64, sync: bool) -> Result<(), DriverError> {
        self.body[..8].copy_from_slice(&seq.to_le_bytes());
        let ch = self.client.channel;
        let (conn, p, body) = (&mut self.client.conn, &self.publication, &self.body);
        // Queued without a trip through the runtime while nothing has to wait; the call
        // that must wait (or write the full buffer) goes through it.
        if !sync && conn.try_publish(p, body)? {
            return Ok(());
        }
        run(&self.client.runtime, "publishing", async {
            conn.publish(p, body).await?;
            if sync {
                conn.wait_confirms(ch).await?;
            }
            Ok(())
        })
    }

    /// Everything published so far is with the broker: confirmed in confirm mode,
    /// committed in a transaction, otherwise processed (a round trip on the channel).
    fn confirm(&mut self) -> Result<(), DriverError> {
        let ch = self.client.channel;
        let conn = &mut self.client.conn;
        let (confirming, transactional) = (self.confirming, self.transactional);
        run(&self.client.runtime, "confirming", async {
            if transactional {
                conn.tx_commit(ch).await
            } else if confirming {
                conn.wait_confirms(ch).await
            } else {
                conn.sync(ch).await
            }
        })
    }

    fn tx_select(&mut self) -> Result<(), DriverError> {
        self.transactional = true;
        let ch = self.client.channel;
        run(
            &self.client.runtime,
            "tx.select",
            self.client.conn.tx_select(ch),
        )
    }

    fn tx_commit(&mut self) -> Result<(), DriverError> {
        let ch = self.client.channel;
        run(
            &self.client.runtime,
            "tx.commit",
            self.client.conn.tx_commit(ch),
        )
    }

    fn report(&mut self, body: &str) -> Result<(), DriverError> {
        // The report must not overtake the test messages, which travel on another channel.
        self.confirm()?;
        let (ch, queue) = (self.control.channel, &self.done_queue);
        run(
            &self.client.runtime,
            "reporting",
            send_text(&mut self.client.conn, ch, queue, body, 1),
        )
    }
}

pub struct Subscriber {
    client: Client,
    control: Control,
    queue: String,
    /// The current consumer's tag: a consumer that gave back its surplus is replaced by a
    /// new one (another generation) for the next iteration.
    tag: String,
    generation: u32,
    acks: bool,
    ack_every: usize,
    shares_queue: bool,
    prefetch: u16,
    quota: u64,
    taken: u64,
    /// Delivery tag of the last message taken and not yet acknowledged.
    last_tag: Option<u64>,
    unacked: usize,
    transactional: bool,
    ready_queue: String,
    done_queue: String,
    iteration_queue: String,
}

impl Subscriber {
    fn start_consuming(&mut self) -> Result<(), DriverError> {
        self.generation += 1;
        self.tag = format!("test-{}", self.generation);
        self.taken = 0;
        let (ch, conn) = (self.client.channel, &mut self.client.conn);
        let (acks, prefetch, queue, tag) = (self.acks, self.prefetch, &self.queue, &self.tag);
        run(&self.client.runtime, "consuming the test queue", async {
            let options = if acks {
                conn.qos(ch, prefetch, false).await?;
                ConsumeOptions::default()
            } else {
                no_ack()
            };
            conn.consume(ch, queue, tag, options).await
        })
    }

    /// The quota is in: stop the consumer and give back what came beyond it, so the other
    /// subscribers on the queue get their share.
    fn give_back_surplus(&mut self) -> Result<(), DriverError> {
        let (ch, conn) = (self.client.channel, &mut self.client.conn);
        let tag = &self.tag;
        run(
            &self.client.runtime,
            "returning surplus deliveries",
            async {
                let surplus = conn.cancel(ch, tag).await?;
                // One by one: a `multiple` nack would also cover messages of the quota that
                // are not yet acknowledged.
                for d in surplus {
                    conn.nack(ch, d.delivery_tag, false, true);
                }
                conn.flush().await
            },
        )
    }
}

impl SubscriberOps for Subscriber {
    fn tx_select(&mut self) -> Result<(), DriverError> {
        self.transactional = true;
        let ch = self.client.channel;
        run(
            &self.client.runtime,
            "tx.select",
            self.client.conn.tx_select(ch),
        )
    }

    fn ready(&mut self) -> Result<(), DriverError> {
        let (ch, queue) = (self.control.channel, &self.ready_queue);
        run(
            &self.client.runtime,
            "reporting ready",
            send_text(&mut self.client.conn, ch, queue, "ready", 1),
        )
    }

    fn await_iteration(&mut self) -> Result<(), DriverError> {
        let queue = self.iteration_queue.clone();
        let body = self.client.next_control(&mut self.control, &queue)?;
        if body != "next" {
            return Err(DriverError::UnexpectedControl {
                expected: "next".into(),
                actual: body,
            });
        }
        if self.shares_queue {
            self.start_consuming()
        } else {
            self.taken = 0;
            Ok(())
        }
    }

    fn receive(&mut self) -> Result<Received, DriverError> {
        let ch = self.client.channel;
        // What was already read needs no trip through the runtime (and no timer).
        let ready = self.client.conn.try_next_delivery(ch, &self.tag)?;
        let waited = || {
            let next = self.client.conn.next_delivery(ch, &self.tag);
            run(&self.client.runtime, "a test message", next)
        };
        let d = match ready.map_or_else(waited, Ok) {
            Err(DriverError::Timeout(_)) => {
                return Err(DriverError::Timeout(format!(
                    "test message {} of {}",
                    self.taken + 1,
                    self.quota
                )))
            }
            other => other?,
        };
        let seq = d
            .body
            .get(..8)
            .and_then(|b| <[u8; 8]>::try_from(b).ok())
            .map(u64::from_le_bytes)
            .ok_or_else(|| DriverError::BadReport("test message shorter than 8 bytes".into()))?;
        self.taken += 1;
        if self.acks {
            self.last_tag = Some(d.delivery_tag);
            self.unacked += 1;
            // qpid-perftest's --sub-ack N is the batch the driver asks for; without it the
            // subscriber still acknowledges by half-prefetch batches.
            if self.unacked >= self.ack_every {
                self.accept()?;
            }
        }
        if self.shares_queue && self.taken == self.quota {
            self.give_back_surplus()?;
        }
        Ok(Received {
            seq,
            redelivered: d.redelivered,
        })
    }

    /// Acknowledges everything taken so far with one `multiple` ack.
    fn accept(&mut self) -> Result<(), DriverError> {
        let Some(tag) = self.last_tag.take() else {
            return Ok(());
        };
        self.unacked = 0;
        let ch = self.client.channel;
        self.client.conn.ack(ch, tag, true);
        if self.transactional {
            // The commit that follows carries it, in the same write.
            return Ok(());
        }
        run(
            &self.client.runtime,
            "acknowledging",
            self.client.conn.flush(),
        )
    }

    fn tx_commit(&mut self) -> Result<(), DriverError> {
        let ch = self.client.channel;
        run(
            &self.client.runtime,
            "tx.commit",
            self.client.conn.tx_commit(ch),
        )
    }

    fn report(&mut self, body: &str) -> Result<(), DriverError> {
        let (ch, queue) = (self.control.channel, &self.done_queue);
        run(
            &self.client.runtime,
            "reporting",
            send_text(&mut self.client.conn, ch, queue, body, 1),
        )
    }
}

pub struct Controller {
    client: Client,
    /// Control queues with a consumer started (tagged with the queue's name).
    consuming: HashSet<String>,
    ready_queue: String,
}

impl Controller {
    fn take(&mut self, queue: &str, n: usize) -> Result<Vec<String>, DriverError> {
        let ch = self.client.channel;
        if !self.consuming.contains(queue) {
            run(
                &self.client.runtime,
                "consuming a control queue",
                self.client.conn.consume(ch, queue, queue, no_ack()),
            )?;
            self.consuming.insert(queue.to_string());
        }
        let mut bodies = Vec::with_capacity(n);
        for _ in 0..n {
            let d = run(
                &self.client.runtime,
                queue,
                self.client.conn.next_delivery(ch, queue),
            )?;
            bodies.push(text(&d));
        }
        Ok(bodies)
    }
}

impl ControllerOps for Controller {
    fn ready_queue(&self) -> &str {
        &self.ready_queue
    }

    fn send(&mut self, queue: &str, body: &str, n: usize) -> Result<(), DriverError> {
        let ch = self.client.channel;
        run(
            &self.client.runtime,
            "sending a control message",
            send_text(&mut self.client.conn, ch, queue, body, n),
        )
    }

    fn collect(&mut self, queue: &str, n: usize) -> Result<Vec<String>, DriverError> {
        self.take(queue, n)
    }
}
