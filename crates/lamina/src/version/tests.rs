use std::sync::atomic::AtomicU64;
use std::sync::OnceLock;

use super::edit::{TAG_ADD_FILE, TAG_FILE_MBR};
use super::*;
use crate::coding::put_varint;
use crate::spatial::Rect;

pub(crate) fn meta(id: u64, lo: &[u8], hi: &[u8]) -> FileMeta {
    FileMeta {
        id,
        size: 100,
        entries: 10,
        tombstones: 1,
        smallest: lo.to_vec(),
        largest: hi.to_vec(),
        smallest_seq: 1,
        largest_seq: 9,
        created_ms: 7,
        oldest_tombstone_ms: Some(3),
        raw_bytes: 90,
        arrived_ms: AtomicU64::new(7),
        last_read_ms: AtomicU64::new(0),
        mbr: None,
        range_tombstones: OnceLock::new(),
    }
}

/// (level, run id, file id, smallest, largest)
type FileSpec<'a> = (usize, u64, u64, &'a [u8], &'a [u8]);

fn edit_with(runs: &[(usize, u64, u64)], files: &[FileSpec<'_>]) -> VersionEdit {
    VersionEdit {
        new_runs: runs
            .iter()
            .map(|&(level, run_id, order)| NewRun {
                level,
                run_id,
                order,
            })
            .collect(),
        added_files: files
            .iter()
            .map(|&(level, run_id, id, lo, hi)| AddedFile {
                level,
                run_id,
                meta: meta(id, lo, hi),
            })
            .collect(),
        ..Default::default()
    }
}

/// `edit` with file `file_id` of run `run_id` (level `level`) removed.
fn removing(mut edit: VersionEdit, level: usize, run_id: u64, file_id: u64) -> VersionEdit {
    edit.removed_files.push(RemovedFile {
        level,
        run_id,
        file_id,
    });
    edit
}

#[test]
fn edit_roundtrip() {
    let mut e = edit_with(&[(1, 3, 4)], &[(1, 3, 9, b"a", b"z")]);
    e.log_number = Some(5);
    e.last_seq = Some(77);
    e.removed_files.push(RemovedFile {
        level: 0,
        run_id: 1,
        file_id: 2,
    });
    let d = VersionEdit::decode(&e.encode()).unwrap();
    assert_eq!(d.log_number, Some(5));
    assert_eq!(d.last_seq, Some(77));
    assert_eq!(d.new_runs, e.new_runs);
    assert_eq!(d.removed_files, e.removed_files);
    assert_eq!(d.added_files[0].meta.largest, b"z");
    assert_eq!(d.added_files[0].meta.oldest_tombstone_ms, Some(3));
    assert!(VersionEdit::decode(&[0xff]).is_none());
    assert!(VersionEdit::decode(&[TAG_ADD_FILE as u8, 1]).is_none());
}

/// A round's base (the freeze rule's) survives the manifest: logged
/// with the edit and written again by the snapshot that begins a new
/// manifest, with the round's bytes in rebuilt from its table.
#[test]
fn a_buffer_round_base_survives_edits_and_snapshots() {
    let mut e = edit_with(&[(2, 7, 1)], &[(2, 7, 1, b"a", b"z")]);
    let kept = meta(3, b"b", b"c");
    let round_in = kept.size;
    e.buffer = vec![
        BufferChange::New {
            host: 7,
            complete: true,
        },
        BufferChange::Round {
            host: 7,
            bytes: 1_000,
        },
        BufferChange::Keep {
            host: 7,
            source: 5,
            file: kept,
        },
    ];
    let logged = Version::default()
        .apply(&VersionEdit::decode(&e.encode()).unwrap())
        .unwrap();
    let snap = VersionEdit::decode(&VersionEdit::snapshot_of(&logged).encode()).unwrap();
    let reopened = Version::default().apply(&snap).unwrap();
    for v in [&logged, &reopened] {
        let b = &v.buffers[&7];
        assert_eq!(b.round_base(), Some(1_000));
        // The host holds the round's bytes on top of its base: nothing
        // repeated; at the base alone, all of it.
        assert_eq!(b.repeated_in_round(1_000 + round_in), Some(0.0));
        assert_eq!(b.repeated_in_round(1_000), Some(1.0));
    }
}

/// Two concurrent compactions: one moves a file from level 1 into
/// level 2's run 7 (taking none of its files), the other takes run 7's
/// only file down to level 3 and lands first, so run 7 is gone. The
/// first edit, rebased, creates run 7 again with its rank; without the
/// rebase it is refused; a run the base never had is still refused.
#[test]
fn an_edit_into_a_run_emptied_meanwhile_recreates_it() {
    let base = Version::default()
        .apply(&edit_with(
            &[(1, 5, 1), (2, 7, 9)],
            &[(1, 5, 1, b"a", b"c"), (2, 7, 2, b"m", b"p")],
        ))
        .unwrap();
    // The other compaction: run 7's file to a new run of level 3.
    let down = removing(edit_with(&[(3, 8, 1)], &[(3, 8, 2, b"m", b"p")]), 2, 7, 2);
    let now = base.apply(&down).unwrap();
    assert!(now.levels[2].runs.is_empty());
    // This one: file 1 from run 5 into run 7, planned against `base`.
    let mut into = removing(edit_with(&[], &[(2, 7, 1, b"a", b"c")]), 1, 5, 1);
    assert!(now.apply(&into).is_err(), "refused without the rebase");
    assert_eq!(into.shadowed_run(&base, &now), Some(7));
    into.recreate_emptied_runs(&base, &now);
    assert_eq!(into.shadowed_run(&base, &now), None);
    assert_eq!(
        into.new_runs,
        vec![NewRun {
            level: 2,
            run_id: 7,
            order: 9
        }]
    );
    let after = now.apply(&into).unwrap();
    let run = &after.levels[2].runs[0];
    assert_eq!((run.id, run.order), (7, 9));
    assert_eq!(run.files.iter().map(|f| f.id).collect::<Vec<_>>(), [1]);
    assert_eq!(after.levels[3].runs[0].files[0].id, 2);
    // A run the base never had is not made up.
    let mut stray = edit_with(&[], &[(2, 99, 3, b"x", b"y")]);
    stray.recreate_emptied_runs(&base, &now);
    assert!(stray.new_runs.is_empty());
    assert_eq!(stray.shadowed_run(&base, &now), None, "a bug, not a race");
    assert!(now.apply(&stray).is_err());

    // Had the other compaction folded run 7 into a newer run of level
    // 2 over the added file's keys, the added file (newer data) would
    // read as older than it: the edit is refused instead.
    let fold = removing(edit_with(&[(2, 8, 10)], &[(2, 8, 3, b"b", b"p")]), 2, 7, 2);
    let folded = base.apply(&fold).unwrap();
    let mut into = edit_with(&[], &[(2, 7, 1, b"a", b"c")]);
    into.recreate_emptied_runs(&base, &folded);
    assert!(into.new_runs.is_empty());
    assert_eq!(into.shadowed_run(&base, &folded), Some(7));
    assert!(folded.apply(&into).is_err());
    // A newer run elsewhere in the key space does not stand in the way.
    let apart = removing(edit_with(&[(2, 8, 10)], &[(2, 8, 3, b"m", b"p")]), 2, 7, 2);
    let apart = base.apply(&apart).unwrap();
    let mut into = edit_with(&[], &[(2, 7, 1, b"a", b"c")]);
    into.recreate_emptied_runs(&base, &apart);
    assert_eq!(into.new_runs.len(), 1);
    assert!(apart.apply(&into).is_ok());
}

#[test]
fn mbrs_roundtrip_and_bind_to_their_file() {
    let mbr = Rect::new(-1.5, 2.0, 3.0, 4.25);
    let mut e = edit_with(
        &[(1, 3, 4)],
        &[(1, 3, 9, b"a", b"m"), (1, 3, 10, b"n", b"z")],
    );
    e.added_files[1].meta.mbr = Some(mbr);
    let mut kept = meta(11, b"a", b"b");
    kept.mbr = Some(Rect::ALL);
    e.buffer.push(BufferChange::Keep {
        host: 3,
        source: 2,
        file: kept,
    });
    let raw = e.encode();
    let d = VersionEdit::decode(&raw).unwrap();
    assert_eq!(d.added_files[0].meta.mbr, None);
    assert_eq!(d.added_files[1].meta.mbr, Some(mbr));
    match &d.buffer[0] {
        BufferChange::Keep { file, .. } => assert_eq!(file.mbr, Some(Rect::ALL)),
        other => panic!("{other:?}"),
    }
    // Independently laid out: an MBR record for a file the edit did not
    // just add, or with a NaN corner, is malformed.
    let mut stray = Vec::new();
    put_varint(&mut stray, TAG_FILE_MBR);
    put_varint(&mut stray, 99);
    for v in [0.0f64, 0.0, 1.0, 1.0] {
        stray.extend_from_slice(&v.to_le_bytes());
    }
    assert!(VersionEdit::decode(&stray).is_none());
    let mut nan = edit_with(&[(1, 3, 4)], &[(1, 3, 9, b"a", b"m")]).encode();
    put_varint(&mut nan, TAG_FILE_MBR);
    put_varint(&mut nan, 9);
    for v in [0.0f64, f64::NAN, 1.0, 1.0] {
        nan.extend_from_slice(&v.to_le_bytes());
    }
    assert!(VersionEdit::decode(&nan).is_none());
}

#[test]
fn runs_order_newest_first_and_files_sorted() {
    let v = Version::default()
        .apply(&edit_with(
            &[(0, 1, 1), (0, 2, 2)],
            &[
                (0, 1, 10, b"m", b"p"),
                (0, 1, 11, b"a", b"c"),
                (0, 2, 12, b"b", b"x"),
            ],
        ))
        .unwrap();
    let ids: Vec<u64> = v.levels[0].runs.iter().map(|r| r.id).collect();
    assert_eq!(ids, vec![2, 1]);
    let files: Vec<u64> = v.levels[0].runs[1].files.iter().map(|f| f.id).collect();
    assert_eq!(files, vec![11, 10]);
    assert_eq!(v.levels[0].runs[1].file_for(b"n").map(|f| f.id), Some(10));
    assert!(v.levels[0].runs[1].file_for(b"d").is_none());
}

#[test]
fn overlapping_file_in_a_run_is_rejected_and_moves_keep_the_arc() {
    let v = Version::default()
        .apply(&edit_with(&[(0, 1, 1)], &[(0, 1, 10, b"a", b"f")]))
        .unwrap();
    assert!(v.apply(&edit_with(&[], &[(0, 1, 11, b"e", b"g")])).is_err());
    let before = Arc::clone(&v.levels[0].runs[0].files[0]);
    let mut mv = edit_with(&[(1, 5, 1)], &[(1, 5, 10, b"a", b"f")]);
    mv.removed_files.push(RemovedFile {
        level: 0,
        run_id: 1,
        file_id: 10,
    });
    let v2 = v.apply(&mv).unwrap();
    assert_eq!(v2.levels[0].runs.len(), 0);
    assert!(Arc::ptr_eq(&before, &v2.levels[1].runs[0].files[0]));
}

#[test]
fn a_refused_edit_is_a_refusal_live_and_corruption_in_a_manifest() {
    use crate::manifest::{recover, Counters, Manifest};
    use crate::vfs::mem::MemFs;
    use crate::vfs::Vfs;
    use std::path::Path;

    let v = Version::default()
        .apply(&edit_with(&[(0, 1, 1)], &[(0, 1, 10, b"a", b"f")]))
        .unwrap();
    let stray = edit_with(&[], &[(1, 99, 11, b"x", b"y")]);
    // Made by the engine: a refusal naming the run, not damage on disk.
    match v.apply(&stray) {
        Err(Error::EditRefused(reason)) => assert_eq!(reason, "addition to unknown run 99"),
        other => panic!("expected a refusal, got {other:?}"),
    }
    // Read from a manifest: corruption at the record that holds it.
    let fs = MemFs::new();
    let dir = Path::new("/db");
    fs.create_dir_all(dir).unwrap();
    let mut manifest = Manifest::create(&fs, dir, 2, &v, Counters::default()).unwrap();
    let name = crate::manifest::manifest_name(2);
    let before = fs.read_all(&dir.join(&name)).unwrap().len() as u64;
    manifest
        .log(&fs, &stray, &v, Counters::default(), || 3)
        .unwrap();
    match recover(&fs, dir) {
        Err(Error::Corruption {
            file,
            offset,
            reason,
        }) => {
            assert_eq!((file.as_str(), offset), (name.as_str(), before));
            assert_eq!(
                reason,
                "version edit does not apply to the current version: \
                 addition to unknown run 99"
            );
        }
        other => panic!("expected corruption, got {other:?}"),
    }
}
