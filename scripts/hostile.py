#!/usr/bin/env python3
"""Figures for docs/reliability.md, "Hostile clients": server memory per idle
connection, memory while streaming a ~100 MB reply to a slow reader, and the
time from SIGTERM to exit while a client loads a large file.

    scripts/hostile.py [LAMINA_BINARY]      # default: target/release/lamina

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


def start(db, *extra, cwd=None):
    p = subprocess.Popen(
        [LAMINA, "serve", "--port", "0", "--dir", db, *extra],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        cwd=cwd, text=True)
    for _ in range(10):
        line = p.stdout.readline()
        if line.startswith("lamina: listening on "):
            return p, int(line.rsplit(":", 1)[1])
    p.kill()
    raise SystemExit("server did not start")


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


def main():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    with tempfile.TemporaryDirectory() as tmp:
        idle_connections(tmp)
        slow_reader(tmp)
        stuck_load(tmp)


if __name__ == "__main__":
    main()
