//! qpid-perftest's client loops, written against traits so the AMQP 0-10 client can drive
//! a real broker with them. An implementation carries out protocol operations; the timing,
//! batching, sequence checks and arithmetic stay here.

use std::io::Write;
use std::thread;
use std::time::{Duration, Instant};

use super::report::{format_rate_report, parse_rate_report, IterationResult, PerftestReport};
use super::{DriverError, Plan};
use crate::stats::RateStats;

/// Opens the clients of a perftest run. Shared across the client threads.
pub trait PerftestConnector: Sync {
    type Publisher: PublisherOps;
    type Subscriber: SubscriberOps;
    type Controller: ControllerOps;

    /// Declares and purges the control queues (`plan.control_queue("pub_start")`,
    /// `"pub_done"`, `"sub_ready"`, `"sub_done"`, and `"sub_iteration"` when
    /// `plan.iterations > 1`) and, in shared mode, the `plan.qt` test queues
    /// `plan.queue_or_topic(i)` (durable when `plan.durable`).
    fn setup(&self, plan: &Plan) -> Result<(), DriverError>;

    /// A publisher sending to `plan.exchange()` with routing key `key`, subscribed to the
    /// `pub_start` control queue with no credit yet.
    fn publisher(&self, plan: &Plan, key: &str) -> Result<Self::Publisher, DriverError>;

    /// A subscriber with `plan.sub_quota` credit: on queue `key` in shared mode, otherwise on
    /// a private auto-delete queue bound to `plan.exchange()` with key `key`. Explicit accept
    /// mode when `plan.sub_ack` or `plan.tx_sub` is non-zero, else none.
    fn subscriber(&self, plan: &Plan, key: &str) -> Result<Self::Subscriber, DriverError>;

    fn controller(&self, plan: &Plan) -> Result<Self::Controller, DriverError>;
}

pub trait PublisherOps: Send {
    /// Grants one credit on `pub_start` and waits for a message; returns its body. Holding
    /// just one credit matters: it is what stops a fast publisher taking another's "start".
    fn await_start(&mut self) -> Result<String, DriverError>;
    /// Sends one test message of `plan.body_len()` bytes whose first 8 bytes are `seq`
    /// (little-endian). With `sync` set, waits for the broker to complete it first.
    fn publish(&mut self, seq: u64, sync: bool) -> Result<(), DriverError>;
    /// Waits until the broker has completed everything sent so far (session sync).
    fn confirm(&mut self) -> Result<(), DriverError>;
    fn tx_select(&mut self) -> Result<(), DriverError>;
    fn tx_commit(&mut self) -> Result<(), DriverError>;
    /// Sends `body` to the `pub_done` control queue.
    fn report(&mut self, body: &str) -> Result<(), DriverError>;
}

/// A test message as a subscriber saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Received {
    pub seq: u64,
    /// Given back to the queue and delivered again (a 0-9-1 subscriber returns what it
    /// received beyond its quota): out of order by nature, so not order-checked.
    pub redelivered: bool,
}

impl Received {
    pub fn first(seq: u64) -> Self {
        Received {
            seq,
            redelivered: false,
        }
    }
}

pub trait SubscriberOps: Send {
    fn tx_select(&mut self) -> Result<(), DriverError>;
    /// Sends "ready" to `sub_ready`.
    fn ready(&mut self) -> Result<(), DriverError>;
    /// Grants one credit on `sub_iteration`, waits for "next", then grants `plan.sub_quota`
    /// more credit on the test subscription.
    fn await_iteration(&mut self) -> Result<(), DriverError>;
    /// Next test message: the sequence number in its first 8 bytes, and whether the
    /// broker marked it redelivered.
    fn receive(&mut self) -> Result<Received, DriverError>;
    /// Accepts everything received and not yet accepted.
    fn accept(&mut self) -> Result<(), DriverError>;
    fn tx_commit(&mut self) -> Result<(), DriverError>;
    /// Sends `body` to the `sub_done` control queue.
    fn report(&mut self, body: &str) -> Result<(), DriverError>;
}

pub trait ControllerOps {
    /// The control queue subscribers announce themselves on (`sub_ready`).
    fn ready_queue(&self) -> &str;
    /// Waits for `n` messages on `sub_ready`, each "ready".
    fn await_ready(&mut self, n: usize) -> Result<(), DriverError> {
        let queue = self.ready_queue().to_owned();
        for body in self.collect(&queue, n)? {
            expect_control(body, "ready")?;
        }
        Ok(())
    }
    /// Sends `body` `n` times to control queue `queue` (a name from `Plan::control_queue`).
    fn send(&mut self, queue: &str, body: &str, n: usize) -> Result<(), DriverError>;
    /// Takes `n` message bodies from control queue `queue`.
    fn collect(&mut self, queue: &str, n: usize) -> Result<Vec<String>, DriverError>;
}

fn expect_control(actual: String, expected: &str) -> Result<(), DriverError> {
    if actual == expected {
        Ok(())
    } else {
        Err(DriverError::UnexpectedControl {
            expected: expected.to_string(),
            actual,
        })
    }
}

fn nonzero_secs(start: Instant) -> Result<f64, DriverError> {
    let secs = start.elapsed().as_secs_f64();
    if secs <= 0.0 {
        Err(DriverError::ZeroTime)
    } else {
        Ok(secs)
    }
}

fn pause_ms(ms: u32) {
    if ms > 0 {
        thread::sleep(Duration::from_millis(u64::from(ms)));
    }
}

/// One publisher's part: per iteration, wait for "start", send `plan.count` messages and
/// report `count / seconds`.
pub fn run_publisher<P: PublisherOps>(plan: &Plan, p: &mut P) -> Result<(), DriverError> {
    if plan.tx_pub > 0 {
        p.tx_select()?;
    }
    for _ in 0..plan.iterations {
        expect_control(p.await_start()?, "start")?;
        let start = Instant::now();
        for i in 0..plan.count {
            p.publish(i as u64, plan.sync_publish)?;
            if plan.tx_pub > 0 && (i + 1) % plan.tx_pub == 0 {
                p.tx_commit()?;
            }
            pause_ms(plan.interval_pub_ms);
        }
        if plan.pub_confirm {
            p.confirm()?;
        }
        let secs = nonzero_secs(start)?;
        p.report(&format_rate_report(plan.count as f64 / secs))?;
        if plan.tx_pub > 0 {
            p.tx_commit()?;
        }
    }
    Ok(())
}

/// One subscriber's part: announce readiness, then per iteration receive `plan.sub_quota`
/// messages, check their order where it is defined, and report `quota / seconds`.
pub fn run_subscriber<S: SubscriberOps>(plan: &Plan, s: &mut S) -> Result<(), DriverError> {
    if plan.tx_sub > 0 {
        s.tx_select()?;
    }
    s.ready()?;
    if plan.tx_sub > 0 {
        s.tx_commit()?;
    }
    // Order is only defined with one publisher: exact for a sole or fanout subscriber,
    // increasing when several subscribers share a queue.
    let check = plan.npubs == 1;
    let exact = plan.nsubs == 1 || plan.mode == super::Mode::Fanout;
    for j in 0..plan.iterations {
        if j > 0 {
            s.await_iteration()?;
        }
        let start = Instant::now();
        let mut expect = 0u64;
        for i in 0..plan.sub_quota {
            let Received {
                seq: n,
                redelivered,
            } = s.receive()?;
            if check && !redelivered {
                let ok = if exact { n == expect } else { n >= expect };
                if !ok {
                    return Err(DriverError::Sequence {
                        relation: if exact { "==" } else { ">=" },
                        expected: expect,
                        actual: n,
                    });
                }
                expect = n + 1;
            }
            if plan.tx_sub > 0 && (i + 1) % plan.tx_sub == 0 {
                s.accept()?;
                s.tx_commit()?;
            } else if plan.sub_ack > 0 && (i + 1) % plan.sub_ack == 0 {
                s.accept()?;
            }
            pause_ms(plan.interval_sub_ms);
        }
        if plan.tx_sub > 0 || plan.sub_ack > 0 {
            s.accept()?;
        }
        if plan.tx_sub > 0 {
            s.tx_commit()?;
        }
        let secs = nonzero_secs(start)?;
        s.report(&format_rate_report(plan.sub_quota as f64 / secs))?;
        if plan.tx_sub > 0 {
            s.tx_commit()?;
        }
    }
    Ok(())
}

/// The controller: wait for every subscriber, then per iteration start the publishers,
/// collect every report and print the iteration's figures to `out`.
pub fn run_controller<C: ControllerOps>(
    plan: &Plan,
    c: &mut C,
    out: &mut dyn Write,
) -> Result<PerftestReport, DriverError> {
    c.await_ready(plan.total_subs)?;
    let mut report = PerftestReport::default();
    for j in 0..plan.iterations {
        let start = Instant::now();
        c.send(&plan.control_queue("pub_start"), "start", plan.total_pubs)?;
        if j > 0 {
            c.send(
                &plan.control_queue("sub_iteration"),
                "next",
                plan.total_subs,
            )?;
        }
        let pub_rates = collect_rates(c, &plan.control_queue("pub_done"), plan.total_pubs)?;
        let sub_rates = collect_rates(c, &plan.control_queue("sub_done"), plan.total_subs)?;
        let secs = nonzero_secs(start)?;
        let it = IterationResult {
            transfers: plan.transfers,
            size: plan.size,
            secs,
            pub_rates,
            sub_rates,
        };
        // A closed stdout should not turn a finished measurement into an error.
        let _ = out.write_all(PerftestReport::iteration_text(plan, &it).as_bytes());
        report.iterations.push(it);
    }
    if let Some(avg) = report.averages_text() {
        let _ = out.write_all(avg.as_bytes());
    }
    Ok(report)
}

/// Runs this process's share of a perftest: setup, then its publishers and subscribers on
/// threads, then (if it is the controller) the report. Returns the report when this process
/// controlled the run.
///
/// Implementations should bound every blocking wait (returning `DriverError::Timeout`), or a
/// failed peer leaves the other client threads waiting and this call never returns.
pub fn run_perftest<K: PerftestConnector>(
    connector: &K,
    plan: &Plan,
    out: &mut dyn Write,
) -> Result<Option<PerftestReport>, DriverError> {
    if plan.actions.setup {
        connector.setup(plan)?;
    }
    thread::scope(|scope| {
        let mut workers = Vec::new();
        // Clients are opened here, before any thread starts, so every subscription exists
        // before the controller sends "start".
        for i in 0..plan.qt {
            let key = plan.queue_or_topic(i);
            for _ in 0..plan.local_pubs_per_key() {
                let mut p = connector.publisher(plan, &key)?;
                workers.push(scope.spawn(move || run_publisher(plan, &mut p)));
            }
            for _ in 0..plan.local_subs_per_key() {
                let mut s = connector.subscriber(plan, &key)?;
                workers.push(scope.spawn(move || run_subscriber(plan, &mut s)));
            }
        }
        let report = if plan.actions.control {
            connector
                .controller(plan)
                .and_then(|mut c| run_controller(plan, &mut c, out))
                .map(Some)
        } else {
            Ok(None)
        };
        // A client's failure usually explains the controller's (it timed out waiting for
        // that client's report), so it is the error worth returning.
        for w in workers {
            w.join().map_err(|_| DriverError::WorkerPanicked)??;
        }
        report
    })
}

fn collect_rates<C: ControllerOps>(
    c: &mut C,
    queue: &str,
    n: usize,
) -> Result<RateStats, DriverError> {
    let mut rates = RateStats::default();
    for body in c.collect(queue, n)? {
        rates.push(parse_rate_report(&body)?);
    }
    Ok(rates)
}

#[cfg(test)]
mod tests;
