//! The loops run against an in-process broker made of condvar queues: enough routing
//! (default, fanout and exact-key topic exchanges) to check that the control flow and the
//! totals add up. No timing is asserted.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use clap::Parser;

use super::*;
use crate::perftest::PerftestOpts;

const WAIT: Duration = Duration::from_secs(20);

#[derive(Default)]
struct Queue {
    items: Mutex<VecDeque<Vec<u8>>>,
    ready: Condvar,
}

impl Queue {
    fn push(&self, body: Vec<u8>) {
        self.items.lock().unwrap().push_back(body);
        self.ready.notify_all();
    }

    fn pop(&self, what: &str) -> Result<Vec<u8>, DriverError> {
        let guard = self.items.lock().unwrap();
        let (mut guard, _) = self
            .ready
            .wait_timeout_while(guard, WAIT, |q| q.is_empty())
            .unwrap();
        guard
            .pop_front()
            .ok_or_else(|| DriverError::Timeout(what.to_string()))
    }

    fn len(&self) -> usize {
        self.items.lock().unwrap().len()
    }
}

#[derive(Default)]
struct MemBroker {
    queues: Mutex<HashMap<String, Arc<Queue>>>,
    bindings: Mutex<Vec<(String, String, Arc<Queue>)>>,
    private: AtomicUsize,
    /// One start queue per publisher and one iteration queue per subscriber: a real client
    /// holds one credit on pub_start or sub_iteration, so each gets exactly one message per
    /// iteration however fast it loops back. Plain shared queues would let it steal.
    starts: Mutex<Vec<Arc<Queue>>>,
    nexts: Mutex<Vec<Arc<Queue>>>,
    accepts: AtomicUsize,
    commits: AtomicUsize,
    /// Body the controller finds on pub_done instead of the real report, when set.
    forged_report: Option<String>,
}

impl MemBroker {
    fn queue(&self, name: &str) -> Arc<Queue> {
        self.queues
            .lock()
            .unwrap()
            .entry(name.to_string())
            .or_default()
            .clone()
    }

    fn route(&self, exchange: &str, key: &str, body: Vec<u8>) {
        if exchange.is_empty() {
            return self.queue(key).push(body);
        }
        for (ex, k, q) in self.bindings.lock().unwrap().iter() {
            if ex == exchange && (exchange == "amq.fanout" || k == key) {
                q.push(body.clone());
            }
        }
    }

    fn text(body: Vec<u8>) -> String {
        String::from_utf8_lossy(&body).into_owned()
    }
}

struct MemPublisher {
    broker: Arc<MemBroker>,
    start: Arc<Queue>,
    exchange: &'static str,
    key: String,
    body: Vec<u8>,
    done_queue: String,
}

impl PublisherOps for MemPublisher {
    fn await_start(&mut self) -> Result<String, DriverError> {
        self.start.pop("pub_start").map(MemBroker::text)
    }
    fn publish(&mut self, seq: u64, _sync: bool) -> Result<(), DriverError> {
        self.body[..8].copy_from_slice(&seq.to_le_bytes());
        self.broker
            .route(self.exchange, &self.key, self.body.clone());
        Ok(())
    }
    fn confirm(&mut self) -> Result<(), DriverError> {
        Ok(())
    }
    fn tx_select(&mut self) -> Result<(), DriverError> {
        Ok(())
    }
    fn tx_commit(&mut self) -> Result<(), DriverError> {
        self.broker.commits.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
    fn report(&mut self, body: &str) -> Result<(), DriverError> {
        let body = self
            .broker
            .forged_report
            .clone()
            .unwrap_or(body.to_string());
        self.broker.queue(&self.done_queue).push(body.into_bytes());
        Ok(())
    }
}

struct MemSubscriber {
    broker: Arc<MemBroker>,
    queue: Arc<Queue>,
    iteration: Arc<Queue>,
    ready_queue: String,
    done_queue: String,
}

impl SubscriberOps for MemSubscriber {
    fn tx_select(&mut self) -> Result<(), DriverError> {
        Ok(())
    }
    fn ready(&mut self) -> Result<(), DriverError> {
        self.broker.queue(&self.ready_queue).push(b"ready".to_vec());
        Ok(())
    }
    fn await_iteration(&mut self) -> Result<(), DriverError> {
        expect_control(
            MemBroker::text(self.iteration.pop("sub_iteration")?),
            "next",
        )
    }
    fn receive(&mut self) -> Result<Received, DriverError> {
        let body = self.queue.pop("test message")?;
        let seq: [u8; 8] = body
            .get(..8)
            .and_then(|b| b.try_into().ok())
            .ok_or_else(|| DriverError::BadReport("short message".into()))?;
        Ok(Received::first(u64::from_le_bytes(seq)))
    }
    fn accept(&mut self) -> Result<(), DriverError> {
        self.broker.accepts.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
    fn tx_commit(&mut self) -> Result<(), DriverError> {
        self.broker.commits.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
    fn report(&mut self, body: &str) -> Result<(), DriverError> {
        self.broker
            .queue(&self.done_queue)
            .push(body.as_bytes().to_vec());
        Ok(())
    }
}

struct MemController {
    broker: Arc<MemBroker>,
    ready_queue: String,
}

impl ControllerOps for MemController {
    fn ready_queue(&self) -> &str {
        &self.ready_queue
    }
    fn send(&mut self, queue: &str, body: &str, n: usize) -> Result<(), DriverError> {
        let per_client = if queue.ends_with("_pub_start") {
            Some(&self.broker.starts)
        } else if queue.ends_with("_sub_iteration") {
            Some(&self.broker.nexts)
        } else {
            None
        };
        if let Some(clients) = per_client {
            let clients = clients.lock().unwrap();
            (0..n).for_each(|i| clients[i % clients.len()].push(body.as_bytes().to_vec()));
            return Ok(());
        }
        let q = self.broker.queue(queue);
        (0..n).for_each(|_| q.push(body.as_bytes().to_vec()));
        Ok(())
    }
    fn collect(&mut self, queue: &str, n: usize) -> Result<Vec<String>, DriverError> {
        let q = self.broker.queue(queue);
        (0..n).map(|_| q.pop(queue).map(MemBroker::text)).collect()
    }
}

impl PerftestConnector for Arc<MemBroker> {
    type Publisher = MemPublisher;
    type Subscriber = MemSubscriber;
    type Controller = MemController;

    fn setup(&self, plan: &Plan) -> Result<(), DriverError> {
        for name in [
            "pub_start",
            "pub_done",
            "sub_ready",
            "sub_done",
            "sub_iteration",
        ] {
            self.queue(&plan.control_queue(name));
        }
        Ok(())
    }

    fn publisher(&self, plan: &Plan, key: &str) -> Result<MemPublisher, DriverError> {
        let start = Arc::new(Queue::default());
        self.starts.lock().unwrap().push(start.clone());
        Ok(MemPublisher {
            broker: self.clone(),
            start,
            exchange: plan.exchange(),
            key: key.to_string(),
            body: vec![b'X'; plan.body_len()],
            done_queue: plan.control_queue("pub_done"),
        })
    }

    fn subscriber(&self, plan: &Plan, key: &str) -> Result<MemSubscriber, DriverError> {
        let queue = if plan.exchange().is_empty() {
            self.queue(key)
        } else {
            let n = self.private.fetch_add(1, Ordering::Relaxed);
            let q = self.queue(&format!("private-{n}"));
            self.bindings.lock().unwrap().push((
                plan.exchange().to_string(),
                key.to_string(),
                q.clone(),
            ));
            q
        };
        let iteration = Arc::new(Queue::default());
        self.nexts.lock().unwrap().push(iteration.clone());
        Ok(MemSubscriber {
            broker: self.clone(),
            queue,
            iteration,
            ready_queue: plan.control_queue("sub_ready"),
            done_queue: plan.control_queue("sub_done"),
        })
    }

    fn controller(&self, plan: &Plan) -> Result<MemController, DriverError> {
        Ok(MemController {
            broker: self.clone(),
            ready_queue: plan.control_queue("sub_ready"),
        })
    }
}

#[derive(Parser)]
struct Cmd {
    #[command(flatten)]
    opts: PerftestOpts,
}

fn plan(args: &[&str]) -> Plan {
    let o = Cmd::try_parse_from(std::iter::once("perftest").chain(args.iter().copied()))
        .unwrap()
        .opts;
    Plan::from_opts(&o).unwrap().0
}

fn run(
    broker: &Arc<MemBroker>,
    plan: &Plan,
) -> (Result<Option<PerftestReport>, DriverError>, String) {
    let mut out = Vec::new();
    let r = run_perftest(broker, plan, &mut out);
    (r, String::from_utf8(out).unwrap())
}

fn all_test_queues_drained(broker: &MemBroker) -> bool {
    broker.queues.lock().unwrap().values().all(|q| q.len() == 0)
}

#[test]
fn shared_mode_delivers_every_message_once() {
    let broker = Arc::new(MemBroker::default());
    let p = plan(&[
        "--npubs",
        "2",
        "--nsubs",
        "2",
        "--qt",
        "2",
        "--count",
        "999",
        "--size",
        "64",
        "--sub-ack",
        "100",
        "-s",
    ]);
    let (r, out) = run(&broker, &p);
    let report = r.unwrap().unwrap();
    assert_eq!(report.iterations.len(), 1);
    let it = &report.iterations[0];
    // count rounded to 1000; 4 publishers, 4 subscribers with 1000 each.
    assert_eq!(it.transfers, 4 * 1000 + 4 * 1000);
    assert_eq!(it.pub_rates.values().len(), 4);
    assert_eq!(it.sub_rates.values().len(), 4);
    assert!(all_test_queues_drained(&broker));
    // Each subscriber accepts every 100 messages, plus once at the end.
    assert_eq!(broker.accepts.load(Ordering::Relaxed), 4 * (10 + 1));
    let fields: Vec<f64> = out.trim().split('\t').map(|f| f.parse().unwrap()).collect();
    assert_eq!(fields.len(), 4, "{out}");
    assert!(fields.iter().all(|f| *f > 0.0));
    // Mbytes/sec is transfers/sec × size / 2^20.
    assert!((fields[3] - fields[2] * 64.0 / 1_048_576.0).abs() <= fields[3] * 1e-5);
}

#[test]
fn fanout_checks_exact_order_at_every_subscriber() {
    let broker = Arc::new(MemBroker::default());
    let p = plan(&[
        "--mode", "fanout", "--nsubs", "3", "--count", "2000", "--size", "8",
    ]);
    let (r, out) = run(&broker, &p);
    let it = &r.unwrap().unwrap().iterations[0];
    assert_eq!(it.transfers, 2000 + 3 * 2000);
    assert!(out.contains("Total 8000 transfers of 8 bytes in"), "{out}");
    assert!(all_test_queues_drained(&broker));
}

#[test]
fn topic_iterations_print_averages_and_tx_commits() {
    let broker = Arc::new(MemBroker::default());
    let p = plan(&[
        "--mode",
        "topic",
        "--qt",
        "2",
        "--count",
        "100",
        "--iterations",
        "3",
        "--tx",
        "50",
        "-s",
    ]);
    let (r, out) = run(&broker, &p);
    assert_eq!(r.unwrap().unwrap().iterations.len(), 3);
    assert_eq!(out.lines().count(), 3 + 2, "{out}");
    assert!(out.contains("Averages: \n"));
    // Per iteration: 2 publishers commit 2 batches and after reporting; 2 subscribers
    // commit 2 batches, after the final accept and after reporting; plus 2 after "ready".
    assert_eq!(
        broker.commits.load(Ordering::Relaxed),
        3 * (2 * 3 + 2 * 4) + 2
    );
}

#[test]
fn a_bad_report_fails_the_controller() {
    let broker = Arc::new(MemBroker {
        forged_report: Some("oops".into()),
        ..MemBroker::default()
    });
    let p = plan(&["--count", "10"]);
    let (r, _) = run(&broker, &p);
    assert!(matches!(r, Err(DriverError::BadReport(b)) if b == "oops"));
}

struct Scripted(Vec<Received>);

fn scripted(seqs: &[u64]) -> Scripted {
    Scripted(seqs.iter().map(|&n| Received::first(n)).collect())
}

impl SubscriberOps for Scripted {
    fn tx_select(&mut self) -> Result<(), DriverError> {
        Ok(())
    }
    fn ready(&mut self) -> Result<(), DriverError> {
        Ok(())
    }
    fn await_iteration(&mut self) -> Result<(), DriverError> {
        Ok(())
    }
    fn receive(&mut self) -> Result<Received, DriverError> {
        Ok(self.0.remove(0))
    }
    fn accept(&mut self) -> Result<(), DriverError> {
        Ok(())
    }
    fn tx_commit(&mut self) -> Result<(), DriverError> {
        Ok(())
    }
    fn report(&mut self, _: &str) -> Result<(), DriverError> {
        Ok(())
    }
}

#[test]
fn out_of_order_delivery_is_a_sequence_error() {
    let p = plan(&["--count", "3"]);
    let err = run_subscriber(&p, &mut scripted(&[0, 2, 1])).unwrap_err();
    assert!(matches!(
        err,
        DriverError::Sequence {
            relation: "==",
            expected: 1,
            actual: 2
        }
    ));
    // Two subscribers on one queue only need increasing numbers.
    let p = plan(&["--count", "4", "--nsubs", "2"]);
    assert!(run_subscriber(&p, &mut scripted(&[1, 3])).is_ok());
    assert!(run_subscriber(&p, &mut scripted(&[3, 1])).is_err());
}

#[test]
fn redelivered_messages_are_exempt_from_the_order_check() {
    // Another subscriber's surplus, given back to the queue, arrives late and marked.
    let p = plan(&["--count", "4", "--nsubs", "2"]);
    let mut s = Scripted(vec![
        Received::first(2),
        Received {
            seq: 0,
            redelivered: true,
        },
    ]);
    assert!(run_subscriber(&p, &mut s).is_ok());
    // It does not move the expected number either: 3 after 2 is still fine.
    let mut s = Scripted(vec![
        Received::first(2),
        Received {
            seq: 7,
            redelivered: true,
        },
    ]);
    assert!(run_subscriber(&p, &mut s).is_ok());
}
