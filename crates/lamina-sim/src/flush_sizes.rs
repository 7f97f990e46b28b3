//! Flush sizes of a simulation: constant, seeded uniform, or a list.

use crate::{Result, SimError};

/// The flush size of `lamina sim` and `lamina.sim` when none is given.
pub const DEFAULT_FLUSH_BYTES: u64 = 1 << 20;

/// Flush sizes of a simulation.
#[derive(Debug, Clone, PartialEq)]
pub enum FlushSizes {
    /// Every flush the same size.
    Constant(u64),
    /// Uniform in `[min, max]`, from a seeded generator.
    Uniform {
        /// Smallest flush.
        min: u64,
        /// Largest flush.
        max: u64,
        /// Seed: the same seed gives the same sizes.
        seed: u64,
    },
    /// Given sizes, in order.
    List(Vec<u64>),
}

impl FlushSizes {
    /// Mean flush size (what `TreeView::memtable_bytes` should be).
    pub fn mean(&self) -> u64 {
        match self {
            FlushSizes::Constant(s) => *s,
            FlushSizes::Uniform { min, max, .. } => min / 2 + max / 2 + (min % 2 + max % 2) / 2,
            FlushSizes::List(v) if v.is_empty() => 0,
            FlushSizes::List(v) => {
                (v.iter().map(|&s| u128::from(s)).sum::<u128>() / v.len() as u128) as u64
            }
        }
    }

    /// The `ModelOptions::buffer_bytes` of these flushes when none is given:
    /// the mean flush, at least 1.
    pub fn default_buffer(&self) -> u64 {
        self.mean().max(1)
    }

    /// Flushes available (`None` = unbounded).
    pub fn len(&self) -> Option<u64> {
        match self {
            FlushSizes::List(v) => Some(v.len() as u64),
            _ => None,
        }
    }

    /// True for an empty list.
    pub fn is_empty(&self) -> bool {
        self.len() == Some(0)
    }

    /// The sizes, in order.
    pub fn iter(&self) -> Box<dyn Iterator<Item = u64> + '_> {
        match self {
            FlushSizes::Constant(s) => Box::new(std::iter::repeat(*s)),
            FlushSizes::Uniform { min, max, seed } => {
                let (min, max) = (*min.min(max), *max.max(min));
                let span = max - min;
                let mut rng = SplitMix64(*seed);
                Box::new(std::iter::from_fn(move || {
                    let r = rng.next();
                    Some(if span == u64::MAX {
                        r
                    } else {
                        min + ((u128::from(r) * u128::from(span + 1)) >> 64) as u64
                    })
                }))
            }
            FlushSizes::List(v) => Box::new(v.iter().copied()),
        }
    }

    /// Refuses sizes no simulation can run on: a constant size of 0, a
    /// uniform range with min > max or max = 0, an empty list.
    pub fn validate(&self) -> Result<()> {
        let bad = |why: &str| Err(SimError::Config(why.to_string()));
        match self {
            FlushSizes::Constant(0) => bad("the flush size must be at least 1 byte"),
            FlushSizes::Uniform { min, max, .. } if min > max || *max == 0 => {
                bad("uniform flush sizes want 0 <= min <= max, max > 0")
            }
            FlushSizes::List(v) if v.is_empty() => bad("the list holds no flush size"),
            _ => Ok(()),
        }
    }

    /// Parses a flush-size file: one size in bytes per line; blank lines and
    /// `#` comments are skipped.
    pub fn parse_list(text: &str) -> Result<FlushSizes> {
        let mut sizes = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let size = line.parse::<u64>().map_err(|_| {
                SimError::Config(format!("line {}: {line:?} is not a size in bytes", n + 1))
            })?;
            sizes.push(size);
        }
        Ok(FlushSizes::List(sizes))
    }
}

/// SplitMix64: small, fast, deterministic.
#[derive(Debug, Clone)]
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uniform_sizes_stay_in_range_and_repeat_by_seed() {
        let s = FlushSizes::Uniform {
            min: 10,
            max: 20,
            seed: 7,
        };
        let a: Vec<u64> = s.iter().take(1000).collect();
        assert!(a.iter().all(|&x| (10..=20).contains(&x)));
        assert!(a.contains(&10) && a.contains(&20));
        assert_eq!(a, s.iter().take(1000).collect::<Vec<_>>());
        assert_eq!(s.mean(), 15);
    }

    #[test]
    fn size_files_parse() {
        let s = FlushSizes::parse_list("100\n# c\n\n200 # x\n").unwrap();
        assert_eq!(s, FlushSizes::List(vec![100, 200]));
        assert!(FlushSizes::parse_list("1\nx\n").is_err());
    }
}
