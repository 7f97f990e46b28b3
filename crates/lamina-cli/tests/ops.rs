//! The operator's kit: `serve` binds every port before it opens the
//! database, `--metrics` takes a bare port, `serve --config FILE` (the
//! file under the flags), shell completions, man pages, the `deploy/`
//! recipes, plain logs off a terminal and the terminal client.

#![expect(clippy::unwrap_used, reason = "a test may panic on a failed setup")]

mod common;

use std::io::{BufRead, BufReader, Read};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::{ask, bin, connect, ServerProc};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A port bound (and held) by this test, so the server cannot have it.
fn taken_port() -> (TcpListener, String) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port().to_string();
    (l, port)
}

/// `lamina serve ARGS` that must fail at start: its stderr.
fn serve_fails(args: &[&str]) -> String {
    let out = Command::new(bin())
        .arg("serve")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        !out.status.success(),
        "lamina serve {args:?} started: {out:?}"
    );
    String::from_utf8(out.stderr).unwrap()
}

#[test]
fn a_port_that_cannot_be_bound_creates_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let (_held, port) = taken_port();
    let db = tmp.path().join("db");
    let ds = tmp.path().join("spatial");
    let (d, s) = (db.to_str().unwrap(), ds.to_str().unwrap());
    let base = ["--host", "127.0.0.1", "--dir", d, "--spatial-dir", s];
    // Each listener in turn is the one that is taken; the others are free.
    let cases: [&[&str]; 4] = [
        &["--port", &port, "--spatial-port", "0"],
        &["--port", "0", "--resp", &port, "--spatial-port", "0"],
        &["--port", "0", "--spatial-port", &port],
        &["--port", "0", "--spatial-port", "0", "--metrics", &port],
    ];
    for case in cases {
        let mut args = base.to_vec();
        args.extend_from_slice(case);
        let err = serve_fails(&args);
        assert!(
            err.contains(&port) && err.contains("listen"),
            "{case:?}: {err}"
        );
        assert!(!db.exists(), "{case:?} created the database: {err}");
        assert!(!ds.exists(), "{case:?} created the dataset: {err}");
    }
    // An address --metrics cannot have at all, as HOST:PORT.
    let err = serve_fails(&["--port", "0", "--dir", d, "--metrics", "256.0.0.1:1"]);
    assert!(err.contains("--metrics"), "{err}");
    assert!(!db.exists());
}

/// The address after `prefix` in the server's start-up lines.
fn started_line(server: &mut ServerProc, prefix: &str) -> String {
    let mut line = String::new();
    for _ in 0..10 {
        line.clear();
        if server.stdout.read_line(&mut line).unwrap() == 0 {
            break;
        }
        if let Some(rest) = line.trim().strip_prefix(prefix) {
            return rest.to_string();
        }
    }
    panic!("no {prefix:?} line; last {line:?}");
}

/// An HTTP GET of `path` on `addr` (HOST:PORT): the whole response.
fn http_get(addr: &str, path: &str) -> String {
    use std::io::Write;
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

#[test]
fn metrics_takes_a_bare_port_on_the_host_and_scrapes_after_the_open() {
    let tmp = tempfile::tempdir().unwrap();
    let mut server = ServerProc::start(&tmp.path().join("db"), &["--metrics", "0"]);
    let url = started_line(&mut server, "lamina: metrics on http://");
    let addr = url.strip_suffix("/metrics").unwrap();
    assert!(addr.starts_with("127.0.0.1:"), "{addr}");
    let mut c = connect(server.port);
    ask(&mut c, "p 1 10\np 2 20\n");
    let body = http_get(addr, "/metrics");
    assert!(body.starts_with("HTTP/1.1 200"), "{body}");
    assert!(body.contains("lamina_"), "{body}");
    drop(c);
    server.stop();
}

/// Writes `text` to `dir/name`, returns the path.
fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

/// Starts `lamina ARGS` and reads the first `n` lines of its stdout
/// (fewer if it ends first), trimmed.
fn spawn_lines(args: &[&str], n: usize) -> (std::process::Child, Vec<String>) {
    let mut child = Command::new(bin())
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut lines = Vec::new();
    for _ in 0..n {
        let mut line = String::new();
        if out.read_line(&mut line).unwrap() == 0 {
            break;
        }
        lines.push(line.trim().to_string());
    }
    (child, lines)
}

#[test]
fn config_file_values_apply_and_flags_override_them() {
    let tmp = tempfile::tempdir().unwrap();
    let from_file = tmp.path().join("from-file");
    let config = write(
        tmp.path(),
        "lamina.toml",
        &format!(
            "dir = {:?}\nport = 1\nhost = \"127.0.0.1\"\nbuffer-bytes = \"1M\"\n\
             read_only = false\nbloom_bits_per_level = [12, 8]\nmax_connections = 7\n",
            from_file.to_str().unwrap()
        ),
    );
    let config = config.to_str().unwrap();
    // The flags win: --port 0 over the file's 1 (which would need root),
    // and --buffer-pages over the file's buffer-bytes, which it conflicts with.
    let (mut child, lines) = spawn_lines(
        &[
            "serve",
            "--config",
            config,
            "--port",
            "0",
            "--buffer-pages",
            "64",
        ],
        2,
    );
    // The file's dir, and a free port rather than the file's 1.
    let dir = std::fs::canonicalize(&from_file).unwrap();
    assert_eq!(
        lines[0].trim(),
        format!("lamina: data directory {}", dir.display())
    );
    let port: u16 = lines[1].trim().rsplit(':').next().unwrap().parse().unwrap();
    assert_ne!(port, 1);
    // The file's settings reached the engine: the stored options.
    let mut c = connect(port);
    ask(&mut c, "p 1 1\n");
    let options = Command::new(bin())
        .args(["inspect", "options"])
        .arg(&from_file)
        .output()
        .unwrap();
    let options = String::from_utf8(options.stdout).unwrap();
    assert!(
        options.contains("262144"),
        "--buffer-pages 64 = 256 KiB: {options}"
    );
    drop(c);
    child.kill().unwrap();
    child.wait().unwrap();

    // Unknown keys, wrong kinds and nested configs are refused by name,
    // before anything is created.
    let fresh = tmp.path().join("never");
    for (text, says) in [
        ("prot = 1\n", "\"prot\" is not a flag"),
        ("read_only = \"yes\"\n", "read_only: a switch"),
        ("config = \"x.toml\"\n", "another config file"),
        ("port = { a = 1 }\n", "port: a string, number or boolean"),
        ("port = \n", "not a TOML table"),
    ] {
        let bad = write(tmp.path(), "bad.toml", text);
        let err = serve_fails(&[
            "--config",
            bad.to_str().unwrap(),
            "--dir",
            fresh.to_str().unwrap(),
        ]);
        assert!(err.contains(says), "{text:?}: {err}");
        assert!(!fresh.exists());
    }
}

#[test]
fn completions_for_bash_zsh_and_fish_name_every_command() {
    let top =
        String::from_utf8(Command::new(bin()).arg("--help").output().unwrap().stdout).unwrap();
    let commands: Vec<&str> = top
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert!(commands.contains(&"completions") && commands.contains(&"man"));
    for (shell, marker) in [
        ("bash", "complete -F _lamina"),
        ("zsh", "#compdef lamina"),
        ("fish", "complete -c lamina"),
    ] {
        let out = Command::new(bin())
            .args(["completions", shell])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        let script = String::from_utf8(out.stdout).unwrap();
        assert!(script.contains(marker), "{shell}: no {marker:?}");
        for c in &commands {
            assert!(script.contains(c), "{shell} completion lacks {c}");
        }
        assert!(script.contains("buffer-bytes"), "{shell}");
        // The shell itself accepts the script, where it is installed.
        if let Ok(st) = Command::new(shell)
            .arg("-n")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .and_then(|mut child| {
                use std::io::Write;
                child.stdin.take().unwrap().write_all(script.as_bytes())?;
                child.wait()
            })
        {
            assert!(st.success(), "{shell} -n refuses the completion script");
        } else {
            eprintln!("{shell} is not installed: its syntax check is skipped");
        }
    }
    let bad = Command::new(bin())
        .args(["completions", "tcsh"])
        .output()
        .unwrap();
    assert!(!bad.status.success());
}

#[test]
fn man_pages_cover_every_command() {
    let out = Command::new(bin()).arg("man").output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let page = String::from_utf8(out.stdout).unwrap();
    assert!(
        page.starts_with(".ie") || page.contains(".TH lamina 1"),
        "{page}"
    );
    assert!(
        page.contains("serve") && page.contains("completions"),
        "{page}"
    );
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("man1");
    let st = Command::new(bin())
        .args(["man", "--dir"])
        .arg(&dir)
        .status()
        .unwrap();
    assert!(st.success());
    for page in [
        "lamina.1",
        "lamina-serve.1",
        "lamina-client.1",
        "lamina-kv.1",
    ] {
        let text = std::fs::read_to_string(dir.join(page)).unwrap();
        assert!(text.contains(".TH"), "{page}");
    }
    let serve = std::fs::read_to_string(dir.join("lamina-serve.1")).unwrap();
    assert!(serve.contains("config"), "{serve}");
}

/// The unit's `ExecStart`, the container's `ENTRYPOINT`: the arguments
/// after the binary, the config path replaced by the repository's file.
fn recipe_args(line: &[&str]) -> Vec<String> {
    let config = repo().join("deploy/lamina.toml");
    line[1..]
        .iter()
        .map(|a| match *a {
            "/etc/lamina/lamina.toml" => config.to_str().unwrap().to_string(),
            a => a.to_string(),
        })
        .collect()
}

/// Starts `lamina ARGS --dir DIR --port 0 --resp 0 --metrics 0`: the
/// recipe's command line on free ports; returns its start-up lines.
fn starts(args: &[String], dir: &Path) -> Vec<String> {
    let host: &[&str] = if args.iter().any(|a| a == "--host") {
        &[]
    } else {
        &["--host", "127.0.0.1"]
    };
    let mut all: Vec<&str> = args.iter().map(String::as_str).collect();
    all.extend(["--dir", dir.to_str().unwrap()]);
    all.extend(["--port", "0", "--resp", "0", "--metrics", "0"]);
    all.extend(host);
    let (mut child, lines) = spawn_lines(&all, 4);
    child.kill().unwrap();
    let st = child.wait_with_output().unwrap();
    assert!(lines.len() == 4, "{args:?}: {lines:?} {st:?}");
    lines
}

#[test]
fn the_systemd_unit_verifies_and_its_command_starts() {
    let unit = std::fs::read_to_string(repo().join("deploy/lamina.service")).unwrap();
    let exec = unit
        .lines()
        .find_map(|l| l.strip_prefix("ExecStart="))
        .unwrap();
    let words: Vec<&str> = exec.split_whitespace().collect();
    assert_eq!(words[0], "/usr/local/bin/lamina");
    let tmp = tempfile::tempdir().unwrap();
    let lines = starts(&recipe_args(&words), &tmp.path().join("db"));
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("lamina: redis protocol on")),
        "{lines:?}"
    );
    let Ok(version) = Command::new("systemd-analyze").arg("--version").output() else {
        eprintln!("systemd-analyze is not installed: deploy/lamina.service is not verified");
        return;
    };
    assert!(version.status.success());
    // verify needs the binary where ExecStart says and the man pages of
    // Documentation=: the built binary, and the pages `lamina man` writes.
    let unit_file = tmp.path().join("lamina.service");
    std::fs::write(&unit_file, unit.replace("/usr/local/bin/lamina", bin())).unwrap();
    let man = tmp.path().join("man");
    let st = Command::new(bin())
        .args(["man", "--dir"])
        .arg(man.join("man1"))
        .status()
        .unwrap();
    assert!(st.success());
    let out = Command::new("systemd-analyze")
        .arg("verify")
        .arg(&unit_file)
        .env("MANPATH", &man)
        .output()
        .unwrap();
    assert!(
        out.status.success() && out.stderr.is_empty(),
        "systemd-analyze verify: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_containerfile_entrypoint_starts_on_the_shipped_config() {
    let recipe = std::fs::read_to_string(repo().join("deploy/Containerfile")).unwrap();
    let entry = recipe
        .lines()
        .find_map(|l| l.strip_prefix("ENTRYPOINT "))
        .unwrap();
    let words: Vec<String> = serde_json::from_str(entry).unwrap();
    let words: Vec<&str> = words.iter().map(String::as_str).collect();
    assert_eq!(words[0], "/usr/local/bin/lamina");
    assert!(recipe.contains("COPY deploy/lamina.toml /etc/lamina/lamina.toml"));
    let tmp = tempfile::tempdir().unwrap();
    let lines = starts(&recipe_args(&words), &tmp.path().join("db"));
    assert!(
        lines.iter().any(|l| l.starts_with("lamina: metrics on")),
        "{lines:?}"
    );
}

#[test]
fn logs_have_no_colour_codes_off_a_terminal() {
    // A one-member cluster logs its election at INFO (openraft's lines).
    let tmp = tempfile::tempdir().unwrap();
    let ports = free_ports(2);
    let config = write(
        tmp.path(),
        "cluster.toml",
        &format!(
            "[[node]]\nid = 1\nraft = \"127.0.0.1:{}\"\nclient = \"127.0.0.1:{}\"\n",
            ports[0], ports[1]
        ),
    );
    let log = tmp.path().join("n1.log");
    let mut member = Command::new(bin())
        .args(["cluster", "--init", "--node-id", "1", "--config"])
        .arg(&config)
        .arg("--dir")
        .arg(tmp.path().join("n1"))
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    wait_for_leader(ports[1]);
    let _ = Command::new("kill")
        .args(["-TERM", &member.id().to_string()])
        .status();
    member.wait().unwrap();
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains(" INFO "), "no log line to check: {text}");
    assert!(
        !text.contains('\u{1b}'),
        "ANSI escape in a file log: {text:?}"
    );
}

/// Waits (60 s at most) until the member on client `port` knows a
/// leader; the leader's client port.
fn wait_for_leader(port: u16) -> u16 {
    let start = std::time::Instant::now();
    loop {
        let reply = std::net::TcpStream::connect(("127.0.0.1", port))
            .ok()
            .map(|_| ask_member(port, "@leader\n"));
        if let Some(addr) = reply
            .as_ref()
            .and_then(|r| r.first())
            .and_then(|l| l.strip_prefix("LEADER "))
            .filter(|l| *l != "unknown")
        {
            return addr.rsplit(':').next().unwrap().parse::<u16>().unwrap();
        }
        assert!(
            start.elapsed() < std::time::Duration::from_secs(60),
            "no leader: {reply:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// `n` loopback ports free a moment ago.
fn free_ports(n: usize) -> Vec<u16> {
    let held: Vec<TcpListener> = (0..n)
        .map(|_| TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    held.iter()
        .map(|l| l.local_addr().unwrap().port())
        .collect()
}

/// The replies to `lines` (and `@sync`) on a cluster member's client port.
fn ask_member(port: u16, lines: &str) -> Vec<String> {
    let mut c = connect(port);
    ask(&mut c, lines)
}

#[test]
fn a_normal_cluster_election_logs_no_warnings() {
    // The README's three members: a secret, the cluster file, --init on one.
    let tmp = tempfile::tempdir().unwrap();
    let secret = tmp.path().join("cluster.secret");
    std::fs::write(&secret, [7u8; 32]).unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    let ports = free_ports(6);
    let mut file = format!("secret_file = {:?}\n", secret.to_str().unwrap());
    for n in 0..3 {
        file.push_str(&format!(
            "[[node]]\nid = {}\nraft = \"127.0.0.1:{}\"\nclient = \"127.0.0.1:{}\"\n",
            n + 1,
            ports[n],
            ports[3 + n]
        ));
    }
    let config = write(tmp.path(), "cluster.toml", &file);
    let mut members = Vec::new();
    for n in 1..=3 {
        let log = tmp.path().join(format!("n{n}.log"));
        let mut cmd = Command::new(bin());
        cmd.args(["cluster", "--config"])
            .arg(&config)
            .args(["--node-id", &n.to_string(), "--dir"])
            .arg(tmp.path().join(format!("n{n}")))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap());
        if n == 1 {
            cmd.arg("--init");
        }
        members.push((cmd.spawn().unwrap(), log));
    }
    // A leader, elected, answers a write with OK and reads it back.
    let leader = wait_for_leader(ports[3]);
    assert_eq!(ask_member(leader, "p 1 10\ng 1\n"), ["OK", "10"]);
    // What each member logged up to here: its start and the election.
    let started: Vec<String> = members
        .iter()
        .map(|(_, log)| std::fs::read_to_string(log).unwrap())
        .collect();
    for (child, _) in &mut members {
        let _ = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status();
    }
    for ((child, log), start) in members.iter_mut().zip(started) {
        child.wait().unwrap();
        assert!(
            !start.contains("WARN") && !start.contains("ERROR"),
            "{}, start and election: {start}",
            log.display()
        );
        // The shutdown: members leave one by one, and the last ones may
        // log that a vote could not reach the first (an ERROR), but warn
        // of nothing.
        let text = std::fs::read_to_string(&*log).unwrap();
        assert!(!text.contains("WARN"), "{}: {text}", log.display());
        assert!(
            !text.contains('\u{1b}'),
            "colour codes in a file log: {text:?}"
        );
    }
}

#[test]
fn the_client_on_a_terminal_edits_lines_keeps_history_and_answers_help() {
    // util-linux `script` runs the client on a pseudo-terminal, fed from
    // this test's pipe.
    if Command::new("script").arg("--version").output().is_err() {
        eprintln!("script(1) is not installed: the terminal client is not tested");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let server = ServerProc::start(&tmp.path().join("db"), &[]);
    let history = tmp.path().join("history");
    let client = format!("{} client --port {}", bin(), server.port);
    let mut child = Command::new("script")
        .args(["-q", "-e", "-c", &client, "/dev/null"])
        .env("LAMINA_HISTORY", &history)
        .env("TERM", "xterm")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let mut input = child.stdin.take().unwrap();
        // Each line waits for the prompt's round trip; Ctrl-D ends.
        for line in ["help\n", "p 1 10\n", "g 1\n", "info\n", "\u{4}"] {
            input.write_all(line.as_bytes()).unwrap();
            input.flush().unwrap();
            std::thread::sleep(std::time::Duration::from_millis(300));
        }
    }
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).replace('\r', "");
    assert!(out.status.success(), "{text}");
    assert!(text.contains("Commands (one per line"), "help: {text}");
    assert!(text.contains("no reply from `lamina serve`"), "{text}");
    assert!(text.lines().any(|l| l.trim() == "10"), "g 1: {text}");
    assert!(text.contains("buffer bytes="), "info: {text}");
    let kept = std::fs::read_to_string(&history).unwrap();
    for line in ["p 1 10", "g 1", "help"] {
        assert!(
            kept.lines().any(|l| l == line),
            "history lacks {line:?}: {kept}"
        );
    }
    server.stop();
}
