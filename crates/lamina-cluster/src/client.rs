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
//! | `@leader` | `LEADER ID HOST:PORT` (the leader this member knows of, its client address), `LEADER ID` if it is not in the membership, or `LEADER unknown` (answered locally: may be stale) |
//! | `@sync` | `@sync` |
//! | `quit`, `@end` | `@bye`, then the connection closes (`lamina client` ends its input with `@end`) |
//!
//! Errors are one `ERROR ...` line (a line over [`MAX_LINE`] bytes is
//! skipped and answered `ERROR line longer than 4096 bytes`). On a member that is not the leader,
//! writes and linearizable reads answer `ERROR not leader; leader is
//! HOST:PORT` (the leader's client address) or `ERROR not leader; leader
//! unknown`; with `forward_writes` in the cluster file, writes are sent
//! on to the leader instead and answered with its reply. Only `OK` acknowledges a write: after any `ERROR` other than
//! a parse error the write may or may not have been committed.

use std::io;
use std::time::Duration;

use lamina_server::parse::{parse_line, Command};
use openraft::error::{CheckIsLeaderError, ClientWriteError, ForwardToLeader, RaftError};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot};

use crate::network::{Connection, RpcReply, RpcRequest};
use crate::store::StateMachine;
use crate::types::{LaminaNode, NodeId, Op, Raft, Request};

/// Longest command line.
pub const MAX_LINE: usize = 4096;
/// How long a write or a read barrier may take before the client is told
/// `ERROR timeout`.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// The DSL's key encoding (as `lamina-server`): big-endian `i32` with the
/// sign bit flipped, so byte order is numeric order.
pub fn encode_i32(v: i32) -> [u8; 4] {
    ((v as u32) ^ 0x8000_0000).to_be_bytes()
}

/// Inverse of [`encode_i32`].
pub fn decode_i32(b: &[u8]) -> Option<i32> {
    let arr: [u8; 4] = b.try_into().ok()?;
    Some((u32::from_be_bytes(arr) ^ 0x8000_0000) as i32)
}

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

fn not_leader(f: &ForwardToLeader<NodeId, LaminaNode>) -> String {
    match &f.leader_node {
        Some(n) => format!("ERROR not leader; leader is {}\n", n.client),
        None => "ERROR not leader; leader unknown\n".to_string(),
    }
}

/// The reply to `@leader`: this member's view of the leader.
fn leader_line(raft: &Raft) -> String {
    let m = raft.metrics().borrow().clone();
    match m.current_leader {
        None => "LEADER unknown\n".to_string(),
        Some(id) => match m.membership_config.membership().get_node(&id) {
            Some(n) => format!("LEADER {id} {}\n", n.client),
            None => format!("LEADER {id}\n"),
        },
    }
}

/// Most writes proposed as one log entry by the [`write_batcher`].
pub const MAX_WRITE_BATCH: usize = 256;

/// A write waiting for the batcher, with where its reply line goes.
pub type PendingWrite = (Op, oneshot::Sender<String>);

/// What a connection needs.
#[derive(Clone)]
pub struct ClientContext {
    /// This member's Raft.
    pub raft: Raft,
    /// This member's state machine.
    pub sm: StateMachine,
    /// The [`write_batcher`]'s queue.
    pub writes: mpsc::Sender<PendingWrite>,
}

/// Group commit: takes the writes that queued up while the previous
/// proposal was in flight (at most [`MAX_WRITE_BATCH`]), proposes them as
/// one log entry (one [`Request`], applied as one `WriteBatch`) and gives
/// every writer the same reply line. With `forward`, a member that knows
/// another member is the leader sends the batch there instead (one RPC
/// over the Raft port; the leader proposes it as one entry) and relays the
/// leader's reply. It forwards only when it does not believe itself the
/// leader, before proposing anything: a write proposed here and then
/// refused (leadership lost) may still commit, and forwarding it too
/// could apply it twice. Runs until the queue closes or the task is
/// aborted.
pub async fn write_batcher(raft: Raft, mut queue: mpsc::Receiver<PendingWrite>, forward: bool) {
    let mut batch = Vec::with_capacity(MAX_WRITE_BATCH);
    let mut to_leader: Option<Connection> = None;
    while queue.recv_many(&mut batch, MAX_WRITE_BATCH).await > 0 {
        let (ops, waiters): (Vec<Op>, Vec<oneshot::Sender<String>>) = batch.drain(..).unzip();
        let request = Request { ops };
        let reply = match other_leader(&raft).filter(|_| forward) {
            Some((me, id, node)) => {
                if to_leader.as_ref().is_none_or(|c| c.target() != id) {
                    to_leader = Some(Connection::new(id, node));
                }
                match to_leader.as_mut() {
                    Some(c) => forward_to(c, me, request).await,
                    None => propose(&raft, request).await,
                }
            }
            None => propose(&raft, request).await,
        };
        for w in waiters {
            // A writer that went away needs no reply.
            let _ = w.send(reply.clone());
        }
    }
}

/// This member's id, and the leader's when it knows a leader that is
/// another member.
fn other_leader(raft: &Raft) -> Option<(NodeId, NodeId, LaminaNode)> {
    let m = raft.metrics().borrow().clone();
    let leader = m.current_leader.filter(|&l| l != m.id)?;
    let node = m.membership_config.membership().get_node(&leader)?.clone();
    Some((m.id, leader, node))
}

/// Sends a batch to the leader; the leader's reply line.
async fn forward_to(conn: &mut Connection, me: NodeId, request: Request) -> String {
    let leader = conn.target();
    match conn
        .call(&RpcRequest::Forward { from: me, request }, REQUEST_TIMEOUT)
        .await
    {
        Ok(RpcReply::Forward(line)) => line,
        Ok(_) => format!(
            "ERROR forwarding to leader {leader}: reply of the wrong kind; the write may or may not be committed\n"
        ),
        Err(e) => format!(
            "ERROR forwarding to leader {leader}: {e}; the write may or may not be committed\n"
        ),
    }
}

/// Serves clients from `listener` until the task is aborted (which aborts
/// every connection too).
pub async fn serve_clients(listener: TcpListener, ctx: ClientContext) {
    crate::network::accept_loop(listener, "client", move |stream| {
        serve_client(stream, ctx.clone())
    })
    .await
}

async fn serve_client(stream: TcpStream, ctx: ClientContext) -> io::Result<()> {
    stream.set_nodelay(true)?;
    let (r, mut w) = stream.into_split();
    let mut r = BufReader::new(r);
    let mut follower_reads = false;
    let mut line = Vec::new();
    loop {
        line.clear();
        let n = (&mut r)
            .take(MAX_LINE as u64 + 1)
            .read_until(b'\n', &mut line)
            .await?;
        if n == 0 {
            return Ok(());
        }
        if line.last() != Some(&b'\n') && line.len() > MAX_LINE {
            // Skip the rest of the line without holding it, then go on.
            loop {
                let buf = r.fill_buf().await?;
                if buf.is_empty() {
                    return Ok(());
                }
                match buf.iter().position(|&b| b == b'\n') {
                    Some(i) => {
                        r.consume(i + 1);
                        break;
                    }
                    None => {
                        let n = buf.len();
                        r.consume(n);
                    }
                }
            }
            w.write_all(format!("ERROR line longer than {MAX_LINE} bytes\n").as_bytes())
                .await?;
            continue;
        }
        let text = line.trim_ascii();
        let reply = match text {
            b"@follower-reads on" => {
                follower_reads = true;
                "OK\n".to_string()
            }
            b"@follower-reads off" => {
                follower_reads = false;
                "OK\n".to_string()
            }
            b"@leader" => leader_line(&ctx.raft),
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
                    write(
                        &ctx,
                        Op::Put {
                            key: encode_i32(k).to_vec(),
                            value: encode_i32(v).to_vec(),
                        },
                    )
                    .await
                }
                Ok(Command::Delete(k)) => {
                    write(
                        &ctx,
                        Op::Delete {
                            key: encode_i32(k).to_vec(),
                        },
                    )
                    .await
                }
                Ok(Command::Get(k)) => match read_barrier(&ctx, follower_reads).await {
                    Err(e) => e,
                    Ok(()) => match ctx.sm.get(&encode_i32(k)) {
                        Ok(Some(v)) => {
                            let mut s = String::new();
                            push_datum(&mut s, &v);
                            s.push('\n');
                            s
                        }
                        Ok(None) => "\n".to_string(),
                        Err(e) => format!("ERROR get failed: {e}\n"),
                    },
                },
                Ok(Command::Range(lo, hi)) => match read_barrier(&ctx, follower_reads).await {
                    Err(e) => e,
                    Ok(()) if lo >= hi => "\n".to_string(),
                    Ok(()) => match ctx.sm.range(&encode_i32(lo), &encode_i32(hi)) {
                        Ok(pairs) => {
                            let mut s = String::new();
                            for (i, (k, v)) in pairs.iter().enumerate() {
                                if i > 0 {
                                    s.push(' ');
                                }
                                push_datum(&mut s, k);
                                s.push(':');
                                push_datum(&mut s, v);
                            }
                            s.push('\n');
                            s
                        }
                        Err(e) => format!("ERROR range failed: {e}\n"),
                    },
                },
                Ok(_) => "ERROR not supported in cluster mode\n".to_string(),
            },
        };
        w.write_all(reply.as_bytes()).await?;
    }
}

/// Queues one write for the batcher; its reply line.
async fn write(ctx: &ClientContext, op: Op) -> String {
    let (tx, rx) = oneshot::channel();
    if ctx.writes.send((op, tx)).await.is_err() {
        return "ERROR shutting down\n".to_string();
    }
    match rx.await {
        Ok(reply) => reply,
        Err(_) => "ERROR shutting down; the write may or may not be committed\n".to_string(),
    }
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

/// For a linearizable read, confirms leadership with a quorum and waits
/// until the state machine has applied everything committed before the
/// read arrived (openraft's read index); nothing for a follower read.
async fn read_barrier(ctx: &ClientContext, follower_reads: bool) -> Result<(), String> {
    if follower_reads {
        return Ok(());
    }
    match tokio::time::timeout(REQUEST_TIMEOUT, ctx.raft.ensure_linearizable()).await {
        Err(_) => Err("ERROR timeout\n".to_string()),
        Ok(Ok(_)) => Ok(()),
        Ok(Err(RaftError::APIError(CheckIsLeaderError::ForwardToLeader(f)))) => Err(not_leader(&f)),
        Ok(Err(e)) => Err(format!("ERROR raft: {e}\n")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn i32_keys_keep_numeric_order() {
        let vals = [i32::MIN, -5, -1, 0, 1, 7, i32::MAX];
        for w in vals.windows(2) {
            assert!(encode_i32(w[0]) < encode_i32(w[1]));
        }
        for v in vals {
            assert_eq!(decode_i32(&encode_i32(v)), Some(v));
        }
    }
}
