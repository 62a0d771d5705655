//! Accepts TCP connections and hands each to its own connection task.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use ferry_core::Broker;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Semaphore};
use tracing::{debug, info, warn};

use crate::auth::AuthService;
use crate::config::ServerConfig;
use crate::connection::{self, Peer, Services};

/// A bound listener; `run` serves it until shutdown is signalled.
pub struct Server {
    listener: TcpListener,
    services: Services,
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
    /// Binds the listener and loads the users. A bad users file is an error of kind
    /// `InvalidInput`, a socket that cannot be bound one of the socket's kind.
    pub async fn bind(config: ServerConfig, broker: Arc<Broker>) -> std::io::Result<Server> {
        let listener = TcpListener::bind((config.interface, config.port)).await?;
        let auth = AuthService::new(&config)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
        Ok(Server {
            listener,
            services: Services {
                broker,
                config: Arc::new(config),
                auth: Arc::new(auth),
            },
        })
    }

    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves until `shutdown` is set, then waits (briefly) for connections to close.
    pub async fn run(self, shutdown: Shutdown) {
        let slots = Arc::new(Semaphore::new(self.services.config.max_connections));
        let expiry = tokio::spawn(expire_messages(
            self.services.broker.clone(),
            shutdown.clone(),
        ));
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
            debug!(%peer, "accepted connection");
            let services = self.services.clone();
            let shutdown = shutdown.clone();
            tokio::spawn(async move {
                serve(stream, peer, services, shutdown).await;
                drop(permit);
            });
        }
        expiry.abort();
        // Give connection tasks a moment to send their close and release their messages.
        let all = self.services.config.max_connections as u32;
        let _ = tokio::time::timeout(Duration::from_secs(2), slots.acquire_many(all)).await;
        info!("listener stopped");
    }
}

async fn serve(stream: TcpStream, peer: SocketAddr, services: Services, shutdown: Shutdown) {
    if let Err(e) = stream.set_nodelay(services.config.tcp_nodelay) {
        debug!(%peer, "set_nodelay failed: {e}");
    }
    let who = Peer {
        addr: peer,
        client_identity: None,
    };
    match connection::run(stream, who, services, shutdown).await {
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
