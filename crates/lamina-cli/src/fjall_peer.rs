//! fjall (a Rust LSM-tree engine, crates.io) as a `lamina bench` peer:
//! `lamina bench --engine fjall`, built with the `peer-fjall` feature.
//!
//! The benchmark flags map onto fjall's options: `--write_buffer_size` is
//! the partition's memtable size and the keyspace's write-buffer budget,
//! `--cache_size` the block cache, `--block_size`, `--bloom_bits` (0: no
//! filters), no compression. `--sync` makes every write persist the journal
//! with `fdatasync`; without it fjall keeps journal writes in its own buffer
//! until it fills (a weaker guarantee than lamina's `write()` per commit).

use std::path::Path;

use anyhow::{bail, Context, Result};
use fjall::{
    CompressionType, Config, Keyspace, PartitionCreateOptions, PartitionHandle, PersistMode,
};

use lamina_experiment::kvops::{visit_first, Store};

/// The file `lamina bench` leaves in a fjall directory it created: only
/// such a directory may be deleted (`--destroy_db`).
const CREATED_BY_BENCH: &str = "LAMINA-BENCH-CREATED";

/// Prepares `dir` for a fjall run: an absent or empty directory is created
/// and marked as the bench's; a non-empty one is reused with
/// `use_existing`, deleted with `destroy` only if the bench created it, and
/// refused otherwise.
pub fn prepare_dir(dir: &Path, use_existing: bool, destroy: bool) -> Result<()> {
    let empty = match std::fs::read_dir(dir) {
        Ok(mut entries) => entries.next().is_none(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => true,
        Err(e) => return Err(e).with_context(|| format!("reading {}", dir.display())),
    };
    if !empty {
        if use_existing {
            return Ok(());
        }
        if !(destroy && dir.join(CREATED_BY_BENCH).is_file()) {
            bail!(
                "{} is not empty and was not created by lamina bench; pass --use_existing_db, or pick another --db",
                dir.display()
            );
        }
        std::fs::remove_dir_all(dir).with_context(|| format!("deleting {}", dir.display()))?;
    }
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    std::fs::write(dir.join(CREATED_BY_BENCH), b"")
        .with_context(|| format!("marking {}", dir.display()))
}

/// One fjall partition of a keyspace in `--db`.
pub struct FjallStore {
    keyspace: Keyspace,
    part: PartitionHandle,
    sync: bool,
}

/// fjall's settings for a benchmark run.
pub struct FjallOptions {
    /// Memtable and write-buffer bytes.
    pub write_buffer_size: usize,
    /// Block cache bytes.
    pub cache_size: usize,
    /// Data block bytes.
    pub block_size: usize,
    /// Bloom bits per key (0: none).
    pub bloom_bits: f64,
    /// fdatasync the journal per write.
    pub sync: bool,
}

impl FjallStore {
    /// Opens (or creates) the keyspace in `dir`.
    pub fn open(dir: &Path, o: &FjallOptions) -> Result<FjallStore> {
        let keyspace = Config::new(dir)
            .cache_size(o.cache_size as u64)
            .max_write_buffer_size(o.write_buffer_size as u64)
            .open()
            .with_context(|| format!("opening fjall keyspace {}", dir.display()))?;
        let bits = (o.bloom_bits.round() > 0.0).then(|| o.bloom_bits.round().min(255.0) as u8);
        let part = keyspace
            .open_partition(
                "bench",
                PartitionCreateOptions::default()
                    .max_memtable_size(u32::try_from(o.write_buffer_size).unwrap_or(u32::MAX))
                    .block_size(u32::try_from(o.block_size).unwrap_or(u32::MAX))
                    .bloom_filter_bits(bits)
                    .compression(CompressionType::None),
            )
            .context("opening the fjall partition")?;
        Ok(FjallStore {
            keyspace,
            part,
            sync: o.sync,
        })
    }

    fn persist(&self) -> Result<()> {
        if self.sync {
            self.keyspace.persist(PersistMode::SyncData)?;
        }
        Ok(())
    }

    /// Persists the journal (fdatasync) before the keyspace is dropped.
    pub fn close(self) -> Result<()> {
        self.keyspace.persist(PersistMode::SyncAll)?;
        Ok(())
    }
}

impl Store for FjallStore {
    fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.part.insert(key, value)?;
        self.persist()
    }

    fn get(&self, key: &[u8]) -> Result<Option<usize>> {
        Ok(self.part.get(key)?.map(|v| v.len()))
    }

    fn delete(&self, key: &[u8]) -> Result<()> {
        self.part.remove(key)?;
        self.persist()
    }

    fn scan(
        &self,
        start: Option<&[u8]>,
        end: Option<&[u8]>,
        limit: u64,
        visit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<u64> {
        use std::ops::Bound;
        let lo = start.map_or(Bound::Unbounded, |s| Bound::Included(s.to_vec()));
        let hi = end.map_or(Bound::Unbounded, |e| Bound::Excluded(e.to_vec()));
        visit_first(self.part.range((lo, hi)), limit, visit)
    }

    fn scan_rev(
        &self,
        end: Option<&[u8]>,
        limit: u64,
        visit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<u64> {
        match end {
            Some(e) => visit_first(self.part.range(..=e.to_vec()).rev(), limit, visit),
            None => visit_first(self.part.iter().rev(), limit, visit),
        }
    }
}
