//! Thousands of idle connections and queues against a debug ferryd, held by `ferry scale`:
//! while they exist a busy queue still carries every message in order and a message to one
//! of the idle queues still routes through amq.direct; afterwards every session answers;
//! and ferryd's resident memory per connection and per queue stays under a bound.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use clap::Parser;
use common::Ferryd;
use ferry_client::{ConnectOptions, Connection, OutgoingMessage};
use ferry_tools::cli::{Cli, Command};
use ferry_tools::perftest::Plan;
use ferry_tools::ToolError;

const CONNECTIONS: usize = 2000;
const QUEUES: usize = 2000;
const BUSY_MESSAGES: usize = 20_000;
/// Bounds on ferryd's growth in RSS. Measured (release and debug alike): 12–21 KiB per idle
/// 0-10 connection with its session (socket buffers, the connection task, outbound buffer,
/// registry entry), 1.4–2.1 KiB per empty queue bound to amq.direct. Four to eight times
/// that, so allocator noise cannot fail the test but a per-connection buffer of 64 KiB, or a
/// queue that preallocates a ring, would.
const MAX_KIB_PER_CONNECTION: f64 = 96.0;
const MAX_KIB_PER_QUEUE: f64 = 16.0;

/// One perftest run through its own queue: every message arrives, in order (the
/// subscriber checks sequence numbers and fails the run otherwise).
fn busy_queue(port: u16) -> Result<(), ToolError> {
    let (port, count) = (port.to_string(), BUSY_MESSAGES.to_string());
    let args = [
        "ferry",
        "perftest",
        "-b",
        "127.0.0.1",
        "-p",
        &port,
        "-s",
        "--size",
        "64",
        "--count",
        &count,
        "--base-name",
        "busy",
    ];
    let Command::Perftest(opts) = Cli::try_parse_from(args).unwrap().command else {
        unreachable!()
    };
    let (plan, _) = Plan::from_opts(&opts)?;
    let mut out = Vec::new();
    let report = ferry_tools::perftest::run(&opts, &plan, &mut out)?
        .ok_or_else(|| ToolError::Scale("perftest did not control the run".into()))?;
    let transfers = report.iterations.first().map_or(0, |it| it.transfers);
    if transfers != 2 * BUSY_MESSAGES {
        return Err(ToolError::Scale(format!(
            "busy queue: {transfers} transfers, expected {}",
            2 * BUSY_MESSAGES
        )));
    }
    Ok(())
}

/// Publishes one message to amq.direct with an idle queue's name as the key; returns the
/// queue's depth afterwards.
fn route_to_idle_queue(addr: SocketAddr, queue: &str) -> Result<u32, String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    rt.block_on(async {
        tokio::time::timeout(Duration::from_secs(20), async {
            let conn = Connection::connect(addr, ConnectOptions::default()).await?;
            let s = conn.session().await?;
            let m = OutgoingMessage::builder()
                .routing_key(queue)
                .body("to an idle queue")
                .build()?;
            s.transfer_sync("amq.direct", &m).await?;
            let depth = s.queue_query(queue).await?.message_count;
            Ok::<_, ferry_client::ClientError>(depth.unwrap_or(0))
        })
        .await
        .map_err(|_| "timed out".to_string())?
        .map_err(|e| e.to_string())
    })
}

#[test]
fn thousands_of_idle_connections_and_queues_leave_the_broker_working() {
    let max = (CONNECTIONS + 100).to_string();
    let broker = Ferryd::start_with(&["--max-connections", &max]);
    let (addr, port, pid) = (broker.addr, broker.addr.port().to_string(), broker.pid());
    let pid_arg = pid.to_string();
    let (conns, queues) = (CONNECTIONS.to_string(), QUEUES.to_string());
    let args = [
        "ferry",
        "scale",
        "-b",
        "127.0.0.1",
        "-p",
        &port,
        "--connections",
        &conns,
        "--queues",
        &queues,
        "--one-by-one",
        "50",
        "--broker-pid",
        &pid_arg,
        "--settle-ms",
        "300",
        "--step-timeout",
        "60",
    ];
    let Command::Scale(opts) = Cli::try_parse_from(args).unwrap().command else {
        unreachable!()
    };
    let report = ferry_tools::scale::run_with(&opts, move || {
        busy_queue(addr.port())?;
        // ferry scale names its queues ferry-scale-0 ..; one in the middle.
        let depth = route_to_idle_queue(addr, &format!("ferry-scale-{}", QUEUES / 2))
            .map_err(|e| ToolError::Scale(format!("routing to an idle queue: {e}")))?;
        if depth != 1 {
            return Err(ToolError::Scale(format!("idle queue depth {depth}, not 1")));
        }
        Ok(Some(0))
    })
    .expect("the load, and the work done beside it");
    eprint!("{}", report.text());
    assert_eq!(report.command_status, Some(0));
    assert_eq!(report.answered, CONNECTIONS, "every session answers");
    let per_conn = report.rss_per_connection_kib().expect("ferryd's RSS");
    let per_queue = report.rss_per_queue_kib().expect("ferryd's RSS");
    assert!(
        per_conn < MAX_KIB_PER_CONNECTION,
        "{per_conn:.1} KiB per idle connection"
    );
    assert!(
        per_queue < MAX_KIB_PER_QUEUE,
        "{per_queue:.1} KiB per queue"
    );
}
