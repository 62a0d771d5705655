//! End to end against an in-process ferry-server: the client and the real broker.

use std::time::Duration;

use bytes::Bytes;
use ferry_client::{
    AcceptMode, AcquireMode, ClientError, ConnectOptions, Connection, ErrorCode,
    ExchangeDeclareOptions, FlowMode, OutgoingMessage, QueueDeclareOptions, SequenceSet,
    SubscribeOptions,
};
use ferry_core::{Broker, BrokerConfig};
use ferry_server::{Server, ServerConfig, Shutdown};

const WAIT: Duration = Duration::from_secs(10);

struct Running {
    addr: std::net::SocketAddr,
    _stop: tokio::sync::watch::Sender<bool>,
}

async fn broker() -> Running {
    let config = ServerConfig {
        port: 0,
        ..ServerConfig::default()
    };
    let server = Server::bind(config, Broker::new(BrokerConfig::default()), None)
        .await
        .unwrap();
    let addr = server.local_addr().unwrap();
    let (stop, shutdown) = Shutdown::new();
    tokio::spawn(server.run(shutdown));
    Running { addr, _stop: stop }
}

async fn connect(b: &Running) -> Connection {
    Connection::connect(b.addr, ConnectOptions::default())
        .await
        .unwrap()
}

#[tokio::test]
async fn publish_and_consume_with_properties_and_accept() {
    let b = broker().await;
    let conn = connect(&b).await;
    let s = conn.session().await.unwrap();
    s.queue_declare("q", QueueDeclareOptions::default())
        .await
        .unwrap();
    for i in 0..100u32 {
        let m = OutgoingMessage::builder()
            .routing_key("q")
            .header("n", i)
            .correlation_id(i.to_string())
            .body(format!("m{i}"))
            .build()
            .unwrap();
        s.transfer("", &m).await.unwrap();
    }
    s.sync().await.unwrap();
    let q = s.queue_query("q").await.unwrap();
    assert_eq!(q.message_count, Some(100));

    let options = SubscribeOptions {
        accept_mode: AcceptMode::Explicit,
        flow_mode: FlowMode::Window,
        message_credit: 10,
        ..Default::default()
    };
    let mut sub = s.subscribe("q", "d", options).await.unwrap();
    let mut ids = SequenceSet::new();
    for i in 0..100u32 {
        let d = tokio::time::timeout(WAIT, sub.next())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(&d.body[..], format!("m{i}").as_bytes());
        assert_eq!(
            d.application_header("n").and_then(|v| v.as_i64()),
            Some(i64::from(i))
        );
        assert_eq!(d.routing_key().unwrap(), "q");
        ids.add(d.id);
    }
    s.accept(&ids).await.unwrap();
    s.sync().await.unwrap();
    assert_eq!(s.queue_query("q").await.unwrap().message_count, Some(0));
    s.close().await.unwrap();
    conn.close().await.unwrap();
}

#[tokio::test]
async fn management_results_and_exceptions() {
    let b = broker().await;
    let conn = connect(&b).await;
    let s = conn.session().await.unwrap();
    s.exchange_declare("x", "topic", ExchangeDeclareOptions::default())
        .await
        .unwrap();
    let x = s.exchange_query("x").await.unwrap();
    assert_eq!(x.r#type.unwrap(), "topic");
    assert!(s.exchange_query("nope").await.unwrap().not_found);
    s.queue_declare("q", QueueDeclareOptions::default())
        .await
        .unwrap();
    s.exchange_bind("q", "x", "a.#", None).await.unwrap();
    let bound = s
        .exchange_bound("x", Some("q"), Some("a.#"), None)
        .await
        .unwrap();
    assert!(!bound.exchange_not_found && !bound.queue_not_found && !bound.key_not_matched);

    // A refusal fails its call and the session; other sessions carry on.
    let other = conn.session().await.unwrap();
    let passive = QueueDeclareOptions {
        passive: true,
        ..Default::default()
    };
    let e = s.queue_declare("missing", passive).await.unwrap_err();
    assert_eq!(e.error_code(), Some(ErrorCode::NotFound), "{e}");
    assert_eq!(
        s.sync().await.unwrap_err().error_code(),
        Some(ErrorCode::NotFound)
    );
    other.queue_purge("q").await.unwrap();
    other.exchange_unbind("q", "x", "a.#").await.unwrap();
    other.queue_delete("q", false, false).await.unwrap();
    other.exchange_delete("x", false).await.unwrap();
}

#[tokio::test]
async fn transfer_sync_to_a_missing_exchange_is_not_found() {
    let b = broker().await;
    let conn = connect(&b).await;
    let s = conn.session().await.unwrap();
    let e = s
        .transfer_sync("no-such-exchange", &OutgoingMessage::new("x"))
        .await
        .unwrap_err();
    assert!(
        matches!(
            e,
            ClientError::Exception {
                code: ErrorCode::NotFound,
                ..
            }
        ),
        "{e}"
    );
}

#[tokio::test]
async fn large_bodies_and_not_acquired_release() {
    let b = broker().await;
    let conn = connect(&b).await;
    let s = conn.session().await.unwrap();
    s.queue_declare("big", QueueDeclareOptions::default())
        .await
        .unwrap();
    let body: Bytes = (0..300_000u32).map(|i| i as u8).collect::<Vec<_>>().into();
    let m = OutgoingMessage::builder()
        .routing_key("big")
        .body(body.clone())
        .build()
        .unwrap();
    s.transfer_sync("", &m).await.unwrap();

    let options = SubscribeOptions {
        accept_mode: AcceptMode::Explicit,
        acquire_mode: AcquireMode::NotAcquired,
        flow_mode: FlowMode::Credit,
        message_credit: 1,
        ..Default::default()
    };
    let mut sub = s.subscribe("big", "d", options).await.unwrap();
    let d = tokio::time::timeout(WAIT, sub.next())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(d.body, body);
    let acquired = s.acquire(&d.id_set()).await.unwrap();
    assert_eq!(acquired, d.id_set());
    s.release(&acquired, true).await.unwrap();
    s.message_cancel("d").await.unwrap();

    let mut again = s
        .subscribe("big", "e", SubscribeOptions::default())
        .await
        .unwrap();
    let d = tokio::time::timeout(WAIT, again.next())
        .await
        .unwrap()
        .unwrap();
    assert!(d.redelivered);
    assert_eq!(d.body.len(), body.len());
}

#[tokio::test]
async fn pipelined_publishing_beyond_the_window() {
    let b = broker().await;
    let conn = connect(&b).await;
    let s = conn
        .session_with(ferry_client::SessionOptions {
            window: 64,
            ..Default::default()
        })
        .await
        .unwrap();
    s.queue_declare("p", QueueDeclareOptions::default())
        .await
        .unwrap();
    let m = OutgoingMessage::builder()
        .routing_key("p")
        .body(vec![0u8; 256])
        .build()
        .unwrap();
    for _ in 0..20_000 {
        s.transfer("", &m).await.unwrap();
        assert!(s.in_flight() <= 64);
    }
    s.sync().await.unwrap();
    assert_eq!(
        s.queue_query("p").await.unwrap().message_count,
        Some(20_000)
    );
}
