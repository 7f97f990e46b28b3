//! Tests of [`plan`](super::plan) and [`apply`](super::apply).

use super::*;
use crate::view::notation::file;
use crate::{placement, LevelView, OutputRun, TaskInput};

/// Runs `(level, run id, files)` newest first; orders count down.
fn tree(runs: Vec<(usize, u64, Vec<FileView>)>) -> TreeView {
    let mut view = TreeView::default();
    let n = runs.len() as u64;
    for (i, (level, id, files)) in runs.into_iter().enumerate() {
        while view.levels.len() <= level {
            view.levels.push(LevelView::default());
        }
        view.levels[level].runs.push(RunView {
            id,
            order: n - i as u64,
            files: files.into(),
        });
    }
    view
}

fn task(inputs: &[(usize, u64, &[u64])], level: usize, output: OutputRun) -> CompactionTask {
    CompactionTask {
        inputs: inputs
            .iter()
            .map(|(l, r, f)| TaskInput {
                level: *l,
                run_id: *r,
                file_ids: f.to_vec(),
            })
            .collect(),
        output_level: level,
        output_run: output,
        target_file_size: 100,
        partitioning: None,
        buffer: None,
        reason: "test".into(),
    }
}

fn refused(view: &TreeView, t: &CompactionTask, why: &str) {
    let e = plan(view, t).expect_err("refused").to_string();
    assert!(e.contains(why), "{e}");
}

/// A task naming many runs (a piled-up level 0 merged whole) finds
/// them by lookup: the same plan, and the same refusals, as by scan.
#[test]
fn many_runs_are_found_and_checked_as_few_are() {
    // Twelve overlapping one-file runs of level 0, newest first.
    let runs: Vec<(usize, u64, Vec<FileView>)> = (0..12u64)
        .map(|i| (0, 100 + i, vec![file(&format!("{}['a'-'z']=10", 1 + i))]))
        .collect();
    let view = tree(runs);
    let all: Vec<(usize, u64, Vec<u64>)> = (0..12u64).map(|i| (0, 100 + i, vec![1 + i])).collect();
    let named = |inputs: &[(usize, u64, Vec<u64>)]| {
        let inputs: Vec<(usize, u64, &[u64])> =
            inputs.iter().map(|(l, r, f)| (*l, *r, &f[..])).collect();
        task(&inputs, 1, OutputRun::New)
    };
    let p = plan(&view, &named(&all)).unwrap();
    let order: Vec<u64> = p.inputs.iter().map(|i| i.run_id).collect();
    assert_eq!(order, (100..112).collect::<Vec<u64>>(), "newest first");
    assert_eq!(
        (p.action, p.destination),
        (Action::Merge, Destination::New { order: 12 })
    );
    // Named in another order: the same plan.
    let mut shuffled = all.clone();
    shuffled.reverse();
    assert_eq!(plan(&view, &named(&shuffled)).unwrap().inputs.len(), 12);
    let mut twice = all.clone();
    twice.push((0, 105, vec![6]));
    refused(&view, &named(&twice), "run 105 named twice");
    let mut missing = all.clone();
    missing[7] = (0, 999, vec![8]);
    refused(&view, &named(&missing), "no run 999");
    // Leaving out a middle run that overlaps them would reorder keys.
    let mut gap = all;
    gap.remove(5);
    refused(&view, &named(&gap), "reorder versions");
}

/// Leveled's one-file push: file 1 (a..c) of run 10 merges into run 11,
/// whose file 11 (b..m) reaches under run 10's neighbour file 2 (k..p).
/// The output lands below file 2, which stays newer: allowed.
#[test]
fn a_push_past_an_overlapping_neighbour_is_allowed() {
    let view = tree(vec![
        (1, 10, vec![file("1['a'-'c']=10"), file("2['k'-'p']=10")]),
        (2, 11, vec![file("11['b'-'m']=10")]),
    ]);
    let p = plan(
        &view,
        &task(&[(1, 10, &[1]), (2, 11, &[11])], 2, OutputRun::Existing(11)),
    )
    .unwrap();
    assert_eq!(p.action, Action::Merge);
    assert_eq!(p.destination, Destination::Existing { id: 11, order: 1 });
    assert_eq!(p.input_file_ids().collect::<Vec<_>>(), [1, 11]);
}

/// Skipping a run: file 1 pushed into run 12 past run 11's file 21,
/// which shares keys with it, would make the older version newer.
#[test]
fn a_push_past_an_overlapping_newer_file_is_refused() {
    let view = tree(vec![
        (1, 10, vec![file("1['a'-'c']=10")]),
        (2, 11, vec![file("21['b'-'d']=10")]),
        (3, 12, vec![file("31['x'-'z']=10")]),
    ]);
    let reorder = "reorder versions";
    refused(
        &view,
        &task(&[(1, 10, &[1])], 3, OutputRun::Existing(12)),
        reorder,
    );
    // A new run in level 3 is just as wrong, one in level 2 is fine.
    refused(&view, &task(&[(1, 10, &[1])], 3, OutputRun::New), reorder);
    let p = plan(&view, &task(&[(1, 10, &[1])], 2, OutputRun::New)).unwrap();
    assert_eq!(p.action, Action::Move);
    // Without shared keys the push is safe, and a move.
    let view = tree(vec![
        (1, 10, vec![file("1['a'-'c']=10")]),
        (2, 11, vec![file("21['d'-'f']=10")]),
        (3, 12, vec![file("31['x'-'z']=10")]),
    ]);
    let p = plan(&view, &task(&[(1, 10, &[1])], 3, OutputRun::Existing(12))).unwrap();
    assert_eq!(p.action, Action::Move);
}

/// Merging runs 10 and 12 but not run 11 between them: run 12's data
/// would rise above run 11's overlapping file.
#[test]
fn lifting_an_older_input_above_a_newer_file_is_refused() {
    let view = tree(vec![
        (1, 10, vec![file("1['a'-'c']=10")]),
        (1, 11, vec![file("21['m'-'n']=10")]),
        (1, 12, vec![file("31['l'-'o']=10")]),
    ]);
    let inputs: &[(usize, u64, &[u64])] = &[(1, 10, &[1]), (1, 12, &[31])];
    refused(&view, &task(inputs, 1, OutputRun::New), "reorder versions");
    // Into run 12's place instead, below run 11: allowed.
    let p = plan(&view, &task(inputs, 1, OutputRun::Existing(12))).unwrap();
    assert_eq!(p.action, Action::Merge);
    // Runs 11 and 12 were older than the output; 12 is also an input,
    // but files of it that are not inputs would stay behind.
    assert_eq!(p.older_runs, []);
    let p = plan(&view, &task(&[(1, 10, &[1])], 1, OutputRun::Existing(11)));
    assert!(p.is_ok());
}

#[test]
fn bad_tasks_are_refused() {
    let mut view = tree(vec![
        (0, 10, vec![file("1['a'-'c']=10")]),
        (1, 11, vec![file("2['a'-'b']=10"), file("3['x'-'z']=10")]),
    ]);
    refused(&view, &task(&[(0, 9, &[1])], 1, OutputRun::New), "no run 9");
    refused(
        &view,
        &task(&[(0, 10, &[7])], 1, OutputRun::New),
        "no file 7",
    );
    refused(
        &view,
        &task(&[(0, 10, &[1, 1])], 1, OutputRun::New),
        "named twice",
    );
    refused(&view, &task(&[], 1, OutputRun::New), "no input files");
    refused(
        &view,
        &task(&[(0, 10, &[1])], 4, OutputRun::New),
        "skips a level",
    );
    refused(
        &view,
        &task(&[(0, 10, &[1])], 1, OutputRun::Existing(5)),
        "no output run 5",
    );
    // File 2 of the output run lies in the merged range but is no input.
    refused(
        &view,
        &task(&[(0, 10, &[1])], 1, OutputRun::Existing(11)),
        "not an input",
    );
    // The output may not rise above its inputs.
    refused(
        &view,
        &task(&[(1, 11, &[3])], 0, OutputRun::Existing(10)),
        "newer than its inputs",
    );
    let first = view.levels[0].runs[0].files.first().unwrap().id;
    view.levels[0].runs[0]
        .files
        .update(first, |f| f.busy = true);
    refused(
        &view,
        &task(&[(0, 10, &[1])], 1, OutputRun::New),
        "being compacted",
    );
}

/// A merge of a whole level names thousands of files: finding an id
/// named twice costs a comparison per id, not per pair of ids. Repeats
/// are still refused, wherever they are.
#[test]
fn the_repeat_check_is_linear_in_the_ids() {
    let n = 2000u64;
    let files = (1..=n)
        .map(|id| file(&format!("{id}[{id}-{id}]=10")))
        .collect();
    let view = tree(vec![(0, 10, files)]);
    let ids: Vec<u64> = (1..=n).rev().collect();
    let before = crate::work::id_checks();
    let p = plan(&view, &task(&[(0, 10, &ids)], 1, OutputRun::New)).unwrap();
    assert_eq!(p.input_file_ids().count() as u64, n);
    let checks = crate::work::id_checks() - before;
    assert!(checks <= n, "{checks} comparisons for {n} ids");
    for repeat in [1, n / 2, n] {
        let mut twice = ids.clone();
        twice.push(repeat);
        refused(
            &view,
            &task(&[(0, 10, &twice)], 1, OutputRun::New),
            &format!("file {repeat} named twice"),
        );
        // Named in the run's order, the check needs no set until the
        // order breaks, and still finds the repeat, next to its first
        // naming or after the last id.
        let ascending: Vec<u64> = (1..=n).collect();
        for at in [repeat as usize, n as usize] {
            let mut twice = ascending.clone();
            twice.insert(at, repeat);
            refused(
                &view,
                &task(&[(0, 10, &twice)], 1, OutputRun::New),
                &format!("file {repeat} named twice"),
            );
        }
    }
    let before = crate::work::id_checks();
    let ascending: Vec<u64> = (1..=n).collect();
    plan(&view, &task(&[(0, 10, &ascending)], 1, OutputRun::New)).unwrap();
    assert_eq!(crate::work::id_checks() - before, n);
}

/// A push into a large run names a few hundred of its files: the planner
/// finds them and `apply` takes them out and files the outputs with a
/// few searches of the run in all, not one (or three) per file. The
/// tree after it is the one a rebuild from scratch gives.
#[test]
fn a_merge_costs_searches_per_run_not_per_file() {
    let span = |id: u64, lo: u64, hi: u64| file(&format!("{id}[{lo}-{hi}]=10"));
    // Level 2: files [10k, 10k + 9] for k < 5000; level 1: one file
    // over 300 of them.
    let lower: Vec<FileView> = (0..5000).map(|k| span(k + 1, 10 * k, 10 * k + 9)).collect();
    let mut view = tree(vec![
        (1, 10, vec![span(9000, 20_000, 22_995)]),
        (2, 11, lower.clone()),
    ]);
    let under: Vec<u64> = (2000..2300).map(|k| k + 1).collect();
    let t = task(
        &[(1, 10, &[9000]), (2, 11, &under)],
        2,
        OutputRun::Existing(11),
    );
    let before = crate::work::searches();
    let p = plan(&view, &t).unwrap();
    let planned = crate::work::searches() - before;
    assert_eq!(p.input_file_ids().count(), 301);
    assert!(planned <= 8, "{planned} searches to plan a 301-file merge");

    // 150 outputs of 20 keys each in the merged range.
    let outputs: Vec<FileView> = (0..150)
        .map(|k| span(10_000 + k, 20_000 + 20 * k, 20_000 + 20 * k + 19))
        .collect();
    let before = crate::work::searches();
    apply(&mut view, &p, outputs.clone(), 0);
    let applied = crate::work::searches() - before;
    assert!(applied <= 8, "{applied} searches to apply a 301-file merge");

    // The oracle: level 2 rebuilt from a sorted vector.
    let mut expected: Vec<FileView> = lower
        .into_iter()
        .filter(|f| !under.contains(&f.id))
        .chain(outputs)
        .collect();
    expected.sort_by(|a, b| a.smallest.cmp(&b.smallest));
    let got: Vec<(u64, Vec<u8>)> = view.levels[2].runs[0]
        .files
        .iter()
        .map(|f| (f.id, f.smallest.to_vec()))
        .collect();
    let want: Vec<(u64, Vec<u8>)> = expected
        .iter()
        .map(|f| (f.id, f.smallest.to_vec()))
        .collect();
    assert_eq!(got, want);
    assert_eq!(view.levels[2].runs[0].bytes(), 10 * want.len() as u64);
    assert!(view.levels[1].runs.is_empty());
    for f in &expected {
        assert_eq!(
            view.levels[2].runs[0].files.get(f.id).map(|g| g.id),
            Some(f.id)
        );
    }
}

/// Level 1 holds tiles 20 and 21 (key ranges overlapping, MBRs apart);
/// level 2 tiles 30 (under 20) and 31 (touching 21's MBR). Pushing tile
/// 20 down with tile 30 passes over tile 21 (a peer) and tile 31 (MBR
/// apart), and makes one tile run per output file, named after it.
#[test]
fn tiles_need_no_order_among_peers_and_mbrs_prove_disjoint_keys() {
    let tile = |level, f: FileView| (level, f.id, vec![f]);
    let mut view = tree(vec![
        tile(1, file("20['a'-'m']=10{mbr=0:0:1:1}")),
        tile(1, file("21['b'-'n']=10{mbr=5:5:6:6}")),
        tile(2, file("30['a'-'z']=10{mbr=0.5:0.5:2:2}")),
        tile(2, file("31['c'-'y']=10{mbr=6:6:7:7}")),
    ]);
    for level in &mut view.levels {
        for run in &mut level.runs {
            run.order = placement::TILE_RANK;
        }
    }
    let push = task(&[(1, 20, &[20]), (2, 30, &[30])], 2, OutputRun::Tiles);
    let p = plan(&view, &push).unwrap();
    assert_eq!(
        (p.action, p.destination),
        (Action::Merge, Destination::Tiles)
    );
    // Without tile 30 the output would rise above a version it shares.
    refused(
        &view,
        &task(&[(1, 20, &[20])], 2, OutputRun::Tiles),
        "reorder versions",
    );
    // Tile 21 shares keys and MBR with tile 31: pushed alone, refused.
    refused(
        &view,
        &task(&[(1, 21, &[21])], 2, OutputRun::Tiles),
        "reorder versions",
    );
    apply(
        &mut view,
        &p,
        vec![
            file("40['a'-'k']=10{mbr=0:0:1:2}"),
            file("41['b'-'m']=10{mbr=1.5:0:2:2}"),
        ],
        0,
    );
    let level2: Vec<(u64, u64, Vec<u64>)> = view.levels[2]
        .runs
        .iter()
        .map(|r| (r.id, r.order, r.files.iter().map(|f| f.id).collect()))
        .collect();
    assert_eq!(
        level2,
        [(40, 0, vec![40]), (41, 0, vec![41]), (31, 0, vec![31])]
    );
    assert_eq!(view.levels[1].runs.len(), 1);
}

#[test]
fn apply_places_outputs_and_drops_what_emptied() {
    let mut view = tree(vec![
        (0, 10, vec![file("1['a'-'c']=10")]),
        (0, 11, vec![file("2['b'-'d']=10")]),
        (1, 12, vec![file("3['a'-'b']=10"), file("4['x'-'z']=10")]),
    ]);
    // Merge level 0 with file 3 into level 1's run.
    let p = plan(
        &view,
        &task(
            &[(0, 10, &[1]), (0, 11, &[2]), (1, 12, &[3])],
            1,
            OutputRun::Existing(12),
        ),
    )
    .unwrap();
    assert_eq!(p.input_bytes(), 30);
    apply(&mut view, &p, vec![file("5['a'-'d']=10")], 0);
    assert_eq!(view.levels[0].runs.len(), 0);
    let ids: Vec<u64> = view.levels[1].runs[0].files.iter().map(|f| f.id).collect();
    assert_eq!(ids, [5, 4]);
    // Move run 12 down to a new run of level 2: level 1 empties.
    let p = plan(&view, &task(&[(1, 12, &[5, 4])], 2, OutputRun::New)).unwrap();
    assert_eq!(p.action, Action::Move);
    let moved = p.inputs[0].files.clone();
    apply(&mut view, &p, moved, 13);
    assert_eq!(view.levels.len(), 3);
    assert!(view.levels[1].runs.is_empty());
    assert_eq!(view.levels[2].runs[0].id, 13);
    assert_eq!(view.levels[2].runs[0].order, 1);
}

/// Two merges planned against the same tree, as the simulator's
/// asynchronous merges are: one moves file 1 into a gap of level 2's
/// run 12, the other takes run 12's only file down to level 3 and is
/// applied first. The first one's outputs are not lost: run 12 is
/// created again with its rank, as the engine's edit does.
#[test]
fn apply_recreates_an_output_run_a_concurrent_merge_emptied() {
    let mut view = tree(vec![
        (1, 11, vec![file("1['a'-'c']=10")]),
        (2, 12, vec![file("2['m'-'p']=10")]),
    ]);
    let into = plan(&view, &task(&[(1, 11, &[1])], 2, OutputRun::Existing(12))).unwrap();
    let down = plan(&view, &task(&[(2, 12, &[2])], 3, OutputRun::New)).unwrap();
    assert_eq!(into.destination, Destination::Existing { id: 12, order: 1 });
    let moved = down.inputs[0].files.clone();
    apply(&mut view, &down, moved, 13);
    assert!(view.levels[2].runs.is_empty());
    let moved = into.inputs[0].files.clone();
    apply(&mut view, &into, moved, 0);
    let run = &view.levels[2].runs[0];
    assert_eq!((run.id, run.order), (12, 1));
    assert_eq!(run.files.iter().map(|f| f.id).collect::<Vec<_>>(), [1]);
    assert_eq!(view.levels[3].runs[0].files.first().map(|f| f.id), Some(2));
    assert!(view.levels[1].runs.is_empty());
}
