//! The README's Rust examples, run. Each ```rust block of the README is
//! either the body of one of the functions below (or of the dataset crate's
//! `crates/lamina-dataset/tests/readme.rs`, which runs its own) between its
//! `README:` and `END` markers, character for character (indentation
//! aside), or the builder example `examples/readme/body.rs` from its first `use`
//! on; the test runs them all, the marked ones in a fresh working
//! directory, since they use relative paths.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    unused_variables,
    unused_mut,
    reason = "a test may panic on a failed setup; the README example binds values a reader would use"
)]

use std::error::Error;

type Res = Result<(), Box<dyn Error>>;

// Kept as the README shows them, not as rustfmt would.
#[rustfmt::skip]
fn library() -> Res {
    // README: library
    use lamina::{Db, Options, SyncMode, WriteBatch};
    use std::ops::Bound;

    let db = Db::open("demo-db", Options::builder().sync(SyncMode::Always).build()?)?;
    db.put(b"apple", b"red")?;
    let mut batch = WriteBatch::new();
    batch.put(b"banana", b"yellow");
    batch.delete(b"apple");
    db.write(batch)?;                                   // atomic
    let snap = db.snapshot();                           // consistent view
    db.put(b"cherry", b"dark red")?;
    assert_eq!(snap.get(b"cherry")?, None);             // the snapshot ignores later writes
    drop(snap);                                         // (a live snapshot keeps the directory locked)
    for kv in db.scan(Bound::Included(&b"a"[..]), Bound::Unbounded)? {
        let (k, v) = kv?;
    }
    for kv in db.scan_rev(Bound::Unbounded, Bound::Excluded(&b"b"[..]))? {
        let (k, v) = kv?;                               // descending key order
    }
    db.delete_range(b"a", b"b")?;                       // every key in [a, b): one range tombstone
    let mut c = db.iter(Bound::Unbounded, Bound::Unbounded)?;  // double-ended cursor
    c.seek(b"b")?;                                      // also seek_for_prev, seek_to_first/last
    while c.valid() {
        let (k, v) = (c.key(), c.value());              // borrowed: no copy per entry
        c.prev()?;                                      // or next(); turn at will
    }
    let mut p = db.prefix_iter(b"ban")?;                // the keys starting with "ban", at the first
    db.compact_range(None, None)?;
    println!("{}", serde_json::to_string(&db.stats())?); // write amplification, runs per level, ...
    db.close()?;
    // END
    let db = Db::open("demo-db", Options::default())?;
    assert_eq!(db.get(b"banana")?, Some(b"yellow".to_vec()));
    assert_eq!(db.get(b"apple")?, None);
    Ok(())
}

mod builder_example {
    include!("../examples/readme/body.rs");

    pub fn run() -> Result<(), Box<dyn std::error::Error>> {
        main()
    }
}

/// The builder example as the README shows it.
fn builder_example_text() -> String {
    let example = include_str!("../examples/readme/body.rs");
    example[example.find("use std::ops::Bound;").unwrap()..].to_string()
}

/// The marked examples of `text`: (name, body without its indentation).
fn examples(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut current: Option<(String, String)> = None;
    for line in text.lines() {
        let trimmed = line.trim_start();
        if let Some(name) = trimmed.strip_prefix("// README: ") {
            current = Some((name.to_string(), String::new()));
        } else if trimmed == "// END" {
            out.extend(current.take());
        } else if let Some((_, body)) = &mut current {
            body.push_str(line.strip_prefix("    ").unwrap_or(line));
            body.push('\n');
        }
    }
    out
}

fn readme_rust_blocks() -> Vec<String> {
    let text =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md")).unwrap();
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        match (&mut current, line.strip_prefix("```")) {
            (None, Some("rust")) => current = Some(String::new()),
            (Some(_), Some(_)) => blocks.extend(current.take()),
            (Some(body), None) => {
                body.push_str(line);
                body.push('\n');
            }
            _ => {}
        }
    }
    blocks
}

#[test]
fn every_rust_block_of_the_readme_is_an_example_here() {
    let dataset = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../lamina-dataset/tests/readme.rs"
    ))
    .unwrap();
    let mut examples = [include_str!("readme.rs"), dataset.as_str()]
        .into_iter()
        .flat_map(examples)
        .collect::<Vec<_>>();
    examples.push(("builder".to_string(), builder_example_text()));
    let blocks = readme_rust_blocks();
    assert!(!blocks.is_empty());
    for block in &blocks {
        assert!(
            examples.iter().any(|(_, body)| body == block),
            "this README block is not a tested example of crates/lamina/tests/readme.rs\n\
             or crates/lamina-dataset/tests/readme.rs:\n{block}"
        );
    }
    assert_eq!(
        blocks.len(),
        examples.len(),
        "an example here is not in the README"
    );
}

#[test]
fn the_readme_rust_examples_run() {
    let tmp = tempfile::tempdir().unwrap();
    // The examples use relative paths; no other test of this binary
    // depends on the working directory.
    std::env::set_current_dir(tmp.path()).unwrap();
    library().unwrap();
    builder_example::run().unwrap();
}
