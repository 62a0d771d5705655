//! ferryd's server: listeners, connections, and the protocol layers that map AMQP onto
//! `ferry-core`.

mod access;
mod amqp010;
mod amqp091;
mod auth;
mod config;
mod connection;
mod io;
mod listener;
mod tls;

pub use auth::allowed_from;
pub use config::{AuthMode, ServerConfig};
pub use listener::{Server, Shutdown};
pub use tls::{Tls, TlsSettings};
