//! `--mgmt-enable yes`: the QMF agent (`ferry-qmf`), so qpid-config and qpid-stat work.

use std::sync::Arc;

use ferry_core::Broker;
use ferry_qmf::{AgentConfig, AgentHandle};
use tracing::{error, info};

use crate::options::{self, Options};

/// Starts the agent; on failure (an exchange named `qmf.default.*` exists with another type)
/// the broker runs on without it.
pub fn start(broker: &Arc<Broker>, options: &Options, port: u16) -> Option<AgentHandle> {
    let workers = options
        .worker_threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let config = AgentConfig {
        port,
        worker_threads: u16::try_from(workers).unwrap_or(u16::MAX),
        max_connections: u32::try_from(options.max_connections).unwrap_or(u32::MAX),
        // tokio's listeners ask for a backlog of 1024.
        listen_backlog: 1024,
        data_dir: options.data_dir().map(|d| d.display().to_string()),
        version: env!("CARGO_PKG_VERSION").to_owned(),
        log_level: options::log_filter(&options.log_enable),
    };
    match ferry_qmf::start(broker.clone(), config) {
        Ok(agent) => {
            info!(agent = %agent.identity().agent_name, "QMF management agent started");
            Some(agent)
        }
        Err(e) => {
            error!("{e}; running without QMF management");
            None
        }
    }
}
