use std::io;

/// Everything the `ferry` command can fail with.
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    #[error("invalid options: {0}")]
    InvalidOptions(String),
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: io::Error,
    },
    #[error("peer broke the netbench protocol: {0}")]
    Protocol(String),
    #[error("cluster: {0}")]
    Cluster(String),
    #[error("chaos: {0}")]
    Chaos(String),
    #[error("scale: {0}")]
    Scale(String),
    #[error("{0}")]
    Driver(#[from] crate::driver::DriverError),
    #[error("{0}")]
    Ctl(#[from] crate::ctl::client::CtlError),
    #[error("a worker thread panicked: {0}")]
    WorkerPanicked(&'static str),
}

impl ToolError {
    pub fn io(context: impl Into<String>, source: io::Error) -> Self {
        ToolError::Io {
            context: context.into(),
            source,
        }
    }
}

/// Adds context to std::io results so the user sees which step failed.
pub trait IoContext<T> {
    fn ctx(self, context: &str) -> Result<T, ToolError>;
}

impl<T> IoContext<T> for io::Result<T> {
    fn ctx(self, context: &str) -> Result<T, ToolError> {
        self.map_err(|e| ToolError::io(context, e))
    }
}
