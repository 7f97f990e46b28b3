//! Errors of a simulation.

/// Errors of a simulation.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// The policy spec does not parse.
    #[error("policy {spec:?}")]
    Spec {
        /// The spec.
        spec: String,
        /// Why.
        #[source]
        source: lamina_compaction::Error,
    },
    /// A task names runs or files the model does not hold, or would break
    /// the tree's invariants.
    #[error("policy {policy}: invalid task at flush {flush} ({reason}): {why}")]
    InvalidTask {
        /// The policy's spec.
        policy: String,
        /// The flush after which it was picked.
        flush: u64,
        /// The task's reason.
        reason: String,
        /// What is wrong.
        why: String,
    },
    /// The policy kept returning tasks.
    #[error("policy {policy}: still merging after {merges} merges at flush {flush}")]
    NotSettling {
        /// The policy's spec.
        policy: String,
        /// The flush.
        flush: u64,
        /// Merges applied in that flush.
        merges: u64,
    },
    /// Bad simulation settings.
    #[error("{0}")]
    Config(String),
    /// The policy cut a merge into spatial tiles (`partition=str` or
    /// `rstar-grove`), which are cut by the points of the keys: the model
    /// has keys but no points, so it refuses rather than guess (as the
    /// engine refuses them without `Options::spatial`).
    #[error(
        "policy {policy}: spatial tiles (partition=str or rstar-grove) are cut by the keys' \
         points, which the model does not have; simulate partition=size, or run the engine \
         on a spatial dataset (`lamina spatial`)"
    )]
    SpatialTiles {
        /// The policy's spec.
        policy: String,
    },
}

/// Result of a simulation step.
pub type Result<T> = std::result::Result<T, SimError>;
