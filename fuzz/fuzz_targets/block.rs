//! A data block's contents (no trailer): decode, walk, seek.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| lamina::fuzzing::block(data));
