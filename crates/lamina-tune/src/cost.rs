//! The device and CPU cost model: what one step of an operation costs on
//! this machine, in nanoseconds. `lamina tune --calibrate` measures it with
//! the engine and stores it as TOML (`docs/tuning.md` says where). The
//! defaults below are round estimates for a 2-core VM with the data in the
//! page cache, not measurements: without a calibration file, predicted
//! costs rank candidates but their absolute values are not to be trusted.

use serde::{Deserialize, Serialize};

use crate::{Result, TuneError};

/// Nanoseconds per step of an operation.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CostModel {
    /// Every operation: the client loop, the memtable search, the version
    /// pin.
    pub op_ns: f64,
    /// A write's memtable insert and WAL append.
    pub write_ns: f64,
    /// A byte flushed or merged (read back, merged, written), charged to
    /// the writes `write amplification × entry bytes` times.
    pub byte_ns: f64,
    /// A sorted run a lookup consults (the fence index search and the
    /// Bloom probe).
    pub probe_ns: f64,
    /// A data block that is not in the block cache (read from the file:
    /// the OS page cache or the device, checksum, decode).
    pub block_ns: f64,
    /// A data block found in the block cache (the search within it).
    pub cached_block_ns: f64,
    /// An entry a scan steps over (the merging iterator's step).
    pub entry_ns: f64,
    /// Bytes of a data block (`--block_size`).
    pub block_bytes: f64,
}

impl Default for CostModel {
    fn default() -> Self {
        CostModel {
            op_ns: 1_000.0,
            write_ns: 1_500.0,
            byte_ns: 1.5,
            probe_ns: 250.0,
            block_ns: 6_000.0,
            cached_block_ns: 700.0,
            entry_ns: 120.0,
            block_bytes: 4096.0,
        }
    }
}

impl CostModel {
    /// Parses a calibration file; keys it leaves out keep their defaults.
    pub fn from_toml(text: &str) -> Result<Self> {
        let c: CostModel =
            toml::from_str(text).map_err(|e| TuneError::Calibration(e.to_string()))?;
        c.validate()?;
        Ok(c)
    }

    /// The calibration file's text.
    pub fn to_toml(&self) -> String {
        // A struct of floats always serializes.
        toml::to_string(self).unwrap_or_default()
    }

    /// Refuses negative or non-finite costs and a zero block size.
    pub fn validate(&self) -> Result<()> {
        let all = [
            self.op_ns,
            self.write_ns,
            self.byte_ns,
            self.probe_ns,
            self.block_ns,
            self.cached_block_ns,
            self.entry_ns,
        ];
        if all.iter().any(|c| !c.is_finite() || *c < 0.0) {
            return Err(TuneError::Calibration(format!(
                "costs must be finite and >= 0: {self:?}"
            )));
        }
        if !(self.block_bytes.is_finite() && self.block_bytes >= 64.0) {
            return Err(TuneError::Calibration(format!(
                "block_bytes must be at least 64, got {}",
                self.block_bytes
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_calibration_file_round_trips_and_fills_defaults() {
        let c = CostModel {
            block_ns: 12_345.0,
            ..CostModel::default()
        };
        assert_eq!(CostModel::from_toml(&c.to_toml()).unwrap(), c);
        let partial = CostModel::from_toml("probe_ns = 10.0\n").unwrap();
        assert_eq!(partial.probe_ns, 10.0);
        assert_eq!(partial.block_ns, CostModel::default().block_ns);
        assert!(CostModel::from_toml("probe_ns = -1.0\n").is_err());
        assert!(CostModel::from_toml("nonsense = 1.0\n").is_err());
        assert!(CostModel::from_toml("block_bytes = 0.0\n").is_err());
    }
}
