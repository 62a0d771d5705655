//! Management (`--mgmt-enable yes`): the HTTP API and metrics of `ferry-mgmt`, bound before
//! ferryd prints its ports and served on the broker's runtime until shutdown.

use std::time::Duration;

use ferry_mgmt::{Management, MgmtConfig};
use ferry_server::{Server, Shutdown};

use crate::options::Options;

/// Binds the management listener if it is enabled.
pub async fn bind(options: &Options, server: &Server) -> Result<Option<Management>, String> {
    if !options.mgmt_enable.on() {
        return match options.prometheus_port {
            Some(_) => Err("--prometheus-port needs --mgmt-enable yes".into()),
            None => Ok(None),
        };
    }
    let config = MgmtConfig {
        interface: options.mgmt_interface,
        port: options.mgmt_port,
        sample_interval: Duration::from_millis(options.mgmt_sample_interval),
        prometheus_port: options.prometheus_port,
    };
    let admin = server.admin().map_err(|e| format!("management: {e}"))?;
    Management::bind(&config, admin)
        .await
        .map(Some)
        .map_err(|e| {
            format!(
                "cannot listen for management on {}:{}: {e}",
                config.interface, config.port
            )
        })
}

/// Serves management until the broker stops.
pub fn spawn(management: Management, shutdown: Shutdown) {
    tracing::info!("management listening on http://{}", management.local_addr());
    if let Some(addr) = management.prometheus_addr() {
        tracing::info!("Prometheus metrics on http://{addr}/metrics");
    }
    tokio::spawn(management.run(move || {
        let mut shutdown = shutdown.clone();
        async move { shutdown.wait().await }
    }));
}
