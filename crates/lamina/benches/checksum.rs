//! CRC32C of a 4 KiB block: the `crc32c` crate's function alone, and the
//! check every block read from a table gets (`check_block`: the masked CRC
//! of the stored bytes and type byte against the trailer). The crate picks
//! its SSE4.2 (`crc32` instruction) path at run time when the CPU has it;
//! the bench prints what the CPU reports.

// Setup that fails is a bug in the bench: stop there, saying what broke.
#![expect(
    clippy::expect_used,
    missing_docs,
    reason = "a benchmark may panic on a failed setup; `criterion_main!` writes an undocumented `main`"
)]

mod common;

use std::hint::black_box;

use common::rng;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use lamina::microbench::{check_sealed_block, seal_block};
use rand::Rng;

const BLOCK_BYTES: usize = 4096;

fn bench(c: &mut Criterion) {
    // RFC 3720's check value: CRC32C("123456789") = 0xE3069283.
    assert_eq!(crc32c::crc32c(b"123456789"), 0xE306_9283);
    let mut contents = vec![0u8; BLOCK_BYTES];
    rng().fill(contents.as_mut_slice());
    let sealed = seal_block(&contents);
    assert_eq!(
        check_sealed_block(&sealed).expect("intact block"),
        BLOCK_BYTES
    );
    // Every single-bit flip of the block must fail the check.
    let mut flipped = sealed.clone();
    for bit in 0..flipped.len() * 8 {
        flipped[bit / 8] ^= 1 << (bit % 8);
        assert!(
            check_sealed_block(&flipped).is_err(),
            "flip of bit {bit} passed"
        );
        flipped[bit / 8] ^= 1 << (bit % 8);
    }
    #[cfg(target_arch = "x86_64")]
    eprintln!(
        "checksum: CPU reports SSE4.2: {} (the crc32c crate's run-time test)",
        std::arch::is_x86_feature_detected!("sse4.2")
    );

    let mut group = c.benchmark_group("checksum");
    group.throughput(Throughput::Bytes(BLOCK_BYTES as u64));
    group.bench_function("crc32c_4k", |b| {
        b.iter(|| crc32c::crc32c(black_box(&contents)))
    });
    group.bench_function("check_block_4k", |b| {
        b.iter(|| check_sealed_block(black_box(&sealed)))
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
