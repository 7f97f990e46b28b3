//! `DirectReads` (`O_DIRECT`): every read of any range returns the file's
//! bytes, a database on it answers like a model, and the reads reach the
//! device rather than the page cache. One test per binary: the device
//! check reads the process's own I/O counters.
#![expect(clippy::unwrap_used, reason = "a test may panic on a failed setup")]

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use lamina::vfs::{DirectReads, OsFs, Vfs};
use lamina::{Db, Options};

/// Bytes this process has had fetched from storage (`/proc/self/io`), if
/// the kernel reports it.
fn storage_read_bytes() -> Option<u64> {
    let io = std::fs::read_to_string("/proc/self/io").ok()?;
    io.lines()
        .find_map(|l| l.strip_prefix("read_bytes: "))
        .and_then(|v| v.trim().parse().ok())
}

fn ranges_read_the_files_bytes(dir: &Path) {
    let path = dir.join("f");
    let data: Vec<u8> = (0..20_000u32).map(|i| (i * 7 % 251) as u8).collect();
    let mut w = OsFs.create(&path).unwrap();
    w.append(&data).unwrap();
    w.sync().unwrap();
    let f = DirectReads.open_read(&path).unwrap();
    assert_eq!(f.len(), data.len() as u64);
    for (offset, len) in [
        (0, 1),
        (0, 4096),
        (1, 4096),
        (4095, 2),
        (8191, 5000),
        (19_999, 1),
        (12_000, 8000),
        (0, 20_000),
    ] {
        let mut buf = vec![0u8; len];
        f.read_exact_at(&mut buf, offset as u64).unwrap();
        assert_eq!(buf, data[offset..offset + len], "[{offset}, +{len})");
    }
    // Past the end: an error, not a short read or a panic.
    let mut buf = vec![0u8; 10];
    assert!(f.read_exact_at(&mut buf, 19_995).is_err());
    assert!(f.read_exact_at(&mut buf, u64::MAX - 3).is_err());
}

#[test]
fn direct_reads_return_the_bytes_and_bypass_the_page_cache() {
    // The target directory is on the repository's filesystem; a tmpfs
    // /tmp would refuse O_DIRECT.
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    ranges_read_the_files_bytes(dir.path());

    let mut opts = Options::default();
    opts.vfs = Arc::new(DirectReads);
    opts.write_buffer_size = 16 * 1024;
    opts.block_cache_bytes = 0;
    opts.compaction = "leveling:T=3,l0=2".parse().unwrap();
    let db = Db::open(dir.path().join("db"), opts).unwrap();
    let mut model = BTreeMap::new();
    for i in 0..3_000u64 {
        let (k, v) = (format!("key{:06}", i * 7 % 3_000), format!("value-{i}"));
        db.put(k.as_bytes(), v.as_bytes()).unwrap();
        model.insert(k, v);
    }
    db.flush().unwrap();
    db.wait_for_compactions().unwrap();
    for (k, v) in &model {
        assert_eq!(db.get(k.as_bytes()).unwrap(), Some(v.clone().into_bytes()));
    }
    // With no block cache, each get reads its block from the file: through
    // O_DIRECT that is a device read every time, though the file was just
    // read and sits in the page cache.
    if let Some(before) = storage_read_bytes() {
        let gets = 200u64;
        for _ in 0..gets {
            assert!(db.get(b"key001234").unwrap().is_some());
        }
        let read = storage_read_bytes().unwrap() - before;
        assert!(
            read >= gets * 4096,
            "{read} bytes from storage for {gets} gets"
        );
    } else {
        eprintln!("/proc/self/io is not available: the page-cache bypass was not checked");
    }
    db.close().unwrap();
}
