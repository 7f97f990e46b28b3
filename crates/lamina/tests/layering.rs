//! The module graph of every crate in the workspace (Pebble's
//! `TestForbiddenImports`): no crate's top-level modules import each other in
//! a cycle, and the engine's modules import only modules of their own layer or
//! lower ones, the layers being the table of `docs/architecture.md` ("Layers
//! of the engine"), parsed here so the doc and the check cannot drift.
//!
//! A module's imports are its intra-crate paths outside test code (`#[cfg(test)]`
//! items and the files they declare): `use crate::…` (groups expanded), `crate::x`
//! in code, `super::…` resolved against the module, and `pub use`. An import counts
//! against the top-level module it names (`crate::sst::reader::X` is `sst`); a name
//! the crate root re-exports (`crate::Error`) counts against the module it comes from.
//! The parser reads source text (comments, strings and char literals removed first);
//! its own tests below check it on small strings.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// A token of stripped source: an identifier or keyword, `::`, or one punctuation char.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Token {
    text: String,
    line: usize,
}

/// Removes comments, string, byte-string, raw-string and char literals (each
/// replaced by a space, newlines kept so that line numbers hold), then splits
/// the rest into tokens.
#[expect(
    clippy::too_many_lines,
    reason = "a scenario test that reads top to bottom"
)]
fn tokenize(src: &str) -> Vec<Token> {
    let chars: Vec<char> = src.chars().collect();
    let mut tokens = Vec::new();
    let mut line = 1;
    let mut i = 0;
    let n = chars.len();
    // Advances past `chars[i]`, counting lines.
    let bump = |i: &mut usize, line: &mut usize| {
        if chars[*i] == '\n' {
            *line += 1;
        }
        *i += 1;
    };
    while i < n {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < n && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0usize;
            while i < n {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    bump(&mut i, &mut line);
                }
            }
        } else if let Some(hashes) = raw_string_start(&chars, i) {
            // r"…", r#"…"#, br#"…"#: skip to the quote followed by as many hashes.
            while chars[i] != '"' {
                i += 1;
            }
            i += 1;
            loop {
                if i >= n {
                    break;
                }
                if chars[i] == '"' && (0..hashes).all(|h| chars.get(i + 1 + h) == Some(&'#')) {
                    i += 1 + hashes;
                    break;
                }
                bump(&mut i, &mut line);
            }
        } else if c == '"' || (c == 'b' && next == Some('"') && !ident_before(&chars, i)) {
            if c == 'b' {
                i += 1;
            }
            i += 1;
            while i < n && chars[i] != '"' {
                if chars[i] == '\\' {
                    i += 1;
                }
                if i < n {
                    bump(&mut i, &mut line);
                }
            }
            i += 1;
        } else if c == '\'' {
            // A char literal ('x', '\n', '\u{..}') or a lifetime ('a).
            if next == Some('\\') {
                i += 2;
                while i < n && chars[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if chars.get(i + 2) == Some(&'\'') {
                i += 3;
            } else {
                i += 1;
                while i < n && (chars[i].is_alphanumeric() || chars[i] == '_') {
                    i += 1;
                }
            }
        } else if c.is_alphabetic() || c == '_' {
            let start = i;
            while i < n && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            tokens.push(Token {
                text: chars[start..i].iter().collect(),
                line,
            });
        } else if c.is_ascii_digit() {
            while i < n && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
        } else if c == ':' && next == Some(':') {
            tokens.push(Token {
                text: "::".into(),
                line,
            });
            i += 2;
        } else if c.is_whitespace() {
            bump(&mut i, &mut line);
        } else {
            tokens.push(Token {
                text: c.to_string(),
                line,
            });
            i += 1;
        }
    }
    tokens
}

/// Whether a raw string starts at `i` (`r"`, `r#`…`"`, `br"`, `br#`…`"`), and
/// with how many hashes.
fn raw_string_start(chars: &[char], i: usize) -> Option<usize> {
    if ident_before(chars, i) {
        return None;
    }
    let mut j = i;
    if chars.get(j) == Some(&'b') {
        j += 1;
    }
    if chars.get(j) != Some(&'r') {
        return None;
    }
    j += 1;
    let mut hashes = 0;
    while chars.get(j) == Some(&'#') {
        hashes += 1;
        j += 1;
    }
    (chars.get(j) == Some(&'"')).then_some(hashes)
}

/// Whether the char before `i` continues an identifier (so `chars[i]` is not
/// the start of a literal prefix such as `b"` or `r#"`).
fn ident_before(chars: &[char], i: usize) -> bool {
    i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_')
}

/// One intra-crate import found in a file: the module path it names (from the
/// crate root; empty segments never occur) and the line.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Import {
    path: Vec<String>,
    line: usize,
}

/// What one file says: its imports, and the child module files it declares
/// under `#[cfg(test)]` (which are test code, not read).
#[derive(Debug, Default)]
struct FileScan {
    imports: Vec<Import>,
    test_children: Vec<String>,
}

/// Scans one file whose module path from the crate root is `module` (empty for
/// the crate root).
fn scan_file(src: &str, module: &[String]) -> FileScan {
    let tokens = tokenize(src);
    let mut scan = FileScan::default();
    // Inline `mod name {` blocks open here: (name, brace depth inside it).
    let mut inline: Vec<(String, usize)> = Vec::new();
    let mut depth = 0usize;
    let mut i = 0;
    let current = |inline: &Vec<(String, usize)>| -> Vec<String> {
        let mut m = module.to_vec();
        m.extend(inline.iter().map(|(name, _)| name.clone()));
        m
    };
    while i < tokens.len() {
        let t = tokens[i].text.as_str();
        if t == "#" && is_cfg_test(&tokens, i) {
            i = skip_item(&tokens, i, &mut scan, &current(&inline));
            continue;
        }
        match t {
            "{" => depth += 1,
            "}" => {
                if inline.last().is_some_and(|(_, d)| *d == depth) {
                    inline.pop();
                }
                depth = depth.saturating_sub(1);
            }
            "mod" if tokens.get(i + 2).is_some_and(|t| t.text == "{") => {
                inline.push((tokens[i + 1].text.clone(), depth + 1));
            }
            "use" => {
                let end = (i..tokens.len())
                    .find(|&j| tokens[j].text == ";")
                    .unwrap_or(tokens.len());
                let line = tokens[i].line;
                for path in expand_use(&tokens[i + 1..end]) {
                    if let Some(path) = resolve(&path, &current(&inline)) {
                        scan.imports.push(Import { path, line });
                    }
                }
                i = end + 1;
                continue;
            }
            "crate" | "super" if tokens.get(i + 1).is_some_and(|t| t.text == "::") => {
                // A path in code: `crate::a::b`, `super::super::x`.
                let line = tokens[i].line;
                let mut path = vec![t.to_string()];
                let mut j = i + 1;
                while tokens.get(j).is_some_and(|t| t.text == "::")
                    && tokens.get(j + 1).is_some_and(|t| is_ident(&t.text))
                {
                    path.push(tokens[j + 1].text.clone());
                    j += 2;
                }
                if let Some(path) = resolve(&path, &current(&inline)) {
                    scan.imports.push(Import { path, line });
                }
                i = j;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    scan
}

fn is_ident(s: &str) -> bool {
    s.chars()
        .next()
        .is_some_and(|c| c.is_alphabetic() || c == '_')
}

/// Whether tokens at `i` are exactly `# [ cfg ( test ) ]`.
fn is_cfg_test(tokens: &[Token], i: usize) -> bool {
    let want = ["#", "[", "cfg", "(", "test", ")", "]"];
    want.iter()
        .enumerate()
        .all(|(k, w)| tokens.get(i + k).is_some_and(|t| t.text == *w))
}

/// Skips the item an attribute at `i` belongs to (its other attributes, then up
/// to its `;` or its closing brace at its own depth) and returns the index
/// after it. A `mod name;` skipped this way is a test child file.
fn skip_item(tokens: &[Token], mut i: usize, scan: &mut FileScan, module: &[String]) -> usize {
    // Attributes: `#` `[` … `]`, possibly `#!`.
    while tokens.get(i).is_some_and(|t| t.text == "#") {
        let mut j = i + 1;
        let mut brackets = 0usize;
        while j < tokens.len() {
            match tokens[j].text.as_str() {
                "[" => brackets += 1,
                "]" => {
                    brackets -= 1;
                    if brackets == 0 {
                        break;
                    }
                }
                _ => {}
            }
            j += 1;
        }
        i = j + 1;
    }
    let start = i;
    let mut depth = 0usize;
    while i < tokens.len() {
        match tokens[i].text.as_str() {
            "{" | "(" | "[" => depth += 1,
            "}" | ")" | "]" => {
                depth = depth.saturating_sub(1);
                if depth == 0 && tokens[i].text == "}" {
                    return i + 1;
                }
            }
            ";" if depth == 0 => {
                // `mod x;`, `pub mod x;`, `pub(crate) mod x;`.
                if tokens[start..i].iter().any(|t| t.text == "mod") {
                    if let Some(name) = tokens.get(i - 1) {
                        let mut child = module.to_vec();
                        child.push(name.text.clone());
                        scan.test_children.push(child.join("::"));
                    }
                }
                return i + 1;
            }
            _ => {}
        }
        i += 1;
    }
    i
}

/// Expands a use tree (the tokens between `use` and `;`) into its paths:
/// `a::{b, c::{d, e}}` is `a::b`, `a::c::d`, `a::c::e`; `a::*` is `a`;
/// `a::b as c` is `a::b`; `a::{self, b}` is `a` and `a::b`.
fn expand_use(tokens: &[Token]) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut pos = 0;
    // A leading `::` (an extern path) names no module of this crate.
    if tokens.first().is_some_and(|t| t.text == "::") {
        return out;
    }
    expand_tree(tokens, &mut pos, &[], &mut out);
    out
}

fn expand_tree(tokens: &[Token], pos: &mut usize, prefix: &[String], out: &mut Vec<Vec<String>>) {
    let mut path = prefix.to_vec();
    loop {
        let Some(t) = tokens.get(*pos) else {
            out.push(path);
            return;
        };
        match t.text.as_str() {
            "{" => {
                *pos += 1;
                loop {
                    match tokens.get(*pos).map(|t| t.text.as_str()) {
                        None => return,
                        Some("}") => {
                            *pos += 1;
                            return;
                        }
                        Some(",") => *pos += 1,
                        Some(_) => expand_tree(tokens, pos, &path, out),
                    }
                }
            }
            "::" => *pos += 1,
            "*" => {
                *pos += 1;
                out.push(path);
                return;
            }
            "as" => {
                *pos += 2;
                out.push(path);
                return;
            }
            "," | "}" => {
                out.push(path);
                return;
            }
            "self" if !path.is_empty() => {
                *pos += 1;
            }
            name => {
                path.push(name.to_string());
                *pos += 1;
            }
        }
    }
}

/// Resolves a path against the module it appears in: `crate::a::b` is
/// `[a, b]`, `super::x` in `a::b` is `[a, x]`, `self::x` in `a` is `[a, x]`.
/// At the crate root, `a::b` is `[a, b]` too. Other paths (extern crates,
/// `std`, local names) are not intra-crate imports: `None`.
fn resolve(path: &[String], module: &[String]) -> Option<Vec<String>> {
    let first = path.first()?;
    let mut base: Vec<String>;
    let mut rest = &path[1..];
    match first.as_str() {
        "crate" => base = Vec::new(),
        "self" => base = module.to_vec(),
        "super" => {
            base = module.to_vec();
            base.pop();
            while rest.first().is_some_and(|s| s == "super") {
                base.pop();
                rest = &rest[1..];
            }
        }
        // At the crate root a `use` path starts from the root.
        _ if module.is_empty() => {
            base = Vec::new();
            rest = path;
        }
        _ => return None,
    }
    base.extend(rest.iter().cloned());
    (!base.is_empty()).then_some(base)
}

/// One crate's module graph: edges between top-level modules, each with where
/// it was first seen (file and line).
#[derive(Debug, Default)]
struct Graph {
    modules: BTreeSet<String>,
    edges: BTreeMap<(String, String), String>,
}

/// The module path of a source file relative to `src`: `lib.rs` is the root,
/// `a.rs` and `a/mod.rs` are `[a]`, `a/b.rs` is `[a, b]`.
fn module_of(rel: &Path) -> Vec<String> {
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let last = parts.pop().unwrap_or_default();
    let stem = last.trim_end_matches(".rs");
    if !(parts.is_empty() && (stem == "lib" || stem == "main")) && stem != "mod" {
        parts.push(stem.to_string());
    }
    parts
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Builds the graph of the crate whose sources are `(path relative to src, text)`.
fn build_graph(files: &[(PathBuf, String)]) -> Graph {
    let mut graph = Graph::default();
    let mut scans = Vec::new();
    let mut test_modules = BTreeSet::new();
    for (rel, src) in files {
        let module = module_of(rel);
        let scan = scan_file(src, &module);
        test_modules.extend(scan.test_children.iter().cloned());
        scans.push((rel, module, scan));
    }
    // A file is test code if it or an ancestor module is declared under `#[cfg(test)]`.
    let is_test = |module: &[String]| {
        (1..=module.len()).any(|k| test_modules.contains(&module[..k].join("::")))
    };
    let root_modules: BTreeSet<String> = scans
        .iter()
        .filter(|(_, m, _)| m.len() == 1)
        .map(|(_, m, _)| m[0].clone())
        .collect();
    // Names the crate root re-exports from a module (`pub use a::X` in lib.rs).
    let mut reexports: BTreeMap<String, String> = BTreeMap::new();
    for (_, module, scan) in &scans {
        if module.is_empty() {
            for import in &scan.imports {
                if let (Some(first), Some(last)) = (import.path.first(), import.path.last()) {
                    if import.path.len() > 1 && root_modules.contains(first) {
                        reexports.insert(last.clone(), first.clone());
                    }
                }
            }
        }
    }
    graph.modules = root_modules.clone();
    for (rel, module, scan) in &scans {
        let Some(from) = module.first() else {
            continue;
        };
        if is_test(module) {
            continue;
        }
        for import in &scan.imports {
            let target = &import.path[0];
            let to = if root_modules.contains(target) {
                target.clone()
            } else if let Some(m) = reexports.get(target) {
                m.clone()
            } else {
                continue;
            };
            if &to != from {
                graph
                    .edges
                    .entry((from.clone(), to))
                    .or_insert_with(|| format!("{}:{}", rel.display(), import.line));
            }
        }
    }
    graph
}

/// The cycles of a graph, one per strongly connected component of more than one
/// module: the shortest cycle through the component's first module, as the
/// module names in order (the first repeated at the end).
fn cycles(graph: &Graph) -> Vec<Vec<String>> {
    let mut adj: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (a, b) in graph.edges.keys() {
        adj.entry(a).or_default().push(b);
    }
    let reach = |from: &str| -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut stack = vec![from.to_string()];
        while let Some(m) = stack.pop() {
            for next in adj.get(m.as_str()).into_iter().flatten() {
                if seen.insert(next.to_string()) {
                    stack.push(next.to_string());
                }
            }
        }
        seen
    };
    let reachable: BTreeMap<&str, BTreeSet<String>> = graph
        .modules
        .iter()
        .map(|m| (m.as_str(), reach(m)))
        .collect();
    let mut done = BTreeSet::new();
    let mut out = Vec::new();
    for m in &graph.modules {
        if done.contains(m) || !reachable[m.as_str()].contains(m) {
            continue;
        }
        let component: BTreeSet<String> = graph
            .modules
            .iter()
            .filter(|o| reachable[m.as_str()].contains(*o) && reachable[o.as_str()].contains(m))
            .cloned()
            .collect();
        done.extend(component.iter().cloned());
        // Breadth-first from m back to m, inside the component.
        let mut parent: BTreeMap<String, String> = BTreeMap::new();
        let mut queue = std::collections::VecDeque::from([m.clone()]);
        'search: while let Some(cur) = queue.pop_front() {
            for next in adj.get(cur.as_str()).into_iter().flatten() {
                if *next == m {
                    parent.insert(format!("{m}#end"), cur.clone());
                    break 'search;
                }
                if component.contains(*next) && !parent.contains_key(*next) {
                    parent.insert(next.to_string(), cur.clone());
                    queue.push_back(next.to_string());
                }
            }
        }
        let mut cycle = vec![m.clone()];
        let mut cur = parent[&format!("{m}#end")].clone();
        while &cur != m {
            cycle.push(cur.clone());
            cur = parent[&cur].clone();
        }
        cycle.push(m.clone());
        cycle.reverse();
        out.push(cycle);
    }
    out
}

/// The layer table of `docs/architecture.md`: the first table after the heading
/// `### Layers of the engine`, whose rows are `| layer number | modules | why |`,
/// the modules in backquotes. Returns module → layer.
fn parse_layers(doc: &str) -> Result<BTreeMap<String, u32>, String> {
    let start = doc
        .find("### Layers of the engine")
        .ok_or("docs/architecture.md has no `### Layers of the engine` heading")?;
    let mut layers = BTreeMap::new();
    let mut in_table = false;
    for line in doc[start..].lines().skip(1) {
        let line = line.trim();
        if !line.starts_with('|') {
            if in_table {
                break;
            }
            continue;
        }
        in_table = true;
        let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
        let Some(Ok(layer)) = cells.first().map(|c| c.parse::<u32>()) else {
            continue; // the header and the separator row
        };
        let modules = cells
            .get(1)
            .ok_or(format!("layer row without modules: {line}"))?;
        for name in modules.split('`').skip(1).step_by(2) {
            if let Some(old) = layers.insert(name.to_string(), layer) {
                return Err(format!("`{name}` is in layers {old} and {layer}"));
            }
        }
    }
    if layers.is_empty() {
        return Err("the layer table of docs/architecture.md is empty".into());
    }
    Ok(layers)
}

/// The imports of `graph` that break `layers`: a module missing from the table,
/// or one importing a module of a higher layer.
fn layer_violations(graph: &Graph, layers: &BTreeMap<String, u32>) -> Vec<String> {
    let mut out = Vec::new();
    for m in &graph.modules {
        if !layers.contains_key(m) {
            out.push(format!(
                "module `{m}` is in no layer of docs/architecture.md"
            ));
        }
    }
    for ((a, b), at) in &graph.edges {
        if let (Some(la), Some(lb)) = (layers.get(a), layers.get(b)) {
            if la < lb {
                out.push(format!(
                    "`{a}` (layer {la}) imports `{b}` (layer {lb}) at {at}"
                ));
            }
        }
    }
    out
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn crate_graph(crate_dir: &Path) -> Graph {
    let src = crate_dir.join("src");
    let mut paths = Vec::new();
    rust_files(&src, &mut paths);
    let files: Vec<(PathBuf, String)> = paths
        .iter()
        .map(|p| {
            let text =
                std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            (p.strip_prefix(&src).unwrap_or(p).to_path_buf(), text)
        })
        .collect();
    build_graph(&files)
}

fn describe_cycle(graph: &Graph, cycle: &[String]) -> String {
    let mut s = cycle.join(" -> ");
    for pair in cycle.windows(2) {
        let at = &graph.edges[&(pair[0].clone(), pair[1].clone())];
        let _ = write!(s, "\n      {} -> {} at {at}", pair[0], pair[1]);
    }
    s
}

#[test]
fn no_crate_has_a_module_cycle_and_the_engine_keeps_its_layers() {
    let root = workspace_root();
    let mut crates: Vec<PathBuf> = std::fs::read_dir(root.join("crates"))
        .expect("crates/")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("src").is_dir())
        .collect();
    crates.sort();
    let mut report = String::new();
    for dir in &crates {
        let name = dir
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        let graph = crate_graph(dir);
        for cycle in cycles(&graph) {
            let _ = writeln!(
                report,
                "crates/{name}: cycle {}",
                describe_cycle(&graph, &cycle)
            );
        }
        if name == "lamina" {
            let doc = std::fs::read_to_string(root.join("docs/architecture.md"))
                .expect("docs/architecture.md");
            match parse_layers(&doc) {
                Ok(layers) => {
                    for v in layer_violations(&graph, &layers) {
                        let _ = writeln!(report, "crates/{name}: {v}");
                    }
                }
                Err(e) => {
                    let _ = writeln!(report, "crates/{name}: {e}");
                }
            }
        }
    }
    assert!(report.is_empty(), "module graph violations:\n{report}");
}

// --- the parser and the cycle finder on small strings ---

fn paths(src: &str, module: &[&str]) -> Vec<String> {
    let module: Vec<String> = module.iter().map(|s| s.to_string()).collect();
    scan_file(src, &module)
        .imports
        .iter()
        .map(|i| i.path.join("::"))
        .collect()
}

#[test]
fn use_groups_nested_and_multi_line_expand_to_every_path() {
    let src = "use crate::{a, b::c,\n    d::{self, e::F as G}, h::*};\nuse std::fmt;";
    assert_eq!(paths(src, &["m"]), ["a", "b::c", "d", "d::e::F", "h"]);
}

#[test]
fn super_self_and_code_paths_resolve_against_the_module() {
    let src = "use super::x::Y;\nuse self::z;\nfn f() { crate::q::r(); super::super::w(); }";
    assert_eq!(paths(src, &["a", "b"]), ["a::x::Y", "a::b::z", "q::r", "w"]);
    // In a top-level module, `super::` is the crate root.
    assert_eq!(paths("use super::k;", &["a"]), ["k"]);
}

#[test]
fn inline_modules_shift_super() {
    let src = "mod inner { use super::s; }\nuse super::t;";
    assert_eq!(paths(src, &["a"]), ["a::s", "t"]);
}

#[test]
fn test_items_comments_and_strings_are_not_imports() {
    let src = r##"
        // use crate::commented;
        /* crate::block /* nested */ crate::still */
        const S: &str = "crate::in_string";
        const R: &str = r#"crate::in_raw "# ;
        const C: char = '"'; fn l<'a>(x: &'a u8) {}
        #[cfg(test)]
        mod tests { use crate::tested; }
        #[cfg(test)]
        use crate::test_only;
        #[cfg(test)]
        pub(crate) mod helper;
        pub use crate::kept;
    "##;
    let scan = scan_file(src, &["m".to_string()]);
    let found: Vec<String> = scan.imports.iter().map(|i| i.path.join("::")).collect();
    assert_eq!(found, ["kept"]);
    assert_eq!(scan.imports[0].line, 13);
    assert_eq!(scan.test_children, ["m::helper"]);
}

fn graph_of(files: &[(&str, &str)]) -> Graph {
    let files: Vec<(PathBuf, String)> = files
        .iter()
        .map(|(p, s)| (PathBuf::from(p), s.to_string()))
        .collect();
    build_graph(&files)
}

#[test]
fn graph_counts_top_level_modules_and_root_reexports() {
    let g = graph_of(&[
        ("lib.rs", "mod a; mod b; mod c; pub use c::Thing;"),
        (
            "a/mod.rs",
            "use crate::b::deep::X; use crate::Thing; use self::sub::Y;",
        ),
        ("a/sub.rs", "use super::super::b::Z;"),
        ("b/mod.rs", ""),
        ("c.rs", "#[cfg(test)] mod tests;"),
        ("c/tests.rs", "use crate::a::Q;"),
    ]);
    let edges: Vec<(String, String)> = g.edges.keys().cloned().collect();
    let want = [("a", "b"), ("a", "c")].map(|(x, y)| (x.to_string(), y.to_string()));
    assert_eq!(edges, want);
    assert_eq!(g.edges[&("a".to_string(), "b".to_string())], "a/mod.rs:1");
    assert!(cycles(&g).is_empty());
}

#[test]
fn cycles_are_found_one_per_component() {
    let g = graph_of(&[
        ("lib.rs", "mod a; mod b; mod c; mod d; mod e;"),
        ("a.rs", "use crate::b::X;"),
        ("b.rs", "use crate::c::X;"),
        ("c.rs", "use crate::a::X;"),
        ("d.rs", "use crate::e::X; use crate::a::Y;"),
        ("e.rs", "use crate::d::X;"),
    ]);
    assert_eq!(cycles(&g), [vec!["a", "b", "c", "a"], vec!["d", "e", "d"]]);
}

#[test]
fn layer_table_is_parsed_and_upward_imports_are_reported() {
    let doc = "# A\n### Layers of the engine\n\nText.\n\n| layer | modules | why |\n|---|---|---|\n\
               | 0 | `a`, `b` | leaves |\n| 1 | `c` | uses leaves |\n\nAfter.\n| 9 | `z` | not read |\n";
    let layers = parse_layers(doc).expect("table");
    let want: BTreeMap<String, u32> = [("a", 0), ("b", 0), ("c", 1)]
        .map(|(m, l)| (m.to_string(), l))
        .into_iter()
        .collect();
    assert_eq!(layers, want);
    let g = graph_of(&[
        ("lib.rs", ""),
        ("a.rs", "use crate::c::X; use crate::b::Y;"),
        ("b.rs", ""),
        ("c.rs", "use crate::a::Z;"),
        ("d.rs", ""),
    ]);
    assert_eq!(
        layer_violations(&g, &layers),
        [
            "module `d` is in no layer of docs/architecture.md",
            "`a` (layer 0) imports `c` (layer 1) at a.rs:1",
        ]
    );
    assert!(parse_layers("### Layers of the engine\n| 0 | `a` | |\n| 1 | `a` | |\n").is_err());
}
