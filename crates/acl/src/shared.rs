//! The ACL in force, replaceable while the broker runs (SIGHUP reloads the file).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::RwLock;

use crate::acl::Acl;
use crate::parse::{parse, ParseError, Warning};

/// Why a file could not be loaded; the rules in force stay as they were.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("cannot read ACL file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("ACL file {path}, {source}")]
    Parse { path: PathBuf, source: ParseError },
}

/// Reads and parses one file.
pub fn load(path: &Path) -> Result<(Acl, Vec<Warning>), LoadError> {
    let text = std::fs::read_to_string(path).map_err(|source| LoadError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    parse(&text).map_err(|source| LoadError::Parse {
        path: path.to_path_buf(),
        source,
    })
}

/// The current rules of one ACL file. Readers take an `Arc` of the rules and can cache
/// decisions made with them until [`SharedAcl::generation`] changes.
#[derive(Debug)]
pub struct SharedAcl {
    path: PathBuf,
    current: RwLock<Arc<Acl>>,
    generation: AtomicU64,
}

impl SharedAcl {
    /// Loads `path`; the warnings are for the caller to log.
    pub fn load(path: impl Into<PathBuf>) -> Result<(SharedAcl, Vec<Warning>), LoadError> {
        let path = path.into();
        let (acl, warnings) = load(&path)?;
        Ok((SharedAcl::with_rules(path, acl), warnings))
    }

    /// Rules given directly (tests, embedding); [`SharedAcl::reload`] still reads `path`.
    pub fn with_rules(path: impl Into<PathBuf>, acl: Acl) -> SharedAcl {
        SharedAcl {
            path: path.into(),
            current: RwLock::new(Arc::new(acl)),
            generation: AtomicU64::new(1),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn current(&self) -> Arc<Acl> {
        self.current.read().clone()
    }

    /// Changes whenever the rules are replaced.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Reads the file again. On any error the old rules stay in force.
    pub fn reload(&self) -> Result<Vec<Warning>, LoadError> {
        let (acl, warnings) = load(&self.path)?;
        self.replace(acl);
        Ok(warnings)
    }

    pub fn replace(&self, acl: Acl) {
        *self.current.write() = Arc::new(acl);
        self.generation.fetch_add(1, Ordering::AcqRel);
    }
}
