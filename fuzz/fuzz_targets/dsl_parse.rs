//! One DSL line through the parser.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| lamina_server::fuzzing::parse(data));
