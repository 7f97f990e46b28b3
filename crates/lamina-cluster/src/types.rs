//! The openraft type configuration: what a log entry carries and what a
//! member is.

use std::fmt;

use serde::{Deserialize, Serialize};

/// A member's id.
pub type NodeId = u64;

/// A shard's id (0: the one shard of an unsharded cluster).
pub type ShardId = u64;

/// One write in a [`Request`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Op {
    /// Sets `key` to `value`.
    Put {
        /// The key.
        key: Vec<u8>,
        /// The value.
        value: Vec<u8>,
    },
    /// Removes `key`.
    Delete {
        /// The key.
        key: Vec<u8>,
    },
}

/// The application data of a log entry: writes applied atomically, as one
/// [`lamina::WriteBatch`], when the entry is committed.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Request {
    /// The writes, in order.
    pub ops: Vec<Op>,
}

impl fmt::Display for Request {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Request({} ops)", self.ops.len())
    }
}

/// What applying a [`Request`] answers.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Response {
    /// Writes applied.
    pub applied: usize,
}

/// A member's addresses: `raft` for the Raft RPCs, `client` for the
/// CS265 DSL (what a follower names in its redirect).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct LaminaNode {
    /// `HOST:PORT` of the Raft RPC listener.
    pub raft: String,
    /// `HOST:PORT` of the client listener.
    pub client: String,
}

impl fmt::Display for LaminaNode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "raft={} client={}", self.raft, self.client)
    }
}

openraft::declare_raft_types!(
    /// lamina's openraft type configuration.
    pub TypeConfig:
        D = Request,
        R = Response,
        NodeId = NodeId,
        Node = LaminaNode,
        Entry = openraft::Entry<TypeConfig>,
        SnapshotData = crate::snapshot::SnapshotFile,
        AsyncRuntime = openraft::TokioRuntime,
);

/// A log entry.
pub type Entry = openraft::Entry<TypeConfig>;
/// A log id.
pub type LogId = openraft::LogId<NodeId>;
/// The raft handle.
pub type Raft = openraft::Raft<TypeConfig>;
/// A storage error as openraft wants it.
pub type StorageError = openraft::StorageError<NodeId>;
/// Snapshot metadata.
pub type SnapshotMeta = openraft::SnapshotMeta<NodeId, LaminaNode>;
/// A membership with the log id that set it.
pub type StoredMembership = openraft::StoredMembership<NodeId, LaminaNode>;

/// Highest term a vote or log id may carry: no election ever reaches it
/// (a term a second for 146 billion years), and openraft's `term + 1`
/// stays far from overflowing.
pub const MAX_TERM: u64 = 1 << 62;
/// Highest log index an RPC may name, for the same reason (a million
/// entries a second for 146,000 years). Not bounded by the member's own
/// log: a new learner, at index 0, rightly gets a snapshot of a group
/// billions of entries long.
pub const MAX_INDEX: u64 = 1 << 62;
