//! `lamina gen`: the CS265 workload generator.

use std::io;
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use lamina_workload::{write_dsl, RangeDist, WorkloadSpec};

/// Flags of `lamina gen` (those of the CS265 generator, plus a few extras).
#[derive(Debug, Args)]
pub struct GenArgs {
    /// Number of puts.
    #[arg(long, default_value_t = 0)]
    pub puts: u64,
    /// Number of gets.
    #[arg(long, default_value_t = 0)]
    pub gets: u64,
    /// Probability in [0, 1] that a hitting get targets the hot 1% of keys.
    #[arg(long, default_value_t = 0.0)]
    pub gets_skewness: f64,
    /// Fraction in [0, 1] of gets that target keys never put.
    #[arg(long, default_value_t = 0.0)]
    pub gets_misses_ratio: f64,
    /// Number of range queries.
    #[arg(long, default_value_t = 0)]
    pub ranges: u64,
    /// Largest range width (HI - LO).
    #[arg(long, default_value_t = 1000)]
    pub max_range_size: u32,
    /// Range widths uniform in [1, max] (the default).
    #[arg(long, conflicts_with = "gaussian_ranges")]
    pub uniform_ranges: bool,
    /// Range widths normal around max/2 (sd max/6), clamped to [1, max].
    #[arg(long)]
    pub gaussian_ranges: bool,
    /// Number of deletes, each of a live key (at most the puts of fresh keys).
    #[arg(long, default_value_t = 0)]
    pub deletes: u64,
    /// Write puts to binary .dat files loaded with `l "PATH"` lines.
    #[arg(long)]
    pub external_puts: bool,
    /// Directory for the .dat files of --external-puts.
    #[arg(long, value_name = "DIR", default_value = ".")]
    pub output_dir: PathBuf,
    /// Puts per .dat file.
    #[arg(long, default_value_t = 100_000)]
    pub puts_per_file: u64,
    /// Fraction in [0, 1] of puts that overwrite a live key (exactly
    /// round(puts x ratio)); the others put keys never put before.
    #[arg(long, default_value_t = 0.0)]
    pub update_ratio: f64,
    /// Smallest key.
    #[arg(long, default_value_t = i32::MIN, allow_hyphen_values = true)]
    pub key_min: i32,
    /// Largest key.
    #[arg(long, default_value_t = i32::MAX, allow_hyphen_values = true)]
    pub key_max: i32,
    /// Seed; the same flags and seed always give the same workload.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
}

impl GenArgs {
    /// The workload these flags describe.
    pub fn spec(&self) -> WorkloadSpec {
        WorkloadSpec {
            puts: self.puts,
            gets: self.gets,
            gets_skewness: self.gets_skewness,
            gets_misses_ratio: self.gets_misses_ratio,
            ranges: self.ranges,
            max_range_size: self.max_range_size,
            range_dist: if self.gaussian_ranges {
                RangeDist::Gaussian
            } else {
                RangeDist::Uniform
            },
            deletes: self.deletes,
            external_puts: self.external_puts,
            puts_per_file: self.puts_per_file,
            update_ratio: self.update_ratio,
            key_min: self.key_min,
            key_max: self.key_max,
            seed: self.seed,
        }
    }
}

/// Writes the workload to stdout (and .dat files to --output-dir).
pub fn run(args: GenArgs) -> Result<()> {
    let spec = args.spec();
    if spec.external_puts {
        std::fs::create_dir_all(&args.output_dir)
            .with_context(|| format!("cannot create {}", args.output_dir.display()))?;
    }
    let prefix = format!("lamina-load-{}-", spec.seed);
    write_dsl(&spec, io::stdout().lock(), &args.output_dir, &prefix)
        .context("generating the workload failed")?;
    Ok(())
}
