//! qpid-perftest's clients over AMQP 1.0.
//!
//! The same control queues and steps as over 0-10, mapped onto 1.0 links:
//! - a publisher sends to its queue (shared mode) or to the exchange (fanout, topic) with
//!   the routing key as the message's subject; durable messages with `--durable yes`.
//!   Without `--confirm` its transfers go settled (at most once) and "confirmed" is a
//!   round trip (a flow with echo set); with `--confirm N` they go unsettled, at most N
//!   waiting for the broker's dispositions, and "confirmed" is all of them settled;
//! - a subscriber's link takes exactly its quota: credit is granted by hand, a
//!   `--prefetch` window (default 1000) ahead at most, as over 0-10. With `--sub-ack N`
//!   deliveries come unsettled and are accepted every N with one ranged disposition;
//!   with `--sub-ack 0` (qpid-perftest's unconfirmed mode) they come settled;
//! - "one credit" on pub_start and sub_iteration is a link with one credit at a time.
//!
//! Queues are declared over 0-10 (see the module above); transactions are not mapped.

use ferry_client::QueueDeclareOptions;
use ferry_client1::{Publication, ReceiveOptions, ReceiverId, SendMode, SenderId};

use super::{run, Admin, Client};
use crate::driver::DriverError;
use crate::perftest::{
    ControllerOps, CreditWindow, Mode, PerftestConnector, Plan, PublisherOps, Received,
    SubscriberOps,
};

pub struct Connector {
    pub conn: crate::conn::ConnectionOpts,
}

/// A link whose credit the harness grants one message at a time.
fn one_at_a_time() -> ReceiveOptions {
    ReceiveOptions {
        settled: false,
        credit_window: 0,
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

fn no_tx() -> DriverError {
    DriverError::Refused("transactions are not mapped onto AMQP 1.0 by ferry perftest".into())
}

impl PerftestConnector for Connector {
    type Publisher = Publisher;
    type Subscriber = Subscriber;
    type Controller = Controller;

    fn setup(&self, plan: &Plan) -> Result<(), DriverError> {
        let admin = Admin::open(&self.conn)?;
        let mut controls = vec!["pub_start", "pub_done", "sub_ready", "sub_done"];
        if plan.iterations > 1 {
            controls.push("sub_iteration");
        }
        for name in controls {
            admin.declare(&plan.control_queue(name), Default::default(), true)?;
        }
        if plan.mode == Mode::Shared {
            let options = QueueDeclareOptions {
                durable: plan.durable,
                ..Default::default()
            };
            for i in 0..plan.qt {
                admin.declare(&plan.queue_or_topic(i), options.clone(), true)?;
            }
        }
        Ok(())
    }

    fn publisher(&self, plan: &Plan, key: &str) -> Result<Publisher, DriverError> {
        if plan.tx_pub > 0 {
            return Err(no_tx());
        }
        let mut client = Client::open(&self.conn)?;
        let start = client.receiver(&plan.control_queue("pub_start"), one_at_a_time())?;
        let (address, subject) = match plan.mode {
            Mode::Shared => (key, None),
            _ => (plan.exchange(), Some(key)),
        };
        let mode = match plan.confirm {
            0 => SendMode::Settled,
            window => SendMode::Unsettled { window },
        };
        let sender = client.sender(address, mode)?;
        Ok(Publisher {
            publication: Publication::simple(plan.durable, subject, plan.body_len()),
            body: vec![b'X'; plan.body_len()],
            sender,
            start,
            unsettled: plan.confirm > 0,
            done_queue: plan.control_queue("pub_done"),
            client,
        })
    }

    fn subscriber(&self, plan: &Plan, key: &str) -> Result<Subscriber, DriverError> {
        if plan.tx_sub > 0 {
            return Err(no_tx());
        }
        let mut client = Client::open(&self.conn)?;
        let (queue, admin) = if plan.mode == Mode::Shared {
            (key.to_string(), None)
        } else {
            // A private queue per subscriber, bound over 0-10; it goes when the 1.0 link
            // that consumes it does (auto-delete), so the declaring connection stays open
            // until then.
            let admin = Admin::open(&self.conn)?;
            let queue = format!("{key}-sub-{}", unique_suffix());
            let options = QueueDeclareOptions {
                auto_delete: true,
                durable: plan.durable,
                ..Default::default()
            };
            admin.declare(&queue, options, false)?;
            admin.bind(&queue, plan.exchange(), key)?;
            (queue, Some(admin))
        };
        let iteration = if plan.iterations > 1 {
            Some(client.receiver(&plan.control_queue("sub_iteration"), one_at_a_time())?)
        } else {
            None
        };
        let acks = plan.sub_ack > 0;
        let mut window = CreditWindow::new(plan.prefetch);
        let first = window.start(plan.sub_quota as u64);
        let receiver = client.receiver(
            &queue,
            ReceiveOptions {
                settled: !acks,
                credit_window: 0,
            },
        )?;
        client.conn.add_credit(receiver, first)?;
        Ok(Subscriber {
            client,
            receiver,
            iteration,
            window,
            quota: plan.sub_quota as u64,
            unaccepted: None,
            ready_queue: plan.control_queue("sub_ready"),
            done_queue: plan.control_queue("sub_done"),
            _admin: admin,
        })
    }

    fn controller(&self, plan: &Plan) -> Result<Controller, DriverError> {
        Ok(Controller {
            client: Client::open(&self.conn)?,
            receivers: Vec::new(),
            ready_queue: plan.control_queue("sub_ready"),
        })
    }
}

pub struct Publisher {
    client: Client,
    sender: SenderId,
    start: ReceiverId,
    publication: Publication,
    /// The body template; each message carries its sequence number in front.
    body: Vec<u8>,
    unsettled: bool,
    done_queue: String,
}

impl PublisherOps for Publisher {
    fn await_start(&mut self) -> Result<String, DriverError> {
        let start = self.start;
        self.client.take_one(start, "the start signal")
    }

    fn publish(&mut self, seq: u64, sync: bool) -> Result<(), DriverError> {
        self.body[..8].copy_from_slice(&seq.to_le_bytes());
        let (conn, p, body, sender) = (
            &mut self.client.conn,
            &self.publication,
            &self.body,
            self.sender,
        );
        // Queued without a trip through the runtime while nothing has to wait; the call
        // that must wait (or write the full buffer) goes through it.
        if !sync && conn.try_send(sender, p, body)?.is_some() {
            return Ok(());
        }
        run(&self.client.runtime, "publishing", async {
            conn.send(sender, p, body).await?;
            if sync {
                conn.wait_settled(sender).await?;
            }
            Ok(())
        })
    }

    /// Everything sent so far is with the broker: settled by it when sent unsettled,
    /// otherwise read by it (a round trip on the link).
    fn confirm(&mut self) -> Result<(), DriverError> {
        let (conn, sender, unsettled) = (&mut self.client.conn, self.sender, self.unsettled);
        run(&self.client.runtime, "confirming", async {
            if unsettled {
                conn.wait_settled(sender).await
            } else {
                conn.sync(sender).await
            }
        })
    }

    fn tx_select(&mut self) -> Result<(), DriverError> {
        Err(no_tx())
    }

    fn tx_commit(&mut self) -> Result<(), DriverError> {
        Err(no_tx())
    }

    fn report(&mut self, body: &str) -> Result<(), DriverError> {
        // The report must not overtake the test messages, which travel on another link.
        self.confirm()?;
        let queue = self.done_queue.clone();
        self.client.send_text(&queue, body, 1)
    }
}

pub struct Subscriber {
    client: Client,
    receiver: ReceiverId,
    iteration: Option<ReceiverId>,
    window: CreditWindow,
    quota: u64,
    /// Deliveries taken and not yet accepted: first and last id.
    unaccepted: Option<(u32, u32)>,
    ready_queue: String,
    done_queue: String,
    /// The 0-10 connection that declared a private queue, kept while it is consumed.
    _admin: Option<Admin>,
}

impl SubscriberOps for Subscriber {
    fn tx_select(&mut self) -> Result<(), DriverError> {
        Err(no_tx())
    }

    fn ready(&mut self) -> Result<(), DriverError> {
        let queue = self.ready_queue.clone();
        self.client.send_text(&queue, "ready", 1)
    }

    fn await_iteration(&mut self) -> Result<(), DriverError> {
        let Some(iteration) = self.iteration else {
            return Err(DriverError::Refused("no sub_iteration link".into()));
        };
        let body = self.client.take_one(iteration, "the next iteration")?;
        if body != "next" {
            return Err(DriverError::UnexpectedControl {
                expected: "next".into(),
                actual: body,
            });
        }
        let first = self.window.start(self.quota);
        self.client.conn.add_credit(self.receiver, first)?;
        Ok(())
    }

    fn receive(&mut self) -> Result<Received, DriverError> {
        let r = self.receiver;
        // What was already read needs no trip through the runtime (and no timer).
        let ready = self.client.conn.try_next_delivery(r)?;
        let waited = || {
            run(
                &self.client.runtime,
                "a test message",
                self.client.conn.next_delivery(r),
            )
        };
        let d = match ready.map_or_else(waited, Ok) {
            Err(DriverError::Timeout(_)) => {
                return Err(DriverError::Timeout(format!(
                    "test message {} of {}",
                    self.window.taken() + 1,
                    self.quota
                )))
            }
            other => other?,
        };
        if let Some(more) = self.window.take() {
            self.client.conn.add_credit(r, more)?;
        }
        if !d.settled {
            self.unaccepted = match self.unaccepted {
                Some((first, last)) if last.wrapping_add(1) == d.delivery_id => {
                    Some((first, d.delivery_id))
                }
                Some((first, last)) => {
                    // Not consecutive (another link's deliveries in between): what came
                    // before goes as a range of its own.
                    self.client.conn.accept_range(first, last);
                    Some((d.delivery_id, d.delivery_id))
                }
                None => Some((d.delivery_id, d.delivery_id)),
            };
        }
        let body = d.body()?;
        let seq = body
            .get(..8)
            .and_then(|b| <[u8; 8]>::try_from(b).ok())
            .map(u64::from_le_bytes)
            .ok_or_else(|| DriverError::BadReport("test message shorter than 8 bytes".into()))?;
        Ok(Received::first(seq))
    }

    /// Accepts everything taken so far with one ranged disposition.
    fn accept(&mut self) -> Result<(), DriverError> {
        let Some((first, last)) = self.unaccepted.take() else {
            return Ok(());
        };
        self.client.conn.accept_range(first, last);
        run(&self.client.runtime, "accepting", self.client.conn.flush())
    }

    fn tx_commit(&mut self) -> Result<(), DriverError> {
        Err(no_tx())
    }

    fn report(&mut self, body: &str) -> Result<(), DriverError> {
        let queue = self.done_queue.clone();
        self.client.send_text(&queue, body, 1)
    }
}

pub struct Controller {
    client: Client,
    /// Receivers on control queues, by queue name.
    receivers: Vec<(String, ReceiverId)>,
    ready_queue: String,
}

impl Controller {
    fn take(&mut self, queue: &str, n: usize) -> Result<Vec<String>, DriverError> {
        let r = match self.receivers.iter().find(|(q, _)| q == queue) {
            Some(&(_, r)) => r,
            None => {
                let r = self.client.receiver(
                    queue,
                    ReceiveOptions {
                        settled: false,
                        credit_window: 100,
                    },
                )?;
                self.receivers.push((queue.to_string(), r));
                r
            }
        };
        let mut bodies = Vec::with_capacity(n);
        for _ in 0..n {
            bodies.push(self.client.take(r, queue)?);
        }
        run(
            &self.client.runtime,
            "accepting control messages",
            self.client.conn.flush(),
        )?;
        Ok(bodies)
    }
}

impl ControllerOps for Controller {
    fn ready_queue(&self) -> &str {
        &self.ready_queue
    }

    fn send(&mut self, queue: &str, body: &str, n: usize) -> Result<(), DriverError> {
        self.client.send_text(queue, body, n)
    }

    fn collect(&mut self, queue: &str, n: usize) -> Result<Vec<String>, DriverError> {
        self.take(queue, n)
    }
}
