//! `GET /metrics`: Prometheus text exposition (format 0.0.4) with RabbitMQ's metric names
//! under a `ferry_` prefix: the broker's totals, the process, the store, and one series per
//! queue, exchange and connection. Each family is one group with its `# HELP` and `# TYPE`
//! lines; label values are escaped as the format requires.

use std::fmt::Write as _;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use ferry_core::{ConnectionStatus, ExchangeStatus, Overview, QueueStatus};

use crate::api::blocking;
use crate::error::ApiResult;
use crate::process;
use crate::render::{connections::connection_name, Windows, VHOST};
use crate::state::App;

const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

pub async fn scrape(State(app): State<Arc<App>>) -> ApiResult<Response> {
    let text = blocking(move || Ok(render(&app, true))).await?;
    Ok(([(header::CONTENT_TYPE, CONTENT_TYPE)], text).into_response())
}

/// How long an open scrape's text is served again before it is rendered anew.
const OPEN_SCRAPE_REUSE: Duration = Duration::from_secs(1);

/// The last text served on the Prometheus port (see [`scrape_open`]).
#[derive(Debug, Default)]
pub struct OpenScrapes(Mutex<Option<(Instant, Bytes)>>);

/// `/metrics` on the Prometheus port, which asks for no login: without the per-connection
/// series (they name users and client addresses), and rendered at most once a second
/// however many ask, so that anyone who can reach the port cannot keep the broker busy
/// rendering.
pub async fn scrape_open(State(app): State<Arc<App>>) -> ApiResult<Response> {
    let text = blocking(move || {
        let mut last = app.open_scrapes.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((at, text)) = last.as_ref() {
            if at.elapsed() < OPEN_SCRAPE_REUSE {
                return Ok(text.clone());
            }
        }
        let text = Bytes::from(render(&app, false));
        *last = Some((Instant::now(), text.clone()));
        Ok(text)
    })
    .await?;
    Ok(([(header::CONTENT_TYPE, CONTENT_TYPE)], text).into_response())
}

#[derive(Clone, Copy)]
enum Kind {
    Gauge,
    Counter,
}

/// The text being built.
struct Exposition {
    out: String,
}

impl Exposition {
    fn family(&mut self, name: &str, kind: Kind, help: &str) {
        let kind = match kind {
            Kind::Gauge => "gauge",
            Kind::Counter => "counter",
        };
        let _ = writeln!(self.out, "# HELP {name} {}", escape_help(help));
        let _ = writeln!(self.out, "# TYPE {name} {kind}");
    }

    fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: impl std::fmt::Display) {
        self.out.push_str(name);
        if !labels.is_empty() {
            self.out.push('{');
            for (i, (k, v)) in labels.iter().enumerate() {
                if i > 0 {
                    self.out.push(',');
                }
                let _ = write!(self.out, "{k}=\"{}\"", escape_label(v));
            }
            self.out.push('}');
        }
        let _ = writeln!(self.out, " {value}");
    }

    /// A family with one unlabelled sample.
    fn single(&mut self, name: &str, kind: Kind, help: &str, value: impl std::fmt::Display) {
        self.family(name, kind, help);
        self.sample(name, &[], value);
    }

    /// A family with one sample per item, labelled by `labels(item)`.
    fn each<T>(
        &mut self,
        name: &str,
        kind: Kind,
        help: &str,
        items: &[T],
        labels: impl Fn(&T) -> Vec<(&'static str, String)>,
        value: impl Fn(&T) -> u64,
    ) {
        self.family(name, kind, help);
        for item in items {
            let owned = labels(item);
            let borrowed: Vec<(&str, &str)> = owned.iter().map(|(k, v)| (*k, v.as_str())).collect();
            self.sample(name, &borrowed, value(item));
        }
    }
}

/// Label values: backslash, double quote and line feed are escaped.
pub fn escape_label(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// Help text: backslash and line feed are escaped.
fn escape_help(v: &str) -> String {
    v.replace('\\', "\\\\").replace('\n', "\\n")
}

/// `with_connections`: the per-connection series too, which name users and client
/// addresses (for logged-in scrapes only).
fn render(app: &App, with_connections: bool) -> String {
    let broker = app.broker();
    let queues = broker.queue_statuses();
    let exchanges = broker.exchange_statuses();
    let connections = broker.connections().list();
    let o = broker.overview();
    let mut x = Exposition {
        out: String::with_capacity(4096 + queues.len() * 1024),
    };
    globals(&mut x, app, &o, &connections);
    per_queue(&mut x, &queues);
    per_exchange(&mut x, &exchanges);
    if with_connections {
        per_connection(&mut x, app, &connections);
    }
    x.out
}

fn globals(x: &mut Exposition, app: &App, o: &Overview, connections: &[ConnectionStatus]) {
    use Kind::{Counter, Gauge};
    let retired = app.stats.retired();
    let version = env!("CARGO_PKG_VERSION");
    x.family("ferry_build_info", Gauge, "Ferry version");
    x.sample("ferry_build_info", &[("version", version)], 1);
    x.single(
        "ferry_process_resident_memory_bytes",
        Gauge,
        "Resident memory of the ferryd process",
        process::resident_bytes(),
    );
    x.single(
        "ferry_process_open_fds",
        Gauge,
        "Open file descriptors",
        process::open_fds(),
    );
    x.single(
        "ferry_process_max_fds",
        Gauge,
        "Open file descriptor limit",
        process::max_fds(),
    );
    x.single(
        "ferry_process_cpu_seconds_total",
        Counter,
        "CPU time used by ferryd (user and system)",
        process::cpu_seconds(),
    );
    x.single(
        "ferry_process_uptime_seconds",
        Gauge,
        "Seconds since management started",
        app.started.elapsed().as_secs(),
    );
    let watermark = app
        .broker()
        .config()
        .memory_watermarks
        .map_or(0, |w| w.high);
    x.single(
        "ferry_resident_memory_limit_bytes",
        Gauge,
        "Bytes queues may hold before publishers are paused (0: no limit)",
        watermark,
    );
    x.single(
        "ferry_queued_memory_bytes",
        Gauge,
        "Bytes of messages queues hold in memory (what the memory alarm watches)",
        o.memory_used,
    );
    let alarm = |name: &str| u64::from(o.alarms.contains(&name));
    x.single(
        "ferry_alarms_memory_used_watermark",
        Gauge,
        "1 while the memory alarm holds publishers back",
        alarm("memory"),
    );
    x.single(
        "ferry_alarms_free_disk_space_watermark",
        Gauge,
        "1 while the disk alarm holds publishers back",
        alarm("disk"),
    );
    x.single(
        "ferry_connections",
        Gauge,
        "Open connections",
        o.connections,
    );
    let channels: usize = connections.iter().map(|c| c.sessions.len()).sum();
    x.single(
        "ferry_channels",
        Gauge,
        "Open 0-9-1 channels and 0-10 sessions",
        channels,
    );
    x.single("ferry_consumers", Gauge, "Consumers", o.consumers);
    x.single("ferry_queues", Gauge, "Queues", o.queues);
    x.single("ferry_exchanges", Gauge, "Exchanges", o.exchanges);
    x.single(
        "ferry_global_messages_ready",
        Gauge,
        "Messages ready for delivery, all queues",
        o.messages_ready,
    );
    x.single(
        "ferry_global_messages_unacked",
        Gauge,
        "Messages delivered and not yet acknowledged, all queues",
        o.messages_unacked,
    );
    let e = &o.exchange_totals;
    let q = &o.queue_totals;
    x.single(
        "ferry_global_messages_received_total",
        Counter,
        "Messages published to exchanges",
        e.messages_in + retired.exchanges.publish_in,
    );
    x.single(
        "ferry_global_messages_unroutable_dropped_total",
        Counter,
        "Messages no queue took",
        e.unroutable + retired.exchanges.unroutable,
    );
    x.single(
        "ferry_global_messages_delivered_total",
        Counter,
        "Messages delivered to consumers or fetched",
        q.delivered + retired.queues.deliver_get,
    );
    x.single(
        "ferry_global_messages_redelivered_total",
        Counter,
        "Messages delivered again",
        q.redelivered + retired.queues.redeliver,
    );
    x.single(
        "ferry_global_messages_acknowledged_total",
        Counter,
        "Messages acknowledged",
        q.acked + retired.queues.ack,
    );
    let store = o.store.clone().unwrap_or_default();
    x.single(
        "ferry_store_syncs_total",
        Counter,
        "fdatasync calls made by the journal",
        store.syncs,
    );
    x.single(
        "ferry_store_records_total",
        Counter,
        "Records appended to the journal",
        store.records,
    );
    x.single(
        "ferry_store_segments",
        Gauge,
        "Journal segment files",
        store.segments,
    );
    x.single(
        "ferry_store_disk_bytes",
        Gauge,
        "Bytes the journal takes on disk",
        store.disk_bytes,
    );
    x.single(
        "ferry_store_live_bytes",
        Gauge,
        "Bytes of journal records still needed",
        store.live_bytes,
    );
    x.single(
        "ferry_store_failed",
        Gauge,
        "1 if the journal failed",
        u64::from(store.failed),
    );
}

/// A per-queue family: name, help, and the value of one queue.
type QueueFamily = (&'static str, &'static str, fn(&QueueStatus) -> u64);

fn queue_labels(q: &QueueStatus) -> Vec<(&'static str, String)> {
    vec![("vhost", VHOST.to_owned()), ("queue", q.name.clone())]
}

fn per_queue(x: &mut Exposition, queues: &[QueueStatus]) {
    use Kind::{Counter, Gauge};
    let gauges: [QueueFamily; 6] = [
        (
            "ferry_queue_messages_ready",
            "Messages ready for delivery",
            |q| q.depth.ready,
        ),
        (
            "ferry_queue_messages_unacked",
            "Messages delivered and not yet acknowledged",
            |q| q.depth.unacked,
        ),
        (
            "ferry_queue_messages",
            "Messages ready and unacknowledged",
            |q| q.depth.ready + q.depth.unacked,
        ),
        (
            "ferry_queue_messages_bytes",
            "Bytes of ready and unacknowledged messages",
            |q| q.depth.ready_bytes + q.depth.unacked_bytes,
        ),
        (
            "ferry_queue_messages_paged_out_bytes",
            "Bytes of ready messages kept in the journal only (flow to disk)",
            |q| q.depth.on_disk_bytes,
        ),
        ("ferry_queue_consumers", "Consumers", |q| {
            q.consumers.len() as u64
        }),
    ];
    for (name, help, f) in gauges {
        x.each(name, Gauge, help, queues, queue_labels, f);
    }
    let counters: [QueueFamily; 10] = [
        (
            "ferry_queue_messages_published_total",
            "Messages stored",
            |q| q.depth.counters.enqueued,
        ),
        (
            "ferry_queue_messages_delivered_total",
            "Messages delivered to consumers or fetched",
            |q| q.depth.counters.delivered,
        ),
        (
            "ferry_queue_messages_redelivered_total",
            "Messages delivered again",
            |q| q.depth.counters.redelivered,
        ),
        (
            "ferry_queue_messages_acked_total",
            "Messages acknowledged",
            |q| q.depth.counters.acked,
        ),
        (
            "ferry_queue_messages_rejected_total",
            "Messages rejected",
            |q| q.depth.counters.rejected,
        ),
        (
            "ferry_queue_messages_requeued_total",
            "Messages given back by consumers",
            |q| q.depth.counters.released,
        ),
        (
            "ferry_queue_messages_expired_total",
            "Messages whose time to live ran out",
            |q| q.depth.counters.expired,
        ),
        (
            "ferry_queue_messages_dropped_total",
            "Messages dropped for the queue's length limit or replaced in a last-value queue",
            |q| q.depth.counters.overflowed + q.depth.counters.replaced,
        ),
        (
            "ferry_queue_messages_purged_total",
            "Messages purged",
            |q| q.depth.counters.purged,
        ),
        (
            "ferry_queue_messages_refused_total",
            "Publishes refused for the queue's limit",
            |q| q.depth.counters.refused,
        ),
    ];
    for (name, help, f) in counters {
        x.each(name, Counter, help, queues, queue_labels, f);
    }
}

fn per_exchange(x: &mut Exposition, exchanges: &[ExchangeStatus]) {
    use Kind::{Counter, Gauge};
    let labels = |e: &ExchangeStatus| {
        vec![
            ("vhost", VHOST.to_owned()),
            ("exchange", e.info.name.clone()),
        ]
    };
    x.each(
        "ferry_exchange_messages_published_in_total",
        Counter,
        "Messages published to the exchange",
        exchanges,
        labels,
        |e| e.totals.messages_in,
    );
    x.each(
        "ferry_exchange_messages_published_out_total",
        Counter,
        "Messages the exchange routed to at least one queue",
        exchanges,
        labels,
        |e| e.totals.messages_out(),
    );
    x.each(
        "ferry_exchange_messages_unroutable_total",
        Counter,
        "Messages the exchange routed nowhere",
        exchanges,
        labels,
        |e| e.totals.unroutable,
    );
    x.each(
        "ferry_exchange_bindings",
        Gauge,
        "Bindings from the exchange",
        exchanges,
        labels,
        |e| e.bindings as u64,
    );
}

fn per_connection(x: &mut Exposition, app: &App, connections: &[ConnectionStatus]) {
    use Kind::{Counter, Gauge};
    let ctx = app.ctx(Windows::default());
    let labels = |c: &ConnectionStatus| {
        vec![
            ("connection", connection_name(c, &ctx)),
            ("user", c.meta.user.clone()),
            ("protocol", c.meta.protocol.to_owned()),
        ]
    };
    x.each(
        "ferry_connection_incoming_bytes_total",
        Counter,
        "Bytes received from the client",
        connections,
        labels,
        |c| c.traffic.bytes_in,
    );
    x.each(
        "ferry_connection_outgoing_bytes_total",
        Counter,
        "Bytes sent to the client",
        connections,
        labels,
        |c| c.traffic.bytes_out,
    );
    x.each(
        "ferry_connection_incoming_frames_total",
        Counter,
        "Frames received from the client",
        connections,
        labels,
        |c| c.traffic.frames_in,
    );
    x.each(
        "ferry_connection_channels",
        Gauge,
        "Open channels (0-9-1) or sessions (0-10)",
        connections,
        labels,
        |c| c.sessions.len() as u64,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(escape_label(r#"a"b\c"#), r#"a\"b\\c"#);
        assert_eq!(escape_label("line\nfeed"), "line\\nfeed");
        assert_eq!(escape_help("a\\b\nc"), "a\\\\b\\nc");
    }

    #[test]
    fn families_are_grouped_with_help_and_type() {
        let mut x = Exposition { out: String::new() };
        let items = ["q\"1", "q2"];
        x.each(
            "ferry_queue_messages_ready",
            Kind::Gauge,
            "Messages ready",
            &items,
            |q| vec![("queue", q.to_string())],
            |_| 3,
        );
        assert_eq!(
            x.out,
            "# HELP ferry_queue_messages_ready Messages ready\n\
             # TYPE ferry_queue_messages_ready gauge\n\
             ferry_queue_messages_ready{queue=\"q\\\"1\"} 3\n\
             ferry_queue_messages_ready{queue=\"q2\"} 3\n"
        );
    }
}
