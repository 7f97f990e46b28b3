//! Request parsing: RESP arrays of bulk strings, read in place, and
//! inline commands, resumed across reads by a [`RequestParser`].

use std::ops::Range;

/// Largest request (one command and its arguments), bytes.
pub const MAX_REQUEST: usize = 64 << 20;
/// Most arguments of one command.
pub const MAX_ARGS: usize = 1 << 20;
/// Longest inline command line.
pub(super) const MAX_INLINE: usize = 64 << 10;

/// One parsed request.
#[derive(Debug, PartialEq, Eq)]
pub enum Request {
    /// A command and its arguments.
    Command(Args),
    /// More bytes are needed.
    Incomplete,
}

/// A command's arguments, by where they lie: a RESP array's bulk strings
/// as ranges of the buffer the request was parsed from (read in place, not
/// copied: a request costs its size once), an inline command's words as
/// ranges of bytes of their own (unquoted, unescaped; an inline command is
/// at most 64 KiB).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Args {
    spans: Vec<Range<usize>>,
    /// The words of an inline command, which `spans` index (`None`: they
    /// index the parsed buffer).
    words: Option<Vec<u8>>,
}

impl Args {
    /// The arguments, given the buffer the request was parsed from (its
    /// bytes from the request's first).
    pub fn resolve<'a>(&'a self, buf: &'a [u8]) -> Vec<&'a [u8]> {
        let source = self.words.as_deref().unwrap_or(buf);
        self.spans
            .iter()
            .map(|r| source.get(r.clone()).unwrap_or_default())
            .collect()
    }
}

/// Parses one request from the front of `buf`: the request and the bytes it
/// used, or a protocol error. A fresh [`RequestParser`]: for one-off
/// parsing; a connection keeps its parser across reads.
pub fn parse_request(buf: &[u8]) -> Result<(Request, usize), String> {
    RequestParser::default().parse(buf)
}

/// Parses requests that arrive in pieces: a request of many arguments
/// that is still incomplete is resumed after the last whole argument, so
/// it is parsed once however many reads bring it (re-parsing from the
/// start on every read made a client trickling a 1,000,000-argument
/// request cost the server time quadratic in its length).
#[derive(Debug, Default)]
pub struct RequestParser {
    /// Arguments the `*N` header announced (0: no header read yet).
    announced: usize,
    /// The arguments read so far, as ranges of the buffer.
    args: Vec<Range<usize>>,
    /// Where the next argument starts in the buffer.
    pos: usize,
    /// The bytes the request needs at least, from its start, as far as
    /// the bulk string being read announced (0: not known).
    awaited: usize,
}

impl RequestParser {
    /// Parses one request from the front of `buf`, which must start with
    /// the same bytes as in the previous call until that call returns a
    /// [`Request::Command`] or an error (the bytes used are consumed only
    /// then). The request and the bytes it used, or a protocol error.
    pub fn parse(&mut self, buf: &[u8]) -> Result<(Request, usize), String> {
        self.awaited = 0;
        let parsed = self.resume(buf);
        if !matches!(parsed, Ok((Request::Incomplete, _))) {
            *self = RequestParser::default();
        }
        parsed
    }

    /// After [`Request::Incomplete`]: how long the request will be at
    /// least, from its first byte, as the length of the bulk string it is
    /// in the middle of says (0 when no length is pending), so the reader
    /// can make room for it at once.
    pub fn awaited(&self) -> usize {
        self.awaited
    }

    fn resume(&mut self, buf: &[u8]) -> Result<(Request, usize), String> {
        if self.announced == 0 {
            let Some(&first) = buf.first() else {
                return Ok((Request::Incomplete, 0));
            };
            if first != b'*' {
                return parse_inline(buf);
            }
            let Some((count, pos)) = int_line(buf, 1, MAX_INLINE)? else {
                return Ok((Request::Incomplete, 0));
            };
            if count <= 0 {
                // `*0` and `*-1` are empty requests Redis skips.
                return Ok((Request::Command(Args::default()), pos));
            }
            let count =
                usize::try_from(count).map_err(|_| "invalid multibulk length".to_string())?;
            if count > MAX_ARGS {
                return Err("invalid multibulk length".into());
            }
            self.announced = count;
            self.args = Vec::with_capacity(count.min(1024));
            self.pos = pos;
        }
        while self.args.len() < self.announced {
            let pos = self.pos;
            match buf.get(pos) {
                None => return Ok((Request::Incomplete, 0)),
                Some(b'$') => {}
                Some(&b) => {
                    return Err(format!("expected '$', got '{}'", char::from(b)));
                }
            }
            let Some((len, at)) = int_line(buf, pos + 1, MAX_INLINE)? else {
                return Ok((Request::Incomplete, 0));
            };
            let len = usize::try_from(len)
                .ok()
                .filter(|&l| l <= MAX_REQUEST)
                .ok_or_else(|| "invalid bulk length".to_string())?;
            let end = at + len;
            if buf.len() < end + 2 {
                self.awaited = end + 2;
                return Ok((Request::Incomplete, 0));
            }
            if &buf[end..end + 2] != b"\r\n" {
                return Err("bulk string not terminated by CRLF".into());
            }
            self.args.push(at..end);
            self.pos = end + 2;
        }
        let args = Args {
            spans: std::mem::take(&mut self.args),
            words: None,
        };
        Ok((Request::Command(args), self.pos))
    }
}

/// `<integer>\r\n` starting at `from`: the value and the offset after it.
fn int_line(buf: &[u8], from: usize, max: usize) -> Result<Option<(i64, usize)>, String> {
    let rest = buf.get(from..).unwrap_or_default();
    let Some(nl) = rest.iter().take(max).position(|&b| b == b'\n') else {
        if rest.len() >= max {
            return Err("too big count".into());
        }
        return Ok(None);
    };
    let line = rest[..nl].strip_suffix(b"\r").unwrap_or(&rest[..nl]);
    let v = std::str::from_utf8(line)
        .ok()
        .and_then(|s| s.parse::<i64>().ok())
        .ok_or_else(|| "invalid count".to_string())?;
    Ok(Some((v, from + nl + 1)))
}

/// An inline command: words separated by blanks, `"..."` and `'...'`
/// quoting as Redis's inline parser (with `\n`, `\r`, `\t`, `\"`, `\\` and
/// `\xNN` escapes inside double quotes).
fn parse_inline(buf: &[u8]) -> Result<(Request, usize), String> {
    let Some(nl) = buf.iter().take(MAX_INLINE).position(|&b| b == b'\n') else {
        if buf.len() >= MAX_INLINE {
            return Err("too big inline request".into());
        }
        return Ok((Request::Incomplete, 0));
    };
    let line = buf[..nl].strip_suffix(b"\r").unwrap_or(&buf[..nl]);
    let mut words = Vec::new();
    let mut spans = Vec::new();
    let mut i = 0;
    while i < line.len() {
        if line[i].is_ascii_whitespace() {
            i += 1;
            continue;
        }
        let start = words.len();
        match line[i] {
            q @ (b'"' | b'\'') => {
                i += 1;
                loop {
                    let Some(&b) = line.get(i) else {
                        return Err("unbalanced quotes in request".into());
                    };
                    i += 1;
                    if b == q {
                        break;
                    }
                    if b == b'\\' && q == b'"' {
                        let Some(&e) = line.get(i) else {
                            return Err("unbalanced quotes in request".into());
                        };
                        i += 1;
                        words.push(match e {
                            b'n' => b'\n',
                            b'r' => b'\r',
                            b't' => b'\t',
                            b'x' => {
                                let hex = line
                                    .get(i..i + 2)
                                    .and_then(|h| std::str::from_utf8(h).ok())
                                    .and_then(|h| u8::from_str_radix(h, 16).ok())
                                    .ok_or_else(|| "bad \\x escape in request".to_string())?;
                                i += 2;
                                hex
                            }
                            other => other,
                        });
                    } else {
                        words.push(b);
                    }
                }
                if line.get(i).is_some_and(|b| !b.is_ascii_whitespace()) {
                    return Err("unbalanced quotes in request".into());
                }
            }
            _ => {
                while i < line.len() && !line[i].is_ascii_whitespace() {
                    words.push(line[i]);
                    i += 1;
                }
            }
        }
        spans.push(start..words.len());
    }
    let args = Args {
        spans,
        words: Some(words),
    };
    Ok((Request::Command(args), nl + 1))
}
