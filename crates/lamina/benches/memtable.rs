//! Memtable insert and get with random 16-byte keys and 100-byte values,
//! with the engine's default key filter (10 bits per key, sized for a
//! 64 MiB write buffer). Insert: 100,000 puts into an empty memtable, one
//! group commit of one put each (the `fillrandom` path below the WAL),
//! reported per put. Get: a memtable of 100,000 entries, keys present and
//! absent (the filter answers most absent ones without a search).

// Setup that fails is a bug in the bench: stop there, saying what broke.
#![expect(
    missing_docs,
    reason = "`criterion_main!` writes an undocumented `main`"
)]

mod common;

use std::collections::BTreeMap;
use std::hint::black_box;

use common::{rng, value_for, Cycle, KEY_SIZE};
use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use lamina::microbench::Memtable;
use rand::rngs::StdRng;
use rand::Rng;

const WRITE_BUFFER: usize = 64 << 20;
const FILTER_BITS: f64 = 10.0;
const ENTRIES: usize = 100_000;
const TARGETS: usize = 4096;

fn random_key(rng: &mut StdRng) -> Vec<u8> {
    let mut key = vec![0u8; KEY_SIZE];
    rng.fill(key.as_mut_slice());
    key
}

fn filled(keys: &[Vec<u8>], value: &[u8]) -> Memtable {
    let mem = Memtable::new(WRITE_BUFFER, FILTER_BITS);
    for (seq, key) in (1..).zip(keys) {
        mem.put(seq, key, value);
    }
    mem
}

fn bench(c: &mut Criterion) {
    let mut rng = rng();
    let keys: Vec<Vec<u8>> = (0..ENTRIES).map(|_| random_key(&mut rng)).collect();
    let value = value_for(b"memtable");
    let mem = filled(&keys, &value);

    // The oracle: a BTreeMap of the same puts (later puts of a key win).
    let model: BTreeMap<&[u8], &[u8]> = keys
        .iter()
        .map(|k| (k.as_slice(), value.as_slice()))
        .collect();
    assert_eq!(mem.len(), ENTRIES);
    for key in &keys {
        assert_eq!(mem.get(key).as_deref(), model.get(key.as_slice()).copied());
    }
    let present: Vec<Vec<u8>> = (0..TARGETS)
        .map(|_| keys[rng.gen_range(0..ENTRIES)].clone())
        .collect();
    let absent: Vec<Vec<u8>> = std::iter::repeat_with(|| random_key(&mut rng))
        .filter(|k| !model.contains_key(k.as_slice()))
        .take(TARGETS)
        .collect();
    assert!(
        absent.iter().all(|k| mem.get(k).is_none()),
        "an absent key was found"
    );

    let mut group = c.benchmark_group("memtable");
    group.throughput(Throughput::Elements(ENTRIES as u64));
    group.sample_size(10);
    group.bench_function("insert_100k", |b| {
        b.iter_batched(
            || Memtable::new(WRITE_BUFFER, FILTER_BITS),
            |mem| {
                for (seq, key) in (1..).zip(&keys) {
                    mem.put(seq, black_box(key), &value);
                }
                mem // dropped outside the timing
            },
            BatchSize::PerIteration,
        )
    });
    group.finish();

    let mut group = c.benchmark_group("memtable_get");
    for (name, targets) in [("present", &present), ("absent", &absent)] {
        group.bench_function(name, |b| {
            let mut cycle = Cycle::new(targets);
            b.iter(|| mem.get(black_box(cycle.pick())))
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
