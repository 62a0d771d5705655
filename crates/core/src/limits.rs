//! Queue depth limits.

use crate::error::BrokerError;
use crate::value::Arguments;

/// What happens when a publish would exceed a queue limit. qpidd's `ring_strict` (gone
/// from later qpidd releases) and `flow_to_disk` are refused at declare time with
/// `NotImplemented` rather than silently behaving like `Reject`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LimitPolicy {
    #[default]
    Reject,
    /// Drop the oldest available messages (to the alternate exchange, if any) to make room:
    /// RabbitMQ's default `x-overflow` of `drop-head`. In a priority queue the head is the
    /// next message to deliver, as RabbitMQ has it.
    DropHead,
    /// qpidd's `ring` (its `LossyQueue`): make room by dropping, silently, the oldest
    /// message of the lowest priority level not above the new message's, acquired ones
    /// included (their consumers' settlements then do nothing); if there is none, the new
    /// message is the one dropped.
    Ring,
}

/// Which messages a queue's limits count.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LimitScope {
    /// qpidd's: every message until it is dequeued, acquired-but-unsettled ones included, so
    /// that a slow consumer cannot let a queue hold unbounded memory.
    #[default]
    Depth,
    /// RabbitMQ's `x-max-length` and `x-max-length-bytes`: only the messages ready for
    /// delivery, unacknowledged ones not, and only their bodies' bytes.
    Ready,
}

/// Limits on a queue's depth. Bytes are header + body (`Message::size`) for qpidd's
/// [`LimitScope::Depth`], the body alone for RabbitMQ's [`LimitScope::Ready`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct QueueLimits {
    pub max_count: Option<u64>,
    pub max_size: Option<u64>,
    pub policy: LimitPolicy,
    pub scope: LimitScope,
}

impl QueueLimits {
    pub fn is_unlimited(&self) -> bool {
        self.max_count.is_none() && self.max_size.is_none()
    }

    /// Reads qpidd's `qpid.max_count`, `qpid.max_size` and `qpid.policy_type` declare arguments.
    /// A limit of 0 means "no limit", as in qpidd.
    pub fn from_arguments(args: &Arguments) -> Result<QueueLimits, BrokerError> {
        let max_count = limit_arg(args, "qpid.max_count")?;
        let max_size = limit_arg(args, "qpid.max_size")?;
        let policy = match args.get("qpid.policy_type") {
            None => LimitPolicy::Reject,
            Some(v) => match v.as_str() {
                Some("reject") => LimitPolicy::Reject,
                Some("ring") => LimitPolicy::Ring,
                Some(p @ ("ring_strict" | "flow_to_disk")) => {
                    return Err(BrokerError::NotImplemented(format!(
                        "qpid.policy_type {p} is not supported"
                    )))
                }
                _ => {
                    return Err(BrokerError::InvalidArgument(format!(
                        "invalid qpid.policy_type {}",
                        v.brief()
                    )))
                }
            },
        };
        Ok(QueueLimits {
            max_count,
            max_size,
            policy,
            scope: LimitScope::Depth,
        })
    }

    /// Whether a queue currently holding `count` messages of `bytes` total may take one more of
    /// `size` bytes.
    pub(crate) fn admits(&self, count: u64, bytes: u64, size: u64) -> bool {
        self.max_count.map_or(true, |max| count < max)
            && self
                .max_size
                .map_or(true, |max| bytes.saturating_add(size) <= max)
    }
}

fn limit_arg(args: &Arguments, key: &str) -> Result<Option<u64>, BrokerError> {
    match args.get(key) {
        None => Ok(None),
        Some(v) => match v.as_u64() {
            Some(0) => Ok(None),
            Some(n) => Ok(Some(n)),
            None => Err(BrokerError::InvalidArgument(format!(
                "{key} must be a non-negative integer, got {}",
                v.brief()
            ))),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::HeaderValue as V;

    fn args(entries: &[(&str, V)]) -> Arguments {
        entries.iter().map(|(k, v)| (*k, v.clone())).collect()
    }

    #[test]
    fn reads_qpid_limits_in_any_numeric_form() {
        let l = QueueLimits::from_arguments(&args(&[
            ("qpid.max_count", V::Int(10)),
            ("qpid.max_size", V::Str("2048".into())),
            ("qpid.policy_type", V::Str("reject".into())),
        ]))
        .unwrap();
        assert_eq!(l.max_count, Some(10));
        assert_eq!(l.max_size, Some(2048));
        assert!(!l.is_unlimited());
    }

    #[test]
    fn ring_is_qpidds_ring() {
        let l = QueueLimits::from_arguments(&args(&[
            ("qpid.max_count", V::Int(3)),
            ("qpid.policy_type", V::Str("ring".into())),
        ]))
        .unwrap();
        assert_eq!(l.policy, LimitPolicy::Ring);
    }

    #[test]
    fn zero_means_unlimited() {
        let l = QueueLimits::from_arguments(&args(&[("qpid.max_count", V::UInt(0))])).unwrap();
        assert!(l.is_unlimited());
    }

    #[test]
    fn bad_values_and_unsupported_policies_are_errors() {
        assert!(matches!(
            QueueLimits::from_arguments(&args(&[("qpid.max_count", V::Int(-1))])),
            Err(BrokerError::InvalidArgument(_))
        ));
        assert!(matches!(
            QueueLimits::from_arguments(&args(&[(
                "qpid.policy_type",
                V::Str("ring_strict".into())
            )])),
            Err(BrokerError::NotImplemented(_))
        ));
        assert!(matches!(
            QueueLimits::from_arguments(&args(&[("qpid.policy_type", V::Str("bogus".into()))])),
            Err(BrokerError::InvalidArgument(_))
        ));
    }

    #[test]
    fn admits_up_to_the_limits() {
        let l = QueueLimits {
            max_count: Some(2),
            max_size: Some(100),
            policy: LimitPolicy::Reject,
            ..Default::default()
        };
        assert!(l.admits(1, 50, 50));
        assert!(!l.admits(2, 0, 1));
        assert!(!l.admits(0, 60, 41));
    }
}
