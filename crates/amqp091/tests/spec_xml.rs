//! Cross-checks the hand-written method and property tables against the
//! spec's XML, so the two cannot drift apart.
//!
//! The XML is read with a small scanner rather than an XML crate: the file is
//! machine-generated (elements, attributes, comments, nothing else), and a
//! dev-dependency would touch the shared lock file for a test helper.

use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;

use ferry_amqp091::{FieldInfo, METHODS, PROPERTIES};

/// Methods RabbitMQ adds that the XML does not describe.
const EXTENSIONS: &[&str] = &[
    "connection.blocked",
    "connection.unblocked",
    "connection.update-secret",
    "connection.update-secret-ok",
    "exchange.bind",
    "exchange.bind-ok",
    "exchange.unbind",
    "exchange.unbind-ok",
    "basic.nack",
    "confirm.select",
    "confirm.select-ok",
];

/// The stripped XML comes from Qpid, which names basic's recover methods
/// differently from the published 0-9-1 spec and RabbitMQ; the table uses
/// the latter.
fn method_alias(class: &str, xml_name: &str) -> String {
    match (class, xml_name) {
        ("basic", "recover") => "recover-async".into(),
        ("basic", "recover-sync") => "recover".into(),
        ("basic", "recover-sync-ok") => "recover-ok".into(),
        _ => xml_name.into(),
    }
}

/// Rust names: `-` becomes `_`; `type` is a keyword, so `kind`; Qpid calls
/// the fourteenth basic property `reserved`, the spec `cluster-id`.
fn rust_field_name(xml_name: &str, is_property: bool) -> String {
    match xml_name {
        "type" => "kind".into(),
        "reserved" if is_property => "cluster_id".into(),
        other => other.replace('-', "_"),
    }
}

#[derive(Debug)]
enum Event {
    Start(String, HashMap<String, String>),
    End(String),
}

/// Elements and their attributes, in document order; comments, the XML
/// declaration and text are skipped.
fn scan(xml: &str) -> Result<Vec<Event>, String> {
    let mut events = Vec::new();
    let mut rest = xml;
    while let Some(lt) = rest.find('<') {
        rest = &rest[lt..];
        if let Some(after) = rest.strip_prefix("<!--") {
            let end = after.find("-->").ok_or("unterminated comment")?;
            rest = &after[end + 3..];
            continue;
        }
        let gt = rest.find('>').ok_or("unterminated tag")?;
        let tag = &rest[1..gt];
        rest = &rest[gt + 1..];
        if tag.starts_with('?') {
            continue;
        }
        if let Some(name) = tag.strip_prefix('/') {
            events.push(Event::End(name.trim().to_string()));
            continue;
        }
        let self_closing = tag.ends_with('/');
        let tag = tag.trim_end_matches('/');
        let name_end = tag.find(char::is_whitespace).unwrap_or(tag.len());
        let name = tag[..name_end].to_string();
        let mut attrs = HashMap::new();
        let mut a = &tag[name_end..];
        while let Some(eq) = a.find('=') {
            let key = a[..eq].trim().to_string();
            let v = a[eq + 1..].trim_start();
            let v = v
                .strip_prefix('"')
                .ok_or(format!("unquoted attribute {key}"))?;
            let close = v.find('"').ok_or("unterminated attribute")?;
            attrs.insert(key, v[..close].to_string());
            a = &v[close + 1..];
        }
        events.push(Event::Start(name.clone(), attrs));
        if self_closing {
            events.push(Event::End(name));
        }
    }
    Ok(events)
}

#[derive(Debug, Default)]
struct XmlMethod {
    class_id: u16,
    method_id: u16,
    name: String,
    content: bool,
    fields: Vec<(String, String)>,
}

#[derive(Debug, Default)]
struct Spec {
    methods: Vec<XmlMethod>,
    /// Class-level fields of `basic`: the content properties.
    properties: Vec<(String, String)>,
}

fn parse(xml: &str) -> Result<Spec, String> {
    let events = scan(xml)?;
    let mut domains = HashMap::new();
    for e in &events {
        if let Event::Start(n, a) = e {
            if n == "domain" {
                domains.insert(a["name"].clone(), a["type"].clone());
            }
        }
    }
    // Qpid's exchange.bound refers to a domain it never defines.
    domains
        .entry("queue name".into())
        .or_insert("shortstr".into());
    let field_type = |a: &HashMap<String, String>| -> Result<String, String> {
        match (a.get("type"), a.get("domain")) {
            (Some(t), _) => Ok(t.clone()),
            (None, Some(d)) => domains.get(d).cloned().ok_or(format!("unknown domain {d}")),
            (None, None) => Err(format!("field {:?} has no type", a.get("name"))),
        }
    };
    let mut spec = Spec::default();
    let (mut class, mut class_id) = (String::new(), 0u16);
    let mut method: Option<XmlMethod> = None;
    for e in &events {
        match e {
            Event::Start(n, a) if n == "class" => {
                class = a["name"].clone();
                class_id = a["index"].parse().map_err(|_| "bad class index")?;
            }
            Event::Start(n, a) if n == "method" => {
                method = Some(XmlMethod {
                    class_id,
                    method_id: a["index"].parse().map_err(|_| "bad method index")?,
                    name: format!("{class}.{}", method_alias(&class, &a["name"])),
                    content: a.get("content").is_some_and(|c| c == "1"),
                    fields: Vec::new(),
                });
            }
            Event::End(n) if n == "method" => {
                spec.methods.extend(method.take());
            }
            Event::Start(n, a) if n == "field" => {
                let ty = field_type(a)?;
                match method.as_mut() {
                    Some(m) => m.fields.push((rust_field_name(&a["name"], false), ty)),
                    None if class == "basic" => spec
                        .properties
                        .push((rust_field_name(&a["name"], true), ty)),
                    None => return Err(format!("class field outside basic: {a:?}")),
                }
            }
            _ => {}
        }
    }
    Ok(spec)
}

fn fields_of(f: &[FieldInfo]) -> Vec<(String, String)> {
    f.iter()
        .map(|f| (f.name.to_string(), f.kind.spec_name().to_string()))
        .collect()
}

/// Every disagreement between the XML and the crate's tables.
fn mismatches(spec: &Spec) -> Vec<String> {
    let mut out = Vec::new();
    let mut seen = BTreeSet::new();
    for x in &spec.methods {
        let Some(ours) = METHODS
            .iter()
            .find(|m| (m.class_id, m.method_id) == (x.class_id, x.method_id))
        else {
            out.push(format!(
                "{} ({}, {}) missing",
                x.name, x.class_id, x.method_id
            ));
            continue;
        };
        seen.insert(ours.name);
        if ours.name != x.name {
            out.push(format!(
                "({}, {}) is {} in the XML, {} here",
                x.class_id, x.method_id, x.name, ours.name
            ));
        }
        if ours.has_content != x.content {
            out.push(format!("{}: content flag differs", x.name));
        }
        if fields_of(ours.fields) != x.fields {
            out.push(format!(
                "{}: fields {:?} here, {:?} in the XML",
                x.name,
                fields_of(ours.fields),
                x.fields
            ));
        }
    }
    let extra: BTreeSet<_> = METHODS
        .iter()
        .map(|m| m.name)
        .filter(|n| !seen.contains(n))
        .collect();
    let expected: BTreeSet<_> = EXTENSIONS.iter().copied().collect();
    if extra != expected {
        out.push(format!(
            "methods beyond the XML: {extra:?}, expected {expected:?}"
        ));
    }
    if fields_of(PROPERTIES) != spec.properties {
        out.push(format!(
            "properties {:?} here, {:?} in the XML",
            fields_of(PROPERTIES),
            spec.properties
        ));
    }
    out
}

/// `$FERRY_SPECS_DIR`, else `shared/specs` beside the workspace (the specs are reference
/// data kept outside the project).
fn spec_path() -> PathBuf {
    let dir = match std::env::var_os("FERRY_SPECS_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/specs"),
    };
    dir.join("amqp-0-9-1.stripped.xml")
}

#[test]
fn tables_match_the_spec_xml() {
    let path = spec_path();
    let Ok(xml) = std::fs::read_to_string(&path) else {
        // scripts/test.sh sets FERRY_REQUIRE_SPECS: the whole suite must not pass with this
        // check skipped.
        let required =
            std::env::var_os("FERRY_REQUIRE_SPECS").is_some_and(|v| !v.is_empty() && v != "0");
        assert!(
            !required,
            "{} not found: set FERRY_SPECS_DIR to the AMQP specs directory",
            path.display()
        );
        eprintln!("skipped: {} not found", path.display());
        return;
    };
    let spec = parse(&xml).expect("spec XML parses");
    assert!(
        spec.methods.len() > 50,
        "found only {} methods",
        spec.methods.len()
    );
    assert_eq!(spec.properties.len(), 14);
    let problems = mismatches(&spec);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_check_notices_a_drift() {
    let path = spec_path();
    let Ok(xml) = std::fs::read_to_string(&path) else {
        eprintln!("skipped: {} not found", path.display());
        return;
    };
    // Each edit must be caught: a retyped field, a renumbered method, a
    // renamed property, a dropped field.
    let edits = [
        (
            r#"<field name="prefetch-count" domain="short"/>"#,
            r#"<field name="prefetch-count" domain="long"/>"#,
        ),
        (
            r#"<method name="ack" index="80">"#,
            r#"<method name="ack" index="81">"#,
        ),
        (
            r#"<field name="app-id" domain="shortstr"/>"#,
            r#"<field name="app" domain="shortstr"/>"#,
        ),
        (r#"<field name="redelivered" domain="redelivered"/>"#, ""),
    ];
    for (from, to) in edits {
        assert!(xml.contains(from), "edit target {from} not in the XML");
        let tampered = xml.replacen(from, to, 1);
        let spec = parse(&tampered).expect("tampered XML parses");
        assert!(
            !mismatches(&spec).is_empty(),
            "edit {from} -> {to} went unnoticed"
        );
    }
}

#[test]
fn scanner_handles_spacing_comments_and_self_closing_tags() {
    let xml = r#"<?xml version="1.0"?><!-- <fake/> --><a x = "1" y="two words"><b/></a>"#;
    let ev = scan(xml).unwrap();
    assert_eq!(ev.len(), 4);
    match &ev[0] {
        Event::Start(n, a) => {
            assert_eq!(n, "a");
            assert_eq!(a["x"], "1");
            assert_eq!(a["y"], "two words");
        }
        other => panic!("unexpected {other:?}"),
    }
    assert!(matches!(&ev[3], Event::End(n) if n == "a"));
}
