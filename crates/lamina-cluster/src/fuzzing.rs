//! Entry points for fuzzing the Raft port: its frame decoder and its
//! handshake (used by the `fuzz/` cargo-fuzz targets `raft_frame` and
//! `handshake` and by the corpus replay test). Whatever the bytes, each
//! returns normally or fails an assertion about the code's own
//! consistency; a panic elsewhere or a hang is a bug. Not part of the
//! crate's API.

use crate::auth::{self, Secret};
use crate::frame::{read_frame, write_frame};
use crate::network::{Envelope, RpcRequest};

/// Runs both sides of the handshake ([`crate::auth`]) against `data` as
/// what the other side sent: the server's side as if `data` came from a
/// client, the client's as if from a server. Neither may pass: bytes
/// chosen without the secret never carry a right MAC (the nonces are
/// fresh each run). Returns how many bytes of `data` the server's side
/// read (at most a nonce and a MAC).
pub fn handshake(data: &[u8]) -> usize {
    let Ok(rt) = tokio::runtime::Builder::new_current_thread().build() else {
        return 0;
    };
    let Ok(secret) = Secret::new(b"the fuzz target's own secret....") else {
        return 0;
    };
    rt.block_on(async {
        let mut input = data;
        let mut server = tokio::io::join(&mut input, tokio::io::sink());
        let served = auth::accept(&mut server, &secret).await;
        assert!(served.is_err(), "a client without the secret passed");
        let read = data.len() - input.len();
        assert!(read <= auth::NONCE + auth::MAC, "read {read} bytes");
        let mut client = tokio::io::join(data, tokio::io::sink());
        let called = auth::connect(&mut client, &secret).await;
        assert!(called.is_err(), "a server without the secret passed");
        read
    })
}

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
