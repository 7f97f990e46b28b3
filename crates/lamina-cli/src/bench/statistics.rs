//! `--statistics`: the engine's counters and latency histograms printed
//! as RocksDB's `Statistics::ToString` prints its tickers and histograms
//! (`NAME COUNT : N`, `NAME P50 : .. P95 : .. P99 : .. P100 : .. COUNT :
//! .. SUM : ..`), under RocksDB's names where lamina counts the same
//! thing, so scripts that read db_bench's `STATISTICS:` block read
//! lamina's; lamina's own counters are named `lamina.*`.

use std::fmt::Write as _;

use lamina::{DbStats, LatencyHistogram, LatencySummary};

/// The `STATISTICS:` block's text (without that header).
pub(super) fn render(s: &DbStats) -> String {
    let sum = |c: &lamina::BlockCounts| c.data + c.index + c.filter;
    let positives = s.bloom_probes.saturating_sub(s.bloom_negatives);
    let tickers: [(&str, u64); 28] = [
        ("rocksdb.block.cache.miss", sum(&s.cache_misses)),
        ("rocksdb.block.cache.hit", sum(&s.cache_hits)),
        ("rocksdb.block.cache.index.miss", s.cache_misses.index),
        ("rocksdb.block.cache.index.hit", s.cache_hits.index),
        ("rocksdb.block.cache.filter.miss", s.cache_misses.filter),
        ("rocksdb.block.cache.filter.hit", s.cache_hits.filter),
        ("rocksdb.block.cache.data.miss", s.cache_misses.data),
        ("rocksdb.block.cache.data.hit", s.cache_hits.data),
        ("rocksdb.bloom.filter.useful", s.bloom_negatives),
        ("rocksdb.bloom.filter.full.positive", positives),
        (
            "rocksdb.bloom.filter.full.true.positive",
            positives.saturating_sub(s.bloom_false_positives),
        ),
        ("rocksdb.number.keys.written", s.writes),
        ("rocksdb.number.keys.read", s.gets),
        ("rocksdb.bytes.written", s.bytes_ingested),
        ("rocksdb.stall.micros", s.stall_micros),
        ("rocksdb.compact.read.bytes", s.compaction_bytes_read),
        ("rocksdb.compact.write.bytes", s.compaction_bytes_written),
        ("rocksdb.flush.write.bytes", s.flush_bytes_written),
        ("rocksdb.row.cache.hit", s.row_cache_hits),
        ("rocksdb.row.cache.miss", s.row_cache_misses),
        ("lamina.number.keys.found", s.get_hits),
        ("lamina.number.flushes", s.flushes),
        ("lamina.number.compactions", s.compactions),
        ("lamina.number.trivial.moves", s.trivial_moves),
        ("lamina.number.compaction.errors", s.compaction_errors),
        ("lamina.number.stalls", s.stalls),
        ("lamina.sst.read.blocks", s.blocks_read),
        ("lamina.sst.read.bytes", s.bytes_read),
    ];
    let mut out = String::new();
    for (name, n) in tickers {
        let _ = writeln!(out, "{name} COUNT : {n}");
    }
    let h = &s.latency_histograms;
    let histograms: [(&str, &LatencySummary, &LatencyHistogram); 4] = [
        ("rocksdb.db.get.micros", &s.get_latency, &h.get),
        ("rocksdb.db.write.micros", &s.put_latency, &h.put),
        (
            "rocksdb.compaction.times.micros",
            &s.compaction_latency,
            &h.compaction,
        ),
        ("lamina.db.scan.micros", &s.scan_latency, &h.scan),
    ];
    for (name, l, hist) in histograms {
        let _ = writeln!(
            out,
            "{name} P50 : {:.6} P95 : {:.6} P99 : {:.6} P100 : {:.6} COUNT : {} SUM : {}",
            l.p50_us,
            l.p95_us,
            l.p99_us,
            l.max_us,
            l.count,
            hist.sum_ns / 1000
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each RocksDB name carries the lamina figure of the same meaning.
    #[test]
    fn tickers_under_rocksdbs_names() {
        let mut s = DbStats {
            writes: 1000,
            gets: 70,
            get_hits: 60,
            bloom_probes: 50,
            bloom_negatives: 30,
            bloom_false_positives: 5,
            cache_hits: lamina::BlockCounts {
                data: 1,
                index: 2,
                filter: 3,
            },
            cache_misses: lamina::BlockCounts {
                data: 10,
                index: 20,
                filter: 30,
            },
            ..DbStats::default()
        };
        s.get_latency.p50_us = 1.5;
        s.get_latency.count = 70;
        s.latency_histograms.get.sum_ns = 123_456_789;
        let text = render(&s);
        for line in [
            "rocksdb.block.cache.miss COUNT : 60",
            "rocksdb.block.cache.hit COUNT : 6",
            "rocksdb.block.cache.filter.hit COUNT : 3",
            "rocksdb.bloom.filter.useful COUNT : 30",
            "rocksdb.bloom.filter.full.positive COUNT : 20",
            "rocksdb.bloom.filter.full.true.positive COUNT : 15",
            "rocksdb.number.keys.written COUNT : 1000",
            "rocksdb.number.keys.read COUNT : 70",
            "lamina.number.keys.found COUNT : 60",
            "rocksdb.db.get.micros P50 : 1.500000 P95 : 0.000000 P99 : 0.000000 P100 : 0.000000 COUNT : 70 SUM : 123456",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} missing:\n{text}");
        }
    }
}
