//! `ferry ctl` against a real ferryd's management API.

mod common;

use clap::Parser;
use common::raw091::Raw091;
use common::Ferryd;
use ferry_tools::cli::{Cli, Command};
use ferry_tools::ctl::client::CtlError;
use serde_json::Value;

/// Runs `ferry ctl --port <mgmt> ARGS...` and returns what it printed.
fn ctl(b: &Ferryd, args: &[&str]) -> Result<String, CtlError> {
    let port = b.mgmt_addr.unwrap().port().to_string();
    ctl_at(&port, args)
}

fn ctl_at(port: &str, args: &[&str]) -> Result<String, CtlError> {
    let mut argv = vec!["ferry", "ctl", "--port", port];
    argv.extend_from_slice(args);
    let cli = Cli::try_parse_from(argv).expect("valid command line");
    let Command::Ctl(opts) = cli.command else {
        unreachable!()
    };
    let mut out = Vec::new();
    ferry_tools::ctl::execute(&opts, &mut out)?;
    Ok(String::from_utf8(out).unwrap())
}

fn json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

#[test]
fn ctl_manages_queues_exchanges_and_bindings() {
    let b = Ferryd::start_mgmt(&[]);
    let run = |args: &[&str]| ctl(&b, args).unwrap_or_else(|e| panic!("{args:?}: {e}"));
    assert!(run(&["overview"]).contains("Ferry"));
    run(&[
        "declare",
        "queue",
        "ctl-q",
        "--durable",
        "false",
        "--arguments",
        r#"{"x-max-length": 10}"#,
    ]);
    run(&[
        "declare",
        "exchange",
        "ctl-x",
        "--type",
        "topic",
        "--durable",
        "false",
    ]);
    run(&[
        "bind",
        "--source",
        "ctl-x",
        "--destination",
        "ctl-q",
        "--routing-key",
        "a.#",
    ]);
    let table = run(&["list", "queues"]);
    assert!(table.starts_with("name "), "{table}");
    assert!(table.contains("ctl-q"), "{table}");
    let queues = json(&run(&["list", "queues", "--format", "json"]));
    assert_eq!(queues[0]["arguments"]["x-max-length"], 10);
    let bindings = json(&run(&[
        "list", "bindings", "--format", "json", "--name", "ctl-q",
    ]));
    assert!(bindings
        .as_array()
        .unwrap()
        .iter()
        .any(|b| b["source"] == "ctl-x" && b["routing_key"] == "a.#"));
    assert!(run(&["list", "exchanges"]).contains("topic"));

    let mut p = Raw091::open(b.addr);
    p.publish("ctl-x", "a.b", &Default::default(), b"m");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while json(&run(&["list", "queues", "--format", "json"]))[0]["messages"] != 1 {
        assert!(
            std::time::Instant::now() < deadline,
            "the message never arrived"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    run(&["purge", "ctl-q"]);
    assert_eq!(
        json(&run(&["list", "queues", "--format", "json"]))[0]["messages"],
        0
    );

    // Definitions out, objects gone, definitions back in.
    let dir = std::env::temp_dir().join(format!("ferry-ctl-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("defs.json");
    let file_arg = file.display().to_string();
    run(&["export", &file_arg]);
    run(&[
        "unbind",
        "--source",
        "ctl-x",
        "--destination",
        "ctl-q",
        "--routing-key",
        "a.#",
    ]);
    assert!(matches!(
        ctl(
            &b,
            &[
                "unbind",
                "--source",
                "ctl-x",
                "--destination",
                "ctl-q",
                "--routing-key",
                "a.#"
            ]
        ),
        Err(CtlError::Invalid(_))
    ));
    run(&["delete", "queue", "ctl-q", "--if-empty"]);
    run(&["delete", "exchange", "ctl-x"]);
    assert!(!run(&["list", "queues"]).contains("ctl-q"));
    run(&["import", &file_arg]);
    assert!(run(&["list", "queues"]).contains("ctl-q"));
    assert!(run(&["list", "bindings"]).contains("a.#"));
    std::fs::remove_dir_all(&dir).unwrap();

    // Connections, channels, consumers.
    p.consume("ctl-q");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let consumers = json(&run(&["list", "consumers", "--format", "json"]));
        if consumers.as_array().is_some_and(|c| !c.is_empty()) {
            assert_eq!(consumers[0]["queue"]["name"], "ctl-q");
            break;
        }
        assert!(std::time::Instant::now() < deadline);
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let conns = json(&run(&["list", "connections", "--format", "json"]));
    let name = conns[0]["name"].as_str().unwrap().to_owned();
    assert!(run(&["list", "connections"]).contains("AMQP 0-9-1"));
    run(&["list", "channels"]);
    run(&["list", "users"]);
    let closed = run(&["close", &name, "--reason", "ctl test", "--format", "json"]);
    assert_eq!(json(&closed)["ok"], true);
    assert!(p.discard_until_closed(std::time::Duration::from_secs(10)));
}

#[test]
fn ctl_reports_http_errors_and_unreachable_brokers() {
    let b = Ferryd::start_mgmt(&[]);
    match ctl(&b, &["delete", "queue", "no-such-queue"]) {
        Err(CtlError::Http { status, reason, .. }) => {
            assert_eq!(status, 404);
            assert!(reason.contains("no-such-queue"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    match ctl(&b, &["declare", "exchange", "odd", "--type", "nonsense"]) {
        Err(CtlError::Http { status: 400, .. }) => {}
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        ctl(&b, &["declare", "queue", "q", "--arguments", "[1]"]),
        Err(CtlError::Invalid(_))
    ));
    // Nothing listens on port 1.
    assert!(matches!(
        ctl_at("1", &["overview"]),
        Err(CtlError::Unreachable { .. })
    ));
    let dir = std::env::temp_dir().join(format!("ferry-ctl-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.json");
    std::fs::write(&bad, "not json").unwrap();
    assert!(matches!(
        ctl(&b, &["import", &bad.display().to_string()]),
        Err(CtlError::Invalid(_))
    ));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn ctl_needs_good_credentials() {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let dir = std::env::temp_dir().join(format!(
        "ferry-ctl-auth-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let mut users = ferry_auth::Users::default();
    let bob = ferry_auth::Credentials::new("builder", ferry_auth::MIN_ITERATIONS).unwrap();
    users.insert("bob", bob).unwrap();
    let path = dir.join("users");
    users.save(&path).unwrap();
    let path_arg = path.display().to_string();
    let b = Ferryd::start_mgmt(&["--auth", "yes", "--users-file", &path_arg]);
    match ctl(&b, &["overview"]) {
        Err(CtlError::Http { status: 401, .. }) => {}
        other => panic!("guest is not a user here: {other:?}"),
    }
    let out = ctl(
        &b,
        &["--user", "bob", "--password", "builder", "list", "users"],
    )
    .unwrap();
    assert!(out.contains("bob"), "{out}");
    std::fs::remove_dir_all(&dir).unwrap();
}
