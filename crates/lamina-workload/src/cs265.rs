//! The CS265 workload generator: a deterministic stream of DSL operations.
//!
//! A [`WorkloadSpec`] says how many operations of each kind to produce; a
//! [`Generator`] turns it into a stream of [`Op`]s, and [`write_dsl`] writes
//! that stream as CS265 DSL text (`p K V`, `g K`, `r LO HI`, `d K`,
//! `l "PATH"`), writing the binary files that `l` lines reference.
//!
//! # Semantics
//!
//! * **Order.** Operations are mixed in a random order: at every step the next
//!   kind is drawn with probability proportional to how many operations of
//!   that kind remain, which is a uniform shuffle of the whole multiset. Gets
//!   that must hit and deletes are only drawn once some key is live, so a
//!   workload never starts with a get or delete that cannot be satisfied.
//! * **Keys.** Keys lie in `[key_min, key_max]` (default: all of `i32`). The
//!   key space is split in two halves by a seeded hash: puts only ever use
//!   keys of the "put" half, and gets that should miss only use keys of the
//!   other half, so a miss is a key that is *never* put, not even later.
//! * **Puts.** Exactly `round(puts × update_ratio)` puts overwrite a live
//!   key (updates, spread uniformly over the puts); every other put writes
//!   a fresh key, never put before, so `update_ratio` 0 puts no key twice.
//!   Values are uniform over `i32`.
//! * **Gets.** A fraction `gets_misses_ratio` of the gets target never-put keys;
//!   the others target live keys. With probability `gets_skewness` a hitting
//!   get picks one of the hot keys — the first 1 % (at least one) of the live
//!   keys, i.e. roughly the earliest-put ones — otherwise any live key.
//! * **Ranges.** `r LO HI` is the half-open range `[LO, HI)`. `LO` is a live key
//!   when there is one (else uniform in the key space); the width `HI - LO` is
//!   uniform in `[1, max_range_size]` (`Uniform`), or drawn from a normal
//!   distribution with mean `max/2` and standard deviation `max/6`, clamped to
//!   `[1, max]` (`Gaussian`); `HI` is capped at `key_max + 1` so a range
//!   stays inside the key space.
//! * **Deletes.** A delete removes a live key (one put before and not deleted
//!   since); a deleted key is never put again. The last live key is only
//!   deleted once no update or hitting get needs it, or a fresh put remains.
//! * **Feasibility.** A spec the rules cannot satisfy is refused
//!   ([`WorkloadError::InvalidSpec`]) instead of bent: more deletes than
//!   fresh puts, updates or hitting gets without a fresh put, more fresh puts
//!   than the put half of the key space holds, misses with an empty miss half.
//! * **External puts.** With `external_puts`, puts are grouped into batches of
//!   `puts_per_file`; each batch becomes one `Op::Load` (one `.dat` file of
//!   little-endian `(i32 key, i32 value)` pairs and one `l "PATH"` line).
//! * **Determinism.** The same spec (including `seed`) always produces the same
//!   stream, on every platform and version of this crate's dependencies: the
//!   generator uses ChaCha8 seeded with `seed` and its own float conversions.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::{dist, Result, WorkloadError};

/// How range widths are distributed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RangeDist {
    /// Width uniform in `[1, max_range_size]`.
    #[default]
    Uniform,
    /// Width normal around `max_range_size / 2`, clamped to `[1, max_range_size]`.
    Gaussian,
}

/// What to generate.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkloadSpec {
    /// Number of puts (as `p` lines, or inside load files with `external_puts`).
    pub puts: u64,
    /// Number of gets.
    pub gets: u64,
    /// Probability in `[0, 1]` that a hitting get picks a hot key.
    pub gets_skewness: f64,
    /// Fraction in `[0, 1]` of the gets that target keys never put.
    pub gets_misses_ratio: f64,
    /// Number of range queries.
    pub ranges: u64,
    /// Largest width (`HI - LO`) of a range query.
    pub max_range_size: u32,
    /// Distribution of range widths.
    pub range_dist: RangeDist,
    /// Number of deletes.
    pub deletes: u64,
    /// Write puts to binary load files referenced by `l` lines.
    pub external_puts: bool,
    /// Puts per load file when `external_puts` is set.
    pub puts_per_file: u64,
    /// Fraction in `[0, 1]` of the puts that overwrite a live key.
    pub update_ratio: f64,
    /// Smallest key generated.
    pub key_min: i32,
    /// Largest key generated.
    pub key_max: i32,
    /// Seed of the pseudo-random stream.
    pub seed: u64,
}

impl Default for WorkloadSpec {
    fn default() -> Self {
        WorkloadSpec {
            puts: 0,
            gets: 0,
            gets_skewness: 0.0,
            gets_misses_ratio: 0.0,
            ranges: 0,
            max_range_size: 1000,
            range_dist: RangeDist::Uniform,
            deletes: 0,
            external_puts: false,
            puts_per_file: 100_000,
            update_ratio: 0.0,
            key_min: i32::MIN,
            key_max: i32::MAX,
            seed: 0,
        }
    }
}

impl WorkloadSpec {
    /// Checks the spec for inconsistencies.
    pub fn validate(&self) -> Result<()> {
        let unit = |name: &str, v: f64| {
            if (0.0..=1.0).contains(&v) {
                Ok(())
            } else {
                Err(WorkloadError::InvalidSpec(format!(
                    "{name} must be in [0, 1], got {v}"
                )))
            }
        };
        unit("gets_skewness", self.gets_skewness)?;
        unit("gets_misses_ratio", self.gets_misses_ratio)?;
        unit("update_ratio", self.update_ratio)?;
        if self.key_min > self.key_max {
            return Err(WorkloadError::InvalidSpec(format!(
                "key_min {} > key_max {}",
                self.key_min, self.key_max
            )));
        }
        if self.ranges > 0 && self.max_range_size == 0 {
            return Err(WorkloadError::InvalidSpec(
                "max_range_size must be at least 1 when ranges are generated".into(),
            ));
        }
        if self.external_puts && self.puts_per_file == 0 {
            return Err(WorkloadError::InvalidSpec(
                "puts_per_file must be at least 1".into(),
            ));
        }
        let fresh = self.puts - self.updates();
        if self.deletes > fresh {
            return Err(WorkloadError::InvalidSpec(format!(
                "{} deletes need as many live keys, but only {fresh} puts write a fresh key",
                self.deletes
            )));
        }
        let hits = self.gets - self.misses();
        if fresh == 0 && (hits > 0 || self.updates() > 0) {
            return Err(WorkloadError::InvalidSpec(format!(
                "{hits} gets that hit and {} updates need a live key, but no put writes a fresh \
                 one (raise puts, gets_misses_ratio to 1 or update_ratio below 1)",
                self.updates()
            )));
        }
        Ok(())
    }

    /// Puts that overwrite a live key.
    pub fn updates(&self) -> u64 {
        round_share(self.puts, self.update_ratio)
    }

    /// Gets that target a key never put.
    pub fn misses(&self) -> u64 {
        round_share(self.gets, self.gets_misses_ratio)
    }

    /// Total number of operations (each put counts once, even inside a load).
    pub fn total_ops(&self) -> u64 {
        self.puts
            .saturating_add(self.gets)
            .saturating_add(self.ranges)
            .saturating_add(self.deletes)
    }
}

/// One generated operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// `p K V`
    Put {
        /// Key.
        key: i32,
        /// Value.
        value: i32,
    },
    /// `g K`
    Get(i32),
    /// `r LO HI`: the half-open range `[lo, hi)`.
    Range {
        /// Inclusive lower bound.
        lo: i32,
        /// Exclusive upper bound.
        hi: i32,
    },
    /// `d K`
    Delete(i32),
    /// A batch of puts to be written to a load file, in order.
    Load(Vec<(i32, i32)>),
}

impl fmt::Display for Op {
    /// DSL form; a `Load` renders as `l "<N pairs>"` since its path is only
    /// known to [`write_dsl`].
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Op::Put { key, value } => write!(f, "p {key} {value}"),
            Op::Get(k) => write!(f, "g {k}"),
            Op::Range { lo, hi } => write!(f, "r {lo} {hi}"),
            Op::Delete(k) => write!(f, "d {k}"),
            Op::Load(pairs) => write!(f, "l \"<{} pairs>\"", pairs.len()),
        }
    }
}

/// Share of the live keys that are "hot" for skewed gets.
const HOT_FRACTION: f64 = 0.01;
/// Attempts at drawing a suitable random key before falling back.
const KEY_ATTEMPTS: usize = 64;
/// Key spaces up to this size are counted to check they hold the workload.
const COUNTED_SPACE: u64 = 1 << 20;

/// Streams the operations of a [`WorkloadSpec`].
pub struct Generator {
    spec: WorkloadSpec,
    rng: ChaCha8Rng,
    salt: u64,
    fresh_left: u64,
    updates_left: u64,
    hits_left: u64,
    misses_left: u64,
    ranges_left: u64,
    deletes_left: u64,
    /// Keys currently live, in insertion order except for swap-removals.
    live: Vec<i32>,
    /// Position of each live key in `live`.
    live_pos: HashMap<i32, usize>,
    /// Every key ever put.
    ever: HashSet<i32>,
    /// Keys the exhaustive search for a fresh key has passed (see
    /// [`Generator::fresh_key`]), from a random start.
    scan: Option<(i64, u64)>,
}

impl Generator {
    /// A generator for `spec`; fails if the spec is invalid.
    pub fn new(spec: WorkloadSpec) -> Result<Generator> {
        spec.validate()?;
        let mut rng = ChaCha8Rng::seed_from_u64(spec.seed);
        let salt = rng.next_u64();
        let gen = Generator {
            fresh_left: spec.puts - spec.updates(),
            updates_left: spec.updates(),
            hits_left: spec.gets - spec.misses(),
            misses_left: spec.misses(),
            ranges_left: spec.ranges,
            deletes_left: spec.deletes,
            rng,
            salt,
            live: Vec::new(),
            live_pos: HashMap::new(),
            ever: HashSet::new(),
            scan: None,
            spec,
        };
        gen.check_key_space()?;
        Ok(gen)
    }

    /// Refuses a key space whose halves cannot hold the fresh puts or the
    /// misses. Counting costs one hash per key, so it is done only where a
    /// shortfall is possible: up to [`COUNTED_SPACE`] keys, or four keys per
    /// fresh put (work in proportion to the output). A larger contiguous
    /// range splits near evenly (splitmix64 is a bijective mixer), so its
    /// put half holds far more than a quarter of it.
    fn check_key_space(&self) -> Result<()> {
        let space = self.space();
        let fresh = self.fresh_left;
        if space > COUNTED_SPACE.max(fresh.saturating_mul(4)) {
            return Ok(());
        }
        let min = self.spec.key_min as i64;
        let put_half = (0..space)
            .filter(|&i| self.is_put_key((min + i as i64) as i32))
            .count() as u64;
        if fresh > put_half {
            return Err(WorkloadError::InvalidSpec(format!(
                "{fresh} puts of fresh keys, but the key space [{}, {}] holds only {put_half} \
                 keys that are put (the rest are kept for misses)",
                self.spec.key_min, self.spec.key_max
            )));
        }
        if self.misses_left > 0 && put_half == space {
            return Err(WorkloadError::InvalidSpec(format!(
                "the key space [{}, {}] keeps no key for misses",
                self.spec.key_min, self.spec.key_max
            )));
        }
        Ok(())
    }

    /// Keys in `[key_min, key_max]`.
    fn space(&self) -> u64 {
        (self.spec.key_max as i64 - self.spec.key_min as i64 + 1) as u64
    }

    /// The spec being generated.
    pub fn spec(&self) -> &WorkloadSpec {
        &self.spec
    }

    /// Whether `key` belongs to the half of the key space used by puts.
    pub fn is_put_key(&self, key: i32) -> bool {
        splitmix64(key as u32 as u64 ^ self.salt) & 1 == 0
    }

    fn random_key(&mut self) -> i32 {
        self.rng.gen_range(self.spec.key_min..=self.spec.key_max)
    }

    fn uniform01(&mut self) -> f64 {
        dist::unit_f64(&mut self.rng)
    }

    fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && self.uniform01() < p
    }

    fn add_live(&mut self, key: i32) {
        if !self.live_pos.contains_key(&key) {
            self.live_pos.insert(key, self.live.len());
            self.live.push(key);
        }
        self.ever.insert(key);
    }

    fn remove_live_at(&mut self, idx: usize) -> i32 {
        let key = self.live.swap_remove(idx);
        self.live_pos.remove(&key);
        if let Some(&moved) = self.live.get(idx) {
            self.live_pos.insert(moved, idx);
        }
        key
    }

    fn random_live_index(&mut self) -> usize {
        self.rng.gen_range(0..self.live.len())
    }

    /// The key of the next put: an update of a live key, or a fresh one.
    /// Updates are spread over the puts as a uniform shuffle; with no live
    /// key the put is fresh (the deletes leave one while updates remain,
    /// unless a fresh put does).
    fn put_key(&mut self) -> Option<i32> {
        let update = !self.live.is_empty()
            && self.updates_left > 0
            && (self.fresh_left == 0
                || self.rng.gen_range(0..self.updates_left + self.fresh_left) < self.updates_left);
        if update {
            self.updates_left -= 1;
            let i = self.random_live_index();
            return Some(self.live[i]);
        }
        self.fresh_left = self.fresh_left.checked_sub(1)?;
        self.fresh_key()
    }

    /// A key of the put half never put before: random draws while they
    /// succeed, then (the half nearly used up) one sweep of the key space
    /// from a random start. A key the sweep passed is used or a miss key
    /// for good, so the sweep never revisits one: O(space) in all. `None`
    /// only if the half is used up, which [`Generator::new`] rules out.
    fn fresh_key(&mut self) -> Option<i32> {
        for _ in 0..KEY_ATTEMPTS {
            let k = self.random_key();
            if self.is_put_key(k) && !self.ever.contains(&k) {
                return Some(k);
            }
        }
        let space = self.space();
        let min = self.spec.key_min as i64;
        let (start, mut passed) = match self.scan {
            Some(s) => s,
            None => (self.random_key() as i64 - min, 0),
        };
        while passed < space {
            let k = (min + (start + passed as i64) % space as i64) as i32;
            if self.is_put_key(k) && !self.ever.contains(&k) {
                self.scan = Some((start, passed));
                return Some(k);
            }
            passed += 1;
        }
        self.scan = Some((start, passed));
        None
    }

    /// A key of the miss half, which no put ever uses: random draws, then
    /// a sweep from a random start (a tiny miss half). `None` only if the
    /// half is empty, which [`Generator::new`] rules out.
    fn miss_key(&mut self) -> Option<i32> {
        for _ in 0..KEY_ATTEMPTS {
            let k = self.random_key();
            if !self.is_put_key(k) {
                return Some(k);
            }
        }
        let space = self.space();
        let min = self.spec.key_min as i64;
        let start = self.random_key() as i64 - min;
        (0..space)
            .map(|i| (min + (start + i as i64) % space as i64) as i32)
            .find(|&k| !self.is_put_key(k))
    }

    fn next_put(&mut self) -> Option<(i32, i32)> {
        let key = self.put_key()?;
        let value = self.rng.next_u32() as i32;
        self.add_live(key);
        Some((key, value))
    }

    fn hit_key(&mut self) -> i32 {
        let n = self.live.len();
        if self.chance(self.spec.gets_skewness) {
            let hot = ((n as f64 * HOT_FRACTION).ceil() as usize).clamp(1, n);
            let i = self.rng.gen_range(0..hot);
            self.live[i]
        } else {
            let i = self.random_live_index();
            self.live[i]
        }
    }

    fn range(&mut self) -> (i32, i32) {
        let lo = if self.live.is_empty() {
            self.random_key()
        } else {
            let i = self.random_live_index();
            self.live[i]
        };
        let max = self.spec.max_range_size.max(1);
        let width: u32 = match self.spec.range_dist {
            RangeDist::Uniform => self.rng.gen_range(1..=max),
            RangeDist::Gaussian => {
                // Box–Muller.
                let u1 = self.uniform01().max(f64::MIN_POSITIVE);
                let u2 = self.uniform01();
                let z = (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos();
                let mean = max as f64 / 2.0;
                let w = (mean + z * max as f64 / 6.0).round();
                w.clamp(1.0, max as f64) as u32
            }
        };
        // Stay inside the key space: HI is exclusive, so at most key_max + 1.
        let cap = (self.spec.key_max as i64 + 1).min(i32::MAX as i64);
        let hi = (lo as i64 + width as i64).min(cap) as i32;
        if hi <= lo {
            (hi - 1, hi)
        } else {
            (lo, hi)
        }
    }
}

impl Iterator for Generator {
    type Item = Op;

    fn next(&mut self) -> Option<Op> {
        let live = self.live.len();
        let puts_left = self.fresh_left + self.updates_left;
        // Deleting the last live key would strand the updates and hitting
        // gets still to come, unless a fresh put remains to make another.
        let may_delete = live > 1
            || (live == 1
                && (self.fresh_left > 0 || (self.updates_left == 0 && self.hits_left == 0)));
        let weights = [
            puts_left,
            if live > 0 { self.hits_left } else { 0 },
            self.misses_left,
            self.ranges_left,
            if may_delete { self.deletes_left } else { 0 },
        ];
        let total: u64 = weights.iter().sum();
        if total == 0 {
            return None;
        }
        let mut r = self.rng.gen_range(0..total);
        let mut kind = 0;
        for (i, w) in weights.iter().enumerate() {
            if r < *w {
                kind = i;
                break;
            }
            r -= w;
        }
        let op = match kind {
            0 if self.spec.external_puts => {
                let n = puts_left.min(self.spec.puts_per_file);
                let pairs = (0..n)
                    .map(|_| self.next_put())
                    .collect::<Option<Vec<_>>>()?;
                Op::Load(pairs)
            }
            0 => {
                let (key, value) = self.next_put()?;
                Op::Put { key, value }
            }
            1 => {
                self.hits_left -= 1;
                Op::Get(self.hit_key())
            }
            2 => {
                self.misses_left -= 1;
                Op::Get(self.miss_key()?)
            }
            3 => {
                self.ranges_left -= 1;
                let (lo, hi) = self.range();
                Op::Range { lo, hi }
            }
            _ => {
                self.deletes_left -= 1;
                let i = self.random_live_index();
                Op::Delete(self.remove_live_at(i))
            }
        };
        Some(op)
    }
}

/// What [`write_dsl`] produced.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Summary {
    /// DSL lines written.
    pub lines: u64,
    /// Load files written, in order.
    pub load_files: Vec<PathBuf>,
}

/// Writes the workload of `spec` as DSL to `out`. Load files (with
/// `external_puts`) are written to `files_dir` as `<file_prefix><n>.dat`, and
/// the `l` lines name them as `files_dir.join(name)`, so a relative
/// `files_dir` is relative to wherever the DSL is later executed.
pub fn write_dsl<W: Write>(
    spec: &WorkloadSpec,
    out: W,
    files_dir: &Path,
    file_prefix: &str,
) -> Result<Summary> {
    let gen = Generator::new(spec.clone())?;
    let mut out = BufWriter::with_capacity(1 << 16, out);
    let mut summary = Summary::default();
    for op in gen {
        match op {
            Op::Load(pairs) => {
                let path = files_dir.join(format!("{file_prefix}{}.dat", summary.load_files.len()));
                let shown = path.to_str().ok_or_else(|| {
                    WorkloadError::InvalidSpec(format!("load path {path:?} is not UTF-8"))
                })?;
                if shown.contains('"') || shown.contains('\n') || shown.contains('\r') {
                    return Err(WorkloadError::InvalidSpec(format!(
                        "load path {shown:?} cannot be quoted in the DSL"
                    )));
                }
                write_load_file(&path, &pairs)?;
                writeln!(out, "l \"{shown}\"")?;
                summary.load_files.push(path);
            }
            op => writeln!(out, "{op}")?,
        }
        summary.lines += 1;
    }
    out.flush()?;
    Ok(summary)
}

/// Writes `pairs` as little-endian `(i32 key, i32 value)` records.
pub fn write_load_file(path: &Path, pairs: &[(i32, i32)]) -> io::Result<()> {
    let mut w = BufWriter::with_capacity(1 << 16, File::create(path)?);
    for (k, v) in pairs {
        w.write_all(&k.to_le_bytes())?;
        w.write_all(&v.to_le_bytes())?;
    }
    w.flush()?;
    w.get_ref().sync_all()
}

fn round_share(n: u64, ratio: f64) -> u64 {
    ((n as f64 * ratio).round() as u64).min(n)
}

fn splitmix64(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

#[cfg(test)]
mod tests;
