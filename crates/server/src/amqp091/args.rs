//! RabbitMQ's queue arguments (`x-…`) mapped onto core queue options. Unknown arguments are
//! kept on the queue and otherwise ignored.

use ferry_core::{
    Arguments, ExchangeInfo, HeaderValue, LimitPolicy, LimitScope, Queue, QueueLimits, QueueOptions,
};

use super::error::Fault;

pub fn queue_options(args: &Arguments) -> Result<QueueOptions, Fault> {
    let mut opts = QueueOptions::default();
    if let Some(v) = args.get("x-dead-letter-exchange") {
        let name = text(v, "x-dead-letter-exchange")?;
        opts.alternate_exchange = Some(name.to_owned());
    }
    // Read by the core itself; checked here so a bad value is a 406, as in RabbitMQ.
    non_negative(args, "x-message-ttl")?;
    // Read by 0-9-1 channels when they check their deliveries.
    super::ack_timeout::argument(args)?;
    if let Some(v) = args.get("x-dead-letter-routing-key") {
        text(v, "x-dead-letter-routing-key")?;
    }
    if let Some(v) = args.get("x-single-active-consumer") {
        if !matches!(v, HeaderValue::Bool(_)) {
            return Err(Fault::precondition(
                "invalid arg 'x-single-active-consumer': expected a boolean",
            ));
        }
    }
    let max_count = non_negative(args, "x-max-length")?;
    let max_size = non_negative(args, "x-max-length-bytes")?;
    let policy = match args.get("x-overflow") {
        None => LimitPolicy::DropHead,
        Some(v) => match text(v, "x-overflow")? {
            "drop-head" => LimitPolicy::DropHead,
            "reject-publish" | "reject-publish-dlx" => LimitPolicy::Reject,
            other => {
                return Err(Fault::precondition(format!(
                    "invalid arg 'x-overflow': '{other}'"
                )))
            }
        },
    };
    // RabbitMQ's x-max-length 0 means "hold nothing"; the core reads 0 as unlimited, so the
    // closest faithful limit is one byte/message less than anything real: refuse to declare.
    if max_count == Some(0) || max_size == Some(0) {
        return Err(Fault::precondition(
            "x-max-length / x-max-length-bytes of 0 are not supported",
        ));
    }
    // RabbitMQ counts ready messages only: unacknowledged ones do not take room.
    opts.limits = QueueLimits {
        max_count,
        max_size,
        policy,
        scope: LimitScope::Ready,
    };
    Ok(opts)
}

fn text<'a>(v: &'a HeaderValue, name: &str) -> Result<&'a str, Fault> {
    v.as_str()
        .ok_or_else(|| Fault::precondition(format!("invalid arg '{name}': expected a string")))
}

fn non_negative(args: &Arguments, name: &str) -> Result<Option<u64>, Fault> {
    match args.get(name) {
        None => Ok(None),
        Some(HeaderValue::Int(i)) if *i >= 0 => Ok(Some(*i as u64)),
        Some(HeaderValue::UInt(u)) => Ok(Some(*u)),
        Some(v) => Err(Fault::precondition(format!(
            "invalid arg '{name}': {} is not a non-negative integer",
            v.brief()
        ))),
    }
}

/// RabbitMQ refuses to redeclare a queue with other properties or `x-` arguments than it
/// has (406 precondition-failed), so a client never silently gets a queue unlike the one it
/// asked for. Integers compare by value whatever their wire width.
pub fn check_equivalent(existing: &Queue, wanted: &QueueOptions) -> Result<(), Fault> {
    let name = existing.name();
    let flag = |what: &str, have: bool, want: bool| {
        if have == want {
            Ok(())
        } else {
            Err(Fault::precondition(format!(
                "inequivalent arg '{what}' for queue '{name}': received '{want}' but current is '{have}'"
            )))
        }
    };
    flag("durable", existing.is_durable(), wanted.durable)?;
    flag("auto_delete", existing.is_auto_delete(), wanted.auto_delete)?;
    let current = existing.arguments();
    let keys = current
        .iter()
        .chain(wanted.arguments.iter())
        .map(|(k, _)| k.as_str())
        .filter(|k| k.starts_with("x-"));
    for key in keys {
        let same = match (current.get(key), wanted.arguments.get(key)) {
            (None, None) => true,
            (Some(a), Some(b)) => a.matches(b),
            _ => false,
        };
        if !same {
            return Err(Fault::precondition(format!(
                "inequivalent arg '{key}' for queue '{name}'"
            )));
        }
    }
    Ok(())
}

/// What an exchange.declare asks for, to compare with an exchange that exists.
pub struct WantedExchange<'a> {
    pub kind: &'a str,
    pub durable: bool,
    pub auto_delete: bool,
    pub internal: bool,
    pub arguments: &'a Arguments,
}

/// RabbitMQ's rule for redeclaring an exchange: type, durable, auto-delete and internal must
/// match, and of the arguments `alternate-exchange` (the one that changes routing); anything
/// else is a 406 naming the first difference.
pub fn check_exchange_equivalent(
    existing: &ExchangeInfo,
    wanted: &WantedExchange,
) -> Result<(), Fault> {
    let name = &existing.name;
    let differs = |what: &str, want: &dyn std::fmt::Display, have: &dyn std::fmt::Display| {
        Err(Fault::precondition(format!(
            "inequivalent arg '{what}' for exchange '{name}' in vhost '/': received '{want}' but current is '{have}'"
        )))
    };
    if existing.kind.name() != wanted.kind {
        return differs("type", &wanted.kind, &existing.kind.name());
    }
    if existing.durable != wanted.durable {
        return differs("durable", &wanted.durable, &existing.durable);
    }
    if existing.auto_delete != wanted.auto_delete {
        return differs("auto_delete", &wanted.auto_delete, &existing.auto_delete);
    }
    if existing.internal != wanted.internal {
        return differs("internal", &wanted.internal, &existing.internal);
    }
    const KEY: &str = "alternate-exchange";
    let same = match (existing.arguments.get(KEY), wanted.arguments.get(KEY)) {
        (None, None) => true,
        (Some(a), Some(b)) => a.matches(b),
        _ => false,
    };
    if !same {
        let show =
            |v: Option<&HeaderValue>| v.and_then(HeaderValue::as_str).unwrap_or("none").to_owned();
        return differs(
            KEY,
            &show(wanted.arguments.get(KEY)),
            &show(existing.arguments.get(KEY)),
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(entries: &[(&str, HeaderValue)]) -> Arguments {
        entries.iter().map(|(k, v)| (*k, v.clone())).collect()
    }

    #[test]
    fn limits_and_dead_letter_exchange() {
        let o = queue_options(&args(&[
            ("x-max-length", HeaderValue::Int(10)),
            ("x-dead-letter-exchange", HeaderValue::Str("dlx".into())),
            ("x-unknown", HeaderValue::Bool(true)),
        ]))
        .unwrap();
        assert_eq!(o.limits.max_count, Some(10));
        assert_eq!(o.limits.policy, LimitPolicy::DropHead);
        assert_eq!(o.limits.scope, LimitScope::Ready);
        assert_eq!(o.alternate_exchange.as_deref(), Some("dlx"));
    }

    #[test]
    fn bad_values_are_precondition_failures() {
        let e = queue_options(&args(&[("x-max-length", HeaderValue::Int(-1))])).unwrap_err();
        assert_eq!(e.code, 406);
        let e = queue_options(&args(&[("x-overflow", HeaderValue::Str("x".into()))])).unwrap_err();
        assert_eq!(e.code, 406);
        let e =
            queue_options(&args(&[("x-message-ttl", HeaderValue::Str("x".into()))])).unwrap_err();
        assert_eq!(e.code, 406);
        let e = queue_options(&args(&[("x-consumer-timeout", HeaderValue::Int(-5))])).unwrap_err();
        assert_eq!(e.code, 406);
        assert!(queue_options(&args(&[("x-consumer-timeout", HeaderValue::Int(5))])).is_ok());
    }

    #[test]
    fn redeclaring_with_other_arguments_or_flags_is_inequivalent() {
        let broker = ferry_core::Broker::new(ferry_core::BrokerConfig::default());
        let opts = queue_options(&args(&[("x-max-length", HeaderValue::Int(10))])).unwrap();
        let mut declared = opts.clone();
        declared.arguments = args(&[("x-max-length", HeaderValue::Int(10))]);
        let (q, _) = broker
            .declare_queue("eq", declared.clone(), false, 1)
            .unwrap();
        assert!(check_equivalent(&q, &declared).is_ok());
        // The same value in another integer width is the same argument.
        let mut wider = declared.clone();
        wider.arguments = args(&[("x-max-length", HeaderValue::UInt(10))]);
        assert!(check_equivalent(&q, &wider).is_ok());
        let mut other = declared.clone();
        other.arguments = args(&[("x-max-length", HeaderValue::Int(20))]);
        assert_eq!(check_equivalent(&q, &other).unwrap_err().code, 406);
        let mut missing = declared.clone();
        missing.arguments = Arguments::new();
        assert!(check_equivalent(&q, &missing).is_err());
        let mut durable = declared;
        durable.durable = true;
        assert!(check_equivalent(&q, &durable).is_err());
    }
}
