//! `ferry perftest` and `ferry latency-test` against a real ferryd: short runs that check
//! counts, order and reports, not speed.

mod common;

use clap::Parser;
use common::Ferryd;
use ferry_tools::amqp010::{Connector, LatencyClient, LatencyReceiverClient};
use ferry_tools::cli::{Cli, Command};
use ferry_tools::latency_test::run_latency;
use ferry_tools::perftest::{run_perftest, Plan};

fn perftest(
    broker: &Ferryd,
    extra: &[&str],
) -> (Plan, ferry_tools::perftest::PerftestReport, String) {
    let port = broker.addr.port().to_string();
    let mut args = vec!["ferry", "perftest", "-b", "127.0.0.1", "-p", &port];
    args.extend_from_slice(extra);
    let Command::Perftest(opts) = Cli::try_parse_from(args).unwrap().command else {
        unreachable!()
    };
    let (plan, _) = Plan::from_opts(&opts).unwrap();
    let connector = Connector {
        conn: opts.conn.clone(),
    };
    let mut out = Vec::new();
    let report = run_perftest(&connector, &plan, &mut out)
        .expect("perftest run")
        .expect("this process controls the run");
    (plan, report, String::from_utf8(out).unwrap())
}

#[test]
fn perftest_shared_queue_moves_every_message_in_order() {
    let broker = Ferryd::start();
    let (plan, report, text) = perftest(&broker, &["--count", "3000", "--size", "64"]);
    assert_eq!(report.iterations.len(), 1);
    let it = &report.iterations[0];
    // One publisher and one subscriber: 3000 in, 3000 out. (The subscriber checks the
    // sequence numbers arrive exactly in order, or the run fails.)
    assert_eq!(it.transfers, 6000);
    assert_eq!(plan.sub_quota, 3000);
    assert!(text.contains("Total transfers/sec"), "{text}");
}

#[test]
fn perftest_fanout_and_topic_modes_with_several_clients() {
    let broker = Ferryd::start();
    let (_, report, _) = perftest(
        &broker,
        &[
            "--mode", "fanout", "--npubs", "1", "--nsubs", "3", "--count", "1000", "-s",
        ],
    );
    // Each of 3 subscribers gets all 1000.
    assert_eq!(report.iterations[0].transfers, 1000 + 3 * 1000);
    let (_, report, text) = perftest(
        &broker,
        &[
            "--mode",
            "topic",
            "--qt",
            "2",
            "--npubs",
            "2",
            "--nsubs",
            "2",
            "--count",
            "500",
            "-s",
            "--base-name",
            "topictest",
        ],
    );
    // Per topic: 2 publishers x 500, each of 2 subscribers receives all 1000.
    assert_eq!(report.iterations[0].transfers, 2 * (2 * 500 + 2 * 1000));
    assert_eq!(text.lines().count(), 1, "summary is one line: {text}");
}

#[test]
fn perftest_with_acknowledgements_and_iterations() {
    let broker = Ferryd::start();
    let (_, report, _) = perftest(
        &broker,
        &[
            "--count",
            "2000",
            "--sub-ack",
            "100",
            "--iterations",
            "2",
            "--npubs",
            "2",
            "--nsubs",
            "2",
            "--base-name",
            "acked",
        ],
    );
    assert_eq!(report.iterations.len(), 2);
    for it in &report.iterations {
        assert_eq!(it.transfers, 2 * 2000 * 2);
    }
}

#[test]
fn perftest_subscribers_get_their_quota_a_credit_window_at_a_time() {
    let broker = Ferryd::start();
    // Each of two subscribers is owed 25,000 messages: more than one credit window
    // (CreditWindow::DEFAULT), so credit is topped up as they go, and each must end with
    // exactly its share or the other waits for a message that never comes.
    let count = 50_000;
    assert!(count / 2 > ferry_tools::perftest::CreditWindow::DEFAULT as usize);
    let (plan, report, _) = perftest(
        &broker,
        &[
            "--count",
            &count.to_string(),
            "--size",
            "8",
            "--nsubs",
            "2",
            "-s",
            "--base-name",
            "windowed",
        ],
    );
    assert_eq!(plan.sub_quota, 25_000);
    assert_eq!(report.iterations[0].transfers, 2 * count);
}

#[test]
fn latency_test_receives_every_stamped_message() {
    let broker = Ferryd::start();
    let port = broker.addr.port().to_string();
    let args = [
        "ferry",
        "latency-test",
        "-b",
        "127.0.0.1",
        "-p",
        &port,
        "--rate",
        "2000",
        "--count",
        "1000",
        "--size",
        "256",
        "--report-frequency",
        "200",
        "--tcp-nodelay",
    ];
    let Command::LatencyTest(opts) = Cli::try_parse_from(args).unwrap().command else {
        unreachable!()
    };
    let limits = opts.limits().unwrap();
    let mut receiver = LatencyReceiverClient::open(&opts).unwrap();
    let sender = LatencyClient::open(&opts).unwrap();
    let mut out = Vec::new();
    let run = run_latency(&limits, sender, &mut receiver, &mut out).expect("latency run");
    assert_eq!(run.sent, 1000);
    assert_eq!(run.received, 1000);
    let text = String::from_utf8(out).unwrap();
    assert!(text.contains("p99"), "{text}");
}
