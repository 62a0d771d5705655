//! qpidd's message tracing: the application header `x-qpid.trace` lists, comma-separated,
//! the ids of the queues a message passed through that trace (`qpid.trace.id`); a queue
//! with `qpid.trace.exclude` refuses messages whose list names an excluded id (qpidd's
//! federation stops messages looping between brokers this way); a management reroute
//! clears the list. The header is encoded in the publisher's protocol, so the core keeps
//! what was done to it as a [`TraceEdit`] on the message, and protocol layers apply it to
//! the header they send ([`TraceEdit::apply`]).

use std::sync::Arc;

/// The application header the trace is kept in.
pub const TRACE_HEADER: &str = "x-qpid.trace";

/// What queues and reroutes did to a message's trace since it was published.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TraceEdit {
    /// The list as published was cleared (a reroute) before the ids in `added`.
    pub cleared: bool,
    /// Ids added since, in order; none twice, none the list had.
    pub added: Vec<Arc<str>>,
}

/// Whether trace list `list` names `id`.
fn names(list: &str, id: &str) -> bool {
    ids(list).any(|i| i == id)
}

/// The ids in trace list `list` (qpidd splits on commas and spaces).
pub(crate) fn ids(list: &str) -> impl Iterator<Item = &str> {
    list.split([',', ' ']).filter(|i| !i.is_empty())
}

impl TraceEdit {
    /// The header's value after this edit, given the value the message was published with
    /// (`None`: without the header); `None` if the header stays as it is. A cleared list
    /// becomes empty only if it had ids, as in qpidd, so an untraced message gains no header.
    pub fn apply(&self, published: Option<&str>) -> Option<String> {
        let before = published.unwrap_or_default();
        let mut list = if self.cleared {
            String::new()
        } else {
            before.to_owned()
        };
        for id in &self.added {
            if !names(&list, id) {
                if !list.is_empty() {
                    list.push(',');
                }
                list.push_str(id);
            }
        }
        (list != before).then_some(list)
    }

    /// The list cleared (what was added before goes with it).
    pub fn cleared() -> TraceEdit {
        TraceEdit {
            cleared: true,
            added: Vec::new(),
        }
    }

    /// This edit, then `id` added, given the list as it stands (`now`); `None` if `now`
    /// names it already.
    pub(crate) fn adding(edit: Option<&TraceEdit>, now: &str, id: &Arc<str>) -> Option<TraceEdit> {
        if names(now, id) {
            return None;
        }
        let mut edit = edit.cloned().unwrap_or_default();
        edit.added.push(id.clone());
        Some(edit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edit(cleared: bool, added: &[&str]) -> TraceEdit {
        TraceEdit {
            cleared,
            added: added.iter().map(|&i| Arc::from(i)).collect(),
        }
    }

    #[test]
    fn ids_are_appended_once_with_commas() {
        let e = edit(false, &["q1", "q2"]);
        assert_eq!(e.apply(None).as_deref(), Some("q1,q2"));
        assert_eq!(e.apply(Some("")).as_deref(), Some("q1,q2"));
        assert_eq!(e.apply(Some("a, b")).as_deref(), Some("a, b,q1,q2"));
        assert_eq!(e.apply(Some("q2,q1")), None, "named already: unchanged");
        assert_eq!(edit(false, &[]).apply(Some("x")), None);
    }

    #[test]
    fn clearing_empties_a_list_that_had_ids_only() {
        let e = edit(true, &[]);
        assert_eq!(e.apply(Some("A,B,C")).as_deref(), Some(""));
        assert_eq!(e.apply(None), None, "an untraced message gains no header");
        assert_eq!(e.apply(Some("")), None);
        assert_eq!(edit(true, &["q"]).apply(Some("A,q")).as_deref(), Some("q"));
    }

    #[test]
    fn adding_skips_an_id_the_list_names() {
        let id: Arc<str> = Arc::from("q");
        assert_eq!(TraceEdit::adding(None, "a,q", &id), None);
        let e = TraceEdit::adding(None, "a", &id).unwrap();
        assert_eq!(e.apply(Some("a")).as_deref(), Some("a,q"));
        let after = TraceEdit::adding(Some(&TraceEdit::cleared()), "", &id).unwrap();
        assert_eq!(after, edit(true, &["q"]));
        assert!(!names("qq,aq", "q"), "whole ids, not substrings");
    }
}
