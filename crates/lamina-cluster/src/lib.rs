//! Replicated lamina: an [openraft] group whose log store and state machine
//! are lamina databases.
//!
//! A node keeps two lamina databases under its data directory:
//!
//! * `raft-log/`: the Raft log (`l` + big-endian index → JSON entry), the
//!   vote and the last purged log id. Opened with
//!   [`lamina::SyncMode::Always`], so every append and vote is fsynced by
//!   the engine's WAL before openraft is told it is durable.
//! * `sm/gen-N/`: the state machine. User data lives under the `d` prefix;
//!   the last applied log id and the last membership under `m`, written in
//!   the same [`lamina::WriteBatch`] as the entries they describe, so a
//!   crash never separates data from "applied up to". `sm/CURRENT` names
//!   the live generation; installing a snapshot writes a new generation
//!   and switches `CURRENT` atomically.
//!
//! Snapshots are [`lamina::Db::checkpoint`]s of the state machine packed
//! into one archive (see [`snapshot`]) that openraft sends in chunks.
//!
//! With `[[shard]]` tables in the cluster file ([`config`]), the key space
//! is cut into ranges, each its own Raft group on a subset of the members;
//! a member keeps the two databases of each shard it is in under
//! `shard-S/` (without them, directly in its directory, as before
//! sharding existed).
//!
//! [`node::ClusterNode`] runs one member: its groups ([`group`]: proposing
//! writes, local reads, the leader line), the Raft RPC listener shared by
//! them ([`network`], over the length-prefixed frames of [`frame`]; each
//! frame names its shard), the client listener speaking the CS265 DSL
//! ([`client`], with the DSL's key codec `lamina_server::dsl_key`), which
//! routes each key to its shard and runs membership changes.
//! `docs/cluster.md` says what is guaranteed and what is not yet done.

pub mod auth;
pub mod client;
pub mod config;
mod error;
pub mod faults;
pub mod frame;
#[doc(hidden)]
pub mod fuzzing;
pub mod group;
pub mod linearizability;
pub mod network;
pub mod node;
pub mod proxy;
pub mod snapshot;
pub mod store;
pub mod types;

pub use error::{ClusterError, Result};

pub use auth::Secret;
pub use config::{ClientPolicy, ClusterConfig, NodeConfig, RaftTiming};
pub use network::PortLimits;
pub use node::{run_until, ClusterNode, NodeOptions};
pub use types::{LaminaNode, NodeId, Op, Request, Response, TypeConfig};
