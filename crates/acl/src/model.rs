//! The vocabulary of an ACL file: permissions, actions, objects and properties, with the
//! spellings qpidd uses.

use std::fmt;

/// What a matching rule decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Permission {
    Allow,
    AllowLog,
    Deny,
    DenyLog,
}

impl Permission {
    pub fn parse(word: &str) -> Option<Permission> {
        Some(match word {
            "allow" => Permission::Allow,
            "allow-log" => Permission::AllowLog,
            "deny" => Permission::Deny,
            "deny-log" => Permission::DenyLog,
            _ => return None,
        })
    }

    pub fn allows(self) -> bool {
        matches!(self, Permission::Allow | Permission::AllowLog)
    }

    pub fn logs(self) -> bool {
        matches!(self, Permission::AllowLog | Permission::DenyLog)
    }
}

macro_rules! keyword_enum {
    ($(#[$meta:meta])* $name:ident { $($variant:ident = $word:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name { $($variant),+ }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            pub fn parse(word: &str) -> Option<$name> {
                match word {
                    $($word => Some($name::$variant),)+
                    _ => None,
                }
            }

            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $word,)+
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

keyword_enum! {
    /// What a client tries to do. ferryd checks the first eight, and `update` on the broker
    /// (management's user writes); the rest are qpidd management actions, accepted so qpidd
    /// files load, and never matched.
    Action {
        Access = "access",
        Bind = "bind",
        Consume = "consume",
        Create = "create",
        Delete = "delete",
        Publish = "publish",
        Purge = "purge",
        Unbind = "unbind",
        Update = "update",
        Move = "move",
        Redirect = "redirect",
        Reroute = "reroute",
    }
}

keyword_enum! {
    /// What the action is done to. ferryd checks connection, exchange and queue, and broker
    /// for management's user writes; the rest are qpidd management objects, accepted so
    /// qpidd files load, and never matched.
    ObjectType {
        Connection = "connection",
        Exchange = "exchange",
        Queue = "queue",
        Broker = "broker",
        Link = "link",
        Method = "method",
        Query = "query",
    }
}

/// How a property's value is written and compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PropertyKind {
    /// A name; a trailing `*` matches any suffix.
    Text,
    /// A routing key pattern, matched as a topic exchange would (`*` one word, `#` any).
    Topic,
    /// `true` or `false`.
    Bool,
    /// The lookup's number must be at least this (unlimited counts as infinitely large).
    LowerLimit,
    /// The lookup's number must be at most this (unlimited exceeds every limit).
    UpperLimit,
    /// `all`, an address, `localhost`, or an inclusive range `first,last`.
    Host,
}

keyword_enum! {
    /// A property a rule may constrain.
    Property {
        Name = "name",
        Durable = "durable",
        RoutingKey = "routingkey",
        AutoDelete = "autodelete",
        Exclusive = "exclusive",
        Type = "type",
        Alternate = "alternate",
        QueueName = "queuename",
        ExchangeName = "exchangename",
        SchemaPackage = "schemapackage",
        SchemaClass = "schemaclass",
        PolicyType = "policytype",
        Paging = "paging",
        Host = "host",
        QueueMaxSizeLowerLimit = "queuemaxsizelowerlimit",
        QueueMaxSizeUpperLimit = "queuemaxsizeupperlimit",
        QueueMaxCountLowerLimit = "queuemaxcountlowerlimit",
        QueueMaxCountUpperLimit = "queuemaxcountupperlimit",
        FileMaxSizeLowerLimit = "filemaxsizelowerlimit",
        FileMaxSizeUpperLimit = "filemaxsizeupperlimit",
        FileMaxCountLowerLimit = "filemaxcountlowerlimit",
        FileMaxCountUpperLimit = "filemaxcountupperlimit",
        PagesLowerLimit = "pageslowerlimit",
        PagesUpperLimit = "pagesupperlimit",
        PageFactorLowerLimit = "pagefactorlowerlimit",
        PageFactorUpperLimit = "pagefactorupperlimit",
    }
}

impl Property {
    pub fn kind(self) -> PropertyKind {
        use Property::*;
        match self {
            RoutingKey => PropertyKind::Topic,
            Durable | AutoDelete | Exclusive | Paging => PropertyKind::Bool,
            Host => PropertyKind::Host,
            QueueMaxSizeLowerLimit
            | QueueMaxCountLowerLimit
            | FileMaxSizeLowerLimit
            | FileMaxCountLowerLimit
            | PagesLowerLimit
            | PageFactorLowerLimit => PropertyKind::LowerLimit,
            QueueMaxSizeUpperLimit
            | QueueMaxCountUpperLimit
            | FileMaxSizeUpperLimit
            | FileMaxCountUpperLimit
            | PagesUpperLimit
            | PageFactorUpperLimit => PropertyKind::UpperLimit,
            Name | Type | Alternate | QueueName | ExchangeName | SchemaPackage | SchemaClass
            | PolicyType => PropertyKind::Text,
        }
    }

    /// Limits are checked after the rule's other criteria matched (see `Acl::check`).
    pub fn is_limit(self) -> bool {
        matches!(
            self.kind(),
            PropertyKind::LowerLimit | PropertyKind::UpperLimit
        )
    }
}

/// A property value in a lookup, typed as the broker knows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Value<'a> {
    Text(&'a str),
    Bool(bool),
    /// `None` is unlimited (no limit was asked for).
    Number(Option<u64>),
    Host(std::net::IpAddr),
}

/// Every lookup ferryd performs: the action, the object and the properties it supplies. A rule
/// whose properties no lookup of its action and object supplies can never match; such rules
/// are reported when the file loads (as qpidd does).
pub const LOOKUPS: &[(Action, ObjectType, &[Property])] = {
    use Property::*;
    const QUEUE_DECLARE: &[Property] = &[
        Name,
        Durable,
        AutoDelete,
        Exclusive,
        Alternate,
        PolicyType,
        QueueMaxSizeLowerLimit,
        QueueMaxSizeUpperLimit,
        QueueMaxCountLowerLimit,
        QueueMaxCountUpperLimit,
    ];
    const EXCHANGE_DECLARE: &[Property] = &[Name, Type, Alternate, Durable, AutoDelete];
    const BINDING: &[Property] = &[Name, QueueName, RoutingKey];
    &[
        // Connection open, once the user is known.
        (Action::Create, ObjectType::Connection, &[Host]),
        // queue.declare of a new queue / of an existing one or passive; queue.query.
        (Action::Create, ObjectType::Queue, QUEUE_DECLARE),
        (Action::Access, ObjectType::Queue, QUEUE_DECLARE),
        (Action::Access, ObjectType::Queue, &[Name]),
        (
            Action::Delete,
            ObjectType::Queue,
            &[Name, Durable, AutoDelete, Exclusive, Alternate, PolicyType],
        ),
        (Action::Purge, ObjectType::Queue, &[Name]),
        // message.subscribe, basic.consume, basic.get.
        (Action::Consume, ObjectType::Queue, &[Name]),
        // exchange.declare of a new exchange / of an existing one or passive; exchange.query;
        // exchange.bound.
        (Action::Create, ObjectType::Exchange, EXCHANGE_DECLARE),
        (Action::Access, ObjectType::Exchange, EXCHANGE_DECLARE),
        (Action::Access, ObjectType::Exchange, &[Name]),
        (Action::Access, ObjectType::Exchange, BINDING),
        (
            Action::Delete,
            ObjectType::Exchange,
            &[Name, Type, Alternate, Durable],
        ),
        (Action::Bind, ObjectType::Exchange, BINDING),
        (Action::Unbind, ObjectType::Exchange, BINDING),
        // Every message published.
        (Action::Publish, ObjectType::Exchange, &[Name, RoutingKey]),
        // Management's user writes (the user's name).
        (Action::Update, ObjectType::Broker, &[Name]),
    ]
};

/// The name lookups use for the nameless default exchange, so rules can name it.
pub const DEFAULT_EXCHANGE_NAME: &str = "amq.default";
