//! Reply encoding in RESP2 and RESP3. The frames both versions share are
//! written the same way; the types RESP3 adds (null `_`, map `%`, set `~`,
//! verbatim string `=`) fall back to RESP2's (`$-1`, a flat array of
//! pairs, an array, a bulk string) on a connection that has not said
//! `HELLO 3`.

/// The protocol version a connection speaks (`HELLO 2` or `HELLO 3`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Proto {
    /// RESP2, what every connection starts in.
    #[default]
    Resp2,
    /// RESP3, after `HELLO 3`.
    Resp3,
}

impl Proto {
    /// The version's number, as `HELLO` names it.
    pub fn number(self) -> i64 {
        match self {
            Proto::Resp2 => 2,
            Proto::Resp3 => 3,
        }
    }
}

fn header(out: &mut Vec<u8>, kind: u8, n: usize) {
    out.push(kind);
    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
    out.extend_from_slice(b"\r\n");
}

pub(super) fn simple(out: &mut Vec<u8>, s: &str) {
    out.push(b'+');
    out.extend_from_slice(s.as_bytes());
    out.extend_from_slice(b"\r\n");
}

/// An error reply; its line breaks become blanks (a reply is one line).
pub(super) fn error(out: &mut Vec<u8>, s: &str) {
    out.push(b'-');
    out.extend(
        s.bytes()
            .map(|b| if b == b'\r' || b == b'\n' { b' ' } else { b }),
    );
    out.extend_from_slice(b"\r\n");
}

pub(super) fn integer(out: &mut Vec<u8>, n: i64) {
    out.push(b':');
    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
    out.extend_from_slice(b"\r\n");
}

pub(super) fn bulk(out: &mut Vec<u8>, b: &[u8]) {
    header(out, b'$', b.len());
    out.extend_from_slice(b);
    out.extend_from_slice(b"\r\n");
}

pub(super) fn array(out: &mut Vec<u8>, n: usize) {
    header(out, b'*', n);
}

/// A missing value: RESP2's nil bulk string, RESP3's null.
pub(super) fn null(out: &mut Vec<u8>, proto: Proto) {
    out.extend_from_slice(match proto {
        Proto::Resp2 => b"$-1\r\n",
        Proto::Resp3 => b"_\r\n",
    });
}

/// A missing array (`EXEC` aborted by `WATCH`): RESP2's nil array, RESP3's
/// null.
pub(super) fn null_array(out: &mut Vec<u8>, proto: Proto) {
    out.extend_from_slice(match proto {
        Proto::Resp2 => b"*-1\r\n",
        Proto::Resp3 => b"_\r\n",
    });
}

pub(super) fn maybe_bulk(out: &mut Vec<u8>, v: Option<&[u8]>, proto: Proto) {
    match v {
        Some(v) => bulk(out, v),
        None => null(out, proto),
    }
}

/// A map of `n` pairs (the `2n` elements follow): RESP3's map, RESP2's
/// flat array.
pub(super) fn map(out: &mut Vec<u8>, n: usize, proto: Proto) {
    match proto {
        Proto::Resp2 => header(out, b'*', 2 * n),
        Proto::Resp3 => header(out, b'%', n),
    }
}

/// A set of `n` elements: RESP3's set, RESP2's array.
pub(super) fn set(out: &mut Vec<u8>, n: usize, proto: Proto) {
    match proto {
        Proto::Resp2 => header(out, b'*', n),
        Proto::Resp3 => header(out, b'~', n),
    }
}

/// Text for a person (`INFO`): RESP3's verbatim string of format `txt`,
/// RESP2's bulk string.
pub(super) fn verbatim(out: &mut Vec<u8>, text: &str, proto: Proto) {
    match proto {
        Proto::Resp2 => bulk(out, text.as_bytes()),
        Proto::Resp3 => {
            header(out, b'=', text.len() + 4);
            out.extend_from_slice(b"txt:");
            out.extend_from_slice(text.as_bytes());
            out.extend_from_slice(b"\r\n");
        }
    }
}
