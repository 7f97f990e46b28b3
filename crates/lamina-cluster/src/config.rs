//! The cluster file (TOML): the members and the Raft timing.
//!
//! ```toml
//! [[node]]
//! id = 1
//! raft = "127.0.0.1:7001"    # Raft RPCs between members
//! client = "127.0.0.1:7101"  # the CS265 DSL for clients
//! # raft_listen = "127.0.0.1:7201"  # optional: listen here, advertise `raft`
//!
//! [[node]]
//! id = 2
//! raft = "127.0.0.1:7002"
//! client = "127.0.0.1:7102"
//!
//! [[node]]
//! id = 3
//! raft = "127.0.0.1:7003"
//! client = "127.0.0.1:7103"
//!
//! [client]                   # optional
//! forward_writes = false     # true: followers forward writes to the leader
//!
//! [raft]                     # optional; these are the defaults
//! heartbeat_ms = 100
//! election_min_ms = 400
//! election_max_ms = 800
//! snapshot_logs = 5000       # build a snapshot every this many entries
//! keep_logs = 1000           # entries kept behind the last snapshot
//! snapshot_chunk_bytes = 1048576  # bytes per InstallSnapshot RPC
//! ```

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{ClusterError, Result};
use crate::types::{LaminaNode, NodeId};

/// One member as the cluster file names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeConfig {
    /// The member's id (unique, non-zero).
    pub id: NodeId,
    /// `HOST:PORT` of its Raft RPC listener.
    pub raft: String,
    /// `HOST:PORT` of its client listener.
    pub client: String,
    /// `HOST:PORT` to listen on for Raft RPCs when it differs from the
    /// advertised `raft` (behind a proxy or a NAT; the fault test's proxy
    /// sits there). Absent: `raft`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raft_listen: Option<String>,
}

impl NodeConfig {
    /// Where the member listens for Raft RPCs.
    pub fn raft_listen_addr(&self) -> &str {
        self.raft_listen.as_deref().unwrap_or(&self.raft)
    }
}

/// Raft timing and snapshot policy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RaftTiming {
    /// Leader heartbeat period.
    pub heartbeat_ms: u64,
    /// Shortest election timeout.
    pub election_min_ms: u64,
    /// Longest election timeout.
    pub election_max_ms: u64,
    /// A snapshot is built after this many entries since the last one.
    pub snapshot_logs: u64,
    /// Entries kept in the log behind the last snapshot.
    pub keep_logs: u64,
    /// Bytes of a snapshot sent per `InstallSnapshot` RPC (each side holds
    /// one chunk and its JSON frame, up to 4 bytes per byte, in memory).
    pub snapshot_chunk_bytes: u64,
}

impl Default for RaftTiming {
    fn default() -> Self {
        RaftTiming {
            heartbeat_ms: 100,
            election_min_ms: 400,
            election_max_ms: 800,
            snapshot_logs: 5000,
            keep_logs: 1000,
            snapshot_chunk_bytes: 1 << 20,
        }
    }
}

/// The cluster file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterConfig {
    /// The members.
    pub node: Vec<NodeConfig>,
    /// Timing; defaults when absent.
    #[serde(default)]
    pub raft: RaftTiming,
    /// How members answer clients; defaults when absent.
    #[serde(default)]
    pub client: ClientPolicy,
}

/// How members answer clients.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ClientPolicy {
    /// A member that is not the leader sends writes on to the leader (over
    /// the Raft port) and answers with the leader's reply, instead of
    /// answering `ERROR not leader; leader is HOST:PORT`. Off by default:
    /// a client that follows redirects talks to the leader directly and
    /// saves a hop on every write.
    pub forward_writes: bool,
}

impl ClusterConfig {
    /// Parses and checks a cluster file's text.
    pub fn parse(text: &str) -> Result<ClusterConfig> {
        let c: ClusterConfig =
            toml::from_str(text).map_err(|e| ClusterError::Config(e.to_string()))?;
        c.check()?;
        Ok(c)
    }

    /// Reads a cluster file.
    pub fn load(path: &Path) -> Result<ClusterConfig> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ClusterError::io(format!("read {}", path.display()), e))?;
        Self::parse(&text)
    }

    /// Checks ids are non-zero and unique and timing is sane.
    pub fn check(&self) -> Result<()> {
        if self.node.is_empty() {
            return Err(ClusterError::Config("no [[node]]".into()));
        }
        let mut seen = BTreeMap::new();
        for n in &self.node {
            if n.id == 0 {
                return Err(ClusterError::Config("node id 0 is reserved".into()));
            }
            if seen.insert(n.id, ()).is_some() {
                return Err(ClusterError::Config(format!("node id {} twice", n.id)));
            }
        }
        let t = &self.raft;
        // A chunk's JSON frame (up to 4 bytes per byte) must fit a frame.
        if t.snapshot_chunk_bytes == 0
            || t.snapshot_chunk_bytes > (crate::network::MAX_FRAME as u64 - 4096) / 4
        {
            return Err(ClusterError::Config(format!(
                "snapshot_chunk_bytes must be in 1..={}",
                (crate::network::MAX_FRAME as u64 - 4096) / 4
            )));
        }
        if t.heartbeat_ms == 0
            || t.election_min_ms <= t.heartbeat_ms
            || t.election_max_ms <= t.election_min_ms
        {
            return Err(ClusterError::Config(
                "need 0 < heartbeat_ms < election_min_ms < election_max_ms".into(),
            ));
        }
        Ok(())
    }

    /// The member `id`.
    pub fn member(&self, id: NodeId) -> Option<&NodeConfig> {
        self.node.iter().find(|n| n.id == id)
    }

    /// Every member as openraft's membership wants it.
    pub fn members(&self) -> BTreeMap<NodeId, LaminaNode> {
        self.node
            .iter()
            .map(|n| {
                (
                    n.id,
                    LaminaNode {
                        raft: n.raft.clone(),
                        client: n.client.clone(),
                    },
                )
            })
            .collect()
    }

    /// The openraft configuration for this timing.
    pub fn raft_config(&self) -> Result<openraft::Config> {
        let t = &self.raft;
        let c = openraft::Config {
            cluster_name: "lamina".into(),
            heartbeat_interval: t.heartbeat_ms,
            election_timeout_min: t.election_min_ms,
            election_timeout_max: t.election_max_ms,
            snapshot_policy: openraft::SnapshotPolicy::LogsSinceLast(t.snapshot_logs),
            max_in_snapshot_log_to_keep: t.keep_logs,
            snapshot_max_chunk_size: t.snapshot_chunk_bytes,
            install_snapshot_timeout: 2000,
            ..Default::default()
        };
        c.validate()
            .map_err(|e| ClusterError::Config(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_checks() {
        let c = ClusterConfig::parse(
            "[[node]]\nid = 1\nraft = \"127.0.0.1:1\"\nclient = \"127.0.0.1:2\"\n[raft]\nsnapshot_logs = 10\n",
        )
        .unwrap();
        assert_eq!(c.node.len(), 1);
        assert_eq!(c.raft.snapshot_logs, 10);
        assert_eq!(c.raft.heartbeat_ms, 100);
        c.raft_config().unwrap();
        assert!(ClusterConfig::parse("").is_err());
        let chunk = |n: u64| {
            ClusterConfig::parse(&format!(
                "[[node]]\nid = 1\nraft = \"a\"\nclient = \"b\"\n[raft]\nsnapshot_chunk_bytes = {n}\n"
            ))
        };
        assert!(chunk(0).is_err());
        assert!(chunk(1 << 30).is_err());
        assert_eq!(chunk(4096).unwrap().raft.snapshot_chunk_bytes, 4096);
        assert!(ClusterConfig::parse(
            "[[node]]\nid = 1\nraft = \"a\"\nclient = \"b\"\n[[node]]\nid = 1\nraft = \"c\"\nclient = \"d\"\n"
        )
        .is_err());
        assert!(
            ClusterConfig::parse("[[node]]\nid = 1\nraft = \"a\"\nclient = \"b\"\nport = 3\n")
                .is_err()
        );
    }
}
