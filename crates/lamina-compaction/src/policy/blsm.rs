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
//! One task per level over capacity, deepest first (see `pick`
//! in the `CompactionPolicy` impl), one unit per level per step.
//! Capacities: `S_0 = l0 × buffer`, `S_i = S_0 × T^i`.
//!
//! `lsbm` is the same tree with LSbM's compaction buffer (seed 002 §4,
//! Algorithm 1; the buffer's model is in [`crate::lsbm`]): every unit
//! moved down from `C'_i` joins the receiving run's buffer (`B_{i+1}^0`,
//! one table per drained run) instead of being deleted; the draining run's
//! own buffer (`B'_i`) retires files, smallest largest key first, so that
//! `|B'_i| / S'_i` never exceeds `|C'_i| / S_i`; once at least `freeze` of
//! the bytes a round has merged into the receiving run were repeated data
//! (versions its merges dropped, [`crate::lsbm::Buffer::repeated_in_round`]),
//! the run's buffer is frozen for the rest of the round (units are deleted;
//! only markers of their ranges join it). The engine trims the buffers every
//! `trim` ms, removing files with less than `keep` of their blocks cached.

use crate::error::{Error, Result};
use crate::lsbm::{BufferTask, TrimRule};
use crate::policy::design::layout::{destination, Layout};
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
    /// Output file size (the buffer's unit: trimmed and retired whole).
    pub file_size: u64,
    file_given: bool,
    /// Files per merge step (the paper's super-file of `unit` files):
    /// compaction moves `unit × file` bytes a step while the buffer keeps,
    /// trims and retires single files, so a file's key range stays narrow
    /// enough to be either hot or cold (seed 002 §4.3).
    pub unit: usize,
    /// LSbM's compaction buffer, if kept.
    pub buffer: Option<BufferParams>,
}

/// The parameters of LSbM's compaction buffer.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BufferParams {
    /// The trim pass.
    pub trim: TrimRule,
    /// The buffer of a receiving run freezes once at least this fraction
    /// of the bytes the current round merged into the run were repeated
    /// data (seed 002 §4.1: a level into which repeated data is compacted;
    /// the paper freezes only its last level, where all of it is). `1 −
    /// freeze` is the tolerance: the measure is in bytes, and versions of
    /// different sizes blur it.
    pub freeze: f64,
}

impl Default for BufferParams {
    /// The paper's trim (every 30 s, 80% of blocks cached) and a freeze
    /// once 90% of a round's data is repeated (the paper freezes a level
    /// receiving only repeated data and gives no tolerance).
    fn default() -> Self {
        BufferParams {
            trim: TrimRule {
                interval_ms: 30_000,
                threshold: 0.8,
            },
            freeze: 0.9,
        }
    }
}

impl Blsm {
    /// Builds from spec parameters `T=` (default `Options::size_ratio`),
    /// `l0=` (4), `file=` (default `Options::target_file_size`) and `unit=`
    /// (files per merge step, 1).
    pub fn from_params(params: &[(&str, &str)], defaults: PolicyDefaults) -> Result<Self> {
        Self::build(params, defaults, None)
    }

    /// `lsbm`: as [`Blsm::from_params`], plus `trim=` (ms between trim
    /// passes, 30000), `keep=` (the cached fraction a file needs to stay,
    /// 0.8) and `freeze=` (the repeated fraction of a round that freezes
    /// its buffer, 0.9; above 1, never).
    pub fn lsbm_from_params(params: &[(&str, &str)], defaults: PolicyDefaults) -> Result<Self> {
        Self::build(params, defaults, Some(BufferParams::default()))
    }

    fn build(
        params: &[(&str, &str)],
        defaults: PolicyDefaults,
        buffer: Option<BufferParams>,
    ) -> Result<Self> {
        let mut b = Blsm {
            size_ratio: defaults.size_ratio as u64,
            l0: 4,
            file_size: defaults.target_file_size,
            file_given: false,
            unit: 1,
            buffer,
        };
        let name = if buffer.is_some() { "lsbm" } else { "blsm" };
        for &(k, v) in params {
            match (k, b.buffer.as_mut()) {
                ("trim", Some(p)) => p.trim.interval_ms = param(k, v)?,
                ("keep", Some(p)) => p.trim.threshold = param(k, v)?,
                ("freeze", Some(p)) => p.freeze = param(k, v)?,
                _ => b.set(name, k, v)?,
            }
        }
        if b.size_ratio < 2 || b.l0 < 1 || b.file_size == 0 || b.unit == 0 {
            return Err(Error::InvalidArgument(format!(
                "{name} needs T >= 2, l0 >= 1, file >= 1 and unit >= 1"
            )));
        }
        if let Some(p) = b.buffer {
            if p.trim.interval_ms == 0
                || !(0.0..=1.0).contains(&p.trim.threshold)
                || p.freeze.is_nan()
                || p.freeze < 0.0
            {
                return Err(Error::InvalidArgument(
                    "lsbm needs trim >= 1 (ms), 0 <= keep <= 1 and freeze >= 0 (above 1: never)"
                        .into(),
                ));
            }
        }
        Ok(b)
    }

    fn set(&mut self, name: &str, k: &str, v: &str) -> Result<()> {
        match k {
            "T" => self.size_ratio = param(k, v)?,
            "l0" => self.l0 = param(k, v)?,
            "file" => {
                self.file_size = param(k, v)?;
                self.file_given = true;
            }
            "unit" => self.unit = param(k, v)?,
            _ => return Err(Error::unknown_parameter(name, k)),
        }
        Ok(())
    }

    /// `S_i` in bytes for a memtable of `buffer` bytes.
    pub fn capacity(&self, buffer: u64, level: usize) -> u64 {
        let mut cap = buffer.max(1).saturating_mul(self.l0);
        for _ in 0..level {
            cap = cap.saturating_mul(self.size_ratio);
        }
        cap
    }

    /// The run of `level` that receives a unit of `incoming` bytes from
    /// above (`C_level`), or `None` if the unit starts a new one. A lone run
    /// the unit would take past `S_level` is full: it becomes `C'`, so it
    /// only drains once a new `C` receives, and, as no unit makes it
    /// overfull, it does not turn back into a `C` after draining one unit
    /// (a lone run that drained and received in turn would mix rounds).
    /// A lone run at least as recent as the unit's (ranks tie when one
    /// draining run filled it) must receive, as a new run would rank below
    /// it.
    fn receiving<'a>(
        &self,
        view: &'a TreeView,
        level: usize,
        incoming: u64,
        incoming_order: u64,
    ) -> Option<&'a RunView> {
        let runs = &view.level(level).runs;
        match runs.as_slice() {
            [] => None,
            [only]
                if only.order < incoming_order
                    && only.bytes() + incoming > self.capacity(view.memtable_bytes, level) =>
            {
                None
            }
            [newest, ..] => Some(newest),
        }
    }

    /// Moves the first `unit` files (smallest keys) of `level`'s draining
    /// run into `C_{level+1}`.
    fn drain(&self, view: &TreeView, level: usize, bytes: u64) -> Option<CompactionTask> {
        let runs = &view.level(level).runs;
        let (draining, _) = runs.split_last()?;
        let unit: Vec<_> = draining.files.iter().take(self.unit).collect();
        let (first, last) = (unit.first()?, unit.last()?);
        if unit.iter().any(|f| f.busy) {
            return None;
        }
        let unit_bytes: u64 = unit.iter().map(|f| f.size).sum();
        let mut inputs = vec![TaskInput {
            level,
            run_id: draining.id,
            file_ids: unit.iter().map(|f| f.id).collect(),
        }];
        let receiving = self.receiving(view, level + 1, unit_bytes, draining.order);
        let buffer = self.buffer.map(|p| {
            let host_buffer = receiving.and_then(|host| view.compaction_buffers.get(&host.id));
            // The unit continues a round if the host's newest table is this
            // run's; otherwise it starts one, and the host's bytes now are
            // the base of the round's repeated-data measure.
            let continues = host_buffer.is_some_and(|b| b.newest_source() == Some(draining.id));
            let round_base = (!continues).then(|| receiving.map_or(0, RunView::bytes));
            // Repeated data: of what this round compacted into the host, at
            // least `freeze` was dropped as obsolete versions, which the
            // buffer could not drop.
            let frozen = continues
                && receiving
                    .zip(host_buffer)
                    .and_then(|(host, b)| b.repeated_in_round(host.bytes()))
                    .is_some_and(|repeated| repeated >= p.freeze);
            let (retire, base) = match view.compaction_buffers.get(&draining.id) {
                Some(own) => {
                    let after = draining.bytes().saturating_sub(unit_bytes);
                    let cap = self.capacity(view.memtable_bytes, level);
                    let base = own.base.is_none().then(|| own.live_bytes());
                    (own.pace(after, cap), base)
                }
                None => (Vec::new(), None),
            };
            BufferTask {
                source: draining.id,
                frozen,
                retire,
                base,
                round_base,
            }
        });
        let output_run = match receiving {
            Some(_) => destination(
                view,
                level + 1,
                Layout::Leveling,
                &first.smallest,
                &last.largest,
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
            buffer,
            reason: format!(
                "blsm: level {level} holds {bytes} bytes > S_{level} = {}; unit {} of its oldest run down",
                self.capacity(view.memtable_bytes, level),
                unit.iter().map(|f| f.id.to_string()).collect::<Vec<_>>().join(",")
            ),
        })
    }
}

impl CompactionPolicy for Blsm {
    fn spec(&self) -> String {
        let name = if self.buffer.is_some() {
            "lsbm"
        } else {
            "blsm"
        };
        let mut s = format!("{name}:T={},l0={}", self.size_ratio, self.l0);
        if self.file_given {
            s.push_str(&format!(",file={}", self.file_size));
        }
        if self.unit > 1 {
            s.push_str(&format!(",unit={}", self.unit));
        }
        if let Some(p) = self.buffer {
            s.push_str(&format!(
                ",trim={},keep={},freeze={}",
                p.trim.interval_ms, p.trim.threshold, p.freeze
            ));
        }
        s
    }

    fn trim_rule(&self) -> Option<TrimRule> {
        self.buffer.map(|p| p.trim)
    }

    fn size_ratio(&self) -> Option<f64> {
        Some(self.size_ratio as f64)
    }

    /// Deepest level first: an engine with one compaction thread takes the
    /// first task, and shallowest-first would let level 0's units merge
    /// into an ever larger `C_1` while level 1 never drains (the unit
    /// merges then rewrite all of it: 26× write amplification at 100 MB,
    /// and growing). Deepest first, a level drains before the one above
    /// it fills it further, as the paper's gear scheduler paces them; the
    /// writers wait on level 0 meanwhile.
    fn pick(&self, view: &TreeView) -> Vec<CompactionTask> {
        (0..view.levels.len())
            .rev()
            .filter_map(|level| {
                let bytes = view.level(level).bytes();
                (bytes > self.capacity(view.memtable_bytes, level))
                    .then(|| self.drain(view, level, bytes))
                    .flatten()
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {

    use super::*;
    use crate::lsbm::{apply_changes, BufferChange};
    use crate::view::notation::file;
    use crate::{FileView, LevelView};

    /// A worked example of the freeze rule, with memtables of 10 bytes,
    /// `l0=1` and `T=2` (`S_1` = 20, `S_2` = 40): level 1 holds `C_1` (run
    /// 50, 10 bytes) and `C'_1` (run 40, files `m`–`n` and `o`–`p` of 10
    /// bytes, draining); level 2 holds the host `C_2` (run 30) of
    /// `host_bytes`, into which this round of run 40 has so far merged
    /// `round_in` bytes (files `a`–`l`), the host holding `round_base`
    /// bytes before. Returns whether the next unit goes in frozen and the
    /// round base the task records.
    fn next_unit(freeze: f64, round: Option<(u64, u64)>, host_bytes: u64) -> (bool, Option<u64>) {
        let lsbm = Blsm::lsbm_from_params(
            &[("T", "2"), ("l0", "1"), ("freeze", &freeze.to_string())],
            PolicyDefaults::default(),
        )
        .unwrap();
        let mut view = TreeView {
            memtable_bytes: 10,
            ..TreeView::default()
        };
        let run = |id, order, files: Vec<FileView>| RunView {
            id,
            order,
            files: files.into(),
        };
        view.levels = vec![
            LevelView::default(),
            LevelView::default(),
            LevelView::default(),
        ];
        view.levels[1]
            .runs
            .push(run(50, 5, vec![file("51['a'-'z']=10")]));
        view.levels[1].runs.push(run(
            40,
            4,
            vec![file("41['m'-'n']=10"), file("42['o'-'p']=10")],
        ));
        view.levels[2]
            .runs
            .push(run(30, 3, vec![file(&format!("31['a'-'z']={host_bytes}"))]));
        let mut changes = vec![BufferChange::New {
            host: 30,
            complete: true,
        }];
        if let Some((base, bytes_in)) = round {
            changes.push(BufferChange::Round {
                host: 30,
                bytes: base,
            });
            changes.push(BufferChange::Keep {
                host: 30,
                source: 40,
                file: file(&format!("39['a'-'l']={bytes_in}")),
            });
        } else {
            // An earlier round, of run 20, that was all repeated.
            changes.push(BufferChange::Round {
                host: 30,
                bytes: host_bytes,
            });
            changes.push(BufferChange::Keep {
                host: 30,
                source: 20,
                file: file("19['a'-'z']=20"),
            });
        }
        apply_changes(&mut view.compaction_buffers, changes, |_| true);
        let tasks = lsbm.pick(&view);
        let task = tasks.first().expect("level 1 is over its capacity");
        assert_eq!(task.output_level, 2);
        let b = task.buffer.as_ref().expect("lsbm sets a buffer task");
        assert_eq!(b.source, 40);
        (b.frozen, b.round_base)
    }

    #[test]
    fn freeze_follows_the_repeated_fraction_of_the_round() {
        // All new: the host grew by all 20 bytes the round brought.
        assert_eq!(next_unit(0.9, Some((0, 20)), 20), (false, None));
        assert_eq!(next_unit(0.9, Some((5, 20)), 25), (false, None));
        // All repeated: the host did not grow.
        assert_eq!(next_unit(0.9, Some((20, 20)), 20), (true, None));
        // Shrinking (smaller new versions) counts as all repeated.
        assert_eq!(next_unit(0.9, Some((20, 20)), 15), (true, None));
        // The boundary: 18 of 20 bytes dropped is 0.9 repeated (frozen),
        // 17 of 20 is 0.85 (not).
        assert_eq!(next_unit(0.9, Some((20, 20)), 22), (true, None));
        assert_eq!(next_unit(0.9, Some((20, 20)), 23), (false, None));
        // Half repeated freezes at freeze=0.5, not at 0.9; above 1 never.
        assert_eq!(next_unit(0.5, Some((20, 20)), 30), (true, None));
        assert_eq!(next_unit(0.9, Some((20, 20)), 30), (false, None));
        assert_eq!(next_unit(1.5, Some((20, 20)), 20), (false, None));
        // A round's first unit: nothing measured yet, so not frozen (even
        // if the previous round was all repeated), and the host's bytes
        // become the round's base.
        assert_eq!(next_unit(0.9, None, 20), (false, Some(20)));
    }
}
