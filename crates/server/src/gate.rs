//! A cluster's say over new client connections (ferryd with `--cluster-*`): serve here,
//! pass the connection on to the leader, or refuse it while no leader is known. Without a
//! gate (a single ferryd) none of this runs.

use std::sync::Arc;
use std::time::Duration;

use tokio::io::copy_bidirectional;
use tokio::net::TcpStream;
use tokio::sync::watch;
use tracing::debug;

/// Where a new client connection goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GateRoute {
    Serve,
    /// To this AMQP address (the leader's), byte for byte.
    Proxy(String),
    Refuse,
}

pub trait Gate: Send + Sync {
    fn route(&self) -> GateRoute;
    /// Changes whenever the route may have: proxied connections end then, so their
    /// clients reconnect and reach the new leader.
    fn changes(&self) -> watch::Receiver<u64>;
    /// The cluster's AMQP addresses (0-10 connection.open-ok's known-hosts).
    fn known_hosts(&self) -> Vec<String>;
}

/// [`Gate`] in [`crate::ServerConfig`] (which is `Debug`).
#[derive(Clone)]
pub struct GateHandle(pub Arc<dyn Gate>);

impl std::fmt::Debug for GateHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("GateHandle")
    }
}

/// Passes a client's bytes to `addr` and back until either side closes or the route
/// changes.
pub(crate) async fn proxy(mut client: TcpStream, addr: String, mut changes: watch::Receiver<u64>) {
    let connect = tokio::time::timeout(Duration::from_secs(2), TcpStream::connect(&addr)).await;
    let mut leader = match connect {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => {
            debug!(addr, "proxy: cannot reach the leader: {e}");
            return;
        }
        Err(_) => {
            debug!(addr, "proxy: the leader did not answer");
            return;
        }
    };
    let _ = leader.set_nodelay(true);
    changes.mark_unchanged();
    tokio::select! {
        r = copy_bidirectional(&mut client, &mut leader) => {
            if let Err(e) = r {
                debug!(addr, "proxied connection ended: {e}");
            }
        }
        _ = changes.changed() => debug!(addr, "proxied connection cut: the leader changed"),
    }
}
