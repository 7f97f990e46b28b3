//! A whole SST file: open, iterate, point lookups, verify.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| lamina::fuzzing::sst(data));
