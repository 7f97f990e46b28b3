//! A proxy for the Raft traffic of a test cluster, able to cut any link.
//!
//! Each member advertises (as its `raft` address in the cluster file) a
//! port of the proxy, and listens itself on `raft_listen`; the proxy
//! forwards every frame to the member. It reads each request frame whole
//! to learn its sender ([`RpcRequest::sender`]), so it can drop the
//! traffic of one directed link (`from → to`) while others flow: a cut
//! link closes the connection instead of delivering a request, or instead
//! of delivering the reply to one already delivered (the request took
//! effect, the sender never hears so), and every later connection on it
//! is closed at its first request until the link is healed. With the
//! cluster's secret it ends each side's handshake itself ([`crate::auth`]:
//! the server's to the sender, the client's to the member).

use std::collections::HashSet;
use std::io;
use std::sync::Arc;

use parking_lot::RwLock;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

use crate::auth::{self, Secret};
use crate::frame::{read_raw_frame, write_raw_frame};
use crate::network::{accept_loop, Envelope, RpcRequest};
use crate::types::NodeId;

/// The directed links currently cut.
type Cuts = Arc<RwLock<HashSet<(NodeId, NodeId)>>>;

/// A running proxy; dropping it stops it.
pub struct Proxy {
    cuts: Cuts,
    tasks: Vec<JoinHandle<()>>,
}

impl Proxy {
    /// Serves, for each `(member, listener, upstream)`, the connections
    /// to `listener` by forwarding them to `upstream` (the member's
    /// `raft_listen` address), authenticated with `secret` on both sides
    /// when there is one.
    pub fn start(routes: Vec<(NodeId, TcpListener, String)>, secret: Option<Secret>) -> Proxy {
        let cuts: Cuts = Arc::default();
        let tasks = routes
            .into_iter()
            .map(|(to, listener, upstream)| {
                let cuts = cuts.clone();
                let secret = secret.clone();
                tokio::spawn(accept_loop(
                    listener,
                    "proxy",
                    usize::MAX,
                    move |down| forward(down, to, upstream.clone(), cuts.clone(), secret.clone()),
                    |down| async move { drop(down) },
                ))
            })
            .collect();
        Proxy { cuts, tasks }
    }

    /// Cuts the link `from → to` (requests from `from` to `to` and their
    /// replies).
    pub fn cut(&self, from: NodeId, to: NodeId) {
        self.cuts.write().insert((from, to));
    }

    /// Cuts every link to and from `node`.
    pub fn isolate(&self, node: NodeId, members: &[NodeId]) {
        for &m in members.iter().filter(|&&m| m != node) {
            self.cut(node, m);
            self.cut(m, node);
        }
    }

    /// Heals every link.
    pub fn heal(&self) {
        self.cuts.write().clear();
    }

    fn is_cut(cuts: &Cuts, from: NodeId, to: NodeId) -> bool {
        cuts.read().contains(&(from, to))
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

async fn forward(
    mut down: TcpStream,
    to: NodeId,
    upstream: String,
    cuts: Cuts,
    secret: Option<Secret>,
) -> io::Result<()> {
    down.set_nodelay(true)?;
    if let Some(secret) = &secret {
        auth::accept(&mut down, secret).await?;
    }
    let mut up: Option<TcpStream> = None;
    while let Some(req) = read_raw_frame(&mut down).await? {
        let from = serde_json::from_slice::<Envelope<RpcRequest>>(&req)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?
            .rpc
            .sender();
        if Proxy::is_cut(&cuts, from, to) {
            return Ok(());
        }
        let stream = match &mut up {
            Some(s) => s,
            None => {
                let mut s = TcpStream::connect(&upstream).await?;
                s.set_nodelay(true)?;
                if let Some(secret) = &secret {
                    auth::connect(&mut s, secret).await?;
                }
                up.insert(s)
            }
        };
        write_raw_frame(stream, &req).await?;
        let Some(reply) = read_raw_frame(stream).await? else {
            return Ok(());
        };
        if Proxy::is_cut(&cuts, to, from) || Proxy::is_cut(&cuts, from, to) {
            return Ok(());
        }
        write_raw_frame(&mut down, &reply).await?;
    }
    Ok(())
}
