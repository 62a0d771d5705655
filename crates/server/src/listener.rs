//! Accepts TCP connections and hands each to its own connection task.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use ferry_core::{Broker, ConnectionMeta};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tracing::{debug, info, warn};

use crate::admin::{Admin, Listeners};
use crate::auth::AuthService;
use crate::config::ServerConfig;
use crate::connection;
use crate::lifecycle::{check_memory_alarm, Shutdown};
use crate::shell::{Peer, Services};
use crate::state::ServerState;
use crate::tls::{self, Tls};

/// A bound listener; `run` serves it until shutdown is signalled.
pub struct Server {
    listener: TcpListener,
    tls: Option<(TcpListener, Arc<Tls>)>,
    services: Services,
}

impl Server {
    /// Binds the listener and loads the users. A bad users file is an error of kind
    /// `InvalidInput`, a socket that cannot be bound one of the socket's kind.
    pub async fn bind(
        config: ServerConfig,
        broker: Arc<Broker>,
        acl: Option<Arc<ferry_acl::SharedAcl>>,
    ) -> std::io::Result<Server> {
        let invalid = |e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e);
        let listener = TcpListener::bind((config.interface, config.port)).await?;
        let tls = match &config.tls {
            Some(settings) => {
                let tls = Tls::load(settings.clone()).map_err(|e| invalid(format!("TLS: {e}")))?;
                let listener = TcpListener::bind((config.interface, config.ssl_port)).await?;
                Some((listener, Arc::new(tls)))
            }
            None => None,
        };
        let auth = AuthService::new(&config).map_err(invalid)?;
        Ok(Server {
            listener,
            tls,
            services: Services {
                broker,
                config: Arc::new(config),
                auth: Arc::new(auth),
                state: Arc::new(ServerState::new(acl)),
            },
        })
    }

    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// The TLS listener's address, if TLS is configured.
    pub fn tls_local_addr(&self) -> Option<std::io::Result<SocketAddr>> {
        self.tls.as_ref().map(|(l, _)| l.local_addr())
    }

    /// What management may do to this server (and how it logs users in).
    pub fn admin(&self) -> std::io::Result<Admin> {
        let listeners = Listeners {
            amqp: self.listener.local_addr()?,
            amqps: self.tls_local_addr().transpose()?,
        };
        let s = &self.services;
        Ok(Admin::new(
            s.broker.clone(),
            s.config.clone(),
            s.auth.clone(),
            s.state.clone(),
            listeners,
        ))
    }

    /// The TLS configuration, to reload it (SIGHUP) while the server runs.
    pub fn tls(&self) -> Option<Arc<Tls>> {
        self.tls.as_ref().map(|(_, t)| t.clone())
    }

    /// Serves until `shutdown` is set, then waits (briefly) for connections to close.
    pub async fn run(self, shutdown: Shutdown) {
        let slots = Arc::new(Semaphore::new(self.services.config.max_connections));
        let expiry = tokio::spawn(expire_messages(
            self.services.broker.clone(),
            shutdown.clone(),
        ));
        let memory = tokio::spawn(watch_memory(self.services.broker.clone(), shutdown.clone()));
        let users = tokio::spawn(watch_users_file(
            self.services.auth.clone(),
            self.services.broker.clone(),
            shutdown.clone(),
        ));
        let mut stop = shutdown.clone();
        loop {
            let accepted = tokio::select! {
                _ = stop.wait() => break,
                accepted = self.listener.accept() => accepted.map(|a| (a, None)),
                accepted = async { match &self.tls {
                    Some((listener, tls)) => listener.accept().await.map(|a| (a, Some(tls))),
                    None => std::future::pending().await,
                }} => accepted,
            };
            let ((stream, peer), tls) = match accepted {
                Ok(pair) => pair,
                Err(e) => {
                    // Running out of file descriptors must not kill the listener; back off.
                    warn!("accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            if tls.is_none() && self.services.config.require_encryption {
                warn!(%peer, "refusing unencrypted connection: --require-encryption");
                drop(stream);
                continue;
            }
            let Ok(permit) = slots.clone().try_acquire_owned() else {
                warn!(%peer, "refusing connection: --max-connections reached");
                drop(stream);
                continue;
            };
            let config = &self.services.config;
            let Some(ip_slot) = self
                .services
                .state
                .counters
                .take_ip(peer.ip(), config.connection_limit_per_ip)
            else {
                warn!(%peer, "refusing connection: --connection-limit-per-ip reached");
                drop(stream);
                continue;
            };
            debug!(%peer, "accepted connection");
            if let Some(gate) = &self.services.config.gate {
                match gate.0.route() {
                    crate::gate::GateRoute::Serve => {}
                    crate::gate::GateRoute::Proxy(addr) if tls.is_none() => {
                        let changes = gate.0.changes();
                        tokio::spawn(async move {
                            crate::gate::proxy(stream, addr, changes).await;
                            drop(ip_slot);
                            drop(permit);
                        });
                        continue;
                    }
                    route => {
                        debug!(%peer, ?route, "refusing connection: no cluster leader to serve it");
                        drop(stream);
                        continue;
                    }
                }
            }
            let services = self.services.clone();
            let shutdown = shutdown.clone();
            let acceptor = tls.map(|t| t.acceptor());
            tokio::spawn(async move {
                match acceptor {
                    Some(acceptor) => serve_tls(stream, peer, acceptor, services, shutdown).await,
                    None => serve(stream, peer, services, shutdown).await,
                }
                drop(ip_slot);
                drop(permit);
            });
        }
        expiry.abort();
        memory.abort();
        users.abort();
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
        tls: false,
        client_identity: None,
    };
    match connection::run(stream, who, services, shutdown).await {
        Ok(()) => debug!(%peer, "connection closed"),
        Err(e) => debug!(%peer, "connection ended: {e}"),
    }
}

async fn serve_tls(
    stream: TcpStream,
    peer: SocketAddr,
    acceptor: tokio_rustls::TlsAcceptor,
    services: Services,
    shutdown: Shutdown,
) {
    if let Err(e) = stream.set_nodelay(services.config.tcp_nodelay) {
        debug!(%peer, "set_nodelay failed: {e}");
    }
    let limit = services.config.handshake_timeout;
    let stream = match tokio::time::timeout(limit, acceptor.accept(stream)).await {
        Ok(Ok(stream)) => stream,
        Ok(Err(e)) => {
            info!(%peer, "TLS handshake failed: {e}");
            return;
        }
        Err(_) => {
            debug!(%peer, "no TLS handshake in time");
            return;
        }
    };
    let who = Peer {
        addr: peer,
        tls: true,
        client_identity: tls::client_identity(stream.get_ref().1),
    };
    match connection::run(stream, who, services, shutdown).await {
        Ok(()) => debug!(%peer, "TLS connection closed"),
        Err(e) => debug!(%peer, "TLS connection ended: {e}"),
    }
}

/// Without consumers nothing else would ever look at an expired message: drop them on a
/// timer so a queue of expired messages cannot hold memory forever. The same task deletes
/// `x-expires` queues when they fall due (waking at their deadlines rather than on the tick),
/// times out distributed transaction branches likewise, and, while dead-lettering queues hold messages that will expire, checks their heads
/// often, so delay queues (TTL + dead letter exchange) hand messages on in time.
async fn expire_messages(broker: Arc<Broker>, mut shutdown: Shutdown) {
    const SWEEP: Duration = Duration::from_secs(1);
    /// Also the shortest gap between rounds, so a stream of notifications (every message
    /// that will expire arriving at a dead-lettering queue notifies) costs at most 40
    /// rounds a second.
    const HEAD_POLL: Duration = Duration::from_millis(25);
    let mut next_sweep = tokio::time::Instant::now() + SWEEP;
    loop {
        let now = tokio::time::Instant::now();
        let round_floor = now + HEAD_POLL;
        let mut wake = next_sweep;
        if broker.expire_heads() {
            wake = wake.min(now + HEAD_POLL);
        }
        let deadlines = [broker.expire_unused_queues(), broker.expire_dtx_branches()];
        for at in deadlines.into_iter().flatten() {
            let wait = Duration::from_millis(at.saturating_sub(ferry_core::now_ms()) + 1);
            wake = wake.min(now + wait);
        }
        tokio::select! {
            _ = shutdown.wait() => return,
            _ = tokio::time::sleep_until(wake) => {}
            _ = broker.queue_expiry_changed() => {}
        }
        if tokio::time::Instant::now() >= next_sweep {
            broker.purge_expired();
            next_sweep = tokio::time::Instant::now() + SWEEP;
        }
        tokio::select! {
            _ = shutdown.wait() => return,
            _ = tokio::time::sleep_until(round_floor) => {}
        }
    }
}

/// How often the users file is looked at for edits made outside ferryd.
const USERS_FILE_CHECK: Duration = Duration::from_secs(1);

/// Closes the connections of users removed from the users file by `ferry user remove` or an
/// editor, as management's delete closes them (RabbitMQ's `delete_user` closes them too):
/// deleting an account cuts off its logins. Logins re-read the file too; whichever reads
/// the change first, the removal is kept for this watcher.
async fn watch_users_file(auth: Arc<AuthService>, broker: Arc<Broker>, mut shutdown: Shutdown) {
    if !auth.watches_users_file() {
        return;
    }
    let mut tick = tokio::time::interval(USERS_FILE_CHECK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = shutdown.wait() => return,
            _ = tick.tick() => {}
        }
        // A stat, and a parse when the file changed: not on an event loop.
        let auth = auth.clone();
        let Ok(removed) = tokio::task::spawn_blocking(move || auth.take_removed()).await else {
            continue;
        };
        if removed.is_empty() {
            continue;
        }
        // Only connections registered by the time the user was gone from the users in force:
        // one registered later found them gone at its own check, and a user of that name
        // added back since, and logged in again, is somebody new.
        let theirs = |meta: &ConnectionMeta| {
            removed
                .iter()
                .any(|(name, at)| *name == meta.user && meta.connected_at <= *at)
        };
        let why = "was removed from the users file";
        let closed = crate::admin::close_connections_of(&broker, theirs, why);
        let names: Vec<&str> = removed.iter().map(|(name, _)| name.as_str()).collect();
        info!("users removed from the users file: {names:?}; {closed} connection(s) closed");
    }
}

/// How often queued bytes are compared with the watermarks when nothing is published (the
/// alarm clears as consumers drain); publishing connections also check after each batch read.
const MEMORY_CHECK: Duration = Duration::from_millis(50);

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
