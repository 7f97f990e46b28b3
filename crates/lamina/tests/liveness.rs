//! A stall always has a way out: every strategy lamina accepts keeps writes
//! moving under a tiny memtable, with bulk batches (as the DSL's loads) that
//! make runs of unequal sizes, which size-tiered policies may never merge.
//! The level-0 stop trigger holds writes only while a compaction that can
//! shrink level 0 is running or can be picked (docs/compaction.md).
#![expect(clippy::unwrap_used, reason = "a test may panic on a failed setup")]

mod common;

use std::collections::BTreeMap;
use std::sync::mpsc;
use std::time::Duration;

use common::{dump, key, tiny_options};
use lamina::compaction::spec::preset_names;
use lamina::vfs::mem::MemFs;
use lamina::{Db, Options, WriteBatch};
use rand::{Rng, SeedableRng};

/// Writes a random workload; returns the model of what it wrote. `wait`:
/// compactions have priority over writes (`writes_wait_for_compactions`).
fn workload(spec: &str, seed: u64, wait: bool) -> (BTreeMap<Vec<u8>, Vec<u8>>, Db) {
    let fs = MemFs::new();
    let db = Db::open("/db", {
        let mut o = tiny_options(&fs);
        o.compaction = spec.parse().unwrap();
        o.write_buffer_size = 4096;
        // The engine's default trigger, which the bug hit.
        o.level0_stop_runs = Options::default().level0_stop_runs;
        o.writes_wait_for_compactions = wait;
        o
    })
    .unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut model = BTreeMap::new();
    for step in 0..1_500u64 {
        if step % 100 == 99 {
            // A "load": one big batch of fresh keys, sizes varying.
            let n = rng.gen_range(50..400u64);
            let mut b = WriteBatch::new();
            for i in 0..n {
                let k = key(100_000 + step * 1_000 + i);
                b.put(&k, b"loaded");
                model.insert(k, b"loaded".to_vec());
            }
            db.write(b).unwrap();
        } else if rng.gen_bool(0.1) {
            let k = key(rng.gen_range(0..2_000));
            db.delete(&k).unwrap();
            model.remove(&k);
        } else {
            let k = key(rng.gen_range(0..2_000));
            let v = format!("v{step}").into_bytes();
            db.put(&k, &v).unwrap();
            model.insert(k, v);
        }
    }
    (model, db)
}

/// Every strategy the registry knows, and the stack policies.
fn every_spec() -> Vec<String> {
    let mut specs: Vec<String> = ["leveling", "leveling:T=3,l0=2"]
        .into_iter()
        .chain(preset_names())
        .map(|s| s.to_string())
        .collect();
    specs.extend(
        [
            "blsm:T=3,l0=2",
            "lsbm:T=3,l0=2",
            "tiered:b=4",
            "tiered:b=10",
            "leveled:b0=2,b=4",
            "bigtable:k=4",
            "exploring:k=4",
            "constant:k=4",
            "minlatency:k=4",
            "binomial:k=4",
            "concurrent",
            "nomerge",
        ]
        .map(String::from),
    );
    specs
}

/// Runs the workload under every strategy with a 60 s watchdog each.
fn keeps_moving(wait: bool) {
    for (i, spec) in every_spec().into_iter().enumerate() {
        let (tx, rx) = mpsc::channel();
        let name = spec.clone();
        std::thread::spawn(move || {
            let (model, db) = workload(&name, i as u64, wait);
            db.flush().unwrap();
            let ok = dump(&db) == model;
            let _ = tx.send((ok, db.stats().levels.first().map_or(0, |l| l.runs)));
        });
        match rx.recv_timeout(Duration::from_secs(60)) {
            Ok((ok, l0_runs)) => {
                assert!(ok, "{spec}: contents differ from the model");
                eprintln!("{spec}: done, {l0_runs} runs in level 0");
            }
            Err(_) => panic!("{spec}: writes stalled for 60 s"),
        }
    }
}

#[test]
fn every_strategy_keeps_writes_moving_with_a_tiny_buffer() {
    keeps_moving(false);
}

/// The priority of compactions over writes waits for every strategy's
/// merges, and each wait ends.
#[test]
fn every_strategy_keeps_writes_moving_when_compactions_have_priority() {
    keeps_moving(true);
}
