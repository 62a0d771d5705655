//! Dispatch and gets on a message-group queue (see `queue::groups`): they look at each
//! group's first queued message only ([`crate::queue::group_heads::GroupHeads`]), in queue
//! order, since a group's later messages may not overtake it.
//!
//! A head whose content is on disk (flow to disk) is read back only once its group and
//! size show that some consumer could take it, as a copy that becomes its content only if
//! it is taken; and at most [`DISK_READS_PER_PASS`] per pass, so a pass never holds the
//! queue's lock for many reads nor fills memory with heads nobody takes.

use std::borrow::Cow;
use std::sync::Arc;

use super::{Clock, Entry, QueueState};
use crate::message::Message;
use crate::queue::groups::DEFAULT_GROUP;
use crate::queue::Queue;
use crate::ConsumerId;

/// Most heads one dispatch pass reads back from disk to look at. A pass that reaches this
/// stops; the next event (a publish, a settlement, credit) starts another.
const DISK_READS_PER_PASS: usize = 32;

impl QueueState {
    /// Lists a new message at `position` under its group. Out of line: queues without
    /// groups only test for them on the publish path.
    #[inline(never)]
    pub(super) fn list_in_group(&mut self, position: u64, message: &Message) {
        let Some(groups) = self.groups.as_deref_mut() else {
            return;
        };
        let group = groups.group_of(message);
        groups.heads.push(position, &group);
        let entries = &self.entries;
        groups
            .heads
            .compact_if_stale(entries.len(), |p| p == position || entries.contains(p));
    }

    /// `e`, just acquired by `by` (0: a get, or an acquire after browsing), holds its group.
    /// Only a browsed message is acquired while on disk: its group is read back with it.
    #[inline(never)]
    pub(super) fn hold_group(&mut self, e: &Entry, by: ConsumerId) {
        let read_back = match e.message() {
            Some(_) => None,
            None => self.content(e),
        };
        let Some(groups) = self.groups.as_deref_mut() else {
            return;
        };
        let group = e
            .message()
            .or(read_back.as_ref())
            .map_or(Cow::Borrowed(DEFAULT_GROUP), |m| groups.group_of(m));
        groups.acquired(e.position, &group, by);
    }

    /// A head goes to its group's owner when that consumer has credit, to the next consumer
    /// with credit when its group is free, and otherwise waits while the other groups move
    /// on.
    pub(super) fn dispatch_grouped(&mut self, queue: &Arc<Queue>, clock: &mut Clock) {
        let mut cursor = 0;
        let mut disk_reads = 0;
        loop {
            if !self.ready_front() {
                return;
            }
            let Some((position, size)) = self.next_group_head_after(cursor, clock) else {
                return;
            };
            let owner = self.group_owner(position);
            // Whether anyone could take it, from what is known without its content.
            let could = self.consumers.iter().any(|c| {
                owner.map_or(c.spec.acquire, |o| c.spec.id == o) && c.has_credit_for(size)
            });
            let chosen = match self.entry_at(position).map(Entry::message) {
                _ if !could => None,
                Some(Some(message)) => self.choose_grouped(owner, message, size, queue),
                Some(None) if disk_reads == DISK_READS_PER_PASS => return,
                Some(None) => {
                    disk_reads += 1;
                    let Some(copy) = self.entry_at(position).and_then(|e| self.content(e)) else {
                        self.drop_lost(position);
                        continue;
                    };
                    let ci = self.choose_grouped(owner, &copy, size, queue);
                    // Taken: the copy becomes its content (it was read for this).
                    if ci.is_some() && !self.keep_loaded(position, copy) {
                        return;
                    }
                    ci
                }
                None => return,
            };
            let Some(ci) = chosen else {
                if !self
                    .consumers
                    .iter()
                    .any(|c| c.spec.acquire && c.has_credit_for(1))
                {
                    return;
                }
                cursor = position;
                continue;
            };
            if owner.is_none() {
                self.next_rr = ci + 1;
            }
            let Some(entry) = self.entries.remove_position(position) else {
                return;
            };
            self.account_out(&entry);
            self.advance_group(position);
            // The group's next message, now its head, comes after: the walk reaches it.
            cursor = position;
            if !self.deliver_acquired(ci, entry, queue) {
                return;
            }
        }
    }

    /// The consumer to take the head `message` of a group held by `owner` (none: free),
    /// its window slot reserved.
    fn choose_grouped(
        &self,
        owner: Option<ConsumerId>,
        message: &Message,
        size: u64,
        queue: &Arc<Queue>,
    ) -> Option<usize> {
        match owner {
            Some(owner) => self.consumers.iter().position(|c| {
                c.spec.id == owner && c.has_credit_for(size) && c.wants(message) && c.reserve(queue)
            }),
            None => self.next_acquirer_for(message, size, queue),
        }
    }

    /// What a get takes from a group queue: the first head whose group no consumer holds
    /// (gets hold their groups too, as owner 0, so two gets in a row take a group's
    /// messages in order). Only that head is read back if it is on disk.
    pub(super) fn take_grouped_for_get(&mut self) -> Option<Entry> {
        let mut clock = Clock::default();
        let mut cursor = 0;
        loop {
            if !self.ready_front() {
                return None;
            }
            let (position, _) = self.next_group_head_after(cursor, &mut clock)?;
            if self.group_owner(position).is_some_and(|owner| owner != 0) {
                cursor = position;
                continue;
            }
            if self.entry_at(position).is_some_and(Entry::on_disk) {
                let Some(content) = self.entry_at(position).and_then(|e| self.content(e)) else {
                    self.drop_lost(position);
                    continue;
                };
                if !self.keep_loaded(position, content) {
                    return None;
                }
            }
            let entry = self.entries.remove_position(position)?;
            self.account_out(&entry);
            self.advance_group(position);
            self.mark_unsettled(&entry, 0);
            return Some(entry);
        }
    }

    /// Who holds the group of the head at `position` (0: gets), known from the heads'
    /// index without the message's content.
    fn group_owner(&self, position: u64) -> Option<ConsumerId> {
        let groups = self.groups.as_deref()?;
        groups.owner(groups.heads.group_at(position)?)
    }

    /// The first group head after position `cursor` still queued and whose time has not
    /// run out (heads that left the queue, or ran out on the way, make way for their
    /// groups' next messages): its position and size. Its content may be on disk.
    fn next_group_head_after(&mut self, cursor: u64, clock: &mut Clock) -> Option<(u64, u64)> {
        loop {
            let position = self.groups.as_deref()?.heads.next_after(cursor)?;
            match self.entries.get(position) {
                Some(e) if !clock.expired(e.expires_at()) => return Some((position, e.size())),
                Some(_) => {
                    if let Some(e) = self.entries.remove_position(position) {
                        self.account_out(&e);
                        self.expire(e);
                    }
                }
                None => {}
            }
            self.advance_group(position);
        }
    }

    /// The journal lost the content of the head at `position` (as when a batch is read
    /// back): it goes, and its group's next message is its head.
    fn drop_lost(&mut self, position: u64) {
        tracing::error!(
            position,
            "the journal lost a queued message's content; dropping it"
        );
        if let Some(e) = self.entries.remove_position(position) {
            self.account_out(&e);
        }
        self.advance_group(position);
    }

    /// The group head at `position` left the queue: its group's next message is its head.
    fn advance_group(&mut self, position: u64) {
        if let Some(groups) = self.groups.as_deref_mut() {
            let entries = &self.entries;
            groups.heads.advance(position, |p| entries.contains(p));
        }
    }
}
