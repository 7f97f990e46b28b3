//! The client listener: the CS265 DSL (`p K V`, `g K`, `r LO HI`, `d K`)
//! through Raft.
//!
//! One reply line per command (unlike the single-node server, writes are
//! acknowledged, since a client of a replicated store must know which
//! writes are durable):
//!
//! | command | reply |
//! | --- | --- |
//! | `p K V`, `d K` | `OK` once the write is committed by a majority and applied (writes from all connections that arrive while a proposal is in flight go together as one log entry: group commit) |
//! | `g K` | the value, or an empty line |
//! | `r LO HI` | `K:V` pairs of `[LO, HI)` separated by spaces (maybe empty) |
//! | `@follower-reads on` / `off` | `OK`; on, `g`/`r` read this member's state machine without asking the leader (may be stale) |
//! | `@leader` | `LEADER ID HOST:PORT` (the leader this member knows of, its client address), `LEADER ID` if it is not in the membership, or `LEADER unknown` (answered locally: may be stale); with several shards it needs a key |
//! | `@leader K` | the same for the shard of key `K` (asked of one of its members when this member is not one) |
//! | `@add-learner ID [S]` | `OK` once member `ID` (a `[[node]]` of the cluster file) is a learner of shard `S`'s group and has caught up |
//! | `@promote ID [S]` | `OK` once learner `ID` is a voter of shard `S` (openraft's joint consensus: two membership entries) |
//! | `@remove ID [S]` | `OK` once `ID` is no longer in shard `S`'s group |
//! | `@sync` | `@sync` |
//! | `quit`, `@end` | `@bye`, then the connection closes (`lamina client` ends its input with `@end`) |
//!
//! `S` may be left out when there is one shard. A membership change runs
//! on the shard's leader: another member of the shard answers the
//! redirect; a member outside it says so.
//!
//! Errors are one `ERROR ...` line (a line over [`MAX_LINE`] bytes is
//! skipped and answered `ERROR line longer than 4096 bytes`). On a member that is not the leader,
//! writes and linearizable reads answer `ERROR not leader; leader is
//! HOST:PORT` (the leader's client address) or `ERROR not leader; leader
//! unknown`; with `forward_writes` in the cluster file, writes are sent
//! on to the leader instead and answered with its reply. Only `OK` acknowledges a write: after any `ERROR` other than
//! a parse error the write may or may not have been committed.
//!
//! **Shards.** Each key belongs to one shard ([`crate::config::Shard`]).
//! A command for a key of a shard this member is in goes through that
//! shard's group under the rules above. For a shard it is not in, the
//! member hands the command to one of the shard's members over the Raft
//! port (the one its last redirect named, else the last one that
//! answered) and relays the answer: a write's reply line as that member
//! gives it (`OK`, or the redirect to the shard's leader, which the
//! client follows), and a read's result, following redirects and trying
//! the other members itself (a read can be retried safely; a write
//! cannot). `r LO HI` is cut at shard bounds
//! and each piece read through its own shard's read index; when the range
//! spans shards, a piece of a shard this member is in but does not lead
//! is read through that shard's leader, so no single member has to lead
//! every shard the range touches. The pieces are joined in key order.

use std::collections::BTreeMap;
use std::io;
use std::sync::Arc;
use std::time::Duration;

use lamina_server::dsl_key::{decode_i32, encode_i32};
use lamina_server::parse::{parse_line, Command};
use openraft::error::{ClientWriteError, RaftError};
use openraft::ChangeMembers;
use parking_lot::Mutex;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot, Semaphore};

use crate::auth::Secret;
use crate::config::Shard;
use crate::group::{
    leader_line, not_leader, propose, read_barrier, read_state, BarrierError, Group, Read,
    ReadReply, REDIRECT,
};
use crate::network::{accept_loop, within, Connection, PortLimits, RpcReply, RpcRequest};
use crate::types::{LaminaNode, NodeId, Op, Raft, Request, ShardId};

/// Longest command line.
pub const MAX_LINE: usize = 4096;
/// How long a membership change may take (adding a learner waits until
/// it has caught up, which may take a snapshot transfer).
const ADMIN_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a member waits for another to answer a forwarded request (the
/// other's own [`crate::group::REQUEST_TIMEOUT`] plus the trip).
const FORWARD_TIMEOUT: Duration = Duration::from_secs(11);

fn push_datum(out: &mut String, b: &[u8]) {
    match decode_i32(b) {
        Some(v) => out.push_str(&v.to_string()),
        None => {
            out.push_str("0x");
            for x in b {
                out.push_str(&format!("{x:02x}"));
            }
        }
    }
}

/// Most writes proposed as one log entry by the [`write_batcher`].
pub const MAX_WRITE_BATCH: usize = 256;

/// A write waiting for the batcher, with where its reply line goes.
pub type PendingWrite = (Op, oneshot::Sender<String>);

/// A shard this member is not in: its members and which of them to ask.
pub struct RemoteShard {
    me: NodeId,
    members: Vec<(NodeId, LaminaNode)>,
    next: Mutex<usize>,
}

impl RemoteShard {
    /// A shard with `members` (in the cluster file's order), asked by
    /// member `me`.
    pub fn new(me: NodeId, members: Vec<(NodeId, LaminaNode)>) -> RemoteShard {
        RemoteShard {
            me,
            members,
            next: Mutex::new(0),
        }
    }

    /// The member to ask next.
    fn target(&self) -> Option<(NodeId, LaminaNode)> {
        self.members.get(*self.next.lock()).cloned()
    }

    /// Learns from a member's reply line: a redirect to another member
    /// makes that one the next asked. Whether it was such a redirect.
    fn learn(&self, line: &str) -> bool {
        let Some(addr) = line.trim_end().strip_prefix(REDIRECT) else {
            return false;
        };
        match self.members.iter().position(|(_, n)| n.client == addr) {
            Some(i) => {
                *self.next.lock() = i;
                true
            }
            None => false,
        }
    }

    /// Moves past member `failed`, which did not answer or could not help.
    fn skip(&self, failed: NodeId) {
        let mut next = self.next.lock();
        if self.members.get(*next).is_some_and(|(id, _)| *id == failed) {
            *next = (*next + 1) % self.members.len();
        }
    }
}

/// Where a shard's commands go.
pub enum Place {
    /// This member is in the shard's group.
    Local(Group),
    /// It is not: the shard's members are asked.
    Remote(Arc<RemoteShard>),
}

/// One shard as the client listener sees it.
pub struct Route {
    /// Where its commands go.
    pub place: Place,
    /// Its [`write_batcher`]'s queue.
    pub writes: mpsc::Sender<PendingWrite>,
}

/// What every client connection of a member shares: the shard map and
/// where each shard's commands go.
pub struct Router {
    shards: Vec<Shard>,
    routes: BTreeMap<ShardId, Route>,
    nodes: BTreeMap<NodeId, LaminaNode>,
    peers: Peers,
}

/// A membership change asked on the client port.
#[derive(Debug, Clone, Copy)]
pub enum Admin {
    /// `@add-learner`: openraft's `add_learner`, blocking until caught up.
    AddLearner,
    /// `@promote`: a learner becomes a voter.
    Promote,
    /// `@remove`: a member leaves the group (not kept as a learner).
    Remove,
}

impl Admin {
    /// The command's name and the change it asks for, when `line` is one.
    fn parse(line: &[u8]) -> Option<(Admin, &[u8])> {
        [
            (&b"@add-learner"[..], Admin::AddLearner),
            (b"@promote", Admin::Promote),
            (b"@remove", Admin::Remove),
        ]
        .into_iter()
        .find_map(|(name, admin)| {
            let rest = line.strip_prefix(name)?;
            (rest.is_empty() || rest.starts_with(b" ")).then_some((admin, rest))
        })
    }
}

impl Router {
    /// A router over `shards` (in key order, tiling the key space), with
    /// a route for each, the cluster file's `nodes` (whose addresses a
    /// membership change records), and the cluster's `secret` for the
    /// connections it makes to other members.
    pub fn new(
        shards: Vec<Shard>,
        routes: BTreeMap<ShardId, Route>,
        nodes: BTreeMap<NodeId, LaminaNode>,
        secret: Option<Secret>,
    ) -> Router {
        Router {
            shards,
            routes,
            nodes,
            peers: Peers::new(secret),
        }
    }

    /// Runs a membership change `what` with arguments `ID [S]` on this
    /// member's group of shard `S`; the reply line.
    async fn admin(&self, what: Admin, args: &[u8]) -> String {
        let args = String::from_utf8_lossy(args);
        let words: Vec<&str> = args.split_whitespace().collect();
        let (id, shard) = match words.as_slice() {
            [id] => (id.parse::<NodeId>().ok(), self.only_shard()),
            [id, shard] => (id.parse::<NodeId>().ok(), shard.parse::<ShardId>().ok()),
            _ => (None, None),
        };
        let (Some(id), Some(shard)) = (id, shard) else {
            return match (words.len(), self.only_shard()) {
                (1, None) => {
                    "ERROR several shards: name the shard after the member id\n".to_string()
                }
                _ => {
                    "ERROR expected a member id and, with several shards, a shard id\n".to_string()
                }
            };
        };
        let group = match self.routes.get(&shard).map(|r| &r.place) {
            None => return format!("ERROR no shard {shard}\n"),
            Some(Place::Remote(_)) => {
                return format!("ERROR this member is not in shard {shard}; ask a member of it\n")
            }
            Some(Place::Local(group)) => group,
        };
        if let Err(line) = group.check_running() {
            return line;
        }
        let raft = &group.raft;
        // A learner leaves by openraft's RemoveNodes, a voter by RemoveVoters.
        let learner = {
            let m = raft.metrics().borrow().clone();
            let membership = m.membership_config.membership();
            let voter = membership.voter_ids().any(|v| v == id);
            let known = membership.get_node(&id).is_some();
            if matches!(what, Admin::Remove) && !known && m.current_leader == Some(m.id) {
                // openraft would answer OK to removing nobody.
                return format!("ERROR member {id} is not in shard {shard}'s group\n");
            }
            known && !voter
        };
        let set = std::collections::BTreeSet::from([id]);
        let change = async {
            match what {
                Admin::AddLearner => match self.nodes.get(&id) {
                    Some(node) => Some(raft.add_learner(id, node.clone(), true).await),
                    None => None,
                },
                Admin::Promote => Some(
                    raft.change_membership(ChangeMembers::AddVoterIds(set), false)
                        .await,
                ),
                Admin::Remove => {
                    let change = if learner {
                        ChangeMembers::RemoveNodes(set)
                    } else {
                        ChangeMembers::RemoveVoters(set)
                    };
                    Some(raft.change_membership(change, false).await)
                }
            }
        };
        match tokio::time::timeout(ADMIN_TIMEOUT, change).await {
            Err(_) => "ERROR timeout; the change may or may not be done\n".to_string(),
            Ok(None) => format!("ERROR node {id} is not in the cluster file\n"),
            Ok(Some(Ok(_))) => "OK\n".to_string(),
            Ok(Some(Err(RaftError::APIError(ClientWriteError::ForwardToLeader(f))))) => {
                not_leader(&f)
            }
            Ok(Some(Err(e))) => format!("ERROR raft: {e}\n"),
        }
    }

    /// The shard's id when there is only one.
    fn only_shard(&self) -> Option<ShardId> {
        match self.shards.as_slice() {
            [only] => Some(only.id),
            _ => None,
        }
    }

    /// The shard of `key` and its route.
    fn route(&self, key: i32) -> std::result::Result<(ShardId, &Route), String> {
        let shard = self
            .shards
            .iter()
            .find(|s| s.contains(key))
            .ok_or_else(|| format!("ERROR no shard holds key {key}\n"))?;
        self.routes
            .get(&shard.id)
            .map(|r| (shard.id, r))
            .ok_or_else(|| format!("ERROR shard {} has no route\n", shard.id))
    }

    async fn write(&self, key: i32, op: Op) -> String {
        let route = match self.route(key) {
            Ok((_, r)) => r,
            Err(line) => return line,
        };
        let (tx, rx) = oneshot::channel();
        if route.writes.send((op, tx)).await.is_err() {
            return "ERROR shutting down\n".to_string();
        }
        match rx.await {
            Ok(reply) => reply,
            Err(_) => "ERROR shutting down; the write may or may not be committed\n".to_string(),
        }
    }

    /// Reads `read` from `shard`. `spanning`: the read is a piece of a
    /// range over several shards, so a member that does not lead the
    /// shard reads it through the leader instead of redirecting.
    async fn read(&self, shard: ShardId, read: Read, follower: bool, spanning: bool) -> ReadReply {
        let route = self
            .routes
            .get(&shard)
            .ok_or_else(|| format!("ERROR shard {shard} has no route\n"))?;
        match &route.place {
            Place::Local(group) => {
                group.check_running()?;
                if follower {
                    return read_state(&group.sm, &read);
                }
                match read_barrier(&group.raft).await {
                    Ok(()) => read_state(&group.sm, &read),
                    Err(BarrierError::NotLeader(f)) if spanning => {
                        match (f.leader_id, f.leader_node) {
                            (Some(id), Some(node)) => {
                                let me = group.raft.metrics().borrow().id;
                                let req = RpcRequest::Read {
                                    from: me,
                                    read,
                                    follower: false,
                                };
                                match self.peers.call(id, &node, shard, &req).await {
                                    Ok(RpcReply::Read(reply)) => reply,
                                    Ok(other) => Err(odd_reply(id, &other)),
                                    Err(e) => Err(format!(
                                    "ERROR reading shard {shard} through its leader {id}: {e}\n"
                                )),
                                }
                            }
                            _ => Err("ERROR not leader; leader unknown\n".to_string()),
                        }
                    }
                    Err(e) => Err(e.line()),
                }
            }
            Place::Remote(remote) => {
                let req = RpcRequest::Read {
                    from: remote.me,
                    read,
                    follower,
                };
                let mut last = "ERROR not leader; leader unknown\n".to_string();
                // Each member once, plus the one a redirect names.
                for _ in 0..=remote.members.len() {
                    let Some((id, node)) = remote.target() else {
                        break;
                    };
                    match self.peers.call(id, &node, shard, &req).await {
                        Ok(RpcReply::Read(Ok(pairs))) => return Ok(pairs),
                        Ok(RpcReply::Read(Err(line))) => {
                            // Not a redirect (no leader known there, a
                            // timeout): another member may do better.
                            if !remote.learn(&line) {
                                remote.skip(id);
                            }
                            last = line;
                        }
                        Ok(other) => {
                            remote.skip(id);
                            last = odd_reply(id, &other);
                        }
                        Err(e) => {
                            remote.skip(id);
                            last =
                                format!("ERROR reading shard {shard} through member {id}: {e}\n");
                        }
                    }
                }
                Err(last)
            }
        }
    }

    async fn get(&self, key: i32, follower: bool) -> String {
        let shard = match self.route(key) {
            Ok((shard, _)) => shard,
            Err(line) => return line,
        };
        match self.read(shard, Read::Get(key), follower, false).await {
            Err(line) => line,
            Ok(pairs) => {
                let mut s = String::new();
                if let Some((_, v)) = pairs.first() {
                    push_datum(&mut s, v);
                }
                s.push('\n');
                s
            }
        }
    }

    async fn range(&self, lo: i32, hi: i32, follower: bool) -> String {
        let pieces: Vec<(ShardId, i32, i32)> = self
            .shards
            .iter()
            .filter_map(|s| s.clip(lo, hi).map(|(l, h)| (s.id, l, h)))
            .collect();
        let spanning = pieces.len() > 1;
        let mut s = String::new();
        let mut first = true;
        for (shard, l, h) in pieces {
            let pairs = match self
                .read(shard, Read::Range(l, h), follower, spanning)
                .await
            {
                Ok(p) => p,
                Err(line) => return line,
            };
            for (k, v) in pairs {
                if !first {
                    s.push(' ');
                }
                first = false;
                push_datum(&mut s, &k);
                s.push(':');
                push_datum(&mut s, &v);
            }
        }
        s.push('\n');
        s
    }

    /// The reply to `@leader ARG`: without a key, the one shard's leader
    /// (a sharded cluster needs a key); with one, its shard's, asked of a
    /// member when this member is not one.
    async fn leader(&self, arg: &[u8]) -> String {
        let arg = String::from_utf8_lossy(arg);
        let arg = arg.trim();
        let key = if arg.is_empty() {
            match self.shards.as_slice() {
                [only] => only.first_key(),
                _ => {
                    return "ERROR each shard has its own leader: ask `@leader K` for a key K\n"
                        .to_string()
                }
            }
        } else {
            match arg.parse::<i32>() {
                Ok(k) => k,
                Err(_) => return format!("ERROR @leader takes a key, not {arg:?}\n"),
            }
        };
        let (shard, route) = match self.route(key) {
            Ok(r) => r,
            Err(line) => return line,
        };
        match &route.place {
            Place::Local(group) => leader_line(group),
            Place::Remote(remote) => {
                let Some((id, node)) = remote.target() else {
                    return "LEADER unknown\n".to_string();
                };
                let req = RpcRequest::Leader { from: remote.me };
                match self.peers.call(id, &node, shard, &req).await {
                    Ok(RpcReply::Leader(line)) => line,
                    Ok(_) | Err(_) => {
                        remote.skip(id);
                        "LEADER unknown\n".to_string()
                    }
                }
            }
        }
    }
}

/// The error line for a reply of the wrong kind (or a refusal) from
/// member `id`.
fn odd_reply(id: NodeId, reply: &RpcReply) -> String {
    match reply {
        RpcReply::Refused(why) => format!("ERROR member {id} refused: {why}\n"),
        _ => format!("ERROR member {id} answered with a reply of the wrong kind\n"),
    }
}

/// Most connections a member holds to one other member for the reads
/// and `@leader` questions its clients' commands pass on; more askers
/// wait their turn (within their request's time).
pub const PEER_CONNECTIONS: usize = 16;

/// The connections to other members that a member's client connections
/// share for the reads and `@leader` questions they pass on: at most
/// [`PEER_CONNECTIONS`] to each member at once, so that the other
/// member's Raft-port cap is never taken by one member's clients, and
/// the idle ones kept for reuse.
pub struct Peers {
    secret: Option<Secret>,
    pools: Mutex<BTreeMap<NodeId, Arc<Pool>>>,
}

/// The connections to one member.
struct Pool {
    idle: Mutex<Vec<Connection>>,
    slots: Semaphore,
}

impl Peers {
    /// No connection yet; each made with `secret` when there is one.
    pub fn new(secret: Option<Secret>) -> Peers {
        Peers {
            secret,
            pools: Mutex::default(),
        }
    }

    /// One RPC for shard `shard` to member `id` at `node`, on an idle
    /// connection or a new one, within [`FORWARD_TIMEOUT`] in all.
    async fn call(
        &self,
        id: NodeId,
        node: &LaminaNode,
        shard: ShardId,
        req: &RpcRequest,
    ) -> io::Result<RpcReply> {
        let pool = self
            .pools
            .lock()
            .entry(id)
            .or_insert_with(|| {
                Arc::new(Pool {
                    idle: Mutex::default(),
                    slots: Semaphore::new(PEER_CONNECTIONS),
                })
            })
            .clone();
        let started = std::time::Instant::now();
        let _slot = match tokio::time::timeout(FORWARD_TIMEOUT, pool.slots.acquire()).await {
            Ok(Ok(slot)) => slot,
            Ok(Err(_)) | Err(_) => {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("all {PEER_CONNECTIONS} connections to member {id} stayed busy"),
                ))
            }
        };
        let popped = pool.idle.lock().pop();
        let mut conn =
            popped.unwrap_or_else(|| Connection::new(id, node.clone(), self.secret.clone()));
        let left = FORWARD_TIMEOUT.saturating_sub(started.elapsed());
        let reply = conn.call(shard, req, left).await;
        if reply.is_ok() {
            pool.idle.lock().push(conn);
        }
        reply
    }
}

/// Where a [`write_batcher`] sends its batches.
pub enum BatchTarget {
    /// This member's group of the shard; with `forward`, a member that
    /// knows another leader sends the batch there.
    Local {
        /// The group (a stopped one refuses every batch).
        group: Group,
        /// `forward_writes` of the cluster file.
        forward: bool,
    },
    /// A shard this member is not in: batches go to one of its members.
    Remote(Arc<RemoteShard>),
}

/// Group commit for one shard: takes the writes that queued up while the
/// previous proposal was in flight (at most [`MAX_WRITE_BATCH`]), proposes
/// them as one log entry (one [`Request`], applied as one `WriteBatch`)
/// and gives every writer the same reply line. With `forward`, a member
/// that knows another member is the leader sends the batch there instead
/// (one RPC over the Raft port; the leader proposes it as one entry) and
/// relays the leader's reply; a member outside the shard sends every batch
/// to one of the shard's members the same way. It forwards only when it
/// does not believe itself the leader, before proposing anything: a write
/// proposed here and then refused (leadership lost) may still commit, and
/// forwarding it too could apply it twice; for the same reason a relayed
/// reply is never retried elsewhere. Runs until the queue closes or the
/// task is aborted.
pub async fn write_batcher(
    shard: ShardId,
    target: BatchTarget,
    secret: Option<Secret>,
    mut queue: mpsc::Receiver<PendingWrite>,
) {
    let mut batch = Vec::with_capacity(MAX_WRITE_BATCH);
    let mut conn: Option<Connection> = None;
    while queue.recv_many(&mut batch, MAX_WRITE_BATCH).await > 0 {
        let (ops, waiters): (Vec<Op>, Vec<oneshot::Sender<String>>) = batch.drain(..).unzip();
        let request = Request { ops };
        let reply = match &target {
            BatchTarget::Local { group, forward } => match group.check_running() {
                Err(line) => line,
                Ok(()) => match other_leader(&group.raft).filter(|_| *forward) {
                    Some((me, id, node)) => {
                        let c = connection(&mut conn, id, node, &secret);
                        forward_to(c, shard, me, request)
                            .await
                            .unwrap_or_else(|line| line)
                    }
                    None => propose(&group.raft, request).await,
                },
            },
            BatchTarget::Remote(remote) => match remote.target() {
                None => format!("ERROR shard {shard} has no members\n"),
                Some((id, node)) => {
                    let c = connection(&mut conn, id, node, &secret);
                    match forward_to(c, shard, remote.me, request).await {
                        Ok(line) => {
                            // A member that knows no leader (cut off, or
                            // in an election) is not asked first next time.
                            if !remote.learn(&line) && line.starts_with("ERROR") {
                                remote.skip(id);
                            }
                            line
                        }
                        Err(line) => {
                            remote.skip(id);
                            line
                        }
                    }
                }
            },
        };
        for w in waiters {
            // A writer that went away needs no reply.
            let _ = w.send(reply.clone());
        }
    }
}

/// The connection in `slot`, made anew when it is to another member.
fn connection<'a>(
    slot: &'a mut Option<Connection>,
    id: NodeId,
    node: LaminaNode,
    secret: &Option<Secret>,
) -> &'a mut Connection {
    if slot.as_ref().is_none_or(|c| c.target() != id) {
        *slot = None;
    }
    slot.get_or_insert_with(|| Connection::new(id, node, secret.clone()))
}

/// This member's id, and the leader's when it knows a leader that is
/// another member.
fn other_leader(raft: &Raft) -> Option<(NodeId, NodeId, LaminaNode)> {
    let m = raft.metrics().borrow().clone();
    let leader = m.current_leader.filter(|&l| l != m.id)?;
    let node = m.membership_config.membership().get_node(&leader)?.clone();
    Some((m.id, leader, node))
}

/// Sends a batch of shard `shard` to another member: its reply line, or
/// the error line when it could not be had.
async fn forward_to(
    conn: &mut Connection,
    shard: ShardId,
    me: NodeId,
    request: Request,
) -> std::result::Result<String, String> {
    let to = conn.target();
    match conn
        .call(
            shard,
            &RpcRequest::Forward { from: me, request },
            FORWARD_TIMEOUT,
        )
        .await
    {
        Ok(RpcReply::Forward(line)) => Ok(line),
        Ok(other) => Err(format!(
            "{}; the write may or may not be committed\n",
            odd_reply(to, &other).trim_end()
        )),
        Err(e) => Err(format!(
            "ERROR forwarding to member {to}: {e}; the write may or may not be committed\n"
        )),
    }
}

/// Serves clients from `listener` until the task is aborted (which aborts
/// every connection too), within `limits`: at most
/// [`PortLimits::max_client_connections`] at once (one more is answered
/// `ERROR too many connections` and closed), a connection idle for
/// [`PortLimits::idle_timeout`] closed, and so is one whose line does not
/// arrive whole within [`PortLimits::request_timeout`] of its first byte.
pub async fn serve_clients(listener: TcpListener, router: Arc<Router>, limits: PortLimits) {
    let cap = limits.max_client_connections;
    accept_loop(
        listener,
        "client",
        cap,
        move |stream| serve_client(stream, router.clone(), limits.clone()),
        |mut stream| async move {
            let _ = stream.write_all(b"ERROR too many connections\n").await;
        },
    )
    .await
}

/// What [`read_line`] read.
enum Line {
    /// A line (its newline included, unless the stream ended after it).
    Whole,
    /// A line over [`MAX_LINE`] bytes, skipped.
    TooLong,
    /// The end of the stream.
    End,
}

/// Reads one line into `line`, skipping (without holding) the rest of a
/// line over [`MAX_LINE`] bytes.
async fn read_line<R>(r: &mut R, line: &mut Vec<u8>) -> io::Result<Line>
where
    R: AsyncBufReadExt + Unpin,
{
    let n = (&mut *r)
        .take(MAX_LINE as u64 + 1)
        .read_until(b'\n', line)
        .await?;
    if n == 0 {
        return Ok(Line::End);
    }
    if line.last() == Some(&b'\n') || line.len() <= MAX_LINE {
        return Ok(Line::Whole);
    }
    loop {
        let buf = r.fill_buf().await?;
        if buf.is_empty() {
            return Ok(Line::End);
        }
        match buf.iter().position(|&b| b == b'\n') {
            Some(i) => {
                r.consume(i + 1);
                return Ok(Line::TooLong);
            }
            None => {
                let n = buf.len();
                r.consume(n);
            }
        }
    }
}

/// Refused HTTP requests' log lines, at most once a minute.
static HTTP_REFUSALS: lamina_server::log_limit::LogLimit =
    lamina_server::log_limit::LogLimit::new();

async fn serve_client(
    stream: TcpStream,
    router: Arc<Router>,
    limits: PortLimits,
) -> io::Result<()> {
    stream.set_nodelay(true)?;
    let peer = stream.peer_addr()?;
    let (r, mut w) = stream.into_split();
    let mut r = BufReader::new(r);
    let mut follower_reads = false;
    let mut line = Vec::new();
    loop {
        line.clear();
        let waiting = r.fill_buf();
        let ended = match limits.idle_timeout {
            Some(idle) => within(idle, "an idle wait", waiting).await?,
            None => waiting.await?,
        }
        .is_empty();
        if ended {
            return Ok(());
        }
        match within(
            limits.request_timeout,
            "a line",
            read_line(&mut r, &mut line),
        )
        .await?
        {
            Line::End => return Ok(()),
            Line::TooLong => {
                w.write_all(format!("ERROR line longer than {MAX_LINE} bytes\n").as_bytes())
                    .await?;
                continue;
            }
            Line::Whole => {}
        }
        if lamina_server::sniff::is_http(line.trim_ascii_end()) {
            if let Some(n) = HTTP_REFUSALS.allow() {
                tracing::warn!(
                    "client port: {peer}: {}{}",
                    lamina_server::sniff::HTTP_REFUSED,
                    lamina_server::log_limit::held_back(n)
                );
            }
            return Ok(());
        }
        let text = line.trim_ascii();
        let reply = if let Some(arg) = text.strip_prefix(b"@leader") {
            router.leader(arg).await
        } else if let Some((what, args)) = Admin::parse(text) {
            router.admin(what, args).await
        } else {
            match text {
                b"@follower-reads on" => {
                    follower_reads = true;
                    "OK\n".to_string()
                }
                b"@follower-reads off" => {
                    follower_reads = false;
                    "OK\n".to_string()
                }
                _ => match parse_line(text) {
                    Err(e) => format!("ERROR {e}\n"),
                    Ok(Command::Nothing) => continue,
                    // `@end` is what `lamina client` sends after its last line,
                    // waiting for `@bye` (as `lamina serve` answers).
                    Ok(Command::Quit | Command::End) => {
                        w.write_all(b"@bye\n").await?;
                        return Ok(());
                    }
                    Ok(Command::Sync) => "@sync\n".to_string(),
                    Ok(Command::Put(k, v)) => {
                        let op = Op::Put {
                            key: encode_i32(k).to_vec(),
                            value: encode_i32(v).to_vec(),
                        };
                        router.write(k, op).await
                    }
                    Ok(Command::Delete(k)) => {
                        let op = Op::Delete {
                            key: encode_i32(k).to_vec(),
                        };
                        router.write(k, op).await
                    }
                    Ok(Command::Get(k)) => router.get(k, follower_reads).await,
                    Ok(Command::Range(lo, hi)) => router.range(lo, hi, follower_reads).await,
                    Ok(_) => "ERROR not supported in cluster mode\n".to_string(),
                },
            }
        };
        w.write_all(reply.as_bytes()).await?;
    }
}
