//! The write path: group commit, the log, memtable switches and the write
//! stalls (each with a way out: docs/compaction.md).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::bounded;

use crate::batch::{decode_entries, encode_header, BatchOp, WriteBatch};
use crate::clock::now_ms;
use crate::error::{Error, Result};
use crate::filename::wal_name;
use crate::memtable::MemTable;
use crate::options::SyncMode;
use crate::record::append_record;

use super::{new_memtable, Inner, Msg, Pending, State, SuperVersion, WalState};

impl Inner {
    pub(super) fn write(&self, batch: WriteBatch) -> Result<()> {
        let (tx, rx) = bounded(1);
        {
            let mut q = self.queue.lock();
            q.pending.push(Pending { batch, tx });
            if q.leader_active {
                drop(q);
                match rx.recv() {
                    Ok(Msg::Done(r)) => return r,
                    Ok(Msg::Lead) => {}
                    Err(_) => return Err(Error::Closed),
                }
            } else {
                q.leader_active = true;
            }
        }
        self.lead();
        match rx.try_recv() {
            Ok(Msg::Done(r)) => r,
            _ => Err(Error::Closed),
        }
    }

    /// Commits one group as leader, then hands leadership to the next
    /// waiting writer (so no writer leads forever).
    pub(super) fn lead(&self) {
        let group = std::mem::take(&mut self.queue.lock().pending);
        let result = self.commit_group(&group);
        for p in &group {
            let r = match &result {
                Ok(()) => Ok(()),
                Err(e) => Err(e.duplicate()),
            };
            let _ = p.tx.send(Msg::Done(r));
        }
        let mut q = self.queue.lock();
        match q.pending.first() {
            Some(next) => {
                let _ = next.tx.send(Msg::Lead);
            }
            None => q.leader_active = false,
        }
    }

    pub(super) fn commit_group(&self, group: &[Pending]) -> Result<()> {
        let mut wal = self.wal.lock();
        if self.shutdown.load(Ordering::Acquire) {
            return Err(Error::Closed);
        }
        let mem = self.make_room(&mut wal, false)?;
        let count: u32 = group.iter().map(|p| p.batch.count()).sum();
        let first_seq = self.last_seq.load(Ordering::Relaxed) + 1;
        if self.opts.write_ahead_log {
            let mut rep = Vec::with_capacity(
                12 + group.iter().map(|p| p.batch.entries().len()).sum::<usize>(),
            );
            encode_header(&mut rep, first_seq, count);
            for p in group {
                rep.extend_from_slice(p.batch.entries());
            }
            let logged =
                append_record(wal.file.as_mut(), &rep).and_then(|()| match self.opts.sync {
                    SyncMode::Always => wal.file.sync(),
                    _ => wal.file.flush(),
                });
            if let Err(e) = logged {
                wal.broken = true;
                return Err(e);
            }
            wal.dirty = true;
        }
        // Rows of the group's keys leave the row cache until they are visible.
        let _rows = self.row_cache.as_ref().map(|rows| {
            let entries = || {
                group
                    .iter()
                    .flat_map(|p| decode_entries(p.batch.entries()).flatten())
            };
            rows.begin_writes(
                entries()
                    .filter(|e| e.op != BatchOp::DeleteRange)
                    .map(|e| e.key),
                entries()
                    .filter(|e| e.op == BatchOp::DeleteRange)
                    .map(|e| (e.key, e.value)),
            )
        });
        let entries = group
            .iter()
            .flat_map(|p| decode_entries(p.batch.entries()).flatten())
            .zip(first_seq..)
            .map(|(e, seq)| (seq, e.op, e.key, e.value));
        mem.add_all(entries, now_ms());
        let bytes: u64 = group.iter().map(|p| p.batch.user_bytes()).sum();
        let last = first_seq + u64::from(count) - 1;
        self.last_seq.store(last, Ordering::Relaxed);
        self.visible_seq.store(last, Ordering::Release);
        self.stats.bytes_ingested.add(bytes);
        self.stats.writes.add(u64::from(count));
        Ok(())
    }

    /// Returns the memtable to write into, switching to a new memtable and
    /// WAL when the current one is full (or `force`), and stalling while
    /// flushes or compactions are too far behind.
    pub(super) fn make_room(&self, wal: &mut WalState, mut force: bool) -> Result<Arc<MemTable>> {
        let mut st = self.state.lock();
        let mut stall_start: Option<Instant> = None;
        let mut stall_reason = "";
        let mut stall_errors = None;
        loop {
            if let Some(e) = &st.bg_error {
                return Err(Error::Background(Arc::clone(e)));
            }
            if self.shutdown.load(Ordering::Acquire) {
                return Err(Error::Closed);
            }
            let full = st.mem.approximate_bytes() >= self.opts.write_buffer_size;
            if !force && !full && !wal.broken {
                break;
            }
            if force && st.mem.is_empty() && !wal.broken {
                break;
            }
            let l0_runs = st.version.levels.first().map_or(0, |l| l.runs.len());
            let behind = if st.imms.len() >= self.opts.max_immutable_memtables {
                Some("memtables waiting for their flush")
            } else if self.opts.level0_stop_runs > 0
                && l0_runs >= self.opts.level0_stop_runs
                && self.level0_can_shrink(&st)
            {
                Some("level 0 at its stop trigger")
            } else if self.policy_stalls_writes(&st, &mut stall_errors) {
                Some(if self.opts.writes_wait_for_compactions {
                    "compactions have priority over writes"
                } else {
                    "the compaction policy holds writes"
                })
            } else {
                None
            };
            if let (Some(reason), false) = (behind, wal.broken) {
                if stall_start.is_none() {
                    stall_start = Some(Instant::now());
                    stall_reason = reason;
                }
                self.cv.notify_all();
                self.cv.wait_for(&mut st, Duration::from_millis(50));
                continue;
            }
            // Switch: the old WAL is synced first so that, after a power
            // loss, what survives across WAL files is a prefix.
            let number = self.alloc_id();
            let file = self.vfs.create(&self.dir.join(wal_name(number)))?;
            if !wal.broken {
                wal.file.sync()?;
            }
            self.vfs.sync_dir(&self.dir)?;
            let old_number = wal.number;
            *wal = WalState {
                file,
                number,
                dirty: false,
                broken: false,
            };
            let old = std::mem::replace(&mut st.mem, Arc::new(new_memtable(&self.opts, number)));
            if old.is_empty() {
                // Nothing to flush: the old log holds no write.
                let _ = self.vfs.remove(&self.dir.join(wal_name(old_number)));
            } else {
                st.imms.push_back(old);
            }
            self.install(&mut st);
            self.cv.notify_all();
            force = false;
        }
        if let Some(t) = stall_start {
            self.stats.stall_micros.add(t.elapsed().as_micros() as u64);
            self.stats.stalls.inc();
            self.info_log.log(
                "stall",
                format_args!("ms={} cause=\"{stall_reason}\"", t.elapsed().as_millis()),
            );
        }
        Ok(Arc::clone(&st.mem))
    }

    /// True while a compaction that takes level-0 runs is running or can be
    /// picked: only then may the level-0 stop trigger hold writes. A policy
    /// that merges nothing there (`nomerge`, or tiers whose runs never match
    /// in size) lets level 0 grow instead of freezing writes forever.
    pub(super) fn level0_can_shrink(&self, st: &State) -> bool {
        let Some(l0) = st.version.levels.first() else {
            return false;
        };
        if st.manual
            || l0
                .runs
                .iter()
                .flat_map(|r| r.files.iter())
                .any(|f| st.busy.contains(&f.id))
        {
            return true;
        }
        let policy = Arc::clone(&self.policy.read());
        policy.pick(&self.view(st)).iter().any(|t| {
            t.inputs
                .iter()
                .any(|i| i.level == 0 && !i.file_ids.is_empty())
        })
    }

    /// True while writes must wait for compactions (checked at memtable
    /// switches): always until the tree is settled under
    /// `Options::writes_wait_for_compactions`, otherwise when the policy
    /// asks. A compaction failing during the wait ends it: the work it
    /// waits for may never be done.
    pub(super) fn policy_stalls_writes(
        &self,
        st: &State,
        errors_at_start: &mut Option<u64>,
    ) -> bool {
        let errors = self.stats.compaction_errors.get();
        if *errors_at_start.get_or_insert(errors) != errors || st.manual {
            return false;
        }
        if self.opts.writes_wait_for_compactions {
            return !self.settled(st);
        }
        let policy = Arc::clone(&self.policy.read());
        policy.stalls_writes(&self.view(st))
    }

    /// Publishes the current memtables and version to readers.
    pub(super) fn install(&self, st: &mut State) {
        self.table_cache.set_level0(&st.version);
        let sv = Arc::new(SuperVersion {
            mem: Arc::clone(&st.mem),
            imms: st.imms.iter().rev().cloned().collect(),
            version: Arc::clone(&st.version),
        });
        *self.sv.write() = sv;
    }

    pub(super) fn flush_and_wait(&self) -> Result<()> {
        let target = {
            let mut wal = self.wal.lock();
            self.make_room(&mut wal, true)?;
            self.wal_numbers_pending()
        };
        let mut st = self.state.lock();
        loop {
            if st.imms.iter().all(|m| !target.contains(&m.wal_number())) {
                return Ok(());
            }
            if let Some(e) = &st.bg_error {
                return Err(Error::Background(Arc::clone(e)));
            }
            if self.shutdown.load(Ordering::Acquire) {
                return Err(Error::Closed);
            }
            self.cv.wait_for(&mut st, Duration::from_millis(50));
        }
    }

    pub(super) fn wal_numbers_pending(&self) -> Vec<u64> {
        self.state
            .lock()
            .imms
            .iter()
            .map(|m| m.wal_number())
            .collect()
    }

    pub(super) fn sync_loop(&self, period: Duration) {
        while !self.shutdown.load(Ordering::Acquire) {
            std::thread::sleep(period);
            let mut wal = self.wal.lock();
            if wal.dirty && !wal.broken && wal.file.sync().is_ok() {
                wal.dirty = false;
            }
        }
    }
}
