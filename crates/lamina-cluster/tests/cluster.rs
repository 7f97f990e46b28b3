//! A 3-member cluster in one process on 127.0.0.1 ports chosen at run
//! time, checked against a `BTreeMap` model: replication, redirects,
//! linearizable and follower reads, leader failover without losing an
//! acknowledged write, catch-up of a restarted member by log replay and by
//! snapshot. Every wait polls against a deadline.
#![expect(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test may panic on a failed setup"
)]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use lamina::vfs::fault::{FaultFs, OpKind};
use lamina::vfs::OsFs;

use lamina_cluster::config::ShardConfig;
use lamina_cluster::{
    ClusterConfig, ClusterNode, NodeConfig, NodeId, NodeOptions, PortLimits, RaftTiming, Secret,
};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};

type Model = BTreeMap<i32, i32>;

const WAIT: Duration = Duration::from_secs(20);

struct Cluster {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    config: ClusterConfig,
    setup: Setup,
    nodes: BTreeMap<NodeId, Option<ClusterNode>>,
    /// Each member's file system: the real one, through a fault injector
    /// that passes everything until a test arms it.
    faults: BTreeMap<NodeId, FaultFs>,
}

/// How a test cluster runs, beyond its members, shards and timing.
#[derive(Clone)]
struct Setup {
    /// The members share a secret (in `ROOT/cluster.secret`).
    secure: bool,
    limits: PortLimits,
    forward_writes: bool,
}

impl Default for Setup {
    fn default() -> Self {
        Setup {
            secure: true,
            limits: PortLimits::default(),
            forward_writes: false,
        }
    }
}

/// The secret of every secure test cluster.
const SECRET: &[u8] = b"the test cluster's secret, 32 b.";

impl Cluster {
    /// Binds two listeners per member on port 0, writes the cluster file
    /// from their addresses, starts every member, initializes on member 1.
    async fn start(n: u64, timing: RaftTiming) -> Cluster {
        Self::start_with_voters(n, n, timing).await
    }

    /// Members `1..=n` on 127.0.0.1 with the shard map `shard`, started
    /// but not initialized.
    async fn launch(n: u64, shard: Vec<ShardConfig>, timing: RaftTiming) -> Cluster {
        Self::launch_with(n, shard, timing, Setup::default()).await
    }

    /// [`Cluster::launch`] set up as `setup` says.
    async fn launch_with(
        n: u64,
        shard: Vec<ShardConfig>,
        timing: RaftTiming,
        setup: Setup,
    ) -> Cluster {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().to_path_buf();
        let secret_file = setup.secure.then(|| {
            let path = root.join("cluster.secret");
            std::fs::write(&path, SECRET).unwrap();
            path
        });
        let mut listeners = BTreeMap::new();
        let mut members = Vec::new();
        for id in 1..=n {
            let r = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let c = TcpListener::bind("127.0.0.1:0").await.unwrap();
            members.push(NodeConfig {
                id,
                raft: r.local_addr().unwrap().to_string(),
                client: c.local_addr().unwrap().to_string(),
                raft_listen: None,
            });
            listeners.insert(id, (r, c));
        }
        let config = ClusterConfig {
            secret_file,
            node: members,
            shard,
            raft: timing,
            client: lamina_cluster::ClientPolicy {
                forward_writes: setup.forward_writes,
            },
        };
        config.check().unwrap();
        let mut nodes = BTreeMap::new();
        let mut faults = BTreeMap::new();
        for (id, (r, c)) in listeners {
            let fault = FaultFs::new(Arc::new(OsFs));
            let mut o = faulty_opts(&root, &config, id, &fault);
            o.limits = setup.limits.clone();
            let node = ClusterNode::start_with(o, r, c).await.unwrap();
            nodes.insert(id, Some(node));
            faults.insert(id, fault);
        }
        Cluster {
            _tmp: tmp,
            root,
            config,
            setup,
            nodes,
            faults,
        }
    }

    /// As [`Cluster::start`], with only members `1..=voters` in the initial
    /// membership (the others run, outside the group, until added).
    async fn start_with_voters(n: u64, voters: u64, timing: RaftTiming) -> Cluster {
        Self::start_with(n, voters, timing, Setup::default()).await
    }

    /// As [`Cluster::start_with_voters`], set up as `setup` says.
    async fn start_with(n: u64, voters: u64, timing: RaftTiming, setup: Setup) -> Cluster {
        let c = Cluster::launch_with(n, Vec::new(), timing, setup).await;
        let initial: BTreeMap<NodeId, lamina_cluster::LaminaNode> = c
            .config
            .members()
            .into_iter()
            .filter(|(id, _)| *id <= voters)
            .collect();
        c.node(1).raft().initialize(initial).await.unwrap();
        c
    }

    fn node(&self, id: NodeId) -> &ClusterNode {
        self.nodes[&id].as_ref().unwrap()
    }

    fn client_addr(&self, id: NodeId) -> String {
        self.config.member(id).unwrap().client.clone()
    }

    async fn kill(&mut self, id: NodeId) {
        let node = self.nodes.get_mut(&id).unwrap().take().unwrap();
        node.shutdown(Duration::from_secs(10)).await.unwrap();
    }

    async fn restart(&mut self, id: NodeId) {
        let mut o = faulty_opts(&self.root, &self.config, id, &self.faults[&id]);
        o.limits = self.setup.limits.clone();
        let node = ClusterNode::start(o).await.unwrap();
        self.nodes.insert(id, Some(node));
    }

    /// The member that all live members agree leads, once they do.
    async fn leader(&self) -> NodeId {
        let deadline = Instant::now() + WAIT;
        loop {
            let live: Vec<&ClusterNode> = self
                .nodes
                .values()
                .flatten()
                .filter(|n| {
                    n.raft()
                        .metrics()
                        .borrow()
                        .membership_config
                        .membership()
                        .get_node(&n.id())
                        .is_some()
                })
                .collect();
            let views: Vec<Option<NodeId>> = live
                .iter()
                .map(|n| n.raft().metrics().borrow().current_leader)
                .collect();
            if let Some(Some(l)) = views.first() {
                let agreed = views.iter().all(|v| *v == Some(*l));
                let alive = self.nodes.get(l).is_some_and(|n| n.is_some());
                if agreed && alive {
                    let m = self.node(*l).raft().metrics().borrow().clone();
                    if m.state == openraft::ServerState::Leader {
                        return *l;
                    }
                }
            }
            assert!(Instant::now() < deadline, "no leader agreed on: {views:?}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// A connection to member `id`'s Raft port, authenticated when the
    /// cluster has a secret.
    async fn raft_conn(&self, id: NodeId) -> TcpStream {
        let mut s = TcpStream::connect(&self.config.member(id).unwrap().raft)
            .await
            .unwrap();
        if self.setup.secure {
            let secret = Secret::new(SECRET).unwrap();
            lamina_cluster::auth::connect(&mut s, &secret)
                .await
                .unwrap();
        }
        s
    }

    async fn shutdown(mut self) {
        let ids: Vec<NodeId> = self.nodes.keys().copied().collect();
        for id in ids {
            if self.nodes[&id].is_some() {
                self.kill(id).await;
            }
        }
    }
}

fn opts(root: &std::path::Path, config: &ClusterConfig, id: NodeId) -> NodeOptions {
    let engine = {
        let mut o = lamina::Options::default();
        o.write_buffer_size = 256 << 10;
        o
    };
    NodeOptions {
        id,
        cluster: config.clone(),
        dir: root.join(format!("node{id}")),
        engine,
        limits: PortLimits::default(),
    }
}

/// [`opts`] with the member's databases on `fault`.
fn faulty_opts(
    root: &std::path::Path,
    config: &ClusterConfig,
    id: NodeId,
    fault: &FaultFs,
) -> NodeOptions {
    let mut o = opts(root, config, id);
    o.engine.vfs = Arc::new(fault.clone());
    o
}

struct Client {
    r: BufReader<OwnedReadHalf>,
    w: OwnedWriteHalf,
}

impl Client {
    async fn connect(addr: &str) -> Client {
        let s = TcpStream::connect(addr).await.unwrap();
        let (r, w) = s.into_split();
        Client {
            r: BufReader::new(r),
            w,
        }
    }

    /// One command, one reply line (without the newline).
    async fn call(&mut self, line: &str) -> String {
        self.w
            .write_all(format!("{line}\n").as_bytes())
            .await
            .unwrap();
        let mut reply = String::new();
        tokio::time::timeout(WAIT, self.r.read_line(&mut reply))
            .await
            .expect("reply in time")
            .unwrap();
        assert!(reply.ends_with('\n'), "reply {reply:?} to {line:?}");
        reply.pop();
        reply
    }
}

fn render(model: &Model, lo: i32, hi: i32) -> String {
    model
        .range(lo..hi)
        .map(|(k, v)| format!("{k}:{v}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Writes through `c` (the leader's client), each acknowledged.
async fn write_all(c: &mut Client, model: &mut Model, keys: std::ops::Range<i32>, salt: i32) {
    for k in keys {
        let v = k.wrapping_mul(31).wrapping_add(salt);
        assert_eq!(c.call(&format!("p {k} {v}")).await, "OK");
        model.insert(k, v);
        if k % 7 == 0 {
            assert_eq!(c.call(&format!("d {k}")).await, "OK");
            model.remove(&k);
        }
    }
}

/// Every key of the model, and a full range, read linearizably through `c`.
async fn check_reads(c: &mut Client, model: &Model, keys: std::ops::Range<i32>) {
    for k in keys {
        let want = model.get(&k).map(|v| v.to_string()).unwrap_or_default();
        assert_eq!(c.call(&format!("g {k}")).await, want, "g {k}");
    }
    assert_eq!(
        c.call("r -1000000 1000000").await,
        render(model, -1000000, 1000000)
    );
}

/// Polls until `node` has applied at least `index`.
async fn wait_applied(node: &ClusterNode, index: u64) {
    let deadline = Instant::now() + WAIT;
    loop {
        let applied = node.raft().metrics().borrow().last_applied.map(|l| l.index);
        if applied.is_some_and(|a| a >= index) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "node {} applied {applied:?} < {index}",
            node.id()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn local_contents(node: &ClusterNode) -> Model {
    let lo = lamina_server::dsl_key::encode_i32(i32::MIN);
    let hi = lamina_server::dsl_key::encode_i32(i32::MAX);
    let mut m = Model::new();
    for (k, v) in node.state_machine().range(&lo, &hi).unwrap() {
        let k = lamina_server::dsl_key::decode_i32(&k).unwrap();
        let v = lamina_server::dsl_key::decode_i32(&v).unwrap();
        m.insert(k, v);
    }
    m
}

fn applied_index(node: &ClusterNode) -> u64 {
    node.raft()
        .metrics()
        .borrow()
        .last_applied
        .map(|l| l.index)
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn failover_keeps_acknowledged_writes_and_restart_catches_up() {
    tokio::time::timeout(Duration::from_secs(60), async {
        let mut cl = Cluster::start(3, RaftTiming::default()).await;
        let mut model = Model::new();
        let leader = cl.leader().await;
        let mut c = Client::connect(&cl.client_addr(leader)).await;
        write_all(&mut c, &mut model, 0..120, 1).await;
        check_reads(&mut c, &model, -5..125).await;

        // A follower redirects writes and linearizable reads to the leader.
        let follower = (1..=3).find(|&i| i != leader).unwrap();
        let mut f = Client::connect(&cl.client_addr(follower)).await;
        let redirect = format!("ERROR not leader; leader is {}", cl.client_addr(leader));
        assert_eq!(f.call("p 5 5").await, redirect);
        assert_eq!(f.call("g 5").await, redirect);
        assert_eq!(f.call("r 0 10").await, redirect);
        // Follower reads are opt-in and catch up with the leader.
        assert_eq!(f.call("@follower-reads on").await, "OK");
        wait_applied(cl.node(follower), applied_index(cl.node(leader))).await;
        assert_eq!(
            f.call("r -1000000 1000000").await,
            render(&model, -1000000, 1000000)
        );
        assert_eq!(
            c.call("l \"/etc/passwd\"").await,
            "ERROR not supported in cluster mode"
        );
        assert!(c.call("p x 1").await.starts_with("ERROR "));
        // An overlong line is refused, skipped, and the connection goes on.
        let mut hostile = Client::connect(&cl.client_addr(leader)).await;
        assert_eq!(
            hostile.call(&"9".repeat(10_000)).await,
            "ERROR line longer than 4096 bytes"
        );
        assert_eq!(hostile.call("g 1").await, model[&1].to_string());
        // `lamina client` ends a session with `@end` and waits for `@bye`.
        assert_eq!(hostile.call("@end").await, "@bye");
        drop(f);
        drop(c);

        // The leader dies; a new one is elected and has every write.
        cl.kill(leader).await;
        let second = cl.leader().await;
        assert_ne!(second, leader);
        let mut c = Client::connect(&cl.client_addr(second)).await;
        check_reads(&mut c, &model, -5..125).await;
        write_all(&mut c, &mut model, 100..200, 2).await;
        drop(c);

        // The old leader comes back as a follower and replays what it missed.
        cl.restart(leader).await;
        let target = applied_index(cl.node(second));
        wait_applied(cl.node(leader), target).await;
        assert_eq!(local_contents(cl.node(leader)), model);
        for id in 1..=3 {
            wait_applied(cl.node(id), target).await;
            assert_eq!(local_contents(cl.node(id)), model, "node {id}");
        }

        // An unsharded member's directory is refused with a sharded file
        // (it would start an empty group beside the data).
        cl.kill(1).await;
        let mut sharded = cl.config.clone();
        sharded.shard = vec![lamina_cluster::config::ShardConfig {
            id: 1,
            lo: None,
            hi: None,
            members: vec![1, 2, 3],
        }];
        let r = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let c = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let err = match ClusterNode::start_with(opts(&cl.root, &sharded, 1), r, c).await {
            Ok(_) => panic!("a sharded file opened an unsharded member's data"),
            Err(e) => e.to_string(),
        };
        assert!(err.contains("unsharded member"), "{err}");
        assert!(!cl.root.join("node1/shard-1").exists());
        cl.shutdown().await;
    })
    .await
    .expect("test within 60 s");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn lagging_member_catches_up_by_snapshot() {
    tokio::time::timeout(Duration::from_secs(60), async {
        // Small chunks: the snapshot goes over in many RPCs, each read
        // from the leader's archive file and written into the follower's.
        let timing = RaftTiming {
            snapshot_logs: 30,
            keep_logs: 0,
            snapshot_chunk_bytes: 1024,
            ..RaftTiming::default()
        };
        let mut cl = Cluster::start(3, timing).await;
        let mut model = Model::new();
        let leader = cl.leader().await;
        let lagging = (1..=3).find(|&i| i != leader).unwrap();
        let mut c = Client::connect(&cl.client_addr(leader)).await;
        write_all(&mut c, &mut model, 0..10, 1).await;
        let before = applied_index(cl.node(leader));
        wait_applied(cl.node(lagging), before).await;
        cl.kill(lagging).await;

        write_all(&mut c, &mut model, 10..150, 3).await;
        // The leader snapshots and purges its log past what `lagging` has.
        let deadline = Instant::now() + WAIT;
        loop {
            let purged = cl
                .node(leader)
                .raft()
                .metrics()
                .borrow()
                .purged
                .map(|l| l.index);
            if purged.is_some_and(|p| p > before + 1) {
                break;
            }
            assert!(Instant::now() < deadline, "leader never purged: {purged:?}");
            cl.node(leader).raft().trigger().snapshot().await.unwrap();
            tokio::time::sleep(Duration::from_millis(50)).await;
        }

        cl.restart(lagging).await;
        let target = applied_index(cl.node(leader));
        wait_applied(cl.node(lagging), target).await;
        let snap = cl.node(lagging).raft().metrics().borrow().snapshot;
        assert!(
            snap.is_some_and(|s| s.index > before),
            "caught up without a snapshot: {snap:?}"
        );
        assert_eq!(local_contents(cl.node(lagging)), model);
        // The installed archive is the current snapshot of `lagging`, and
        // it took several chunks.
        let current: serde_json::Value = serde_json::from_slice(
            &std::fs::read(
                cl.root
                    .join(format!("node{lagging}/snapshots/current.json")),
            )
            .unwrap(),
        )
        .unwrap();
        let archive = cl.root.join(format!(
            "node{lagging}/snapshots/{}",
            current["archive"].as_str().unwrap()
        ));
        // More than two chunks (its size varies with what the state
        // machine had flushed when the snapshot was built).
        let size = std::fs::metadata(&archive).unwrap().len();
        assert!(size > 2 * 1024, "archive of {size} bytes");

        // It keeps replicating after the install, and survives a restart.
        write_all(&mut c, &mut model, 150..170, 4).await;
        drop(c);
        let target = applied_index(cl.node(leader));
        wait_applied(cl.node(lagging), target).await;
        cl.kill(lagging).await;
        cl.restart(lagging).await;
        wait_applied(cl.node(lagging), target).await;
        assert_eq!(local_contents(cl.node(lagging)), model);
        cl.shutdown().await;
    })
    .await
    .expect("test within 60 s");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn membership_change_adds_a_member_and_removes_one() {
    tokio::time::timeout(Duration::from_secs(60), async {
        // Members 1-3 form the group; 4 runs outside it.
        let mut cl = Cluster::start_with_voters(4, 3, RaftTiming::default()).await;
        let mut model = Model::new();
        let leader = cl.leader().await;
        let mut c = Client::connect(&cl.client_addr(leader)).await;
        write_all(&mut c, &mut model, 0..60, 5).await;

        // 4 joins as a learner (the call returns once it has caught up),
        // then replaces a follower as a voter.
        let raft = cl.node(leader).raft().clone();
        let four = cl.config.members()[&4].clone();
        raft.add_learner(4, four, true).await.unwrap();
        let removed = (1..=3).find(|&i| i != leader).unwrap();
        let voters: std::collections::BTreeSet<NodeId> =
            [1, 2, 3, 4].into_iter().filter(|&i| i != removed).collect();
        raft.change_membership(voters.clone(), false).await.unwrap();
        let m = raft.metrics().borrow().membership_config.clone();
        let now: std::collections::BTreeSet<NodeId> = m.membership().voter_ids().collect();
        assert_eq!(now, voters);

        // The removed member can go; the group still commits (2 of 3 of
        // the new voters), and 4 holds everything.
        cl.kill(removed).await;
        write_all(&mut c, &mut model, 60..90, 6).await;
        check_reads(&mut c, &model, -5..95).await;
        drop(c);
        let target = applied_index(cl.node(leader));
        wait_applied(cl.node(4), target).await;
        assert_eq!(local_contents(cl.node(4)), model);
        cl.shutdown().await;
    })
    .await
    .expect("test within 60 s");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_writers_are_all_acknowledged_and_applied() {
    tokio::time::timeout(Duration::from_secs(60), async {
        let cl = Cluster::start(3, RaftTiming::default()).await;
        let leader = cl.leader().await;
        let addr = cl.client_addr(leader);
        // 8 connections write disjoint keys at once (the batcher may put
        // several connections' writes in one entry).
        let mut tasks = Vec::new();
        for w in 0..8i32 {
            let addr = addr.clone();
            tasks.push(tokio::spawn(async move {
                let mut c = Client::connect(&addr).await;
                let mut mine = Model::new();
                for k in (w * 1000)..(w * 1000 + 100) {
                    assert_eq!(c.call(&format!("p {k} {}", k + w)).await, "OK");
                    mine.insert(k, k + w);
                }
                mine
            }));
        }
        let mut model = Model::new();
        for t in tasks {
            model.extend(t.await.unwrap());
        }
        let mut c = Client::connect(&addr).await;
        assert_eq!(c.call("r -1 1000000").await, render(&model, -1, 1000000));
        let target = applied_index(cl.node(leader));
        for id in 1..=3 {
            wait_applied(cl.node(id), target).await;
            assert_eq!(local_contents(cl.node(id)), model, "node {id}");
        }
        drop(c);
        cl.shutdown().await;
    })
    .await
    .expect("test within 60 s");
}

/// A client that follows redirects (`ERROR not leader; leader is ADDR`)
/// by reconnecting, at most 5 times per command. Only for a cluster
/// without faults: a redirected write was then never proposed, so sending
/// it again cannot apply it twice.
struct Following {
    c: Client,
}

impl Following {
    async fn call(&mut self, line: &str) -> String {
        for _ in 0..5 {
            let reply = self.c.call(line).await;
            match reply.strip_prefix("ERROR not leader; leader is ") {
                Some(addr) => self.c = Client::connect(addr).await,
                None => return reply,
            }
        }
        panic!("{line:?} redirected 5 times");
    }
}

/// Shard 1 (keys below 0) on members 1, 2, 3 and shard 2 (0 and up) on
/// members 2 and 3 only, so member 1 routes every key of shard 2 to them.
fn two_shards() -> Vec<ShardConfig> {
    vec![
        ShardConfig {
            id: 1,
            lo: None,
            hi: Some(0),
            members: vec![1, 2, 3],
        },
        ShardConfig {
            id: 2,
            lo: Some(0),
            hi: None,
            members: vec![2, 3],
        },
    ]
}

/// The member that every member of `shard` agrees leads it, once they do.
async fn shard_leader(cl: &Cluster, shard: u64) -> NodeId {
    let deadline = Instant::now() + WAIT;
    loop {
        let views: Vec<(NodeId, Option<NodeId>, bool)> = cl
            .nodes
            .values()
            .flatten()
            .filter_map(|n| {
                let g = n.group(shard)?;
                let m = g.raft.metrics().borrow().clone();
                Some((
                    n.id(),
                    m.current_leader,
                    m.state == openraft::ServerState::Leader,
                ))
            })
            .collect();
        if let Some((_, Some(l), _)) = views.first() {
            let agreed = views.iter().all(|(_, v, _)| *v == Some(*l));
            if agreed && views.iter().any(|(id, _, leads)| id == l && *leads) {
                return *l;
            }
        }
        assert!(
            Instant::now() < deadline,
            "shard {shard}: no leader agreed on: {views:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A shard's contents in `node`'s state machine.
fn shard_contents(node: &ClusterNode, shard: u64) -> Model {
    let lo = lamina_server::dsl_key::encode_i32(i32::MIN);
    let hi = lamina_server::dsl_key::encode_i32(i32::MAX);
    let g = node.group(shard).unwrap();
    g.sm.range(&lo, &hi)
        .unwrap()
        .into_iter()
        .map(|(k, v)| {
            (
                lamina_server::dsl_key::decode_i32(&k).unwrap(),
                lamina_server::dsl_key::decode_i32(&v).unwrap(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[expect(
    clippy::too_many_lines,
    reason = "a scenario test that reads top to bottom"
)]
async fn two_shards_route_split_ranges_and_match_a_model() {
    use rand::{Rng, SeedableRng};
    tokio::time::timeout(Duration::from_secs(90), async {
        let cl = Cluster::launch(3, two_shards(), RaftTiming::default()).await;
        // Every member initializes its groups: the same membership from
        // several members is safe.
        for node in cl.nodes.values().flatten() {
            node.initialize().await.unwrap();
        }
        assert!(cl.node(1).group(2).is_none());
        assert!(!cl.root.join("node1/shard-2").exists());
        assert!(cl.root.join("node1/shard-1/raft-log").is_dir());
        assert!(!cl.root.join("node1/raft-log").exists());
        let leaders = [shard_leader(&cl, 1).await, shard_leader(&cl, 2).await];

        // `@leader K` names the leader of K's shard on every member, also
        // on member 1 for shard 2 (it asks a member); `@leader` alone is
        // ambiguous with two shards.
        for id in 1..=3 {
            let mut c = Client::connect(&cl.client_addr(id)).await;
            for (key, leader) in [(-7, leaders[0]), (7, leaders[1])] {
                assert_eq!(
                    c.call(&format!("@leader {key}")).await,
                    format!("LEADER {leader} {}", cl.client_addr(leader)),
                    "member {id}, key {key}"
                );
            }
            assert!(c.call("@leader").await.starts_with("ERROR "));
            assert!(c.call("@leader x").await.starts_with("ERROR "));
        }

        // Random writes, deletes, gets and ranges (many across the bound
        // at 0) through all three members, against a model.
        let mut rng = rand::rngs::SmallRng::seed_from_u64(22);
        let mut clients = Vec::new();
        for id in 1..=3 {
            clients.push(Following {
                c: Client::connect(&cl.client_addr(id)).await,
            });
        }
        let mut model = Model::new();
        let mut spanning = 0;
        for i in 0..600 {
            let c = &mut clients[rng.gen_range(0..3)];
            let key = rng.gen_range(-40..40);
            match rng.gen_range(0..100) {
                0..=39 => {
                    let v = rng.gen_range(-1000..1000);
                    assert_eq!(c.call(&format!("p {key} {v}")).await, "OK", "op {i}");
                    model.insert(key, v);
                }
                40..=54 => {
                    assert_eq!(c.call(&format!("d {key}")).await, "OK", "op {i}");
                    model.remove(&key);
                }
                55..=79 => {
                    let want = model.get(&key).map(|v| v.to_string()).unwrap_or_default();
                    assert_eq!(c.call(&format!("g {key}")).await, want, "op {i}: g {key}");
                }
                _ => {
                    let hi = key + rng.gen_range(0..50);
                    spanning += usize::from(key < 0 && hi > 0);
                    assert_eq!(
                        c.call(&format!("r {key} {hi}")).await,
                        render(&model, key, hi),
                        "op {i}: r {key} {hi}"
                    );
                }
            }
        }
        assert!(spanning > 20, "{spanning} ranges across shards");
        // The whole key space, from each member, with plain (redirecting)
        // clients: a range over both shards needs no redirect on any of
        // them, whichever member leads which shard.
        for id in 1..=3 {
            let mut c = Client::connect(&cl.client_addr(id)).await;
            assert_eq!(
                c.call(&format!("r {} {}", i32::MIN, i32::MAX)).await,
                render(&model, i32::MIN, i32::MAX),
                "member {id}"
            );
        }

        // Each member holds exactly its shards' part of the model.
        let below: Model = model.range(..0).map(|(k, v)| (*k, *v)).collect();
        let above: Model = model.range(0..).map(|(k, v)| (*k, *v)).collect();
        for (shard, part, holders) in [(1, &below, vec![1, 2, 3]), (2, &above, vec![2, 3])] {
            let leader = shard_leader(&cl, shard).await;
            let target = cl
                .node(leader)
                .group(shard)
                .unwrap()
                .raft
                .metrics()
                .borrow()
                .last_applied
                .map(|l| l.index)
                .unwrap_or(0);
            for id in holders {
                let g = cl.node(id).group(shard).unwrap();
                let deadline = Instant::now() + WAIT;
                while g
                    .raft
                    .metrics()
                    .borrow()
                    .last_applied
                    .map(|l| l.index)
                    .unwrap_or(0)
                    < target
                {
                    assert!(Instant::now() < deadline, "member {id} shard {shard} lags");
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                assert_eq!(
                    &shard_contents(cl.node(id), shard),
                    part,
                    "member {id} shard {shard}"
                );
            }
        }

        // A Raft-port request for a shard the member does not serve is
        // refused, never handed to another group.
        {
            use lamina_cluster::frame::{read_frame, write_frame};
            use lamina_cluster::network::{Envelope, RpcReply, RpcRequest};
            let mut s = cl.raft_conn(1).await;
            for rpc in [
                RpcRequest::Leader { from: 2 },
                RpcRequest::Read {
                    from: 2,
                    read: lamina_cluster::group::Read::Get(5),
                    follower: true,
                },
            ] {
                write_frame(&mut s, &Envelope { shard: 2, rpc })
                    .await
                    .unwrap();
                let reply: RpcReply = read_frame(&mut s).await.unwrap().unwrap();
                assert!(
                    matches!(&reply, RpcReply::Refused(why) if why.contains("no shard 2")),
                    "{reply:?}"
                );
            }
        }

        // A member's directory only opens with the kind of cluster file
        // that wrote it.
        let root = cl.root.clone();
        let mut unsharded = cl.config.clone();
        unsharded.shard.clear();
        let nodes = cl.nodes;
        for (_, n) in nodes {
            n.unwrap().shutdown(Duration::from_secs(10)).await.unwrap();
        }
        let r = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let c = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let err = match ClusterNode::start_with(opts(&root, &unsharded, 2), r, c).await {
            Ok(_) => panic!("an unsharded file opened a sharded member's data"),
            Err(e) => e.to_string(),
        };
        assert!(err.contains("sharded member"), "{err}");
        drop(cl._tmp);
    })
    .await
    .expect("test within 90 s");
}

/// The voters of the group as `node` sees them.
fn voters(node: &ClusterNode) -> std::collections::BTreeSet<NodeId> {
    node.raft()
        .metrics()
        .borrow()
        .membership_config
        .membership()
        .voter_ids()
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn membership_changes_through_the_client_port() {
    tokio::time::timeout(Duration::from_secs(60), async {
        // Members 1-3 of a 4-member cluster file form the group.
        let mut cl = Cluster::start_with_voters(4, 3, RaftTiming::default()).await;
        let mut model = Model::new();
        let leader = cl.leader().await;
        let mut c = Client::connect(&cl.client_addr(leader)).await;
        write_all(&mut c, &mut model, 0..80, 8).await;

        // Refusals: a node the file does not list, bad arguments, a shard
        // that does not exist, a promotion before the member is a
        // learner, and a follower redirects.
        assert_eq!(
            c.call("@add-learner 9").await,
            "ERROR node 9 is not in the cluster file"
        );
        assert!(c.call("@promote x").await.starts_with("ERROR expected"));
        assert_eq!(c.call("@remove 1 5").await, "ERROR no shard 5");
        assert!(c.call("@promote 4").await.starts_with("ERROR raft: "));
        let follower = (1..=3).find(|&i| i != leader).unwrap();
        let mut f = Client::connect(&cl.client_addr(follower)).await;
        assert_eq!(
            f.call("@add-learner 4").await,
            format!("ERROR not leader; leader is {}", cl.client_addr(leader))
        );
        drop(f);
        assert_eq!(voters(cl.node(leader)), [1, 2, 3].into());

        // 4 joins (a learner that has caught up), becomes a voter, and 1
        // leaves (through joint consensus each time).
        assert_eq!(c.call("@add-learner 4").await, "OK");
        assert_eq!(c.call("@promote 4").await, "OK");
        assert_eq!(voters(cl.node(leader)), [1, 2, 3, 4].into());
        assert_eq!(c.call("@remove 1").await, "OK");
        assert_eq!(voters(cl.node(leader)), [2, 3, 4].into());
        drop(c);
        cl.kill(1).await;

        // Every write, old and new, through the leader of {2, 3, 4}.
        let second = cl.leader().await;
        assert_ne!(second, 1);
        assert_eq!(voters(cl.node(second)), [2, 3, 4].into());
        let mut c = Following {
            c: Client::connect(&cl.client_addr(4)).await,
        };
        for k in 80..120 {
            assert_eq!(c.call(&format!("p {k} {}", -k)).await, "OK");
            model.insert(k, -k);
        }
        assert_eq!(c.call("d 3").await, "OK");
        model.remove(&3);
        for k in -2..122 {
            let want = model.get(&k).map(|v| v.to_string()).unwrap_or_default();
            assert_eq!(c.call(&format!("g {k}")).await, want, "g {k}");
        }
        assert_eq!(c.call("r -100 1000").await, render(&model, -100, 1000));

        // Member 4 holds everything: read through it as a voter (its own
        // state machine), once it has applied what the leader has.
        let target = applied_index(cl.node(second));
        wait_applied(cl.node(4), target).await;
        let mut four = Client::connect(&cl.client_addr(4)).await;
        assert_eq!(four.call("@follower-reads on").await, "OK");
        assert_eq!(four.call("r -100 1000").await, render(&model, -100, 1000));
        assert_eq!(local_contents(cl.node(4)), model);
        drop(four);
        drop(c);
        cl.shutdown().await;
    })
    .await
    .expect("test within 60 s");
}

/// A member whose Raft core dies (here: its disk starts failing every
/// write, so its next log append is a storage error) refuses every request
/// of the shard, on the client port and the Raft port, instead of serving
/// its frozen state machine; the two other members go on committing, and
/// every acknowledged write reads back through them.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_member_whose_raft_core_died_refuses_requests() {
    tokio::time::timeout(Duration::from_secs(60), async {
        let cl = Cluster::start(3, RaftTiming::default()).await;
        let mut model = Model::new();
        let leader = cl.leader().await;
        let mut c = Client::connect(&cl.client_addr(leader)).await;
        write_all(&mut c, &mut model, 0..40, 3).await;
        let dead = (1..=3).find(|&i| i != leader).unwrap();
        wait_applied(cl.node(dead), applied_index(cl.node(leader))).await;
        let mut f = Client::connect(&cl.client_addr(dead)).await;
        assert_eq!(f.call("@follower-reads on").await, "OK");
        assert_eq!(f.call("r 0 40").await, render(&model, 0, 40));
        assert!(cl.node(dead).stopped_group().is_none());

        // Every write of the member's disk fails from now on.
        let fault = &cl.faults[&dead];
        fault.fail_kinds(&[OpKind::Write, OpKind::Sync]);
        fault.fail_from(fault.ops_matching());
        write_all(&mut c, &mut model, 40..80, 4).await;
        let deadline = Instant::now() + WAIT;
        let why = loop {
            if let Some((shard, why)) = cl.node(dead).stopped_group() {
                assert_eq!(shard, 0);
                break why;
            }
            assert!(Instant::now() < deadline, "member {dead}'s core still runs");
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        assert!(fault.injected() > 0);
        assert!(
            why.to_lowercase().contains("storage") || why.contains("error"),
            "{why}"
        );

        // Nothing stale comes out of it: reads (follower or not), writes,
        // membership changes and `@leader` are all refused, with the reason.
        let refused = "ERROR this member's Raft group of shard 0 has stopped (";
        for line in [
            "g 1",
            "r 0 100",
            "p 1 1",
            "d 1",
            "@leader",
            "@add-learner 1",
        ] {
            let reply = f.call(line).await;
            assert!(reply.starts_with(refused), "{line}: {reply}");
            assert!(reply.ends_with("until it is restarted"), "{line}: {reply}");
        }
        assert_eq!(f.call("@follower-reads off").await, "OK");
        assert!(f.call("g 1").await.starts_with(refused));
        // The Raft port refuses the reads and forwarded writes it would
        // have served from the dead group.
        {
            use lamina_cluster::frame::{read_frame, write_frame};
            use lamina_cluster::network::{Envelope, RpcReply, RpcRequest};
            let mut s = cl.raft_conn(dead).await;
            let rpc = RpcRequest::Read {
                from: leader,
                read: lamina_cluster::group::Read::Range(0, 100),
                follower: true,
            };
            write_frame(&mut s, &Envelope { shard: 0, rpc })
                .await
                .unwrap();
            let reply: RpcReply = read_frame(&mut s).await.unwrap().unwrap();
            assert!(
                matches!(&reply, RpcReply::Read(Err(line)) if line.starts_with(refused)),
                "{reply:?}"
            );
            let rpc = RpcRequest::Forward {
                from: leader,
                request: lamina_cluster::Request {
                    ops: vec![lamina_cluster::Op::Delete {
                        key: lamina_server::dsl_key::encode_i32(1).to_vec(),
                    }],
                },
            };
            write_frame(&mut s, &Envelope { shard: 0, rpc })
                .await
                .unwrap();
            let reply: RpcReply = read_frame(&mut s).await.unwrap().unwrap();
            assert!(
                matches!(&reply, RpcReply::Forward(line) if line.starts_with(refused)),
                "{reply:?}"
            );
        }

        // The two others still form a majority: more writes commit, and
        // every acknowledged write reads back through the leader.
        write_all(&mut c, &mut model, 80..120, 5).await;
        check_reads(&mut c, &model, -5..125).await;
        drop(f);
        drop(c);
        cl.shutdown().await;
    })
    .await
    .expect("test within 60 s");
}

/// `line` through the current leader of the group, whichever it is:
/// follows redirects and waits out elections (`leader unknown`).
async fn on_leader(cl: &Cluster, line: &str) -> String {
    let deadline = Instant::now() + WAIT;
    loop {
        let leader = cl.leader().await;
        let reply = Client::connect(&cl.client_addr(leader))
            .await
            .call(line)
            .await;
        if !reply.starts_with("ERROR not leader") {
            return reply;
        }
        assert!(Instant::now() < deadline, "{line}: {reply}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Membership commands a careless or hostile client may send: ids that
/// are in no file or no group, absurd ids, repeated adds and promotions,
/// removing the leader, then removing voters down to one and trying to
/// remove that one. Each gets a clear reply, and no acknowledged write is
/// lost at any point (checked against a `BTreeMap` model).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn hostile_membership_commands_lose_nothing() {
    tokio::time::timeout(Duration::from_secs(90), async {
        let mut cl = Cluster::start_with_voters(4, 3, RaftTiming::default()).await;
        let mut model = Model::new();
        let leader = cl.leader().await;
        let mut c = Client::connect(&cl.client_addr(leader)).await;
        write_all(&mut c, &mut model, 0..60, 6).await;

        let usage = "ERROR expected a member id and, with several shards, a shard id";
        for (line, want) in [
            // Nobody to remove: not a silent OK.
            ("@remove 9", "ERROR member 9 is not in shard 0's group"),
            ("@remove 4", "ERROR member 4 is not in shard 0's group"),
            (
                "@promote 9",
                "ERROR raft: Learner 9 not found: add it as learner before adding it as a voter",
            ),
            ("@promote 18446744073709551616", usage),
            ("@remove -1", usage),
            ("@add-learner 4 0 7", usage),
            ("@remove", usage),
            ("@remove 1e3", usage),
            // Already in the group: nothing changes, so OK (idempotent).
            ("@add-learner 1", "OK"),
            // A learner added, then removed again (openraft's RemoveNodes:
            // RemoveVoters would leave it in), then added for good.
            ("@add-learner 4", "OK"),
            ("@add-learner 4", "OK"),
            ("@remove 4", "OK"),
            ("@add-learner 4", "OK"),
            // A repeated promotion is a no-op.
            ("@promote 4", "OK"),
            ("@promote 4", "OK"),
        ] {
            assert_eq!(c.call(line).await, want, "{line}");
            if line == "@remove 4" && want == "OK" {
                assert!(cl
                    .node(leader)
                    .raft()
                    .metrics()
                    .borrow()
                    .membership_config
                    .membership()
                    .get_node(&4)
                    .is_none());
            }
        }
        drop(c);
        assert_eq!(voters(cl.node(leader)), [1, 2, 3, 4].into());

        // The leader removes itself: the others elect a new one, and every
        // write is still there.
        assert_eq!(on_leader(&cl, &format!("@remove {leader}")).await, "OK");
        let mut left: Vec<NodeId> = (1..=4).filter(|&i| i != leader).collect();
        cl.kill(leader).await;
        let second = cl.leader().await;
        assert!(left.contains(&second));
        let mut c = Client::connect(&cl.client_addr(second)).await;
        check_reads(&mut c, &model, -5..65).await;
        write_all(&mut c, &mut model, 60..80, 7).await;
        drop(c);

        // Down to one voter; the last one cannot be removed.
        while left.len() > 1 {
            let leader = cl.leader().await;
            let victim = *left.iter().find(|&&i| i != leader).unwrap();
            assert_eq!(on_leader(&cl, &format!("@remove {victim}")).await, "OK");
            left.retain(|&i| i != victim);
            cl.kill(victim).await;
        }
        let last = left[0];
        assert_eq!(
            on_leader(&cl, &format!("@remove {last}")).await,
            "ERROR raft: new membership can not be empty"
        );
        assert_eq!(voters(cl.node(last)), [last].into());
        let mut c = Client::connect(&cl.client_addr(cl.leader().await)).await;
        check_reads(&mut c, &model, -5..85).await;
        write_all(&mut c, &mut model, 80..90, 8).await;
        check_reads(&mut c, &model, -5..95).await;
        drop(c);
        cl.shutdown().await;
    })
    .await
    .expect("test within 90 s");
}

/// The test process's resident memory (all three members), KiB. The
/// tests of this file run in parallel in one process, so bounds on it
/// leave room for the others' allocations.
fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// Hostile bytes on a member's two ports. On the Raft port: a wrong
/// shard, a cut-off frame, lengths at and past the limit, garbage and
/// deeply nested JSON, an unknown RPC. On the client port: non-UTF-8, an
/// endless line, a flood of reads from a client that does not read its
/// replies, hundreds of idle connections, resets. Each gets an error or a
/// closed connection; afterwards the cluster still commits, and every
/// acknowledged write reads back.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[expect(
    clippy::too_many_lines,
    reason = "a scenario test that reads top to bottom"
)]
async fn hostile_bytes_on_the_raft_and_client_ports() {
    use lamina_cluster::frame::{read_frame, write_frame};
    use lamina_cluster::network::{Envelope, RpcReply, RpcRequest};
    use tokio::io::AsyncReadExt;
    tokio::time::timeout(Duration::from_secs(90), async {
        let cl = Cluster::start(3, RaftTiming::default()).await;
        let mut model = Model::new();
        let leader = cl.leader().await;
        let mut c = Client::connect(&cl.client_addr(leader)).await;
        write_all(&mut c, &mut model, 0..50, 9).await;

        // Every frame below comes from a peer that passed the handshake:
        // the frame decoder behind authentication.
        // A shard the member does not serve: refused, the connection goes on.
        let mut s = cl.raft_conn(leader).await;
        let rpc = RpcRequest::Leader { from: 2 };
        write_frame(&mut s, &Envelope { shard: 7, rpc })
            .await
            .unwrap();
        let reply: RpcReply = read_frame(&mut s).await.unwrap().unwrap();
        assert!(
            matches!(&reply, RpcReply::Refused(why) if why.contains("no shard 7")),
            "{reply:?}"
        );
        let rpc = RpcRequest::Leader { from: 2 };
        write_frame(&mut s, &Envelope { shard: 0, rpc })
            .await
            .unwrap();
        let reply: RpcReply = read_frame(&mut s).await.unwrap().unwrap();
        assert!(
            matches!(&reply, RpcReply::Leader(l) if l.starts_with("LEADER ")),
            "{reply:?}"
        );

        // Frames the member must close the connection on, without a reply.
        let nested = "[".repeat(100_000);
        let frames: Vec<(&str, Vec<u8>)> = vec![
            ("garbage JSON", b"{{{ not json".to_vec()),
            ("deeply nested JSON", nested.into_bytes()),
            (
                "an unknown RPC",
                br#"{"shard":0,"rpc":{"Bogus":1}}"#.to_vec(),
            ),
            (
                "a negative shard",
                br#"{"shard":-1,"rpc":{"Leader":{"from":1}}}"#.to_vec(),
            ),
            ("binary", vec![0xff, 0xfe, 0x00, 0x80]),
        ];
        for (what, body) in frames {
            let mut s = cl.raft_conn(leader).await;
            let mut frame = (body.len() as u32).to_be_bytes().to_vec();
            frame.extend_from_slice(&body);
            s.write_all(&frame).await.unwrap();
            let mut rest = Vec::new();
            let n = tokio::time::timeout(WAIT, s.read_to_end(&mut rest)).await;
            assert!(
                matches!(n, Ok(Ok(0)) | Ok(Err(_))),
                "{what}: {n:?} {rest:?}"
            );
        }
        // Lengths past the limit close at once; a frame announced at the
        // limit and cut short holds no buffer of its size: 64 of them at
        // 32 MiB each cost the members far less than 64 * 32 MiB.
        for len in [u32::MAX, lamina_cluster::frame::MAX_FRAME as u32 + 1] {
            let mut s = cl.raft_conn(leader).await;
            s.write_all(&len.to_be_bytes()).await.unwrap();
            let mut rest = Vec::new();
            let n = tokio::time::timeout(WAIT, s.read_to_end(&mut rest)).await;
            assert!(matches!(n, Ok(Ok(0)) | Ok(Err(_))), "length {len}: {n:?}");
        }
        let base = rss_kib();
        let mut stalled = Vec::new();
        for _ in 0..64 {
            let mut s = cl.raft_conn(leader).await;
            s.write_all(&(lamina_cluster::frame::MAX_FRAME as u32).to_be_bytes())
                .await
                .unwrap();
            s.write_all(&[b'['; 4096]).await.unwrap();
            stalled.push(s);
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
        let grown = rss_kib().saturating_sub(base);
        eprintln!("64 frames announced at 32 MiB, 4 KiB sent each: RSS +{grown} KiB");
        assert!(grown < 128 << 10, "RSS grew {grown} KiB");
        // Cut short: the connections close, the member goes on.
        drop(stalled);

        // The client port: non-UTF-8 gets an error line and the session
        // goes on; an endless line is skipped in bounded memory.
        let mut raw = TcpStream::connect(cl.client_addr(leader)).await.unwrap();
        raw.write_all(b"g \xff\xfe\n\xc0\xc1 1 2\np 1\n")
            .await
            .unwrap();
        raw.write_all(&vec![b'7'; 1 << 20]).await.unwrap();
        raw.write_all(b"\ng 1\n").await.unwrap();
        let mut r = BufReader::new(raw);
        let mut lines = Vec::new();
        for _ in 0..5 {
            let mut l = String::new();
            r.read_line(&mut l).await.unwrap();
            lines.push(l);
        }
        for l in &lines[..4] {
            assert!(l.starts_with("ERROR "), "{lines:?}");
        }
        assert_eq!(lines[3], "ERROR line longer than 4096 bytes\n");
        assert_eq!(lines[4], format!("{}\n", model[&1]));
        drop(r);

        // A client floods reads and reads no reply for a while: the member
        // stops reading it (its replies wait in the socket), and serves
        // others meanwhile; then every reply is right.
        let flood_reads = 20_000;
        let mut flood = TcpStream::connect(cl.client_addr(leader)).await.unwrap();
        let base = rss_kib();
        let sender = tokio::spawn(async move {
            flood
                .write_all("g 2\n".repeat(flood_reads).as_bytes())
                .await
                .unwrap();
            flood
        });
        tokio::time::sleep(Duration::from_millis(500)).await;
        write_all(&mut c, &mut model, 50..60, 10).await;
        let grown = rss_kib().saturating_sub(base);
        eprintln!("a flood of {flood_reads} reads, replies unread: RSS +{grown} KiB");
        assert!(grown < 64 << 10, "RSS grew {grown} KiB");
        let flood = sender.await.unwrap();
        let mut r = BufReader::new(flood);
        for i in 0..flood_reads {
            let mut l = String::new();
            r.read_line(&mut l).await.unwrap();
            assert_eq!(l, format!("{}\n", model[&2]), "reply {i}");
        }
        drop(r);

        // 500 idle connections, each after one command; then half close,
        // half reset in the middle of a line (unread input makes the close
        // a reset).
        let base = rss_kib();
        let mut idle = Vec::new();
        for _ in 0..500 {
            let mut s = Client::connect(&cl.client_addr(leader)).await;
            assert_eq!(s.call("@sync").await, "@sync");
            idle.push(s);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        let per = rss_kib().saturating_sub(base) / 500;
        eprintln!("500 idle client connections: {per} KiB each");
        assert!(per < 256, "{per} KiB per idle connection");
        for (i, mut s) in idle.into_iter().enumerate() {
            if i % 2 == 0 {
                s.w.shutdown().await.unwrap();
            } else {
                s.w.write_all(b"@sync\np 1").await.unwrap();
            }
        }

        // Everything acknowledged is there, and writes still commit.
        write_all(&mut c, &mut model, 60..80, 11).await;
        check_reads(&mut c, &model, -5..85).await;
        drop(c);
        cl.shutdown().await;
    })
    .await
    .expect("test within 90 s");
}

/// Forged Raft RPCs with absurd terms and log indexes, each as one
/// well-formed frame (about 200 bytes): the issue's brick was an
/// AppendEntries with `vote.term = 2^64 - 1`, after which the next
/// election computed `term + 1` and every voter's core panicked, again at
/// every restart (the vote is persisted).
fn forged_rpcs(leader: NodeId) -> Vec<(&'static str, lamina_cluster::network::RpcRequest)> {
    use lamina_cluster::network::RpcRequest;
    use lamina_cluster::TypeConfig;
    use openraft::raft::{AppendEntriesRequest, InstallSnapshotRequest, VoteRequest};
    use openraft::{CommittedLeaderId, Entry, EntryPayload, LogId, SnapshotMeta, Vote};
    let log_id = |term, index| LogId::new(CommittedLeaderId::new(term, leader), index);
    let append = |vote, entries: Vec<Entry<TypeConfig>>, commit| {
        RpcRequest::Append(AppendEntriesRequest::<TypeConfig> {
            vote,
            prev_log_id: None,
            entries,
            leader_commit: commit,
        })
    };
    vec![
        (
            "AppendEntries of term 2^64-1",
            append(Vote::new_committed(u64::MAX, leader), Vec::new(), None),
        ),
        (
            "RequestVote of term 2^64-1",
            RpcRequest::Vote(VoteRequest {
                vote: Vote::new(u64::MAX, 99),
                last_log_id: Some(log_id(u64::MAX, u64::MAX)),
            }),
        ),
        (
            "AppendEntries with an entry of term 2^64-1 at index 2^64-1",
            append(
                Vote::new_committed(1, leader),
                vec![Entry::<TypeConfig> {
                    log_id: log_id(u64::MAX, u64::MAX),
                    payload: EntryPayload::Blank,
                }],
                None,
            ),
        ),
        (
            "AppendEntries committing index 2^63",
            append(
                Vote::new_committed(1, leader),
                Vec::new(),
                Some(log_id(1, 1 << 63)),
            ),
        ),
        (
            "InstallSnapshot of term 2^63",
            RpcRequest::Snapshot(InstallSnapshotRequest::<TypeConfig> {
                vote: Vote::new_committed(1 << 63, leader),
                meta: SnapshotMeta {
                    last_log_id: Some(log_id(1 << 63, 1 << 63)),
                    last_membership: Default::default(),
                    snapshot_id: "forged".into(),
                },
                offset: 0,
                data: Vec::new(),
                done: false,
            }),
        ),
    ]
}

/// Sends every forged RPC to every member of an insecure cluster (no
/// secret: the sanity check alone stands between the frames and
/// openraft), then kills the leader: the two others elect a new one, it
/// acknowledges writes, every acknowledged write reads back, and no
/// member's term went anywhere near the forged ones. Each forged RPC got
/// a refusal, none reached openraft. (Before the check: the cores
/// panicked, `attempt to add with overflow` in openraft's election, and
/// no leader was elected again.)
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn forged_terms_and_indexes_are_refused_and_the_cluster_lives_on() {
    use lamina_cluster::frame::{read_frame, write_frame};
    use lamina_cluster::network::{Envelope, RpcReply};
    tokio::time::timeout(Duration::from_secs(60), async {
        let insecure = Setup {
            secure: false,
            ..Setup::default()
        };
        let mut cl = Cluster::start_with(3, 3, RaftTiming::default(), insecure).await;
        let mut model = Model::new();
        let leader = cl.leader().await;
        let mut c = Client::connect(&cl.client_addr(leader)).await;
        write_all(&mut c, &mut model, 0..20, 12).await;
        drop(c);
        let mut replies = Vec::new();
        for id in 1..=3 {
            let mut s = cl.raft_conn(id).await;
            for (what, rpc) in forged_rpcs(leader) {
                write_frame(&mut s, &Envelope { shard: 0, rpc })
                    .await
                    .unwrap();
                let reply: Option<RpcReply> = read_frame(&mut s).await.unwrap_or(None);
                replies.push((id, what, reply));
            }
        }
        // An election: the members that got the forged RPCs elect a leader.
        tokio::time::sleep(Duration::from_millis(500)).await;
        cl.kill(leader).await;
        let second = cl.leader().await;
        assert_ne!(second, leader);
        let mut c = Client::connect(&cl.client_addr(second)).await;
        write_all(&mut c, &mut model, 20..40, 13).await;
        check_reads(&mut c, &model, -5..45).await;
        for id in (1..=3).filter(|&i| i != leader) {
            let term = cl.node(id).raft().metrics().borrow().current_term;
            assert!(term < 1 << 32, "member {id} is at term {term}");
        }
        for (id, what, reply) in &replies {
            assert!(
                matches!(reply, Some(RpcReply::Refused(why)) if why.starts_with("refused: ")),
                "member {id}, {what}: {reply:?}"
            );
        }
        drop(c);
        cl.shutdown().await;
    })
    .await
    .expect("test within 60 s");
}

/// A cluster with a secret: the forged RPCs, sent without the handshake,
/// get the 32-byte challenge and a closed connection, and so does a peer
/// with another secret, and one that answers nothing (within the
/// handshake's 5 s); a peer with the secret is served. Then the leader
/// is killed and the others elect a new one that acknowledges writes.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn unauthenticated_peers_get_nothing_but_a_closed_connection() {
    use lamina_cluster::auth::{self, HANDSHAKE_TIMEOUT, NONCE};
    use lamina_cluster::frame::{read_frame, write_frame};
    use lamina_cluster::network::{Envelope, RpcReply, RpcRequest};
    use tokio::io::AsyncReadExt;
    tokio::time::timeout(Duration::from_secs(60), async {
        let mut cl = Cluster::start(3, RaftTiming::default()).await;
        let mut model = Model::new();
        let leader = cl.leader().await;
        let mut c = Client::connect(&cl.client_addr(leader)).await;
        write_all(&mut c, &mut model, 0..20, 14).await;
        drop(c);
        // A peer that answers nothing is closed by the handshake's deadline.
        let addr = cl.config.member(leader).unwrap().raft.clone();
        let silent = tokio::spawn(async move {
            let mut s = TcpStream::connect(&addr).await.unwrap();
            let started = Instant::now();
            let mut got = Vec::new();
            let r = s.read_to_end(&mut got).await;
            (started.elapsed(), got.len(), r.is_ok())
        });
        for id in 1..=3 {
            let addr = &cl.config.member(id).unwrap().raft;
            for (what, rpc) in forged_rpcs(leader) {
                let mut s = TcpStream::connect(addr).await.unwrap();
                write_frame(&mut s, &Envelope { shard: 0, rpc })
                    .await
                    .unwrap();
                let mut got = Vec::new();
                let r = tokio::time::timeout(WAIT, s.read_to_end(&mut got))
                    .await
                    .expect("closed in time");
                // The challenge, then the end (or a reset: the member
                // closed with the frame unread).
                assert!(
                    got.len() <= NONCE,
                    "member {id}, {what}: {} bytes",
                    got.len()
                );
                assert!(
                    r.is_err() || got.len() == NONCE,
                    "member {id}, {what}: {r:?}"
                );
            }
            let mut s = TcpStream::connect(addr).await.unwrap();
            let wrong = Secret::new(b"another secret, also 32 bytes ..").unwrap();
            let e = auth::connect(&mut s, &wrong).await.unwrap_err();
            assert!(
                matches!(
                    e.kind(),
                    std::io::ErrorKind::UnexpectedEof | std::io::ErrorKind::ConnectionReset
                ),
                "member {id}: {e}"
            );
        }
        let mut s = cl.raft_conn(leader).await;
        write_frame(
            &mut s,
            &Envelope {
                shard: 0,
                rpc: RpcRequest::Leader { from: 2 },
            },
        )
        .await
        .unwrap();
        let reply: RpcReply = read_frame(&mut s).await.unwrap().unwrap();
        assert!(
            matches!(&reply, RpcReply::Leader(l) if l.starts_with(&format!("LEADER {leader} "))),
            "{reply:?}"
        );
        drop(s);
        let (took, got, clean) = silent.await.unwrap();
        assert_eq!((got, clean), (NONCE, true));
        assert!(
            took >= HANDSHAKE_TIMEOUT - Duration::from_millis(500) && took < WAIT,
            "a silent peer was closed after {took:?}"
        );

        cl.kill(leader).await;
        let second = cl.leader().await;
        let mut c = Client::connect(&cl.client_addr(second)).await;
        write_all(&mut c, &mut model, 20..40, 15).await;
        check_reads(&mut c, &model, -5..45).await;
        for id in (1..=3).filter(|&i| i != leader) {
            let term = cl.node(id).raft().metrics().borrow().current_term;
            assert!(term < 100, "member {id} is at term {term}");
        }
        drop(c);
        cl.shutdown().await;
    })
    .await
    .expect("test within 60 s");
}

/// A member whose stored vote has an absurd term (what a forged RPC left
/// before the check) refuses to start, naming the directory and the way
/// out, instead of starting openraft to panic.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_with_a_forged_stored_vote_refuses_to_start() {
    use openraft::storage::RaftLogStorage;
    let tmp = tempfile::tempdir().unwrap();
    let r = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let c = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let config = ClusterConfig::parse(&format!(
        "[[node]]\nid = 1\nraft = \"{}\"\nclient = \"{}\"\n",
        r.local_addr().unwrap(),
        c.local_addr().unwrap()
    ))
    .unwrap();
    let o = opts(tmp.path(), &config, 1);
    {
        let sm = lamina_cluster::store::StateMachine::open(&o.dir, &o.engine).unwrap();
        let mut log =
            lamina_cluster::store::LogStore::open(&o.dir.join("raft-log"), &o.engine, &sm).unwrap();
        log.save_vote(&openraft::Vote::new_committed(u64::MAX, 2))
            .await
            .unwrap();
    }
    let err = match ClusterNode::start_with(o, r, c).await {
        Ok(_) => panic!("a member with a vote of term 2^64-1 started"),
        Err(e) => e.to_string(),
    };
    assert!(
        err.contains(&format!(
            "{}",
            tmp.path().join("node1").join("raft-log").display()
        )) && err.contains(&u64::MAX.to_string())
            && err.contains("docs/cluster.md"),
        "{err}"
    );
}

/// What a web page can make a browser send to 127.0.0.1 without a
/// preflight: a `text/plain` POST whose body is DSL lines. The leader's
/// client port closes the connection at the request line and executes
/// nothing: the key is not stored and member 2 is still a voter. (Before:
/// each header line got an `ERROR`, then `p 1 1` and `@remove 2` both
/// answered `OK`.)
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_http_post_on_the_client_port_executes_nothing() {
    use tokio::io::AsyncReadExt;
    tokio::time::timeout(Duration::from_secs(60), async {
        let cl = Cluster::start(3, RaftTiming::default()).await;
        let leader = cl.leader().await;
        let addr = cl.client_addr(leader);
        let body = "p 1 1\n@remove 2\n";
        for first in ["POST / HTTP/1.1", "PUT /x HTTP/1.1", "Host: 127.0.0.1"] {
            let request = format!(
                "{first}\r\nHost: {addr}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            );
            let mut s = TcpStream::connect(&addr).await.unwrap();
            s.write_all(request.as_bytes()).await.unwrap();
            let mut got = Vec::new();
            let r = tokio::time::timeout(WAIT, s.read_to_end(&mut got))
                .await
                .expect("closed in time");
            assert!(
                got.is_empty(),
                "{first}: {:?} ({r:?})",
                String::from_utf8_lossy(&got)
            );
        }
        let mut c = Client::connect(&addr).await;
        assert_eq!(c.call("g 1").await, "");
        assert_eq!(voters(cl.node(leader)), [1, 2, 3].into());
        // A client of the protocol is served as before.
        assert_eq!(c.call("p 1 2").await, "OK");
        assert_eq!(c.call("g 1").await, "2");
        drop(c);
        cl.shutdown().await;
    })
    .await
    .expect("test within 60 s");
}

/// Caps and deadlines on a member's two ports, set small: a leader whose
/// client port is full answers one more client `ERROR too many
/// connections` and closes it, while a follower still gets its forwarded
/// writes acknowledged (the Raft port has its own cap); idle clients are
/// closed after the idle time-out, a line begun and not finished after
/// the request time-out, and so is a Raft frame whose body stalls (a
/// 32 MiB frame's length and 4 KiB of it); a Raft port over its cap
/// closes the next connection without a challenge. Afterwards the
/// leader is served again and every acknowledged write reads back.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[expect(
    clippy::too_many_lines,
    reason = "a scenario test that reads top to bottom"
)]
async fn full_ports_refuse_the_next_connection_and_deadlines_close_stalled_ones() {
    use lamina_cluster::auth::NONCE;
    use tokio::io::AsyncReadExt;
    const CAP: usize = 8;
    const RAFT_CAP: usize = 12;
    const IDLE: Duration = Duration::from_secs(3);
    const REQUEST: Duration = Duration::from_secs(2);
    tokio::time::timeout(Duration::from_secs(60), async {
        let setup = Setup {
            secure: true,
            limits: PortLimits {
                max_client_connections: CAP,
                max_raft_connections: RAFT_CAP,
                idle_timeout: Some(IDLE),
                request_timeout: REQUEST,
                ..PortLimits::default()
            },
            forward_writes: true,
        };
        let cl = Cluster::start_with(3, 3, RaftTiming::default(), setup).await;
        let mut model = Model::new();
        let leader = cl.leader().await;
        let follower = (1..=3).find(|&i| i != leader).unwrap();

        // The leader's client port, full of idle clients.
        let mut idle = Vec::new();
        for _ in 0..CAP {
            let mut c = Client::connect(&cl.client_addr(leader)).await;
            assert_eq!(c.call("@sync").await, "@sync");
            idle.push(c);
        }
        let idle_since = Instant::now();
        let mut over = Client::connect(&cl.client_addr(leader)).await;
        let mut line = String::new();
        over.r.read_line(&mut line).await.unwrap();
        assert_eq!(line, "ERROR too many connections\n");
        assert_eq!(over.r.read_line(&mut line).await.unwrap(), 0);
        // Writes through a follower still commit: it forwards them over
        // the Raft port.
        let mut f = Client::connect(&cl.client_addr(follower)).await;
        write_all(&mut f, &mut model, 0..10, 16).await;

        // The idle clients are closed after the idle time-out.
        for mut c in idle {
            let mut l = String::new();
            let n = tokio::time::timeout(WAIT, c.r.read_line(&mut l))
                .await
                .expect("closed in time");
            assert!(matches!(n, Ok(0) | Err(_)), "{n:?} {l:?}");
        }
        let waited = idle_since.elapsed();
        assert!(
            waited >= IDLE - Duration::from_millis(500),
            "closed after {waited:?}"
        );

        // A line begun and never finished: closed after the request
        // time-out, although bytes keep coming (slowly).
        let mut slow = TcpStream::connect(cl.client_addr(leader)).await.unwrap();
        let started = Instant::now();
        let mut closed = false;
        for _ in 0..40 {
            if slow.write_all(b"7").await.is_err() {
                closed = true;
                break;
            }
            let mut b = [0u8; 1];
            if let Ok(n) = tokio::time::timeout(Duration::from_millis(250), slow.read(&mut b)).await
            {
                assert!(!matches!(n, Ok(1..)), "a reply to half a line");
                closed = true;
                break;
            }
        }
        let took = started.elapsed();
        assert!(closed, "a half line held for {took:?}");
        assert!(
            took >= REQUEST - Duration::from_millis(500),
            "closed after {took:?}"
        );

        // A Raft frame whose body stalls: closed after the request
        // time-out, its buffer with it.
        let mut s = cl.raft_conn(leader).await;
        s.write_all(&(lamina_cluster::frame::MAX_FRAME as u32).to_be_bytes())
            .await
            .unwrap();
        s.write_all(&[b'['; 4096]).await.unwrap();
        let started = Instant::now();
        let mut rest = Vec::new();
        let n = tokio::time::timeout(WAIT, s.read_to_end(&mut rest))
            .await
            .expect("closed in time");
        let took = started.elapsed();
        assert!(matches!(n, Ok(0) | Err(_)), "{n:?}");
        assert!(
            took >= REQUEST - Duration::from_millis(500),
            "closed after {took:?}"
        );

        // The Raft port over its cap: the next connections get no
        // challenge, only a closed connection.
        let raft = cl.config.member(leader).unwrap().raft.clone();
        let mut held = Vec::new();
        let mut refused = 0;
        for _ in 0..RAFT_CAP + 4 {
            let mut s = TcpStream::connect(&raft).await.unwrap();
            let mut challenge = [0u8; NONCE];
            match tokio::time::timeout(WAIT, s.read_exact(&mut challenge))
                .await
                .expect("an answer in time")
            {
                Ok(_) => held.push(s),
                Err(_) => refused += 1,
            }
        }
        assert!(refused >= 4, "{refused} refused, {} held", held.len());
        assert!(held.len() <= RAFT_CAP);
        drop(held);

        // The leader serves clients again, and everything is there (the
        // follower's client, idle meanwhile, was closed too).
        let mut c = Client::connect(&cl.client_addr(leader)).await;
        write_all(&mut c, &mut model, 10..20, 17).await;
        let mut f = Client::connect(&cl.client_addr(follower)).await;
        write_all(&mut f, &mut model, 20..30, 18).await;
        check_reads(&mut c, &model, -5..35).await;
        drop((c, f));
        cl.shutdown().await;
    })
    .await
    .expect("test within 60 s");
}
