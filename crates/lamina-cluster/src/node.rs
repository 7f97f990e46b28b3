//! One cluster member: its Raft groups (one per shard it is in, each
//! with its databases), its two listeners.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use lamina::Options;
use openraft::error::{InitializeError, RaftError};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::client::{
    serve_clients, write_batcher, BatchTarget, Place, RemoteShard, Route, Router, MAX_WRITE_BATCH,
};
use crate::config::ClusterConfig;
use crate::error::{ClusterError, Result};
use crate::group::Group;
use crate::network::{serve_raft, Network, PortLimits};
use crate::store::{LogStore, StateMachine};
use crate::types::{NodeId, Raft, ShardId};

/// How a member is started.
#[derive(Clone)]
pub struct NodeOptions {
    /// This member's id in `cluster`.
    pub id: NodeId,
    /// The cluster file.
    pub cluster: ClusterConfig,
    /// Data directory: `raft-log/`, `sm/`, `snapshots/` (unsharded), or
    /// one `shard-S/` holding those for each shard the member is in.
    pub dir: PathBuf,
    /// Engine options of every database (their sync mode is forced to
    /// `always`).
    pub engine: Options,
    /// Connection caps and deadlines of the client and Raft ports.
    pub limits: PortLimits,
}

/// One of a member's Raft groups with its log.
struct LocalGroup {
    group: Group,
    log: LogStore,
}

/// A running member. [`ClusterNode::shutdown`] stops it and closes its
/// databases; dropping it without that leaves tasks running until the
/// runtime ends.
pub struct ClusterNode {
    id: NodeId,
    /// The group of the lowest-numbered shard this member is in.
    primary: Group,
    groups: BTreeMap<ShardId, LocalGroup>,
    tasks: Vec<JoinHandle<()>>,
    cluster: ClusterConfig,
}

/// Refuses a data directory laid out for the other kind of cluster file
/// (a sharded file over an unsharded member's data, or the reverse):
/// opening it would silently start empty groups beside the data.
fn check_layout(cluster: &ClusterConfig, dir: &Path) -> Result<()> {
    let unsharded_data = dir.join("raft-log").exists();
    let shard_dirs = match std::fs::read_dir(dir) {
        Ok(entries) => entries
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().starts_with("shard-"))
            .count(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
        Err(e) => return Err(ClusterError::io(format!("read {}", dir.display()), e)),
    };
    if cluster.is_sharded() && unsharded_data {
        return Err(ClusterError::Config(format!(
            "{} holds the data of an unsharded member (raft-log/), but the cluster file has [[shard]] tables; a cluster cannot be resharded in place",
            dir.display()
        )));
    }
    if !cluster.is_sharded() && shard_dirs > 0 {
        return Err(ClusterError::Config(format!(
            "{} holds the data of a sharded member (shard-*/), but the cluster file has no [[shard]] table",
            dir.display()
        )));
    }
    Ok(())
}

impl ClusterNode {
    /// Starts the member, binding the addresses the cluster file gives it.
    pub async fn start(opts: NodeOptions) -> Result<ClusterNode> {
        let me = opts
            .cluster
            .member(opts.id)
            .ok_or_else(|| {
                ClusterError::Config(format!("no node {} in the cluster file", opts.id))
            })?
            .clone();
        let raft_l = TcpListener::bind(me.raft_listen_addr())
            .await
            .map_err(|e| ClusterError::io(format!("bind {}", me.raft_listen_addr()), e))?;
        let client_l = TcpListener::bind(&me.client)
            .await
            .map_err(|e| ClusterError::io(format!("bind {}", me.client), e))?;
        Self::start_with(opts, raft_l, client_l).await
    }

    /// Starts the member on listeners the caller bound (tests bind port 0
    /// first, then write the cluster file): one Raft group per shard it is
    /// in, and a route to the members of every other shard.
    pub async fn start_with(
        opts: NodeOptions,
        raft_listener: TcpListener,
        client_listener: TcpListener,
    ) -> Result<ClusterNode> {
        let shards = opts.cluster.shards();
        check_layout(&opts.cluster, &opts.dir)?;
        let config = Arc::new(opts.cluster.raft_config()?);
        let secret = opts.cluster.secret()?;
        let mut groups = BTreeMap::new();
        let mut routes = BTreeMap::new();
        let mut batchers = Vec::new();
        for shard in &shards {
            let (writes, queue) = tokio::sync::mpsc::channel(4 * MAX_WRITE_BATCH);
            let (place, target) = if shard.members.contains(&opts.id) {
                let dir = opts.cluster.shard_dir(&opts.dir, shard.id);
                std::fs::create_dir_all(&dir)
                    .map_err(|e| ClusterError::io(format!("mkdir {}", dir.display()), e))?;
                let sm = StateMachine::open(&dir, &opts.engine)?;
                let log = LogStore::open(&dir.join("raft-log"), &opts.engine, &sm)?;
                let raft = Raft::new(
                    opts.id,
                    config.clone(),
                    Network::new(shard.id, secret.clone()),
                    log.clone(),
                    sm.clone(),
                )
                .await
                .map_err(|e| ClusterError::Raft(e.to_string()))?;
                let group = Group {
                    shard: shard.id,
                    raft,
                    sm,
                };
                groups.insert(
                    shard.id,
                    LocalGroup {
                        group: group.clone(),
                        log,
                    },
                );
                let target = BatchTarget::Local {
                    group: group.clone(),
                    forward: opts.cluster.client.forward_writes,
                };
                (Place::Local(group), target)
            } else {
                let members = opts
                    .cluster
                    .members_of(&shard.members)
                    .into_iter()
                    .collect();
                let remote = Arc::new(RemoteShard::new(opts.id, members));
                (Place::Remote(remote.clone()), BatchTarget::Remote(remote))
            };
            batchers.push(write_batcher(shard.id, target, secret.clone(), queue));
            routes.insert(shard.id, Route { place, writes });
        }
        let primary = groups
            .values()
            .next()
            .map(|g: &LocalGroup| g.group.clone())
            .ok_or_else(|| {
                ClusterError::Config(format!("node {} is a member of no shard", opts.id))
            })?;
        let mut tasks: Vec<JoinHandle<()>> = batchers.into_iter().map(tokio::spawn).collect();
        let served = groups
            .iter()
            .map(|(id, g)| (*id, g.group.clone()))
            .collect();
        tasks.push(tokio::spawn(serve_raft(
            raft_listener,
            Arc::new(served),
            secret.clone(),
            opts.limits.clone(),
        )));
        tasks.push(tokio::spawn(serve_clients(
            client_listener,
            Arc::new(Router::new(shards, routes, opts.cluster.members(), secret)),
            opts.limits,
        )));
        Ok(ClusterNode {
            id: opts.id,
            primary,
            groups,
            tasks,
            cluster: opts.cluster,
        })
    }

    /// Makes the members of each shard this member is in the voters of
    /// that shard's group, for every such group never initialized (run
    /// when the cluster is created, on at least one member of each shard;
    /// several members initializing a group with the same membership is
    /// safe).
    pub async fn initialize(&self) -> Result<()> {
        for shard in self.cluster.shards() {
            let Some(g) = self.groups.get(&shard.id) else {
                continue;
            };
            let raft = &g.group.raft;
            let done = raft
                .is_initialized()
                .await
                .map_err(|e| ClusterError::Raft(e.to_string()))?;
            if done {
                continue;
            }
            match raft
                .initialize(self.cluster.members_of(&shard.members))
                .await
            {
                // Another member initialized the group first (with the same
                // membership, from the same file): openraft documents this
                // as safe to ignore.
                Ok(()) | Err(RaftError::APIError(InitializeError::NotAllowed(_))) => {}
                Err(e) => return Err(ClusterError::Raft(e.to_string())),
            }
        }
        Ok(())
    }

    /// This member's id.
    pub fn id(&self) -> NodeId {
        self.id
    }

    /// This member's group of shard `shard`, if it is in it.
    pub fn group(&self, shard: ShardId) -> Option<&Group> {
        self.groups.get(&shard).map(|g| &g.group)
    }

    /// The Raft handle of the lowest-numbered shard this member is in
    /// (the only one of an unsharded cluster): metrics, membership
    /// changes, client writes.
    pub fn raft(&self) -> &Raft {
        &self.primary.raft
    }

    /// The state machine of the lowest-numbered shard this member is in
    /// (local, possibly stale reads).
    pub fn state_machine(&self) -> &StateMachine {
        &self.primary.sm
    }

    /// The first of this member's groups whose Raft core has stopped (a
    /// storage error or a panic), with why. Its requests are refused
    /// from then on ([`Group::stopped`]).
    pub fn stopped_group(&self) -> Option<(ShardId, String)> {
        self.groups
            .iter()
            .find_map(|(shard, g)| g.group.stopped().map(|why| (*shard, why)))
    }

    /// Stops every Raft and the listeners and closes every database,
    /// waiting at most `timeout` for every task holding them to let go.
    pub async fn shutdown(self, timeout: Duration) -> Result<()> {
        for t in &self.tasks {
            t.abort();
        }
        for t in self.tasks {
            let _ = t.await;
        }
        drop(self.primary);
        let mut held = Vec::new();
        for (_, g) in self.groups {
            g.group
                .raft
                .shutdown()
                .await
                .map_err(|e| ClusterError::Shutdown(e.to_string()))?;
            held.push((g.log, g.group.sm));
        }
        let deadline = Instant::now() + timeout;
        while held
            .iter()
            .any(|(log, sm)| Arc::strong_count(log.db()) > 1 || Arc::strong_count(sm.shared()) > 1)
        {
            if Instant::now() >= deadline {
                return Err(ClusterError::Shutdown(
                    "databases still in use after the timeout".into(),
                ));
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        drop(held);
        Ok(())
    }
}

/// Runs member `opts.id` until `stop` is set (the CLI sets it on SIGINT or
/// SIGTERM), initializing the cluster first when `init`. Returns an error
/// once one of its Raft groups has stopped (a storage error or a panic in
/// the core): the member shuts down so that a supervisor restarts it, and
/// the restart recovers the group from its log and state machine.
pub fn run_until(opts: NodeOptions, init: bool, stop: Arc<AtomicBool>) -> Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| ClusterError::io("start the tokio runtime", e))?;
    rt.block_on(async move {
        let node = ClusterNode::start(opts).await?;
        if init {
            node.initialize().await?;
        }
        while !stop.load(Ordering::Relaxed) {
            if let Some((shard, why)) = node.stopped_group() {
                tracing::error!("the Raft group of shard {shard} stopped: {why}; shutting down");
                // The databases are closed as far as they can be; the error
                // that matters is the group's.
                if let Err(e) = node.shutdown(Duration::from_secs(10)).await {
                    tracing::error!("{e}");
                }
                return Err(ClusterError::Raft(format!(
                    "the Raft group of shard {shard} stopped ({why}); restart this member"
                )));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        node.shutdown(Duration::from_secs(10)).await
    })
}
