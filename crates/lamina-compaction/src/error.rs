//! The errors of policy specs and compaction tasks.

/// Result alias of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Errors of this crate: a spec, a parameter or a task the policies or the
/// planner refuse.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An argument the policies cannot honour (an unknown strategy, a bad
    /// parameter, an unreadable TOML composition).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
}
