//! What a benchmark measures and how db_bench reports it: each thread's
//! [`Meter`] (operations, `--histogram`'s per-type latencies, the ops
//! counter `--report_interval_seconds` samples), the merged [`Report`]
//! and its db_bench-style lines, and the interval reporter.

use std::io::Write as _;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use super::histogram::Histogram;
use crate::progress;

/// db_bench's operation types, in the order `--histogram` prints them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum OpType {
    Read,
    Write,
    Delete,
    Seek,
    Update,
}

/// db_bench's names of [`OpType`]s (`Microseconds per read:`).
const OP_NAMES: [&str; 5] = ["read", "write", "delete", "seek", "update"];

/// One thread's measuring: its progress ticks, and with `--histogram`
/// the time from one operation's end to the next's (db_bench's
/// `FinishedOps`), and with `--report_interval_seconds` a shared count.
pub(super) struct Meter<'a> {
    ticker: progress::Ticker<'a>,
    hist: Option<Vec<Histogram>>,
    ops_done: Option<&'a AtomicU64>,
    start: Instant,
    last: Instant,
}

impl<'a> Meter<'a> {
    /// Starts measuring now.
    pub(super) fn new(
        bar: &'a indicatif::ProgressBar,
        histogram: bool,
        ops_done: Option<&'a AtomicU64>,
    ) -> Meter<'a> {
        let now = Instant::now();
        Meter {
            ticker: progress::Ticker::new(bar),
            hist: histogram.then(|| OP_NAMES.iter().map(|_| Histogram::default()).collect()),
            ops_done,
            start: now,
            last: now,
        }
    }

    /// One operation of type `op` is done.
    pub(super) fn done(&mut self, op: OpType) {
        self.ticker.tick();
        if let Some(n) = self.ops_done {
            n.fetch_add(1, Ordering::Relaxed);
        }
        if let Some(h) = &mut self.hist {
            let now = Instant::now();
            let micros = now.duration_since(self.last).as_micros();
            h[op as usize].add(u64::try_from(micros).unwrap_or(u64::MAX));
            self.last = now;
        }
    }

    /// The thread's figures, its work finished now.
    pub(super) fn finish(self, counts: Counts) -> ThreadStats {
        ThreadStats {
            counts,
            start: self.start,
            finish: Instant::now(),
            hist: self.hist.unwrap_or_default(),
        }
    }
}

/// What a thread counted.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Counts {
    /// Operations.
    pub ops: u64,
    /// Key and value bytes moved.
    pub bytes: u64,
    /// Reads that found their key.
    pub found: u64,
    /// Of `ops`, the reads and the writes (readrandomwriterandom).
    pub reads: u64,
    pub writes: u64,
}

/// What one thread measured.
#[derive(Debug, Clone)]
pub(super) struct ThreadStats {
    pub counts: Counts,
    pub start: Instant,
    pub finish: Instant,
    /// By [`OpType`]; empty without `--histogram`.
    pub hist: Vec<Histogram>,
}

/// Merged measurements of one benchmark.
#[derive(Debug)]
pub(super) struct Report {
    pub counts: Counts,
    /// Sum of the threads' busy seconds.
    pub thread_seconds: f64,
    /// First start to last finish.
    pub wall_seconds: f64,
    /// The benchmark's message, e.g. `(5 of 10 found)`.
    pub message: Option<String>,
    /// By [`OpType`]; empty without `--histogram`.
    pub hist: Vec<Histogram>,
}

impl Report {
    /// The threads' figures together.
    pub(super) fn merge(threads: &[ThreadStats]) -> Report {
        let mut r = Report {
            counts: Counts::default(),
            thread_seconds: 0.0,
            wall_seconds: 0.0,
            message: None,
            hist: Vec::new(),
        };
        let (Some(first), Some(last)) = (
            threads.iter().map(|t| t.start).min(),
            threads.iter().map(|t| t.finish).max(),
        ) else {
            return r;
        };
        for t in threads {
            let c = &mut r.counts;
            c.ops += t.counts.ops;
            c.bytes += t.counts.bytes;
            c.found += t.counts.found;
            c.reads += t.counts.reads;
            c.writes += t.counts.writes;
            r.thread_seconds += t.finish.duration_since(t.start).as_secs_f64();
            if r.hist.is_empty() {
                r.hist = t.hist.clone();
            } else {
                for (a, b) in r.hist.iter_mut().zip(&t.hist) {
                    a.merge(b);
                }
            }
        }
        r.wall_seconds = last.duration_since(first).as_secs_f64();
        r
    }

    /// With `message`.
    pub(super) fn with_message(self, message: String) -> Report {
        Report {
            message: Some(message),
            ..self
        }
    }

    /// db_bench's `(found of ops found)`.
    pub(super) fn found_message(&self) -> String {
        format!("({} of {} found)", self.counts.found, self.counts.ops)
    }

    /// One db_bench-style line.
    pub(super) fn line(&self, name: &str) -> String {
        let done = self.counts.ops.max(1);
        let elapsed = self.wall_seconds.max(1e-9);
        let mut extra = String::new();
        if self.counts.bytes > 0 {
            extra = format!(
                "{:6.1} MB/s",
                self.counts.bytes as f64 / 1_048_576.0 / elapsed
            );
        }
        if let Some(m) = &self.message {
            if !extra.is_empty() {
                extra.push(' ');
            }
            extra.push_str(m);
        }
        format!(
            "{:<12} : {:11.3} micros/op {} ops/sec;{}{}",
            name,
            self.thread_seconds * 1e6 / done as f64,
            (done as f64 / elapsed) as u64,
            if extra.is_empty() { "" } else { " " },
            extra
        )
    }

    /// The line, then with `--histogram` each operation type's histogram
    /// (`Microseconds per read:` ...), as db_bench prints them.
    pub(super) fn print(&self, name: &str) {
        println!("{}", self.line(name));
        for (op, h) in OP_NAMES.iter().zip(&self.hist) {
            if h.count() > 0 {
                println!("Microseconds per {op}:\n{}", h.render());
            }
        }
    }
}

/// `--report_interval_seconds`: while `work` runs, writes db_bench's
/// report file `path`: the header `secs_elapsed,interval_qps`, then every
/// `interval` the seconds since the start (rounded) and the operations
/// `ops_done` counted in the interval.
pub(super) fn with_reporter<T>(
    path: &Path,
    interval: Duration,
    ops_done: &AtomicU64,
    work: impl FnOnce() -> T,
) -> Result<T> {
    let mut file =
        std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
    file.write_all(b"secs_elapsed,interval_qps\n")
        .with_context(|| format!("writing {}", path.display()))?;
    let (stop, stopped) = mpsc::channel::<()>();
    std::thread::scope(|s| {
        let reporter = s.spawn(move || -> Result<()> {
            let started = Instant::now();
            let mut last = 0u64;
            while let Err(mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(interval) {
                let done = ops_done.load(Ordering::Relaxed);
                let secs = (started.elapsed().as_micros() + 500_000) / 1_000_000;
                writeln!(file, "{secs},{}", done - last)
                    .with_context(|| format!("writing {}", path.display()))?;
                last = done;
            }
            Ok(())
        });
        let out = work();
        drop(stop);
        let reported = reporter
            .join()
            .unwrap_or_else(|_| Err(anyhow::anyhow!("the reporter thread panicked")));
        reported.map(|()| out)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(ops: u64, bytes: u64, seconds: f64, message: Option<&str>) -> Report {
        Report {
            counts: Counts {
                ops,
                bytes,
                ..Counts::default()
            },
            thread_seconds: seconds,
            wall_seconds: seconds,
            message: message.map(str::to_string),
            hist: Vec::new(),
        }
    }

    #[test]
    fn report_line_has_db_bench_format() {
        assert_eq!(
            report(1_000_000, 1_000_000 * 116, 4.274, None).line("fillrandom"),
            "fillrandom   :       4.274 micros/op 233972 ops/sec;   25.9 MB/s"
        );
        assert!(report(1_000_000, 0, 4.274, Some("(5 of 1000000 found)"))
            .line("seekrandom")
            .ends_with("ops/sec; (5 of 1000000 found)"));
    }

    /// The report file gets the header and then a line per interval whose
    /// counts add up to what was counted while it ran.
    #[test]
    fn reporter_writes_interval_counts() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("report.csv");
        let ops = AtomicU64::new(0);
        with_reporter(&path, Duration::from_millis(20), &ops, || {
            for _ in 0..30 {
                ops.fetch_add(7, Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(5));
            }
        })
        .unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let mut lines = text.lines();
        assert_eq!(lines.next(), Some("secs_elapsed,interval_qps"));
        let mut total = 0;
        let mut n = 0;
        for l in lines {
            let (secs, qps) = l.split_once(',').unwrap();
            assert!(secs.parse::<u64>().unwrap() <= 1, "{l}");
            total += qps.parse::<u64>().unwrap();
            n += 1;
        }
        assert!(n >= 1, "{text}");
        assert!(total <= 210 && total % 7 == 0, "{text}");
    }
}
