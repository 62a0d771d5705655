//! Reads qpidd's ACL file format.
//!
//! ```text
//! # comment (whole lines only: '#' is common in routing keys)
//! group admins alice bob@QPID \
//!       carol
//! acl allow|allow-log|deny|deny-log USER|GROUP|all ACTION|all [OBJECT|all [property=value ...]]
//! quota connections|queues N USER|GROUP|all ...
//! ```
//!
//! Only group lines may continue onto the next line (a trailing `\`). Groups must be defined
//! before they are used. Unknown keywords, permissions, actions, objects and properties, and
//! malformed values, are errors naming the line; rules that can never match a lookup ferryd
//! makes load with a warning, as qpidd does.

use std::collections::HashMap;

use crate::acl::{Acl, Names, Rule, Subject};
use crate::model::{Action, ObjectType, Permission, Property, LOOKUPS};
use crate::pattern::Pattern;

/// A fault in the file; nothing of the file is used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct ParseError {
    pub line: usize,
    pub message: String,
}

/// A rule that loads but can never match anything ferryd looks up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Warning {
    pub line: usize,
    pub message: String,
}

impl std::fmt::Display for Warning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

/// Quota values qpidd accepts.
const MAX_QUOTA: u32 = 65530;

#[derive(Default)]
struct Parser {
    acl: Acl,
    groups: HashMap<String, Names>,
    warnings: Vec<Warning>,
    /// A group line that ended with `\`: its name and the members so far.
    open_group: Option<(String, Names)>,
}

pub fn parse(text: &str) -> Result<(Acl, Vec<Warning>), ParseError> {
    let mut p = Parser::default();
    let mut last = 0;
    for (index, raw) in text.lines().enumerate() {
        last = index + 1;
        p.line(index + 1, raw).map_err(|message| ParseError {
            line: index + 1,
            message,
        })?;
    }
    if p.open_group.is_some() {
        return Err(ParseError {
            line: last,
            message: "the file ends inside a continued group line".into(),
        });
    }
    Ok((p.acl, p.warnings))
}

fn is_group_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// qpidd's user name characters, plus a trailing `*` matching any suffix.
fn check_user_name(name: &str) -> Result<(), String> {
    let stem = name.strip_suffix('*').unwrap_or(name);
    let ok = !stem.is_empty()
        && stem
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.@/".contains(c));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{name:?} is not a valid user name (letters, digits, - _ . @ /, and an optional trailing *)"
        ))
    }
}

impl Parser {
    fn line(&mut self, line: usize, raw: &str) -> Result<(), String> {
        let trimmed = raw.trim();
        let (content, continues) = match trimmed.strip_suffix('\\') {
            Some(rest) => (rest.trim_end(), true),
            None => (trimmed, false),
        };
        if let Some((name, mut members)) = self.open_group.take() {
            if content.is_empty() {
                return Err("a continuation line must name group members".into());
            }
            self.members(&mut members, content.split_whitespace())?;
            return self.close_or_continue(name, members, continues);
        }
        if trimmed.is_empty() || trimmed.starts_with('#') {
            return Ok(());
        }
        let mut words = content.split_whitespace();
        match words.next() {
            Some("group") => {
                let name = words
                    .next()
                    .ok_or("a group line must name the group before any '\\'")?;
                if !is_group_name(name) || name == "all" {
                    return Err(format!(
                        "{name:?} is not a valid group name (letters, digits, - and _; not 'all')"
                    ));
                }
                if self.groups.contains_key(name) {
                    return Err(format!("group {name} is defined twice"));
                }
                let mut members = Names::default();
                self.members(&mut members, words)?;
                self.close_or_continue(name.to_owned(), members, continues)
            }
            _ if continues => Err("only group lines may be continued with '\\'".into()),
            Some("acl") => self.rule(line, words.collect()),
            Some("quota") => self.quota(words.collect()),
            Some(other) => Err(format!(
                "unknown keyword {other:?} (expected acl, group or quota)"
            )),
            None => Ok(()),
        }
    }

    fn close_or_continue(
        &mut self,
        name: String,
        members: Names,
        continues: bool,
    ) -> Result<(), String> {
        if continues {
            self.open_group = Some((name, members));
        } else {
            self.groups.insert(name, members);
        }
        Ok(())
    }

    fn members<'a>(
        &self,
        into: &mut Names,
        words: impl Iterator<Item = &'a str>,
    ) -> Result<(), String> {
        for word in words {
            match self.groups.get(word) {
                Some(group) => into.extend(group),
                None => {
                    check_user_name(word)?;
                    into.insert(word);
                }
            }
        }
        Ok(())
    }

    fn subject(&self, word: &str) -> Result<Subject, String> {
        if word == "all" {
            return Ok(Subject::All);
        }
        let mut names = Names::default();
        self.members(&mut names, std::iter::once(word))?;
        Ok(Subject::Users(names))
    }

    fn rule(&mut self, line: usize, words: Vec<&str>) -> Result<(), String> {
        const SHAPE: &str =
            "expected: acl PERMISSION USER|GROUP|all ACTION|all [OBJECT|all [property=value ...]]";
        let (Some(permission), Some(subject), Some(action)) =
            (words.first(), words.get(1), words.get(2))
        else {
            return Err(SHAPE.into());
        };
        let permission = Permission::parse(permission).ok_or_else(|| {
            format!("unknown permission {permission:?} (allow, allow-log, deny, deny-log)")
        })?;
        let subject = self.subject(subject)?;
        let action = match *action {
            "all" => None,
            a => Some(Action::parse(a).ok_or_else(|| format!("unknown action {a:?}"))?),
        };
        let object = match words.get(3).copied() {
            None | Some("all") => None,
            Some(o) if o.contains('=') => {
                return Err(format!("{o:?}: properties come after an object (or 'all')"))
            }
            Some(o) => Some(ObjectType::parse(o).ok_or_else(|| format!("unknown object {o:?}"))?),
        };
        let mut properties: Vec<(Property, Pattern)> = Vec::new();
        for word in words.iter().skip(4) {
            let (name, value) = word
                .split_once('=')
                .ok_or_else(|| format!("{word:?}: expected property=value"))?;
            let property =
                Property::parse(name).ok_or_else(|| format!("unknown property {name:?}"))?;
            if properties.iter().any(|(p, _)| *p == property) {
                return Err(format!("property {name} is given twice"));
            }
            properties.push((property, Pattern::parse(property, value)?));
        }
        let rule = Rule {
            line,
            permission,
            subject,
            action,
            object,
            properties,
        };
        if let Some(message) = never_matches(&rule) {
            self.warnings.push(Warning { line, message });
        }
        self.acl.rules.push(rule);
        Ok(())
    }

    fn quota(&mut self, words: Vec<&str>) -> Result<(), String> {
        const SHAPE: &str = "expected: quota connections|queues N USER|GROUP|all ...";
        let (Some(kind), Some(value)) = (words.first(), words.get(1)) else {
            return Err(SHAPE.into());
        };
        let value: u32 = value
            .parse()
            .ok()
            .filter(|v| *v <= MAX_QUOTA)
            .ok_or_else(|| format!("quota {value:?} is not a number from 0 to {MAX_QUOTA}"))?;
        let names = &words[2..];
        if names.is_empty() {
            return Err(SHAPE.into());
        }
        let mut users: Vec<String> = Vec::new();
        for name in names {
            match self.subject(name)? {
                Subject::All => users.push("all".into()),
                Subject::Users(n) => {
                    if !n.prefixes.is_empty() {
                        return Err(format!("{name}: quotas cannot use wildcard names"));
                    }
                    users.extend(n.exact);
                }
            }
        }
        let table = match *kind {
            "connections" => &mut self.acl.connection_quotas,
            "queues" => &mut self.acl.queue_quotas,
            other => return Err(format!("unknown quota {other:?} (connections or queues)")),
        };
        // A later quota for the same user replaces an earlier one, as in qpidd.
        for user in users {
            table.insert(user, value);
        }
        Ok(())
    }
}

/// Why a rule can never match a lookup ferryd performs, if it cannot.
fn never_matches(rule: &Rule) -> Option<String> {
    let candidates: Vec<&(Action, ObjectType, &[Property])> = LOOKUPS
        .iter()
        .filter(|(a, o, _)| {
            rule.action.map_or(true, |x| x == *a) && rule.object.map_or(true, |x| x == *o)
        })
        .collect();
    let what = format!(
        "{} {}",
        rule.action.map_or("all", |a| a.as_str()),
        rule.object.map_or("all", |o| o.as_str())
    );
    if candidates.is_empty() {
        let hint = if rule.object == Some(ObjectType::Connection) {
            " (connection rules use the create action)"
        } else {
            ""
        };
        return Some(format!(
            "ferryd never checks '{what}'; the rule has no effect{hint}"
        ));
    }
    let wanted: Vec<Property> = rule.properties.iter().map(|(p, _)| *p).collect();
    let possible = candidates
        .iter()
        .any(|(_, _, supplied)| wanted.iter().all(|p| supplied.contains(p)));
    if possible {
        return None;
    }
    let names: Vec<&str> = wanted.iter().map(|p| p.as_str()).collect();
    Some(format!(
        "ferryd checks '{what}' but never with the properties {{{}}}; the rule has no effect",
        names.join(" ")
    ))
}
