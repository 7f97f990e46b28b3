//! fjall (a Rust LSM-tree engine, crates.io) as a `lamina bench` peer:
//! `lamina bench --engine fjall`, built with the `peer-fjall` feature.
//!
//! The benchmark flags map onto fjall's options: `--write_buffer_size` is
//! the partition's memtable size and the keyspace's write-buffer budget,
//! `--cache_size` the block cache, `--block_size`, `--bloom_bits` (0: no
//! filters), `--compression_type` none or lz4. `--sync` makes every write persist the journal
//! with `fdatasync`; without it fjall keeps journal writes in its own buffer
//! until it fills (a weaker guarantee than lamina's `write()` per commit).

use std::path::Path;

use anyhow::{bail, Context, Result};
use fjall::{
    CompressionType, Config, Keyspace, PartitionCreateOptions, PartitionHandle, PersistMode,
};

use super::{OptionMap, PeerSettings};
use lamina::Compression;
use lamina_experiment::kvops::{visit_first, Store};

/// One fjall partition of a keyspace in `--db`.
pub struct FjallStore {
    keyspace: Keyspace,
    part: PartitionHandle,
    sync: bool,
}

impl FjallStore {
    /// Opens (or creates) the keyspace in `dir` with `s`'s settings and
    /// returns it with the option mapping.
    pub fn open(dir: &Path, s: &PeerSettings) -> Result<(FjallStore, OptionMap)> {
        if s.disable_wal {
            bail!("--disable_wal: fjall always writes its journal");
        }
        if s.cache_index_and_filter_blocks {
            bail!("--cache_index_and_filter_blocks: no equivalent in fjall in this bench");
        }
        let mut m = OptionMap::default();
        m.row(
            format!("--write_buffer_size={}", s.write_buffer_size),
            format!(
                "max_memtable_size={0}, keyspace max_write_buffer_size={0}",
                s.write_buffer_size
            ),
            "",
        );
        m.row(
            format!("--cache_size={}", s.cache_size),
            format!("cache_size={}", s.cache_size),
            "",
        );
        m.row(
            format!("--block_size={}", s.block_size),
            format!("block_size={}", s.block_size),
            "",
        );
        let bits = (s.bloom_bits.round() > 0.0).then(|| s.bloom_bits.round().min(255.0) as u8);
        m.row(
            format!("--bloom_bits={}", s.bloom_bits),
            format!("bloom_filter_bits={bits:?}"),
            "",
        );
        let compression = match s.compression {
            Compression::None => CompressionType::None,
            Compression::Lz4 => CompressionType::Lz4,
            Compression::Zstd(_) => bail!(
                "--compression_type={}: fjall 2 has no zstd (lz4 or none)",
                s.compression
            ),
        };
        m.row(
            format!("--compression_type={}", s.compression),
            format!("CompressionType::{compression:?}"),
            if compression == CompressionType::None {
                ""
            } else {
                "differs: fjall compresses every block, lamina keeps raw those it shrinks by < 1/8"
            },
        );
        m.row(
            format!("--mmap_read={}", s.mmap_read),
            "blocks read with pread",
            if s.mmap_read {
                "differs: fjall has no mapped reads"
            } else {
                ""
            },
        );
        m.row(
            format!("--verify_checksums={}", s.verify_checksums),
            "fjall's reads (it has no such option)",
            "differs: not configurable",
        );
        m.row(
            format!("--sync={}", s.sync),
            if s.sync {
                "persist(SyncData) after every write"
            } else {
                "journal buffered in user space"
            },
            if s.sync {
                ""
            } else {
                "differs: lamina write()s every commit"
            },
        );
        m.row(
            format!(
                "--compaction=leveling l0={} T={}",
                s.l0_trigger, s.size_ratio
            ),
            "fjall's default leveled compaction",
            "differs: not configured",
        );
        let keyspace = Config::new(dir)
            .cache_size(s.cache_size as u64)
            .max_write_buffer_size(s.write_buffer_size as u64)
            .open()
            .with_context(|| format!("opening fjall keyspace {}", dir.display()))?;
        let part = keyspace
            .open_partition(
                "bench",
                PartitionCreateOptions::default()
                    .max_memtable_size(u32::try_from(s.write_buffer_size).unwrap_or(u32::MAX))
                    .block_size(u32::try_from(s.block_size).unwrap_or(u32::MAX))
                    .bloom_filter_bits(bits)
                    .compression(compression),
            )
            .context("opening the fjall partition")?;
        Ok((
            FjallStore {
                keyspace,
                part,
                sync: s.sync,
            },
            m,
        ))
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
