//! The peer engines of `lamina bench --engine PEER` (`fjall`, `rocksdb`,
//! `leveldb`, each behind its cargo feature) and what they share: the
//! directory rule (a peer's directory is deleted only if the bench created
//! it), the [`PeerSettings`] a peer is configured from (the bench derives
//! them once from its flags and lamina's own option defaults:
//! [`super::BenchArgs::peer_settings`]), and the option mapping each peer
//! prints before it runs.
//!
//! Compiled without any peer feature too, so that CI tests the directory
//! rule without building a peer engine.
#![cfg_attr(
    not(all(
        feature = "peer-fjall",
        feature = "peer-rocksdb",
        feature = "peer-leveldb"
    )),
    allow(
        dead_code,
        reason = "each peer reads its own settings: some are unread unless every peer is built"
    )
)]

#[cfg(feature = "peer-fjall")]
pub mod fjall;
#[cfg(feature = "peer-leveldb")]
pub mod leveldb;
#[cfg(feature = "peer-rocksdb")]
pub mod rocksdb;

use std::path::Path;

use anyhow::{bail, Context, Result};
use lamina::Compression;

/// The file `lamina bench` leaves in a peer's directory it created: only
/// such a directory may be deleted (`--destroy_db`).
pub const CREATED_BY_BENCH: &str = "LAMINA-BENCH-CREATED";

/// Prepares `dir` for a peer's run: an absent or empty directory is created
/// and marked as the bench's; a non-empty one is reused with
/// `use_existing`, deleted with `destroy` only if the bench created it, and
/// refused otherwise.
pub fn prepare_dir(dir: &Path, use_existing: bool, destroy: bool) -> Result<()> {
    if use_existing && destroy {
        bail!("--use_existing_db and --destroy_db contradict each other");
    }
    let empty = match std::fs::read_dir(dir) {
        Ok(mut entries) => entries.next().is_none(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => true,
        Err(e) => return Err(e).with_context(|| format!("reading {}", dir.display())),
    };
    if !empty {
        if use_existing {
            return Ok(());
        }
        let ours = dir.join(CREATED_BY_BENCH).is_file();
        if !ours {
            bail!(
                "{} is not empty and was not created by lamina bench; pass --use_existing_db, or pick another --db",
                dir.display()
            );
        }
        if !destroy {
            bail!(
                "{} holds a database lamina bench created; pass --destroy_db to delete it, or --use_existing_db to reuse it",
                dir.display()
            );
        }
        std::fs::remove_dir_all(dir).with_context(|| format!("deleting {}", dir.display()))?;
    }
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    std::fs::write(dir.join(CREATED_BY_BENCH), b"")
        .with_context(|| format!("marking {}", dir.display()))
}

/// The settings a peer is configured from: the bench flags, and where the
/// flags leave a setting to the engine, lamina's `Options::default()`, so
/// that a peer gets what lamina gets in the same run.
#[derive(Debug, Clone)]
pub struct PeerSettings {
    /// `--write_buffer_size`: bytes of one memtable.
    pub write_buffer_size: usize,
    /// Memtables full and waiting for their flush before writes stall
    /// (lamina's `max_immutable_memtables`).
    pub max_immutable_memtables: usize,
    /// `--bloom_bits`: SST Bloom filter bits per key (0: none).
    pub bloom_bits: f64,
    /// `--memtable_bloom_bits`: bits per key of the memtable's key filter.
    pub memtable_bloom_bits: f64,
    /// Bytes lamina allocates for one memtable's key filter at
    /// `memtable_bloom_bits` (it sizes the filter for the most entries a
    /// full buffer holds).
    pub memtable_filter_bytes: usize,
    /// `--cache_size`: block cache bytes.
    pub cache_size: usize,
    /// `--cache_index_and_filter_blocks`: index and filter blocks in the
    /// block cache (RocksDB only; the other peers refuse it).
    pub cache_index_and_filter_blocks: bool,
    /// `--pin_l0_filter_and_index_blocks_in_cache` (RocksDB only).
    pub pin_l0_filter_and_index_blocks_in_cache: bool,
    /// `--block_size`: data block bytes.
    pub block_size: usize,
    /// `--sync`: fdatasync the WAL on every (group) commit.
    pub sync: bool,
    /// `--disable_wal` (lamina ignores it; peers honour it).
    pub disable_wal: bool,
    /// `--compaction_threads` or lamina's default.
    pub compaction_threads: usize,
    /// Level-0 runs (files) that trigger a merge into level 1 (`l0=`).
    pub l0_trigger: usize,
    /// Size ratio between adjacent levels (`T=`).
    pub size_ratio: u64,
    /// Output file size of compactions.
    pub target_file_size: u64,
    /// Level-0 runs at which writes stop.
    pub level0_stop_runs: usize,
    /// `--compression_type`: how every level's blocks are compressed (each
    /// peer maps it, or refuses what it lacks).
    pub compression: Compression,
    /// `--mmap_read`: read tables through memory maps.
    pub mmap_read: bool,
    /// `--verify_checksums`: reads check block checksums
    /// (`ReadOptions::verify_checksums`).
    pub verify_checksums: bool,
}

/// How a peer is configured: one row per setting, printed at the start of
/// a run so that a result can be read with what it measured.
#[derive(Debug, Default)]
pub struct OptionMap {
    rows: Vec<(String, String, String)>,
}

impl OptionMap {
    /// Adds a row: the lamina setting (a flag and its value, or a fixed
    /// engine default), the peer's option and value, and a note (empty if
    /// the two are equivalent).
    pub fn row(&mut self, lamina: impl Into<String>, peer: impl Into<String>, note: &str) {
        self.rows
            .push((lamina.into(), peer.into(), note.to_string()));
    }

    /// The mapping as text, headed by the peer's name.
    pub fn render(&self, peer: &str) -> String {
        let w0 = self.rows.iter().map(|r| r.0.len()).max().unwrap_or(0);
        let w1 = self.rows.iter().map(|r| r.1.len()).max().unwrap_or(0);
        let mut out = format!("Option mapping (lamina -> {peer}):\n");
        for (l, p, note) in &self.rows {
            let line = if note.is_empty() {
                format!("  {l:<w0$}  ->  {p}")
            } else {
                format!("  {l:<w0$}  ->  {p:<w1$}  ({note})")
            };
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

/// Checks a peer's [`Store`] against a `BTreeMap`: puts, overwrites,
/// deletes, gets, and scans forward and backward, bounded and not, from
/// keys present and absent. For the peers' unit tests.
#[cfg(test)]
pub fn check_store_against_a_model(store: &dyn lamina_experiment::kvops::Store) {
    use std::collections::BTreeMap;
    let key = |i: u32| format!("k{i:05}").into_bytes();
    let mut model = BTreeMap::new();
    for i in (0..600).step_by(2) {
        let v = vec![i as u8; (i % 7) as usize + 1];
        store.put(&key(i), &v).unwrap();
        model.insert(key(i), v);
    }
    for i in (0..600).step_by(10) {
        store.put(&key(i), b"new").unwrap();
        model.insert(key(i), b"new".to_vec());
    }
    for i in (0..600).step_by(6) {
        store.delete(&key(i)).unwrap();
        model.remove(&key(i));
    }
    for i in 0..601 {
        let want = model.get(&key(i)).map(Vec::len);
        assert_eq!(store.get(&key(i)).unwrap(), want, "get {i}");
    }
    type Visitor<'a> = &'a mut dyn FnMut(&[u8], &[u8]);
    let collect = |f: &dyn Fn(Visitor<'_>) -> u64| {
        let mut seen = Vec::new();
        let n = f(&mut |k, v| seen.push((k.to_vec(), v.to_vec())));
        assert_eq!(n as usize, seen.len());
        seen
    };
    for (start, end, limit) in [
        (None, None, u64::MAX),
        (Some(101), None, 10),
        (Some(100), Some(140), u64::MAX),
        (Some(100), Some(140), 3),
        (Some(700), None, 5),
        (None, Some(1), 5),
    ] {
        let (s, e) = (start.map(key), end.map(key));
        let got = collect(&|v| store.scan(s.as_deref(), e.as_deref(), limit, v).unwrap());
        let want: Vec<(Vec<u8>, Vec<u8>)> = model
            .iter()
            .filter(|(k, _)| s.as_ref().is_none_or(|s| *k >= s))
            .filter(|(k, _)| e.as_ref().is_none_or(|e| *k < e))
            .take(usize::try_from(limit).unwrap_or(usize::MAX))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        assert_eq!(got, want, "scan {start:?}..{end:?} limit {limit}");
    }
    for (end, limit) in [
        (None, u64::MAX),
        (Some(101), 4),
        (Some(100), 4),
        (Some(700), 3),
        (Some(0), 3),
    ] {
        let e = end.map(key);
        let got = collect(&|v| store.scan_rev(e.as_deref(), limit, v).unwrap());
        let want: Vec<(Vec<u8>, Vec<u8>)> = model
            .iter()
            .rev()
            .filter(|(k, _)| e.as_ref().is_none_or(|e| *k <= e))
            .take(usize::try_from(limit).unwrap_or(usize::MAX))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        assert_eq!(got, want, "scan_rev {end:?} limit {limit}");
    }
    assert_eq!(store.scan(None, None, 0, &mut |_, _| {}).unwrap(), 0);
    assert_eq!(store.scan_rev(None, 0, &mut |_, _| {}).unwrap(), 0);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lamina_meets_the_model_the_peers_are_checked_against() {
        let dir = tempfile::tempdir().unwrap();
        let db = lamina::Db::open(dir.path(), lamina::Options::default()).unwrap();
        check_store_against_a_model(&db);
    }

    #[test]
    fn a_directory_is_deleted_only_if_the_bench_created_it() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("peer");
        // Absent: created and marked.
        prepare_dir(&dir, false, false).unwrap();
        assert!(dir.join(CREATED_BY_BENCH).is_file());
        std::fs::write(dir.join("data"), b"x").unwrap();
        // Non-empty, ours: refused without a flag, reused, or destroyed.
        assert!(prepare_dir(&dir, false, false).is_err());
        prepare_dir(&dir, true, false).unwrap();
        assert!(dir.join("data").is_file());
        prepare_dir(&dir, false, true).unwrap();
        assert!(!dir.join("data").exists());
        assert!(dir.join(CREATED_BY_BENCH).is_file());
        // Not ours: never deleted, even with --destroy_db.
        let foreign = tmp.path().join("foreign");
        std::fs::create_dir(&foreign).unwrap();
        std::fs::write(foreign.join("precious"), b"x").unwrap();
        assert!(prepare_dir(&foreign, false, true).is_err());
        assert!(foreign.join("precious").is_file());
        assert!(prepare_dir(&foreign, true, true).is_err());
        // An empty foreign directory is taken (nothing to lose).
        let empty = tmp.path().join("empty");
        std::fs::create_dir(&empty).unwrap();
        prepare_dir(&empty, false, false).unwrap();
        assert!(empty.join(CREATED_BY_BENCH).is_file());
    }

    #[test]
    fn the_mapping_renders_one_line_per_setting() {
        let mut m = OptionMap::default();
        m.row("--cache_size=8", "block_cache=8", "");
        m.row("--sync=false", "sync=false", "same");
        let text = m.render("peer");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "Option mapping (lamina -> peer):");
        assert_eq!(lines[1], "  --cache_size=8  ->  block_cache=8");
        assert_eq!(lines[2], "  --sync=false    ->  sync=false     (same)");
    }
}
