//! `lamina spatial bench`: seed 000 §4.4's workload on a dataset — load,
//! then rounds of inserts and window COUNT queries at selectivities
//! 10^-σ — reporting write amplification, write throughput, read
//! amplification and query latency per σ as JSON.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use lamina::compaction::CompactionSpec;
use lamina::spatial::{Point, Rect};
use lamina::DbStats;
use lamina_dataset::{Dataset, Record};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;

use crate::engine_opts::EngineOpts;

/// Flags of `lamina spatial bench`.
#[derive(Debug, Args)]
pub struct SpatialBenchArgs {
    /// Engine flags: `--dir` must not exist yet (the bench creates the
    /// dataset), `--compaction` is the spatial index's policy,
    /// `--buffer-bytes` the shared memory budget.
    #[command(flatten)]
    pub engine: EngineOpts,
    /// hilbert, zorder or simple.
    #[arg(long, value_name = "C", default_value = "hilbert")]
    pub comparator: String,
    /// eager or lazy.
    #[arg(long, value_name = "M", default_value = "eager")]
    pub maintenance: String,
    /// The primary index's merge policy.
    #[arg(long, value_name = "SPEC", default_value = "binomial:k=8")]
    pub primary_compaction: CompactionSpec,
    /// How a leveled spatial index cuts its merges: size (by bytes, in key
    /// order), str or rstar-grove (spatially disjoint tiles); added to
    /// `--compaction` as `partition=P`, which must then be `leveled:...`.
    #[arg(long, value_name = "P")]
    pub partition: Option<String>,
    /// Points: `uniform` (lon × lat), `clusters` (a synthetic mixture of
    /// 50 Gaussian clusters) or `csv:PATH` (a file with `lat,lon` columns,
    /// e.g. GeoNames' rg_cities1000.csv, replicated with jitter of 0.01°).
    #[arg(long, value_name = "D", default_value = "uniform")]
    pub data: String,
    /// Records loaded before the rounds.
    #[arg(long, value_name = "N", default_value_t = 100_000)]
    pub load: u64,
    /// Rounds of inserts then queries.
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub rounds: u64,
    /// Records inserted per round.
    #[arg(long, value_name = "N", default_value_t = 10_000)]
    pub inserts: u64,
    /// The fraction of the rounds' writes that move an existing record to
    /// a new point (an upsert of a random earlier id) instead of inserting
    /// a new one: the writes whose old index entry eager maintenance
    /// cancels with anti-matter and lazy maintenance leaves for queries to
    /// validate.
    #[arg(long, value_name = "F", default_value_t = 0.0)]
    pub update_fraction: f64,
    /// Window queries per round and selectivity.
    #[arg(long, value_name = "N", default_value_t = 200)]
    pub queries: u64,
    /// Selectivities σ: windows of 360·10^-σ × 180·10^-σ degrees.
    #[arg(
        long,
        value_name = "S,S,...",
        value_delimiter = ',',
        default_value = "3,4,5"
    )]
    pub sigma: Vec<u32>,
    /// Bytes per record (id and point included), as the seed's 1 KB.
    #[arg(long, value_name = "N", default_value_t = 1000)]
    pub record_bytes: usize,
    /// Seed of the data and queries.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Write the JSON report here too.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
}

/// Queries at one selectivity.
#[derive(Debug, Serialize)]
struct SigmaReport {
    sigma: u32,
    queries: u64,
    mean_results: f64,
    /// Operational components of the spatial index scanned per query.
    read_amplification: f64,
    /// Data blocks of the spatial index read per query (cache hits and
    /// misses; blocks whose MBR missed the window are not read).
    blocks_per_query: f64,
    /// Data blocks skipped by their MBR per query.
    blocks_pruned_per_query: f64,
    mean_latency_us: f64,
    p50_latency_us: f64,
    p99_latency_us: f64,
}

#[derive(Debug, Serialize)]
struct Report {
    comparator: String,
    maintenance: String,
    compaction: String,
    primary_compaction: String,
    data: String,
    /// Distinct records at the end.
    records: u64,
    /// Upserts made (load and rounds; updates included).
    writes: u64,
    update_fraction: f64,
    record_bytes: usize,
    write_seconds: f64,
    writes_per_sec: f64,
    index_write_amplification: f64,
    primary_write_amplification: f64,
    index_files: u64,
    index_sorted_runs: usize,
    sigmas: Vec<SigmaReport>,
    dataset: lamina_dataset::DatasetStats,
}

/// Where the points come from.
enum Source {
    Uniform,
    Clusters(Vec<(f64, f64, f64)>),
    Table(Vec<Point>),
}

impl Source {
    fn parse(spec: &str, rng: &mut SmallRng) -> Result<Source> {
        if spec == "uniform" {
            return Ok(Source::Uniform);
        }
        if spec == "clusters" {
            let centres = (0..50)
                .map(|_| {
                    (
                        rng.gen_range(-170.0..170.0),
                        rng.gen_range(-60.0..70.0),
                        rng.gen_range(0.2..5.0),
                    )
                })
                .collect();
            return Ok(Source::Clusters(centres));
        }
        let Some(path) = spec.strip_prefix("csv:") else {
            bail!("--data {spec:?}: use uniform, clusters or csv:PATH");
        };
        let text = std::fs::read_to_string(path).with_context(|| format!("reading {path}"))?;
        let mut lines = text.lines();
        let header: Vec<&str> = lines.next().unwrap_or_default().split(',').collect();
        let col = |name: &str| {
            header
                .iter()
                .position(|h| h.trim() == name)
                .ok_or_else(|| anyhow!("{path}: no {name:?} column"))
        };
        let (lat, lon) = (col("lat")?, col("lon")?);
        let mut points = Vec::new();
        for line in lines {
            let f: Vec<&str> = line.split(',').collect();
            let get = |i: usize| f.get(i).and_then(|v| v.trim().parse::<f64>().ok());
            if let (Some(y), Some(x)) = (get(lat), get(lon)) {
                if x.is_finite() && y.is_finite() {
                    points.push(Point::new(x, y));
                }
            }
        }
        if points.is_empty() {
            bail!("{path}: no points");
        }
        Ok(Source::Table(points))
    }

    fn point(&self, rng: &mut SmallRng) -> Point {
        match self {
            Source::Uniform => Point::new(rng.gen_range(-180.0..180.0), rng.gen_range(-90.0..90.0)),
            Source::Clusters(c) => {
                let (cx, cy, r) = c[rng.gen_range(0..c.len())];
                // A sum of uniforms: a cheap bell around the centre.
                let d =
                    |rng: &mut SmallRng| (0..3).map(|_| rng.gen_range(-r..r)).sum::<f64>() / 1.5;
                Point::new(
                    (cx + d(rng)).clamp(-180.0, 180.0),
                    (cy + d(rng)).clamp(-90.0, 90.0),
                )
            }
            Source::Table(p) => {
                let base = p[rng.gen_range(0..p.len())];
                Point::new(
                    (base.x + rng.gen_range(-0.01..0.01)).clamp(-180.0, 180.0),
                    (base.y + rng.gen_range(-0.01..0.01)).clamp(-90.0, 90.0),
                )
            }
        }
    }
}

/// What the queries at one selectivity measured.
#[derive(Default)]
struct Sigma {
    sigma: u32,
    latencies: Vec<f64>,
    results: u64,
    components: u64,
    blocks: u64,
    pruned: u64,
}

fn write_amplification(s: &DbStats) -> f64 {
    if s.bytes_ingested == 0 {
        0.0
    } else {
        (s.flush_bytes_written + s.compaction_bytes_written) as f64 / s.bytes_ingested as f64
    }
}

/// Runs the benchmark and prints the JSON report.
#[expect(
    clippy::too_many_lines,
    reason = "predates the lint; one long sequence of steps, to be cut like `plan`"
)]
pub fn run(args: SpatialBenchArgs) -> Result<()> {
    if args.engine.dir.exists() {
        bail!(
            "{} exists: the bench creates its dataset in a new directory",
            args.engine.dir.display()
        );
    }
    let mut rng = SmallRng::seed_from_u64(args.seed);
    let source = Source::parse(&args.data, &mut rng)?;
    let opts = super::options::dataset_options(
        args.engine.to_options()?,
        &args.comparator,
        &args.maintenance,
        args.primary_compaction.clone(),
        args.partition.as_deref(),
    )?;
    let (comparator, maintenance) = (opts.comparator, opts.maintenance);
    let ds = Dataset::open(&args.engine.dir, opts)?;
    let payload_len = args.record_bytes.saturating_sub(24);
    let mut points: Vec<Point> = Vec::new();
    if !(0.0..=1.0).contains(&args.update_fraction) {
        bail!("--update-fraction must be within 0 ..= 1");
    }
    let mut write_time = 0.0;
    let mut write = |ds: &Dataset,
                     n: u64,
                     update_fraction: f64,
                     rng: &mut SmallRng,
                     points: &mut Vec<Point>|
     -> Result<()> {
        let start = Instant::now();
        for _ in 0..n {
            let p = source.point(rng);
            let mut payload = vec![0u8; payload_len];
            rng.fill(&mut payload[..]);
            let id = if !points.is_empty() && rng.gen_bool(update_fraction) {
                rng.gen_range(0..points.len())
            } else {
                points.push(p);
                points.len() - 1
            };
            ds.upsert(&Record {
                id: id as u64,
                point: p,
                fields: Vec::new(),
                payload,
            })?;
            points[id] = p;
        }
        write_time += start.elapsed().as_secs_f64();
        Ok(())
    };
    write(&ds, args.load, 0.0, &mut rng, &mut points)?;
    let mut per_sigma: Vec<Sigma> = args
        .sigma
        .iter()
        .map(|&sigma| Sigma {
            sigma,
            ..Sigma::default()
        })
        .collect();
    for _ in 0..args.rounds {
        write(
            &ds,
            args.inserts,
            args.update_fraction,
            &mut rng,
            &mut points,
        )?;
        for Sigma {
            sigma,
            latencies,
            results,
            components,
            blocks,
            pruned,
        } in &mut per_sigma
        {
            let before = ds.index().stats();
            let scale = 10f64.powi(-(*sigma as i32));
            let (w, h) = (360.0 * scale, 180.0 * scale);
            for _ in 0..args.queries {
                // Centred on a stored point, so every window finds one.
                let Some(&c) = points.get(rng.gen_range(0..points.len().max(1))) else {
                    break;
                };
                let window = Rect::new(c.x - w / 2.0, c.y - h / 2.0, c.x + w / 2.0, c.y + h / 2.0);
                let start = Instant::now();
                let (n, comps) = ds.count(window)?;
                latencies.push(start.elapsed().as_secs_f64() * 1e6);
                *results += n;
                *components += comps;
            }
            let after = ds.index().stats();
            *blocks += after.window.blocks - before.window.blocks;
            *pruned += after.window.blocks_pruned - before.window.blocks_pruned;
        }
    }
    let records = points.len() as u64;
    let writes = args.load + args.rounds * args.inserts;
    let index = ds.index().stats();
    let primary = ds.primary().stats();
    let sigmas = per_sigma
        .into_iter()
        .map(|s| {
            let Sigma {
                sigma,
                latencies: mut lat,
                results,
                components,
                blocks,
                pruned,
            } = s;
            lat.sort_by(f64::total_cmp);
            let n = lat.len().max(1) as f64;
            let q = |p: f64| {
                lat.get(((lat.len() as f64 - 1.0) * p) as usize)
                    .copied()
                    .unwrap_or(0.0)
            };
            SigmaReport {
                sigma,
                queries: lat.len() as u64,
                mean_results: results as f64 / n,
                read_amplification: components as f64 / n,
                blocks_per_query: blocks as f64 / n,
                blocks_pruned_per_query: pruned as f64 / n,
                mean_latency_us: lat.iter().sum::<f64>() / n,
                p50_latency_us: q(0.5),
                p99_latency_us: q(0.99),
            }
        })
        .collect();
    let report = Report {
        comparator: comparator.name().into(),
        maintenance: maintenance.name().into(),
        compaction: ds.index().compaction_spec(),
        primary_compaction: ds.primary().compaction_spec(),
        data: args.data.clone(),
        records,
        writes,
        update_fraction: args.update_fraction,
        record_bytes: args.record_bytes,
        write_seconds: write_time,
        writes_per_sec: writes as f64 / write_time.max(1e-9),
        index_write_amplification: write_amplification(&index),
        primary_write_amplification: write_amplification(&primary),
        index_files: index.levels.iter().map(|l| l.files as u64).sum(),
        index_sorted_runs: index.sorted_runs,
        sigmas,
        dataset: ds.stats(),
    };
    ds.close()?;
    let json = serde_json::to_string_pretty(&report)?;
    if let Some(out) = &args.out {
        std::fs::write(out, &json).with_context(|| format!("writing {}", out.display()))?;
    }
    println!("{json}");
    Ok(())
}
