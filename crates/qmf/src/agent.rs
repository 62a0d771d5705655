//! The agent's task: its exchanges, queue and subscription in the core, and the loop that
//! takes requests from its outbox, answers them, and publishes the replies.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use ferry_amqp010::{Map, Value};
use ferry_core::{
    Broker, BrokerError, ConsumerSpec, ExchangeKind, ExchangeOptions, Message, Outbox, OutboxItem,
    OwnerId, Queue, QueueLimits, QueueOptions,
};
use tracing::{debug, info, warn};

use crate::events::{self, EventQueue};
use crate::method::{self, Caller};
use crate::objects::View;
use crate::value::text;
use crate::wire::{Reply, ReplyAddress, Request};
use crate::{now_ns, query, Identity};

/// Requests arrive here (qpidd's `ManagementDirectExchange`).
pub const DIRECT_EXCHANGE: &str = "qmf.default.direct";
/// Consoles' reply and event addresses live here (qpidd's `ManagementTopicExchange`).
pub const TOPIC_EXCHANGE: &str = "qmf.default.topic";
/// Where consoles look for agents.
const LOCATE_KEY: &str = "console.request.agent_locate";
/// QMF v1 requests arrive here (qpidd's `qpid.management`), under the key `broker`.
pub const V1_EXCHANGE: &str = "qpid.management";

/// Requests waiting for the agent: beyond this a publisher is refused (resource limit), so a
/// stalled agent cannot make its queue grow without bound.
const QUEUE_LIMITS: QueueLimits = QueueLimits {
    max_count: Some(10_000),
    max_size: Some(64 << 20),
    policy: ferry_core::LimitPolicy::Reject,
    scope: ferry_core::LimitScope::Depth,
};

/// How long to wait before setting up again when the agent's queue was deleted and setting
/// it up failed.
const RETRY: Duration = Duration::from_secs(1);

pub(crate) struct Agent {
    pub(crate) broker: Arc<Broker>,
    pub(crate) identity: Arc<Identity>,
    pub(crate) outbox: Arc<Outbox>,
    /// Owns the agent's exclusive queue.
    pub(crate) owner: OwnerId,
    /// What methods declare and delete for: not `owner`, so no method touches the agent's
    /// queue.
    pub(crate) caller: Caller,
    /// The core's events, to publish as QMF events; `None` when the broker has another
    /// observer.
    pub(crate) events: Option<Arc<EventQueue>>,
}

impl Agent {
    /// Declares the exchanges (if missing) and the agent's queue, binds it and subscribes.
    pub(crate) fn setup(&self) -> Result<(), BrokerError> {
        let b = &self.broker;
        for (name, kind) in [
            (DIRECT_EXCHANGE, ExchangeKind::Direct),
            (TOPIC_EXCHANGE, ExchangeKind::Topic),
            (V1_EXCHANGE, ExchangeKind::Topic),
        ] {
            b.declare_exchange(name, kind, ExchangeOptions::default(), false)?;
        }
        let queue_name = &self.identity.queue;
        let options = QueueOptions {
            exclusive_owner: Some(self.owner),
            limits: QUEUE_LIMITS,
            system: true,
            ..QueueOptions::default()
        };
        let (queue, _) = b.declare_queue(queue_name, options, false, self.owner)?;
        let none = ferry_core::Arguments::new();
        // "broker" is every console's alias for the broker's agent; the agent's own name is
        // its proper address; locate requests go to the topic exchange.
        b.bind(queue_name, DIRECT_EXCHANGE, "broker", &none)?;
        b.bind(
            queue_name,
            DIRECT_EXCHANGE,
            &self.identity.agent_name,
            &none,
        )?;
        b.bind(queue_name, TOPIC_EXCHANGE, LOCATE_KEY, &none)?;
        b.bind(queue_name, V1_EXCHANGE, "broker", &none)?;
        // Object queries and method calls of the old qpid.management API.
        b.bind(
            queue_name,
            V1_EXCHANGE,
            crate::v1::content::AGENT_KEY,
            &none,
        )?;
        subscribe(b, &queue, &self.outbox, self.owner)
    }

    pub(crate) async fn run(self) {
        let mut items = Vec::new();
        loop {
            let events = async {
                match &self.events {
                    Some(e) => e.notify.notified().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = self.outbox.notified() => self.take_requests(&mut items).await,
                _ = events => self.publish_events(),
            }
        }
    }

    async fn take_requests(&self, items: &mut Vec<OutboxItem>) {
        self.outbox.take(items);
        for item in items.drain(..) {
            match item {
                OutboxItem::Deliver(d) => {
                    self.handle(&d.message);
                    d.queue.accept(d.position);
                }
                OutboxItem::ConsumerCancelled { queue, .. } => {
                    warn!(%queue, "the QMF agent's queue was deleted; setting it up again");
                    while let Err(e) = self.setup() {
                        warn!("QMF agent setup failed, retrying: {e}");
                        tokio::time::sleep(RETRY).await;
                    }
                }
                OutboxItem::Durable | OutboxItem::Close { .. } => {}
            }
        }
    }

    fn publish_events(&self) {
        let Some(queue) = &self.events else { return };
        let (events, dropped) = queue.take();
        if dropped > 0 {
            warn!(dropped, "QMF events dropped: the agent fell behind");
        }
        // With no console bound to the topic exchange nobody would receive them: building
        // and routing them would only cost time and count as publishes.
        let listened = self
            .broker
            .exchange(TOPIC_EXCHANGE)
            .is_some_and(|e| e.binding_count() > 1); // the agent's own locate binding is one
        if !listened {
            return;
        }
        let now = now_ns();
        for event in &events {
            for (reply, to) in events::indications(&self.broker, &self.identity, event, now) {
                self.send(&reply, &to);
            }
        }
    }

    fn handle(&self, message: &Message) {
        let request = match Request::parse(message) {
            Ok(r) => r,
            Err(e) => {
                debug!("QMF agent ignored a message: {e}");
                return;
            }
        };
        debug!(
            opcode = %request.opcode,
            user = request.user_id.as_deref().unwrap_or(""),
            reply_to = %format_args!("{}/{}", request.reply.exchange, request.reply.routing_key),
            "QMF request"
        );
        if !request.qmf2 {
            if crate::v1::is_v1(&request.body) {
                self.answer_v1(&request);
            } else {
                debug!("QMF agent ignored a message that is neither QMF v1 nor v2");
            }
            return;
        }
        let replies = match request.opcode.as_str() {
            "_query_request" | "_method_request" => match request.map() {
                Ok(map) => self.answer(&request.opcode, &map),
                Err(e) => vec![Reply::exception(
                    method::status::EXCEPTION,
                    &format!("malformed request body: {e}"),
                )],
            },
            "_agent_locate_request" => vec![self.locate_response()],
            other => {
                debug!(opcode = other, "QMF opcode not supported; ignored");
                Vec::new()
            }
        };
        for reply in replies {
            self.send(&reply, &request.reply);
        }
    }

    fn answer(&self, opcode: &str, map: &Map) -> Vec<Reply> {
        let view = View {
            broker: &self.broker,
            identity: &self.identity,
            hidden_queue: &self.identity.queue,
            now_ns: now_ns(),
        };
        if opcode == "_query_request" {
            query::answer(&view, map)
        } else {
            vec![method::call(&view, &self.caller, map)]
        }
    }

    fn answer_v1(&self, request: &Request) {
        let key = &request.reply.routing_key;
        let view = View {
            broker: &self.broker,
            identity: &self.identity,
            hidden_queue: &self.identity.queue,
            now_ns: now_ns(),
        };
        let agent = V1Agent {
            view: &view,
            caller: &self.caller,
        };
        let body = request.body.clone();
        for body in crate::v1::answer(body, &self.identity.broker_id, &agent) {
            match crate::wire::v1_message(crate::v1::REPLY_EXCHANGE, key, body) {
                Ok(m) => publish(&self.broker, m),
                Err(e) => warn!("QMF v1 reply not encodable: {e}"),
            }
        }
    }

    /// `_agent_locate_response`: the agent's attributes, as qpidd's `handleLocateRequest`.
    fn locate_response(&self) -> Reply {
        let id = &self.identity;
        let mut values = Map::new();
        values.insert("_vendor", text(crate::VENDOR));
        values.insert("_product", text(crate::PRODUCT));
        values.insert("_instance", text(&id.instance));
        values.insert("_name", text(&id.agent_name));
        values.insert("_timestamp", Value::Uint64(now_ns()));
        values.insert("_heartbeat_interval", Value::Uint16(10));
        values.insert("_epoch", Value::Uint16(1));
        let mut map = Map::new();
        map.insert("_values", Value::Map(values));
        Reply::map("indication", "_agent_locate_response", map)
    }

    /// Publishes a reply through the core. A reply nobody can receive (no such exchange,
    /// a full queue) is dropped, as qpidd drops it.
    pub(crate) fn send(&self, reply: &Reply, to: &ReplyAddress) {
        let message = match reply.to_message(to, &self.identity.agent_name) {
            Ok(m) => m,
            Err(e) => {
                warn!("QMF reply not encodable: {e}");
                return;
            }
        };
        publish(&self.broker, message);
    }
}

pub(crate) fn publish(broker: &Broker, message: Message) {
    let exchange_name = String::from_utf8_lossy(message.exchange()).into_owned();
    let Some(exchange) = broker.exchange(&exchange_name) else {
        debug!(exchange = %exchange_name, "QMF reply dropped: no such exchange");
        return;
    };
    if let Err(e) = broker.publish(&exchange, message) {
        debug!(exchange = %exchange_name, "QMF reply dropped: {e}");
    }
}

fn subscribe(
    broker: &Broker,
    queue: &Arc<Queue>,
    outbox: &Arc<Outbox>,
    owner: OwnerId,
) -> Result<(), BrokerError> {
    let id = broker.next_consumer_id();
    queue.subscribe(ConsumerSpec {
        id,
        outbox: outbox.clone(),
        owner,
        // Not a client connection: nothing it publishes is kept out of no-local queues.
        connection: 0,
        tag: Bytes::from_static(b"qmf-agent"),
        acquire: true,
        exclusive: true,
        window: None,
        filter: None,
        ack_timeout: None,
    })?;
    // The outbox's own room bounds what is handed over at once.
    queue.add_credit(id, u32::MAX, u32::MAX)?;
    info!(queue = queue.name(), "QMF agent listening");
    Ok(())
}

/// The objects and methods v1 object queries and method calls reach: the v2 agent's.
struct V1Agent<'a> {
    view: &'a View<'a>,
    caller: &'a method::Caller,
}

impl crate::v1::content::Agent for V1Agent<'_> {
    fn objects(&self, class: crate::schema::Class) -> Vec<crate::objects::QmfObject> {
        self.view.objects(class)
    }

    fn call(&self, object_name: &str, method: &str, args: &Map) -> Result<Map, (u32, String)> {
        method::invoke(self.view, self.caller, object_name, method, args)
            .map_err(|f| (f.code, f.text))
    }
}
