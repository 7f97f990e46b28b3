//! Parallel reads for range scans (`Options::scan_threads`).
//!
//! Seed 004's RANGE query (§2.12, Alg. 5) searches every run of the tree
//! on a thread pool and merges what they return. Here a scan's sorted runs
//! are read ahead by a pool of worker threads the database owns, each run
//! into a short queue of bounded batches, while the scanning thread merges
//! them through the same [`crate::iter::MergingIterator`] and cursor as a
//! sequential scan. Versions, snapshots, point tombstones and range deletes
//! are therefore decided by the very code of the sequential path: only the
//! thread that reads and decodes a run's blocks changes.
//!
//! Memory: a run's queue holds at most [`QUEUE_BATCHES`] batches, a job
//! fills one more before it stops, and the scan walks one: a scan over R
//! runs buffers at most about `R × (QUEUE_BATCHES + 2) × BATCH_BYTES` (a
//! batch closes at the first entry that takes it to [`BATCH_BYTES`]),
//! whatever its range holds.
//!
//! Jobs never wait: a job fills a run's queue and returns, and the scan
//! submits the next one when it takes a batch. A pool of any size thus
//! serves any number of scans at once without deadlock; once the pool is
//! shut down (`Db::close`), a scan still alive reads its runs itself.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::Arc;
use std::thread::JoinHandle;

use crossbeam_channel::{unbounded, Sender};
use parking_lot::{Condvar, Mutex};

use crate::error::{Error, Result};
use crate::iter::InternalIterator;
use crate::key::{compare_internal, user_key};

/// Bytes of keys and values a batch holds before it is handed over.
pub(crate) const BATCH_BYTES: usize = 32 << 10;
/// Batches a run's queue holds before its reader stops.
pub(crate) const QUEUE_BATCHES: usize = 4;

type Job = Box<dyn FnOnce() + Send>;

/// A fixed set of worker threads running jobs in submission order.
pub(crate) struct ScanPool {
    tx: Mutex<Option<Sender<Job>>>,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

impl ScanPool {
    /// Starts `threads` workers.
    pub(crate) fn new(threads: usize) -> Result<Self> {
        let (tx, rx) = unbounded::<Job>();
        let mut handles = Vec::with_capacity(threads);
        for i in 0..threads {
            let rx = rx.clone();
            let name = format!("lamina-scan-{i}");
            // On failure the workers started so far exit when `tx` drops.
            let handle = std::thread::Builder::new()
                .name(name.clone())
                .spawn(move || {
                    for job in rx {
                        job();
                    }
                })
                .map_err(|e| Error::io("spawn thread", PathBuf::from(name), e))?;
            handles.push(handle);
        }
        Ok(ScanPool {
            tx: Mutex::new(Some(tx)),
            threads: Mutex::new(handles),
        })
    }

    /// Queues `job`, or hands it back once the pool is shut down.
    fn submit(&self, job: Job) -> std::result::Result<(), Job> {
        match &*self.tx.lock() {
            Some(tx) => tx.send(job).map_err(|e| e.into_inner()),
            None => Err(job),
        }
    }

    /// Runs the jobs already queued, then stops the workers.
    pub(crate) fn shutdown(&self) {
        self.tx.lock().take();
        for t in self.threads.lock().drain(..) {
            let _ = t.join();
        }
    }
}

impl Drop for ScanPool {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Entries copied out of a run: keys and values back to back in one
/// buffer (two allocations per batch rather than two per entry).
#[derive(Default)]
struct Batch {
    bytes: Vec<u8>,
    /// Per entry, where its key ends and where its value ends.
    ends: Vec<(usize, usize)>,
}

impl Batch {
    fn len(&self) -> usize {
        self.ends.len()
    }

    fn start(&self, i: usize) -> usize {
        i.checked_sub(1)
            .and_then(|p| self.ends.get(p))
            .map_or(0, |e| e.1)
    }

    fn key(&self, i: usize) -> &[u8] {
        self.ends
            .get(i)
            .and_then(|&(k, _)| self.bytes.get(self.start(i)..k))
            .unwrap_or_default()
    }

    fn value(&self, i: usize) -> &[u8] {
        self.ends
            .get(i)
            .and_then(|&(k, v)| self.bytes.get(k..v))
            .unwrap_or_default()
    }

    fn push(&mut self, key: &[u8], value: &[u8]) {
        self.bytes.extend_from_slice(key);
        let k = self.bytes.len();
        self.bytes.extend_from_slice(value);
        self.ends.push((k, self.bytes.len()));
    }
}

/// Where a reader starts.
#[derive(Debug, Clone)]
pub(crate) enum Start {
    /// At the run's first entry.
    First,
    /// At the first entry whose internal key is `>=` this one.
    At(Vec<u8>),
}

/// A run's reader, shared by the scan and the job filling its queue.
struct Fill {
    /// The run's iterator; `None` while a job holds it.
    iter: Option<Box<dyn InternalIterator>>,
    /// Where the next job positions the iterator before reading.
    start: Option<Start>,
    queue: VecDeque<Batch>,
    /// The reader has passed the run's last entry (or the upper bound).
    exhausted: bool,
    error: Option<Error>,
    /// A job is queued or running.
    scheduled: bool,
    /// Bumped when the scan repositions or leaves: a running job drops
    /// the batch it read for an older one and stops.
    generation: u64,
    /// The scan is gone or reads the iterator itself: jobs do nothing.
    closed: bool,
}

struct Shared {
    fill: Mutex<Fill>,
    cv: Condvar,
    /// Exclusive upper bound on the user keys read.
    upper: Option<Vec<u8>>,
    batch_bytes: usize,
}

/// One job: positions the run's iterator if asked, then reads batches
/// into the queue until it holds [`QUEUE_BATCHES`] or the run ends.
fn fill(shared: &Shared) {
    let (mut iter, start, generation) = {
        let mut f = shared.fill.lock();
        let taken = if f.closed { None } else { f.iter.take() };
        let Some(iter) = taken else {
            f.scheduled = false;
            shared.cv.notify_all();
            return;
        };
        (iter, f.start.take(), f.generation)
    };
    let mut positioned = match &start {
        None => Ok(()),
        Some(Start::First) => iter.seek_to_first(),
        Some(Start::At(k)) => iter.seek(k),
    };
    let mut f = loop {
        let mut batch = Batch::default();
        let read = positioned.and_then(|()| {
            read_batch(
                iter.as_mut(),
                shared.upper.as_deref(),
                shared.batch_bytes,
                &mut batch,
            )
        });
        positioned = Ok(());
        let mut f = shared.fill.lock();
        if f.generation != generation || f.closed {
            break f;
        }
        match read {
            Ok(end) => {
                if batch.len() > 0 {
                    f.queue.push_back(batch);
                }
                f.exhausted = end;
                if end || f.queue.len() >= QUEUE_BATCHES {
                    break f;
                }
            }
            Err(e) => {
                f.error = Some(e);
                f.exhausted = true;
                break f;
            }
        }
        shared.cv.notify_all();
    };
    f.iter = Some(iter);
    f.scheduled = false;
    shared.cv.notify_all();
}

/// Copies entries from `iter` into `batch` until it holds `batch_bytes`;
/// true once the run ends or reaches `upper`.
fn read_batch(
    iter: &mut dyn InternalIterator,
    upper: Option<&[u8]>,
    batch_bytes: usize,
    batch: &mut Batch,
) -> Result<bool> {
    while iter.valid() {
        if upper.is_some_and(|u| user_key(iter.key()) >= u) {
            return Ok(true);
        }
        if batch.bytes.len() >= batch_bytes {
            return Ok(false);
        }
        batch.push(iter.key(), iter.value());
        iter.next()?;
    }
    Ok(true)
}

/// A sorted run read ahead on the pool, as an [`InternalIterator`].
///
/// Forward moves (`seek_to_first`, `seek`, `next`) walk the batches; a
/// seek before what the queue holds restarts the reader there. A backward
/// move (`prev`, `seek_to_last`, `seek_for_prev`) stops the reader, takes
/// the run's iterator back and uses it directly from then on, so the
/// cursor's change of direction works as on a sequential scan. The reader
/// stops at `upper`: it serves scans, whose cursor stops there too.
pub(crate) struct PrefetchIter {
    shared: Arc<Shared>,
    pool: Arc<ScanPool>,
    batch: Batch,
    pos: usize,
    /// Where the queue's stream starts, until the scan takes from it.
    fresh: Option<Start>,
    /// After a backward move: the run's iterator, used directly.
    direct: Option<Box<dyn InternalIterator>>,
}

impl PrefetchIter {
    /// Starts reading `iter` from `start` at once (a scan's runs are all
    /// submitted before the merge positions any of them), up to the user
    /// key `upper` (exclusive), in batches of about `batch_bytes`.
    pub(crate) fn new(
        iter: Box<dyn InternalIterator>,
        pool: Arc<ScanPool>,
        start: Start,
        upper: Option<Vec<u8>>,
        batch_bytes: usize,
    ) -> Self {
        let shared = Arc::new(Shared {
            fill: Mutex::new(Fill {
                iter: Some(iter),
                start: Some(start.clone()),
                queue: VecDeque::new(),
                exhausted: false,
                error: None,
                scheduled: true,
                generation: 0,
                closed: false,
            }),
            cv: Condvar::new(),
            upper,
            batch_bytes,
        });
        let it = PrefetchIter {
            shared,
            pool,
            batch: Batch::default(),
            pos: 0,
            fresh: Some(start),
            direct: None,
        };
        it.submit();
        it
    }

    /// Runs a fill job on the pool, or here once the pool is shut down.
    /// The caller has marked the reader scheduled.
    fn submit(&self) {
        let shared = Arc::clone(&self.shared);
        if let Err(job) = self.pool.submit(Box::new(move || fill(&shared))) {
            job();
        }
    }

    /// Makes the queue's next batch current (none: invalid), waiting for
    /// the reader, and keeps it reading ahead.
    fn next_batch(&mut self) -> Result<()> {
        self.pos = 0;
        self.batch = Batch::default();
        let mut f = self.shared.fill.lock();
        loop {
            if let Some(b) = f.queue.pop_front() {
                let refill = !f.scheduled && !f.exhausted;
                f.scheduled |= refill;
                drop(f);
                if refill {
                    self.submit();
                }
                self.batch = b;
                return Ok(());
            }
            if let Some(e) = f.error.take() {
                return Err(e);
            }
            if f.exhausted {
                return Ok(());
            }
            if !f.scheduled {
                f.scheduled = true;
                drop(f);
                self.submit();
                f = self.shared.fill.lock();
                continue;
            }
            self.shared.cv.wait(&mut f);
        }
    }

    /// Drops what the queue holds and reads again from `start`.
    fn restart(&mut self, start: Start) -> Result<()> {
        {
            let mut f = self.shared.fill.lock();
            f.generation += 1;
            f.queue.clear();
            f.start = Some(start);
            f.exhausted = false;
            f.error = None;
        }
        self.fresh = None;
        self.next_batch()
    }

    /// Stops the reader and takes the run's iterator back, positioned at
    /// the current entry (past the end if there is none).
    fn go_direct(&mut self) -> Result<&mut Box<dyn InternalIterator>> {
        if self.direct.is_none() {
            let current = self.valid().then(|| self.key().to_vec());
            let mut iter = {
                let mut f = self.shared.fill.lock();
                f.closed = true;
                f.queue.clear();
                loop {
                    if let Some(it) = f.iter.take() {
                        break it;
                    }
                    // A job holds it: it stops at its next batch.
                    self.shared.cv.wait(&mut f);
                }
            };
            self.batch = Batch::default();
            self.pos = 0;
            self.fresh = None;
            match current {
                // The entry is in the run: the seek lands on it.
                Some(k) => iter.seek(&k)?,
                // Invalid stays invalid: past the last entry.
                None => {
                    iter.seek_to_last()?;
                    iter.next()?;
                }
            }
            self.direct = Some(iter);
        }
        self.direct
            .as_mut()
            .ok_or_else(|| Error::InvalidArgument("scan reader lost its iterator".into()))
    }
}

impl Drop for PrefetchIter {
    fn drop(&mut self) {
        let mut f = self.shared.fill.lock();
        f.closed = true;
        f.queue.clear();
    }
}

impl InternalIterator for PrefetchIter {
    fn valid(&self) -> bool {
        match &self.direct {
            Some(d) => d.valid(),
            None => self.pos < self.batch.len(),
        }
    }

    fn key(&self) -> &[u8] {
        match &self.direct {
            Some(d) => d.key(),
            None => self.batch.key(self.pos),
        }
    }

    fn value(&self) -> &[u8] {
        match &self.direct {
            Some(d) => d.value(),
            None => self.batch.value(self.pos),
        }
    }

    fn next(&mut self) -> Result<()> {
        if let Some(d) = &mut self.direct {
            return d.next();
        }
        if !self.valid() {
            return Ok(());
        }
        self.pos += 1;
        if self.pos >= self.batch.len() {
            self.next_batch()?;
        }
        Ok(())
    }

    fn prev(&mut self) -> Result<()> {
        self.go_direct()?.prev()
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        if let Some(d) = &mut self.direct {
            return d.seek(target);
        }
        // Entries already passed all sort before the current one, so a
        // target at or after it (or after where a fresh stream starts)
        // is found by skipping forward.
        let forward = match &self.fresh {
            Some(Start::First) => true,
            Some(Start::At(k)) => compare_internal(k, target).is_le(),
            None => self.valid() && compare_internal(self.key(), target).is_le(),
        };
        if !forward {
            return self.restart(Start::At(target.to_vec()));
        }
        if self.fresh.take().is_some() {
            self.next_batch()?;
        }
        while self.valid() {
            // The first entry of the batch at or after the target.
            let (mut lo, mut hi) = (self.pos, self.batch.len());
            while lo < hi {
                let mid = lo + (hi - lo) / 2;
                if compare_internal(self.batch.key(mid), target).is_lt() {
                    lo = mid + 1;
                } else {
                    hi = mid;
                }
            }
            if lo < self.batch.len() {
                self.pos = lo;
                return Ok(());
            }
            self.next_batch()?;
        }
        Ok(())
    }

    fn seek_to_first(&mut self) -> Result<()> {
        if let Some(d) = &mut self.direct {
            return d.seek_to_first();
        }
        if matches!(self.fresh, Some(Start::First)) {
            self.fresh = None;
            return self.next_batch();
        }
        self.restart(Start::First)
    }

    fn seek_to_last(&mut self) -> Result<()> {
        self.go_direct()?.seek_to_last()
    }

    fn seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        self.go_direct()?.seek_for_prev(target)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::iter::tests::{check_moves, random_moves};
    use crate::iter::VecIter;
    use crate::key::{make_internal_key, ValueKind};

    /// Entries `key{k}` at sequence numbers from `seqs`, sorted.
    fn entries(keys: &[(u32, u64)]) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut v: Vec<_> = keys
            .iter()
            .map(|&(k, s)| {
                (
                    make_internal_key(format!("key{k:04}").as_bytes(), s, ValueKind::Put),
                    format!("{k}/{s}").into_bytes(),
                )
            })
            .collect();
        v.sort_by(|a, b| compare_internal(&a.0, &b.0));
        v.dedup_by(|a, b| a.0 == b.0);
        v
    }

    fn reader(
        all: &[(Vec<u8>, Vec<u8>)],
        pool: &Arc<ScanPool>,
        upper: Option<Vec<u8>>,
        batch: usize,
    ) -> PrefetchIter {
        PrefetchIter::new(
            Box::new(VecIter::new(all.to_vec())),
            Arc::clone(pool),
            Start::First,
            upper,
            batch,
        )
    }

    proptest::proptest! {
        /// Any mix of moves, forward and backward, with batches of a few
        /// entries and restarts: the reader walks the run's entries
        /// exactly (the oracle: the sorted entries), on a running pool and
        /// on one shut down (jobs run on the scanning thread).
        #[test]
        fn moves_match_the_oracle(
            keys in proptest::collection::vec((0u32..60, 1u64..4), 0..120),
            batch in 1usize..200,
            seed in proptest::prelude::any::<u64>(),
            stopped in proptest::prelude::any::<bool>(),
        ) {
            use rand::SeedableRng;
            let all = entries(&keys);
            let pool = Arc::new(ScanPool::new(2).unwrap());
            if stopped {
                pool.shutdown();
            }
            let mut it = reader(&all, &pool, None, batch);
            let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
            let moves = random_moves(&mut rng, &all, 200);
            check_moves(&mut it, &all, &moves);
        }

        /// Forward only (a scan's walk): seeks ahead and steps stay in the
        /// batches, and the reader stops before `upper`.
        #[test]
        fn forward_walks_stop_at_the_upper_bound(
            keys in proptest::collection::vec((0u32..60, 1u64..4), 0..120),
            batch in 1usize..200,
            from in 0u32..60,
            to in 0u32..70,
        ) {
            let all = entries(&keys);
            let upper = format!("key{to:04}").into_bytes();
            let start = make_internal_key(format!("key{from:04}").as_bytes(), u64::MAX >> 8, ValueKind::Put);
            let want: Vec<_> = all
                .iter()
                .filter(|(k, _)| compare_internal(k, &start).is_ge() && user_key(k) < upper.as_slice())
                .cloned()
                .collect();
            let pool = Arc::new(ScanPool::new(3).unwrap());
            let mut it = PrefetchIter::new(
                Box::new(VecIter::new(all.clone())),
                Arc::clone(&pool),
                Start::At(start.clone()),
                Some(upper),
                batch,
            );
            it.seek(&start).unwrap();
            let mut got = Vec::new();
            while it.valid() {
                got.push((it.key().to_vec(), it.value().to_vec()));
                it.next().unwrap();
            }
            proptest::prop_assert_eq!(got, want);
        }
    }

    #[test]
    fn a_dropped_reader_and_a_stopped_pool_leave_no_work_behind() {
        let all = entries(&(0..500).map(|k| (k, 1)).collect::<Vec<_>>());
        let pool = Arc::new(ScanPool::new(2).unwrap());
        // Dropped mid-stream and before its first batch.
        let mut a = reader(&all, &pool, None, 16);
        a.seek_to_first().unwrap();
        a.next().unwrap();
        drop(a);
        drop(reader(&all, &pool, None, 16));
        // Shut down while a reader is alive: it goes on by itself.
        let mut b = reader(&all, &pool, None, 16);
        pool.shutdown();
        b.seek_to_first().unwrap();
        let mut n = 0;
        while b.valid() {
            n += 1;
            b.next().unwrap();
        }
        assert_eq!(n, all.len());
    }

    #[test]
    fn errors_of_the_run_reach_the_scan() {
        /// Fails on its third step.
        struct Failing(VecIter, usize);
        impl InternalIterator for Failing {
            fn valid(&self) -> bool {
                self.0.valid()
            }
            fn key(&self) -> &[u8] {
                self.0.key()
            }
            fn value(&self) -> &[u8] {
                self.0.value()
            }
            fn next(&mut self) -> Result<()> {
                self.1 += 1;
                if self.1 == 3 {
                    return Err(Error::corruption("run", 0, "bad block"));
                }
                self.0.next()
            }
            fn prev(&mut self) -> Result<()> {
                self.0.prev()
            }
            fn seek(&mut self, t: &[u8]) -> Result<()> {
                self.0.seek(t)
            }
            fn seek_to_first(&mut self) -> Result<()> {
                self.0.seek_to_first()
            }
            fn seek_to_last(&mut self) -> Result<()> {
                self.0.seek_to_last()
            }
        }
        let all = entries(&(0..10).map(|k| (k, 1)).collect::<Vec<_>>());
        let pool = Arc::new(ScanPool::new(1).unwrap());
        let mut it = PrefetchIter::new(
            Box::new(Failing(VecIter::new(all), 0)),
            pool,
            Start::First,
            None,
            1,
        );
        it.seek_to_first().unwrap();
        let mut result = Ok(());
        for _ in 0..10 {
            result = it.next();
            if result.is_err() {
                break;
            }
        }
        assert!(
            matches!(result, Err(Error::Corruption { .. })),
            "{result:?}"
        );
    }
}
