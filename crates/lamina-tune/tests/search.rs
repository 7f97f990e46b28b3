//! The search against brute force: on small cases, every candidate is
//! simulated on its own and costed, and the search (which simulates each
//! strategy and buffer once and shares it across Bloom settings) must find
//! the same candidates with the same costs and the same best.

#![expect(clippy::unwrap_used, reason = "a test may panic on a failed setup")]

use lamina_tune::model::{BloomAlloc, Candidate};
use lamina_tune::search::{predict_one, search};
use lamina_tune::{CostModel, KeyDist, Space, Workload};

fn small_space() -> Space {
    Space {
        specs: vec![
            "leveling:T=4,l0=2".into(),
            "leveling:T=10,l0=4".into(),
            "tier:T=4".into(),
            "lazy-leveling:T=4".into(),
            "binomial:k=3".into(),
            "nomerge".into(),
        ],
        buffers: vec![1 << 20, 4 << 20],
        bloom_bits: vec![0.0, 8.0],
    }
}

/// Every candidate of `space`, simulated and costed one by one.
fn brute_force(w: &Workload, space: &Space, c: &CostModel) -> Vec<(Candidate, f64)> {
    let mut out = Vec::new();
    for spec in &space.specs {
        for &buffer_bytes in &space.buffers {
            for &bits in &space.bloom_bits {
                for bloom in [BloomAlloc::Uniform, BloomAlloc::Monkey] {
                    if bits == 0.0 && bloom == BloomAlloc::Monkey {
                        continue;
                    }
                    let cand = Candidate {
                        spec: spec.clone(),
                        buffer_bytes,
                        bloom_bits: bits,
                        bloom,
                    };
                    if let Some(p) = predict_one(&cand, w, c).unwrap() {
                        out.push((cand, p.cost_ns));
                    }
                }
            }
        }
    }
    out
}

fn check(w: &Workload) {
    let space = small_space();
    let c = CostModel::default();
    let brute = brute_force(w, &space, &c);
    let found = search(w, &space, &c, 0.0, 2);
    assert!(found.skipped.is_empty(), "{:?}", found.skipped);
    assert_eq!(found.ranked.len(), brute.len(), "{}", w.name);
    for (cand, cost) in &brute {
        let r = found
            .ranked
            .iter()
            .find(|r| &r.prediction.candidate == cand)
            .unwrap_or_else(|| panic!("{cand:?} not searched"));
        assert!(
            (r.prediction.cost_ns - cost).abs() <= 1e-9 * cost,
            "{cand:?}"
        );
    }
    let best = brute.iter().map(|b| b.1).fold(f64::INFINITY, f64::min);
    assert_eq!(found.ranked[0].prediction.cost_ns, best, "{}", w.name);
    // Best first.
    for pair in found.ranked.windows(2) {
        assert!(pair[0].prediction.cost_ns <= pair[1].prediction.cost_ns);
    }
}

#[test]
fn the_search_finds_the_brute_force_best_on_small_cases() {
    // 20k records of 1 KiB (~20 MiB, 5 to 20 flushes), 16 MiB of memory.
    for letter in ["load", "a", "c", "e"] {
        check(&Workload::ycsb(letter, 20_000, 1000, 16 << 20).unwrap());
    }
    let mut scans = Workload::ycsb("e", 20_000, 1000, 16 << 20).unwrap();
    scans.keys = KeyDist::Uniform;
    scans.scan_length = 1000.0;
    check(&scans);
}

#[test]
fn the_advice_follows_the_workload() {
    // Writes only: a tiered design writes less than leveling; reads only of
    // a loaded tree: fewer runs win. The oracle is the textbook ordering
    // (seed 001's takeaways), not the model's own numbers.
    let space = Space {
        specs: vec!["leveling:T=10,l0=4".into(), "tier:T=10".into()],
        buffers: vec![1 << 20],
        bloom_bits: vec![10.0],
    };
    let c = CostModel::default();
    let load = Workload::ycsb("load", 200_000, 1000, 64 << 20).unwrap();
    let best = &search(&load, &space, &c, 0.0, 1).ranked[0];
    assert_eq!(best.prediction.candidate.spec, "tier:T=10");
    let mut misses = Workload::ycsb("c", 200_000, 1000, 64 << 20).unwrap();
    misses.mix.get = 0.0;
    misses.mix.scan = 1.0;
    let best = &search(&misses, &space, &c, 0.0, 1).ranked[0];
    assert_eq!(best.prediction.candidate.spec, "leveling:T=10,l0=4");
}
