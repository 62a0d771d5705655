//! Transactions are atomic across a crash: movers take persistent messages off `tx-in` and
//! publish them to `tx-out` inside one transaction each (0-10 tx over ferry-client, 0-9-1 tx
//! over a raw peer), while ferryd is killed with SIGKILL at random moments and restarted. At
//! the end every message a producer got completed is in exactly one of the two queues: a
//! commit that reached the disk only in part would leave it in both (or in neither), and
//! every message whose commit was confirmed is in `tx-out`.
//!
//! `FERRY_TX_CRASH_CYCLES` sets the number of kills (default 10); `FERRY_TX_CRASH_SEED`
//! replays a run's random timings.

mod common;

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::kills::{
    declare_durable, drain, env_or, open, persistent_to, seed, start_on, Rng, STEP,
};
use common::raw091::{short, Raw091};
use common::DataDir;
use ferry_amqp010::{TxCommit, TxSelect};
use ferry_amqp091::{
    Assembled, BasicAck, BasicGet, BasicProperties, BasicPublish, Method, TxCommit as TxCommit091,
    TxSelect as TxSelect091,
};
use ferry_client::{AcceptMode, FlowMode, SequenceSet, Session, SubscribeOptions};

const IN: &str = "tx-in";
const OUT: &str = "tx-out";
/// Messages moved per transaction.
const MOVE: usize = 4;

#[derive(Default)]
struct Ledger {
    sent: HashSet<String>,
    /// Published to `tx-in` with the transfer completed.
    completed: HashSet<String>,
    /// Moved by a transaction whose commit was confirmed.
    moved: HashSet<String>,
}

type Shared = Arc<Mutex<Ledger>>;

async fn producer(addr: std::net::SocketAddr, tag: String, ledger: Shared) {
    let Some((_c, s)) = open(addr).await else {
        return;
    };
    for seq in 0.. {
        let body = format!("{tag}-{seq}");
        ledger.lock().unwrap().sent.insert(body.clone());
        let sent = tokio::time::timeout(STEP, s.transfer_sync("", &persistent_to(IN, &body))).await;
        if !matches!(sent, Ok(Ok(_))) {
            return;
        }
        ledger.lock().unwrap().completed.insert(body);
    }
}

/// 0-10: receive a few, then transfer them on and accept them in one transaction.
async fn mover010(addr: std::net::SocketAddr, tag: String, ledger: Shared) {
    let Some((_c, s)) = open(addr).await else {
        return;
    };
    if !matches!(
        tokio::time::timeout(STEP, s.execute(TxSelect {})).await,
        Ok(Ok(_))
    ) {
        return;
    }
    let opts = SubscribeOptions {
        accept_mode: AcceptMode::Explicit,
        flow_mode: FlowMode::Window,
        message_credit: MOVE as u32,
        ..SubscribeOptions::default()
    };
    let Ok(Ok(mut sub)) = tokio::time::timeout(STEP, s.subscribe(IN, &tag, opts)).await else {
        return;
    };
    loop {
        let mut set = SequenceSet::new();
        let mut bodies = Vec::new();
        while bodies.len() < MOVE {
            match tokio::time::timeout(Duration::from_millis(50), sub.next()).await {
                Ok(Some(d)) => {
                    set.add(d.id);
                    bodies.push(String::from_utf8_lossy(&d.body).into_owned());
                }
                Ok(None) => return,
                Err(_) => break,
            }
        }
        if bodies.is_empty() {
            continue;
        }
        for b in &bodies {
            if !matches!(
                tokio::time::timeout(STEP, s.transfer("", &persistent_to(OUT, b))).await,
                Ok(Ok(_))
            ) {
                return;
            }
        }
        if !matches!(tokio::time::timeout(STEP, s.accept(&set)).await, Ok(Ok(()))) {
            return;
        }
        if !matches!(
            tokio::time::timeout(STEP, s.execute(TxCommit {})).await,
            Ok(Ok(_))
        ) {
            return;
        }
        ledger.lock().unwrap().moved.extend(bodies);
    }
}

/// 0-9-1: basic.get a few, publish them on, ack them, tx.commit. Returns when the broker
/// goes away (a raw peer: every read may find the socket closed).
fn mover091(addr: std::net::SocketAddr, ledger: Shared) {
    // Raw091's handshake panics if the broker dies during it; that only ends this thread.
    let Ok(mut raw) = std::panic::catch_unwind(|| Raw091::open(addr)) else {
        return;
    };
    raw.set_read_timeout(STEP);
    raw.method(1, TxSelect091 {}.into());
    if !reply(&mut raw, |m| matches!(m, Method::TxSelectOk(_))) {
        return;
    }
    let props = BasicProperties {
        delivery_mode: Some(2),
        ..Default::default()
    };
    loop {
        let mut bodies = Vec::new();
        let mut last_tag = 0;
        while bodies.len() < MOVE {
            raw.method(
                1,
                BasicGet {
                    queue: short(IN),
                    ..Default::default()
                }
                .into(),
            );
            match raw.next() {
                Some((1, Assembled::Message(m))) => {
                    if let Method::BasicGetOk(ok) = &m.method {
                        last_tag = ok.delivery_tag;
                    }
                    bodies.push(String::from_utf8_lossy(&m.body).into_owned());
                }
                Some((1, Assembled::Method(Method::BasicGetEmpty(_)))) => break,
                _ => return,
            }
        }
        if bodies.is_empty() {
            std::thread::sleep(Duration::from_millis(20));
            continue;
        }
        for b in &bodies {
            raw.publish_with(
                BasicPublish {
                    routing_key: short(OUT),
                    ..Default::default()
                },
                &props,
                b.as_bytes(),
            );
        }
        raw.method(
            1,
            BasicAck {
                delivery_tag: last_tag,
                multiple: true,
            }
            .into(),
        );
        raw.method(1, TxCommit091 {}.into());
        if !reply(&mut raw, |m| matches!(m, Method::TxCommitOk(_))) {
            return;
        }
        ledger.lock().unwrap().moved.extend(bodies);
    }
}

/// Waits for the channel-1 reply `want` picks; false if the connection ended first.
fn reply(raw: &mut Raw091, want: impl Fn(&Method) -> bool) -> bool {
    loop {
        match raw.next() {
            Some((1, Assembled::Method(m))) if want(&m) => return true,
            Some(_) => continue,
            None => return false,
        }
    }
}

async fn declare(s: &Session) {
    for q in [IN, OUT] {
        declare_durable(s, q).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_transaction_survives_sigkill_whole_or_not_at_all() {
    let cycles = env_or("FERRY_TX_CRASH_CYCLES", 10);
    let seed = seed("FERRY_TX_CRASH_SEED");
    eprintln!("tx crash test: {cycles} cycles, FERRY_TX_CRASH_SEED={seed}");
    let mut rng = Rng(seed);
    let dir = DataDir::new("tx-crash");
    let ledger: Shared = Arc::default();
    let started = Instant::now();
    for cycle in 0..cycles {
        let broker = start_on(&dir);
        {
            let (_c, s) = open(broker.addr).await.expect("connect after restart");
            declare(&s).await;
        }
        let mut tasks = Vec::new();
        for p in 0..2 {
            let tag = format!("c{cycle}p{p}");
            tasks.push(tokio::spawn(producer(broker.addr, tag, ledger.clone())));
        }
        let tag = format!("c{cycle}m");
        tasks.push(tokio::spawn(mover010(broker.addr, tag, ledger.clone())));
        let addr = broker.addr;
        let l = ledger.clone();
        let raw_mover = std::thread::spawn(move || mover091(addr, l));
        tokio::time::sleep(Duration::from_millis(150 + rng.below(400))).await;
        broker.kill();
        for t in tasks {
            let _ = tokio::time::timeout(STEP * 2, t).await;
        }
        let _ = raw_mover.join();
    }
    let broker = start_on(&dir);
    let (_c, s) = open(broker.addr).await.expect("connect for the check");
    declare(&s).await;
    let input = drain(&s, IN).await;
    let output = drain(&s, OUT).await;
    let l = ledger.lock().unwrap();
    let mut violations = Vec::new();
    for (body, n) in input.iter().chain(output.iter()) {
        if *n > 1 {
            violations.push(format!("{body} is {n} times in one queue"));
        }
        if !l.sent.contains(body) {
            violations.push(format!("{body} was never published"));
        }
    }
    for body in input.keys() {
        if output.contains_key(body) {
            violations.push(format!(
                "{body} is in both queues: a commit survived in part"
            ));
        }
    }
    for body in &l.completed {
        if !input.contains_key(body) && !output.contains_key(body) {
            violations.push(format!("{body} was completed but is in neither queue"));
        }
    }
    for body in &l.moved {
        if !output.contains_key(body) {
            violations.push(format!(
                "{body}: its commit was confirmed but it is not moved"
            ));
        }
    }
    violations.truncate(20);
    eprintln!(
        "tx crash test: {cycles} kills in {:.1}s; {} completed, {} moved by confirmed commits; \
         {} left in {IN}, {} in {OUT}",
        started.elapsed().as_secs_f64(),
        l.completed.len(),
        l.moved.len(),
        input.len(),
        output.len()
    );
    assert!(!l.moved.is_empty(), "no transaction committed");
    assert!(violations.is_empty(), "seed {seed}: {violations:#?}");
}
