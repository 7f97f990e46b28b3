//! `DIR/OPTIONS-NNNNNN`: stored at every open that writes, reloaded for the
//! fields a caller leaves to it, guarding the key order, surviving torn
//! writes and power loss.
#![expect(clippy::unwrap_used, reason = "a test may panic on a failed setup")]

mod common;

use std::path::Path;
use std::sync::Arc;

use common::{dump, key, tiny_options};
use lamina::filename::{self, FileKind};
use lamina::spatial::Comparator;
use lamina::vfs::fault::FaultFs;
use lamina::vfs::mem::MemFs;
use lamina::vfs::Vfs;
use lamina::{Compaction, Db, Error, Options};
use rand::{Rng, SeedableRng};

const DIR: &str = "/db";

fn options_files(fs: &MemFs) -> Vec<u64> {
    fs.file_names(Path::new(DIR))
        .iter()
        .filter_map(|n| match filename::parse(n) {
            Some((FileKind::Options, n)) => Some(n),
            _ => None,
        })
        .collect()
}

fn log(fs: &MemFs) -> String {
    String::from_utf8(fs.read_all(&Path::new(DIR).join("LOG")).unwrap()).unwrap()
}

/// Builder options on `fs` that leave everything else to the stored file.
fn from_stored(fs: &MemFs) -> Options {
    Options::builder()
        .vfs(Arc::new(fs.clone()))
        .from_stored_options()
        .build()
        .unwrap()
}

#[test]
fn fields_the_caller_leaves_out_come_from_the_newest_file() {
    let fs = MemFs::new();
    let mut opts = tiny_options(&fs);
    opts.compaction = Compaction::tiered(3);
    opts.write_buffer_size = 16 * 1024;
    Db::open(DIR, opts).unwrap().close().unwrap();

    // Nothing set: everything stored comes back.
    let db = Db::open(DIR, from_stored(&fs)).unwrap();
    assert_eq!(db.compaction_spec(), "tiered:T=3");
    assert_eq!(
        db.property("lamina.compaction-spec").as_deref(),
        Some("tiered:T=3")
    );
    db.close().unwrap();

    // What the caller sets wins; the rest is still the stored value.
    let opts = Options::builder()
        .vfs(Arc::new(fs.clone()))
        .compaction(Compaction::leveling(4))
        .from_stored_options()
        .build()
        .unwrap();
    let db = Db::open(DIR, opts).unwrap();
    assert_eq!(db.compaction_spec(), "leveling:T=4,l0=4");
    db.close().unwrap();
    let stored = lamina::options_file::load(&fs, Path::new(DIR))
        .unwrap()
        .unwrap();
    let entries: std::collections::BTreeMap<String, String> =
        stored.entries().into_iter().collect();
    assert_eq!(entries["compaction"], "leveling:T=4");
    assert_eq!(entries["write_buffer_size"], (16 * 1024).to_string());

    // Without `from_stored_options`, the options are used as given.
    let db = Db::open(DIR, tiny_options(&fs)).unwrap();
    assert_eq!(db.compaction_spec(), "leveling:T=3,l0=2");
    db.close().unwrap();
    assert!(log(&fs).contains("options the caller did not set taken from OPTIONS-"));
}

#[test]
fn a_different_spatial_comparator_is_refused_by_name() {
    let fs = MemFs::new();
    let mut opts = tiny_options(&fs);
    opts.spatial = Some(Comparator::Hilbert);
    let db = Db::open(DIR, opts.clone()).unwrap();
    db.put(
        &Comparator::Hilbert
            .encode(lamina::spatial::Point { x: 1.0, y: 2.0 }, 7)
            .unwrap(),
        b"v",
    )
    .unwrap();
    db.close().unwrap();
    let files_before = fs.file_names(Path::new(DIR));
    for requested in [Some(Comparator::ZOrder), None] {
        let mut other = opts.clone();
        other.spatial = requested;
        match Db::open(DIR, other) {
            Err(Error::IncompatibleOption {
                option,
                stored,
                requested: asked,
            }) => {
                assert_eq!(option, "spatial");
                assert_eq!(stored, "hilbert");
                assert_eq!(asked, requested.map_or("none", Comparator::name));
            }
            other => panic!("{other:?}"),
        }
        // Refused before anything was written.
        assert_eq!(fs.file_names(Path::new(DIR)), files_before);
    }
    // The way out the error names: the stored value, or the stored file.
    Db::open(DIR, opts).unwrap().close().unwrap();
    let db = Db::open(DIR, from_stored(&fs)).unwrap();
    assert_eq!(db.stats().sorted_runs, 1);
    db.close().unwrap();
}

#[test]
fn only_the_newest_two_files_stay_and_foreign_names_are_left_alone() {
    let fs = MemFs::new();
    let foreign = ["OPTIONS-12", "OPTIONS-000001.bak", "OPTIONS"];
    fs.create_dir_all(Path::new(DIR)).unwrap();
    let mut all = Vec::new();
    for i in 0..5 {
        let db = Db::open(DIR, tiny_options(&fs)).unwrap();
        db.put(&key(i), b"v").unwrap();
        db.close().unwrap();
        if i == 0 {
            for name in foreign {
                let mut f = fs.create(&Path::new(DIR).join(name)).unwrap();
                f.append(b"not lamina's").unwrap();
                f.sync().unwrap();
            }
        }
        let mut now = options_files(&fs);
        now.sort_unstable();
        for &n in &now {
            if !all.contains(&n) {
                all.push(n);
            }
        }
        assert!(now.len() <= 2, "{now:?}");
        // The two kept are the two newest written.
        let mut newest: Vec<u64> = all.iter().rev().take(2).copied().collect();
        newest.sort_unstable();
        assert_eq!(now, newest);
    }
    let names = fs.file_names(Path::new(DIR));
    for name in foreign {
        assert!(names.iter().any(|n| n == name), "{name} was deleted");
    }
    // A read-only open writes none.
    let before = options_files(&fs);
    let mut ro = tiny_options(&fs);
    ro.read_only = true;
    Db::open(DIR, ro).unwrap().close().unwrap();
    assert_eq!(options_files(&fs), before);
}

/// Replaces the newest OPTIONS file by a prefix of itself, as a torn write
/// on a file system without atomic renames would leave it.
fn tear_newest(fs: &MemFs) {
    let n = options_files(fs).into_iter().max().unwrap();
    let path = Path::new(DIR).join(filename::options_name(n));
    let len = fs.read_all(&path).unwrap().len() as u64;
    fs.truncate(&path, len / 2).unwrap();
}

#[test]
fn a_torn_file_falls_back_to_the_previous_one_then_to_the_callers_options() {
    let fs = MemFs::new();
    let with = |spec: Compaction| {
        let mut o = tiny_options(&fs);
        o.compaction = spec;
        o
    };
    Db::open(DIR, with(Compaction::tiered(3)))
        .unwrap()
        .close()
        .unwrap();
    Db::open(DIR, with(Compaction::leveling(5)))
        .unwrap()
        .close()
        .unwrap();
    tear_newest(&fs);
    let db = Db::open(DIR, from_stored(&fs)).unwrap();
    assert_eq!(db.compaction_spec(), "tiered:T=3", "the previous file's");
    db.close().unwrap();
    assert!(log(&fs)
        .lines()
        .any(|l| l.contains("unreadable OPTIONS-") && l.contains("using the older OPTIONS-")));

    // Both kept files torn: the caller's options, and a log line.
    tear_newest(&fs);
    let n = options_files(&fs).into_iter().min().unwrap();
    let path = Path::new(DIR).join(filename::options_name(n));
    fs.truncate(&path, 3).unwrap();
    let db = Db::open(DIR, from_stored(&fs)).unwrap();
    // The default strategy, as the policy spells it out.
    assert_eq!(db.compaction_spec(), "leveling:T=10,l0=4");
    db.close().unwrap();
    assert!(log(&fs).contains("using the caller's options"));
}

#[test]
fn power_loss_at_any_point_of_an_open_leaves_a_database_that_opens() {
    let base = MemFs::new();
    let mut opts = tiny_options(&base);
    opts.compaction = Compaction::tiered(3);
    opts.sync = lamina::SyncMode::Always;
    let db = Db::open(DIR, opts.clone()).unwrap();
    for i in 0..300 {
        db.put(&key(i), format!("value {i}").as_bytes()).unwrap();
    }
    let model = dump(&db);
    db.close().unwrap();
    // How many file operations one open takes.
    let probe = FaultFs::new(Arc::new(
        base.crash_clone(&mut rand::rngs::StdRng::seed_from_u64(0), 1.0),
    ));
    let mut o = opts.clone();
    o.vfs = Arc::new(probe.clone());
    Db::open(DIR, o).unwrap().close().unwrap();
    let ops = probe.ops();
    let mut rng = rand::rngs::StdRng::seed_from_u64(20);
    for (k, _) in (0..ops).flat_map(|k| [(k, 0), (k, 1), (k, 2)]) {
        let disk = base.crash_clone(&mut rng, 1.0);
        let fault = FaultFs::new(Arc::new(disk.clone()));
        fault.fail_from(k);
        let mut o = opts.clone();
        o.vfs = Arc::new(fault);
        // The open fails at operation k, or gets through and the power
        // goes while the database is open.
        let opened = Db::open(DIR, o);
        let keep = rng.gen_range(0.0..1.0);
        let after = disk.crash_clone(&mut rng, keep);
        drop(opened);
        let reopened = Db::open(DIR, from_stored(&after))
            .unwrap_or_else(|e| panic!("power loss at operation {k}: {e}"));
        assert_eq!(dump(&reopened), model, "operation {k}");
        assert_eq!(reopened.compaction_spec(), "tiered:T=3", "operation {k}");
        reopened.close().unwrap();
        assert!(options_files(&after).len() <= 2);
    }
}

/// The compression of each live SST of `/db` (`lamina inspect`'s report).
fn file_compressions(fs: &MemFs) -> Vec<lamina::Compression> {
    let vfs: Arc<dyn Vfs> = Arc::new(fs.clone());
    fs.file_names(Path::new(DIR))
        .iter()
        .filter(|n| n.ends_with(".sst"))
        .map(|n| {
            lamina::inspect::sst(&vfs, &Path::new(DIR).join(n))
                .unwrap()
                .compression
        })
        .collect()
}

/// Compression is stored, comes back for a caller that leaves it out, and
/// may change on any open: old files keep their own blocks' type bytes, so
/// a database mixing LZ4, zstd and raw files reads every one of them.
#[test]
fn compression_is_stored_and_may_change_on_reopen() {
    use lamina::Compression::{Lz4, None as Raw, Zstd};
    let fs = MemFs::new();
    let mut model = std::collections::BTreeMap::new();
    let write = |db: &Db, round: u64, model: &mut std::collections::BTreeMap<Vec<u8>, Vec<u8>>| {
        for i in 0..300u64 {
            let (k, v) = (
                key(i * 7 % 500 + round),
                format!("round {round} ").repeat(8),
            );
            db.put(&k, v.as_bytes()).unwrap();
            model.insert(k, v.into_bytes());
        }
        db.flush().unwrap();
    };
    let mut opts = tiny_options(&fs);
    opts.compression = Lz4;
    let db = Db::open(DIR, opts).unwrap();
    write(&db, 0, &mut model);
    db.close().unwrap();
    assert!(file_compressions(&fs).contains(&Lz4));

    // Left to the OPTIONS file: LZ4 again.
    let db = Db::open(DIR, from_stored(&fs)).unwrap();
    write(&db, 1, &mut model);
    db.close().unwrap();
    assert!(file_compressions(&fs).iter().all(|c| *c == Lz4));

    // Changed: the new files are zstd, then raw, the old ones still read.
    for (round, compression) in [(2, Zstd(7)), (3, Raw)] {
        let mut opts = tiny_options(&fs);
        opts.compression = compression;
        opts.level0_stop_runs = 0;
        opts.compaction = "nomerge".parse().unwrap();
        let db = Db::open(DIR, opts).unwrap();
        write(&db, round, &mut model);
        assert_eq!(dump(&db), model);
        db.close().unwrap();
        assert!(file_compressions(&fs).contains(&compression));
    }
    let kinds = file_compressions(&fs);
    for c in [Lz4, Zstd(7), Raw] {
        assert!(kinds.contains(&c), "no {c} file in {kinds:?}");
    }
    let db = Db::open(DIR, from_stored(&fs)).unwrap();
    assert_eq!(dump(&db), model);
    db.close().unwrap();
    // The newest OPTIONS file records the last setting.
    let stored = lamina::options_file::load(&fs, Path::new(DIR))
        .unwrap()
        .unwrap();
    let entries = stored.entries();
    let get = |name: &str| {
        entries
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    };
    assert_eq!(get("compression").as_deref(), Some("none"));
    assert_eq!(get("compression_per_level").as_deref(), Some("[]"));
}
