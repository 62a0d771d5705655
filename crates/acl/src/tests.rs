use std::net::IpAddr;

use crate::*;

fn acl(text: &str) -> Acl {
    let (acl, warnings) = parse(text).unwrap_or_else(|e| panic!("{e}"));
    assert!(warnings.is_empty(), "unexpected warnings: {warnings:?}");
    acl
}

fn error_line(text: &str) -> (usize, String) {
    let e = parse(text).expect_err("should not parse");
    (e.line, e.message)
}

fn queue(name: &str) -> Vec<(Property, Value<'_>)> {
    vec![(Property::Name, Value::Text(name))]
}

fn allowed(acl: &Acl, user: &str, action: Action, object: ObjectType, name: &str) -> bool {
    acl.check(user, action, object, &queue(name)).allowed
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

#[test]
fn first_matching_rule_wins_and_the_default_is_deny() {
    let a = acl("group users alice bob charlie\n\
                 acl deny charlie create queue\n\
                 acl allow users create queue\n\
                 acl deny all all\n");
    assert!(allowed(&a, "alice", Action::Create, ObjectType::Queue, "q"));
    assert!(!allowed(
        &a,
        "charlie",
        Action::Create,
        ObjectType::Queue,
        "q"
    ));
    assert!(!allowed(
        &a,
        "alice",
        Action::Delete,
        ObjectType::Queue,
        "q"
    ));
    let d = a.check("charlie", Action::Create, ObjectType::Queue, &queue("q"));
    assert_eq!(d.line, Some(2));
    // No rule at all: deny, and the decision says no rule decided.
    let empty = acl("acl allow bob all all\n");
    let d = empty.check("eve", Action::Consume, ObjectType::Queue, &queue("q"));
    assert!(!d.allowed);
    assert_eq!(d.line, None);
}

#[test]
fn allow_mode_with_a_final_allow_all() {
    let a = acl("acl deny bob purge queue name=important\nacl allow all all\n");
    assert!(!allowed(
        &a,
        "bob",
        Action::Purge,
        ObjectType::Queue,
        "important"
    ));
    assert!(allowed(
        &a,
        "bob",
        Action::Purge,
        ObjectType::Queue,
        "other"
    ));
    assert!(allowed(
        &a,
        "alice",
        Action::Purge,
        ObjectType::Queue,
        "important"
    ));
}

#[test]
fn object_and_action_all_and_omitted_object() {
    let a = acl("acl allow bob create\nacl allow amy all queue\nacl deny all all\n");
    assert!(allowed(
        &a,
        "bob",
        Action::Create,
        ObjectType::Exchange,
        "x"
    ));
    assert!(allowed(&a, "bob", Action::Create, ObjectType::Queue, "q"));
    assert!(!allowed(&a, "bob", Action::Delete, ObjectType::Queue, "q"));
    assert!(allowed(&a, "amy", Action::Purge, ObjectType::Queue, "q"));
    assert!(!allowed(
        &a,
        "amy",
        Action::Create,
        ObjectType::Exchange,
        "x"
    ));
}

#[test]
fn properties_must_all_match_and_missing_ones_do_not() {
    let a = acl("acl deny bob create exchange name=test durable=true\n\
                 acl deny bob create exchange name=myEx type=direct\n\
                 acl allow all all\n");
    let lookup = |name, durable, kind| {
        vec![
            (Property::Name, Value::Text(name)),
            (Property::Durable, Value::Bool(durable)),
            (Property::Type, Value::Text(kind)),
        ]
    };
    let check = |l: Vec<(Property, Value<'_>)>| {
        a.check("bob", Action::Create, ObjectType::Exchange, &l)
            .allowed
    };
    assert!(check(lookup("test", false, "direct")));
    assert!(!check(lookup("test", true, "direct")));
    assert!(!check(lookup("myEx", true, "direct")));
    assert!(check(lookup("myEx", true, "topic")));
    // A lookup without the durable property cannot match rule 1.
    assert!(
        a.check("bob", Action::Create, ObjectType::Exchange, &queue("test"))
            .allowed
    );
}

#[test]
fn wildcard_names_for_objects_and_users() {
    let a = acl("acl allow carlt create exchange name=carl.*\n\
                 acl allow app-* publish exchange\n\
                 acl deny all all\n");
    assert!(allowed(
        &a,
        "carlt",
        Action::Create,
        ObjectType::Exchange,
        "carl.x"
    ));
    assert!(!allowed(
        &a,
        "carlt",
        Action::Create,
        ObjectType::Exchange,
        "carlx"
    ));
    assert!(allowed(
        &a,
        "app-orders",
        Action::Publish,
        ObjectType::Exchange,
        "e"
    ));
    assert!(!allowed(
        &a,
        "apple",
        Action::Publish,
        ObjectType::Exchange,
        "e"
    ));
}

#[test]
fn qpid_realm_names_match_bare_users() {
    let a = acl("acl allow rajith@QPID all all\nacl deny all all\n");
    assert!(allowed(
        &a,
        "rajith",
        Action::Consume,
        ObjectType::Queue,
        "q"
    ));
    assert!(allowed(
        &a,
        "rajith@QPID",
        Action::Consume,
        ObjectType::Queue,
        "q"
    ));
    assert!(!allowed(
        &a,
        "rajith@OTHER",
        Action::Consume,
        ObjectType::Queue,
        "q"
    ));
}

#[test]
fn groups_nest_and_continue_over_lines() {
    let a = acl("group group1 name1 name2 \\\n\
                 name3 name4 \\\n\
                 name5\n\
                 group group2 \\\n\
                      group1 \\\n\
                      name6\n\
                 acl allow group2 consume queue\n\
                 acl deny all all\n");
    for user in ["name1", "name3", "name5", "name6"] {
        assert!(
            allowed(&a, user, Action::Consume, ObjectType::Queue, "q"),
            "{user}"
        );
    }
    assert!(!allowed(
        &a,
        "name7",
        Action::Consume,
        ObjectType::Queue,
        "q"
    ));
}

#[test]
fn comments_and_blank_lines_are_ignored_but_trailing_hash_is_data() {
    let a = acl("# a comment\n\n   \t\n  # indented comment\n\
                 acl allow bob publish exchange name=amq.topic routingkey=a.#\n\
                 acl deny all all\n");
    let publish = |key| {
        a.check(
            "bob",
            Action::Publish,
            ObjectType::Exchange,
            &[
                (Property::Name, Value::Text("amq.topic")),
                (Property::RoutingKey, Value::Text(key)),
            ],
        )
        .allowed
    };
    assert!(publish("a.b.c"));
    assert!(publish("a"));
    assert!(!publish("b.a"));
}

#[test]
fn errors_name_the_line() {
    assert_eq!(error_line("\nacl allow bob fly queue\n").0, 2);
    assert!(error_line("acl allow bob fly queue")
        .1
        .contains("unknown action"));
    assert!(error_line("acl allow bob create queues")
        .1
        .contains("unknown object"));
    assert!(error_line("acl allow bob create queue colour=red")
        .1
        .contains("unknown property"));
    assert!(error_line("acl permit bob create queue")
        .1
        .contains("permission"));
    assert!(error_line("acl allow bob").1.contains("expected"));
    assert!(error_line("acl allow bob create queue name")
        .1
        .contains("property=value"));
    assert!(error_line("acl allow bob create queue name=a name=b")
        .1
        .contains("twice"));
    assert!(error_line("acl allow bob create queue durable=maybe")
        .1
        .contains("true or false"));
    assert!(error_line("acl allow bob create name=x")
        .1
        .contains("after an object"));
    assert_eq!(
        error_line("# ok\nallow bob all all\n"),
        (
            2,
            "unknown keyword \"allow\" (expected acl, group or quota)".into()
        )
    );
    assert!(error_line("acl allow b!b all all")
        .1
        .contains("not a valid user name"));
}

#[test]
fn continuation_rules() {
    // Only group lines continue.
    assert!(error_line("acl allow bob all all \\\nqueue")
        .1
        .contains("only group lines"));
    // The group name must come before the backslash.
    assert_eq!(error_line("group \\\ngroup3 a b").0, 1);
    // No empty continuation lines.
    assert_eq!(error_line("group g a \\\n\\\nb").0, 2);
    assert_eq!(error_line("group g a \\\n\nb").0, 2);
    // The file must not end mid-group.
    assert_eq!(error_line("acl deny all all\ngroup g a \\").0, 2);
    // A lone backslash is not a line.
    assert_eq!(error_line("\\").0, 1);
    // Group names are restricted; groups are defined once.
    assert!(error_line("group a.b x").1.contains("group name"));
    assert!(error_line("group all x").1.contains("group name"));
    assert!(error_line("group g x\ngroup g y").1.contains("twice"));
}

#[test]
fn quotas_per_user_group_and_all() {
    let a = acl("group admin ted martin\n\
                 group blacklist usera userb\n\
                 quota connections 10 admin\n\
                 quota connections 5 all\n\
                 quota connections 0 blacklist\n\
                 quota queues 50 admin\n\
                 quota queues 5 all\n\
                 quota queues 1 test\n\
                 quota queues 2 test\n");
    assert_eq!(a.quota(QuotaKind::Connections, "ted"), Some(10));
    assert_eq!(a.quota(QuotaKind::Connections, "someone"), Some(5));
    assert_eq!(a.quota(QuotaKind::Connections, "usera"), Some(0));
    assert_eq!(a.quota(QuotaKind::Queues, "martin"), Some(50));
    assert_eq!(
        a.quota(QuotaKind::Queues, "test"),
        Some(2),
        "last value wins"
    );
    let none = acl("acl allow all all\n");
    assert_eq!(none.quota(QuotaKind::Queues, "x"), None);
    assert!(error_line("quota sessions 1 all")
        .1
        .contains("unknown quota"));
    assert!(error_line("quota queues 65531 all")
        .1
        .contains("0 to 65530"));
    assert!(error_line("quota queues -1 all").1.contains("0 to 65530"));
    assert!(error_line("quota queues 1").1.contains("expected"));
    assert!(error_line("quota queues 1 app-*").1.contains("wildcard"));
}

#[test]
fn limits_allow_up_to_the_limit_and_deny_beyond() {
    let a = acl(
        "acl allow bob create queue name=bob* queuemaxsizeupperlimit=1000\n\
                 acl deny all all\n",
    );
    let create = |name, size: Option<u64>| {
        a.check(
            "bob",
            Action::Create,
            ObjectType::Queue,
            &[
                (Property::Name, Value::Text(name)),
                (Property::QueueMaxSizeUpperLimit, Value::Number(size)),
            ],
        )
    };
    assert!(create("bob1", Some(1000)).allowed);
    let over = create("bob1", Some(1001));
    assert!(!over.allowed);
    assert_eq!(over.limit_exceeded, Some(Property::QueueMaxSizeUpperLimit));
    assert_eq!(over.line, Some(1));
    assert!(
        !create("bob1", None).allowed,
        "an unlimited queue exceeds the limit"
    );
    // Another name falls through to the default rule, not to the limit.
    let other = create("alice1", Some(10));
    assert!(!other.allowed);
    assert_eq!((other.line, other.limit_exceeded), (Some(2), None));
}

#[test]
fn log_permissions_are_reported() {
    let a = acl("acl allow-log bob consume queue\nacl deny-log all all\n");
    let d = a.check("bob", Action::Consume, ObjectType::Queue, &queue("q"));
    assert!(d.allowed && d.logged);
    let d = a.check("eve", Action::Consume, ObjectType::Queue, &queue("q"));
    assert!(!d.allowed && d.logged);
}

#[test]
fn connections_are_decided_only_by_connection_rules_and_default_to_allow() {
    let a = acl("group admins alice\n\
                 acl allow admins create connection host=localhost\n\
                 acl allow admins create connection host=10.0.0.0,10.255.255.255\n\
                 acl deny admins create connection host=all\n\
                 acl deny mallory create connection\n\
                 acl deny all all\n");
    assert!(a.check_connection("alice", ip("127.0.0.1")).allowed);
    assert!(a.check_connection("alice", ip("10.3.2.1")).allowed);
    assert!(!a.check_connection("alice", ip("192.0.2.1")).allowed);
    assert!(!a.check_connection("mallory", ip("127.0.0.1")).allowed);
    let d = a.check_connection("bob", ip("192.0.2.1"));
    assert!(d.allowed, "deny-mode does not refuse connections by itself");
    assert_eq!(d.line, None);
    // check() routes connection lookups the same way.
    let via_check = a.check(
        "mallory",
        Action::Create,
        ObjectType::Connection,
        &[(Property::Host, Value::Host(ip("127.0.0.1")))],
    );
    assert!(!via_check.allowed);
}

#[test]
fn publish_policy_is_fixed_unless_a_deciding_rule_names_routing_keys() {
    // Rule 3 loads with a warning: publishing never supplies `durable`.
    let (a, warnings) = parse(
        "acl allow bob publish exchange name=amq.topic routingkey=bob.#\n\
         acl allow bob publish exchange name=orders\n\
         acl deny bob publish exchange name=audit durable=true\n\
         acl deny all all\n",
    )
    .unwrap();
    assert_eq!(warnings.len(), 1);
    assert_eq!(
        a.publish_policy("bob", "amq.topic"),
        PublishPolicy::ByRoutingKey
    );
    match a.publish_policy("bob", "orders") {
        PublishPolicy::Fixed(d) => assert!(d.allowed && d.line == Some(2)),
        other => panic!("{other:?}"),
    }
    // So rule 3 never matches and the default decides.
    match a.publish_policy("bob", "audit") {
        PublishPolicy::Fixed(d) => assert!(!d.allowed && d.line == Some(4)),
        other => panic!("{other:?}"),
    }
    match a.publish_policy("eve", "amq.topic") {
        PublishPolicy::Fixed(d) => assert!(!d.allowed),
        other => panic!("{other:?}"),
    }
    // The policy agrees with per-message checks.
    let publish = |user, ex, key| {
        a.check(
            user,
            Action::Publish,
            ObjectType::Exchange,
            &[
                (Property::Name, Value::Text(ex)),
                (Property::RoutingKey, Value::Text(key)),
            ],
        )
        .allowed
    };
    assert!(publish("bob", "amq.topic", "bob.x"));
    assert!(!publish("bob", "amq.topic", "alice.x"));
    assert!(publish("bob", "orders", "anything"));
}

#[test]
fn rules_that_never_match_load_with_a_warning() {
    let (_, warnings) = parse(
        "acl allow all delete broker\n\
         acl allow all create queue exchangename=xyz\n\
         acl allow all access exchange alternate=abc queuename=xyz\n\
         acl allow all access connection\n\
         acl allow all access exchange queuename=xyz\n\
         acl allow all all\n",
    )
    .unwrap();
    let lines: Vec<usize> = warnings.iter().map(|w| w.line).collect();
    assert_eq!(lines, vec![1, 2, 3, 4]);
    assert!(warnings[3].message.contains("create action"));
}

#[test]
fn update_broker_decides_user_writes() {
    let (a, warnings) = parse(
        "acl allow admin update broker\n\
         acl allow ops update broker name=app-*\n\
         acl deny all all\n",
    )
    .unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
    let may = |user, name| allowed(&a, user, Action::Update, ObjectType::Broker, name);
    assert!(may("admin", "anyone"));
    assert!(may("ops", "app-billing"));
    assert!(!may("ops", "admin"));
    assert!(!may("bob", "bob"));
}

#[test]
fn substitution_gives_users_private_resources() {
    let a = acl("acl allow all create queue name=${user}-work\n\
                 acl allow all publish exchange name=amq.direct routingkey=${user}\n\
                 acl deny all all\n");
    assert!(allowed(
        &a,
        "bob",
        Action::Create,
        ObjectType::Queue,
        "bob-work"
    ));
    assert!(!allowed(
        &a,
        "bob",
        Action::Create,
        ObjectType::Queue,
        "alice-work"
    ));
    assert_eq!(
        a.publish_policy("bob", "amq.direct"),
        PublishPolicy::ByRoutingKey
    );
}

#[test]
fn shared_acl_reloads_and_keeps_old_rules_on_error() {
    let dir = std::env::temp_dir().join(format!("ferry-acl-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("test.acl");
    std::fs::write(&path, "acl allow all all\n").unwrap();
    let (shared, _) = SharedAcl::load(&path).unwrap();
    let g1 = shared.generation();
    assert!(allowed(
        &shared.current(),
        "x",
        Action::Purge,
        ObjectType::Queue,
        "q"
    ));
    std::fs::write(&path, "acl deny all all\n").unwrap();
    shared.reload().unwrap();
    assert!(shared.generation() > g1);
    assert!(!allowed(
        &shared.current(),
        "x",
        Action::Purge,
        ObjectType::Queue,
        "q"
    ));
    std::fs::write(&path, "acl deny all everything\n").unwrap();
    let g2 = shared.generation();
    let e = shared.reload().unwrap_err();
    assert!(e.to_string().contains("line 1"), "{e}");
    assert_eq!(shared.generation(), g2);
    assert!(!allowed(
        &shared.current(),
        "x",
        Action::Purge,
        ObjectType::Queue,
        "q"
    ));
    std::fs::remove_file(&path).unwrap();
    assert!(matches!(shared.reload(), Err(LoadError::Read { .. })));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn every_keyword_round_trips() {
    for a in Action::ALL {
        assert_eq!(Action::parse(a.as_str()), Some(*a));
    }
    for o in ObjectType::ALL {
        assert_eq!(ObjectType::parse(o.as_str()), Some(*o));
    }
    for p in Property::ALL {
        assert_eq!(Property::parse(p.as_str()), Some(*p));
    }
}

#[test]
fn arbitrary_text_never_panics() {
    // A cheap deterministic generator: ACL-ish tokens and punctuation in random order.
    let tokens = [
        "acl",
        "group",
        "quota",
        "allow",
        "deny-log",
        "all",
        "create",
        "queue",
        "exchange",
        "connection",
        "name=",
        "host=",
        "10.0.0.1,",
        "routingkey=#.*",
        "durable=",
        "\\",
        "\n",
        " ",
        "${user}",
        "*",
        "=",
        "#",
        "queues",
        "65530",
        "bob",
    ];
    let mut seed: u64 = 0x2545_F491_4F6C_DD1D;
    for _ in 0..2000 {
        let mut text = String::new();
        for _ in 0..(seed % 40) {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            text.push_str(tokens[(seed % tokens.len() as u64) as usize]);
        }
        if let Ok((acl, _)) = parse(&text) {
            let _ = acl.check("bob", Action::Create, ObjectType::Queue, &queue("q"));
            let _ = acl.publish_policy("bob", "amq.topic");
            let _ = acl.check_connection("bob", ip("10.0.0.1"));
        }
    }
}
