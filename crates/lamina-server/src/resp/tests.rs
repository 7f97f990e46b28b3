//! Unit tests of the Redis protocol: request parsing and command replies.

use super::*;

/// The arguments of the command at the front of `buf`, copied out
/// (`None`: incomplete), and the bytes it used.
fn command(buf: &[u8]) -> (Option<Vec<Vec<u8>>>, usize) {
    match parse_request(buf).unwrap() {
        (Request::Command(args), used) => {
            let args = args.resolve(buf).into_iter().map(<[u8]>::to_vec);
            (Some(args.collect()), used)
        }
        (Request::Incomplete, used) => (None, used),
    }
}

#[test]
fn requests_parse_in_both_framings_and_wait_for_more() {
    let r = b"*2\r\n$3\r\nGET\r\n$3\r\na\x00b\r\nPING\r\n";
    let (req, used) = command(r);
    assert_eq!(req, Some(vec![b"GET".to_vec(), b"a\x00b".to_vec()]));
    let (req, used2) = command(&r[used..]);
    assert_eq!(req, Some(vec![b"PING".to_vec()]));
    assert_eq!(used + used2, r.len());
    for cut in 1..r.len() - 6 {
        assert_eq!(
            parse_request(&r[..cut]).unwrap().0,
            Request::Incomplete,
            "{cut}"
        );
    }
    let (req, _) = command(b"set 'a b' \"c\\x41\\n\"\r\n");
    assert_eq!(
        req,
        Some(vec![b"set".to_vec(), b"a b".to_vec(), b"cA\n".to_vec()])
    );
    assert!(parse_request(b"*1\r\n$x\r\n").is_err());
    assert!(parse_request(b"*1\r\n$1\r\nab\r\n").is_err());
    assert!(parse_request(b"*1\r\n:1\r\n").is_err());
    assert!(parse_request(b"set \"a\r\n").is_err());
    assert!(parse_request(b"*99999999999\r\n").is_err());
}

#[test]
fn hostile_requests_are_refused_before_they_are_buffered() {
    // A line that never ends, as an inline command or as a count.
    let endless = vec![b'a'; MAX_INLINE + 1];
    assert!(parse_request(&endless).is_err());
    let mut count = b"*".to_vec();
    count.extend(vec![b'9'; MAX_INLINE + 1]);
    assert!(parse_request(&count).is_err());
    // A bulk announced past the request bound, or negative.
    let huge = format!("*1\r\n${}\r\n", MAX_REQUEST + 1);
    assert!(parse_request(huge.as_bytes()).is_err());
    assert!(parse_request(b"*1\r\n$-5\r\n").is_err());
    // Too many arguments.
    let many = format!("*{}\r\n", MAX_ARGS + 1);
    assert!(parse_request(many.as_bytes()).is_err());
    // Within the bounds, an announced bulk only waits for its bytes,
    // and tells how many the request needs (4 + 7 + 1000 + 2).
    let mut parser = RequestParser::default();
    let waiting = parser.parse(b"*1\r\n$1000\r\nab").unwrap();
    assert_eq!(waiting.0, Request::Incomplete);
    assert_eq!(parser.awaited(), 1013);
}

#[test]
fn the_metrics_count_every_command_of_the_table() {
    let mut table: Vec<&str> = table::COMMANDS.iter().map(|c| c.name).collect();
    let mut counted = crate::protocol::RESP_COMMANDS.to_vec();
    table.sort_unstable();
    counted.sort_unstable();
    assert_eq!(table, counted);
}

#[test]
fn integers_parse_as_redis_reads_them() {
    for (s, want) in [
        (&b"0"[..], Some(0)),
        (b"-1", Some(-1)),
        (b"9223372036854775807", Some(i64::MAX)),
        (b"-9223372036854775808", Some(i64::MIN)),
        (b"9223372036854775808", None),
        (b"007", None),
        (b"-0", None),
        (b"+1", None),
        (b" 1", None),
        (b"1 ", None),
        (b"", None),
        (b"-", None),
        (b"1e3", None),
    ] {
        assert_eq!(keys::parse_i64(s), want, "{s:?}");
    }
}
