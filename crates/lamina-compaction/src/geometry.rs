//! 2-D points and closed rectangles (minimum bounding rectangles, MBRs):
//! the geometry shared by the spatial keys of the engine, the MBRs that
//! tables and files carry, and the spatial partitioners and pickers here
//! (seed 000 ch. 4).

/// A point of the plane (x = longitude, y = latitude in the experiments).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    /// First dimension.
    pub x: f64,
    /// Second dimension.
    pub y: f64,
}

impl Point {
    /// A point; callers that take coordinates from input check
    /// [`Point::is_finite`] first.
    pub fn new(x: f64, y: f64) -> Point {
        Point { x, y }
    }

    /// True if neither coordinate is NaN or infinite.
    pub fn is_finite(self) -> bool {
        self.x.is_finite() && self.y.is_finite()
    }
}

/// A closed axis-aligned rectangle `[min.x, max.x] × [min.y, max.y]`.
///
/// [`Rect::EMPTY`] (min = +∞, max = −∞) is the identity of
/// [`Rect::extend`]: the MBR of no points, which intersects nothing.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rect {
    /// Lower-left corner.
    pub min: Point,
    /// Upper-right corner.
    pub max: Point,
}

impl Rect {
    /// The MBR of nothing.
    pub const EMPTY: Rect = Rect {
        min: Point {
            x: f64::INFINITY,
            y: f64::INFINITY,
        },
        max: Point {
            x: f64::NEG_INFINITY,
            y: f64::NEG_INFINITY,
        },
    };

    /// The whole plane: what a block or file whose keys cannot all be read as
    /// points claims, so pruning never skips it.
    pub const ALL: Rect = Rect {
        min: Point {
            x: f64::NEG_INFINITY,
            y: f64::NEG_INFINITY,
        },
        max: Point {
            x: f64::INFINITY,
            y: f64::INFINITY,
        },
    };

    /// The rectangle with corners `(x1, y1)` and `(x2, y2)` in any order.
    pub fn new(x1: f64, y1: f64, x2: f64, y2: f64) -> Rect {
        Rect {
            min: Point::new(x1.min(x2), y1.min(y2)),
            max: Point::new(x1.max(x2), y1.max(y2)),
        }
    }

    /// The degenerate rectangle of one point.
    pub fn of_point(p: Point) -> Rect {
        Rect { min: p, max: p }
    }

    /// True for the MBR of nothing (no point lies inside).
    pub fn is_empty(&self) -> bool {
        !(self.min.x <= self.max.x && self.min.y <= self.max.y)
    }

    /// Grows the rectangle to cover `p`.
    pub fn extend(&mut self, p: Point) {
        self.min.x = self.min.x.min(p.x);
        self.min.y = self.min.y.min(p.y);
        self.max.x = self.max.x.max(p.x);
        self.max.y = self.max.y.max(p.y);
    }

    /// The MBR of both.
    pub fn union(&self, other: &Rect) -> Rect {
        Rect {
            min: Point::new(self.min.x.min(other.min.x), self.min.y.min(other.min.y)),
            max: Point::new(self.max.x.max(other.max.x), self.max.y.max(other.max.y)),
        }
    }

    /// Condition (4.1) of seed 000: for every dimension d,
    /// `K_min[d] ≤ K'_max[d]` and `K'_min[d] ≤ K_max[d]` (closed, so touching
    /// rectangles intersect; an empty rectangle intersects nothing).
    pub fn intersects(&self, other: &Rect) -> bool {
        !self.is_empty()
            && !other.is_empty()
            && self.min.x <= other.max.x
            && other.min.x <= self.max.x
            && self.min.y <= other.max.y
            && other.min.y <= self.max.y
    }

    /// True if `p` lies inside or on the border.
    pub fn contains(&self, p: Point) -> bool {
        self.min.x <= p.x && p.x <= self.max.x && self.min.y <= p.y && p.y <= self.max.y
    }

    /// The area (0 for a degenerate or empty rectangle).
    pub fn area(&self) -> f64 {
        if self.is_empty() {
            0.0
        } else {
            (self.max.x - self.min.x) * (self.max.y - self.min.y)
        }
    }

    /// The centre.
    pub fn centre(&self) -> Point {
        Point::new(
            (self.min.x + self.max.x) / 2.0,
            (self.min.y + self.max.y) / 2.0,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn brute_intersects(a: &Rect, b: &Rect) -> bool {
        // Two closed rectangles meet iff some point lies in both: try the
        // candidate corners of the would-be intersection.
        let x = a.min.x.max(b.min.x);
        let y = a.min.y.max(b.min.y);
        a.contains(Point::new(x, y)) && b.contains(Point::new(x, y))
    }

    proptest! {
        #[test]
        fn intersects_matches_a_common_point(
            a in prop::array::uniform4(-10i32..10),
            b in prop::array::uniform4(-10i32..10),
        ) {
            let r = |v: [i32; 4]| Rect::new(v[0].into(), v[1].into(), v[2].into(), v[3].into());
            let (ra, rb) = (r(a), r(b));
            prop_assert_eq!(ra.intersects(&rb), brute_intersects(&ra, &rb));
            prop_assert_eq!(ra.intersects(&rb), rb.intersects(&ra));
        }

        #[test]
        fn extend_covers_every_point(points in prop::collection::vec((-1e6f64..1e6, -1e6f64..1e6), 1..50)) {
            let mut mbr = Rect::EMPTY;
            for &(x, y) in &points {
                mbr.extend(Point::new(x, y));
            }
            for &(x, y) in &points {
                prop_assert!(mbr.contains(Point::new(x, y)));
            }
            let xs = points.iter().map(|p| p.0);
            prop_assert_eq!(mbr.min.x, xs.clone().fold(f64::INFINITY, f64::min));
            prop_assert_eq!(mbr.max.x, xs.fold(f64::NEG_INFINITY, f64::max));
        }
    }

    #[test]
    fn empty_and_all() {
        assert!(Rect::EMPTY.is_empty());
        assert!(!Rect::EMPTY.intersects(&Rect::ALL));
        assert!(!Rect::ALL.is_empty());
        assert!(Rect::ALL.intersects(&Rect::new(1.0, 1.0, 2.0, 2.0)));
        let mut r = Rect::EMPTY;
        r.extend(Point::new(3.0, 4.0));
        assert_eq!(r, Rect::of_point(Point::new(3.0, 4.0)));
        assert_eq!(r.union(&Rect::EMPTY), r);
        // Touching borders count (closed rectangles).
        assert!(Rect::new(0.0, 0.0, 1.0, 1.0).intersects(&Rect::new(1.0, 1.0, 2.0, 2.0)));
    }
}
