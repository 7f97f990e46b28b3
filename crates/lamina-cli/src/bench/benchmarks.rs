//! The benchmarks: what each name runs, on how many threads, and the
//! db_bench-style report line of what they measured.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Barrier;
use std::time::Instant;

use anyhow::{anyhow, bail, Context, Result};
use lamina_workload::{YcsbGenerator, YcsbSpec, YcsbWorkload};
use rand::rngs::SmallRng;
use rand::{RngCore, SeedableRng};

use crate::pace::Pacer;
use crate::progress;
use lamina_experiment::kvops::{
    apply, compressible_value_pool, encode_key, key_buffer, Store, ValueGen,
};

use super::args::BenchArgs;

/// The benchmarks `--benchmarks` accepts (besides `ycsb-load`, `ycsb-a` ...
/// `ycsb-f`).
pub(super) const KNOWN: &[&str] = &[
    "fillseq",
    "fillrandom",
    "overwrite",
    "readrandom",
    "readseq",
    "readreverse",
    "seekrandom",
    "readwhilewriting",
    "mixedhot",
    "deleterandom",
    "stats",
];

/// Prefix of the YCSB benchmark names.
const YCSB_PREFIX: &str = "ycsb-";

/// The YCSB workload a benchmark name such as `ycsb-a` runs.
pub(super) fn ycsb_workload(name: &str) -> Option<YcsbWorkload> {
    name.strip_prefix(YCSB_PREFIX)
        .and_then(YcsbWorkload::from_name)
}

/// What one thread measured.
#[derive(Debug, Clone, Copy)]
struct ThreadStats {
    ops: u64,
    bytes: u64,
    found: u64,
    start: Instant,
    finish: Instant,
}

impl ThreadStats {
    fn new() -> ThreadStats {
        let now = Instant::now();
        ThreadStats {
            ops: 0,
            bytes: 0,
            found: 0,
            start: now,
            finish: now,
        }
    }
}

/// Merged measurements of one benchmark.
#[derive(Debug)]
pub(super) struct Report {
    ops: u64,
    bytes: u64,
    found: u64,
    /// Sum of the threads' busy seconds.
    thread_seconds: f64,
    /// First start to last finish.
    wall_seconds: f64,
    /// Print "(found of ops found)".
    show_found: bool,
}

impl Report {
    fn merge(threads: &[ThreadStats], show_found: bool) -> Report {
        let mut r = Report {
            ops: 0,
            bytes: 0,
            found: 0,
            thread_seconds: 0.0,
            wall_seconds: 0.0,
            show_found,
        };
        let (Some(first), Some(last)) = (
            threads.iter().map(|t| t.start).min(),
            threads.iter().map(|t| t.finish).max(),
        ) else {
            return r;
        };
        for t in threads {
            r.ops += t.ops;
            r.bytes += t.bytes;
            r.found += t.found;
            r.thread_seconds += t.finish.duration_since(t.start).as_secs_f64();
        }
        r.wall_seconds = last.duration_since(first).as_secs_f64();
        r
    }

    /// One db_bench-style line.
    fn line(&self, name: &str) -> String {
        let done = self.ops.max(1);
        let elapsed = self.wall_seconds.max(1e-9);
        let mut extra = String::new();
        if self.bytes > 0 {
            extra = format!("{:6.1} MB/s", self.bytes as f64 / 1_048_576.0 / elapsed);
        }
        if self.show_found {
            if !extra.is_empty() {
                extra.push(' ');
            }
            extra.push_str(&format!("({} of {} found)", self.found, self.ops));
        }
        format!(
            "{:<12} : {:11.3} micros/op {} ops/sec;{}{}",
            name,
            self.thread_seconds * 1e6 / done as f64,
            (done as f64 / elapsed) as u64,
            if extra.is_empty() { "" } else { " " },
            extra
        )
    }

    pub(super) fn print(&self, name: &str) {
        println!("{}", self.line(name));
    }
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
}

/// What a worker thread does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Work {
    FillSeq,
    FillRandom,
    ReadRandom,
    ReadSeq,
    ReadReverse,
    SeekRandom,
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
        }
    }

    pub(super) fn run(&self, name: &str) -> Result<Report> {
        let work = match name {
            "fillseq" => Work::FillSeq,
            "fillrandom" | "overwrite" => Work::FillRandom,
            "readrandom" => Work::ReadRandom,
            "readseq" => Work::ReadSeq,
            "readreverse" => Work::ReadReverse,
            "seekrandom" => Work::SeekRandom,
            "deleterandom" => Work::DeleteRandom,
            "readwhilewriting" => return self.read_while_writing(),
            "mixedhot" => return self.mixed_hot(),
            other => match ycsb_workload(other) {
                Some(w) => Work::Ycsb(w),
                None => bail!("unknown benchmark {other:?}"),
            },
        };
        let threads = self.args.threads;
        // Operations all threads will do (a scan's entries for readseq).
        let total = match work {
            Work::FillSeq | Work::FillRandom | Work::DeleteRandom => self.args.num * threads as u64,
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
                        self.worker(work, tid, &mut progress::Ticker::new(bar))
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
        let show_found = match work {
            Work::ReadRandom | Work::SeekRandom => true,
            Work::Ycsb(w) => w != YcsbWorkload::Load,
            _ => false,
        };
        Ok(Report::merge(&stats, show_found))
    }

    /// The key generator of a newly started thread.
    fn rng(&self) -> SmallRng {
        let n = self.threads_started.fetch_add(1, Ordering::Relaxed);
        SmallRng::seed_from_u64(self.args.seed.wrapping_add(n))
    }

    /// Runs thread `tid`'s share of `work`, counting operations on `t`.
    fn worker(&self, work: Work, tid: usize, t: &mut progress::Ticker) -> Result<ThreadStats> {
        match work {
            Work::FillSeq | Work::FillRandom => self.fill(work == Work::FillRandom, tid, t),
            Work::ReadRandom => self.read_random(t),
            Work::ReadSeq => self.read_seq(false, t),
            Work::ReadReverse => self.read_seq(true, t),
            Work::SeekRandom => self.seek_random(t),
            Work::DeleteRandom => self.delete_random(t),
            Work::Ycsb(w) => self.ycsb(w, tid, t),
        }
    }

    /// A YCSB workload over records `0..num`: `ycsb-load` splits the records
    /// among the threads; `ycsb-a`...`ycsb-f` run `reads` transactions per
    /// thread, each thread inserting its own record numbers. "found" counts
    /// reads, scans and read-modify-writes that found data.
    fn ycsb(&self, w: YcsbWorkload, tid: usize, t: &mut progress::Ticker) -> Result<ThreadStats> {
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
        let mut st = ThreadStats::new();
        let (mut n, mut found, mut bytes) = (0u64, 0u64, 0u64);
        for op in ops {
            let out = apply(self.db, op, &mut key, &mut values)?;
            n += 1;
            t.tick();
            found += u64::from(out.found);
            bytes += out.bytes;
        }
        st.finish = Instant::now();
        st.ops = n;
        st.found = found;
        st.bytes = bytes;
        Ok(st)
    }

    fn fill(&self, random: bool, tid: usize, t: &mut progress::Ticker) -> Result<ThreadStats> {
        let num = self.args.num;
        let mut rng = self.rng();
        let mut key = key_buffer(self.args.key_size);
        let mut values = ValueGen::new(&self.pool, self.args.value_size, tid * 4099);
        let per_op = (self.args.key_size + self.args.value_size) as u64;
        let mut st = ThreadStats::new();
        for i in 0..num {
            let k = if random { rng.next_u64() % num } else { i };
            encode_key(&mut key, k);
            self.db.put(&key, values.next_value())?;
            t.tick();
        }
        st.finish = Instant::now();
        st.ops = num;
        st.bytes = num * per_op;
        Ok(st)
    }

    /// `reads` gets of random keys.
    fn read_random(&self, t: &mut progress::Ticker) -> Result<ThreadStats> {
        let num = self.args.num;
        let mut rng = self.rng();
        let mut key = key_buffer(self.args.key_size);
        let mut st = ThreadStats::new();
        let mut found = 0u64;
        let mut bytes = 0u64;
        let mut ops = 0u64;
        for _ in 0..self.reads {
            encode_key(&mut key, rng.next_u64() % num);
            if let Some(v) = self.db.get(&key)? {
                found += 1;
                bytes += (key.len() + v) as u64;
            }
            ops += 1;
            t.tick();
        }
        st.finish = Instant::now();
        st.ops = ops;
        st.found = found;
        st.bytes = bytes;
        Ok(st)
    }

    /// One full scan of at most `reads` entries, in key order or (readreverse)
    /// in descending key order.
    fn read_seq(&self, reverse: bool, t: &mut progress::Ticker) -> Result<ThreadStats> {
        let mut st = ThreadStats::new();
        let mut bytes = 0u64;
        let mut visit = |k: &[u8], v: &[u8]| {
            bytes += (k.len() + v.len()) as u64;
            t.tick();
        };
        let ops = if reverse {
            self.db.scan_rev(None, self.reads, &mut visit)?
        } else {
            self.db.scan(None, None, self.reads, &mut visit)?
        };
        st.finish = Instant::now();
        st.ops = ops;
        st.bytes = bytes;
        Ok(st)
    }

    fn seek_random(&self, t: &mut progress::Ticker) -> Result<ThreadStats> {
        let num = self.args.num;
        let mut rng = self.rng();
        let mut key = key_buffer(self.args.key_size);
        let mut st = ThreadStats::new();
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
            t.tick();
        }
        st.finish = Instant::now();
        st.ops = self.reads;
        st.found = found;
        st.bytes = bytes;
        Ok(st)
    }

    fn delete_random(&self, t: &mut progress::Ticker) -> Result<ThreadStats> {
        let num = self.args.num;
        let mut rng = self.rng();
        let mut key = key_buffer(self.args.key_size);
        let mut st = ThreadStats::new();
        for _ in 0..num {
            encode_key(&mut key, rng.next_u64() % num);
            self.db.delete(&key)?;
            t.tick();
        }
        st.finish = Instant::now();
        st.ops = num;
        Ok(st)
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
        let mut st = ThreadStats::new();
        st.start = st.finish - std::time::Duration::from_secs_f64(totals.seconds);
        st.ops = totals.reads;
        Ok(Report::merge(&[st], false))
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
                        self.read_random(&mut progress::Ticker::new(bar))
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
        let report = Report::merge(&stats, true);
        eprintln!("readwhilewriting: the writer did {writes} writes meanwhile, in {seconds:.3} s");
        Ok(report)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_line_has_db_bench_format() {
        let r = Report {
            ops: 1_000_000,
            bytes: 1_000_000 * 116,
            found: 0,
            thread_seconds: 4.274,
            wall_seconds: 4.274,
            show_found: false,
        };
        assert_eq!(
            r.line("fillrandom"),
            "fillrandom   :       4.274 micros/op 233972 ops/sec;   25.9 MB/s"
        );
        let r = Report {
            found: 5,
            bytes: 0,
            show_found: true,
            ..r
        };
        assert!(r
            .line("seekrandom")
            .ends_with("ops/sec; (5 of 1000000 found)"));
    }
}
