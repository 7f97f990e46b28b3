//! Bytes from a peer through both sides of the Raft port's handshake.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    lamina_cluster::fuzzing::handshake(data);
});
