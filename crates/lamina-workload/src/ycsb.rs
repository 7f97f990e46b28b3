//! YCSB core workloads A–F and the load phase, as [`KvOp`] streams.
//!
//! Proportions and request distributions are those of YCSB's
//! `workloads/workload[a-f]` files:
//!
//! | workload | operations | request distribution |
//! | --- | --- | --- |
//! | A | 50 % read, 50 % update | zipfian |
//! | B | 95 % read, 5 % update | zipfian |
//! | C | 100 % read | zipfian |
//! | D | 95 % read, 5 % insert | latest |
//! | E | 95 % scan (length uniform in 1..=100), 5 % insert | zipfian |
//! | F | 50 % read, 50 % read-modify-write | zipfian |
//!
//! `zipfian` is YCSB's scrambled Zipfian (θ = 0.99) over the records plus
//! twice the expected inserts, redrawn while it names a key not inserted yet
//! (YCSB's `nextKeynum`); `latest` is the skewed-latest generator; `uniform`
//! is uniform over the loaded records. The load phase inserts records
//! `0..records` in order; like YCSB's default `insertorder=hashed`, the key
//! of record number `n` is [`ycsb_key`]`(n)` = FNV-64(`n`), so loads and
//! inserts land all over the key space. Transaction inserts continue the
//! record numbers at `insert_start` (default: `records`); several clients
//! give each its own `insert_start` to keep their inserts apart.

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use crate::dist::{fnv_hash64, uniform_below, unit_f64, ScrambledZipfian, SkewedLatest};
use crate::kv::KvOp;
use crate::{Result, WorkloadError};

/// Longest scan of workload E (`maxscanlength`).
pub const MAX_SCAN_LENGTH: u64 = 100;

/// The key of YCSB record number `n` (hashed insert order).
pub fn ycsb_key(n: u64) -> u64 {
    fnv_hash64(n)
}

/// A YCSB core workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum YcsbWorkload {
    /// Insert the records (YCSB's `load` phase).
    Load,
    /// Update heavy.
    A,
    /// Read mostly.
    B,
    /// Read only.
    C,
    /// Read latest.
    D,
    /// Short ranges.
    E,
    /// Read-modify-write.
    F,
}

/// Request distribution of a transaction phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RequestDist {
    /// Uniform over the loaded records.
    Uniform,
    /// Scrambled Zipfian, θ = 0.99.
    Zipfian,
    /// Skewed towards the most recent inserts.
    Latest,
}

/// Operation proportions of a workload, in YCSB's order.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Proportions {
    /// Reads.
    pub read: f64,
    /// Updates.
    pub update: f64,
    /// Inserts.
    pub insert: f64,
    /// Scans.
    pub scan: f64,
    /// Read-modify-writes.
    pub read_modify_write: f64,
}

impl YcsbWorkload {
    /// Every workload, load first.
    pub const ALL: [YcsbWorkload; 7] = [
        YcsbWorkload::Load,
        YcsbWorkload::A,
        YcsbWorkload::B,
        YcsbWorkload::C,
        YcsbWorkload::D,
        YcsbWorkload::E,
        YcsbWorkload::F,
    ];

    /// `load`, `a`, ..., `f`.
    pub fn name(self) -> &'static str {
        match self {
            YcsbWorkload::Load => "load",
            YcsbWorkload::A => "a",
            YcsbWorkload::B => "b",
            YcsbWorkload::C => "c",
            YcsbWorkload::D => "d",
            YcsbWorkload::E => "e",
            YcsbWorkload::F => "f",
        }
    }

    /// Parses [`YcsbWorkload::name`] (case-insensitive).
    pub fn from_name(s: &str) -> Option<YcsbWorkload> {
        YcsbWorkload::ALL
            .into_iter()
            .find(|w| w.name().eq_ignore_ascii_case(s))
    }

    /// The operation mix (load: all inserts).
    pub fn proportions(self) -> Proportions {
        let p = |read, update, insert, scan, read_modify_write| Proportions {
            read,
            update,
            insert,
            scan,
            read_modify_write,
        };
        match self {
            YcsbWorkload::Load => p(0.0, 0.0, 1.0, 0.0, 0.0),
            YcsbWorkload::A => p(0.5, 0.5, 0.0, 0.0, 0.0),
            YcsbWorkload::B => p(0.95, 0.05, 0.0, 0.0, 0.0),
            YcsbWorkload::C => p(1.0, 0.0, 0.0, 0.0, 0.0),
            YcsbWorkload::D => p(0.95, 0.0, 0.05, 0.0, 0.0),
            YcsbWorkload::E => p(0.0, 0.0, 0.05, 0.95, 0.0),
            YcsbWorkload::F => p(0.5, 0.0, 0.0, 0.0, 0.5),
        }
    }

    /// The workload file's `requestdistribution`.
    pub fn request_dist(self) -> RequestDist {
        match self {
            YcsbWorkload::D => RequestDist::Latest,
            _ => RequestDist::Zipfian,
        }
    }
}

/// One YCSB run: a load of `records` or `operations` transactions against
/// `records` loaded records.
#[derive(Debug, Clone, PartialEq)]
pub struct YcsbSpec {
    /// The workload.
    pub workload: YcsbWorkload,
    /// Records loaded (the load phase inserts numbers `load_start..records`).
    pub records: u64,
    /// Transactions of A–F.
    pub operations: u64,
    /// First record number the load inserts (lets clients split a load).
    pub load_start: u64,
    /// First record number of transaction inserts [default: `records`].
    pub insert_start: Option<u64>,
    /// Overrides the workload's request distribution.
    pub request_dist: Option<RequestDist>,
    /// Seed of the stream.
    pub seed: u64,
}

impl YcsbSpec {
    /// `workload` over `records` records, `operations` transactions.
    pub fn new(workload: YcsbWorkload, records: u64, operations: u64, seed: u64) -> YcsbSpec {
        YcsbSpec {
            workload,
            records,
            operations,
            load_start: 0,
            insert_start: None,
            request_dist: None,
            seed,
        }
    }
}

/// Chooses record numbers for reads, updates, scans.
enum Chooser {
    Uniform,
    Zipfian(ScrambledZipfian),
    Latest(SkewedLatest),
}

/// Streams the [`KvOp`]s of a [`YcsbSpec`].
pub struct YcsbGenerator {
    rng: ChaCha8Rng,
    proportions: Proportions,
    chooser: Chooser,
    records: u64,
    insert_start: u64,
    /// Transaction inserts so far.
    inserted: u64,
    /// Load: next record number; transactions: operations left.
    next_load: u64,
    ops_left: u64,
    load: bool,
}

impl YcsbGenerator {
    /// A generator for `spec`.
    pub fn new(spec: &YcsbSpec) -> Result<YcsbGenerator> {
        let load = spec.workload == YcsbWorkload::Load;
        if !load && spec.records == 0 {
            return Err(WorkloadError::InvalidSpec(
                "YCSB transactions need at least one loaded record".into(),
            ));
        }
        if load && spec.load_start > spec.records {
            return Err(WorkloadError::InvalidSpec(format!(
                "load_start {} past records {}",
                spec.load_start, spec.records
            )));
        }
        let proportions = spec.workload.proportions();
        // YCSB sizes the Zipfian for the records plus twice the expected
        // inserts, so keys inserted during the run become popular too.
        let expected_inserts = (spec.operations as f64 * proportions.insert * 2.0) as u64;
        let chooser = match spec.request_dist.unwrap_or(spec.workload.request_dist()) {
            RequestDist::Uniform => Chooser::Uniform,
            RequestDist::Zipfian => {
                Chooser::Zipfian(ScrambledZipfian::new(spec.records + expected_inserts))
            }
            RequestDist::Latest => Chooser::Latest(SkewedLatest::new(spec.records)),
        };
        Ok(YcsbGenerator {
            rng: ChaCha8Rng::seed_from_u64(spec.seed),
            proportions,
            chooser,
            records: spec.records,
            insert_start: spec.insert_start.unwrap_or(spec.records),
            inserted: 0,
            next_load: spec.load_start,
            ops_left: spec.operations,
            load,
        })
    }

    /// Record number of the i-th existing record (loaded ones first, then
    /// this generator's inserts).
    fn record_at(&self, i: u64) -> u64 {
        if i < self.records {
            i
        } else {
            self.insert_start + (i - self.records)
        }
    }

    /// YCSB's `nextKeynum`: a record that exists already.
    fn existing_key(&mut self) -> u64 {
        let count = self.records + self.inserted;
        let i = match &mut self.chooser {
            Chooser::Uniform => uniform_below(&mut self.rng, self.records),
            Chooser::Zipfian(z) => loop {
                let i = z.next(&mut self.rng);
                if i < count {
                    break i;
                }
            },
            Chooser::Latest(l) => l.next(&mut self.rng, count),
        };
        ycsb_key(self.record_at(i))
    }

    fn insert_key(&mut self) -> u64 {
        let n = self.insert_start + self.inserted;
        self.inserted += 1;
        ycsb_key(n)
    }
}

impl Iterator for YcsbGenerator {
    type Item = KvOp;

    fn next(&mut self) -> Option<KvOp> {
        if self.load {
            if self.next_load >= self.records {
                return None;
            }
            let n = self.next_load;
            self.next_load += 1;
            return Some(KvOp::Insert(ycsb_key(n)));
        }
        if self.ops_left == 0 {
            return None;
        }
        self.ops_left -= 1;
        let p = self.proportions;
        let mut u = unit_f64(&mut self.rng);
        for (share, kind) in [
            (p.read, 0),
            (p.update, 1),
            (p.insert, 2),
            (p.scan, 3),
            (p.read_modify_write, 4),
        ] {
            if u < share {
                return Some(match kind {
                    0 => KvOp::Read(self.existing_key()),
                    1 => KvOp::Update(self.existing_key()),
                    2 => KvOp::Insert(self.insert_key()),
                    3 => {
                        let start = self.existing_key();
                        let len = 1 + uniform_below(&mut self.rng, MAX_SCAN_LENGTH);
                        KvOp::Scan { start, len }
                    }
                    _ => KvOp::ReadModifyWrite(self.existing_key()),
                });
            }
            u -= share;
        }
        // Rounding left u at the top of [0, 1): the last non-zero share.
        Some(KvOp::Read(self.existing_key()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::{HashMap, HashSet};

    fn ops(w: YcsbWorkload, records: u64, operations: u64, seed: u64) -> Vec<KvOp> {
        YcsbGenerator::new(&YcsbSpec::new(w, records, operations, seed))
            .unwrap()
            .collect()
    }

    #[test]
    fn load_inserts_every_record_once() {
        let all = ops(YcsbWorkload::Load, 5000, 0, 1);
        let keys: HashSet<u64> = all
            .iter()
            .map(|op| match op {
                KvOp::Insert(k) => *k,
                other => panic!("load produced {other:?}"),
            })
            .collect();
        assert_eq!(keys.len(), 5000);
        let expected: HashSet<u64> = (0..5000).map(fnv_hash64).collect();
        assert_eq!(keys, expected);
    }

    #[test]
    fn operation_mix_matches_the_workload_files() {
        let n = 100_000u64;
        for w in &YcsbWorkload::ALL[1..] {
            let mut counts = [0u64; 5];
            for op in ops(*w, 10_000, n, 7) {
                let i = match op {
                    KvOp::Read(_) => 0,
                    KvOp::Update(_) => 1,
                    KvOp::Insert(_) => 2,
                    KvOp::Scan { len, .. } => {
                        assert!((1..=MAX_SCAN_LENGTH).contains(&len));
                        3
                    }
                    KvOp::ReadModifyWrite(_) => 4,
                    KvOp::Delete(_) => panic!("YCSB does not delete"),
                };
                counts[i] += 1;
            }
            let p = w.proportions();
            for (i, share) in [p.read, p.update, p.insert, p.scan, p.read_modify_write]
                .into_iter()
                .enumerate()
            {
                let expected = share * n as f64;
                let sd = (n as f64 * share * (1.0 - share)).sqrt();
                assert!(
                    (counts[i] as f64 - expected).abs() <= 5.0 * sd + 1.0,
                    "workload {}: kind {i}: {} vs {expected}",
                    w.name(),
                    counts[i]
                );
            }
        }
    }

    #[test]
    fn requests_name_existing_records_only() {
        for w in [YcsbWorkload::A, YcsbWorkload::D, YcsbWorkload::E] {
            let mut existing: HashSet<u64> = (0..2000).map(ycsb_key).collect();
            for op in ops(w, 2000, 20_000, 3) {
                match op {
                    KvOp::Insert(k) => assert!(existing.insert(k), "insert of an existing key"),
                    KvOp::Read(k) | KvOp::Update(k) | KvOp::ReadModifyWrite(k) => {
                        assert!(existing.contains(&k))
                    }
                    KvOp::Scan { start, .. } => assert!(existing.contains(&start)),
                    KvOp::Delete(_) => panic!("YCSB does not delete"),
                }
            }
        }
    }

    #[test]
    fn zipfian_requests_are_skewed_and_latest_favours_new_inserts() {
        // A: the hottest record gets about P(rank 0) = 1 / ζ(10^10, 0.99)
        // ≈ 3.8 % of the requests; uniform would give 1 / 10 000.
        let mut freq: HashMap<u64, u64> = HashMap::new();
        for op in ops(YcsbWorkload::C, 10_000, 100_000, 11) {
            if let KvOp::Read(k) = op {
                *freq.entry(k).or_default() += 1;
            }
        }
        let top = freq.values().copied().max().unwrap() as f64 / 100_000.0;
        assert!((top - 1.0 / 26.469).abs() < 0.005, "{top}");

        // D: reads of keys inserted during the run are far above their
        // share of the key space (5 % inserts of 100 000 ops = ~5000 keys on
        // top of 10 000; the newest dominate).
        let mut inserted = HashSet::new();
        let (mut reads, mut reads_of_new) = (0u64, 0u64);
        for op in ops(YcsbWorkload::D, 10_000, 100_000, 5) {
            match op {
                KvOp::Insert(k) => {
                    inserted.insert(k);
                }
                KvOp::Read(k) => {
                    reads += 1;
                    reads_of_new += u64::from(inserted.contains(&k));
                }
                _ => {}
            }
        }
        assert!(
            reads_of_new as f64 / reads as f64 > 0.6,
            "{reads_of_new} of {reads}"
        );
    }

    #[test]
    fn deterministic_per_seed_and_clients_keep_inserts_apart() {
        assert_eq!(
            ops(YcsbWorkload::D, 100, 1000, 9),
            ops(YcsbWorkload::D, 100, 1000, 9)
        );
        assert_ne!(
            ops(YcsbWorkload::A, 100, 1000, 9),
            ops(YcsbWorkload::A, 100, 1000, 10)
        );
        let inserts = |start| {
            let spec = YcsbSpec {
                insert_start: Some(start),
                ..YcsbSpec::new(YcsbWorkload::D, 100, 2000, 1)
            };
            YcsbGenerator::new(&spec)
                .unwrap()
                .filter_map(|op| match op {
                    KvOp::Insert(k) => Some(k),
                    _ => None,
                })
                .collect::<HashSet<u64>>()
        };
        assert!(inserts(100).is_disjoint(&inserts(100 + 2000)));
    }

    #[test]
    fn names_round_trip() {
        for w in YcsbWorkload::ALL {
            assert_eq!(YcsbWorkload::from_name(w.name()), Some(w));
        }
        assert_eq!(YcsbWorkload::from_name("A"), Some(YcsbWorkload::A));
        assert_eq!(YcsbWorkload::from_name("g"), None);
    }
}
