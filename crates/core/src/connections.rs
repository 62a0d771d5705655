//! The connections management can see and close. Each connection registers once it has
//! logged in and opened; its task stores its traffic counters after each batch and its
//! sessions when they change, so a reader never waits for a connection and a connection
//! never waits for a reader.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::{Arc, Weak};

use parking_lot::Mutex;

use crate::queue::{Outbox, OutboxItem};
use crate::stats::{ConnectionCounters, Traffic};
use crate::{ConnectionId, OwnerId};

/// What a connection is, fixed once it has opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectionMeta {
    pub peer: SocketAddr,
    /// Who logged in.
    pub user: String,
    /// e.g. "AMQP 0-10", "AMQP 0-9-1".
    pub protocol: &'static str,
    pub tls: bool,
    /// What the client said of itself (product, version, platform...), as text.
    pub client_properties: Vec<(String, String)>,
    /// Milliseconds since the epoch.
    pub connected_at: u64,
    pub heartbeat: u16,
    pub frame_max: u32,
    pub channel_max: u16,
}

/// One session (0-10) or channel (0-9-1) of a connection.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionStatus {
    pub channel: u16,
    /// The 0-10 session name; empty for 0-9-1 channels.
    pub name: String,
    /// Owns its exclusive queues and consumers (0-10 sessions; 0-9-1 channels share the
    /// connection's).
    pub owner: OwnerId,
    pub consumers: usize,
    /// Deliveries waiting for the client to settle them.
    pub unacked: u64,
    /// 0-9-1 prefetch count (0: none).
    pub prefetch: u32,
    pub transactional: bool,
    /// 0-9-1 publisher confirms.
    pub confirms: bool,
}

/// A connection as management sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectionStatus {
    pub id: ConnectionId,
    pub meta: ConnectionMeta,
    pub traffic: Traffic,
    pub sessions: Vec<SessionStatus>,
}

struct Entry {
    meta: ConnectionMeta,
    counters: ConnectionCounters,
    sessions: Mutex<Vec<SessionStatus>>,
    /// To ask the connection to close; weak, so the registry never keeps one alive.
    outbox: Weak<Outbox>,
}

/// Every open connection of a broker.
#[derive(Default)]
pub struct Connections {
    entries: Mutex<BTreeMap<ConnectionId, Arc<Entry>>>,
}

impl std::fmt::Debug for Connections {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connections")
            .field("open", &self.entries.lock().len())
            .finish()
    }
}

/// A registered connection; dropping it (the connection ended) takes it off the registry.
pub struct ConnectionHandle {
    registry: Weak<Connections>,
    id: ConnectionId,
    entry: Arc<Entry>,
}

impl std::fmt::Debug for ConnectionHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnectionHandle")
            .field("id", &self.id)
            .finish()
    }
}

impl Connections {
    /// Registers connection `id` (from [`crate::Broker::next_connection_id`], the id its
    /// messages carry as their publisher).
    pub fn register(
        self: &Arc<Self>,
        id: ConnectionId,
        meta: ConnectionMeta,
        outbox: &Arc<Outbox>,
    ) -> ConnectionHandle {
        let entry = Arc::new(Entry {
            meta,
            counters: ConnectionCounters::default(),
            sessions: Mutex::new(Vec::new()),
            outbox: Arc::downgrade(outbox),
        });
        self.entries.lock().insert(id, entry.clone());
        ConnectionHandle {
            registry: Arc::downgrade(self),
            id,
            entry,
        }
    }

    pub fn len(&self) -> usize {
        self.entries.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every connection, oldest first.
    pub fn list(&self) -> Vec<ConnectionStatus> {
        let entries = self.snapshot();
        entries.iter().map(|(id, e)| status(*id, e)).collect()
    }

    /// The entries, taken out from under the registry's lock: each connection's sessions are
    /// then locked without it.
    fn snapshot(&self) -> Vec<(ConnectionId, Arc<Entry>)> {
        self.entries
            .lock()
            .iter()
            .map(|(id, e)| (*id, e.clone()))
            .collect()
    }

    pub fn get(&self, id: ConnectionId) -> Option<ConnectionStatus> {
        let entry = self.entries.lock().get(&id).cloned()?;
        Some(status(id, &entry))
    }

    /// Asks connection `id` to close with `reason` (the peer is told, as for a broker
    /// shutdown). False if there is no such connection.
    pub fn close(&self, id: ConnectionId, reason: &str) -> bool {
        let outbox = self
            .entries
            .lock()
            .get(&id)
            .and_then(|e| e.outbox.upgrade());
        match outbox {
            Some(outbox) => {
                outbox.push(OutboxItem::Close {
                    reason: reason.to_owned(),
                });
                true
            }
            None => false,
        }
    }

    /// Which connection each session or channel owner belongs to, in one pass over the
    /// connections: for matching many consumers to their connections, which
    /// [`Connections::owner_connection`] would do with a pass over all of them each.
    /// Each connection's sessions are locked outside the registry's lock, as in `list`.
    pub fn owners(&self) -> HashMap<OwnerId, ConnectionId> {
        let entries = self.snapshot();
        let mut owners = HashMap::new();
        for (id, e) in entries {
            for s in e.sessions.lock().iter() {
                // The oldest connection first, as `owner_connection` finds it.
                owners.entry(s.owner).or_insert(id);
            }
        }
        owners
    }

    /// The connection a session or channel owner belongs to, if it is registered.
    pub fn owner_connection(&self, owner: OwnerId) -> Option<ConnectionId> {
        self.entries.lock().iter().find_map(|(id, e)| {
            e.sessions
                .lock()
                .iter()
                .any(|s| s.owner == owner)
                .then_some(*id)
        })
    }
}

fn status(id: ConnectionId, e: &Entry) -> ConnectionStatus {
    ConnectionStatus {
        id,
        meta: e.meta.clone(),
        traffic: e.counters.load(),
        sessions: e.sessions.lock().clone(),
    }
}

impl ConnectionHandle {
    pub fn id(&self) -> ConnectionId {
        self.id
    }

    /// Called by the connection's task after each batch: plain stores, no lock.
    pub fn store_traffic(&self, traffic: Traffic) {
        self.entry.counters.store(traffic);
    }

    /// The connection's sessions changed (opened, closed, consumers, modes).
    pub fn set_sessions(&self, sessions: Vec<SessionStatus>) {
        *self.entry.sessions.lock() = sessions;
    }
}

impl Drop for ConnectionHandle {
    fn drop(&mut self) {
        if let Some(registry) = self.registry.upgrade() {
            registry.entries.lock().remove(&self.id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(user: &str) -> ConnectionMeta {
        ConnectionMeta {
            peer: SocketAddr::from(([127, 0, 0, 1], 5000)),
            user: user.into(),
            protocol: "AMQP 0-9-1",
            tls: false,
            client_properties: vec![("product".into(), "test".into())],
            connected_at: 1,
            heartbeat: 60,
            frame_max: 131072,
            channel_max: 2047,
        }
    }

    #[test]
    fn connections_register_report_and_leave() {
        let registry = Arc::new(Connections::default());
        let outbox = Outbox::new();
        let a = registry.register(1, meta("alice"), &outbox);
        let b = registry.register(2, meta("bob"), &Outbox::new());
        a.store_traffic(Traffic {
            bytes_in: 10,
            bytes_out: 20,
            frames_in: 2,
            messages_in: 3,
            messages_out: 4,
            channels: 1,
        });
        a.set_sessions(vec![SessionStatus {
            channel: 1,
            owner: 77,
            consumers: 2,
            ..SessionStatus::default()
        }]);
        let list = registry.list();
        assert_eq!(list.len(), 2);
        assert_eq!(list[0].meta.user, "alice");
        assert_eq!(list[0].traffic.bytes_out, 20);
        assert_eq!(
            (list[0].traffic.messages_in, list[0].traffic.messages_out),
            (3, 4)
        );
        assert_eq!(list[0].sessions[0].consumers, 2);
        assert_eq!(registry.owner_connection(77), Some(a.id()));
        assert_eq!(
            registry.owners(),
            HashMap::from([(77, a.id())]),
            "b has no sessions"
        );
        drop(b);
        assert_eq!(registry.len(), 1);
        assert!(registry.get(a.id()).is_some());
    }

    #[test]
    fn closing_asks_the_connection_through_its_outbox() {
        let registry = Arc::new(Connections::default());
        let outbox = Outbox::new();
        let a = registry.register(3, meta("alice"), &outbox);
        assert!(registry.close(a.id(), "closed by an operator"));
        let mut items = Vec::new();
        outbox.take(&mut items);
        assert!(
            matches!(&items[..], [OutboxItem::Close { reason }] if reason == "closed by an operator")
        );
        assert!(!registry.close(a.id() + 100, "no such connection"));
        drop(outbox);
        assert!(!registry.close(a.id(), "its outbox is gone"));
    }
}
