//! The Hilbert, Z-order and Simple comparators as order-preserving keys.

use std::cmp::Ordering;

use super::Point;
use crate::error::{Error, Result};

/// The order of a spatial index's records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Comparator {
    /// Along a Hilbert curve over the world (AsterixDB's default for
    /// points), then by x, then by y.
    Hilbert,
    /// Along a Z-order (Morton) curve, then by x, then by y.
    ZOrder,
    /// By x, then by y (the seed's Simple comparator, Nearest-X).
    Simple,
}

/// Bits of each quantised coordinate: the curves have 2^32 × 2^32 cells.
const CURVE_BITS: u32 = 32;
/// The space the curves cover; points outside clamp to its border for the
/// curve value only (the exact coordinates that follow keep the order total).
const X_RANGE: (f64, f64) = (-180.0, 180.0);
const Y_RANGE: (f64, f64) = (-90.0, 90.0);

/// An f64 as 8 bytes whose unsigned order is the number's order (-0.0 is
/// taken as +0.0, so equal points give equal keys).
fn ordered(v: f64) -> u64 {
    let bits = if v == 0.0 { 0 } else { v.to_bits() };
    if bits >> 63 == 1 {
        !bits
    } else {
        bits ^ (1 << 63)
    }
}

fn unordered(u: u64) -> f64 {
    f64::from_bits(if u >> 63 == 1 { u ^ (1 << 63) } else { !u })
}

/// `v` as a cell number in `[0, 2^32)` of the range.
fn quantise(v: f64, (lo, hi): (f64, f64)) -> u64 {
    let cells = (1u64 << CURVE_BITS) as f64;
    let c = ((v - lo) / (hi - lo) * cells).floor();
    // NaN cannot reach here (encode refuses it); `as` saturates anyway.
    c.clamp(0.0, cells - 1.0) as u64
}

/// The distance along the Hilbert curve of order `order` (a 2^order ×
/// 2^order grid) of cell `(x, y)`, both `< 2^order`, `order ≤ 32`: the
/// classic rotate-and-flip walk from the most significant bit down.
pub fn hilbert_index(order: u32, mut x: u64, mut y: u64) -> u64 {
    let n = 1u64 << order;
    let mut d = 0u64;
    let mut s = n >> 1;
    while s > 0 {
        let rx = u64::from(x & s != 0);
        let ry = u64::from(y & s != 0);
        d += s * s * ((3 * rx) ^ ry);
        // Rotate the quadrant so the sub-curve starts where this one does.
        if ry == 0 {
            if rx == 1 {
                x = n - 1 - x;
                y = n - 1 - y;
            }
            std::mem::swap(&mut x, &mut y);
        }
        s >>= 1;
    }
    d
}

/// Spreads the 32 low bits of `v` to the even bit positions.
fn spread(v: u64) -> u64 {
    let mut v = v & 0xffff_ffff;
    v = (v | (v << 16)) & 0x0000_ffff_0000_ffff;
    v = (v | (v << 8)) & 0x00ff_00ff_00ff_00ff;
    v = (v | (v << 4)) & 0x0f0f_0f0f_0f0f_0f0f;
    v = (v | (v << 2)) & 0x3333_3333_3333_3333;
    (v | (v << 1)) & 0x5555_5555_5555_5555
}

impl Comparator {
    /// Every comparator.
    pub const ALL: [Comparator; 3] = [Comparator::Hilbert, Comparator::ZOrder, Comparator::Simple];

    /// `hilbert`, `zorder` or `simple`.
    pub fn name(self) -> &'static str {
        match self {
            Comparator::Hilbert => "hilbert",
            Comparator::ZOrder => "zorder",
            Comparator::Simple => "simple",
        }
    }

    /// Inverse of [`Comparator::name`].
    pub fn parse(s: &str) -> Option<Comparator> {
        Comparator::ALL.into_iter().find(|c| c.name() == s)
    }

    /// Bytes of a key: the curve value (8, not for Simple), x, y, id.
    pub fn key_len(self) -> usize {
        match self {
            Comparator::Simple => 24,
            _ => 32,
        }
    }

    /// The curve value of `p` (0 for Simple, which has none).
    fn curve(self, p: Point) -> u64 {
        let (x, y) = (quantise(p.x, X_RANGE), quantise(p.y, Y_RANGE));
        match self {
            Comparator::Hilbert => hilbert_index(CURVE_BITS, x, y),
            // x in the odd (higher) bit of each pair.
            Comparator::ZOrder => (spread(x) << 1) | spread(y),
            Comparator::Simple => 0,
        }
    }

    /// The key of record `id` at `p`: its bytewise order is the
    /// comparator's order, ties broken by id. A NaN or infinite coordinate
    /// is `InvalidArgument`.
    pub fn encode(self, p: Point, id: u64) -> Result<Vec<u8>> {
        if !p.is_finite() {
            return Err(Error::InvalidArgument(format!(
                "spatial key of record {id}: coordinates ({}, {}) are not finite",
                p.x, p.y
            )));
        }
        let mut key = Vec::with_capacity(self.key_len());
        if self != Comparator::Simple {
            key.extend_from_slice(&self.curve(p).to_be_bytes());
        }
        key.extend_from_slice(&ordered(p.x).to_be_bytes());
        key.extend_from_slice(&ordered(p.y).to_be_bytes());
        key.extend_from_slice(&id.to_be_bytes());
        Ok(key)
    }

    /// The point and id of a key of this comparator; `None` for bytes that
    /// are not one.
    pub fn decode(self, key: &[u8]) -> Option<(Point, u64)> {
        if key.len() != self.key_len() {
            return None;
        }
        let word = |i: usize| -> Option<u64> {
            Some(u64::from_be_bytes(key.get(i..i + 8)?.try_into().ok()?))
        };
        let at = self.key_len() - 24;
        let p = Point::new(unordered(word(at)?), unordered(word(at + 8)?));
        if !p.is_finite() || (self != Comparator::Simple && word(0)? != self.curve(p)) {
            return None;
        }
        Some((p, word(at + 16)?))
    }

    /// The point of a key (the hot path of table building: no curve check).
    pub fn point_of(self, key: &[u8]) -> Option<Point> {
        if key.len() != self.key_len() {
            return None;
        }
        let at = self.key_len() - 24;
        let word = |i: usize| -> Option<u64> {
            Some(u64::from_be_bytes(key.get(i..i + 8)?.try_into().ok()?))
        };
        Some(Point::new(unordered(word(at)?), unordered(word(at + 8)?)))
    }

    /// The seed's comparison, computed on the fly as AsterixDB does: both
    /// curve values are recomputed at every call. It orders finite points
    /// exactly as [`Comparator::encode`]'s keys do (ignoring ids).
    pub fn compare(self, a: Point, b: Point) -> Ordering {
        self.curve(a)
            .cmp(&self.curve(b))
            .then_with(|| ordered(a.x).cmp(&ordered(b.x)))
            .then_with(|| ordered(a.y).cmp(&ordered(b.y)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashSet;

    fn coord() -> impl Strategy<Value = f64> {
        prop_oneof![
            -200.0f64..200.0,
            Just(0.0),
            Just(-0.0),
            Just(180.0),
            Just(-90.0),
            -1e300f64..1e300,
            -1e-300f64..1e-300,
            (-5i32..5).prop_map(f64::from),
        ]
    }

    proptest! {
        #[test]
        fn key_order_is_the_comparators_order(
            ax in coord(), ay in coord(), bx in coord(), by in coord(),
            ia in 0u64..4, ib in 0u64..4,
        ) {
            let (a, b) = (Point::new(ax, ay), Point::new(bx, by));
            for c in Comparator::ALL {
                let (ka, kb) = (c.encode(a, ia).unwrap(), c.encode(b, ib).unwrap());
                prop_assert_eq!(ka.cmp(&kb), c.compare(a, b).then(ia.cmp(&ib)), "{:?}", c);
                prop_assert_eq!(ka.len(), c.key_len());
            }
        }

        #[test]
        fn keys_roundtrip(x in coord(), y in coord(), id: u64) {
            let p = Point::new(x, y);
            // -0.0 comes back as 0.0 (equal points, equal keys).
            let norm = Point::new(if x == 0.0 { 0.0 } else { x }, if y == 0.0 { 0.0 } else { y });
            for c in Comparator::ALL {
                let k = c.encode(p, id).unwrap();
                let (q, back) = c.decode(&k).unwrap();
                prop_assert_eq!((q.x.to_bits(), q.y.to_bits(), back), (norm.x.to_bits(), norm.y.to_bits(), id));
                prop_assert_eq!(c.point_of(&k), Some(q));
            }
        }

        #[test]
        fn simple_is_lexicographic(ax in coord(), ay in coord(), bx in coord(), by in coord()) {
            // An independent oracle: f64 comparison, x first.
            let z = |v: f64| if v == 0.0 { 0.0 } else { v };
            let want = z(ax).total_cmp(&z(bx)).then(z(ay).total_cmp(&z(by)));
            prop_assert_eq!(Comparator::Simple.compare(Point::new(ax, ay), Point::new(bx, by)), want);
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..40)) {
            for c in Comparator::ALL {
                let _ = c.decode(&bytes);
                let _ = c.point_of(&bytes);
            }
        }
    }

    #[test]
    fn non_finite_points_are_refused() {
        for c in Comparator::ALL {
            for (x, y) in [
                (f64::NAN, 0.0),
                (0.0, f64::INFINITY),
                (f64::NEG_INFINITY, 1.0),
            ] {
                assert!(c.encode(Point::new(x, y), 1).is_err());
            }
            // A key whose curve value does not match its point is not one.
            let mut k = c.encode(Point::new(10.0, 20.0), 3).unwrap();
            if c != Comparator::Simple {
                k[7] ^= 1;
                assert_eq!(c.decode(&k), None);
            }
        }
    }

    /// The cell at distance `d` of the order-`order` curve, by brute force.
    fn cells_in_curve_order(order: u32) -> Vec<(u64, u64)> {
        let n = 1u64 << order;
        let mut cells = vec![(u64::MAX, u64::MAX); (n * n) as usize];
        for x in 0..n {
            for y in 0..n {
                cells[hilbert_index(order, x, y) as usize] = (x, y);
            }
        }
        cells
    }

    #[test]
    fn hilbert_is_a_continuous_bijection() {
        // Order 1 visits (0,0), (0,1), (1,1), (1,0).
        assert_eq!(
            cells_in_curve_order(1),
            vec![(0, 0), (0, 1), (1, 1), (1, 0)]
        );
        for order in 1..=5 {
            let cells = cells_in_curve_order(order);
            let distinct: HashSet<_> = cells.iter().collect();
            assert_eq!(
                distinct.len(),
                cells.len(),
                "order {order}: not a bijection"
            );
            for w in cells.windows(2) {
                let step = w[0].0.abs_diff(w[1].0) + w[0].1.abs_diff(w[1].1);
                assert_eq!(step, 1, "order {order}: jump between {:?}", w);
            }
        }
        // The full-order curve is the same walk: its top bits of d are the
        // order-2 curve's value of the top bits of the cell.
        let (x, y) = (0xdead_beef_u64, 0x1234_5678_u64);
        assert_eq!(
            hilbert_index(32, x, y) >> 60,
            hilbert_index(2, x >> 30, y >> 30)
        );
    }

    #[test]
    fn zorder_interleaves_bits() {
        // A naive interleave as the oracle: x's bit i goes to 2i + 1.
        let naive = |x: u64, y: u64| {
            (0..32).fold(0u64, |z, i| {
                z | (((x >> i) & 1) << (2 * i + 1)) | (((y >> i) & 1) << (2 * i))
            })
        };
        for (x, y) in [
            (0u64, 0u64),
            (1, 0),
            (0, 1),
            (0xffff_ffff, 0),
            (0x8000_0001, 0x7fff_fffe),
        ] {
            assert_eq!((spread(x) << 1) | spread(y), naive(x, y));
        }
    }
}
