//! The messaging layer's types (part 3 of the spec): delivery states and
//! outcomes, sources and targets, lifetime policies, and the header and
//! properties sections of a message. The message as a whole is in
//! [`crate::message`].

use bytes::{Bytes, BytesMut};

use crate::decode::{unexpected, Decoder};
use crate::definitions::{restricted_number, Fields};
use crate::error::DecodeError;
use crate::field::{Composite, Field};
use crate::format as f;
use crate::primitive::{Str, Symbol, Timestamp, Uuid};
use crate::transaction::{Declared, TransactionalState};
use crate::value::{Descriptor, Map, Value};

/// `filter-set`: filters by name; values are described filter types (which
/// the spec leaves to extensions) or null.
pub type FilterSet = Map<Symbol, Value>;

/// Delivery and message annotations and the footer: symbol keys (`x-opt-`
/// ones for annotations defined outside the spec) or ulong keys.
pub type Annotations = Map<AnnotationKey, Value>;

/// `application-properties`: string keys, simple values.
pub type ApplicationProperties = Map<Str, Value>;

/// A key of an [`Annotations`] map.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum AnnotationKey {
    Symbol(Symbol),
    Ulong(u64),
}

impl From<Symbol> for AnnotationKey {
    fn from(s: Symbol) -> Self {
        AnnotationKey::Symbol(s)
    }
}

impl From<&str> for AnnotationKey {
    fn from(s: &str) -> Self {
        AnnotationKey::Symbol(Symbol::from(s))
    }
}

impl PartialEq<str> for AnnotationKey {
    fn eq(&self, other: &str) -> bool {
        matches!(self, AnnotationKey::Symbol(s) if s == other)
    }
}

impl Field for AnnotationKey {
    fn read(code: u8, d: &mut Decoder) -> Result<Self, DecodeError> {
        match code {
            f::SYM8 | f::SYM32 => d.symbol(code).map(AnnotationKey::Symbol),
            f::ULONG | f::SMALLULONG | f::ULONG0 => d.ulong(code).map(AnnotationKey::Ulong),
            _ => Err(unexpected("symbol or ulong annotation key", code)),
        }
    }
    fn write(&self, out: &mut BytesMut) {
        match self {
            AnnotationKey::Symbol(s) => s.write(out),
            AnnotationKey::Ulong(n) => n.write(out),
        }
    }
}

/// `message-id` (and `correlation-id`): one of four types.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum MessageId {
    Ulong(u64),
    Uuid(Uuid),
    Binary(Bytes),
    String(Str),
}

impl Field for MessageId {
    fn read(code: u8, d: &mut Decoder) -> Result<Self, DecodeError> {
        match code {
            f::ULONG | f::SMALLULONG | f::ULONG0 => d.ulong(code).map(MessageId::Ulong),
            f::UUID => d.uuid(code).map(MessageId::Uuid),
            f::VBIN8 | f::VBIN32 => d.binary(code).map(MessageId::Binary),
            f::STR8 | f::STR32 => d.string(code).map(MessageId::String),
            _ => Err(unexpected("message-id", code)),
        }
    }
    fn write(&self, out: &mut BytesMut) {
        match self {
            MessageId::Ulong(n) => n.write(out),
            MessageId::Uuid(u) => u.write(out),
            MessageId::Binary(b) => b.write(out),
            MessageId::String(s) => s.write(out),
        }
    }
}

restricted_number! {
    /// `terminus-durability` (uint): what of a terminus survives a restart.
    TerminusDurability: u32, "terminus-durability", default None {
        None = 0,
        /// The terminus's configuration.
        Configuration = 1,
        /// Its configuration and unsettled state.
        UnsettledState = 2,
    }
}

/// `terminus-expiry-policy` (symbol): when the expiry timer of a terminus
/// starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum TerminusExpiryPolicy {
    LinkDetach,
    #[default]
    SessionEnd,
    ConnectionClose,
    Never,
}

impl TerminusExpiryPolicy {
    pub fn symbol(self) -> Symbol {
        Symbol::from_static(match self {
            TerminusExpiryPolicy::LinkDetach => "link-detach",
            TerminusExpiryPolicy::SessionEnd => "session-end",
            TerminusExpiryPolicy::ConnectionClose => "connection-close",
            TerminusExpiryPolicy::Never => "never",
        })
    }
}

impl Field for TerminusExpiryPolicy {
    fn read(code: u8, d: &mut Decoder) -> Result<Self, DecodeError> {
        let s = d.symbol(code)?;
        Ok(match s.as_str() {
            "link-detach" => TerminusExpiryPolicy::LinkDetach,
            "session-end" => TerminusExpiryPolicy::SessionEnd,
            "connection-close" => TerminusExpiryPolicy::ConnectionClose,
            "never" => TerminusExpiryPolicy::Never,
            _ => {
                return Err(DecodeError::InvalidSymbol {
                    what: "terminus-expiry-policy",
                    value: s,
                })
            }
        })
    }
    fn write(&self, out: &mut BytesMut) {
        self.symbol().write(out)
    }
}

/// `std-dist-mode` values of a source's `distribution-mode`.
pub mod distribution_mode {
    use crate::primitive::Symbol;
    /// Each message goes to one receiver and leaves the node (a queue).
    pub const MOVE: Symbol = Symbol::from_static("move");
    /// Receivers get copies; messages stay (a browser, a topic).
    pub const COPY: Symbol = Symbol::from_static("copy");
}

/// The key under which `dynamic-node-properties` carry a [`LifetimePolicy`].
pub const LIFETIME_POLICY: Symbol = Symbol::from_static("lifetime-policy");

composites! {
    /// Delivery state: the receiver has seen this much of the message (for
    /// resuming a partly sent delivery).
    Received 0x23 "amqp:received:list" {
        section_number: req u32,
        section_offset: req u64,
    }

    /// Outcome: the message was processed.
    Accepted 0x24 "amqp:accepted:list" {}

    /// Outcome: the message is invalid and will not be processed.
    Rejected 0x25 "amqp:rejected:list" {
        error: opt crate::definitions::Error,
    }

    /// Outcome: the message was not processed and may be redelivered.
    Released 0x26 "amqp:released:list" {}

    /// Outcome: released, with changes to its annotations.
    Modified 0x27 "amqp:modified:list" {
        delivery_failed: opt bool,
        undeliverable_here: opt bool,
        message_annotations: opt Fields,
    }

    /// Where a receiving link takes messages from.
    Source 0x28 "amqp:source:list" {
        address: opt Str,
        durable: def TerminusDurability = TerminusDurability::None,
        expiry_policy: def TerminusExpiryPolicy = TerminusExpiryPolicy::SessionEnd,
        timeout: def u32 = 0,
        dynamic: def bool = false,
        dynamic_node_properties: opt Fields,
        distribution_mode: opt Symbol,
        filter: opt FilterSet,
        default_outcome: opt Outcome,
        outcomes: multi Symbol,
        capabilities: multi Symbol,
    }

    /// Where a sending link delivers messages to.
    Target 0x29 "amqp:target:list" {
        address: opt Str,
        durable: def TerminusDurability = TerminusDurability::None,
        expiry_policy: def TerminusExpiryPolicy = TerminusExpiryPolicy::SessionEnd,
        timeout: def u32 = 0,
        dynamic: def bool = false,
        dynamic_node_properties: opt Fields,
        capabilities: multi Symbol,
    }

    /// Lifetime policy: delete the dynamic node when its creating link closes.
    DeleteOnClose 0x2b "amqp:delete-on-close:list" {}
    /// Lifetime policy: delete it when it has no links.
    DeleteOnNoLinks 0x2c "amqp:delete-on-no-links:list" {}
    /// Lifetime policy: delete it when it holds no messages.
    DeleteOnNoMessages 0x2d "amqp:delete-on-no-messages:list" {}
    /// Lifetime policy: delete it when it has neither links nor messages.
    DeleteOnNoLinksOrMessages 0x2e "amqp:delete-on-no-links-or-messages:list" {}

    /// The header section: transport headers for the message.
    Header 0x70 "amqp:header:list" {
        durable: def bool = false,
        priority: def u8 = 4,
        ttl: opt u32,
        first_acquirer: def bool = false,
        delivery_count: def u32 = 0,
    }

    /// The properties section: the bare message's immutable properties.
    Properties 0x73 "amqp:properties:list" {
        message_id: opt MessageId,
        user_id: opt Bytes,
        to: opt Str,
        subject: opt Str,
        reply_to: opt Str,
        correlation_id: opt MessageId,
        content_type: opt Symbol,
        content_encoding: opt Symbol,
        absolute_expiry_time: opt Timestamp,
        creation_time: opt Timestamp,
        group_id: opt Str,
        group_sequence: opt u32,
        reply_to_group_id: opt Str,
    }
}

described_union! {
    /// `*delivery-state`: what a disposition or transfer says of a delivery.
    DeliveryState "delivery-state" {
        Received(Received),
        Accepted(Accepted),
        Rejected(Rejected),
        Released(Released),
        Modified(Modified),
        Declared(Declared),
        Transactional(TransactionalState),
    }
}

described_union! {
    /// `*outcome`: a terminal delivery state (a source's default outcome, the
    /// outcome inside a transactional state).
    Outcome "outcome" {
        Accepted(Accepted),
        Rejected(Rejected),
        Released(Released),
        Modified(Modified),
        Declared(Declared),
    }
}

impl DeliveryState {
    /// Is this a terminal state (an outcome) rather than `received` or a
    /// transactional state?
    pub fn is_outcome(&self) -> bool {
        !matches!(
            self,
            DeliveryState::Received(_) | DeliveryState::Transactional(_)
        )
    }
}

/// When a dynamically created node is deleted: the value of
/// [`LIFETIME_POLICY`] in a terminus's `dynamic-node-properties`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LifetimePolicy {
    DeleteOnClose,
    DeleteOnNoLinks,
    DeleteOnNoMessages,
    DeleteOnNoLinksOrMessages,
}

impl LifetimePolicy {
    pub fn code(self) -> u64 {
        match self {
            LifetimePolicy::DeleteOnClose => DeleteOnClose::CODE,
            LifetimePolicy::DeleteOnNoLinks => DeleteOnNoLinks::CODE,
            LifetimePolicy::DeleteOnNoMessages => DeleteOnNoMessages::CODE,
            LifetimePolicy::DeleteOnNoLinksOrMessages => DeleteOnNoLinksOrMessages::CODE,
        }
    }

    /// The policy a node-properties value stands for, if it is one (by
    /// numeric or symbolic descriptor; the list's contents are ignored, the
    /// types have no fields).
    pub fn from_value(v: &Value) -> Option<Self> {
        let Value::Described(d) = v else {
            return None;
        };
        Some(match d.descriptor.code()? {
            DeleteOnClose::CODE => LifetimePolicy::DeleteOnClose,
            DeleteOnNoLinks::CODE => LifetimePolicy::DeleteOnNoLinks,
            DeleteOnNoMessages::CODE => LifetimePolicy::DeleteOnNoMessages,
            DeleteOnNoLinksOrMessages::CODE => LifetimePolicy::DeleteOnNoLinksOrMessages,
            _ => return None,
        })
    }

    pub fn to_value(self) -> Value {
        Value::described(Descriptor::Code(self.code()), Value::List(Vec::new()))
    }
}

impl Source {
    /// The lifetime policy of a dynamic node, from its properties.
    pub fn lifetime_policy(&self) -> Option<LifetimePolicy> {
        lifetime_policy(self.dynamic_node_properties.as_ref())
    }
}

impl Target {
    pub fn lifetime_policy(&self) -> Option<LifetimePolicy> {
        lifetime_policy(self.dynamic_node_properties.as_ref())
    }
}

fn lifetime_policy(props: Option<&Fields>) -> Option<LifetimePolicy> {
    LifetimePolicy::from_value(props?.get("lifetime-policy")?)
}

#[cfg(test)]
mod samples {
    use super::*;
    use crate::testutil::{Gen, Sample};

    impl Sample for AnnotationKey {
        fn sample(g: &mut Gen) -> Self {
            if bool::sample(g) {
                AnnotationKey::Symbol(Sample::sample(g))
            } else {
                AnnotationKey::Ulong(Sample::sample(g))
            }
        }
    }

    impl Sample for MessageId {
        fn sample(g: &mut Gen) -> Self {
            match g.below(4) {
                0 => MessageId::Ulong(Sample::sample(g)),
                1 => MessageId::Uuid(Sample::sample(g)),
                2 => MessageId::Binary(Sample::sample(g)),
                _ => MessageId::String(Sample::sample(g)),
            }
        }
    }

    impl Sample for TerminusExpiryPolicy {
        fn sample(g: &mut Gen) -> Self {
            [
                TerminusExpiryPolicy::LinkDetach,
                TerminusExpiryPolicy::SessionEnd,
                TerminusExpiryPolicy::ConnectionClose,
                TerminusExpiryPolicy::Never,
            ][g.below(4) as usize]
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{Gen, Sample};

    fn round_trip<T: Field + PartialEq + std::fmt::Debug>(v: &T) -> Bytes {
        let mut out = BytesMut::new();
        v.write(&mut out);
        let bytes = out.freeze();
        let mut d = Decoder::new(bytes.clone());
        let code = d.u8().unwrap();
        assert_eq!(&T::read(code, &mut d).unwrap(), v);
        assert!(d.is_empty());
        bytes
    }

    #[test]
    fn accepted_is_five_octets() {
        let bytes = round_trip(&DeliveryState::Accepted(Accepted {}));
        assert_eq!(&bytes[..], &[0x00, 0x53, 0x24, 0x45]);
    }

    #[test]
    fn states_and_outcomes_round_trip() {
        for seed in 0..64 {
            let mut g = Gen::new(seed);
            round_trip(&DeliveryState::sample(&mut g));
            round_trip(&Outcome::sample(&mut g));
            round_trip(&Source::sample(&mut g));
            round_trip(&Target::sample(&mut g));
            round_trip(&Header::sample(&mut g));
            round_trip(&Properties::sample(&mut g));
        }
    }

    #[test]
    fn symbolic_descriptors_are_understood() {
        // 0x00, sym8 "amqp:released:list", list0
        let mut wire = vec![0x00, 0xa3, 18];
        wire.extend_from_slice(b"amqp:released:list");
        wire.push(0x45);
        let mut buf = Bytes::from(wire);
        assert_eq!(
            DeliveryState::decode(&mut buf),
            Ok(DeliveryState::Released(Released {}))
        );
    }

    #[test]
    fn unknown_outcomes_are_kept() {
        // A described type from an extension's domain (0x0000_1234:...).
        let ext = Value::described(0x0000_1234_0000_0001u64, Value::List(vec![Value::Uint(7)]));
        let mut out = BytesMut::new();
        ext.encode(&mut out);
        let mut buf = out.clone().freeze();
        let state = DeliveryState::decode(&mut buf).unwrap();
        let DeliveryState::Other(d) = &state else {
            panic!("{state:?}")
        };
        assert_eq!(d.descriptor, Descriptor::Code(0x0000_1234_0000_0001));
        let mut again = BytesMut::new();
        state.encode(&mut again);
        assert_eq!(again, out);
    }

    #[test]
    fn defaults_are_omitted_and_restored() {
        let h = Header::default();
        assert_eq!(h.priority, 4);
        // All defaults: an empty list.
        assert_eq!(&round_trip(&h)[..], &[0x00, 0x53, 0x70, 0x45]);
        let h = Header {
            durable: true,
            ..Header::default()
        };
        assert_eq!(&round_trip(&h)[..], &[0x00, 0x53, 0x70, 0xc0, 2, 1, 0x41]);
        // A peer writing the default explicitly means the same thing.
        let mut buf = Bytes::from_static(&[0x00, 0x53, 0x70, 0xc0, 4, 2, 0x42, 0x50, 4]);
        assert_eq!(Header::decode(&mut buf), Ok(Header::default()));
    }

    #[test]
    fn lifetime_policies() {
        let mut props = Fields::new();
        props.insert(LIFETIME_POLICY, LifetimePolicy::DeleteOnClose.to_value());
        let target = Target {
            dynamic: true,
            dynamic_node_properties: Some(props),
            ..Target::default()
        };
        let bytes = round_trip(&target);
        let mut buf = bytes.clone();
        let back = Target::decode(&mut buf).unwrap();
        assert_eq!(back.lifetime_policy(), Some(LifetimePolicy::DeleteOnClose));
        for p in [
            LifetimePolicy::DeleteOnClose,
            LifetimePolicy::DeleteOnNoLinks,
            LifetimePolicy::DeleteOnNoMessages,
            LifetimePolicy::DeleteOnNoLinksOrMessages,
        ] {
            assert_eq!(LifetimePolicy::from_value(&p.to_value()), Some(p));
        }
    }

    #[test]
    fn bad_restricted_values() {
        // Source with durable = 3.
        let mut buf = Bytes::from_static(&[0x00, 0x53, 0x28, 0xc0, 4, 2, 0x40, 0x52, 3]);
        assert_eq!(
            Source::decode(&mut buf),
            Err(DecodeError::InvalidValue {
                what: "terminus-durability",
                value: 3
            })
        );
        // Target with expiry-policy "soon".
        let mut wire = vec![0x00, 0x53, 0x29, 0xc0, 9, 3, 0x40, 0x40, 0xa3, 4];
        wire.extend_from_slice(b"soon");
        let mut buf = Bytes::from(wire);
        assert!(matches!(
            Target::decode(&mut buf),
            Err(DecodeError::InvalidSymbol { .. })
        ));
    }
}
