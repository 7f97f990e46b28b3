//! The leveled policy of seed 000 ch. 3 (LevelDB/RocksDB as evaluated
//! there), distinct from the engine's `leveling`.

use super::parse_params;
use super::Common;
use crate::error::{Error, Result};
use crate::partition::{Partition, Partitioning};
use crate::placement::TILE_RANK;
use crate::view::index::Below;
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
///
/// With `partition=str` or `partition=rstar-grove` (seed 000 §4.3, for
/// spatial indexes) levels `i >= 1` are *tiles* instead: one-file runs
/// ranked [`TILE_RANK`] that a merge makes by cutting its records into
/// spatially disjoint groups. A level over capacity pushes down the tile
/// whose MBR overlaps the fewest tiles below (then the fewest bytes); a
/// push merges with every tile below that may share a key with it (key
/// ranges and MBRs both intersect). `partition=size` is the default
/// key-ordered cut.
#[derive(Debug, Clone)]
pub struct Leveled {
    /// Level-0 runs kept.
    pub b0: usize,
    /// Size ratio between levels.
    pub b: u64,
    /// `Str` or `RstarGrove` for tiled levels; `None`: one key-ordered run
    /// per level.
    pub tiles: Option<Partition>,
    common: Common,
    /// The spelling its spec starts with (`stack-leveled`, or the alias
    /// `leveled` it was built from).
    name: &'static str,
}

impl Leveled {
    /// Builds from spec parameters `b0=` (2), `b=` (default
    /// `Options::size_ratio`) and `file=` (default `Options::target_file_size`).
    pub fn from_params(params: &[(&str, &str)], defaults: PolicyDefaults) -> Result<Self> {
        let mut b0 = 2;
        let mut b = defaults.size_ratio as u64;
        let mut tiles = None;
        let common = parse_params(Self::NAME, params, defaults, |k, v| {
            match k {
                "b0" => b0 = param(k, v)?,
                "b" => b = param(k, v)?,
                "partition" => {
                    tiles = match Partition::parse(v) {
                        Some(Partition::Size) => None,
                        Some(p) if p.tile_rule().is_some() => Some(p),
                        _ => {
                            return Err(Error::InvalidArgument(format!(
                            "stack-leveled: partition must be size, str or rstar-grove, not {v:?}"
                        )))
                        }
                    }
                }
                _ => return Ok(false),
            }
            Ok(true)
        })?;
        if common.partitioning.is_some() {
            return Err(Error::InvalidArgument(
                "stack-leveled moves one run down at a time; partition= is for stack policies"
                    .into(),
            ));
        }
        if b0 < 1 || b < 2 {
            return Err(Error::InvalidArgument(
                "stack-leveled needs b0 >= 1 and b >= 2".into(),
            ));
        }
        Ok(Leveled {
            b0,
            b,
            tiles,
            common,
            name: Self::NAME,
        })
    }

    /// The name its specs start with.
    pub const NAME: &'static str = "stack-leveled";

    /// This policy with its spec spelled `name` (an alias it was built
    /// from, so that its spec prints as written).
    pub fn spelled(self, name: &'static str) -> Self {
        Leveled { name, ..self }
    }

    /// Capacity in bytes of level `i >= 1`.
    pub fn capacity(&self, memtable_bytes: u64, i: usize) -> u64 {
        let mut cap = memtable_bytes.max(1);
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
                let over: Vec<&FileView> = below.overlapping(lo, hi).collect();
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

impl Leveled {
    /// A task merging `inputs` (runs of `level`, whole) into the tiles of
    /// `level + 1` with every tile there that may share a key with them,
    /// cut into new tiles; `None` if one of them is busy or the level
    /// below still holds a run that is no tile (it goes down first).
    fn push_tiles(
        &self,
        view: &TreeView,
        rule: Partition,
        level: usize,
        inputs: &[&RunView],
        reason: String,
    ) -> Option<CompactionTask> {
        let files: Vec<&FileView> = inputs.iter().flat_map(|r| &r.files).collect();
        if files.is_empty() || files.iter().any(|f| f.busy) {
            return None;
        }
        let below = &view.level(level + 1).runs;
        if below.iter().any(|r| r.order != TILE_RANK) {
            return None;
        }
        let mut task_inputs: Vec<TaskInput> = inputs
            .iter()
            .map(|r| TaskInput::whole_run(level, r))
            .collect();
        for tile in below {
            if tile
                .files
                .iter()
                .any(|t| files.iter().any(|f| f.may_share_keys(t)))
            {
                if tile.files.iter().any(|t| t.busy) {
                    return None;
                }
                task_inputs.push(TaskInput::whole_run(level + 1, tile));
            }
        }
        Some(CompactionTask {
            inputs: task_inputs,
            output_level: level + 1,
            output_run: OutputRun::Tiles,
            target_file_size: self.common.file,
            partitioning: Some(Partitioning {
                partition: rule,
                theta: self.common.file,
                subcompactions: 1,
                image: Default::default(),
            }),
            buffer: None,
            reason,
        })
    }

    fn pick_tiles(&self, view: &TreeView, rule: Partition) -> Vec<CompactionTask> {
        let mut tasks = Vec::new();
        let l0 = &view.level(0).runs;
        if l0.len() > self.b0 {
            if let Some(oldest) = l0.last() {
                let reason = format!(
                    "level 0 has {} runs > b0={}, oldest run into tiles",
                    l0.len(),
                    self.b0
                );
                tasks.extend(self.push_tiles(view, rule, 0, &[oldest], reason));
            }
        }
        for (i, level) in view.levels.iter().enumerate().skip(1) {
            // A run that is no tile (left by another strategy) goes down
            // whole, oldest first.
            if let Some(run) = level.runs.iter().rev().find(|r| r.order != TILE_RANK) {
                let reason = format!("level {i} holds run {} that is no tile", run.id);
                tasks.extend(self.push_tiles(view, rule, i, &[run], reason));
                continue;
            }
            let bytes = level.bytes();
            let cap = self.capacity(view.memtable_bytes, i);
            if bytes <= cap {
                continue;
            }
            let below = &view.level(i + 1).runs;
            let best = level
                .runs
                .iter()
                .filter(|t| t.files.iter().all(|f| !f.busy))
                .map(|t| {
                    let over = below.iter().filter(|u| {
                        u.files
                            .iter()
                            .any(|g| t.files.iter().any(|f| f.may_share_keys(g)))
                    });
                    let (count, size) =
                        over.fold((0usize, 0u64), |(c, s), u| (c + 1, s + u.bytes()));
                    (count, size, t)
                })
                .min_by_key(|&(count, size, _)| (count, size));
            if let Some((count, _, tile)) = best {
                let reason = format!(
                    "level {i} holds {bytes} > {cap} bytes; tile {} overlaps {count} below",
                    tile.id
                );
                tasks.extend(self.push_tiles(view, rule, i, &[tile], reason));
            }
        }
        tasks
    }
}

impl CompactionPolicy for Leveled {
    fn spec(&self) -> String {
        format!(
            "{}:b0={},b={}{}{}",
            self.name,
            self.b0,
            self.b,
            self.common.file_suffix(),
            self.tiles
                .map(|p| format!(",partition={}", p.name()))
                .unwrap_or_default()
        )
    }

    fn size_ratio(&self) -> Option<f64> {
        Some(self.b as f64)
    }

    fn pick(&self, view: &TreeView) -> Vec<CompactionTask> {
        if let Some(rule) = self.tiles {
            return self.pick_tiles(view, rule);
        }
        let mut level0 = None;
        let l0 = &view.level(0).runs;
        if l0.len() > self.b0 {
            if let Some(oldest) = l0.last() {
                let files: Vec<&FileView> = oldest.files.iter().collect();
                level0 = self.push_down(
                    view,
                    0,
                    oldest,
                    &files,
                    format!(
                        "level 0 has {} runs > b0={}, oldest run down",
                        l0.len(),
                        self.b0
                    ),
                );
            }
        }
        let mut tasks = Vec::new();
        // How far each level is past its limit (LevelDB's score): level 0
        // by runs over b0 + 1, the others by bytes over capacity.
        let level0_score = l0.len() as f64 / (self.b0 + 1) as f64;
        let mut deeper_score: f64 = 0.0;
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
            let cap = self.capacity(view.memtable_bytes, i);
            if bytes <= cap {
                continue;
            }
            deeper_score = deeper_score.max(bytes as f64 / cap as f64);
            // The idle file overlapping the fewest files below (then the
            // fewest bytes, then the first by key) whose overlapping files
            // are idle; the view's index keeps the order, so a pick does
            // not score every file of the level.
            let below = view.level(i + 1).runs.first();
            // (The index offers idle files only.)
            let best = view.by_fewest_overlapping(i, run, i + 1, Below::Newest, |f| {
                let over = below
                    .into_iter()
                    .flat_map(|b| b.overlapping(&f.smallest, &f.largest));
                let mut count = 0usize;
                for o in over {
                    if o.busy {
                        return None;
                    }
                    count += 1;
                }
                Some((count, f))
            });
            if let Some((count, f)) = best {
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
        // Level 0's merge goes first unless a deeper level is further past
        // its limit. Level 0's runs span every key, so its merge holds all
        // of level 1 while it runs: with merges running beside flushes,
        // level 0 always due and always first, level 1 never drained and
        // every merge from level 0 rewrote all the data (`--merge-cost 0.5
        // --merge-threads 2 --stall-runs 20`: write amplification 983
        // after 2,000 flushes). When merges end before the next flush (the
        // papers' model) no deeper level is past its limit while level 0
        // is, and the order is as it was.
        match level0 {
            Some(task) if deeper_score > level0_score => tasks.push(task),
            Some(task) => tasks.insert(0, task),
            None => {}
        }
        tasks
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::stack::testutil::defaults;
    use crate::view::notation::file;
    use crate::LevelView;

    fn run(id: u64, files: Vec<FileView>) -> RunView {
        RunView {
            id,
            order: id,
            files: files.into(),
        }
    }

    #[test]
    fn level0_pushes_its_oldest_run_with_overlapping_level1_files() {
        let p = Leveled::from_params(&[("b0", "2"), ("b", "4")], defaults()).unwrap();
        let view = TreeView {
            levels: vec![
                LevelView {
                    runs: vec![
                        run(9, vec![file("1[0-255]=10")]),
                        run(8, vec![file("2[0-255]=10")]),
                        run(7, vec![file("3[20-60]=10")]),
                    ]
                    .into(),
                },
                LevelView {
                    runs: vec![run(
                        5,
                        vec![file("4[0-10]=10"), file("5[30-40]=10"), file("6[50-90]=10")],
                    )]
                    .into(),
                },
            ],
            memtable_bytes: 10,
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
                        vec![
                            file("1[0-40]=10"),
                            file("2[50-90]=10"),
                            file("3[100-140]=10"),
                        ],
                    )]
                    .into(),
                },
                LevelView {
                    runs: vec![run(
                        2,
                        vec![
                            file("4[0-10]=1"),
                            file("5[20-30]=1"),
                            file("6[60-70]=15"),
                            file("7[100-110]=1"),
                            file("8[120-130]=1"),
                        ],
                    )]
                    .into(),
                },
            ],
            memtable_bytes: 10,
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

    fn tile(id: u64, lo: u8, hi: u8, mbr: (f64, f64, f64, f64)) -> RunView {
        let mut file = file(&format!("{id}[{lo}-{hi}]=10"));
        file.mbr = Some(crate::geometry::Rect::new(mbr.0, mbr.1, mbr.2, mbr.3));
        RunView {
            id,
            order: TILE_RANK,
            files: vec![file].into(),
        }
    }

    #[test]
    fn tiled_levels_push_the_tile_overlapping_fewest_tiles_below() {
        let p = Leveled::from_params(&[("b0", "2"), ("b", "2"), ("partition", "str")], defaults())
            .unwrap();
        assert_eq!(p.spec(), "stack-leveled:b0=2,b=2,partition=str");
        // Level 1 (capacity 20) holds 30 bytes in three tiles; below, tile
        // 10 sits under tiles 1 and 2 by MBR, tile 11 under tile 2 only;
        // tile 3 overlaps tile 12's key range but not its MBR.
        let view = TreeView {
            levels: vec![
                LevelView::default(),
                LevelView {
                    runs: vec![
                        tile(1, 0, 50, (0.0, 0.0, 1.0, 1.0)),
                        tile(2, 10, 60, (0.5, 0.5, 3.0, 3.0)),
                        tile(3, 20, 90, (8.0, 8.0, 9.0, 9.0)),
                    ]
                    .into(),
                },
                LevelView {
                    runs: vec![
                        tile(10, 0, 90, (0.0, 0.0, 1.0, 1.0)),
                        tile(11, 0, 90, (2.0, 2.0, 4.0, 4.0)),
                        tile(12, 0, 90, (5.0, 5.0, 6.0, 6.0)),
                    ]
                    .into(),
                },
            ],
            memtable_bytes: 10,
            ..Default::default()
        };
        let t = p.pick(&view);
        assert_eq!(t.len(), 1);
        // Tile 3 overlaps nothing below: it moves down as a tile.
        assert_eq!(t[0].inputs.len(), 1);
        assert_eq!((t[0].inputs[0].level, t[0].inputs[0].run_id), (1, 3));
        assert_eq!(t[0].output_run, OutputRun::Tiles);
        assert_eq!(t[0].partitioning.map(|p| p.partition), Some(Partition::Str));
        // Without tile 3, tile 1 (one overlap) goes before tile 2 (two).
        let mut view = view;
        view.levels[1].runs.pop();
        view.levels[1]
            .runs
            .push(tile(4, 0, 1, (20.0, 20.0, 21.0, 21.0)));
        let first = view.levels[1].runs[2].files.first().unwrap().id;
        view.levels[1].runs[2]
            .files
            .update(first, |f| f.busy = true);
        let t = p.pick(&view);
        let ids: Vec<(usize, u64)> = t[0].inputs.iter().map(|i| (i.level, i.run_id)).collect();
        assert_eq!(ids, [(1, 1), (2, 10)]);
        // Level 0 over b0 pushes its oldest run into the tiles it touches.
        view.levels[1].runs = std::mem::take(&mut view.levels[2].runs);
        view.levels[0].runs = vec![
            run(9, vec![file("5[0-90]=10")]),
            run(8, vec![file("6[0-90]=10")]),
            run(7, vec![file("7[0-90]=10")]),
        ]
        .into();
        let first = view.levels[0].runs[2].files.first().unwrap().id;
        view.levels[0].runs[2].files.update(first, |f| {
            f.mbr = Some(crate::geometry::Rect::new(3.0, 3.0, 5.5, 5.5))
        });
        let t = p.pick(&view);
        let ids: Vec<(usize, u64)> = t[0].inputs.iter().map(|i| (i.level, i.run_id)).collect();
        assert_eq!(ids, [(0, 7), (1, 11), (1, 12)]);
        assert!(Leveled::from_params(&[("partition", "global")], defaults()).is_err());
        assert!(crate::policy::stack::Binomial::from_params(
            &[("k", "4"), ("partition", "str")],
            defaults()
        )
        .is_err());
    }

    #[test]
    fn empty_next_level_gets_a_new_run_and_params_are_checked() {
        let p = Leveled::from_params(&[("b0", "1")], defaults()).unwrap();
        let view = TreeView {
            levels: vec![LevelView {
                runs: vec![
                    run(2, vec![file("1[0-9]=1")]),
                    run(1, vec![file("2[0-9]=1")]),
                ]
                .into(),
            }],
            memtable_bytes: 1,
            ..Default::default()
        };
        let t = p.pick(&view);
        assert_eq!(t[0].output_run, OutputRun::New);
        assert_eq!(t[0].inputs.len(), 1);
        assert!(Leveled::from_params(&[("b", "1")], defaults()).is_err());
        assert!(Leveled::from_params(&[("b0", "0")], defaults()).is_err());
        assert_eq!(p.spec(), "stack-leveled:b0=1,b=4");
    }
}
