//! Exchange types. Kept apart from [`crate::Exchange`] because durable definitions name
//! them too ([`crate::ExchangeDefinition`]), and the journal sits below exchanges.

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ExchangeKind {
    Direct,
    Fanout,
    Topic,
    Headers,
}

impl ExchangeKind {
    /// The AMQP type name; `None` for types the broker does not know (0-10 answers those with
    /// not-found, as qpidd does).
    pub fn from_name(name: &str) -> Option<ExchangeKind> {
        match name {
            "direct" => Some(ExchangeKind::Direct),
            "fanout" => Some(ExchangeKind::Fanout),
            "topic" => Some(ExchangeKind::Topic),
            "headers" => Some(ExchangeKind::Headers),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            ExchangeKind::Direct => "direct",
            ExchangeKind::Fanout => "fanout",
            ExchangeKind::Topic => "topic",
            ExchangeKind::Headers => "headers",
        }
    }
}

/// Which bindings under one (destination, key) a bind is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BindingIdentity {
    /// (destination, key), qpidd's identity, for 0-10: binding again replaces the arguments
    /// of whatever is bound under the key (qpidd refuses other arguments on a headers
    /// exchange instead).
    Key,
    /// (destination, key, arguments), as 0-9-1 and RabbitMQ have it: the same key with other
    /// arguments is another binding, kept beside the first (a headers exchange routes what
    /// either matches). Arguments compare as sets of entries.
    KeyAndArguments,
}
