//! A Raft-port byte stream through the frame decoder.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    lamina_cluster::fuzzing::raft_frames(data);
});
