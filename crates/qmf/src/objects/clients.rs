//! Connections, their sessions, and subscriptions.

use std::collections::HashMap;

use ferry_amqp010::{Map, Str};
use ferry_core::{ConnectionStatus, OwnerId, SessionStatus};

use super::{QmfObject, Values, View};
use crate::schema::{subscription_key, vhost_object_name, Class};
use crate::value::text;

/// A connection's key and `address`: the peer's address. (qpidd's is
/// `<local>-<peer>`; the core does not record the local end, and the peer alone is unique
/// among open connections.)
pub(crate) fn address(c: &ConnectionStatus) -> String {
    c.meta.peer.to_string()
}

/// A session's key and `name`: the 0-10 session name. 0-9-1 channels have none, so they
/// are named after their connection and channel number.
fn session_name(c: &ConnectionStatus, s: &SessionStatus) -> String {
    if s.name.is_empty() {
        format!("{}/{}", address(c), s.channel)
    } else {
        s.name.clone()
    }
}

fn client_property<'a>(c: &'a ConnectionStatus, key: &str) -> Option<&'a str> {
    c.meta
        .client_properties
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

pub(super) fn connections(view: &View) -> Vec<QmfObject> {
    let vhost = vhost_object_name();
    view.broker
        .connections()
        .list()
        .into_iter()
        .map(|c| {
            let address = address(&c);
            // Collected: a client's properties are its own, as many as a frame holds.
            let props: Map = c
                .meta
                .client_properties
                .iter()
                .map(|(k, v)| (Str::from(k.as_str()), text(v)))
                .collect();
            let mut v = Values::default()
                .reference("vhostRef", &vhost)
                .text("address", &address)
                .bool("incoming", true)
                .bool("SystemConnection", false)
                .bool("userProxyAuth", false)
                .bool("federationLink", false)
                .text("authIdentity", &c.meta.user)
                .bool("shadow", false)
                // The mechanism is not recorded with the connection; qpid-stat shows "-".
                .text("saslMechanism", "")
                .u16("saslSsf", 0)
                .value("remoteProperties", ferry_amqp010::Value::Map(props))
                .text("protocol", c.meta.protocol)
                .bool("closing", false)
                .u64("framesFromClient", c.traffic.frames_in)
                .u64("bytesFromClient", c.traffic.bytes_in)
                .u64("bytesToClient", c.traffic.bytes_out)
                .u64("msgsFromClient", c.traffic.messages_in)
                .u64("msgsToClient", c.traffic.messages_out)
                // Frames out are not counted: writes are batched, not framed one by one.
                .zeros(&["framesToClient"]);
            // Qpid clients describe their process in these client properties.
            if let Some(name) = client_property(&c, "qpid.client_process") {
                v = v.text("remoteProcessName", name);
            }
            for (property, key) in [
                ("qpid.client_pid", "remotePid"),
                ("qpid.client_ppid", "remoteParentPid"),
            ] {
                if let Some(pid) = client_property(&c, property).and_then(|p| p.parse().ok()) {
                    v = v.u32(key, pid);
                }
            }
            let created = c.meta.connected_at.saturating_mul(1_000_000);
            view.object(Class::Connection, address, v.build(), created)
        })
        .collect()
}

pub(super) fn sessions(view: &View) -> Vec<QmfObject> {
    let vhost = vhost_object_name();
    let mut out = Vec::new();
    for c in view.broker.connections().list() {
        let connection = Class::Connection.object_name(&address(&c));
        for s in &c.sessions {
            let name = session_name(&c, s);
            let v = Values::default()
                .reference("vhostRef", &vhost)
                .text("name", &name)
                .text("fullName", &name)
                .u16("channelId", s.channel)
                .reference("connectionRef", &connection)
                .u32("detachedLifespan", 0)
                .bool("attached", true)
                .u64("unackedMessages", s.unacked)
                .zeros(&["TxnStarts", "TxnCommits", "TxnRejects"])
                .u32("TxnCount", 0)
                .u32("clientCredit", 0)
                .u32("framesOutstanding", 0);
            out.push(view.object(Class::Session, name, v.build(), 0));
        }
    }
    out
}

pub(super) fn subscriptions(view: &View) -> Vec<QmfObject> {
    // Consumers name their session by owner id; 0-9-1 channels share their connection's.
    let mut sessions: HashMap<OwnerId, String> = HashMap::new();
    for c in view.broker.connections().list() {
        for s in &c.sessions {
            sessions
                .entry(s.owner)
                .or_insert_with(|| session_name(&c, s));
        }
    }
    view.broker
        .consumer_entries()
        .into_iter()
        .filter(|e| e.queue != view.hidden_queue)
        .filter_map(|e| {
            let session = sessions.get(&e.consumer.owner)?;
            let c = &e.consumer;
            // What Qpid JMS 0-x sends its selector as.
            let mut arguments = Map::new();
            if let Some(selector) = &c.selector {
                arguments.insert("x-filter-jms-selector", text(selector));
            }
            let v = Values::default()
                .reference("sessionRef", &Class::Session.object_name(session))
                .reference("queueRef", &Class::Queue.object_name(&e.queue))
                .text("name", &c.tag)
                .bool("browsing", !c.acquire)
                // Accept mode and flow mode are the protocol layer's, not recorded in the
                // core; these are the 0-10 defaults qpid clients use.
                .bool("acknowledged", true)
                .bool("exclusive", c.exclusive)
                .text("creditMode", "WINDOW")
                .value("arguments", ferry_amqp010::Value::Map(arguments))
                .u64("delivered", 0);
            let key = subscription_key(session, &e.queue, &c.tag);
            Some(view.object(Class::Subscription, key, v.build(), 0))
        })
        .collect()
}
