//! The double-ended `Cursor` against a `BTreeMap` oracle: random seeks and
//! steps both ways, with bounds, at the present and at snapshots, over data
//! spread across the memtables and the levels, with point and range
//! tombstones.

#![expect(clippy::unwrap_used, reason = "a test may panic on a failed setup")]

mod common;

use std::collections::BTreeMap;
use std::ops::{Bound, RangeBounds};

use common::tiny_options;
use lamina::vfs::mem::MemFs;
use lamina::{Cursor, Db, Options};
use proptest::prelude::*;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn key(i: u8) -> Vec<u8> {
    format!("k{i:03}").into_bytes()
}

#[derive(Debug, Clone)]
enum Write {
    Put(u8, u8),
    Delete(u8),
    DeleteRange(u8, u8),
    Flush,
    Compact(u8, u8),
}

fn write() -> impl Strategy<Value = Write> {
    prop_oneof![
        10 => (0u8..60, any::<u8>()).prop_map(|(k, v)| Write::Put(k, v)),
        3 => (0u8..60).prop_map(Write::Delete),
        2 => (0u8..60, 0u8..20).prop_map(|(k, n)| Write::DeleteRange(k, k.saturating_add(n))),
        1 => Just(Write::Flush),
        1 => (0u8..60, 0u8..60).prop_map(|(a, b)| Write::Compact(a.min(b), a.max(b))),
    ]
}

#[derive(Debug, Clone)]
enum Move {
    First,
    Last,
    Next,
    Prev,
    /// A target at a key, or (odd) just after it.
    Seek(u8),
    SeekForPrev(u8),
}

fn moves() -> impl Strategy<Value = Vec<Move>> {
    proptest::collection::vec(
        prop_oneof![
            1 => Just(Move::First),
            1 => Just(Move::Last),
            6 => Just(Move::Next),
            6 => Just(Move::Prev),
            2 => (0u8..130).prop_map(Move::Seek),
            2 => (0u8..130).prop_map(Move::SeekForPrev),
        ],
        1..80,
    )
}

/// Seek targets: key `t / 2`, or just after it for odd `t`.
fn target(t: u8) -> Vec<u8> {
    let mut k = key(t / 2);
    if t % 2 == 1 {
        k.push(0);
    }
    k
}

fn apply(db: &Db, model: &mut Model, w: &Write) {
    match w {
        Write::Put(k, v) => {
            let v = vec![*v; usize::from(*v % 40)];
            db.put(&key(*k), &v).unwrap();
            model.insert(key(*k), v);
        }
        Write::Delete(k) => {
            db.delete(&key(*k)).unwrap();
            model.remove(&key(*k));
        }
        Write::DeleteRange(a, b) => {
            db.delete_range(&key(*a), &key(*b)).unwrap();
            model.retain(|k, _| !(key(*a) <= *k && *k < key(*b)));
        }
        Write::Flush => db.flush().unwrap(),
        Write::Compact(a, b) => db.compact_range(Some(&key(*a)), Some(&key(*b))).unwrap(),
    }
}

/// Walks `cursor` and a position in `entries` (the oracle's keys within
/// the bounds, in order) through `moves`, comparing after each.
fn check(cursor: &mut Cursor, entries: &[(Vec<u8>, Vec<u8>)], moves: &[Move]) {
    let mut pos: Option<usize> = None;
    for (step, m) in moves.iter().enumerate() {
        pos = match m {
            Move::First => {
                cursor.seek_to_first().unwrap();
                (!entries.is_empty()).then_some(0)
            }
            Move::Last => {
                cursor.seek_to_last().unwrap();
                entries.len().checked_sub(1)
            }
            Move::Next => {
                cursor.next().unwrap();
                pos.map(|p| p + 1).filter(|&p| p < entries.len())
            }
            Move::Prev => {
                cursor.prev().unwrap();
                pos.and_then(|p| p.checked_sub(1))
            }
            Move::Seek(t) => {
                let t = target(*t);
                cursor.seek(&t).unwrap();
                let i = entries.partition_point(|(k, _)| *k < t);
                (i < entries.len()).then_some(i)
            }
            Move::SeekForPrev(t) => {
                let t = target(*t);
                cursor.seek_for_prev(&t).unwrap();
                entries.partition_point(|(k, _)| *k <= t).checked_sub(1)
            }
        };
        match pos {
            Some(p) => {
                assert!(
                    cursor.valid(),
                    "step {step} {m:?}: invalid, want {:?}",
                    entries[p].0
                );
                assert_eq!(cursor.key(), &entries[p].0[..], "step {step} {m:?}");
                assert_eq!(cursor.value(), &entries[p].1[..], "step {step} {m:?}");
            }
            None => assert!(
                !cursor.valid(),
                "step {step} {m:?}: at {:?}, want invalid",
                cursor.key()
            ),
        }
    }
}

fn bound(b: &Option<(bool, u8)>) -> Bound<Vec<u8>> {
    match b {
        None => Bound::Unbounded,
        Some((true, k)) => Bound::Included(key(*k)),
        Some((false, k)) => Bound::Excluded(key(*k)),
    }
}

fn as_ref(b: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    match b {
        Bound::Included(k) => Bound::Included(k),
        Bound::Excluded(k) => Bound::Excluded(k),
        Bound::Unbounded => Bound::Unbounded,
    }
}

fn within(model: &Model, lo: &Bound<Vec<u8>>, hi: &Bound<Vec<u8>>) -> Vec<(Vec<u8>, Vec<u8>)> {
    // A filter, not `BTreeMap::range`, which panics on crossed bounds.
    model
        .iter()
        .filter(|(k, _)| (lo.as_ref(), hi.as_ref()).contains(*k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

fn options(fs: &MemFs) -> Options {
    {
        let mut o = tiny_options(fs);
        o.write_buffer_size = 2 * 1024;
        o.target_file_size = 1024;
        o.block_size = 128;
        o
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// The cursor agrees with the oracle after every move, whatever the
    /// mix of directions, at the present and at a snapshot taken midway.
    #[test]
    fn cursor_moves_match_the_model(
        writes in proptest::collection::vec(write(), 1..400),
        snapshot_at in 0usize..400,
        lo in proptest::option::of((any::<bool>(), 0u8..60)),
        hi in proptest::option::of((any::<bool>(), 0u8..60)),
        moves in moves(),
    ) {
        let fs = MemFs::new();
        let db = Db::open("/db", options(&fs)).unwrap();
        let mut model = Model::new();
        let mut snap = None;
        for (i, w) in writes.iter().enumerate() {
            if i == snapshot_at {
                snap = Some((db.snapshot(), model.clone()));
            }
            apply(&db, &mut model, w);
        }
        let (lo, hi) = (bound(&lo), bound(&hi));
        let mut cursor = db.iter(as_ref(&lo), as_ref(&hi)).unwrap();
        check(&mut cursor, &within(&model, &lo, &hi), &moves);
        // The whole range both ways, then random moves again.
        let all: Vec<_> = db.scan(as_ref(&lo), as_ref(&hi)).unwrap().map(|r| r.unwrap()).collect();
        prop_assert_eq!(&all, &within(&model, &lo, &hi));
        if let Some((s, old)) = snap {
            let mut cursor = s.iter(as_ref(&lo), as_ref(&hi)).unwrap();
            check(&mut cursor, &within(&old, &lo, &hi), &moves);
            let mut rev: Vec<_> = s.scan_rev(as_ref(&lo), as_ref(&hi)).unwrap().map(|r| r.unwrap()).collect();
            rev.reverse();
            prop_assert_eq!(rev, within(&old, &lo, &hi));
        }
        db.close().unwrap();
    }
}

#[test]
fn prefix_iter_stays_within_the_prefix_both_ways() {
    let fs = MemFs::new();
    let db = Db::open("/db", options(&fs)).unwrap();
    let mut keys: Vec<&[u8]> = vec![
        b"a",
        b"ab",
        b"ab\x00",
        b"ab\xff",
        b"abc",
        b"abd",
        b"ac",
        b"b",
        b"\xff",
        b"\xff\x01",
        b"\xff\xff",
        b"\xff\xff\x00",
    ];
    keys.sort();
    for k in &keys {
        db.put(k, k).unwrap();
    }
    db.flush().unwrap();
    db.delete_range(b"abc", b"abd").unwrap();
    for prefix in [&b"ab"[..], b"a", b"", b"\xff", b"\xff\xff", b"zz"] {
        let want: Vec<&[u8]> = keys
            .iter()
            .copied()
            .filter(|k| k.starts_with(prefix) && *k != b"abc")
            .collect();
        let mut c = db.prefix_iter(prefix).unwrap();
        let mut got = Vec::new();
        while c.valid() {
            got.push(c.key().to_vec());
            c.next().unwrap();
        }
        assert_eq!(got, want, "prefix {prefix:?} forward");
        c.seek_to_last().unwrap();
        let mut back = Vec::new();
        while c.valid() {
            back.push(c.key().to_vec());
            c.prev().unwrap();
        }
        back.reverse();
        assert_eq!(back, want, "prefix {prefix:?} backward");
    }
    db.close().unwrap();
}
