//! Granularity: *how much* data one compaction moves (seed 001 §3.1): a
//! whole level (for a tiered level that is all its sorted runs), one file,
//! several files (a count or a fraction of the run), or seed 004's
//! `partial` segment of consecutive runs.

use std::ops::Range;
use std::str::FromStr;

use crate::error::{Error, Result};
use crate::RunView;

/// How much of a level one compaction takes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Granularity {
    /// Every file of the level (all its sorted runs).
    Level,
    /// Every file of the level, one file per compaction (seed 001 §4's Full
    /// in RocksDB: "we mark all files of a level for compaction"): once a
    /// trigger fires the level drains file by file, in key order, each file
    /// merged with the overlapping files below, until it is empty.
    LevelByFiles,
    /// This many contiguous files of the level's oldest run.
    Files(usize),
    /// This fraction of the files of the level's oldest run (at least one).
    Fraction(f64),
    /// Seed 004's partial compaction: `max(2, ⌈c · runs⌉)` consecutive
    /// runs whose summed key spans are smallest.
    Segment(f64),
}

impl Granularity {
    /// Files to take out of a run of `run_files` files (file granularities).
    pub fn file_count(&self, run_files: usize) -> usize {
        let n = match *self {
            Granularity::Files(n) => n,
            Granularity::LevelByFiles => 1,
            Granularity::Fraction(f) => (f * run_files as f64).ceil() as usize,
            Granularity::Level | Granularity::Segment(_) => run_files,
        };
        n.clamp(1, run_files.max(1))
    }
}

/// A key's first eight bytes as a big-endian number (shorter keys padded
/// with zeros): a distance measure over the key space.
pub fn key_number(key: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    for (d, s) in b.iter_mut().zip(key) {
        *d = *s;
    }
    u64::from_be_bytes(b)
}

fn key_span(run: &RunView) -> u64 {
    match (run.files.first(), run.files.last()) {
        (Some(first), Some(last)) => {
            key_number(&last.largest).saturating_sub(key_number(&first.smallest))
        }
        _ => 0,
    }
}

/// Seed 004's segment: among windows of `max(2, ⌈c · runs⌉)` consecutive
/// runs (newest first), the one with the smallest sum of key spans (the
/// runs most likely to share keys); ties go to the window of fewest bytes
/// (cheapest to merge), then to the older one. With
/// `oldest_only`, only the window ending at the oldest run qualifies (data
/// must leave the level).
pub fn segment(runs: &[RunView], c: f64, oldest_only: bool) -> Option<Range<usize>> {
    if runs.len() < 2 {
        return None;
    }
    let n = ((c * runs.len() as f64).ceil() as usize).clamp(2, runs.len());
    if oldest_only {
        return Some(runs.len() - n..runs.len());
    }
    let spans: Vec<u64> = runs.iter().map(key_span).collect();
    let bytes: Vec<u64> = runs.iter().map(RunView::bytes).collect();
    let sum = |v: &[u64]| v.iter().fold(0u64, |a, &b| a.saturating_add(b));
    (0..=runs.len() - n)
        .min_by_key(|&s| {
            (
                sum(&spans[s..s + n]),
                sum(&bytes[s..s + n]),
                std::cmp::Reverse(s),
            )
        })
        .map(|s| s..s + n)
}

impl FromStr for Granularity {
    type Err = Error;

    /// `level` (alias `runs`), `file`, `files:N`, `fraction:F`, `segment:C`.
    fn from_str(s: &str) -> Result<Self> {
        let (name, arg) = s.split_once(':').unwrap_or((s, ""));
        let num = || super::spec_number("granularity", name, arg, "a positive number", true);
        Ok(match name.trim() {
            "level" | "runs" => Granularity::Level,
            "level-files" => Granularity::LevelByFiles,
            "file" => Granularity::Files(1),
            "files" => Granularity::Files(num()? as usize),
            "fraction" => Granularity::Fraction(num()?.min(1.0)),
            "segment" => Granularity::Segment(num()?.min(1.0)),
            other => {
                return Err(Error::InvalidArgument(format!(
                    "unknown granularity {other:?} (known: level, runs, level-files, file, \
                     files:N, fraction:F, segment:C)"
                )))
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::design::testutil::{file, level_of};

    #[test]
    fn file_counts() {
        assert_eq!(Granularity::Files(1).file_count(10), 1);
        assert_eq!(Granularity::Files(30).file_count(10), 10);
        assert_eq!(Granularity::Fraction(0.25).file_count(10), 3);
        assert_eq!(Granularity::Fraction(0.01).file_count(10), 1);
        assert_eq!(Granularity::Level.file_count(10), 10);
    }

    #[test]
    fn segment_picks_the_narrowest_consecutive_runs() {
        // Spans (newest first): 100, 10, 20, 100, 100.
        let level = level_of(vec![
            vec![file("1[0-100]=1")],
            vec![file("2[50-60]=1")],
            vec![file("3[40-60]=1")],
            vec![file("4[0-100]=1")],
            vec![file("5[0-100]=1")],
        ]);
        // c = 0.2 of 5 runs is 1, raised to 2: runs 1..3 (spans 10 + 20).
        assert_eq!(segment(&level.runs, 0.2, false), Some(1..3));
        // c = 0.5: three runs; 100+10+20 = 130 ties with 10+20+100 (and
        // in bytes), the older window wins.
        assert_eq!(segment(&level.runs, 0.5, false), Some(1..4));
        // Equal spans: the window of fewest bytes.
        let mut equal = level_of(vec![
            vec![file("1[0-100]=5")],
            vec![file("2[0-100]=1")],
            vec![file("3[0-100]=1")],
            vec![file("4[0-100]=9")],
        ]);
        assert_eq!(segment(&equal.runs, 0.2, false), Some(1..3));
        let first = equal.runs[2].files.first().unwrap().id;
        equal.runs[2].files.update(first, |f| f.size = 20);
        assert_eq!(segment(&equal.runs, 0.2, false), Some(0..2));
        assert_eq!(segment(&level.runs, 0.2, true), Some(3..5));
        assert_eq!(segment(&level.runs[..1], 0.2, false), None);
    }

    #[test]
    fn key_numbers_order_like_keys() {
        assert!(key_number(b"a") < key_number(b"ab"));
        assert!(key_number(b"ab") < key_number(b"b"));
        assert_eq!(key_number(&5u64.to_be_bytes()), 5);
    }

    #[test]
    fn granularities_parse() {
        assert_eq!("runs".parse::<Granularity>().unwrap(), Granularity::Level);
        assert_eq!(
            "files:4".parse::<Granularity>().unwrap(),
            Granularity::Files(4)
        );
        assert_eq!(
            "segment:0.2".parse::<Granularity>().unwrap(),
            Granularity::Segment(0.2)
        );
        assert!("fraction:0".parse::<Granularity>().is_err());
        assert!("half".parse::<Granularity>().is_err());
    }
}
