//! Where a merge's output files end: the inputs resolved to pieces of
//! key space with evenly spread bytes, cuts placed by their density, and
//! the pieces a key range meets (for BINARYSPLIT's bounds).

/// One input file of a task, resolved.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Piece {
    pub(crate) lo: u64,
    pub(crate) hi: u64,
    pub(crate) size: u64,
    /// The flush its oldest data came with.
    pub(crate) seq: u64,
}

thread_local! {
    static CUT_WORK: std::cell::Cell<CutWork> = const {
        std::cell::Cell::new(CutWork { pieces_read: 0, files_cut: 0 })
    };
}

/// What cutting merges' outputs at BINARYSPLIT's bounds (`partition=local`
/// or `global`) has cost on this thread so far, for tests that bound it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CutWork {
    /// Input pieces read to estimate the bytes in a key range.
    pub pieces_read: u64,
    /// Output files cut.
    pub files_cut: u64,
}

/// [`CutWork`] so far on this thread.
pub fn cut_work() -> CutWork {
    CUT_WORK.with(std::cell::Cell::get)
}

pub(crate) fn count_cut_work(pieces_read: u64, files_cut: u64) {
    CUT_WORK.with(|w| {
        let mut work = w.get();
        work.pieces_read = work.pieces_read.wrapping_add(pieces_read);
        work.files_cut = work.files_cut.wrapping_add(files_cut);
        w.set(work);
    });
}

/// The pieces a key range meets, in their order, found without reading
/// the others: a max-tree over their `hi` (the sweep hands them over sorted
/// by `lo`, so those starting by the range's end are a prefix, and the
/// tree finds the ones in it reaching the range's start). The sum over
/// them adds the same terms in the same order as a loop over every piece,
/// so it is the same float.
pub(crate) struct Meets<'a> {
    pieces: &'a [Piece],
    sorted: bool,
    /// Node `n` holds the highest `hi` under it; leaves from `width` on.
    reach: Vec<u64>,
    width: usize,
}

impl<'a> Meets<'a> {
    pub(crate) fn new(pieces: &'a [Piece]) -> Meets<'a> {
        let width = pieces.len().next_power_of_two();
        let mut reach = vec![0; 2 * width];
        for (i, p) in pieces.iter().enumerate() {
            reach[width + i] = p.hi;
        }
        for n in (1..width).rev() {
            reach[n] = reach[2 * n].max(reach[2 * n + 1]);
        }
        Meets {
            pieces,
            sorted: pieces.windows(2).all(|w| w[0].lo <= w[1].lo),
            reach,
            width,
        }
    }

    /// Hands `f` the pieces meeting `[l, u]`, in order (every piece, in
    /// order, if they came unsorted).
    pub(crate) fn each_meeting(&self, l: u64, u: u64, mut f: impl FnMut(&Piece)) {
        let mut read = 0;
        let mut count = |piece: &Piece| {
            read += 1;
            f(piece);
        };
        if self.sorted {
            let to = self.pieces.partition_point(|p| p.lo <= u);
            self.visit(1, 0, self.width, to, l, &mut count);
        } else {
            self.pieces.iter().for_each(count);
        }
        count_cut_work(read, 0);
    }

    /// Depth first, left to right, from node `n` (pieces `[from, end)`):
    /// a node wholly past `to` or reaching short of `l` holds none. The
    /// depth is the log of the pieces.
    fn visit(
        &self,
        n: usize,
        from: usize,
        end: usize,
        to: usize,
        l: u64,
        f: &mut impl FnMut(&Piece),
    ) {
        if from >= to || self.reach.get(n).is_none_or(|&r| r < l) {
            return;
        }
        if end - from == 1 {
            if let Some(piece) = self.pieces.get(from) {
                f(piece);
            }
            return;
        }
        let mid = from + (end - from) / 2;
        self.visit(2 * n, from, mid, to, l, f);
        self.visit(2 * n + 1, mid, end, to, l, f);
    }
}

/// The oldest data among `pieces`: every output of a merge holds some of
/// each input (the model's keys are spread evenly), so its oldest too.
pub(crate) fn oldest(pieces: &[Piece]) -> u64 {
    pieces.iter().map(|p| p.seq).min().unwrap_or(0)
}

/// The last key of each output file: `count − 1` cuts where the cumulative
/// bytes reach multiples of `target`, then `hi`. Cuts that cannot advance
/// (ranges too narrow) are dropped and their bytes go to the next file.
pub(crate) fn density_cuts(
    pieces: &[Piece],
    out: u64,
    target: u64,
    count: u64,
    lo: u64,
    hi: u64,
) -> Vec<u64> {
    // Density events: (key, delta density in bytes per key), scaled so the
    // total is `out`.
    let input: u64 = pieces.iter().map(|p| p.size).sum();
    let scale = if input == 0 {
        0.0
    } else {
        out as f64 / input as f64
    };
    let mut events: Vec<(f64, f64)> = Vec::with_capacity(pieces.len() * 2);
    for p in pieces {
        let width = (p.hi - p.lo) as f64 + 1.0;
        let d = p.size as f64 * scale / width;
        events.push((p.lo as f64, d));
        events.push((p.hi as f64 + 1.0, -d));
    }
    events.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut cuts = Vec::with_capacity(count as usize);
    let mut density = 0.0;
    let mut mass = 0.0;
    let mut next = target as f64;
    let mut prev_cut: Option<u64> = None;
    let mut i = 0;
    while i < events.len() && (cuts.len() as u64) + 1 < count {
        let x = events[i].0;
        while i < events.len() && events[i].0 == x {
            density += events[i].1;
            i += 1;
        }
        let Some(&(end, _)) = events.get(i) else {
            break;
        };
        let seg = (end - x) * density.max(0.0);
        while density > 0.0 && mass + seg >= next && (cuts.len() as u64) + 1 < count {
            let at = x + (next - mass) / density;
            let cut = (at.ceil() as u64)
                .saturating_sub(1)
                .clamp(lo, hi.saturating_sub(1));
            if prev_cut.is_none_or(|p| cut > p) {
                cuts.push(cut);
                prev_cut = Some(cut);
            }
            next += target as f64;
        }
        mass += seg;
    }
    cuts.push(hi);
    cuts
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The pieces a range meets, as every piece filtered in order finds
    /// them: sorted pieces of several overlapping runs, one of them a
    /// flush over the whole key space, and an unsorted list.
    #[test]
    fn meets_finds_what_a_scan_finds() {
        let mut state = 7u64;
        let mut next = |n: u64| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (state >> 33) % n
        };
        for len in [0usize, 1, 2, 7, 64, 300] {
            let mut pieces: Vec<Piece> = (0..len)
                .map(|_| {
                    let lo = next(10_000);
                    Piece {
                        lo,
                        hi: lo + next(400),
                        size: 1 + next(50),
                        seq: 0,
                    }
                })
                .collect();
            if len > 2 {
                pieces[1] = Piece {
                    lo: 0,
                    hi: u64::MAX,
                    size: 9,
                    seq: 0,
                };
            }
            for sort in [false, true] {
                if sort {
                    pieces.sort_by_key(|p| p.lo);
                }
                let meets = Meets::new(&pieces);
                for _ in 0..200 {
                    let l = next(11_000);
                    let u = l + next(3_000);
                    let mut found = Vec::new();
                    meets.each_meeting(l, u, |p| found.push(p as *const Piece));
                    let expected: Vec<*const Piece> = pieces
                        .iter()
                        .filter(|p| p.lo <= u && l <= p.hi)
                        .map(|p| p as *const Piece)
                        .collect();
                    if meets.sorted {
                        assert_eq!(found, expected, "{len} pieces, [{l}, {u}]");
                    } else {
                        // Unsorted: every piece, for the caller to test.
                        assert_eq!(found.len(), pieces.len());
                    }
                }
            }
        }
    }

    #[test]
    fn cuts_follow_density() {
        // One piece over [0, 999] of 100 bytes, 4 files of 25 bytes.
        let p = [Piece {
            lo: 0,
            hi: 999,
            size: 100,
            seq: 1,
        }];
        assert_eq!(
            density_cuts(&p, 100, 25, 4, 0, 999),
            vec![249, 499, 749, 999]
        );
        // Twice the density in the first half: 40 of 60 bytes there.
        let p = [
            Piece {
                lo: 0,
                hi: 999,
                size: 40,
                seq: 1,
            },
            Piece {
                lo: 0,
                hi: 499,
                size: 20,
                seq: 2,
            },
        ];
        let cuts = density_cuts(&p, 60, 20, 3, 0, 999);
        assert_eq!(cuts.len(), 3);
        assert!((cuts[0] as i64 - 249).abs() <= 1, "{cuts:?}");
        assert!((cuts[1] as i64 - 499).abs() <= 1, "{cuts:?}");
    }
}
