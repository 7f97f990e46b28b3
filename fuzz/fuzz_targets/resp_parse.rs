//! A Redis-port byte stream through the RESP request parser, whole and in
//! pieces.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| lamina_server::fuzzing::resp(data));
