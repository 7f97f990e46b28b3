//! Seed 001 Fig. 4's ingestion experiment for one strategy: `NUM` uniform
//! random inserts of 4-byte keys and 124-byte values into an empty
//! database (T = 10, 8 MiB buffer and files, 10 bits per key, 8 MiB block
//! cache, one compaction thread), then a flush and a wait until the
//! strategy has nothing left to do, so that every compaction the inserts
//! caused is counted. Prints `Db::stats()` as JSON.
//!
//! `cargo run --release -p lamina-lsm --example design_space -- SPEC NUM DIR`

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Instant;

use lamina::{Db, Options};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, spec, num, dir] = args.as_slice() else {
        eprintln!("usage: design_space SPEC NUM DIR");
        std::process::exit(2);
    };
    let num: u64 = num.parse().expect("NUM must be a number");
    let spec: lamina::compaction::CompactionSpec = spec.parse().expect("SPEC");
    // The run creates DIR and removes it at the end: it never touches a
    // directory it did not make.
    if std::path::Path::new(dir).exists() {
        eprintln!("{dir} exists; give a path this run may create and remove");
        std::process::exit(2);
    }
    let opts = Options::builder()
        .compaction(spec)
        .write_buffer_size(8 << 20)
        .target_file_size(8 << 20)
        .size_ratio(10)
        .bloom_bits_per_key(10.0)
        .block_cache_bytes(8 << 20)
        .compaction_threads(1)
        .build()
        .expect("options");
    let db = Db::open(dir, opts).expect("open");
    let mut rng = StdRng::seed_from_u64(2021);
    let mut value = [0u8; 124];
    let start = Instant::now();
    for _ in 0..num {
        let key: u32 = rng.gen();
        rng.fill(&mut value[..]);
        db.put(&key.to_be_bytes(), &value).expect("put");
    }
    let ingest = start.elapsed();
    db.flush().expect("flush");
    db.wait_for_compactions().expect("settle");
    let total = start.elapsed();
    let mut stats = serde_json::to_value(db.stats()).expect("json");
    stats["ingest_seconds"] = ingest.as_secs_f64().into();
    stats["settled_seconds"] = total.as_secs_f64().into();
    println!("{}", serde_json::to_string_pretty(&stats).expect("json"));
    db.close().expect("close");
    std::fs::remove_dir_all(dir).expect("remove the directory this run created");
}
