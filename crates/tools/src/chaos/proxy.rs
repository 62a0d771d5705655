//! The nemesis's network: a TCP proxy in front of each node's cluster port. Members know
//! each other by their proxies' addresses, and every node connects from its own loopback
//! address (127.0.0.1x), so a proxy can tell which node a connection comes from and cut
//! the links a partition names: existing connections are closed, new ones are accepted
//! and then black-holed (nothing passes either way) until the partition heals, which a
//! peer sees as a silent network, as in a real partition.

use std::collections::HashSet;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};

use tokio::io::{copy_bidirectional, AsyncReadExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// Which pairs of nodes cannot talk.
pub struct Partitions {
    blocked: Mutex<HashSet<(u64, u64)>>,
    changes: watch::Sender<u64>,
}

fn pair(a: u64, b: u64) -> (u64, u64) {
    (a.min(b), a.max(b))
}

impl Partitions {
    pub fn new() -> Arc<Partitions> {
        Arc::new(Partitions {
            blocked: Mutex::new(HashSet::new()),
            changes: watch::channel(0).0,
        })
    }

    pub fn is_blocked(&self, a: u64, b: u64) -> bool {
        a != 0
            && b != 0
            && self
                .blocked
                .lock()
                .is_ok_and(|set| set.contains(&pair(a, b)))
    }

    /// Cuts `node` off from each of `others`.
    pub fn isolate(&self, node: u64, others: &[u64]) {
        if let Ok(mut b) = self.blocked.lock() {
            for o in others {
                b.insert(pair(node, *o));
            }
        }
        self.changes.send_modify(|n| *n += 1);
    }

    pub fn heal(&self) {
        if let Ok(mut b) = self.blocked.lock() {
            b.clear();
        }
        self.changes.send_modify(|n| *n += 1);
    }
}

/// Node ids by loopback address: 127.0.0.(10 + id); anything else (the harness) is 0.
pub fn node_of(ip: IpAddr) -> u64 {
    match ip {
        IpAddr::V4(v4) => {
            let o = v4.octets();
            if o[0] == 127 && o[1] == 0 && o[2] == 0 && o[3] > 10 {
                u64::from(o[3] - 10)
            } else {
                0
            }
        }
        IpAddr::V6(_) => 0,
    }
}

/// Serves the proxy for node `dest` (whose cluster port is `target`) until the runtime
/// stops.
pub async fn serve(listener: TcpListener, target: SocketAddr, dest: u64, parts: Arc<Partitions>) {
    while let Ok((client, peer)) = listener.accept().await {
        let from = node_of(peer.ip());
        let parts = parts.clone();
        tokio::spawn(async move { relay(client, from, target, dest, parts).await });
    }
}

async fn relay(
    mut client: TcpStream,
    from: u64,
    target: SocketAddr,
    dest: u64,
    parts: Arc<Partitions>,
) {
    let mut changes = parts.changes.subscribe();
    if parts.is_blocked(from, dest) {
        // Black hole: swallow whatever comes until the partition heals, then hang up.
        let mut sink = [0u8; 4096];
        loop {
            tokio::select! {
                r = client.read(&mut sink) => if matches!(r, Ok(0) | Err(_)) { return },
                c = changes.changed() => {
                    if c.is_err() || !parts.is_blocked(from, dest) {
                        return;
                    }
                }
            }
        }
    }
    let Ok(mut server) = TcpStream::connect(target).await else {
        return;
    };
    let _ = server.set_nodelay(true);
    let _ = client.set_nodelay(true);
    // Pinned once and polled across iterations: cancelling a copy would drop the bytes
    // in its buffers and corrupt the stream.
    let copy = copy_bidirectional(&mut client, &mut server);
    tokio::pin!(copy);
    loop {
        tokio::select! {
            _ = &mut copy => return,
            c = changes.changed() => {
                if c.is_err() || parts.is_blocked(from, dest) {
                    return;
                }
            }
        }
    }
}
