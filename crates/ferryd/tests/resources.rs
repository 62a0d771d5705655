//! The resource test: thousands of idle connections, a consumer that never reads while a
//! publisher floods its queue, and a flood of invalid connections, all at once. A normal
//! client keeps being served throughout, and ferryd's resident memory stays bounded.
//!
//! `resources_under_load` is the short run the test command includes. The long run is
//! `cargo test -p ferryd --test resources -- --ignored --nocapture`; both print the figures
//! (RSS before, with the idle connections, the peak during the floods, and after).

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use common::raw::Raw;
use common::raw091::{short, Raw091};
use common::{rss_kib, Ferryd};
use ferry_amqp010::{write_transfer, AcceptMode, DeliveryProperties, MessageTransfer, Str};
use ferry_amqp091::{Assembled, BasicConsume, BasicProperties, Method};

struct Scale {
    /// Idle connections held open (half 0-10, half 0-9-1), each fully logged in.
    idle: usize,
    /// Invalid connections thrown at the broker while the rest goes on.
    invalid: usize,
    /// What the publisher tries to push at the consumer that never reads.
    publish_mib: usize,
    /// The memory alarm's high-water mark.
    watermark_mib: usize,
}

/// The open-files limit of this process, raised to its hard limit; the idle connections need
/// one descriptor each here as in ferryd (which raises its own).
fn raise_fd_limit() -> u64 {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit only read and write the struct we own.
    unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit);
        if limit.rlim_cur < limit.rlim_max {
            limit.rlim_cur = limit.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        }
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit);
    }
    limit.rlim_cur
}

/// One round trip of real work for the normal client: publish to its own queue and get the
/// message back. Returns how long it took.
fn round_trip(c: &mut Raw091, n: usize) -> Duration {
    let start = Instant::now();
    let body = format!("normal {n}");
    c.publish("", "normal", &BasicProperties::default(), body.as_bytes());
    let got = c.get("normal", true).expect("the normal client's message");
    assert_eq!(&got.body[..], body.as_bytes());
    start.elapsed()
}

/// Messages on `queue` (0-9-1 passive declare on `c`).
fn depth(c: &mut Raw091, queue: &str) -> u32 {
    let reply = c.call(
        ferry_amqp091::QueueDeclare {
            queue: short(queue),
            passive: true,
            ..Default::default()
        },
        |m| matches!(m, Method::QueueDeclareOk(_)),
    );
    let Method::QueueDeclareOk(ok) = reply else {
        unreachable!()
    };
    ok.message_count
}

/// Garbage of every kind: random bytes, a wrong protocol header, a header then junk, a
/// connect that says nothing, a half-sent frame.
fn invalid_connection(addr: SocketAddr, i: usize) {
    let Ok(mut s) = TcpStream::connect(addr) else {
        return;
    };
    let _ = s.set_read_timeout(Some(Duration::from_millis(50)));
    let junk: Vec<u8> = (0..64usize)
        .map(|k| (i.wrapping_mul(31) ^ k.wrapping_mul(17)) as u8)
        .collect();
    let _ = match i % 5 {
        0 => s.write_all(&junk),
        1 => s.write_all(b"GET / HTTP/1.1\r\nHost: ferry\r\n\r\n"),
        2 => s
            .write_all(&ferry_amqp010::PROTOCOL_HEADER)
            .and_then(|_| s.write_all(&junk)),
        3 => Ok(()),
        _ => s
            .write_all(&ferry_amqp091::PROTOCOL_HEADER)
            .and_then(|_| s.write_all(&[1, 0, 0, 0, 0, 1, 0])),
    };
    let mut buf = [0u8; 512];
    let _ = s.read(&mut buf);
}

/// The 0-10 consumer that subscribes with unlimited credit, then never reads again.
fn stuck_consumer(addr: SocketAddr) -> Raw {
    let mut stuck = Raw::open(addr);
    stuck.attach(1, "never-reads");
    stuck.declare_queue(1, "firehose");
    stuck.subscribe_unlimited(1, "firehose", "d", AcceptMode::None);
    stuck
}

/// A 0-10 publisher pushing `mib` MiB of 64 KiB messages (in 4 KiB frames, as negotiated) at the firehose queue from its own
/// thread; its socket is returned so the test can cut it off.
fn flood_publisher(addr: SocketAddr, mib: usize) -> (TcpStream, std::thread::JoinHandle<()>) {
    let mut p = Raw::open(addr);
    p.attach(1, "flood");
    let mut header = BytesMut::new();
    DeliveryProperties {
        routing_key: Some(Str::from("firehose")),
        ..Default::default()
    }
    .encode(&mut header)
    .unwrap();
    let transfer = MessageTransfer {
        destination: Some(Str::from("")),
        ..Default::default()
    };
    let body = vec![0x5au8; 64 * 1024];
    let mut batch = BytesMut::new();
    for _ in 0..16 {
        write_transfer(&mut batch, 1, &transfer, false, &header, &body, 4096).unwrap();
    }
    let handle = p.stream.try_clone().unwrap();
    let mut w = p.stream.try_clone().unwrap();
    let thread = std::thread::spawn(move || {
        let _keep = p;
        for _ in 0..mib {
            // A write error means the test cut the publisher off.
            if w.write_all(&batch).is_err() {
                return;
            }
        }
    });
    (handle, thread)
}

fn run(scale: Scale) {
    let fds = raise_fd_limit();
    let needed = (2 * scale.idle + 512) as u64;
    if fds < needed {
        eprintln!("open files limit {fds} < {needed}: skipping the resource test at this scale");
        return;
    }
    let watermark = format!("{}MiB", scale.watermark_mib);
    let max_connections = (scale.idle + scale.invalid + 100).to_string();
    let mut broker = Ferryd::start_with(&[
        "--max-connections",
        &max_connections,
        "--memory-high-watermark",
        &watermark,
    ]);
    let addr = broker.addr;
    let pid = broker.pid();
    std::thread::sleep(Duration::from_millis(200));
    let rss_start = rss_kib(pid);

    // The normal client: one connection that publishes and consumes, one that only looks
    // (while the memory alarm is up every publishing connection is paused, as in RabbitMQ).
    let mut normal = Raw091::open(addr);
    normal.declare_queue("normal", ferry_amqp091::FieldTable::new());
    let mut observer = Raw091::open(addr);
    let mut slowest = round_trip(&mut normal, 0);

    // Thousands of idle connections, logged in and open.
    let started = Instant::now();
    let mut idle010 = Vec::new();
    let mut idle091 = Vec::new();
    for i in 0..scale.idle {
        if i % 2 == 0 {
            idle010.push(Raw::open(addr));
        } else {
            idle091.push(Raw091::open(addr));
        }
    }
    let opened_in = started.elapsed();
    std::thread::sleep(Duration::from_millis(300));
    let rss_idle = rss_kib(pid);
    slowest = slowest.max(round_trip(&mut normal, 1));

    // Everything at once: the stuck consumer, the flood publisher, the invalid connections.
    let stuck = stuck_consumer(addr);
    let (publisher, publishing) = flood_publisher(addr, scale.publish_mib);
    let flooding = Arc::new(AtomicBool::new(true));
    let invalid_threads: Vec<_> = (0..8)
        .map(|t| {
            let n = scale.invalid / 8;
            std::thread::spawn(move || {
                for i in 0..n {
                    invalid_connection(addr, t * n + i);
                }
            })
        })
        .collect();
    let sampler = {
        let flooding = flooding.clone();
        std::thread::spawn(move || {
            let mut peak = 0;
            while flooding.load(Ordering::Relaxed) {
                peak = peak.max(rss_kib(pid));
                std::thread::sleep(Duration::from_millis(50));
            }
            peak
        })
    };
    // The normal client keeps being answered while the floods run.
    let flood_start = Instant::now();
    let mut queries = 0;
    let mut held_at = None;
    while flood_start.elapsed() < Duration::from_secs(120) {
        let t = Instant::now();
        let d = depth(&mut observer, "firehose");
        slowest = slowest.max(t.elapsed());
        queries += 1;
        let invalid_done = invalid_threads.iter().all(|t| t.is_finished());
        if invalid_done && (publishing.is_finished() || held_at == Some(d)) {
            held_at = Some(d);
            break;
        }
        held_at = Some(d);
        std::thread::sleep(Duration::from_millis(250));
    }
    for t in invalid_threads {
        t.join().unwrap();
    }
    let flood_secs = flood_start.elapsed().as_secs_f64();
    flooding.store(false, Ordering::Relaxed);
    let rss_peak = sampler.join().unwrap();
    assert!(broker.is_running(), "ferryd survived");
    let queued_mib = u64::from(held_at.unwrap_or(0)) * 64 / 1024;

    // Cut the publisher and the stuck consumer off; the queue goes; the alarm clears and the
    // normal client publishes again.
    let _ = publisher.shutdown(std::net::Shutdown::Both);
    drop(stuck);
    let _ = publishing.join();
    observer.call(
        ferry_amqp091::QueueDelete {
            queue: short("firehose"),
            ..Default::default()
        },
        |m| matches!(m, Method::QueueDeleteOk(_)),
    );
    std::thread::sleep(Duration::from_millis(300));
    slowest = slowest.max(round_trip(&mut normal, 2));
    drop(idle010);
    drop(idle091);
    std::thread::sleep(Duration::from_millis(1500));
    let rss_end = rss_kib(pid);
    slowest = slowest.max(round_trip(&mut normal, 3));

    let mib = |kib: u64| kib as f64 / 1024.0;
    eprintln!(
        "resources: {} idle connections opened in {:.1}s; {} invalid connections; publisher \
         pushed at a never-reading consumer, held with {} MiB queued (alarm at {} MiB); \
         {queries} queries by the normal client over {flood_secs:.1}s, slowest round trip {:?}",
        scale.idle,
        opened_in.as_secs_f64(),
        scale.invalid,
        queued_mib,
        scale.watermark_mib,
        slowest,
    );
    eprintln!(
        "resources: ferryd RSS {:.1} MiB at start, {:.1} MiB with the idle connections \
         ({:.1} KiB each), {:.1} MiB peak during the floods, {:.1} MiB after",
        mib(rss_start),
        mib(rss_idle),
        (rss_idle.saturating_sub(rss_start)) as f64 / scale.idle as f64,
        mib(rss_peak),
        mib(rss_end),
    );
    // Liveness, not performance: the normal client was never left waiting.
    assert!(
        slowest < Duration::from_secs(10),
        "slowest round trip {slowest:?}"
    );
    // The alarm held the publisher near the watermark (plus what was in flight).
    assert!(
        queued_mib <= scale.watermark_mib as u64 + 16,
        "queue grew to {queued_mib} MiB"
    );
    // Idle connections cost kilobytes, not their buffers' full capacity.
    let per_idle_kib = rss_idle.saturating_sub(rss_start) / scale.idle as u64;
    assert!(per_idle_kib < 64, "{per_idle_kib} KiB per idle connection");
    // Bounded during the floods: what queues may hold, the connections, and slack for the
    // allocator and the stuck consumer's capped buffers.
    let bound_kib = rss_idle + (scale.watermark_mib as u64 + 128) * 1024;
    assert!(
        rss_peak < bound_kib,
        "peak RSS {:.1} MiB over the bound {:.1} MiB",
        mib(rss_peak),
        mib(bound_kib)
    );
    let (_, log) = broker.terminate();
    assert!(
        log.contains("memory alarm: queues hold more"),
        "the alarm is what held the publisher"
    );
}

#[test]
fn resources_under_load() {
    run(Scale {
        idle: 2_000,
        invalid: 2_000,
        // Past the watermark even after the kernel's socket buffers (up to 32 MiB on
        // loopback) and the stuck consumer's capped buffers have taken their share.
        publish_mib: 192,
        watermark_mib: 48,
    });
}

#[test]
#[ignore = "the long variant: run with --ignored and report its figures"]
fn resources_under_heavy_load() {
    run(Scale {
        idle: 8_000,
        invalid: 20_000,
        publish_mib: 1024,
        watermark_mib: 256,
    });
}

/// Not a scale test: the consumer that never reads does not stall consumers elsewhere.
#[test]
fn a_stuck_consumer_does_not_stall_other_consumers_of_other_queues() {
    let broker = Ferryd::start();
    let _stuck = stuck_consumer(broker.addr);
    let (publisher, publishing) = flood_publisher(broker.addr, 32);
    let mut other = Raw091::open(broker.addr);
    other.declare_queue("other", ferry_amqp091::FieldTable::new());
    for i in 0..100 {
        other.publish(
            "",
            "other",
            &BasicProperties::default(),
            format!("{i}").as_bytes(),
        );
    }
    other.method(
        1,
        BasicConsume {
            queue: short("other"),
            consumer_tag: short("c"),
            no_ack: true,
            ..Default::default()
        }
        .into(),
    );
    let mut got = 0;
    while got < 100 {
        match other.next() {
            Some((_, Assembled::Message(_))) => got += 1,
            Some(_) => {}
            None => panic!("stalled after {got}"),
        }
    }
    let _ = publisher.shutdown(std::net::Shutdown::Both);
    let _ = publishing.join();
}
