//! `lamina serve --metrics`: scraped with curl and a raw socket, parsed by
//! a strict parser of the text exposition format written from its
//! specification (version 0.0.4: HELP/TYPE once and before the samples,
//! families contiguous, histogram and summary series, label escaping,
//! Go-style numbers), and checked against what the test sent, against
//! `/proc/PID` of the server read independently, and against the Grafana
//! dashboard under `deploy/`, whose queries may reference only metrics the
//! scrape has.
#![expect(clippy::unwrap_used, reason = "a test may panic on a failed setup")]

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

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

/// One request on a fresh connection: the whole response as text.
fn raw(addr: &str, request: &str) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut r = String::new();
    s.read_to_string(&mut r).unwrap();
    r
}

fn is_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

fn is_label_name(s: &str) -> bool {
    is_name(s) && !s.contains(':')
}

/// A sample's labels, in order.
type Labels = Vec<(String, String)>;

/// A metric family as declared.
#[derive(Debug, Clone, Default)]
struct FamilyDecl {
    kind: String,
    help: String,
}

/// A parsed scrape: families by name, samples by `name{labels}` as
/// written, and each sample's value text.
#[derive(Debug, Default)]
struct Scrape {
    families: BTreeMap<String, FamilyDecl>,
    samples: BTreeMap<String, f64>,
    texts: BTreeMap<String, String>,
    /// (sample name, labels in order, value) in order.
    series: Vec<(String, Labels, f64)>,
}

impl Scrape {
    fn get(&self, series: &str) -> f64 {
        *self
            .samples
            .get(series)
            .unwrap_or_else(|| panic!("no {series}"))
    }
}

/// A value as Go's `strconv.ParseFloat` reads the format's numbers.
fn parse_value(v: &str) -> Option<f64> {
    match v {
        "+Inf" | "Inf" => Some(f64::INFINITY),
        "-Inf" => Some(f64::NEG_INFINITY),
        "NaN" => Some(f64::NAN),
        _ => {
            let ok = v
                .chars()
                .all(|c| c.is_ascii_digit() || matches!(c, '.' | 'e' | 'E' | '+' | '-'));
            ok.then(|| v.parse().ok()).flatten()
        }
    }
}

/// Significant digits of a decimal number's spelling.
fn significant_digits(v: &str) -> usize {
    let mantissa = v.split(['e', 'E']).next().unwrap();
    mantissa
        .chars()
        .filter(char::is_ascii_digit)
        .collect::<String>()
        .trim_start_matches('0')
        .trim_end_matches('0')
        .len()
}

/// Labels of a series `{a="x",b="y"}` (after the name), unescaping
/// values; panics on anything the format does not allow.
fn parse_labels<'a>(line: &str, mut rest: &'a str) -> (Labels, &'a str) {
    let mut labels = Vec::new();
    let Some(r) = rest.strip_prefix('{') else {
        return (labels, rest);
    };
    rest = r;
    loop {
        if let Some(r) = rest.strip_prefix('}') {
            return (labels, r);
        }
        let (name, r) = rest.split_once("=\"").unwrap_or_else(|| panic!("{line}"));
        assert!(is_label_name(name), "label name in {line}");
        let mut value = String::new();
        let mut chars = r.char_indices();
        let end = loop {
            match chars.next() {
                Some((_, '\\')) => match chars.next() {
                    Some((_, '\\')) => value.push('\\'),
                    Some((_, '"')) => value.push('"'),
                    Some((_, 'n')) => value.push('\n'),
                    _ => panic!("bad escape in {line}"),
                },
                Some((i, '"')) => break i,
                Some((_, '\n')) | None => panic!("unterminated label value in {line}"),
                Some((_, c)) => value.push(c),
            }
        };
        assert!(
            labels.iter().all(|(n, _)| n != name),
            "label {name} twice in {line}"
        );
        labels.push((name.to_string(), value));
        rest = &r[end + 1..];
        if let Some(r) = rest.strip_prefix(',') {
            rest = r;
        }
    }
}

/// A HELP text with its escapes (only `\\` and `\n`) undone.
fn unescape_help(line: &str, help: &str) -> String {
    let mut chars = help.chars();
    let mut text = String::new();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some('\\') => text.push('\\'),
                Some('n') => text.push('\n'),
                other => panic!("bad HELP escape {other:?}: {line}"),
            }
        } else {
            text.push(c);
        }
    }
    text
}

/// Parses `body` strictly as the text format (version 0.0.4).
fn parse_exposition(body: &str) -> Scrape {
    let mut scrape = Scrape::default();
    assert!(
        body.ends_with('\n'),
        "the last line must end with a newline"
    );
    let mut current: Option<String> = None;
    let mut finished: BTreeSet<String> = BTreeSet::new();
    let mut helped = BTreeSet::new();
    for line in body.lines() {
        assert!(!line.is_empty(), "empty line");
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').unwrap_or((rest, ""));
            assert!(is_name(name), "{line}");
            assert!(helped.insert(name.to_string()), "HELP twice: {line}");
            let text = unescape_help(line, help);
            scrape.families.entry(name.to_string()).or_default().help = text;
            if current.as_deref() != Some(name) {
                if let Some(c) = current.replace(name.to_string()) {
                    finished.insert(c);
                }
            }
            assert!(!finished.contains(name), "{name} declared apart: {line}");
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap();
            assert!(is_name(name), "{line}");
            assert!(
                ["counter", "gauge", "summary", "histogram", "untyped"].contains(&kind),
                "{line}"
            );
            let f = scrape.families.entry(name.to_string()).or_default();
            assert!(f.kind.is_empty(), "TYPE twice: {line}");
            f.kind = kind.to_string();
            if current.as_deref() != Some(name) {
                if let Some(c) = current.replace(name.to_string()) {
                    finished.insert(c);
                }
            }
            assert!(!finished.contains(name), "{name} declared apart: {line}");
        } else {
            assert!(!line.starts_with('#'), "{line:?}");
            let name_end = line.find(['{', ' ']).unwrap_or_else(|| panic!("{line}"));
            let name = &line[..name_end];
            assert!(is_name(name), "{line}");
            let (labels, rest) = parse_labels(line, &line[name_end..]);
            let value_text = rest.strip_prefix(' ').unwrap_or_else(|| panic!("{line}"));
            assert!(!value_text.contains(' '), "timestamps are not sent: {line}");
            let value = parse_value(value_text).unwrap_or_else(|| panic!("bad value: {line}"));
            // The sample belongs to the family declared last.
            let family = current
                .clone()
                .unwrap_or_else(|| panic!("no TYPE before {line}"));
            let decl = &scrape.families[&family];
            let suffix = name
                .strip_prefix(family.as_str())
                .unwrap_or_else(|| panic!("{line} is not of family {family} (declared last)"));
            let has = |l: &str| labels.iter().any(|(n, _)| n == l);
            match (decl.kind.as_str(), suffix) {
                ("counter" | "gauge" | "untyped", "") => {}
                ("histogram", "_bucket") => assert!(has("le"), "{line}"),
                ("histogram", "_sum" | "_count") => assert!(!has("le"), "{line}"),
                ("summary", "") => assert!(has("quantile"), "{line}"),
                ("summary", "_sum" | "_count") => assert!(!has("quantile"), "{line}"),
                (kind, suffix) => panic!("{suffix:?} sample of a {kind}: {line}"),
            }
            if decl.kind == "counter" {
                assert!(family.ends_with("_total"), "counter without _total: {line}");
                assert!(value >= 0.0, "{line}");
            }
            // Figures of a unit (and counts) print without float
            // artefacts such as 0.30000000000000004.
            let measured = [
                "_total", "_seconds", "_bytes", "_bucket", "_sum", "_count", "_fds",
            ]
            .iter()
            .any(|s| name.ends_with(s));
            assert!(
                !measured || significant_digits(value_text) <= 15,
                "float artefact: {line}"
            );
            let key = &line[..line.len() - value_text.len() - 1];
            assert!(
                scrape.samples.insert(key.to_string(), value).is_none(),
                "twice: {line}"
            );
            scrape.texts.insert(key.to_string(), value_text.to_string());
            scrape.series.push((name.to_string(), labels, value));
        }
    }
    for (name, f) in &scrape.families {
        assert!(!f.kind.is_empty(), "{name} has HELP but no TYPE");
        assert!(!f.help.is_empty(), "{name} has no HELP");
    }
    check_histograms(&scrape);
    scrape
}

/// Every histogram series: `le` ascending and parseable, counts
/// non-decreasing, a `+Inf` bucket equal to `_count`, and a `_sum`.
fn check_histograms(scrape: &Scrape) {
    for (family, decl) in &scrape.families {
        if decl.kind != "histogram" {
            continue;
        }
        // Buckets grouped by their other labels.
        let mut groups: BTreeMap<Labels, Vec<(f64, f64)>> = BTreeMap::new();
        for (name, labels, value) in &scrape.series {
            if *name == format!("{family}_bucket") {
                let le = &labels.iter().find(|(n, _)| n == "le").unwrap().1;
                let rest: Vec<_> = labels.iter().filter(|(n, _)| n != "le").cloned().collect();
                groups
                    .entry(rest)
                    .or_default()
                    .push((parse_value(le).unwrap(), *value));
            }
        }
        assert!(!groups.is_empty(), "{family} has no buckets");
        for (labels, buckets) in groups {
            assert!(
                buckets.windows(2).all(|w| w[0].0 < w[1].0),
                "{family} le order"
            );
            assert!(
                buckets.windows(2).all(|w| w[0].1 <= w[1].1),
                "{family} counts"
            );
            let (le, inf) = *buckets.last().unwrap();
            assert_eq!(le, f64::INFINITY, "{family} has no +Inf bucket");
            let sel = labels
                .iter()
                .map(|(n, v)| format!("{n}=\"{v}\""))
                .collect::<Vec<_>>()
                .join(",");
            let sel = if sel.is_empty() {
                sel
            } else {
                format!("{{{sel}}}")
            };
            assert_eq!(scrape.get(&format!("{family}_count{sel}")), inf, "{family}");
            scrape.get(&format!("{family}_sum{sel}"));
        }
    }
}

/// Metric names a PromQL expression reads: identifiers outside label
/// matchers, strings, ranges and groupings that are not calls or
/// keywords.
fn promql_metrics(expr: &str) -> BTreeSet<String> {
    let mut clean = String::new();
    let mut depth_brace = 0;
    let mut depth_bracket = 0;
    let mut in_string = false;
    for c in expr.chars() {
        match c {
            '"' if depth_brace > 0 || in_string => in_string = !in_string,
            _ if in_string => {}
            '{' => depth_brace += 1,
            '}' => depth_brace -= 1,
            '[' => depth_bracket += 1,
            ']' => depth_bracket -= 1,
            _ if depth_brace > 0 || depth_bracket > 0 => {}
            c => clean.push(c),
        }
        if c == '}' || c == ']' {
            clean.push(' ');
        }
    }
    // Tokens: identifiers, and every other non-space character alone.
    let mut tokens: Vec<String> = Vec::new();
    for c in clean.chars() {
        let ident = c.is_ascii_alphanumeric() || matches!(c, '_' | ':' | '$' | '.');
        match tokens.last_mut() {
            Some(t)
                if ident
                    && t.chars().all(|c| {
                        c.is_ascii_alphanumeric() || matches!(c, '_' | ':' | '$' | '.')
                    }) =>
            {
                t.push(c)
            }
            _ if c.is_whitespace() => tokens.push(String::new()),
            _ => tokens.push(c.to_string()),
        }
    }
    tokens.retain(|t| !t.is_empty());
    let mut names = BTreeSet::new();
    let mut i = 0;
    while i < tokens.len() {
        let t = tokens[i].as_str();
        let next = tokens.get(i + 1).map(String::as_str);
        if matches!(
            t,
            "by" | "without" | "on" | "ignoring" | "group_left" | "group_right"
        ) {
            // Skip the label list.
            if next == Some("(") {
                while i < tokens.len() && tokens[i] != ")" {
                    i += 1;
                }
            }
        } else if t.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_' || c == ':')
            // A call, or an aggregation with its grouping first (`sum by
            // (le) (...)`).
            && !matches!(next, Some("(" | "by" | "without"))
            && !matches!(t, "and" | "or" | "unless" | "bool" | "offset")
        {
            names.insert(t.to_string());
        }
        i += 1;
    }
    names
}

/// The dashboard's queries: every target's `expr` and the templating
/// queries' `label_values(METRIC, label)` metrics.
fn dashboard_metrics() -> BTreeMap<String, String> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../deploy/grafana-dashboard.json"
    );
    let d: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let mut uses = BTreeMap::new();
    let panels = d["panels"].as_array().unwrap();
    assert!(panels.len() >= 10, "a dashboard of {} panels", panels.len());
    for p in panels {
        for t in p["targets"].as_array().unwrap() {
            let expr = t["expr"].as_str().unwrap();
            for m in promql_metrics(expr) {
                uses.insert(m, expr.to_string());
            }
        }
    }
    for v in d["templating"]["list"].as_array().unwrap() {
        if let Some(q) = v["query"]
            .as_str()
            .and_then(|q| q.strip_prefix("label_values("))
        {
            let metric = q.split([',', '{', ')']).next().unwrap().trim();
            uses.insert(metric.to_string(), q.to_string());
        }
    }
    uses
}

#[test]
fn promql_metric_names_are_found_by_the_dashboard_check() {
    let names = promql_metrics(
        r#"histogram_quantile(0.99, sum by (le) (rate(a_bucket{instance=~"$i",x="}"}[$__rate_interval]))) / on(job) b_total + c"#,
    );
    assert_eq!(
        names.into_iter().collect::<Vec<_>>(),
        ["a_bucket", "b_total", "c"]
    );
}

/// `/proc/PID/status`'s `VmRSS`, bytes.
fn proc_rss(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .unwrap()
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .unwrap();
    kb * 1024.0
}

/// `/proc/PID/limits`' soft limit on open files.
fn proc_max_fds(pid: u32) -> f64 {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .unwrap();
    let soft = line.split_whitespace().nth(3).unwrap();
    if soft == "unlimited" {
        f64::INFINITY
    } else {
        soft.parse().unwrap()
    }
}

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

#[test]
#[expect(
    clippy::too_many_lines,
    reason = "one server, one scrape, every check against it in order"
)]
fn scraped_metrics_follow_the_format_and_count_what_was_sent() {
    let started = unix_now();
    let tmp = tempfile::tempdir().unwrap();
    let mut server = ServerProc::start(
        &tmp.path().join("db"),
        &["--metrics", "127.0.0.1:0", "--resp", "0"],
    );
    let pid = server.child.id();
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
    let s = loop {
        let (code, body) = curl(&url);
        assert_eq!(code, 200);
        let s = parse_exposition(&body);
        let active = |p: &str| {
            s.get(&format!(
                "lamina_server_connections_active{{protocol=\"{p}\"}}"
            ))
        };
        if (active("dsl") == 0.0 && active("resp") == 0.0) || Instant::now() > deadline {
            break s;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let get = |k: &str| s.get(k);
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

    // The engine: 120 DSL puts and one Redis SET, 7 lookups that all hit
    // (keys 0..6 were put).
    assert_eq!(get("lamina_writes_total"), 121.0);
    assert!(get("lamina_ingested_bytes_total") > 0.0);
    assert_eq!(get("lamina_gets_total"), 7.0);
    assert_eq!(get("lamina_get_hits_total"), 7.0);
    assert_eq!(get("lamina_get_misses_total"), 0.0);
    // Histograms of the same lookups: 7 observations, every one within
    // the largest finite bucket (10 s), a positive sum.
    assert_eq!(get("lamina_get_latency_seconds_count"), 7.0);
    assert_eq!(get(r#"lamina_get_latency_seconds_bucket{le="+Inf"}"#), 7.0);
    assert_eq!(get(r#"lamina_get_latency_seconds_bucket{le="10"}"#), 7.0);
    assert!(get("lamina_get_latency_seconds_sum") > 0.0);
    // The put histogram counts write calls: at most one per entry.
    let puts = get("lamina_put_latency_seconds_count");
    assert!((1.0..=121.0).contains(&puts), "{puts}");
    assert!(s.families["lamina_put_latency_seconds"]
        .help
        .contains("per batch"));
    assert_eq!(s.families["lamina_put_latency_seconds"].kind, "histogram");
    // The percentiles stay, as a summary.
    assert_eq!(get(r#"lamina_latency_seconds_count{op="get"}"#), 7.0);
    let p50 = get(r#"lamina_latency_seconds{op="get",quantile="0.5"}"#);
    let p99 = get(r#"lamina_latency_seconds{op="get",quantile="0.99"}"#);
    assert!(p50 > 0.0 && p50 <= p99, "{p50} {p99}");
    // Counters carry their unit before _total.
    for name in [
        "lamina_compaction_read_bytes_total",
        "lamina_compaction_written_bytes_total",
        "lamina_flush_written_bytes_total",
        "lamina_stall_seconds_total",
        "lamina_bloom_probes_total",
        "lamina_bloom_negatives_total",
        "lamina_bloom_false_positives_total",
        "lamina_row_cache_hits_total",
    ] {
        assert_eq!(s.families[name].kind, "counter", "{name}");
    }
    for kind in ["data", "index", "filter"] {
        get(&format!("lamina_block_cache_hits_total{{kind=\"{kind}\"}}"));
        get(&format!(
            "lamina_block_cache_misses_total{{kind=\"{kind}\"}}"
        ));
    }

    // lamina_build_info names this build's version.
    let info = s
        .series
        .iter()
        .find(|(n, _, _)| n == "lamina_build_info")
        .unwrap();
    assert_eq!(info.2, 1.0);
    assert!(info
        .1
        .contains(&("version".to_string(), env!("CARGO_PKG_VERSION").to_string())));
    // process_* against /proc/PID of the server, read by the test.
    let now = unix_now();
    let start = get("process_start_time_seconds");
    assert!(
        start >= started - 2.0 && start <= now + 1.0,
        "{start} {started} {now}"
    );
    let cpu = get("process_cpu_seconds_total");
    assert!(cpu > 0.0 && cpu < (now - started) * 64.0, "{cpu}");
    let rss = get("process_resident_memory_bytes");
    let proc_rss = proc_rss(pid);
    assert!(
        rss > proc_rss / 2.0 && rss < proc_rss * 2.0,
        "{rss} vs {proc_rss}"
    );
    assert_eq!(get("process_max_fds"), proc_max_fds(pid));
    let fds = get("process_open_fds");
    let proc_fds = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .count() as f64;
    assert!(
        (fds - proc_fds).abs() <= 8.0 && fds >= 3.0,
        "{fds} vs {proc_fds}"
    );
    assert!(get("process_virtual_memory_bytes") >= rss);

    // The dashboard's queries read only metrics this scrape has.
    let names: BTreeSet<&str> = s
        .families
        .keys()
        .map(String::as_str)
        .chain(s.series.iter().map(|(n, _, _)| n.as_str()))
        .collect();
    let uses = dashboard_metrics();
    assert!(uses.len() >= 20, "{uses:?}");
    for (metric, expr) in &uses {
        assert!(
            names.contains(metric.as_str()),
            "the dashboard reads {metric} ({expr}), which /metrics lacks"
        );
    }

    // HEAD: the headers a GET gets, no body.
    let head = raw(
        &addrs["metrics"],
        "HEAD /metrics HTTP/1.1\r\nHost: x\r\n\r\n",
    );
    let (headers, body) = head.split_once("\r\n\r\n").unwrap();
    assert!(headers.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
    assert!(
        headers.contains("Content-Type: text/plain; version=0.0.4"),
        "{head}"
    );
    let length: usize = headers
        .lines()
        .find_map(|l| l.strip_prefix("Content-Length: "))
        .unwrap()
        .parse()
        .unwrap();
    assert!(length > 1000, "{head}");
    assert_eq!(body, "", "a HEAD reply has no body");
    let post = raw(&addrs["metrics"], "POST /metrics HTTP/1.1\r\n\r\n");
    assert!(post.starts_with("HTTP/1.1 405 "), "{post}");
    assert!(post.contains("Allow: GET, HEAD\r\n"), "{post}");
    let (code, _) = curl(&format!("http://{}/other", addrs["metrics"]));
    assert_eq!(code, 404);
    server.stop();
}
