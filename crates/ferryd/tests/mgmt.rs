//! The management HTTP API (RabbitMQ's paths and shapes) and /metrics against a real ferryd
//! started with `--mgmt-enable yes --mgmt-port 0`: each endpoint group, logins and the ACL,
//! malformed requests, AMQP traffic of both protocols in the counters, rates.

mod common;

use std::time::{Duration, Instant};

use common::http::{seg, Http, Reply};
use common::raw091::Raw091;
use common::Ferryd;
use ferry_amqp091::{BasicProperties, FieldValue, Method, ShortStr};
use serde_json::{json, Value};

fn http(b: &Ferryd) -> Http {
    Http::new(b.mgmt_addr.expect("management address"))
}

/// Polls `f` until it holds (connections report some numbers once a second).
fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if f() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("timed out waiting for {what}");
}

fn names(list: &Value) -> Vec<String> {
    list.as_array()
        .expect("a list")
        .iter()
        .map(|i| i["name"].as_str().unwrap_or_default().to_owned())
        .collect()
}

fn is_rabbitmq_error(r: &Reply) -> bool {
    let v = r.json();
    v["error"].is_string() && v["reason"].is_string()
}

#[test]
fn overview_nodes_users_vhosts_and_whoami() {
    let b = Ferryd::start_mgmt(&[]);
    let h = http(&b);
    let o = h.get("/api/overview").expect(200).json();
    assert_eq!(o["product_name"], "Ferry");
    assert_eq!(o["management_version"], "3.10.0");
    for key in ["message_stats", "queue_totals", "object_totals"] {
        assert!(o[key].is_object(), "{key} in {o}");
    }
    // The default exchange, amq.direct/fanout/topic/match, and the QMF agent's
    // qmf.default.direct/topic and qpid.management (management is on).
    assert_eq!(o["object_totals"]["exchanges"], 8);
    assert_eq!(o["queue_totals"]["messages"], 0);
    assert_eq!(o["message_stats"]["publish_details"]["rate"], 0.0);
    let listeners = o["listeners"].as_array().unwrap();
    assert!(listeners
        .iter()
        .any(|l| l["protocol"] == "amqp" && l["port"] == b.addr.port()));

    let nodes = h.get("/api/nodes").expect(200).json();
    let node = &nodes[0];
    assert_eq!(node["name"], o["node"]);
    assert!(node["mem_used"].as_u64().unwrap() > 0);
    assert!(node["running"].as_bool().unwrap());
    // --auth no: no SCRAM (it needs a record), and no TLS for EXTERNAL.
    let enabled: Vec<(&str, bool)> = node["auth_mechanisms"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["name"].as_str().unwrap(), m["enabled"].as_bool().unwrap()))
        .collect();
    assert_eq!(
        enabled,
        [
            ("EXTERNAL", false),
            ("SCRAM-SHA-256", false),
            ("PLAIN", true),
            ("AMQPLAIN", true),
            ("ANONYMOUS", true)
        ]
    );
    let name = node["name"].as_str().unwrap();
    h.get(&format!("/api/nodes/{}", seg(name))).expect(200);
    h.get("/api/nodes/rabbit@elsewhere").expect(404);

    // --auth no: anyone, and nobody is listed, or can be added.
    assert_eq!(h.get("/api/users").expect(200).json(), json!([]));
    let refused = h.put("/api/users/alice", &json!({"password": "p"}));
    assert_eq!(refused.status, 400);
    assert!(refused.text().contains("--auth no"), "{}", refused.text());
    assert_eq!(h.get("/api/whoami").expect(200).json()["name"], "guest");
    let vhosts = h.get("/api/vhosts").expect(200).json();
    assert_eq!(names(&vhosts), ["/"]);
    h.get("/api/vhosts/%2F").expect(200);
    h.get("/api/vhosts/other").expect(404);
    assert_eq!(
        h.get("/api/aliveness-test/%2F").expect(200).json()["status"],
        "ok"
    );
    assert_eq!(
        h.get("/api/healthchecks/node").expect(200).json()["status"],
        "ok"
    );
    h.get("/api/health/checks/alarms").expect(200);
    assert_eq!(
        h.get("/api/cluster-name").expect(200).json()["name"],
        o["cluster_name"]
    );
    // A trailing slash is ignored, as RabbitMQ's server ignores it (AMQPStorm sends one),
    // query string and all.
    assert_eq!(
        h.get("/api/healthchecks/node/").expect(200).json()["status"],
        "ok"
    );
    assert_eq!(names(&h.get("/api/vhosts/").expect(200).json()), ["/"]);
    h.get("/api/vhosts//").expect(404);
    let page = h.get("/api/queues/?page=1&page_size=10").expect(200).json();
    assert_eq!(page["page"], 1, "{page}");
    h.get("/api/").expect(404);
    let (status, _) = b.terminate();
    assert!(status.success());
}

#[test]
fn queues_are_declared_shown_purged_and_deleted() {
    let b = Ferryd::start_mgmt(&[]);
    let h = http(&b);
    let args =
        json!({"durable": false, "arguments": {"x-max-length": 100, "x-message-ttl": 60000}});
    h.put("/api/queues/%2F/orders", &args).expect(201);
    // The same again is fine; anything else is not.
    h.put("/api/queues/%2F/orders", &args).expect(204);
    let r = h.put("/api/queues/%2F/orders", &json!({"durable": true}));
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(r.json()["reason"]
        .as_str()
        .unwrap()
        .contains("inequivalent"));
    let r = h.put("/api/queues/%2F/amq.mine", &json!({}));
    assert_eq!(r.status, 403, "reserved names: {}", r.text());
    let r = h.put(
        "/api/queues/%2F/bad-args",
        &json!({"arguments": {"x-max-length": "many"}}),
    );
    assert_eq!(r.status, 400);

    for i in 0..3 {
        let body = json!({"routing_key": "orders", "payload": format!("m{i}"), "payload_encoding": "string", "properties": {}});
        let r = h
            .post("/api/exchanges/%2F/amq.default/publish", &body)
            .expect(200);
        assert_eq!(r.json(), json!({"routed": true}));
    }
    let q = h.get("/api/queues/%2F/orders").expect(200).json();
    assert_eq!(q["name"], "orders");
    assert_eq!(q["vhost"], "/");
    assert_eq!(q["durable"], false);
    assert_eq!(q["auto_delete"], false);
    assert_eq!(q["exclusive"], false);
    assert_eq!(q["arguments"]["x-max-length"], 100);
    assert_eq!(q["messages"], 3);
    assert_eq!(q["messages_ready"], 3);
    assert_eq!(q["messages_unacknowledged"], 0);
    // Ferry counts a message's encoded properties as well as its body.
    assert!(q["message_bytes"].as_u64().unwrap() >= 6);
    assert_eq!(q["consumers"], 0);
    assert_eq!(q["state"], "running");
    assert_eq!(q["message_stats"]["publish"], 3);
    assert!(q["message_stats"]["publish_details"]["rate"].is_number());
    assert_eq!(q["consumer_details"], json!([]));

    let list = h.get("/api/queues").expect(200).json();
    assert_eq!(names(&list), ["orders"]);
    assert_eq!(h.get("/api/queues/%2F").expect(200).json(), list);
    let bindings = h.get("/api/queues/%2F/orders/bindings").expect(200).json();
    assert_eq!(bindings[0]["source"], "");
    assert_eq!(bindings[0]["routing_key"], "orders");

    let r = h.delete("/api/queues/%2F/orders?if-empty=true");
    assert_eq!(r.status, 400, "not empty: {}", r.text());
    h.delete("/api/queues/%2F/orders/contents").expect(204);
    assert_eq!(h.get("/api/queues/%2F/orders").json()["messages"], 0);
    h.delete("/api/queues/%2F/orders?if-empty=true&if-unused=true")
        .expect(204);
    h.get("/api/queues/%2F/orders").expect(404);
    h.delete("/api/queues/%2F/orders").expect(404);
}

#[test]
fn exchanges_and_bindings_of_both_kinds() {
    let b = Ferryd::start_mgmt(&[]);
    let h = http(&b);
    h.put(
        "/api/exchanges/%2F/events",
        &json!({"type": "topic", "durable": false}),
    )
    .expect(201);
    h.put(
        "/api/exchanges/%2F/events",
        &json!({"type": "topic", "durable": false}),
    )
    .expect(204);
    let r = h.put(
        "/api/exchanges/%2F/events",
        &json!({"type": "fanout", "durable": false}),
    );
    assert_eq!(r.status, 400, "{}", r.text());
    let r = h.put(
        "/api/exchanges/%2F/odd",
        &json!({"type": "x-delayed-message"}),
    );
    assert_eq!(r.status, 400);
    h.put(
        "/api/exchanges/%2F/audit",
        &json!({"type": "fanout", "durable": false, "arguments": {"alternate-exchange": "amq.fanout"}}),
    )
    .expect(201);
    h.put("/api/queues/%2F/eq", &json!({"durable": false}))
        .expect(201);

    let r = h
        .post(
            "/api/bindings/%2F/e/events/q/eq",
            &json!({"routing_key": "order.*", "arguments": {}}),
        )
        .expect(201);
    // Quoted as RabbitMQ quotes it (quote_plus: `*` is not kept).
    assert_eq!(r.header("location"), Some("order.%2A"));
    h.post(
        "/api/bindings/%2F/e/events/e/audit",
        &json!({"routing_key": "#"}),
    )
    .expect(201);
    // Exchange-to-exchange bindings too.
    let audit_with_args = h
        .post(
            "/api/bindings/%2F/e/events/e/audit",
            &json!({"routing_key": "#", "arguments": {"k": "v"}}),
        )
        .expect(201);
    let audit_props = audit_with_args.header("location").unwrap().to_owned();
    h.post(
        "/api/bindings/%2F/e/events/q/eq",
        &json!({"routing_key": "x", "arguments": {"k": "v"}}),
    )
    .expect(201);
    // The same key with other arguments is another binding, as in RabbitMQ.
    let other = h
        .post(
            "/api/bindings/%2F/e/events/q/eq",
            &json!({"routing_key": "x", "arguments": {"k": "w"}}),
        )
        .expect(201);
    let other_props = other.header("location").unwrap().to_owned();
    h.post("/api/bindings/%2F/e/nothere/q/eq", &json!({}))
        .expect(404);
    h.post("/api/bindings/%2F/e/amq.default/q/eq", &json!({}))
        .expect(403);

    let all = h.get("/api/bindings").expect(200).json();
    let ours: Vec<&Value> = all
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["source"] == "events")
        .collect();
    assert_eq!(ours.len(), 5, "{all}");
    let between = h.get("/api/bindings/%2F/e/events/q/eq").expect(200).json();
    assert_eq!(between.as_array().unwrap().len(), 3);
    let with_args = between
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["routing_key"] == "x" && b["arguments"]["k"] == "v")
        .unwrap();
    let props = with_args["properties_key"].as_str().unwrap().to_owned();
    assert!(props.starts_with("x~"), "{props}");
    assert_eq!(with_args["destination_type"], "queue");
    h.get(&format!("/api/bindings/%2F/e/events/q/eq/{}", seg(&props)))
        .expect(200);
    let source = h
        .get("/api/exchanges/%2F/events/bindings/source")
        .expect(200)
        .json();
    assert_eq!(source.as_array().unwrap().len(), 5);
    let dest = h
        .get("/api/exchanges/%2F/audit/bindings/destination")
        .expect(200)
        .json();
    assert_eq!(dest[0]["destination_type"], "exchange");
    assert_eq!(dest[0]["source"], "events");

    // Routing goes through both bindings.
    let publish = |key: &str| {
        h.post(
            "/api/exchanges/%2F/events/publish",
            &json!({"routing_key": key, "payload": "e", "payload_encoding": "string", "properties": {}}),
        )
        .expect(200)
        .json()["routed"]
            .clone()
    };
    assert_eq!(publish("order.new"), json!(true));
    let e = h.get("/api/exchanges/%2F/events").expect(200).json();
    assert_eq!(e["type"], "topic");
    assert_eq!(e["message_stats"]["publish_in"], 1);
    assert_eq!(e["message_stats"]["publish_out"], 1);
    let d = h.get("/api/exchanges/%2F/amq.default").expect(200).json();
    assert_eq!(d["name"], "");
    let list = h.get("/api/exchanges").expect(200).json();
    assert!(names(&list).contains(&"events".to_owned()));
    assert!(names(&list).contains(&"".to_owned()));

    // Unbinding by properties key; a missing binding is a 404.
    h.delete(&format!("/api/bindings/%2F/e/events/q/eq/{}", seg(&props)))
        .expect(204);
    h.delete(&format!("/api/bindings/%2F/e/events/q/eq/{}", seg(&props)))
        .expect(404);
    // Only that one: the key's other binding still routes.
    assert_ne!(other_props, props);
    assert_eq!(publish("x"), json!(true));
    h.delete(&format!(
        "/api/bindings/%2F/e/events/q/eq/{}",
        seg(&other_props)
    ))
    .expect(204);
    assert_eq!(publish("x"), json!(false));
    h.delete("/api/bindings/%2F/e/events/e/audit/%23")
        .expect(204);
    let audit = |h: &Http| {
        let between = h.get("/api/bindings/%2F/e/events/e/audit").expect(200);
        between.json().as_array().unwrap().len()
    };
    assert_eq!(audit(&h), 1, "the other binding under '#' stays");
    h.delete(&format!(
        "/api/bindings/%2F/e/events/e/audit/{}",
        seg(&audit_props)
    ))
    .expect(204);
    assert_eq!(audit(&h), 0);
    h.delete("/api/bindings/%2F/e/events/q/eq/order.*")
        .expect(204);
    assert_eq!(publish("order.new"), json!(false));

    let r = h.delete("/api/exchanges/%2F/amq.direct");
    assert_eq!(r.status, 403, "{}", r.text());
    h.delete("/api/exchanges/%2F/events?if-unused=true")
        .expect(204);
    h.delete("/api/exchanges/%2F/events").expect(404);
    h.get("/api/exchanges/%2F/events").expect(404);
}

#[test]
fn bindings_under_keys_empty_and_tilde_are_told_apart() {
    let b = Ferryd::start_mgmt(&[]);
    let h = http(&b);
    h.put("/api/queues/%2F/pk", &json!({"durable": false}))
        .expect(201);
    for key in ["", "~", "a b"] {
        h.post(
            "/api/bindings/%2F/e/amq.direct/q/pk",
            &json!({"routing_key": key}),
        )
        .expect(201);
    }
    let list = h
        .get("/api/bindings/%2F/e/amq.direct/q/pk")
        .expect(200)
        .json();
    let mut keys: Vec<(String, String)> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|b| {
            let key = b["routing_key"].as_str().unwrap().to_owned();
            (key, b["properties_key"].as_str().unwrap().to_owned())
        })
        .collect();
    keys.sort();
    let owned = |k: &str, p: &str| (k.to_owned(), p.to_owned());
    assert_eq!(
        keys,
        [owned("", "~"), owned("a b", "a+b"), owned("~", "%7E")]
    );
    // Each is shown and deleted by its own key (clients percent-encode the segment).
    let one = |props: &str| format!("/api/bindings/%2F/e/amq.direct/q/pk/{}", seg(props));
    assert_eq!(h.get(&one("%7E")).expect(200).json()["routing_key"], "~");
    h.delete(&one("%7E")).expect(204);
    assert_eq!(h.get(&one("~")).expect(200).json()["routing_key"], "");
    h.get(&one("%7E")).expect(404);
    h.delete(&one("~")).expect(204);
    h.delete(&one("a+b")).expect(204);
    assert_eq!(
        h.get("/api/bindings/%2F/e/amq.direct/q/pk")
            .expect(200)
            .json(),
        json!([])
    );
}

#[test]
fn http_publishes_reach_0_9_1_and_0_10_consumers_alike() {
    let b = Ferryd::start_mgmt(&[]);
    let h = http(&b);
    h.put("/api/queues/%2F/to091", &json!({"durable": false}))
        .expect(201);
    h.put("/api/queues/%2F/to010", &json!({"durable": false}))
        .expect(201);
    let properties = json!({
        "content_type": "application/json",
        "correlation_id": "c-1",
        "message_id": "m-1",
        "delivery_mode": 2,
        "priority": 4,
        "headers": {"tenant": "acme", "n": 7},
    });
    for q in ["to091", "to010"] {
        let body = json!({"routing_key": q, "payload": "eyJhIjoxfQ==", "payload_encoding": "base64", "properties": properties});
        assert_eq!(
            h.post("/api/exchanges/%2F/amq.default/publish", &body)
                .expect(200)
                .json()["routed"],
            true
        );
    }

    // 0-9-1: the properties as published.
    let mut c = Raw091::open(b.addr);
    let m = c.get("to091", true).expect("a message");
    assert_eq!(&m.body[..], br#"{"a":1}"#);
    let p = m.header.properties.decode();
    assert_eq!(
        p.content_type.as_ref().map(|s| s.as_bytes().to_vec()),
        Some(b"application/json".to_vec())
    );
    assert_eq!(p.delivery_mode, Some(2));
    assert_eq!(p.priority, Some(4));
    let headers = p.headers.unwrap();
    assert_eq!(headers.get("n"), Some(&FieldValue::I32(7)));
    assert!(
        matches!(headers.get("tenant"), Some(FieldValue::LongStr(s)) if s.as_bytes() == b"acme")
    );

    // 0-10: the same, translated.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        use ferry_client::{ConnectOptions, Connection, SubscribeOptions};
        let conn = Connection::connect(b.addr, ConnectOptions::default())
            .await
            .unwrap();
        let s = conn.session().await.unwrap();
        let mut sub = s
            .subscribe("to010", "d", SubscribeOptions::default())
            .await
            .unwrap();
        let d = tokio::time::timeout(Duration::from_secs(10), sub.next())
            .await
            .expect("delivery")
            .expect("open");
        assert_eq!(&d.body[..], br#"{"a":1}"#);
        let mp = d.header.properties.as_ref().expect("message-properties");
        assert_eq!(
            mp.content_type.as_ref().map(|c| c.to_string()),
            Some("application/json".into())
        );
        assert_eq!(mp.correlation_id.as_deref(), Some(&b"c-1"[..]));
        let app = mp.application_headers.as_ref().expect("headers");
        assert!(app.get("tenant").is_some());
        let dp = d.header.delivery.as_ref().expect("delivery-properties");
        assert_eq!(dp.priority.map(|p| p as u8), Some(4));
        assert_eq!(
            dp.delivery_mode,
            Some(ferry_client::DeliveryMode::Persistent)
        );
    });
}

#[test]
fn http_publishes_are_checked_and_stamped_as_amqp_publishes_are() {
    let b = Ferryd::start_mgmt(&["--max-message-size", "1000", "--enable-timestamp", "yes"]);
    let h = http(&b);
    h.put("/api/queues/%2F/stamped", &json!({"durable": false}))
        .expect(201);
    h.put(
        "/api/exchanges/%2F/inner",
        &json!({"type": "fanout", "durable": false, "internal": true}),
    )
    .expect(201);
    h.post("/api/bindings/%2F/e/inner/q/stamped", &json!({}))
        .expect(201);
    let publish = |exchange: &str, payload: &str| {
        h.post(
            &format!("/api/exchanges/%2F/{exchange}/publish"),
            &json!({"routing_key": "stamped", "payload": payload}),
        )
    };
    // An internal exchange takes messages only from exchanges bound to it: RabbitMQ's
    // management answers its channel's access-refused with 400.
    let r = publish("inner", "x");
    assert_eq!(r.status, 400, "{}", r.text());
    assert_eq!(r.json()["error"], "bad_request");
    assert!(
        r.json()["reason"]
            .as_str()
            .unwrap()
            .contains("internal exchange 'inner'"),
        "{}",
        r.text()
    );
    // --max-message-size, as for a 0-9-1 publish.
    let r = publish("amq.default", &"x".repeat(1001));
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(r.json()["reason"]
        .as_str()
        .unwrap()
        .contains("larger than max size 1000"));
    assert_eq!(h.get("/api/queues/%2F/stamped").json()["messages"], 0);
    // Within it, stamped with the time of receipt (--enable-timestamp), as 0-9-1's are.
    assert_eq!(
        publish("amq.default", &"x".repeat(1000)).expect(200).json()["routed"],
        true
    );
    let mut c = Raw091::open(b.addr);
    let m = c.get("stamped", true).expect("a message");
    assert_eq!(m.body.len(), 1000);
    let stamp = m.header.properties.decode().timestamp.expect("a timestamp");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    assert!(stamp <= now && stamp + 3600 > now, "{stamp} vs {now}");
}

#[test]
fn http_gets_show_what_amqp_clients_published() {
    let b = Ferryd::start_mgmt(&[]);
    let h = http(&b);
    let mut p = Raw091::open(b.addr);
    p.declare_queue("fetch", Default::default());
    let props = BasicProperties {
        content_type: Some(ShortStr::from_static("text/plain")),
        message_id: Some(ShortStr::from_static("id-1")),
        ..Default::default()
    };
    p.publish("", "fetch", &props, b"first");
    p.publish(
        "",
        "fetch",
        &BasicProperties::default(),
        &[0xff, 0xfe, 0x00],
    );
    eventually("two messages", || {
        h.get("/api/queues/%2F/fetch").json()["messages"] == 2
    });

    let got = h
        .post(
            "/api/queues/%2F/fetch/get",
            &json!({"count": 5, "ackmode": "ack_requeue_true", "encoding": "auto", "truncate": 50000}),
        )
        .expect(200)
        .json();
    let got = got.as_array().unwrap();
    assert_eq!(got.len(), 2);
    assert_eq!(got[0]["payload"], "first");
    assert_eq!(got[0]["payload_encoding"], "string");
    assert_eq!(got[0]["payload_bytes"], 5);
    assert_eq!(got[0]["routing_key"], "fetch");
    assert_eq!(got[0]["exchange"], "");
    assert_eq!(got[0]["redelivered"], false);
    assert_eq!(got[0]["message_count"], 1);
    assert_eq!(got[0]["properties"]["content_type"], "text/plain");
    assert_eq!(got[0]["properties"]["message_id"], "id-1");
    assert_eq!(got[1]["payload_encoding"], "base64");
    assert_eq!(got[1]["payload"], "//4A");

    // Requeued in order and marked redelivered; truncation; then taken for good.
    let again = h
        .post(
            "/api/queues/%2F/fetch/get",
            &json!({"count": 1, "ackmode": "ack_requeue_false", "encoding": "base64", "truncate": 2}),
        )
        .expect(200)
        .json();
    assert_eq!(again[0]["redelivered"], true);
    // A classic queue keeps no count of returns to show (RabbitMQ's shows none either).
    assert_eq!(
        again[0]["properties"]["headers"]["x-delivery-count"],
        serde_json::Value::Null
    );
    assert_eq!(again[0]["payload"], "Zmk=");
    assert_eq!(again[0]["payload_bytes"], 5);
    let last = h
        .post(
            "/api/queues/%2F/fetch/get",
            &json!({"count": 1, "ackmode": "reject_requeue_false"}),
        )
        .expect(200)
        .json();
    assert_eq!(last.as_array().unwrap().len(), 1);
    let q = h.get("/api/queues/%2F/fetch").json();
    assert_eq!(q["messages"], 0);
    assert_eq!(q["message_stats"]["ack"], 1);
    assert_eq!(q["ferry_stats"]["rejected"], 1);
    let none = h
        .post(
            "/api/queues/%2F/fetch/get",
            &json!({"count": 1, "ackmode": "ack_requeue_false"}),
        )
        .expect(200)
        .json();
    assert_eq!(none, json!([]));
    h.post(
        "/api/queues/%2F/nothere/get",
        &json!({"count": 1, "ackmode": "ack_requeue_false"}),
    )
    .expect(404);
}

#[test]
fn amqp_traffic_of_both_protocols_shows_in_the_counters() {
    let b = Ferryd::start_mgmt(&[]);
    let h = http(&b);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let _amqp010 = rt.block_on(async {
        use ferry_client::{ConnectOptions, Connection, QueueDeclareOptions};
        let conn = Connection::connect(b.addr, ConnectOptions::default())
            .await
            .unwrap();
        let s = conn.session().await.unwrap();
        s.queue_declare("counted010", QueueDeclareOptions::default())
            .await
            .unwrap();
        (conn, s)
    });
    rt.block_on(async {
        use ferry_client091::{
            ConnectOptions, Connection, ConsumeOptions, Publication, QueueOptions,
        };
        let mut conn = Connection::connect(b.addr, &ConnectOptions::default())
            .await
            .unwrap();
        let ch = conn.open_channel().await.unwrap();
        conn.queue_declare(ch, "counted", QueueOptions::default(), Default::default())
            .await
            .unwrap();
        conn.confirm_select(ch, 10).await.unwrap();
        let p = Publication::new(ch, "", "counted", BasicProperties::default(), 4).unwrap();
        for _ in 0..10 {
            conn.publish(&p, b"abcd").await.unwrap();
        }
        conn.wait_confirms(ch).await.unwrap();
        conn.qos(ch, 100, false).await.unwrap();
        conn.consume(ch, "counted", "counter", ConsumeOptions::default())
            .await
            .unwrap();
        let mut last = 0;
        for _ in 0..10 {
            last = conn
                .next_delivery(ch, "counter")
                .await
                .unwrap()
                .delivery_tag;
        }
        conn.ack(ch, last, true);
        conn.flush().await.unwrap();

        eventually("acks counted", || {
            h.get("/api/queues/%2F/counted").json()["message_stats"]["ack"] == 10
        });
        let q = h.get("/api/queues/%2F/counted").json();
        assert_eq!(q["message_stats"]["publish"], 10);
        assert_eq!(q["message_stats"]["deliver_get"], 10);
        assert_eq!(q["message_stats"]["redeliver"], 0);
        assert_eq!(q["consumers"], 1);
        let default = h.get("/api/exchanges/%2F/amq.default").json();
        assert_eq!(default["message_stats"]["publish_in"], 10);

        let consumers = h.get("/api/consumers").expect(200).json();
        let c = consumers
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["consumer_tag"] == "counter")
            .unwrap_or_else(|| panic!("no consumer in {consumers}"));
        assert_eq!(c["queue"]["name"], "counted");
        assert_eq!(c["ack_required"], true);
        eventually("the consumer's channel", || {
            let all = h.get("/api/consumers/%2F").json();
            all[0]["channel_details"]["number"].is_number()
        });

        let o = h.get("/api/overview").json();
        assert_eq!(o["object_totals"]["connections"], 2);
        assert_eq!(o["object_totals"]["queues"], 2);
        assert_eq!(o["object_totals"]["consumers"], 1);
        assert!(o["message_stats"]["publish"].as_u64().unwrap() >= 10);
        assert_eq!(o["message_stats"]["ack"], 10);

        eventually("traffic and channels of both connections", || {
            let list = h.get("/api/connections").json();
            let list = list.as_array().unwrap();
            list.len() == 2
                && list.iter().all(|c| c["recv_oct"].as_u64().unwrap() > 0)
                && list.iter().all(|c| c["channels"].as_u64().unwrap() >= 1)
        });
        let list = h.get("/api/connections").json();
        let protocols: Vec<&str> = list
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["protocol"].as_str().unwrap())
            .collect();
        assert!(protocols.contains(&"AMQP 0-9-1"), "{protocols:?}");
        assert!(protocols.contains(&"AMQP 0-10"), "{protocols:?}");
        let c091 = list
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["protocol"] == "AMQP 0-9-1")
            .unwrap();
        assert_eq!(c091["user"], "guest");
        assert_eq!(c091["peer_host"], "127.0.0.1");
        assert_eq!(c091["port"], b.addr.port());
        let name = c091["name"].as_str().unwrap();
        let one = h
            .get(&format!("/api/connections/{}", seg(name)))
            .expect(200)
            .json();
        assert_eq!(one["name"], name);
        // Channel figures are reported at most once a second (their count at once).
        eventually("the channel's modes", || {
            let channels = h
                .get(&format!("/api/connections/{}/channels", seg(name)))
                .json();
            channels[0]["confirm"] == true
        });
        let channels = h
            .get(&format!("/api/connections/{}/channels", seg(name)))
            .expect(200)
            .json();
        assert_eq!(channels[0]["confirm"], true);
        assert_eq!(channels[0]["prefetch_count"], 100);
        let all_channels = h.get("/api/channels").expect(200).json();
        assert_eq!(all_channels.as_array().unwrap().len(), 2);
        let ch_name = channels[0]["name"].as_str().unwrap();
        h.get(&format!("/api/channels/{}", seg(ch_name)))
            .expect(200);
        conn.close().await.unwrap();
    });
}

#[test]
fn closing_a_connection_tells_its_client_why() {
    let b = Ferryd::start_mgmt(&[]);
    let h = http(&b);
    let mut c = Raw091::open(b.addr);
    let list = h.get("/api/connections").json();
    let name = list[0]["name"].as_str().unwrap().to_owned();
    h.request(
        "DELETE",
        &format!("/api/connections/{}", seg(&name)),
        &[("X-Reason", "maintenance window")],
        b"",
    )
    .expect(204);
    let close = c.expect(0, |m| matches!(m, Method::ConnectionClose(_)));
    let Method::ConnectionClose(close) = close else {
        unreachable!()
    };
    assert_eq!(close.reply_code, 320);
    let text = String::from_utf8_lossy(close.reply_text.as_bytes()).into_owned();
    assert!(text.contains("maintenance window"), "{text}");
    eventually("the connection to go", || {
        h.get("/api/connections").json() == json!([])
    });
    h.delete(&format!("/api/connections/{}", seg(&name)))
        .expect(404);
}

/// The name management lists `user`'s connection under (each user here has one).
fn connection_of(h: &Http, user: &str) -> String {
    let list = h.get("/api/connections").expect(200).json();
    let found = list.as_array().unwrap().iter().find(|c| c["user"] == user);
    found.unwrap_or_else(|| panic!("no connection of {user} in {list}"))["name"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[test]
fn closing_another_users_connection_takes_the_administrator_tag() {
    // No ACL: the tag alone decides, as in RabbitMQ.
    let s = secured_as(
        None,
        &[
            ("carol", &["administrator"]),
            ("dave", &[]),
            ("erin", &["management"]),
        ],
        &[],
    );
    let b = &s.broker;
    let addr = b.mgmt_addr.unwrap();
    let (carol, dave, erin) = (
        Http::as_user(addr, "carol", "password"),
        Http::as_user(addr, "dave", "password"),
        Http::as_user(addr, "erin", "password"),
    );
    let _carols = Raw091::open_as(b.addr, "carol");
    let mut daves = Raw091::open_as(b.addr, "dave");
    let _erins = Raw091::open_as(b.addr, "erin");
    let path = |user: &str| format!("/api/connections/{}", seg(&connection_of(&carol, user)));
    for (who, http) in [("dave", &dave), ("erin", &erin)] {
        let r = http.delete(&path("carol"));
        assert_eq!(r.status, 403, "{who}: {}", r.text());
        assert!(is_rabbitmq_error(&r));
    }
    dave.delete(&path("erin")).expect(403);
    assert_eq!(
        carol
            .get("/api/connections")
            .json()
            .as_array()
            .unwrap()
            .len(),
        3,
        "nothing was closed"
    );
    // One's own, without a tag; anyone's, with the administrator tag.
    dave.delete(&path("dave")).expect(204);
    daves.expect(0, |m| matches!(m, Method::ConnectionClose(_)));
    carol.delete(&path("erin")).expect(204);
    eventually("the two connections to go", || {
        carol
            .get("/api/connections")
            .json()
            .as_array()
            .unwrap()
            .len()
            == 1
    });
}

#[test]
fn definitions_export_and_import_round_trip() {
    let b = Ferryd::start_mgmt(&[]);
    let h = http(&b);
    h.put(
        "/api/exchanges/%2F/d-x",
        &json!({"type": "direct", "durable": true}),
    )
    .expect(201);
    h.put(
        "/api/exchanges/%2F/d-y",
        &json!({"type": "fanout", "durable": false}),
    )
    .expect(201);
    // Arrays and objects keep their content, nested ones too.
    let custom = json!([1, "a", {"k": [true, null]}]);
    h.put(
        "/api/queues/%2F/d-q",
        &json!({"durable": true, "arguments": {"x-max-length": 5, "x-custom": custom}}),
    )
    .expect(201);
    h.post(
        "/api/bindings/%2F/e/d-x/q/d-q",
        &json!({"routing_key": "k"}),
    )
    .expect(201);
    h.post(
        "/api/bindings/%2F/e/d-x/q/d-q",
        &json!({"routing_key": "k", "arguments": {"tags": ["x", "y"]}}),
    )
    .expect(201);
    h.post(
        "/api/bindings/%2F/e/d-x/e/d-y",
        &json!({"routing_key": "k2"}),
    )
    .expect(201);
    h.put(
        "/api/exchanges/%2F/d-internal",
        &json!({"type": "topic", "durable": true, "internal": true}),
    )
    .expect(201);
    assert_eq!(
        h.get("/api/exchanges/%2F/d-internal").expect(200).json()["internal"],
        true
    );
    let listed = h.get("/api/exchanges?name=d-").expect(200).json();
    let internal: Vec<(String, bool)> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["name"].as_str().unwrap().into(),
                e["internal"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        internal,
        [
            ("d-internal".into(), true),
            ("d-x".into(), false),
            ("d-y".into(), false)
        ]
    );
    let exported = h.get("/api/definitions").expect(200).json();
    assert_eq!(exported["queues"].as_array().unwrap().len(), 1);
    assert_eq!(exported["exchanges"].as_array().unwrap().len(), 3);
    assert_eq!(exported["bindings"].as_array().unwrap().len(), 3);
    // Importing what was exported into the same broker changes nothing (an exchange shown
    // as not internal would be an inequivalent redeclaration).
    h.post("/api/definitions", &exported).expect(204);
    assert_eq!(exported["queues"][0]["vhost"], "/");
    assert_eq!(exported["queues"][0]["arguments"]["x-max-length"], 5);
    assert_eq!(exported["queues"][0]["arguments"]["x-custom"], custom);
    assert!(exported["bindings"]
        .as_array()
        .unwrap()
        .iter()
        .any(|b| b["arguments"]["tags"] == json!(["x", "y"])));
    let per_vhost = h.get("/api/definitions/%2F").expect(200).json();
    assert!(per_vhost["queues"][0].get("vhost").is_none());

    h.delete("/api/queues/%2F/d-q").expect(204);
    h.delete("/api/exchanges/%2F/d-x").expect(204);
    h.delete("/api/exchanges/%2F/d-y").expect(204);
    h.delete("/api/exchanges/%2F/d-internal").expect(204);
    h.post("/api/definitions", &exported).expect(204);
    assert_eq!(
        h.get("/api/exchanges/%2F/d-internal").expect(200).json()["internal"],
        true
    );
    let again = h.get("/api/definitions").expect(200).json();
    for key in ["queues", "exchanges", "bindings"] {
        assert_eq!(again[key], exported[key], "{key}");
    }
    // With --auth no there are no users to import into: users are passed over, where a
    // user write is refused (400).
    let with_user = json!({"users": [{"name": "u", "password_hash": "SCRAM-SHA-256$4096:c2FsdA==$AAAA:AAAA", "tags": ""}]});
    h.post("/api/definitions", &with_user).expect(204);
    // An import that fails names what failed.
    let bad = json!({"queues": [{"name": "d-q", "vhost": "/", "durable": false, "auto_delete": false, "arguments": {}}]});
    let r = h.post("/api/definitions", &bad);
    assert_eq!(r.status, 400);
    assert!(r.json()["reason"].as_str().unwrap().contains("queue 'd-q'"));
    // Other vhosts' objects are not ours.
    let elsewhere = json!({"queues": [{"name": "other-q", "vhost": "other", "durable": true, "arguments": {}}]});
    h.post("/api/definitions", &elsewhere).expect(204);
    h.get("/api/queues/%2F/other-q").expect(404);
}

/// ferryd with --auth yes, a users file and an ACL (see `secured_by`). Fields drop in
/// order: the broker stops before its directory goes.
struct Secured {
    broker: Ferryd,
    dir: RemovedOnDrop,
}

struct RemovedOnDrop(std::path::PathBuf);

impl Drop for RemovedOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn secured() -> Secured {
    secured_with(&[])
}

/// alice may not create queues named secret*.
fn secured_with(extra: &[&str]) -> Secured {
    secured_by(
        "acl deny-log alice create queue name=secret*\nacl allow all all\n",
        extra,
    )
}

/// ferryd with a users file holding alice (password wonderland, an administrator) and the
/// ACL `acl`.
fn secured_by(acl: &str, extra: &[&str]) -> Secured {
    secured_as(Some(acl), &[], extra)
}

/// ferryd with a users file holding alice (password wonderland, an administrator) and
/// `more` users (password "password", as `Raw091` logs in, with these tags), and the ACL
/// `acl` if there is one.
fn secured_as(acl: Option<&str>, more: &[(&str, &[&str])], extra: &[&str]) -> Secured {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let dir = std::env::temp_dir().join(format!(
        "ferryd-mgmt-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let mut users = ferry_auth::Users::default();
    let alice = ferry_auth::Credentials::new("wonderland", ferry_auth::MIN_ITERATIONS).unwrap();
    users.insert("alice", alice).unwrap();
    users.set_tags("alice", &["administrator".into()]).unwrap();
    for (name, tags) in more {
        let c = ferry_auth::Credentials::new("password", ferry_auth::MIN_ITERATIONS).unwrap();
        users.insert(name, c).unwrap();
        let tags: Vec<String> = tags.iter().map(|t| t.to_string()).collect();
        users.set_tags(name, &tags).unwrap();
    }
    let users_path = dir.join("users");
    users.save(&users_path).unwrap();
    let users_arg = users_path.display().to_string();
    let acl_path = dir.join("ferryd.acl");
    let acl_arg = acl_path.display().to_string();
    let mut args = vec!["--auth", "yes", "--users-file", &users_arg];
    if let Some(acl) = acl {
        std::fs::write(&acl_path, acl).unwrap();
        args.extend_from_slice(&["--acl-file", &acl_arg]);
    }
    args.extend_from_slice(extra);
    let broker = Ferryd::start_mgmt(&args);
    Secured {
        broker,
        dir: RemovedOnDrop(dir),
    }
}

#[test]
fn the_prometheus_port_serves_metrics_without_a_login_and_nothing_else() {
    let s = secured_with(&["--prometheus-port", "0"]);
    let open = Http::anonymous(s.broker.prometheus_addr.expect("the Prometheus port"));
    let scrape = open.get("/metrics").expect(200).text();
    assert!(scrape.contains("\nferry_queues "), "{scrape}");
    assert_eq!(open.get("/api/overview").status, 404);
    assert_eq!(open.get("/").status, 404, "no console there");
    assert_eq!(open.post("/metrics", &json!({})).status, 405);
    // The management port still asks for a login, /metrics included.
    let mgmt = Http::anonymous(s.broker.mgmt_addr.unwrap());
    assert_eq!(mgmt.get("/metrics").status, 401);
}

#[test]
fn the_prometheus_port_leaves_out_what_names_clients() {
    let b = Ferryd::start_mgmt(&["--prometheus-port", "0"]);
    let _client = Raw091::open(b.addr);
    let open = Http::anonymous(b.prometheus_addr.expect("the Prometheus port"));
    let scrape = open.get("/metrics").expect(200).text();
    assert!(scrape.contains("\nferry_connections 1"), "{scrape}");
    assert!(!scrape.contains("ferry_connection_"), "{scrape}");
    assert!(!scrape.contains("user="), "{scrape}");
    let full = http(&b).get("/metrics").expect(200).text();
    assert!(full.contains("user=\"guest\""), "{full}");
}

#[test]
fn the_prometheus_port_needs_management() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ferryd"))
        .args(["--port", "0", "--no-data-dir", "--prometheus-port", "0"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--prometheus-port needs --mgmt-enable yes"),
        "{stderr}"
    );
}

#[test]
fn logins_are_checked_and_the_acl_applies() {
    let s = secured();
    let addr = s.broker.mgmt_addr.unwrap();
    let anonymous = Http::anonymous(addr).get("/api/overview");
    assert_eq!(anonymous.status, 401);
    assert!(anonymous
        .header("www-authenticate")
        .is_some_and(|v| v.starts_with("Basic")));
    assert!(is_rabbitmq_error(&anonymous));
    let wrong = Http::as_user(addr, "alice", "looking-glass").get("/api/overview");
    assert_eq!(wrong.status, 401);
    // The users file replaces the built-in guest.
    assert_eq!(Http::new(addr).get("/api/overview").status, 401);
    let garbled = Http::anonymous(addr).request(
        "GET",
        "/api/overview",
        &[("Authorization", "Basic not-base64!")],
        b"",
    );
    assert_eq!(garbled.status, 401);

    let alice = Http::as_user(addr, "alice", "wonderland");
    alice.get("/api/overview").expect(200);
    // Remembered: many requests, one password check.
    let started = Instant::now();
    for _ in 0..20 {
        alice.get("/api/whoami").expect(200);
    }
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(alice.get("/api/whoami").json()["name"], "alice");
    assert_eq!(names(&alice.get("/api/users").json()), ["alice"]);
    let denied = alice.put("/api/queues/%2F/secret-plans", &json!({"durable": false}));
    assert_eq!(denied.status, 403, "{}", denied.text());
    assert!(is_rabbitmq_error(&denied));
    alice
        .put("/api/queues/%2F/open-plans", &json!({"durable": false}))
        .expect(201);
    alice.get("/api/queues/%2F/secret-plans").expect(404);
    // Metrics need a login too.
    assert_eq!(Http::anonymous(addr).get("/metrics").status, 401);
    alice.get("/metrics").expect(200);
}

/// RabbitMQ's passwords guide's example: "test12" hashed with SHA-256, as RabbitMQ's API and
/// definitions carry it.
const GUIDE_SHA256: &str = "kI3GCqW5JLMJa4iX1lo7X4D6XbYqlLgxIs30+P6tENUV2POR";
/// An MD5 hash of RabbitMQ before 3.6 ("simon").
const RABBIT_MD5: &str = "ytUIm8s3AnKsXQjptplKFytfVxI=";

#[test]
fn users_are_created_changed_and_deleted_through_the_api() {
    // alice is an administrator; so will oscar be, but the ACL keeps him from user writes.
    let s = secured_by(
        "acl deny-log oscar update broker\n\
         acl deny-log all update broker name=keep-*\n\
         acl allow all all\n",
        &[],
    );
    let addr = s.broker.mgmt_addr.unwrap();
    let alice = Http::as_user(addr, "alice", "wonderland");
    let login = |user: &str, password: &str| {
        Http::as_user(addr, user, password)
            .get("/api/whoami")
            .status
    };
    let listed = alice.get("/api/users").expect(200).json();
    assert_eq!(names(&listed), ["alice"]);
    assert!(listed[0]["password_hash"]
        .as_str()
        .is_some_and(|h| h.starts_with("SCRAM-SHA-256$")));
    assert_eq!(listed[0]["hashing_algorithm"], "ferry_scram_sha_256");
    assert_eq!(listed[0]["tags"], json!(["administrator"]));
    assert_eq!(
        alice.get("/api/whoami").expect(200).json()["tags"],
        json!(["administrator"])
    );

    // Created with RabbitMQ's comma-separated tags, then changed with a list of them.
    alice
        .put(
            "/api/users/carol",
            &json!({"password": "one", "tags": "monitoring"}),
        )
        .expect(201);
    assert_eq!(
        alice.get("/api/users/carol").expect(200).json()["tags"],
        json!(["monitoring"])
    );
    assert_eq!(login("carol", "one"), 200);
    alice
        .put(
            "/api/users/carol",
            &json!({"password": "two", "tags": ["management", "monitoring"]}),
        )
        .expect(204);
    assert_eq!(
        login("carol", "one"),
        401,
        "the remembered password is forgotten"
    );
    assert_eq!(login("carol", "two"), 200);
    // Without a password or tags the user keeps theirs; empty tags clear them.
    alice.put("/api/users/carol", &json!({})).expect(204);
    assert_eq!(login("carol", "two"), 200);
    assert_eq!(
        alice.get("/api/users/carol").expect(200).json()["tags"],
        json!(["management", "monitoring"])
    );
    alice
        .put("/api/users/carol", &json!({"tags": ""}))
        .expect(204);
    let carol = alice.get("/api/users/carol").expect(200).json();
    assert_eq!(carol["tags"], json!([]));
    let record = carol["password_hash"].as_str().unwrap().to_owned();

    // A record copies a user (to another broker, say) without its password.
    alice
        .put(
            "/api/users/erin",
            &json!({"password_hash": record, "hashing_algorithm": "ferry_scram_sha_256"}),
        )
        .expect(201);
    assert_eq!(login("erin", "two"), 200);
    // The record names its own format: rabbitmqadmin's default algorithm beside it is moot.
    alice
        .put(
            "/api/users/gina",
            &json!({"password_hash": record, "hashing_algorithm": "rabbit_password_hashing_sha256"}),
        )
        .expect(201);
    alice.delete("/api/users/gina").expect(204);

    // RabbitMQ's own hashes are kept as they are, as rabbitmqadmin sends them: the hash
    // alone (its length tells SHA-256 from SHA-512), or with the algorithm named, here in
    // place of keys a password gave (which is logged). Their users log in with a password
    // (HTTP Basic is PLAIN's check; the AMQP logins are in security.rs).
    alice
        .put("/api/users/hank", &json!({"password": "first"}))
        .expect(201);
    alice
        .put("/api/users/hank", &json!({"password_hash": GUIDE_SHA256}))
        .expect(204);
    assert_eq!(login("hank", "test12"), 200);
    assert_eq!(login("hank", "test1"), 401);
    let hank = alice.get("/api/users/hank").expect(200).json();
    assert_eq!(hank["password_hash"], GUIDE_SHA256);
    assert_eq!(hank["hashing_algorithm"], "rabbit_password_hashing_sha256");
    let sha512 =
        ferry_auth::RabbitHash::derive(ferry_auth::RabbitAlgorithm::Sha512, [5, 6, 7, 8], "hutch");
    alice
        .put(
            "/api/users/hank",
            &json!({"password_hash": sha512.management_form(), "hashing_algorithm": "rabbit_password_hashing_sha512"}),
        )
        .expect(204);
    assert_eq!(login("hank", "test12"), 401);
    assert_eq!(login("hank", "hutch"), 200);
    let sha512 =
        ferry_auth::RabbitHash::derive(ferry_auth::RabbitAlgorithm::Sha512, [5, 6, 7, 9], "pike");
    alice
        .put(
            "/api/users/hank",
            &json!({"password_hash": sha512.management_form()}),
        )
        .expect(204);
    assert_eq!(login("hank", "pike"), 200);
    assert_eq!(
        alice.get("/api/users/hank").expect(200).json()["hashing_algorithm"],
        "rabbit_password_hashing_sha512"
    );
    alice.delete("/api/users/hank").expect(204);

    let slow = record.replacen("$100000:", "$4000000000:", 1);
    assert_ne!(slow, record);
    for (path, body, why) in [
        ("/api/users/dave", json!({}), "a new user needs a password"),
        (
            "/api/users/dave",
            json!({"password": "p", "password_hash": record}),
            "not both",
        ),
        (
            "/api/users/dave",
            json!({"password": ""}),
            "an empty password",
        ),
        (
            "/api/users/dave",
            json!({"password_hash": "c2FsdA=="}),
            "a hash of no known length",
        ),
        (
            "/api/users/dave",
            json!({"password_hash": GUIDE_SHA256, "hashing_algorithm": "rabbit_password_hashing_sha512"}),
            "a SHA-256 hash named SHA-512",
        ),
        (
            "/api/users/dave",
            json!({"password_hash": RABBIT_MD5, "hashing_algorithm": "rabbit_password_hashing_md5"}),
            "RabbitMQ's MD5 hashes",
        ),
        (
            "/api/users/dave",
            json!({"password_hash": slow}),
            "a record every login would spend minutes on",
        ),
        (
            "/api/users/dave",
            json!({"password": "p", "tags": 7}),
            "tags of another type",
        ),
        (
            "/api/users/dave",
            json!({"password": "p", "tags": ["a,b"]}),
            "a tag with a comma",
        ),
        (
            "/api/users/dave",
            json!({"password": 7}),
            "a password of another type",
        ),
        ("/api/users/dave", json!(["p"]), "a body not an object"),
        (
            "/api/users/bad%20name",
            json!({"password": "p"}),
            "a name with a blank",
        ),
    ] {
        let r = alice.put(path, &body);
        assert_eq!(r.status, 400, "{why}: {}", r.text());
        assert!(is_rabbitmq_error(&r), "{why}");
    }
    for algorithm in [Some("rabbit_password_hashing_md5"), None] {
        let r = alice.put(
            "/api/users/dave",
            &json!({"password_hash": RABBIT_MD5, "hashing_algorithm": algorithm}),
        );
        assert_eq!(r.status, 400, "{}", r.text());
        assert!(r.text().contains("MD5"), "{}", r.text());
    }
    alice.get("/api/users/dave").expect(404);
    assert_eq!(alice.delete("/api/users/bad%0Aname").status, 400);

    // Changing users takes the administrator tag, as in RabbitMQ, and then the ACL's
    // `update broker`; who may not change users sees no records.
    alice
        .put(
            "/api/users/oscar",
            &json!({"password": "o", "tags": "administrator"}),
        )
        .expect(201);
    let as_carol = Http::as_user(addr, "carol", "two");
    let as_oscar = Http::as_user(addr, "oscar", "o");
    for who in [&as_carol, &as_oscar] {
        let denied = who.put("/api/users/frank", &json!({"password": "p"}));
        assert_eq!(denied.status, 403, "{}", denied.text());
        if std::ptr::eq(who, &as_carol) {
            // Not an administrator: refused before the body is looked at.
            let garbled = who.put("/api/users/frank", &json!({"password_hash": "!!"}));
            assert_eq!(garbled.status, 403, "{}", garbled.text());
        }
        assert_eq!(who.delete("/api/users/alice").status, 403);
        assert_eq!(
            who.post("/api/users/bulk-delete", &json!({"users": ["erin"]}))
                .status,
            403
        );
        let seen = who.get("/api/users").expect(200).json();
        // Only administrators see others (as in RabbitMQ); oscar is one, carol is not.
        if std::ptr::eq(who, &as_oscar) {
            assert_eq!(names(&seen), ["alice", "carol", "erin", "oscar"]);
        } else {
            assert_eq!(names(&seen), ["carol"]);
            assert_eq!(who.get("/api/users/alice").status, 403);
            who.get("/api/users/carol").expect(200);
        }
        assert!(seen
            .as_array()
            .unwrap()
            .iter()
            .all(|u| u.get("password_hash").is_none()));
        assert!(who.get("/api/definitions").expect(200).json()["users"]
            .as_array()
            .unwrap()
            .iter()
            .all(|u| u.get("password_hash").is_none()));
    }
    assert_eq!(
        as_carol
            .post("/api/users/bulk-delete", &json!({"users": []}))
            .status,
        403
    );
    assert!(as_carol.get("/api/whoami").json()["tags"] == json!([]));
    assert_eq!(
        login("erin", "two"),
        200,
        "the refused bulk delete did nothing"
    );
    // One name the ACL protects refuses the whole bulk delete.
    assert_eq!(
        alice
            .post(
                "/api/users/bulk-delete",
                &json!({"users": ["erin", "keep-me"]})
            )
            .status,
        403
    );
    assert_eq!(login("erin", "two"), 200);

    // A definitions export carries the users' records, and an import brings them back,
    // with users exported from RabbitMQ; those whose passwords cannot be checked (none, or
    // MD5) are passed over, and so is RabbitMQ's default guest/guest.
    let exported = alice.get("/api/definitions").expect(200).json();
    alice.delete("/api/users/erin").expect(204);
    let mut import = exported.clone();
    let from_rabbitmq = [
        json!({
            "name": "rabbit",
            "password_hash": GUIDE_SHA256,
            "hashing_algorithm": "rabbit_password_hashing_sha256",
            "tags": ["monitoring"],
            "limits": {}
        }),
        json!({"name": "cert-only", "password_hash": "", "tags": ""}),
        json!({
            "name": "ancient",
            "password_hash": RABBIT_MD5,
            "hashing_algorithm": "rabbit_password_hashing_md5",
            "tags": ""
        }),
        json!({
            "name": "guest",
            "password_hash": ferry_auth::RabbitHash::derive(ferry_auth::RabbitAlgorithm::Sha256, [3; 4], "guest").management_form(),
            "hashing_algorithm": "rabbit_password_hashing_sha256",
            "tags": ["administrator"]
        }),
    ];
    import["users"]
        .as_array_mut()
        .unwrap()
        .extend(from_rabbitmq);
    alice.post("/api/definitions", &import).expect(204);
    assert_eq!(login("erin", "two"), 200);
    assert_eq!(login("rabbit", "test12"), 200);
    assert_eq!(
        alice.get("/api/users/rabbit").expect(200).json()["tags"],
        json!(["monitoring"])
    );
    alice.get("/api/users/cert-only").expect(404);
    alice.get("/api/users/ancient").expect(404);
    alice.get("/api/users/guest").expect(404);
    alice.delete("/api/users/rabbit").expect(204);
    assert_eq!(as_oscar.post("/api/definitions", &exported).status, 403);
    // A virtual host's definitions hold no users.
    alice.delete("/api/users/erin").expect(204);
    alice.post("/api/definitions/%2F", &exported).expect(204);
    alice.get("/api/users/erin").expect(404);
    alice.post("/api/definitions", &exported).expect(204);

    // Nothing leaves the broker without an administrator (while it has one) or without users.
    alice
        .put("/api/users/oscar", &json!({"tags": "monitoring"}))
        .expect(204);
    let last = alice.put("/api/users/alice", &json!({"tags": "monitoring"}));
    assert_eq!(last.status, 400, "{}", last.text());
    assert!(last.text().contains("administrator"), "{}", last.text());
    assert_eq!(alice.delete("/api/users/alice").status, 400);
    assert_eq!(
        alice
            .post(
                "/api/users/bulk-delete",
                &json!({"users": ["alice", "erin"]})
            )
            .status,
        400
    );
    assert_eq!(login("erin", "two"), 200);
    assert_eq!(
        alice.get("/api/users/alice").expect(200).json()["tags"],
        json!(["administrator"])
    );

    // Deleted one by one (an unknown user is not found), or in bulk (unknown ones passed
    // over, an empty list changing nothing).
    alice.delete("/api/users/erin").expect(204);
    alice.delete("/api/users/erin").expect(404);
    assert_eq!(login("erin", "two"), 401);
    alice
        .post(
            "/api/users/bulk-delete",
            &json!({"users": ["carol", "oscar", "nobody"]}),
        )
        .expect(204);
    assert_eq!(login("carol", "two"), 401);
    alice
        .post("/api/users/bulk-delete", &json!({"users": []}))
        .expect(204);
    assert_eq!(
        alice
            .post("/api/users/bulk-delete", &json!({"users": "carol"}))
            .status,
        400
    );
    // Deleting a user closes its connections, as RabbitMQ does; a password change does not.
    alice
        .put("/api/users/dave", &json!({"password": "password"}))
        .expect(201);
    let mut dave = Raw091::open_as(s.broker.addr, "dave");
    alice
        .put("/api/users/dave", &json!({"password": "changed"}))
        .expect(204);
    dave.declare_queue("dave-q", ferry_amqp091::FieldTable::new());
    alice.delete("/api/users/dave").expect(204);
    let Method::ConnectionClose(close) =
        dave.expect(0, |m| matches!(m, Method::ConnectionClose(_)))
    else {
        unreachable!()
    };
    assert_eq!(close.reply_code, 320);
    let text = String::from_utf8_lossy(close.reply_text.as_bytes()).into_owned();
    assert!(text.contains("user 'dave' was deleted"), "{text}");
    alice.delete("/api/queues/%2F/dave-q").expect(204);
    // Every change went to the users file, as `ferry user` would have made it.
    let file = ferry_auth::Users::load(&s.dir.0.join("users"))
        .unwrap()
        .unwrap();
    assert_eq!(file.names().collect::<Vec<_>>(), ["alice"]);
    let exported = alice.get("/api/definitions").expect(200).json();
    assert_eq!(names(&exported["users"]), ["alice"]);
    assert!(exported["users"][0]["password_hash"].is_string());
    // Only the ACL's refusals are logged as its denials (oscar's three, his import's, and
    // keep-me's), not the reads that hid records.
    let Secured { broker, dir: _dir } = s;
    let (_, log) = broker.terminate();
    assert_eq!(log.matches("ACL denied update broker").count(), 5, "{log}");
    assert_eq!(log.matches("passed over").count(), 3, "{log}");
    assert_eq!(
        log.matches("passed over: its password is").count(),
        1,
        "{log}"
    );
    // Taking a hash in place of keys is told; a new user's hash only noted.
    assert_eq!(
        log.matches("SCRAM-SHA-256 keys were replaced by a RabbitMQ password hash")
            .count(),
        1,
        "{log}"
    );
}

#[test]
fn malformed_requests_get_rabbitmq_style_errors() {
    let b = Ferryd::start_mgmt(&[]);
    let h = http(&b);
    let raw = |method: &str, path: &str, body: &[u8]| h.request(method, path, &[], body);

    for (body, what) in [
        (&b"{not json"[..], "malformed JSON"),
        (b"[1, 2]", "not an object"),
        (b"{\"durable\": \"sometimes\"}", "a bad flag"),
        (b"{\"arguments\": [1]}", "arguments not an object"),
    ] {
        let r = raw("PUT", "/api/queues/%2F/m", body);
        assert_eq!(r.status, 400, "{what}: {}", r.text());
        assert!(is_rabbitmq_error(&r), "{what}");
    }
    let r = h.put("/api/exchanges/%2F/no-type", &json!({"durable": false}));
    assert_eq!(r.status, 400);

    let r = h.get("/api/no/such/path");
    assert_eq!(r.status, 404);
    assert!(is_rabbitmq_error(&r));
    h.get("/api/queues/elsewhere").expect(404);
    h.get("/api/queues/elsewhere/q").expect(404);
    h.get("/api/queues/%2F/missing").expect(404);
    h.get("/api/bindings/%2F/e/amq.direct/z/x").expect(404);

    // Only JSON is read (RabbitMQ answers 415): with --auth no, a web page could otherwise
    // post a text/plain body that is valid JSON from any visitor's browser.
    for (method, path, content_type) in [
        ("POST", "/api/definitions", "text/plain"),
        (
            "POST",
            "/api/exchanges/%2F/amq.default/publish",
            "text/plain;charset=UTF-8",
        ),
        (
            "POST",
            "/api/queues/%2F/m/get",
            "application/x-www-form-urlencoded",
        ),
        (
            "PUT",
            "/api/queues/%2F/by-form",
            "multipart/form-data; boundary=b",
        ),
    ] {
        let body = br#"{"queues": [{"name": "planted", "durable": false}], "payload": "x"}"#;
        let r = h.request(method, path, &[("Content-Type", content_type)], body);
        assert_eq!(r.status, 415, "{path}: {}", r.text());
        assert_eq!(r.json()["error"], "unsupported_media_type");
    }
    h.get("/api/queues/%2F/planted").expect(404);
    h.get("/api/queues/%2F/by-form").expect(404);
    // A bare PUT (no body, no Content-Type) still declares with the defaults.
    let bare = Http::new(h.addr).request("PUT", "/api/queues/%2F/bare", &[], b"");
    assert_eq!(bare.status, 201, "{}", bare.text());
    h.delete("/api/queues/%2F/bare").expect(204);

    let r = raw("POST", "/api/overview", b"{}");
    assert_eq!(r.status, 405);
    assert!(is_rabbitmq_error(&r));
    assert_eq!(raw("PATCH", "/api/queues/%2F/m", b"{}").status, 405);
    assert_eq!(raw("DELETE", "/api/exchanges", b"").status, 405);

    // Bodies: 1 MiB in general, 16 MiB for definitions.
    let big = format!(
        "{{\"durable\": false, \"pad\": \"{}\"}}",
        "x".repeat(2 << 20)
    );
    let r = raw("PUT", "/api/queues/%2F/big", big.as_bytes());
    assert_eq!(r.status, 413, "{}", r.text());
    assert!(is_rabbitmq_error(&r));
    let defs = format!("{{\"queues\": [], \"pad\": \"{}\"}}", "x".repeat(2 << 20));
    raw("POST", "/api/definitions", defs.as_bytes()).expect(204);
    let huge = format!("{{\"pad\": \"{}\"}}", "x".repeat(17 << 20));
    assert_eq!(raw("POST", "/api/definitions", huge.as_bytes()).status, 413);

    for query in [
        "page=0",
        "page=x",
        "page_size=501",
        "page=2&page_size=10",
        "name=(&use_regex=true",
    ] {
        let r = h.get(&format!("/api/queues?{query}"));
        assert_eq!(r.status, 400, "{query}: {}", r.text());
    }
    // A pattern compiling to a large program (seconds a name to match under regex-lite's
    // default limit) is refused before any name is looked at, on every list.
    for list in ["queues", "exchanges", "connections"] {
        let r = h.get(&format!(
            "/api/{list}?use_regex=true&name={}",
            seg("(?:.{0,100}){0,1000}#")
        ));
        assert_eq!(r.status, 400, "{list}: {}", r.text());
        assert_eq!(r.json()["error"], "bad_request", "{list}");
    }

    let publish = |body: Value| {
        h.post("/api/exchanges/%2F/amq.default/publish", &body)
            .status
    };
    assert_eq!(
        publish(json!({"routing_key": "x", "payload": "!!", "payload_encoding": "base64"})),
        400
    );
    assert_eq!(
        publish(json!({"payload": "x", "payload_encoding": "rot13"})),
        400
    );
    assert_eq!(
        publish(json!({"payload": "x", "properties": {"delivery_mode": "x"}})),
        400
    );
    assert_eq!(
        publish(json!({"payload": "x", "properties": {"expiration": "soon"}})),
        400
    );
    assert_eq!(
        h.post(
            "/api/exchanges/%2F/nothere/publish",
            &json!({"payload": "x"})
        )
        .status,
        404
    );
    h.put("/api/queues/%2F/m", &json!({"durable": false}))
        .expect(201);
    assert_eq!(
        h.post(
            "/api/queues/%2F/m/get",
            &json!({"count": 1, "ackmode": "maybe"})
        )
        .status,
        400
    );
    assert_eq!(
        h.post("/api/queues/%2F/m/get", &json!({"count": -1}))
            .status,
        400
    );
    // Still serving, and still a broker.
    h.get("/api/overview").expect(200);
    Raw091::open(b.addr);
}

#[test]
fn rates_and_history_come_from_samples() {
    let b = Ferryd::start_mgmt(&["--mgmt-sample-interval", "100"]);
    let h = http(&b);
    h.put("/api/queues/%2F/rated", &json!({"durable": false}))
        .expect(201);
    // Samples before the publishes (a window's increment is at least a second)...
    std::thread::sleep(Duration::from_millis(1500));
    for _ in 0..20 {
        h.post(
            "/api/exchanges/%2F/amq.default/publish",
            &json!({"routing_key": "rated", "payload": "r", "payload_encoding": "string", "properties": {}}),
        )
        .expect(200);
    }
    // ...and after.
    std::thread::sleep(Duration::from_millis(1100));
    let o = h
        .get("/api/overview?msg_rates_age=60&msg_rates_incr=1&lengths_age=60&lengths_incr=1")
        .expect(200)
        .json();
    let publish = &o["message_stats"]["publish_details"];
    let samples: Vec<u64> = publish["samples"]
        .as_array()
        .unwrap_or_else(|| panic!("samples in {publish}"))
        .iter()
        .map(|s| s["sample"].as_u64().unwrap())
        .collect();
    assert_eq!(samples.first(), Some(&20), "newest first: {samples:?}");
    assert!(samples.contains(&0), "{samples:?}");
    assert!(publish["avg_rate"].as_f64().unwrap() > 0.0);
    assert!(o["queue_totals"]["messages_details"]["samples"].is_array());
    let q = h
        .get("/api/queues/%2F/rated?lengths_age=60&lengths_incr=1")
        .json();
    let lengths = q["messages_details"]["samples"].as_array().unwrap();
    assert_eq!(lengths[0]["sample"], 20);
    assert!(lengths[0]["timestamp"].as_u64().unwrap() > 1_600_000_000_000);

    // A publish rate shows while messages flow.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let publisher = {
        let h = h.clone();
        let stop = stop.clone();
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                h.post(
                    "/api/exchanges/%2F/amq.default/publish",
                    &json!({"routing_key": "rated", "payload": "r"}),
                );
                std::thread::sleep(Duration::from_millis(5));
            }
        })
    };
    eventually("a publish rate", || {
        let q = h.get("/api/queues/%2F/rated").json();
        q["message_stats"]["publish_details"]["rate"]
            .as_f64()
            .unwrap()
            > 0.0
            && q["messages_details"]["rate"].as_f64().unwrap() > 0.0
    });
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    publisher.join().unwrap();
}

/// One sample of an exposition: name, labels, value.
type Sample = (String, Vec<(String, String)>, f64);

/// Checks the text exposition format line by line: names, label syntax and escapes,
/// values, one `# HELP`/`# TYPE` group per family with its samples together. Returns the
/// samples as (name, labels, value).
fn parse_exposition(text: &str) -> Vec<Sample> {
    fn name_ok(n: &str) -> bool {
        let mut chars = n.chars();
        chars
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
            && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
    }
    let mut samples = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut family = String::new();
    for (i, line) in text.lines().enumerate() {
        let at = format!("line {}: {line}", i + 1);
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let name = rest.split(' ').next().unwrap();
            assert!(name_ok(name), "{at}");
            assert!(seen.insert(name.to_owned()), "family twice: {at}");
            family = name.to_owned();
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').expect(&at);
            assert_eq!(name, family, "{at}");
            assert!(["counter", "gauge"].contains(&kind), "{at}");
            continue;
        }
        assert!(!line.starts_with('#') && !line.is_empty(), "{at}");
        let (name, rest) = match line.find(['{', ' ']) {
            Some(p) => line.split_at(p),
            None => panic!("{at}"),
        };
        assert_eq!(name, family, "a sample outside its family: {at}");
        let mut labels = Vec::new();
        let value_text = if let Some(mut l) = rest.strip_prefix('{') {
            loop {
                if let Some(r) = l.strip_prefix('}') {
                    break r;
                }
                let eq = l.find('=').expect(&at);
                let key = &l[..eq];
                assert!(name_ok(key) && !key.contains(':'), "{at}");
                let mut chars = l[eq + 1..].char_indices();
                assert_eq!(chars.next().map(|(_, c)| c), Some('"'), "{at}");
                let mut value = String::new();
                let end = loop {
                    match chars.next().expect(&at) {
                        (_, '\\') => match chars.next().expect(&at).1 {
                            '\\' => value.push('\\'),
                            '"' => value.push('"'),
                            'n' => value.push('\n'),
                            other => panic!("bad escape \\{other}: {at}"),
                        },
                        (p, '"') => break p,
                        (_, '\n') => panic!("{at}"),
                        (_, c) => value.push(c),
                    }
                };
                labels.push((key.to_owned(), value));
                l = &l[eq + 1 + end + 1..];
                if let Some(r) = l.strip_prefix(',') {
                    l = r;
                }
            }
        } else {
            rest
        };
        let value: f64 = value_text.strip_prefix(' ').expect(&at).parse().expect(&at);
        samples.push((name.to_owned(), labels, value));
    }
    samples
}

#[test]
fn metrics_are_a_valid_prometheus_exposition() {
    let b = Ferryd::start_mgmt(&[]);
    let h = http(&b);
    let odd = "we\"ird\\queue";
    h.put(
        &format!("/api/queues/%2F/{}", seg(odd)),
        &json!({"durable": false}),
    )
    .expect(201);
    h.put("/api/queues/%2F/metered", &json!({"durable": false}))
        .expect(201);
    let mut c = Raw091::open(b.addr);
    for _ in 0..3 {
        c.publish("", "metered", &BasicProperties::default(), b"xyz");
    }
    c.publish("", odd, &BasicProperties::default(), b"q");
    eventually("messages", || {
        h.get("/api/queues/%2F/metered").json()["messages"] == 3
    });
    let r = h.get("/metrics").expect(200);
    assert_eq!(
        r.header("content-type"),
        Some("text/plain; version=0.0.4; charset=utf-8")
    );
    let text = r.text();
    let samples = parse_exposition(&text);
    let find = |name: &str, labels: &[(&str, &str)]| {
        samples
            .iter()
            .find(|(n, l, _)| {
                n == name
                    && labels
                        .iter()
                        .all(|(k, v)| l.iter().any(|(lk, lv)| lk == k && lv == v))
            })
            .map(|(_, _, v)| *v)
            .unwrap_or_else(|| panic!("no {name} {labels:?} in\n{text}"))
    };
    let q = [("queue", "metered"), ("vhost", "/")];
    assert_eq!(find("ferry_queue_messages_ready", &q), 3.0);
    assert_eq!(find("ferry_queue_messages_unacked", &q), 0.0);
    assert_eq!(find("ferry_queue_messages_published_total", &q), 3.0);
    assert_eq!(find("ferry_queue_consumers", &q), 0.0);
    assert_eq!(find("ferry_queue_messages_ready", &[("queue", odd)]), 1.0);
    assert!(text.contains(r#"queue="we\"ird\\queue""#));
    assert_eq!(find("ferry_queues", &[]), 2.0);
    assert_eq!(find("ferry_connections", &[]), 1.0);
    assert!(find("ferry_process_resident_memory_bytes", &[]) > 0.0);
    assert_eq!(find("ferry_alarms_memory_used_watermark", &[]), 0.0);
    assert_eq!(find("ferry_store_syncs_total", &[]), 0.0);
    assert!(find("ferry_global_messages_received_total", &[]) >= 4.0);
    assert_eq!(
        find(
            "ferry_exchange_messages_published_in_total",
            &[("exchange", "")]
        ),
        4.0
    );
    eventually("connection traffic in the metrics", || {
        let text = h.get("/metrics").text();
        parse_exposition(&text).iter().any(|(n, l, v)| {
            n == "ferry_connection_incoming_bytes_total"
                && l.iter().any(|(k, v)| k == "protocol" && v == "AMQP 0-9-1")
                && *v > 0.0
        })
    });
    // The checker itself refuses what is not the format.
    for bad in [
        "# HELP a x\n# TYPE a gauge\na{q=\"x\\y\"} 1\n",
        "# HELP a x\n# TYPE a gauge\nb 1\n",
        "# HELP a x\n# TYPE a gauge\na{q=\"x\"} one\n",
    ] {
        assert!(
            std::panic::catch_unwind(|| parse_exposition(bad)).is_err(),
            "{bad}"
        );
    }
}

#[test]
fn paging_sorting_and_columns() {
    let b = Ferryd::start_mgmt(&[]);
    let h = http(&b);
    for i in 0..30 {
        h.put(
            &format!("/api/queues/%2F/p-{i:02}"),
            &json!({"durable": false}),
        )
        .expect(201);
    }
    for i in 0..5 {
        h.post(
            "/api/exchanges/%2F/amq.default/publish",
            &json!({"routing_key": format!("p-{:02}", 10 + i), "payload": "x".repeat(i + 1)}),
        )
        .expect(200);
    }
    let page = h
        .get("/api/queues?page=2&page_size=10&name=p-&sort=name&sort_reverse=true&columns=name,messages")
        .expect(200)
        .json();
    assert_eq!(page["total_count"], 30);
    assert_eq!(page["filtered_count"], 30);
    assert_eq!(page["page"], 2);
    assert_eq!(page["page_size"], 10);
    assert_eq!(page["page_count"], 3);
    assert_eq!(page["item_count"], 10);
    assert_eq!(page["items"][0], json!({"name": "p-19", "messages": 0}));
    assert_eq!(page["items"][5], json!({"name": "p-14", "messages": 1}));
    let by_bytes = h
        .get("/api/queues?page=1&page_size=3&sort=message_bytes&sort_reverse=true&columns=name")
        .json();
    assert_eq!(
        by_bytes["items"],
        json!([{"name": "p-14"}, {"name": "p-13"}, {"name": "p-12"}])
    );
    let regex = h
        .get("/api/queues?page=1&name=%5Ep-2%5B0-4%5D%24&use_regex=true")
        .json();
    assert_eq!(regex["filtered_count"], 5);
    let unpaged = h.get("/api/queues?sort=name&columns=name").json();
    assert_eq!(unpaged.as_array().unwrap().len(), 30);
    let empty = h.get("/api/queues?page=1&name=nothing-like-it").json();
    assert_eq!(empty["filtered_count"], 0);
    assert_eq!(empty["items"], json!([]));
    let nested = h
        .get("/api/exchanges?columns=name,message_stats.publish_in&name=amq.default")
        .json();
    assert_eq!(
        nested.as_array().unwrap().len(),
        0,
        "the default exchange is \"\""
    );
}

#[test]
fn an_operator_may_delete_a_queue_exclusive_to_a_client() {
    let b = Ferryd::start_mgmt(&[]);
    let h = http(&b);
    let mut c = Raw091::open(b.addr);
    c.call(
        ferry_amqp091::QueueDeclare {
            queue: ShortStr::from_static("mine-only"),
            exclusive: true,
            ..Default::default()
        },
        |m| matches!(m, Method::QueueDeclareOk(_)),
    );
    let q = h.get("/api/queues/%2F/mine-only").expect(200).json();
    assert_eq!(q["exclusive"], true);
    // Others may not take its messages...
    let r = h.post(
        "/api/queues/%2F/mine-only/get",
        &json!({"count": 1, "ackmode": "ack_requeue_true"}),
    );
    assert_eq!(r.status, 400, "{}", r.text());
    // ...but an operator may delete it.
    h.delete("/api/queues/%2F/mine-only").expect(204);
    h.get("/api/queues/%2F/mine-only").expect(404);
    // The client's connection carries on.
    c.declare_queue("after", Default::default());
}

#[test]
fn a_consumers_selector_and_timeout_show_in_management() {
    let b = Ferryd::start_mgmt(&[]);
    let h = http(&b);
    let mut c = Raw091::open(b.addr);
    c.declare_queue("selective", Default::default());
    let mut arguments = ferry_amqp091::FieldTable::new();
    arguments.push(
        ShortStr::from_static("x-filter-jms-selector"),
        FieldValue::LongStr(ferry_amqp091::LongStr::from_static("colour = 'red'")),
    );
    c.call(
        ferry_amqp091::BasicConsume {
            queue: ShortStr::from_static("selective"),
            consumer_tag: ShortStr::from_static("reds"),
            arguments,
            ..Default::default()
        },
        |m| matches!(m, Method::BasicConsumeOk(_)),
    );
    c.consume("selective");
    let mut arguments = ferry_amqp091::FieldTable::new();
    arguments.push(
        ShortStr::from_static("x-consumer-timeout"),
        FieldValue::I64(5000),
    );
    c.call(
        ferry_amqp091::BasicConsume {
            queue: ShortStr::from_static("selective"),
            consumer_tag: ShortStr::from_static("patient"),
            arguments,
            ..Default::default()
        },
        |m| matches!(m, Method::BasicConsumeOk(_)),
    );
    let consumers = h.get("/api/consumers").expect(200).json();
    let by_tag = |tag: &str| {
        consumers
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["consumer_tag"] == tag)
            .unwrap_or_else(|| panic!("no {tag} in {consumers}"))
            .clone()
    };
    assert_eq!(
        by_tag("reds")["arguments"],
        json!({ "x-filter-jms-selector": "colour = 'red'" })
    );
    assert_eq!(
        by_tag("c")["arguments"],
        json!({}),
        "no selector, no arguments"
    );
    assert_eq!(
        by_tag("reds")["consumer_timeout"],
        1_800_000,
        "--consumer-timeout's default"
    );
    assert_eq!(
        by_tag("c")["consumer_timeout"],
        Value::Null,
        "no-ack: nothing to wait for"
    );
    assert_eq!(
        by_tag("patient")["consumer_timeout"],
        5000,
        "its own x-consumer-timeout"
    );
}
