//! What the tuner is tuning for: the operation mix, the key distribution,
//! the data size and the memory budget, from a YCSB letter or a TOML file.

use serde::{Deserialize, Serialize};

use lamina_workload::ycsb::{RequestDist, YcsbWorkload, MAX_SCAN_LENGTH};

use crate::{Result, TuneError};

/// Bytes of a YCSB key as `lamina bench` writes it (`--key_size`).
pub const DEFAULT_KEY_BYTES: u64 = 16;
/// The memory budget when none is given: 64 MiB.
pub const DEFAULT_MEMORY_BYTES: u64 = 64 << 20;

/// Shares of the operations, each in `[0, 1]`, summing to 1.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Mix {
    /// Point reads of keys that exist.
    pub get: f64,
    /// Point reads of keys that do not exist.
    pub get_missing: f64,
    /// Range scans.
    pub scan: f64,
    /// Inserts of new keys.
    pub insert: f64,
    /// Updates of existing keys.
    pub update: f64,
    /// Deletes.
    pub delete: f64,
}

impl Mix {
    /// The shares as `[get, get_missing, scan, insert, update, delete]`.
    pub fn shares(&self) -> [f64; 6] {
        [
            self.get,
            self.get_missing,
            self.scan,
            self.insert,
            self.update,
            self.delete,
        ]
    }

    /// The mix of `shares` (in [`Mix::shares`]'s order).
    pub fn from_shares(s: [f64; 6]) -> Mix {
        let [get, get_missing, scan, insert, update, delete] = s;
        Mix {
            get,
            get_missing,
            scan,
            insert,
            update,
            delete,
        }
    }

    /// Shares of operations that write (insert, update, delete).
    pub fn writes(&self) -> f64 {
        self.insert + self.update + self.delete
    }

    /// The mix scaled to sum to 1; refuses negative, non-finite or all-zero
    /// shares.
    pub fn normalized(&self) -> Result<Mix> {
        let s = self.shares();
        if s.iter().any(|x| !x.is_finite() || *x < 0.0) {
            return Err(TuneError::Workload(format!(
                "operation shares must be finite and >= 0, got {self:?}"
            )));
        }
        let total: f64 = s.iter().sum();
        if total <= 0.0 {
            return Err(TuneError::Workload("the operation mix is empty".into()));
        }
        Ok(Mix::from_shares(s.map(|x| x / total)))
    }
}

/// Which keys operations touch.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "distribution", rename_all = "lowercase", deny_unknown_fields)]
pub enum KeyDist {
    /// Every key equally likely.
    Uniform,
    /// Zipfian with exponent `s` (YCSB: 0.99) over the records.
    Zipfian {
        /// The exponent.
        #[serde(default = "default_zipf")]
        s: f64,
    },
    /// Skewed towards the newest keys (YCSB D).
    Latest,
    /// Inserts in key order (a time series); reads uniform.
    Sequential,
}

fn default_zipf() -> f64 {
    0.99
}

/// A workload to tune for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Workload {
    /// What it is called in reports (`a` ... `f`, `load`, a file's stem).
    #[serde(default)]
    pub name: String,
    /// The operation mix.
    pub mix: Mix,
    /// Mean entries a scan reads.
    #[serde(default = "default_scan_length")]
    pub scan_length: f64,
    /// The key distribution.
    #[serde(default = "default_keys")]
    pub keys: KeyDist,
    /// Records loaded before the operations run.
    pub records: u64,
    /// Operations run after the load (0: the load is the workload).
    #[serde(default)]
    pub operations: u64,
    /// Key bytes.
    #[serde(default = "default_key_bytes")]
    pub key_bytes: u64,
    /// Value bytes.
    pub value_bytes: u64,
    /// Memory for the write buffer, the Bloom filters and the block cache.
    #[serde(default = "default_memory")]
    pub memory_bytes: u64,
}

fn default_scan_length() -> f64 {
    // YCSB E: uniform in 1..=100.
    (1 + MAX_SCAN_LENGTH) as f64 / 2.0
}
fn default_keys() -> KeyDist {
    KeyDist::Uniform
}
fn default_key_bytes() -> u64 {
    DEFAULT_KEY_BYTES
}
fn default_memory() -> u64 {
    DEFAULT_MEMORY_BYTES
}

impl Workload {
    /// YCSB workload `letter` (`a` ... `f`) or `load`, with YCSB's mix and
    /// request distribution (`lamina-workload`'s, the generator `lamina
    /// bench --benchmarks=ycsb-X` runs); `records` loaded, as many
    /// operations as records (the bench's default `--reads`).
    pub fn ycsb(letter: &str, records: u64, value_bytes: u64, memory_bytes: u64) -> Result<Self> {
        let w = YcsbWorkload::from_name(letter).ok_or_else(|| {
            TuneError::Workload(format!(
                "unknown YCSB workload {letter:?} (a ... f, load, or a TOML file)"
            ))
        })?;
        let p = w.proportions();
        let mix = Mix {
            // A read-modify-write reads, then writes the key it read.
            get: p.read + p.read_modify_write,
            get_missing: 0.0,
            scan: p.scan,
            insert: p.insert,
            update: p.update + p.read_modify_write,
            delete: 0.0,
        }
        .normalized()?;
        let keys = match w.request_dist() {
            RequestDist::Uniform => KeyDist::Uniform,
            RequestDist::Zipfian => KeyDist::Zipfian { s: default_zipf() },
            RequestDist::Latest => KeyDist::Latest,
        };
        let operations = if w == YcsbWorkload::Load { 0 } else { records };
        let workload = Workload {
            name: w.name().to_string(),
            mix,
            scan_length: default_scan_length(),
            keys,
            records,
            operations,
            key_bytes: DEFAULT_KEY_BYTES,
            value_bytes,
            memory_bytes,
        };
        workload.validate()?;
        Ok(workload)
    }

    /// A workload from a TOML file's text (see `docs/tuning.md`).
    pub fn from_toml(text: &str) -> Result<Self> {
        let mut w: Workload =
            toml::from_str(text).map_err(|e| TuneError::Workload(e.to_string()))?;
        w.mix = w.mix.normalized()?;
        w.validate()?;
        Ok(w)
    }

    /// Checks the sizes and the distribution.
    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(TuneError::Workload(m));
        if self.records == 0 {
            return bad("records must be at least 1".into());
        }
        if self.key_bytes == 0 || self.value_bytes == 0 {
            return bad("key and value sizes must be at least 1 byte".into());
        }
        if self.memory_bytes < 1 << 20 {
            return bad(format!(
                "the memory budget must be at least 1 MiB, got {} bytes",
                self.memory_bytes
            ));
        }
        if !(self.scan_length.is_finite() && self.scan_length >= 0.0) {
            return bad(format!(
                "scan_length must be >= 0, got {}",
                self.scan_length
            ));
        }
        if let KeyDist::Zipfian { s } = self.keys {
            if !(s.is_finite() && s > 0.0) {
                return bad(format!("the Zipfian exponent must be > 0, got {s}"));
            }
        }
        Ok(())
    }

    /// Bytes of one entry on disk: key, value and the per-entry overhead of
    /// the table format (sequence number and type, length prefixes).
    pub fn entry_bytes(&self) -> u64 {
        self.key_bytes + self.value_bytes + 12
    }

    /// True when the measured phase is the load itself.
    pub fn is_load(&self) -> bool {
        self.operations == 0
    }

    /// Writes of the measured phase that add bytes to the tree.
    pub fn phase_writes(&self) -> u64 {
        if self.is_load() {
            self.records
        } else {
            (self.operations as f64 * self.mix.writes()).round() as u64
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ycsb_mixes_follow_the_workload_files() {
        let a = Workload::ycsb("a", 1000, 1024, 64 << 20).unwrap();
        assert_eq!((a.mix.get, a.mix.update), (0.5, 0.5));
        assert_eq!(a.keys, KeyDist::Zipfian { s: 0.99 });
        let e = Workload::ycsb("E", 1000, 1024, 64 << 20).unwrap();
        assert_eq!((e.mix.scan, e.mix.insert), (0.95, 0.05));
        assert_eq!(e.scan_length, 50.5);
        let f = Workload::ycsb("f", 1000, 1024, 64 << 20).unwrap();
        // Half reads, half read-modify-writes: 2/3 of the operations read.
        assert!((f.mix.get - 2.0 / 3.0).abs() < 1e-12);
        let load = Workload::ycsb("load", 1000, 1024, 64 << 20).unwrap();
        assert!(load.is_load());
        assert_eq!(load.phase_writes(), 1000);
        assert!(Workload::ycsb("g", 1000, 1024, 64 << 20).is_err());
    }

    #[test]
    fn a_toml_workload_is_normalized_and_checked() {
        let w = Workload::from_toml(
            "records = 5000\nvalue_bytes = 100\noperations = 100\n\
             [mix]\nget = 3\nget_missing = 1\n\
             [keys]\ndistribution = \"zipfian\"\ns = 1.2\n",
        )
        .unwrap();
        assert_eq!((w.mix.get, w.mix.get_missing), (0.75, 0.25));
        assert_eq!(w.keys, KeyDist::Zipfian { s: 1.2 });
        assert_eq!(w.memory_bytes, DEFAULT_MEMORY_BYTES);
        for bad in [
            "records = 0\nvalue_bytes = 1\n[mix]\nget = 1\n",
            "records = 5\nvalue_bytes = 1\n[mix]\nget = -1\n",
            "records = 5\nvalue_bytes = 1\n[mix]\n",
            "records = 5\nvalue_bytes = 1\n[mix]\nreads = 1\n",
            "records = 5\nvalue_bytes = 1\nmemory_bytes = 10\n[mix]\nget = 1\n",
        ] {
            assert!(Workload::from_toml(bad).is_err(), "{bad}");
        }
    }
}
