//! The fuzz targets' entry points (`lamina::fuzzing`) fed the committed seed
//! corpora (`fuzz/corpus/<target>/`), thousands of random mutations of
//! them, and random bytes: the CI-sized stand-in for a libFuzzer run
//! (`scripts/fuzz-smoke.sh`). Passing means no input panicked.
//! `LAMINA_WRITE_CORPUS=1 cargo test -p lamina-lsm --test fuzz_corpus -- --ignored`
//! regenerates the seeds.

#![expect(clippy::unwrap_used, reason = "a test may panic on a failed setup")]

mod common;

use std::path::{Path, PathBuf};

use common::{key, record_starts, sst_layout, tiny_options};
use lamina::fuzzing;
use lamina::vfs::mem::MemFs;
use lamina::vfs::Vfs;
use lamina::{Compression, Db, SyncMode};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

type Target = (&'static str, fn(&[u8]));

const TARGETS: [Target; 4] = [
    ("block", fuzzing::block),
    ("sst", fuzzing::sst),
    ("wal", fuzzing::wal),
    ("manifest", fuzzing::manifest),
];

fn corpus_dir(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(target)
}

/// An SST of a small database written with `compression` (values that
/// compress), and the stored bytes of its first data block.
fn compressed_seeds(seed: u64, compression: Compression) -> [(&'static str, Vec<u8>); 2] {
    let fs = MemFs::new();
    let mut opts = tiny_options(&fs);
    opts.block_size = 256;
    opts.compression = compression;
    let db = Db::open("/db", opts).unwrap();
    let mut rng = StdRng::seed_from_u64(seed);
    for i in 0..80u64 {
        let k = key(rng.gen_range(0..60));
        db.put(&k, format!("value {} ", i % 5).repeat(6).as_bytes())
            .unwrap();
    }
    db.flush().unwrap();
    let dir = Path::new("/db");
    let sst = fs
        .file_names(dir)
        .iter()
        .filter(|n| n.ends_with(".sst"))
        .map(|n| fs.read_all(&dir.join(n)).unwrap())
        .max_by_key(Vec::len)
        .unwrap();
    let (off, size) = sst_layout(&sst).data[0];
    let stored = sst[off as usize..(off + size) as usize].to_vec();
    // Compressed: the trailer's type byte (after the stored bytes) is not 0.
    assert_ne!(sst[(off + size) as usize], 0, "{compression}");
    [("sst", sst), ("block", stored)]
}

/// Valid inputs for each target, taken from a small real database: its
/// smallest SST, that SST's first data block, its WAL and its manifest;
/// then an SST and a data block stored with LZ4 and with zstd.
fn seeds(seed: u64) -> Vec<(&'static str, Vec<u8>)> {
    let fs = MemFs::new();
    let mut opts = tiny_options(&fs);
    opts.sync = SyncMode::Always;
    opts.block_size = 128;
    let db = Db::open("/db", opts).unwrap();
    let mut rng = StdRng::seed_from_u64(seed);
    for i in 0..80u64 {
        let k = key(rng.gen_range(0..60));
        if i % 7 == 3 {
            db.delete(&k).unwrap();
        } else {
            db.put(&k, format!("v{i}").as_bytes()).unwrap();
        }
    }
    db.flush().unwrap();
    for i in 0..6u64 {
        db.put(&key(i), b"in the wal").unwrap();
    }
    drop(db);
    let dir = Path::new("/db");
    let read = |n: &String| fs.read_all(&dir.join(n)).unwrap();
    let names = fs.file_names(dir);
    let sst = names
        .iter()
        .filter(|n| n.ends_with(".sst"))
        .map(read)
        .min_by_key(Vec::len)
        .unwrap();
    let (off, size) = sst_layout(&sst).data[0];
    let block = sst[off as usize..(off + size) as usize].to_vec();
    let wal = names
        .iter()
        .filter(|n| n.ends_with(".log"))
        .map(read)
        .max_by_key(Vec::len)
        .unwrap();
    let manifest = names
        .iter()
        .find(|n| n.starts_with("MANIFEST-"))
        .map(read)
        .unwrap();
    let mut seeds = vec![
        ("block", block),
        ("sst", sst),
        ("wal", framed(&wal)),
        ("wal", wal),
        ("manifest", framed(&manifest)),
        ("manifest", manifest),
    ];
    seeds.extend(compressed_seeds(seed, Compression::Lz4));
    seeds.extend(compressed_seeds(seed, Compression::Zstd(3)));
    seeds
}

/// A log's records re-encoded the way the fuzz entry points frame their
/// input for the checksummed variant: `u16` LE length, payload.
fn framed(log: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    for start in record_starts(log) {
        let start = start as usize;
        let len = u32::from_le_bytes(log[start + 4..start + 8].try_into().unwrap()) as usize;
        out.extend_from_slice(&u16::try_from(len).unwrap().to_le_bytes());
        out.extend_from_slice(&log[start + 12..start + 12 + len]);
    }
    out
}

#[test]
#[ignore = "writes the seed corpora when LAMINA_WRITE_CORPUS is set"]
fn write_seed_corpora() {
    if std::env::var_os("LAMINA_WRITE_CORPUS").is_none() {
        return;
    }
    for seed in 0..2 {
        for (i, (target, bytes)) in seeds(seed).into_iter().enumerate() {
            let dir = corpus_dir(target);
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join(format!("seed-{seed}-{i}")), bytes).unwrap();
        }
    }
}

/// A random edit of `input`: flipped bits, a cut, an insertion or a
/// duplicated slice, as a mutating fuzzer would make.
fn mutate(rng: &mut StdRng, input: &[u8]) -> Vec<u8> {
    let mut m = input.to_vec();
    for _ in 0..rng.gen_range(1..4) {
        let len = m.len();
        match rng.gen_range(0..5) {
            0 | 1 if len > 0 => {
                let i = rng.gen_range(0..len);
                m[i] ^= 1 << rng.gen_range(0..8);
            }
            2 if len > 0 => m.truncate(rng.gen_range(0..len)),
            3 => {
                let at = rng.gen_range(0..=len);
                let junk: Vec<u8> = (0..rng.gen_range(1..16)).map(|_| rng.gen()).collect();
                m.splice(at..at, junk);
            }
            _ if len > 0 => {
                let a = rng.gen_range(0..len);
                let b = rng.gen_range(a..=len.min(a + 64));
                let at = rng.gen_range(0..=len);
                let copy = m[a..b].to_vec();
                m.splice(at..at, copy);
            }
            _ => m.push(rng.gen()),
        }
    }
    m
}

#[test]
fn fuzz_entry_points_survive_seeds_mutations_and_random_bytes() {
    let mut rng = StdRng::seed_from_u64(265);
    for (target, run) in TARGETS {
        let mut inputs: Vec<Vec<u8>> = std::fs::read_dir(corpus_dir(target))
            .unwrap()
            .map(|e| std::fs::read(e.unwrap().path()).unwrap())
            .collect();
        assert!(!inputs.is_empty(), "no seed corpus for {target}");
        inputs.extend(
            seeds(7)
                .into_iter()
                .filter(|(t, _)| *t == target)
                .map(|(_, b)| b),
        );
        for input in &inputs {
            run(input);
            for _ in 0..1_500 {
                run(&mutate(&mut rng, input));
            }
        }
        for _ in 0..300 {
            let len = rng.gen_range(0..400);
            let bytes: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
            run(&bytes);
        }
    }
}
