//! The classes the agent serves and how QMF names them and their objects.
//!
//! Object names follow qpidd (`ObjectId::setV2Key` with the schema's index properties,
//! `vhostRef` left out): `<package>:<class>:<key>`, the key being the name for queues and
//! exchanges, `<exchange ref>,<queue ref>,<binding key>` for bindings, and so on. qpid-tools
//! rely on this: they strip a reference back to everything after the second colon and
//! compare it with the referenced object's name.

/// The package of every class qpidd's broker agent serves.
pub const PACKAGE: &str = "org.apache.qpid.broker";

/// The key of the one broker object (and of the memory object).
pub const BROKER_KEY: &str = "amqp-broker";

/// The one virtual host's name.
pub const VHOST_NAME: &str = "/";

/// The classes with objects. Any other class name is a valid query that finds nothing, as
/// for a qpidd without that module (link, bridge, acl, cluster, habroker, agent...).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    Broker,
    System,
    Vhost,
    Memory,
    Queue,
    Exchange,
    Binding,
    Connection,
    Session,
    Subscription,
}

impl Class {
    pub const ALL: [Class; 10] = [
        Class::Broker,
        Class::System,
        Class::Vhost,
        Class::Memory,
        Class::Queue,
        Class::Exchange,
        Class::Binding,
        Class::Connection,
        Class::Session,
        Class::Subscription,
    ];

    /// The class name on the wire (qpidd's generated `className`: lower case).
    pub fn name(self) -> &'static str {
        match self {
            Class::Broker => "broker",
            Class::System => "system",
            Class::Vhost => "vhost",
            Class::Memory => "memory",
            Class::Queue => "queue",
            Class::Exchange => "exchange",
            Class::Binding => "binding",
            Class::Connection => "connection",
            Class::Session => "session",
            Class::Subscription => "subscription",
        }
    }

    pub fn from_name(name: &str) -> Option<Class> {
        Class::ALL.into_iter().find(|c| c.name() == name)
    }

    /// The schema hash. qpidd's is an MD5 of its schema XML, which consoles only use as a
    /// cache key for schemas; these identify ferry's own schemas, which carry different
    /// properties, so they are derived from the class name and differ from qpidd's.
    pub fn hash(self) -> [u8; 16] {
        hash_of(self.name())
    }

    pub fn object_name(self, key: &str) -> String {
        format!("{PACKAGE}:{}:{key}", self.name())
    }
}

/// A schema hash (see [`Class::hash`]) for the class or event `name`.
pub fn hash_of(name: &str) -> [u8; 16] {
    let name = name.as_bytes();
    let mut out = [0u8; 16];
    out[..8].copy_from_slice(&fnv1a(0xcbf2_9ce4_8422_2325, name).to_be_bytes());
    out[8..].copy_from_slice(&fnv1a(0x6c62_272e_07bb_0142, name).to_be_bytes());
    out
}

pub(crate) fn fnv1a(seed: u64, data: &[u8]) -> u64 {
    b"ferry:".iter().chain(data).fold(seed, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// Splits an object name into its class name and key; `None` unless it is in [`PACKAGE`].
/// The key is everything after the class (it may hold colons itself: connection addresses,
/// binding keys that embed object names).
pub fn parse_object_name(name: &str) -> Option<(&str, &str)> {
    let rest = name.strip_prefix(PACKAGE)?.strip_prefix(':')?;
    rest.split_once(':')
}

/// A binding's key: `<exchange object name>,<queue object name>,<binding key>`.
pub fn binding_key(exchange: &str, queue: &str, key: &str) -> String {
    format!(
        "{},{},{key}",
        Class::Exchange.object_name(exchange),
        Class::Queue.object_name(queue)
    )
}

/// A subscription's key: `<session object name>,<queue object name>,<destination>`.
pub fn subscription_key(session: &str, queue: &str, destination: &str) -> String {
    format!(
        "{},{},{destination}",
        Class::Session.object_name(session),
        Class::Queue.object_name(queue)
    )
}

/// The vhost's key: `<broker object name>,/`.
pub fn vhost_object_name() -> String {
    Class::Vhost.object_name(&format!(
        "{},{VHOST_NAME}",
        Class::Broker.object_name(BROKER_KEY)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn object_names_are_qpidds() {
        assert_eq!(
            Class::Queue.object_name("q"),
            "org.apache.qpid.broker:queue:q"
        );
        assert_eq!(
            Class::Broker.object_name(BROKER_KEY),
            "org.apache.qpid.broker:broker:amqp-broker"
        );
        assert_eq!(
            binding_key("amq.direct", "q", "k"),
            "org.apache.qpid.broker:exchange:amq.direct,org.apache.qpid.broker:queue:q,k"
        );
        assert_eq!(
            vhost_object_name(),
            "org.apache.qpid.broker:vhost:org.apache.qpid.broker:broker:amqp-broker,/"
        );
    }

    #[test]
    fn names_parse_back_with_colons_in_keys() {
        assert_eq!(
            parse_object_name("org.apache.qpid.broker:connection:127.0.0.1:5672-1.2.3.4:9"),
            Some(("connection", "127.0.0.1:5672-1.2.3.4:9"))
        );
        assert_eq!(
            parse_object_name("org.apache.qpid.broker:exchange:"),
            Some(("exchange", ""))
        );
        assert_eq!(parse_object_name("org.apache.qpid.acl:acl:x"), None);
        assert_eq!(parse_object_name("org.apache.qpid.broker"), None);
        assert_eq!(parse_object_name("org.apache.qpid.brokerX:queue:q"), None);
    }

    #[test]
    fn class_names_and_hashes_are_distinct() {
        for c in Class::ALL {
            assert_eq!(Class::from_name(c.name()), Some(c));
            for d in Class::ALL {
                assert_eq!(c == d, c.hash() == d.hash());
            }
        }
        assert_eq!(Class::from_name("link"), None);
    }
}
