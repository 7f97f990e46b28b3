//! The frame codec of the Raft port: a frame is a big-endian `u32` length
//! then that many bytes (JSON, for the typed frames); a length over
//! [`MAX_FRAME`] is refused, and a body's buffer grows as its bytes
//! arrive, so a length alone costs nothing.

use std::io;

use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Largest frame accepted or sent (snapshot chunks are configured well
/// below it; JSON spends up to 4 bytes per byte of a chunk).
pub const MAX_FRAME: usize = 32 << 20;

/// Writes one frame.
pub async fn write_frame<W, T>(w: &mut W, msg: &T) -> io::Result<()>
where
    W: AsyncWriteExt + Unpin,
    T: Serialize,
{
    let body = serde_json::to_vec(msg).map_err(io::Error::other)?;
    write_raw_frame(w, &body).await
}

/// Reads one frame; `Ok(None)` at a clean end of stream.
pub async fn read_frame<R, T>(r: &mut R) -> io::Result<Option<T>>
where
    R: AsyncReadExt + Unpin,
    T: DeserializeOwned,
{
    match read_raw_frame(r).await? {
        Some(body) => serde_json::from_slice(&body)
            .map(Some)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e)),
        None => Ok(None),
    }
}

/// Reads one frame's body without decoding it; `Ok(None)` at a clean end
/// of stream.
pub async fn read_raw_frame<R>(r: &mut R) -> io::Result<Option<Vec<u8>>>
where
    R: AsyncReadExt + Unpin,
{
    match read_frame_len(r).await? {
        Some(len) => read_frame_body(r, len).await.map(Some),
        None => Ok(None),
    }
}

/// Reads a frame's length; `Ok(None)` at a clean end of stream, an error
/// past [`MAX_FRAME`].
pub(crate) async fn read_frame_len<R>(r: &mut R) -> io::Result<Option<usize>>
where
    R: AsyncReadExt + Unpin,
{
    let mut len = [0u8; 4];
    match r.read_exact(&mut len).await {
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let len = u32::from_be_bytes(len) as usize;
    if len > MAX_FRAME {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("frame of {len} bytes over the limit"),
        ));
    }
    Ok(Some(len))
}

/// Reads a frame's body of `len` bytes into a buffer grown as the bytes
/// arrive, never past `len`, rather than allocated at the announced
/// length: a peer announcing 32 MiB and sending nothing costs nothing.
pub(crate) async fn read_frame_body<R>(r: &mut R, len: usize) -> io::Result<Vec<u8>>
where
    R: AsyncReadExt + Unpin,
{
    const FIRST: usize = 64 << 10;
    let mut body = Vec::new();
    while body.len() < len {
        if body.len() == body.capacity() {
            // Doubling, capped at the frame: amortized linear copying.
            let want = (2 * body.capacity()).max(FIRST).min(len);
            body.reserve_exact(want - body.len());
        }
        let room = body.capacity().min(len) - body.len();
        let n = r.take(room as u64).read_buf(&mut body).await?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("frame cut short: {} of {len} bytes", body.len()),
            ));
        }
    }
    Ok(body)
}

/// Writes one frame whose body is already encoded.
pub async fn write_raw_frame<W>(w: &mut W, body: &[u8]) -> io::Result<()>
where
    W: AsyncWriteExt + Unpin,
{
    if body.len() > MAX_FRAME {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("frame of {} bytes over the limit", body.len()),
        ));
    }
    let len = u32::try_from(body.len()).map_err(io::Error::other)?;
    let mut buf = Vec::with_capacity(4 + body.len());
    buf.extend_from_slice(&len.to_be_bytes());
    buf.extend_from_slice(body);
    w.write_all(&buf).await?;
    w.flush().await
}
