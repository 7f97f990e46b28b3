//! `lamina serve --metrics`: scraped with curl, checked line by line
//! against the text exposition format, and its counts against what the
//! test sent.
#![expect(clippy::unwrap_used, reason = "a test may panic on a failed setup")]

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::{Duration, Instant};

use common::ServerProc;

/// `GET url` with curl: (HTTP status, body).
fn curl(url: &str) -> (u16, String) {
    let out = Command::new("curl")
        .args(["-s", "-w", "\n%{http_code}", url])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    let (body, code) = text.rsplit_once('\n').unwrap();
    (code.parse().unwrap(), body.to_string())
}

fn is_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

/// Checks the text exposition format (version 0.0.4) and returns the
/// samples: `name{labels}` → value.
fn parse_exposition(body: &str) -> BTreeMap<String, f64> {
    let mut typed: BTreeMap<String, String> = BTreeMap::new();
    let mut helped = BTreeSet::new();
    let mut samples = BTreeMap::new();
    for line in body.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, _) = rest.split_once(' ').unwrap();
            assert!(is_name(name), "{line}");
            assert!(helped.insert(name.to_string()), "HELP twice: {line}");
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap();
            assert!(is_name(name), "{line}");
            assert!(
                ["counter", "gauge", "summary", "histogram", "untyped"].contains(&kind),
                "{line}"
            );
            assert!(
                typed.insert(name.into(), kind.into()).is_none(),
                "TYPE twice: {line}"
            );
        } else {
            assert!(!line.starts_with('#') && !line.is_empty(), "{line:?}");
            let (series, value) = line.rsplit_once(' ').unwrap();
            let value: f64 = match value {
                "+Inf" => f64::INFINITY,
                "-Inf" => f64::NEG_INFINITY,
                v => v.parse().unwrap_or_else(|_| panic!("bad value: {line}")),
            };
            let name = series.split('{').next().unwrap();
            assert!(is_name(name), "{line}");
            if let Some(labels) = series.strip_prefix(name) {
                if !labels.is_empty() {
                    let inner = labels.strip_prefix('{').unwrap().strip_suffix('}').unwrap();
                    for pair in inner.split("\",") {
                        let (k, v) = pair.split_once("=\"").unwrap();
                        assert!(is_name(k), "{line}");
                        assert!(!v.trim_end_matches('"').contains('"'), "{line}");
                    }
                }
            }
            // A sample belongs to a declared family (summaries add _sum
            // and _count).
            let family = [
                name,
                name.trim_end_matches("_sum"),
                name.trim_end_matches("_count"),
            ]
            .into_iter()
            .find(|f| typed.contains_key(*f))
            .unwrap_or_else(|| panic!("no TYPE for {line}"));
            assert!(typed[family] != "counter" || value >= 0.0, "{line}");
            assert!(
                samples.insert(series.to_string(), value).is_none(),
                "twice: {line}"
            );
        }
    }
    samples
}

#[test]
fn scraped_metrics_follow_the_format_and_count_what_was_sent() {
    let tmp = tempfile::tempdir().unwrap();
    let mut server = ServerProc::start(
        &tmp.path().join("db"),
        &["--metrics", "127.0.0.1:0", "--resp", "0"],
    );
    let mut addrs = BTreeMap::new();
    let mut line = String::new();
    while addrs.len() < 2 {
        line.clear();
        assert!(server.stdout.read_line(&mut line).unwrap() > 0);
        for (prefix, key) in [
            ("lamina: redis protocol on ", "resp"),
            ("lamina: metrics on http://", "metrics"),
        ] {
            if let Some(a) = line.trim().strip_prefix(prefix) {
                addrs.insert(key, a.trim_end_matches("/metrics").to_string());
            }
        }
    }
    let url = format!("http://{}/metrics", addrs["metrics"]);

    // 120 puts, 7 gets, 2 bad lines on the DSL port.
    let mut dsl = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    let mut wire = String::new();
    for i in 0..120 {
        wire.push_str(&format!("p {i} {}\n", i * 2));
    }
    for i in 0..7 {
        wire.push_str(&format!("g {i}\n"));
    }
    wire.push_str("frobnicate 1\np x y\n@end\n");
    dsl.write_all(wire.as_bytes()).unwrap();
    let mut replies = String::new();
    dsl.read_to_string(&mut replies).unwrap();
    assert!(replies.ends_with("@bye\n"), "{replies}");
    // Three Redis commands, one of them unknown.
    let mut resp = TcpStream::connect(addrs["resp"].as_str()).unwrap();
    resp.write_all(b"PING\r\nSET a b\r\nNOPE\r\nQUIT\r\n")
        .unwrap();
    let mut r = String::new();
    resp.read_to_string(&mut r).unwrap();
    assert!(r.starts_with("+PONG\r\n+OK\r\n-ERR unknown command"), "{r}");

    // Connections are counted closed once their threads end.
    let deadline = Instant::now() + Duration::from_secs(10);
    let samples = loop {
        let (code, body) = curl(&url);
        assert_eq!(code, 200);
        let s = parse_exposition(&body);
        let active = |p: &str| s[&format!("lamina_server_connections_active{{protocol=\"{p}\"}}")];
        if (active("dsl") == 0.0 && active("resp") == 0.0) || Instant::now() > deadline {
            break s;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let get = |k: &str| *samples.get(k).unwrap_or_else(|| panic!("no {k}"));
    assert_eq!(
        get(r#"lamina_server_commands_total{protocol="dsl",command="p"}"#),
        121.0
    );
    assert_eq!(
        get(r#"lamina_server_commands_total{protocol="dsl",command="g"}"#),
        7.0
    );
    assert_eq!(
        get(r#"lamina_server_commands_total{protocol="dsl",command="other"}"#),
        1.0
    );
    assert_eq!(
        get(r#"lamina_server_commands_total{protocol="dsl",command="@end"}"#),
        1.0
    );
    assert_eq!(get(r#"lamina_server_errors_total{protocol="dsl"}"#), 2.0);
    assert_eq!(
        get(r#"lamina_server_connections_total{protocol="dsl"}"#),
        1.0
    );
    assert_eq!(
        get(r#"lamina_server_connections_active{protocol="dsl"}"#),
        0.0
    );
    assert_eq!(
        get(r#"lamina_server_commands_total{protocol="resp",command="ping"}"#),
        1.0
    );
    assert_eq!(
        get(r#"lamina_server_commands_total{protocol="resp",command="other"}"#),
        1.0
    );
    assert_eq!(get(r#"lamina_server_errors_total{protocol="resp"}"#), 1.0);
    assert_eq!(
        get(r#"lamina_server_connections_total{protocol="resp"}"#),
        1.0
    );
    // The engine: 120 DSL puts and one Redis SET, 7 lookups.
    assert_eq!(get("lamina_writes_total"), 121.0);
    assert_eq!(get("lamina_gets_total"), 7.0);
    assert_eq!(get("lamina_get_hits_total"), 7.0);
    assert_eq!(get(r#"lamina_latency_seconds_count{op="get"}"#), 7.0);
    let p50 = get(r#"lamina_latency_seconds{op="get",quantile="0.5"}"#);
    let p99 = get(r#"lamina_latency_seconds{op="get",quantile="0.99"}"#);
    assert!(p50 > 0.0 && p50 <= p99, "{p50} {p99}");

    let (code, _) = curl(&format!("http://{}/other", addrs["metrics"]));
    assert_eq!(code, 404);
    server.stop();
}
