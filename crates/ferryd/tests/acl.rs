//! `--acl-file`: every denial path over both protocols, reload on SIGHUP, and the per-user
//! and per-address limits.

mod common;

use std::path::PathBuf;
use std::time::Duration;

use bytes::BytesMut;
use common::raw::Raw;
use common::raw091::{short, Raw091};
use common::Ferryd;
use ferry_amqp010::{
    CloseCode, Command, Control, DeliveryProperties, ErrorCode, ExchangeBind, ExchangeDeclare,
    ExchangeDelete, ExecutionException, MessageSubscribe, MessageTransfer, QueueDeclare,
    QueueDelete, QueuePurge, QueueQuery, Str,
};
use ferry_amqp091::{BasicProperties, ChannelOpen, Method};

/// An ACL file in a private temporary directory, removed on drop.
struct AclFile {
    dir: PathBuf,
    path: PathBuf,
}

impl AclFile {
    fn new(test: &str, text: &str) -> AclFile {
        let dir = std::env::temp_dir().join(format!("ferry-acl-{test}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let path = dir.join("ferryd.acl");
        std::fs::write(&path, text).expect("write acl");
        AclFile { dir, path }
    }

    fn write(&self, text: &str) {
        std::fs::write(&self.path, text).expect("rewrite acl");
    }

    fn arg(&self) -> &str {
        self.path.to_str().expect("utf-8 path")
    }
}

impl Drop for AclFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Rules most tests share: bob may do everything with his own queues (`bob.*`) and publish
/// to them (routing keys match as topics, so `bob.*` is one word after `bob.`); eve may only
/// look; everyone else nothing.
const RULES: &str = "\
group readers eve
acl allow bob create queue name=bob*
acl allow bob access queue
acl allow bob consume queue name=bob*
acl allow bob purge queue name=bob*
acl allow bob delete queue name=bob*
acl allow bob bind exchange name=amq.direct queuename=bob*
acl allow bob publish exchange name=amq.default routingkey=bob.*
acl allow bob publish exchange name=amq.direct routingkey=bob.#
acl allow bob access exchange
acl allow readers access all
acl deny-log all all
";

fn broker(test: &str, rules: &str, extra: &[&str]) -> (Ferryd, AclFile) {
    let acl = AclFile::new(test, rules);
    let mut args = vec!["--acl-file", acl.arg()];
    args.extend_from_slice(extra);
    (Ferryd::start_with(&args), acl)
}

fn exception(raw: &mut Raw, channel: u16) -> ExecutionException {
    match raw.expect_command(channel, |c| matches!(c, Command::ExecutionException(_))) {
        Command::ExecutionException(e) => e,
        _ => unreachable!(),
    }
}

/// The command fails with unauthorized-access and the session is detached, as qpidd does.
fn assert_denied(raw: &mut Raw, channel: u16, id: u32) {
    let e = exception(raw, channel);
    assert_eq!(e.error_code, Some(ErrorCode::UnauthorizedAccess), "{e:?}");
    assert_eq!(e.command_id, Some(id));
    let text = e.description.map(|d| d.to_string()).unwrap_or_default();
    assert!(text.contains("ACL denied"), "{text}");
    raw.expect_control(channel, |c| matches!(c, Control::SessionDetach(_)));
}

/// A sync'd command on `channel` completes (was allowed).
fn assert_completed(raw: &mut Raw, channel: u16, id: u32) {
    raw.expect_control(channel, |c| {
        matches!(c, Control::SessionCompleted(sc)
            if sc.commands.as_ref().is_some_and(|s| s.contains(id)))
    });
}

fn header(routing_key: &str) -> BytesMut {
    let mut header = BytesMut::new();
    DeliveryProperties {
        routing_key: Some(Str::from(routing_key)),
        ..Default::default()
    }
    .encode(&mut header)
    .unwrap();
    header
}

fn transfer_to(exchange: &str) -> MessageTransfer {
    MessageTransfer {
        destination: Some(Str::from(exchange)),
        ..Default::default()
    }
}

#[test]
fn amqp010_every_denied_command_is_unauthorized_access_and_allowed_ones_work() {
    let (broker, _acl) = broker("amqp010", RULES, &[]);
    let mut bob = Raw::open_as(broker.addr, "bob");
    let mut channel = 0u16;
    let mut fresh = |raw: &mut Raw| {
        channel += 1;
        raw.attach(channel, &format!("s{channel}"));
        channel
    };

    // Allowed: his own queue, publishing to it, binding it, consuming from it.
    let ch = fresh(&mut bob);
    let id = bob.declare_queue(ch, "bob.q");
    assert_completed(&mut bob, ch, id);
    let id = bob.transfer(ch, transfer_to(""), &header("bob.q"), b"hello");
    assert_completed(&mut bob, ch, id);
    let bind = ExchangeBind {
        queue: Some(Str::from("bob.q")),
        exchange: Some(Str::from("amq.direct")),
        binding_key: Some(Str::from("bob.k")),
        arguments: None,
    };
    let id = bob.command(ch, bind.into());
    assert_completed(&mut bob, ch, id);
    let id = bob.transfer(ch, transfer_to("amq.direct"), &header("bob.k"), b"routed");
    assert_completed(&mut bob, ch, id);

    // Denied, each on a fresh session (a denial detaches its session).
    let denials: Vec<(&str, Command)> = vec![
        (
            "create queue",
            QueueDeclare {
                queue: Some(Str::from("alice-q")),
                ..Default::default()
            }
            .into(),
        ),
        (
            "consume",
            MessageSubscribe {
                queue: Some(Str::from("alice-q")),
                destination: Some(Str::from("d")),
                ..Default::default()
            }
            .into(),
        ),
        (
            "purge",
            QueuePurge {
                queue: Some(Str::from("other")),
            }
            .into(),
        ),
        (
            "delete queue",
            QueueDelete {
                queue: Some(Str::from("other")),
                ..Default::default()
            }
            .into(),
        ),
        (
            "create exchange",
            ExchangeDeclare {
                exchange: Some(Str::from("bobs-exchange")),
                r#type: Some(Str::from("fanout")),
                ..Default::default()
            }
            .into(),
        ),
        (
            "delete exchange",
            ExchangeDelete {
                exchange: Some(Str::from("amq.fanout")),
                ..Default::default()
            }
            .into(),
        ),
        (
            "bind to another queue",
            ExchangeBind {
                queue: Some(Str::from("other")),
                exchange: Some(Str::from("amq.direct")),
                binding_key: Some(Str::from("k")),
                arguments: None,
            }
            .into(),
        ),
    ];
    for (what, command) in denials {
        let ch = fresh(&mut bob);
        let id = bob.command(ch, command);
        eprintln!("checking denial of {what}");
        assert_denied(&mut bob, ch, id);
    }

    // Publishing is decided per routing key.
    let ch = fresh(&mut bob);
    let id = bob.transfer(ch, transfer_to("amq.direct"), &header("alice.k"), b"no");
    assert_denied(&mut bob, ch, id);
    let ch = fresh(&mut bob);
    let id = bob.transfer(ch, transfer_to(""), &header("other"), b"no");
    assert_denied(&mut bob, ch, id);

    // The sessions that were not denied carry on: bob-q got both messages.
    let ch = fresh(&mut bob);
    bob.command(
        ch,
        QueueQuery {
            queue: Some(Str::from("bob.q")),
        }
        .into(),
    );
    let Command::ExecutionResult(r) =
        bob.expect_command(ch, |c| matches!(c, Command::ExecutionResult(_)))
    else {
        unreachable!()
    };
    let q: ferry_amqp010::QueueQueryResult = r.value.unwrap().decode_as().unwrap();
    assert_eq!(q.message_count, Some(2));

    // Another user is denied what bob may do; a reader may look but not touch.
    let mut eve = Raw::open_as(broker.addr, "eve");
    eve.attach(1, "eve");
    let id = eve.command(
        1,
        QueueQuery {
            queue: Some(Str::from("bob.q")),
        }
        .into(),
    );
    assert_completed(&mut eve, 1, id);
    let id = eve.transfer(1, transfer_to(""), &header("bob.q"), b"eve");
    assert_denied(&mut eve, 1, id);

    let (_, log) = broker.terminate();
    assert!(
        log.contains("ACL denied publish exchange name=amq.direct routingkey=alice.k"),
        "denials are logged:\n{log}"
    );
}

#[test]
fn amqp091_denials_close_the_channel_with_access_refused() {
    let (broker, _acl) = broker("amqp091", RULES, &[]);
    let mut bob = Raw091::open_as(broker.addr, "bob");
    let refused = |raw: &mut Raw091, channel: u16| {
        let Method::ChannelClose(c) = raw.expect(channel, |m| matches!(m, Method::ChannelClose(_)))
        else {
            unreachable!()
        };
        assert_eq!(c.reply_code, 403, "{c:?}");
        assert!(
            String::from_utf8_lossy(c.reply_text.as_bytes())
                .starts_with("ACCESS_REFUSED - ACL denied"),
            "{c:?}"
        );
        raw.method(channel, ferry_amqp091::ChannelCloseOk {}.into());
    };
    // Allowed declare, then a denied one on the same channel.
    bob.method(
        1,
        ferry_amqp091::QueueDeclare {
            queue: short("bob.091"),
            ..Default::default()
        }
        .into(),
    );
    bob.expect(1, |m| matches!(m, Method::QueueDeclareOk(_)));
    bob.method(
        1,
        ferry_amqp091::QueueDeclare {
            queue: short("alice-091"),
            ..Default::default()
        }
        .into(),
    );
    refused(&mut bob, 1);
    // A denied publish closes the channel too.
    bob.method(1, ChannelOpen::default().into());
    bob.expect(1, |m| matches!(m, Method::ChannelOpenOk(_)));
    bob.publish("", "alice-091", &BasicProperties::default(), b"no");
    refused(&mut bob, 1);
    // A denied consume.
    bob.method(1, ChannelOpen::default().into());
    bob.expect(1, |m| matches!(m, Method::ChannelOpenOk(_)));
    bob.method(
        1,
        ferry_amqp091::BasicConsume {
            queue: short("elsewhere"),
            ..Default::default()
        }
        .into(),
    );
    refused(&mut bob, 1);
    // An exchange-to-exchange binding is a bind of the source exchange.
    bob.method(1, ChannelOpen::default().into());
    bob.expect(1, |m| matches!(m, Method::ChannelOpenOk(_)));
    bob.method(
        1,
        ferry_amqp091::ExchangeBind {
            destination: short("amq.fanout"),
            source: short("amq.topic"),
            routing_key: short("#"),
            ..Default::default()
        }
        .into(),
    );
    refused(&mut bob, 1);
    // And an allowed publish and consume still work on a new channel.
    bob.method(1, ChannelOpen::default().into());
    bob.expect(1, |m| matches!(m, Method::ChannelOpenOk(_)));
    bob.publish("", "bob.091", &BasicProperties::default(), b"yes");
    bob.consume("bob.091");
    assert_eq!(&bob.delivery().body[..], b"yes");
}

#[test]
fn connection_rules_refuse_at_open_on_both_protocols() {
    let rules = "acl deny mallory create connection\nacl allow all all\n";
    let (broker, _acl) = broker("connection", rules, &[]);
    let mut m = Raw::login_as(broker.addr, "mallory");
    let close = m.until_closed().expect("connection.close");
    assert_eq!(close.reply_code, Some(CloseCode::ConnectionForced));
    let mut m = Raw091::login_as(broker.addr, "mallory");
    let Method::ConnectionClose(c) = m.expect(0, |m| matches!(m, Method::ConnectionClose(_)))
    else {
        unreachable!()
    };
    assert_eq!(c.reply_code, 530);
    // Others get in.
    let _ok = Raw::open_as(broker.addr, "bob");
    let _ok = Raw091::open_as(broker.addr, "bob");
}

/// Declares `queue` as `user` on a new connection: Ok if it completed, else the exception code.
fn try_declare(addr: std::net::SocketAddr, user: &str, queue: &str) -> Result<(), ErrorCode> {
    let mut raw = Raw::open_as(addr, user);
    raw.attach(1, "try");
    let id = raw.declare_queue(1, queue);
    loop {
        match raw.next().expect("an answer") {
            (
                1,
                ferry_amqp010::Incoming::Command {
                    command: Command::ExecutionException(e),
                    ..
                },
            ) => return Err(e.error_code.expect("error code")),
            (1, ferry_amqp010::Incoming::Control(Control::SessionCompleted(sc)))
                if sc.commands.as_ref().is_some_and(|s| s.contains(id)) =>
            {
                return Ok(())
            }
            _ => {}
        }
    }
}

#[test]
fn sighup_reloads_the_file_and_a_bad_file_keeps_the_old_rules() {
    let (broker, acl) = broker("reload", "acl allow all all\n", &[]);
    assert_eq!(try_declare(broker.addr, "bob", "before"), Ok(()));

    acl.write("acl deny bob create queue\nacl allow all all\n");
    broker.signal("HUP");
    // The reload is asynchronous: poll until it applies.
    let denied = (0..100).any(|i| {
        let outcome = try_declare(broker.addr, "bob", &format!("after-{i}"));
        if outcome.is_ok() {
            std::thread::sleep(Duration::from_millis(50));
        }
        outcome == Err(ErrorCode::UnauthorizedAccess)
    });
    assert!(denied, "the reloaded rules apply");
    assert_eq!(try_declare(broker.addr, "alice", "hers"), Ok(()));

    // A file that does not parse leaves the deny in force.
    acl.write("acl deny bob create queue\nacl allow all everything\n");
    broker.signal("HUP");
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        try_declare(broker.addr, "bob", "still-denied"),
        Err(ErrorCode::UnauthorizedAccess)
    );
    let (_, log) = broker.terminate();
    assert!(log.contains("line 2: unknown action"), "{log}");
    assert!(log.contains("previous rules stay in force"), "{log}");
}

#[test]
fn a_bad_acl_file_at_start_is_a_one_line_error_naming_the_line() {
    let acl = AclFile::new("bad", "# fine\nacl allow bob fly queue\n");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ferryd"))
        .args(["--port", "0", "--acl-file", acl.arg()])
        .output()
        .expect("run ferryd");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("line 2: unknown action \"fly\""), "{err}");
}

#[test]
fn per_user_connection_quotas_from_the_acl_and_the_command_line() {
    let rules = "quota connections 1 carol\nacl allow all all\n";
    let (broker, _acl) = broker("quota-conn", rules, &["--connection-limit-per-user", "2"]);
    let _c1 = Raw::open_as(broker.addr, "carol");
    let mut c2 = Raw::login_as(broker.addr, "carol");
    let close = c2.until_closed().expect("refused");
    assert_eq!(close.reply_code, Some(CloseCode::ConnectionForced));
    let _b1 = Raw::open_as(broker.addr, "bob");
    let b2 = Raw091::open_as(broker.addr, "bob");
    let mut b3 = Raw091::login_as(broker.addr, "bob");
    let Method::ConnectionClose(c) = b3.expect(0, |m| matches!(m, Method::ConnectionClose(_)))
    else {
        unreachable!()
    };
    assert_eq!(c.reply_code, 530);
    // A slot frees when a connection ends.
    drop(b2);
    let ok = (0..50).any(|_| {
        std::thread::sleep(Duration::from_millis(100));
        let mut attempt = Raw091::login_as(broker.addr, "bob");
        matches!(
            attempt.expect(0, |m| matches!(
                m,
                Method::ConnectionOpenOk(_) | Method::ConnectionClose(_)
            )),
            Method::ConnectionOpenOk(_)
        )
    });
    assert!(ok);
}

#[test]
fn per_ip_connection_limit_refuses_before_any_protocol() {
    let broker = Ferryd::start_with(&["--connection-limit-per-ip", "2"]);
    let _a = Raw::open(broker.addr);
    let _b = Raw091::open(broker.addr);
    let mut c = std::net::TcpStream::connect(broker.addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut buf = [0u8; 16];
    use std::io::Read;
    assert_eq!(c.read(&mut buf).unwrap_or(0), 0, "closed without a word");
}

#[test]
fn per_user_queue_quotas_refuse_creation_until_a_queue_goes() {
    let rules = "quota queues 2 bob\nacl allow all all\n";
    let (broker, _acl) = broker("quota-queues", rules, &[]);
    let mut bob = Raw::open_as(broker.addr, "bob");
    bob.attach(1, "q");
    for name in ["q1", "q2"] {
        let id = bob.declare_queue(1, name);
        assert_completed(&mut bob, 1, id);
    }
    // Redeclaring an existing queue is not a new queue.
    let id = bob.declare_queue(1, "q1");
    assert_completed(&mut bob, 1, id);
    let id = bob.declare_queue(1, "q3");
    let e = exception(&mut bob, 1);
    assert_eq!(e.error_code, Some(ErrorCode::ResourceLimitExceeded));
    assert_eq!(e.command_id, Some(id));
    // 0-9-1: the same quota, 406 as RabbitMQ's queue limits.
    let mut bob091 = Raw091::open_as(broker.addr, "bob");
    bob091.method(
        1,
        ferry_amqp091::QueueDeclare {
            queue: short("q3"),
            ..Default::default()
        }
        .into(),
    );
    let Method::ChannelClose(c) = bob091.expect(1, |m| matches!(m, Method::ChannelClose(_))) else {
        unreachable!()
    };
    assert_eq!(c.reply_code, 406);
    // Deleting one (by anyone) frees a slot.
    let mut admin = Raw::open_as(broker.addr, "admin");
    admin.attach(1, "a");
    let id = admin.command(
        1,
        QueueDelete {
            queue: Some(Str::from("q1")),
            ..Default::default()
        }
        .into(),
    );
    assert_completed(&mut admin, 1, id);
    bob.attach(2, "again");
    let id = bob.declare_queue(2, "q3");
    assert_completed(&mut bob, 2, id);
    // Other users have no quota.
    for name in ["a1", "a2", "a3"] {
        let id = admin.declare_queue(1, name);
        assert_completed(&mut admin, 1, id);
    }
}
