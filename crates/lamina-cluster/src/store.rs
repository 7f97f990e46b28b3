//! openraft's storage on lamina: [`LogStore`] (the Raft log, the vote) and
//! [`StateMachine`] (the replicated data), each its own database.
//!
//! Two databases rather than one with key prefixes: the state machine is
//! replaced whole when a snapshot is installed, which is a directory swap
//! when it is a database of its own; its checkpoint (the snapshot) carries
//! no log; and the log's append/truncate/purge traffic never mixes with the
//! data in the state machine's LSM tree.

use std::fmt::Debug;
use std::fs;
use std::ops::{Bound, RangeBounds};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use lamina::{Db, Options, SyncMode, WriteBatch};
use openraft::storage::{LogFlushed, LogState, RaftLogStorage, RaftStateMachine, Snapshot};
use openraft::{
    AnyError, EntryPayload, OptionalSend, RaftLogReader, RaftSnapshotBuilder, StorageIOError, Vote,
};
use parking_lot::{Mutex, RwLock};
use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio::io::AsyncWriteExt;
use tokio::sync::watch;

use crate::error::{ClusterError, Result};
use crate::snapshot::{pack_dir, sync_dir, unpack, SnapshotFile};
use crate::types::{
    Entry, LogId, NodeId, Op, Response, SnapshotMeta, StorageError, StoredMembership, TypeConfig,
    MAX_INDEX, MAX_TERM,
};

/// Prefix of log entries in the log database (then the big-endian index).
const LOG_PREFIX: u8 = b'l';
const KEY_VOTE: &[u8] = b"meta/vote";
const KEY_PURGED: &[u8] = b"meta/purged";

/// Prefix of user keys in the state machine.
pub const DATA_PREFIX: u8 = b'd';
const KEY_APPLIED: &[u8] = b"m/applied";
const KEY_MEMBERSHIP: &[u8] = b"m/membership";

fn log_key(index: u64) -> [u8; 9] {
    let mut k = [0u8; 9];
    k[0] = LOG_PREFIX;
    k[1..].copy_from_slice(&index.to_be_bytes());
    k
}

/// The state machine key of user key `key`.
pub fn data_key(key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(key.len() + 1);
    k.push(DATA_PREFIX);
    k.extend_from_slice(key);
    k
}

fn to_json<T: Serialize>(v: &T) -> Result<Vec<u8>> {
    serde_json::to_vec(v).map_err(|e| ClusterError::Corrupt {
        what: "record",
        why: e.to_string(),
    })
}

fn from_json<T: DeserializeOwned>(what: &'static str, b: &[u8]) -> Result<T> {
    serde_json::from_slice(b).map_err(|e| ClusterError::Corrupt {
        what,
        why: e.to_string(),
    })
}

fn read_json<T: DeserializeOwned>(db: &Db, key: &[u8], what: &'static str) -> Result<Option<T>> {
    match db.get(key)? {
        Some(b) => Ok(Some(from_json(what, &b)?)),
        None => Ok(None),
    }
}

fn sio_write(e: ClusterError) -> StorageError {
    StorageIOError::write(AnyError::new(&e)).into()
}
fn sio_logs_read(e: ClusterError) -> StorageError {
    StorageIOError::read_logs(AnyError::new(&e)).into()
}
fn sio_logs_write(e: ClusterError) -> StorageError {
    StorageIOError::write_logs(AnyError::new(&e)).into()
}

/// Engine options for a cluster database: the caller's, with every write
/// fsynced before it is acknowledged.
pub fn synced(opts: &Options) -> Options {
    let mut o = opts.clone();
    o.sync = SyncMode::Always;
    o
}

/// The Raft log, the vote and the last purged log id, in one lamina
/// database opened with [`SyncMode::Always`]: each append is one fsynced
/// [`WriteBatch`] before openraft hears it is durable.
#[derive(Clone)]
pub struct LogStore {
    db: Arc<Db>,
    /// How far the group's state machine is durable: a purge waits for it.
    durable: watch::Receiver<Durable>,
}

impl LogStore {
    /// Opens (or creates) the log database at `dir`, the log of the group
    /// whose state machine is `sm`. Refuses a log whose stored vote or log
    /// ids have a term over [`MAX_TERM`] or an index over [`MAX_INDEX`]:
    /// no election or append reaches them, and openraft would overflow
    /// `term + 1` and panic at every start (a forged RPC stored them,
    /// before [`crate::network::check_ids`] refused such RPCs).
    pub fn open(dir: &Path, opts: &Options, sm: &StateMachine) -> Result<LogStore> {
        let db = Db::open(dir, synced(opts))?;
        let log = LogStore {
            db: Arc::new(db),
            durable: sm.shared.durable.subscribe(),
        };
        let vote: Option<Vote<NodeId>> = read_json(&log.db, KEY_VOTE, "vote")?;
        let purged: Option<LogId> = read_json(&log.db, KEY_PURGED, "purged log id")?;
        let last = log.last_entry_id()?;
        let ids = [
            ("the vote", vote.map(|v| (v.leader_id.term, 0))),
            (
                "the last purged log id",
                purged.map(|l| (l.leader_id.term, l.index)),
            ),
            (
                "the last log entry",
                last.map(|l| (l.leader_id.term, l.index)),
            ),
        ];
        for (what, id) in ids {
            if let Some((term, index)) = id.filter(|&(t, i)| t > MAX_TERM || i > MAX_INDEX) {
                return Err(ClusterError::Corrupt {
                    what: "raft log",
                    why: format!(
                        "{what} in {} has term {term}, index {index}: beyond any real election or append (2^62), so it was forged or damaged, and openraft would panic on it. Move this member's directory away and add the member again from the leader (docs/cluster.md, \"A member whose Raft group stops\")",
                        dir.display()
                    ),
                });
            }
        }
        Ok(log)
    }

    /// The database, for shutdown bookkeeping.
    pub fn db(&self) -> &Arc<Db> {
        &self.db
    }

    fn entries(&self, lo: Bound<u64>, hi: Bound<u64>) -> Result<Vec<Entry>> {
        let lo_key = match lo {
            Bound::Included(i) => Some(log_key(i)),
            Bound::Excluded(i) => i.checked_add(1).map(log_key),
            Bound::Unbounded => Some(log_key(0)),
        };
        let Some(lo_key) = lo_key else {
            return Ok(Vec::new());
        };
        let hi_key: Vec<u8> = match hi {
            Bound::Included(i) => match i.checked_add(1) {
                Some(j) => log_key(j).to_vec(),
                None => vec![LOG_PREFIX + 1],
            },
            Bound::Excluded(i) => log_key(i).to_vec(),
            Bound::Unbounded => vec![LOG_PREFIX + 1],
        };
        if lo_key.as_slice() >= hi_key.as_slice() {
            return Ok(Vec::new());
        }
        let mut out = Vec::new();
        for item in self
            .db
            .scan(Bound::Included(&lo_key[..]), Bound::Excluded(&hi_key[..]))?
        {
            let (_, v) = item?;
            out.push(from_json::<Entry>("log entry", &v)?);
        }
        Ok(out)
    }

    fn last_entry_id(&self) -> Result<Option<LogId>> {
        let lo = [LOG_PREFIX];
        let hi = [LOG_PREFIX + 1];
        match self
            .db
            .scan_rev(Bound::Included(&lo[..]), Bound::Excluded(&hi[..]))?
            .next()
        {
            Some(item) => {
                let (_, v) = item?;
                Ok(Some(from_json::<Entry>("log entry", &v)?.log_id))
            }
            None => Ok(None),
        }
    }

    fn delete_range(
        &self,
        lo: u64,
        hi: Option<u64>,
        extra: Option<(&[u8], Vec<u8>)>,
    ) -> Result<()> {
        let lo_key = log_key(lo);
        let hi_key: Vec<u8> = match hi {
            Some(h) => log_key(h).to_vec(),
            None => vec![LOG_PREFIX + 1],
        };
        let mut batch = WriteBatch::new();
        if let Some((k, v)) = extra {
            batch.put(k, &v);
        }
        for item in self
            .db
            .scan(Bound::Included(&lo_key[..]), Bound::Excluded(&hi_key[..]))?
        {
            let (k, _) = item?;
            batch.delete(&k);
        }
        if !batch.is_empty() {
            self.db.write(batch)?;
        }
        Ok(())
    }
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> std::result::Result<Vec<Entry>, StorageError> {
        self.entries(range.start_bound().cloned(), range.end_bound().cloned())
            .map_err(sio_logs_read)
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = LogStore;

    async fn get_log_state(&mut self) -> std::result::Result<LogState<TypeConfig>, StorageError> {
        let purged: Option<LogId> =
            read_json(&self.db, KEY_PURGED, "purged log id").map_err(sio_logs_read)?;
        let last = self.last_entry_id().map_err(sio_logs_read)?;
        Ok(LogState {
            last_purged_log_id: purged,
            last_log_id: last.or(purged),
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote<NodeId>) -> std::result::Result<(), StorageError> {
        let v = to_json(vote).map_err(sio_write)?;
        self.db
            .put(KEY_VOTE, &v)
            .map_err(|e| StorageIOError::write_vote(AnyError::new(&e)).into())
    }

    async fn read_vote(&mut self) -> std::result::Result<Option<Vote<NodeId>>, StorageError> {
        read_json(&self.db, KEY_VOTE, "vote")
            .map_err(|e| StorageIOError::read_vote(AnyError::new(&e)).into())
    }

    // `save_committed`/`read_committed` keep openraft's defaults (nothing
    // stored): the committed index is an optimization openraft does not
    // need durably, and storing it cost one more fsync per write, in
    // series with the append and the apply (a 1-member group went from
    // 10 ms to 4 ms per write without it, a 3-member one from 2.3 to 1.9).

    async fn append<I>(
        &mut self,
        entries: I,
        callback: LogFlushed<TypeConfig>,
    ) -> std::result::Result<(), StorageError>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let mut batch = WriteBatch::new();
        for e in entries {
            let v = to_json(&e).map_err(sio_logs_write)?;
            batch.put(&log_key(e.log_id.index), &v);
        }
        // One fsynced batch (SyncMode::Always) before the callback.
        let res = if batch.is_empty() {
            Ok(())
        } else {
            self.db.write(batch)
        };
        match res {
            Ok(()) => {
                callback.log_io_completed(Ok(()));
                Ok(())
            }
            Err(e) => {
                callback.log_io_completed(Err(std::io::Error::other(e.to_string())));
                Err(sio_logs_write(e.into()))
            }
        }
    }

    async fn truncate(&mut self, log_id: LogId) -> std::result::Result<(), StorageError> {
        self.delete_range(log_id.index, None, None)
            .map_err(sio_logs_write)
    }

    async fn purge(&mut self, log_id: LogId) -> std::result::Result<(), StorageError> {
        // A follower given a snapshot has its log purged up to the
        // snapshot as soon as openraft hands the snapshot to the state
        // machine, while the install is still running. Killed in between,
        // the member would restart with its log purged past its state
        // machine and no snapshot covering the gap: openraft's state check
        // panics in the Raft core at startup and the group stops for good,
        // while the process still serves its stale data. So nothing is
        // purged that the state machine has not durably applied; the Raft
        // core waits here for the install (an install or an apply that
        // failed, or a state machine gone, ends the wait with an error).
        let durable = self
            .durable
            .wait_for(|d| match d {
                Durable::Applied(a) => a.map(|a| a.index) >= Some(log_id.index),
                Durable::Failed => true,
            })
            .await
            .map(|d| *d);
        if !matches!(durable, Ok(Durable::Applied(_))) {
            return Err(sio_logs_write(ClusterError::Raft(format!(
                "not purging the log to {log_id}: the state machine failed or closed before applying it"
            ))));
        }
        let v = to_json(&log_id).map_err(sio_logs_write)?;
        let hi = log_id.index.checked_add(1);
        // The purged id and the deletions in one batch.
        self.delete_range(0, hi, Some((KEY_PURGED, v)))
            .map_err(sio_logs_write)
    }
}

/// Shared state of the state machine: the live database (replaced when a
/// snapshot is installed) and where snapshots go.
pub struct SmShared {
    sm_dir: PathBuf,
    snap_dir: PathBuf,
    opts: Options,
    db: RwLock<Arc<Db>>,
    generation: Mutex<u64>,
    /// Held while a batch is applied, and while a snapshot reads "applied"
    /// and takes its checkpoint: the two then describe the same state.
    apply_lock: Mutex<()>,
    /// Held while the current snapshot is switched.
    publish_lock: Mutex<()>,
    snap_seq: AtomicU64,
    /// What is durably applied (every apply and install is fsynced).
    durable: watch::Sender<Durable>,
}

/// How far a state machine is durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Durable {
    /// Every entry up to this log id is applied and fsynced.
    Applied(Option<LogId>),
    /// An apply or a snapshot install failed: openraft stops the group.
    Failed,
}

/// The replicated key-value data, a lamina database whose writes are the
/// committed entries, each batch of entries one [`WriteBatch`] together
/// with the last applied log id and membership.
#[derive(Clone)]
pub struct StateMachine {
    shared: Arc<SmShared>,
}

const CURRENT: &str = "CURRENT";
/// Names the current snapshot: its meta and its archive file.
const SNAPSHOT_META: &str = "current.json";

/// What `snapshots/current.json` holds.
#[derive(serde::Serialize, serde::Deserialize)]
struct CurrentSnapshot {
    meta: SnapshotMeta,
    /// The archive's file name in `snapshots/` (`snap-*.archive`).
    archive: String,
}

fn gen_name(g: u64) -> String {
    format!("gen-{g}")
}

fn io(what: String) -> impl FnOnce(std::io::Error) -> ClusterError {
    move |e| ClusterError::io(what, e)
}

/// Writes `bytes` to `path` atomically: a temporary file, fsynced, renamed,
/// the directory fsynced.
fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    let tmp = path.with_extension("tmp");
    let mut f = fs::File::create(&tmp).map_err(io(format!("create {}", tmp.display())))?;
    f.write_all(bytes)
        .and_then(|_| f.sync_all())
        .map_err(io(format!("write {}", tmp.display())))?;
    fs::rename(&tmp, path).map_err(io(format!("rename {}", tmp.display())))?;
    match path.parent() {
        Some(p) => sync_dir(p),
        None => Ok(()),
    }
}

impl StateMachine {
    /// Opens the state machine under `node_dir` (`sm/` and `snapshots/`),
    /// removing generations and partial snapshot builds that `CURRENT`
    /// does not name (left by a crash).
    pub fn open(node_dir: &Path, opts: &Options) -> Result<StateMachine> {
        let sm_dir = node_dir.join("sm");
        let snap_dir = node_dir.join("snapshots");
        for d in [&sm_dir, &snap_dir] {
            fs::create_dir_all(d).map_err(io(format!("mkdir {}", d.display())))?;
        }
        let generation = match fs::read_to_string(sm_dir.join(CURRENT)) {
            Ok(s) => s
                .trim()
                .strip_prefix("gen-")
                .and_then(|n| n.parse::<u64>().ok())
                .ok_or_else(|| ClusterError::Corrupt {
                    what: "sm/CURRENT",
                    why: format!("{s:?}"),
                })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
            Err(e) => return Err(ClusterError::io("read sm/CURRENT", e)),
        };
        let live = gen_name(generation);
        for ent in fs::read_dir(&sm_dir).map_err(io(format!("read {}", sm_dir.display())))? {
            let ent = ent.map_err(io(format!("read {}", sm_dir.display())))?;
            let name = ent.file_name().to_string_lossy().into_owned();
            if name.starts_with("gen-") && name != live {
                fs::remove_dir_all(ent.path()).map_err(io(format!("remove {name}")))?;
            }
        }
        // Left by a crash: checkpoints being packed, archives being
        // received or built but never made current (all made by this
        // module under these prefixes).
        let current = read_current_snapshot(&snap_dir)?.map(|c| c.archive);
        for ent in fs::read_dir(&snap_dir).map_err(io(format!("read {}", snap_dir.display())))? {
            let ent = ent.map_err(io(format!("read {}", snap_dir.display())))?;
            let name = ent.file_name().to_string_lossy().into_owned();
            if name.starts_with("build-") {
                fs::remove_dir_all(ent.path()).map_err(io("remove snapshot build".into()))?;
            } else if (name.starts_with("recv-") || name.starts_with("snap-"))
                && current.as_deref() != Some(name.as_str())
            {
                fs::remove_file(ent.path()).map_err(io(format!("remove {name}")))?;
            }
        }
        let db = Db::open(sm_dir.join(&live), synced(opts))?;
        let (applied, _) = Self::applied(&db)?;
        Ok(StateMachine {
            shared: Arc::new(SmShared {
                sm_dir,
                snap_dir,
                opts: synced(opts),
                db: RwLock::new(Arc::new(db)),
                generation: Mutex::new(generation),
                apply_lock: Mutex::new(()),
                publish_lock: Mutex::new(()),
                snap_seq: AtomicU64::new(0),
                durable: watch::Sender::new(Durable::Applied(applied)),
            }),
        })
    }

    /// The live database (reads go here; the handle stays valid across a
    /// snapshot install, reading the old generation).
    pub fn db(&self) -> Arc<Db> {
        self.shared.db.read().clone()
    }

    /// The shared state, for shutdown bookkeeping.
    pub fn shared(&self) -> &Arc<SmShared> {
        &self.shared
    }

    /// The value of user key `key`.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self.db().get(&data_key(key))?)
    }

    /// User keys in `[lo, hi)` with their values.
    pub fn range(&self, lo: &[u8], hi: &[u8]) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let (lo, hi) = (data_key(lo), data_key(hi));
        let mut out = Vec::new();
        if lo >= hi {
            return Ok(out);
        }
        for item in self
            .db()
            .scan(Bound::Included(&lo[..]), Bound::Excluded(&hi[..]))?
        {
            let (k, v) = item?;
            out.push((k.get(1..).unwrap_or_default().to_vec(), v));
        }
        Ok(out)
    }

    fn applied(db: &Db) -> Result<(Option<LogId>, StoredMembership)> {
        let applied = read_json(db, KEY_APPLIED, "applied log id")?;
        let membership = read_json(db, KEY_MEMBERSHIP, "membership")?.unwrap_or_default();
        Ok((applied, membership))
    }

    /// Publishes how far the state machine is durable (to the log's purge).
    fn durable(&self, d: Durable) {
        self.shared.durable.send_replace(d);
    }

    /// A name no earlier snapshot file of this directory had.
    fn unique_tag(&self) -> String {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let seq = self.shared.snap_seq.fetch_add(1, Ordering::Relaxed);
        format!("{nanos}-{seq}")
    }

    /// Makes the archive `snapshots/NAME` the current snapshot, unless the
    /// current one is newer (a build that finished after a newer snapshot
    /// was installed): then the archive is removed. The replaced archive
    /// is removed (senders still reading it keep their open handle).
    fn publish(&self, meta: &SnapshotMeta, name: String) -> Result<()> {
        let _g = self.shared.publish_lock.lock();
        let dir = &self.shared.snap_dir;
        let old = read_current_snapshot(dir)?;
        if let Some(old) = &old {
            if old.meta.last_log_id > meta.last_log_id {
                let path = dir.join(&name);
                return fs::remove_file(&path).map_err(io(format!("remove {}", path.display())));
            }
        }
        let cur = CurrentSnapshot {
            meta: meta.clone(),
            archive: name,
        };
        write_atomic(&dir.join(SNAPSHOT_META), &to_json(&cur)?)?;
        if let Some(old) = old.filter(|o| o.archive != cur.archive) {
            let path = dir.join(&old.archive);
            fs::remove_file(&path).map_err(io(format!("remove {}", path.display())))?;
        }
        Ok(())
    }

    fn build(&self) -> Result<(SnapshotMeta, PathBuf)> {
        let tag = self.unique_tag();
        let tmp = self.shared.snap_dir.join(format!("build-{tag}"));
        let (applied, membership) = {
            let _g = self.shared.apply_lock.lock();
            let db = self.db();
            let state = Self::applied(&db)?;
            db.checkpoint(&tmp)?;
            state
        };
        let name = format!("snap-{tag}.archive");
        let archive = self.shared.snap_dir.join(&name);
        pack_dir(&tmp, &archive)?;
        fs::remove_dir_all(&tmp).map_err(io(format!("remove {}", tmp.display())))?;
        let snapshot_id = match &applied {
            Some(l) => format!("{}-{}-{tag}", l.leader_id.term, l.index),
            None => format!("0-0-{tag}"),
        };
        let meta = SnapshotMeta {
            last_log_id: applied,
            last_membership: membership,
            snapshot_id,
        };
        self.publish(&meta, name)?;
        Ok((meta, archive))
    }

    /// Installs the received archive at `received` (a `recv-*` file).
    fn install(&self, meta: &SnapshotMeta, received: &Path) -> Result<()> {
        let next = *self.shared.generation.lock() + 1;
        let name = gen_name(next);
        let dir = self.shared.sm_dir.join(&name);
        let tmp = self.shared.sm_dir.join(format!("{name}.tmp"));
        for d in [&dir, &tmp] {
            if d.exists() {
                fs::remove_dir_all(d).map_err(io(format!("remove {}", d.display())))?;
            }
        }
        let file = fs::File::open(received).map_err(io(format!("open {}", received.display())))?;
        unpack(file, Some(&tmp))?;
        fs::rename(&tmp, &dir).map_err(io(format!("rename {}", tmp.display())))?;
        sync_dir(&self.shared.sm_dir)?;
        let db = Db::open(&dir, self.shared.opts.clone())?;
        let (applied, _) = Self::applied(&db)?;
        if applied != meta.last_log_id {
            return Err(ClusterError::Corrupt {
                what: "snapshot",
                why: format!(
                    "holds applied {:?}, its meta says {:?}",
                    applied, meta.last_log_id
                ),
            });
        }
        write_atomic(&self.shared.sm_dir.join(CURRENT), name.as_bytes())?;
        let old = {
            let _g = self.shared.apply_lock.lock();
            std::mem::replace(&mut *self.shared.db.write(), Arc::new(db))
        };
        let old_gen = {
            let mut g = self.shared.generation.lock();
            let old = *g;
            *g = next;
            old
        };
        // The received archive becomes the current snapshot (this member
        // may have to send it on as leader).
        let archive = format!("snap-{}.archive", self.unique_tag());
        let path = self.shared.snap_dir.join(&archive);
        fs::rename(received, &path).map_err(io(format!("rename {}", received.display())))?;
        sync_dir(&self.shared.snap_dir)?;
        self.publish(meta, archive)?;
        // Readers may still hold the old generation: then it is removed at
        // the next open instead.
        if let Ok(old) = Arc::try_unwrap(old) {
            old.close()?;
            let old_dir = self.shared.sm_dir.join(gen_name(old_gen));
            fs::remove_dir_all(&old_dir).map_err(io(format!("remove {}", old_dir.display())))?;
        }
        Ok(())
    }
}

/// The current snapshot's record, if there is one.
fn read_current_snapshot(snap_dir: &Path) -> Result<Option<CurrentSnapshot>> {
    let path = snap_dir.join(SNAPSHOT_META);
    match fs::read(&path) {
        Ok(b) => Ok(Some(from_json("snapshots/current.json", &b)?)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(ClusterError::io(format!("read {}", path.display()), e)),
    }
}

fn snapshot_io(e: std::io::Error) -> StorageError {
    StorageError::from(StorageIOError::read_snapshot(None, AnyError::new(&e)))
}

impl RaftSnapshotBuilder<TypeConfig> for StateMachine {
    async fn build_snapshot(&mut self) -> std::result::Result<Snapshot<TypeConfig>, StorageError> {
        let (meta, archive) = self.build().map_err(|e| {
            StorageError::from(StorageIOError::write_snapshot(None, AnyError::new(&e)))
        })?;
        let file = SnapshotFile::open(archive).await.map_err(snapshot_io)?;
        Ok(Snapshot {
            meta,
            snapshot: Box::new(file),
        })
    }
}

impl RaftStateMachine<TypeConfig> for StateMachine {
    type SnapshotBuilder = StateMachine;

    async fn applied_state(
        &mut self,
    ) -> std::result::Result<(Option<LogId>, StoredMembership), StorageError> {
        Self::applied(&self.db())
            .map_err(|e| StorageIOError::read_state_machine(AnyError::new(&e)).into())
    }

    async fn apply<I>(&mut self, entries: I) -> std::result::Result<Vec<Response>, StorageError>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let sm_err = |e: ClusterError| -> StorageError {
            StorageIOError::write_state_machine(AnyError::new(&e)).into()
        };
        let mut batch = WriteBatch::new();
        let mut replies = Vec::new();
        let mut last = None;
        let mut membership = None;
        for e in entries {
            last = Some(e.log_id);
            match e.payload {
                EntryPayload::Blank => replies.push(Response::default()),
                EntryPayload::Normal(req) => {
                    let n = req.ops.len();
                    for op in req.ops {
                        match op {
                            Op::Put { key, value } => batch.put(&data_key(&key), &value),
                            Op::Delete { key } => batch.delete(&data_key(&key)),
                        }
                    }
                    replies.push(Response { applied: n });
                }
                EntryPayload::Membership(m) => {
                    membership = Some(StoredMembership::new(Some(e.log_id), m));
                    replies.push(Response::default());
                }
            }
        }
        let Some(last) = last else {
            return Ok(replies);
        };
        batch.put(KEY_APPLIED, &to_json(&Some(last)).map_err(sm_err)?);
        if let Some(m) = membership {
            batch.put(KEY_MEMBERSHIP, &to_json(&m).map_err(sm_err)?);
        }
        let _g = self.shared.apply_lock.lock();
        match self.db().write(batch) {
            Ok(()) => self.durable(Durable::Applied(Some(last))),
            Err(e) => {
                self.durable(Durable::Failed);
                return Err(sm_err(e.into()));
            }
        }
        Ok(replies)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.clone()
    }

    async fn begin_receiving_snapshot(
        &mut self,
    ) -> std::result::Result<Box<SnapshotFile>, StorageError> {
        let path = self
            .shared
            .snap_dir
            .join(format!("recv-{}.archive", self.unique_tag()));
        let file = SnapshotFile::create(path).await.map_err(|e| {
            StorageError::from(StorageIOError::write_snapshot(None, AnyError::new(&e)))
        })?;
        Ok(Box::new(file))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta,
        mut snapshot: Box<SnapshotFile>,
    ) -> std::result::Result<(), StorageError> {
        let werr = |e: &dyn std::error::Error| -> StorageError {
            StorageIOError::write_snapshot(Some(meta.signature()), AnyError::error(e.to_string()))
                .into()
        };
        // openraft wrote the chunks through tokio's file, which finishes
        // writes in the background: flush, then make them durable.
        let installed = async {
            snapshot.file.flush().await.map_err(|e| werr(&e))?;
            snapshot.file.sync_all().await.map_err(|e| werr(&e))?;
            let path = snapshot.path.clone();
            drop(snapshot);
            self.install(meta, &path).map_err(|e| werr(&e))
        }
        .await;
        self.durable(match installed {
            Ok(()) => Durable::Applied(meta.last_log_id),
            Err(_) => Durable::Failed,
        });
        installed
    }

    async fn get_current_snapshot(
        &mut self,
    ) -> std::result::Result<Option<Snapshot<TypeConfig>>, StorageError> {
        let rerr = |e: &dyn std::error::Error| -> StorageError {
            StorageIOError::read_snapshot(None, AnyError::error(e.to_string())).into()
        };
        let Some(cur) = read_current_snapshot(&self.shared.snap_dir).map_err(|e| rerr(&e))? else {
            return Ok(None);
        };
        let file = SnapshotFile::open(self.shared.snap_dir.join(&cur.archive))
            .await
            .map_err(|e| rerr(&e))?;
        Ok(Some(Snapshot {
            meta: cur.meta,
            snapshot: Box::new(file),
        }))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use openraft::CommittedLeaderId;

    use super::*;
    use crate::types::Request;

    fn id(index: u64) -> LogId {
        LogId::new(CommittedLeaderId::new(1, 1), index)
    }

    fn entry(index: u64) -> Entry {
        Entry {
            log_id: id(index),
            payload: EntryPayload::Normal(Request {
                ops: vec![Op::Put {
                    key: index.to_be_bytes().to_vec(),
                    value: b"v".to_vec(),
                }],
            }),
        }
    }

    /// A state machine and its log holding entries 1..=`n` (written
    /// directly: openraft's append callback cannot be made outside it).
    fn open(dir: &Path, n: u64) -> (StateMachine, LogStore) {
        let opts = Options::default();
        let sm = StateMachine::open(dir, &opts).unwrap();
        let log = LogStore::open(&dir.join("raft-log"), &opts, &sm).unwrap();
        let mut batch = WriteBatch::new();
        for i in 1..=n {
            batch.put(&log_key(i), &to_json(&entry(i)).unwrap());
        }
        log.db.write(batch).unwrap();
        (sm, log)
    }

    fn indexes(log: &LogStore) -> Vec<u64> {
        let all = log.entries(Bound::Unbounded, Bound::Unbounded).unwrap();
        all.iter().map(|e| e.log_id.index).collect()
    }

    /// The restart hazard: openraft purges a follower's log up to a
    /// snapshot it has only handed to the state machine. The purge must
    /// not happen (nor be recorded) before the state machine holds the
    /// entries durably.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn purge_waits_until_the_state_machine_has_applied_the_entries() {
        let dir = tempfile::tempdir().unwrap();
        let (mut sm, mut log) = open(dir.path(), 4);
        let mut purging = log.clone();
        let purge = tokio::spawn(async move { purging.purge(id(3)).await });
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(!purge.is_finished(), "purged past an empty state machine");
        assert_eq!(indexes(&log), [1, 2, 3, 4]);
        assert_eq!(log.get_log_state().await.unwrap().last_purged_log_id, None);

        sm.apply([entry(1), entry(2)]).await.unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(!purge.is_finished(), "purged past applied entry 2");
        assert_eq!(indexes(&log), [1, 2, 3, 4]);

        sm.apply([entry(3)]).await.unwrap();
        tokio::time::timeout(Duration::from_secs(10), purge)
            .await
            .expect("the purge ends once entry 3 is applied")
            .unwrap()
            .unwrap();
        assert_eq!(indexes(&log), [4]);
        let state = log.get_log_state().await.unwrap();
        assert_eq!(state.last_purged_log_id, Some(id(3)));

        // Behind what is applied, a purge does not wait.
        let (mut sm, mut log) = open(&dir.path().join("applied"), 3);
        sm.apply([entry(1), entry(2), entry(3)]).await.unwrap();
        tokio::time::timeout(Duration::from_secs(10), log.purge(id(2)))
            .await
            .expect("no wait behind the applied entries")
            .unwrap();
        assert_eq!(indexes(&log), [3]);

        // A log whose state machine is gone refuses rather than waiting for
        // ever.
        let (sm, mut log) = open(&dir.path().join("gone"), 1);
        drop(sm);
        let res = tokio::time::timeout(Duration::from_secs(10), log.purge(id(1)))
            .await
            .expect("no wait once the state machine is gone");
        assert!(res.is_err());
        assert_eq!(indexes(&log), [1]);
    }

    /// A failed install ends the wait with an error (openraft stops the
    /// group), and nothing is purged.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_failed_install_ends_the_purge_with_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let (mut sm, mut log) = open(dir.path(), 5);
        let mut purging = log.clone();
        let purge = tokio::spawn(async move { purging.purge(id(5)).await });
        let mut received = sm.begin_receiving_snapshot().await.unwrap();
        received.file.write_all(b"not an archive").await.unwrap();
        let meta = SnapshotMeta {
            last_log_id: Some(id(5)),
            last_membership: StoredMembership::default(),
            snapshot_id: "test".into(),
        };
        assert!(sm.install_snapshot(&meta, received).await.is_err());
        let res = tokio::time::timeout(Duration::from_secs(10), purge)
            .await
            .expect("the purge ends when the install fails")
            .unwrap();
        assert!(res.is_err());
        assert_eq!(indexes(&log), [1, 2, 3, 4, 5]);
        assert_eq!(log.get_log_state().await.unwrap().last_purged_log_id, None);
    }
}
