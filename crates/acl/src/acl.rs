//! A loaded ACL: its rules in file order, and the decisions they give.
//!
//! Evaluation is qpidd's: rules are tried in order and the first whose user, action, object and
//! properties all match decides; a rule constraining a property the lookup does not supply does
//! not match. When no rule matches the answer is deny (qpidd's "deny mode", which a final
//! `acl deny all all` makes explicit) — except for connections, which only rules naming the
//! `connection` object decide, and which are allowed when none matches (qpidd's connection
//! rules behave the same way).

use std::collections::{HashMap, HashSet};
use std::net::IpAddr;

use crate::model::{Action, ObjectType, Permission, Property, Value};
use crate::pattern::{Pattern, UserVars};

/// Whom a rule or quota is about.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Names {
    pub(crate) exact: HashSet<String>,
    /// Names written with a trailing `*`.
    pub(crate) prefixes: Vec<String>,
}

impl Names {
    pub(crate) fn insert(&mut self, name: &str) {
        match name.strip_suffix('*') {
            Some(stem) => self.prefixes.push(stem.to_owned()),
            None => {
                // qpidd's users carry its default SASL realm (`bob@QPID`); ferryd's users have
                // no realm, so such a name also means the bare user.
                if let Some(bare) = name.strip_suffix("@QPID") {
                    self.exact.insert(bare.to_owned());
                }
                self.exact.insert(name.to_owned());
            }
        }
    }

    pub(crate) fn extend(&mut self, other: &Names) {
        self.exact.extend(other.exact.iter().cloned());
        self.prefixes.extend(other.prefixes.iter().cloned());
    }

    fn contains(&self, user: &str) -> bool {
        self.exact.contains(user) || self.prefixes.iter().any(|p| user.starts_with(p.as_str()))
    }
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Subject {
    All,
    Users(Names),
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Rule {
    pub(crate) line: usize,
    pub(crate) permission: Permission,
    pub(crate) subject: Subject,
    /// `None` is `all`.
    pub(crate) action: Option<Action>,
    pub(crate) object: Option<ObjectType>,
    pub(crate) properties: Vec<(Property, Pattern)>,
}

/// The outcome of a lookup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    pub allowed: bool,
    /// The rule asked for the decision to be logged (`allow-log`, `deny-log`).
    pub logged: bool,
    /// Line of the deciding rule; `None` when no rule matched and the default applied.
    pub line: Option<usize>,
    /// The rule matched but the request exceeds one of its limits (a denial).
    pub limit_exceeded: Option<Property>,
}

impl Decision {
    fn of(rule: &Rule) -> Decision {
        Decision {
            allowed: rule.permission.allows(),
            logged: rule.permission.logs(),
            line: Some(rule.line),
            limit_exceeded: None,
        }
    }

    const fn default_of(allowed: bool) -> Decision {
        Decision {
            allowed,
            logged: false,
            line: None,
            limit_exceeded: None,
        }
    }
}

/// How publishing to one exchange is decided for one user.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PublishPolicy {
    /// The same decision for every routing key: cache it per exchange.
    Fixed(Decision),
    /// A rule that could decide depends on the routing key: decide per key.
    ByRoutingKey,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QuotaKind {
    Connections,
    Queues,
}

/// A parsed ACL file.
#[derive(Debug, Clone, Default)]
pub struct Acl {
    pub(crate) rules: Vec<Rule>,
    pub(crate) connection_quotas: HashMap<String, u32>,
    pub(crate) queue_quotas: HashMap<String, u32>,
}

enum RuleMatch {
    No,
    Yes,
    LimitExceeded(Property),
}

impl Rule {
    fn applies(&self, user: &str, action: Action, object: ObjectType) -> bool {
        self.action.map_or(true, |a| a == action)
            && self.object.map_or(true, |o| o == object)
            && match &self.subject {
                Subject::All => true,
                Subject::Users(names) => names.contains(user),
            }
    }

    fn has(&self, property: Property) -> bool {
        self.properties.iter().any(|(p, _)| *p == property)
    }

    /// Limits are checked only once everything else matched: an `allow` with a limit then
    /// means "allowed up to the limit", and exceeding it is a denial, not a fall-through to
    /// later rules.
    fn match_properties(&self, lookup: &[(Property, Value<'_>)], user: &str) -> RuleMatch {
        let vars = || UserVars::of(user);
        let find = |p: Property| lookup.iter().find(|(q, _)| *q == p).map(|(_, v)| v);
        let mut exceeded = None;
        for (property, pattern) in &self.properties {
            let Some(value) = find(*property) else {
                return RuleMatch::No;
            };
            if !pattern.matches(value, &vars) {
                if !property.is_limit() {
                    return RuleMatch::No;
                }
                exceeded.get_or_insert(*property);
            }
        }
        match exceeded {
            Some(p) => RuleMatch::LimitExceeded(p),
            None => RuleMatch::Yes,
        }
    }
}

impl Acl {
    /// Decides whether `user` may perform `action` on `object` described by `lookup`.
    pub fn check(
        &self,
        user: &str,
        action: Action,
        object: ObjectType,
        lookup: &[(Property, Value<'_>)],
    ) -> Decision {
        if object == ObjectType::Connection {
            let host = lookup.iter().find_map(|(p, v)| match (p, v) {
                (Property::Host, Value::Host(ip)) => Some(*ip),
                _ => None,
            });
            return match host {
                Some(ip) => self.check_connection(user, ip),
                None => Decision::default_of(true),
            };
        }
        for rule in self
            .rules
            .iter()
            .filter(|r| r.applies(user, action, object))
        {
            match rule.match_properties(lookup, user) {
                RuleMatch::No => {}
                RuleMatch::Yes => return Decision::of(rule),
                RuleMatch::LimitExceeded(p) => {
                    return Decision {
                        allowed: false,
                        limit_exceeded: Some(p),
                        ..Decision::of(rule)
                    }
                }
            }
        }
        Decision::default_of(false)
    }

    /// May `user` keep a connection from `host`? Only rules naming the connection object
    /// decide; with none matching the connection is allowed.
    pub fn check_connection(&self, user: &str, host: IpAddr) -> Decision {
        let lookup = [(Property::Host, Value::Host(host))];
        self.rules
            .iter()
            .filter(|r| r.object == Some(ObjectType::Connection))
            .filter(|r| r.applies(user, Action::Create, ObjectType::Connection))
            // A connection rule without a host property is about every host.
            .find(|r| matches!(r.match_properties(&lookup, user), RuleMatch::Yes))
            .map_or(Decision::default_of(true), Decision::of)
    }

    /// Whether publishing by `user` to `exchange` can be decided once for every routing key.
    pub fn publish_policy(&self, user: &str, exchange: &str) -> PublishPolicy {
        let by_name = [(Property::Name, Value::Text(exchange))];
        for rule in self
            .rules
            .iter()
            .filter(|r| r.applies(user, Action::Publish, ObjectType::Exchange))
        {
            if rule.has(Property::RoutingKey) {
                let others_match = rule
                    .properties
                    .iter()
                    .filter(|(p, _)| *p != Property::RoutingKey)
                    .all(|(p, pattern)| {
                        *p == Property::Name
                            && pattern.matches(&Value::Text(exchange), &|| UserVars::of(user))
                    });
                if others_match {
                    return PublishPolicy::ByRoutingKey;
                }
                continue;
            }
            if let RuleMatch::Yes = rule.match_properties(&by_name, user) {
                return PublishPolicy::Fixed(Decision::of(rule));
            }
        }
        PublishPolicy::Fixed(Decision::default_of(false))
    }

    /// The user's quota: their own, else the one for `all`; `None` when the file sets none.
    pub fn quota(&self, kind: QuotaKind, user: &str) -> Option<u32> {
        let table = match kind {
            QuotaKind::Connections => &self.connection_quotas,
            QuotaKind::Queues => &self.queue_quotas,
        };
        table.get(user).or_else(|| table.get("all")).copied()
    }

    pub fn rule_count(&self) -> usize {
        self.rules.len()
    }
}
