//! Engine options shared by the subcommands that open a database.

use std::path::PathBuf;

use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use lamina::compaction::CompactionSpec;
use lamina::{Compression, Db, Options, SyncMode};

/// Bytes per page for `--buffer-pages`.
pub const PAGE_SIZE: usize = 4096;

/// How to open the database.
#[derive(Debug, Clone, Args)]
pub struct EngineOpts {
    /// Database directory (created if missing).
    #[arg(long, value_name = "DIR", default_value = "./lamina-data")]
    pub dir: PathBuf,
    /// Write buffer (memtable) size in bytes [default: 64 MiB]; accepts K, M, G suffixes.
    #[arg(long, value_name = "N", value_parser = parse_size, conflicts_with = "buffer_pages")]
    pub buffer_bytes: Option<usize>,
    /// Write buffer size in 4096-byte pages.
    #[arg(long, value_name = "N", value_parser = parse_count)]
    pub buffer_pages: Option<usize>,
    /// Bloom filter bits per key, 0 ..= 64 [default: the engine's].
    #[arg(long, value_name = "N", conflicts_with = "bloom_fpr")]
    pub bloom_bits: Option<f64>,
    /// Target Bloom filter false-positive rate; bits = -ln F / (ln 2)^2.
    #[arg(long, value_name = "F")]
    pub bloom_fpr: Option<f64>,
    /// Bloom bits per key by level, level 0 first, the last value for
    /// deeper levels (e.g. 12,8,6).
    #[arg(
        long,
        value_name = "B,B,...",
        value_delimiter = ',',
        conflicts_with = "bloom_monkey"
    )]
    pub bloom_bits_per_level: Vec<f64>,
    /// Spread the Bloom memory (--bloom-bits per key on average) over the
    /// levels with Monkey.
    #[arg(long)]
    pub bloom_monkey: bool,
    /// Bits per key of the memtable's key filter, 0 ..= 64, 0 to disable
    /// [default: the engine's].
    #[arg(long, value_name = "N")]
    pub memtable_bloom_bits: Option<f64>,
    /// Size ratio T between adjacent levels (at least 2).
    #[arg(long, value_name = "T", default_value_t = 10, value_parser = parse_count)]
    pub size_ratio: usize,
    /// Compaction strategy spec (e.g. leveling, lo1, tier, binomial:k=4,
    /// toml:FILE); --help lists them all.
    #[arg(long, value_name = "SPEC", default_value = "leveling",
          long_help = lamina::compaction::spec::help_text())]
    pub compaction: CompactionSpec,
    /// Compaction threads, at least 1 [default: the engine's].
    #[arg(long, value_name = "N", value_parser = parse_count)]
    pub threads: Option<usize>,
    /// Threads reading a range query's sorted runs in parallel (seed 004's
    /// RANGE thread pool), 1 ..= 256; 1 reads them on the query's thread
    /// [default: 1].
    #[arg(long, value_name = "N", value_parser = parse_count)]
    pub scan_threads: Option<usize>,
    /// WAL sync mode: none, always or interval:MS.
    #[arg(long, value_name = "MODE", default_value = "none")]
    pub sync: String,
    /// Block cache size in bytes [default: the engine's]; accepts K, M, G suffixes.
    #[arg(long, value_name = "N", value_parser = parse_size)]
    pub block_cache_bytes: Option<usize>,
    /// Block compression of new files: none, lz4, zstd or zstd:LEVEL
    /// [default: none]; the files already written keep theirs.
    #[arg(long, value_name = "TYPE", default_value = "none")]
    pub compression: Compression,
    /// Open the database for reads only: nothing is written (for a database
    /// on a full disk); writes answer with an error.
    #[arg(long)]
    pub read_only: bool,
}

/// Parses a byte count with an optional K/M/G (binary) suffix.
pub fn parse_size(s: &str) -> Result<usize, String> {
    let t = s.trim();
    let (digits, mult): (&str, usize) = match t.char_indices().last() {
        Some((i, 'k' | 'K')) => (&t[..i], 1 << 10),
        Some((i, 'm' | 'M')) => (&t[..i], 1 << 20),
        Some((i, 'g' | 'G')) => (&t[..i], 1 << 30),
        _ => (t, 1),
    };
    digits
        .parse::<usize>()
        .ok()
        .and_then(|n| n.checked_mul(mult))
        .ok_or_else(|| {
            format!("{s:?} is not a byte count (a non-negative integer, K/M/G suffix allowed)")
        })
}

/// Parses a count (a non-negative integer).
pub fn parse_count(s: &str) -> Result<usize, String> {
    s.trim()
        .parse::<usize>()
        .map_err(|_| format!("{s:?} is not a non-negative integer"))
}

/// Bloom bits per key for a target false-positive rate.
pub fn bits_for_fpr(fpr: f64) -> Result<f64> {
    if !(fpr > 0.0 && fpr < 1.0) {
        bail!("--bloom-fpr must be strictly between 0 and 1, got {fpr}");
    }
    let ln2 = std::f64::consts::LN_2;
    Ok(-fpr.ln() / (ln2 * ln2))
}

impl EngineOpts {
    /// The engine options these flags describe.
    pub fn to_options(&self) -> Result<Options> {
        let write_buffer_size = match (self.buffer_bytes, self.buffer_pages) {
            (Some(b), _) => b,
            (None, Some(p)) => p
                .checked_mul(PAGE_SIZE)
                .ok_or_else(|| anyhow!("--buffer-pages {p} is too large"))?,
            (None, None) => 64 << 20,
        };
        let mut o = Options::default();
        o.write_buffer_size = write_buffer_size;
        o.bloom_bits_per_level = self.bloom_bits_per_level.clone();
        o.bloom_monkey = self.bloom_monkey;
        o.size_ratio = self.size_ratio;
        o.compaction = self.compaction.clone();
        o.read_only = self.read_only;
        o.compression = self.compression;
        if let Some(bits) = self.bloom_bits {
            o.bloom_bits_per_key = bits;
        }
        if let Some(fpr) = self.bloom_fpr {
            o.bloom_bits_per_key = bits_for_fpr(fpr)?;
        }
        if let Some(bits) = self.memtable_bloom_bits {
            o.memtable_bloom_bits_per_key = bits;
        }
        if let Some(t) = self.threads {
            o.compaction_threads = t;
        }
        if let Some(t) = self.scan_threads {
            o.scan_threads = t;
        }
        if let Some(c) = self.block_cache_bytes {
            o.block_cache_bytes = c;
        }
        o.sync = self
            .sync
            .parse::<SyncMode>()
            .map_err(|e| anyhow!("bad --sync {:?}: {e}", self.sync))?;
        // The engine checks its settings in one place; name our flag.
        o.validate().map_err(|e| {
            if let (Some(fpr), "bloom_bits_per_key") = (self.bloom_fpr, e.field) {
                return anyhow!("--bloom-fpr {fpr} needs more than 64 bits per key");
            }
            let flag = match e.field {
                "write_buffer_size" => "--buffer-bytes / --buffer-pages",
                "bloom_bits_per_key" => "--bloom-bits",
                "bloom_bits_per_level" => "--bloom-bits-per-level",
                "memtable_bloom_bits_per_key" => "--memtable-bloom-bits",
                "size_ratio" => "--size-ratio",
                "compaction_threads" => "--threads",
                "scan_threads" => "--scan-threads",
                "compaction" => "--compaction",
                other => other,
            };
            anyhow!("{flag} {}", e.reason)
        })?;
        Ok(o)
    }

    /// Opens the database.
    pub fn open(&self) -> Result<Db> {
        self.open_with(self.to_options()?)
    }

    /// Opens the database with `opts` (these flags' [`Self::to_options`],
    /// adjusted by the caller).
    pub fn open_with(&self, opts: Options) -> Result<Db> {
        Db::open(&self.dir, opts)
            .with_context(|| format!("cannot open database in {}", self.dir.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("64M"), Ok(64 << 20));
        assert_eq!(parse_size("2k"), Ok(2048));
        assert_eq!(parse_size("1G"), Ok(1 << 30));
        assert!(parse_size("x").is_err());
        assert!(parse_size("-1").is_err());
        assert!(parse_size("").is_err());
    }

    #[test]
    fn fpr_to_bits() {
        let b = bits_for_fpr(0.01).unwrap();
        assert!((b - 9.585).abs() < 0.01, "{b}");
        assert!(bits_for_fpr(0.0).is_err());
        assert!(bits_for_fpr(1.0).is_err());
        assert!(bits_for_fpr(f64::NAN).is_err());
    }
}
