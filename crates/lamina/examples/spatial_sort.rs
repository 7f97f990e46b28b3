//! Seed 000 §4.4's sorting measurement: sort random points by each
//! comparator, computed on the fly at every comparison (as AsterixDB does;
//! the seed: Simple about 6× faster than Hilbert and Z-order), against
//! lamina's design, which encodes each point's key once and sorts bytes.
//!
//! `cargo run --release -p lamina-lsm --example spatial_sort -- [POINTS] [ROUNDS]`
//! (defaults 1,000,000 and 3; uniform lon/lat, fixed seed; medians).

use std::time::Instant;

use lamina::spatial::{Comparator, Point};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = std::env::args()
        .skip(1)
        .map(|a| a.parse::<usize>())
        .collect::<Result<Vec<usize>, _>>()
        .map_err(|e| format!("arguments: POINTS ROUNDS ({e})"))?;
    let n = args.first().copied().unwrap_or(1_000_000);
    let rounds = args.get(1).copied().unwrap_or(3).max(1);
    let mut rng = StdRng::seed_from_u64(42);
    let points: Vec<Point> = (0..n)
        .map(|_| Point::new(rng.gen_range(-180.0..180.0), rng.gen_range(-90.0..90.0)))
        .collect();
    println!("{n} uniform points, {rounds} rounds, median ms");
    println!("| comparator | sort, comparing on the fly | comparisons | ns per comparison | encode keys | sort keys |");
    println!("|---|---:|---:|---:|---:|---:|");
    let mut on_the_fly = Vec::new();
    for c in Comparator::ALL {
        let (mut fly, mut enc, mut keys) = (Vec::new(), Vec::new(), Vec::new());
        let mut comparisons = 0u64;
        for _ in 0..rounds {
            let mut v = points.clone();
            let mut count = 0u64;
            let t = Instant::now();
            v.sort_unstable_by(|a, b| {
                count += 1;
                c.compare(*a, *b)
            });
            fly.push(t.elapsed().as_secs_f64() * 1e3);
            comparisons = count;
            // The oracle: each neighbour pair in order.
            if !v.windows(2).all(|w| c.compare(w[0], w[1]).is_le()) {
                return Err(format!("{}: comparator sort out of order", c.name()).into());
            }

            let t = Instant::now();
            let mut k = points
                .iter()
                .enumerate()
                .map(|(i, p)| c.encode(*p, i as u64))
                .collect::<lamina::Result<Vec<Vec<u8>>>>()?;
            enc.push(t.elapsed().as_secs_f64() * 1e3);
            let t = Instant::now();
            k.sort_unstable();
            keys.push(t.elapsed().as_secs_f64() * 1e3);
            let in_order = k
                .windows(2)
                .all(|w| match (c.point_of(&w[0]), c.point_of(&w[1])) {
                    (Some(a), Some(b)) => c.compare(a, b).is_le(),
                    _ => false,
                });
            if !in_order {
                return Err(format!("{}: key sort disagrees with the comparator", c.name()).into());
            }
        }
        let fly = median(fly);
        println!(
            "| {} | {:.0} | {} | {:.1} | {:.0} | {:.0} |",
            c.name(),
            fly,
            comparisons,
            fly * 1e6 / comparisons as f64,
            median(enc),
            median(keys)
        );
        on_the_fly.push((c, fly));
    }
    let simple = on_the_fly
        .iter()
        .find(|(c, _)| *c == Comparator::Simple)
        .map_or(1.0, |x| x.1);
    for (c, t) in &on_the_fly {
        if *c != Comparator::Simple {
            println!(
                "{} / simple, on the fly: {:.2}x (seed: about 6x)",
                c.name(),
                t / simple
            );
        }
    }
    Ok(())
}
