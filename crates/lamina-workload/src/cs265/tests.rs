//! Tests of the CS265 generator against its documented semantics.

use super::*;
use std::collections::BTreeMap;

fn spec() -> WorkloadSpec {
    WorkloadSpec {
        puts: 5000,
        gets: 3000,
        gets_misses_ratio: 0.3,
        gets_skewness: 0.5,
        ranges: 200,
        max_range_size: 1 << 24,
        deletes: 500,
        update_ratio: 0.1,
        seed: 42,
        ..Default::default()
    }
}

fn ops(s: &WorkloadSpec) -> Vec<Op> {
    Generator::new(s.clone())
        .map(|g| g.collect())
        .unwrap_or_default()
}

#[test]
fn deterministic_per_seed() {
    let a = ops(&spec());
    let b = ops(&spec());
    assert_eq!(a, b);
    let c = ops(&WorkloadSpec { seed: 43, ..spec() });
    assert_ne!(a, c);
}

const PINNED: [&str; 5] = [
    "p 1160025393 -1270124359",
    "g 1160025393",
    "p 1097796222 -647295133",
    "p -1960823527 -2056216080",
    "g 1097796222",
];

#[test]
fn stable_across_versions() {
    // Pins the stream: a change here breaks reproducibility of published
    // workloads and must be deliberate.
    let s = WorkloadSpec {
        puts: 3,
        gets: 2,
        seed: 7,
        ..Default::default()
    };
    let text: Vec<String> = ops(&s).iter().map(|o| o.to_string()).collect();
    assert_eq!(text, PINNED, "generator output for seed 7 changed");
}

#[test]
fn exact_counts_and_semantics() {
    let s = spec();
    let all = ops(&s);
    let mut model: BTreeMap<i32, i32> = BTreeMap::new();
    let mut ever = HashSet::new();
    let (mut p, mut g, mut r, mut d) = (0, 0, 0, 0);
    let mut gets = Vec::new();
    for op in &all {
        match op {
            Op::Put { key, value } => {
                p += 1;
                model.insert(*key, *value);
                ever.insert(*key);
            }
            Op::Get(k) => {
                g += 1;
                gets.push((*k, model.contains_key(k)));
            }
            Op::Range { lo, hi } => {
                r += 1;
                assert!(lo < hi);
                assert!((*hi as i64 - *lo as i64) <= s.max_range_size as i64);
            }
            Op::Delete(k) => {
                d += 1;
                assert!(model.remove(k).is_some(), "delete of non-live key {k}");
            }
            Op::Load(_) => panic!("no loads expected"),
        }
    }
    assert_eq!((p, g, r, d), (s.puts, s.gets, s.ranges, s.deletes));
    let misses: Vec<_> = gets.iter().filter(|(k, _)| !ever.contains(k)).collect();
    assert_eq!(
        misses.len() as u64,
        round_share(s.gets, s.gets_misses_ratio)
    );
    // Every get that is not a miss was live when issued.
    let hits = gets.iter().filter(|(_, live)| *live).count();
    assert_eq!(hits + misses.len(), gets.len());
}

#[test]
fn not_front_loaded() {
    let s = spec();
    let all = ops(&s);
    let half = all.len() / 2;
    let gets_first = all[..half]
        .iter()
        .filter(|o| matches!(o, Op::Get(_)))
        .count();
    let gets_second = all[half..]
        .iter()
        .filter(|o| matches!(o, Op::Get(_)))
        .count();
    assert!(
        gets_first > 1000 && gets_second > 1000,
        "{gets_first} {gets_second}"
    );
    let puts_second = all[half..]
        .iter()
        .filter(|o| matches!(o, Op::Put { .. }))
        .count();
    assert!(puts_second > 1500, "{puts_second}");
}

#[test]
fn skew_concentrates_gets() {
    let s = WorkloadSpec {
        puts: 10_000,
        gets: 10_000,
        gets_skewness: 0.9,
        seed: 1,
        ..Default::default()
    };
    let all = ops(&s);
    let mut counts: HashMap<i32, u32> = HashMap::new();
    for op in &all {
        if let Op::Get(k) = op {
            *counts.entry(*k).or_default() += 1;
        }
    }
    let mut c: Vec<u32> = counts.values().copied().collect();
    c.sort_unstable_by(|a, b| b.cmp(a));
    let top: u32 = c.iter().take(200).sum();
    assert!(top > 5000, "top-200 keys got only {top} of 10000 gets");
    let flat = ops(&WorkloadSpec {
        gets_skewness: 0.0,
        ..s
    });
    let mut counts: HashMap<i32, u32> = HashMap::new();
    for op in &flat {
        if let Op::Get(k) = op {
            *counts.entry(*k).or_default() += 1;
        }
    }
    let mut c: Vec<u32> = counts.values().copied().collect();
    c.sort_unstable_by(|a, b| b.cmp(a));
    let top: u32 = c.iter().take(200).sum();
    assert!(top < 2000, "unskewed top-200 keys got {top}");
}

#[test]
fn gaussian_ranges_cluster_around_the_middle() {
    let s = WorkloadSpec {
        puts: 100,
        ranges: 2000,
        max_range_size: 600,
        range_dist: RangeDist::Gaussian,
        key_min: -1_000_000,
        key_max: 1_000_000,
        seed: 3,
        ..Default::default()
    };
    let widths: Vec<i64> = ops(&s)
        .iter()
        .filter_map(|o| match o {
            Op::Range { lo, hi } => Some(*hi as i64 - *lo as i64),
            _ => None,
        })
        .collect();
    assert_eq!(widths.len(), 2000);
    let mid = widths.iter().filter(|w| (200..=400).contains(*w)).count();
    assert!(mid > 1200, "{mid}");
    assert!(widths.iter().all(|w| (1..=600).contains(w)));
}

#[test]
fn small_key_space_and_edges() {
    let s = WorkloadSpec {
        puts: 30,
        gets: 100,
        gets_misses_ratio: 0.5,
        ranges: 50,
        deletes: 20,
        max_range_size: 10,
        key_min: i32::MAX - 100,
        key_max: i32::MAX,
        seed: 9,
        ..Default::default()
    };
    let all = ops(&s);
    assert_eq!(all.len(), 200);
    for op in &all {
        match op {
            Op::Put { key, .. } | Op::Get(key) | Op::Delete(key) => {
                assert!(*key >= s.key_min)
            }
            Op::Range { lo, hi } => assert!(lo < hi && *lo >= s.key_min),
            Op::Load(_) => {}
        }
    }
}

/// Parses DSL text back into ops (the form `lamina gen` prints).
fn parse_dsl(text: &str) -> Vec<Op> {
    text.lines()
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            let n = |i: usize| f[i].parse::<i32>().unwrap();
            match f[0] {
                "p" => Op::Put {
                    key: n(1),
                    value: n(2),
                },
                "g" => Op::Get(n(1)),
                "r" => Op::Range { lo: n(1), hi: n(2) },
                "d" => Op::Delete(n(1)),
                other => panic!("unexpected line {other:?}"),
            }
        })
        .collect()
}

/// The rules of the module docs, checked on the printed workload
/// against a model of the live keys: every delete removes a live key,
/// a fresh put never reuses a key, the updates, misses and every kind
/// come in the requested numbers — including key spaces the puts fill
/// up and as many deletes as fresh puts.
#[test]
fn printed_workloads_keep_the_rules() {
    let specs = [
        spec(),
        WorkloadSpec {
            update_ratio: 0.0,
            ..spec()
        },
        WorkloadSpec {
            update_ratio: 0.9,
            deletes: 500,
            gets_misses_ratio: 0.0,
            ..spec()
        },
        // The put half of 2,001 keys is about 1,000: nearly all used.
        WorkloadSpec {
            puts: 950,
            update_ratio: 0.0,
            deletes: 950,
            gets: 400,
            gets_misses_ratio: 0.25,
            key_min: -1000,
            key_max: 1000,
            ..spec()
        },
        WorkloadSpec {
            puts: 2000,
            update_ratio: 0.5,
            deletes: 1000,
            gets: 1000,
            key_min: 0,
            key_max: 3000,
            ..spec()
        },
    ];
    for base in specs {
        for seed in 0..8 {
            let s = WorkloadSpec {
                seed,
                ..base.clone()
            };
            let mut out = Vec::new();
            write_dsl(&s, &mut out, Path::new("."), "unused").unwrap();
            let all = parse_dsl(std::str::from_utf8(&out).unwrap());
            let mut live: BTreeMap<i32, i32> = BTreeMap::new();
            let mut ever = HashSet::new();
            let (mut puts, mut updates, mut gets, mut misses) = (0, 0, 0, 0);
            let (mut ranges, mut deletes) = (0, 0);
            for op in &all {
                match *op {
                    Op::Put { key, value } => {
                        puts += 1;
                        if live.contains_key(&key) {
                            updates += 1;
                        } else {
                            assert!(!ever.contains(&key), "seed {seed}: {key} put again");
                        }
                        live.insert(key, value);
                        ever.insert(key);
                    }
                    Op::Get(k) => {
                        gets += 1;
                        if !ever.contains(&k) {
                            misses += 1;
                        } else {
                            assert!(live.contains_key(&k), "seed {seed}: get of deleted {k}");
                        }
                    }
                    Op::Range { lo, hi } => {
                        ranges += 1;
                        assert!(s.key_min <= lo && lo < hi);
                    }
                    Op::Delete(k) => {
                        deletes += 1;
                        assert!(live.remove(&k).is_some(), "seed {seed}: delete of dead {k}");
                    }
                    Op::Load(_) => unreachable!(),
                }
            }
            // A miss is never put later either.
            let later = all
                .iter()
                .filter(|o| matches!(o, Op::Get(k) if !ever.contains(k)));
            assert_eq!(later.count() as u64, misses);
            let expect_updates = (s.puts as f64 * s.update_ratio).round() as u64;
            let expect_misses = (s.gets as f64 * s.gets_misses_ratio).round() as u64;
            assert_eq!(
                (puts, updates, gets, misses, ranges, deletes),
                (
                    s.puts,
                    expect_updates,
                    s.gets,
                    expect_misses,
                    s.ranges,
                    s.deletes
                ),
                "seed {seed}, spec {s:?}"
            );
        }
    }
}

#[test]
fn updates_are_spread_over_the_puts() {
    let s = WorkloadSpec {
        puts: 10_000,
        update_ratio: 0.3,
        seed: 4,
        ..Default::default()
    };
    let mut seen = HashSet::new();
    let updates: Vec<bool> = ops(&s)
        .iter()
        .filter_map(|o| match o {
            Op::Put { key, .. } => Some(!seen.insert(*key)),
            _ => None,
        })
        .collect();
    let second = updates[5000..].iter().filter(|u| **u).count();
    assert!(
        (1200..=1800).contains(&second),
        "{second} of 3000 in the second half"
    );
}

#[test]
fn infeasible_specs_are_refused() {
    for bad in [
        // More deletes than keys ever live.
        WorkloadSpec {
            puts: 10,
            deletes: 11,
            ..Default::default()
        },
        WorkloadSpec {
            puts: 10,
            update_ratio: 0.5,
            deletes: 6,
            ..Default::default()
        },
        // Gets that hit, or updates, with no fresh put.
        WorkloadSpec {
            gets: 5,
            ..Default::default()
        },
        WorkloadSpec {
            puts: 4,
            update_ratio: 1.0,
            ..Default::default()
        },
        // 100 fresh keys cannot fit the put half of 101 keys.
        WorkloadSpec {
            puts: 100,
            key_min: 0,
            key_max: 100,
            ..Default::default()
        },
        // A single key cannot be both put and missed.
        WorkloadSpec {
            puts: 1,
            gets: 2,
            gets_misses_ratio: 0.5,
            key_min: 7,
            key_max: 7,
            ..Default::default()
        },
    ] {
        assert!(
            matches!(
                Generator::new(bad.clone()),
                Err(WorkloadError::InvalidSpec(_))
            ),
            "{bad:?}"
        );
    }
    // Gets that all miss need no put.
    let misses = WorkloadSpec {
        gets: 5,
        gets_misses_ratio: 1.0,
        ..Default::default()
    };
    assert_eq!(ops(&misses).len(), 5);
}

#[test]
fn ranges_stay_in_key_space() {
    let s = WorkloadSpec {
        puts: 300,
        ranges: 300,
        max_range_size: 5000,
        key_min: 1000,
        key_max: 1999,
        seed: 11,
        ..Default::default()
    };
    for op in ops(&s) {
        if let Op::Range { lo, hi } = op {
            assert!(lo >= 1000 && lo < hi && hi <= 2000, "{lo} {hi}");
        }
    }
}

#[test]
fn invalid_specs_are_rejected() {
    for bad in [
        WorkloadSpec {
            gets_misses_ratio: 1.5,
            ..Default::default()
        },
        WorkloadSpec {
            gets_skewness: -0.1,
            ..Default::default()
        },
        WorkloadSpec {
            key_min: 5,
            key_max: 4,
            ..Default::default()
        },
        WorkloadSpec {
            ranges: 1,
            max_range_size: 0,
            ..Default::default()
        },
        WorkloadSpec {
            external_puts: true,
            puts_per_file: 0,
            ..Default::default()
        },
    ] {
        assert!(Generator::new(bad).is_err());
    }
}

#[test]
fn external_puts_write_files() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let s = WorkloadSpec {
        puts: 2500,
        gets: 100,
        external_puts: true,
        puts_per_file: 1000,
        seed: 5,
        ..Default::default()
    };
    let mut out = Vec::new();
    let summary = write_dsl(&s, &mut out, dir.path(), "w")?;
    assert_eq!(summary.load_files.len(), 3);
    let text = String::from_utf8_lossy(&out);
    let loads: Vec<&str> = text.lines().filter(|l| l.starts_with("l ")).collect();
    assert_eq!(loads.len(), 3);
    assert!(!text.lines().any(|l| l.starts_with("p ")));
    let sizes: Vec<u64> = summary
        .load_files
        .iter()
        .map(|p| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0))
        .collect();
    assert_eq!(sizes.iter().sum::<u64>(), 2500 * 8);
    assert!(loads[0].contains(&*summary.load_files[0].to_string_lossy()));
    // Deterministic output, files included.
    let dir2 = tempfile::tempdir()?;
    let mut out2 = Vec::new();
    write_dsl(&s, &mut out2, dir2.path(), "w")?;
    let t2 = String::from_utf8_lossy(&out2).replace(
        &*dir2.path().to_string_lossy(),
        &dir.path().to_string_lossy(),
    );
    assert_eq!(text, t2);
    for (a, b) in summary
        .load_files
        .iter()
        .zip((0..3).map(|i| dir2.path().join(format!("w{i}.dat"))))
    {
        assert_eq!(std::fs::read(a)?, std::fs::read(b)?);
    }
    Ok(())
}
