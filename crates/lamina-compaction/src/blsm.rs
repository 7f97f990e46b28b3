//! bLSM's split levels (Sears and Ramakrishnan, SIGMOD'12, in the simplified
//! gear-scheduler form seed 002 §4.1 and Fig. 10 use): every disk level
//! `i >= 1` holds two runs, `C_i` (the newer, receiving what level `i − 1`
//! pushes down) and `C'_i` (the older, a frozen full copy being drained
//! into `C_{i+1}` one file at a time, in key order). `|C_i| + |C'_i|` is
//! held at the capacity `S_i`: each unit merged into level `i` is matched by
//! a unit moved out of `C'_i`, so `C'_i` empties as `C_i` fills, and a full
//! `C_i` becomes the next `C'_i`.
//!
//! The roles come from the tree alone, so the policy stays a pure function
//! of the view: of a level's two runs the newer is `C`, the older `C'`; a
//! lone run is `C'` once it holds `S_i` bytes (what arrives next starts a
//! new `C`) and `C` below that (a `C'` only drains while a `C` receives,
//! so a lone run below capacity is never a half-drained `C'`). Level 0
//! keeps LevelDB's flushed runs; once it holds more than `S_0` bytes its
//! oldest run drains into level 1 a file at a time, in key order.
//!
//! One task per level over capacity, shallowest first, so a step cascades
//! down to the first level with room (one unit per level per step).
//! Capacities: `S_0 = l0 × buffer`, `S_i = S_0 × T^i`.

use crate::design::layout::{destination, Layout};
use crate::error::{Error, Result};
use crate::{
    param, CompactionPolicy, CompactionTask, OutputRun, PolicyDefaults, RunView, TaskInput,
    TreeView,
};

/// bLSM's split-level leveling.
#[derive(Debug, Clone)]
pub struct Blsm {
    /// Size ratio T between the capacities of adjacent levels.
    pub size_ratio: u64,
    /// Capacity of level 0, in memtables.
    pub l0: u64,
    /// Output file size (the compaction unit).
    pub file_size: u64,
    file_given: bool,
}

impl Blsm {
    /// Builds from spec parameters `T=` (default `Options::size_ratio`),
    /// `l0=` (4) and `file=` (default `Options::target_file_size`).
    pub fn from_params(params: &[(&str, &str)], defaults: PolicyDefaults) -> Result<Self> {
        let mut b = Blsm {
            size_ratio: defaults.size_ratio as u64,
            l0: 4,
            file_size: defaults.target_file_size,
            file_given: false,
        };
        for &(k, v) in params {
            match k {
                "T" => b.size_ratio = param(k, v)?,
                "l0" => b.l0 = param(k, v)?,
                "file" => {
                    b.file_size = param(k, v)?;
                    b.file_given = true;
                }
                _ => return Err(Error::InvalidArgument(format!("blsm has no parameter {k}"))),
            }
        }
        if b.size_ratio < 2 || b.l0 < 1 || b.file_size == 0 {
            return Err(Error::InvalidArgument(
                "blsm needs T >= 2, l0 >= 1 and file >= 1".into(),
            ));
        }
        Ok(b)
    }

    /// `S_i` in bytes for a memtable of `buffer` bytes.
    pub fn capacity(&self, buffer: u64, level: usize) -> u64 {
        let mut cap = buffer.max(1).saturating_mul(self.l0);
        for _ in 0..level {
            cap = cap.saturating_mul(self.size_ratio);
        }
        cap
    }

    /// The run of `level` that receives units from above (`C_level`), or
    /// `None` if the next unit starts a new one.
    fn receiving<'a>(&self, view: &'a TreeView, level: usize) -> Option<&'a RunView> {
        let runs = &view.level(level).runs;
        match runs.as_slice() {
            [] => None,
            [only] if only.bytes() >= self.capacity(view.buffer_bytes, level) => None,
            [newest, ..] => Some(newest),
        }
    }

    /// Moves the first file (smallest keys) of `level`'s draining run into
    /// `C_{level+1}`.
    fn drain(&self, view: &TreeView, level: usize, bytes: u64) -> Option<CompactionTask> {
        let runs = &view.level(level).runs;
        let (draining, _) = runs.split_last()?;
        let unit = draining.files.first()?;
        if unit.busy {
            return None;
        }
        let mut inputs = vec![TaskInput {
            level,
            run_id: draining.id,
            file_ids: vec![unit.id],
        }];
        let output_run = match self.receiving(view, level + 1) {
            Some(_) => destination(
                view,
                level + 1,
                Layout::Leveling,
                &unit.smallest,
                &unit.largest,
                &mut inputs,
            )?,
            None => OutputRun::New,
        };
        Some(CompactionTask {
            inputs,
            output_level: level + 1,
            output_run,
            target_file_size: self.file_size,
            partitioning: None,
            reason: format!(
                "blsm: level {level} holds {bytes} bytes > S_{level} = {}; unit {} of its oldest run down",
                self.capacity(view.buffer_bytes, level),
                unit.id
            ),
        })
    }
}

impl CompactionPolicy for Blsm {
    fn spec(&self) -> String {
        let mut s = format!("blsm:T={},l0={}", self.size_ratio, self.l0);
        if self.file_given {
            s.push_str(&format!(",file={}", self.file_size));
        }
        s
    }

    fn size_ratio(&self) -> Option<f64> {
        Some(self.size_ratio as f64)
    }

    fn pick(&self, view: &TreeView) -> Vec<CompactionTask> {
        (0..view.levels.len())
            .filter_map(|level| {
                let bytes = view.level(level).bytes();
                (bytes > self.capacity(view.buffer_bytes, level))
                    .then(|| self.drain(view, level, bytes))
                    .flatten()
            })
            .collect()
    }
}
