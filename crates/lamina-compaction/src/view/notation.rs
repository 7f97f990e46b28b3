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
//! ```
//!
//! A level is `L<n>`, followed by its runs, newest first:
//! `r<id> [order=<o>]: <file> <file> ...`. A file is
//! `<id>[<lo>-<hi>]=<size>`, then optionally `{key=value,...}` with any of
//! `entries` (default: the size), `tomb` (tombstones), `seq` (smallest
//! sequence number), `created`, `arrived`, `read` (times in ms: creation,
//! arrival in the level, last read) and `tomb-ms` (the oldest tombstone's
//! time), then `*` if a running compaction owns it. A key is an integer,
//! stored as 8 big-endian bytes (as the DSL stores integers), or `x`
//! followed by the key's bytes in hex. Runs without `order=` are ranked by
//! their place in the picture: the first listed is the newest (ranks count
//! down to 1). `L<n> sizes: S S ...` is a shorthand for a stack of
//! one-file runs spanning keys `[0-999]` (attributes at their defaults),
//! files and runs numbered from 1001 on.
//!
//! [`print`](fn@print) writes every run's `order=`, the attributes that differ from
//! their defaults, and integer keys where a key has 8 bytes: parsing its
//! output gives the same tree, and printing that gives the same text. The
//! picture holds no MBRs, compaction buffers or tree-wide fields
//! (`flushes`, `memtable_bytes`, `now_ms`); [`parse`](fn@parse) leaves them at their
//! defaults.

use std::fmt::Write as _;

use crate::error::{Error, Result};
use crate::{FileView, LevelView, RunView, TreeView};

/// The first id of the files and runs of `sizes:` shorthands.
const FIRST_SHORTHAND_ID: u64 = 1001;

fn bad(what: &str, text: &str) -> Error {
    Error::InvalidArgument(format!("tree picture: bad {what} {text:?}"))
}

fn number(text: &str, what: &str) -> Result<u64> {
    text.trim().parse().map_err(|_| bad(what, text))
}

/// Parses a key: an integer (8 big-endian bytes) or `x<hex>`.
fn parse_key(text: &str) -> Result<Vec<u8>> {
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

/// Writes a key as [`parse_key`] reads it.
fn print_key(key: &[u8]) -> String {
    match <[u8; 8]>::try_from(key) {
        Ok(bytes) => u64::from_be_bytes(bytes).to_string(),
        Err(_) => key.iter().fold(String::from("x"), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        }),
    }
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
    let (id, rest) = rest.split_once('[').ok_or_else(|| bad("file", text))?;
    let (range, size) = rest.split_once("]=").ok_or_else(|| bad("file", text))?;
    let (lo, hi) = range.split_once('-').ok_or_else(|| bad("file", text))?;
    let size = number(size, "size")?;
    let mut file = FileView {
        id: number(id, "file id")?,
        size,
        entries: size,
        smallest: parse_key(lo)?.as_slice().into(),
        largest: parse_key(hi)?.as_slice().into(),
        busy,
        ..FileView::default()
    };
    for attr in attrs.into_iter().flat_map(|a| a.split(',')) {
        let (k, v) = attr.split_once('=').ok_or_else(|| bad("attribute", attr))?;
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

/// Parses a tree picture (see the module docs).
pub fn parse(text: &str) -> Result<TreeView> {
    // (level, run, explicit order) in picture order.
    let mut runs: Vec<(usize, RunView, Option<u64>)> = Vec::new();
    let mut level: Option<usize> = None;
    let mut next_id = FIRST_SHORTHAND_ID;
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if let Some(rest) = line.strip_prefix('L') {
            let (n, sizes) = rest.split_once(" sizes:").unwrap_or((rest, ""));
            let l = usize::try_from(number(n, "level")?).map_err(|_| bad("level", n))?;
            level = Some(l);
            for s in sizes.split_whitespace() {
                let size = number(s, "size")?;
                let file = FileView {
                    id: next_id,
                    size,
                    entries: size,
                    smallest: parse_key("0")?.as_slice().into(),
                    largest: parse_key("999")?.as_slice().into(),
                    ..FileView::default()
                };
                let run = RunView {
                    id: next_id,
                    order: 0,
                    files: vec![file].into(),
                };
                runs.push((l, run, None));
                next_id += 1;
            }
            continue;
        }
        let l = level.ok_or_else(|| bad("run before any level", line))?;
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
        runs.push((l, run, order));
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
    Ok(view)
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
        }
    }
    s
}

#[cfg(test)]
mod tests {

    use super::*;

    #[test]
    fn a_picture_round_trips_through_its_canonical_form() {
        let text = "\
L0
  r7: 7[0-999]=1
  r8 order=1: 8[5-6]=2*
L1
L2
  r5: 5[10-20]=100{entries=7,tomb=2,seq=3,created=4,arrived=5,read=6,tomb-ms=8} 6[x61-x6263]=9
L3 sizes: 4 16
";
        let view = parse(text).unwrap();
        // Ranks count down in picture order where not given.
        let orders: Vec<(u64, u64)> = view
            .levels
            .iter()
            .flat_map(|l| l.runs.iter().map(|r| (r.id, r.order)))
            .collect();
        assert_eq!(orders, [(7, 5), (8, 1), (5, 3), (1001, 2), (1002, 1)]);
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
        let printed = print(&view);
        assert_eq!(
            printed,
            "\
L0
  r7 order=5: 7[0-999]=1
  r8 order=1: 8[5-6]=2*
L1
L2
  r5 order=3: 5[10-20]=100{entries=7,tomb=2,seq=3,created=4,arrived=5,read=6,tomb-ms=8} 6[x61-x6263]=9
L3
  r1001 order=2: 1001[0-999]=4
  r1002 order=1: 1002[0-999]=16
"
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
            "Lx",
        ] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
    }
}
