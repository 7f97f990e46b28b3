//! A network session's input through the line reader and the executor,
//! against a fresh in-memory database.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    lamina_server::fuzzing::command_loop(data);
});
