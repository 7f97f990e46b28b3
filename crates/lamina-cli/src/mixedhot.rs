//! `mixedhot`: seed 002's mixed workload (LSbM §6). One writer updates
//! random keys of `[0, num)` at a fixed rate while `threads` readers read
//! by a skewed distribution — by default RangeHot, a contiguous range of
//! 15% of the keys receiving 98% of the reads — for a fixed time; every
//! second a line of the time series records read and write throughput and,
//! for lamina, the block cache's hit ratio and usage and the database's
//! size: the periodic hit-ratio drops a leveled tree's compactions cause
//! are what LSbM removes. A line's rates are over the time it covers
//! (`interval_s`); a sampler that falls behind skips seconds rather than
//! writing lines for them.

use std::io::Write as _;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use lamina::DbStats;
use lamina_workload::dist::Zipf;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::pace::Pacer;
use lamina_experiment::kvops::{encode_key, key_buffer, Store};

/// How readers choose keys (`--read_dist`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ReadDist {
    /// `rangehot:FRACTION:SHARE`: a contiguous `FRACTION` of the keys in
    /// the middle of the key space gets `SHARE` of the reads, the rest are
    /// uniform over the other keys.
    RangeHot {
        /// Share of the key space that is hot.
        fraction: f64,
        /// Share of reads that go to it.
        share: f64,
    },
    /// `zipfian:S`: key rank `i` read with probability ∝ 1 / (i + 1)^S.
    Zipfian(f64),
    /// `uniform`.
    Uniform,
}

impl std::str::FromStr for ReadDist {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let parts: Vec<&str> = s.split(':').collect();
        let num = |p: &str| {
            p.parse::<f64>()
                .map_err(|_| format!("bad number {p:?} in {s:?}"))
        };
        let dist = match parts.as_slice() {
            ["uniform"] => ReadDist::Uniform,
            ["rangehot"] => ReadDist::RangeHot {
                fraction: 0.15,
                share: 0.98,
            },
            ["rangehot", f, sh] => ReadDist::RangeHot {
                fraction: num(f)?,
                share: num(sh)?,
            },
            ["zipfian", theta] => ReadDist::Zipfian(num(theta)?),
            _ => {
                return Err(format!(
                    "{s:?}: want rangehot[:FRACTION:SHARE], zipfian:S or uniform"
                ))
            }
        };
        let ok = match dist {
            ReadDist::RangeHot { fraction, share } => {
                fraction > 0.0 && fraction < 1.0 && (0.0..=1.0).contains(&share)
            }
            ReadDist::Zipfian(theta) => theta > 0.0 && theta.is_finite(),
            ReadDist::Uniform => true,
        };
        if !ok {
            return Err(format!(
                "{s:?}: rangehot needs 0 < FRACTION < 1 and 0 <= SHARE <= 1, zipfian S > 0"
            ));
        }
        Ok(dist)
    }
}

/// Draws read keys of `[0, num)`.
struct KeyChooser {
    dist: ReadDist,
    num: u64,
    zipf: Option<Zipf>,
}

impl KeyChooser {
    fn new(dist: ReadDist, num: u64) -> Self {
        let zipf = match dist {
            ReadDist::Zipfian(s) => Some(Zipf::new(num, s)),
            _ => None,
        };
        KeyChooser { dist, num, zipf }
    }

    fn next(&self, rng: &mut SmallRng) -> u64 {
        match self.dist {
            ReadDist::Uniform => rng.gen_range(0..self.num),
            ReadDist::Zipfian(_) => self.zipf.as_ref().map_or(0, |z| z.next(rng)),
            ReadDist::RangeHot { fraction, share } => {
                let hot = ((self.num as f64 * fraction) as u64).clamp(1, self.num);
                let start = (self.num - hot) / 2;
                if rng.gen_bool(share) || hot == self.num {
                    start + rng.gen_range(0..hot)
                } else {
                    // Uniform over the cold keys on both sides.
                    let k = rng.gen_range(0..self.num - hot);
                    if k < start {
                        k
                    } else {
                        k + hot
                    }
                }
            }
        }
    }
}

/// The workload's settings.
pub struct MixedHot<'a> {
    /// Key space.
    pub num: u64,
    /// Key size in bytes.
    pub key_size: usize,
    /// Reader threads.
    pub readers: usize,
    /// How readers choose keys.
    pub dist: ReadDist,
    /// Writes per second (0: no writer).
    pub write_rate: u64,
    /// Entries each read scans (0: point gets).
    pub scan_entries: u64,
    /// How long it runs.
    pub duration: Duration,
    /// Seed of the readers' and the writer's key streams.
    pub seed: u64,
    /// Values the writer writes, one per call.
    pub next_value: &'a (dyn Fn(u64) -> Vec<u8> + Sync),
    /// Where the per-second series goes (CSV).
    pub timeseries: Option<&'a Path>,
}

/// Reads and writes done.
#[derive(Debug, Default)]
pub struct Totals {
    /// Reads (gets or scans) done.
    pub reads: u64,
    /// Writes done.
    pub writes: u64,
    /// Seconds it ran.
    pub seconds: f64,
}

impl MixedHot<'_> {
    /// Runs the workload on `store`; `stats` gives the engine's statistics
    /// (`None` for a peer, whose series then has throughput only).
    #[expect(
        clippy::too_many_lines,
        reason = "predates the lint; one long sequence of steps, to be cut like `plan`"
    )]
    pub fn run(
        &self,
        store: &dyn Store,
        stats: &(dyn Fn() -> Option<DbStats> + Sync),
    ) -> Result<Totals> {
        if self.num == 0 {
            bail!("mixedhot needs --num >= 1");
        }
        let mut series = match self.timeseries {
            Some(path) => {
                let mut f = std::io::BufWriter::new(
                    std::fs::File::create(path)
                        .with_context(|| format!("creating {}", path.display()))?,
                );
                writeln!(
                    f,
                    "second,read_qps,write_qps,hit_ratio,row_cache_hit_ratio,cache_bytes,db_bytes,buffer_bytes,compactions,compaction_bytes_written,cache_invalidated_blocks,interval_s,cache_lookups,buffer_levels"
                )?;
                Some(f)
            }
            None => None,
        };
        let reads = AtomicU64::new(0);
        let writes = AtomicU64::new(0);
        let stop = AtomicBool::new(false);
        let chooser = KeyChooser::new(self.dist, self.num);
        let start = Instant::now();
        let result: Result<()> = std::thread::scope(|s| {
            let mut handles = Vec::new();
            for t in 0..self.readers {
                let (reads, stop, chooser) = (&reads, &stop, &chooser);
                handles.push(s.spawn(move || -> Result<()> {
                    let mut rng = SmallRng::seed_from_u64(self.seed.wrapping_add(t as u64));
                    let mut key = key_buffer(self.key_size);
                    let mut end = key_buffer(self.key_size);
                    while !stop.load(Ordering::Relaxed) {
                        let k = chooser.next(&mut rng);
                        encode_key(&mut key, k);
                        if self.scan_entries == 0 {
                            store.get(&key)?;
                        } else {
                            // A range of `scan_entries` keys of the dense
                            // key space, as the paper's fixed-length range
                            // queries: bounded, so a buffer may serve it.
                            encode_key(&mut end, k.saturating_add(self.scan_entries));
                            store.scan(
                                Some(&key),
                                Some(&end),
                                self.scan_entries,
                                &mut |_, _| {},
                            )?;
                        }
                        reads.fetch_add(1, Ordering::Relaxed);
                    }
                    Ok(())
                }));
            }
            if self.write_rate > 0 {
                let (writes, stop) = (&writes, &stop);
                handles.push(s.spawn(move || -> Result<()> {
                    let mut rng = SmallRng::seed_from_u64(self.seed ^ 0x5eed);
                    let mut key = key_buffer(self.key_size);
                    let pacer = Pacer::start(self.write_rate as f64);
                    let mut done = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        if !pacer.ready(done) {
                            continue;
                        }
                        encode_key(&mut key, rng.gen_range(0..self.num));
                        store.put(&key, &(self.next_value)(done))?;
                        done += 1;
                        writes.fetch_add(1, Ordering::Relaxed);
                    }
                    Ok(())
                }));
            }
            // The sampler: one line per second. Counters are read before the
            // statistics, which may take a while (a merge's new tables), so a
            // line's interval runs from one counter read to the next.
            let sample = || Sample {
                at: Instant::now(),
                reads: reads.load(Ordering::Relaxed),
                writes: writes.load(Ordering::Relaxed),
                stats: stats(),
            };
            let mut last = sample();
            let mut second = 0u64;
            let mut failure = None;
            while start.elapsed() < self.duration && failure.is_none() {
                // The next whole second not yet passed: a late sampler skips
                // seconds instead of writing empty lines for them.
                second = (second + 1).max(start.elapsed().as_secs() + 1);
                let next = start + Duration::from_secs(second);
                std::thread::sleep(next.saturating_duration_since(Instant::now()));
                let now = sample();
                if let Some(f) = series.as_mut() {
                    if let Err(e) = write_sample(f, second, &last, &now) {
                        failure = Some(e);
                    }
                }
                last = now;
                if handles.iter().any(|h| h.is_finished()) {
                    break; // a thread failed: stop and report it
                }
            }
            stop.store(true, Ordering::Relaxed);
            for h in handles {
                h.join()
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("mixedhot thread panicked")))?;
            }
            failure.map_or(Ok(()), Err)
        });
        result?;
        if let Some(mut f) = series {
            f.flush()?;
        }
        Ok(Totals {
            reads: reads.load(Ordering::Relaxed),
            writes: writes.load(Ordering::Relaxed),
            seconds: start.elapsed().as_secs_f64(),
        })
    }
}

/// What the sampler reads at one moment.
struct Sample {
    at: Instant,
    reads: u64,
    writes: u64,
    stats: Option<DbStats>,
}

/// One line of the series: throughput and cache hit ratio (data blocks
/// looked up by queries) between two samples, per second of the time
/// between them, and the state at the second one. The last column counts
/// the lookups behind the ratio (not per second), so that a reader can
/// weigh seconds by them: a mean of per-second ratios counts a second of
/// 2,000 reads like one of 100,000.
fn write_sample(
    f: &mut impl std::io::Write,
    second: u64,
    before: &Sample,
    after: &Sample,
) -> Result<()> {
    let interval = after.at.duration_since(before.at).as_secs_f64();
    let per_second = |n: u64| (n as f64 / interval.max(1e-9)).round() as u64;
    let reads = per_second(after.reads - before.reads);
    let writes = per_second(after.writes - before.writes);
    match (&before.stats, &after.stats) {
        (Some(b), Some(a)) => {
            let hits = a.cache_hits.data.saturating_sub(b.cache_hits.data);
            let misses = a.cache_misses.data.saturating_sub(b.cache_misses.data);
            let ratio = |hits: u64, misses: u64| {
                if hits + misses == 0 {
                    String::new()
                } else {
                    format!("{:.4}", hits as f64 / (hits + misses) as f64)
                }
            };
            let block_ratio = ratio(hits, misses);
            let row_ratio = ratio(
                a.row_cache_hits.saturating_sub(b.row_cache_hits),
                a.row_cache_misses.saturating_sub(b.row_cache_misses),
            );
            writeln!(
                f,
                "{second},{reads},{writes},{block_ratio},{row_ratio},{},{},{},{},{},{},{interval:.3},{},{}",
                a.block_cache_usage,
                a.disk_bytes,
                a.buffer.bytes,
                a.compactions,
                a.compaction_bytes_written,
                a.cache_invalidated_blocks,
                hits + misses,
                buffer_levels(&a.buffer.levels)
            )?;
        }
        _ => writeln!(f, "{second},{reads},{writes},,,,,,,,,{interval:.3},,")?,
    }
    Ok(())
}

/// The `buffer_levels` column: per level with a buffer's activity,
/// `level:files:bytes:appended_live:appended_frozen:frozen_ms:probes:gets:invalidated_blocks:tree_invalidated_blocks`
/// (state now, counters since the database opened), `;`-separated.
fn buffer_levels(levels: &[lamina::BufferLevelStats]) -> String {
    levels
        .iter()
        .filter(|l| l.level > 0)
        .map(|l| {
            format!(
                "{}:{}:{}:{}:{}:{}:{}:{}:{}:{}",
                l.level,
                l.files,
                l.bytes,
                l.appended_live,
                l.appended_frozen,
                l.frozen_ms,
                l.probes,
                l.gets,
                l.invalidated_blocks,
                l.tree_invalidated_blocks
            )
        })
        .collect::<Vec<_>>()
        .join(";")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_distributions_parse_and_refuse_nonsense() {
        assert_eq!(
            "rangehot".parse::<ReadDist>(),
            Ok(ReadDist::RangeHot {
                fraction: 0.15,
                share: 0.98
            })
        );
        assert_eq!(
            "zipfian:0.999".parse::<ReadDist>(),
            Ok(ReadDist::Zipfian(0.999))
        );
        for bad in [
            "rangehot:0:0.5",
            "rangehot:0.1:2",
            "zipfian:-1",
            "hot",
            "rangehot:x:y",
        ] {
            assert!(bad.parse::<ReadDist>().is_err(), "{bad}");
        }
    }

    /// A store that only counts: reads and writes succeed at once.
    struct Counting;

    impl Store for Counting {
        fn put(&self, _: &[u8], _: &[u8]) -> Result<()> {
            Ok(())
        }
        fn get(&self, _: &[u8]) -> Result<Option<usize>> {
            std::thread::sleep(Duration::from_millis(1));
            Ok(None)
        }
        fn delete(&self, _: &[u8]) -> Result<()> {
            Ok(())
        }
        fn scan(
            &self,
            _: Option<&[u8]>,
            _: Option<&[u8]>,
            _: u64,
            _: &mut dyn FnMut(&[u8], &[u8]),
        ) -> Result<u64> {
            Ok(0)
        }
        fn scan_rev(
            &self,
            _: Option<&[u8]>,
            _: u64,
            _: &mut dyn FnMut(&[u8], &[u8]),
        ) -> Result<u64> {
            Ok(0)
        }
    }

    /// A statistics call that takes 2.5 s (as one opening a merge's new
    /// tables on an emulated disk did) used to make the sampler write a
    /// line per missed second at once: lines of 0 reads and 0 writes that
    /// looked like a stalled engine. Now each line covers the time since the
    /// previous one, no second is written twice or with an empty interval,
    /// and the lines' reads add up to the reads the run counted.
    #[test]
    fn a_slow_statistics_call_skips_seconds_instead_of_writing_empty_ones() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("series.csv");
        let calls = AtomicU64::new(0);
        let stats = || {
            if calls.fetch_add(1, Ordering::Relaxed) == 2 {
                std::thread::sleep(Duration::from_millis(2_500));
            }
            None
        };
        let work = MixedHot {
            num: 1_000,
            key_size: 16,
            readers: 2,
            dist: ReadDist::Zipfian(0.99),
            write_rate: 100,
            scan_entries: 0,
            duration: Duration::from_secs(6),
            seed: 1,
            next_value: &|_| vec![b'v'; 10],
            timeseries: Some(&path),
        };
        let totals = work.run(&Counting, &stats).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let rows: Vec<Vec<f64>> = text
            .lines()
            .skip(1)
            .map(|l| l.split(',').filter_map(|v| v.parse().ok()).collect())
            .collect();
        let (mut seconds, mut reads) = (Vec::new(), 0.0);
        for row in &rows {
            let (second, qps, writes, interval) = (row[0], row[1], row[2], row[3]);
            assert!(interval > 0.5, "a line covers {interval} s: {text}");
            assert!(qps > 0.0 && writes > 0.0, "an empty line: {text}");
            seconds.push(second as u64);
            reads += qps * interval;
        }
        assert!(seconds.windows(2).all(|w| w[0] < w[1]), "{text}");
        assert!(
            rows.len() < 6,
            "the slow call's seconds were written: {text}"
        );
        let counted = totals.reads as f64;
        // Reads before the first sample and after the last are in no line.
        assert!(
            reads <= counted && reads > 0.6 * counted,
            "lines add up to {reads} of {counted} reads: {text}"
        );
    }

    /// RangeHot sends its share of reads to the middle range: an exact count
    /// over many draws against the configured share.
    #[test]
    fn rangehot_sends_its_share_to_the_hot_range() {
        let chooser = KeyChooser::new(
            ReadDist::RangeHot {
                fraction: 0.15,
                share: 0.98,
            },
            10_000,
        );
        let mut rng = SmallRng::seed_from_u64(1);
        let (start, end) = (4_250, 5_750);
        let n = 100_000;
        let hot = (0..n)
            .filter(|_| (start..end).contains(&chooser.next(&mut rng)))
            .count();
        let share = hot as f64 / n as f64;
        assert!((share - 0.98).abs() < 0.005, "{share}");
    }
}
