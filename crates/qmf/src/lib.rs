//! ferryd's QMF v2 management agent, so that Apache Qpid's `qpid-config`, `qpid-stat` and
//! other QMF consoles work against ferryd as they do against qpidd.
//!
//! # How it works
//!
//! The agent is an in-process client of the core, with no protocol types in the core: on
//! [`start`] it declares qpidd's management exchanges `qmf.default.direct` (direct),
//! `qmf.default.topic` (topic) and `qpid.management` (topic, QMF v1), declares a queue of its
//! own (exclusive to it, bounded, hidden from the objects it reports), binds it to
//! `qmf.default.direct` under `broker` (every console's name for the broker's agent) and under
//! its own agent name, to `qmf.default.topic` under `console.request.agent_locate` and to
//! `qpid.management` under `broker`, and subscribes to it with its own
//! [`ferry_core::Outbox`]. A tokio task takes each request from the outbox, answers it from
//! the core's management snapshots, publishes the replies through [`Broker::publish`] as
//! messages with a 0-10 header to the request's reply-to exchange and key, and accepts the
//! request.
//!
//! - `wire`: requests out of core messages, replies into them;
//! - `query`: `_query_request` (by class or by object id), answered in batches;
//! - `method`: `_method_request` (`create`/`delete` of queues, exchanges and bindings,
//!   `queueMoveMessages`, `query` of a queue's message groups, `echo`, the getters; queue
//!   `purge` and `reroute`, these three with qpidd's header filter; connection `close`);
//! - `objects`: the QMF objects (broker, system, vhost, memory, queue, exchange, binding,
//!   connection, session, subscription) built from the core's snapshots;
//! - `schema`: class names, schema ids and object names, as qpidd forms them;
//! - `events`: QMF events (queue and exchange declare/delete, bind/unbind, queue thresholds)
//!   from the core's [`ferry_core::Observer`] hook, published to `qmf.default.topic`.
//!
//! Of QMF v1 (the binary protocol on `qpid.management`, module `v1`): what `qmf.console`
//! (qpid-tool, qpid-python's tests) needs before it turns to v2 (the broker id, packages,
//! classes and schemas), and the object queries and method calls of the older
//! `qpid.management` console API (`v1::content`), over the same objects and methods. v1's
//! unsolicited content and events (periodic object updates) are not sent.
//!
//! # Authority
//!
//! Methods run with the broker's authority, as qpidd's do when it has no ACL: the core's
//! declares and deletes take no user, and the request's message-properties `user-id` is not
//! verified by the 0-10 layer (a client may put any name there), so it is logged, never
//! trusted. So a loaded ACL's create/delete rules do not apply to management methods: who
//! may manage the broker is decided by who may publish to `qmf.default.direct` (and, for
//! v1 consoles, `qpid.management`), which the ACL controls (`acl deny all publish exchange
//! name=qmf.default.direct`, and likewise for `qpid.management`, after the rules allowing
//! administrators).
//!
//! # Bounds
//!
//! Requests are peer data: bodies over 64 KiB are dropped unanswered (as qpidd drops them),
//! decoding is the codec's (depth-limited, never panics) and a malformed body or a missing or
//! mistyped field is answered with an `_exception`. The agent's queue refuses requests
//! beyond 10 000 messages or 64 MiB waiting.

mod agent;
mod events;
mod method;
mod objects;
mod query;
mod schema;
mod v1;
mod value;
mod wire;

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use ferry_core::{Broker, BrokerError, Outbox};
use tokio::task::JoinHandle;

pub use agent::{DIRECT_EXCHANGE, TOPIC_EXCHANGE};
pub use schema::PACKAGE;

/// The vendor and product in the agent's name, `<vendor>:<product>:<instance>`. qpidd's
/// broker agent calls itself `apache.org:qpidd:<uuid>`; consoles look for the broker's agent
/// by that name (and events are routed by it), so ferry's agent uses the same.
pub const VENDOR: &str = "apache.org";
pub const PRODUCT: &str = "qpidd";

/// What ferryd tells the agent about itself, for the broker object.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AgentConfig {
    /// The AMQP port.
    pub port: u16,
    pub worker_threads: u16,
    pub max_connections: u32,
    pub listen_backlog: u16,
    pub data_dir: Option<String>,
    /// Reported as the broker's `version`.
    pub version: String,
    /// What `getLogLevel` answers.
    pub log_level: String,
}

/// Who the agent is: fixed for the broker's run.
#[derive(Debug, Clone)]
pub struct Identity {
    pub config: AgentConfig,
    /// The broker's id (qpidd's broker uuid: the vhost's federation tag, the agent instance).
    pub broker_id: [u8; 16],
    pub system_id: [u8; 16],
    pub started_ns: u64,
    /// `<vendor>:<product>:<instance>`.
    pub agent_name: String,
    pub instance: String,
    /// The agent's own queue.
    pub queue: String,
}

impl Identity {
    pub fn new(config: AgentConfig) -> Identity {
        let broker_id = random_id(1);
        let instance = objects::uuid_text(&broker_id);
        Identity {
            config,
            broker_id,
            system_id: random_id(2),
            started_ns: now_ns(),
            agent_name: format!("{VENDOR}:{PRODUCT}:{instance}"),
            queue: format!("qmf.agent.{instance}"),
            instance,
        }
    }
}

/// A running agent; dropping it stops the agent's task (its queue and exchanges stay).
#[derive(Debug)]
pub struct AgentHandle {
    task: JoinHandle<()>,
    identity: Arc<Identity>,
}

impl AgentHandle {
    pub fn identity(&self) -> &Identity {
        &self.identity
    }
}

impl Drop for AgentHandle {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Why the agent could not start.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// The exchanges or the queue could not be declared (an exchange of that name exists
    /// with another type, for instance).
    #[error("cannot set up the QMF agent: {0}")]
    Setup(#[from] BrokerError),
}

/// Starts the agent on the current tokio runtime.
pub fn start(broker: Arc<Broker>, config: AgentConfig) -> Result<AgentHandle, AgentError> {
    let identity = Arc::new(Identity::new(config));
    let events = Arc::new(events::EventQueue::default());
    let agent = agent::Agent {
        owner: broker.next_owner_id(),
        caller: method::Caller {
            owner: broker.next_owner_id(),
        },
        broker,
        identity: identity.clone(),
        outbox: Outbox::new(),
        events: None,
    };
    agent.setup()?;
    // After setup, so the agent's own plumbing raises no events.
    let observed = agent.broker.set_observer(events.clone());
    if !observed {
        tracing::warn!("the broker has an observer already: QMF events are not published");
    }
    let agent = agent::Agent {
        events: observed.then_some(events),
        ..agent
    };
    let task = tokio::spawn(agent.run());
    Ok(AgentHandle { task, identity })
}

/// Nanoseconds since the epoch, QMF's timestamps.
pub(crate) fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// A random (version 4) UUID from the standard library's randomly keyed hasher: ids only
/// need to differ between brokers and runs, not to be secret.
fn random_id(salt: u64) -> [u8; 16] {
    use std::collections::hash_map::RandomState;
    use std::hash::{BuildHasher, Hasher};
    let mut id = [0u8; 16];
    for (i, half) in id.chunks_mut(8).enumerate() {
        let mut h = RandomState::new().build_hasher();
        h.write_u64(now_ns());
        h.write_u32(std::process::id());
        h.write_u64(salt);
        h.write_usize(i);
        half.copy_from_slice(&h.finish().to_be_bytes());
    }
    id[6] = (id[6] & 0x0f) | 0x40;
    id[8] = (id[8] & 0x3f) | 0x80;
    id
}

#[cfg(test)]
mod tests;
