//! What the connections of one running server share and change while it runs, as opposed to
//! its settings (`ServerConfig`): the ACL in force (its rules are swapped on SIGHUP) and the
//! live counts behind the per-user and per-address limits.

use std::sync::Arc;

use ferry_acl::SharedAcl;

use crate::access::ClientCounters;

#[derive(Debug, Default)]
pub struct ServerState {
    /// The ACL in force (`--acl-file`); `None` allows every request.
    pub acl: Option<Arc<SharedAcl>>,
    /// Connections per user and per address, queues per user.
    pub counters: Arc<ClientCounters>,
}

impl ServerState {
    pub fn new(acl: Option<Arc<SharedAcl>>) -> ServerState {
        ServerState {
            acl,
            counters: Arc::default(),
        }
    }
}
