//! The Jepsen-style fault test: a local cluster of real `lamina cluster`
//! processes, concurrent clients, a nemesis that kills and partitions
//! members, and a checker over the recorded history.
//!
//! * Members: `lamina cluster` processes on 127.0.0.1, each with its own
//!   data directory: 3 members in one group, or, with `shards` = N > 1,
//!   N + 2 members where shard i (keys cut evenly over the test's keys)
//!   is held by members i, i+1, i+2, so some members are outside some
//!   shard and route its keys to the shard's members. Every member advertises a [`Proxy`] port as its Raft
//!   address and listens behind it (`raft_listen`), so all Raft traffic
//!   between members goes through the proxy, which can cut any directed
//!   link.
//! * Clients: tasks speaking the CS265 DSL to the members' client ports,
//!   each one command at a time: `p K V` with a value no other write uses,
//!   `d K`, `g K`, `r LO HI`. A write answered `OK` is acknowledged; a
//!   write answered with any `ERROR` (a redirect included: see
//!   [`crate::client`]), timed out, or cut off by a dead connection has an
//!   unknown outcome; a read that fails has no effect and is not recorded.
//!   A client follows redirects, and after a failure moves to another
//!   member.
//! * Nemesis: `faults` injections one after the other, each healed before
//!   the next: SIGKILL a member (random, or the leader) and restart it;
//!   isolate the leader (every link to and from it cut); cut the leader's
//!   outgoing links only; isolate a random member. With shards, "the
//!   leader" is the leader of a shard picked at random.
//! * Checker: after the last fault every link is healed, every member
//!   runs, the clients stop, and every key is read once more through the
//!   leader. Each key's history (a range read counts as a read of every
//!   key it covers) must be linearizable ([`linearizability`]); the final
//!   value must not undo an acknowledged write ([`lost_writes`]); and every
//!   member's state machine must converge to the final values (a member
//!   that keeps a different value counts one lost write per key).
//!
//! [`linearizability`]: crate::linearizability
//! [`lost_writes`]: crate::linearizability::lost_writes

use std::collections::BTreeMap;
use std::fmt;
use std::fs;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

use crate::auth::Secret;
use crate::config::{ClientPolicy, ClusterConfig, NodeConfig, RaftTiming, Shard, ShardConfig};
use crate::error::{ClusterError, Result};
use crate::linearizability::{check_register, lost_writes, Kind, Op, Value, Verdict};
use crate::proxy::Proxy;
use crate::types::NodeId;

/// How the test runs.
#[derive(Debug, Clone)]
pub struct FaultTestOptions {
    /// Fault injections.
    pub faults: usize,
    /// Concurrent clients.
    pub clients: usize,
    /// Keys `0..keys` (few, so operations on a key overlap).
    pub keys: i32,
    /// Seed of the clients' and the nemesis's choices.
    pub seed: u64,
    /// The `lamina` binary to run members with.
    pub lamina: PathBuf,
    /// A directory to create for the members' data and logs (it must not
    /// exist; it is removed after a run that found nothing wrong).
    pub dir: PathBuf,
    /// Raft timing of the cluster.
    pub timing: RaftTiming,
    /// How long a client waits for a reply before giving up on it.
    pub op_timeout: Duration,
    /// Print each fault on stderr.
    pub verbose: bool,
    /// Clients read with `@follower-reads on` (no read index): reads may
    /// be stale, which the checker must then report (a check of the
    /// checker end to end, not a mode to pass).
    pub follower_reads: bool,
    /// Members forward writes to the leader (`forward_writes`) instead of
    /// redirecting the client.
    pub forward_writes: bool,
    /// Shards: 1 is an unsharded 3-member cluster; N > 1 runs N + 2
    /// members, shard i on members i, i+1, i+2.
    pub shards: usize,
}

impl FaultTestOptions {
    /// The defaults for `faults` injections with the binary `lamina`:
    /// 5 clients, 8 keys, snapshots every 300 entries (so restarted
    /// members also catch up by snapshot).
    pub fn new(faults: usize, lamina: PathBuf, dir: PathBuf) -> FaultTestOptions {
        FaultTestOptions {
            faults,
            clients: 5,
            keys: 8,
            seed: 1,
            lamina,
            dir,
            timing: RaftTiming {
                snapshot_logs: 300,
                keep_logs: 100,
                ..RaftTiming::default()
            },
            op_timeout: Duration::from_secs(2),
            verbose: false,
            follower_reads: false,
            forward_writes: false,
            shards: 1,
        }
    }
}

/// What a run found.
#[derive(Debug, Clone, Default)]
pub struct FaultReport {
    /// Faults injected.
    pub faults: usize,
    /// Client operations invoked (each `r` counts once).
    pub ops: u64,
    /// Of those, answered (reads with their value, writes `OK`).
    pub ok: u64,
    /// Writes of unknown outcome.
    pub unknown: u64,
    /// Reads that failed (not part of the history).
    pub failed_reads: u64,
    /// Acknowledged writes lost.
    pub lost: usize,
    /// Keys whose history is not linearizable (or could not be checked
    /// within the search budget).
    pub violations: usize,
    /// What went wrong, one line each.
    pub problems: Vec<String>,
    /// Seconds the run took.
    pub seconds: f64,
}

impl fmt::Display for FaultReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} faults, {} lost, {} violations, {} ops",
            self.faults, self.lost, self.violations, self.ops
        )
    }
}

fn harness(why: impl Into<String>) -> ClusterError {
    ClusterError::Harness(why.into())
}

/// A free loopback port for a child to bind, kept bound in `held` until
/// every port of the cluster is chosen: a port released at once could be
/// handed out again by the next bind of port 0 (it was, in CI: a member's
/// client address was another member's proxy, and the member could not
/// start).
async fn free_addr(held: &mut Vec<TcpListener>) -> Result<String> {
    let l = TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| ClusterError::io("bind 127.0.0.1:0", e))?;
    let a = l
        .local_addr()
        .map_err(|e| ClusterError::io("local_addr", e))?;
    held.push(l);
    Ok(a.to_string())
}

/// One `lamina cluster` process, killed when dropped.
struct Member {
    id: NodeId,
    child: Option<Child>,
}

impl Member {
    fn running(&self) -> bool {
        self.child.is_some()
    }
}

impl Drop for Member {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// The cluster under test: its processes and its proxy.
struct Cluster {
    opts: FaultTestOptions,
    config: ClusterConfig,
    config_path: PathBuf,
    members: Mutex<Vec<Member>>,
    proxy: Proxy,
    ids: Vec<NodeId>,
    shards: Vec<Shard>,
}

/// The shard map of the test: `n` shards over keys `0..keys` cut evenly
/// (the first and last reaching to the ends of the key space), shard i on
/// members i, i+1, i+2; none for `n` = 1.
fn shard_map(n: usize, keys: i32) -> Vec<ShardConfig> {
    if n <= 1 {
        return Vec::new();
    }
    let n64 = n as i64;
    (1..=n64)
        .map(|i| {
            let cut = |j: i64| (i64::from(keys) * j / n64) as i32;
            ShardConfig {
                id: i as u64,
                lo: (i > 1).then(|| cut(i - 1)),
                hi: (i < n64).then(|| cut(i)),
                members: vec![i as u64, i as u64 + 1, i as u64 + 2],
            }
        })
        .collect()
}

impl Cluster {
    async fn start(opts: &FaultTestOptions) -> Result<Cluster> {
        let shard = shard_map(opts.shards, opts.keys);
        let ids: Vec<NodeId> = if shard.is_empty() {
            vec![1, 2, 3]
        } else {
            (1..=opts.shards as u64 + 2).collect()
        };
        let mut nodes = Vec::new();
        let mut routes = Vec::new();
        let mut held = Vec::new();
        for &id in &ids {
            let proxy_l = TcpListener::bind("127.0.0.1:0")
                .await
                .map_err(|e| ClusterError::io("bind the proxy", e))?;
            let advertised = proxy_l
                .local_addr()
                .map_err(|e| ClusterError::io("local_addr", e))?
                .to_string();
            let listen = free_addr(&mut held).await?;
            routes.push((id, proxy_l, listen.clone()));
            nodes.push(NodeConfig {
                id,
                raft: advertised,
                client: free_addr(&mut held).await?,
                raft_listen: Some(listen),
            });
        }
        // Every port is chosen: free the members' for them to bind.
        drop(held);
        // The members authenticate each other, as a real cluster's should
        // (the proxy, holding the secret too, ends each side's handshake).
        let secret_path = opts.dir.join("cluster.secret");
        let mut secret = [0u8; 32];
        rand::RngCore::fill_bytes(&mut rand::rngs::OsRng, &mut secret);
        {
            use std::io::Write;
            use std::os::unix::fs::OpenOptionsExt;
            fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&secret_path)
                .and_then(|mut f| f.write_all(&secret))
                .map_err(|e| ClusterError::io(format!("write {}", secret_path.display()), e))?;
        }
        let config = ClusterConfig {
            secret_file: Some(PathBuf::from("cluster.secret")),
            node: nodes,
            shard,
            raft: opts.timing.clone(),
            client: ClientPolicy {
                forward_writes: opts.forward_writes,
            },
        };
        config.check()?;
        let text = toml::to_string(&config).map_err(|e| harness(e.to_string()))?;
        let config_path = opts.dir.join("cluster.toml");
        fs::write(&config_path, text)
            .map_err(|e| ClusterError::io(format!("write {}", config_path.display()), e))?;
        let cluster = Cluster {
            opts: opts.clone(),
            shards: config.shards(),
            config,
            config_path,
            members: Mutex::new(ids.iter().map(|&id| Member { id, child: None }).collect()),
            proxy: Proxy::start(routes, Some(Secret::new(&secret)?)),
            ids,
        };
        // Every member initializes the groups it is in (safe with the same
        // membership); unsharded, member 1 does, as the README shows.
        let sharded = cluster.config.is_sharded();
        for &id in &cluster.ids {
            cluster.spawn(id, sharded || id == 1)?;
        }
        Ok(cluster)
    }

    fn spawn(&self, id: NodeId, init: bool) -> Result<()> {
        let dir = self.opts.dir.join(format!("node-{id}"));
        let log_path = self.opts.dir.join(format!("node-{id}.log"));
        let log = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .map_err(|e| ClusterError::io(format!("open {}", log_path.display()), e))?;
        let mut cmd = Command::new(&self.opts.lamina);
        cmd.arg("cluster")
            .arg("--config")
            .arg(&self.config_path)
            .arg("--node-id")
            .arg(id.to_string())
            .arg("--dir")
            .arg(&dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(log));
        if init {
            cmd.arg("--init");
        }
        let child = cmd
            .spawn()
            .map_err(|e| ClusterError::io(format!("run {}", self.opts.lamina.display()), e))?;
        let mut members = self.members.lock();
        if let Some(m) = members.iter_mut().find(|m| m.id == id) {
            m.child = Some(child);
        }
        Ok(())
    }

    /// SIGKILLs member `id` (`Child::kill` is SIGKILL on Unix).
    fn kill(&self, id: NodeId) {
        let mut members = self.members.lock();
        if let Some(m) = members.iter_mut().find(|m| m.id == id) {
            if let Some(mut c) = m.child.take() {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
    }

    /// Restarts every member that is not running.
    fn restart_all(&self) -> Result<()> {
        let down: Vec<NodeId> = self
            .members
            .lock()
            .iter()
            .filter(|m| !m.running())
            .map(|m| m.id)
            .collect();
        for id in down {
            self.spawn(id, false)?;
        }
        Ok(())
    }

    fn client_addrs(&self) -> Vec<String> {
        self.config.node.iter().map(|n| n.client.clone()).collect()
    }

    /// The member that says it leads `shard` (asking each of its members
    /// `@leader K` for a key K of the shard).
    async fn leader(&self, shard: &Shard) -> Option<NodeId> {
        let ask = format!("@leader {}", shard.first_key());
        for n in self
            .config
            .node
            .iter()
            .filter(|n| shard.members.contains(&n.id))
        {
            let mut c = Conn::default();
            if let Ok(line) = c.call(&n.client, &ask, Duration::from_millis(500)).await {
                if line.split_whitespace().nth(1) == Some(&n.id.to_string()) {
                    return Some(n.id);
                }
            }
        }
        None
    }

    /// Whether every shard has a leader.
    async fn all_led(&self) -> bool {
        for s in &self.shards {
            if self.leader(s).await.is_none() {
                return false;
            }
        }
        true
    }
}

/// A client connection, made on first use and dropped after any failure.
#[derive(Default)]
struct Conn {
    stream: Option<(String, BufReader<TcpStream>)>,
    /// Turn follower reads on for each new connection.
    follower_reads: bool,
}

impl Conn {
    /// Sends one line to `addr`, returns the reply line without its
    /// newline; `Err` after a timeout or an I/O error (the connection is
    /// then dropped: a late reply must never answer the next command).
    async fn call(&mut self, addr: &str, line: &str, timeout: Duration) -> std::io::Result<String> {
        let res = tokio::time::timeout(timeout, self.call_inner(addr, line)).await;
        let res = res.unwrap_or_else(|_| {
            Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "no reply in time",
            ))
        });
        if res.is_err() {
            self.stream = None;
        }
        res
    }

    async fn call_inner(&mut self, addr: &str, line: &str) -> std::io::Result<String> {
        if self.stream.as_ref().is_some_and(|(a, _)| a != addr) {
            self.stream = None;
        }
        let stream = match &mut self.stream {
            Some((_, s)) => s,
            None => {
                let s = TcpStream::connect(addr).await?;
                s.set_nodelay(true)?;
                let s = &mut self.stream.insert((addr.to_string(), BufReader::new(s))).1;
                if self.follower_reads {
                    exchange(s, "@follower-reads on").await?;
                }
                s
            }
        };
        exchange(stream, line).await
    }
}

/// Sends one line, reads one reply line (without its newline).
async fn exchange(stream: &mut BufReader<TcpStream>, line: &str) -> std::io::Result<String> {
    stream
        .get_mut()
        .write_all(format!("{line}\n").as_bytes())
        .await?;
    let mut reply = String::new();
    if stream.read_line(&mut reply).await? == 0 {
        return Err(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            "connection closed",
        ));
    }
    Ok(reply.trim_end_matches('\n').to_string())
}

/// The history: every recorded operation with its key.
type History = Arc<Mutex<Vec<(i32, Op)>>>;

/// What the clients counted.
#[derive(Default)]
struct Counters {
    ops: AtomicU64,
    ok: AtomicU64,
    unknown: AtomicU64,
    failed_reads: AtomicU64,
}

/// Where a client sends its next command, learning from the replies.
struct Router {
    addrs: Vec<String>,
    target: usize,
}

impl Router {
    /// Follows a redirect, or moves to another member after a failure
    /// that named no leader. Whether the caller should pause first.
    fn learn(&mut self, reply: Option<&str>, rng: &mut SmallRng) -> bool {
        if let Some(addr) = reply.and_then(|r| r.strip_prefix("ERROR not leader; leader is ")) {
            if let Some(i) = self.addrs.iter().position(|a| a == addr) {
                self.target = i;
                return false;
            }
        }
        self.target = rng.gen_range(0..self.addrs.len());
        true
    }

    fn addr(&self) -> &str {
        &self.addrs[self.target]
    }
}

/// Parses a `g` reply: `Ok(value)`, or `Err(())` for an error line.
fn parse_get(reply: &str) -> std::result::Result<Value, ()> {
    if reply.is_empty() {
        return Ok(None);
    }
    reply.parse::<i32>().map(Some).map_err(|_| ())
}

/// Parses an `r` reply into key → value.
fn parse_range(reply: &str) -> std::result::Result<BTreeMap<i32, i32>, ()> {
    if reply.starts_with("ERROR") {
        return Err(());
    }
    reply
        .split_whitespace()
        .map(|pair| {
            let (k, v) = pair.split_once(':').ok_or(())?;
            Ok((k.parse().map_err(|_| ())?, v.parse().map_err(|_| ())?))
        })
        .collect()
}

struct ClientCtx {
    id: usize,
    keys: i32,
    addrs: Vec<String>,
    timeout: Duration,
    stop: Arc<AtomicBool>,
    history: History,
    counters: Arc<Counters>,
    t0: Instant,
    seed: u64,
    follower_reads: bool,
}

fn micros(t0: Instant) -> u64 {
    u64::try_from(t0.elapsed().as_micros()).unwrap_or(u64::MAX)
}

async fn client(ctx: ClientCtx) {
    let mut rng = SmallRng::seed_from_u64(ctx.seed ^ (ctx.id as u64).wrapping_mul(0x9e37));
    let mut router = Router {
        target: ctx.id % ctx.addrs.len(),
        addrs: ctx.addrs.clone(),
    };
    let mut conn = Conn {
        follower_reads: ctx.follower_reads,
        ..Conn::default()
    };
    // Unique write values: the client id in the high digits.
    let mut next_value = (ctx.id as i32 + 1) * 100_000_000;
    while !ctx.stop.load(Ordering::Relaxed) {
        let key = rng.gen_range(0..ctx.keys);
        let dice = rng.gen_range(0..100);
        let (line, write, range_hi) = if dice < 40 {
            next_value += 1;
            (
                format!("p {key} {next_value}"),
                Some(Some(next_value)),
                None,
            )
        } else if dice < 45 {
            (format!("d {key}"), Some(None), None)
        } else if dice < 85 {
            (format!("g {key}"), None, None)
        } else {
            let hi = key + rng.gen_range(1..=4);
            (format!("r {key} {hi}"), None, Some(hi))
        };
        ctx.counters.ops.fetch_add(1, Ordering::Relaxed);
        let invoke = micros(ctx.t0);
        let reply = conn.call(router.addr(), &line, ctx.timeout).await;
        let complete = micros(ctx.t0);
        let reply = reply.ok();
        let is_error = reply.as_deref().is_none_or(|r| r.starts_with("ERROR"));
        let mut record = Vec::new();
        if let Some(v) = write {
            let acknowledged = reply.as_deref() == Some("OK");
            let c = if acknowledged {
                &ctx.counters.ok
            } else {
                &ctx.counters.unknown
            };
            c.fetch_add(1, Ordering::Relaxed);
            record.push((
                key,
                Op {
                    invoke,
                    complete: acknowledged.then_some(complete),
                    kind: Kind::Write(v),
                },
            ));
        } else {
            let observed: std::result::Result<Vec<(i32, Value)>, ()> = match (&reply, range_hi) {
                (Some(r), None) => parse_get(r).map(|v| vec![(key, v)]),
                (Some(r), Some(hi)) => parse_range(r).map(|m| {
                    (key..hi.min(ctx.keys))
                        .map(|k| (k, m.get(&k).copied()))
                        .collect()
                }),
                (None, _) => Err(()),
            };
            match observed {
                Ok(obs) => {
                    ctx.counters.ok.fetch_add(1, Ordering::Relaxed);
                    record.extend(obs.into_iter().map(|(k, v)| {
                        (
                            k,
                            Op {
                                invoke,
                                complete: Some(complete),
                                kind: Kind::Read(v),
                            },
                        )
                    }));
                }
                Err(()) => {
                    ctx.counters.failed_reads.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        ctx.history.lock().extend(record);
        if is_error && router.learn(reply.as_deref(), &mut rng) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// One fault, described for the log.
async fn inject(cluster: &Cluster, rng: &mut SmallRng) -> Result<String> {
    let ids = cluster.ids.clone();
    let random = ids[rng.gen_range(0..ids.len())];
    let dice = rng.gen_range(0..100);
    // Drawn only with several shards, so an unsharded run's faults stay
    // those of the same seed before sharding.
    let shard = match cluster.shards.as_slice() {
        [only] => only,
        all => &all[rng.gen_range(0..all.len())],
    };
    let leader = cluster.leader(shard).await;
    let what = if dice < 25 || (dice < 50 && leader.is_none()) {
        let hold = rng.gen_range(100..1500);
        cluster.kill(random);
        tokio::time::sleep(Duration::from_millis(hold)).await;
        cluster.spawn(random, false)?;
        format!("kill {random}, restart after {hold} ms")
    } else if dice < 50 {
        let l = leader.unwrap_or(random);
        let hold = rng.gen_range(100..1500);
        cluster.kill(l);
        tokio::time::sleep(Duration::from_millis(hold)).await;
        cluster.spawn(l, false)?;
        format!("kill leader {l}, restart after {hold} ms")
    } else if dice < 80 {
        let l = leader.unwrap_or(random);
        let hold = rng.gen_range(1000..2500);
        cluster.proxy.isolate(l, &ids);
        tokio::time::sleep(Duration::from_millis(hold)).await;
        cluster.proxy.heal();
        format!("isolate leader {l} for {hold} ms")
    } else if dice < 90 {
        let l = leader.unwrap_or(random);
        let hold = rng.gen_range(1000..2500);
        for &m in ids.iter().filter(|&&m| m != l) {
            cluster.proxy.cut(l, m);
        }
        tokio::time::sleep(Duration::from_millis(hold)).await;
        cluster.proxy.heal();
        format!("cut leader {l}'s outgoing links for {hold} ms")
    } else {
        let hold = rng.gen_range(500..2000);
        cluster.proxy.isolate(random, &ids);
        tokio::time::sleep(Duration::from_millis(hold)).await;
        cluster.proxy.heal();
        format!("isolate {random} for {hold} ms")
    };
    Ok(what)
}

/// Runs the test; `Err` only when the harness itself failed (a member
/// would not start, the cluster never served again after healing).
pub fn run(opts: &FaultTestOptions) -> Result<FaultReport> {
    fs::create_dir(&opts.dir)
        .map_err(|e| ClusterError::io(format!("create {}", opts.dir.display()), e))?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| ClusterError::io("start the tokio runtime", e))?;
    let report = rt.block_on(run_async(opts))?;
    if report.lost == 0 && report.violations == 0 {
        // Created above by this run, and nothing in it is needed.
        fs::remove_dir_all(&opts.dir)
            .map_err(|e| ClusterError::io(format!("remove {}", opts.dir.display()), e))?;
    }
    Ok(report)
}

#[expect(
    clippy::too_many_lines,
    reason = "predates the lint; one long sequence of steps, to be cut like `plan`"
)]
async fn run_async(opts: &FaultTestOptions) -> Result<FaultReport> {
    let start = Instant::now();
    let cluster = Cluster::start(opts).await?;
    let deadline = Instant::now() + Duration::from_secs(60);
    while !cluster.all_led().await {
        if Instant::now() > deadline {
            return Err(harness("no leader of every shard within 60 s of starting"));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let t0 = Instant::now();
    let history: History = Arc::default();
    let counters = Arc::new(Counters::default());
    let stop = Arc::new(AtomicBool::new(false));
    let clients: Vec<_> = (0..opts.clients)
        .map(|id| {
            tokio::spawn(client(ClientCtx {
                id,
                keys: opts.keys,
                addrs: cluster.client_addrs(),
                timeout: opts.op_timeout,
                stop: stop.clone(),
                history: history.clone(),
                counters: counters.clone(),
                t0,
                seed: opts.seed,
                follower_reads: opts.follower_reads,
            }))
        })
        .collect();
    let mut rng = SmallRng::seed_from_u64(opts.seed);
    let mut report = FaultReport::default();
    for f in 0..opts.faults {
        let what = inject(&cluster, &mut rng).await?;
        report.faults += 1;
        if opts.verbose {
            eprintln!(
                "[{:7.1} s] fault {}/{}: {what}; {} ops",
                t0.elapsed().as_secs_f64(),
                f + 1,
                opts.faults,
                counters.ops.load(Ordering::Relaxed)
            );
        }
        tokio::time::sleep(Duration::from_millis(rng.gen_range(300..1200))).await;
    }
    cluster.proxy.heal();
    cluster.restart_all()?;
    stop.store(true, Ordering::Relaxed);
    for c in clients {
        c.await
            .map_err(|e| harness(format!("a client failed: {e}")))?;
    }
    let finals = final_reads(&cluster, &history, t0).await?;
    let mut history = std::mem::take(&mut *history.lock());
    history.sort_by_key(|(k, _)| *k);
    let mut per_key: BTreeMap<i32, Vec<Op>> = BTreeMap::new();
    for (k, op) in history {
        per_key.entry(k).or_default().push(op);
    }
    for (k, ops) in &per_key {
        match check_register(ops, crate::linearizability::DEFAULT_BUDGET) {
            Verdict::Linearizable => {}
            Verdict::Violation { stuck_at } => {
                report.violations += 1;
                report.problems.push(format!(
                    "key {k}: not linearizable; no order explains {:?} ({} operations on the key)",
                    ops[stuck_at],
                    ops.len()
                ));
            }
            Verdict::Unknown => {
                report.violations += 1;
                report.problems.push(format!(
                    "key {k}: search budget exhausted, counted as a violation"
                ));
            }
        }
        let final_value = finals.get(k).copied().flatten();
        let lost = lost_writes(ops, final_value);
        if lost > 0 {
            report.lost += lost;
            report.problems.push(format!(
                "key {k}: final value {final_value:?} undoes {lost} acknowledged writes"
            ));
        }
    }
    let diverged = converge(&cluster, &finals, opts.keys).await;
    for (id, k, got) in diverged {
        report.lost += 1;
        report.problems.push(format!(
            "member {id} keeps key {k} = {got:?}, the cluster's value is {:?}",
            finals.get(&k).copied().flatten()
        ));
    }
    report.ops = counters.ops.load(Ordering::Relaxed);
    report.ok = counters.ok.load(Ordering::Relaxed);
    report.unknown = counters.unknown.load(Ordering::Relaxed);
    report.failed_reads = counters.failed_reads.load(Ordering::Relaxed);
    report.seconds = start.elapsed().as_secs_f64();
    Ok(report)
}

/// Reads every key through the leader once the cluster serves again,
/// recording the reads in the history; the values.
async fn final_reads(
    cluster: &Cluster,
    history: &History,
    t0: Instant,
) -> Result<BTreeMap<i32, Value>> {
    let mut rng = SmallRng::seed_from_u64(0);
    let mut router = Router {
        addrs: cluster.client_addrs(),
        target: 0,
    };
    let mut conn = Conn::default();
    let mut finals = BTreeMap::new();
    let deadline = Instant::now() + Duration::from_secs(120);
    for key in 0..cluster.opts.keys {
        loop {
            if Instant::now() > deadline {
                return Err(harness(
                    "the healed cluster did not answer every final read within 120 s",
                ));
            }
            let invoke = micros(t0);
            let reply = conn
                .call(router.addr(), &format!("g {key}"), Duration::from_secs(5))
                .await
                .ok();
            let complete = micros(t0);
            if let Some(Ok(v)) = reply.as_deref().map(parse_get) {
                history.lock().push((
                    key,
                    Op {
                        invoke,
                        complete: Some(complete),
                        kind: Kind::Read(v),
                    },
                ));
                finals.insert(key, v);
                break;
            }
            if router.learn(reply.as_deref(), &mut rng) {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
    Ok(finals)
}

/// Waits (at most 60 s) for every member's state machine of every shard
/// it is in to hold the final values; what still differs then: (member,
/// key, its value).
async fn converge(
    cluster: &Cluster,
    finals: &BTreeMap<i32, Value>,
    keys: i32,
) -> Vec<(NodeId, i32, Value)> {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut differ = Vec::new();
    for n in &cluster.config.node {
        let mut conn = Conn {
            follower_reads: true,
            ..Conn::default()
        };
        // Its own keys only: a follower read of another shard would read
        // some member of that shard, not this one.
        let pieces: Vec<(i32, i32)> = cluster
            .shards
            .iter()
            .filter(|s| s.members.contains(&n.id))
            .filter_map(|s| s.clip(0, keys))
            .collect();
        for (lo, hi) in pieces {
            loop {
                let got = conn
                    .call(&n.client, &format!("r {lo} {hi}"), Duration::from_secs(5))
                    .await
                    .ok()
                    .and_then(|r| parse_range(&r).ok());
                let wrong: Vec<(NodeId, i32, Value)> = (lo..hi)
                    .filter_map(|k| {
                        let mine = got.as_ref().map(|m| m.get(&k).copied());
                        let want = finals.get(&k).copied().flatten();
                        match mine {
                            Some(v) if v == want => None,
                            Some(v) => Some((n.id, k, v)),
                            None => Some((n.id, k, None)),
                        }
                    })
                    .collect();
                if wrong.is_empty() {
                    break;
                }
                if Instant::now() > deadline {
                    differ.extend(wrong);
                    break;
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
    differ
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_parse() {
        assert_eq!(parse_get(""), Ok(None));
        assert_eq!(parse_get("-5"), Ok(Some(-5)));
        assert!(parse_get("ERROR not leader; leader unknown").is_err());
        assert_eq!(
            parse_range("1:10 3:-2"),
            Ok(BTreeMap::from([(1, 10), (3, -2)]))
        );
        assert_eq!(parse_range(""), Ok(BTreeMap::new()));
        assert!(parse_range("ERROR timeout").is_err());
        assert!(parse_range("1:x").is_err());
    }

    #[test]
    fn the_test_shard_map_is_valid_and_puts_members_outside_shards() {
        for n in 2..=4 {
            let node = (1..=n as u64 + 2)
                .map(|id| NodeConfig {
                    id,
                    raft: format!("127.0.0.1:{}", 1000 + id),
                    client: format!("127.0.0.1:{}", 2000 + id),
                    raft_listen: None,
                })
                .collect();
            let config = ClusterConfig {
                secret_file: None,
                node,
                shard: shard_map(n, 8),
                raft: RaftTiming::default(),
                client: ClientPolicy::default(),
            };
            config.check().unwrap();
            let shards = config.shards();
            assert_eq!(shards.len(), n);
            // Keys 0..8 are spread over every shard.
            for s in &shards {
                assert!((0..8).any(|k| s.contains(k)), "{s:?}");
            }
            // The first and the last member are each outside a shard.
            for m in [1, n as u64 + 2] {
                assert!(shards.iter().any(|s| !s.members.contains(&m)), "member {m}");
            }
        }
        assert!(shard_map(1, 8).is_empty());
    }
}
