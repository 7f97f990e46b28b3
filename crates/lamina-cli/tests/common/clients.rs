//! Concurrent DSL clients for the kill-loop and soak tests: each client owns
//! a disjoint key range, streams a CS265 workload (`lamina_workload`, what
//! `lamina gen` writes) over its own connection, checks every get and range
//! reply against its own oracle, and keeps a ledger of which writes are
//! acknowledged.
//!
//! `p` and `d` have no reply: a write is acknowledged when the reply of a
//! later `g` or `r` on the same connection arrives (the server executes a
//! connection's lines in order). Writes sent since the last reply are
//! *pending*: a crash may keep any prefix of them.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use lamina_workload::{Generator, Op, WorkloadSpec};

/// Keys of client `c`: `[c * KEY_STRIDE, c * KEY_STRIDE + keys)`.
pub const KEY_STRIDE: i32 = 1_000_000;

/// One write, as sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sent {
    Put(i32, i32),
    Delete(i32),
}

impl Sent {
    fn apply(self, m: &mut BTreeMap<i32, i32>) {
        match self {
            Sent::Put(k, v) => {
                m.insert(k, v);
            }
            Sent::Delete(k) => {
                m.remove(&k);
            }
        }
    }
}

/// What a client knows about its key range.
#[derive(Debug, Clone, Default)]
pub struct Ledger {
    /// The state every acknowledged write leads to.
    pub acked: BTreeMap<i32, i32>,
    /// Writes sent after the last acknowledgement, in order.
    pub pending: Vec<Sent>,
    /// Writes acknowledged so far (over all connections).
    pub acked_writes: u64,
}

impl Ledger {
    /// Checks the state read back after a crash: it must equal `acked` plus
    /// some prefix of `pending`. Returns that prefix's length and makes the
    /// recovered state the new acknowledged state.
    pub fn settle(&mut self, recovered: BTreeMap<i32, i32>) -> Result<usize, String> {
        let mut state = self.acked.clone();
        for m in 0..=self.pending.len() {
            if m > 0 {
                self.pending[m - 1].apply(&mut state);
            }
            if state == recovered {
                self.acked = recovered;
                self.acked_writes += m as u64;
                self.pending.clear();
                return Ok(m);
            }
        }
        let lost: Vec<_> = self
            .acked
            .iter()
            .filter(|(k, v)| recovered.get(k) != Some(v))
            .take(5)
            .collect();
        Err(format!(
            "recovered state ({} keys) is not the acknowledged state ({} keys) plus a prefix of \
             the {} pending writes; acknowledged pairs missing or different: {lost:?}",
            recovered.len(),
            self.acked.len(),
            self.pending.len()
        ))
    }
}

/// Operation counters shared by all clients.
#[derive(Debug, Default)]
pub struct Counts {
    pub puts: AtomicU64,
    pub deletes: AtomicU64,
    pub gets: AtomicU64,
    pub ranges: AtomicU64,
}

impl Counts {
    pub fn total(&self) -> u64 {
        [&self.puts, &self.deletes, &self.gets, &self.ranges]
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .sum()
    }
}

/// The workload of client `c` in round `round`: mixed puts, gets, ranges and
/// deletes over the client's `keys` keys. One workload puts a fresh key at
/// most once, so it fits a quarter of the keys (the generator keeps half of
/// them for misses); [`run_client`] repeats it with new seeds to outlast any
/// round.
pub fn client_spec(c: i32, keys: i32, round: u64) -> WorkloadSpec {
    let keys = keys as u64;
    WorkloadSpec {
        puts: 2 * keys,
        gets: keys * 4 / 5,
        gets_skewness: 0.2,
        gets_misses_ratio: 0.2,
        ranges: keys * 2 / 25,
        max_range_size: 200,
        deletes: keys / 5,
        // 2·keys puts of which keys/4 fresh.
        update_ratio: 0.875,
        key_min: c * KEY_STRIDE,
        key_max: c * KEY_STRIDE + keys as i32 - 1,
        seed: 7_919 * round + c as u64,
        ..Default::default()
    }
}

/// Parses a range reply `k:v k:v ...`.
pub fn parse_pairs(line: &str) -> Option<BTreeMap<i32, i32>> {
    line.split_whitespace()
        .map(|kv| {
            let (k, v) = kv.split_once(':')?;
            Some((k.parse().ok()?, v.parse().ok()?))
        })
        .collect()
}

/// How a client's run ended.
#[derive(Debug, PartialEq, Eq)]
pub enum End {
    /// `stop` was set and the session ended cleanly (`@bye`).
    Stopped,
    /// The connection failed (the server died).
    Dropped,
}

/// Streams `spec`'s operations, then those of `spec` reseeded again and
/// again, to the server on `port` in pipelined chunks (a chunk ends with a
/// read), checking every reply against the ledger,
/// until `stop` is set or the connection fails. Panics on a wrong reply or
/// an `ERROR` line: both are bugs.
pub fn run_client(
    port: u16,
    spec: WorkloadSpec,
    ledger: &mut Ledger,
    stop: &AtomicBool,
    counts: &Counts,
) -> End {
    let Ok(stream) = TcpStream::connect(("127.0.0.1", port)) else {
        return End::Dropped;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(120)));
    let mut writer = match stream.try_clone() {
        Ok(w) => w,
        Err(_) => return End::Dropped,
    };
    let mut reader = BufReader::new(stream);
    let own_key = spec.key_min;
    let mut ops = (0u64..)
        .flat_map(move |n| {
            Generator::new(WorkloadSpec {
                seed: spec.seed.wrapping_add(n.wrapping_mul(0x9E37_79B9)),
                ..spec.clone()
            })
            .unwrap()
        })
        .filter(|op| !matches!(op, Op::Load(_)));
    let mut line = String::new();
    while !stop.load(Ordering::Relaxed) {
        // One chunk: writes up to and including a read.
        let mut chunk = Vec::new();
        for op in ops.by_ref() {
            let read = matches!(op, Op::Get(_) | Op::Range { .. });
            chunk.push(op);
            if read || chunk.len() >= 64 {
                break;
            }
        }
        if !matches!(chunk.last(), Some(Op::Get(_) | Op::Range { .. })) {
            chunk.push(Op::Get(own_key));
        }
        let text: String = chunk.iter().map(|op| format!("{op}\n")).collect();
        let sent = writer.write_all(text.as_bytes()).is_ok();
        for (i, op) in chunk.iter().enumerate() {
            match *op {
                Op::Put { key, value } => {
                    ledger.pending.push(Sent::Put(key, value));
                    counts.puts.fetch_add(1, Ordering::Relaxed);
                }
                Op::Delete(k) => {
                    ledger.pending.push(Sent::Delete(k));
                    counts.deletes.fetch_add(1, Ordering::Relaxed);
                }
                Op::Get(_) | Op::Range { .. } => {
                    line.clear();
                    if !sent || !matches!(reader.read_line(&mut line), Ok(n) if n > 0) {
                        // Everything after the last reply stays pending.
                        for op in &chunk[i + 1..] {
                            match *op {
                                Op::Put { key, value } => {
                                    ledger.pending.push(Sent::Put(key, value))
                                }
                                Op::Delete(k) => ledger.pending.push(Sent::Delete(k)),
                                _ => {}
                            }
                        }
                        return End::Dropped;
                    }
                    let reply = line.trim_end_matches('\n');
                    assert!(!reply.starts_with("ERROR"), "server error: {reply}");
                    for w in ledger.pending.drain(..) {
                        w.apply(&mut ledger.acked);
                        ledger.acked_writes += 1;
                    }
                    check_reply(op, reply, &ledger.acked);
                    match op {
                        Op::Get(_) => counts.gets.fetch_add(1, Ordering::Relaxed),
                        _ => counts.ranges.fetch_add(1, Ordering::Relaxed),
                    };
                }
                Op::Load(_) => unreachable!("loads are filtered out"),
            }
        }
    }
    if writer.write_all(b"@end\n").is_err() {
        return End::Dropped;
    }
    line.clear();
    match reader.read_line(&mut line) {
        Ok(_) if line == "@bye\n" => {
            // `@bye` follows the execution of every earlier line.
            for w in ledger.pending.drain(..) {
                w.apply(&mut ledger.acked);
                ledger.acked_writes += 1;
            }
            End::Stopped
        }
        _ => End::Dropped,
    }
}

fn check_reply(op: &Op, reply: &str, acked: &BTreeMap<i32, i32>) {
    match *op {
        Op::Get(k) => {
            let want = acked.get(&k).map(|v| v.to_string()).unwrap_or_default();
            assert_eq!(reply, want, "g {k}");
        }
        Op::Range { lo, hi } => {
            let got = parse_pairs(reply).unwrap_or_else(|| panic!("bad range reply {reply:?}"));
            let want: BTreeMap<i32, i32> = acked.range(lo..hi).map(|(k, v)| (*k, *v)).collect();
            assert_eq!(got, want, "r {lo} {hi}");
        }
        _ => {}
    }
}

/// Reads client `c`'s whole key range back with one `r`.
pub fn read_range(port: u16, c: i32, keys: i32) -> BTreeMap<i32, i32> {
    let lo = c * KEY_STRIDE;
    let out = super::client(port, format!("r {lo} {}\n", lo + keys).into_bytes());
    parse_pairs(out.trim_end()).unwrap_or_else(|| panic!("bad range reply {out:?}"))
}

/// Resident set size of process `pid` in KiB (Linux `/proc`).
pub fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
}
