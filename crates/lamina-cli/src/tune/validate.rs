//! `lamina tune --validate`: the advice checked on the engine. Each
//! candidate runs through the bench harness (`lamina bench`, this same
//! binary, as a child process) with the workload's YCSB benchmark, and the
//! candidates are re-ranked by measured throughput.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use lamina_tune::model::predict_with_cache;
use lamina_tune::search::predict_one;
use lamina_tune::shape::simulate;
use lamina_tune::{
    rank_correlation, BloomAlloc, Candidate, CostModel, Prediction, Ranked, Workload,
};
use serde::Serialize;

use super::TuneArgs;

/// `lamina bench`'s defaults, the configuration a user gets untuned.
const DEFAULT_SPEC: &str = "leveling";
const DEFAULT_BUFFER: u64 = 64 << 20;
const DEFAULT_BLOOM_BITS: f64 = 10.0;
const DEFAULT_CACHE: u64 = 8 << 20;

/// The prediction for the engine's default configuration (bench's
/// defaults, whatever the budget).
pub fn engine_default(w: &Workload, c: &CostModel) -> Result<Option<Prediction>> {
    let cand = Candidate {
        spec: DEFAULT_SPEC.into(),
        buffer_bytes: DEFAULT_BUFFER,
        bloom_bits: DEFAULT_BLOOM_BITS,
        bloom: BloomAlloc::Uniform,
    };
    let shape = simulate(&cand.spec, cand.buffer_bytes, w)?;
    Ok(Some(predict_with_cache(&cand, &shape, w, c, DEFAULT_CACHE)))
}

/// `lamina bench` flags that configure `p`'s design. The bench takes one
/// Bloom setting for every level: Monkey's allocation runs as its average
/// (the engine's `--bloom-bits-per-level` applies it exactly).
pub fn bench_flags(p: &Prediction) -> Vec<String> {
    let c = &p.candidate;
    vec![
        format!("--compaction={}", c.spec),
        format!("--write_buffer_size={}", c.buffer_bytes),
        format!("--bloom_bits={}", c.bloom_bits),
        format!("--cache_size={}", p.cache_bytes),
    ]
}

/// One measured candidate.
#[derive(Debug, Serialize)]
pub struct Measured {
    /// `rank N`, `default` or `asked`.
    pub label: String,
    /// What the model predicted.
    pub prediction: Prediction,
    /// Operations per second the bench measured.
    pub ops_per_sec: f64,
    /// Nanoseconds per operation (wall time / operations).
    pub measured_ns: f64,
    /// The engine's write amplification over the whole run (load
    /// included).
    pub measured_wa: Option<f64>,
}

/// The validation's results.
#[derive(Debug, Serialize)]
pub struct Validation {
    /// Seconds asked per candidate.
    pub seconds: u64,
    /// Best measured first.
    pub measured: Vec<Measured>,
    /// Spearman's correlation of predicted and measured cost per operation.
    pub rank_correlation: Option<f64>,
}

impl Validation {
    /// The best measured design.
    pub fn best(&self) -> Option<&Prediction> {
        self.measured.first().map(|m| &m.prediction)
    }

    /// The table of predicted beside measured.
    pub fn print(&self) {
        println!(
            "validated ({} s each, through lamina bench; best measured first):",
            self.seconds
        );
        println!(
            "  {:<8} {:<24} {:>7} {:>12} {:>10} {:>10} {:>11} {:>8} {:>8}",
            "",
            "compaction",
            "buffer",
            "bloom",
            "pred us/op",
            "meas us/op",
            "meas ops/s",
            "pred WA",
            "meas WA"
        );
        for m in &self.measured {
            let c = &m.prediction.candidate;
            println!(
                "  {:<8} {:<24} {:>6}M {:>12} {:>10.2} {:>10.2} {:>11.0} {:>8.2} {:>8}",
                m.label,
                c.spec,
                c.buffer_bytes >> 20,
                super::bloom_text(c.bloom_bits, c.bloom),
                m.prediction.cost_ns / 1e3,
                m.measured_ns / 1e3,
                m.ops_per_sec,
                m.prediction.wa,
                m.measured_wa.map_or("-".into(), |x| format!("{x:.2}"))
            );
        }
        match self.rank_correlation {
            Some(r) => println!("  rank correlation (predicted vs measured cost/op): {r:.2}"),
            None => println!("  rank correlation: too few distinct points"),
        }
    }
}

/// Runs the top candidates, the asked specs and the default; re-ranks.
pub fn run(
    args: &TuneArgs,
    w: &Workload,
    ranked: &[Ranked],
    default: Option<&Ranked>,
    seconds: u64,
) -> Result<Validation> {
    let letter = args.workload.as_deref().unwrap_or_default();
    if lamina_workload::YcsbWorkload::from_name(letter).is_none() {
        bail!(
            "--validate runs YCSB workloads through lamina bench: give --workload a ... f or load"
        );
    }
    let mut picks: Vec<(String, Prediction)> = Vec::new();
    for r in ranked {
        if picks.len() >= args.validate_top {
            break;
        }
        let p = &r.prediction;
        if !picks
            .iter()
            .any(|(_, q)| q.candidate.spec == p.candidate.spec)
        {
            picks.push((format!("rank {}", picks.len() + 1), p.clone()));
        }
    }
    let cost = ranked
        .first()
        .map(|r| r.prediction.candidate.clone())
        .context("no candidate to validate")?;
    for spec in &args.validate_specs {
        // The spec's best-ranked variant, else the best candidate's buffer
        // and filters with this spec.
        let p = match ranked.iter().find(|r| &r.prediction.candidate.spec == spec) {
            Some(r) => r.prediction.clone(),
            None => {
                let cand = Candidate {
                    spec: spec.clone(),
                    ..cost.clone()
                };
                let (c, _) = super::cost_model(args.calibration.as_deref())?;
                predict_one(&cand, w, &c)?
                    .with_context(|| format!("{spec} does not fit the memory budget"))?
            }
        };
        if !picks.iter().any(|(_, q)| q.candidate == p.candidate) {
            picks.push(("asked".into(), p));
        }
    }
    if let Some(d) = default {
        picks.push(("default".into(), d.prediction.clone()));
    }
    let (dir, ours) = match &args.db {
        Some(d) => (d.clone(), false),
        None => (
            std::env::temp_dir().join(format!("lamina-tune-{}", std::process::id())),
            true,
        ),
    };
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut measured = Vec::new();
    for (label, p) in picks {
        eprintln!("lamina tune: validating {label}: {}", super::describe(&p));
        let (ops_per_sec, measured_wa) = bench(letter, w, &p, seconds, &dir)?;
        measured.push(Measured {
            label,
            measured_ns: 1e9 / ops_per_sec.max(1e-9),
            prediction: p,
            ops_per_sec,
            measured_wa,
        });
    }
    if ours {
        // The directory this run made, with what the bench left in it.
        let _ = std::fs::remove_dir_all(&dir);
    }
    let pred: Vec<f64> = measured.iter().map(|m| m.prediction.cost_ns).collect();
    let meas: Vec<f64> = measured.iter().map(|m| m.measured_ns).collect();
    let rank_correlation = rank_correlation(&pred, &meas);
    measured.sort_by(|a, b| b.ops_per_sec.total_cmp(&a.ops_per_sec));
    Ok(Validation {
        seconds,
        measured,
        rank_correlation,
    })
}

/// Runs `p` through `lamina bench` on workload `letter`; returns the
/// measured operations per second and the engine's write amplification.
fn bench(
    letter: &str,
    w: &Workload,
    p: &Prediction,
    seconds: u64,
    dir: &Path,
) -> Result<(f64, Option<f64>)> {
    let exe = std::env::current_exe().context("locating the lamina binary")?;
    let name = format!("ycsb-{}", letter.to_ascii_lowercase());
    let benchmarks = if w.is_load() {
        name.clone()
    } else {
        format!("ycsb-load,{name}")
    };
    // About `seconds` of the transaction phase at the predicted rate.
    let ops = ((seconds as f64) * 1e9 / p.cost_ns.max(1.0)).clamp(1_000.0, 1e8) as u64;
    let db = dir.join("db");
    let stats: PathBuf = dir.join("stats.json");
    let mut cmd = Command::new(exe);
    cmd.arg("bench")
        .arg(format!("--benchmarks={benchmarks}"))
        .arg(format!("--num={}", w.records))
        .arg(format!("--reads={ops}"))
        .arg(format!("--value_size={}", w.value_bytes))
        .arg(format!("--key_size={}", w.key_bytes))
        .arg(format!("--db={}", db.display()))
        .arg("--destroy_db")
        .arg(format!("--stats-json={}", stats.display()));
    cmd.args(bench_flags(p));
    let out = cmd.output().context("running lamina bench")?;
    if !out.status.success() {
        bail!(
            "lamina bench failed for {}: {}",
            p.candidate.spec,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let ops_per_sec = parse_ops_per_sec(&stdout, &name)
        .with_context(|| format!("no {name} line in lamina bench's output"))?;
    let wa = std::fs::read_to_string(&stats)
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .and_then(|v| {
            v.get("write_amplification")
                .and_then(serde_json::Value::as_f64)
        });
    Ok((ops_per_sec, wa))
}

/// The `Y` of bench's `NAME : X micros/op Y ops/sec; ...` line for `name`.
fn parse_ops_per_sec(stdout: &str, name: &str) -> Option<f64> {
    stdout.lines().find_map(|line| {
        let (head, rest) = line.split_once(" : ")?;
        if head.trim() != name {
            return None;
        }
        let words: Vec<&str> = rest.split_whitespace().collect();
        let at = words.iter().position(|w| w.starts_with("ops/sec"))?;
        words.get(at.checked_sub(1)?)?.parse().ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_bench_line_of_the_benchmark() {
        let out = "ycsb-load    :       4.274 micros/op 233972 ops/sec;   25.9 MB/s\n\
                   ycsb-a       :      10.000 micros/op 99000 ops/sec; (50 of 100 found)\n";
        assert_eq!(parse_ops_per_sec(out, "ycsb-a"), Some(99000.0));
        assert_eq!(parse_ops_per_sec(out, "ycsb-load"), Some(233972.0));
        assert_eq!(parse_ops_per_sec(out, "ycsb-b"), None);
    }
}
