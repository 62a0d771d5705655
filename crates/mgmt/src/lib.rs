//! ferryd's management: RabbitMQ's management HTTP API (its paths, JSON shapes, paging and
//! errors, for one virtual host "/") and Prometheus metrics, served with axum on the broker's
//! own runtime.
//!
//! Nothing here is on the message path. Reads take the core's snapshots
//! (`ferry_core::Broker::queue_statuses` and friends) on the blocking pool; changes go
//! through `ferry_server::Admin`, which checks logins, the ACL and arguments as the AMQP
//! layers do. A background task samples the counters for rates and history (`stats`).
//!
//! Modules: `listener` (bounded accepts), `login` (HTTP Basic), `api` (routes and
//! handlers), `render` (RabbitMQ's JSON objects), `paging` (list parameters), `body`
//! (request bodies), `metrics` (Prometheus), `stats` (sampling), `process` (/proc readings),
//! `console` (the web console's embedded files, served at `/`).

pub mod api;
mod body;
mod console;
mod error;
mod listener;
mod login;
mod metrics;
mod paging;
mod process;
mod render;
mod state;
mod stats;

use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::ServiceExt;
use ferry_server::Admin;
use tokio::net::TcpListener;
use tower::util::MapRequestLayer;
use tower::Layer;

pub use error::ApiError;
use listener::{BoundedListener, PeerAddr, MAX_HTTP_CONNECTIONS};
use state::App;
use stats::Stats;

/// Where and how management listens.
#[derive(Debug, Clone)]
pub struct MgmtConfig {
    pub interface: IpAddr,
    /// 0 picks a free port.
    pub port: u16,
    /// How often counters are sampled for rates.
    pub sample_interval: Duration,
    /// A second listener serving only `/metrics`, without a login (0 picks a free port).
    pub prometheus_port: Option<u16>,
}

impl Default for MgmtConfig {
    fn default() -> MgmtConfig {
        MgmtConfig {
            interface: IpAddr::from([127, 0, 0, 1]),
            port: 15672,
            sample_interval: Duration::from_secs(5),
            prometheus_port: None,
        }
    }
}

/// A bound management listener (and the Prometheus one, if asked for); `run` serves them.
pub struct Management {
    listener: TcpListener,
    prometheus: Option<TcpListener>,
    app: Arc<App>,
}

impl Management {
    pub async fn bind(config: &MgmtConfig, admin: Admin) -> std::io::Result<Management> {
        let listener = TcpListener::bind((config.interface, config.port)).await?;
        let prometheus = match config.prometheus_port {
            Some(port) => Some(TcpListener::bind((config.interface, port)).await?),
            None => None,
        };
        let addr = listener.local_addr()?;
        let app = Arc::new(App {
            admin,
            stats: Arc::new(Stats::new(
                config.sample_interval.max(Duration::from_millis(100)),
            )),
            node: format!("ferry@{}", process::hostname()),
            started: Instant::now(),
            addr,
            open_scrapes: Default::default(),
        });
        Ok(Management {
            listener,
            prometheus,
            app,
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.app.addr
    }

    /// The Prometheus listener's address, if there is one.
    pub fn prometheus_addr(&self) -> Option<SocketAddr> {
        self.prometheus.as_ref().and_then(|l| l.local_addr().ok())
    }

    /// Serves until the futures `shutdown` makes complete (one per listener); samples
    /// statistics meanwhile.
    pub async fn run<F>(self, shutdown: impl Fn() -> F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let sampler = tokio::spawn(stats::run_sampler(
            self.app.stats.clone(),
            self.app.broker().clone(),
        ));
        let metrics = self.prometheus.map(|listener| {
            tokio::spawn(serve(
                "Prometheus",
                listener,
                api::metrics_router(self.app.clone()),
                shutdown(),
            ))
        });
        serve(
            "management",
            self.listener,
            api::router(self.app.clone()),
            shutdown(),
        )
        .await;
        if let Some(metrics) = metrics {
            let _ = metrics.await;
        }
        sampler.abort();
    }
}

async fn serve(
    what: &str,
    listener: TcpListener,
    router: axum::Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) {
    let listener = BoundedListener::new(listener, MAX_HTTP_CONNECTIONS);
    let router = MapRequestLayer::new(api::trim_trailing_slash).layer(router);
    let service = ServiceExt::<axum::extract::Request>::into_make_service_with_connect_info::<
        PeerAddr,
    >(router);
    if let Err(e) = axum::serve(listener, service)
        .with_graceful_shutdown(shutdown)
        .await
    {
        tracing::error!("{what} server stopped: {e}");
    }
}
