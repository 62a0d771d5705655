//! What every handler shares.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use ferry_core::Broker;
use ferry_server::{Admin, AdminUser};

use crate::login::Caller;
use crate::render::{Ctx, Windows};
use crate::stats::Stats;

pub struct App {
    pub admin: Admin,
    pub stats: Arc<Stats>,
    /// `ferry@host`, RabbitMQ's node name form.
    pub node: String,
    pub started: Instant,
    /// Where the HTTP API listens.
    pub addr: SocketAddr,
    pub open_scrapes: crate::metrics::OpenScrapes,
}

impl App {
    pub fn broker(&self) -> &Arc<Broker> {
        self.admin.broker()
    }

    pub fn ctx(&self, windows: Windows) -> Ctx {
        Ctx {
            node: self.node.clone(),
            listeners: self.admin.listeners(),
            windows,
        }
    }

    /// The caller's rights, for changes.
    pub fn user(&self, caller: &Caller) -> AdminUser {
        self.admin.as_user(&caller.user, caller.peer)
    }
}
