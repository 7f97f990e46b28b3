//! One Raft group this member is in, and what runs on it: proposing
//! writes, reads from this member's copy (after a read index, or as it is
//! on a follower read), and the `@leader` line.

use std::time::Duration;

use lamina_server::dsl_key::encode_i32;
use openraft::error::{CheckIsLeaderError, ClientWriteError, ForwardToLeader, RaftError};
use serde::{Deserialize, Serialize};

use crate::store::StateMachine;
use crate::types::{LaminaNode, NodeId, Raft, Request, ShardId};

/// How long a write or a read barrier may take before the client is told
/// `ERROR timeout`.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// The prefix of a redirect line; the leader's client address follows.
pub(crate) const REDIRECT: &str = "ERROR not leader; leader is ";

pub(crate) fn not_leader(f: &ForwardToLeader<NodeId, LaminaNode>) -> String {
    match &f.leader_node {
        Some(n) => format!("{REDIRECT}{}\n", n.client),
        None => "ERROR not leader; leader unknown\n".to_string(),
    }
}

/// The reply to `@leader`: this member's view of a group's leader (a
/// stopped group's last view would be stale: refused).
pub(crate) fn leader_line(group: &Group) -> String {
    if let Err(line) = group.check_running() {
        return line;
    }
    let m = group.raft.metrics().borrow().clone();
    match m.current_leader {
        None => "LEADER unknown\n".to_string(),
        Some(id) => match m.membership_config.membership().get_node(&id) {
            Some(n) => format!("LEADER {id} {}\n", n.client),
            None => format!("LEADER {id}\n"),
        },
    }
}

/// One Raft group this member is in.
#[derive(Clone)]
pub struct Group {
    /// The shard it holds.
    pub shard: ShardId,
    /// The group's Raft.
    pub raft: Raft,
    /// This member's copy of the shard's data.
    pub sm: StateMachine,
}

impl Group {
    /// Why the group's Raft core has stopped, if it has: the error it
    /// stopped on (a storage error), or that its task ended (a panic drops
    /// the metrics sender without reporting). A stopped core never catches
    /// up again, so its state machine only grows staler.
    pub fn stopped(&self) -> Option<String> {
        let metrics = self.raft.metrics();
        if let Err(fatal) = &metrics.borrow().running_state {
            return Some(fatal.to_string());
        }
        metrics
            .has_changed()
            .is_err()
            .then(|| "its Raft core task ended".to_string())
    }

    /// `Err` with the client's error line when the group's Raft core has
    /// stopped: every request of the shard is refused rather than served
    /// from a state machine that no longer follows the log.
    pub(crate) fn check_running(&self) -> std::result::Result<(), String> {
        match self.stopped() {
            None => Ok(()),
            Some(why) => Err(format!(
                "ERROR this member's Raft group of shard {} has stopped ({}); it serves none of the shard's requests until it is restarted\n",
                self.shard,
                why.replace('\n', " ")
            )),
        }
    }
}

/// A read of one shard.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Read {
    /// One key.
    Get(i32),
    /// The keys of `[lo, hi)`.
    Range(i32, i32),
}

/// The pairs a read found, in key order, or the error line for the client.
pub type ReadReply = std::result::Result<Vec<(Vec<u8>, Vec<u8>)>, String>;

pub(crate) fn read_state(sm: &StateMachine, read: &Read) -> ReadReply {
    match *read {
        Read::Get(k) => {
            let key = encode_i32(k).to_vec();
            match sm.get(&key) {
                Ok(Some(v)) => Ok(vec![(key, v)]),
                Ok(None) => Ok(Vec::new()),
                Err(e) => Err(format!("ERROR get failed: {e}\n")),
            }
        }
        Read::Range(lo, hi) => sm
            .range(&encode_i32(lo), &encode_i32(hi))
            .map_err(|e| format!("ERROR range failed: {e}\n")),
    }
}

/// Why a read index could not be taken.
pub(crate) enum BarrierError {
    /// This member does not lead the group.
    NotLeader(ForwardToLeader<NodeId, LaminaNode>),
    /// Anything else, as the client's error line.
    Other(String),
}

impl BarrierError {
    pub(crate) fn line(&self) -> String {
        match self {
            BarrierError::NotLeader(f) => not_leader(f),
            BarrierError::Other(line) => line.clone(),
        }
    }
}

/// Confirms leadership with a quorum and waits until the state machine
/// has applied everything committed before the read arrived (openraft's
/// read index).
pub(crate) async fn read_barrier(raft: &Raft) -> std::result::Result<(), BarrierError> {
    match tokio::time::timeout(REQUEST_TIMEOUT, raft.ensure_linearizable()).await {
        Err(_) => Err(BarrierError::Other("ERROR timeout\n".to_string())),
        Ok(Ok(_)) => Ok(()),
        Ok(Err(RaftError::APIError(CheckIsLeaderError::ForwardToLeader(f)))) => {
            Err(BarrierError::NotLeader(f))
        }
        Ok(Err(e)) => Err(BarrierError::Other(format!("ERROR raft: {e}\n"))),
    }
}

/// Reads `read` from this member's copy of a shard: as it is with
/// `follower`, else after a read index, answering the redirect line when
/// this member does not lead the group. What a forwarded read runs, so it
/// is never passed on a second time.
pub(crate) async fn read_local(group: &Group, read: &Read, follower: bool) -> ReadReply {
    group.check_running()?;
    if !follower {
        read_barrier(&group.raft).await.map_err(|e| e.line())?;
    }
    read_state(&group.sm, read)
}

/// Proposes `req` through Raft; the reply line for each of its writers.
pub(crate) async fn propose(raft: &Raft, req: Request) -> String {
    match tokio::time::timeout(REQUEST_TIMEOUT, raft.client_write(req)).await {
        Err(_) => "ERROR timeout; the write may or may not be committed\n".to_string(),
        Ok(Ok(_)) => "OK\n".to_string(),
        Ok(Err(RaftError::APIError(ClientWriteError::ForwardToLeader(f)))) => not_leader(&f),
        Ok(Err(e)) => format!("ERROR raft: {e}\n"),
    }
}
