//! The README's Rust builder example is `examples/readme.rs`, verbatim;
//! this runs it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod example {
    include!("../examples/readme.rs");

    pub fn run() -> Result<(), Box<dyn std::error::Error>> {
        main()
    }
}

#[test]
fn the_readme_example_runs() {
    example::run().unwrap();
}

#[test]
fn the_readme_shows_the_example_verbatim() {
    let readme = include_str!("../../../README.md");
    let example = include_str!("../examples/readme.rs");
    let code = &example[example.find("use std::ops::Bound;").unwrap()..];
    assert!(
        readme.contains(code),
        "README.md's \"Rust builder example\" differs from crates/lamina/examples/readme.rs"
    );
}
