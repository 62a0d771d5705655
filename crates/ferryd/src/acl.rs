//! Loading the `--acl-file` at start and again on SIGHUP.

use std::path::Path;
use std::sync::Arc;

use ferry_acl::{SharedAcl, Warning};
use tracing::{error, info, warn};

fn log_warnings(path: &Path, warnings: &[Warning]) {
    for w in warnings {
        warn!("ACL file {}, {w}", path.display());
    }
}

/// Loads the file; a fault is the one-line message ferryd exits with.
pub fn load(path: &Path) -> Result<Arc<SharedAcl>, String> {
    let (acl, warnings) = SharedAcl::load(path).map_err(|e| e.to_string())?;
    log_warnings(path, &warnings);
    let rules = acl.current().rule_count();
    info!("ACL file {} loaded: {rules} rules", path.display());
    Ok(Arc::new(acl))
}

/// Re-reads the file (on SIGHUP); a file that does not load keeps the old rules.
pub fn reload(acl: &SharedAcl) {
    match acl.reload() {
        Ok(warnings) => {
            log_warnings(acl.path(), &warnings);
            info!(
                "ACL file {} reloaded: {} rules",
                acl.path().display(),
                acl.current().rule_count()
            );
        }
        Err(e) => error!("{e}; the previous rules stay in force"),
    }
}
