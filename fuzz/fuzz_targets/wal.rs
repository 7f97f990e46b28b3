//! A WAL file replayed as recovery does.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| lamina::fuzzing::wal(data));
