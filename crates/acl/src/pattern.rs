//! Property values as rules write them, and how a lookup's value is matched against them.

use std::net::IpAddr;

use crate::model::{Property, PropertyKind, Value};

/// A rule's constraint on one property, parsed once at load.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Pattern {
    /// Blank (`name=`), `*`, or `host=all`: anything matches, as long as the lookup has the
    /// property at all.
    Any,
    Text {
        text: Template,
        prefix: bool,
    },
    Topic(Template),
    Bool(bool),
    AtLeast(u64),
    AtMost(u64),
    Hosts(Vec<(IpAddr, IpAddr)>),
}

/// Text that may name the requesting user with `${user}`, `${domain}` or `${userdomain}`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Template {
    Literal(String),
    Substituted(Vec<Piece>),
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Piece {
    Literal(String),
    User,
    Domain,
    UserDomain,
}

/// The substitution values for one user, as qpidd builds them: `bob.smith@EXAMPLE.COM` is
/// user `bob_smith`, domain `EXAMPLE_COM`, userdomain `bob_smith_EXAMPLE_COM` (periods and
/// `@` become underscores so the values fit in routing keys).
pub(crate) struct UserVars {
    user: String,
    domain: String,
    userdomain: String,
}

impl UserVars {
    pub(crate) fn of(name: &str) -> UserVars {
        let clean = |s: &str| s.replace(['.', '@'], "_");
        let (user, domain) = match name.split_once('@') {
            Some((u, d)) => (clean(u), clean(d)),
            None => (clean(name), String::new()),
        };
        UserVars {
            userdomain: clean(name),
            user,
            domain,
        }
    }
}

impl Template {
    fn parse(text: &str) -> Result<Template, String> {
        if !text.contains("${") {
            return Ok(Template::Literal(text.to_owned()));
        }
        let mut pieces = Vec::new();
        let mut rest = text;
        while let Some(start) = rest.find("${") {
            if start > 0 {
                pieces.push(Piece::Literal(rest[..start].to_owned()));
            }
            let after = &rest[start + 2..];
            let end = after
                .find('}')
                .ok_or_else(|| format!("unterminated substitution in {text:?}"))?;
            pieces.push(match &after[..end] {
                "user" => Piece::User,
                "domain" => Piece::Domain,
                "userdomain" => Piece::UserDomain,
                other => return Err(format!("unknown substitution ${{{other}}}")),
            });
            rest = &after[end + 1..];
        }
        if !rest.is_empty() {
            pieces.push(Piece::Literal(rest.to_owned()));
        }
        Ok(Template::Substituted(pieces))
    }

    /// The text for the requesting user; a literal is borrowed, not copied.
    fn expand(&self, vars: &dyn Fn() -> UserVars) -> std::borrow::Cow<'_, str> {
        match self {
            Template::Literal(s) => std::borrow::Cow::Borrowed(s),
            Template::Substituted(pieces) => {
                let vars = vars();
                let mut out = String::new();
                for p in pieces {
                    out.push_str(match p {
                        Piece::Literal(s) => s,
                        Piece::User => &vars.user,
                        Piece::Domain => &vars.domain,
                        Piece::UserDomain => &vars.userdomain,
                    });
                }
                std::borrow::Cow::Owned(out)
            }
        }
    }
}

impl Pattern {
    /// Parses `value` for `property`; the error says what is wrong with the value.
    pub(crate) fn parse(property: Property, value: &str) -> Result<Pattern, String> {
        match property.kind() {
            PropertyKind::Text => {
                if value.is_empty() || value == "*" {
                    return Ok(Pattern::Any);
                }
                let (text, prefix) = match value.strip_suffix('*') {
                    Some(stem) => (stem, true),
                    None => (value, false),
                };
                if text.contains('*') {
                    return Err(format!(
                        "{property}={value}: '*' is allowed only at the end of a name"
                    ));
                }
                Ok(Pattern::Text {
                    text: Template::parse(text)?,
                    prefix,
                })
            }
            PropertyKind::Topic => {
                if value.is_empty() {
                    return Ok(Pattern::Any);
                }
                Ok(Pattern::Topic(Template::parse(value)?))
            }
            PropertyKind::Bool => match value {
                "true" => Ok(Pattern::Bool(true)),
                "false" => Ok(Pattern::Bool(false)),
                _ => Err(format!("{property}={value}: expected true or false")),
            },
            PropertyKind::LowerLimit | PropertyKind::UpperLimit => {
                let n: u64 = value
                    .parse()
                    .map_err(|_| format!("{property}={value}: expected a non-negative integer"))?;
                Ok(if property.kind() == PropertyKind::LowerLimit {
                    Pattern::AtLeast(n)
                } else {
                    Pattern::AtMost(n)
                })
            }
            PropertyKind::Host => parse_hosts(value).map_err(|e| format!("host={value}: {e}")),
        }
    }

    /// Whether `value` satisfies this pattern. `vars` builds the user's substitution values
    /// when a template needs them.
    pub(crate) fn matches(&self, value: &Value<'_>, vars: &dyn Fn() -> UserVars) -> bool {
        match (self, value) {
            (Pattern::Any, _) => true,
            (Pattern::Text { text, prefix }, Value::Text(v)) => {
                let text = text.expand(vars);
                if *prefix {
                    v.starts_with(&*text)
                } else {
                    **v == *text
                }
            }
            (Pattern::Topic(pattern), Value::Text(key)) => {
                topic_matches(&pattern.expand(vars), key)
            }
            (Pattern::Bool(b), Value::Bool(v)) => b == v,
            (Pattern::AtLeast(min), Value::Number(v)) => v.map_or(true, |v| v >= *min),
            (Pattern::AtMost(max), Value::Number(v)) => v.is_some_and(|v| v <= *max),
            (Pattern::Hosts(ranges), Value::Host(ip)) => {
                let ip = canonical(*ip);
                ranges
                    .iter()
                    .any(|(lo, hi)| lo.is_ipv4() == ip.is_ipv4() && *lo <= ip && ip <= *hi)
            }
            _ => false,
        }
    }
}

/// IPv4 peers reached over an IPv6 socket appear as `::ffff:a.b.c.d`; rules name them as IPv4.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// `all`, `localhost`, one address, or `first,last`. Host names other than `localhost` would
/// need DNS at load time; addresses are what an ACL should pin anyway.
fn parse_hosts(value: &str) -> Result<Pattern, String> {
    if value == "all" {
        return Ok(Pattern::Any);
    }
    let addr = |s: &str| -> Result<IpAddr, String> {
        let s = s.trim_start_matches('[').trim_end_matches(']');
        s.parse::<IpAddr>().map(canonical).map_err(|_| {
            format!("{s:?} is not an IP address (ferryd does not resolve host names other than localhost)")
        })
    };
    if value == "localhost" {
        return Ok(Pattern::Hosts(vec![
            (
                IpAddr::from([127, 0, 0, 0]),
                IpAddr::from([127, 255, 255, 255]),
            ),
            (
                IpAddr::from(std::net::Ipv6Addr::LOCALHOST),
                IpAddr::from(std::net::Ipv6Addr::LOCALHOST),
            ),
        ]));
    }
    let (lo, hi) = match value.split_once(',') {
        Some((a, b)) => (addr(a)?, addr(b)?),
        None => {
            let a = addr(value)?;
            (a, a)
        }
    };
    if lo.is_ipv4() != hi.is_ipv4() {
        return Err("a range must not mix IPv4 and IPv6".into());
    }
    if lo > hi {
        return Err("the first address of a range must not be larger than the last".into());
    }
    Ok(Pattern::Hosts(vec![(lo, hi)]))
}

/// Topic-exchange matching: words separated by `.`, `*` matches one word, `#` zero or more.
pub(crate) fn topic_matches(pattern: &str, key: &str) -> bool {
    let words = |s: &str| -> Vec<String> {
        if s.is_empty() {
            Vec::new()
        } else {
            s.split('.').map(str::to_owned).collect()
        }
    };
    let p = words(pattern);
    let k = words(key);
    // reachable[j]: the pattern words so far can consume exactly the first j key words.
    let mut reachable = vec![false; k.len() + 1];
    reachable[0] = true;
    for word in &p {
        let mut next = vec![false; k.len() + 1];
        match word.as_str() {
            "#" => {
                let mut seen = false;
                for j in 0..=k.len() {
                    seen |= reachable[j];
                    next[j] = seen;
                }
            }
            w => {
                for j in 0..k.len() {
                    if reachable[j] && (w == "*" || k[j] == w) {
                        next[j + 1] = true;
                    }
                }
            }
        }
        reachable = next;
    }
    reachable[k.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nobody() -> UserVars {
        UserVars::of("nobody")
    }

    fn text(p: &Pattern, v: &str) -> bool {
        p.matches(&Value::Text(v), &nobody)
    }

    #[test]
    fn names_match_exactly_or_by_trailing_wildcard() {
        let exact = Pattern::parse(Property::Name, "orders").unwrap();
        assert!(text(&exact, "orders"));
        assert!(!text(&exact, "orders2"));
        let prefix = Pattern::parse(Property::Name, "bob*").unwrap();
        assert!(text(&prefix, "bob"));
        assert!(text(&prefix, "bobQueue3"));
        assert!(!text(&prefix, "alice"));
        assert_eq!(Pattern::parse(Property::Name, "*").unwrap(), Pattern::Any);
        assert_eq!(Pattern::parse(Property::Name, "").unwrap(), Pattern::Any);
        assert!(Pattern::parse(Property::Name, "a*b").is_err());
    }

    #[test]
    fn routing_keys_match_as_topics() {
        assert!(topic_matches("a.#.b", "a.b"));
        assert!(topic_matches("a.#.b", "a.x.b"));
        assert!(topic_matches("a.#.b", "a.x.y.zz.b"));
        assert!(!topic_matches("a.#.b", "a.b."));
        assert!(!topic_matches("a.#.b", "q.x.b"));
        assert!(topic_matches("stocks.*", "stocks.rht"));
        assert!(!topic_matches("stocks.*", "stocks.rht.nyse"));
        assert!(!topic_matches("stocks.*", "stocks"));
        assert!(topic_matches("#", ""));
        assert!(topic_matches("#", "any.thing"));
        assert!(!topic_matches("*", ""));
        assert!(topic_matches("#.#.x", "x"));
        assert!(topic_matches("exact", "exact"));
    }

    #[test]
    fn booleans_and_limits() {
        let durable = Pattern::parse(Property::Durable, "true").unwrap();
        assert!(durable.matches(&Value::Bool(true), &nobody));
        assert!(!durable.matches(&Value::Bool(false), &nobody));
        assert!(Pattern::parse(Property::Durable, "yes").is_err());

        let max = Pattern::parse(Property::QueueMaxSizeUpperLimit, "1000").unwrap();
        assert!(max.matches(&Value::Number(Some(1000)), &nobody));
        assert!(!max.matches(&Value::Number(Some(1001)), &nobody));
        assert!(
            !max.matches(&Value::Number(None), &nobody),
            "unlimited exceeds"
        );
        let min = Pattern::parse(Property::QueueMaxCountLowerLimit, "10").unwrap();
        assert!(min.matches(&Value::Number(Some(10)), &nobody));
        assert!(!min.matches(&Value::Number(Some(9)), &nobody));
        assert!(min.matches(&Value::Number(None), &nobody));
        assert!(Pattern::parse(Property::QueueMaxCountLowerLimit, "-1").is_err());
    }

    #[test]
    fn hosts_addresses_ranges_and_loopback() {
        let host = |v: &str, ip: &str| {
            Pattern::parse(Property::Host, v)
                .unwrap()
                .matches(&Value::Host(ip.parse().unwrap()), &nobody)
        };
        assert!(host("all", "192.0.2.1"));
        assert!(host("10.0.0.0,10.255.255.255", "10.1.2.3"));
        assert!(!host("10.0.0.0,10.255.255.255", "11.0.0.1"));
        assert!(host("localhost", "127.0.0.1"));
        assert!(host("localhost", "::1"));
        assert!(!host("localhost", "192.0.2.1"));
        assert!(host("192.0.2.7", "::ffff:192.0.2.7"), "v4-mapped peers");
        assert!(host("[fc00::],[fc00::ff]", "fc00::10"));
        assert!(!host("[fc00::],[fc00::ff]", "10.0.0.1"));
        assert!(Pattern::parse(Property::Host, "example.com").is_err());
        assert!(Pattern::parse(Property::Host, "10.0.0.9,10.0.0.1").is_err());
        assert!(Pattern::parse(Property::Host, "10.0.0.1,::1").is_err());
    }

    #[test]
    fn substitutions_use_the_requesting_user() {
        let p = Pattern::parse(Property::Name, "${user}-work").unwrap();
        let bob = || UserVars::of("bob.user@QPID.COM");
        assert!(p.matches(&Value::Text("bob_user-work"), &bob));
        assert!(!p.matches(&Value::Text("alice-work"), &bob));
        let key = Pattern::parse(Property::RoutingKey, "${userdomain}.#").unwrap();
        assert!(key.matches(&Value::Text("bob_user_QPID_COM.x.y"), &bob));
        let d = Pattern::parse(Property::Name, "${domain}*").unwrap();
        assert!(d.matches(&Value::Text("QPID_COM-q"), &bob));
        assert!(Pattern::parse(Property::Name, "${nobody}").is_err());
        assert!(Pattern::parse(Property::Name, "${user").is_err());
    }
}
