//! `ferry perftest` and `ferry latency-test` against a real ferryd: short runs that check
//! counts, order and reports, not speed.

mod common;

use clap::Parser;
use common::Ferryd;
use ferry_tools::amqp010::{LatencyClient, LatencyReceiverClient};
use ferry_tools::cli::{Cli, Command};
use ferry_tools::latency_test::run_latency;
use ferry_tools::perftest::Plan;

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
    let mut out = Vec::new();
    let report = ferry_tools::perftest::run(&opts, &plan, &mut out)
        .expect("perftest run")
        .expect("this process controls the run");
    (plan, report, String::from_utf8(out).unwrap())
}

/// The same over AMQP 0-9-1.
fn perftest091(
    broker: &Ferryd,
    extra: &[&str],
) -> (Plan, ferry_tools::perftest::PerftestReport, String) {
    let mut args = vec!["--protocol", "amqp0-9-1"];
    args.extend_from_slice(extra);
    perftest(broker, &args)
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

#[test]
fn perftest_transactions_over_0_10() {
    let broker = Ferryd::start();
    // qpid-perftest's --tx: transactional publish and subscribe sessions committing every
    // N (here with a remainder, 1000 = 7 x 137 + 41), accepting inside the transaction.
    let (plan, report, _) = perftest(
        &broker,
        &[
            "--count",
            "1000",
            "--tx",
            "137",
            "--tcp-nodelay",
            "-s",
            "--base-name",
            "tx010",
        ],
    );
    assert_eq!((plan.tx_pub, plan.tx_sub), (137, 137));
    assert_eq!(report.iterations[0].transfers, 2000);
    // Only publishing in transactions, with two subscribers sharing the queue.
    let (_, report, _) = perftest(
        &broker,
        &[
            "--count",
            "1000",
            "--pub-tx",
            "100",
            "--nsubs",
            "2",
            "-s",
            "--base-name",
            "tx010b",
        ],
    );
    assert_eq!(report.iterations[0].transfers, 1000 + 2 * 500);
}

#[test]
fn perftest_over_0_9_1_with_confirms_and_persistence() {
    let broker = Ferryd::start();
    let (plan, report, _) = perftest091(
        &broker,
        &[
            "--count",
            "3000",
            "--confirm",
            "100",
            "--durable",
            "yes",
            "-s",
            "--base-name",
            "p91",
        ],
    );
    assert_eq!((plan.confirm, plan.durable), (100, true));
    // In order, every message: the subscriber checks the sequence as over 0-10.
    assert_eq!(report.iterations[0].transfers, 6000);
    let (plan, report, _) = perftest091(&broker, &["--count", "200", "--sync-publish", "-s"]);
    assert_eq!(plan.confirm, 1);
    assert_eq!(report.iterations[0].transfers, 400);
}

#[test]
fn perftest_over_0_9_1_splits_a_shared_queue_exactly() {
    let broker = Ferryd::start();
    // Three subscribers on each of two queues, a prefetch larger than each one's quota of
    // 400: whoever gets its quota first gives the surplus back for the others, over two
    // iterations, or someone waits forever.
    let (plan, report, _) = perftest091(
        &broker,
        &[
            "--count",
            "600",
            "--npubs",
            "2",
            "--nsubs",
            "3",
            "--qt",
            "2",
            "--prefetch",
            "1000",
            "--iterations",
            "2",
            "-s",
            "--base-name",
            "split91",
        ],
    );
    assert_eq!(plan.sub_quota, 400);
    assert_eq!(report.iterations.len(), 2);
    for it in &report.iterations {
        assert_eq!(it.transfers, 2 * (2 * 600 + 3 * 400));
    }
}

#[test]
fn perftest_over_0_9_1_fanout_topic_and_acknowledgements() {
    let broker = Ferryd::start();
    let (_, report, _) = perftest091(
        &broker,
        &[
            "--mode",
            "fanout",
            "--nsubs",
            "3",
            "--count",
            "500",
            "-s",
            "--base-name",
            "f91",
        ],
    );
    assert_eq!(report.iterations[0].transfers, 500 + 3 * 500);
    let (_, report, _) = perftest091(
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
            "250",
            "--sub-ack",
            "50",
            "-s",
            "--base-name",
            "t91",
        ],
    );
    assert_eq!(report.iterations[0].transfers, 2 * (2 * 250 + 2 * 500));
}

#[test]
fn perftest_transactions_over_0_9_1() {
    let broker = Ferryd::start();
    let (plan, report, _) = perftest091(
        &broker,
        &[
            "--count",
            "1000",
            "--tx",
            "137",
            "-s",
            "--base-name",
            "tx91",
        ],
    );
    assert_eq!((plan.tx_pub, plan.tx_sub), (137, 137));
    assert_eq!(report.iterations[0].transfers, 2000);
}

#[test]
fn latency_test_over_0_9_1() {
    let broker = Ferryd::start();
    let port = broker.addr.port().to_string();
    for prefetch in ["100", "0"] {
        let args = [
            "ferry",
            "latency-test",
            "--protocol",
            "amqp0-9-1",
            "-p",
            &port,
            "--rate",
            "2000",
            "--count",
            "500",
            "--size",
            "64",
            "--prefetch",
            prefetch,
        ];
        let Command::LatencyTest(opts) = Cli::try_parse_from(args).unwrap().command else {
            unreachable!()
        };
        let mut out = Vec::new();
        let run = ferry_tools::latency_test::run(&opts, &mut out).expect("latency run");
        assert_eq!((run.sent, run.received), (500, 500), "prefetch {prefetch}");
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains("sender behind its schedule"), "{text}");
    }
}

/// The same over AMQP 1.0.
fn perftest1(
    broker: &Ferryd,
    extra: &[&str],
) -> (Plan, ferry_tools::perftest::PerftestReport, String) {
    let mut args = vec!["--protocol", "amqp1.0"];
    args.extend_from_slice(extra);
    perftest(broker, &args)
}

#[test]
fn perftest_over_1_0_settled_and_unsettled() {
    let broker = Ferryd::start();
    // At most once both ways: settled transfers, settled deliveries.
    let (plan, report, text) = perftest1(&broker, &["--count", "3000", "--size", "64"]);
    assert_eq!((plan.confirm, plan.prefetch), (0, 1000));
    assert_eq!(report.iterations[0].transfers, 6000);
    assert!(text.contains("Total transfers/sec"), "{text}");
    // At least once: a window of unsettled transfers, accepted in ranges; several
    // publishers and subscribers per queue, each subscriber taking exactly its quota by
    // credit; two iterations.
    let (plan, report, _) = perftest1(
        &broker,
        &[
            "--confirm",
            "50",
            "--sub-ack",
            "30",
            "--prefetch",
            "200",
            "--npubs",
            "2",
            "--nsubs",
            "2",
            "--qt",
            "2",
            "--count",
            "1000",
            "--size",
            "300",
            "--iterations",
            "2",
            "-s",
            "--base-name",
            "amqp1-unsettled",
        ],
    );
    assert_eq!(plan.sub_quota, 1000);
    assert_eq!(report.iterations.len(), 2);
    assert!(report
        .iterations
        .iter()
        .all(|it| it.transfers == 4 * 1000 * 2));
    // Messages larger than a frame, durable, each confirmed before the next.
    let (_, report, _) = perftest1(
        &broker,
        &[
            "--count",
            "200",
            "--size",
            "100000",
            "--durable",
            "yes",
            "--sync-publish",
            "--sub-ack",
            "7",
            "--base-name",
            "amqp1-large",
        ],
    );
    assert_eq!(report.iterations[0].transfers, 400);
}

#[test]
fn perftest_over_1_0_fanout_and_topic() {
    let broker = Ferryd::start();
    let (_, report, _) = perftest1(
        &broker,
        &[
            "--mode",
            "fanout",
            "--nsubs",
            "3",
            "--count",
            "1000",
            "--sub-ack",
            "10",
            "-s",
        ],
    );
    assert_eq!(report.iterations[0].transfers, 1000 + 3 * 1000);
    let (_, report, _) = perftest1(
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
            "--confirm",
            "100",
            "-s",
            "--base-name",
            "topic1",
        ],
    );
    // 4 publishers of 500; each of the 4 subscribers gets its topic's 1000.
    assert_eq!(report.iterations[0].transfers, 4 * 500 + 4 * 1000);
    // Transactions are not mapped onto 1.0.
    let args = ["ferry", "perftest", "--protocol", "amqp1.0", "--tx", "10"];
    let Command::Perftest(opts) = Cli::try_parse_from(args).unwrap().command else {
        unreachable!()
    };
    assert!(Plan::from_opts(&opts).is_err());
}

#[test]
fn latency_test_over_1_0() {
    let broker = Ferryd::start();
    let port = broker.addr.port().to_string();
    for prefetch in ["100", "0"] {
        let args = [
            "ferry",
            "latency-test",
            "--protocol",
            "amqp1.0",
            "-p",
            &port,
            "--rate",
            "2000",
            "--count",
            "500",
            "--size",
            "64",
            "--prefetch",
            prefetch,
        ];
        let Command::LatencyTest(opts) = Cli::try_parse_from(args).unwrap().command else {
            unreachable!()
        };
        let mut out = Vec::new();
        let run = ferry_tools::latency_test::run(&opts, &mut out).expect("latency run");
        assert_eq!((run.sent, run.received), (500, 500), "prefetch {prefetch}");
    }
}
