#!/usr/bin/env python3
"""Figures for docs/reliability.md, "Hostile clients": server memory per idle
connection, memory while streaming a ~100 MB reply to a slow reader, and the
time from SIGTERM to exit while a client loads a large file; the same for
the Redis port (idle connections, a slowly read pipeline of GETs, one big
MGET) and the metrics port (a crowd of silent connections, a slow scrape);
descriptors per connection, a crowd of idle Redis clients under `ulimit -n
1024` while the engine writes, the memory of unfinished requests, and the
Redis port's transactions and password (MULTI queues, EXEC replies, NOAUTH).

    scripts/hostile.py [LAMINA_BINARY]      # default: target/release/lamina
    ONLY=redis,metrics scripts/hostile.py   # some of idle,slow,load,redis,metrics,
                                            # post,slowloris,metrics-slow,scan,
                                            # descriptors,crowd,unfinished,multi

Only loopback connections; every loop is bounded.
"""
import os
import resource
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

LAMINA = sys.argv[1] if len(sys.argv) > 1 else "target/release/lamina"
# OLD=1: a binary from before --load-dir (loads take absolute paths).
OLD = os.environ.get("OLD") == "1"


def load_args(loads, name):
    """Server flags and the `l` argument for a file in `loads`."""
    if OLD:
        return [], os.path.join(loads, name)
    return ["--load-dir", loads], name


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


# The start-up lines naming each port, by the name start() gives the port.
PORT_LINES = {"dsl": "lamina: listening on ", "redis": "lamina: redis protocol on ",
              "metrics": "lamina: metrics on "}


def start_ports(db, *extra, want=("dsl",), cwd=None):
    """Starts `lamina serve`; returns the process and the ports in `want`."""
    p = subprocess.Popen(
        [LAMINA, "serve", "--port", "0", "--dir", db, *extra],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        cwd=cwd, text=True)
    ports = {}
    for _ in range(10):
        line = p.stdout.readline().strip()
        for name, prefix in PORT_LINES.items():
            if line.startswith(prefix):
                ports[name] = int(line.removesuffix("/metrics").rsplit(":", 1)[1])
        if all(w in ports for w in want):
            return p, ports
    p.kill()
    raise SystemExit("server did not start")


def start(db, *extra, cwd=None):
    p, ports = start_ports(db, *extra, cwd=cwd)
    return p, ports["dsl"]


def stop(p):
    p.send_signal(signal.SIGTERM)
    p.wait(timeout=60)


def ask(port, text):
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(text.encode() + b"@end\n")
        data = b""
        while not data.endswith(b"@bye\n"):
            chunk = s.recv(1 << 16)
            if not chunk:
                break
            data += chunk
    return data.decode()


def idle_connections(tmp, n=1000):
    p, port = start(os.path.join(tmp, "idle"))
    time.sleep(0.5)
    base = rss_kib(p.pid)
    socks = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port))
        # One request each, so every connection has read and replied once.
        s.sendall(b"g 1\n@sync\n")
        socks.append(s)
    for s in socks:
        buf = b""
        while not buf.endswith(b"@sync\n"):
            buf += s.recv(64)
    time.sleep(3)  # past the server's 1 s idle release
    idle = rss_kib(p.pid)
    for s in socks:
        s.close()
    stop(p)
    print(f"idle connections: {n}, server RSS {base} KiB -> {idle} KiB, "
          f"{(idle - base) / n:.1f} KiB per idle connection")


def slow_reader(tmp, pairs=5_500_000):
    loads = os.path.join(tmp, "loads")
    os.makedirs(loads, exist_ok=True)
    path = os.path.join(loads, "pairs.dat")
    with open(path, "wb") as f:
        for start_key in range(0, pairs, 100_000):
            f.write(b"".join(struct.pack("<ii", 10_000_000 + k, 10_000_000 + k)
                             for k in range(start_key, min(pairs, start_key + 100_000))))
    flags, arg = load_args(loads, "pairs.dat")
    p, port = start(os.path.join(tmp, "slow"), *flags, "--block-cache-bytes", "8M")
    ask(port, f'l "{arg}"\nflush\n')
    time.sleep(1)
    base = rss_kib(p.pid)
    peak = base
    total = 0
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
        s.sendall(f"r 0 {10_000_000 + pairs}\n@end\n".encode())
        deadline = time.time() + 600
        while time.time() < deadline:
            chunk = s.recv(64 * 1024)
            if not chunk:
                break
            total += len(chunk)
            time.sleep(0.002)  # a slow reader: about 30 MB/s at most
            peak = max(peak, rss_kib(p.pid))
    stop(p)
    print(f"slow reader: {total / 1e6:.1f} MB reply, server RSS {base} KiB before, "
          f"peak {peak} KiB while streaming (+{(peak - base) / 1024:.1f} MiB)")


def stuck_load(tmp, records=20_000_000):
    loads = os.path.join(tmp, "big")
    os.makedirs(loads, exist_ok=True)
    path = os.path.join(loads, "big.dat")
    with open(path, "wb") as f:
        block = b"".join(struct.pack("<ii", k, k) for k in range(100_000))
        for _ in range(records // 100_000):
            f.write(block)
    flags, arg = load_args(loads, "big.dat")
    p, port = start(os.path.join(tmp, "load"), *flags)
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(f'l "{arg}"\n'.encode())
    time.sleep(1.0)
    t = time.time()
    p.send_signal(signal.SIGTERM)
    p.wait(timeout=120)
    print(f"SIGTERM during a load of {records * 8 / 1e6:.0f} MB: exit {p.returncode} "
          f"after {time.time() - t:.3f} s")
    s.close()


def resp_request(*args):
    out = b"*%d\r\n" % len(args)
    for a in args:
        a = a if isinstance(a, bytes) else a.encode()
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    return out


def recv_exactly(s, n):
    data = b""
    while len(data) < n:
        chunk = s.recv(min(1 << 16, n - len(data)))
        if not chunk:
            raise SystemExit("connection closed early")
        data += chunk
    return data


def slow_read(p, s, total, base):
    """Reads `total` bytes from `s` at a trickle; the server's peak RSS."""
    peak, got = base, 0
    while got < total:
        chunk = s.recv(64 * 1024)
        if not chunk:
            break
        got += len(chunk)
        time.sleep(0.002)
        peak = max(peak, rss_kib(p.pid))
    return got, peak


def redis_port(tmp, n=1000):
    p, ports = start_ports(os.path.join(tmp, "redis"), "--resp", "0", want=("dsl", "redis"))
    port = ports["redis"]
    time.sleep(0.5)
    base = rss_kib(p.pid)
    socks = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(b"PING\r\n")
        socks.append(s)
    for s in socks:
        assert recv_exactly(s, 7) == b"+PONG\r\n"
    time.sleep(3)  # past the server's 1 s idle release
    idle = rss_kib(p.pid)
    for s in socks:
        s.close()
    print(f"redis: {n} idle connections, server RSS {base} KiB -> {idle} KiB, "
          f"{(idle - base) / n:.1f} KiB per idle connection")

    # A pipeline of 100,000 GETs of a 1 KiB value (a 100 MB reply stream)
    # read at a trickle: replies go out in 64 KiB chunks as they are made.
    value = b"v" * 1024
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(resp_request("SET", "big", value))
        assert recv_exactly(s, 5) == b"+OK\r\n"
    time.sleep(1)
    base = rss_kib(p.pid)
    gets = 100_000
    reply = b"$1024\r\n" + value + b"\r\n"
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
        sender = threading.Thread(target=s.sendall, args=(resp_request("GET", "big") * gets,))
        sender.start()
        got, peak = slow_read(p, s, gets * len(reply), base)
        sender.join()
    print(f"redis: {got / 1e6:.1f} MB of pipelined GET replies read slowly, server RSS "
          f"{base} KiB before, peak {peak} KiB (+{(peak - base) / 1024:.1f} MiB)")

    # One MGET of 64 values of 1 MiB: its reply streams as it is read.
    big = b"m" * (1 << 20)
    with socket.create_connection(("127.0.0.1", port)) as s:
        for i in range(64):
            s.sendall(resp_request("SET", f"m{i}", big))
            assert recv_exactly(s, 5) == b"+OK\r\n"
    time.sleep(1)
    base = rss_kib(p.pid)
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
        s.sendall(resp_request("MGET", *[f"m{i}" for i in range(64)]))
        got, peak = slow_read(p, s, 64 * (len(big) + 12) + 5, base)
    print(f"redis: one MGET reply of {got / 1e6:.1f} MB read slowly, server RSS {base} KiB "
          f"before, peak {peak} KiB (+{(peak - base) / 1024:.1f} MiB)")
    stop(p)


def redis_transactions(tmp):
    """MULTI queues, EXEC replies and clients without the password: a queue
    of 100,001 commands (one past the cap) is refused and EXEC aborts; the
    server's RSS while a connection queues 60 MiB and while EXEC gathers 60
    reads of a 1 MiB value; 20,000 pipelined commands without the password
    are all answered NOAUTH and write nothing."""
    os.environ["LAMINA_REQUIREPASS"] = "hostile-test-password"
    try:
        p, ports = start_ports(os.path.join(tmp, "multi"), "--resp", "0", want=("dsl", "redis"))
    finally:
        del os.environ["LAMINA_REQUIREPASS"]
    port = ports["redis"]
    auth = resp_request("AUTH", "hostile-test-password")
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(resp_request("SET", "k", "v") * 10_000 + resp_request("MULTI") * 10_000
                  + resp_request("QUIT"))
        noauth = b"-NOAUTH Authentication required.\r\n"
        got = recv_exactly(s, 20_000 * len(noauth) + 5)
        assert got == noauth * 20_000 + b"+OK\r\n", got[-200:]
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(auth + resp_request("DBSIZE"))
        assert recv_exactly(s, 9) == b"+OK\r\n:0\r\n"
    time.sleep(1)
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(auth + resp_request("MULTI") + resp_request("INCR", "n") * 100_001
                  + resp_request("EXEC") + resp_request("GET", "n"))
        head = recv_exactly(s, 10 + 9 * 100_000)
        assert head == b"+OK\r\n+OK\r\n" + b"+QUEUED\r\n" * 100_000
        rest = b""
        while rest.count(b"\r\n") < 3:
            rest += s.recv(4096)
        lines = rest.split(b"\r\n")
        assert lines[0].startswith(b"-ERR MULTI queues at most") and lines[1].startswith(
            b"-EXECABORT") and lines[2] == b"$-1", rest
    print("redis: MULTI of 100,001 commands: the last refused, EXEC aborted, nothing written; "
          "20,000 commands without the password: all NOAUTH, nothing written")
    value = b"q" * (1 << 20)
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(auth + resp_request("SET", "q0", value))
        assert recv_exactly(s, 10) == b"+OK\r\n+OK\r\n"
    time.sleep(1)
    base = rss_kib(p.pid)
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
        s.sendall(auth + resp_request("MULTI") + resp_request("GET", "q0") * 60 + resp_request("EXEC"))
        total = 10 + 60 * 9 + len(b"*60\r\n") + 60 * (len(value) + 11)
        got, peak = slow_read(p, s, total, base)
    print(f"redis: an EXEC of 60 GETs of 1 MiB read slowly ({got / 1e6:.1f} MB): server RSS "
          f"{base} KiB before, peak {peak} KiB (+{(peak - base) / 1024:.1f} MiB; "
          f"the reply is gathered until the batch is written, at most 64 MiB)")
    time.sleep(1)
    base = rss_kib(p.pid)
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(auth + resp_request("MULTI"))
        assert recv_exactly(s, 10) == b"+OK\r\n+OK\r\n"
        for i in range(60):
            s.sendall(resp_request("SET", f"q{i}", value))
            assert recv_exactly(s, 9) == b"+QUEUED\r\n"
        queued = rss_kib(p.pid)
        s.sendall(resp_request("EXEC"))
        recv_exactly(s, 5 + 60 * 5)
    print(f"redis: a MULTI queue of 60 MiB: server RSS {base} KiB -> {queued} KiB "
          f"(+{(queued - base) / 1024:.1f} MiB, counted in the request budget)")
    stop(p)


def metrics_port(tmp, n=1000):
    p, ports = start_ports(os.path.join(tmp, "metrics"), "--metrics", "127.0.0.1:0",
                           want=("dsl", "metrics"))
    port = ports["metrics"]
    time.sleep(0.5)
    base = rss_kib(p.pid)
    # n connections that send nothing: each closed without a reply 1 s
    # after it connected (or sooner, the oldest of more than 256 waiting).
    socks = [socket.create_connection(("127.0.0.1", port)) for _ in range(n)]
    time.sleep(1)
    held = rss_kib(p.pid)
    statuses = {}
    for s in socks:
        s.settimeout(10)
        head = b""
        try:
            while b"\r\n" not in head:
                chunk = s.recv(4096)
                if not chunk:
                    break
                head += chunk
        except OSError:
            pass
        status = head.split(b"\r\n", 1)[0].decode() or "closed without a reply"
        statuses[status] = statuses.get(status, 0) + 1
        s.close()
    print(f"metrics: {n} silent connections, server RSS {base} KiB -> {held} KiB "
          f"({(held - base) / n:.1f} KiB per connection); outcomes {statuses}")
    # A scrape read at a trickle.
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        t, body = time.time(), b""
        while True:
            chunk = s.recv(512)
            if not chunk:
                break
            body += chunk
            time.sleep(0.01)
    print(f"metrics: a {len(body)} B scrape read 512 B per 10 ms took {time.time() - t:.2f} s")
    stop(p)


def cpu_seconds(pid):
    """User plus system CPU time of process `pid` so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def closed_within(s, limit):
    """Seconds until the server closed `s` (reading what it sends), or
    None if it had not after `limit` seconds."""
    t = time.time()
    while time.time() - t < limit:
        s.settimeout(max(0.01, limit - (time.time() - t)))
        try:
            if not s.recv(65536):
                return time.time() - t
        except socket.timeout:
            return None
        except OSError:
            return time.time() - t
    return None


def post(body):
    """A text/plain POST, which any web page can make a browser send to
    127.0.0.1 without a preflight."""
    return (f"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: text/plain\r\n"
            f"Content-Length: {len(body)}\r\n\r\n{body}").encode()


def http_post(tmp):
    """A POST whose body is commands, to the DSL, Redis and spatial ports:
    whether the body ran, and how long until the connection was closed."""
    spatial_port = free_port()
    p, ports = start_ports(os.path.join(tmp, "post"), "--resp", "0",
                           "--spatial-dir", os.path.join(tmp, "post-spatial"),
                           "--spatial-port", str(spatial_port), want=("dsl", "redis"))
    time.sleep(0.5)
    cases = [("dsl", ports["dsl"], "p 1 1\n"), ("redis", ports["redis"], "SET evil 1\r\n"),
             ("spatial", spatial_port, "i 1 1 1\n")]
    for name, port, body in cases:
        with socket.create_connection(("127.0.0.1", port)) as s:
            t = time.time()
            s.sendall(post(body))
            took = closed_within(s, 5)
        if name == "redis":
            with socket.create_connection(("127.0.0.1", port)) as s:
                s.sendall(resp_request("GET", "evil"))
                stored = not recv_exactly(s, 5).startswith(b"$-1")
        elif name == "dsl":
            stored = ask(port, "g 1\n") != "\n@bye\n"
        else:
            stored = ask(port, "c 0 0 2 2\n") != "0\n@bye\n"
        closed = f"closed after {took * 1e3:.1f} ms" if took is not None else "open after 5 s"
        print(f"http post to the {name} port: body {'stored' if stored else 'not stored'}, "
              f"connection {closed}")
    stop(p)


def slowloris(tmp, n=1024):
    """n sockets (the default cap) that each sent 30 bytes of a request,
    on the DSL and the Redis ports with default flags: how long they
    hold the port, and when a new client is served again (watched for 30 s)."""
    p, ports = start_ports(os.path.join(tmp, "loris"), "--resp", "0", want=("dsl", "redis"))
    time.sleep(0.5)
    for name, partial, probe, answer in [
            ("dsl", b"p 1 2 3 4 5 6 7 8 9 10 11 12 1", b"g 1\n@sync\n", b"@sync\n"),
            ("redis", b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$99\r\nabcde", b"PING\r\n", b"+PONG\r\n")]:
        port = ports[name]
        t = time.time()
        socks = []
        for _ in range(n):
            s = socket.create_connection(("127.0.0.1", port))
            s.sendall(partial)
            socks.append(s)
        opened = time.time() - t
        served_after = None
        while time.time() - t < 30 and served_after is None:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=2) as c:
                    c.sendall(probe)
                    got = b""
                    while not got.endswith(b"\n"):
                        chunk = c.recv(4096)
                        if not chunk:
                            break
                        got += chunk
                    if got.endswith(answer):
                        served_after = time.time() - t
            except OSError:
                pass
            if served_after is None:
                time.sleep(0.5)
        # Each is waited for until 40 s after the first was opened.
        closed = [s for s in socks
                  if closed_within(s, max(0.05, t + 40 - time.time())) is not None]
        last = time.time() - t
        for s in socks:
            s.close()
        served = f"a new client served after {served_after:.1f} s" if served_after \
            else "no new client served in 30 s"
        closing = f"{len(closed)} of them closed by the server, the last after {last:.1f} s" \
            if closed else "none closed by the server in 40 s"
        print(f"slowloris on the {name} port: {n} unfinished requests (opened in {opened:.1f} s), "
              f"{served}; {closing}")
    stop(p)


def metrics_slow(tmp, slow=24, scrapes=21):
    """`slow` clients that keep sending a request head a byte at a time
    (each reconnects when cut off), and `scrapes` real scrapes meanwhile."""
    p, ports = start_ports(os.path.join(tmp, "metrics-slow"), "--metrics", "127.0.0.1:0",
                           want=("dsl", "metrics"))
    port = ports["metrics"]
    time.sleep(0.5)
    attacking = threading.Event()
    attacking.set()

    def attacker():
        while attacking.is_set():
            try:
                with socket.create_connection(("127.0.0.1", port)) as s:
                    s.sendall(b"GET /metrics HTTP/1.1\r\n")
                    while attacking.is_set():
                        s.sendall(b"X")
                        time.sleep(0.1)
            except OSError:
                pass

    threads = [threading.Thread(target=attacker, daemon=True) for _ in range(slow)]
    for th in threads:
        th.start()
    time.sleep(1)
    answered, took = 0, []
    for _ in range(scrapes):
        t = time.time()
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
                s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
                head = s.recv(64)
                if head.startswith(b"HTTP/1.1 200"):
                    answered += 1
                    took.append(time.time() - t)
        except OSError:
            pass
        time.sleep(0.25)
    attacking.clear()
    for th in threads:
        th.join(timeout=5)
    slowest = f", the slowest in {max(took) * 1e3:.1f} ms" if took else ""
    print(f"metrics: {slow} slow clients, {answered} of {scrapes} real scrapes answered{slowest}")
    stop(p)


def scan_bomb(tmp, limit=120):
    """SCAN MATCH with 1.5 MB patterns against 1 KiB keys: the server's
    CPU seconds and the time to the reply (given up after `limit` seconds);
    then, with a 1 MiB key too, a client that pipelines costly SCANs and
    hangs up: the server's CPU seconds over the next 10 s."""
    p, ports = start_ports(os.path.join(tmp, "scan"), "--resp", "0", want=("dsl", "redis"))
    port = ports["redis"]
    with socket.create_connection(("127.0.0.1", port)) as s:
        for i in range(20):
            s.sendall(resp_request("SET", b"a" * 1024 + b"%d" % i, "v"))
            assert recv_exactly(s, 5) == b"+OK\r\n"
    time.sleep(0.5)
    for name, pattern in [("*[xxx... (an unclosed class)", b"*[" + b"x" * 1_500_000),
                          ("*a*a*a...", b"*a" * 750_000)]:
        cpu = cpu_seconds(p.pid)
        t = time.time()
        with socket.create_connection(("127.0.0.1", port)) as s:
            s.sendall(resp_request("SCAN", "0", "MATCH", pattern, "COUNT", "100"))
            s.settimeout(limit)
            try:
                answered = bool(s.recv(64))
            except socket.timeout:
                answered = False
        took = time.time() - t
        used = cpu_seconds(p.pid) - cpu
        outcome = f"answered in {took:.2f} s" if answered else f"no reply in {limit} s"
        print(f"scan: MATCH {name} of 1.5 MB over 20 keys of 1 KiB: {outcome}, "
              f"server CPU {used:.2f} s")
        if not answered:
            # The thread goes on; the server is restarted for what follows.
            p.kill()
            p.wait()
            p, ports = start_ports(os.path.join(tmp, "scan"), "--resp", "0",
                                   want=("dsl", "redis"))
            port = ports["redis"]
            time.sleep(0.5)
    scan = f"SCAN 0 MATCH *{'a' * 200}c* COUNT 21\r\n".encode()
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(resp_request("SET", b"a" * (1 << 20), "v"))
        assert recv_exactly(s, 5) == b"+OK\r\n"
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(scan * 60)
    time.sleep(0.2)
    cpu = cpu_seconds(p.pid)
    time.sleep(10)
    print(f"scan: a client pipelined 60 costly SCANs and hung up: server CPU "
          f"{cpu_seconds(p.pid) - cpu:.2f} s in the next 10 s")
    p.kill()
    p.wait()


def open_fds(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def serve_flags(flag):
    """Whether this lamina's `serve` has `flag` (binaries from before it do not)."""
    out = subprocess.run([LAMINA, "serve", "--help"], capture_output=True, text=True).stdout
    return flag in out


def redis_ping(s, timeout):
    """A PING's outcome on `s`: "served", "refused" (Redis's over-cap
    error line or a close), "no answer" within `timeout` seconds, or
    the reply itself."""
    s.settimeout(timeout)
    try:
        s.sendall(b"PING\r\n")
        reply = s.recv(64)
    except socket.timeout:
        return "no answer"
    except OSError:
        return "refused"
    if reply == b"+PONG\r\n":
        return "served"
    if reply in (b"", b"-ERR max number of clients reached\r\n"):
        return "refused"
    return repr(reply)


def descriptors(tmp, n=400):
    """Descriptors the server holds per idle Redis connection."""
    p, ports = start_ports(os.path.join(tmp, "fds"), "--resp", "0", want=("dsl", "redis"))
    time.sleep(0.5)
    base = open_fds(p.pid)
    socks = [socket.create_connection(("127.0.0.1", ports["redis"])) for _ in range(n)]
    outcomes = [redis_ping(s, 10) for s in socks]
    held = open_fds(p.pid)
    for s in socks:
        s.close()
    stop(p)
    print(f"descriptors: {outcomes.count('served')} idle Redis connections, server descriptors "
          f"{base} -> {held}, {(held - base) / n:.2f} per connection")


def descriptor_crowd(tmp, n=600, nofile=1024):
    """Idle Redis clients past what `ulimit -n 1024` allows, while a DSL
    client writes through flushes and a compaction."""
    def limit():
        resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))
    db = os.path.join(tmp, "crowd")
    log = open(os.path.join(tmp, "crowd.log"), "w+")
    p = subprocess.Popen(
        [LAMINA, "serve", "--port", "0", "--dir", db, "--resp", "0", "--buffer-bytes", "256K"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True,
        preexec_fn=limit)
    ports = {}
    while len(ports) < 2:
        line = p.stdout.readline().strip()
        if not line:
            raise SystemExit("server did not start")
        for name, prefix in PORT_LINES.items():
            if line.startswith(prefix):
                ports[name] = int(line.rsplit(":", 1)[1])
    # The writer connects first: a connection after the crowd may find no
    # descriptor left to be accepted with.
    writer = socket.create_connection(("127.0.0.1", ports["dsl"]))
    writer.settimeout(60)
    writer.sendall(b"@sync\n")
    writer.recv(64)
    socks, outcomes = [], {}
    t = time.time()
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", ports["redis"]))
        o = redis_ping(s, 2 if outcomes.get("no answer", 0) < 3 else 0.05)
        outcomes[o] = outcomes.get(o, 0) + 1
        socks.append(s)
    held = open_fds(p.pid)
    errors, replies = [], 0
    with writer as s:
        puts = "".join(f"p {i} {i}\n" for i in range(200_000))
        s.sendall(f"{puts}flush\ncompact\ng 199999\n@end\n".encode())
        data = b""
        while not data.endswith(b"@bye\n"):
            try:
                chunk = s.recv(1 << 16)
            except OSError:
                break
            if not chunk:
                break
            data += chunk
        for line in data.decode().splitlines():
            replies += 1
            if line.startswith("ERROR"):
                errors.append(line)
    for s in socks:
        s.close()
    with socket.create_connection(("127.0.0.1", ports["redis"])) as s:
        after = redis_ping(s, 10)
    stop(p)
    log.seek(0)
    err = log.read()
    emfile = err.count("Too many open files")
    warning = [l for l in err.splitlines() if "ulimit -n" in l]
    print(f"crowd: ulimit -n {nofile}, {n} idle Redis clients in {time.time() - t:.1f} s: {outcomes}, "
          f"server descriptors {held}; DSL writes, flush, compact: {replies} replies, "
          f"{len(errors)} errors {errors[:2]}; 'Too many open files' {emfile} times in the log; "
          f"a new client after the crowd: {after}; warning: {warning[:1]}")


def unfinished_requests(tmp, size=56 << 20, n=16, each=32 << 20, budget="256M"):
    """One unfinished 56 MiB Redis request, then n unfinished requests of
    `each` bytes against a budget of `budget` (where the binary has it)."""
    p, ports = start_ports(os.path.join(tmp, "unfinished"), "--resp", "0", want=("dsl", "redis"))
    port = ports["redis"]

    def held_rss(base):
        # Until the server has read what was sent: its memory stops growing.
        last = 0
        for _ in range(100):
            time.sleep(0.5)
            now = rss_kib(p.pid)
            if now == last:
                break
            last = now
        return now - base

    time.sleep(0.5)
    base = rss_kib(p.pid)
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$%d\r\n" % (size + 1) + b"x" * size)
    grown = held_rss(base)
    print(f"unfinished: one {size >> 20} MiB request, server RSS +{grown / 1024:.1f} MiB")
    s.close()
    stop(p)

    budgeted = serve_flags("--max-request-bytes-total")
    flags = ["--max-request-bytes-total", budget] if budgeted else []
    p, ports = start_ports(os.path.join(tmp, "unfinished2"), "--resp", "0", *flags,
                           want=("dsl", "redis"))
    port = ports["redis"]
    time.sleep(0.5)
    base = rss_kib(p.pid)
    body = b"x" * each
    socks = []

    def send(s):
        try:
            s.sendall(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$%d\r\n" % (each + 1) + body)
        except OSError:
            pass
    senders = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port))
        socks.append(s)
        senders.append(threading.Thread(target=send, args=(s,)))
        senders[-1].start()
    for t in senders:
        t.join()
    grown = held_rss(base)
    refused = 0
    for s in socks:
        s.settimeout(1)
        try:
            if s.recv(256).startswith(b"-ERR"):
                refused += 1
        except OSError:
            pass
        s.close()
    print(f"unfinished: {n} requests of {each >> 20} MiB ({n * each >> 20} MiB) "
          f"{'against a budget of ' + budget if budgeted else 'without a budget'}: "
          f"{refused} refused, server RSS +{grown / 1024:.1f} MiB")
    stop(p)


def main():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    with tempfile.TemporaryDirectory() as tmp:
        only = os.environ.get("ONLY")  # e.g. ONLY=redis,metrics
        for name, f in [("idle", idle_connections), ("slow", slow_reader),
                        ("load", stuck_load), ("redis", redis_port),
                        ("metrics", metrics_port), ("post", http_post),
                        ("slowloris", slowloris), ("metrics-slow", metrics_slow),
                        ("scan", scan_bomb), ("descriptors", descriptors),
                        ("crowd", descriptor_crowd), ("unfinished", unfinished_requests),
                        ("multi", redis_transactions)]:
            if not only or name in only.split(","):
                f(tmp)


if __name__ == "__main__":
    main()
