//! ferryd's server: listeners, connections, and the protocol layers that map AMQP onto
//! `ferry-core`.
//!
//! Layers, lowest first: `transport` (TCP, `tls`) and the shared pieces (`lifecycle`,
//! `state`, `access`, `auth`, `bridge`, `publish`, `encoded`, `fast_map`, `text`); `shell` (the protocol-neutral connection and
//! its event loop); the protocol layers `amqp010`, `amqp091` and `amqp1`; `connection` (the
//! protocol header picks a layer) and `listener` on top, beside `admin` (what management may
//! do, checked as the protocol layers check clients).

mod access;
mod admin;
mod amqp010;
mod amqp091;
mod amqp1;
mod auth;
mod bridge;
mod config;
mod connection;
mod encoded;
mod fast_map;
mod gate;
mod lifecycle;
mod listener;
mod publish;
mod selector;
mod shell;
mod state;
mod text;
mod tls;
mod transport;

pub use admin::{
    record_of, Admin, AdminError, AdminUser, GetMode, GotMessage, Listeners, UserChange, UserInfo,
};
pub use auth::{allowed_from, PASSWORD_CACHE_TTL};
pub use config::{AuthMode, ServerConfig};
pub use gate::{Gate, GateHandle, GateRoute};
pub use lifecycle::Shutdown;
pub use listener::Server;
pub use selector::binding_filters;
pub use tls::{Tls, TlsSettings};
