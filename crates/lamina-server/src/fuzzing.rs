//! Entry points for fuzzing the DSL parser, the server's command loop, the
//! Redis protocol's request parser and the line paths' refusal of HTTP
//! requests (used by the `fuzz/` cargo-fuzz targets and by the corpus
//! replay test).
//! Whatever the bytes, each returns normally: `ERROR` replies are correct
//! answers, a panic or hang is a bug. Not part of the crate's API.

use std::io::{self, Read};
use std::ops::Bound;
use std::sync::Arc;

use lamina::vfs::mem::MemFs;
use lamina::{Db, Options};

use crate::exec::{Control, Mode, Session};
use crate::lines::{Line, LineReader};
use crate::parse::{parse_line, Command};
use crate::request_budget::RequestBudget;
use crate::resp::{
    drain_requests, parse_request, Args, Conn, Drained, Incoming, Pending, Request, RequestParser,
    RespState,
};
use crate::stream::drain_lines;

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
    let Some(db) = small_db() else {
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

/// A fresh in-memory database with small buffers, so flushes and
/// compactions happen.
fn small_db() -> Option<Db> {
    let mut opts = Options::default();
    opts.vfs = Arc::new(MemFs::new());
    opts.write_buffer_size = 4 * 1024;
    opts.target_file_size = 4 * 1024;
    opts.block_size = 512;
    Db::open("/db", opts).ok()
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

/// The head of what a web page makes a browser send to 127.0.0.1 without
/// a preflight: a `text/plain` POST, its body the page's commands.
const HTTP_HEAD: &[u8] =
    b"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: text/plain\r\nContent-Length: 99\r\n\r\n";

/// Splices an HTTP request's head into `data` (after its first two bytes:
/// the size of the pieces reads return, and where the head goes, as a
/// fraction of the rest) at the start of a line, and feeds it to the two
/// line paths of the network as their connections do: a DSL session
/// ([`drain_lines`]) and the Redis port's requests (inline and arrays).
/// Whatever comes before and after the head, nothing after it may run:
/// the database ends as the input cut at the head leaves it, and the DSL
/// session always ends there at the latest (the Redis port too, when the
/// head starts a request rather than the middle of an array's bulk).
pub fn http_sniff(data: &[u8]) {
    let [piece, at, rest @ ..] = data else {
        return;
    };
    let piece = usize::from(*piece).max(1);
    let (before, after) = rest.split_at(usize::from(*at) * rest.len() / 255);

    let cut = [before, b"\n"].concat();
    let attacked = [&cut[..], HTTP_HEAD, after].concat();
    let (Some((ctl, contents)), Some((_, alone))) =
        (dsl_lines(&attacked, piece), dsl_lines(&cut, piece))
    else {
        return;
    };
    assert_ne!(
        ctl,
        Control::Continue,
        "the DSL session went on past the head"
    );
    assert_eq!(
        contents, alone,
        "the DSL session ran what followed the head"
    );

    let cut = [before, b"\r\n"].concat();
    let attacked = [&cut[..], HTTP_HEAD, after].concat();
    let (Some((ended, contents, _)), Some((alone_ended, alone, unfinished))) =
        (resp_requests(&attacked, piece), resp_requests(&cut, piece))
    else {
        return;
    };
    // An array left unfinished before the head takes it as its bytes.
    if !unfinished {
        if alone_ended == Drained::More {
            assert_eq!(ended, Drained::Http, "the Redis port went on past the head");
        }
        assert_eq!(contents, alone, "the Redis port ran what followed the head");
    }
}

/// Every key and value of `db`, then closes it.
type Contents = Vec<(Vec<u8>, Vec<u8>)>;

fn contents_of(db: Db) -> Option<Contents> {
    let contents = db
        .scan(Bound::Unbounded, Bound::Unbounded)
        .ok()?
        .collect::<lamina::Result<Contents>>()
        .ok();
    let _ = db.close();
    contents
}

/// A reader that returns at most `piece` bytes a read.
struct Pieces<'a> {
    data: &'a [u8],
    piece: usize,
}

impl Read for Pieces<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.piece.min(buf.len()).min(self.data.len());
        let (now, later) = self.data.split_at(n);
        buf[..n].copy_from_slice(now);
        self.data = later;
        Ok(n)
    }
}

/// `input` through a network DSL session as a connection runs it: how it
/// ended and what the database holds after.
fn dsl_lines(input: &[u8], piece: usize) -> Option<(Control, Contents)> {
    let db = small_db()?;
    let mut ctl = Control::Continue;
    {
        let mut session = Session::new(&db, Mode::Network);
        let mut lines = LineReader::new(MAX_LINE, 61);
        let mut reader = Pieces { data: input, piece };
        let (mut out, mut sent) = (Vec::new(), Vec::new());
        while ctl == Control::Continue && lines.fill(&mut reader).is_ok_and(|n| n > 0) {
            ctl = drain_lines(&mut session, &mut lines, &mut out, &mut sent, None).ok()?;
            session.apply_pending(&mut out);
            sent.append(&mut out);
        }
    }
    Some((ctl, contents_of(db)?))
}

/// `input` through the Redis port's request loop: how it ended, what the
/// database holds after, and whether a request was left unfinished.
fn resp_requests(input: &[u8], piece: usize) -> Option<(Drained, Contents, bool)> {
    let db = Arc::new(small_db()?);
    let state = RespState::new(Arc::clone(&db), false);
    let mut incoming = Incoming::new(
        LineReader::new(MAX_LINE, 61),
        Arc::new(RequestBudget::new(usize::MAX)).share(),
        Conn::new(&state, None, None),
    );
    let mut reader = Pieces { data: input, piece };
    let mut pending = Pending::default();
    let (mut out, mut sent) = (Vec::new(), Vec::new());
    let mut ended = Drained::More;
    while ended == Drained::More && incoming.input.fill(&mut reader).is_ok_and(|n| n > 0) {
        let mut sink = |bytes: &[u8]| {
            sent.extend_from_slice(bytes);
            Ok(())
        };
        ended = drain_requests(
            &state,
            &mut incoming,
            &mut pending,
            &mut out,
            &mut sink,
            None,
        )
        .ok()?;
        pending.apply(&state, &mut out);
        sent.append(&mut out);
    }
    let unfinished = incoming.input.has_partial();
    drop(state);
    Some((ended, contents_of(Arc::into_inner(db)?)?, unfinished))
}
