use std::io;

/// Errors of the cluster layer.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// The storage engine failed.
    #[error("lamina: {0}")]
    Engine(#[from] lamina::Error),
    /// A file or socket operation failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// The cluster file is malformed.
    #[error("cluster config: {0}")]
    Config(String),
    /// A stored record or a snapshot archive is malformed.
    #[error("corrupt {what}: {why}")]
    Corrupt {
        /// Which record.
        what: &'static str,
        /// Why it was refused.
        why: String,
    },
    /// openraft refused or failed.
    #[error("raft: {0}")]
    Raft(String),
    /// The fault test's harness failed (not the cluster under test).
    #[error("fault test: {0}")]
    Harness(String),
    /// A shutdown did not release the databases in time.
    #[error("shutdown: {0}")]
    Shutdown(String),
}

impl ClusterError {
    pub(crate) fn io(what: impl Into<String>, source: io::Error) -> Self {
        ClusterError::Io {
            what: what.into(),
            source,
        }
    }
}

/// Results of the cluster layer.
pub type Result<T> = std::result::Result<T, ClusterError>;
