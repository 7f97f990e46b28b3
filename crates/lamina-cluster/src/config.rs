//! The cluster file (TOML): the members and the Raft timing.
//!
//! ```toml
//! secret_file = "cluster.secret"  # optional: authenticates members (see crate::auth)
//!
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
//!
//! # Optional: range sharding. Without [[shard]], one Raft group of every
//! # node holds the whole key space (and its data lives directly in the
//! # member's directory, as it always has).
//! [[shard]]
//! id = 1                     # non-zero, unique; data in DIR/shard-1/
//! hi = 0                     # keys [-2147483648, 0): no `lo` = from the first key
//! members = [1, 2, 3]
//!
//! [[shard]]
//! id = 2
//! lo = 0                     # keys [0, 2147483647]: no `hi` = to the last key
//! members = [2, 3]
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::auth::Secret;
use crate::error::{ClusterError, Result};
use crate::types::{LaminaNode, NodeId, ShardId};

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
    /// The member's addresses as its Raft membership records them.
    pub fn to_node(&self) -> LaminaNode {
        LaminaNode {
            raft: self.raft.clone(),
            client: self.client.clone(),
        }
    }

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

/// One shard of a sharded cluster: a key range and the nodes of the Raft
/// group that holds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShardConfig {
    /// The shard's id (unique, non-zero; 0 is the implicit shard of an
    /// unsharded cluster).
    pub id: ShardId,
    /// First key of the shard; absent: the first key there is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lo: Option<i32>,
    /// First key past the shard; absent: up to and including the last key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hi: Option<i32>,
    /// Ids of the nodes in the shard's Raft group.
    pub members: Vec<NodeId>,
}

/// A shard as the routing code uses it: bounds as `i64` so that the last
/// shard's end (one past `i32::MAX`) is a number like the others.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shard {
    /// The shard's id (0: the one shard of an unsharded cluster).
    pub id: ShardId,
    /// First key of the shard.
    pub lo: i64,
    /// First key past the shard (`i32::MAX + 1` for the last shard).
    pub hi: i64,
    /// The nodes of its Raft group, as the cluster file lists them.
    pub members: Vec<NodeId>,
}

impl Shard {
    /// Whether `key` belongs to the shard.
    pub fn contains(&self, key: i32) -> bool {
        (self.lo..self.hi).contains(&i64::from(key))
    }

    /// The part of `[lo, hi)` that falls in this shard, if any.
    pub fn clip(&self, lo: i32, hi: i32) -> Option<(i32, i32)> {
        let l = self.lo.max(i64::from(lo));
        let h = self.hi.min(i64::from(hi));
        // Both are within i32 when `l < h`: `l` at least `lo`, `h` at most `hi`.
        (l < h).then_some((l as i32, h as i32))
    }

    /// A key of the shard (its first).
    pub fn first_key(&self) -> i32 {
        // `lo` is always an i32 (the key space starts at i32::MIN).
        self.lo as i32
    }
}

/// End of the key space, one past the last key.
const KEY_SPACE_END: i64 = i32::MAX as i64 + 1;

/// The cluster file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterConfig {
    /// The file holding the secret every member shares (any bytes, at
    /// least [`crate::auth::MIN_SECRET`]): with it, every Raft-port
    /// connection is authenticated ([`crate::auth`]). Relative to the
    /// cluster file's directory ([`ClusterConfig::load`] makes it so).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_file: Option<PathBuf>,
    /// The members.
    pub node: Vec<NodeConfig>,
    /// Range shards; empty: one group of every node holds every key.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shard: Vec<ShardConfig>,
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

    /// Reads a cluster file; a relative `secret_file` becomes relative to
    /// the file's directory.
    pub fn load(path: &Path) -> Result<ClusterConfig> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ClusterError::io(format!("read {}", path.display()), e))?;
        let mut c = Self::parse(&text)?;
        if let (Some(secret), Some(dir)) = (&mut c.secret_file, path.parent()) {
            *secret = dir.join(&*secret);
        }
        Ok(c)
    }

    /// The secret in `secret_file`, if the file names one.
    pub fn secret(&self) -> Result<Option<Secret>> {
        self.secret_file.as_deref().map(Secret::load).transpose()
    }

    /// Checks ids are non-zero and unique, the shards tile the key space
    /// and name known nodes, and timing is sane.
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
        self.check_shards()?;
        let t = &self.raft;
        // A chunk's JSON frame (up to 4 bytes per byte) must fit a frame.
        if t.snapshot_chunk_bytes == 0
            || t.snapshot_chunk_bytes > (crate::frame::MAX_FRAME as u64 - 4096) / 4
        {
            return Err(ClusterError::Config(format!(
                "snapshot_chunk_bytes must be in 1..={}",
                (crate::frame::MAX_FRAME as u64 - 4096) / 4
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

    /// The `[[shard]]` tables must tile the key space: sorted by `lo`, the
    /// first starts at the first key, each starts where the previous one
    /// ends, the last runs to the last key; each has members, all known
    /// and listed once.
    fn check_shards(&self) -> Result<()> {
        let mut ids = BTreeMap::new();
        for s in &self.shard {
            if s.id == 0 {
                return Err(ClusterError::Config(
                    "shard id 0 is reserved (the one shard of an unsharded cluster)".into(),
                ));
            }
            if ids.insert(s.id, ()).is_some() {
                return Err(ClusterError::Config(format!("shard id {} twice", s.id)));
            }
            if s.members.is_empty() {
                return Err(ClusterError::Config(format!(
                    "shard {} has no members",
                    s.id
                )));
            }
            let mut seen = BTreeMap::new();
            for &m in &s.members {
                if self.member(m).is_none() {
                    return Err(ClusterError::Config(format!(
                        "shard {} names member {m}, which is no [[node]]",
                        s.id
                    )));
                }
                if seen.insert(m, ()).is_some() {
                    return Err(ClusterError::Config(format!(
                        "shard {} names member {m} twice",
                        s.id
                    )));
                }
            }
        }
        let shards = self.shards();
        let mut next = i64::from(i32::MIN);
        for s in &shards {
            if s.lo >= s.hi {
                return Err(ClusterError::Config(format!(
                    "shard {} is empty: lo {} is not below hi {}",
                    s.id, s.lo, s.hi
                )));
            }
            if s.lo > next {
                return Err(ClusterError::Config(format!(
                    "keys [{next}, {}) belong to no shard",
                    s.lo
                )));
            }
            if s.lo < next {
                return Err(ClusterError::Config(format!(
                    "shard {} overlaps the shard before it: it starts at {} but keys below {next} are taken",
                    s.id, s.lo
                )));
            }
            next = s.hi;
        }
        if next != KEY_SPACE_END {
            return Err(ClusterError::Config(format!(
                "keys from {next} on belong to no shard (leave `hi` out of the last shard)"
            )));
        }
        Ok(())
    }

    /// Whether the file has `[[shard]]` tables.
    pub fn is_sharded(&self) -> bool {
        !self.shard.is_empty()
    }

    /// The shards in key order: the `[[shard]]` tables, or, without them,
    /// shard 0 over every key with every node as a member.
    pub fn shards(&self) -> Vec<Shard> {
        if self.shard.is_empty() {
            return vec![Shard {
                id: 0,
                lo: i64::from(i32::MIN),
                hi: KEY_SPACE_END,
                members: self.node.iter().map(|n| n.id).collect(),
            }];
        }
        let mut out: Vec<Shard> = self
            .shard
            .iter()
            .map(|s| Shard {
                id: s.id,
                lo: s.lo.map_or(i64::from(i32::MIN), i64::from),
                hi: s.hi.map_or(KEY_SPACE_END, i64::from),
                members: s.members.clone(),
            })
            .collect();
        out.sort_by_key(|s| (s.lo, s.hi));
        out
    }

    /// Where member data of shard `shard` lives under a member's
    /// directory: the directory itself for an unsharded cluster (the
    /// layout before sharding existed), `shard-S/` otherwise.
    pub fn shard_dir(&self, dir: &Path, shard: ShardId) -> std::path::PathBuf {
        if self.is_sharded() {
            dir.join(format!("shard-{shard}"))
        } else {
            dir.to_path_buf()
        }
    }

    /// The member `id`.
    pub fn member(&self, id: NodeId) -> Option<&NodeConfig> {
        self.node.iter().find(|n| n.id == id)
    }

    /// Every member as openraft's membership wants it.
    pub fn members(&self) -> BTreeMap<NodeId, LaminaNode> {
        self.node.iter().map(|n| (n.id, n.to_node())).collect()
    }

    /// The members `ids` as openraft's membership wants them (unknown ids
    /// are left out; [`ClusterConfig::check`] refuses them in a shard).
    pub fn members_of(&self, ids: &[NodeId]) -> BTreeMap<NodeId, LaminaNode> {
        ids.iter()
            .filter_map(|&id| self.member(id).map(|n| (id, n.to_node())))
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

    const NODES: &str = "[[node]]\nid = 1\nraft = \"a\"\nclient = \"b\"\n\
                         [[node]]\nid = 2\nraft = \"c\"\nclient = \"d\"\n\
                         [[node]]\nid = 3\nraft = \"e\"\nclient = \"f\"\n";

    fn sharded(shards: &str) -> Result<ClusterConfig> {
        ClusterConfig::parse(&format!("{NODES}{shards}"))
    }

    fn refusal(shards: &str) -> String {
        match sharded(shards) {
            Ok(c) => panic!("accepted {c:?}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn a_shard_map_that_tiles_the_key_space_is_accepted_in_key_order() {
        let c = sharded(
            "[[shard]]\nid = 7\nlo = 100\nmembers = [2, 3]\n\
             [[shard]]\nid = 1\nhi = -5\nmembers = [1, 2, 3]\n\
             [[shard]]\nid = 2\nlo = -5\nhi = 100\nmembers = [1]\n",
        )
        .unwrap();
        let s = c.shards();
        assert_eq!(s.iter().map(|s| s.id).collect::<Vec<_>>(), [1, 2, 7]);
        // Every key, the extremes and both sides of each bound included,
        // is in exactly one shard.
        for k in [i32::MIN, -6, -5, 0, 99, 100, i32::MAX] {
            assert_eq!(s.iter().filter(|s| s.contains(k)).count(), 1, "key {k}");
        }
        assert!(s[0].contains(i32::MIN) && s[2].contains(i32::MAX));
        assert_eq!(s[1].clip(-10, 1000), Some((-5, 100)));
        assert_eq!(s[1].clip(100, 1000), None);
        assert_eq!(s[2].clip(0, i32::MAX), Some((100, i32::MAX)));
        assert_eq!(
            c.shard_dir(Path::new("/d"), 7),
            Path::new("/d/shard-7").to_path_buf()
        );
    }

    #[test]
    fn without_shards_one_shard_holds_every_key_in_the_old_layout() {
        let c = ClusterConfig::parse(NODES).unwrap();
        assert!(!c.is_sharded());
        let s = c.shards();
        assert_eq!(s.len(), 1);
        assert_eq!((s[0].id, s[0].members.clone()), (0, vec![1, 2, 3]));
        assert!(s[0].contains(i32::MIN) && s[0].contains(i32::MAX));
        assert_eq!(
            c.shard_dir(Path::new("/d"), 0),
            Path::new("/d").to_path_buf()
        );
        // And the file written back has no shard table.
        assert!(!toml::to_string(&c).unwrap().contains("shard"));
    }

    #[test]
    fn bad_shard_maps_are_refused_with_the_reason() {
        let gap = refusal(
            "[[shard]]\nid = 1\nhi = 0\nmembers = [1]\n[[shard]]\nid = 2\nlo = 5\nmembers = [2]\n",
        );
        assert!(gap.contains("keys [0, 5) belong to no shard"), "{gap}");
        let overlap = refusal(
            "[[shard]]\nid = 1\nhi = 10\nmembers = [1]\n[[shard]]\nid = 2\nlo = 5\nmembers = [2]\n",
        );
        assert!(overlap.contains("shard 2 overlaps"), "{overlap}");
        let no_start = refusal("[[shard]]\nid = 1\nlo = 0\nmembers = [1]\n");
        assert!(no_start.contains("belong to no shard"), "{no_start}");
        let no_end = refusal("[[shard]]\nid = 1\nhi = 2147483647\nmembers = [1]\n");
        assert!(
            no_end.contains("from 2147483647 on belong to no shard"),
            "{no_end}"
        );
        let empty = refusal(
            "[[shard]]\nid = 1\nhi = 0\nmembers = [1]\n[[shard]]\nid = 2\nlo = 0\nhi = 0\nmembers = [1]\n[[shard]]\nid = 3\nlo = 0\nmembers = [1]\n",
        );
        assert!(empty.contains("shard 2 is empty"), "{empty}");
        let unknown = refusal("[[shard]]\nid = 1\nmembers = [1, 4]\n");
        assert!(
            unknown.contains("member 4, which is no [[node]]"),
            "{unknown}"
        );
        let twice = refusal("[[shard]]\nid = 1\nmembers = [2, 2]\n");
        assert!(twice.contains("member 2 twice"), "{twice}");
        let nobody = refusal("[[shard]]\nid = 1\nmembers = []\n");
        assert!(nobody.contains("shard 1 has no members"), "{nobody}");
        let zero = refusal("[[shard]]\nid = 0\nmembers = [1]\n");
        assert!(zero.contains("reserved"), "{zero}");
        let dup = refusal(
            "[[shard]]\nid = 1\nhi = 0\nmembers = [1]\n[[shard]]\nid = 1\nlo = 0\nmembers = [1]\n",
        );
        assert!(dup.contains("shard id 1 twice"), "{dup}");
        let typo = refusal("[[shard]]\nid = 1\nmembers = [1]\nhigh = 3\n");
        assert!(typo.contains("unknown field"), "{typo}");
    }
}
