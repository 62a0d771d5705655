//! Accepts TCP connections and hands each to its own connection task.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use ferry_core::Broker;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Semaphore};
use tracing::{debug, info, warn};

use crate::config::ServerConfig;
use crate::connection;

/// A bound listener; `run` serves it until shutdown is signalled.
pub struct Server {
    listener: TcpListener,
    broker: Arc<Broker>,
    config: Arc<ServerConfig>,
}

/// Tells every connection task that the broker is stopping.
#[derive(Clone)]
pub struct Shutdown(watch::Receiver<bool>);

impl Shutdown {
    pub fn new() -> (watch::Sender<bool>, Shutdown) {
        let (tx, rx) = watch::channel(false);
        (tx, Shutdown(rx))
    }

    pub fn is_set(&self) -> bool {
        *self.0.borrow()
    }

    pub async fn wait(&mut self) {
        while !*self.0.borrow_and_update() {
            if self.0.changed().await.is_err() {
                return;
            }
        }
    }
}

impl Server {
    pub async fn bind(config: ServerConfig, broker: Arc<Broker>) -> std::io::Result<Server> {
        let listener = TcpListener::bind((config.interface, config.port)).await?;
        Ok(Server {
            listener,
            broker,
            config: Arc::new(config),
        })
    }

    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves until `shutdown` is set, then waits (briefly) for connections to close.
    pub async fn run(self, shutdown: Shutdown) {
        let slots = Arc::new(Semaphore::new(self.config.max_connections));
        let expiry = tokio::spawn(expire_messages(self.broker.clone(), shutdown.clone()));
        let memory = tokio::spawn(watch_memory(self.broker.clone(), shutdown.clone()));
        let mut stop = shutdown.clone();
        loop {
            let accepted = tokio::select! {
                _ = stop.wait() => break,
                accepted = self.listener.accept() => accepted,
            };
            let (stream, peer) = match accepted {
                Ok(pair) => pair,
                Err(e) => {
                    // Running out of file descriptors must not kill the listener; back off.
                    warn!("accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            let Ok(permit) = slots.clone().try_acquire_owned() else {
                warn!(%peer, "refusing connection: --max-connections reached");
                drop(stream);
                continue;
            };
            let Some(ip_slot) = self
                .config
                .counters
                .take_ip(peer.ip(), self.config.connection_limit_per_ip)
            else {
                warn!(%peer, "refusing connection: --connection-limit-per-ip reached");
                drop(stream);
                continue;
            };
            debug!(%peer, "accepted connection");
            let broker = self.broker.clone();
            let config = self.config.clone();
            let shutdown = shutdown.clone();
            tokio::spawn(async move {
                serve(stream, peer, broker, config, shutdown).await;
                drop(ip_slot);
                drop(permit);
            });
        }
        expiry.abort();
        memory.abort();
        // Give connection tasks a moment to send their close and release their messages.
        let all = self.config.max_connections as u32;
        let _ = tokio::time::timeout(Duration::from_secs(2), slots.acquire_many(all)).await;
        info!("listener stopped");
    }
}

async fn serve(
    stream: TcpStream,
    peer: SocketAddr,
    broker: Arc<Broker>,
    config: Arc<ServerConfig>,
    shutdown: Shutdown,
) {
    if let Err(e) = stream.set_nodelay(config.tcp_nodelay) {
        debug!(%peer, "set_nodelay failed: {e}");
    }
    match connection::run(stream, peer, broker, config, shutdown).await {
        Ok(()) => debug!(%peer, "connection closed"),
        Err(e) => debug!(%peer, "connection ended: {e}"),
    }
}

/// Without consumers nothing else would ever look at an expired message: drop them on a
/// timer so a queue of expired messages cannot hold memory forever.
async fn expire_messages(broker: Arc<Broker>, mut shutdown: Shutdown) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = shutdown.wait() => return,
            _ = tick.tick() => { broker.purge_expired(); }
        }
    }
}

/// How often queued bytes are compared with the watermarks when nothing is published (the
/// alarm clears as consumers drain); publishing connections also check after each batch read.
const MEMORY_CHECK: Duration = Duration::from_millis(50);

/// Raises or clears the memory alarm as the watermarks say, and logs a change.
pub(crate) fn check_memory_alarm(broker: &Broker) {
    let Some(marks) = broker.config().memory_watermarks else {
        return;
    };
    match broker.check_memory() {
        Some(true) => warn!(
            used = broker.memory_used(),
            high = marks.high,
            "memory alarm: queues hold more than the high-water mark; publishers are paused"
        ),
        Some(false) => info!(
            used = broker.memory_used(),
            low = marks.low,
            "memory alarm cleared; publishers resume"
        ),
        None => {}
    }
}

/// Clears (and raises) the memory alarm while no publisher is being read.
async fn watch_memory(broker: Arc<Broker>, mut shutdown: Shutdown) {
    if broker.config().memory_watermarks.is_none() {
        return;
    }
    let mut tick = tokio::time::interval(MEMORY_CHECK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = shutdown.wait() => return,
            _ = tick.tick() => check_memory_alarm(&broker),
        }
    }
}
