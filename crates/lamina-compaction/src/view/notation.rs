//! A text picture of a tree's levels, runs and files (Pebble's
//! `ParseVersionDebug`): [`parse`](fn@parse) builds a [`TreeView`] from one and
//! [`print`](fn@print) writes one, so tests state a tree in a few lines and compare
//! trees as text.
//!
//! ```text
//! L0
//!   r7 order=3: 7[0-999]=1
//! L1
//!   r5: 5[10-20]=100{seq=3,tomb=2} 6[30-40]=100*
//! L2 sizes: 4 16
//!   r3: 3[0-9]=10{mbr=0:0:1.5:2}
//!     buffer base=100 round=40
//!       b8: 1[0-4]=10 ~2[5-9]=10
//! ```
//!
//! A level is `L<n>`, followed by its runs, newest first:
//! `r<id> [order=<o>]: <file> <file> ...`. A file is
//! `<id>[<lo>-<hi>]=<size>`, then optionally `{key=value,...}` with any of
//! `entries` (default: the size), `tomb` (tombstones), `seq` (smallest
//! sequence number), `created`, `arrived`, `read` (times in ms: creation,
//! arrival in the level, last read), `tomb-ms` (the oldest tombstone's
//! time) and `mbr` (a spatial file's bounding rectangle,
//! `x0:y0:x1:y1`), then `*` if a running compaction owns it. A key is an integer,
//! stored as 8 big-endian bytes (as the DSL stores integers), ASCII
//! letters and digits in single quotes (`'abc'`, those bytes), or `x`
//! followed by the key's bytes in hex. Runs without `order=` are ranked by
//! their place in the picture: the first listed is the newest (ranks count
//! down to 1). `L<n> sizes: S S ...` is a shorthand for a stack of
//! one-file runs spanning keys `[0-999]` (attributes at their defaults),
//! files and runs numbered from 1001 on.
//!
//! A run's LSbM compaction buffer ([`crate::lsbm`]) follows its run line:
//! `buffer` with optional `incomplete` (not every round has a table),
//! `base=<S'>` and `round=<bytes>` (the host's bytes before the newest
//! round), then its tables, newest first, `b<source run>: <slot> ...`, a
//! slot being a file as above or `~<id>[<lo>-<hi>]=<size>` for a removed
//! file (a marker).
//!
//! [`print`](fn@print) writes every run's `order=`, the attributes that differ from
//! their defaults, and integer keys where a key has 8 bytes: parsing its
//! output gives the same tree, and printing that gives the same text. The
//! picture holds no tree-wide fields (`flushes`, `memtable_bytes`,
//! `now_ms`); [`parse`](fn@parse) leaves them at their defaults.

use std::fmt::Write as _;

use crate::error::{Error, Result};
use crate::geometry::{Point, Rect};
use crate::lsbm::{apply_changes, Buffer, BufferChange, Marker, Slot};
use crate::{FileView, LevelView, RunView, TreeView};

/// The first id of the files and runs of `sizes:` shorthands.
const FIRST_SHORTHAND_ID: u64 = 1001;

fn bad(what: &str, text: &str) -> Error {
    Error::InvalidArgument(format!("tree picture: bad {what} {text:?}"))
}

fn number(text: &str, what: &str) -> Result<u64> {
    text.trim().parse().map_err(|_| bad(what, text))
}

/// Parses a key: an integer (8 big-endian bytes), `'<text>'` (its bytes)
/// or `x<hex>`.
fn parse_key(text: &str) -> Result<Vec<u8>> {
    if let Some(quoted) = text.strip_prefix('\'') {
        return quoted
            .strip_suffix('\'')
            .filter(|t| !t.is_empty() && t.bytes().all(|b| b.is_ascii_alphanumeric()))
            .map(|t| t.as_bytes().to_vec())
            .ok_or_else(|| bad("key", text));
    }
    match text.strip_prefix('x') {
        Some(hex) if hex.len() % 2 == 0 => (0..hex.len())
            .step_by(2)
            .map(|i| {
                hex.get(i..i + 2)
                    .and_then(|b| u8::from_str_radix(b, 16).ok())
                    .ok_or_else(|| bad("key", text))
            })
            .collect(),
        Some(_) => Err(bad("key", text)),
        None => Ok(number(text, "key")?.to_be_bytes().to_vec()),
    }
}

/// Writes a key as [`parse_key`] reads it: 8 bytes as an integer, ASCII
/// letters and digits quoted, anything else in hex.
fn print_key(key: &[u8]) -> String {
    if let Ok(bytes) = <[u8; 8]>::try_from(key) {
        return u64::from_be_bytes(bytes).to_string();
    }
    if !key.is_empty() && key.iter().all(u8::is_ascii_alphanumeric) {
        return format!("'{}'", String::from_utf8_lossy(key));
    }
    key.iter().fold(String::from("x"), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// Parses a rectangle `x0:y0:x1:y1`.
fn parse_rect(text: &str) -> Result<Rect> {
    let c: Vec<f64> = text
        .split(':')
        .map(|v| v.trim().parse::<f64>().map_err(|_| bad("mbr", text)))
        .collect::<Result<_>>()?;
    match c[..] {
        [x0, y0, x1, y1] if c.iter().all(|v| v.is_finite()) && x0 <= x1 && y0 <= y1 => Ok(Rect {
            min: Point { x: x0, y: y0 },
            max: Point { x: x1, y: y1 },
        }),
        _ => Err(bad("mbr", text)),
    }
}

/// Parses `<id>[<lo>-<hi>]=<size>` into its parts.
fn parse_range(text: &str) -> Result<(u64, Vec<u8>, Vec<u8>, u64)> {
    let (id, rest) = text.split_once('[').ok_or_else(|| bad("file", text))?;
    let (range, size) = rest.split_once("]=").ok_or_else(|| bad("file", text))?;
    let (lo, hi) = range.split_once('-').ok_or_else(|| bad("file", text))?;
    Ok((
        number(id, "file id")?,
        parse_key(lo)?,
        parse_key(hi)?,
        number(size, "size")?,
    ))
}

/// Parses `<id>[<lo>-<hi>]=<size>[{k=v,...}][*]`.
fn parse_file(text: &str) -> Result<FileView> {
    let (rest, busy) = match text.strip_suffix('*') {
        Some(rest) => (rest, true),
        None => (text, false),
    };
    let (rest, attrs) = match rest.strip_suffix('}') {
        Some(rest) => rest
            .split_once('{')
            .map(|(r, a)| (r, Some(a)))
            .ok_or_else(|| bad("file", text))?,
        None => (rest, None),
    };
    let (id, lo, hi, size) = parse_range(rest)?;
    let mut file = FileView {
        id,
        size,
        entries: size,
        smallest: lo.as_slice().into(),
        largest: hi.as_slice().into(),
        busy,
        ..FileView::default()
    };
    for attr in attrs.into_iter().flat_map(|a| a.split(',')) {
        let (k, v) = attr.split_once('=').ok_or_else(|| bad("attribute", attr))?;
        if k.trim() == "mbr" {
            file.mbr = Some(parse_rect(v)?);
            continue;
        }
        let v = number(v, k)?;
        match k.trim() {
            "entries" => file.entries = v,
            "tomb" => file.tombstones = v,
            "seq" => file.smallest_seq = v,
            "created" => file.created_ms = v,
            "arrived" => file.arrived_ms = v,
            "read" => file.last_read_ms = v,
            "tomb-ms" => file.oldest_tombstone_ms = Some(v),
            _ => return Err(bad("attribute", attr)),
        }
    }
    Ok(file)
}

/// Writes a file as [`parse_file`] reads it.
fn print_file(f: &FileView) -> String {
    let mut attrs = Vec::new();
    let mut attr = |key: &str, value: u64, default: u64| {
        if value != default {
            attrs.push(format!("{key}={value}"));
        }
    };
    attr("entries", f.entries, f.size);
    attr("tomb", f.tombstones, 0);
    attr("seq", f.smallest_seq, 0);
    attr("created", f.created_ms, 0);
    attr("arrived", f.arrived_ms, 0);
    attr("read", f.last_read_ms, 0);
    if let Some(ms) = f.oldest_tombstone_ms {
        attrs.push(format!("tomb-ms={ms}"));
    }
    if let Some(r) = &f.mbr {
        attrs.push(format!(
            "mbr={}:{}:{}:{}",
            r.min.x, r.min.y, r.max.x, r.max.y
        ));
    }
    format!(
        "{}[{}-{}]={}{}{}",
        f.id,
        print_key(&f.smallest),
        print_key(&f.largest),
        f.size,
        match attrs.is_empty() {
            true => String::new(),
            false => format!("{{{}}}", attrs.join(",")),
        },
        if f.busy { "*" } else { "" }
    )
}

/// A buffer as the picture states it, before it is built.
#[derive(Default)]
struct BufferPicture {
    complete: bool,
    base: Option<u64>,
    round: Option<u64>,
    /// Tables newest first: source run and slots in key order.
    tables: Vec<(u64, Vec<Slot<FileView>>)>,
}

/// Parses `buffer [incomplete] [base=N] [round=N]`.
fn parse_buffer_head(rest: &str) -> Result<BufferPicture> {
    let mut b = BufferPicture {
        complete: true,
        ..BufferPicture::default()
    };
    for word in rest.split_whitespace() {
        match word.split_once('=') {
            None if word == "incomplete" => b.complete = false,
            Some(("base", v)) => b.base = Some(number(v, "base")?),
            Some(("round", v)) => b.round = Some(number(v, "round")?),
            _ => return Err(bad("buffer attribute", word)),
        }
    }
    Ok(b)
}

/// Parses a buffer table `b<source>: <slot> ...`.
fn parse_table(line: &str) -> Result<(u64, Vec<Slot<FileView>>)> {
    let (head, slots) = line
        .split_once(':')
        .ok_or_else(|| bad("buffer table", line))?;
    let source = number(
        head.strip_prefix('b')
            .ok_or_else(|| bad("buffer table", line))?,
        "source run",
    )?;
    let slots = slots
        .split_whitespace()
        .map(|s| match s.strip_prefix('~') {
            Some(marker) => {
                let (id, smallest, largest, size) = parse_range(marker)?;
                Ok(Slot::Removed(Marker {
                    id,
                    smallest,
                    largest,
                    size,
                }))
            }
            None => parse_file(s).map(Slot::Live),
        })
        .collect::<Result<_>>()?;
    Ok((source, slots))
}

/// Parses `r<id> [order=<o>]: <file> ...` into the run and its explicit
/// order.
fn parse_run(line: &str) -> Result<(RunView, Option<u64>)> {
    let (head, files) = line.split_once(':').ok_or_else(|| bad("run", line))?;
    let mut head = head.split_whitespace();
    let id = head
        .next()
        .and_then(|r| r.strip_prefix('r'))
        .ok_or_else(|| bad("run", line))?;
    let order = match head.next() {
        Some(o) => Some(number(
            o.strip_prefix("order=").ok_or_else(|| bad("run", line))?,
            "order",
        )?),
        None => None,
    };
    let files = files
        .split_whitespace()
        .map(parse_file)
        .collect::<Result<Vec<_>>>()?;
    let run = RunView {
        id: number(id, "run id")?,
        order: 0,
        files: files.into(),
    };
    Ok((run, order))
}

/// The runs of an `L<n> sizes: S S ...` shorthand, ids from `next_id`.
fn shorthand_runs(sizes: &str, next_id: &mut u64) -> Result<Vec<RunView>> {
    sizes
        .split_whitespace()
        .map(|s| {
            let size = number(s, "size")?;
            let file = FileView {
                id: *next_id,
                size,
                entries: size,
                smallest: parse_key("0")?.as_slice().into(),
                largest: parse_key("999")?.as_slice().into(),
                ..FileView::default()
            };
            let run = RunView {
                id: *next_id,
                order: 0,
                files: vec![file].into(),
            };
            *next_id += 1;
            Ok(run)
        })
        .collect()
}

/// One file of a picture (`5[10-20]=100{seq=3}*`), for unit tests that
/// build files one by one.
#[cfg(test)]
pub(crate) fn file(text: &str) -> FileView {
    parse_file(text).unwrap_or_else(|e| panic!("{text:?}: {e}"))
}

/// Parses a tree picture (see the module docs).
pub fn parse(text: &str) -> Result<TreeView> {
    // (level, run, explicit order) in picture order.
    let mut runs: Vec<(usize, RunView, Option<u64>)> = Vec::new();
    // (host run, buffer) in picture order.
    let mut buffers: Vec<(u64, BufferPicture)> = Vec::new();
    let mut level: Option<usize> = None;
    let mut next_id = FIRST_SHORTHAND_ID;
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if let Some(rest) = line.strip_prefix('L') {
            let (n, sizes) = rest.split_once(" sizes:").unwrap_or((rest, ""));
            let l = usize::try_from(number(n, "level")?).map_err(|_| bad("level", n))?;
            level = Some(l);
            for run in shorthand_runs(sizes, &mut next_id)? {
                runs.push((l, run, None));
            }
            continue;
        }
        let l = level.ok_or_else(|| bad("run before any level", line))?;
        let host = || {
            runs.last()
                .map(|(_, r, _)| r.id)
                .ok_or_else(|| bad("buffer before any run", line))
        };
        if let Some(rest) = line.strip_prefix("buffer") {
            buffers.push((host()?, parse_buffer_head(rest)?));
        } else if line.starts_with('b') {
            let host = host()?;
            let table = parse_table(line)?;
            match buffers.last_mut() {
                Some((h, b)) if *h == host => b.tables.push(table),
                _ => return Err(bad("buffer table before its buffer line", line)),
            }
        } else {
            let (run, order) = parse_run(line)?;
            runs.push((l, run, order));
        }
    }
    let mut view = TreeView::default();
    let n = runs.len() as u64;
    for (i, (l, mut run, order)) in runs.into_iter().enumerate() {
        run.order = order.unwrap_or(n - i as u64);
        while view.levels.len() <= l {
            view.levels.push(LevelView::default());
        }
        view.levels[l].runs.push(run);
    }
    for (host, b) in buffers {
        let mut changes = vec![BufferChange::New {
            host,
            complete: b.complete,
        }];
        for (source, slots) in b.tables.into_iter().rev() {
            changes.extend(slots.into_iter().map(|slot| match slot {
                Slot::Live(file) => BufferChange::Keep { host, source, file },
                Slot::Removed(removed) => BufferChange::Mark {
                    host,
                    source,
                    removed,
                },
            }));
        }
        changes.extend(b.base.map(|bytes| BufferChange::Base { host, bytes }));
        changes.extend(b.round.map(|bytes| BufferChange::Round { host, bytes }));
        apply_changes(&mut view.compaction_buffers, changes, |_| true);
    }
    Ok(view)
}

/// Writes a buffer's lines as [`parse`](fn@parse) reads them.
fn print_buffer(s: &mut String, b: &Buffer<FileView>) {
    s.push_str("    buffer");
    if !b.complete {
        s.push_str(" incomplete");
    }
    if let Some(base) = b.base {
        let _ = write!(s, " base={base}");
    }
    if let Some(round) = b.round_base() {
        let _ = write!(s, " round={round}");
    }
    s.push('\n');
    for t in b.tables() {
        let slots: Vec<String> = t
            .slots()
            .iter()
            .map(|slot| match slot {
                Slot::Live(f) => print_file(f),
                Slot::Removed(m) => format!(
                    "~{}[{}-{}]={}",
                    m.id,
                    print_key(&m.smallest),
                    print_key(&m.largest),
                    m.size
                ),
            })
            .collect();
        let _ = writeln!(s, "      b{}: {}", t.source, slots.join(" "));
    }
}

/// Writes `view`'s levels as a tree picture, every run's rank explicit
/// (see the module docs).
pub fn print(view: &TreeView) -> String {
    let mut s = String::new();
    for (i, level) in view.levels.iter().enumerate() {
        let _ = writeln!(s, "L{i}");
        for run in level.runs.iter() {
            let files: Vec<String> = run.files.iter().map(print_file).collect();
            let _ = writeln!(s, "  r{} order={}: {}", run.id, run.order, files.join(" "));
            if let Some(b) = view.compaction_buffers.get(&run.id) {
                print_buffer(&mut s, b);
            }
        }
    }
    s
}

#[cfg(test)]
mod tests {

    use super::*;

    /// A level already in canonical form: a file with an MBR, a run with
    /// a buffer of two tables (one marker) and one with an empty
    /// incomplete buffer.
    const SPATIAL_AND_BUFFERED: &str = "\
L4
  r9 order=1: 9[0-9]=10{mbr=0:0.5:1.5:2}
    buffer base=100 round=40
      b8: 1[0-4]=10 ~2[5-9]=10
      b7: 3[0-9]=5{seq=2}
  r10 order=1: 11[0-9]=1
    buffer incomplete
";

    #[test]
    fn a_picture_round_trips_through_its_canonical_form() {
        let text = "\
L0
  r7: 7[0-999]=1
  r8 order=1: 8[5-6]=2*
L1
L2
  r5: 5[10-20]=100{entries=7,tomb=2,seq=3,created=4,arrived=5,read=6,tomb-ms=8} 6['a'-'bc']=9{entries=1} 7[x7f-xff]=1
L3 sizes: 4 16
";
        let text = format!("{text}{SPATIAL_AND_BUFFERED}");
        let view = parse(&text).unwrap();
        // Ranks count down in picture order where not given.
        let orders: Vec<(u64, u64)> = view
            .levels
            .iter()
            .flat_map(|l| l.runs.iter().map(|r| (r.id, r.order)))
            .collect();
        assert_eq!(
            orders,
            [
                (7, 7),
                (8, 1),
                (5, 5),
                (1001, 4),
                (1002, 3),
                (9, 1),
                (10, 1)
            ]
        );
        let f = view.levels[2].runs[0].files.iter().next().unwrap().clone();
        assert_eq!(
            (f.size, f.entries, f.tombstones, f.smallest_seq),
            (100, 7, 2, 3)
        );
        assert_eq!((f.created_ms, f.arrived_ms, f.last_read_ms), (4, 5, 6));
        assert_eq!(f.oldest_tombstone_ms, Some(8));
        assert_eq!(f.smallest.as_slice(), 10u64.to_be_bytes());
        let g = view.levels[2].runs[0].files.iter().nth(1).unwrap();
        assert_eq!(
            (g.smallest.as_slice(), g.largest.as_slice()),
            (&b"a"[..], &b"bc"[..])
        );
        assert!(view.levels[0].runs[1].files.iter().all(|f| f.busy));
        let mbr = view.levels[4].runs[0].files.iter().next().unwrap().mbr;
        assert_eq!(
            mbr,
            Some(Rect {
                min: Point { x: 0.0, y: 0.5 },
                max: Point { x: 1.5, y: 2.0 }
            })
        );
        // r9's buffer: two tables, newest (from run 8) first; file 2 is a
        // marker.
        let b = &view.compaction_buffers[&9];
        let sources: Vec<u64> = b.tables().iter().map(|t| t.source).collect();
        assert_eq!(sources, [8, 7]);
        assert_eq!(b.newest_source(), Some(8));
        assert_eq!(
            (b.live_bytes(), b.bytes_in(), b.removed_count()),
            (15, 25, 1)
        );
        assert_eq!(
            (b.complete, b.base, b.round_base()),
            (true, Some(100), Some(40))
        );
        // The newest round brought 20 bytes: with the host at 15 the
        // merges dropped 40 + 20 - 15 = 45 > 20, clamped to 1.
        assert_eq!(b.repeated_in_round(15), Some(1.0));
        let live: Vec<u64> = b.live_files().map(|f| f.id).collect();
        assert_eq!(live, [1, 3]);
        let empty = &view.compaction_buffers[&10];
        assert!(!empty.complete && empty.tables().is_empty());
        let printed = print(&view);
        assert_eq!(
            printed,
            "\
L0
  r7 order=7: 7[0-999]=1
  r8 order=1: 8[5-6]=2*
L1
L2
  r5 order=5: 5[10-20]=100{entries=7,tomb=2,seq=3,created=4,arrived=5,read=6,tomb-ms=8} 6['a'-'bc']=9{entries=1} 7[x7f-xff]=1
L3
  r1001 order=4: 1001[0-999]=4
  r1002 order=3: 1002[0-999]=16
"
            .to_string()
                + SPATIAL_AND_BUFFERED
        );
        assert_eq!(print(&parse(&printed).unwrap()), printed);
    }

    #[test]
    fn bad_pictures_are_refused() {
        for bad in [
            "  r1: 1[0-1]=1",
            "L0\n  r1 1[0-1]=1",
            "L0\n  r1: 1[0-1]",
            "L0\n  r1: 1[0-1]=1{nosuch=1}",
            "L0\n  r1: 1[x6-1]=1",
            "L0\n  r1: 1['a-'b']=1",
            "L0\n  r1: 1[''-'b']=1",
            "Lx",
            "L0\n  buffer",
            "L0\n  r1: 1[0-1]=1\n  b2: 3[0-1]=1",
            "L0\n  r1: 1[0-1]=1\n  buffer\n  b2: 3[0-1]",
            "L0\n  r1: 1[0-1]=1\n  buffer nosuch",
            "L0\n  r1: 1[0-1]=1{mbr=1:2:3}",
            "L0\n  r1: 1[0-1]=1{mbr=3:0:1:1}",
        ] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
    }
}
