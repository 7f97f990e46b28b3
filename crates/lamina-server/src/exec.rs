//! The command executor: runs parsed DSL commands against a [`Db`] and
//! appends their replies to a buffer.
//!
//! Puts and deletes are coalesced into one [`WriteBatch`], which is applied
//! before any command other than a get runs, and by the caller (through
//! [`Session::apply_pending`]) before any buffered reply is sent, so a
//! write is acknowledged once a reply to it or to a later command was sent.
//! A get of a key the pending batch wrote applies the batch first, so the
//! session reads its own writes from the database: a value that was not
//! stored is never returned, and a failed batch's `ERROR` line comes before
//! every reply that depends on it. A get of any other key reads the
//! database, where the batch could not change its answer, and leaves the
//! batch pending: the generator's workloads interleave puts and gets, and
//! one batch (one log write) per read chunk instead of one per run of puts
//! is what keeps the server ahead.
//!
//! # Replies
//!
//! | command | reply |
//! | --- | --- |
//! | `p`, `d`, `l` | nothing on success |
//! | `g K` | the value, or an empty line if absent |
//! | `r LO HI` | `k:v` pairs of `[LO, HI)` in key order, space separated, on one line (empty line if none, or if `LO >= HI`) |
//! | `s [N]` | the CS265 course's stats format (`LVLn` numbering, see below) |
//! | `info` | `buffer bytes=B entries=E`, then one line per disk level: `Ln runs=R files=F bytes=B entries=E compactions=C compaction_seconds=S write_amplification=W` (`L0` the first on-disk level; the merges counted are those into the level, the write amplification its bytes written per byte that came in from above), then `merges compactions=C trivial_moves=T sub_merges=S max_sub_merges=M bytes_per_sec=R files_written=F moved_files=N moved_bytes=B` |
//! | `bloom` | one line per disk level: `Ln filter_bytes=.. bits_per_key=.. fpr_theoretical=..`, then `probes=P negatives=N false_positives=F measured_fpr=M` |
//! | `misses` | `gets=G hits=H misses=M`: the engine's lookups (every `g`) |
//! | `io` | one line per disk level: `Ln bytes_read=R bytes_written=W bytes_read_level=RL bytes_moved=M` (bytes flushed or merged into the level from above, written into it, read by its merges from its own files, moved into it unchanged), then `ingested=.. flush_written=.. compaction_read=.. compaction_written=.. write_amplification=..` |
//! | `stats-json` | the engine's `DbStats` as one line of JSON |
//! | `flush`, `compact` | `OK` once done |
//! | `quit`, `@end` | ends the session (the transport decides what to send) |
//! | `@sync` | `@sync` over the network, nothing locally |
//! | anything bad | exactly one line starting with `ERROR ` |
//!
//! # Load files
//!
//! `l PATH` streams the file in 64 KiB chunks (one write batch each), never
//! reading past the size the open file had. What may be loaded is the
//! session's [`LoadAccess`]: local input (`lamina exec`, the console) loads
//! any path, relative to the process's working directory; a network client
//! only regular files inside the server's load directory, which a relative
//! `PATH` is resolved against and which no `..`, absolute path or symlink
//! may leave (the file is opened non-blocking, so a FIFO cannot hold the
//! session, and checked on the open descriptor). A missing file, anything
//! but a regular file, a file over the size cap, or a length that is not a
//! multiple of 8 is an `ERROR` and loads nothing. A server shutdown stops a
//! load at its next chunk.
//!
//! # Level numbering
//!
//! `info`, `bloom` and `io` number levels as the engine, `stats-json`,
//! `lamina inspect`, `/metrics` and `lamina bench` do: `L0` is the first
//! on-disk level, and the in-memory buffer (memtables) is `buffer`. Only
//! `s` keeps the CS265 course's format (seed 004), numbering with the
//! buffer: `LVL1` is the buffer and `LVLn` the disk level `L(n - 2)`. That
//! mapping lives in `CourseLevel` and nowhere else.
//!
//! # `s [N]`
//!
//! The CS265 course's format, kept as the course's tools read it (its
//! `LVLn` numbering included). Line 1: `Logical Pairs: C`, the number of live keys (a full scan).
//! Line 2: the number of entries stored at each non-empty level,
//! `LVL1: 3, LVL3: 9` (entries counts the newest version of each key within
//! the level, tombstones included; for a disk level of more than
//! [`EXACT_COUNT_LIMIT`] stored entries it is the stored-entry count, all
//! versions; an empty tree prints an empty line).
//! Then for each non-empty level one line of at most `N` entries in key order,
//! `k:v:L1 k:v:L1 ...`, a tombstone shown as `k:DEL:L1`, followed by an
//! empty line.
//!
//! # Measured false-positive rate
//!
//! `measured_fpr = false_positives / (false_positives + negatives)`: among
//! filter probes for keys absent from the probed run (the filter's
//! negatives, which are always true negatives, plus its false positives), the
//! share the filter let through. `n/a` before any such probe.

use std::fs::File;
use std::io::{self, Read};
use std::ops::Bound;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use rustc_hash::FxHashSet;

use crate::dsl_key::{decode_i32, encode_i32};
use lamina::{Db, WriteBatch};

use crate::parse::{parse_line, show, Command};
use crate::sniff::is_http;

/// Largest batch of coalesced puts/deletes before it is applied anyway.
pub const MAX_BATCH: usize = 16 * 1024;
/// Above this many stored entries `s` reports a disk level's stored-entry
/// count rather than counting its distinct keys.
pub const EXACT_COUNT_LIMIT: u64 = 1_000_000;
/// Records per write batch when loading a file.
const LOAD_BATCH: usize = 8 * 1024;
/// Replies are written out in chunks of about this size as they are
/// produced (with [`Session::streaming`]).
pub const STREAM_CHUNK: usize = 64 * 1024;

/// Where the session's input comes from; decides how markers are answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// A network connection: `@sync` is answered with a `@sync` line.
    Network,
    /// Local input (`lamina exec`, the server console): markers print nothing.
    Local,
}

/// What the transport should do after a line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Control {
    /// Keep going.
    Continue,
    /// `quit` was received.
    Quit,
    /// `@end` was received.
    End,
    /// A line of an HTTP request ([`crate::sniff::is_http`]) arrived on a
    /// network session (a web page's request, its body the page's
    /// commands): the transport closes the connection without a reply.
    /// The line was not executed, and nothing after it may be.
    Http,
}

/// Which files `l PATH` may read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoadAccess {
    /// Any file the process can read: local, trusted input (`lamina exec`,
    /// the server's console).
    Anywhere,
    /// Only regular files inside `dir` (a canonical path: no `..`, no
    /// symlink, no absolute path leads out of it), of at most `max_bytes`:
    /// what network clients get.
    Within {
        /// The load directory, canonical.
        dir: PathBuf,
        /// Largest file accepted.
        max_bytes: u64,
    },
    /// `l` answers with an `ERROR`.
    Disabled,
}

/// Writes a part of a reply out while the reply is still being produced.
pub type ReplySink<'a> = Box<dyn FnMut(&[u8]) -> io::Result<()> + 'a>;

/// Told `(records loaded, records in the file)` when an `l` load starts
/// (0) and after each batch it writes (`lamina exec` draws a progress bar
/// with it).
pub type LoadProgress<'a> = Box<dyn FnMut(u64, u64) + 'a>;

/// One client's execution state over a shared [`Db`].
pub struct Session<'a> {
    db: &'a Db,
    mode: Mode,
    batch: WriteBatch,
    /// The keys `batch` writes.
    pending: FxHashSet<i32>,
    loads: LoadAccess,
    /// Set by a server shutdown: a load in progress stops.
    cancel: Option<Arc<AtomicBool>>,
    /// Where long replies stream to (the connection); `None`: replies are
    /// only buffered.
    sink: Option<ReplySink<'a>>,
    /// The sink failed (the peer is gone); the transport ends the session.
    broken: Option<io::Error>,
    /// Part of the current command's reply was already written out.
    streamed: bool,
    /// Told of each batch a load writes.
    load_progress: Option<LoadProgress<'a>>,
}

/// Appends `ERROR <msg>\n`.
pub fn push_error(out: &mut Vec<u8>, msg: &str) {
    out.extend_from_slice(b"ERROR ");
    // The message must stay one line.
    out.extend(
        msg.bytes()
            .map(|b| if b == b'\n' || b == b'\r' { b' ' } else { b }),
    );
    out.push(b'\n');
}

fn push_int<I: itoa::Integer>(out: &mut Vec<u8>, v: I) {
    let mut b = itoa::Buffer::new();
    out.extend_from_slice(b.format(v).as_bytes());
}

/// Appends a stored key or value: its `i32` if it is 4 bytes, else `0x` hex.
fn push_datum(out: &mut Vec<u8>, bytes: &[u8]) {
    match decode_i32(bytes) {
        Some(v) => push_int(out, v),
        None => {
            out.extend_from_slice(b"0x");
            for b in bytes {
                out.extend_from_slice(format!("{b:02x}").as_bytes());
            }
        }
    }
}

fn fpr(fp: u64, negatives: u64) -> String {
    let denom = fp.saturating_add(negatives);
    if denom == 0 {
        "n/a".to_string()
    } else {
        format!("{:.6}", fp as f64 / denom as f64)
    }
}

impl<'a> Session<'a> {
    /// A session over `db`. Local sessions may load any file; network
    /// sessions load nothing until [`Session::with_loads`] says where.
    pub fn new(db: &'a Db, mode: Mode) -> Session<'a> {
        Session {
            db,
            mode,
            batch: WriteBatch::new(),
            pending: FxHashSet::default(),
            loads: match mode {
                Mode::Local => LoadAccess::Anywhere,
                Mode::Network => LoadAccess::Disabled,
            },
            cancel: None,
            sink: None,
            broken: None,
            streamed: false,
            load_progress: None,
        }
    }

    /// Tells `progress` how each `l` load advances.
    pub fn with_load_progress(mut self, progress: LoadProgress<'a>) -> Self {
        self.load_progress = Some(progress);
        self
    }

    /// Sets which files `l` may read.
    pub fn with_loads(mut self, loads: LoadAccess) -> Self {
        self.loads = loads;
        self
    }

    /// Stops a load in progress once `flag` is set (a server shutdown).
    pub fn with_cancel(mut self, flag: Arc<AtomicBool>) -> Self {
        self.cancel = Some(flag);
        self
    }

    /// Streams replies longer than [`STREAM_CHUNK`] to `sink` as they are
    /// produced, so a reply of any size takes bounded memory; a slow reader
    /// holds the session back (the sink blocks).
    pub fn streaming(mut self, sink: ReplySink<'a>) -> Self {
        self.sink = Some(sink);
        self
    }

    /// The error that ended streaming, if the peer went away.
    pub fn take_broken(&mut self) -> Option<io::Error> {
        self.broken.take()
    }

    /// Writes `out` to the sink once it holds a chunk; an error aborts the
    /// command. Only called after the pending batch was applied (every
    /// streaming command is a read other than `g`), so nothing is sent
    /// before the writes it acknowledges are stored.
    fn spill(&mut self, out: &mut Vec<u8>) -> Result<(), String> {
        if out.len() < STREAM_CHUNK {
            return Ok(());
        }
        let Some(sink) = &mut self.sink else {
            return Ok(());
        };
        if let Err(e) = sink(out) {
            self.broken = Some(e);
            return Err("connection closed".into());
        }
        out.clear();
        self.streamed = true;
        Ok(())
    }

    /// Applies the coalesced puts and deletes, appending one `ERROR` line to
    /// `out` if the engine refuses them.
    pub fn apply_pending(&mut self, out: &mut Vec<u8>) {
        if self.batch.is_empty() {
            return;
        }
        let batch = std::mem::take(&mut self.batch);
        self.pending.clear();
        if let Err(e) = self.db.write(batch) {
            push_error(out, &format!("write failed: {e}"));
        }
    }

    /// Whether puts or deletes are waiting to be applied.
    pub fn has_pending(&self) -> bool {
        !self.batch.is_empty()
    }

    /// Reports a line that exceeded the length limit.
    pub fn line_too_long(&mut self, out: &mut Vec<u8>, limit: usize) {
        push_error(out, &format!("line longer than {limit} bytes"));
    }

    /// Parses and executes one line, appending its reply to `out`. On a
    /// network session a line of an HTTP request is not executed but
    /// answered [`Control::Http`].
    pub fn execute_line(&mut self, line: &[u8], out: &mut Vec<u8>) -> Control {
        match parse_line(line) {
            Ok(cmd) => self.execute(cmd, out),
            // No HTTP line parses as a command (every command starts with
            // a lower-case word or `@`), so only a bad line needs the test.
            Err(_) if self.mode == Mode::Network && is_http(line) => Control::Http,
            Err(e) => {
                push_error(out, &e.to_string());
                Control::Continue
            }
        }
    }

    /// Executes one command, appending its reply to `out`.
    pub fn execute(&mut self, cmd: Command<'_>, out: &mut Vec<u8>) -> Control {
        match cmd {
            Command::Nothing => {}
            Command::Put(k, v) => {
                self.batch.put(&encode_i32(k), &encode_i32(v));
                self.pending_write(k, out);
            }
            Command::Delete(k) => {
                self.batch.delete(&encode_i32(k));
                self.pending_write(k, out);
            }
            Command::Get(k) => self.get(k, out),
            other => {
                self.apply_pending(out);
                return self.execute_read(other, out);
            }
        }
        Control::Continue
    }

    /// Records a write added to the batch; applies a full batch.
    fn pending_write(&mut self, k: i32, out: &mut Vec<u8>) {
        self.pending.insert(k);
        if self.batch.len() >= MAX_BATCH {
            self.apply_pending(out);
        }
    }

    fn execute_read(&mut self, cmd: Command<'_>, out: &mut Vec<u8>) -> Control {
        let mark = out.len();
        self.streamed = false;
        let result = match cmd {
            Command::Range(lo, hi) => self.range(lo, hi, out),
            Command::Load(path) => self.load(path),
            Command::Stats(n) => self.stats(n, out),
            Command::Info => {
                self.info(out);
                Ok(())
            }
            Command::Bloom => {
                self.bloom(out);
                Ok(())
            }
            Command::Misses => {
                let s = self.db.stats();
                out.extend_from_slice(
                    format!(
                        "gets={} hits={} misses={}\n",
                        s.gets, s.get_hits, s.get_misses
                    )
                    .as_bytes(),
                );
                Ok(())
            }
            Command::Io => {
                self.io(out);
                Ok(())
            }
            Command::StatsJson => match serde_json::to_string(&self.db.stats()) {
                Ok(j) => {
                    out.extend_from_slice(j.as_bytes());
                    out.push(b'\n');
                    Ok(())
                }
                Err(e) => Err(format!("cannot encode stats: {e}")),
            },
            Command::Flush => self
                .db
                .flush()
                .map(|()| out.extend_from_slice(b"OK\n"))
                .map_err(|e| format!("flush failed: {e}")),
            Command::Compact => self
                .db
                .compact_range(None, None)
                .map(|()| out.extend_from_slice(b"OK\n"))
                .map_err(|e| format!("compaction failed: {e}")),
            Command::Quit => return Control::Quit,
            Command::End => return Control::End,
            Command::Sync => {
                if self.mode == Mode::Network {
                    out.extend_from_slice(crate::SYNC_REPLY);
                }
                Ok(())
            }
            Command::Nothing | Command::Put(..) | Command::Delete(_) | Command::Get(_) => Ok(()),
        };
        if let Err(msg) = result {
            if self.streamed {
                // Part of the reply is already out: end its line, then the
                // ERROR line.
                out.push(b'\n');
            } else {
                out.truncate(mark);
            }
            push_error(out, &msg);
        }
        Control::Continue
    }

    /// Answers `g k` from the database. If the pending batch wrote `k`, the
    /// batch is applied first: its `ERROR`, should it fail, comes before
    /// this reply, and the reply shows only what was stored. A get of any
    /// other key cannot depend on the batch and leaves it pending.
    fn get(&mut self, k: i32, out: &mut Vec<u8>) {
        if self.pending.contains(&k) {
            self.apply_pending(out);
        }
        match self.db.get(&encode_i32(k)) {
            Ok(Some(v)) => push_datum(out, &v),
            Ok(None) => {}
            Err(e) => return push_error(out, &format!("get failed: {e}")),
        }
        out.push(b'\n');
    }

    fn range(&mut self, lo: i32, hi: i32, out: &mut Vec<u8>) -> Result<(), String> {
        if lo < hi {
            let (lo, hi) = (encode_i32(lo), encode_i32(hi));
            let iter = self
                .db
                .scan(Bound::Included(&lo[..]), Bound::Excluded(&hi[..]))
                .map_err(|e| format!("range failed: {e}"))?;
            let mut first = true;
            for item in iter {
                let (k, v) = item.map_err(|e| format!("range failed: {e}"))?;
                if !first {
                    out.push(b' ');
                }
                first = false;
                push_datum(out, &k);
                out.push(b':');
                push_datum(out, &v);
                self.spill(out)?;
            }
        }
        out.push(b'\n');
        Ok(())
    }

    /// Streams a file of little-endian `(i32, i32)` records into the db,
    /// within what [`LoadAccess`] allows.
    fn load(&mut self, path: &str) -> Result<(), String> {
        let shown = show(path.as_bytes());
        let (file, len) = match &self.loads {
            LoadAccess::Disabled => {
                return Err(
                    "loads are disabled on this server (serve --load-dir DIR enables them)".into(),
                )
            }
            LoadAccess::Anywhere => {
                let file = File::open(path).map_err(|e| format!("cannot open \"{shown}\": {e}"))?;
                let len = regular_len(&file, &shown)?;
                (file, len)
            }
            LoadAccess::Within { dir, max_bytes } => {
                let file = open_within(dir, path, &shown)?;
                let len = regular_len(&file, &shown)?;
                if len > *max_bytes {
                    return Err(format!(
                        "\"{shown}\" is {len} bytes, more than this server loads ({max_bytes})"
                    ));
                }
                (file, len)
            }
        };
        if len % 8 != 0 {
            return Err(format!(
                "\"{shown}\" is {len} bytes, not a whole number of 8-byte records"
            ));
        }
        // Never more than the size the open file had: a file that grows
        // (or a pseudo-file with no size) cannot keep a load going.
        let mut file = file.take(len);
        let mut buf = vec![0u8; LOAD_BATCH * 8];
        let mut loaded: u64 = 0;
        if let Some(progress) = &mut self.load_progress {
            progress(0, len / 8);
        }
        loop {
            if self
                .cancel
                .as_ref()
                .is_some_and(|c| c.load(Ordering::Relaxed))
            {
                return Err(format!(
                    "load of \"{shown}\" cancelled: the server is shutting down ({loaded} records loaded)"
                ));
            }
            let n = read_full(&mut file, &mut buf).map_err(|e| format!("read failed: {e}"))?;
            if n % 8 != 0 {
                return Err(format!(
                    "\"{shown}\" changed while loading ({loaded} records loaded)"
                ));
            }
            if n == 0 {
                return Ok(());
            }
            let mut batch = WriteBatch::new();
            for rec in buf[..n].chunks_exact(8) {
                let k = i32::from_le_bytes([rec[0], rec[1], rec[2], rec[3]]);
                let v = i32::from_le_bytes([rec[4], rec[5], rec[6], rec[7]]);
                batch.put(&encode_i32(k), &encode_i32(v));
            }
            self.db
                .write(batch)
                .map_err(|e| format!("load failed after {loaded} records: {e}"))?;
            loaded += (n / 8) as u64;
            if let Some(progress) = &mut self.load_progress {
                progress(loaded, len / 8);
            }
        }
    }

    fn stats(&mut self, n: usize, out: &mut Vec<u8>) -> Result<(), String> {
        let err = |e: lamina::Error| format!("stats failed: {e}");
        let db = self.db;
        let mut live: u64 = 0;
        for item in db.scan(Bound::Unbounded, Bound::Unbounded).map_err(err)? {
            item.map_err(err)?;
            live += 1;
        }
        out.extend_from_slice(b"Logical Pairs: ");
        push_int(out, live);
        out.push(b'\n');
        // Each shown level's entries stream from an iterator opened next to
        // the one that counted them, so the two lines agree.
        let mut shown = Vec::new();
        let stats = db.stats();
        let levels =
            std::iter::once(CourseLevel::Buffer).chain((0..db.num_levels()).map(CourseLevel::Disk));
        for level in levels {
            let entries = level.iter(db).map_err(err)?;
            let count = self.level_count(level, &stats).map_err(err)?;
            if count == 0 {
                continue;
            }
            if !shown.is_empty() {
                out.extend_from_slice(b", ");
            }
            out.extend_from_slice(b"LVL");
            push_int(out, level.number());
            out.extend_from_slice(b": ");
            push_int(out, count);
            shown.push((level, entries));
        }
        out.push(b'\n');
        for (level, entries) in shown {
            for (i, entry) in entries.take(n).enumerate() {
                let (k, v) = entry.map_err(err)?;
                if i > 0 {
                    out.push(b' ');
                }
                push_datum(out, &k);
                out.push(b':');
                match v {
                    Some(v) => push_datum(out, &v),
                    None => out.extend_from_slice(b"DEL"),
                }
                out.extend_from_slice(b":L");
                push_int(out, level.number());
                self.spill(out)?;
            }
            out.extend_from_slice(b"\n\n");
        }
        Ok(())
    }

    /// Entries stored at a level: the newest version of each key within the
    /// level, tombstones included, counted in constant memory. A disk level
    /// holding more than [`EXACT_COUNT_LIMIT`] entries reports its stored
    /// entry count instead (all versions), which saves reading the level.
    fn level_count(&self, level: CourseLevel, stats: &lamina::DbStats) -> lamina::Result<u64> {
        if let CourseLevel::Disk(i) = level {
            if let Some(l) = stats.levels.iter().find(|l| l.level == i) {
                if l.entries > EXACT_COUNT_LIMIT {
                    return Ok(l.entries);
                }
            }
        }
        let mut count = 0;
        for entry in level.iter(self.db)? {
            entry?;
            count += 1;
        }
        Ok(count)
    }

    fn info(&mut self, out: &mut Vec<u8>) {
        let s = self.db.stats();
        out.extend_from_slice(
            format!(
                "buffer bytes={} entries={}\n",
                s.memtable_bytes, s.memtable_entries
            )
            .as_bytes(),
        );
        for l in &s.levels {
            out.extend_from_slice(
                format!(
                    "L{} runs={} files={} bytes={} entries={} compactions={} \
                     compaction_seconds={:.3} write_amplification={:.3}\n",
                    l.level,
                    l.runs,
                    l.files,
                    l.bytes,
                    l.entries,
                    l.compactions,
                    l.compaction_seconds,
                    l.write_amplification
                )
                .as_bytes(),
            );
        }
        out.extend_from_slice(
            format!(
                "merges compactions={} trivial_moves={} sub_merges={} max_sub_merges={} \
                 bytes_per_sec={:.0} files_written={} moved_files={} moved_bytes={}\n",
                s.compactions,
                s.trivial_moves,
                s.sub_merges,
                s.max_sub_merges,
                s.merge_bytes_per_sec,
                s.compaction_files_written,
                s.merge_moved_files,
                s.merge_moved_bytes
            )
            .as_bytes(),
        );
    }

    fn bloom(&mut self, out: &mut Vec<u8>) {
        let s = self.db.stats();
        for l in &s.levels {
            out.extend_from_slice(
                format!(
                    "L{} filter_bytes={} bits_per_key={:.2} fpr_theoretical={:.6}\n",
                    l.level, l.filter_bytes, l.bloom_bits_per_key, l.bloom_fpr_theoretical
                )
                .as_bytes(),
            );
        }
        out.extend_from_slice(
            format!(
                "probes={} negatives={} false_positives={} measured_fpr={}\n",
                s.bloom_probes,
                s.bloom_negatives,
                s.bloom_false_positives,
                fpr(s.bloom_false_positives, s.bloom_negatives)
            )
            .as_bytes(),
        );
    }

    fn io(&mut self, out: &mut Vec<u8>) {
        let s = self.db.stats();
        for l in &s.levels {
            out.extend_from_slice(
                format!(
                    "L{} bytes_read={} bytes_written={} bytes_read_level={} bytes_moved={}\n",
                    l.level, l.bytes_read, l.bytes_written, l.bytes_read_level, l.bytes_moved
                )
                .as_bytes(),
            );
        }
        out.extend_from_slice(
            format!(
                "ingested={} flush_written={} compaction_read={} compaction_written={} write_amplification={:.3}\n",
                s.bytes_ingested,
                s.flush_bytes_written,
                s.compaction_bytes_read,
                s.compaction_bytes_written,
                s.write_amplification
            )
            .as_bytes(),
        );
    }
}

/// Opens `path` for a network client: resolved against `dir` (canonical),
/// canonicalised (which resolves `..` and symlinks), and refused unless the
/// result lies inside `dir`. The open is non-blocking, so a FIFO cannot
/// hold the session, and does not follow a symlink swapped in since. Error
/// messages name only the path the client sent.
fn open_within(dir: &Path, path: &str, shown: &str) -> Result<File, String> {
    let joined = dir.join(path);
    let canonical = joined
        .canonicalize()
        .map_err(|e| format!("cannot open \"{shown}\": {}", e.kind()))?;
    if !canonical.starts_with(dir) {
        return Err(format!("\"{shown}\" is outside the load directory"));
    }
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW)
        .open(&canonical)
        .map_err(|e| format!("cannot open \"{shown}\": {}", e.kind()))
}

/// The length of an opened file, refusing anything but a regular file
/// (checked on the open descriptor, not the path).
fn regular_len(file: &File, shown: &str) -> Result<u64, String> {
    let meta = file
        .metadata()
        .map_err(|e| format!("cannot stat \"{shown}\": {}", e.kind()))?;
    if !meta.is_file() {
        return Err(format!("\"{shown}\" is not a regular file"));
    }
    Ok(meta.len())
}

/// Reads until `buf` is full or end of file; returns the bytes read.
fn read_full(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(m) => n += m,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// A level as `s` names it (`LVLn`, the CS265 course's numbering, seed 004).
#[derive(Debug, Clone, Copy)]
enum CourseLevel {
    /// The in-memory buffer, `LVL1`.
    Buffer,
    /// Engine disk level `i` (from 0), `LVL{i + 2}`.
    Disk(usize),
}

impl CourseLevel {
    /// The `n` of `LVLn`.
    fn number(self) -> usize {
        match self {
            CourseLevel::Buffer => 1,
            CourseLevel::Disk(i) => i + 2,
        }
    }

    /// The level's entries, newest version per key.
    fn iter(self, db: &Db) -> lamina::Result<lamina::LevelIter> {
        match self {
            CourseLevel::Buffer => db.memtable_iter(),
            CourseLevel::Disk(i) => db.level_iter(i),
        }
    }
}
