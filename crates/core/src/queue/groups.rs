//! qpidd's shared message groups (`qpid.group_header_key`, `qpid.shared_msg_group`): the
//! messages that carry one value of the key header form a group, and while a consumer holds
//! any of a group's messages acquired (delivered, not yet accepted or released), the
//! group's other messages go to that consumer only. Competing consumers thus share the
//! queue while each group is processed in order. Messages without the header are the group
//! `qpid.no-group`.
//!
//! Dispatch (`QueueState::dispatch_grouped`) walks the groups' first messages
//! ([`GroupHeads`]) in queue order and skips those of groups another consumer owns; a group
//! is free again once its owner's last acquired message of it is settled or released.
//! Management sees the groups through [`MessageGroups`] (qpidd's `query` of the queue).

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;

use crate::message::Message;
use crate::queue::group_heads::GroupHeads;
use crate::queue::Consumer;
use crate::value::HeaderValue;
use crate::{ConsumerId, IdMap};

/// The group of messages without the key header (qpidd's default).
pub(crate) const DEFAULT_GROUP: &[u8] = b"qpid.no-group";

/// Who holds a group, and how many of its messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Owner {
    /// 0: taken without a consumer (a get, or an acquire after browsing).
    consumer: ConsumerId,
    acquired: u32,
}

#[derive(Debug)]
pub(crate) struct Groups {
    key: String,
    /// foldhash, as for direct exchanges' routing keys: SipHash over group names was a
    /// quarter of a group queue's core work per message. Names come from publishers'
    /// headers; the hasher's seed is random per map.
    owners: HashMap<Arc<[u8]>, Owner, foldhash::fast::RandomState>,
    /// The group of each acquired message, so that settling it frees its share.
    held: IdMap<Arc<[u8]>>,
    /// The queued message each group may give next.
    pub(crate) heads: GroupHeads,
}

impl Groups {
    pub(crate) fn new(key: String) -> Groups {
        Groups {
            key,
            owners: HashMap::default(),
            held: IdMap::default(),
            heads: GroupHeads::default(),
        }
    }

    /// The group `message` belongs to: borrowed from its headers where it can be (the
    /// dispatch walk asks for every message it passes).
    pub(crate) fn group_of<'m>(&self, message: &'m Message) -> Cow<'m, [u8]> {
        let value = message.headers().and_then(|h| h.get(&self.key));
        match value {
            Some(HeaderValue::Str(s)) => Cow::Borrowed(s.as_bytes()),
            Some(HeaderValue::Bytes(b)) => Cow::Borrowed(b),
            Some(HeaderValue::Int(n)) => Cow::Owned(n.to_string().into_bytes()),
            Some(HeaderValue::UInt(n)) => Cow::Owned(n.to_string().into_bytes()),
            _ => Cow::Borrowed(DEFAULT_GROUP),
        }
    }

    /// The consumer holding `group`, if any (0: held without a consumer).
    pub(crate) fn owner(&self, group: &[u8]) -> Option<ConsumerId> {
        self.owners.get(group).map(|o| o.consumer)
    }

    /// A message of `group` at `position` was acquired, by `consumer` (0: none).
    pub(crate) fn acquired(&mut self, position: u64, group: &[u8], consumer: ConsumerId) {
        // The name the group's queued messages are listed under, shared rather than copied.
        let name = self.heads.name(group).unwrap_or_else(|| Arc::from(group));
        match self.owners.get_mut(group) {
            Some(owner) => owner.acquired += 1,
            None => {
                let owner = Owner {
                    consumer,
                    acquired: 1,
                };
                self.owners.insert(name.clone(), owner);
            }
        }
        self.held.insert(position, name);
    }

    /// The acquired message at `position` was settled or released.
    pub(crate) fn let_go(&mut self, position: u64) {
        let Some(group) = self.held.remove(&position) else {
            return;
        };
        if let Some(owner) = self.owners.get_mut(&group) {
            owner.acquired = owner.acquired.saturating_sub(1);
            if owner.acquired == 0 {
                self.owners.remove(&group);
            }
        }
    }
}

/// A queue's message groups as management shows them (qpidd's `query` of a queue).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageGroups {
    /// The header that names a message's group.
    pub key: String,
    /// Every group with a message on the queue, queued or acquired, in no order.
    pub groups: Vec<MessageGroup>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageGroup {
    pub id: Vec<u8>,
    /// Its messages on the queue, queued or acquired.
    pub messages: u64,
    /// The tag of the consumer holding it; empty while it is free (or held by a get).
    pub consumer: Bytes,
}

impl Groups {
    /// The groups of the positions still `queued` (read from the heads' lists, which know
    /// the groups of messages on disk too) and of the acquired messages this tracks, with
    /// the tags of their holders among `consumers`.
    pub(crate) fn status(
        &self,
        queued: impl Fn(u64) -> bool,
        consumers: &[Consumer],
    ) -> MessageGroups {
        let mut counts: HashMap<Vec<u8>, u64> = HashMap::new();
        for (id, queued) in self.heads.counts(queued) {
            *counts.entry(id.to_vec()).or_default() += queued;
        }
        for id in self.held.values() {
            *counts.entry(id.to_vec()).or_default() += 1;
        }
        let groups = counts
            .into_iter()
            .map(|(id, messages)| {
                let consumer = self
                    .owner(&id)
                    .and_then(|o| consumers.iter().find(|c| c.spec.id == o))
                    .map(|c| c.spec.tag.clone())
                    .unwrap_or_default();
                MessageGroup {
                    id,
                    messages,
                    consumer,
                }
            })
            .collect();
        MessageGroups {
            key: self.key.clone(),
            groups,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::message::MessageParts;
    use crate::value::Headers;

    fn message(group: Option<HeaderValue>) -> Message {
        let mut headers = Headers::default();
        if let Some(g) = group {
            headers.push("THE-GROUP", g);
        }
        MessageParts {
            headers: Some(Arc::new(headers)),
            ..MessageParts::new("", "q", Bytes::from_static(b"m"))
        }
        .build()
    }

    #[test]
    fn a_group_is_held_until_its_last_acquired_message_is_let_go() {
        let mut g = Groups::new("THE-GROUP".into());
        let a = g
            .group_of(&message(Some(HeaderValue::Str("A".into()))))
            .into_owned();
        assert_eq!(a, b"A");
        assert_eq!(g.owner(&a), None);
        g.acquired(1, &a, 7);
        g.acquired(2, &a, 7);
        assert_eq!(g.owner(&a), Some(7));
        g.let_go(1);
        assert_eq!(g.owner(&a), Some(7), "one still held");
        g.let_go(1);
        assert_eq!(g.owner(&a), Some(7), "a position counts once");
        g.let_go(2);
        assert_eq!(g.owner(&a), None);
        assert!(g.owners.is_empty() && g.held.is_empty());
    }

    #[test]
    fn messages_without_the_header_share_the_default_group() {
        let g = Groups::new("THE-GROUP".into());
        assert_eq!(&*g.group_of(&message(None)), DEFAULT_GROUP);
        assert_eq!(&*g.group_of(&message(Some(HeaderValue::UInt(42)))), b"42");
        let bare = Message::new("", "q", Bytes::from_static(b"m"));
        assert_eq!(&*g.group_of(&bare), DEFAULT_GROUP);
        let named = message(Some(HeaderValue::Str("A".into())));
        assert!(
            matches!(g.group_of(&named), Cow::Borrowed(b"A")),
            "not copied"
        );
    }
}
