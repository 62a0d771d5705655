//! Headers-exchange bindings: `x-match` all/any over the binding's non-`x-` arguments.

use crate::error::BrokerError;
use crate::value::{Arguments, HeaderValue, Headers};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MatchMode {
    All,
    Any,
}

#[derive(Debug)]
pub(crate) struct HeadersBinding<T> {
    pub(crate) queue: T,
    pub(crate) key: String,
    mode: MatchMode,
    /// Only the keys that take part in matching (`x-` keys are instructions, not criteria).
    criteria: Vec<(String, HeaderValue)>,
}

impl<T> HeadersBinding<T> {
    pub(crate) fn new(
        queue: T,
        key: &str,
        args: &Arguments,
    ) -> Result<HeadersBinding<T>, BrokerError> {
        let mode = match args.get("x-match") {
            None => MatchMode::All,
            Some(v) => match v.as_str() {
                Some("all") => MatchMode::All,
                Some("any") => MatchMode::Any,
                _ => {
                    return Err(BrokerError::InvalidArgument(format!(
                        "x-match must be \"all\" or \"any\", got {}",
                        v.brief()
                    )))
                }
            },
        };
        let criteria = args
            .iter()
            .filter(|(k, _)| !k.starts_with("x-"))
            .cloned()
            .collect();
        Ok(HeadersBinding {
            queue,
            key: key.to_owned(),
            mode,
            criteria,
        })
    }

    /// A `Void` binding value asks only that the header be present (qpidd's behaviour). An
    /// `all` binding with no criteria matches every message; an `any` binding with none
    /// matches nothing.
    pub(crate) fn matches(&self, headers: Option<&Headers>) -> bool {
        let hit = |(k, want): &(String, HeaderValue)| {
            headers
                .and_then(|h| h.get(k))
                .is_some_and(|have| matches!(want, HeaderValue::Void) || want.matches(have))
        };
        match self.mode {
            MatchMode::All => self.criteria.iter().all(hit),
            MatchMode::Any => self.criteria.iter().any(hit),
        }
    }
}
