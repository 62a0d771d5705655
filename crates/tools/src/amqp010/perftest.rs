//! qpid-perftest's clients over AMQP 0-10.

use std::collections::HashMap;

use bytes::{Bytes, BytesMut};
use ferry_client::{
    AcceptMode, CreditUnit, Delivery, FlowMode, OutgoingMessage, QueueDeclareOptions, SequenceSet,
    SubscribeOptions, Subscription, Transfer,
};

use super::{header_segment, subscription_ended, Client, STEP_TIMEOUT};
use crate::conn::ConnectionOpts;
use crate::driver::DriverError;
use crate::perftest::{
    ControllerOps, CreditWindow, Mode, PerftestConnector, Plan, PublisherOps, Received,
    SubscriberOps,
};

/// How many pipelined transfers a publisher queues before letting its writer run.
const PUBLISH_BATCH: usize = 64;

pub struct Connector {
    pub conn: ConnectionOpts,
}

fn credit(messages: u32) -> SubscribeOptions {
    SubscribeOptions {
        accept_mode: AcceptMode::None,
        flow_mode: FlowMode::Credit,
        message_credit: messages,
        ..SubscribeOptions::default()
    }
}

fn text(d: &Delivery) -> String {
    String::from_utf8_lossy(&d.body).into_owned()
}

impl Client {
    /// The next delivery on `sub`, bounded by the step timeout.
    fn next_on(&self, sub: &mut Subscription, what: &str) -> Result<Delivery, DriverError> {
        self.next_transfer_on(sub, what).map(Transfer::decode)
    }

    /// [`Client::next_on`] with the header left encoded.
    fn next_transfer_on(
        &self,
        sub: &mut Subscription,
        what: &str,
    ) -> Result<Transfer, DriverError> {
        self.run(what, async {
            match sub.next_transfer().await {
                Some(t) => Ok(t),
                None => Err(subscription_ended(sub.session(), what)),
            }
        })
    }

    /// Sends `body` to control queue `queue` through the default exchange.
    fn send_control(&self, queue: &str, body: &str, n: usize) -> Result<(), DriverError> {
        let message = OutgoingMessage::with_raw_header(
            header_segment(queue, false)?,
            Bytes::copy_from_slice(body.as_bytes()),
        );
        self.run("sending a control message", async {
            for _ in 0..n {
                self.session.transfer("", &message).await?;
            }
            self.session.sync().await?;
            Ok(())
        })
    }
}

impl PerftestConnector for Connector {
    type Publisher = Publisher;
    type Subscriber = Subscriber;
    type Controller = Controller;

    fn setup(&self, plan: &Plan) -> Result<(), DriverError> {
        let client = Client::open(&self.conn)?;
        let mut controls = vec!["pub_start", "pub_done", "sub_ready", "sub_done"];
        if plan.iterations > 1 {
            controls.push("sub_iteration");
        }
        client.run("declaring the test queues", async {
            for name in controls {
                let queue = plan.control_queue(name);
                client
                    .session
                    .queue_declare(&queue, QueueDeclareOptions::default())
                    .await?;
                client.session.queue_purge(&queue).await?;
            }
            if plan.mode == Mode::Shared {
                for i in 0..plan.qt {
                    let queue = plan.queue_or_topic(i);
                    let options = QueueDeclareOptions {
                        durable: plan.durable,
                        ..Default::default()
                    };
                    client.session.queue_declare(&queue, options).await?;
                    client.session.queue_purge(&queue).await?;
                }
            }
            Ok(())
        })
    }

    fn publisher(&self, plan: &Plan, key: &str) -> Result<Publisher, DriverError> {
        let client = Client::open(&self.conn)?;
        let start = client.run("subscribing to pub_start", async {
            Ok(client
                .session
                .subscribe(&plan.control_queue("pub_start"), "pub_start", credit(0))
                .await?)
        })?;
        Ok(Publisher {
            header: header_segment(key, plan.durable)?,
            body: BytesMut::from(&vec![b'X'; plan.body_len()][..]),
            exchange: plan.exchange(),
            done_queue: plan.control_queue("pub_done"),
            start,
            unflushed: 0,
            client,
        })
    }

    fn subscriber(&self, plan: &Plan, key: &str) -> Result<Subscriber, DriverError> {
        let client = Client::open(&self.conn)?;
        let quota = plan.sub_quota as u64;
        let mut window = CreditWindow::new(plan.prefetch);
        let first = window.start(quota);
        let explicit = plan.sub_ack > 0 || plan.tx_sub > 0;
        let session = client.session.clone();
        let (queue, iteration) = client.run("subscribing", async {
            let queue = if plan.mode == Mode::Shared {
                key.to_string()
            } else {
                // A private queue per subscriber, gone with its session.
                let queue = format!("{key}-sub-{}", unique_suffix());
                let options = QueueDeclareOptions {
                    exclusive: true,
                    auto_delete: true,
                    durable: plan.durable,
                    ..Default::default()
                };
                session.queue_declare(&queue, options).await?;
                session
                    .exchange_bind(&queue, plan.exchange(), key, None)
                    .await?;
                queue
            };
            let iteration = if plan.iterations > 1 {
                Some(
                    session
                        .subscribe(
                            &plan.control_queue("sub_iteration"),
                            "sub_iteration",
                            credit(0),
                        )
                        .await?,
                )
            } else {
                None
            };
            Ok((queue, iteration))
        })?;
        let options = SubscribeOptions {
            accept_mode: if explicit {
                AcceptMode::Explicit
            } else {
                AcceptMode::None
            },
            ..credit(first)
        };
        let sub = client.run("subscribing to the test queue", async {
            Ok(client.session.subscribe(&queue, "test", options).await?)
        })?;
        Ok(Subscriber {
            sub,
            iteration,
            unaccepted: SequenceSet::new(),
            quota,
            credit: window,
            ready_queue: plan.control_queue("sub_ready"),
            done_queue: plan.control_queue("sub_done"),
            client,
        })
    }

    fn controller(&self, plan: &Plan) -> Result<Controller, DriverError> {
        Ok(Controller {
            client: Client::open(&self.conn)?,
            subscriptions: HashMap::new(),
            ready_queue: plan.control_queue("sub_ready"),
        })
    }
}

fn unique_suffix() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!(
        "{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

fn sequence_of(body: &[u8]) -> Result<u64, DriverError> {
    let bytes: [u8; 8] = body
        .get(..8)
        .and_then(|b| b.try_into().ok())
        .ok_or_else(|| DriverError::BadReport("test message shorter than 8 bytes".into()))?;
    Ok(u64::from_le_bytes(bytes))
}

pub struct Publisher {
    client: Client,
    header: Bytes,
    /// The body template; each message is a copy with its sequence number in front.
    body: BytesMut,
    exchange: &'static str,
    done_queue: String,
    start: Subscription,
    unflushed: usize,
}

impl PublisherOps for Publisher {
    fn await_start(&mut self) -> Result<String, DriverError> {
        self.client.run("granting start credit", async {
            Ok(self
                .client
                .session
                .message_flow("pub_start", CreditUnit::Message, 1)
                .await?)
        })?;
        let d = self.client.next_on(&mut self.start, "the start signal")?;
        Ok(text(&d))
    }

    fn publish(&mut self, seq: u64, sync: bool) -> Result<(), DriverError> {
        let mut body = self.body.clone();
        body[..8].copy_from_slice(&seq.to_le_bytes());
        let message = OutgoingMessage::with_raw_header(self.header.clone(), body.freeze());
        let session = &self.client.session;
        let exchange = self.exchange;
        self.unflushed += 1;
        if sync || self.unflushed >= PUBLISH_BATCH {
            self.unflushed = 0;
            self.client.run_and_flush("publishing", async {
                if sync {
                    session.transfer_sync(exchange, &message).await?;
                } else {
                    session.transfer(exchange, &message).await?;
                }
                Ok(())
            })
        } else if session.transfer_now(exchange, &message)?.is_some() {
            // Queued without a trip through the runtime; the batch's last publish flushes.
            Ok(())
        } else {
            self.client.run("publishing", async {
                session.transfer(exchange, &message).await?;
                Ok(())
            })
        }
    }

    fn confirm(&mut self) -> Result<(), DriverError> {
        self.client.run("confirming", async {
            Ok(self.client.session.sync().await?)
        })
    }

    fn tx_select(&mut self) -> Result<(), DriverError> {
        tx_select(&self.client)
    }

    fn tx_commit(&mut self) -> Result<(), DriverError> {
        tx_commit(&self.client)
    }

    fn report(&mut self, body: &str) -> Result<(), DriverError> {
        self.client.run("flushing the test messages", async {
            Ok(self.client.session.sync().await?)
        })?;
        self.client.send_control(&self.done_queue, body, 1)
    }
}

fn tx_select(client: &Client) -> Result<(), DriverError> {
    client.run("tx.select", async {
        client
            .session
            .execute(ferry_client::Command::TxSelect(Default::default()))
            .await?;
        Ok(())
    })
}

fn tx_commit(client: &Client) -> Result<(), DriverError> {
    client.run("tx.commit", async {
        client
            .session
            .execute(ferry_client::Command::TxCommit(Default::default()))
            .await?;
        Ok(())
    })
}

pub struct Subscriber {
    client: Client,
    sub: Subscription,
    iteration: Option<Subscription>,
    unaccepted: SequenceSet,
    quota: u64,
    credit: CreditWindow,
    ready_queue: String,
    done_queue: String,
}

impl SubscriberOps for Subscriber {
    fn tx_select(&mut self) -> Result<(), DriverError> {
        tx_select(&self.client)
    }

    fn ready(&mut self) -> Result<(), DriverError> {
        self.client.send_control(&self.ready_queue, "ready", 1)
    }

    fn await_iteration(&mut self) -> Result<(), DriverError> {
        let Some(iteration) = self.iteration.as_mut() else {
            return Err(DriverError::UnexpectedControl {
                expected: "a sub_iteration subscription".into(),
                actual: "none (single iteration)".into(),
            });
        };
        let session = self.client.session.clone();
        self.client.run("granting iteration credit", async {
            Ok(session
                .message_flow("sub_iteration", CreditUnit::Message, 1)
                .await?)
        })?;
        let d = self
            .client
            .next_on(iteration, "the next-iteration signal")?;
        if text(&d) != "next" {
            return Err(DriverError::UnexpectedControl {
                expected: "next".into(),
                actual: text(&d),
            });
        }
        let first = self.credit.start(self.quota);
        self.grant(first)
    }

    fn receive(&mut self) -> Result<Received, DriverError> {
        // What the reader already handed over needs no trip through the runtime (and no
        // timer); only an empty subscription waits, which also lets the reader run.
        // The header is not decoded: only the body and the redelivered flag are wanted.
        let ready = self.sub.try_next_transfer();
        let t = match ready.map_or_else(
            || {
                self.client
                    .next_transfer_on(&mut self.sub, "a test message")
            },
            Ok,
        ) {
            // Seen with Broker-J and several subscribers on a queue: messages stay queued
            // while this subscriber has credit for them (see BENCHMARKS.md's notes).
            Err(DriverError::Timeout(_)) => {
                let c = &self.credit;
                return Err(DriverError::Timeout(format!(
                    "test message {} of {}: the broker sent nothing for {} s although this \
                     subscriber had credit for {} more",
                    c.taken() + 1,
                    c.quota(),
                    STEP_TIMEOUT.as_secs(),
                    c.granted() - c.taken()
                )));
            }
            other => other?,
        };
        self.unaccepted.add(t.id);
        if let Some(more) = self.credit.take() {
            self.grant(more)?;
        }
        let redelivered = t
            .redelivered()
            .map_err(|e| DriverError::BadReport(format!("test message header: {e}")))?;
        Ok(Received {
            seq: sequence_of(&t.body)?,
            redelivered,
        })
    }

    fn accept(&mut self) -> Result<(), DriverError> {
        if self.unaccepted.is_empty() {
            return Ok(());
        }
        let set = std::mem::take(&mut self.unaccepted);
        self.client.run_and_flush("accepting", async {
            Ok(self.client.session.accept(&set).await?)
        })
    }

    fn tx_commit(&mut self) -> Result<(), DriverError> {
        tx_commit(&self.client)
    }

    fn report(&mut self, body: &str) -> Result<(), DriverError> {
        self.client.send_control(&self.done_queue, body, 1)
    }
}

impl Subscriber {
    fn grant(&self, messages: u32) -> Result<(), DriverError> {
        let session = &self.client.session;
        self.client.run_and_flush("granting test credit", async {
            Ok(session
                .message_flow("test", CreditUnit::Message, messages)
                .await?)
        })
    }
}

pub struct Controller {
    client: Client,
    subscriptions: HashMap<String, Subscription>,
    ready_queue: String,
}

impl Controller {
    fn take(&mut self, queue: &str, n: usize) -> Result<Vec<String>, DriverError> {
        if !self.subscriptions.contains_key(queue) {
            let sub = self.client.run("subscribing to a control queue", async {
                Ok(self
                    .client
                    .session
                    .subscribe(queue, queue, credit(u32::MAX))
                    .await?)
            })?;
            self.subscriptions.insert(queue.to_string(), sub);
        }
        let Some(sub) = self.subscriptions.get_mut(queue) else {
            return Ok(Vec::new());
        };
        let mut bodies = Vec::with_capacity(n);
        for _ in 0..n {
            let d = self.client.next_on(sub, queue)?;
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
        self.client.send_control(queue, body, n)
    }

    fn collect(&mut self, queue: &str, n: usize) -> Result<Vec<String>, DriverError> {
        self.take(queue, n)
    }
}
