//! A manifest recovered as Db::open does, and a single version edit.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| lamina::fuzzing::manifest(data));
