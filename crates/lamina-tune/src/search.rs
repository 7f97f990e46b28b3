//! The search: each (strategy, buffer) pair is simulated once, then every
//! Bloom setting is costed on that simulation (the filters and the block
//! cache change what reads cost, not what compaction does); candidates are
//! ranked by cost per operation, or by their worst case over nearby
//! workloads ([`crate::robust`]).

use std::sync::Mutex;

use serde::Serialize;

use crate::cost::CostModel;
use crate::model::{predict, BloomAlloc, Candidate, Prediction};
use crate::robust;
use crate::shape::{simulate, Shape};
use crate::space::Space;
use crate::workload::Workload;

/// A ranked candidate.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Ranked {
    /// The prediction.
    #[serde(flatten)]
    pub prediction: Prediction,
    /// The worst cost per operation within the uncertainty radius (the
    /// nominal cost when there is none).
    pub worst_cost_ns: f64,
}

/// The search's answer.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Outcome {
    /// Candidates, best first.
    pub ranked: Vec<Ranked>,
    /// Specs the simulator refused (with why).
    pub skipped: Vec<(String, String)>,
    /// (strategy, buffer) pairs simulated.
    pub simulations: usize,
}

/// Every Bloom setting of `space` on one simulated pair, as candidates.
fn bloom_variants(spec: &str, buffer_bytes: u64, space: &Space) -> Vec<Candidate> {
    let mut out = Vec::new();
    for &bits in &space.bloom_bits {
        let allocs: &[BloomAlloc] = if bits > 0.0 {
            &[BloomAlloc::Uniform, BloomAlloc::Monkey]
        } else {
            &[BloomAlloc::Uniform]
        };
        for &bloom in allocs {
            out.push(Candidate {
                spec: spec.to_string(),
                buffer_bytes,
                bloom_bits: bits,
                bloom,
            });
        }
    }
    out
}

/// Searches `space` for `w`, ranking by cost per operation, or with
/// `uncertainty > 0` by the worst cost over mixes within that KL
/// divergence of `w`'s (Endure). Simulations run on `threads` threads.
pub fn search(
    w: &Workload,
    space: &Space,
    c: &CostModel,
    uncertainty: f64,
    threads: usize,
) -> Outcome {
    let pairs: Vec<(&str, u64)> = space
        .specs
        .iter()
        .flat_map(|s| space.buffers.iter().map(move |b| (s.as_str(), *b)))
        .collect();
    let next = Mutex::new(0usize);
    let results: Mutex<Vec<(usize, Result<Shape, String>)>> = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..threads.max(1) {
            scope.spawn(|| loop {
                let i = {
                    let mut n = next.lock().unwrap_or_else(|e| e.into_inner());
                    *n += 1;
                    *n - 1
                };
                let Some(&(spec, buffer)) = pairs.get(i) else {
                    break;
                };
                let r = simulate(spec, buffer, w).map_err(|e| e.to_string());
                results
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push((i, r));
            });
        }
    });
    let mut results = results.into_inner().unwrap_or_else(|e| e.into_inner());
    results.sort_by_key(|r| r.0);
    let mut ranked = Vec::new();
    let mut skipped = Vec::new();
    for (i, r) in results {
        let (spec, buffer) = pairs[i];
        match r {
            Ok(shape) => {
                for cand in bloom_variants(spec, buffer, space) {
                    if let Some(p) = predict(&cand, &shape, w, c) {
                        ranked.push(rank_one(p, w, uncertainty));
                    }
                }
            }
            Err(e) => {
                if !skipped.iter().any(|(s, _)| s == spec) {
                    skipped.push((spec.to_string(), e));
                }
            }
        }
    }
    sort(&mut ranked);
    Outcome {
        ranked,
        skipped,
        simulations: pairs.len(),
    }
}

/// A prediction with its worst case within `uncertainty`.
pub fn rank_one(p: Prediction, w: &Workload, uncertainty: f64) -> Ranked {
    let worst_cost_ns = if uncertainty > 0.0 {
        robust::worst_case(&w.mix.shares(), &p.op_costs, uncertainty)
    } else {
        p.cost_ns
    };
    Ranked {
        prediction: p,
        worst_cost_ns,
    }
}

/// Best first: by the worst-case cost, then the nominal one, then the spec
/// (a total order, so equal costs rank the same way every time).
pub fn sort(ranked: &mut [Ranked]) {
    ranked.sort_by(|a, b| {
        a.worst_cost_ns
            .total_cmp(&b.worst_cost_ns)
            .then(a.prediction.cost_ns.total_cmp(&b.prediction.cost_ns))
            .then_with(|| {
                let (x, y) = (&a.prediction.candidate, &b.prediction.candidate);
                (x.spec.as_str(), x.buffer_bytes, x.bloom_bits.to_bits())
                    .cmp(&(y.spec.as_str(), y.buffer_bytes, y.bloom_bits.to_bits()))
                    .then((x.bloom as u8).cmp(&(y.bloom as u8)))
            })
    });
}

/// The prediction for one candidate, simulating it on its own (what the
/// search does for many at once; the brute-force test's oracle and the
/// engine default's row).
pub fn predict_one(
    cand: &Candidate,
    w: &Workload,
    c: &CostModel,
) -> crate::Result<Option<Prediction>> {
    let shape = simulate(&cand.spec, cand.buffer_bytes, w)?;
    Ok(predict(cand, &shape, w, c))
}
