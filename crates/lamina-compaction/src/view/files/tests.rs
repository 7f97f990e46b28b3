//! Tests of [`Files`](super::Files).

use super::*;

use crate::view::notation::file;

/// A file over one-byte keys `[lo, hi]` (computed keys), in the tree
/// notation.
fn file_at(id: u64, lo: u8, hi: u8, size: u64) -> FileView {
    file(&format!("{id}[x{lo:02x}-x{hi:02x}]={size}"))
}

fn ids<'a>(files: impl IntoIterator<Item = &'a FileView>) -> Vec<u64> {
    files.into_iter().map(|f| f.id).collect()
}

/// The oracle: a sorted vector scanned in full.
fn scan(files: &[FileView], lo: u8, hi: u8) -> Vec<u64> {
    files
        .iter()
        .filter(|f| f.smallest[0] <= hi && lo <= f.largest[0])
        .map(|f| f.id)
        .collect()
}

#[test]
fn overlapping_matches_a_scan() {
    // Files [10k, 10k + 5] for k = 1..=9, inserted out of order.
    let mut all: Vec<FileView> = (1..=9)
        .map(|k| file_at(k, 10 * k as u8, 10 * k as u8 + 5, k))
        .collect();
    let run: Files = all.iter().rev().cloned().collect();
    assert_eq!(ids(&run), (1..=9).collect::<Vec<_>>());
    assert_eq!(run.bytes(), 45);
    all.sort_by(|a, b| a.smallest.cmp(&b.smallest));
    for lo in 0..=100u8 {
        for hi in 0..=100u8 {
            let expected = scan(&all, lo, hi);
            assert_eq!(ids(run.overlapping(&[lo], &[hi])), expected, "{lo}..{hi}");
            let (lo_key, hi_key) = (PackedKey::new(&[lo]), PackedKey::new(&[hi]));
            let spans: Vec<u64> = run
                .spans_overlapping(&lo_key, &hi_key)
                .map(|(_, _, size)| size)
                .collect();
            // Sizes are the ids here.
            assert_eq!(spans, expected, "{lo}..{hi}");
        }
    }
}

#[test]
fn edits_keep_order_ids_and_bytes() {
    let mut run: Files = vec![
        file("1[x00-x09]=10"),
        file("2[x0a-x13]=20"),
        file("3[x14-x1d]=30"),
    ]
    .into();
    assert_eq!(*run.get(2).unwrap().smallest, [10]);
    assert_eq!(run.remove(2).unwrap().id, 2);
    assert!(run.get(2).is_none() && run.remove(2).is_none());
    assert_eq!((run.len(), run.bytes()), (2, 40));
    run.insert(file("4[x0c-x0f]=5"));
    assert_eq!(ids(&run), [1, 4, 3]);
    assert!(run.update(4, |f| {
        f.smallest = vec![30].into();
        f.largest = vec![35].into();
        f.size = 7;
    }));
    assert_eq!(ids(&run), [1, 3, 4]);
    assert_eq!(run.bytes(), 47);
    assert_eq!(run.at(&[30]).unwrap().id, 4);
    assert!(run.at(&[31]).is_none());
    assert_eq!((run.first().unwrap().id, run.last().unwrap().id), (1, 4));
    // Re-inserting an id replaces the file.
    run.insert(file("1[x00-x05]=1"));
    assert_eq!((run.len(), run.bytes()), (3, 38));
    // Tombstones are counted as files come and go, by each path.
    assert_eq!(run.tombstones(), 0);
    assert!(run.update(3, |f| f.tombstones = 5));
    run.extend([FileView {
        tombstones: 2,
        ..file("7[x28-x2d]=1")
    }]);
    assert_eq!(run.tombstones(), 7);
    run.remove_all(&[3, 4]);
    assert_eq!(run.tombstones(), 2);
    run.remove(7);
    assert_eq!((run.tombstones(), run.bytes()), (0, 1));
}

/// Packed keys order as their bytes do: the oracle is `[u8]`'s order.
#[test]
fn packed_keys_order_as_bytes() {
    let keys: Vec<Vec<u8>> = [
        &b""[..],
        b"\0",
        b"a",
        b"a\0",
        b"a\x01",
        b"ab",
        b"abcdefgh",
        b"abcdefgh\0",
        b"abcdefgha",
        b"abcdefghb",
        b"abcdefgi",
        b"\xff\xff\xff\xff\xff\xff\xff\xff",
        b"\xff\xff\xff\xff\xff\xff\xff\xff\xff",
        b"b",
    ]
    .iter()
    .map(|k| k.to_vec())
    .collect();
    for a in &keys {
        for b in &keys {
            assert_eq!(
                PackedKey::new(a).cmp(&PackedKey::new(b)),
                a.cmp(b),
                "{a:?} vs {b:?}"
            );
        }
    }
}

proptest::proptest! {
    /// Random keys over an alphabet rich in the bytes that padding and
    /// prefixes confuse.
    #[test]
    fn packed_keys_order_as_random_bytes(
        a in proptest::collection::vec(proptest::sample::select(vec![0u8, 1, 0x61, 0xff]), 0..20),
        b in proptest::collection::vec(proptest::sample::select(vec![0u8, 1, 0x61, 0xff]), 0..20),
    ) {
        proptest::prop_assert_eq!(PackedKey::new(&a).cmp(&PackedKey::new(&b)), a.cmp(&b));
        proptest::prop_assert_eq!(PackedKey::new(&a) == PackedKey::new(&b), a == b);
    }
}

/// Ids made together hash next to each other (eight to a group), and
/// groups scatter: the map of a run of 10^6 files then touches a
/// merge's new ids in a cache line or two.
/// What a run keeps of its files' times: the newest (arrival, largest
/// key), whether last reads and sequence numbers all tie, the busy
/// files, and the ids in order of age (ties in key order).
type Times = (Option<(u64, Vec<u8>)>, bool, bool, usize, Vec<u64>);

/// [`Times`] by brute force.
fn scanned_times(files: &Files) -> Times {
    let all: Vec<&FileView> = files.iter().collect();
    let newest = all.iter().map(|f| (f.arrived_ms, f.largest.to_vec())).max();
    let tie = |k: fn(&FileView) -> u64| all.windows(2).all(|w| k(w[0]) == k(w[1]));
    let busy = all.iter().filter(|f| f.busy).count();
    let mut by_age = all.clone();
    by_age.sort_by_key(|f| f.smallest_seq);
    (
        newest,
        tie(|f| f.last_read_ms),
        tie(|f| f.smallest_seq),
        busy,
        by_age.iter().map(|f| f.id).collect(),
    )
}

fn kept_times(files: &Files) -> Times {
    (
        files.newest_arrival().map(|(at, key)| (at, key.to_vec())),
        files.reads_tie(),
        files.seqs_tie(),
        files.busy(),
        files.by_age().map(|f| f.id).collect(),
    )
}

proptest::proptest! {
    /// The times a run keeps as files come and go (one by one, a
    /// merge's inputs out and outputs in, edits, busy flags) are what a
    /// scan of its files finds, after every change, whether or not
    /// they were asked for in between (an unknown extreme is worked
    /// out again).
    #[test]
    fn kept_times_match_a_scan(
        ops in proptest::collection::vec(
            (0u8..5, 0u8..40, 0u8..6, 0u64..4, 0u64..3, proptest::bool::ANY),
            1..120,
        ),
        ask in proptest::collection::vec(proptest::bool::ANY, 120),
    ) {
        let mut run = Files::new();
        let mut next_id = 1u64;
        for (i, &(op, at, n, time, seq, busy)) in ops.iter().enumerate() {
            let timed = |id: u64, lo: u8, hi: u8| FileView {
                arrived_ms: time,
                last_read_ms: time % 2,
                smallest_seq: seq,
                busy,
                ..file_at(id, lo, hi, 1)
            };
            match op {
                // One file into a free key (files are disjoint).
                0 if run.overlapping(&[at], &[at]).next().is_none() => {
                    run.insert(timed(next_id, at, at));
                    next_id += 1;
                }
                // A merge: the files under [at, at + n] out, new ones in.
                1 => {
                    let hi = at.saturating_add(n);
                    let inputs = ids(run.overlapping(&[at], &[hi]));
                    let lo = run.overlapping(&[at], &[hi]).next().map_or(at, |f| f.smallest[0].min(at));
                    let top = run.overlapping(&[at], &[hi]).last().map_or(hi, |f| f.largest[0].max(hi));
                    run.remove_all(&inputs);
                    let outputs: Vec<FileView> = (lo..=top)
                        .step_by(2)
                        .map(|k| {
                            next_id += 1;
                            timed(next_id, k, k.saturating_add(1).min(top))
                        })
                        .collect();
                    run.extend(outputs);
                }
                2 => {
                    let id = run.overlapping(&[at], &[at]).next().map(|f| f.id);
                    if let Some(id) = id {
                        run.remove(id);
                    }
                }
                _ => {
                    let id = run.overlapping(&[at], &[at]).next().map(|f| f.id);
                    if let Some(id) = id {
                        run.update(id, |f| {
                            f.busy = busy;
                            f.last_read_ms = time;
                            f.smallest_seq = seq;
                        });
                    }
                }
            }
            if ask[i] {
                proptest::prop_assert_eq!(kept_times(&run), scanned_times(&run), "after op {}", i);
            }
        }
        proptest::prop_assert_eq!(kept_times(&run), scanned_times(&run));
    }
}

proptest::proptest! {
    /// Lookups by id find what a model of the run (id → key range)
    /// holds, whether answered by the position the last search left
    /// (a stale one after edits, or one of another file), the first
    /// file, or the id map built on the way; merges by key reuse boxes;
    /// and `Extend` with an id the run holds replaces that file.
    #[test]
    fn lookups_by_id_match_a_model(
        ops in proptest::collection::vec((0u8..6, 0u8..40, 0u8..6, 0u64..60), 1..150),
    ) {
        let mut run = Files::new();
        let mut model: std::collections::BTreeMap<u64, (u8, u8)> = Default::default();
        let mut next_id = 1u64;
        for (i, &(op, at, n, probe)) in ops.iter().enumerate() {
            match op {
                // One file into a free key.
                0 if run.overlapping(&[at], &[at]).next().is_none() => {
                    run.insert(file_at(next_id, at, at, 1));
                    model.insert(next_id, (at, at));
                    next_id += 1;
                }
                // A merge, by key: the files under [at, at + n] out, new
                // ones in their place.
                1 => {
                    let hi = at.saturating_add(n);
                    let inputs: Vec<FileView> = run.overlapping(&[at], &[hi]).cloned().collect();
                    let (Some(first), Some(last)) = (inputs.first(), inputs.last()) else {
                        continue;
                    };
                    let (lo, top) = (first.smallest[0], last.largest[0]);
                    let mut spare = Spare::default();
                    run.take_all(&inputs, &mut spare);
                    proptest::prop_assert_eq!(spare.0.len(), inputs.len());
                    for f in &inputs {
                        model.remove(&f.id);
                    }
                    let outputs: Vec<FileView> = (lo..=top)
                        .step_by(2)
                        .map(|k| {
                            next_id += 1;
                            model.insert(next_id, (k, k.saturating_add(1).min(top)));
                            file_at(next_id, k, k.saturating_add(1).min(top), 1)
                        })
                        .collect();
                    run.extend_from(outputs, &mut spare);
                }
                2 => {
                    proptest::prop_assert_eq!(run.remove(probe).map(|f| f.id), model.remove(&probe).map(|_| probe));
                }
                3 => {
                    let moved = run.update(probe, |f| f.size = 2);
                    proptest::prop_assert_eq!(moved, model.contains_key(&probe));
                }
                // `Extend` with a file the run holds: replaced.
                4 => {
                    if let Some(&(lo, hi)) = model.get(&probe) {
                        run.extend([file_at(probe, lo, hi, 3)]);
                    }
                }
                // Searches that leave a position behind.
                _ => {
                    let found = run.overlapping(&[at], &[at.saturating_add(n)]).next().map(|f| f.id);
                    if let Some(f) = found.and_then(|id| run.get(id)).cloned() {
                        run.window(&f, usize::from(n) + 1);
                    }
                }
            }
            for id in [probe, probe + 1, next_id - 1] {
                proptest::prop_assert_eq!(
                    run.get(id).map(|f| (f.id, f.smallest[0], f.largest[0])),
                    model.get(&id).map(|&(lo, hi)| (id, lo, hi)),
                    "id {} after op {}", id, i
                );
            }
            let mut expected: Vec<(u8, u64)> = model.iter().map(|(&id, &(lo, _))| (lo, id)).collect();
            expected.sort_unstable();
            proptest::prop_assert_eq!(ids(&run), expected.iter().map(|&(_, id)| id).collect::<Vec<_>>());
            let named: Vec<u64> = expected.iter().skip(usize::from(n)).take(3).map(|&(_, id)| id).collect();
            proptest::prop_assert_eq!(
                run.get_all(&named).map(|f| f.map(|f| f.id)).collect::<Vec<_>>(),
                named.iter().map(|&id| Some(id)).collect::<Vec<_>>()
            );
        }
    }
}

#[test]
fn ids_hash_in_groups_of_eight() {
    let hash = |id: u64| {
        let mut h = IdHasher::default();
        h.write_u64(id);
        h.finish()
    };
    for group in [0u64, 1, 12_345, 1 << 40] {
        let base = hash(8 * group);
        for rank in 1..8 {
            assert_eq!(hash(8 * group + rank), base.wrapping_add(rank));
        }
    }
    // The high bits (the table's tags) differ between groups.
    let tags: std::collections::HashSet<u64> = (0..1000u64).map(|g| hash(8 * g) >> 57).collect();
    assert!(tags.len() > 100, "{} tags", tags.len());
}

#[test]
fn windows_slide_back_at_the_end() {
    let run: Files = (1..=5)
        .map(|k| file_at(k, 10 * k as u8, 10 * k as u8 + 5, 1))
        .collect();
    let anchor = |id| run.get(id).unwrap().clone();
    assert_eq!(ids(run.window(&anchor(2), 2)), [2, 3]);
    assert_eq!(ids(run.window(&anchor(5), 3)), [3, 4, 5]);
    assert_eq!(ids(run.window(&anchor(1), 9)), [1, 2, 3, 4, 5]);
    assert!(run.window(&file("9[x00-x00]=1"), 2).is_empty());
}

#[test]
fn visits_count_files_handed_out() {
    let run: Files = (1..=50).map(|k| file_at(k, k as u8, k as u8, 1)).collect();
    let before = crate::work::file_visits();
    assert_eq!(run.overlapping(&[10], &[12]).count(), 3);
    assert_eq!(crate::work::file_visits() - before, 3);
    let before = crate::work::file_visits();
    assert_eq!(run.iter().filter(|f| f.id == 50).count(), 1);
    assert_eq!(crate::work::file_visits() - before, 50);
}
