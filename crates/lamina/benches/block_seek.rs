//! Seek inside one 4 KiB data block (16-byte keys, 100-byte values, a
//! restart point every 16 entries): the step of a point read after the
//! fence search, as `Table::get` takes it (a fresh cursor per seek).

// Setup that fails is a bug in the bench: stop there, saying what broke.
#![expect(
    clippy::expect_used,
    missing_docs,
    reason = "a benchmark may panic on a failed setup; `criterion_main!` writes an undocumented `main`"
)]

mod common;

use std::hint::black_box;

use common::{db_bench_key, rng, value_for, Cycle};
use criterion::{criterion_group, criterion_main, Criterion};
use lamina::microbench::{seek_key, DataBlock};
use rand::seq::SliceRandom;

const BLOCK_BYTES: usize = 4096;
const RESTART_INTERVAL: usize = 16;
const TARGETS: usize = 1024;

/// (user key, value) pairs in key order.
type Entries = Vec<(Vec<u8>, Vec<u8>)>;

/// The entries of a block as the table writer cuts it: keys `2i` (so the
/// odd keys between them are absent), added until the block reaches 4 KiB.
fn block_entries() -> (DataBlock, Entries) {
    let mut entries: Entries = Vec::new();
    loop {
        let key = db_bench_key(1_000_000 + 2 * entries.len() as u64);
        let value = value_for(&key);
        entries.push((key, value));
        let pairs: Vec<(&[u8], &[u8])> = entries
            .iter()
            .map(|(k, v)| (k.as_slice(), v.as_slice()))
            .collect();
        let block = DataBlock::build(&pairs, RESTART_INTERVAL).expect("sorted keys");
        if block.size() >= BLOCK_BYTES {
            return (block, entries);
        }
    }
}

fn bench(c: &mut Criterion) {
    let (block, entries) = block_entries();
    let mut rng = rng();
    let pick = |rng: &mut rand::rngs::StdRng| entries.choose(rng).expect("entries").0.clone();
    let present: Vec<Vec<u8>> = (0..TARGETS).map(|_| pick(&mut rng)).collect();
    // An absent key falls between two present ones (the last entry's
    // successor would run off the block, which the fence search prevents).
    let absent: Vec<Vec<u8>> = (0..TARGETS)
        .map(|_| {
            let i = rand::Rng::gen_range(&mut rng, 0..entries.len() - 1);
            let mut key = entries[i].0.clone();
            // The odd key after this even one: its last big-endian byte
            // (key[7]) is even, so adding 1 cannot carry.
            key[7] += 1;
            key
        })
        .collect();

    // The oracle: the first entry whose user key is >= the target.
    for target in present.iter().chain(&absent) {
        let want = entries
            .iter()
            .find(|(k, _)| k >= target)
            .expect("inside the block");
        let got = block
            .seek(&seek_key(target), |k, v| (k.to_vec(), v.to_vec()))
            .expect("seek")
            .expect("an entry at or after the target");
        assert_eq!(got, *want, "block seek found the wrong entry");
    }
    eprintln!(
        "block_seek: {} entries, {} bytes, restart interval {RESTART_INTERVAL}",
        entries.len(),
        block.size()
    );

    let mut group = c.benchmark_group("block_seek");
    for (name, keys) in [("present", &present), ("absent", &absent)] {
        let targets: Vec<Vec<u8>> = keys.iter().map(|k| seek_key(k)).collect();
        group.bench_function(name, |b| {
            let mut cycle = Cycle::new(&targets);
            b.iter(|| block.seek(black_box(cycle.pick()), |k, v| k.len() + v.len()))
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
