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
//! * `define [flushes=N] [buffer=B] [now=MS]` with a tree picture as input
//!   (`lamina_compaction::view::notation`: levels `L0`, `L1`, ..., under
//!   each its runs newest first, `r<id> [order=<o>]: <file> ...`, a file
//!   `<id>[<lo>-<hi>]=<size>` with optional attributes and `*` if busy,
//!   a run's compaction buffer on the lines below it),
//!   prints the tree back in canonical form.
//! * `pick <spec>`: the tasks the policy picks on the last defined tree,
//!   each with its LSbM buffer task, if any, on the line below.
//! * `stalls <spec>`: whether the policy holds writes on that tree.
//! * `plan <task>`: what `plan::plan` makes of a task on that tree, the
//!   task written as `pick` prints one (`L1/r5[5 6] + L2/r3[3] -> L2/r3`,
//!   or `-> L2 new run`, `-> L2 tiles`): the action, the destination and the
//!   older runs, or the refusal (`tests/testdata/plan/`).
//!
//! `every_registered_strategy_has_a_case` fails when a registered strategy
//! has no `pick` or `stalls` case.
#![expect(clippy::unwrap_used, reason = "a test may panic on a failed setup")]

use std::fmt::Write as _;
use std::path::Path;

use lamina_compaction::spec::strategy;
use lamina_compaction::view::notation;
use lamina_compaction::{
    parse_spec, plan, policy_from_spec, CompactionTask, OutputRun, PolicyDefaults, TaskInput,
    TreeView, STRATEGIES,
};

/// Size ratio and output file size for specs that leave them out.
const DEFAULTS: PolicyDefaults = PolicyDefaults {
    size_ratio: 4,
    target_file_size: 1000,
};

#[test]
fn policies() {
    run_dir("policies");
}

#[test]
fn planner() {
    run_dir("plan");
}

/// Every registered strategy has a data-driven case (by its name or an
/// alias).
#[test]
fn every_registered_strategy_has_a_case() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/testdata/policies");
    let mut covered = std::collections::BTreeSet::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        for line in text.lines() {
            let mut words = line.split_whitespace();
            if let (Some("pick" | "stalls"), Some(spec)) = (words.next(), words.next()) {
                let (name, params) = parse_spec(spec).unwrap();
                covered.insert(strategy(name, &params).expect(spec).name);
            }
        }
    }
    let missing: Vec<&str> = STRATEGIES
        .iter()
        .map(|s| s.name)
        .filter(|name| !covered.contains(name))
        .collect();
    assert!(
        missing.is_empty(),
        "no data-driven case (add one to tests/testdata/policies/): {missing:?}"
    );
}

/// Runs every file of `tests/testdata/<name>/`.
fn run_dir(name: &str) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/testdata")
        .join(name);
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
            let picture = notation::print(&view);
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
                if let Some(b) = &t.buffer {
                    let opt = |v: Option<u64>| v.map_or("none".to_string(), |v| v.to_string());
                    let retire: Vec<String> = b.retire.iter().map(u64::to_string).collect();
                    let _ = writeln!(
                        s,
                        "  buffer task: source=r{} frozen={} retire=[{}] base={} round_base={}",
                        b.source,
                        b.frozen,
                        retire.join(" "),
                        opt(b.base),
                        opt(b.round_base)
                    );
                }
            }
            Ok(s)
        }
        "plan" => {
            let view = tree.as_ref().ok_or("no tree defined yet")?;
            let task = parse_task(&args.join(" "))?;
            let planned = plan::plan(view, &task).map_err(|e| e.to_string())?;
            Ok(print_plan(&planned))
        }
        other => Err(format!("unknown command {other:?}")),
    }
}

fn number(s: &str, what: &str) -> Result<u64, String> {
    s.parse().map_err(|_| format!("bad {what} {s:?}"))
}

/// `define`: the picture with the tree-wide fields from the arguments
/// (`memtable_bytes` 1 unless given).
fn define(args: &[&str], input: &[&str]) -> Result<TreeView, String> {
    let mut view = notation::parse(&input.join("\n")).map_err(|e| e.to_string())?;
    view.memtable_bytes = 1;
    for a in args {
        let (k, v) = a.split_once('=').ok_or(format!("bad argument {a:?}"))?;
        match k {
            "flushes" => view.flushes = number(v, k)?,
            "buffer" => view.memtable_bytes = number(v, k)?,
            "now" => view.now_ms = number(v, k)?,
            _ => return Err(format!("unknown argument {k:?}")),
        }
    }
    Ok(view)
}

/// A task as `pick` prints one: `L<l>/r<id>[<file ids>] + ... -> <output>`,
/// the output `L<l>/r<id>` (an existing run), `L<l> new run` or `L<l>
/// tiles`.
fn parse_task(text: &str) -> Result<CompactionTask, String> {
    let (inputs, output) = text.split_once(" -> ").ok_or("a task needs ' -> '")?;
    let level = |l: &str| {
        number(
            l.strip_prefix('L').ok_or(format!("bad level {l:?}"))?,
            "level",
        )
    };
    let inputs = inputs
        .split(" + ")
        .map(|i| {
            let (l, rest) = i.split_once("/r").ok_or(format!("bad input {i:?}"))?;
            let (run, ids) = rest.split_once('[').ok_or(format!("bad input {i:?}"))?;
            let ids = ids.strip_suffix(']').ok_or(format!("bad input {i:?}"))?;
            Ok(TaskInput {
                level: level(l)? as usize,
                run_id: number(run, "run id")?,
                file_ids: ids
                    .split_whitespace()
                    .map(|id| number(id, "file id"))
                    .collect::<Result<_, _>>()?,
            })
        })
        .collect::<Result<Vec<_>, String>>()?;
    let (output_level, output_run) = if let Some(l) = output.strip_suffix(" new run") {
        (level(l)?, OutputRun::New)
    } else if let Some(l) = output.strip_suffix(" tiles") {
        (level(l)?, OutputRun::Tiles)
    } else {
        let (l, run) = output
            .split_once("/r")
            .ok_or(format!("bad output {output:?}"))?;
        (level(l)?, OutputRun::Existing(number(run, "run id")?))
    };
    Ok(CompactionTask {
        inputs,
        output_level: output_level as usize,
        output_run,
        target_file_size: 1000,
        partitioning: None,
        buffer: None,
        reason: "t".into(),
    })
}

/// `plan`'s output: the action, the destination and the older runs.
fn print_plan(p: &plan::Plan) -> String {
    let action = match p.action {
        plan::Action::Move => "move",
        plan::Action::Merge => "merge",
    };
    let destination = match p.destination {
        plan::Destination::Existing { id, order } => {
            format!("L{}/r{id} order={order}", p.output_level)
        }
        plan::Destination::New { order } => format!("L{} new run order={order}", p.output_level),
        plan::Destination::Tiles => format!("L{} tiles", p.output_level),
    };
    let older: Vec<String> = p
        .older_runs
        .iter()
        .map(|(l, r)| format!("L{l}/r{r}"))
        .collect();
    let older = match older.is_empty() {
        true => "none".to_string(),
        false => older.join(" "),
    };
    format!("{action} -> {destination}; older runs: {older}\n")
}
