//! A linearizability checker for histories of single-key register
//! operations (reads, writes, deletes), and the "no acknowledged write
//! lost" check, used by the fault test ([`crate::faults`]).
//!
//! The search is Wing and Gong's, with Lowe's memoization (the algorithm
//! Knossos and Porcupine use): starting from the empty register, repeatedly
//! linearize one pending operation that no other pending operation must
//! precede (none completed before it was invoked) and that the register
//! model accepts (a read must return the current value), backtracking
//! when stuck; the history is linearizable when every completed operation
//! has been linearized. A state (which operations are linearized, the
//! register's value) is searched at most once: it is remembered by a
//! 128-bit hash of the set (the xor of a random number per operation)
//! and the value. A hash collision could only prune a branch wrongly, so
//! it could make the checker report a violation that is not there, never
//! hide one.
//!
//! An operation whose outcome the client does not know (a write that timed
//! out or whose connection failed: `complete = None`) may take effect at
//! any time after its invocation, or never: it is never required to be
//! linearized, and it never constrains which operation may go next. A read
//! without an answer tells nothing and is left out by the caller. Writes
//! of unknown outcome whose value no read returned are dropped before the
//! search: taking effect could only make later reads harder to explain,
//! so a linearization exists with them if and only if one exists without
//! them (values are unique per write, which the fault test guarantees).
//!
//! Histories are checked per key: a register per key is a separate object,
//! and linearizability is compositional (Herlihy and Wing), so a history
//! is linearizable if and only if every key's sub-history is.

use std::collections::{BTreeSet, HashSet};

/// A register value: `None` is an absent key (never written, or deleted).
pub type Value = Option<i32>;

/// What an operation did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Set the register (`None`: delete).
    Write(Value),
    /// Read the register and saw this.
    Read(Value),
}

/// One operation on one register, with its invocation and completion
/// times on one monotonic clock (any unit).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Op {
    /// When the client sent it.
    pub invoke: u64,
    /// When the client had its answer; `None` if it never learned the
    /// outcome (a write that may or may not have taken effect).
    pub complete: Option<u64>,
    /// Read or write, with the value.
    pub kind: Kind,
}

/// What the search concluded for one register.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// A linearization exists.
    Linearizable,
    /// None exists; `stuck_at` is the completed operation (an index into
    /// the history as given) the deepest attempt could not linearize.
    Violation {
        /// The operation that could not be placed.
        stuck_at: usize,
    },
    /// The search gave up after its step budget.
    Unknown,
}

/// Search steps after which [`check_register`] answers
/// [`Verdict::Unknown`].
pub const DEFAULT_BUDGET: u64 = 50_000_000;

/// SplitMix64: a fixed sequence of well-mixed numbers for the set hash
/// (fixed, so a run is reproducible).
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

/// Drops writes of unknown outcome whose value no read returned (see the
/// module comment); the indices of the operations kept.
fn relevant(history: &[Op]) -> Vec<usize> {
    let read: HashSet<Value> = history
        .iter()
        .filter_map(|o| match o.kind {
            Kind::Read(v) => Some(v),
            Kind::Write(_) => None,
        })
        .collect();
    (0..history.len())
        .filter(|&i| {
            let o = &history[i];
            match o.kind {
                Kind::Write(v) => o.complete.is_some() || read.contains(&v),
                Kind::Read(_) => true,
            }
        })
        .collect()
}

/// Checks one register's history (initially absent) with at most `budget`
/// search steps.
pub fn check_register(history: &[Op], budget: u64) -> Verdict {
    let mut idx = relevant(history);
    idx.sort_by_key(|&i| (history[i].invoke, i));
    let ops: Vec<Op> = idx.iter().map(|&i| history[i]).collect();
    let n = ops.len();
    let mut rng = SplitMix(0x6c61_6d69_6e61);
    let zobrist: Vec<u128> = (0..n)
        .map(|_| (u128::from(rng.next()) << 64) | u128::from(rng.next()))
        .collect();
    // Pending operations by position (invocation order), and the pending
    // completed ones by completion time: the earliest completion bounds
    // which operations may go next.
    let mut pending: BTreeSet<usize> = (0..n).collect();
    let mut by_completion: BTreeSet<(u64, usize)> = ops
        .iter()
        .enumerate()
        .filter_map(|(i, o)| o.complete.map(|c| (c, i)))
        .collect();
    let mut value: Value = None;
    let mut hash: u128 = 0;
    let mut seen: HashSet<(u128, Value)> = HashSet::new();
    // The linearized operations, each with the value before it and where
    // to resume looking for an alternative.
    let mut stack: Vec<(usize, Value)> = Vec::new();
    let mut cursor = 0usize;
    let mut steps = 0u64;
    let mut deepest = (0usize, by_completion.first().map(|&(_, i)| i));
    loop {
        if by_completion.is_empty() {
            return Verdict::Linearizable;
        }
        steps += 1;
        if steps > budget {
            return Verdict::Unknown;
        }
        let bound = by_completion.first().map_or(u64::MAX, |&(c, _)| c);
        let mut chosen = None;
        for &i in pending.range(cursor..) {
            let o = &ops[i];
            if o.invoke > bound {
                break;
            }
            let next = match o.kind {
                Kind::Read(v) if v != value => continue,
                Kind::Read(_) => value,
                Kind::Write(v) => v,
            };
            if seen.insert((hash ^ zobrist[i], next)) {
                chosen = Some((i, next));
                break;
            }
        }
        match chosen {
            Some((i, next)) => {
                stack.push((i, value));
                pending.remove(&i);
                if let Some(c) = ops[i].complete {
                    by_completion.remove(&(c, i));
                }
                hash ^= zobrist[i];
                value = next;
                cursor = 0;
                if stack.len() > deepest.0 {
                    deepest = (stack.len(), by_completion.first().map(|&(_, j)| j));
                }
            }
            None => {
                let Some((i, before)) = stack.pop() else {
                    let stuck = deepest.1.map_or(0, |j| idx[j]);
                    return Verdict::Violation { stuck_at: stuck };
                };
                pending.insert(i);
                if let Some(c) = ops[i].complete {
                    by_completion.insert((c, i));
                }
                hash ^= zobrist[i];
                value = before;
                cursor = i + 1;
            }
        }
    }
}

/// Acknowledged writes to one register that its final value proves lost:
/// the final value (read after every other operation completed) was
/// written only by writes that completed before the acknowledged write was
/// invoked (or, for an absent key, nothing was ever deleted after it and
/// it was never written at all), so the acknowledged write was undone.
/// A final value that no write wrote loses every acknowledged write.
pub fn lost_writes(history: &[Op], final_value: Value) -> usize {
    // The latest time the final value can have been written (-1: the
    // initial absent state, before everything), `None` when some writer's
    // outcome is unknown (it may have landed at any time).
    let mut latest: Option<Option<i128>> = final_value.is_none().then_some(Some(-1));
    for o in history {
        if o.kind == Kind::Write(final_value) {
            let t = o.complete.map(i128::from);
            latest = Some(match (latest, t) {
                (None, t) => t,
                (Some(Some(a)), Some(b)) => Some(a.max(b)),
                _ => None,
            });
        }
    }
    history
        .iter()
        .filter(|o| matches!(o.kind, Kind::Write(_)) && o.complete.is_some())
        .filter(|w| match latest {
            None => true,
            Some(None) => false,
            Some(Some(t)) => t < i128::from(w.invoke) && w.kind != Kind::Write(final_value),
        })
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(invoke: u64, complete: u64, v: i32) -> Op {
        Op {
            invoke,
            complete: Some(complete),
            kind: Kind::Write(Some(v)),
        }
    }
    fn del(invoke: u64, complete: u64) -> Op {
        Op {
            invoke,
            complete: Some(complete),
            kind: Kind::Write(None),
        }
    }
    fn w_unknown(invoke: u64, v: i32) -> Op {
        Op {
            invoke,
            complete: None,
            kind: Kind::Write(Some(v)),
        }
    }
    fn r(invoke: u64, complete: u64, v: Option<i32>) -> Op {
        Op {
            invoke,
            complete: Some(complete),
            kind: Kind::Read(v),
        }
    }
    fn ok(h: &[Op]) -> bool {
        match check_register(h, DEFAULT_BUDGET) {
            Verdict::Linearizable => true,
            Verdict::Violation { .. } => false,
            Verdict::Unknown => panic!("budget exhausted on a tiny history"),
        }
    }

    #[test]
    fn hand_made_linearizable_histories() {
        assert!(ok(&[]));
        assert!(ok(&[r(0, 1, None)]));
        assert!(ok(&[w(0, 1, 1), r(2, 3, Some(1))]));
        // A read concurrent with a write may see either value.
        assert!(ok(&[w(0, 10, 1), r(1, 2, None), r(3, 4, Some(1))]));
        assert!(ok(&[w(0, 10, 1), r(1, 2, Some(1)), r(3, 4, Some(1))]));
        // Two concurrent writes, reads agreeing on one order.
        assert!(ok(&[
            w(0, 10, 1),
            w(0, 10, 2),
            r(11, 12, Some(1)),
            r(13, 14, Some(1)),
        ]));
        // A write of unknown outcome may take effect long after it was sent…
        assert!(ok(&[
            w_unknown(0, 7),
            r(5, 6, None),
            r(50, 51, Some(7)),
            r(60, 61, Some(7))
        ]));
        // …or never.
        assert!(ok(&[w_unknown(0, 7), r(50, 51, None)]));
        // Deletes make the key absent again.
        assert!(ok(&[w(0, 1, 1), del(2, 3), r(4, 5, None)]));
        // The search must backtrack: the first write to try is the wrong one.
        assert!(ok(&[
            w(0, 10, 1),
            w(0, 10, 2),
            r(11, 12, Some(2)),
            w(13, 14, 3),
            r(15, 16, Some(3)),
        ]));
    }

    #[test]
    fn hand_made_violations() {
        // A stale read after a completed write.
        assert!(!ok(&[w(0, 1, 1), r(2, 3, None)]));
        // A read of a value nobody wrote.
        assert!(!ok(&[w(0, 1, 1), r(2, 3, Some(9))]));
        // The new value was seen, then the old one again.
        assert!(!ok(&[w(0, 10, 1), r(1, 2, Some(1)), r(3, 4, None)]));
        // An acknowledged overwrite undone.
        assert!(!ok(&[w(0, 1, 1), w(2, 3, 2), r(4, 5, Some(1))]));
        // Writes of unknown outcome cannot take effect twice.
        assert!(!ok(&[
            w(0, 1, 1),
            w_unknown(2, 2),
            r(3, 4, Some(2)),
            w(5, 6, 3),
            r(7, 8, Some(2)),
        ]));
        // Or before they were sent.
        assert!(!ok(&[r(0, 1, Some(5)), w_unknown(2, 5)]));
        // The violation names the operation it could not place.
        let h = [w(0, 1, 1), r(2, 3, None)];
        assert_eq!(
            check_register(&h, DEFAULT_BUDGET),
            Verdict::Violation { stuck_at: 1 }
        );
    }

    #[test]
    fn lost_writes_counts_undone_acknowledged_writes() {
        let h = [w(0, 1, 1), w(2, 3, 2)];
        assert_eq!(lost_writes(&h, Some(2)), 0);
        // The older write's value came back: the newer one is lost.
        assert_eq!(lost_writes(&h, Some(1)), 1);
        // The key vanished: both are lost.
        assert_eq!(lost_writes(&h, None), 2);
        // A value nobody wrote loses every acknowledged write.
        assert_eq!(lost_writes(&h, Some(9)), 2);
        // Concurrent writes: either may win.
        let h = [w(0, 10, 1), w(5, 12, 2)];
        assert_eq!(lost_writes(&h, Some(1)), 0);
        assert_eq!(lost_writes(&h, Some(2)), 0);
        // A write of unknown outcome may land last.
        let h = [w(0, 1, 1), w_unknown(2, 5), w(3, 4, 2)];
        assert_eq!(lost_writes(&h, Some(5)), 0);
        // A delete after the write explains an absent key.
        let h = [w(0, 1, 1), del(2, 3)];
        assert_eq!(lost_writes(&h, None), 0);
    }

    /// A tiny PRNG for the generated histories.
    fn gen(seed: u64) -> impl FnMut(u64) -> u64 {
        let mut s = SplitMix(seed);
        move |n| s.next() % n
    }

    /// Brute force: does some order of the operations (each write of
    /// unknown outcome either placed or left out) respect real time and
    /// the register? Independent of the search above.
    fn brute_force(h: &[Op]) -> bool {
        fn go(h: &[Op], used: &mut Vec<bool>, placed: &mut Vec<usize>, value: Value) -> bool {
            if h.iter()
                .enumerate()
                .all(|(i, o)| used[i] || o.complete.is_none())
            {
                return true;
            }
            for i in 0..h.len() {
                if used[i] {
                    continue;
                }
                // Every operation completed before `i` was invoked must
                // already be placed.
                let blocked = h.iter().enumerate().any(|(j, o)| {
                    !used[j] && j != i && o.complete.is_some_and(|c| c < h[i].invoke)
                });
                if blocked {
                    continue;
                }
                let next = match h[i].kind {
                    Kind::Read(v) if v != value => continue,
                    Kind::Read(_) => value,
                    Kind::Write(v) => v,
                };
                used[i] = true;
                placed.push(i);
                if go(h, used, placed, next) {
                    return true;
                }
                placed.pop();
                used[i] = false;
            }
            false
        }
        go(h, &mut vec![false; h.len()], &mut Vec::new(), None)
    }

    #[test]
    fn agrees_with_brute_force_on_random_small_histories() {
        let mut rnd = gen(42);
        let (mut yes, mut no) = (0, 0);
        for _ in 0..3000 {
            let n = 1 + rnd(7) as usize;
            let mut h = Vec::new();
            let mut next_value = 1;
            for _ in 0..n {
                let invoke = rnd(20);
                let complete = invoke + rnd(8);
                let kind = match rnd(3) {
                    0 => {
                        next_value += 1;
                        Kind::Write(Some(next_value))
                    }
                    // Reads of values that exist or not, so both verdicts
                    // come up.
                    _ => Kind::Read(match rnd(3) {
                        0 => None,
                        _ => Some(1 + rnd(4) as i32),
                    }),
                };
                let unknown = matches!(kind, Kind::Write(_)) && rnd(4) == 0;
                h.push(Op {
                    invoke,
                    complete: if unknown { None } else { Some(complete) },
                    kind,
                });
            }
            let expect = brute_force(&h);
            assert_eq!(ok(&h), expect, "{h:?}");
            if expect {
                yes += 1;
            } else {
                no += 1;
            }
        }
        assert!(yes > 300 && no > 300, "{yes} linearizable, {no} not");
    }

    #[test]
    fn linearizable_by_construction_at_scale() {
        // A real register driven by 5 overlapping clients: each operation
        // takes effect at one instant inside its interval, so the history
        // is linearizable by construction, whatever the overlap.
        let mut rnd = gen(7);
        let mut value: Value = None;
        let mut h = Vec::new();
        let mut next_value = 0;
        for t in 0..20_000u64 {
            let at = t * 10;
            let invoke = at - rnd(40).min(at);
            let complete = at + rnd(40);
            let kind = if rnd(2) == 0 {
                next_value += 1;
                value = Some(next_value);
                Kind::Write(value)
            } else {
                Kind::Read(value)
            };
            h.push(Op {
                invoke,
                complete: Some(complete),
                kind,
            });
        }
        assert_eq!(check_register(&h, DEFAULT_BUDGET), Verdict::Linearizable);
        // Swapping two reads' observed values across a write breaks it.
        let reads: Vec<usize> = (0..h.len())
            .filter(|&i| matches!(h[i].kind, Kind::Read(Some(_))))
            .collect();
        let (a, b) = (reads[100], reads[5000]);
        let (ka, kb) = (h[a].kind, h[b].kind);
        h[a].kind = kb;
        h[b].kind = ka;
        assert!(matches!(
            check_register(&h, DEFAULT_BUDGET),
            Verdict::Violation { .. }
        ));
    }
}
