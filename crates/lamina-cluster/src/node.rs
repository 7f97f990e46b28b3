//! One cluster member: its databases, its Raft, its two listeners.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use lamina::Options;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::client::{serve_clients, write_batcher, ClientContext, MAX_WRITE_BATCH};
use crate::config::ClusterConfig;
use crate::error::{ClusterError, Result};
use crate::network::{serve_raft, Network};
use crate::store::{LogStore, StateMachine};
use crate::types::{NodeId, Raft};

/// How a member is started.
#[derive(Clone)]
pub struct NodeOptions {
    /// This member's id in `cluster`.
    pub id: NodeId,
    /// The cluster file.
    pub cluster: ClusterConfig,
    /// Data directory: `raft-log/`, `sm/`, `snapshots/`.
    pub dir: PathBuf,
    /// Engine options of both databases (their sync mode is forced to
    /// `always`).
    pub engine: Options,
}

/// A running member. [`ClusterNode::shutdown`] stops it and closes its
/// databases; dropping it without that leaves tasks running until the
/// runtime ends.
pub struct ClusterNode {
    id: NodeId,
    raft: Raft,
    log: LogStore,
    sm: StateMachine,
    tasks: Vec<JoinHandle<()>>,
    cluster: ClusterConfig,
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
    /// first, then write the cluster file).
    pub async fn start_with(
        opts: NodeOptions,
        raft_listener: TcpListener,
        client_listener: TcpListener,
    ) -> Result<ClusterNode> {
        std::fs::create_dir_all(&opts.dir)
            .map_err(|e| ClusterError::io(format!("mkdir {}", opts.dir.display()), e))?;
        let log = LogStore::open(&opts.dir.join("raft-log"), &opts.engine)?;
        let sm = StateMachine::open(&opts.dir, &opts.engine)?;
        let config = Arc::new(opts.cluster.raft_config()?);
        let raft = Raft::new(opts.id, config, Network::default(), log.clone(), sm.clone())
            .await
            .map_err(|e| ClusterError::Raft(e.to_string()))?;
        let (writes, queue) = tokio::sync::mpsc::channel(4 * MAX_WRITE_BATCH);
        let tasks = vec![
            tokio::spawn(serve_raft(raft_listener, raft.clone())),
            tokio::spawn(write_batcher(
                raft.clone(),
                queue,
                opts.cluster.client.forward_writes,
            )),
            tokio::spawn(serve_clients(
                client_listener,
                ClientContext {
                    raft: raft.clone(),
                    sm: sm.clone(),
                    writes,
                },
            )),
        ];
        Ok(ClusterNode {
            id: opts.id,
            raft,
            log,
            sm,
            tasks,
            cluster: opts.cluster,
        })
    }

    /// Makes every member of the cluster file a voter, if this member has
    /// never been initialized (run once, on one member, when the cluster
    /// is created).
    pub async fn initialize(&self) -> Result<()> {
        let done = self
            .raft
            .is_initialized()
            .await
            .map_err(|e| ClusterError::Raft(e.to_string()))?;
        if done {
            return Ok(());
        }
        self.raft
            .initialize(self.cluster.members())
            .await
            .map_err(|e| ClusterError::Raft(e.to_string()))
    }

    /// This member's id.
    pub fn id(&self) -> NodeId {
        self.id
    }

    /// The Raft handle (metrics, membership changes, client writes).
    pub fn raft(&self) -> &Raft {
        &self.raft
    }

    /// The state machine (local, possibly stale reads).
    pub fn state_machine(&self) -> &StateMachine {
        &self.sm
    }

    /// Stops Raft and the listeners and closes both databases, waiting at
    /// most `timeout` for every task holding them to let go.
    pub async fn shutdown(self, timeout: Duration) -> Result<()> {
        for t in &self.tasks {
            t.abort();
        }
        for t in self.tasks {
            let _ = t.await;
        }
        self.raft
            .shutdown()
            .await
            .map_err(|e| ClusterError::Shutdown(e.to_string()))?;
        drop(self.raft);
        let log = self.log;
        let sm = self.sm;
        let deadline = Instant::now() + timeout;
        while Arc::strong_count(log.db()) > 1 || Arc::strong_count(sm.shared()) > 1 {
            if Instant::now() >= deadline {
                return Err(ClusterError::Shutdown(
                    "databases still in use after the timeout".into(),
                ));
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        drop(log);
        drop(sm);
        Ok(())
    }
}

/// Runs member `opts.id` until `stop` is set (the CLI sets it on SIGINT or
/// SIGTERM), initializing the cluster first when `init`.
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
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        node.shutdown(Duration::from_secs(10)).await
    })
}
