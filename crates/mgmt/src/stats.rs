//! Rates and history. The core keeps cumulative counters only; a background task samples
//! them every few seconds (off the runtime's worker threads) and keeps a bounded history per
//! object: rates are differences between the last two samples, RabbitMQ's `*_details`
//! objects and the console's charts read the history.
//!
//! Memory is bounded: the overview keeps an hour of samples, each queue, exchange and
//! connection a minute (a few hundred bytes each); objects that went away are dropped at the
//! next sample, their counts moving into "retired" totals so broker-wide counters do not go
//! backwards when a queue is deleted.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use ferry_core::{now_ms, Broker, ConnectionId, ConnectionStatus, ExchangeStatus, QueueStatus};
use parking_lot::RwLock;
use serde_json::{json, Map, Value};

/// Samples the overview keeps: an hour at the default interval.
const OVERVIEW_SAMPLES: usize = 720;
/// Samples each queue, exchange and connection keeps: a minute at the default interval.
const OBJECT_SAMPLES: usize = 12;

/// A queue's numbers at one sample.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueuePoint {
    pub messages: u64,
    pub ready: u64,
    pub unacked: u64,
    pub publish: u64,
    pub deliver_get: u64,
    pub redeliver: u64,
    pub ack: u64,
}

impl QueuePoint {
    pub fn of(q: &QueueStatus) -> QueuePoint {
        let d = &q.depth;
        QueuePoint {
            messages: d.ready + d.unacked,
            ready: d.ready,
            unacked: d.unacked,
            publish: d.counters.enqueued,
            deliver_get: d.counters.delivered,
            redeliver: d.counters.redelivered,
            ack: d.counters.acked,
        }
    }

    fn add_counters(&mut self, o: &QueuePoint) {
        self.publish += o.publish;
        self.deliver_get += o.deliver_get;
        self.redeliver += o.redeliver;
        self.ack += o.ack;
    }
}

/// An exchange's numbers at one sample.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ExchangePoint {
    pub publish_in: u64,
    pub publish_out: u64,
    pub unroutable: u64,
}

impl ExchangePoint {
    pub fn of(e: &ExchangeStatus) -> ExchangePoint {
        ExchangePoint {
            publish_in: e.totals.messages_in,
            publish_out: e.totals.messages_out(),
            unroutable: e.totals.unroutable,
        }
    }

    fn add(&mut self, o: &ExchangePoint) {
        self.publish_in += o.publish_in;
        self.publish_out += o.publish_out;
        self.unroutable += o.unroutable;
    }
}

/// A connection's traffic at one sample.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ConnectionPoint {
    pub recv_oct: u64,
    pub send_oct: u64,
    pub recv_cnt: u64,
}

impl ConnectionPoint {
    pub fn of(c: &ConnectionStatus) -> ConnectionPoint {
        ConnectionPoint {
            recv_oct: c.traffic.bytes_in,
            send_oct: c.traffic.bytes_out,
            recv_cnt: c.traffic.frames_in,
        }
    }

    fn add(&mut self, o: &ConnectionPoint) {
        self.recv_oct += o.recv_oct;
        self.send_oct += o.send_oct;
        self.recv_cnt += o.recv_cnt;
    }
}

/// Objects seen to appear and go away, sample to sample (RabbitMQ's churn rates). Whatever
/// comes and goes between two samples is not seen.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Churn {
    pub connection_created: u64,
    pub connection_closed: u64,
    pub channel_created: u64,
    pub channel_closed: u64,
    pub queue_created: u64,
    pub queue_deleted: u64,
}

/// The whole broker at one sample; counters include objects that no longer exist.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OverviewPoint {
    pub queues: QueuePoint,
    pub exchanges: ExchangePoint,
    pub connections: ConnectionPoint,
    pub churn: Churn,
}

/// A bounded series of samples, oldest first.
#[derive(Debug, Clone)]
pub struct Series<T> {
    points: VecDeque<(u64, T)>,
    cap: usize,
}

/// Whether a number only grows (a counter: its rate is never negative) or goes up and down.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
}

/// What history a request asked for (RabbitMQ's `msg_rates_age`/`_incr`,
/// `lengths_age`/`_incr`, `data_rates_age`/`_incr`, in seconds).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Window {
    pub age_s: u64,
    pub incr_s: u64,
}

impl<T: Copy> Series<T> {
    fn new(cap: usize) -> Series<T> {
        Series {
            points: VecDeque::with_capacity(cap.min(16)),
            cap,
        }
    }

    /// No samples: every rate is zero.
    pub fn empty() -> Series<T> {
        Series::new(1)
    }

    fn push(&mut self, at: u64, point: T) {
        if self.points.len() == self.cap {
            self.points.pop_front();
        }
        self.points.push_back((at, point));
    }

    pub fn last(&self) -> Option<&T> {
        self.points.back().map(|(_, p)| p)
    }

    /// Per second, between the last two samples.
    pub fn rate(&self, kind: Kind, f: impl Fn(&T) -> u64) -> f64 {
        let n = self.points.len();
        if n < 2 {
            return 0.0;
        }
        let (t0, a) = &self.points[n - 2];
        let (t1, b) = &self.points[n - 1];
        rate_between(kind, *t0, f(a), *t1, f(b))
    }

    /// RabbitMQ's `*_details` object: `{rate}`, and with a window the samples in it
    /// (newest first), their average and average rate.
    pub fn details(&self, kind: Kind, window: Option<Window>, f: impl Fn(&T) -> u64) -> Value {
        let rate = self.rate(kind, &f);
        let mut out = Map::new();
        out.insert("rate".into(), json!(round(rate)));
        let Some(w) = window else {
            return Value::Object(out);
        };
        let newest = self.points.back().map_or_else(now_ms, |(t, _)| *t);
        let since = newest.saturating_sub(w.age_s.saturating_mul(1000));
        let step = w.incr_s.saturating_mul(1000).max(1);
        let mut picked: Vec<(u64, u64)> = Vec::new();
        for (t, p) in self.points.iter().rev().filter(|(t, _)| *t >= since) {
            if picked
                .last()
                .map_or(true, |(last, _)| last.saturating_sub(*t) >= step)
            {
                picked.push((*t, f(p)));
            }
        }
        let samples: Vec<Value> = picked
            .iter()
            .map(|(t, v)| json!({ "sample": v, "timestamp": t }))
            .collect();
        let avg = if picked.is_empty() {
            0.0
        } else {
            picked.iter().map(|(_, v)| *v as f64).sum::<f64>() / picked.len() as f64
        };
        let avg_rate = match (picked.first(), picked.last()) {
            (Some((t1, b)), Some((t0, a))) if t1 > t0 => rate_between(kind, *t0, *a, *t1, *b),
            _ => 0.0,
        };
        out.insert("samples".into(), Value::Array(samples));
        out.insert("avg".into(), json!(round(avg)));
        out.insert("avg_rate".into(), json!(round(avg_rate)));
        Value::Object(out)
    }
}

fn rate_between(kind: Kind, t0: u64, a: u64, t1: u64, b: u64) -> f64 {
    if t1 <= t0 {
        return 0.0;
    }
    let secs = (t1 - t0) as f64 / 1000.0;
    let delta = match kind {
        // A counter that went down was reset (its object recreated): no rate.
        Kind::Counter => b.saturating_sub(a) as f64,
        Kind::Gauge => b as f64 - a as f64,
    };
    delta / secs
}

/// Rates with a sensible number of digits, as RabbitMQ shows them.
fn round(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

#[derive(Debug)]
struct Inner {
    overview: Series<OverviewPoint>,
    // Shared with requests, which take counted references out under the read lock and
    // render after releasing it; a sample copies only a series a request still holds.
    queues: HashMap<String, Arc<Series<QueuePoint>>>,
    exchanges: HashMap<String, Arc<Series<ExchangePoint>>>,
    connections: HashMap<ConnectionId, Arc<Series<ConnectionPoint>>>,
    /// Counters of queues, exchanges and connections that went away, at their last sample.
    retired: OverviewPoint,
    churn: Churn,
    /// Channels open at the last sample, by connection and channel number.
    channels: std::collections::HashSet<(ConnectionId, u16)>,
    /// When the last sample was taken (ms since the epoch), 0 before the first.
    sampled_at: u64,
}

/// The sampler's history, shared by the handlers.
#[derive(Debug)]
pub struct Stats {
    inner: RwLock<Inner>,
    pub interval: Duration,
}

impl Stats {
    pub fn new(interval: Duration) -> Stats {
        Stats {
            inner: RwLock::new(Inner {
                overview: Series::new(OVERVIEW_SAMPLES),
                queues: HashMap::new(),
                exchanges: HashMap::new(),
                connections: HashMap::new(),
                retired: OverviewPoint::default(),
                churn: Churn::default(),
                channels: std::collections::HashSet::new(),
                sampled_at: 0,
            }),
            interval,
        }
    }

    /// Takes one sample of everything. Blocking work (one lock per queue): run it on the
    /// blocking pool.
    pub fn sample(&self, broker: &Broker) {
        let queues = broker.queue_statuses();
        let exchanges = broker.exchange_statuses();
        let connections = broker.connections().list();
        self.record(now_ms(), &queues, &exchanges, &connections);
    }

    pub fn record(
        &self,
        at: u64,
        queues: &[QueueStatus],
        exchanges: &[ExchangeStatus],
        connections: &[ConnectionStatus],
    ) {
        let mut inner = self.inner.write();
        let inner = &mut *inner;
        let mut total = OverviewPoint::default();

        let mut next_queues = HashMap::with_capacity(queues.len());
        for q in queues {
            let point = QueuePoint::of(q);
            let mut series = inner.queues.remove(&q.name).unwrap_or_else(|| {
                inner.churn.queue_created += 1;
                Arc::new(Series::new(OBJECT_SAMPLES))
            });
            Arc::make_mut(&mut series).push(at, point);
            total.queues.messages += point.messages;
            total.queues.ready += point.ready;
            total.queues.unacked += point.unacked;
            total.queues.add_counters(&point);
            next_queues.insert(q.name.clone(), series);
        }
        for gone in inner.queues.values() {
            inner.churn.queue_deleted += 1;
            if let Some(last) = gone.last() {
                inner.retired.queues.add_counters(last);
            }
        }
        inner.queues = next_queues;

        let mut next_exchanges = HashMap::with_capacity(exchanges.len());
        for e in exchanges {
            let point = ExchangePoint::of(e);
            let mut series = inner
                .exchanges
                .remove(&e.info.name)
                .unwrap_or_else(|| Arc::new(Series::new(OBJECT_SAMPLES)));
            Arc::make_mut(&mut series).push(at, point);
            total.exchanges.add(&point);
            next_exchanges.insert(e.info.name.clone(), series);
        }
        for gone in inner.exchanges.values() {
            if let Some(last) = gone.last() {
                inner.retired.exchanges.add(last);
            }
        }
        inner.exchanges = next_exchanges;

        let mut next_connections = HashMap::with_capacity(connections.len());
        for c in connections {
            let point = ConnectionPoint::of(c);
            let mut series = inner.connections.remove(&c.id).unwrap_or_else(|| {
                inner.churn.connection_created += 1;
                Arc::new(Series::new(OBJECT_SAMPLES))
            });
            Arc::make_mut(&mut series).push(at, point);
            total.connections.add(&point);
            next_connections.insert(c.id, series);
        }
        for gone in inner.connections.values() {
            inner.churn.connection_closed += 1;
            if let Some(last) = gone.last() {
                inner.retired.connections.add(last);
            }
        }
        inner.connections = next_connections;
        let channels: std::collections::HashSet<(ConnectionId, u16)> = connections
            .iter()
            .flat_map(|c| c.sessions.iter().map(move |s| (c.id, s.channel)))
            .collect();
        inner.churn.channel_created += channels.difference(&inner.channels).count() as u64;
        inner.churn.channel_closed += inner.channels.difference(&channels).count() as u64;
        inner.channels = channels;

        total.queues.add_counters(&inner.retired.queues);
        total.exchanges.add(&inner.retired.exchanges);
        total.connections.add(&inner.retired.connections);
        total.churn = inner.churn;
        inner.overview.push(at, total);
        inner.sampled_at = at;
    }

    pub fn overview(&self) -> Series<OverviewPoint> {
        self.inner.read().overview.clone()
    }

    /// Counters of objects that no longer exist, for broker-wide totals.
    pub fn retired(&self) -> OverviewPoint {
        self.inner.read().retired
    }

    /// Runs `f` over the history of every queue, exchange and connection, under one read
    /// lock. Keep `f` short (take out the series wanted, render after): the sampler's write
    /// waits for it, and readers queue behind that write (the lock is fair).
    pub fn with<R>(&self, f: impl FnOnce(&History<'_>) -> R) -> R {
        let inner = self.inner.read();
        f(&History { inner: &inner })
    }
}

/// Read access to the per-object series.
pub struct History<'a> {
    inner: &'a Inner,
}

impl History<'_> {
    pub fn queue(&self, name: &str) -> Option<Arc<Series<QueuePoint>>> {
        self.inner.queues.get(name).cloned()
    }

    pub fn exchange(&self, name: &str) -> Option<Arc<Series<ExchangePoint>>> {
        self.inner.exchanges.get(name).cloned()
    }

    pub fn connection(&self, id: ConnectionId) -> Option<Arc<Series<ConnectionPoint>>> {
        self.inner.connections.get(&id).cloned()
    }
}

/// Samples `broker` every `stats.interval` until the task is dropped or aborted.
pub async fn run_sampler(stats: Arc<Stats>, broker: Arc<Broker>) {
    let mut tick = tokio::time::interval(stats.interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let (stats, broker) = (stats.clone(), broker.clone());
        // Thousands of queues take milliseconds to read: not on a worker thread.
        if tokio::task::spawn_blocking(move || stats.sample(&broker))
            .await
            .is_err()
        {
            tracing::warn!("management: a statistics sample failed");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(points: &[(u64, u64)]) -> Series<u64> {
        let mut s = Series::new(4);
        for (t, v) in points {
            s.push(*t, *v);
        }
        s
    }

    fn queue(name: &str, enqueued: u64) -> QueueStatus {
        let mut depth = ferry_core::QueueDepth::default();
        depth.counters.enqueued = enqueued;
        QueueStatus {
            name: name.into(),
            durable: false,
            auto_delete: false,
            owner: None,
            alternate_exchange: None,
            arguments: Default::default(),
            limits: Default::default(),
            depth,
            consumers: Vec::new(),
        }
    }

    #[test]
    fn deleted_queues_keep_counting_in_the_totals_and_churn() {
        let stats = Stats::new(Duration::from_secs(5));
        stats.record(0, &[queue("a", 5), queue("b", 7)], &[], &[]);
        stats.record(5_000, &[queue("a", 6)], &[], &[]);
        stats.record(10_000, &[queue("a", 6), queue("c", 1)], &[], &[]);
        let o = stats.overview();
        let last = o.last().unwrap();
        assert_eq!(last.queues.publish, 6 + 7 + 1, "b's 7 are kept");
        assert_eq!(stats.retired().queues.publish, 7);
        assert_eq!(last.churn.queue_created, 3);
        assert_eq!(last.churn.queue_deleted, 1);
        assert!(stats.with(|h| h.queue("b").is_none()));
        assert_eq!(o.rate(Kind::Counter, |p| p.queues.publish), 0.2);
    }

    #[test]
    fn rates_come_from_the_last_two_samples() {
        let s = series(&[(0, 0), (5_000, 50), (10_000, 150)]);
        assert_eq!(s.rate(Kind::Counter, |v| *v), 20.0);
        let down = series(&[(0, 100), (5_000, 50)]);
        assert_eq!(down.rate(Kind::Counter, |v| *v), 0.0, "a reset counter");
        assert_eq!(down.rate(Kind::Gauge, |v| *v), -10.0);
        assert_eq!(series(&[(0, 1)]).rate(Kind::Counter, |v| *v), 0.0);
    }

    #[test]
    fn the_history_is_bounded_and_windows_pick_samples_newest_first() {
        let s = series(&[
            (0, 0),
            (5_000, 10),
            (10_000, 20),
            (15_000, 30),
            (20_000, 40),
        ]);
        assert_eq!(s.points.len(), 4, "the oldest sample is dropped");
        let d = s.details(
            Kind::Counter,
            Some(Window {
                age_s: 10,
                incr_s: 5,
            }),
            |v| *v,
        );
        let samples: Vec<u64> = d["samples"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["sample"].as_u64().unwrap())
            .collect();
        assert_eq!(samples, [40, 30, 20]);
        assert_eq!(d["avg_rate"], json!(2.0));
        assert_eq!(d["rate"], json!(2.0));
        assert_eq!(s.details(Kind::Counter, None, |v| *v), json!({"rate": 2.0}));
    }
}
