//! QMF v2 over a real 0-10 connection to ferryd --mgmt-enable yes: what qpid-config and
//! qpid-stat send (interop/qpid-tools runs the tools themselves).

mod common;

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use common::Ferryd;
use ferry_amqp010::codec::Reader;
use ferry_amqp010::{List, Map, Str, Value};
use ferry_client::{
    ConnectOptions, Connection, Delivery, OutgoingMessage, QueueDeclareOptions, Session,
    SubscribeOptions, Subscription,
};

/// A console: a reply queue bound to qmf.default.topic, as BrokerAgent's reply address
/// `qmf.default.topic/direct.<uuid>` makes one.
struct Console {
    session: Session,
    replies: Subscription,
    next: u32,
}

fn text(s: &str) -> Value {
    Value::Str16(Str::from(s))
}

fn read_text(v: &Value) -> Option<String> {
    match v {
        Value::Str8(s) | Value::Str16(s) => Some(s.to_str_lossy().into_owned()),
        Value::Vbin8(b) | Value::Vbin16(b) | Value::Vbin32(b) => {
            Some(String::from_utf8_lossy(b).into_owned())
        }
        _ => None,
    }
}

fn encode(map: &Map) -> Bytes {
    let mut b = BytesMut::new();
    map.encode(&mut b).unwrap();
    b.freeze()
}

fn content_type(d: &Delivery) -> String {
    d.header
        .properties
        .as_ref()
        .and_then(|p| p.content_type.as_ref())
        .map(|c| c.to_string())
        .unwrap_or_default()
}

fn opcode(d: &Delivery) -> String {
    d.application_header("qmf.opcode")
        .and_then(read_text)
        .unwrap_or_default()
}

fn as_map(d: &Delivery) -> Map {
    assert_eq!(content_type(d), "amqp/map");
    Map::decode(&mut Reader::new(d.body.clone())).unwrap()
}

fn objects(replies: &[Delivery]) -> Vec<Map> {
    replies
        .iter()
        .flat_map(|d| {
            assert_eq!(opcode(d), "_query_response");
            assert_eq!(content_type(d), "amqp/list");
            List::decode(&mut Reader::new(d.body.clone())).unwrap().0
        })
        .map(|v| match v {
            Value::Map(m) => m,
            other => panic!("an object is a map: {other:?}"),
        })
        .collect()
}

fn name_of(object: &Map) -> String {
    match object.get("_object_id") {
        Some(Value::Map(oid)) => oid.get("_object_name").and_then(read_text).unwrap(),
        other => panic!("no _object_id: {other:?}"),
    }
}

fn values(object: &Map) -> &Map {
    match object.get("_values") {
        Some(Value::Map(v)) => v,
        other => panic!("no _values: {other:?}"),
    }
}

impl Console {
    async fn open(broker: &Ferryd) -> (Connection, Console) {
        let conn = Connection::connect(broker.addr, ConnectOptions::default())
            .await
            .unwrap();
        let session = conn.session().await.unwrap();
        let opts = QueueDeclareOptions {
            exclusive: true,
            auto_delete: true,
            ..QueueDeclareOptions::default()
        };
        session
            .queue_declare("console-replies", opts)
            .await
            .unwrap();
        session
            .exchange_bind("console-replies", "qmf.default.topic", "direct.it", None)
            .await
            .unwrap();
        let replies = session
            .subscribe("console-replies", "r", SubscribeOptions::default())
            .await
            .unwrap();
        (
            conn,
            Console {
                session,
                replies,
                next: 0,
            },
        )
    }

    async fn send_raw(&mut self, opcode: &str, body: Bytes) -> Bytes {
        self.next += 1;
        let correlation = Bytes::from(self.next.to_string());
        let mut b = OutgoingMessage::builder()
            .routing_key("broker")
            .reply_to("qmf.default.topic", "direct.it")
            .correlation_id(correlation.clone())
            .content_type("amqp/map")
            .header("method", text("request"))
            .header("qmf.opcode", text(opcode))
            .body(body);
        b.message_properties().app_id = Some(Bytes::from_static(b"qmf2"));
        self.session
            .transfer_sync("qmf.default.direct", &b.build().unwrap())
            .await
            .unwrap();
        correlation
    }

    /// Sends a request and collects its replies: up to the first without `partial`.
    async fn request(&mut self, opcode: &str, body: &Map) -> Vec<Delivery> {
        let correlation = self.send_raw(opcode, encode(body)).await;
        self.replies(&correlation).await
    }

    async fn replies(&mut self, correlation: &Bytes) -> Vec<Delivery> {
        let mut out = Vec::new();
        loop {
            let d = tokio::time::timeout(Duration::from_secs(5), self.replies.next())
                .await
                .expect("a reply within 5 s")
                .expect("subscription open");
            let p = d.header.properties.as_ref().expect("message-properties");
            assert_eq!(p.app_id.as_deref(), Some(b"qmf2".as_slice()));
            assert_eq!(p.correlation_id.as_ref(), Some(correlation));
            let partial = d.application_header("partial").is_some();
            out.push(d);
            if !partial {
                return out;
            }
        }
    }

    async fn class_query(&mut self, class: &str) -> Vec<Map> {
        let mut schema = Map::new();
        schema.insert("_class_name", text(class));
        let mut q = Map::new();
        q.insert("_what", text("OBJECT"));
        q.insert("_schema_id", Value::Map(schema));
        objects(&self.request("_query_request", &q).await)
    }

    async fn get(&mut self, object_name: &str) -> Option<Map> {
        let mut oid = Map::new();
        oid.insert("_object_name", text(object_name));
        let mut q = Map::new();
        q.insert("_what", text("OBJECT"));
        q.insert("_object_id", Value::Map(oid));
        let mut found = objects(&self.request("_query_request", &q).await);
        assert!(found.len() <= 1);
        found.pop()
    }

    /// A broker method: Ok(output arguments) or Err((error_code, error_text)).
    async fn method(&mut self, name: &str, args: Map) -> Result<Map, (u32, String)> {
        let mut oid = Map::new();
        oid.insert(
            "_object_name",
            text("org.apache.qpid.broker:broker:amqp-broker"),
        );
        let mut req = Map::new();
        req.insert("_object_id", Value::Map(oid));
        req.insert("_method_name", text(name));
        req.insert("_arguments", Value::Map(args));
        let replies = self.request("_method_request", &req).await;
        assert_eq!(replies.len(), 1);
        let body = as_map(&replies[0]);
        match opcode(&replies[0]).as_str() {
            "_method_response" => match body.get("_arguments") {
                Some(Value::Map(m)) => Ok(m.clone()),
                other => panic!("no _arguments: {other:?}"),
            },
            "_exception" => {
                let Some(Value::Map(v)) = body.get("_values") else {
                    panic!("no _values")
                };
                let code = match v.get("error_code") {
                    Some(Value::Uint32(c)) => *c,
                    other => panic!("error_code {other:?}"),
                };
                Err((code, v.get("error_text").and_then(read_text).unwrap()))
            }
            other => panic!("unexpected opcode {other}"),
        }
    }
}

fn create(kind: &str, name: &str, properties: Map) -> Map {
    let mut m = Map::new();
    m.insert("type", text(kind));
    m.insert("name", text(name));
    m.insert("properties", Value::Map(properties));
    m.insert("strict", Value::Bool(true));
    m
}

#[tokio::test]
async fn a_console_creates_lists_binds_and_deletes() {
    let broker = Ferryd::start_with(&["--mgmt-enable", "yes", "--mgmt-port", "0"]);
    let (_conn, mut c) = Console::open(&broker).await;

    let mut props = Map::new();
    props.insert("qpid.max_count", Value::Int64(100));
    props.insert("durable", Value::Int64(1));
    assert_eq!(
        c.method("create", create("queue", "mq", props)).await,
        Ok(Map::new())
    );
    let info = c.session.queue_query("mq").await.unwrap();
    assert_eq!(info.queue.map(|q| q.to_string()), Some("mq".into()));
    assert!(info.durable);
    let (code, error) = c
        .method("create", create("queue", "mq", Map::new()))
        .await
        .unwrap_err();
    assert_eq!((code, error.as_str()), (7, "object already exists: mq"));

    let mut props = Map::new();
    props.insert("exchange-type", text("topic"));
    c.method("create", create("exchange", "mx", props))
        .await
        .unwrap();
    c.method("create", create("binding", "mx/mq/news.#", Map::new()))
        .await
        .unwrap();
    let m = OutgoingMessage::builder()
        .routing_key("news.today")
        .body("hello")
        .build()
        .unwrap();
    c.session.transfer_sync("mx", &m).await.unwrap();

    let q = c
        .get("org.apache.qpid.broker:queue:mq")
        .await
        .expect("the queue by id");
    let v = values(&q);
    assert_eq!(v.get("msgDepth"), Some(&Value::Uint64(1)));
    assert_eq!(v.get("msgTotalEnqueues"), Some(&Value::Uint64(1)));
    assert_eq!(v.get("bindingCount"), Some(&Value::Uint32(2)));
    assert_eq!(v.get("durable"), Some(&Value::Bool(true)));

    let queues = c.class_query("queue").await;
    let names: Vec<String> = queues.iter().map(name_of).collect();
    assert!(names.contains(&"org.apache.qpid.broker:queue:mq".to_owned()));
    assert!(names.contains(&"org.apache.qpid.broker:queue:console-replies".to_owned()));
    assert!(!names.iter().any(|n| n.contains("qmf.agent")), "{names:?}");

    let exchanges = c.class_query("exchange").await;
    let mx = exchanges
        .iter()
        .find(|e| name_of(e) == "org.apache.qpid.broker:exchange:mx")
        .expect("mx listed");
    assert_eq!(values(mx).get("msgReceives"), Some(&Value::Uint64(1)));
    assert_eq!(
        values(mx).get("type").and_then(read_text).as_deref(),
        Some("topic")
    );

    let bindings = c.class_query("binding").await;
    assert!(bindings.iter().any(|b| name_of(b)
        == "org.apache.qpid.broker:binding:org.apache.qpid.broker:exchange:mx,\
            org.apache.qpid.broker:queue:mq,news.#"));

    let broker_objects = c.class_query("broker").await;
    assert_eq!(broker_objects.len(), 1);
    let port = values(&broker_objects[0]).get("port").cloned();
    assert_eq!(port, Some(Value::Uint16(broker.addr.port())));

    let connections = c.class_query("connection").await;
    assert!(!connections.is_empty());
    assert!(connections
        .iter()
        .all(|c| values(c).get("address").and_then(read_text).is_some()));
    assert!(
        c.class_query("link").await.is_empty(),
        "no federation links"
    );

    let mut delete = Map::new();
    delete.insert("type", text("binding"));
    delete.insert("name", text("mx/mq/news.#"));
    c.method("delete", delete).await.unwrap();
    let mut delete = Map::new();
    delete.insert("type", text("queue"));
    delete.insert("name", text("mq"));
    c.method("delete", delete).await.unwrap();
    let mut delete = Map::new();
    delete.insert("type", text("exchange"));
    delete.insert("name", text("mx"));
    c.method("delete", delete).await.unwrap();
    assert!(c.get("org.apache.qpid.broker:queue:mq").await.is_none());
    assert!(c.session.exchange_query("mx").await.unwrap().not_found);
}

#[tokio::test]
async fn malformed_requests_are_answered_and_the_agent_carries_on() {
    let broker = Ferryd::start_with(&["--mgmt-enable", "yes", "--mgmt-port", "0"]);
    let (_conn, mut c) = Console::open(&broker).await;
    let correlation = c
        .send_raw(
            "_query_request",
            Bytes::from_static(b"\x00\x00\xff\xffjunk"),
        )
        .await;
    let replies = c.replies(&correlation).await;
    assert_eq!(opcode(&replies[0]), "_exception");
    let mut nested = Map::new();
    nested.insert("_what", Value::Map(Map::new()));
    let replies = c.request("_query_request", &nested).await;
    assert_eq!(opcode(&replies[0]), "_exception");
    assert_eq!(
        c.method("no-such-method", Map::new()).await.unwrap_err().0,
        2
    );
    assert_eq!(c.class_query("broker").await.len(), 1);
}

#[tokio::test]
async fn without_management_there_are_no_qmf_exchanges() {
    let broker = Ferryd::start();
    let conn = Connection::connect(broker.addr, ConnectOptions::default())
        .await
        .unwrap();
    let s = conn.session().await.unwrap();
    assert!(
        s.exchange_query("qmf.default.direct")
            .await
            .unwrap()
            .not_found
    );
    assert!(
        s.exchange_query("qmf.default.topic")
            .await
            .unwrap()
            .not_found
    );
}
