//! Data-driven policy tests (Pebble's `datadriven` shape): each file of
//! `tests/testdata/policies/` holds cases of a command, its input and the
//! expected output, separated by `----`. The expected outputs were derived by
//! hand from the papers' rules (each case's comment says how), not copied
//! from the code: `LAMINA_REWRITE=1 cargo test -p lamina-compaction --test policies`
//! rewrites them with what the code prints, for reviewing a deliberate change
//! as a diff.
//!
//! Commands:
//!
//! * `define [flushes=N] [buffer=B] [now=MS]` with a tree picture as input,
//!   prints the tree back in canonical form. The picture lists levels
//!   (`L0`, `L1`, ...) and under each its runs, newest first:
//!   `r<id> [order=<o>]: <file> <file> ...`, a file being
//!   `<id>[<lo>-<hi>]=<size>` (keys are integers, stored big-endian as the
//!   DSL stores them) with an optional `*` for a file a running compaction
//!   owns. Without `order=` runs are ranked by their place in the picture
//!   (the first listed is the newest). `L<n> sizes: S S ...` is a shorthand
//!   for a stack of single-file runs spanning `[0-999]`.
//! * `pick <spec>`: the tasks the policy picks on the last defined tree.
//! * `stalls <spec>`: whether the policy holds writes on that tree.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fmt::Write as _;
use std::path::Path;

use lamina_compaction::{
    policy_from_spec, FileView, LevelView, OutputRun, PolicyDefaults, RunView, TreeView,
};

/// Size ratio and output file size for specs that leave them out.
const DEFAULTS: PolicyDefaults = PolicyDefaults {
    size_ratio: 4,
    target_file_size: 1000,
};

#[test]
fn policies() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/testdata/policies");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "txt"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no test files in {}", dir.display());
    let rewrite = std::env::var_os("LAMINA_REWRITE").is_some();
    let mut failures = Vec::new();
    for path in &files {
        let text = std::fs::read_to_string(path).unwrap();
        let (rewritten, mut failed) = run_file(&text, path);
        if rewrite {
            if rewritten != text {
                std::fs::write(path, rewritten).unwrap();
            }
        } else {
            failures.append(&mut failed);
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

/// Runs every case of a file; returns the file with actual outputs and the
/// failures.
fn run_file(text: &str, path: &Path) -> (String, Vec<String>) {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = String::new();
    let mut failures = Vec::new();
    let mut tree: Option<TreeView> = None;
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        if line.trim().is_empty() || line.starts_with('#') {
            out.push_str(line);
            out.push('\n');
            i += 1;
            continue;
        }
        let start = i + 1;
        let command = line;
        i += 1;
        let mut input = Vec::new();
        while i < lines.len() && lines[i] != "----" {
            input.push(lines[i]);
            i += 1;
        }
        assert!(
            i < lines.len(),
            "{}:{start}: `{command}` has no ---- line",
            path.display()
        );
        i += 1;
        let mut expected = Vec::new();
        while i < lines.len() && !lines[i].trim().is_empty() {
            expected.push(lines[i]);
            i += 1;
        }
        let actual =
            run_command(command, &input, &mut tree).unwrap_or_else(|e| format!("error: {e}\n"));
        let expected = expected.iter().fold(String::new(), |mut s, l| {
            s.push_str(l);
            s.push('\n');
            s
        });
        if actual != expected {
            failures.push(format!(
                "{}:{start}: {command}\n--- expected\n{expected}--- actual\n{actual}",
                path.display()
            ));
        }
        out.push_str(command);
        out.push('\n');
        for l in &input {
            out.push_str(l);
            out.push('\n');
        }
        out.push_str("----\n");
        out.push_str(&actual);
    }
    (out, failures)
}

fn run_command(
    command: &str,
    input: &[&str],
    tree: &mut Option<TreeView>,
) -> Result<String, String> {
    let mut words = command.split_whitespace();
    let name = words.next().unwrap_or("");
    let args: Vec<&str> = words.collect();
    match name {
        "define" => {
            let view = define(&args, input)?;
            let picture = picture(&view);
            *tree = Some(view);
            Ok(picture)
        }
        "pick" | "stalls" => {
            let view = tree.as_ref().ok_or("no tree defined yet")?;
            let spec = args.first().ok_or("which policy?")?;
            let policy = policy_from_spec(spec, DEFAULTS).map_err(|e| e.to_string())?;
            if name == "stalls" {
                return Ok(format!("{}\n", policy.stalls_writes(view)));
            }
            let tasks = policy.pick(view);
            if tasks.is_empty() {
                return Ok("nothing\n".to_string());
            }
            let mut s = String::new();
            for t in tasks {
                let inputs: Vec<String> = t
                    .inputs
                    .iter()
                    .map(|i| {
                        let ids: Vec<String> = i.file_ids.iter().map(u64::to_string).collect();
                        format!("L{}/r{}[{}]", i.level, i.run_id, ids.join(" "))
                    })
                    .collect();
                let output = match t.output_run {
                    OutputRun::New => format!("L{} new run", t.output_level),
                    OutputRun::Existing(id) => format!("L{}/r{id}", t.output_level),
                    OutputRun::Tiles => format!("L{} tiles", t.output_level),
                };
                let _ = writeln!(
                    s,
                    "merge {} -> {output}, files of {}: {}",
                    inputs.join(" + "),
                    t.target_file_size,
                    t.reason
                );
            }
            Ok(s)
        }
        other => Err(format!("unknown command {other:?}")),
    }
}

fn number(s: &str, what: &str) -> Result<u64, String> {
    s.parse().map_err(|_| format!("bad {what} {s:?}"))
}

fn key(n: u64) -> Vec<u8> {
    n.to_be_bytes().to_vec()
}

fn key_number(k: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    let n = k.len().min(8);
    b[8 - n..].copy_from_slice(&k[..n]);
    u64::from_be_bytes(b)
}

fn define(args: &[&str], input: &[&str]) -> Result<TreeView, String> {
    let mut view = TreeView {
        memtable_bytes: 1,
        ..TreeView::default()
    };
    for a in args {
        let (k, v) = a.split_once('=').ok_or(format!("bad argument {a:?}"))?;
        match k {
            "flushes" => view.flushes = number(v, k)?,
            "buffer" => view.memtable_bytes = number(v, k)?,
            "now" => view.now_ms = number(v, k)?,
            _ => return Err(format!("unknown argument {k:?}")),
        }
    }
    // (level, run, explicit order) in picture order.
    let mut runs: Vec<(usize, RunView, Option<u64>)> = Vec::new();
    let mut level: Option<usize> = None;
    let mut next_id = 1000;
    for line in input {
        let line = line.trim();
        if let Some(rest) = line.strip_prefix('L') {
            let (n, sizes) = rest.split_once(" sizes:").unwrap_or((rest, ""));
            let l = number(n.trim(), "level")? as usize;
            level = Some(l);
            for s in sizes.split_whitespace() {
                next_id += 1;
                let file = FileView {
                    id: next_id,
                    size: number(s, "size")?,
                    smallest: key(0).into(),
                    largest: key(999).into(),
                    ..FileView::default()
                };
                runs.push((
                    l,
                    RunView {
                        id: next_id,
                        order: 0,
                        files: vec![file].into(),
                    },
                    None,
                ));
            }
            continue;
        }
        let l = level.ok_or("a run before any level")?;
        let (head, files) = line.split_once(':').ok_or(format!("bad run {line:?}"))?;
        let mut head = head.split_whitespace();
        let id = head
            .next()
            .and_then(|r| r.strip_prefix('r'))
            .ok_or(format!("bad run {line:?}"))?;
        let id = number(id, "run id")?;
        let order = match head.next() {
            Some(o) => Some(number(
                o.strip_prefix("order=").ok_or(format!("bad {o:?}"))?,
                "order",
            )?),
            None => None,
        };
        let files = files
            .split_whitespace()
            .map(parse_file)
            .collect::<Result<Vec<_>, _>>()?;
        runs.push((
            l,
            RunView {
                id,
                order: 0,
                files: files.into(),
            },
            order,
        ));
    }
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

/// `<id>[<lo>-<hi>]=<size>` with an optional trailing `*` (busy).
fn parse_file(s: &str) -> Result<FileView, String> {
    let bad = || format!("bad file {s:?}");
    let (s, busy) = match s.strip_suffix('*') {
        Some(rest) => (rest, true),
        None => (s, false),
    };
    let (id, rest) = s.split_once('[').ok_or_else(bad)?;
    let (range, size) = rest.split_once("]=").ok_or_else(bad)?;
    let (lo, hi) = range.split_once('-').ok_or_else(bad)?;
    let size = number(size, "size")?;
    Ok(FileView {
        id: number(id, "file id")?,
        size,
        entries: size,
        smallest: key(number(lo, "key")?).into(),
        largest: key(number(hi, "key")?).into(),
        busy,
        ..FileView::default()
    })
}

/// The tree in the picture syntax, every field explicit.
fn picture(view: &TreeView) -> String {
    let mut s = String::new();
    for (i, level) in view.levels.iter().enumerate() {
        let _ = writeln!(s, "L{i}");
        for run in &level.runs {
            let files: Vec<String> = run
                .files
                .iter()
                .map(|f| {
                    format!(
                        "{}[{}-{}]={}{}",
                        f.id,
                        key_number(&f.smallest),
                        key_number(&f.largest),
                        f.size,
                        if f.busy { "*" } else { "" }
                    )
                })
                .collect();
            let _ = writeln!(s, "  r{} order={}: {}", run.id, run.order, files.join(" "));
        }
    }
    s
}
