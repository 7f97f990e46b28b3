//! `DbStats::space_amplification` for every layout: disk bytes over the
//! oldest sorted run's bytes, the run a scan of the manifest's tree
//! (`lamina::inspect`, not the stats code) names.

#![expect(clippy::unwrap_used, reason = "a test may panic on a failed setup")]

mod common;

use std::path::Path;
use std::sync::Arc;

use common::{key, tiny_options};
use lamina::vfs::mem::MemFs;
use lamina::vfs::Vfs;
use lamina::Db;

/// Disk bytes and the oldest run's bytes, from the manifest.
fn from_manifest(fs: &MemFs, dir: &Path) -> (u64, u64) {
    let vfs: Arc<dyn Vfs> = Arc::new(fs.clone());
    let tree = lamina::inspect::manifest(&vfs, dir).unwrap().tree;
    let size = |r: &lamina::inspect::TreeRun| r.files.iter().map(|f| f.size).sum::<u64>();
    let disk = tree.levels.iter().flat_map(|l| &l.runs).map(size).sum();
    let deepest = tree
        .levels
        .iter()
        .rev()
        .find(|l| !l.runs.is_empty())
        .unwrap();
    let oldest = deepest.runs.iter().map(|r| r.order).min().unwrap();
    let live = deepest
        .runs
        .iter()
        .filter(|r| r.order == oldest)
        .map(size)
        .sum();
    (disk, live)
}

#[test]
fn every_layout_reports_disk_over_the_oldest_run() {
    for spec in ["tiered:b=4", "binomial:k=4", "leveling:T=3,l0=2"] {
        let fs = MemFs::new();
        let dir = Path::new("/db");
        let mut opts = tiny_options(&fs);
        opts.compaction = spec.parse().unwrap();
        // Only the flushes below, each settled before the next: the
        // tree's shape does not depend on the machine's load.
        opts.write_buffer_size = 1 << 20;
        let db = Db::open(dir, opts.clone()).unwrap();
        // Every key written, then overwritten twice: newer runs repeat
        // keys the oldest holds.
        for round in 0..3u32 {
            for i in 0..1500u64 {
                db.put(&key(i), &round.to_le_bytes()).unwrap();
            }
            db.flush().unwrap();
            db.wait_for_compactions().unwrap();
        }
        let s = db.stats();
        let (disk, live) = from_manifest(&fs, dir);
        assert_eq!(s.disk_bytes, disk, "{spec}");
        let want = disk as f64 / live as f64;
        assert!(
            (s.space_amplification - want).abs() < 1e-9,
            "{spec}: {} vs {want}",
            s.space_amplification
        );
        // Before this estimate a stack layout reported exactly 1.
        if spec.starts_with("tiered") {
            // Three flushes stay three runs (tiered:b=4 merges four).
            assert_eq!(s.sorted_runs, 3, "{spec}");
        }
        if s.sorted_runs > 1 {
            assert!(
                s.space_amplification > 1.1,
                "{spec}: {}",
                s.space_amplification
            );
        }
        // A full compaction leaves one run: nothing but live data.
        db.compact_range(None, None).unwrap();
        let s = db.stats();
        assert_eq!(s.sorted_runs, 1, "{spec}");
        assert_eq!(s.space_amplification, 1.0, "{spec}");
        db.close().unwrap();
    }
}
