//! Where a merge's output is cut into files, and which input files must be
//! merged together at all: seed 000 ch. 5's partitioned stack-based merges.
//!
//! * [`Partition`] picks an [`OutputPartitioner`]: `none` (one file per
//!   merge, θ = ∞), `size` (Alg. 5.1: a new file when the next entry would
//!   pass θ), `local` (Alg. 5.6: BINARYSPLIT of the sub-merge's own key
//!   range) or `global` (Alg. 5.7: BINARYSPLIT of the dyadic node rooted at
//!   the longest common binary prefix of its smallest and largest key, so
//!   bounds fall on a fixed grid and files of different merges stop
//!   chaining). A partitioner hands each sub-merge a [`FileCutter`] that
//!   the executor asks before every entry. `str` and `rstar-grove` (seed
//!   000 §4.3, [`spatial`]) cut a leveled LSM R-tree's merge into
//!   spatially disjoint tiles instead, each its own run.
//! * [`sweep_groups`] (Alg. 5.2–5.3, with the digest's fix of comparing
//!   against the running `u_max`) groups the input files by overlap: a
//!   one-file group is a trivial move, a larger one a sub-merge.
//! * [`binary_split`] (Alg. 5.5) over `SIZEINRANGE` estimates: from the
//!   inputs' [`StreamHist`]s merged into one, its `SUM` results cached
//!   ([`CachedSum`], Alg. 5.8), or exact counts.

use std::fmt;

pub mod hist;
pub mod image;
pub mod spatial;

pub use hist::{CachedSum, StreamHist};

use crate::error::{Error, Result};
use crate::param;
pub use image::KeyImage;

/// The partitioning rule of a merge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Partition {
    /// One output file per merge (θ = ∞); no trivial moves, no sub-merges.
    None,
    /// A new file when the current one would pass θ bytes (Alg. 5.1).
    Size,
    /// Bounds from BINARYSPLIT of the sub-merge's key range (Alg. 5.6).
    Local,
    /// Bounds from BINARYSPLIT of a dyadic node of the key space (Alg. 5.7).
    Global,
    /// Spatially disjoint tiles by Sort-Tile-Recursive (seed 000 §4.3).
    Str,
    /// Spatially disjoint, square-like tiles by R*-Grove (seed 000 §4.3).
    RstarGrove,
}

impl Partition {
    /// The spec name.
    pub fn name(self) -> &'static str {
        match self {
            Partition::None => "none",
            Partition::Size => "size",
            Partition::Local => "local",
            Partition::Global => "global",
            Partition::Str => "str",
            Partition::RstarGrove => "rstar-grove",
        }
    }

    /// Parses a spec name.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "none" => Some(Partition::None),
            "size" => Some(Partition::Size),
            "local" => Some(Partition::Local),
            "global" => Some(Partition::Global),
            "str" => Some(Partition::Str),
            "rstar-grove" => Some(Partition::RstarGrove),
            _ => None,
        }
    }

    /// True if the rule needs size estimates within key ranges (the
    /// per-file histograms).
    pub fn uses_ranges(self) -> bool {
        matches!(self, Partition::Local | Partition::Global)
    }

    /// The tile rule of a spatial partitioning (whose outputs are tiles of
    /// a leveled LSM R-tree), `None` for the key-ordered rules.
    pub fn tile_rule(self) -> Option<spatial::TileRule> {
        match self {
            Partition::Str => Some(spatial::TileRule::Str),
            Partition::RstarGrove => Some(spatial::TileRule::RstarGrove),
            _ => None,
        }
    }
}

/// How a stack policy's merges are partitioned and run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Partitioning {
    /// The rule.
    pub partition: Partition,
    /// θ, the largest output file in bytes (ignored by `none`).
    pub theta: u64,
    /// Sub-merges run at once.
    pub subcompactions: usize,
    /// How keys map to the `u64` space the range rules split.
    pub image: KeyImage,
}

impl fmt::Display for Partitioning {
    /// The spec parameters: `partition=P,theta=T,subcompactions=N[,image=be]`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "partition={},theta={},subcompactions={}",
            self.partition.name(),
            self.theta,
            self.subcompactions
        )?;
        if self.image != KeyImage::default() {
            write!(f, ",image={}", self.image.name())?;
        }
        Ok(())
    }
}

/// The spec parameters of a partitioning (`partition=`, `theta=`,
/// `subcompactions=`, `image=`), gathered while a policy parses its spec.
#[derive(Debug, Default)]
pub struct PartitionParams {
    rule: Option<Partition>,
    theta: Option<u64>,
    subcompactions: Option<usize>,
    image: Option<KeyImage>,
}

impl PartitionParams {
    /// Takes `key=value` if it is one of the partitioning parameters
    /// (returns whether it was); `name` is the policy, for errors.
    pub fn parse(&mut self, name: &str, key: &str, value: &str) -> Result<bool> {
        let bad = |what: &str| {
            Error::InvalidArgument(format!("{name}: {key} must be {what}, not {value:?}"))
        };
        match key {
            "partition" => {
                self.rule = Some(
                    Partition::parse(value).ok_or_else(|| bad("none, size, local or global"))?,
                )
            }
            "theta" => self.theta = Some(param(key, value)?),
            "subcompactions" => self.subcompactions = Some(param(key, value)?),
            "image" => {
                self.image = Some(KeyImage::parse(value).ok_or_else(|| bad("lambda or be"))?)
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// The partitioning, θ defaulting to `file`; `None` without
    /// `partition=` (the other parameters need it).
    pub fn finish(self, name: &str, file: u64) -> Result<Option<Partitioning>> {
        let Some(partition) = self.rule else {
            if self.theta.is_some() || self.subcompactions.is_some() || self.image.is_some() {
                return Err(Error::InvalidArgument(format!(
                    "{name}: theta, subcompactions and image need partition=none|size|local|global"
                )));
            }
            return Ok(None);
        };
        if partition.tile_rule().is_some() {
            return Err(Error::InvalidArgument(format!(
                "{name}: partition={} tiles the levels of leveled (e.g. \
                 leveled:b0=2,b=10,partition={}); stack merges take none, size, local or global",
                partition.name(),
                partition.name()
            )));
        }
        let p = Partitioning {
            partition,
            theta: self.theta.unwrap_or(file),
            subcompactions: self.subcompactions.unwrap_or(1),
            image: self.image.unwrap_or_default(),
        };
        if p.theta == 0 || p.subcompactions == 0 {
            return Err(Error::InvalidArgument(format!(
                "{name} needs theta >= 1 and subcompactions >= 1"
            )));
        }
        Ok(Some(p))
    }
}

/// Decides, entry by entry, where one sub-merge's output is cut.
pub trait FileCutter: Send {
    /// Called before an entry of a new user key `user_key` with
    /// `entry_bytes` bytes is written to a file holding `file_bytes` bytes
    /// (0 = no file open): true closes the current file first.
    fn cut_before(&mut self, user_key: &[u8], file_bytes: u64, entry_bytes: u64) -> bool;
}

/// Makes the cutter of each sub-merge.
pub trait OutputPartitioner: Send + Sync + fmt::Debug {
    /// The cutter of a sub-merge whose keys' images span `[lo, hi]`, with
    /// `size_in(l, u)` the estimated bytes of its keys with images in
    /// `[l, u]`.
    fn cutter(&self, lo: u64, hi: u64, size_in: &dyn Fn(u64, u64) -> u64) -> Box<dyn FileCutter>;
}

/// The partitioner of `rule` with threshold `theta` bytes; the range rules
/// place keys by their `image`.
pub fn partitioner(rule: Partition, theta: u64, image: KeyImage) -> Box<dyn OutputPartitioner> {
    let theta = theta.max(1);
    match rule {
        Partition::None => Box::new(BySize { theta: u64::MAX }),
        // A tile is one file: the tiles themselves bound its size.
        Partition::Str | Partition::RstarGrove => Box::new(BySize { theta: u64::MAX }),
        Partition::Size => Box::new(BySize { theta }),
        Partition::Local => Box::new(ByRange {
            theta,
            global: false,
            image,
        }),
        Partition::Global => Box::new(ByRange {
            theta,
            global: true,
            image,
        }),
    }
}

/// Alg. 5.1.
#[derive(Debug)]
struct BySize {
    theta: u64,
}

impl OutputPartitioner for BySize {
    fn cutter(&self, _: u64, _: u64, _: &dyn Fn(u64, u64) -> u64) -> Box<dyn FileCutter> {
        Box::new(SizeCutter { theta: self.theta })
    }
}

struct SizeCutter {
    theta: u64,
}

impl FileCutter for SizeCutter {
    fn cut_before(&mut self, _: &[u8], file_bytes: u64, entry_bytes: u64) -> bool {
        file_bytes > 0 && file_bytes.saturating_add(entry_bytes) > self.theta
    }
}

/// Alg. 5.4 with the bounds of Alg. 5.6 (local) or 5.7 (global).
#[derive(Debug)]
struct ByRange {
    theta: u64,
    global: bool,
    image: KeyImage,
}

impl OutputPartitioner for ByRange {
    fn cutter(&self, lo: u64, hi: u64, size_in: &dyn Fn(u64, u64) -> u64) -> Box<dyn FileCutter> {
        let (l, u) = if self.global {
            dyadic_root(lo, hi)
        } else {
            (lo, hi)
        };
        Box::new(RangeCutter {
            bounds: binary_split(l, u, self.theta, size_in),
            next: 0,
            image: self.image,
        })
    }
}

struct RangeCutter {
    bounds: Vec<(u64, u64)>,
    /// Index of the bound the open file belongs to.
    next: usize,
    image: KeyImage,
}

impl FileCutter for RangeCutter {
    fn cut_before(&mut self, user_key: &[u8], file_bytes: u64, _: u64) -> bool {
        let image = self.image.of(user_key);
        // Move to the bound holding `image`; estimates may have left a key
        // outside every bound (then it joins the file open before it).
        let mut advanced = false;
        while self
            .bounds
            .get(self.next)
            .is_some_and(|&(_, upper)| image > upper)
            && self.next + 1 < self.bounds.len()
        {
            self.next += 1;
            advanced = true;
        }
        advanced && file_bytes > 0
    }
}

/// The dyadic node of the key space rooted at the longest common binary
/// prefix of `lo` and `hi`: the bits after the first differing one are
/// cleared in `lo` and set in `hi` (Alg. 5.7 lines 2–15).
pub fn dyadic_root(lo: u64, hi: u64) -> (u64, u64) {
    let diff = lo ^ hi;
    if diff == 0 {
        return (lo, hi);
    }
    let below = u64::MAX >> diff.leading_zeros();
    (lo & !below, hi | below)
}

/// BINARYSPLIT(l, u) (Alg. 5.5): splits `[l, u]` at its mean until each
/// part holds at most `theta` (estimated) bytes; empty parts vanish. No
/// range is visited twice, so `size_in` is asked once per range; what
/// repeats are the `SUM`s behind it, which [`CachedSum`] caches.
pub fn binary_split(
    l: u64,
    u: u64,
    theta: u64,
    size_in: &dyn Fn(u64, u64) -> u64,
) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    // An explicit stack, right half pushed first, keeps the output sorted.
    let mut todo = vec![(l, u)];
    while let Some((l, u)) = todo.pop() {
        let s = size_in(l, u);
        if s == 0 {
            continue;
        }
        if s <= theta || l == u {
            out.push((l, u));
            continue;
        }
        let m = l + (u - l) / 2;
        todo.push((m + 1, u));
        todo.push((l, m));
    }
    out
}

/// One input file for [`sweep_groups`]: its key range as images and an
/// index the caller chooses.
#[derive(Debug, Clone, Copy)]
pub struct SweepFile<'a> {
    /// Smallest user key.
    pub smallest: &'a [u8],
    /// Largest user key.
    pub largest: &'a [u8],
    /// The caller's index of the file.
    pub index: usize,
}

/// Groups files by overlap (Alg. 5.2–5.3): sorted by lower bound, a file
/// whose smallest key is above the largest key seen so far in the current
/// group (`u_max`, the digest's fix) starts a new group. Returns the
/// callers' indices, groups in key order.
pub fn sweep_groups(mut files: Vec<SweepFile<'_>>) -> Vec<Vec<usize>> {
    files.sort_by(|a, b| a.smallest.cmp(b.smallest));
    let mut groups: Vec<Vec<usize>> = Vec::new();
    let mut u_max: &[u8] = &[];
    for f in files {
        match groups.last_mut() {
            Some(g) if f.smallest <= u_max => {
                g.push(f.index);
                if f.largest > u_max {
                    u_max = f.largest;
                }
            }
            _ => {
                groups.push(vec![f.index]);
                u_max = f.largest;
            }
        }
    }
    groups
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sweep's groups of files given by their key ranges.
    fn sweep_ranges(ranges: &[(Vec<u8>, Vec<u8>)]) -> Vec<Vec<usize>> {
        let files = ranges
            .iter()
            .enumerate()
            .map(|(index, (s, l))| SweepFile {
                smallest: s,
                largest: l,
                index,
            })
            .collect();
        sweep_groups(files)
    }

    fn exact(keys: &[u64], per_key: u64) -> impl Fn(u64, u64) -> u64 + '_ {
        move |l, u| keys.iter().filter(|&&k| k >= l && k <= u).count() as u64 * per_key
    }

    /// Cuts `keys` (sorted) into files with the cutter of `rule`.
    fn files_of(rule: Partition, keys: &[u64], theta: u64) -> Vec<Vec<u64>> {
        let size = exact(keys, 1);
        let lo = keys[0];
        let hi = keys[keys.len() - 1];
        let mut cutter = partitioner(rule, theta, KeyImage::BigEndian).cutter(lo, hi, &size);
        let mut files: Vec<Vec<u64>> = Vec::new();
        for &k in keys {
            let open = files.last().map_or(0, |f| f.len() as u64);
            if files.is_empty() || cutter.cut_before(&k.to_be_bytes(), open, 1) {
                files.push(Vec::new());
            }
            files.last_mut().unwrap().push(k);
        }
        files
    }

    #[test]
    fn dyadic_root_keeps_the_common_prefix() {
        // The seed's example: 8 (b00001000) and 14 (b00001110) give [8, 15].
        assert_eq!(dyadic_root(8, 14), (8, 15));
        assert_eq!(dyadic_root(9, 254), (0, 255));
        assert_eq!(dyadic_root(0, u64::MAX), (0, u64::MAX));
        assert_eq!(dyadic_root(5, 5), (5, 5));
    }

    /// Seed 000 Fig. 5.1: runs A = {1, 3, ..., 13} and B = {4, 6, ..., 14}
    /// with θ = 3 keys. Size partitioning leaves files that chain into one
    /// sub-merge; Global-Range bounds give two sub-merges and a trivial move.
    #[test]
    fn figure_5_1_size_chains_and_global_range_splits() {
        let a: Vec<u64> = (1..=13).step_by(2).collect();
        let b: Vec<u64> = (4..=14).step_by(2).collect();
        let groups_of = |rule: Partition| {
            let fa = files_of(rule, &a, 3);
            let fb = files_of(rule, &b, 3);
            let ranges: Vec<(Vec<u8>, Vec<u8>)> = fa
                .iter()
                .chain(&fb)
                .map(|f| {
                    (
                        f[0].to_be_bytes().to_vec(),
                        f[f.len() - 1].to_be_bytes().to_vec(),
                    )
                })
                .collect();
            sweep_ranges(&ranges)
        };
        let size = groups_of(Partition::Size);
        assert_eq!(size.len(), 1, "size partitioning chains: {size:?}");
        let global = groups_of(Partition::Global);
        let sub_merges = global.iter().filter(|g| g.len() > 1).count();
        let moves = global.iter().filter(|g| g.len() == 1).count();
        assert_eq!((sub_merges, moves), (2, 1), "{global:?}");
    }

    #[test]
    fn binary_split_stops_at_theta_and_drops_empty_ranges() {
        // 40 keys in [9, 254] as Fig. 5.2 (uint8 key space, θ = 10): the
        // global bounds are dyadic and each holds at most 10 keys.
        let keys: Vec<u64> = (0..40).map(|i| 9 + i * 245 / 39).collect();
        let size = exact(&keys, 1);
        let (l, u) = dyadic_root(9, 254);
        assert_eq!((l, u), (0, 255));
        let bounds = binary_split(l, u, 10, &size);
        for &(lo, hi) in &bounds {
            let width = hi - lo + 1;
            assert!(width.is_power_of_two() && lo % width == 0, "{lo}-{hi}");
            assert!(size(lo, hi) <= 10 && size(lo, hi) > 0);
        }
        assert_eq!(bounds.iter().map(|&(l, u)| size(l, u)).sum::<u64>(), 40);
        // Local-Range splits [9, 254] first at 131, as the figure does.
        let local = binary_split(9, 254, 10, &size);
        assert!(local.iter().any(|&(_, hi)| hi == 131));
        assert_eq!(local.iter().map(|&(l, u)| size(l, u)).sum::<u64>(), 40);
    }

    #[test]
    fn none_never_cuts_and_size_cuts_at_theta() {
        let keys: Vec<u64> = (0..25).collect();
        assert_eq!(files_of(Partition::None, &keys, 10).len(), 1);
        let sized = files_of(Partition::Size, &keys, 10);
        assert_eq!(
            sized.iter().map(Vec::len).collect::<Vec<_>>(),
            vec![10, 10, 5]
        );
    }

    #[test]
    fn sweep_compares_against_the_running_maximum() {
        // [0,100] swallows [10,20] and [30,40]; [150,160] is apart. Comparing
        // against the previous file's upper bound only would split [30,40]
        // off wrongly.
        let r = |a: u8, b: u8| (vec![a], vec![b]);
        let ranges = [r(0, 100), r(10, 20), r(30, 40), r(150, 160)];
        assert_eq!(sweep_ranges(&ranges), vec![vec![0, 1, 2], vec![3]]);
    }
}
