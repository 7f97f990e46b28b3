//! Spatial partitioning of a leveled LSM R-tree's merges (seed 000 §4.3):
//! the merge's records are cut into spatially disjoint *tiles*, each written
//! as its own file (its own run of the level, ranked
//! [`crate::placement::TILE_RANK`]), whatever order the comparator keeps
//! inside a file.
//!
//! Both rules compute a [`Tiles`] from a sample of the merge's points — the
//! seed's low-memory two-pass variant: pass 1 samples, pass 2 routes every
//! record to the tile containing it — as a binary space partition whose
//! cuts are half-open (`coordinate < at` goes below), so every point lies
//! in exactly one tile and the MBRs of different tiles' points never
//! intersect.
//!
//! * **STR** (Sort-Tile-Recursive): ⌈√P⌉ vertical slabs of equal counts by
//!   x, each cut by y into its share of the P tiles: tall, narrow tiles
//!   (the seed's Fig. 4.2c).
//! * **R\*-Grove**: recursive binary splits, each on the axis whose
//!   candidate splits have the smallest total margin (R*-tree's
//!   ChooseSplitAxis), at the candidate of smallest overlap, then area
//!   (ChooseSplitIndex); a candidate gives each side a whole number of the
//!   P partitions' worth of sample points, R*-Grove's load-balance rule:
//!   square-like tiles (Fig. 4.2d).

use std::cmp::Ordering;

use crate::geometry::{Point, Rect};

/// The rule that places tiles.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TileRule {
    /// Sort-Tile-Recursive.
    Str,
    /// R*-Grove's boundary computation.
    RstarGrove,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Axis {
    X,
    Y,
}

impl Axis {
    fn of(self, p: &Point) -> f64 {
        match self {
            Axis::X => p.x,
            Axis::Y => p.y,
        }
    }

    fn sort(self, points: &mut [Point]) {
        points.sort_by(|a, b| {
            self.of(a)
                .partial_cmp(&self.of(b))
                .unwrap_or(Ordering::Equal)
        });
    }
}

#[derive(Debug, Clone)]
enum Node {
    Leaf(usize),
    /// Points with `axis < at` go to `below`, the others to `above`.
    Split {
        axis: Axis,
        at: f64,
        below: usize,
        above: usize,
    },
}

/// A binary space partition into tiles numbered `0..len()`.
#[derive(Debug, Clone)]
pub struct Tiles {
    nodes: Vec<Node>,
    leaves: usize,
}

impl Tiles {
    /// The tiles of `rule` for `parts` partitions (at least one) of
    /// `sample` (reordered in place); an empty sample gives one tile.
    pub fn new(rule: TileRule, sample: &mut [Point], parts: usize) -> Tiles {
        let mut tiles = Tiles {
            nodes: Vec::new(),
            leaves: 0,
        };
        let parts = if sample.is_empty() { 1 } else { parts.max(1) };
        match rule {
            TileRule::Str => {
                let slabs = (parts as f64).sqrt().ceil() as usize;
                // Tiles per slab: as even as possible, summing to `parts`.
                let counts: Vec<usize> = (0..slabs)
                    .map(|j| parts / slabs + usize::from(j < parts % slabs))
                    .filter(|&c| c > 0)
                    .collect();
                tiles.split_by(sample, Axis::X, &counts, &mut |t, slab, n| {
                    t.split_by(slab, Axis::Y, &vec![1; n], &mut |t, _, _| t.leaf())
                });
            }
            TileRule::RstarGrove => {
                tiles.grove(sample, parts);
            }
        }
        tiles
    }

    /// Tiles in the partition.
    pub fn len(&self) -> usize {
        self.leaves
    }

    /// Always false: a partition has at least one tile.
    pub fn is_empty(&self) -> bool {
        self.leaves == 0
    }

    /// The tile holding `p`; a NaN coordinate goes above every cut.
    pub fn route(&self, p: Point) -> usize {
        let mut at = 0;
        while let Some(node) = self.nodes.get(at) {
            match *node {
                Node::Leaf(tile) => return tile,
                Node::Split {
                    axis,
                    at: cut,
                    below,
                    above,
                } => at = if axis.of(&p) < cut { below } else { above },
            }
        }
        0
    }

    fn leaf(&mut self) -> usize {
        self.nodes.push(Node::Leaf(self.leaves));
        self.leaves += 1;
        self.nodes.len() - 1
    }

    /// Reserves the node of a split whose children come next.
    fn reserve(&mut self) -> usize {
        self.nodes.push(Node::Leaf(usize::MAX));
        self.nodes.len() - 1
    }

    /// Cuts `points` along `axis` into consecutive groups holding shares
    /// of them proportional to `weights`, and makes each group's subtree
    /// with `then(group, weight)`.
    fn split_by(
        &mut self,
        points: &mut [Point],
        axis: Axis,
        weights: &[usize],
        then: &mut dyn FnMut(&mut Self, &mut [Point], usize) -> usize,
    ) -> usize {
        if let [only] = weights {
            return then(self, points, *only);
        }
        axis.sort(points);
        let half = weights.len() / 2;
        let left: usize = weights[..half].iter().sum();
        let total: usize = weights.iter().sum();
        let (at, mid) = cut(points, axis, left, total);
        let (lo, hi) = points.split_at_mut(mid);
        let me = self.reserve();
        let below = self.split_by(lo, axis, &weights[..half], then);
        let above = self.split_by(hi, axis, &weights[half..], then);
        self.nodes[me] = Node::Split {
            axis,
            at,
            below,
            above,
        };
        me
    }

    /// R*-Grove: the split of `points` into `parts` partitions of smallest
    /// margin, then overlap, then area, recursively.
    fn grove(&mut self, points: &mut [Point], parts: usize) -> usize {
        if parts <= 1 || points.len() < 2 {
            return self.leaf();
        }
        // (margin sum, best (overlap, area, k)) per axis.
        let mut best: Option<(Axis, f64, (f64, f64, usize))> = None;
        for axis in [Axis::X, Axis::Y] {
            axis.sort(points);
            let prefix = running_mbrs(points.iter());
            let suffix = running_mbrs(points.iter().rev());
            let n = points.len();
            let mut margins = 0.0;
            let mut choice: Option<(f64, f64, usize)> = None;
            for k in 1..parts {
                let (_, mid) = cut(points, axis, k, parts);
                if mid == 0 || mid == n {
                    continue;
                }
                let (a, b) = (prefix[mid - 1], suffix[n - mid - 1]);
                margins += margin(&a) + margin(&b);
                let overlap = overlap_area(&a, &b);
                let area = a.area() + b.area();
                if choice.is_none_or(|(o, r, _)| (overlap, area) < (o, r)) {
                    choice = Some((overlap, area, k));
                }
            }
            if let Some(c) = choice {
                if best.as_ref().is_none_or(|(_, m, _)| margins < *m) {
                    best = Some((axis, margins, c));
                }
            }
        }
        let Some((axis, _, (_, _, k))) = best else {
            // Every point on one spot: nothing to cut.
            return self.leaf();
        };
        axis.sort(points);
        let (at, mid) = cut(points, axis, k, parts);
        let (lo, hi) = points.split_at_mut(mid);
        let me = self.reserve();
        let below = self.grove(lo, k);
        let above = self.grove(hi, parts - k);
        self.nodes[me] = Node::Split {
            axis,
            at,
            below,
            above,
        };
        me
    }
}

/// The cut of `points` (sorted by `axis`) giving about `part / parts` of
/// them to the lower side: the coordinate `at` (points `< at` go below)
/// and how many points go below.
fn cut(points: &[Point], axis: Axis, part: usize, parts: usize) -> (f64, usize) {
    let n = points.len();
    let want = (n * part).div_ceil(parts.max(1)).min(n);
    let Some(p) = points.get(want) else {
        return (f64::INFINITY, n);
    };
    let at = axis.of(p);
    (at, points.partition_point(|q| axis.of(q) < at))
}

/// The MBRs of the first 1, 2, … points.
fn running_mbrs<'a>(points: impl Iterator<Item = &'a Point>) -> Vec<Rect> {
    let mut r = Rect::EMPTY;
    points
        .map(|p| {
            r.extend(*p);
            r
        })
        .collect()
}

fn margin(r: &Rect) -> f64 {
    if r.is_empty() {
        0.0
    } else {
        (r.max.x - r.min.x) + (r.max.y - r.min.y)
    }
}

fn overlap_area(a: &Rect, b: &Rect) -> f64 {
    let w = a.max.x.min(b.max.x) - a.min.x.max(b.min.x);
    let h = a.max.y.min(b.max.y) - a.min.y.max(b.min.y);
    if w > 0.0 && h > 0.0 {
        w * h
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {

    use super::*;
    use proptest::prelude::*;

    fn grid_points(n: usize, width: f64, seed: u64) -> Vec<Point> {
        // A small LCG: deterministic points without a dependency.
        let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
        let mut next = move || {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (s >> 11) as f64 / (1u64 << 53) as f64
        };
        (0..n).map(|_| Point::new(next() * width, next())).collect()
    }

    /// The MBR of the points routed to each tile (brute force).
    fn tile_mbrs(tiles: &Tiles, points: &[Point]) -> Vec<(Rect, usize)> {
        let mut out = vec![(Rect::EMPTY, 0); tiles.len()];
        for p in points {
            let t = tiles.route(*p);
            out[t].0.extend(*p);
            out[t].1 += 1;
        }
        out
    }

    fn mean_aspect(mbrs: &[(Rect, usize)]) -> f64 {
        let ratios: Vec<f64> = mbrs
            .iter()
            .filter(|(r, _)| !r.is_empty())
            .map(|(r, _)| {
                let (w, h) = (r.max.x - r.min.x, r.max.y - r.min.y);
                w.max(h) / w.min(h).max(1e-12)
            })
            .collect();
        ratios.iter().sum::<f64>() / ratios.len() as f64
    }

    /// Seed 000 Fig. 4.2: on a 4 × 1 area cut into 4, STR makes 2 slabs of
    /// 2 tiles (2 × 0.5, aspect 4); R*-Grove makes 4 squares.
    #[test]
    fn str_is_tall_and_narrow_rstar_grove_is_square() {
        let points = grid_points(4000, 4.0, 7);
        let str_tiles = Tiles::new(TileRule::Str, &mut points.clone(), 4);
        let grove = Tiles::new(TileRule::RstarGrove, &mut points.clone(), 4);
        assert_eq!((str_tiles.len(), grove.len()), (4, 4));
        let s = mean_aspect(&tile_mbrs(&str_tiles, &points));
        let g = mean_aspect(&tile_mbrs(&grove, &points));
        assert!(s > 3.0 && s < 5.0, "STR aspect {s}");
        assert!(g < 1.5, "R*-Grove aspect {g}");
    }

    proptest! {
        /// Every rule, on any sample and any data: tiles hold disjoint
        /// MBRs, and on the sampled data itself each tile holds close to
        /// its share.
        #[test]
        fn tiles_are_disjoint_and_balanced(
            raw in prop::collection::vec((0u16..500, 0u16..500), 1..600),
            parts in 1usize..12,
            grove in any::<bool>(),
        ) {
            let rule = if grove { TileRule::RstarGrove } else { TileRule::Str };
            let points: Vec<Point> =
                raw.iter().map(|&(x, y)| Point::new(x as f64, y as f64)).collect();
            let tiles = Tiles::new(rule, &mut points.clone(), parts);
            prop_assert!(!tiles.is_empty() && tiles.len() <= parts);
            let mbrs = tile_mbrs(&tiles, &points);
            for (i, a) in mbrs.iter().enumerate() {
                for b in &mbrs[i + 1..] {
                    prop_assert!(!a.0.intersects(&b.0), "{:?} and {:?} intersect", a, b);
                }
            }
            // Distinct coordinates cut evenly: no tile gets more than
            // twice its share plus the cut rounding.
            let mut xs: Vec<u16> = raw.iter().map(|p| p.0).collect();
            let mut ys: Vec<u16> = raw.iter().map(|p| p.1).collect();
            xs.sort_unstable();
            xs.dedup();
            ys.sort_unstable();
            ys.dedup();
            if xs.len() == raw.len() && ys.len() == raw.len() {
                let share = points.len().div_ceil(parts);
                for (_, count) in &mbrs {
                    prop_assert!(*count <= 2 * share + 2, "{count} > 2 × {share}");
                }
            }
        }
    }
}
