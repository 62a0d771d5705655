//! Which messages a consumer or a management operation applies to: a consumer's filter
//! (a JMS selector, which the protocol layer supplies, since only it can read a message's
//! properties) and qpidd's `header_match_str` for purge, move and reroute.

use std::fmt::Debug;

use super::Message;

/// What a consumer takes: a consumer with a filter is only given the messages it matches;
/// the others stay queued for other consumers. Called under the queue's lock, once per
/// message a dispatch pass looks at, so it should not block.
pub trait MessageFilter: Send + Sync + Debug {
    fn matches(&self, message: &Message) -> bool;

    /// The filter as its consumer gave it (a JMS selector's text), for management.
    fn text(&self) -> Option<&str> {
        None
    }
}

/// Messages whose application header `key` is the string `value`. Only messages whose
/// headers were decoded on arrival can match: those of queues that read headers
/// ([`crate::Queue::needs_headers`]: message groups, last-value queues).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderMatch {
    pub key: String,
    pub value: String,
}

impl HeaderMatch {
    pub fn matches(&self, message: &Message) -> bool {
        message
            .headers()
            .and_then(|h| h.get(&self.key))
            .and_then(|v| v.as_str())
            .is_some_and(|v| v == self.value)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use bytes::Bytes;

    use super::*;
    use crate::message::MessageParts;
    use crate::value::{HeaderValue, Headers};

    #[test]
    fn a_string_header_matches_its_value_only() {
        let f = HeaderMatch {
            key: "G".into(),
            value: "A".into(),
        };
        let with = |v: HeaderValue| {
            let mut h = Headers::new();
            h.push("G", v);
            MessageParts {
                headers: Some(Arc::new(h)),
                ..MessageParts::new("", "q", Bytes::new())
            }
            .build()
        };
        assert!(f.matches(&with(HeaderValue::Str("A".into()))));
        assert!(f.matches(&with(HeaderValue::Bytes(Bytes::from_static(b"A")))));
        assert!(!f.matches(&with(HeaderValue::Str("B".into()))));
        assert!(!f.matches(&with(HeaderValue::Int(1))));
        assert!(
            !f.matches(&Message::new("", "q", Bytes::new())),
            "no headers"
        );
    }
}
