//! qpidd's sequencing queues (`qpid.queue_msg_sequence`, see [`Sequenced`]). The number
//! is the queue's, not the message's (which may sit on several queues), so a numbered
//! message is a copy for this queue: only sequencing queues pay for it.

use std::sync::Arc;

use super::{Queue, QueueState};
use crate::message::{Message, Sequenced};

impl Queue {
    /// The message as this queue stores it: numbered if the queue sequences messages.
    /// Called under the queue lock for every message stored, in queue order.
    #[inline]
    pub(super) fn numbered(&self, st: &mut QueueState, msg: Message) -> Message {
        match &self.features.sequence_key {
            None => msg,
            Some(key) => number(st, key, &msg),
        }
    }
}

#[cold]
fn number(st: &mut QueueState, key: &Arc<str>, msg: &Message) -> Message {
    // qpidd's counter is a 32-bit serial number.
    st.sequence = st.sequence.wrapping_add(1);
    msg.derive(|p| {
        // The same message for the store: its record on this queue stays its record.
        p.store_id = msg.store_id();
        p.sequence = Some(Arc::new(Sequenced {
            key: key.clone(),
            number: st.sequence,
        }));
    })
}
