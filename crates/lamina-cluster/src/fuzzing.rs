//! Entry point for fuzzing the Raft port's frame decoder (used by the
//! `fuzz/` cargo-fuzz target `raft_frame` and by the corpus replay test).
//! Whatever the bytes, it returns normally or fails an assertion about
//! the decoder's own consistency; a panic elsewhere or a hang is a bug.
//! Not part of the crate's API.

use crate::network::{read_frame, write_frame, Envelope, RpcRequest};

/// Decodes `data` as the byte stream of a Raft-port connection, frame
/// after frame, as [`crate::network::serve_raft`] does, until the end or
/// the first bad frame. Every request decoded must encode and decode
/// again to the same bytes. Returns how many frames decoded.
pub fn raft_frames(data: &[u8]) -> usize {
    let Ok(rt) = tokio::runtime::Builder::new_current_thread().build() else {
        return 0;
    };
    rt.block_on(async {
        let mut input = data;
        let mut decoded = 0;
        while let Ok(Some(request)) = read_frame::<_, Envelope<RpcRequest>>(&mut input).await {
            decoded += 1;
            let mut once = Vec::new();
            if write_frame(&mut once, &request).await.is_err() {
                // Over the frame limit once re-encoded: never sent.
                continue;
            }
            let again: Envelope<RpcRequest> = read_frame(&mut &once[..])
                .await
                .ok()
                .flatten()
                .unwrap_or_else(|| panic!("a request it encoded did not decode: {request:?}"));
            let mut twice = Vec::new();
            write_frame(&mut twice, &again)
                .await
                .unwrap_or_else(|e| panic!("re-encoding failed: {e}"));
            assert_eq!(once, twice, "encoding is not stable");
        }
        decoded
    })
}
