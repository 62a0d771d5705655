//! Access control lists in qpidd's format: the parser, the evaluator and quotas.
//!
//! Pure: besides reading the file when asked to load it, nothing here does I/O, and nothing
//! knows about protocols. The server maps each client request to a lookup (an action on an
//! object with properties, see [`LOOKUPS`]) and asks [`Acl::check`].

mod acl;
mod model;
mod parse;
mod pattern;
mod shared;
#[cfg(test)]
mod tests;

pub use acl::{Acl, Decision, PublishPolicy, QuotaKind};
pub use model::{
    Action, ObjectType, Permission, Property, PropertyKind, Value, DEFAULT_EXCHANGE_NAME, LOOKUPS,
};
pub use parse::{parse, ParseError, Warning};
pub use shared::{load, LoadError, SharedAcl};
