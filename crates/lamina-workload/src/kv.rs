//! Key-value operations on integer keys, and seed 001's workload generator.
//!
//! [`KvOp`] is the operation stream of the YCSB and seed-001 generators: keys
//! are `u64` ids that a driver encodes into bytes (e.g. db_bench's layout,
//! big-endian, `key_size` bytes).
//!
//! [`KvSpec`] reproduces the knobs of the K-V workload generator of seed 001
//! ("Constructing and Analyzing the LSM Compaction Design Space", §4.3 and
//! the digest's §4.2):
//!
//! * **Inserts** of unique keys. An insert draws a *slot* in `[0, 2^(8·key_size-1))`
//!   from the ingestion distribution and takes the first free slot at or
//!   after it (wrapping); the key is `2·slot`. So uniform ingestion spreads
//!   keys over the whole key space, Zipf (s = 1) piles them up at the low end,
//!   normal (σ = 34 % of the space) around the middle.
//! * **Updates**: `update_ratio` updates per insert (0 to 8 in the paper) of
//!   live keys; **point deletes**: `delete_ratio` deletes per insert, of live
//!   keys only. Both choose the key by the ingestion distribution over the
//!   live keys in insertion order.
//! * **Point lookups**: a fraction `empty_lookup_fraction` (α) targets keys
//!   that are never inserted (odd keys `2·slot + 1`, the slot drawn by the
//!   lookup distribution over the key space); the others target live keys,
//!   chosen by the lookup distribution over the live keys in insertion order
//!   (Zipf: the earliest inserted are hot; normal: the middle of the
//!   history).
//! * **Range queries** with `range_selectivity`: a scan starting at a live
//!   key (lookup distribution) reading `max(1, selectivity · live keys)`
//!   entries.
//! * **Phases**: `interleaved` mixes every operation (each step draws its kind
//!   with probability proportional to what is left: a uniform shuffle);
//!   `serial` runs all inserts, updates and deletes first, then all lookups
//!   and range queries. Operations on live keys wait until a key is live.
//! * **Entry size**: `entry_size` bytes per entry with `key_size`-byte keys
//!   (the paper: 128 B entries, 4 B keys), i.e. `entry_size - key_size` bytes
//!   of value.
//!
//! Deterministic per `seed` (ChaCha8 and this crate's own float arithmetic).

use std::collections::HashMap;

use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::dist::{uniform_below, KeyDist, KeySampler};
use crate::{Result, WorkloadError};

/// One key-value operation on integer key ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KvOp {
    /// Put of a key not present.
    Insert(u64),
    /// Put of a present key.
    Update(u64),
    /// Point lookup.
    Read(u64),
    /// Up to `len` entries from the first key `>= start`.
    Scan {
        /// First key.
        start: u64,
        /// Entries to read.
        len: u64,
    },
    /// Read then write back the same key.
    ReadModifyWrite(u64),
    /// Point delete.
    Delete(u64),
}

/// Whether queries run with ingestion or after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Phases {
    /// Everything in one random mix.
    #[default]
    Interleaved,
    /// Ingestion first, then queries.
    Serial,
}

/// Seed 001's workload knobs (see the module documentation).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct KvSpec {
    /// Unique-key inserts.
    pub inserts: u64,
    /// Updates per insert.
    pub update_ratio: f64,
    /// Point deletes per insert, in `[0, 1]`.
    pub delete_ratio: f64,
    /// Point lookups.
    pub point_lookups: u64,
    /// Fraction α of the point lookups that target absent keys.
    pub empty_lookup_fraction: f64,
    /// Range queries.
    pub range_queries: u64,
    /// Fraction of the live keys one range query reads.
    pub range_selectivity: f64,
    /// Distribution of inserts, updates and deletes.
    pub ingestion: KeyDist,
    /// Distribution of lookups and range starts.
    pub lookup: KeyDist,
    /// Interleaved or serial.
    pub phases: Phases,
    /// Key size in bytes (1 to 8).
    pub key_size: usize,
    /// Key plus value bytes of an entry.
    pub entry_size: usize,
    /// Seed of the stream.
    pub seed: u64,
}

impl Default for KvSpec {
    fn default() -> Self {
        KvSpec {
            inserts: 0,
            update_ratio: 0.0,
            delete_ratio: 0.0,
            point_lookups: 0,
            empty_lookup_fraction: 0.0,
            range_queries: 0,
            range_selectivity: 0.001,
            ingestion: KeyDist::Uniform,
            lookup: KeyDist::Uniform,
            phases: Phases::Interleaved,
            key_size: 4,
            entry_size: 128,
            seed: 1,
        }
    }
}

impl KvSpec {
    /// Checks the knobs.
    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(WorkloadError::InvalidSpec(m));
        if !(1..=8).contains(&self.key_size) {
            return bad(format!("key_size must be 1 to 8, got {}", self.key_size));
        }
        if self.entry_size < self.key_size {
            return bad(format!(
                "entry_size {} smaller than key_size {}",
                self.entry_size, self.key_size
            ));
        }
        if !(self.update_ratio >= 0.0 && self.update_ratio.is_finite()) {
            return bad(format!(
                "update_ratio must be >= 0, got {}",
                self.update_ratio
            ));
        }
        for (name, v) in [
            ("delete_ratio", self.delete_ratio),
            ("empty_lookup_fraction", self.empty_lookup_fraction),
            ("range_selectivity", self.range_selectivity),
        ] {
            if !(0.0..=1.0).contains(&v) {
                return bad(format!("{name} must be in [0, 1], got {v}"));
            }
        }
        if self.inserts > self.slots() {
            return bad(format!(
                "{} inserts do not fit {}-byte keys",
                self.inserts, self.key_size
            ));
        }
        Ok(())
    }

    /// Value bytes of an entry.
    pub fn value_size(&self) -> usize {
        self.entry_size - self.key_size
    }

    /// Insert slots: half the key space (even keys), the other half is for
    /// empty lookups.
    fn slots(&self) -> u64 {
        1u64 << (8 * self.key_size as u32 - 1)
    }

    /// A key no insert of this spec ever takes (an odd key), its slot drawn
    /// by `sampler` over the key space: the empty point lookups' keys, for
    /// drivers that keep their own live keys.
    pub fn absent_key(&self, sampler: &mut KeySampler, rng: &mut impl RngCore) -> u64 {
        2 * sampler.sample(rng, self.slots()) + 1
    }

    /// Updates this spec generates.
    pub fn updates(&self) -> u64 {
        (self.inserts as f64 * self.update_ratio).round() as u64
    }

    /// Deletes this spec generates.
    pub fn deletes(&self) -> u64 {
        (self.inserts as f64 * self.delete_ratio).round() as u64
    }

    /// Operations in total.
    pub fn total_ops(&self) -> u64 {
        self.inserts + self.updates() + self.deletes() + self.point_lookups + self.range_queries
    }
}

/// Streams the operations of a [`KvSpec`].
pub struct KvGenerator {
    spec: KvSpec,
    rng: ChaCha8Rng,
    ingestion: KeySampler,
    lookup: KeySampler,
    /// Remaining inserts, updates, deletes, non-empty lookups, empty lookups,
    /// range queries.
    left: [u64; 6],
    /// Live keys in insertion order (a delete moves the last one into the
    /// hole).
    live: Vec<u64>,
    live_pos: HashMap<u64, usize>,
    /// Slot -> a slot at or after it to try next (used slots only): a
    /// path-compressed "next free slot" forest.
    next_free: HashMap<u64, u64>,
}

const INSERT: usize = 0;
const UPDATE: usize = 1;
const DELETE: usize = 2;
const HIT: usize = 3;
const EMPTY: usize = 4;
const RANGE: usize = 5;

impl KvGenerator {
    /// A generator for `spec`.
    pub fn new(spec: KvSpec) -> Result<KvGenerator> {
        spec.validate()?;
        let empty = (spec.point_lookups as f64 * spec.empty_lookup_fraction).round() as u64;
        let empty = empty.min(spec.point_lookups);
        Ok(KvGenerator {
            rng: ChaCha8Rng::seed_from_u64(spec.seed),
            ingestion: KeySampler::new(spec.ingestion),
            lookup: KeySampler::new(spec.lookup),
            left: [
                spec.inserts,
                spec.updates(),
                spec.deletes(),
                spec.point_lookups - empty,
                empty,
                spec.range_queries,
            ],
            live: Vec::new(),
            live_pos: HashMap::new(),
            next_free: HashMap::new(),
            spec,
        })
    }

    /// The spec being generated.
    pub fn spec(&self) -> &KvSpec {
        &self.spec
    }

    /// The first free slot at or after `slot`, wrapping; marks it used.
    fn take_slot(&mut self, slot: u64) -> u64 {
        let slots = self.spec.slots();
        let mut path = Vec::new();
        let mut s = slot;
        while let Some(&next) = self.next_free.get(&s) {
            path.push(s);
            s = next;
        }
        let after = (s + 1) % slots;
        self.next_free.insert(s, after);
        for p in path {
            self.next_free.insert(p, after);
        }
        s
    }

    fn insert(&mut self) -> u64 {
        let slot = self.ingestion.sample(&mut self.rng, self.spec.slots());
        let key = 2 * self.take_slot(slot);
        self.live_pos.insert(key, self.live.len());
        self.live.push(key);
        key
    }

    fn live_key(&mut self, lookup: bool) -> Option<u64> {
        let n = self.live.len() as u64;
        if n == 0 {
            return None;
        }
        let sampler = if lookup {
            &mut self.lookup
        } else {
            &mut self.ingestion
        };
        let i = sampler.sample(&mut self.rng, n) as usize;
        self.live.get(i).copied()
    }

    fn delete(&mut self) -> Option<u64> {
        let key = self.live_key(false)?;
        let i = self.live_pos.remove(&key)?;
        self.live.swap_remove(i);
        if let Some(&moved) = self.live.get(i) {
            self.live_pos.insert(moved, i);
        }
        Some(key)
    }

    fn empty_key(&mut self) -> u64 {
        self.spec.absent_key(&mut self.lookup, &mut self.rng)
    }

    fn range(&mut self) -> KvOp {
        let live = self.live.len() as u64;
        let len = ((live as f64 * self.spec.range_selectivity).round() as u64).max(1);
        let start = match self.live_key(true) {
            Some(k) => k,
            None => self.empty_key(),
        };
        KvOp::Scan { start, len }
    }
}

impl Iterator for KvGenerator {
    type Item = KvOp;

    fn next(&mut self) -> Option<KvOp> {
        let ingesting = self.left[INSERT] + self.left[UPDATE] + self.left[DELETE] > 0;
        // Operations on live keys wait for one, unless no insert is left to
        // make one (then they run on whatever there is, or degrade below).
        let can_use_live = !self.live.is_empty() || self.left[INSERT] == 0;
        let mut weights = self.left;
        if !can_use_live {
            for k in [UPDATE, DELETE, HIT, RANGE] {
                weights[k] = 0;
            }
        }
        if self.spec.phases == Phases::Serial && ingesting {
            for k in [HIT, EMPTY, RANGE] {
                weights[k] = 0;
            }
        }
        let total: u64 = weights.iter().sum();
        if total == 0 {
            return None;
        }
        let mut r = uniform_below(&mut self.rng, total);
        let mut kind = INSERT;
        for (k, w) in weights.iter().enumerate() {
            if r < *w {
                kind = k;
                break;
            }
            r -= w;
        }
        self.left[kind] -= 1;
        Some(match kind {
            INSERT => KvOp::Insert(self.insert()),
            // With nothing live, updates and deletes target absent keys:
            // they still cost the engine a write.
            UPDATE => match self.live_key(false) {
                Some(k) => KvOp::Update(k),
                None => KvOp::Update(self.empty_key()),
            },
            DELETE => match self.delete() {
                Some(k) => KvOp::Delete(k),
                None => KvOp::Delete(self.empty_key()),
            },
            HIT => match self.live_key(true) {
                Some(k) => KvOp::Read(k),
                None => KvOp::Read(self.empty_key()),
            },
            EMPTY => KvOp::Read(self.empty_key()),
            _ => self.range(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    fn spec() -> KvSpec {
        KvSpec {
            inserts: 20_000,
            update_ratio: 2.0,
            delete_ratio: 0.1,
            point_lookups: 10_000,
            empty_lookup_fraction: 0.4,
            range_queries: 100,
            range_selectivity: 0.01,
            seed: 3,
            ..KvSpec::default()
        }
    }

    fn ops(s: &KvSpec) -> Vec<KvOp> {
        KvGenerator::new(s.clone()).unwrap().collect()
    }

    /// Replays `ops` on a set model and checks every operation's contract;
    /// returns (inserts, updates, deletes, hit lookups, empty lookups, ranges).
    fn replay(ops: &[KvOp]) -> [u64; 6] {
        let mut live = BTreeSet::new();
        let mut ever = BTreeSet::new();
        let mut c = [0u64; 6];
        for op in ops {
            match *op {
                KvOp::Insert(k) => {
                    assert!(ever.insert(k), "insert of a key inserted before");
                    assert_eq!(k % 2, 0);
                    live.insert(k);
                    c[0] += 1;
                }
                KvOp::Update(k) => {
                    assert!(live.contains(&k), "update of an absent key");
                    c[1] += 1;
                }
                KvOp::Delete(k) => {
                    assert!(live.remove(&k), "delete of an absent key");
                    c[2] += 1;
                }
                KvOp::Read(k) if live.contains(&k) => c[3] += 1,
                KvOp::Read(k) => {
                    assert!(!ever.contains(&k), "lookup of a deleted key");
                    c[4] += 1;
                }
                KvOp::Scan { start, len } => {
                    assert!(live.contains(&start));
                    assert_eq!(len, ((live.len() as f64 * 0.01).round() as u64).max(1));
                    c[5] += 1;
                }
                KvOp::ReadModifyWrite(_) => panic!("not generated"),
            }
        }
        c
    }

    #[test]
    fn counts_and_contracts_hold() {
        let s = spec();
        let c = replay(&ops(&s));
        assert_eq!(c, [20_000, 40_000, 2_000, 6_000, 4_000, 100]);
    }

    #[test]
    fn deterministic_per_seed() {
        assert_eq!(ops(&spec()), ops(&spec()));
        assert_ne!(ops(&spec()), ops(&KvSpec { seed: 4, ..spec() }));
    }

    #[test]
    fn serial_phases_put_every_query_after_ingestion() {
        let s = KvSpec {
            phases: Phases::Serial,
            ..spec()
        };
        let all = ops(&s);
        let first_query = all
            .iter()
            .position(|o| matches!(o, KvOp::Read(_) | KvOp::Scan { .. }))
            .unwrap();
        assert_eq!(first_query as u64, s.inserts + s.updates() + s.deletes());
        assert_eq!(replay(&all), [20_000, 40_000, 2_000, 6_000, 4_000, 100]);
        // Interleaved: queries are spread over the stream.
        let mixed = ops(&spec());
        let first = mixed
            .iter()
            .position(|o| matches!(o, KvOp::Read(_)))
            .unwrap();
        assert!(first < 100, "{first}");
    }

    #[test]
    fn ingestion_distribution_shapes_the_key_space() {
        // 4-byte keys: slots [0, 2^31). Quartiles of the inserted keys.
        let quartile_shares = |dist| {
            let s = KvSpec {
                inserts: 40_000,
                ingestion: dist,
                ..KvSpec::default()
            };
            let mut q = [0f64; 4];
            for op in ops(&s) {
                if let KvOp::Insert(k) = op {
                    q[(k >> 30) as usize] += 1.0 / 40_000.0;
                }
            }
            q
        };
        let uniform = quartile_shares(KeyDist::Uniform);
        for share in uniform {
            assert!((share - 0.25).abs() < 0.02, "{uniform:?}");
        }
        // Normal, σ = 0.34 of the space, truncated: the middle half holds
        // P(|Z| < 0.25/0.34) / P(|Z| < 0.5/0.34) = 0.5379 / 0.8586.
        let normal = quartile_shares(KeyDist::Normal);
        assert!(
            (normal[1] + normal[2] - 0.5379 / 0.8586).abs() < 0.02,
            "{normal:?}"
        );
        // Zipf s = 1 over 2^31 slots: P(slot < 2^29) = H(2^29) / H(2^31)
        // ≈ (ln 2^29 + γ) / (ln 2^31 + γ).
        let zipf = quartile_shares(KeyDist::Zipf);
        let gamma = 0.577_215_664_9;
        let expected = (29.0 * 2f64.ln() + gamma) / (31.0 * 2f64.ln() + gamma);
        assert!((zipf[0] - expected).abs() < 0.02, "{zipf:?} vs {expected}");
    }

    #[test]
    fn zipf_inserts_collide_and_take_the_next_free_slot() {
        // 1-byte keys: 128 slots, all taken by 128 inserts even under Zipf.
        let s = KvSpec {
            inserts: 128,
            ingestion: KeyDist::Zipf,
            key_size: 1,
            entry_size: 16,
            ..KvSpec::default()
        };
        let keys: BTreeSet<u64> = ops(&s)
            .into_iter()
            .map(|o| match o {
                KvOp::Insert(k) => k,
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(keys, (0..128).map(|s| 2 * s).collect());
        let too_many = KvSpec { inserts: 129, ..s };
        assert!(KvGenerator::new(too_many).is_err());
    }

    #[test]
    fn zipf_lookups_concentrate_on_the_earliest_keys() {
        let s = KvSpec {
            inserts: 10_000,
            point_lookups: 50_000,
            lookup: KeyDist::Zipf,
            phases: Phases::Serial,
            ..KvSpec::default()
        };
        let all = ops(&s);
        let first = match all[0] {
            KvOp::Insert(k) => k,
            other => panic!("{other:?}"),
        };
        let hits = all.iter().filter(|o| **o == KvOp::Read(first)).count();
        // P(rank 0) = 1 / H(10 000) ≈ 1 / 9.7876.
        let p: f64 = 1.0 / 9.787_606;
        let sd = (50_000.0 * p * (1.0 - p)).sqrt();
        assert!((hits as f64 - 50_000.0 * p).abs() < 5.0 * sd, "{hits}");
    }

    #[test]
    fn invalid_specs_are_rejected() {
        for bad in [
            KvSpec {
                key_size: 0,
                ..spec()
            },
            KvSpec {
                key_size: 9,
                ..spec()
            },
            KvSpec {
                entry_size: 2,
                ..spec()
            },
            KvSpec {
                delete_ratio: 1.5,
                ..spec()
            },
            KvSpec {
                update_ratio: -1.0,
                ..spec()
            },
            KvSpec {
                empty_lookup_fraction: 2.0,
                ..spec()
            },
        ] {
            assert!(KvGenerator::new(bad).is_err());
        }
    }
}
