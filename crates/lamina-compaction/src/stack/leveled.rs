//! The leveled policy of seed 000 ch. 3 (LevelDB/RocksDB as evaluated
//! there), distinct from the engine's `leveling`.

use super::parse_params;
use super::Common;
use crate::error::{Error, Result};
use crate::{
    param, CompactionPolicy, CompactionTask, FileView, OutputRun, PolicyDefaults, RunView,
    TaskInput, TreeView,
};

/// Leveled: level 0 holds up to `b0` flushed runs; when a flush makes it
/// `b0 + 1`, its oldest run merges with the overlapping files of level 1.
/// Level `i >= 1` is one run of files of about `file` bytes holding up to
/// `buffer × b^i` bytes; when over, the file overlapping the *fewest* files
/// of level `i + 1` (then the fewest bytes, then the first by key) merges
/// with them. A merge without overlap is a trivial move.
#[derive(Debug, Clone)]
pub struct Leveled {
    /// Level-0 runs kept.
    pub b0: usize,
    /// Size ratio between levels.
    pub b: u64,
    common: Common,
}

impl Leveled {
    /// Builds from spec parameters `b0=` (2), `b=` (default
    /// `Options::size_ratio`) and `file=` (default `Options::target_file_size`).
    pub fn from_params(params: &[(&str, &str)], defaults: PolicyDefaults) -> Result<Self> {
        let mut b0 = 2;
        let mut b = defaults.size_ratio as u64;
        let common = parse_params("leveled", params, defaults, |k, v| {
            match k {
                "b0" => b0 = param(k, v)?,
                "b" => b = param(k, v)?,
                _ => return Ok(false),
            }
            Ok(true)
        })?;
        if common.partitioning.is_some() {
            return Err(Error::InvalidArgument(
                "leveled moves one run down at a time; partition= is for stack policies".into(),
            ));
        }
        if b0 < 1 || b < 2 {
            return Err(Error::InvalidArgument(
                "leveled needs b0 >= 1 and b >= 2".into(),
            ));
        }
        Ok(Leveled { b0, b, common })
    }

    /// Capacity in bytes of level `i >= 1`.
    pub fn capacity(&self, buffer_bytes: u64, i: usize) -> u64 {
        let mut cap = buffer_bytes.max(1);
        for _ in 0..i {
            cap = cap.saturating_mul(self.b);
        }
        cap
    }

    /// A task moving `files` (of `run` in `level`) into `level + 1`, with
    /// the overlapping files there; `None` if any of them is busy.
    fn push_down(
        &self,
        view: &TreeView,
        level: usize,
        run: &RunView,
        files: &[&FileView],
        reason: String,
    ) -> Option<CompactionTask> {
        if files.is_empty() || files.iter().any(|f| f.busy) {
            return None;
        }
        let lo = files.iter().map(|f| f.smallest.as_slice()).min()?;
        let hi = files.iter().map(|f| f.largest.as_slice()).max()?;
        let mut inputs = vec![TaskInput {
            level,
            run_id: run.id,
            file_ids: files.iter().map(|f| f.id).collect(),
        }];
        let output_run = match view.level(level + 1).runs.first() {
            None => OutputRun::New,
            Some(below) => {
                let over = overlapping(below, lo, hi);
                if over.iter().any(|f| f.busy) {
                    return None;
                }
                if !over.is_empty() {
                    inputs.push(TaskInput {
                        level: level + 1,
                        run_id: below.id,
                        file_ids: over.iter().map(|f| f.id).collect(),
                    });
                }
                OutputRun::Existing(below.id)
            }
        };
        Some(CompactionTask {
            inputs,
            output_level: level + 1,
            output_run,
            target_file_size: self.common.file,
            partitioning: None,
            buffer: None,
            reason,
        })
    }
}

/// The files of `run` (key-disjoint, sorted) intersecting `[lo, hi]`.
fn overlapping<'a>(run: &'a RunView, lo: &[u8], hi: &[u8]) -> &'a [FileView] {
    let first = run.files.partition_point(|f| f.largest.as_slice() < lo);
    let end = run.files.partition_point(|f| f.smallest.as_slice() <= hi);
    run.files.get(first..end.max(first)).unwrap_or(&[])
}

/// The idle file of `run` overlapping the fewest files of `below` (then the
/// fewest bytes, then the first by key) whose overlapping files are idle,
/// with that count. Both runs are sorted and key-disjoint, so one sweep with
/// two monotone cursors finds every file's overlap in O(n + m).
fn fewest_overlaps<'a>(
    run: &'a RunView,
    below: Option<&RunView>,
) -> Option<(usize, u64, &'a FileView)> {
    let empty: &[FileView] = &[];
    let next = below.map_or(empty, |b| b.files.as_slice());
    // prefix[j] = bytes of next[..j]; busy_prefix[j] = busy files in next[..j].
    let mut prefix = Vec::with_capacity(next.len() + 1);
    let mut busy_prefix = Vec::with_capacity(next.len() + 1);
    prefix.push(0u64);
    busy_prefix.push(0usize);
    for f in next {
        prefix.push(prefix[prefix.len() - 1].saturating_add(f.size));
        busy_prefix.push(busy_prefix[busy_prefix.len() - 1] + usize::from(f.busy));
    }
    let (mut first, mut end) = (0, 0);
    let mut best: Option<(usize, u64, &FileView)> = None;
    for f in &run.files {
        while first < next.len() && next[first].largest < f.smallest {
            first += 1;
        }
        end = end.max(first);
        while end < next.len() && next[end].smallest <= f.largest {
            end += 1;
        }
        if f.busy || busy_prefix[end] > busy_prefix[first] {
            continue;
        }
        let count = end - first;
        let bytes = prefix[end] - prefix[first];
        if best.is_none_or(|(c, b, _)| (count, bytes) < (c, b)) {
            best = Some((count, bytes, f));
        }
    }
    best
}

impl CompactionPolicy for Leveled {
    fn spec(&self) -> String {
        format!(
            "leveled:b0={},b={}{}",
            self.b0,
            self.b,
            self.common.file_suffix()
        )
    }

    fn size_ratio(&self) -> Option<f64> {
        Some(self.b as f64)
    }

    fn pick(&self, view: &TreeView) -> Vec<CompactionTask> {
        let mut tasks = Vec::new();
        let l0 = &view.level(0).runs;
        if l0.len() > self.b0 {
            if let Some(oldest) = l0.last() {
                let files: Vec<&FileView> = oldest.files.iter().collect();
                tasks.extend(self.push_down(
                    view,
                    0,
                    oldest,
                    &files,
                    format!(
                        "level 0 has {} runs > b0={}, oldest run down",
                        l0.len(),
                        self.b0
                    ),
                ));
            }
        }
        for (i, level) in view.levels.iter().enumerate().skip(1) {
            if level.runs.len() > 1 {
                // Left by another strategy: push its oldest run down whole.
                if let Some(oldest) = level.runs.last() {
                    let files: Vec<&FileView> = oldest.files.iter().collect();
                    tasks.extend(self.push_down(
                        view,
                        i,
                        oldest,
                        &files,
                        format!("level {i} has {} runs", level.runs.len()),
                    ));
                }
                continue;
            }
            let Some(run) = level.runs.first() else {
                continue;
            };
            let bytes = run.bytes();
            let cap = self.capacity(view.buffer_bytes, i);
            if bytes <= cap {
                continue;
            }
            let best = fewest_overlaps(run, view.level(i + 1).runs.first());
            if let Some((count, _, f)) = best {
                tasks.extend(self.push_down(
                    view,
                    i,
                    run,
                    &[f],
                    format!(
                        "level {i} holds {bytes} > {cap} bytes; file {} overlaps {count} below",
                        f.id
                    ),
                ));
            }
        }
        tasks
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stack::testutil::defaults;
    use crate::LevelView;

    fn f(id: u64, lo: u8, hi: u8, size: u64) -> FileView {
        FileView {
            id,
            size,
            entries: 1,
            tombstones: 0,
            smallest: vec![lo],
            largest: vec![hi],
            created_ms: 0,
            oldest_tombstone_ms: None,
            busy: false,
            ..Default::default()
        }
    }

    fn run(id: u64, files: Vec<FileView>) -> RunView {
        RunView {
            id,
            order: id,
            files,
        }
    }

    #[test]
    fn level0_pushes_its_oldest_run_with_overlapping_level1_files() {
        let p = Leveled::from_params(&[("b0", "2"), ("b", "4")], defaults()).unwrap();
        let view = TreeView {
            levels: vec![
                LevelView {
                    runs: vec![
                        run(9, vec![f(1, 0, 255, 10)]),
                        run(8, vec![f(2, 0, 255, 10)]),
                        run(7, vec![f(3, 20, 60, 10)]),
                    ],
                },
                LevelView {
                    runs: vec![run(
                        5,
                        vec![f(4, 0, 10, 10), f(5, 30, 40, 10), f(6, 50, 90, 10)],
                    )],
                },
            ],
            buffer_bytes: 10,
            ..Default::default()
        };
        let t = p.pick(&view);
        assert_eq!(t.len(), 1);
        assert_eq!(t[0].output_run, OutputRun::Existing(5));
        assert_eq!(t[0].inputs[0].file_ids, vec![3]);
        assert_eq!(t[0].inputs[1].file_ids, vec![5, 6]);
    }

    #[test]
    fn over_capacity_level_pushes_the_file_with_fewest_overlaps() {
        let p = Leveled::from_params(&[("b0", "2"), ("b", "2")], defaults()).unwrap();
        // Level 1 capacity 10 × 2 = 20; it holds 30.
        let view = TreeView {
            levels: vec![
                LevelView::default(),
                LevelView {
                    runs: vec![run(
                        1,
                        vec![f(1, 0, 40, 10), f(2, 50, 90, 10), f(3, 100, 140, 10)],
                    )],
                },
                LevelView {
                    runs: vec![run(
                        2,
                        vec![
                            f(4, 0, 10, 1),
                            f(5, 20, 30, 1),
                            f(6, 60, 70, 15),
                            f(7, 100, 110, 1),
                            f(8, 120, 130, 1),
                        ],
                    )],
                },
            ],
            buffer_bytes: 10,
            ..Default::default()
        };
        let t = p.pick(&view);
        assert_eq!(t.len(), 1);
        // File 2 overlaps one file (15 bytes, more than the 2 bytes of
        // the two files under file 1): fewest files wins.
        assert_eq!(t[0].inputs[0].file_ids, vec![2]);
        assert_eq!(t[0].inputs[1].file_ids, vec![6]);
        assert_eq!(t[0].output_level, 2);
    }

    #[test]
    fn empty_next_level_gets_a_new_run_and_params_are_checked() {
        let p = Leveled::from_params(&[("b0", "1")], defaults()).unwrap();
        let view = TreeView {
            levels: vec![LevelView {
                runs: vec![run(2, vec![f(1, 0, 9, 1)]), run(1, vec![f(2, 0, 9, 1)])],
            }],
            buffer_bytes: 1,
            ..Default::default()
        };
        let t = p.pick(&view);
        assert_eq!(t[0].output_run, OutputRun::New);
        assert_eq!(t[0].inputs.len(), 1);
        assert!(Leveled::from_params(&[("b", "1")], defaults()).is_err());
        assert!(Leveled::from_params(&[("b0", "0")], defaults()).is_err());
        assert_eq!(p.spec(), "leveled:b0=1,b=4");
    }
}
