//! Cross-protocol requests: a web page can make a browser send an HTTP
//! request with a `text/plain` body to any port on 127.0.0.1 without a
//! preflight, and a line protocol that executed the body would run the
//! page's commands. Every line protocol (the DSL, the Redis port's inline
//! commands, the spatial commands, the cluster's client port) closes the
//! connection, executing nothing further, at a line that [`is_http`] says
//! belongs to an HTTP request, as Redis does since 3.2.7.

/// HTTP methods whose request line `METHOD /target HTTP/1.x` closes a
/// connection (`POST` does with any target).
const METHODS: [&[u8]; 9] = [
    b"GET", b"POST", b"PUT", b"DELETE", b"HEAD", b"OPTIONS", b"PATCH", b"CONNECT", b"TRACE",
];

/// Whether `line` (without its newline; a trailing `\r` is allowed) is part
/// of an HTTP request: a `POST` line, a request line `METHOD TARGET
/// HTTP/...`, or a `Host:` header line, in any letter case. No command of
/// lamina's line protocols starts so.
pub fn is_http(line: &[u8]) -> bool {
    let line = line.trim_ascii_start();
    if starts_with_ignore_case(line, b"host:") {
        return true;
    }
    let mut words = line
        .split(|b| b.is_ascii_whitespace())
        .filter(|w| !w.is_empty());
    let Some(method) = words.next() else {
        return false;
    };
    if method.eq_ignore_ascii_case(b"POST") {
        return true;
    }
    if !METHODS.iter().any(|m| method.eq_ignore_ascii_case(m)) {
        return false;
    }
    let (Some(_target), Some(version), None) = (words.next(), words.next(), words.next()) else {
        return false;
    };
    starts_with_ignore_case(version, b"HTTP/")
}

fn starts_with_ignore_case(s: &[u8], prefix: &[u8]) -> bool {
    s.get(..prefix.len())
        .is_some_and(|head| head.eq_ignore_ascii_case(prefix))
}

/// The log line for a connection closed by [`is_http`].
pub const HTTP_REFUSED: &str =
    "possible cross-protocol attack: an HTTP request on a line-protocol port; connection closed";

#[cfg(test)]
mod tests {
    use super::is_http;

    #[test]
    fn what_a_browser_sends_is_refused() {
        for line in [
            &b"POST / HTTP/1.1"[..],
            b"POST /anything HTTP/1.0\r",
            b"post /x",
            b"POST",
            b"GET / HTTP/1.1\r",
            b"get /metrics http/1.0",
            b"PUT /k HTTP/1.1",
            b"Host: 127.0.0.1:6380\r",
            b"host:x",
            b"   Host: a",
        ] {
            assert!(is_http(line), "{}", String::from_utf8_lossy(line));
        }
    }

    #[test]
    fn commands_of_the_line_protocols_pass() {
        for line in [
            &b"GET key"[..],
            b"GET / x",
            b"get a b",
            b"p 10 100",
            b"g 10",
            b"r 0 100",
            b"SET host: x",
            b"hostname",
            b"i 1 2 3",
            b"",
            b"@end",
            b"SCAN 0 MATCH HTTP/*",
        ] {
            assert!(!is_http(line), "{}", String::from_utf8_lossy(line));
        }
    }
}
