//! Deterministic workload generators for lamina.
//!
//! [`cs265`] is the CS265 generator: a [`WorkloadSpec`] says how many
//! operations of each kind to produce; a [`Generator`] turns it into a
//! stream of [`Op`]s, and [`write_dsl`] writes that stream as CS265 DSL
//! text (`p K V`, `g K`, `r LO HI`, `d K`, `l "PATH"`), writing the binary
//! files that `l` lines reference (its module docs give the semantics).
//!
//! The key-value generators on integer key ids live in [`ycsb`] (YCSB core
//! workloads A–F and load) and [`kv`] (seed 001's knobs), over the
//! distributions of [`dist`].

use std::io;

pub mod cs265;
pub mod dist;
pub mod kv;
pub mod ycsb;

pub use cs265::{write_dsl, write_load_file, Generator, Op, RangeDist, Summary, WorkloadSpec};
pub use kv::{KvGenerator, KvOp, KvSpec, Phases};
pub use ycsb::{YcsbGenerator, YcsbSpec, YcsbWorkload};

/// Errors of the generators.
#[derive(Debug, thiserror::Error)]
pub enum WorkloadError {
    /// The spec is inconsistent (a ratio out of `[0, 1]`, an empty key space, …).
    #[error("invalid workload spec: {0}")]
    InvalidSpec(String),
    /// Writing the DSL or a load file failed.
    #[error("I/O error: {0}")]
    Io(#[from] io::Error),
}

/// Result alias of this crate.
pub type Result<T, E = WorkloadError> = std::result::Result<T, E>;
