//! Seed 004's ingestion experiments (Figs. 1 and 2) for one setting: `PUTS`
//! uniform random `p K V` pairs (4-byte i32 keys and values, stored as the
//! DSL server stores them) into an empty database with a write buffer of
//! `BUFFER` bytes under compaction `SPEC`, timed as a whole and in windows
//! of `WINDOW` puts (the seed's sliding-window throughput), then a flush
//! and a wait until compactions settle. Writes the windows to `SERIES` as
//! CSV (`puts,seconds,window_puts_per_sec`) and prints `Db::stats()` as
//! JSON with `ingest_seconds` and `settled_seconds`. Beside `SERIES`
//! (`X.series.csv`) it writes `X.stats.txt`, the Compaction Stats table
//! (`Db::property("lamina.stats")`) and the tree's levels, and `X.merges.log`,
//! the info log's line for each compaction (reason, inputs, bytes).
//!
//! With a last argument `mean-flush`, compaction sizes levels in this
//! database's mean flush rather than in `BUFFER`
//! (`Options::plan_with_mean_flush`).
//!
//! `cargo run --release -p lamina-lsm --example cs265_ingest -- SPEC BUFFER PUTS WINDOW DIR SERIES [mean-flush]`

#![expect(clippy::expect_used, reason = "an example may panic on a failed setup")]
// Options are set on a default (they are `#[non_exhaustive]` for callers).

use std::io::Write;
use std::time::Instant;

use lamina::{Db, Options, SyncMode};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// The DSL server's key layout: big-endian with the sign bit flipped, so
/// byte order is numeric order.
fn dsl_key(k: i32) -> [u8; 4] {
    ((k as u32) ^ 0x8000_0000).to_be_bytes()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (mean_flush, args) = match args.split_last() {
        Some((last, rest)) if last == "mean-flush" => (true, rest),
        _ => (false, args.as_slice()),
    };
    let [_, spec, buffer, puts, window, dir, series] = args else {
        eprintln!("usage: cs265_ingest SPEC BUFFER PUTS WINDOW DIR SERIES [mean-flush]");
        std::process::exit(2);
    };
    let buffer: usize = buffer.parse().expect("BUFFER must be a byte count");
    let puts: u64 = puts.parse().expect("PUTS must be a number");
    let window: u64 = window
        .parse::<u64>()
        .expect("WINDOW must be a number")
        .max(1);
    // The run creates DIR and removes it at the end: it never touches a
    // directory it did not make.
    if std::path::Path::new(dir).exists() {
        eprintln!("{dir} exists; give a path this run may create and remove");
        std::process::exit(2);
    }
    let mut opts = Options::default();
    opts.compaction = spec.parse().expect("SPEC");
    opts.write_buffer_size = buffer;
    // Seed 004's server: files as large as the runs that hold them, its
    // 10% Bloom error rate (about 4.8 bits per key), no fsync per write.
    opts.target_file_size = (buffer as u64).max(2 << 20);
    opts.bloom_bits_per_key = 4.8;
    opts.sync = SyncMode::None;
    opts.plan_with_mean_flush = mean_flush;
    let db = Db::open(dir, opts).expect("open");
    let mut out = std::io::BufWriter::new(std::fs::File::create(series).expect("SERIES"));
    writeln!(out, "puts,seconds,window_puts_per_sec").expect("write");
    let mut rng = StdRng::seed_from_u64(2023);
    let start = Instant::now();
    let mut window_start = start;
    for i in 1..=puts {
        let (k, v): (i32, i32) = (rng.gen(), rng.gen());
        db.put(&dsl_key(k), &v.to_le_bytes()).expect("put");
        if i % window == 0 || i == puts {
            let now = Instant::now();
            let span = now.duration_since(window_start).as_secs_f64().max(1e-9);
            let n = if i % window == 0 { window } else { i % window };
            writeln!(
                out,
                "{i},{:.3},{:.0}",
                now.duration_since(start).as_secs_f64(),
                n as f64 / span
            )
            .expect("write");
            window_start = now;
        }
    }
    let ingest = start.elapsed();
    out.flush().expect("write");
    db.flush().expect("flush");
    db.wait_for_compactions().expect("settle");
    let total = start.elapsed();
    let base = series.strip_suffix(".series.csv").unwrap_or(series);
    let mut table = db.property("lamina.stats").unwrap_or_default();
    table.push_str(&db.property("lamina.levelstats").unwrap_or_default());
    std::fs::write(format!("{base}.stats.txt"), table).expect("stats table");
    let mut stats = serde_json::to_value(db.stats()).expect("json");
    stats["ingest_seconds"] = ingest.as_secs_f64().into();
    stats["settled_seconds"] = total.as_secs_f64().into();
    println!("{}", serde_json::to_string(&stats).expect("json"));
    db.close().expect("close");
    let log = std::fs::read_to_string(std::path::Path::new(dir).join("LOG")).unwrap_or_default();
    let merges: String = log
        .lines()
        .filter(|l| l.contains(" compaction: ") || l.contains(" move: "))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(format!("{base}.merges.log"), merges).expect("merge log");
    std::fs::remove_dir_all(dir).expect("remove the directory this run created");
}
