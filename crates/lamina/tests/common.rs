//! Shared helpers for the engine's integration tests.
#![allow(dead_code, clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

use lamina::vfs::mem::MemFs;
use lamina::{Db, Options};

/// Options that make flushes and compactions happen after a few hundred writes.
pub fn tiny_options(fs: &MemFs) -> Options {
    Options {
        vfs: Arc::new(fs.clone()),
        write_buffer_size: 8 * 1024,
        target_file_size: 4 * 1024,
        block_size: 512,
        block_cache_bytes: 64 * 1024,
        compaction: "leveling:T=3,l0=2".into(),
        level0_stop_runs: 0,
        ..Options::default()
    }
}

/// Every live pair of the database, by a full scan.
pub fn dump(db: &Db) -> BTreeMap<Vec<u8>, Vec<u8>> {
    db.scan(Bound::Unbounded, Bound::Unbounded)
        .unwrap()
        .map(|r| r.unwrap())
        .collect()
}

pub fn key(i: u64) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}
