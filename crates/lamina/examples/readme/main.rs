//! The README's "Rust builder example" (`body.rs`, which `tests/readme.rs`
//! also runs and checks against the README).

include!("body.rs");
