//! Entry points for fuzzing the DSL parser, the server's command loop and
//! the Redis protocol's request parser
//! (used by the `fuzz/` cargo-fuzz targets and by the corpus replay test).
//! Whatever the bytes, each returns normally: `ERROR` replies are correct
//! answers, a panic or hang is a bug. Not part of the crate's API.

use std::sync::Arc;

use lamina::vfs::mem::MemFs;
use lamina::{Db, Options};

use crate::exec::{Control, Mode, Session};
use crate::lines::{Line, LineReader};
use crate::parse::{parse_line, Command};
use crate::resp::{parse_request, Args, Request, RequestParser};

/// Line limit of the fuzzed command loop: short, so over-long lines are
/// cheap to produce.
const MAX_LINE: usize = 256;

/// Parses `data` as one DSL line.
pub fn parse(data: &[u8]) {
    let _ = parse_line(data);
}

/// Runs `data` as a network session's input through the line reader and
/// the executor against a fresh in-memory database (small buffers, so
/// flushes and compactions happen), returning the replies. Load lines are
/// skipped: they read files of the real filesystem.
pub fn command_loop(data: &[u8]) -> Vec<u8> {
    let fs = MemFs::new();
    let mut opts = Options::default();
    opts.vfs = Arc::new(fs);
    opts.write_buffer_size = 4 * 1024;
    opts.target_file_size = 4 * 1024;
    opts.block_size = 512;
    let Ok(db) = Db::open("/db", opts) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    {
        let mut session = Session::new(&db, Mode::Network);
        // Short lines and small reads exercise the reader's boundaries.
        let mut lines = LineReader::new(MAX_LINE, 61);
        let mut input = data;
        'read: while lines.fill(&mut input).is_ok_and(|n| n > 0) {
            while let Some(line) = lines.next_line() {
                let control = match line {
                    Line::Complete(b) if matches!(parse_line(b), Ok(Command::Load(_))) => {
                        Control::Continue
                    }
                    Line::Complete(b) => session.execute_line(b, &mut out),
                    Line::TooLong => {
                        session.line_too_long(&mut out, MAX_LINE);
                        Control::Continue
                    }
                };
                if control != Control::Continue {
                    break 'read;
                }
            }
            session.apply_pending(&mut out);
        }
        session.apply_pending(&mut out);
    }
    let _ = db.close();
    out
}

/// What a RESP connection makes of a byte stream: its commands in order,
/// then the protocol error that ended it, if one did.
type RespStream = (Vec<Vec<Vec<u8>>>, Option<String>);

/// Parses `data` (after its first byte) as a Redis-port connection's
/// input, as the server does, twice: whole, and arriving in pieces of the
/// first byte's size (the parser resuming an incomplete request). Both
/// must give the same commands and the same error; every command, encoded
/// again as a RESP array, must parse back to itself.
pub fn resp(data: &[u8]) {
    let Some((&piece, data)) = data.split_first() else {
        return;
    };
    let whole = resp_stream(data, data.len().max(1));
    let pieced = resp_stream(data, usize::from(piece).max(1));
    assert_eq!(whole, pieced, "pieces of {piece}");
    for args in whole.0 {
        let mut encoded = format!("*{}\r\n", args.len()).into_bytes();
        for a in &args {
            encoded.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            encoded.extend_from_slice(a);
            encoded.extend_from_slice(b"\r\n");
        }
        let parsed = parse_request(&encoded).map(|(r, used)| match r {
            Request::Command(again) => (Some(owned(&again, &encoded)), used),
            Request::Incomplete => (None, used),
        });
        // An empty command encodes as `*0`, which parses as the same.
        assert_eq!(parsed, Ok((Some(args), encoded.len())));
    }
}

/// A parsed command's arguments, copied out of the buffer it was parsed from.
fn owned(args: &Args, buf: &[u8]) -> Vec<Vec<u8>> {
    args.resolve(buf).into_iter().map(<[u8]>::to_vec).collect()
}

/// The commands and the error of `data` arriving `piece` bytes at a time.
fn resp_stream(data: &[u8], piece: usize) -> RespStream {
    let mut parser = RequestParser::default();
    let mut commands = Vec::new();
    let mut start = 0;
    let mut end = 0;
    while end < data.len() {
        end = (end + piece).min(data.len());
        loop {
            match parser.parse(&data[start..end]) {
                Ok((Request::Incomplete, _)) => break,
                Ok((Request::Command(args), used)) => {
                    commands.push(owned(&args, &data[start..end]));
                    start += used;
                }
                Err(e) => return (commands, Some(e)),
            }
        }
    }
    (commands, None)
}
