//! The benchmarks: what each name runs, on how many threads, and what
//! they count for the db_bench-style report ([`measure`](super::measure)).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use lamina_workload::{KvOp, YcsbGenerator, YcsbSpec, YcsbWorkload};
use rand::rngs::SmallRng;
use rand::{RngCore, SeedableRng};

use crate::pace::Pacer;
use crate::progress;
use lamina_experiment::kvops::{
    apply, compressible_value_pool, encode_key, key_buffer, Store, ValueGen,
};

use super::args::BenchArgs;
use super::measure::{with_reporter, Counts, Meter, OpType, Report, ThreadStats};

/// The benchmarks `--benchmarks` accepts (besides `ycsb-load`, `ycsb-a` ...
/// `ycsb-f`).
pub(super) const KNOWN: &[&str] = &[
    "fillseq",
    "fillrandom",
    "fillsync",
    "overwrite",
    "readrandom",
    "readmissing",
    "readseq",
    "readreverse",
    "seekrandom",
    "updaterandom",
    "readrandomwriterandom",
    "readwhilewriting",
    "mixedhot",
    "deleterandom",
    "compact",
    "stats",
    "levelstats",
];

/// Prefix of the YCSB benchmark names.
const YCSB_PREFIX: &str = "ycsb-";

/// The YCSB workload a benchmark name such as `ycsb-a` runs.
pub(super) fn ycsb_workload(name: &str) -> Option<YcsbWorkload> {
    name.strip_prefix(YCSB_PREFIX)
        .and_then(YcsbWorkload::from_name)
}

/// State shared by every benchmark of a run.
pub(super) struct Bench<'a> {
    args: &'a BenchArgs,
    db: &'a dyn Store,
    emulate_disk: &'a (dyn Fn(bool) + Sync),
    reads: u64,
    pool: Vec<u8>,
    /// Threads started so far; like db_bench, every thread of every
    /// benchmark seeds its generator with `seed + this count`, so that a
    /// readrandom after a fillrandom does not replay the fill's keys.
    threads_started: AtomicU64,
    /// Operations of the running benchmark, for `--report_interval_seconds`.
    ops_done: AtomicU64,
}

/// What a worker thread does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Work {
    FillSeq,
    FillRandom,
    /// `num / 1000` random writes, each durable before the next (LevelDB's
    /// fillsync: keys over the whole `[0, num)`).
    FillSync,
    ReadRandom,
    /// readrandom of keys one byte longer than any written: none is found.
    ReadMissing,
    ReadSeq,
    ReadReverse,
    SeekRandom,
    /// Read-modify-write: a get, then a put of a new value.
    UpdateRandom,
    /// `readwritepercent` gets, then the rest of 100 puts, over and over.
    ReadRandomWriteRandom,
    DeleteRandom,
    Ycsb(YcsbWorkload),
}

impl<'a> Bench<'a> {
    pub(super) fn new(
        args: &'a BenchArgs,
        db: &'a dyn Store,
        emulate_disk: &'a (dyn Fn(bool) + Sync),
    ) -> Bench<'a> {
        Bench {
            args,
            db,
            emulate_disk,
            reads: args.reads.unwrap_or(args.num),
            pool: compressible_value_pool(args.seed, args.value_size, args.compression_ratio),
            threads_started: AtomicU64::new(0),
            ops_done: AtomicU64::new(0),
        }
    }

    /// Runs benchmark `name`; with `--report_interval_seconds`, while
    /// db_bench's interval reporter writes `--report_file` (rewritten by
    /// each benchmark, as db_bench does).
    pub(super) fn run(&self, name: &str) -> Result<Report> {
        self.ops_done.store(0, Ordering::Relaxed);
        match self.args.report_interval_seconds {
            0 => self.run_measured(name),
            secs => with_reporter(
                &self.args.report_file,
                Duration::from_secs(secs),
                &self.ops_done,
                || self.run_measured(name),
            )?,
        }
    }

    /// A meter for a thread starting now.
    fn meter<'b>(&'b self, bar: &'b indicatif::ProgressBar) -> Meter<'b> {
        let reporting = self.args.report_interval_seconds > 0;
        Meter::new(
            bar,
            self.args.histogram,
            reporting.then_some(&self.ops_done),
        )
    }

    fn run_measured(&self, name: &str) -> Result<Report> {
        let work = match name {
            "fillseq" => Work::FillSeq,
            "fillrandom" | "overwrite" => Work::FillRandom,
            "fillsync" => Work::FillSync,
            "readrandom" => Work::ReadRandom,
            "readmissing" => Work::ReadMissing,
            "readseq" => Work::ReadSeq,
            "readreverse" => Work::ReadReverse,
            "seekrandom" => Work::SeekRandom,
            "updaterandom" => Work::UpdateRandom,
            "readrandomwriterandom" => Work::ReadRandomWriteRandom,
            "deleterandom" => Work::DeleteRandom,
            "readwhilewriting" => return self.read_while_writing(),
            "mixedhot" => return self.mixed_hot(),
            "compact" => return self.compact(),
            other => match ycsb_workload(other) {
                Some(w) => Work::Ycsb(w),
                None => bail!("unknown benchmark {other:?}"),
            },
        };
        let threads = self.args.threads;
        // Operations all threads will do (a scan's entries for readseq).
        let total = match work {
            Work::FillSeq | Work::FillRandom | Work::DeleteRandom => self.args.num * threads as u64,
            Work::FillSync => self.args.num / 1000 * threads as u64,
            Work::Ycsb(YcsbWorkload::Load) => self.args.num,
            _ => self.reads * threads as u64,
        };
        let bar = progress::bar(total, name);
        let barrier = Barrier::new(threads);
        let results: Vec<Result<ThreadStats>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..threads)
                .map(|tid| {
                    let (barrier, bar) = (&barrier, &bar);
                    s.spawn(move || {
                        barrier.wait();
                        self.worker(work, tid, self.meter(bar))
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err(anyhow!("benchmark thread panicked")))
                })
                .collect()
        });
        bar.finish_and_clear();
        let stats = results
            .into_iter()
            .collect::<Result<Vec<_>>>()
            .with_context(|| format!("benchmark {name}"))?;
        let report = Report::merge(&stats);
        let c = report.counts;
        let message = match work {
            Work::ReadRandom | Work::ReadMissing | Work::SeekRandom => report.found_message(),
            Work::Ycsb(w) if w != YcsbWorkload::Load => report.found_message(),
            Work::UpdateRandom => format!("( updates:{} found:{})", c.ops, c.found),
            Work::ReadRandomWriteRandom => format!(
                "( reads:{} writes:{} total:{} found:{})",
                c.reads, c.writes, c.ops, c.found
            ),
            Work::FillSync => format!("({} ops)", c.ops),
            _ => return Ok(report),
        };
        Ok(report.with_message(message))
    }

    /// The key generator of a newly started thread.
    fn rng(&self) -> SmallRng {
        let n = self.threads_started.fetch_add(1, Ordering::Relaxed);
        SmallRng::seed_from_u64(self.args.seed.wrapping_add(n))
    }

    /// Runs thread `tid`'s share of `work`, measuring on `m`.
    fn worker(&self, work: Work, tid: usize, mut m: Meter) -> Result<ThreadStats> {
        let counts = match work {
            Work::FillSeq => self.fill(Fill::Seq, tid, &mut m),
            Work::FillRandom => self.fill(Fill::Random, tid, &mut m),
            Work::FillSync => self.fill(Fill::Sync, tid, &mut m),
            Work::ReadRandom => self.read_random(false, &mut m),
            Work::ReadMissing => self.read_random(true, &mut m),
            Work::ReadSeq => self.read_seq(false, &mut m),
            Work::ReadReverse => self.read_seq(true, &mut m),
            Work::SeekRandom => self.seek_random(&mut m),
            Work::UpdateRandom => self.update_random(tid, &mut m),
            Work::ReadRandomWriteRandom => self.read_random_write_random(tid, &mut m),
            Work::DeleteRandom => self.delete_random(&mut m),
            Work::Ycsb(w) => self.ycsb(w, tid, &mut m),
        }?;
        Ok(m.finish(counts))
    }

    /// A YCSB workload over records `0..num`: `ycsb-load` splits the records
    /// among the threads; `ycsb-a`...`ycsb-f` run `reads` transactions per
    /// thread, each thread inserting its own record numbers. "found" counts
    /// reads, scans and read-modify-writes that found data.
    fn ycsb(&self, w: YcsbWorkload, tid: usize, m: &mut Meter) -> Result<Counts> {
        let (num, threads) = (self.args.num, self.args.threads as u64);
        let seed = self.rng().next_u64();
        let spec = if w == YcsbWorkload::Load {
            let t = tid as u64;
            YcsbSpec {
                load_start: num * t / threads,
                ..YcsbSpec::new(w, num * (t + 1) / threads, 0, seed)
            }
        } else {
            YcsbSpec {
                insert_start: Some(num + tid as u64 * self.reads),
                ..YcsbSpec::new(w, num, self.reads, seed)
            }
        };
        let ops = YcsbGenerator::new(&spec)?;
        let mut key = key_buffer(self.args.key_size);
        let mut values = ValueGen::new(&self.pool, self.args.value_size, tid * 4099);
        let mut c = Counts::default();
        for op in ops {
            let kind = match op {
                KvOp::Insert(_) => OpType::Write,
                KvOp::Update(_) | KvOp::ReadModifyWrite(_) => OpType::Update,
                KvOp::Read(_) => OpType::Read,
                KvOp::Scan { .. } => OpType::Seek,
                KvOp::Delete(_) => OpType::Delete,
            };
            let out = apply(self.db, op, &mut key, &mut values)?;
            c.ops += 1;
            m.done(kind);
            c.found += u64::from(out.found);
            c.bytes += out.bytes;
        }
        Ok(c)
    }

    fn fill(&self, how: Fill, tid: usize, m: &mut Meter) -> Result<Counts> {
        let num = self.args.num;
        let writes = if how == Fill::Sync { num / 1000 } else { num };
        let mut rng = self.rng();
        let mut key = key_buffer(self.args.key_size);
        let mut values = ValueGen::new(&self.pool, self.args.value_size, tid * 4099);
        let per_op = (self.args.key_size + self.args.value_size) as u64;
        for i in 0..writes {
            let k = if how == Fill::Seq {
                i
            } else {
                rng.next_u64() % num
            };
            encode_key(&mut key, k);
            if how == Fill::Sync {
                self.db.put_sync(&key, values.next_value())?;
            } else {
                self.db.put(&key, values.next_value())?;
            }
            m.done(OpType::Write);
        }
        Ok(Counts {
            ops: writes,
            bytes: writes * per_op,
            ..Counts::default()
        })
    }

    /// `reads` gets of random keys; `missing`: of keys one byte longer
    /// than `--key_size` (db_bench's readmissing), which no fill wrote.
    fn read_random(&self, missing: bool, m: &mut Meter) -> Result<Counts> {
        let num = self.args.num;
        let mut rng = self.rng();
        let mut key = key_buffer(self.args.key_size + usize::from(missing));
        let mut c = Counts::default();
        for _ in 0..self.reads {
            encode_key(&mut key, rng.next_u64() % num);
            if let Some(v) = self.db.get(&key)? {
                c.found += 1;
                c.bytes += (key.len() + v) as u64;
            }
            c.ops += 1;
            m.done(OpType::Read);
        }
        Ok(c)
    }

    /// `reads` read-modify-writes of random keys: a get, then a put of a
    /// new value (db_bench's updaterandom; bytes of both count).
    fn update_random(&self, tid: usize, m: &mut Meter) -> Result<Counts> {
        let num = self.args.num;
        let mut rng = self.rng();
        let mut key = key_buffer(self.args.key_size);
        let mut values = ValueGen::new(&self.pool, self.args.value_size, tid * 4099);
        let mut c = Counts::default();
        for _ in 0..self.reads {
            encode_key(&mut key, rng.next_u64() % num);
            if let Some(v) = self.db.get(&key)? {
                c.found += 1;
                c.bytes += (key.len() + v) as u64;
            }
            let value = values.next_value();
            self.db.put(&key, value)?;
            c.bytes += (key.len() + value.len()) as u64;
            c.ops += 1;
            m.done(OpType::Update);
        }
        Ok(c)
    }

    /// `reads` operations on random keys, in rounds of
    /// `--readwritepercent` gets then `100 - readwritepercent` puts
    /// (db_bench's readrandomwriterandom).
    fn read_random_write_random(&self, tid: usize, m: &mut Meter) -> Result<Counts> {
        let num = self.args.num;
        let percent = u64::from(self.args.readwritepercent);
        let mut rng = self.rng();
        let mut key = key_buffer(self.args.key_size);
        let mut values = ValueGen::new(&self.pool, self.args.value_size, tid * 4099);
        let mut c = Counts::default();
        for i in 0..self.reads {
            encode_key(&mut key, rng.next_u64() % num);
            if i % 100 < percent {
                if self.db.get(&key)?.is_some() {
                    c.found += 1;
                }
                c.reads += 1;
                m.done(OpType::Read);
            } else {
                self.db.put(&key, values.next_value())?;
                c.writes += 1;
                m.done(OpType::Write);
            }
            c.ops += 1;
        }
        Ok(c)
    }

    /// One full scan of at most `reads` entries, in key order or (readreverse)
    /// in descending key order.
    fn read_seq(&self, reverse: bool, m: &mut Meter) -> Result<Counts> {
        let mut bytes = 0u64;
        let mut visit = |k: &[u8], v: &[u8]| {
            bytes += (k.len() + v.len()) as u64;
            m.done(OpType::Read);
        };
        let ops = if reverse {
            self.db.scan_rev(None, self.reads, &mut visit)?
        } else {
            self.db.scan(None, None, self.reads, &mut visit)?
        };
        Ok(Counts {
            ops,
            bytes,
            ..Counts::default()
        })
    }

    fn seek_random(&self, m: &mut Meter) -> Result<Counts> {
        let num = self.args.num;
        let mut rng = self.rng();
        let mut key = key_buffer(self.args.key_size);
        let mut found = 0u64;
        let mut bytes = 0u64;
        for _ in 0..self.reads {
            encode_key(&mut key, rng.next_u64() % num);
            // The sought entry, then seek_nexts entries' bytes counted
            // (from the sought one on, as before).
            let mut i = 0u64;
            self.db.scan(
                Some(&key),
                None,
                self.args.seek_nexts.max(1),
                &mut |k, v| {
                    if i == 0 && k == key.as_slice() {
                        found += 1;
                    }
                    if i < self.args.seek_nexts {
                        bytes += (k.len() + v.len()) as u64;
                    }
                    i += 1;
                },
            )?;
            m.done(OpType::Seek);
        }
        Ok(Counts {
            ops: self.reads,
            found,
            bytes,
            ..Counts::default()
        })
    }

    fn delete_random(&self, m: &mut Meter) -> Result<Counts> {
        let num = self.args.num;
        let mut rng = self.rng();
        let mut key = key_buffer(self.args.key_size);
        for _ in 0..num {
            encode_key(&mut key, rng.next_u64() % num);
            self.db.delete(&key)?;
            m.done(OpType::Delete);
        }
        Ok(Counts {
            ops: num,
            ..Counts::default()
        })
    }

    /// db_bench's compact: one compaction of the whole key range (lamina:
    /// `Db::compact_range(None, None)`, a flush then everything merged into
    /// the deepest level), timed as one operation.
    fn compact(&self) -> Result<Report> {
        let bar = progress::spinner("compact");
        let m = self.meter(&bar);
        self.db.compact_all().context("benchmark compact")?;
        bar.finish_and_clear();
        Ok(Report::merge(&[m.finish(Counts {
            ops: 1,
            ..Counts::default()
        })]))
    }

    /// seed 002's mixed workload (`mixedhot.rs`); the report covers the
    /// readers.
    fn mixed_hot(&self) -> Result<Report> {
        let len = self.args.value_size;
        let pool = &self.pool;
        let next_value = move |i: u64| -> Vec<u8> {
            let span = pool.len().saturating_sub(len).max(1);
            let at = (i as usize).wrapping_mul(7919) % span;
            pool.get(at..at + len)
                .map_or_else(|| vec![b'v'; len], <[u8]>::to_vec)
        };
        let work = crate::mixedhot::MixedHot {
            num: self.args.num,
            key_size: self.args.key_size,
            readers: self.args.threads,
            dist: self.args.read_dist,
            write_rate: self.args.write_rate,
            scan_entries: self.args.scan_entries,
            duration: std::time::Duration::from_secs(self.args.duration),
            seed: self.args.seed,
            next_value: &next_value,
            timeseries: self.args.timeseries.as_deref(),
        };
        if self.args.warm_up_seconds > 0 {
            (self.emulate_disk)(false);
            let warm = crate::mixedhot::MixedHot {
                duration: std::time::Duration::from_secs(self.args.warm_up_seconds),
                // Other keys than the recorded part's, which then does not
                // replay the warm-up's reads and writes.
                seed: self.args.seed.wrapping_add(1 << 32),
                timeseries: None,
                ..work
            };
            let t = warm.run(self.db, &|| self.db.stats())?;
            eprintln!(
                "mixedhot warm-up (not recorded, no emulated latency): {} reads and {} writes in {:.1} s",
                t.reads, t.writes, t.seconds
            );
            (self.emulate_disk)(true);
        }
        let totals = work.run(self.db, &|| self.db.stats())?;
        eprintln!(
            "mixedhot: {} reads and {} writes in {:.1} s",
            totals.reads, totals.writes, totals.seconds
        );
        let finish = Instant::now();
        Ok(Report::merge(&[ThreadStats {
            counts: Counts {
                ops: totals.reads,
                ..Counts::default()
            },
            start: finish - std::time::Duration::from_secs_f64(totals.seconds),
            finish,
            hist: Vec::new(),
        }]))
    }

    /// `threads` readers do readrandom while one more thread writes random
    /// keys until they finish; the report covers the readers only.
    fn read_while_writing(&self) -> Result<Report> {
        let threads = self.args.threads;
        let bar = progress::bar(self.reads * threads as u64, "readwhilewriting");
        let barrier = Barrier::new(threads + 1);
        let done = AtomicBool::new(false);
        let (writer, readers) = std::thread::scope(|s| {
            let writer = {
                let (barrier, done) = (&barrier, &done);
                s.spawn(move || -> Result<(u64, f64)> {
                    let num = self.args.num;
                    let mut rng = self.rng();
                    let mut key = key_buffer(self.args.key_size);
                    let mut values = ValueGen::new(&self.pool, self.args.value_size, 7919);
                    let mut writes = 0u64;
                    let bytes_per_write = (self.args.key_size + self.args.value_size) as f64;
                    let limit = self.args.benchmark_write_rate_limit as f64;
                    barrier.wait();
                    let began = Instant::now();
                    // Paced (db_bench's limit is in bytes a second): the
                    // readers' finish stops it within a millisecond.
                    let pacer = (limit > 0.0).then(|| Pacer::start(limit / bytes_per_write));
                    while !done.load(Ordering::Relaxed) {
                        if pacer.is_some_and(|p| !p.ready(writes)) {
                            continue;
                        }
                        encode_key(&mut key, rng.next_u64() % num);
                        self.db.put(&key, values.next_value())?;
                        writes += 1;
                    }
                    Ok((writes, began.elapsed().as_secs_f64()))
                })
            };
            let readers: Vec<_> = (0..threads)
                .map(|_| {
                    let (barrier, bar) = (&barrier, &bar);
                    s.spawn(move || {
                        barrier.wait();
                        let mut m = self.meter(bar);
                        let counts = self.read_random(false, &mut m)?;
                        Ok(m.finish(counts))
                    })
                })
                .collect();
            let readers: Vec<Result<ThreadStats>> = readers
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err(anyhow!("reader thread panicked")))
                })
                .collect();
            done.store(true, Ordering::Relaxed);
            let writer = writer
                .join()
                .unwrap_or_else(|_| Err(anyhow!("writer thread panicked")));
            (writer, readers)
        });
        bar.finish_and_clear();
        let (writes, seconds) = writer.context("readwhilewriting writer")?;
        let stats = readers
            .into_iter()
            .collect::<Result<Vec<_>>>()
            .context("readwhilewriting readers")?;
        let report = Report::merge(&stats);
        let message = report.found_message();
        eprintln!("readwhilewriting: the writer did {writes} writes meanwhile, in {seconds:.3} s");
        Ok(report.with_message(message))
    }
}

/// How a fill writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fill {
    /// Keys 0, 1, ... num - 1.
    Seq,
    /// `num` random keys of `[0, num)`.
    Random,
    /// `num / 1000` random keys, each write durable before the next.
    Sync,
}
