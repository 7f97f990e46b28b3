//! The search space: every registered strategy with a grid of its
//! parameters, write buffer sizes and Bloom filter settings.

use lamina_compaction::spec::STRATEGIES;
use lamina_compaction::{policy_from_spec, PolicyDefaults};

/// Size ratios tried for strategies that take `T` (or stack-tiered's `b`).
pub const RATIOS: [u32; 6] = [2, 3, 4, 6, 10, 16];
/// Depth bounds tried for strategies that take `k`.
pub const DEPTHS: [u32; 5] = [3, 4, 6, 8, 12];
/// Level-0 triggers tried for strategies that take `l0`.
pub const L0S: [u32; 2] = [2, 4];

/// What the search tries.
#[derive(Debug, Clone, PartialEq)]
pub struct Space {
    /// `--compaction` specs.
    pub specs: Vec<String>,
    /// Write buffer sizes, bytes.
    pub buffers: Vec<u64>,
    /// Bloom bits per key (average).
    pub bloom_bits: Vec<f64>,
}

impl Space {
    /// Every registered strategy with its parameter grid, buffers of 1/32
    /// to 1/2 of `memory_bytes` (at least 1 MiB), and 0, 5, 10 or 14 Bloom
    /// bits per key, uniform or by Monkey.
    pub fn full(memory_bytes: u64) -> Space {
        let mut buffers: Vec<u64> = [32, 16, 8, 4, 2]
            .iter()
            .map(|d| (memory_bytes / d).max(1 << 20))
            .collect();
        buffers.dedup();
        Space {
            specs: registry_specs(),
            buffers,
            bloom_bits: vec![0.0, 5.0, 10.0, 14.0],
        }
    }
}

/// Every registered strategy with a grid of its main parameter: `b` (the
/// stacks' ratio) or `T` over [`RATIOS`], with `l0` over [`L0S`] where
/// taken; else the depth bound `k` over [`DEPTHS`]; else the bare name.
/// Other parameters keep their defaults (`stack-leveled`'s `b0=2`).
pub fn registry_specs() -> Vec<String> {
    // A strategy takes a key when a spec setting it alone builds.
    let takes = |name: &str, key: &str| {
        policy_from_spec(&format!("{name}:{key}=4"), PolicyDefaults::default()).is_ok()
    };
    let mut specs = Vec::new();
    for s in STRATEGIES {
        let name = s.name;
        if takes(name, "b") || takes(name, "T") {
            let key = if takes(name, "b") { "b" } else { "T" };
            for r in RATIOS {
                if takes(name, "l0") {
                    specs.extend(L0S.iter().map(|l| format!("{name}:{key}={r},l0={l}")));
                } else {
                    specs.push(format!("{name}:{key}={r}"));
                }
            }
        } else if takes(name, "k") {
            specs.extend(DEPTHS.iter().map(|k| format!("{name}:k={k}")));
        } else {
            specs.push(name.to_string());
        }
    }
    specs
}

#[cfg(test)]
mod tests {
    use super::*;
    use lamina_compaction::CompactionSpec;

    #[test]
    fn every_registered_strategy_is_in_the_space_and_every_spec_parses() {
        let specs = registry_specs();
        for s in STRATEGIES {
            assert!(
                specs.iter().any(|x| x.split(':').next() == Some(s.name)),
                "{} missing",
                s.name
            );
        }
        for spec in &specs {
            CompactionSpec::parse(spec).unwrap_or_else(|e| panic!("{spec}: {e}"));
        }
        assert!(
            specs.contains(&"leveling:T=4,l0=2".to_string()),
            "{specs:?}"
        );
        assert!(specs.contains(&"binomial:k=6".to_string()));
        assert!(specs.contains(&"stack-tiered:b=3".to_string()));
    }
}
