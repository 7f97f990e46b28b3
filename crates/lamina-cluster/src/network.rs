//! Raft RPCs over TCP: length-prefixed JSON frames on 127.0.0.1 (or any
//! address in the cluster file).
//!
//! A frame is a big-endian `u32` length then that many bytes of JSON; a
//! length over [`MAX_FRAME`] closes the connection. Each request is an
//! [`Envelope`] naming the shard whose Raft group it is for; a member
//! answers a request for a shard it does not serve with
//! [`RpcReply::Refused`], never by handing it to another group. Each
//! request gets one reply on the same connection, in order. A client keeps one connection
//! per target and reconnects after any error; a malformed request closes
//! the connection, it never panics the server.

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use openraft::error::{
    InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, Unreachable,
};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::client::{leader_line, propose, read_local, Group, Read, ReadReply};
use crate::types::{LaminaNode, NodeId, Request, ShardId, TypeConfig};

/// Largest frame accepted or sent (snapshot chunks are configured well
/// below it; JSON spends up to 4 bytes per byte of a chunk).
pub const MAX_FRAME: usize = 32 << 20;

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

/// Writes one frame.
pub async fn write_frame<W, T>(w: &mut W, msg: &T) -> io::Result<()>
where
    W: AsyncWriteExt + Unpin,
    T: Serialize,
{
    let body = serde_json::to_vec(msg).map_err(io::Error::other)?;
    write_raw_frame(w, &body).await
}

/// Reads one frame; `Ok(None)` at a clean end of stream.
pub async fn read_frame<R, T>(r: &mut R) -> io::Result<Option<T>>
where
    R: AsyncReadExt + Unpin,
    T: DeserializeOwned,
{
    match read_raw_frame(r).await? {
        Some(body) => serde_json::from_slice(&body)
            .map(Some)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e)),
        None => Ok(None),
    }
}

/// Reads one frame's body without decoding it; `Ok(None)` at a clean end
/// of stream.
pub async fn read_raw_frame<R>(r: &mut R) -> io::Result<Option<Vec<u8>>>
where
    R: AsyncReadExt + Unpin,
{
    let mut len = [0u8; 4];
    match r.read_exact(&mut len).await {
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let len = u32::from_be_bytes(len) as usize;
    if len > MAX_FRAME {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("frame of {len} bytes over the limit"),
        ));
    }
    // Grown as the bytes arrive, not allocated at the announced length: a
    // peer announcing 32 MiB and sending nothing costs nothing.
    let mut body = Vec::new();
    r.take(len as u64).read_to_end(&mut body).await?;
    if body.len() < len {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            format!("frame cut short: {} of {len} bytes", body.len()),
        ));
    }
    Ok(Some(body))
}

/// Writes one frame whose body is already encoded.
pub async fn write_raw_frame<W>(w: &mut W, body: &[u8]) -> io::Result<()>
where
    W: AsyncWriteExt + Unpin,
{
    if body.len() > MAX_FRAME {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("frame of {} bytes over the limit", body.len()),
        ));
    }
    let len = u32::try_from(body.len()).map_err(io::Error::other)?;
    let mut buf = Vec::with_capacity(4 + body.len());
    buf.extend_from_slice(&len.to_be_bytes());
    buf.extend_from_slice(body);
    w.write_all(&buf).await?;
    w.flush().await
}

/// Accepts connections on `listener` and serves each with `serve` until
/// the task is aborted (which aborts every connection too); a failed accept
/// is logged and retried after 50 ms. `what` names the port in logs.
pub(crate) async fn accept_loop<F, Fut>(listener: TcpListener, what: &'static str, serve: F)
where
    F: Fn(TcpStream) -> Fut,
    Fut: std::future::Future<Output = io::Result<()>> + Send + 'static,
{
    let mut conns = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                match accepted {
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
        }
    }
}

/// The Raft groups a member serves, by shard.
pub type Groups = Arc<BTreeMap<ShardId, Group>>;

/// Serves Raft RPCs from `listener` to the group of each request's shard
/// until the task is aborted (which aborts every connection too).
pub async fn serve_raft(listener: TcpListener, groups: Groups) {
    accept_loop(listener, "raft", move |stream| {
        serve_raft_conn(stream, groups.clone())
    })
    .await
}

async fn serve_raft_conn(mut stream: TcpStream, groups: Groups) -> io::Result<()> {
    stream.set_nodelay(true)?;
    while let Some(Envelope { shard, rpc }) =
        read_frame::<_, Envelope<RpcRequest>>(&mut stream).await?
    {
        let reply = match groups.get(&shard) {
            None => RpcReply::Refused(format!("this member serves no shard {shard}")),
            Some(g) => match rpc {
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
            },
        };
        write_frame(&mut stream, &reply).await?;
    }
    Ok(())
}

/// Makes the connections of one shard's Raft group to its members.
#[derive(Clone)]
pub struct Network {
    shard: ShardId,
}

impl Network {
    /// The network of shard `shard`'s group.
    pub fn new(shard: ShardId) -> Network {
        Network { shard }
    }
}

impl RaftNetworkFactory<TypeConfig> for Network {
    type Network = ShardConnection;

    async fn new_client(&mut self, target: NodeId, node: &LaminaNode) -> ShardConnection {
        ShardConnection {
            shard: self.shard,
            conn: Connection::new(target, node.clone()),
        }
    }
}

/// A group's RPC client of one member: a [`Connection`] whose requests
/// all carry the group's shard.
pub struct ShardConnection {
    shard: ShardId,
    conn: Connection,
}

/// One member's RPC client: a connection made on first use and after
/// every failure.
pub struct Connection {
    target: NodeId,
    node: LaminaNode,
    stream: Option<TcpStream>,
}

impl Connection {
    /// A client of member `target` at `node` (connected on first use).
    pub(crate) fn new(target: NodeId, node: LaminaNode) -> Connection {
        Connection {
            target,
            node,
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
        if res.is_err() {
            // The stream may hold half a frame: never reuse it.
            self.stream = None;
        }
        res
    }

    async fn call_inner(&mut self, req: &Envelope<&RpcRequest>) -> io::Result<RpcReply> {
        let stream = match &mut self.stream {
            Some(s) => s,
            None => {
                let addr: SocketAddr = self.node.raft.parse().map_err(|e| {
                    io::Error::new(
                        io::ErrorKind::InvalidInput,
                        format!("{}: {e}", self.node.raft),
                    )
                })?;
                let s = TcpStream::connect(addr).await?;
                s.set_nodelay(true)?;
                self.stream.insert(s)
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
