//! Replicated queues on a 3-node cluster of real ferryd processes (loopback addresses
//! 127.0.0.11.., see `ferry_tools::chaos::nodes`): formation and status, the cluster
//! port's authentication, publish with confirms through a follower, failover after kill -9
//! of the leader with nothing confirmed lost, delivery counts across a failover, a 0-10
//! client on a `qpid.replicated` queue, prepared dtx branches rolled back and committed,
//! membership changes under traffic, and a short chaos run (kill -9, pause, partition).
//!
//! `FERRY_CHAOS_SECONDS` sets the chaos run's length (default 20; scripts/test.sh runs a
//! longer one with `ferry chaos`), `FERRY_CHAOS_SEED` its seed. The tests run one at a time
//! (each starts three brokers) and use a 500 ms election timeout, so a loaded machine does
//! not turn slow scheduling into elections.

// The `serial` guard is held for a whole test, awaits included: it only keeps tests apart.
#![allow(clippy::await_holding_lock)]

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ferry_amqp010::XaStatus;
use ferry_client091::{
    BasicProperties, ConnectOptions, Connection, ConsumeOptions, Publication, QueueOptions,
};
use ferry_cluster::{AdminRequest, AdminResponse, Credentials};
use ferry_tools::chaos::nodes::Nodes;
use ferry_tools::chaos::workload::{self, quorum_args, History};
use ferry_tools::chaos::{self, ChaosOpts};

/// One cluster at a time: a 2-core machine running two sets of three brokers (and the
/// other test binaries' work) would time out heartbeats.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

const ELECTION_MS: u64 = 500;

fn dir(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("ferry-cluster-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

async fn cluster(name: &str, n: u64) -> (Nodes, std::path::PathBuf) {
    let d = dir(name);
    let mut nodes = Nodes::new(
        std::path::Path::new(env!("CARGO_BIN_EXE_ferryd")),
        &d,
        n,
        ELECTION_MS,
        &[],
    )
    .await
    .expect("nodes");
    for id in 1..=n {
        nodes.spawn(id, true).expect("spawn");
    }
    (nodes, d)
}

async fn connect(addr: std::net::SocketAddr) -> Connection {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let opts = ConnectOptions {
            connect_timeout: Duration::from_secs(2),
            ..ConnectOptions::default()
        };
        match Connection::connect(addr, &opts).await {
            Ok(c) => return c,
            Err(e) if Instant::now() > deadline => panic!("cannot connect to {addr}: {e}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

async fn declare_quorum(c: &mut Connection, ch: u16, queue: &str) {
    let q = QueueOptions {
        durable: true,
        ..QueueOptions::default()
    };
    c.queue_declare(ch, queue, q, quorum_args())
        .await
        .expect("declare quorum queue");
}

/// Publishes `ids` with confirms (all confirmed, or a panic).
async fn publish_confirmed(
    c: &mut Connection,
    ch: u16,
    queue: &str,
    ids: impl Iterator<Item = String>,
) {
    c.confirm_select(ch, 100).await.expect("confirm.select");
    let p = Publication::new(ch, "", queue, BasicProperties::default(), 0).expect("publication");
    for id in ids {
        c.publish(&p, id.as_bytes()).await.expect("publish");
    }
    tokio::time::timeout(Duration::from_secs(20), c.wait_confirms(ch))
        .await
        .expect("confirms in time")
        .expect("all confirmed");
}

/// Receives (and acks, if `ack`) up to `n` messages, stopping after a quiet second.
async fn receive(c: &mut Connection, ch: u16, queue: &str, n: usize, ack: bool) -> Vec<String> {
    c.qos(ch, 500, false).await.expect("qos");
    c.consume(ch, queue, "t", ConsumeOptions::default())
        .await
        .expect("consume");
    let mut got = Vec::new();
    while got.len() < n {
        match tokio::time::timeout(Duration::from_secs(3), c.next_delivery(ch, "t")).await {
            Ok(Ok(d)) => {
                got.push(String::from_utf8_lossy(&d.body).into_owned());
                if ack {
                    c.ack(ch, d.delivery_tag, false);
                }
            }
            _ => break,
        }
    }
    c.flush().await.expect("flush");
    got
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_forms_reports_status_and_refuses_strangers() {
    let _one = serial();
    let (nodes, d) = cluster("status", 3).await;
    // Every node agrees on the leader and its term, and the status table says so. The
    // leader serves once one follower has its entries, so the other may learn of it a
    // heartbeat later; and a node that started late on a loaded machine may call an
    // election before it hears from the first leader, so agreement is awaited as a whole.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let (leader, status, views) = loop {
        let leader = nodes
            .wait_serving(Duration::from_secs(30))
            .await
            .expect("a leader");
        let status = nodes.status(leader).await.expect("status");
        let mut views = Vec::new();
        for m in &status.members {
            views.push((m.clone(), nodes.status(m.id).await));
        }
        let agreed = views.iter().all(|(_, v)| {
            v.as_ref()
                .is_some_and(|v| v.leader == Some(leader) && v.term == status.term)
        });
        if agreed || tokio::time::Instant::now() >= deadline {
            break (leader, status, views);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(status.state, "leader");
    assert_eq!(status.leader, Some(leader));
    assert_eq!(status.members.len(), 3);
    assert!(status.members.iter().all(|m| m.voter));
    for (m, v) in &views {
        let v = v.as_ref().expect("each node answers");
        assert_eq!(v.leader, Some(leader), "node {} agrees", m.id);
        assert_eq!(v.term, status.term, "node {} has the leader's term", m.id);
    }
    let table = ferry_tools::cluster::render(&status, &views);
    assert!(table.contains("leader"), "{table}");
    // The wrong secret, or the wrong cluster name, gets nothing.
    let addr = nodes.specs[0].cluster.to_string();
    for creds in [
        Credentials {
            cluster: "chaos".into(),
            secret: b"not-the-secret-at-all".to_vec(),
        },
        Credentials {
            cluster: "other".into(),
            secret: nodes.creds.secret.clone(),
        },
    ] {
        let r =
            ferry_cluster::rpc::admin(&addr, &creds, &AdminRequest::Status, Duration::from_secs(2))
                .await;
        assert!(r.is_err(), "refused: {r:?}");
    }
    // A raw peer that sends garbage instead of the handshake is dropped.
    let mut raw = tokio::net::TcpStream::connect(&addr)
        .await
        .expect("connect");
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut hello = [0u8; 64];
    let _ = raw.read(&mut hello).await;
    raw.write_all(&[0xff; 64]).await.expect("write");
    let mut rest = Vec::new();
    let closed = tokio::time::timeout(Duration::from_secs(6), raw.read_to_end(&mut rest)).await;
    assert!(closed.is_ok(), "the node hangs up");
    drop(nodes);
    let _ = std::fs::remove_dir_all(d);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn confirmed_messages_survive_kill_9_of_the_leader() {
    let _one = serial();
    let (mut nodes, d) = cluster("failover", 3).await;
    let leader = nodes
        .wait_serving(Duration::from_secs(30))
        .await
        .expect("a leader");
    let follower = (1..=3).find(|n| *n != leader).expect("a follower");
    // Through a follower, which passes the connection on to the leader.
    let mut c = connect(nodes.specs[(follower - 1) as usize].amqp).await;
    let ch = c.open_channel().await.expect("channel");
    declare_quorum(&mut c, ch, "q").await;
    let ids: Vec<String> = (0..500).map(|i| format!("m{i}")).collect();
    publish_confirmed(&mut c, ch, "q", ids.iter().cloned()).await;
    // A classic queue on the same connection works as ever.
    c.queue_declare(ch, "classic", QueueOptions::default(), Default::default())
        .await
        .expect("classic queue");
    let ch2 = c.open_channel().await.expect("channel");
    let acked = receive(&mut c, ch2, "q", 100, true).await;
    assert_eq!(acked.len(), 100);
    // Let the acks commit, then kill the leader.
    tokio::time::sleep(Duration::from_millis(500)).await;
    drop(c);
    let killed_at = Instant::now();
    nodes.kill(leader);
    let new = nodes
        .wait_serving(Duration::from_secs(20))
        .await
        .expect("a new leader");
    let failover = killed_at.elapsed();
    assert_ne!(new, leader);
    assert!(
        failover < Duration::from_secs(10),
        "failover took {failover:?}"
    );
    let survivor = (1..=3).find(|n| *n != leader).expect("survivor");
    let mut c = connect(nodes.specs[(survivor - 1) as usize].amqp).await;
    let ch = c.open_channel().await.expect("channel");
    declare_quorum(&mut c, ch, "q").await;
    let rest: HashSet<String> = receive(&mut c, ch, "q", 1000, true)
        .await
        .into_iter()
        .collect();
    let acked: HashSet<String> = acked.into_iter().collect();
    for id in &ids {
        assert!(acked.contains(id) || rest.contains(id), "{id} lost");
    }
    assert!(rest.iter().all(|id| ids.contains(id)), "nothing unexpected");
    eprintln!(
        "failover in {failover:?}; {} redelivered after the kill",
        rest.len()
    );
    // The killed node comes back and catches up.
    nodes.spawn(leader, true).expect("restart");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (a, b) = (nodes.status(leader).await, nodes.status(new).await);
        if let (Some(a), Some(b)) = (a, b) {
            if a.last_applied.is_some()
                && a.last_applied >= b.last_applied.map(|x| x.saturating_sub(2))
            {
                break;
            }
        }
        assert!(Instant::now() < deadline, "the restarted node catches up");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    drop(nodes);
    let _ = std::fs::remove_dir_all(d);
}

/// The `x-delivery-count` a delivery carries (0: none).
fn delivery_count(d: &ferry_client091::Delivery) -> i64 {
    match d
        .properties
        .headers
        .as_ref()
        .and_then(|h| h.get("x-delivery-count"))
    {
        Some(ferry_amqp091::FieldValue::I64(n)) => *n,
        Some(other) => panic!("x-delivery-count is {other:?}"),
        None => 0,
    }
}

/// Consumes the queue's next delivery within a few seconds.
async fn next(c: &mut Connection, ch: u16) -> Option<ferry_client091::Delivery> {
    match tokio::time::timeout(Duration::from_secs(3), c.next_delivery(ch, "t")).await {
        Ok(Ok(d)) => Some(d),
        _ => None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delivery_limits_count_survives_failover() {
    let _one = serial();
    let (mut nodes, dir) = cluster("counts", 3).await;
    let leader = nodes
        .wait_serving(Duration::from_secs(30))
        .await
        .expect("a leader");
    let mut c = connect(nodes.specs[(leader - 1) as usize].amqp).await;
    let ch = c.open_channel().await.expect("channel");
    let mut args = quorum_args();
    args.insert(
        ferry_amqp091::ShortStr::try_from("x-delivery-limit").expect("key"),
        ferry_amqp091::FieldValue::I64(3),
    );
    let q = QueueOptions {
        durable: true,
        ..QueueOptions::default()
    };
    c.queue_declare(ch, "poison", q, args.clone())
        .await
        .expect("declare");
    publish_confirmed(&mut c, ch, "poison", std::iter::once("p".to_string())).await;
    c.qos(ch, 1, false).await.expect("qos");
    c.consume(ch, "poison", "t", ConsumeOptions::default())
        .await
        .expect("consume");
    // Two returns on the first leader; the third delivery is in flight when it dies.
    for expected in 0..2 {
        let d = next(&mut c, ch).await.expect("a delivery");
        assert_eq!(delivery_count(&d), expected);
        c.nack(ch, d.delivery_tag, false, true);
        c.flush().await.expect("flush");
    }
    let d = next(&mut c, ch).await.expect("the third delivery");
    assert_eq!(delivery_count(&d), 2);
    // Let the counts commit, then kill the leader with the delivery still out: closing the
    // connection first would return it, a third count.
    tokio::time::sleep(Duration::from_millis(500)).await;
    nodes.kill(leader);
    drop(c);
    let new = nodes
        .wait_serving(Duration::from_secs(20))
        .await
        .expect("a new leader");
    let mut c = connect(nodes.specs[(new - 1) as usize].amqp).await;
    let ch = c.open_channel().await.expect("channel");
    c.qos(ch, 1, false).await.expect("qos");
    c.consume(ch, "poison", "t", ConsumeOptions::default())
        .await
        .expect("consume");
    // The new leader counts on from the replica: a third and a fourth delivery, and the
    // fourth return is over the limit.
    for expected in 2..4 {
        let d = next(&mut c, ch)
            .await
            .expect("a delivery on the new leader");
        assert_eq!(
            delivery_count(&d),
            expected,
            "the count went on across the failover"
        );
        c.nack(ch, d.delivery_tag, false, true);
        c.flush().await.expect("flush");
    }
    assert!(
        next(&mut c, ch).await.is_none(),
        "dropped after its fourth return"
    );
    drop(c);
    drop(nodes);
    let _ = std::fs::remove_dir_all(dir);
}

/// Over 0-10 to `addr` (the leader): declares `qpid.replicated` queue `queue` and publishes
/// `bodies` to it as persistent messages, each completed (so replicated) before the next.
async fn publish_010_replicated(
    addr: std::net::SocketAddr,
    queue: &str,
    bodies: impl IntoIterator<Item = String>,
) -> (ferry_client::Connection, ferry_client::Session) {
    use ferry_amqp010::{Map, Str, Value};
    use ferry_client::{ConnectOptions, OutgoingMessage, QueueDeclareOptions};
    let conn = ferry_client::Connection::connect(addr, ConnectOptions::default())
        .await
        .expect("0-10 connect");
    let s = conn.session().await.expect("session");
    let mut args = Map::new();
    args.insert(Str::from("qpid.replicated"), Value::Bool(true));
    let opts = QueueDeclareOptions {
        durable: true,
        arguments: Some(args),
        ..QueueDeclareOptions::default()
    };
    s.queue_declare(queue, opts).await.expect("declare");
    for body in bodies {
        let m = OutgoingMessage::builder()
            .routing_key(queue)
            .persistent(true)
            .body(body)
            .build()
            .expect("message");
        s.transfer_sync("", &m)
            .await
            .expect("completed after commit");
    }
    (conn, s)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_010_client_publishes_to_a_qpid_replicated_queue() {
    let _one = serial();
    let (mut nodes, d) = cluster("amqp010", 3).await;
    let leader = nodes
        .wait_serving(Duration::from_secs(30))
        .await
        .expect("a leader");
    let addr = nodes.specs[(leader - 1) as usize].amqp;
    let (conn, s) = publish_010_replicated(addr, "r010", (0..50).map(|i| format!("x{i}"))).await;
    drop(s);
    drop(conn);
    nodes.kill(leader);
    nodes
        .wait_serving(Duration::from_secs(20))
        .await
        .expect("a new leader");
    let other = (1..=3).find(|n| *n != leader).expect("other");
    let mut c = connect(nodes.specs[(other - 1) as usize].amqp).await;
    let ch = c.open_channel().await.expect("channel");
    let got: HashSet<String> = receive(&mut c, ch, "r010", 100, true)
        .await
        .into_iter()
        .collect();
    for i in 0..50 {
        assert!(got.contains(&format!("x{i}")), "x{i} lost");
    }
    drop(nodes);
    let _ = std::fs::remove_dir_all(d);
}

/// Runs a dtx command and returns its XA status.
async fn xa(s: &ferry_client::Session, command: impl Into<ferry_amqp010::Command>) -> XaStatus {
    let result = s.execute(command).await.expect("dtx command");
    let result: ferry_amqp010::XaResult =
        result.expect("an xa-result").decode_as().expect("decodes");
    result.status.expect("a status")
}

fn xid(name: &str) -> Option<ferry_amqp010::Xid> {
    Some(ferry_amqp010::Xid {
        format: Some(1),
        global_id: Some(bytes::Bytes::copy_from_slice(name.as_bytes())),
        branch_id: Some(bytes::Bytes::from_static(b"b")),
    })
}

/// A dtx branch on a new session: takes the queue's first message and publishes `body`,
/// then ends and prepares. Returns the session and the body it took.
async fn prepared_branch(
    conn: &ferry_client::Connection,
    queue: &str,
    name: &str,
    body: &str,
) -> (ferry_client::Session, String) {
    use ferry_amqp010::{AcceptMode, DtxEnd, DtxPrepare, DtxSelect, DtxStart, SequenceSet};
    use ferry_client::{FlowMode, OutgoingMessage, SubscribeOptions};
    let s = conn.session().await.expect("session");
    s.execute(DtxSelect {}).await.expect("dtx.select");
    let start = DtxStart {
        xid: xid(name),
        ..Default::default()
    };
    assert_eq!(xa(&s, start).await, XaStatus::XaOk);
    let opts = SubscribeOptions {
        accept_mode: AcceptMode::Explicit,
        // Credit, not a window: the accept must not let a second message come.
        flow_mode: FlowMode::Credit,
        message_credit: 1,
        ..SubscribeOptions::default()
    };
    let mut sub = s.subscribe(queue, name, opts).await.expect("subscribe");
    let d = tokio::time::timeout(Duration::from_secs(10), sub.next())
        .await
        .expect("a message in time")
        .expect("a message");
    s.accept(&SequenceSet::from_range(d.id, d.id))
        .await
        .expect("accept");
    let m = OutgoingMessage::builder()
        .routing_key(queue)
        .persistent(true)
        .body(body.to_owned())
        .build()
        .expect("message");
    s.transfer("", &m).await.expect("transfer");
    s.sync().await.expect("staged");
    let end = DtxEnd {
        xid: xid(name),
        ..Default::default()
    };
    assert_eq!(xa(&s, end).await, XaStatus::XaOk);
    sub.cancel().await.expect("cancel");
    assert_eq!(xa(&s, DtxPrepare { xid: xid(name) }).await, XaStatus::XaOk);
    (s, String::from_utf8_lossy(&d.body).into_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolled_back_dtx_branch_leaves_the_replica_as_it_was() {
    let _one = serial();
    use ferry_amqp010::{DtxCommit, DtxRollback};
    let (mut nodes, d) = cluster("dtx", 3).await;
    let leader = nodes
        .wait_serving(Duration::from_secs(30))
        .await
        .expect("a leader");
    let addr = nodes.specs[(leader - 1) as usize].amqp;
    let (conn, s) = publish_010_replicated(addr, "xa", ["a".into(), "b".into()]).await;
    // Two prepared branches each take a message and publish one. x rolls back: neither
    // its take nor its publish may reach the replica. y commits: both must.
    let (sx, x_took) = prepared_branch(&conn, "xa", "x", "rolled-back").await;
    let (sy, y_took) = prepared_branch(&conn, "xa", "y", "committed").await;
    assert_eq!((x_took.as_str(), y_took.as_str()), ("a", "b"));
    assert_eq!(xa(&sx, DtxRollback { xid: xid("x") }).await, XaStatus::XaOk);
    let commit = DtxCommit {
        xid: xid("y"),
        one_phase: false,
    };
    assert_eq!(xa(&sy, commit).await, XaStatus::XaOk);
    drop((sx, sy, s));
    drop(conn);
    nodes.kill(leader);
    let new = nodes
        .wait_serving(Duration::from_secs(20))
        .await
        .expect("a new leader");
    let mut c = connect(nodes.specs[(new - 1) as usize].amqp).await;
    let ch = c.open_channel().await.expect("channel");
    let mut got = receive(&mut c, ch, "xa", 10, true).await;
    got.sort();
    assert_eq!(got, ["a", "committed"]);
    drop(nodes);
    let _ = std::fs::remove_dir_all(d);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_are_added_and_removed_while_traffic_flows() {
    let _one = serial();
    let d = dir("membership");
    let mut nodes = Nodes::new(
        std::path::Path::new(env!("CARGO_BIN_EXE_ferryd")),
        &d,
        3,
        ELECTION_MS,
        &[],
    )
    .await
    .expect("nodes");
    for id in 1..=3 {
        nodes.spawn(id, true).expect("spawn");
    }
    nodes
        .wait_serving(Duration::from_secs(30))
        .await
        .expect("a leader");
    let history = Arc::new(Mutex::new(History::default()));
    let (stop_pub, stop_con) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    let addrs: workload::Addrs = Arc::new(Mutex::new(nodes.amqp_addrs()));
    let publisher = tokio::spawn(workload::publisher(
        0,
        addrs.clone(),
        "m".into(),
        20,
        300,
        history.clone(),
        stop_pub.clone(),
    ));
    let last = Arc::new(AtomicU64::new(0));
    let epoch = Instant::now();
    let consumer = tokio::spawn(workload::consumer(
        0,
        addrs,
        "m".into(),
        history.clone(),
        stop_con.clone(),
        epoch,
        last.clone(),
    ));
    tokio::time::sleep(Duration::from_secs(2)).await;
    // Add node 4: a learner that catches up, then a voter.
    let four = nodes.add_spec(&d).expect("spec");
    nodes.spawn(four, false).expect("spawn 4");
    let addr = nodes.specs[(four - 1) as usize].proxy.to_string();
    nodes
        .admin_to_leader(AdminRequest::AddNode { id: four, addr })
        .await
        .expect("add-node");
    tokio::time::sleep(Duration::from_secs(2)).await;
    // Remove the leader itself: another member takes over.
    let leader = nodes
        .wait_serving(Duration::from_secs(10))
        .await
        .expect("leader");
    nodes
        .admin_to_leader(AdminRequest::RemoveNode { id: leader })
        .await
        .expect("remove-node");
    let new = loop {
        let l = nodes
            .wait_serving(Duration::from_secs(20))
            .await
            .expect("a leader after removal");
        if l != leader {
            break l;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    nodes.kill(leader);
    let status = nodes.status(new).await.expect("status");
    let voters: Vec<u64> = status
        .members
        .iter()
        .filter(|m| m.voter)
        .map(|m| m.id)
        .collect();
    assert_eq!(voters.len(), 3, "{status:?}");
    assert!(
        voters.contains(&four) && !voters.contains(&leader),
        "{voters:?}"
    );
    // Admin requests to a follower name the leader.
    let follower = voters
        .iter()
        .copied()
        .find(|v| *v != new)
        .expect("follower");
    let answer = ferry_cluster::rpc::admin(
        &nodes.specs[(follower - 1) as usize].cluster.to_string(),
        &nodes.creds,
        &AdminRequest::RemoveNode { id: 99 },
        Duration::from_secs(2),
    )
    .await
    .expect("answer");
    assert!(
        matches!(answer, AdminResponse::NotLeader { leader: Some((l, _)) } if l == new),
        "{answer:?}"
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    stop_pub.store(true, Ordering::Relaxed);
    let _ = tokio::time::timeout(Duration::from_secs(20), publisher).await;
    // Drain.
    let deadline = Instant::now() + Duration::from_secs(40);
    loop {
        let quiet = epoch.elapsed().as_millis() as u64 - last.load(Ordering::Relaxed) > 2000;
        let empty = match nodes.wait_serving(Duration::from_secs(2)).await {
            Some(l) => nodes
                .status(l)
                .await
                .is_some_and(|s| s.queues.iter().all(|(_, n)| *n == 0)),
            None => false,
        };
        if (quiet && empty) || Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    stop_con.store(true, Ordering::Relaxed);
    let _ = tokio::time::timeout(Duration::from_secs(10), consumer).await;
    let v = chaos::check::check(&history.lock().unwrap());
    eprintln!("membership: {v:?}");
    assert!(v.confirmed > 100, "traffic flowed: {v:?}");
    assert_eq!(v.lost, 0, "{v:?}");
    assert_eq!(v.unexpected, 0, "{v:?}");
    drop(nodes);
    let _ = std::fs::remove_dir_all(d);
}

#[test]
fn chaos_short_run_loses_nothing() {
    let _one = serial();
    let seconds = std::env::var("FERRY_CHAOS_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20);
    let seed = std::env::var("FERRY_CHAOS_SEED")
        .ok()
        .and_then(|s| s.parse().ok());
    let opts = ChaosOpts {
        ferryd: Some(env!("CARGO_BIN_EXE_ferryd").into()),
        dir: Some(dir("chaos")),
        keep: false,
        duration: seconds,
        seed,
        nodes: 3,
        publishers: 2,
        consumers: 2,
        rate: 150,
        batch: 20,
        faults: vec!["kill".into(), "pause".into(), "partition".into()],
        interval: 2000,
        election_timeout: ELECTION_MS,
        drain_timeout: 60,
    };
    let report = chaos::run(&opts).expect("chaos run");
    eprint!("{report}");
    assert!(report.kills + report.pauses + report.partitions > 0);
    assert!(report.verdict.confirmed > 0, "{report}");
    assert_eq!(report.verdict.lost, 0, "{report}");
    assert_eq!(report.verdict.unexpected, 0, "{report}");
    assert!(report.drained, "{report}");
    let _ = std::fs::remove_dir_all(dir("chaos"));
}
