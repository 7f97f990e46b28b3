//! A data block's contents (no trailer): decode, walk, seek; also as a
//! compressed block's stored bytes (LZ4, zstd): decompress, then the same.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| lamina::fuzzing::block(data));
