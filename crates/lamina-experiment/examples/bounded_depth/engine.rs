//! `bounded_depth engine`: one engine run and its LOG turned into CSVs.

use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use lamina::vfs::mem::MemFs;
use lamina::vfs::Vfs;
use lamina::{Db, Options};
use lamina_workload::dist::SkewedLatest;
use lamina_workload::ycsb::ycsb_key;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::{with_ext, EngineArgs, RunSummary, Workload};

pub(crate) fn engine(a: &EngineArgs) -> Result<()> {
    let fs = MemFs::new();
    let dir = Path::new("/db");
    let mut o = Options::default();
    o.vfs = Arc::new(fs.clone());
    // The run flushes itself (below); policies that size levels by the
    // memtable see the mean flush.
    o.write_buffer_size = 1 << 30;
    o.plan_with_mean_flush = true;
    o.target_file_size = a.buffer as u64;
    o.compaction = a.policy.parse()?;
    // One merge at a time, as the papers' systems merge one index.
    o.compaction_threads = 1;
    // The WAL does not change what flushes and merges write.
    o.write_ahead_log = false;
    let started = Instant::now();
    let db = Db::open(dir, o)?;
    let mut rng = SmallRng::seed_from_u64(a.seed);
    let mut latest = SkewedLatest::new(1);
    let mut value = vec![0u8; a.value];
    rng.fill(&mut value[..]);
    let mut inserted = 0u64;
    // Keys in the memtable: a flush when they fill the buffer, counting
    // each key once as the memtable does (an update of a key it holds takes
    // no room), about 40 bytes of bookkeeping per entry.
    let per_flush = (a.buffer / (a.value + 8 + 40)).max(1);
    let mut in_memtable = std::collections::HashSet::with_capacity(per_flush);
    for op in 0..a.ops {
        let update = a.workload.updates() && inserted > 0 && rng.gen::<f64>() < a.update_share;
        let record = if update {
            latest.next(&mut rng, inserted)
        } else {
            inserted += 1;
            inserted - 1
        };
        let key = match a.workload {
            Workload::Hashed | Workload::Updates => ycsb_key(record),
            Workload::Ordered | Workload::OrderedUpdates => record,
        };
        // Each write's value differs, so no merge can find two equal.
        value[..8].copy_from_slice(&op.to_le_bytes());
        db.put(&key.to_be_bytes(), &value)?;
        in_memtable.insert(key);
        if in_memtable.len() >= per_flush {
            // Every merge ends before the next flush, as in the papers'
            // model and, nearly, in AsterixDB, whose 4 MB flushes came
            // seconds apart. Flat out, flushes of 32 KiB to memory would
            // outrun the merges (leveled, always serving level 0 first,
            // then never pushes level 1 down).
            db.flush()?;
            db.wait_for_compactions()?;
            in_memtable.clear();
        }
    }
    db.close()?;
    let seconds = started.elapsed().as_secs_f64();
    let log = String::from_utf8(fs.read_all(&dir.join("LOG"))?).context("the info log")?;
    let (flushes, merges, summary) = parse_log(&log, a, seconds)?;
    std::fs::write(with_ext(&a.out, "flushes.csv"), flushes)?;
    std::fs::write(with_ext(&a.out, "merges.csv"), merges)?;
    std::fs::write(
        with_ext(&a.out, "json"),
        serde_json::to_string_pretty(&summary)?,
    )?;
    println!(
        "{} {}: {} flushes, WA {:.2}, {:.2} runs at flush, {:.1} s",
        summary.policy,
        summary.workload,
        summary.flushes,
        summary.write_amplification,
        summary.avg_runs_at_flush,
        seconds
    );
    Ok(())
}

/// The value of `name=` in a LOG line.
fn field<'a>(line: &'a str, name: &str) -> Option<&'a str> {
    let at = line.find(&format!(" {name}="))? + name.len() + 2;
    line[at..].split(' ').next()
}

fn number(line: &str, name: &str) -> Result<u64> {
    field(line, name)
        .and_then(|v| v.parse().ok())
        .with_context(|| format!("no {name}= in LOG line {line:?}"))
}

/// The per-flush and per-merge CSVs and the totals of a run's LOG.
///
/// A flush's row holds the state after the merges logged before the next
/// flush (the model's record is taken after a flush's merges, too). Its
/// transient space amplification is seed 000 §3.4.3's: the largest total
/// size of all SSTables while one of those merges wrote its output (its
/// inputs are deleted only when it is installed), over the bytes flushed so
/// far; the total size is what the LOG implies: flushed bytes plus merge
/// outputs minus merge inputs.
fn parse_log(log: &str, a: &EngineArgs, seconds: f64) -> Result<(String, String, RunSummary)> {
    struct Row {
        bytes: u64,
        wa: f64,
        runs: u64,
        transient: f64,
    }
    let mut rows: Vec<Row> = Vec::new();
    let mut merges = String::from("bytes_read,bytes_written,us,cpu_us\n");
    let (mut flushed, mut written, mut live) = (0u64, 0u64, 0u64);
    let (mut merge_count, mut moves) = (0u64, 0u64);
    for line in log.lines() {
        let Some((_, rest)) = line.split_once(' ') else {
            continue;
        };
        if rest.starts_with("flush:") {
            let bytes = number(line, "bytes")?;
            flushed += bytes;
            live += bytes;
            rows.push(Row {
                bytes,
                wa: (flushed + written) as f64 / flushed as f64,
                runs: number(line, "runs")?,
                transient: live as f64 / flushed as f64,
            });
        } else if rest.starts_with("compaction:") {
            let (r, w) = (number(line, "read")?, number(line, "written")?);
            written += w;
            merge_count += 1;
            writeln!(
                merges,
                "{r},{w},{},{}",
                number(line, "us")?,
                number(line, "cpu_us")?
            )?;
            if let Some(row) = rows.last_mut() {
                row.wa = (flushed + written) as f64 / flushed as f64;
                row.transient = row.transient.max((live + w) as f64 / flushed as f64);
            }
            live = (live + w).saturating_sub(r);
        } else if rest.starts_with("move:") {
            moves += 1;
        }
    }
    if rows.is_empty() {
        bail!("the LOG records no flush");
    }
    let mut flushes = String::from(
        "flush,flush_bytes,write_amplification,runs_at_flush,transient_space_amplification\n",
    );
    for (i, r) in rows.iter().enumerate() {
        writeln!(
            flushes,
            "{},{},{:.6},{},{:.6}",
            i + 1,
            r.bytes,
            r.wa,
            r.runs,
            r.transient
        )?;
    }
    let n = rows.len() as u64;
    let summary = RunSummary {
        policy: a.policy.clone(),
        workload: a.workload.name().to_string(),
        ops: a.ops,
        flushes: n,
        flush_bytes: flushed,
        merge_bytes_written: written,
        merges: merge_count,
        moves,
        write_amplification: (flushed + written) as f64 / flushed as f64,
        avg_runs_at_flush: rows.iter().map(|r| r.runs).sum::<u64>() as f64 / n as f64,
        seconds,
    };
    Ok((flushes, merges, summary))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn args() -> EngineArgs {
        EngineArgs {
            policy: "binomial:k=2".into(),
            workload: Workload::Hashed,
            ops: 10,
            buffer: 100,
            value: 10,
            update_share: 0.7,
            seed: 1,
            out: PathBuf::from("/nonexistent"),
        }
    }

    #[test]
    fn a_log_becomes_per_flush_rows_merges_and_totals() {
        // Two flushes of 100 bytes, a merge of both into 190 bytes, a move,
        // a third flush of 100: worked out by hand below.
        let log = "1 open: created\n\
            2 flush: entries=1 bytes=100 files=[1:100] runs=1 ms=0 us=10\n\
            3 flush: entries=1 bytes=100 files=[2:100] runs=2 ms=0 us=10\n\
            4 compaction: reason=\"x\" inputs=[L0:[1, 2]] output_level=0 outputs=[3:190] read=200 written=190 moved=0 ms=1 us=1500 cpu_us=900\n\
            5 move: reason=\"y\" inputs=[L0:[3]] output_level=1 outputs=[3:190] read=0 written=0 moved=190 ms=0 us=3 cpu_us=1\n\
            6 flush: entries=1 bytes=100 files=[4:100] runs=2 ms=0 us=10\n\
            7 close: clean\n";
        let (flushes, merges, s) = parse_log(log, &args(), 1.0).unwrap();
        let rows: Vec<&str> = flushes.lines().skip(1).collect();
        // Flush 2's row is taken after its merge: (200 + 190) / 200; its
        // transient is the 200 bytes live plus the 190 being written.
        assert_eq!(rows[0], "1,100,1.000000,1,1.000000");
        assert_eq!(rows[1], "2,100,1.950000,2,1.950000");
        // Live after the merge: 190; with flush 3: 290 over 300 flushed.
        assert_eq!(rows[2], "3,100,1.633333,2,0.966667");
        assert_eq!(merges.lines().nth(1), Some("200,190,1500,900"));
        assert_eq!(
            (s.flushes, s.flush_bytes, s.merge_bytes_written),
            (3, 300, 190)
        );
        assert_eq!((s.merges, s.moves), (1, 1));
        assert!((s.avg_runs_at_flush - 5.0 / 3.0).abs() < 1e-12);
        assert!(parse_log("1 open: created\n", &args(), 1.0).is_err());
    }
}
