//! Soak: `lamina serve` under 8 clients of mixed puts, gets, ranges and
//! deletes (CS265 workloads over disjoint key ranges), every reply checked
//! against the clients' oracles, with the server's RSS and the throughput
//! sampled per interval. At the end every client's keys are read back,
//! the server is stopped cleanly, restarted and read back again, and the
//! directory must pass `lamina verify`.
//!
//! CI runs ~20 s; `scripts/soak.sh` runs the ignored long version
//! (`LAMINA_SOAK_SECS`, `LAMINA_SOAK_INTERVAL_SECS`) and prints the samples.
#![expect(clippy::unwrap_used, reason = "a test may panic on a failed setup")]

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use common::clients::{client_spec, read_range, rss_kib, run_client, Counts, End, Ledger};
use common::*;

const CLIENTS: i32 = 8;
/// Keys per client: the data set stays bounded, so memory must too.
const KEYS: i32 = 20_000;

struct Sample {
    secs: f64,
    ops_per_sec: f64,
    rss_mib: f64,
}

fn soak(duration: Duration, interval: Duration) -> (Vec<Sample>, u64, u64) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let args = ["--buffer-bytes", "1M"];
    let srv = ServerProc::start(&dir, &args);
    let stop = Arc::new(AtomicBool::new(false));
    let counts = Arc::new(Counts::default());
    let handles: Vec<_> = (0..CLIENTS)
        .map(|c| {
            let (port, stop, counts) = (srv.port, Arc::clone(&stop), Arc::clone(&counts));
            thread::spawn(move || {
                let mut ledger = Ledger::default();
                let end = run_client(port, client_spec(c, KEYS, 0), &mut ledger, &stop, &counts);
                (ledger, end)
            })
        })
        .collect();
    let start = Instant::now();
    let mut samples = Vec::new();
    let mut last = (start, 0u64);
    while start.elapsed() < duration {
        thread::sleep(interval.min(duration.saturating_sub(start.elapsed())));
        let now = Instant::now();
        let ops = counts.total();
        let sample = Sample {
            secs: start.elapsed().as_secs_f64(),
            ops_per_sec: (ops - last.1) as f64 / (now - last.0).as_secs_f64(),
            rss_mib: rss_kib(srv.child.id()).unwrap_or(0) as f64 / 1024.0,
        };
        println!(
            "soak t={:>7.1}s  ops/s={:>9.0}  server RSS={:>7.1} MiB",
            sample.secs, sample.ops_per_sec, sample.rss_mib
        );
        samples.push(sample);
        last = (now, ops);
    }
    stop.store(true, Ordering::Relaxed);
    let ledgers: Vec<Ledger> = handles
        .into_iter()
        .map(|h| {
            let (ledger, end) = h.join().unwrap();
            assert_eq!(end, End::Stopped, "a client lost its connection");
            ledger
        })
        .collect();
    let check_all = |port: u16, when: &str| {
        for (c, ledger) in ledgers.iter().enumerate() {
            let got = read_range(port, c as i32, KEYS);
            assert!(
                got == ledger.acked,
                "client {c}: keys differ from the oracle {when}"
            );
        }
    };
    check_all(srv.port, "at the end");
    srv.stop();
    let srv = ServerProc::start(&dir, &args);
    check_all(srv.port, "after a restart");
    srv.stop();
    assert_verifies(&dir);
    let writes = ledgers.iter().map(|l| l.acked_writes).sum();
    (samples, counts.total(), writes)
}

fn summary(samples: &[Sample], ops: u64, writes: u64) {
    let third = (samples.len() / 3).max(1);
    let mean = |s: &[Sample]| s.iter().map(|x| x.ops_per_sec).sum::<f64>() / s.len().max(1) as f64;
    let peak = |s: &[Sample]| s.iter().map(|x| x.rss_mib).fold(0.0, f64::max);
    println!(
        "soak: {:.0} s, {ops} operations ({writes} writes), throughput first third {:.0} ops/s, \
         last third {:.0} ops/s; peak RSS first third {:.1} MiB, last third {:.1} MiB",
        samples.last().map_or(0.0, |s| s.secs),
        mean(&samples[..third]),
        mean(&samples[samples.len() - third..]),
        peak(&samples[..third]),
        peak(&samples[samples.len() - third..]),
    );
}

#[test]
fn short_soak_with_eight_clients() {
    let (samples, ops, writes) = soak(Duration::from_secs(20), Duration::from_secs(2));
    summary(&samples, ops, writes);
    assert!(writes > 0 && ops > writes);
}

#[test]
#[ignore = "long version, run by scripts/soak.sh"]
fn soak_long() {
    let secs = std::env::var("LAMINA_SOAK_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_800);
    let interval = std::env::var("LAMINA_SOAK_INTERVAL_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(60);
    let (samples, ops, writes) = soak(Duration::from_secs(secs), Duration::from_secs(interval));
    summary(&samples, ops, writes);
    // Bounded memory: the data set is bounded, so the last third of the run
    // may not need much more than the middle third did.
    let third = samples.len() / 3;
    if third > 0 {
        let peak = |s: &[Sample]| s.iter().map(|x| x.rss_mib).fold(0.0, f64::max);
        let (middle, last) = (
            peak(&samples[third..2 * third]),
            peak(&samples[2 * third..]),
        );
        assert!(
            last <= middle * 1.25 + 32.0,
            "RSS still growing: {middle:.1} MiB -> {last:.1} MiB"
        );
    }
}
