//! Management under load: paging through 10,000 queues, and AMQP messaging that carries on
//! while garbage, malformed and stalled requests hit the HTTP port.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use common::http::{parse, Http};
use common::raw091::{short, Raw091};
use common::Ferryd;
use ferry_amqp091::{BasicProperties, FieldTable, Method, QueueDeclare};
use serde_json::{json, Value};

/// Generous: a debug build on a shared two-core machine.
const SLOW: Duration = Duration::from_secs(20);

fn timed<T>(what: &str, f: impl FnOnce() -> T) -> T {
    let started = Instant::now();
    let out = f();
    let took = started.elapsed();
    println!("{what}: {took:?}");
    assert!(took < SLOW, "{what} took {took:?}");
    out
}

#[test]
fn paging_stays_usable_with_ten_thousand_queues() {
    const QUEUES: usize = 10_000;
    let b = Ferryd::start_mgmt(&[]);
    let mut c = Raw091::open(b.addr);
    timed("declaring 10,000 queues over 0-9-1", || {
        for i in 0..QUEUES {
            let declare = QueueDeclare {
                queue: short(&format!("load-{i:05}")),
                nowait: true,
                ..Default::default()
            };
            c.method(1, Method::QueueDeclare(declare));
        }
        // A declare with a reply: everything before it is done.
        c.declare_queue("load-sync", FieldTable::new());
    });
    for (queue, n) in [("load-04242", 5), ("load-00007", 3)] {
        for _ in 0..n {
            c.publish("", queue, &BasicProperties::default(), b"m");
        }
    }
    let h = Http::new(b.mgmt_addr.unwrap());
    let mut busiest = Value::Null;
    timed("waiting for the messages", || {
        let deadline = Instant::now() + SLOW;
        while Instant::now() < deadline {
            busiest = h
                .get("/api/queues?page=1&page_size=2&sort=messages&sort_reverse=true&columns=name,messages")
                .expect(200)
                .json();
            if busiest["items"][1]["messages"] == 3 {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    });
    assert_eq!(
        busiest["items"],
        json!([{"name": "load-04242", "messages": 5}, {"name": "load-00007", "messages": 3}])
    );

    let page = timed("a page by name", || {
        h.get("/api/queues?page=37&page_size=100&name=load-&sort=name")
            .expect(200)
            .json()
    });
    assert_eq!(page["total_count"], QUEUES + 1);
    assert_eq!(page["filtered_count"], QUEUES + 1);
    assert_eq!(page["page_count"], 101);
    assert_eq!(page["item_count"], 100);
    assert_eq!(page["items"][0]["name"], "load-03600");
    assert!(page["items"][0]["message_stats"].is_object());

    let regex = timed("a regex filter", || {
        h.get("/api/queues?page=1&page_size=500&name=%5Eload-0999%5B0-9%5D%24&use_regex=true&columns=name")
            .expect(200)
            .json()
    });
    assert_eq!(regex["filtered_count"], 10);
    let all = timed("every queue, unpaged", || {
        h.get("/api/queues?columns=name").expect(200).json()
    });
    assert_eq!(all.as_array().unwrap().len(), QUEUES + 1);
    let o = timed("the overview", || h.get("/api/overview").expect(200).json());
    assert_eq!(o["object_totals"]["queues"], QUEUES + 1);
    assert_eq!(o["queue_totals"]["messages"], 8);
    let metrics = timed("the metrics", || h.get("/metrics").expect(200).text());
    let ready = metrics
        .lines()
        .filter(|l| l.starts_with("ferry_queue_messages_ready{"))
        .count();
    assert_eq!(ready, QUEUES + 1);
    timed("bindings", || h.get("/api/bindings").expect(200));
    // Messaging is unaffected.
    c.publish("", "load-sync", &BasicProperties::default(), b"still here");
    assert!(c.get("load-sync", true).is_some());
}

/// A small deterministic generator, so a failure can be replayed.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

/// Sends `raw` and returns the status of the first answer, if one comes before the server
/// closes. A request whose promised body never comes gets the sending side shut, so the
/// server sees the end of it.
fn status_of(addr: SocketAddr, raw: &[u8], complete: bool) -> Option<u16> {
    let mut s = TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    let _ = s.write_all(raw);
    if !complete {
        let _ = s.shutdown(std::net::Shutdown::Write);
    }
    let mut reply = Vec::new();
    let mut chunk = [0u8; 65536];
    loop {
        if let Some(status) = first_status(&reply) {
            return Some(status);
        }
        match s.read(&mut chunk) {
            Ok(0) | Err(_) => return first_status(&reply),
            Ok(n) => reply.extend_from_slice(&chunk[..n]),
        }
    }
}

/// The status line of a response whose head has arrived.
fn first_status(raw: &[u8]) -> Option<u16> {
    let end = raw.windows(4).position(|w| w == b"\r\n\r\n")?;
    parse(&raw[..end + 4]).map(|r| r.status)
}

/// Requests no ordinary client sends, and whether each is complete as sent.
fn crafted(addr: SocketAddr) -> Vec<(String, Vec<u8>, bool)> {
    let host = format!("Host: {addr}\r\n");
    let auth = "Authorization: Basic Z3Vlc3Q6Z3Vlc3Q=\r\n";
    let deep = "[".repeat(100_000);
    let list: Vec<(String, Vec<u8>)> = vec![
        ("no request line".into(), b"\r\n\r\n".to_vec()),
        ("unknown method".into(), format!("BREW /api/overview HTTP/1.1\r\n{host}{auth}\r\n").into_bytes()),
        ("HTTP/0.9".into(), b"GET /api/overview\r\n\r\n".to_vec()),
        ("bad version".into(), format!("GET /api/overview HTTP/7.3\r\n{host}\r\n").into_bytes()),
        ("huge header".into(), format!("GET /api/overview HTTP/1.1\r\n{host}X-Big: {}\r\n\r\n", "a".repeat(1 << 20)).into_bytes()),
        ("10,000 headers".into(), format!("GET /api/overview HTTP/1.1\r\n{host}{}\r\n", "X-A: b\r\n".repeat(10_000)).into_bytes()),
        ("huge path".into(), format!("GET /api/{} HTTP/1.1\r\n{host}{auth}\r\n", "q".repeat(100_000)).into_bytes()),
        ("bad percent escapes".into(), format!("GET /api/queues/%zz/%FF%FE HTTP/1.1\r\n{host}{auth}\r\n").into_bytes()),
        ("NUL in the path".into(), format!("GET /api/\0queues HTTP/1.1\r\n{host}{auth}\r\n").into_bytes()),
        ("a promised body that never comes".into(), format!("PUT /api/queues/%2F/g HTTP/1.1\r\n{host}{auth}Content-Length: 99999999999\r\n\r\n{{").into_bytes()),
        ("both lengths".into(), format!("PUT /api/queues/%2F/g HTTP/1.1\r\n{host}{auth}Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\nzzzz\r\n0\r\n\r\n").into_bytes()),
        ("bad chunk sizes".into(), format!("PUT /api/queues/%2F/g HTTP/1.1\r\n{host}{auth}Transfer-Encoding: chunked\r\n\r\nffffffffffffffffff\r\nx\r\n").into_bytes()),
        ("endless chunks".into(), format!("PUT /api/queues/%2F/g HTTP/1.1\r\n{host}{auth}Transfer-Encoding: chunked\r\n\r\n{}", "100000\r\n".to_string() + &"y".repeat(1 << 20) + "\r\n").repeat(3).into_bytes()),
        ("a JSON bomb".into(), format!("PUT /api/queues/%2F/g HTTP/1.1\r\n{host}{auth}Content-Length: {}\r\n\r\n{deep}", deep.len()).into_bytes()),
        ("garbage credentials".into(), format!("GET /api/overview HTTP/1.1\r\n{host}Authorization: Basic \u{1}\u{2}\r\n\r\n").into_bytes()),
        ("a binary body".into(), {
            let mut r = format!("POST /api/exchanges/%2F/amq.default/publish HTTP/1.1\r\n{host}{auth}Content-Length: 1024\r\n\r\n").into_bytes();
            r.extend(XorShift(7).bytes(1024));
            r
        }),
    ];
    // Pipelined requests, the last one cut short.
    let one = format!("GET /api/overview HTTP/1.1\r\n{host}{auth}\r\n");
    let pipelined = (
        "pipelined".to_owned(),
        (one.repeat(50) + "GET /api/ov").into_bytes(),
    );
    const INCOMPLETE: [&str; 5] = [
        "no request line",
        "a promised body that never comes",
        "bad chunk sizes",
        "endless chunks",
        "pipelined",
    ];
    list.into_iter()
        .chain([pipelined])
        .map(|(what, raw)| {
            let complete = !INCOMPLETE.contains(&what.as_str());
            (what, raw, complete)
        })
        .collect()
}

#[test]
fn messaging_continues_while_garbage_hits_the_http_port() {
    const MESSAGES: usize = 3_000;
    let b = Ferryd::start_mgmt(&[]);
    let amqp = b.addr;
    let mgmt = b.mgmt_addr.unwrap();

    let mut consumer = Raw091::open(amqp);
    consumer.declare_queue("steady", FieldTable::new());
    consumer.consume("steady");
    let consumer = std::thread::spawn(move || {
        let mut got = Vec::with_capacity(MESSAGES);
        while got.len() < MESSAGES {
            got.push(consumer.delivery().body);
        }
        got
    });
    let publisher = std::thread::spawn(move || {
        let mut p = Raw091::open(amqp);
        for i in 0..MESSAGES {
            p.publish("", "steady", &BasicProperties::default(), &i.to_le_bytes());
            if i % 100 == 99 {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        // Keep the connection until everything is surely routed.
        std::thread::sleep(Duration::from_millis(500));
    });

    let noise = std::thread::spawn(move || {
        let mut rng = XorShift(0x5eed);
        for _ in 0..200 {
            let n = 1 + (rng.next() % 8192) as usize;
            if let Ok(mut s) = TcpStream::connect(mgmt) {
                let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
                let _ = s.write_all(&rng.bytes(n));
                let mut sink = Vec::new();
                let _ = s.read_to_end(&mut sink);
                if let Some(r) = parse(&sink) {
                    assert!(r.status < 500, "random bytes got {}", r.status);
                }
            }
        }
    });
    let stalled = std::thread::spawn(move || {
        // More than the listener's 256 slots, each with half a request, held for a while.
        let conns: Vec<TcpStream> = (0..300)
            .filter_map(|_| TcpStream::connect(mgmt).ok())
            .map(|mut s| {
                let _ = s.write_all(b"GET /api/overview HTTP/1.1\r\nHost: x\r\n");
                s
            })
            .collect();
        std::thread::sleep(Duration::from_secs(2));
        drop(conns);
    });
    for (what, raw, complete) in crafted(mgmt) {
        let started = Instant::now();
        let status = status_of(mgmt, &raw, complete);
        println!("{what}: {status:?} in {:?}", started.elapsed());
        match status {
            Some(status) => assert!(status < 500, "{what}: {status}"),
            None => assert!(!complete, "{what}: no answer"),
        }
    }

    noise.join().unwrap();
    stalled.join().unwrap();
    publisher.join().unwrap();
    let got = consumer.join().unwrap();
    assert_eq!(got.len(), MESSAGES);
    for (i, body) in got.iter().enumerate() {
        assert_eq!(&body[..], &i.to_le_bytes(), "message {i} in order");
    }
    // The API still answers, and the broker is still up.
    let h = Http::new(mgmt);
    let deadline = Instant::now() + SLOW;
    loop {
        let r = h.get("/api/queues/%2F/steady");
        if r.status == 200 {
            assert_eq!(r.json()["message_stats"]["deliver_get"], MESSAGES);
            break;
        }
        assert!(Instant::now() < deadline, "the API stopped answering");
        std::thread::sleep(Duration::from_millis(100));
    }
    let (status, log) = b.terminate();
    assert!(status.success(), "{log}");
    assert!(!log.contains("panicked"), "{log}");
}
