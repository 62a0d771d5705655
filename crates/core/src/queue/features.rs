//! Queue behaviour chosen by declare arguments: RabbitMQ's `x-…` names and qpidd's
//! `qpid.…` ones, whichever protocol the declaring client speaks.

use std::sync::Arc;

use crate::error::BrokerError;
use crate::queue::entries::PriorityLevels;
use crate::value::{Arguments, HeaderValue};

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Features {
    /// `x-message-ttl`: most milliseconds a message may wait on this queue.
    pub(crate) message_ttl: Option<u64>,
    /// `x-dead-letter-routing-key`: the key messages leave for the alternate exchange with.
    pub(crate) dead_letter_routing_key: Option<String>,
    /// `x-single-active-consumer`: only the oldest consumer receives messages.
    pub(crate) single_active_consumer: bool,
    /// `x-dead-letter-exchange` given: the alternate exchange is a RabbitMQ dead letter
    /// exchange (see [`crate::Queue`]'s dead-lettering); expired messages go there too.
    pub(crate) dead_letter: bool,
    /// `x-max-priority` (RabbitMQ) or `qpid.priorities` / `x-qpid-priorities` (qpidd): a
    /// priority queue.
    pub(crate) priorities: Option<PriorityLevels>,
    /// `x-expires`: milliseconds unused after which the queue is deleted.
    pub(crate) expires: Option<u64>,
    /// `qpid.last_value_queue_key` (or the older `qpid.last_value_queue`, keyed by
    /// `qpid.LVQ_key`): a last-value queue keyed by this application header.
    pub(crate) last_value_key: Option<String>,
    /// `qpid.auto_delete_timeout` (seconds on the wire, milliseconds here): an auto-delete
    /// queue falls unused this long before it is deleted (it makes the queue auto-delete).
    pub(crate) auto_delete_timeout: Option<u64>,
    /// qpidd's `no-local`: messages published on the connection of the queue's exclusive
    /// owner, or of its exclusive consumer, are dropped on arrival.
    pub(crate) no_local: bool,
    /// `qpid.queue_msg_sequence`: the header a sequencing queue numbers messages in.
    pub(crate) sequence_key: Option<Arc<str>>,
    /// `qpid.group_header_key`: the header whose value puts a message in a message group.
    pub(crate) group_key: Option<String>,
    /// `qpid.fairshare` (and per level `qpid.fairshare-N`, or the `x-qpid-` forms) of a
    /// priority queue: how many messages each level delivers before yielding (0: no limit).
    pub(crate) fairshare: Option<Vec<u32>>,
    /// `qpid.trace.id` / `qpid.trace.exclude`: message tracing (see `crate::queue::trace`).
    pub(crate) trace: Option<Box<Tracing>>,
    /// `x-delivery-limit` (RabbitMQ's quorum queues'): a message that comes back after a
    /// delivery more often than this is dead-lettered (or dropped). Negative: no limit.
    pub(crate) delivery_limit: Option<u32>,
    /// A quorum queue's, or one with a delivery limit: its consumers are told each message's
    /// count of returns (0-9-1's `x-delivery-count`), as RabbitMQ's quorum queues tell them,
    /// and the count is kept across restarts and failovers, so that what they see and the
    /// limit acting on it carry on.
    pub(crate) reports_returns: bool,
}

/// A tracing queue's settings.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Tracing {
    /// Added to the trace of each message the queue stores.
    pub(crate) id: Option<Arc<str>>,
    /// Messages whose trace names one of these are not stored.
    pub(crate) exclude: Vec<Box<str>>,
}

impl Tracing {
    fn from_arguments(args: &Arguments) -> Option<Box<Tracing>> {
        let text = |key| args.get(key).and_then(HeaderValue::as_str);
        let id = text("qpid.trace.id")
            .filter(|id| !id.is_empty())
            .map(Arc::from);
        let exclude: Vec<Box<str>> = text("qpid.trace.exclude")
            .map(|list| crate::message::trace_ids(list).map(Box::from).collect())
            .unwrap_or_default();
        (id.is_some() || !exclude.is_empty()).then(|| Box::new(Tracing { id, exclude }))
    }
}

/// RabbitMQ's cap on `x-max-priority`.
const MAX_PRIORITY: u64 = 255;

const QPID_PRIORITIES: [&str; 2] = ["qpid.priorities", "x-qpid-priorities"];

const AUTO_DELETE_TIMEOUT: &str = "qpid.auto_delete_timeout";

const GROUP_KEY: &str = "qpid.group_header_key";
const DELIVERY_LIMIT: &str = "x-delivery-limit";
/// RabbitMQ 4's `x-delivery-limit` for a quorum queue declared without one.
const QUORUM_DELIVERY_LIMIT: u32 = 20;
const SHARED_GROUPS: &str = "qpid.shared_msg_group";

/// Whether a declare asks for one of RabbitMQ's quorum queues (`x-queue-type: quorum`):
/// replicated in a cluster, and with RabbitMQ 4's default delivery limit anywhere.
pub fn is_quorum_declare(args: &Arguments) -> bool {
    match args.get("x-queue-type") {
        Some(HeaderValue::Str(s)) => s.eq_ignore_ascii_case("quorum"),
        Some(HeaderValue::Bytes(b)) => b.eq_ignore_ascii_case(b"quorum"),
        _ => false,
    }
}

impl Features {
    /// Reads the arguments leniently (values that [`Features::validate`] refuses are
    /// ignored); declares go through `validate` first.
    pub(crate) fn from_arguments(args: &Arguments) -> Features {
        let delivery_limit = match args.get(DELIVERY_LIMIT) {
            // Negative: none (RabbitMQ's way to turn a quorum queue's default off).
            Some(limit) => limit.as_u64().map(|n| u32::try_from(n).unwrap_or(u32::MAX)),
            None => is_quorum_declare(args).then_some(QUORUM_DELIVERY_LIMIT),
        };
        let rabbit_priority = args
            .get("x-max-priority")
            .and_then(HeaderValue::as_u64)
            .filter(|&n| n > 0)
            .map(|n| PriorityLevels::up_to(n.min(MAX_PRIORITY) as u8));
        let qpid_priority = || {
            QPID_PRIORITIES
                .iter()
                .find_map(|k| args.get(k))
                .and_then(HeaderValue::as_u64)
                .filter(|&n| n > 0)
                .map(|n| PriorityLevels::spread(n.min(10) as u8))
        };
        let priorities = rabbit_priority.or_else(qpid_priority);
        Features {
            fairshare: priorities.and_then(|p| fairshare(args, p.levels())),
            message_ttl: args.get("x-message-ttl").and_then(|v| v.as_u64()),
            dead_letter_routing_key: args
                .get("x-dead-letter-routing-key")
                .and_then(|v| v.as_str())
                .map(str::to_owned),
            single_active_consumer: matches!(
                args.get("x-single-active-consumer"),
                Some(HeaderValue::Bool(true))
            ),
            dead_letter: args.get("x-dead-letter-exchange").is_some(),
            priorities,
            expires: args
                .get("x-expires")
                .and_then(HeaderValue::as_u64)
                .filter(|&ms| ms > 0),
            last_value_key: last_value_key(args),
            group_key: args
                .get(GROUP_KEY)
                .and_then(HeaderValue::as_str)
                .filter(|k| !k.is_empty())
                .map(str::to_owned),
            auto_delete_timeout: args
                .get(AUTO_DELETE_TIMEOUT)
                .and_then(HeaderValue::as_u64)
                .filter(|&s| s > 0)
                .map(|s| s.saturating_mul(1000)),
            no_local: args.get("no-local").is_some_and(truthy),
            trace: Tracing::from_arguments(args),
            sequence_key: args
                .get("qpid.queue_msg_sequence")
                .and_then(HeaderValue::as_str)
                .filter(|k| !k.is_empty())
                .map(Arc::from),
            delivery_limit,
            reports_returns: delivery_limit.is_some() || is_quorum_declare(args),
        }
    }

    /// Refuses argument values the queue could not honour. RabbitMQ's `x-` arguments must be
    /// integers on the wire (its rule); qpidd's accept numeric strings, as qpid tools send.
    pub(crate) fn validate(args: &Arguments) -> Result<(), BrokerError> {
        if let Some(v) = args.get("x-expires") {
            match integer(v) {
                Some(ms) if ms > 0 => {}
                _ => return Err(invalid("x-expires", v, "a positive integer")),
            }
        }
        if let Some(v) = args.get(DELIVERY_LIMIT) {
            // RabbitMQ takes a negative limit as none.
            if integer(v).is_none() {
                return Err(invalid(DELIVERY_LIMIT, v, "an integer"));
            }
        }
        if let Some(v) = args.get("x-max-priority") {
            match integer(v) {
                Some(n) if (0..=MAX_PRIORITY as i128).contains(&n) => {}
                _ => return Err(invalid("x-max-priority", v, "an integer from 0 to 255")),
            }
        }
        if let Some(v) = args.get(AUTO_DELETE_TIMEOUT) {
            if v.as_u64().is_none() {
                return Err(invalid(AUTO_DELETE_TIMEOUT, v, "a non-negative integer"));
            }
        }
        for key in QPID_PRIORITIES {
            if let Some(v) = args.get(key) {
                if v.as_u64().is_none() {
                    return Err(invalid(key, v, "a non-negative integer"));
                }
            }
        }
        // qpidd's checks, and its messages.
        let grouped = args
            .get(GROUP_KEY)
            .and_then(HeaderValue::as_str)
            .is_some_and(|k| !k.is_empty());
        let shared = args.get(SHARED_GROUPS).is_some_and(truthy);
        if shared && !grouped {
            return Err(BrokerError::InvalidArgument(format!(
                "Can only specify {SHARED_GROUPS} if {GROUP_KEY} is set"
            )));
        }
        if grouped && !shared {
            return Err(BrokerError::InvalidArgument(format!(
                "Only shared groups are supported at present; {SHARED_GROUPS} is required if {GROUP_KEY} is set"
            )));
        }
        if grouped && last_value_key(args).is_some() {
            return Err(BrokerError::InvalidArgument(format!(
                "Cannot specify qpid.last_value_queue_key and {GROUP_KEY} for the same queue"
            )));
        }
        let fair = args
            .0
            .iter()
            .any(|(k, _)| FAIRSHARE.contains(&k.as_str()) || fairshare_level(k).is_some());
        let prioritised = QPID_PRIORITIES
            .iter()
            .chain(["x-max-priority"].iter())
            .any(|k| args.get(k).is_some());
        if fair && !prioritised {
            return Err(BrokerError::InvalidArgument(
                "Cannot specify fairshare settings when queue is not enabled for priorities".into(),
            ));
        }
        if grouped && QPID_PRIORITIES.iter().any(|k| args.get(k).is_some()) {
            return Err(BrokerError::InvalidArgument(format!(
                "Cannot specify qpid.priorities and {GROUP_KEY} for the same queue"
            )));
        }
        Ok(())
    }
}

const FAIRSHARE: [&str; 2] = ["qpid.fairshare", "x-qpid-fairshare"];

/// The level a per-level fair-share argument (`qpid.fairshare-N`) names, if `key` is one.
fn fairshare_level(key: &str) -> Option<usize> {
    FAIRSHARE
        .iter()
        .find_map(|k| key.strip_prefix(k)?.strip_prefix('-'))
        .and_then(|n| n.parse().ok())
}

/// Per-level limits for a queue of `levels` priority levels, if any is set.
fn fairshare(args: &Arguments, levels: usize) -> Option<Vec<u32>> {
    let limit = |v: &HeaderValue| v.as_u64().map_or(0, |n| n.min(u64::from(u32::MAX)) as u32);
    let default = FAIRSHARE.iter().find_map(|k| args.get(k)).map_or(0, limit);
    let mut limits = vec![default; levels];
    for (key, value) in &args.0 {
        if let Some(l) = fairshare_level(key).and_then(|level| limits.get_mut(level)) {
            *l = limit(value);
        }
    }
    limits.iter().any(|&l| l > 0).then_some(limits)
}

fn last_value_key(args: &Arguments) -> Option<String> {
    if let Some(key) = args
        .get("qpid.last_value_queue_key")
        .and_then(|v| v.as_str())
    {
        return Some(key.to_owned());
    }
    let legacy = match args.get("qpid.last_value_queue") {
        Some(HeaderValue::Bool(b)) => *b,
        Some(v) => v.as_u64().is_some_and(|n| n != 0),
        None => false,
    };
    legacy.then(|| "qpid.LVQ_key".to_owned())
}

/// A flag as qpidd reads one (`Variant::asBool`): a boolean, a non-zero number, or the
/// text "true" / "True" / a non-zero number.
fn truthy(v: &HeaderValue) -> bool {
    match v {
        HeaderValue::Bool(b) => *b,
        HeaderValue::Int(i) => *i != 0,
        HeaderValue::UInt(u) => *u != 0,
        HeaderValue::Str(_) | HeaderValue::Bytes(_) => match v.as_str() {
            Some("true" | "True") => true,
            Some(s) => s.trim().parse::<i64>().is_ok_and(|n| n != 0),
            None => false,
        },
        _ => false,
    }
}

fn integer(v: &HeaderValue) -> Option<i128> {
    match v {
        HeaderValue::Int(i) => Some(i128::from(*i)),
        HeaderValue::UInt(u) => Some(i128::from(*u)),
        _ => None,
    }
}

fn invalid(key: &str, v: &HeaderValue, want: &str) -> BrokerError {
    BrokerError::InvalidArgument(format!("invalid arg '{key}': {} is not {want}", v.brief()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::HeaderValue as V;

    fn args(entries: &[(&str, V)]) -> Arguments {
        entries.iter().map(|(k, v)| (*k, v.clone())).collect()
    }

    #[test]
    fn fair_share_limits_per_level_on_priority_queues_only() {
        let f = Features::from_arguments(&args(&[
            ("x-qpid-priorities", V::UInt(8)),
            ("x-qpid-fairshare", V::UInt(5)),
            ("x-qpid-fairshare-7", V::UInt(0)),
            ("qpid.fairshare-2", V::Str("3".into())),
            ("qpid.fairshare-99", V::UInt(1)),
        ]));
        assert_eq!(f.fairshare, Some(vec![5, 5, 3, 5, 5, 5, 5, 0]));
        let plain = args(&[("qpid.priorities", V::UInt(3))]);
        assert_eq!(Features::from_arguments(&plain).fairshare, None);
        let unprioritised = args(&[("qpid.fairshare", V::UInt(5))]);
        assert!(Features::validate(&unprioritised).is_err());
        assert_eq!(Features::from_arguments(&unprioritised).fairshare, None);
    }

    #[test]
    fn message_groups_need_shared_groups_and_exclude_lvq_and_priorities() {
        let key = ("qpid.group_header_key", V::Str("G".into()));
        let shared = ("qpid.shared_msg_group", V::UInt(1));
        let ok = args(&[key.clone(), shared.clone()]);
        assert!(Features::validate(&ok).is_ok());
        assert_eq!(
            Features::from_arguments(&ok).group_key.as_deref(),
            Some("G")
        );
        for bad in [
            args(std::slice::from_ref(&key)),
            args(std::slice::from_ref(&shared)),
            args(&[
                key.clone(),
                shared.clone(),
                ("qpid.last_value_queue_key", V::Str("k".into())),
            ]),
            args(&[key.clone(), shared.clone(), ("qpid.priorities", V::UInt(3))]),
        ] {
            assert!(
                matches!(
                    Features::validate(&bad),
                    Err(BrokerError::InvalidArgument(_))
                ),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn priorities_from_either_broker_s_argument() {
        let f = Features::from_arguments(&args(&[("x-max-priority", V::Int(5))]));
        assert_eq!(f.priorities, Some(PriorityLevels::up_to(5)));
        let f = Features::from_arguments(&args(&[("qpid.priorities", V::Str("3".into()))]));
        assert_eq!(f.priorities, Some(PriorityLevels::spread(3)));
        let f = Features::from_arguments(&args(&[("x-qpid-priorities", V::UInt(10))]));
        assert_eq!(f.priorities, Some(PriorityLevels::spread(10)));
        let f = Features::from_arguments(&args(&[("x-max-priority", V::Int(0))]));
        assert_eq!(f.priorities, None, "0 is an ordinary queue");
    }

    #[test]
    fn last_value_keys() {
        let f = Features::from_arguments(&args(&[(
            "qpid.last_value_queue_key",
            V::Str("ticker".into()),
        )]));
        assert_eq!(f.last_value_key.as_deref(), Some("ticker"));
        let f = Features::from_arguments(&args(&[("qpid.last_value_queue", V::Int(1))]));
        assert_eq!(f.last_value_key.as_deref(), Some("qpid.LVQ_key"));
        let f = Features::from_arguments(&args(&[("qpid.last_value_queue", V::Int(0))]));
        assert_eq!(f.last_value_key, None);
    }

    #[test]
    fn no_local_takes_any_true_value() {
        for v in [
            V::Bool(true),
            V::Str("true".into()),
            V::Int(1),
            V::Str("True".into()),
        ] {
            assert!(Features::from_arguments(&args(&[("no-local", v)])).no_local);
        }
        for v in [V::Bool(false), V::Str("false".into()), V::Int(0), V::Void] {
            assert!(!Features::from_arguments(&args(&[("no-local", v)])).no_local);
        }
    }

    #[test]
    fn the_sequence_argument_names_the_header() {
        let f = Features::from_arguments(&args(&[("qpid.queue_msg_sequence", V::Str("k".into()))]));
        assert_eq!(f.sequence_key.as_deref(), Some("k"));
        let f = Features::from_arguments(&args(&[("qpid.queue_msg_sequence", V::Str("".into()))]));
        assert_eq!(f.sequence_key, None);
    }

    #[test]
    fn auto_delete_timeout_is_in_seconds() {
        let f = Features::from_arguments(&args(&[("qpid.auto_delete_timeout", V::Int(3))]));
        assert_eq!(f.auto_delete_timeout, Some(3000));
        let f = Features::from_arguments(&args(&[("qpid.auto_delete_timeout", V::Int(0))]));
        assert_eq!(f.auto_delete_timeout, None);
        let bad = args(&[("qpid.auto_delete_timeout", V::Str("soon".into()))]);
        assert!(Features::validate(&bad).is_err());
    }

    #[test]
    fn invalid_values_are_refused() {
        for bad in [
            args(&[("x-expires", V::Int(0))]),
            args(&[("x-expires", V::Int(-5))]),
            args(&[("x-expires", V::Str("1000".into()))]),
            args(&[("x-max-priority", V::Int(256))]),
            args(&[("x-max-priority", V::Int(-1))]),
            args(&[("x-max-priority", V::Str("5".into()))]),
            args(&[("qpid.priorities", V::Str("many".into()))]),
        ] {
            assert!(
                matches!(
                    Features::validate(&bad),
                    Err(BrokerError::InvalidArgument(_))
                ),
                "{bad:?}"
            );
        }
        let good = args(&[
            ("x-expires", V::UInt(1000)),
            ("x-max-priority", V::Int(255)),
            ("qpid.priorities", V::Str("4".into())),
        ]);
        assert!(Features::validate(&good).is_ok());
        assert_eq!(Features::from_arguments(&good).expires, Some(1000));
    }
}
