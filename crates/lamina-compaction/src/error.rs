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
    /// A spec gave a strategy a parameter it does not take.
    /// [`policy_from_spec`](crate::policy_from_spec) turns it into an
    /// [`Error::InvalidArgument`] naming the spellings that take the key.
    #[error("{strategy} has no parameter {key}")]
    UnknownParameter {
        /// The strategy, as its policy names itself.
        strategy: String,
        /// The parameter it does not take.
        key: String,
    },
}

impl Error {
    /// `strategy` takes no parameter `key`.
    pub(crate) fn unknown_parameter(strategy: &str, key: &str) -> Error {
        Error::UnknownParameter {
            strategy: strategy.to_string(),
            key: key.to_string(),
        }
    }
}
