//! A full disk: ferryd's data directory on a small tmpfs. Publishers of persistent messages
//! get resource-limit-exceeded once the journal cannot get another segment, nothing already
//! completed is lost, consumers keep being served, and draining frees space for publishing
//! again. Needs permission to mount a tmpfs (root); skips with a message otherwise.

mod common;

use std::process::Command;
use std::time::Duration;

use common::{DataDir, Ferryd};
use ferry_client::{
    ClientError, ConnectOptions, Connection, ErrorCode, FlowMode, OutgoingMessage,
    QueueDeclareOptions, SubscribeOptions,
};

/// A tmpfs mounted on a fresh directory, unmounted on drop.
struct Tmpfs(DataDir);

impl Tmpfs {
    fn mount(size: &str) -> Option<Tmpfs> {
        let dir = DataDir::new("diskfull");
        std::fs::create_dir_all(&dir.0).ok()?;
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&dir.0)
            .status()
            .is_ok_and(|s| s.success());
        ok.then_some(Tmpfs(dir))
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0 .0).status();
    }
}

/// ferryd with its data directory on a fresh tmpfs of `size`, or `None` (and a SKIPPED line
/// naming `test`) where no tmpfs can be mounted.
fn broker_on_tmpfs(size: &str, test: &str, disk_free_limit: &str) -> Option<(Tmpfs, Ferryd)> {
    let Some(fs) = Tmpfs::mount(size) else {
        eprintln!("SKIPPED: cannot mount a tmpfs here (needs root); the {test} test did not run");
        return None;
    };
    let broker = Ferryd::start_with(&[
        &fs.0.arg(),
        "--store-segment-size",
        "262144",
        "--disk-free-limit",
        disk_free_limit,
    ]);
    Some((fs, broker))
}

fn message(i: usize) -> OutgoingMessage {
    OutgoingMessage::builder()
        .routing_key("full")
        .persistent(true)
        .body(format!("{i:08}-").repeat(100))
        .build()
        .unwrap()
}

#[tokio::test]
async fn a_full_disk_refuses_publishers_keeps_what_was_completed_and_recovers() {
    // The disk alarm (tested below) would pause the publisher long before the disk is full.
    let Some((_fs, broker)) = broker_on_tmpfs("3m", "full-disk", "0") else {
        return;
    };
    let conn = Connection::connect(broker.addr, ConnectOptions::default())
        .await
        .unwrap();
    let s = conn.session().await.unwrap();
    let opts = QueueDeclareOptions {
        durable: true,
        ..QueueDeclareOptions::default()
    };
    s.queue_declare("full", opts).await.unwrap();
    // Publish until refused: 1 KiB messages into 3 MiB.
    let mut completed = 0;
    let refusal = loop {
        match s.transfer_sync("", &message(completed)).await {
            Ok(_) => completed += 1,
            Err(e) => break e,
        }
        assert!(completed < 10_000, "the disk never filled up");
    };
    match refusal {
        ClientError::Exception { code, .. } => assert_eq!(code, ErrorCode::ResourceLimitExceeded),
        other => panic!("expected resource-limit-exceeded, got {other:?}"),
    }
    assert!(completed > 100, "only {completed} messages fit");
    // Consumers are still served, and get every completed message.
    let s = conn.session().await.unwrap();
    let sub_opts = SubscribeOptions {
        flow_mode: FlowMode::Credit,
        message_credit: u32::MAX,
        ..SubscribeOptions::default()
    };
    let mut sub = s.subscribe("full", "d", sub_opts).await.unwrap();
    for i in 0..completed {
        let d = tokio::time::timeout(Duration::from_secs(10), sub.next())
            .await
            .expect("a delivery in time")
            .expect("subscription open");
        assert_eq!(d.body, message(i).body(), "message {i}");
    }
    s.message_cancel("d").await.unwrap();
    s.sync().await.unwrap();
    // Space comes back as the drained segments are recycled: publishing works again.
    let mut again = false;
    for _ in 0..100 {
        let s = conn.session().await.unwrap();
        if s.transfer_sync("", &message(0)).await.is_ok() {
            again = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        again,
        "publishing did not resume after the queue was drained"
    );
    drop(conn);
    let (status, log) = broker.terminate();
    assert!(status.success(), "{log}");
    assert!(log.contains("disk full"), "the log says why: {log}");
}

#[test]
fn the_disk_alarm_blocks_publishers_below_the_free_space_limit() {
    use common::raw091::Raw091;
    use ferry_amqp091::{BasicProperties, Method};
    let Some((fs, broker)) = broker_on_tmpfs("16m", "disk alarm", "8MiB") else {
        return;
    };
    let mut p = Raw091::open(broker.addr);
    p.declare_queue("disk-alarm", Default::default());
    p.publish("", "disk-alarm", &BasicProperties::default(), b"before");
    // Leave less than the limit free: the alarm rises within its check interval.
    let filler = fs.0 .0.join("filler");
    std::fs::write(&filler, vec![0u8; 10 << 20]).expect("fill the tmpfs");
    let Method::ConnectionBlocked(b) = p.expect(0, |m| matches!(m, Method::ConnectionBlocked(_)))
    else {
        unreachable!()
    };
    assert_eq!(b.reason.as_bytes(), b"low on disk");
    std::fs::remove_file(&filler).unwrap();
    p.expect(0, |m| matches!(m, Method::ConnectionUnblocked(_)));
    p.publish("", "disk-alarm", &BasicProperties::default(), b"after");
    assert_eq!(
        &p.get("disk-alarm", true).expect("first").body[..],
        b"before"
    );
    assert_eq!(
        &p.get("disk-alarm", true).expect("second").body[..],
        b"after"
    );
    let (_, log) = broker.terminate();
    assert!(
        log.contains("disk alarm: free space below --disk-free-limit"),
        "{log}"
    );
    assert!(log.contains("disk alarm cleared"), "{log}");
}
