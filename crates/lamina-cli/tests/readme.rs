//! The README's examples, run: the quick start's client session prints what
//! the README shows, every command and flag of the README's tables exists,
//! every subcommand is in the table, and the DSL replies of its protocol
//! table are the server's. (The Rust examples are checked by
//! `crates/lamina/tests/readme.rs`, the Python one by the package's pytest
//! suite, the Redis one by `scripts/redis-tools-test.sh`.)

#![expect(clippy::unwrap_used, reason = "a test may panic on a failed setup")]

mod common;

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;

use common::{bin, run_with_input, ServerProc};

fn readme() -> String {
    std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md")).unwrap()
}

/// The README's fenced code blocks: (info string, body).
fn blocks(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut current: Option<(String, String)> = None;
    for line in text.lines() {
        match (&mut current, line.strip_prefix("```")) {
            (None, Some(info)) => current = Some((info.trim().to_string(), String::new())),
            (Some(_), Some(_)) => out.extend(current.take()),
            (Some((_, body)), None) => {
                body.push_str(line);
                body.push('\n');
            }
            (None, None) => {}
        }
    }
    out
}

/// `printf`'s escapes that the README uses.
fn unescape(s: &str) -> String {
    s.replace("\\n", "\n").replace("\\t", "\t")
}

#[test]
fn the_quick_start_client_session_prints_what_the_readme_shows() {
    let text = readme();
    let (_, session) = blocks(&text)
        .into_iter()
        .find(|(_, b)| b.starts_with("$ printf '"))
        .expect("the README's client session");
    let (command, shown) = session.split_once('\n').unwrap();
    let (input, rest) = command["$ printf '".len()..].split_once('\'').unwrap();
    assert_eq!(rest, " | cargo run --release -p lamina-cli -- client");
    let tmp = tempfile::tempdir().unwrap();
    let server = ServerProc::start(&tmp.path().join("db"), &[]);
    let port = server.port.to_string();
    let out = run_with_input(&["client", "--port", &port], unescape(input).into_bytes());
    assert!(out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8(out.stdout).unwrap(), shown);
    server.stop();
}

/// `lamina ARGS --help`, and the help of each of its subcommands.
fn help_with_subcommands(args: &[&str]) -> String {
    let run = |args: &[&str]| {
        let out = Command::new(bin())
            .args(args)
            .arg("--help")
            .output()
            .unwrap();
        assert!(out.status.success(), "lamina {args:?} --help: {out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    let mut help = run(args);
    for sub in subcommands(&help.clone()) {
        let mut path = args.to_vec();
        path.push(&sub);
        help.push_str(&run(&path));
    }
    help
}

/// The names listed under `Commands:` in a help text (without `help`).
fn subcommands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_string)
        .collect()
}

/// Every `--flag` in `text`.
fn flags(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (i, _) in text.match_indices("--") {
        let name: String = text[i + 2..]
            .chars()
            .take_while(|c| c.is_ascii_lowercase() || *c == '-' || c.is_ascii_digit())
            .collect();
        if name.len() > 1 {
            out.insert(format!("--{}", name.trim_end_matches('-')));
        }
    }
    out
}

#[test]
fn every_command_and_flag_of_the_readme_tables_exists_and_every_command_is_listed() {
    let text = readme();
    let mut listed = BTreeSet::new();
    for row in text.lines().filter(|l| l.starts_with("| `lamina ")) {
        let cell = row.split(" | ").next().unwrap();
        let words: Vec<&str> = cell
            .trim_start_matches("| `lamina ")
            .split_whitespace()
            // Command names: lowercase words, maybe hyphenated
            // (`cluster-test`), never a `--flag`.
            .take_while(|w| {
                w.starts_with(|c: char| c.is_ascii_lowercase())
                    && w.chars().all(|c| c.is_ascii_lowercase() || c == '-')
            })
            .collect();
        assert!(!words.is_empty(), "{row}");
        listed.insert(words[0].to_string());
        let help = help_with_subcommands(&words);
        for flag in flags(cell) {
            assert!(
                help.contains(&flag),
                "`lamina {}` has no {flag}",
                words.join(" ")
            );
        }
    }
    let top =
        String::from_utf8(Command::new(bin()).arg("--help").output().unwrap().stdout).unwrap();
    for sub in subcommands(&top) {
        assert!(
            listed.contains(&sub),
            "`lamina {sub}` is missing from the README's table"
        );
    }
    // The engine options paragraph: flags every database command takes.
    let para = text
        .split("Engine options (shared by")
        .nth(1)
        .and_then(|rest| rest.split("\n\n").next())
        .unwrap();
    for cmd in ["serve", "exec", "kv"] {
        let help = help_with_subcommands(&[cmd]);
        for flag in flags(para) {
            assert!(help.contains(&flag), "`lamina {cmd}` has no {flag}");
        }
    }
}

/// The options a help text declares (`  -p, --port <PORT>`), without
/// `--help` and `--version`.
fn declared_flags(help: &str) -> BTreeSet<String> {
    help.lines()
        .map(str::trim_start)
        .filter(|l| l.starts_with('-'))
        .filter_map(|l| l.split([' ', ',']).find(|w| w.starts_with("--")))
        .filter(|f| !["--help", "--version"].contains(f))
        .map(str::to_string)
        .collect()
}

#[test]
fn every_option_of_lamina_serve_is_in_the_readme() {
    let text = readme();
    let row = text
        .lines()
        .find(|l| l.starts_with("| `lamina serve "))
        .expect("the serve row");
    let engine = text
        .split("Engine options (shared by")
        .nth(1)
        .and_then(|rest| rest.split("\n\n").next())
        .unwrap();
    let documented: BTreeSet<String> = flags(row).union(&flags(engine)).cloned().collect();
    let declared = declared_flags(&help_with_subcommands(&["serve"]));
    assert!(declared.contains("--request-timeout"), "{declared:?}");
    let missing: Vec<&String> = declared.difference(&documented).collect();
    assert!(
        missing.is_empty(),
        "`lamina serve` options missing from the README: {missing:?}"
    );
}

/// The rows of the README's protocol table that show a fixed reply.
#[test]
fn the_protocol_table_replies_are_the_servers() {
    let text = readme();
    let row = text
        .lines()
        .find(|l| l.starts_with("| `flush`, `compact`"))
        .expect("the flush/compact row");
    assert!(row.ends_with("| `OK` |"), "{row}");
    let quit = text
        .lines()
        .find(|l| l.starts_with("| `quit`"))
        .expect("the quit row");
    assert!(quit.contains("`@bye`"), "{quit}");

    let tmp = tempfile::tempdir().unwrap();
    let server = ServerProc::start(&tmp.path().join("db"), &[]);
    let mut conn = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    conn.write_all(b"p 1 2\nflush\ncompact\nquit\n").unwrap();
    let mut replies = String::new();
    conn.read_to_string(&mut replies).unwrap();
    assert_eq!(replies, "OK\nOK\n@bye\n");
    // Bad input: one line starting with ERROR, and the server keeps serving.
    let mut conn = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    conn.write_all(b"nonsense\ng 1\n@end\n").unwrap();
    let mut replies = String::new();
    conn.read_to_string(&mut replies).unwrap();
    let lines: Vec<&str> = replies.lines().collect();
    assert!(lines[0].starts_with("ERROR"), "{replies}");
    assert_eq!(&lines[1..], ["2", "@bye"]);
    server.stop();
}
