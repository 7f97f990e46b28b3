//! Peer authentication on the Raft port: a challenge–response handshake
//! with HMAC-SHA256 over a secret every member shares (the cluster file's
//! `secret_file`), at the start of every connection.
//!
//! The handshake, before any frame ([`crate::network`]), with `K` the
//! secret, `Ns` and `Nc` 32 random bytes each (the server's and the
//! client's nonce), `||` concatenation:
//!
//! | from | bytes |
//! | --- | --- |
//! | server | `Ns` |
//! | client | `Nc`, then `HMAC-SHA256(K, "lamina-raft v1 client" \|\| Ns \|\| Nc)` |
//! | server | `HMAC-SHA256(K, "lamina-raft v1 server" \|\| Ns \|\| Nc)` |
//!
//! Each side checks the other's MAC in constant time
//! ([`Mac::verify_slice`]) and closes the connection on a mismatch: the
//! server before it reads any frame, so an unauthenticated peer gets the
//! 32 bytes of its challenge and a closed connection, nothing else. The
//! two directions use different labels, so one side's MAC is never
//! accepted as the other's; fresh nonces on both sides make a recorded
//! handshake useless for another connection. The server gives the whole
//! handshake [`HANDSHAKE_TIMEOUT`]; a client, the time of its RPC.
//!
//! What it is not: the frames after the handshake travel in the clear,
//! without a MAC each, so someone who can read or rewrite the traffic
//! between members (on the network path, not merely able to connect) can
//! read the data and take over an authenticated connection. Across an
//! untrusted network, run the members over a tunnel that encrypts
//! (WireGuard, IPsec, an SSH tunnel).

use std::fmt;
use std::io;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use hmac::{Hmac, Mac};
use rand::rngs::OsRng;
use rand::RngCore;
use sha2::Sha256;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::error::{ClusterError, Result};

/// Fewest bytes a secret may have.
pub const MIN_SECRET: usize = 16;
/// Bytes of a nonce.
pub const NONCE: usize = 32;
/// Bytes of a MAC (HMAC-SHA256).
pub const MAC: usize = 32;
/// How long the server side of a handshake may take in all.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);

const CLIENT_LABEL: &[u8] = b"lamina-raft v1 client";
const SERVER_LABEL: &[u8] = b"lamina-raft v1 server";

/// The secret the members share, kept as the HMAC keyed with it. Its
/// `Debug` shows only its length.
#[derive(Clone)]
pub struct Secret {
    key: Arc<Hmac<Sha256>>,
    len: usize,
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Secret({} bytes)", self.len)
    }
}

impl Secret {
    /// A secret of these bytes (any bytes, at least [`MIN_SECRET`]).
    pub fn new(bytes: &[u8]) -> Result<Secret> {
        if bytes.len() < MIN_SECRET {
            return Err(ClusterError::Config(format!(
                "a secret needs at least {MIN_SECRET} bytes, not {}",
                bytes.len()
            )));
        }
        let key = Hmac::<Sha256>::new_from_slice(bytes)
            .map_err(|e| ClusterError::Config(format!("secret: {e}")))?;
        Ok(Secret {
            key: Arc::new(key),
            len: bytes.len(),
        })
    }

    /// The secret in the file at `path`: the file's bytes, all of them.
    /// A file others than its owner may read works, with a warning.
    pub fn load(path: &Path) -> Result<Secret> {
        let bytes = std::fs::read(path)
            .map_err(|e| ClusterError::io(format!("read secret_file {}", path.display()), e))?;
        let secret = Secret::new(&bytes).map_err(|_| {
            ClusterError::Config(format!(
                "secret_file {} holds {} bytes; at least {MIN_SECRET} are needed (make one with `head -c 32 /dev/urandom > {}`)",
                path.display(),
                bytes.len(),
                path.display()
            ))
        })?;
        if let Ok(meta) = std::fs::metadata(path) {
            use std::os::unix::fs::PermissionsExt;
            let mode = meta.permissions().mode();
            if mode & 0o077 != 0 {
                tracing::warn!(
                    "secret_file {} may be read by others than its owner (mode {:o}): chmod 600 it",
                    path.display(),
                    mode & 0o777
                );
            }
        }
        Ok(secret)
    }

    fn mac(&self, label: &[u8], server: &[u8; NONCE], client: &[u8; NONCE]) -> Hmac<Sha256> {
        let mut mac = Hmac::clone(&self.key);
        mac.update(label);
        mac.update(server);
        mac.update(client);
        mac
    }
}

fn nonce() -> io::Result<[u8; NONCE]> {
    let mut n = [0u8; NONCE];
    OsRng.try_fill_bytes(&mut n).map_err(io::Error::other)?;
    Ok(n)
}

fn refused(who: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::PermissionDenied,
        format!("the {who}'s handshake failed: not a member with the cluster's secret"),
    )
}

/// The server's side of the handshake on a new connection: `Ok` once the
/// client proved it holds `secret` (and was sent the server's proof).
/// Reads nothing past the handshake.
pub async fn accept<S>(stream: &mut S, secret: &Secret) -> io::Result<()>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let server = nonce()?;
    stream.write_all(&server).await?;
    stream.flush().await?;
    let mut client = [0u8; NONCE];
    stream.read_exact(&mut client).await?;
    let mut proof = [0u8; MAC];
    stream.read_exact(&mut proof).await?;
    secret
        .mac(CLIENT_LABEL, &server, &client)
        .verify_slice(&proof)
        .map_err(|_| refused("client"))?;
    let answer = secret.mac(SERVER_LABEL, &server, &client).finalize();
    stream.write_all(&answer.into_bytes()).await?;
    stream.flush().await
}

/// The client's side of the handshake on a new connection: `Ok` once the
/// server proved it holds `secret` (and was sent the client's proof).
pub async fn connect<S>(stream: &mut S, secret: &Secret) -> io::Result<()>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let mut server = [0u8; NONCE];
    stream.read_exact(&mut server).await?;
    let client = nonce()?;
    let proof = secret.mac(CLIENT_LABEL, &server, &client).finalize();
    let mut msg = [0u8; NONCE + MAC];
    msg[..NONCE].copy_from_slice(&client);
    msg[NONCE..].copy_from_slice(&proof.into_bytes());
    stream.write_all(&msg).await?;
    stream.flush().await?;
    let mut answer = [0u8; MAC];
    stream.read_exact(&mut answer).await?;
    secret
        .mac(SERVER_LABEL, &server, &client)
        .verify_slice(&answer)
        .map_err(|_| refused("server"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret(b: u8) -> Secret {
        Secret::new(&[b; 32]).unwrap()
    }

    async fn handshake(server: Secret, client: Secret) -> (io::Result<()>, io::Result<()>) {
        let (mut a, mut b) = tokio::io::duplex(1024);
        let s = tokio::spawn(async move {
            let r = accept(&mut a, &server).await;
            drop(a);
            r
        });
        let c = connect(&mut b, &client).await;
        (s.await.unwrap(), c)
    }

    #[tokio::test]
    async fn the_same_secret_passes_both_ways() {
        let (s, c) = handshake(secret(7), secret(7)).await;
        s.unwrap();
        c.unwrap();
    }

    #[tokio::test]
    async fn another_secret_fails_both_ways() {
        let (s, c) = handshake(secret(7), secret(8)).await;
        assert_eq!(s.unwrap_err().kind(), io::ErrorKind::PermissionDenied);
        // The server closed without its proof.
        assert!(c.is_err());
    }

    #[tokio::test]
    async fn a_server_without_the_secret_is_refused_by_the_client() {
        // A fake server: a challenge, then 32 bytes that are no proof.
        let (mut a, mut b) = tokio::io::duplex(1024);
        let fake = tokio::spawn(async move {
            a.write_all(&[1u8; NONCE]).await.unwrap();
            let mut msg = [0u8; NONCE + MAC];
            a.read_exact(&mut msg).await.unwrap();
            a.write_all(&[2u8; MAC]).await.unwrap();
            a
        });
        let e = connect(&mut b, &secret(7)).await.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::PermissionDenied);
        drop(fake.await.unwrap());
    }

    #[tokio::test]
    async fn a_replayed_proof_fails() {
        // A client that answers the challenge of one connection with the
        // proof recorded from another.
        let (mut a, mut b) = tokio::io::duplex(1024);
        let s = tokio::spawn(async move { accept(&mut a, &secret(7)).await });
        let mut challenge = [0u8; NONCE];
        b.read_exact(&mut challenge).await.unwrap();
        let old_server = [9u8; NONCE];
        let client = [3u8; NONCE];
        let old = secret(7).mac(CLIENT_LABEL, &old_server, &client).finalize();
        b.write_all(&client).await.unwrap();
        b.write_all(&old.into_bytes()).await.unwrap();
        assert_eq!(
            s.await.unwrap().unwrap_err().kind(),
            io::ErrorKind::PermissionDenied
        );
    }

    #[test]
    fn short_secrets_are_refused_and_debug_hides_the_bytes() {
        assert!(Secret::new(&[0; MIN_SECRET - 1]).is_err());
        let s = Secret::new(b"0123456789abcdef").unwrap();
        assert_eq!(format!("{s:?}"), "Secret(16 bytes)");
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("s");
        std::fs::write(&p, b"short").unwrap();
        let e = Secret::load(&p).unwrap_err().to_string();
        assert!(
            e.contains("holds 5 bytes") && e.contains("/dev/urandom"),
            "{e}"
        );
    }
}
