//! Raft RPCs over TCP: length-prefixed JSON frames on 127.0.0.1 (or any
//! address in the cluster file).
//!
//! With a secret in the cluster file, every connection starts with the
//! handshake of [`crate::auth`] (the server decodes no frame before it
//! succeeds); without one, frames start at once. A frame is a big-endian
//! `u32` length then that many bytes of JSON ([`crate::frame`]); a length over
//! [`crate::frame::MAX_FRAME`] closes the connection, and so does a body that does not
//! arrive whole within [`PortLimits::request_timeout`] of its length (its
//! buffer grows as bytes arrive, so a length alone costs nothing). Each
//! request is an [`Envelope`] naming the shard whose Raft group it is for;
//! a member answers a request for a shard it does not serve with
//! [`RpcReply::Refused`], never by handing it to another group, and so it
//! answers a Raft RPC whose vote or log ids are absurd (see
//! [`check_ids`]), which never reaches openraft. Each request gets one
//! reply on the same connection, in order. A client keeps one connection
//! per target, reconnects after any error, and after [`RAFT_IDLE_TIMEOUT`]
//! / 2 unused (the server closes a connection idle for
//! [`RAFT_IDLE_TIMEOUT`]); a malformed request closes the connection, it
//! never panics the server. A member holds at most
//! [`PortLimits::max_raft_connections`] connections on the port; one more
//! is closed at once.

use std::io;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use lamina_server::log_limit::{self, LogLimit};
use lamina_server::request_budget::{self, RequestBudget, Share};
use openraft::error::{
    InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, Unreachable,
};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use serde::{Deserialize, Serialize};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::auth::{self, Secret, HANDSHAKE_TIMEOUT};
use crate::frame::{read_frame, read_frame_body, read_frame_len, write_frame};
use crate::group::{leader_line, propose, read_local, Group, Read, ReadReply};
use crate::types::{LaminaNode, LogId, NodeId, Request, ShardId, TypeConfig, MAX_INDEX, MAX_TERM};

/// What travels in a request frame: an RPC and the shard it is for.
#[derive(Debug, Serialize, Deserialize)]
pub struct Envelope<R> {
    /// The shard whose group must handle it (0 in an unsharded cluster).
    pub shard: ShardId,
    /// The RPC.
    pub rpc: R,
}

/// A Raft RPC, or a client request one member hands to another.
#[derive(Debug, Serialize, Deserialize)]
pub enum RpcRequest {
    /// AppendEntries.
    Append(AppendEntriesRequest<TypeConfig>),
    /// RequestVote.
    Vote(VoteRequest<NodeId>),
    /// One chunk of InstallSnapshot.
    Snapshot(InstallSnapshotRequest<TypeConfig>),
    /// Writes a follower forwards to the leader (`forward_writes`).
    Forward {
        /// The forwarding member.
        from: NodeId,
        /// The writes, proposed as one entry.
        request: Request,
    },
    /// A read a member passes to a member of the shard (it is not one, or
    /// it reads a piece of a range that spans shards through the shard's
    /// leader). Served there without passing it on again.
    Read {
        /// The asking member.
        from: NodeId,
        /// What to read.
        read: Read,
        /// Read the state machine as it is (no read index).
        follower: bool,
    },
    /// The `@leader` line of a shard, asked of one of its members.
    Leader {
        /// The asking member.
        from: NodeId,
    },
}

impl RpcRequest {
    /// The member that sent it: every Raft RPC carries its sender's vote
    /// (the leader's for appends and snapshots, the candidate's for a
    /// vote request).
    pub fn sender(&self) -> NodeId {
        let vote = match self {
            RpcRequest::Append(r) => &r.vote,
            RpcRequest::Vote(r) => &r.vote,
            RpcRequest::Snapshot(r) => &r.vote,
            RpcRequest::Forward { from, .. }
            | RpcRequest::Read { from, .. }
            | RpcRequest::Leader { from } => return *from,
        };
        vote.leader_id.node_id
    }
}

/// The reply to an [`RpcRequest`] of the same kind.
#[derive(Debug, Serialize, Deserialize)]
pub enum RpcReply {
    /// To [`RpcRequest::Append`].
    Append(Result<AppendEntriesResponse<NodeId>, RaftError<NodeId>>),
    /// To [`RpcRequest::Vote`].
    Vote(Result<VoteResponse<NodeId>, RaftError<NodeId>>),
    /// To [`RpcRequest::Snapshot`].
    Snapshot(Result<InstallSnapshotResponse<NodeId>, RaftError<NodeId, InstallSnapshotError>>),
    /// To [`RpcRequest::Forward`]: the reply line the client gets.
    Forward(String),
    /// To [`RpcRequest::Read`].
    Read(ReadReply),
    /// To [`RpcRequest::Leader`]: the `@leader` reply line.
    Leader(String),
    /// The member does not serve the envelope's shard: why.
    Refused(String),
}

/// How long a Raft-port connection may stay unused before the server
/// closes it (a client stops reusing one after half of it).
pub const RAFT_IDLE_TIMEOUT: Duration = Duration::from_secs(120);

/// Bounds on a member's client and Raft ports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortLimits {
    /// Open client connections at most; one more is answered
    /// `ERROR too many connections` and closed.
    pub max_client_connections: usize,
    /// Open Raft-port connections at most (other members' Raft groups,
    /// write batchers and reads, and handshakes in progress); one more is
    /// closed at once. Separate from the clients' cap, so that clients
    /// never take the connections replication needs.
    pub max_raft_connections: usize,
    /// A client connection that starts no line for this long is closed
    /// (`None`: never).
    pub idle_timeout: Option<Duration>,
    /// A request begun must arrive whole within this: a client's line
    /// from its first byte, a Raft frame's body from its length.
    pub request_timeout: Duration,
    /// Bytes of Raft frames being received, over all the Raft port's
    /// connections: a frame is counted at its announced length from its
    /// length header until it is decoded, and a frame that would take the
    /// total past this closes its connection (the peer retries).
    pub max_frame_bytes_total: usize,
}

impl Default for PortLimits {
    fn default() -> Self {
        PortLimits {
            max_client_connections: 1024,
            max_raft_connections: 256,
            idle_timeout: Some(Duration::from_secs(300)),
            request_timeout: Duration::from_secs(10),
            max_frame_bytes_total: request_budget::default_limit(),
        }
    }
}

/// Descriptors a member keeps for its own files (each database's tables,
/// logs and manifest) and its connections to other members, beside the
/// connection caps: [`clamp_to_descriptors`] leaves this many per Raft
/// group the member is in, and [`BASE_RESERVE`] more.
pub const GROUP_RESERVE: u64 = 512;
/// Descriptors kept beside the per-group reserve ([`GROUP_RESERVE`]):
/// the listeners, the standard streams, the runtime's own.
pub const BASE_RESERVE: u64 = 64;

/// Makes the two caps of `limits` fit `descriptors` (the soft
/// `RLIMIT_NOFILE`; `None`: unlimited) after the reserve for a member of
/// `groups` Raft groups, as Redis sizes `maxclients`: the Raft port keeps
/// up to a quarter of what is left, the clients get the rest, each at
/// least 16. Returns the warning to log when it had to lower them.
pub fn clamp_to_descriptors(
    limits: &mut PortLimits,
    descriptors: Option<u64>,
    groups: usize,
) -> Option<String> {
    let descriptors = descriptors?;
    let reserve = BASE_RESERVE + GROUP_RESERVE * groups as u64;
    let wanted = limits.max_client_connections as u64 + limits.max_raft_connections as u64;
    if wanted + reserve <= descriptors {
        return None;
    }
    let room = descriptors.saturating_sub(reserve);
    let raft = (limits.max_raft_connections as u64).min(room / 4).max(16);
    let clients = room.saturating_sub(raft).max(16);
    let warning = format!(
        "the descriptor limit is {descriptors}: {reserve} are kept for this member's files and peers, so the caps are {clients} client connections (asked: {}) and {raft} Raft connections (asked: {}); raise `ulimit -n` for more",
        limits.max_client_connections, limits.max_raft_connections
    );
    limits.max_client_connections = usize::try_from(clients).unwrap_or(usize::MAX);
    limits.max_raft_connections = usize::try_from(raft).unwrap_or(usize::MAX);
    Some(warning)
}

/// Accepts connections on `listener` and serves each with `serve` until
/// the task is aborted (which aborts every connection too), at most `cap`
/// at once: one more goes to `refuse` (which may write a line) and is
/// closed. A failed accept (out of descriptors, say) is logged and
/// retried after 50 ms. `what` names the port in logs.
pub(crate) async fn accept_loop<F, Fut, R, RFut>(
    listener: TcpListener,
    what: &'static str,
    cap: usize,
    serve: F,
    refuse: R,
) where
    F: Fn(TcpStream) -> Fut,
    Fut: std::future::Future<Output = io::Result<()>> + Send + 'static,
    R: Fn(TcpStream) -> RFut,
    RFut: std::future::Future<Output = ()> + Send + 'static,
{
    let mut conns = JoinSet::new();
    // Refusals are bounded by the same deadline as everything else and
    // counted apart, so that a flood of them cannot grow without bound.
    let mut refusals = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                match accepted {
                    Ok((stream, peer)) if conns.len() >= cap => {
                        if let Some(n) = OVER_CAP.allow() {
                            tracing::warn!(
                                "{what} port: {peer} refused, {cap} connections open (the cap){}",
                                log_limit::held_back(n)
                            );
                        }
                        if refusals.len() < cap {
                            let refusal = refuse(stream);
                            refusals.spawn(async move {
                                let _ = tokio::time::timeout(Duration::from_secs(1), refusal).await;
                            });
                        }
                    }
                    Ok((stream, _)) => {
                        let conn = serve(stream);
                        conns.spawn(async move {
                            if let Err(e) = conn.await {
                                tracing::debug!("{what} connection closed: {e}");
                            }
                        });
                    }
                    Err(e) => {
                        tracing::warn!("{what} accept: {e}");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                }
            }
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
            Some(_) = refusals.join_next(), if !refusals.is_empty() => {}
        }
    }
}

/// `fut`, or an error of kind `TimedOut` saying `what` after `limit`.
pub(crate) async fn within<T>(
    limit: Duration,
    what: &str,
    fut: impl std::future::Future<Output = io::Result<T>>,
) -> io::Result<T> {
    match tokio::time::timeout(limit, fut).await {
        Ok(r) => r,
        Err(_) => Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!("{what} took over {} s", limit.as_secs_f64()),
        )),
    }
}

/// The Raft groups a member serves, by shard.
pub type Groups = Arc<BTreeMap<ShardId, Group>>;

// Refusals' log lines, each kind at most once a minute
// ([`lamina_server::log_limit`]).
static OVER_CAP: LogLimit = LogLimit::new();
static FAILED_HANDSHAKES: LogLimit = LogLimit::new();
static OVER_BUDGET: LogLimit = LogLimit::new();
static BAD_IDS: LogLimit = LogLimit::new();

/// Serves Raft RPCs from `listener` to the group of each request's shard
/// until the task is aborted (which aborts every connection too): with a
/// `secret`, only to peers that pass the handshake.
pub async fn serve_raft(
    listener: TcpListener,
    groups: Groups,
    secret: Option<Secret>,
    limits: PortLimits,
) {
    let cap = limits.max_raft_connections;
    let frames = Arc::new(RequestBudget::new(limits.max_frame_bytes_total));
    accept_loop(
        listener,
        "raft",
        cap,
        move |stream| {
            serve_raft_conn(
                stream,
                groups.clone(),
                secret.clone(),
                limits.clone(),
                frames.share(),
            )
        },
        |stream| async move { drop(stream) },
    )
    .await
}

async fn serve_raft_conn(
    mut stream: TcpStream,
    groups: Groups,
    secret: Option<Secret>,
    limits: PortLimits,
    mut frame_bytes: Share,
) -> io::Result<()> {
    stream.set_nodelay(true)?;
    if let Some(secret) = &secret {
        if let Err(e) = within(
            HANDSHAKE_TIMEOUT,
            "the handshake",
            auth::accept(&mut stream, secret),
        )
        .await
        {
            let peer = stream
                .peer_addr()
                .map(|a| a.to_string())
                .unwrap_or_default();
            if let Some(n) = FAILED_HANDSHAKES.allow() {
                tracing::warn!("raft port: {peer} refused: {e}{}", log_limit::held_back(n));
            }
            return Err(e);
        }
    }
    loop {
        let Some(len) = within(
            RAFT_IDLE_TIMEOUT,
            "an idle wait",
            read_frame_len(&mut stream),
        )
        .await?
        else {
            return Ok(());
        };
        if let Err(over) = frame_bytes.hold(len) {
            let peer = stream
                .peer_addr()
                .map(|a| a.to_string())
                .unwrap_or_default();
            if let Some(n) = OVER_BUDGET.allow() {
                tracing::warn!(
                    "raft port: {peer}: a frame of {len} bytes refused: {over}{}",
                    log_limit::held_back(n)
                );
            }
            return Err(io::Error::new(io::ErrorKind::OutOfMemory, over));
        }
        let body = within(
            limits.request_timeout,
            "a frame's body",
            read_frame_body(&mut stream, len),
        )
        .await?;
        let Envelope { shard, rpc } = serde_json::from_slice::<Envelope<RpcRequest>>(&body)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        drop(body);
        // Shrinking a share cannot fail.
        let _ = frame_bytes.hold(0);
        let reply = match groups.get(&shard) {
            None => RpcReply::Refused(format!("this member serves no shard {shard}")),
            Some(g) => match check_ids(&rpc, g) {
                Err(why) => {
                    let peer = stream
                        .peer_addr()
                        .map(|a| a.to_string())
                        .unwrap_or_default();
                    if let Some(n) = BAD_IDS.allow() {
                        tracing::warn!(
                            "raft port: {peer}: shard {shard}: {why}{}",
                            log_limit::held_back(n)
                        );
                    }
                    RpcReply::Refused(why)
                }
                Ok(()) => serve_rpc(g, rpc).await,
            },
        };
        write_frame(&mut stream, &reply).await?;
    }
}

/// The reply of group `g` to `rpc`.
async fn serve_rpc(g: &Group, rpc: RpcRequest) -> RpcReply {
    match rpc {
        RpcRequest::Append(r) => RpcReply::Append(g.raft.append_entries(r).await),
        RpcRequest::Vote(r) => RpcReply::Vote(g.raft.vote(r).await),
        RpcRequest::Snapshot(r) => RpcReply::Snapshot(g.raft.install_snapshot(r).await),
        RpcRequest::Forward { request, .. } => RpcReply::Forward(match g.check_running() {
            Ok(()) => propose(&g.raft, request).await,
            Err(line) => line,
        }),
        RpcRequest::Read { read, follower, .. } => {
            RpcReply::Read(read_local(g, &read, follower).await)
        }
        RpcRequest::Leader { .. } => RpcReply::Leader(leader_line(g)),
    }
}

/// How far above this member's own term (its vote's) an RPC's term may
/// be: terms grow by one an election, so no honest member is 2^32
/// elections ahead.
pub const MAX_TERM_JUMP: u64 = 1 << 32;

/// Checks every vote and log id of a Raft RPC against group `g`'s own
/// term before openraft sees it: a term over [`MAX_TERM`] or more than
/// [`MAX_TERM_JUMP`] above the member's own, an index over
/// [`MAX_INDEX`], is refused with why. No honest member sends one; a
/// forged one (`vote.term = 2^64 - 1`) would make openraft overflow
/// `term + 1` at the next election and panic, at every restart too,
/// since the vote is stored. Client requests carry no ids and pass.
pub fn check_ids(rpc: &RpcRequest, g: &Group) -> std::result::Result<(), String> {
    let term = g.raft.metrics().borrow().current_term;
    let max_term = term.saturating_add(MAX_TERM_JUMP).min(MAX_TERM);
    let check_term = |what: &str, t: u64| {
        if t > max_term {
            Err(format!(
                "refused: {what} has term {t}, this member is at term {term}"
            ))
        } else {
            Ok(())
        }
    };
    let check_log_id = |what: &str, id: Option<&LogId>| match id {
        None => Ok(()),
        Some(id) if id.index > MAX_INDEX => Err(format!(
            "refused: {what} has index {}, over {MAX_INDEX}",
            id.index
        )),
        Some(id) => check_term(what, id.leader_id.term),
    };
    match rpc {
        RpcRequest::Append(r) => {
            check_term("the vote", r.vote.leader_id.term)?;
            check_log_id("prev_log_id", r.prev_log_id.as_ref())?;
            check_log_id("leader_commit", r.leader_commit.as_ref())?;
            for e in &r.entries {
                check_log_id("an entry", Some(&e.log_id))?;
            }
            Ok(())
        }
        RpcRequest::Vote(r) => {
            check_term("the vote", r.vote.leader_id.term)?;
            check_log_id("last_log_id", r.last_log_id.as_ref())
        }
        RpcRequest::Snapshot(r) => {
            check_term("the vote", r.vote.leader_id.term)?;
            check_log_id("the snapshot's last_log_id", r.meta.last_log_id.as_ref())?;
            check_log_id(
                "the snapshot's membership",
                r.meta.last_membership.log_id().as_ref(),
            )
        }
        RpcRequest::Forward { .. } | RpcRequest::Read { .. } | RpcRequest::Leader { .. } => Ok(()),
    }
}

/// Makes the connections of one shard's Raft group to its members.
#[derive(Clone)]
pub struct Network {
    shard: ShardId,
    secret: Option<Secret>,
}

impl Network {
    /// The network of shard `shard`'s group, authenticated with `secret`
    /// when there is one.
    pub fn new(shard: ShardId, secret: Option<Secret>) -> Network {
        Network { shard, secret }
    }
}

impl RaftNetworkFactory<TypeConfig> for Network {
    type Network = ShardConnection;

    async fn new_client(&mut self, target: NodeId, node: &LaminaNode) -> ShardConnection {
        ShardConnection {
            shard: self.shard,
            conn: Connection::new(target, node.clone(), self.secret.clone()),
        }
    }
}

/// A group's RPC client of one member: a [`Connection`] whose requests
/// all carry the group's shard.
pub struct ShardConnection {
    shard: ShardId,
    conn: Connection,
}

/// One member's RPC client: a connection made (and authenticated, with a
/// secret) on first use, after every failure, and after
/// [`RAFT_IDLE_TIMEOUT`] / 2 unused, before the server may have closed it.
pub struct Connection {
    target: NodeId,
    node: LaminaNode,
    secret: Option<Secret>,
    /// The stream and when its last RPC ended.
    stream: Option<(TcpStream, Instant)>,
}

impl Connection {
    /// A client of member `target` at `node` (connected on first use).
    pub(crate) fn new(target: NodeId, node: LaminaNode, secret: Option<Secret>) -> Connection {
        Connection {
            target,
            node,
            secret,
            stream: None,
        }
    }

    /// The member this connection calls.
    pub(crate) fn target(&self) -> NodeId {
        self.target
    }

    /// One RPC for shard `shard`, at most `ttl` long; the connection is
    /// dropped after any failure.
    pub(crate) async fn call(
        &mut self,
        shard: ShardId,
        req: &RpcRequest,
        ttl: Duration,
    ) -> io::Result<RpcReply> {
        let envelope = Envelope { shard, rpc: req };
        let res = tokio::time::timeout(ttl, self.call_inner(&envelope)).await;
        let res = match res {
            Ok(r) => r,
            Err(_) => Err(io::Error::new(io::ErrorKind::TimedOut, "rpc timed out")),
        };
        match &mut self.stream {
            // The stream may hold half a frame: never reuse it.
            _ if res.is_err() => self.stream = None,
            Some((_, used)) => *used = Instant::now(),
            None => {}
        }
        res
    }

    async fn call_inner(&mut self, req: &Envelope<&RpcRequest>) -> io::Result<RpcReply> {
        if self
            .stream
            .as_ref()
            .is_some_and(|(_, used)| used.elapsed() >= RAFT_IDLE_TIMEOUT / 2)
        {
            self.stream = None;
        }
        let stream = match &mut self.stream {
            Some((s, _)) => s,
            None => {
                let addr: SocketAddr = self.node.raft.parse().map_err(|e| {
                    io::Error::new(
                        io::ErrorKind::InvalidInput,
                        format!("{}: {e}", self.node.raft),
                    )
                })?;
                let mut s = TcpStream::connect(addr).await?;
                s.set_nodelay(true)?;
                if let Some(secret) = &self.secret {
                    auth::connect(&mut s, secret).await?;
                }
                &mut self.stream.insert((s, Instant::now())).0
            }
        };
        write_frame(stream, req).await?;
        read_frame(stream)
            .await?
            .ok_or_else(|| io::Error::new(io::ErrorKind::UnexpectedEof, "connection closed"))
    }
}

/// A reply that is not the answer to the request: of the wrong kind, or
/// the target's refusal to serve the shard.
fn unexpected<E: std::error::Error>(reply: RpcReply) -> RPCError<NodeId, LaminaNode, E> {
    let why = match reply {
        RpcReply::Refused(why) => why,
        _ => "reply of the wrong kind".to_string(),
    };
    RPCError::Network(NetworkError::new(&io::Error::new(
        io::ErrorKind::InvalidData,
        why,
    )))
}

fn unreachable<E: std::error::Error>(e: &io::Error) -> RPCError<NodeId, LaminaNode, E> {
    RPCError::Unreachable(Unreachable::new(e))
}

impl ShardConnection {
    fn remote<E: std::error::Error>(&self, e: E) -> RPCError<NodeId, LaminaNode, E> {
        RPCError::RemoteError(RemoteError::new_with_node(
            self.conn.target,
            self.conn.node.clone(),
            e,
        ))
    }
}

impl RaftNetwork<TypeConfig> for ShardConnection {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<NodeId>, RPCError<NodeId, LaminaNode, RaftError<NodeId>>>
    {
        match self
            .conn
            .call(self.shard, &RpcRequest::Append(rpc), option.hard_ttl())
            .await
        {
            Ok(RpcReply::Append(r)) => r.map_err(|e| self.remote(e)),
            Ok(other) => Err(unexpected(other)),
            Err(e) => Err(unreachable(&e)),
        }
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<
        InstallSnapshotResponse<NodeId>,
        RPCError<NodeId, LaminaNode, RaftError<NodeId, InstallSnapshotError>>,
    > {
        match self
            .conn
            .call(self.shard, &RpcRequest::Snapshot(rpc), option.hard_ttl())
            .await
        {
            Ok(RpcReply::Snapshot(r)) => r.map_err(|e| self.remote(e)),
            Ok(other) => Err(unexpected(other)),
            Err(e) => Err(unreachable(&e)),
        }
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        option: RPCOption,
    ) -> Result<VoteResponse<NodeId>, RPCError<NodeId, LaminaNode, RaftError<NodeId>>> {
        match self
            .conn
            .call(self.shard, &RpcRequest::Vote(rpc), option.hard_ttl())
            .await
        {
            Ok(RpcReply::Vote(r)) => r.map_err(|e| self.remote(e)),
            Ok(other) => Err(unexpected(other)),
            Err(e) => Err(unreachable(&e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[test]
    fn caps_fit_the_descriptor_limit_after_the_reserve() {
        let asked = PortLimits::default();
        for (limit, groups) in [(None, 1), (Some(20_000), 1), (Some(1_000_000), 8)] {
            let mut l = asked.clone();
            assert_eq!(clamp_to_descriptors(&mut l, limit, groups), None);
            assert_eq!(l, asked);
        }
        let mut l = asked.clone();
        let warning = clamp_to_descriptors(&mut l, Some(1024), 1).unwrap();
        let reserve = BASE_RESERVE + GROUP_RESERVE;
        assert_eq!(
            (l.max_client_connections + l.max_raft_connections) as u64,
            1024 - reserve
        );
        assert!(l.max_raft_connections <= l.max_client_connections / 2);
        for n in [
            1024,
            reserve,
            l.max_client_connections as u64,
            l.max_raft_connections as u64,
        ] {
            assert!(warning.contains(&n.to_string()), "{n}: {warning}");
        }
        // Nothing left after the reserve: 16 each, still with a warning.
        let mut l = asked.clone();
        assert!(clamp_to_descriptors(&mut l, Some(256), 4).is_some());
        assert_eq!((l.max_client_connections, l.max_raft_connections), (16, 16));
    }

    /// Whether the server closed `s` within `wait` (a read of 0 bytes or
    /// an error), not merely stayed silent.
    async fn closed_within(s: &mut TcpStream, wait: Duration) -> bool {
        let mut byte = [0u8; 1];
        matches!(
            tokio::time::timeout(wait, s.read(&mut byte)).await,
            Ok(Ok(0) | Err(_))
        )
    }

    #[tokio::test]
    async fn frames_being_received_share_one_budget() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let limits = PortLimits {
            max_frame_bytes_total: 1 << 20,
            ..PortLimits::default()
        };
        let server = tokio::spawn(serve_raft(listener, Arc::default(), None, limits));
        // A frame announced at 700 KiB, 10 bytes of it sent: held.
        let announce = |len: u32| async move {
            let mut s = TcpStream::connect(addr).await.unwrap();
            s.write_all(&len.to_be_bytes()).await.unwrap();
            s.write_all(&[b'{'; 10]).await.unwrap();
            s
        };
        let mut first = announce(700 << 10).await;
        assert!(!closed_within(&mut first, Duration::from_millis(300)).await);
        // A second one would take the total past 1 MiB: closed at once.
        let mut second = announce(700 << 10).await;
        assert!(closed_within(&mut second, Duration::from_secs(5)).await);
        // A small one still fits.
        let mut small = announce(200 << 10).await;
        assert!(!closed_within(&mut small, Duration::from_millis(300)).await);
        // The first one's bytes are given back when it goes.
        drop(first);
        drop(small);
        let mut third = None;
        for _ in 0..50 {
            let mut s = announce(700 << 10).await;
            if !closed_within(&mut s, Duration::from_millis(200)).await {
                third = Some(s);
                break;
            }
        }
        assert!(third.is_some(), "the budget was not given back");
        server.abort();
    }

    #[tokio::test]
    async fn frames_are_bounded_and_checked() {
        let (mut a, mut b) = tokio::io::duplex(1 << 16);
        write_frame(&mut a, &vec![1u32, 2, 3]).await.unwrap();
        let got: Option<Vec<u32>> = read_frame(&mut b).await.unwrap();
        assert_eq!(got, Some(vec![1, 2, 3]));
        // An oversized length is refused before anything is allocated.
        a.write_all(&u32::MAX.to_be_bytes()).await.unwrap();
        assert!(read_frame::<_, Vec<u32>>(&mut b).await.is_err());
        // Garbage JSON is an error, not a panic.
        let (mut a, mut b) = tokio::io::duplex(1 << 16);
        a.write_all(&3u32.to_be_bytes()).await.unwrap();
        a.write_all(b"{{{").await.unwrap();
        assert!(read_frame::<_, Envelope<RpcRequest>>(&mut b).await.is_err());
        drop(a);
        assert!(read_frame::<_, Envelope<RpcRequest>>(&mut b)
            .await
            .unwrap()
            .is_none());
    }
}
