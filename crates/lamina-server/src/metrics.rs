//! Prometheus metrics (`lamina serve --metrics ADDR`): the servers' counts
//! of connections, commands by kind and error replies ([`ServerCounters`]),
//! the engine's statistics (counters named with their unit before
//! `_total`, latency histograms and percentiles, block cache, row cache and
//! Bloom filter hits and misses, per level), `lamina_build_info` and the
//! `process_*` metrics every Prometheus client exports, in the text
//! exposition format (version 0.0.4, numbers spelled as the Go client
//! spells them) at `GET /metrics` ([`MetricsServer`], `http`).

use std::sync::atomic::{AtomicU64, Ordering};

use lamina::{DbStats, LatencyHistogram, LatencySummary, LATENCY_BUCKETS_NS};

use crate::protocol::Protocol;

mod exposition;
mod http;
mod process;

use exposition::{Family, Kind};
pub use http::{MetricsServer, MAX_CONNECTIONS, MAX_PENDING, MAX_SCRAPES};
pub use process::ProcessStats;

/// Counters of one protocol's server.
#[derive(Debug)]
struct ProtocolCounters {
    accepted: AtomicU64,
    refused: AtomicU64,
    closed: AtomicU64,
    errors: AtomicU64,
    /// By [`Protocol::commands`], then `other`.
    commands: Box<[AtomicU64]>,
}

/// What the servers of one `lamina serve` count; shared by them and the
/// metrics endpoint.
#[derive(Debug)]
pub struct ServerCounters {
    by_protocol: [ProtocolCounters; 3],
}

impl Default for ServerCounters {
    fn default() -> Self {
        ServerCounters {
            by_protocol: Protocol::ALL.map(|p| ProtocolCounters {
                accepted: AtomicU64::new(0),
                refused: AtomicU64::new(0),
                closed: AtomicU64::new(0),
                errors: AtomicU64::new(0),
                commands: (0..=p.commands().len())
                    .map(|_| AtomicU64::new(0))
                    .collect(),
            }),
        }
    }
}

impl ServerCounters {
    fn of(&self, p: Protocol) -> &ProtocolCounters {
        match p {
            Protocol::Dsl => &self.by_protocol[0],
            Protocol::Spatial => &self.by_protocol[1],
            Protocol::Resp => &self.by_protocol[2],
        }
    }

    /// A connection was accepted.
    pub fn accepted(&self, p: Protocol) {
        self.of(p).accepted.fetch_add(1, Ordering::Relaxed);
    }

    /// A connection was refused (the server was full).
    pub fn refused(&self, p: Protocol) {
        self.of(p).refused.fetch_add(1, Ordering::Relaxed);
    }

    /// An accepted connection ended.
    pub fn closed(&self, p: Protocol) {
        self.of(p).closed.fetch_add(1, Ordering::Relaxed);
    }

    /// A command named `name` (its first word, any case) ran; `error` if
    /// its reply was an error.
    pub fn command(&self, p: Protocol, name: &[u8], error: bool) {
        let c = self.of(p);
        let i = p
            .commands()
            .iter()
            .position(|n| n.as_bytes().eq_ignore_ascii_case(name))
            .unwrap_or(p.commands().len());
        if let Some(n) = c.commands.get(i) {
            n.fetch_add(1, Ordering::Relaxed);
        }
        if error {
            c.errors.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Seconds from nanoseconds, in one correctly rounded division (so 300 ms
/// prints `0.3`).
fn seconds(ns: u64) -> f64 {
    ns as f64 / 1e9
}

/// Seconds from a [`LatencySummary`] figure in microseconds (whole
/// nanoseconds divided by 1000), without the artefacts of a second
/// division.
fn seconds_of_us(us: f64) -> f64 {
    seconds((us * 1000.0).round() as u64)
}

/// The exposition of `stats`, `counters` and this process.
pub fn render(stats: &DbStats, counters: &ServerCounters) -> String {
    render_with(stats, counters, ProcessStats::read())
}

/// The exposition of `stats`, `counters` and `process` (none: no
/// `process_*` families, as on a system without `/proc`).
pub fn render_with(
    stats: &DbStats,
    counters: &ServerCounters,
    process: Option<ProcessStats>,
) -> String {
    let mut out = String::new();
    Family::new(
        &mut out,
        "lamina_build_info",
        Kind::Gauge,
        "Always 1; the labels say which lamina this is.",
    )
    .sample(
        &[
            ("version", env!("CARGO_PKG_VERSION")),
            ("os", std::env::consts::OS),
            ("arch", std::env::consts::ARCH),
        ],
        1.0,
    );
    if let Some(p) = process {
        p.render(&mut out);
    }
    render_engine(&mut out, stats);
    render_caches(&mut out, stats);
    render_levels(&mut out, stats);
    render_latencies(&mut out, stats);
    render_servers(&mut out, counters);
    out
}

/// A figure of [`DbStats`].
type StatsField = fn(&DbStats) -> f64;

/// The engine's counters and gauges: name, kind, HELP, value.
const ENGINE: [(&str, Kind, &str, StatsField); 22] = [
    (
        "lamina_writes_total",
        Kind::Counter,
        "Entries written (puts and deletes; each entry of a batch counts).",
        |s| s.writes as f64,
    ),
    (
        "lamina_ingested_bytes_total",
        Kind::Counter,
        "Key and value bytes written by users.",
        |s| s.bytes_ingested as f64,
    ),
    ("lamina_gets_total", Kind::Counter, "Point lookups.", |s| {
        s.gets as f64
    }),
    (
        "lamina_get_hits_total",
        Kind::Counter,
        "Point lookups that found the key.",
        |s| s.get_hits as f64,
    ),
    (
        "lamina_get_misses_total",
        Kind::Counter,
        "Point lookups that found nothing.",
        |s| s.get_misses as f64,
    ),
    (
        "lamina_flushes_total",
        Kind::Counter,
        "Memtable flushes.",
        |s| s.flushes as f64,
    ),
    (
        "lamina_flush_written_bytes_total",
        Kind::Counter,
        "Bytes written by flushes.",
        |s| s.flush_bytes_written as f64,
    ),
    (
        "lamina_compactions_total",
        Kind::Counter,
        "Merges (trivial moves excluded).",
        |s| s.compactions as f64,
    ),
    (
        "lamina_trivial_moves_total",
        Kind::Counter,
        "Files moved to another level unchanged.",
        |s| s.trivial_moves as f64,
    ),
    (
        "lamina_compaction_read_bytes_total",
        Kind::Counter,
        "Bytes read by merges.",
        |s| s.compaction_bytes_read as f64,
    ),
    (
        "lamina_compaction_written_bytes_total",
        Kind::Counter,
        "Bytes written by merges.",
        |s| s.compaction_bytes_written as f64,
    ),
    (
        "lamina_compaction_errors_total",
        Kind::Counter,
        "Merges that failed (the tree was left unchanged).",
        |s| s.compaction_errors as f64,
    ),
    (
        "lamina_stalls_total",
        Kind::Counter,
        "Times writes waited for flushes or compactions.",
        |s| s.stalls as f64,
    ),
    (
        "lamina_stall_seconds_total",
        Kind::Counter,
        "Time writes waited.",
        |s| s.stall_micros as f64 / 1e6,
    ),
    (
        "lamina_read_blocks_total",
        Kind::Counter,
        "Blocks read from table files (cache misses, scans and merges).",
        |s| s.blocks_read as f64,
    ),
    (
        "lamina_read_bytes_total",
        Kind::Counter,
        "Bytes read from table files.",
        |s| s.bytes_read as f64,
    ),
    (
        "lamina_write_amplification",
        Kind::Gauge,
        "Bytes written by flushes and merges per byte flushed.",
        |s| s.write_amplification,
    ),
    (
        "lamina_space_amplification",
        Kind::Gauge,
        "Bytes on disk per byte of the oldest sorted run.",
        |s| s.space_amplification,
    ),
    (
        "lamina_disk_bytes",
        Kind::Gauge,
        "Bytes of all tables (compaction buffers included).",
        |s| s.disk_bytes as f64,
    ),
    (
        "lamina_memtable_bytes",
        Kind::Gauge,
        "Bytes in memtables (active and immutable).",
        |s| s.memtable_bytes as f64,
    ),
    (
        "lamina_memtable_entries",
        Kind::Gauge,
        "Entries in memtables.",
        |s| s.memtable_entries as f64,
    ),
    (
        "lamina_sorted_runs",
        Kind::Gauge,
        "Sorted runs in the tree.",
        |s| s.sorted_runs as f64,
    ),
];

/// The engine's counters and gauges.
fn render_engine(out: &mut String, s: &DbStats) {
    for (name, kind, help, value) in ENGINE {
        Family::new(out, name, kind, help).sample(&[], value(s));
    }
}

/// The block cache, row cache and Bloom filters: hits and misses.
fn render_caches(out: &mut String, s: &DbStats) {
    use Kind::{Counter, Gauge};
    let kinds =
        |c: &lamina::BlockCounts| vec![("data", c.data), ("index", c.index), ("filter", c.filter)];
    let by_kind = [
        (
            "lamina_block_cache_hits_total",
            "Queries' block cache hits by block kind (index and filter blocks held by their tables count as hits).",
            kinds(&s.cache_hits),
        ),
        (
            "lamina_block_cache_misses_total",
            "Queries' block cache misses by block kind (index and filter: also one per table opened).",
            kinds(&s.cache_misses),
        ),
        (
            "lamina_block_cache_read_bytes_total",
            "Bytes of index and filter blocks read from table files (at open and on misses).",
            vec![("index", s.index_bytes_read), ("filter", s.filter_bytes_read)],
        ),
    ];
    for (name, help, values) in by_kind {
        let mut f = Family::new(out, name, Counter, help);
        for (k, v) in values {
            f.sample(&[("kind", k)], v as f64);
        }
    }
    let plain: [(&str, Kind, &str, u64); 9] = [
        ("lamina_block_cache_bytes", Gauge, "Bytes held by the block cache (pinned blocks included).", s.block_cache_usage),
        ("lamina_block_cache_pinned_bytes", Gauge, "Bytes of index and filter blocks level-0 tables pin in the block cache.", s.block_cache_pinned_usage),
        ("lamina_row_cache_hits_total", Counter, "Point lookups the row cache answered.", s.row_cache_hits),
        ("lamina_row_cache_misses_total", Counter, "Point lookups that looked in the row cache and read the tree.", s.row_cache_misses),
        ("lamina_row_cache_bytes", Gauge, "Bytes held by the row cache.", s.row_cache_usage),
        ("lamina_bloom_probes_total", Counter, "Bloom filter probes by point lookups (one per table consulted).", s.bloom_probes),
        ("lamina_bloom_negatives_total", Counter, "Probes the filter answered \"absent\": table reads saved (its hits; RocksDB's bloom.filter.useful).", s.bloom_negatives),
        ("lamina_bloom_positives_total", Counter, "Probes the filter answered \"maybe\": the table was read.", s.bloom_probes.saturating_sub(s.bloom_negatives)),
        ("lamina_bloom_false_positives_total", Counter, "Probes answered \"maybe\" for a key the table does not hold (its misses).", s.bloom_false_positives),
    ];
    for (name, kind, help, value) in plain {
        Family::new(out, name, kind, help).sample(&[], value as f64);
    }
}

/// Per level (numbered from 0, the first on-disk level).
fn render_levels(out: &mut String, s: &DbStats) {
    use Kind::{Counter, Gauge};
    type LevelField = fn(&lamina::LevelStats) -> f64;
    let levels: [(&str, Kind, &str, LevelField); 9] = [
        (
            "lamina_level_runs",
            Gauge,
            "Sorted runs of the level.",
            |l| l.runs as f64,
        ),
        ("lamina_level_files", Gauge, "Files of the level.", |l| {
            l.files as f64
        }),
        (
            "lamina_level_bytes",
            Gauge,
            "Bytes of the level's files.",
            |l| l.bytes as f64,
        ),
        (
            "lamina_level_compactions_total",
            Counter,
            "Merges into the level.",
            |l| l.compactions as f64,
        ),
        (
            "lamina_level_compaction_seconds_total",
            Counter,
            "Wall time of merges into the level.",
            |l| l.compaction_seconds,
        ),
        (
            "lamina_level_in_bytes_total",
            Counter,
            "Bytes that came into the level from above (flushes for level 0).",
            |l| l.bytes_read as f64,
        ),
        (
            "lamina_level_written_bytes_total",
            Counter,
            "Bytes written into the level.",
            |l| l.bytes_written as f64,
        ),
        (
            "lamina_level_moved_bytes_total",
            Counter,
            "Bytes moved into the level unchanged.",
            |l| l.bytes_moved as f64,
        ),
        (
            "lamina_level_write_amplification",
            Gauge,
            "Bytes written into the level per byte that came in.",
            |l| l.write_amplification,
        ),
    ];
    for (name, kind, help, field) in levels {
        let mut f = Family::new(out, name, kind, help);
        for l in &s.levels {
            f.sample(&[("level", &l.level.to_string())], field(l));
        }
    }
}

/// The latencies: a histogram per operation, and their percentiles as one
/// summary.
fn render_latencies(out: &mut String, s: &DbStats) {
    let h = &s.latency_histograms;
    let ops: [(&str, &str, &str, &LatencyHistogram, &LatencySummary); 4] = [
        (
            "put",
            "lamina_put_latency_seconds",
            "Latency of each write call, per batch: one put, delete or WriteBatch, however many entries it holds.",
            &h.put,
            &s.put_latency,
        ),
        ("get", "lamina_get_latency_seconds", "Latency of point lookups.", &h.get, &s.get_latency),
        (
            "scan",
            "lamina_scan_latency_seconds",
            "Latency of setting a scan up (until its first entry can be read).",
            &h.scan,
            &s.scan_latency,
        ),
        (
            "compaction",
            "lamina_compaction_duration_seconds",
            "Wall time of merges (trivial moves excluded).",
            &h.compaction,
            &s.compaction_latency,
        ),
    ];
    let bounds: Vec<f64> = LATENCY_BUCKETS_NS.iter().map(|&ns| seconds(ns)).collect();
    for (_, name, help, hist, _) in ops {
        let help = format!("{help} Buckets within 0.8% of their bounds.");
        Family::new(out, name, Kind::Histogram, &help).histogram(
            &[],
            &bounds,
            &hist.cumulative,
            hist.count,
            seconds(hist.sum_ns),
        );
    }
    let mut f = Family::new(
        out,
        "lamina_latency_seconds",
        Kind::Summary,
        "Latency percentiles (within 0.8%) by operation: put is per write call (per batch), compaction per merge.",
    );
    for (op, _, _, hist, l) in ops {
        for (q, v) in [
            ("0.5", l.p50_us),
            ("0.9", l.p90_us),
            ("0.99", l.p99_us),
            ("0.999", l.p999_us),
        ] {
            f.sample(&[("op", op), ("quantile", q)], seconds_of_us(v));
        }
        f.sample_suffixed("_sum", &[("op", op)], seconds(hist.sum_ns));
        f.sample_suffixed("_count", &[("op", op)], l.count as f64);
    }
}

/// Each protocol's connections, commands and errors.
fn render_servers(out: &mut String, counters: &ServerCounters) {
    use Kind::{Counter, Gauge};
    type ProtocolField = fn(&ProtocolCounters) -> f64;
    let per_protocol: [(&str, Kind, &str, ProtocolField); 5] = [
        (
            "lamina_server_connections_total",
            Counter,
            "Connections accepted.",
            |c| c.accepted.load(Ordering::Relaxed) as f64,
        ),
        (
            "lamina_server_connections_refused_total",
            Counter,
            "Connections refused at the connection cap.",
            |c| c.refused.load(Ordering::Relaxed) as f64,
        ),
        (
            "lamina_server_connections_active",
            Gauge,
            "Connections open now.",
            |c| {
                c.accepted
                    .load(Ordering::Relaxed)
                    .saturating_sub(c.closed.load(Ordering::Relaxed)) as f64
            },
        ),
        (
            "lamina_server_errors_total",
            Counter,
            "Commands answered with an error.",
            |c| c.errors.load(Ordering::Relaxed) as f64,
        ),
        (
            "lamina_server_commands_seen_total",
            Counter,
            "Commands received.",
            |c| {
                c.commands
                    .iter()
                    .map(|n| n.load(Ordering::Relaxed))
                    .sum::<u64>() as f64
            },
        ),
    ];
    for (name, kind, help, field) in per_protocol {
        let mut f = Family::new(out, name, kind, help);
        for p in Protocol::ALL {
            f.sample(&[("protocol", p.name())], field(counters.of(p)));
        }
    }
    let name = "lamina_server_commands_total";
    let mut f = Family::new(out, name, Counter, "Commands received, by kind.");
    for p in Protocol::ALL {
        let c = counters.of(p);
        let names = p.commands().iter().copied().chain(std::iter::once("other"));
        for (cmd, n) in names.zip(c.commands.iter()) {
            let n = n.load(Ordering::Relaxed);
            if n > 0 {
                f.sample(&[("protocol", p.name()), ("command", cmd)], n as f64);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The block cache's hits, misses and index/filter bytes appear by
    /// kind, with the values of the stats they are rendered from.
    #[test]
    fn block_cache_counters_by_kind() {
        let stats = DbStats {
            cache_hits: lamina::BlockCounts {
                data: 1,
                index: 2,
                filter: 3,
            },
            cache_misses: lamina::BlockCounts {
                data: 4,
                index: 5,
                filter: 6,
            },
            index_bytes_read: 700,
            filter_bytes_read: 800,
            block_cache_pinned_usage: 900,
            ..DbStats::default()
        };
        let text = render_with(&stats, &ServerCounters::default(), None);
        for line in [
            "lamina_block_cache_hits_total{kind=\"data\"} 1",
            "lamina_block_cache_hits_total{kind=\"filter\"} 3",
            "lamina_block_cache_misses_total{kind=\"index\"} 5",
            "lamina_block_cache_misses_total{kind=\"filter\"} 6",
            "lamina_block_cache_read_bytes_total{kind=\"index\"} 700",
            "lamina_block_cache_read_bytes_total{kind=\"filter\"} 800",
            "lamina_block_cache_pinned_bytes 900",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} missing:\n{text}");
        }
    }

    /// Figures computed from integers print as the decimals they are: a
    /// stall of 300,000 µs is `0.3` s, a latency sum of 1.1 s is `1.1`.
    #[test]
    fn seconds_print_without_artefacts() {
        let mut stats = DbStats {
            stall_micros: 300_000,
            ..DbStats::default()
        };
        stats.latency_histograms.get = LatencyHistogram {
            cumulative: vec![0; LATENCY_BUCKETS_NS.len()],
            count: 3,
            sum_ns: 1_100_000_000,
        };
        stats.get_latency.p50_us = 0.3;
        let text = render_with(&stats, &ServerCounters::default(), None);
        for line in [
            "lamina_stall_seconds_total 0.3",
            "lamina_get_latency_seconds_sum 1.1",
            "lamina_get_latency_seconds_bucket{le=\"2.5e-06\"} 0",
            "lamina_get_latency_seconds_bucket{le=\"+Inf\"} 3",
            "lamina_latency_seconds{op=\"get\",quantile=\"0.5\"} 3e-07",
            "lamina_latency_seconds_sum{op=\"get\"} 1.1",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} missing:\n{text}");
        }
        assert!(!text.contains("0000000"), "{text}");
    }

    /// The build info and, given them, the process figures.
    #[test]
    fn build_info_and_process_families() {
        let p = ProcessStats {
            cpu_seconds: 3.8,
            resident_bytes: 1_234_567,
            virtual_bytes: 9_000_000,
            start_time_seconds: 1_700_000_123.45,
            open_fds: 12,
            max_fds: None,
        };
        let text = render_with(&DbStats::default(), &ServerCounters::default(), Some(p));
        for line in [
            "# TYPE process_cpu_seconds_total counter",
            "process_cpu_seconds_total 3.8",
            "process_resident_memory_bytes 1.234567e+06",
            "process_start_time_seconds 1.70000012345e+09",
            "process_open_fds 12",
            "process_max_fds +Inf",
            "# TYPE lamina_build_info gauge",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} missing:\n{text}");
        }
        let info = text
            .lines()
            .find(|l| l.starts_with("lamina_build_info{"))
            .unwrap();
        assert!(
            info.contains(&format!("version=\"{}\"", env!("CARGO_PKG_VERSION")))
                && info.ends_with("} 1"),
            "{info}"
        );
        let bare = render_with(&DbStats::default(), &ServerCounters::default(), None);
        assert!(!bare.contains("process_"));
    }
}
