//! Maps the protocol layers look up on every frame or delivery (channels, sessions' links and
//! subscriptions, consumers, the exchanges a channel publishes to): foldhash, seeded per map,
//! rather than std's SipHash, which was a tenth of a 0-9-1 message's instructions. The keys
//! a peer chooses (channel numbers, link handles, exchange names) stay unpredictable to it.

use std::collections::HashMap;

pub type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;
