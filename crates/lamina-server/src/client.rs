//! The pipelined client: a writer thread streams input to the server while
//! the calling thread prints replies.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::thread;

use crate::{BYE_REPLY, END_MARKER, SYNC_MARKER, SYNC_REPLY};

/// The prompt shown before each interactive input line.
pub const PROMPT: &str = "lamina> ";

/// How the client behaves.
#[derive(Debug, Clone, Copy, Default)]
pub struct ClientOptions {
    /// Input is a person at a terminal: send line by line, each followed by
    /// `@sync`, and prompt again once its replies arrived.
    pub interactive: bool,
    /// Show the prompt (only in interactive mode).
    pub prompt: bool,
}

/// Client failures.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The server closed the connection before answering the end marker.
    #[error("connection closed by the server before the end of the session")]
    ConnectionClosed,
    /// Reading from or writing to the connection failed.
    #[error("connection lost: {0}")]
    Connection(io::Error),
    /// Reading the input failed.
    #[error("cannot read input: {0}")]
    Input(io::Error),
    /// Writing the output failed.
    #[error("cannot write output: {0}")]
    Output(io::Error),
}

/// What the writer thread ended with.
enum WriterEnd {
    Done,
    Input(io::Error),
    Connection(io::Error),
}

fn write_input<R: Read>(input: R, sock: &TcpStream, interactive: bool) -> WriterEnd {
    let end = write_input_inner(input, sock, interactive);
    if let WriterEnd::Input(_) = end {
        // No end marker: the server sees a dropped session and closes it,
        // which ends the reply loop.
        let _ = sock.shutdown(Shutdown::Write);
    }
    end
}

fn write_input_inner<R: Read>(mut input: R, mut sock: &TcpStream, interactive: bool) -> WriterEnd {
    if interactive {
        let mut input = BufReader::new(input);
        let mut line = Vec::new();
        loop {
            line.clear();
            match input.read_until(b'\n', &mut line) {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return WriterEnd::Input(e),
            }
            if line.last() != Some(&b'\n') {
                line.push(b'\n');
            }
            line.extend_from_slice(SYNC_MARKER);
            if let Err(e) = sock.write_all(&line) {
                return WriterEnd::Connection(e);
            }
        }
    } else {
        let mut buf = vec![0u8; 256 * 1024];
        let mut last = b'\n';
        loop {
            let n = match input.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return WriterEnd::Input(e),
            };
            last = buf[n - 1];
            if let Err(e) = sock.write_all(&buf[..n]) {
                return WriterEnd::Connection(e);
            }
        }
        if last != b'\n' {
            if let Err(e) = sock.write_all(b"\n") {
                return WriterEnd::Connection(e);
            }
        }
    }
    if let Err(e) = sock.write_all(END_MARKER) {
        return WriterEnd::Connection(e);
    }
    let _ = sock.shutdown(Shutdown::Write);
    WriterEnd::Done
}

/// Sends `input` over `stream` and writes the replies to `output` (the
/// framing markers are not shown). Returns once the server answered the end
/// marker (or a `quit`); fails if the connection drops before that.
pub fn run_client<R, W>(
    stream: TcpStream,
    input: R,
    mut output: W,
    opts: ClientOptions,
) -> Result<(), ClientError>
where
    R: Read + Send + 'static,
    W: Write,
{
    let _ = stream.set_nodelay(true);
    let sock = stream.try_clone().map_err(ClientError::Connection)?;
    let interactive = opts.interactive;
    let writer = thread::Builder::new()
        .name("lamina-client-writer".into())
        .spawn(move || write_input(input, &sock, interactive))
        .map_err(ClientError::Connection)?;

    let show_prompt = opts.interactive && opts.prompt;
    let prompt = |output: &mut W| -> Result<(), ClientError> {
        output.flush().map_err(ClientError::Output)?;
        if show_prompt {
            let mut err = io::stderr();
            let _ = err.write_all(PROMPT.as_bytes());
            let _ = err.flush();
        }
        Ok(())
    };
    prompt(&mut output)?;

    let bye = &BYE_REPLY[..BYE_REPLY.len() - 1];
    let sync = &SYNC_REPLY[..SYNC_REPLY.len() - 1];
    let mut reader = &stream;
    let mut buf: Vec<u8> = vec![0; 256 * 1024];
    let mut start = 0;
    let mut end = 0;
    let mut clean = false;
    'outer: loop {
        if start > 0 {
            buf.copy_within(start..end, 0);
            end -= start;
            start = 0;
        }
        if end == buf.len() {
            // A reply line longer than the buffer.
            buf.resize(buf.len() * 2, 0);
        }
        let n = match reader.read(&mut buf[end..]) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                output.flush().map_err(ClientError::Output)?;
                return Err(ClientError::Connection(e));
            }
        };
        end += n;
        while let Some(i) = memchr::memchr(b'\n', &buf[start..end]) {
            let line = &buf[start..start + i];
            if line.first() == Some(&b'@') {
                if line == bye {
                    clean = true;
                    break 'outer;
                }
                if line == sync {
                    start += i + 1;
                    prompt(&mut output)?;
                    continue;
                }
            }
            output
                .write_all(&buf[start..start + i + 1])
                .map_err(ClientError::Output)?;
            start += i + 1;
        }
        output.flush().map_err(ClientError::Output)?;
    }
    output.flush().map_err(ClientError::Output)?;
    if !clean {
        // Prefer the writer's own error if it has one (soon) ready.
        for _ in 0..50 {
            if writer.is_finished() {
                break;
            }
            thread::sleep(std::time::Duration::from_millis(2));
        }
        if writer.is_finished() {
            match writer.join() {
                Ok(WriterEnd::Connection(e)) => return Err(ClientError::Connection(e)),
                Ok(WriterEnd::Input(e)) => return Err(ClientError::Input(e)),
                Ok(WriterEnd::Done) | Err(_) => {}
            }
        }
        return Err(ClientError::ConnectionClosed);
    }
    if show_prompt {
        let _ = io::stderr().write_all(b"\n");
    }
    // After `@bye` the writer has either finished or (after an interactive
    // `quit`) waits for input that no longer matters.
    if writer.is_finished() {
        match writer.join() {
            Ok(WriterEnd::Input(e)) => return Err(ClientError::Input(e)),
            Ok(WriterEnd::Done | WriterEnd::Connection(_)) | Err(_) => {}
        }
    }
    Ok(())
}
