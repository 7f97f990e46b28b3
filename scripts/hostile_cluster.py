#!/usr/bin/env python3
"""Figures for docs/reliability.md, "Hostile clients", on the cluster's two
ports: a three-member `lamina cluster` on 127.0.0.1, then

  forged   a forged AppendEntries of vote.term = 2^64-1 (no handshake) to
           every member's Raft port, then SIGKILL of the leader: does a new
           leader acknowledge a write within 20 s?
  post     a text/plain POST whose body is `p 1 1` and `@remove 2` to the
           leader's client port: what comes back, is key 1 stored, is
           member 2 still replicating?
  idle     members run under `ulimit -n 1024`; N idle client connections
           to the leader (default 1100): RSS per connection, how many were
           refused, and are writes still acknowledged (on a connection
           opened before, and forwarded by a follower)?
  stalled  one Raft frame announced at 32 MiB with 31 MiB sent, then
           silence: the leader's RSS held and how long until it closes the
           connection (at most 40 s watched).

    scripts/hostile_cluster.py [LAMINA_BINARY]    # default: target/release/lamina
    ONLY=forged,post scripts/hostile_cluster.py   # some of the cases
    INSECURE=1 ...   # no secret_file (the new binary gets --insecure)
    OLD=1 ...        # a binary from before the secret (no flag, no handshake)

Only loopback connections; every loop is bounded; the members are killed
at the end of each case.
"""
import hashlib
import hmac
import json
import os
import resource
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time

LAMINA = sys.argv[1] if len(sys.argv) > 1 else "target/release/lamina"
OLD = os.environ.get("OLD") == "1"
SECURE = not OLD and os.environ.get("INSECURE") != "1"
ONLY = os.environ.get("ONLY", "forged,post,idle,stalled").split(",")
SECRET = os.urandom(32)


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    def __init__(self, nofile=None, forward=False):
        self.dir = tempfile.mkdtemp(prefix="hostile-cluster-")
        self.raft = {i: free_port() for i in (1, 2, 3)}
        self.client = {i: free_port() for i in (1, 2, 3)}
        lines = []
        if SECURE:
            with open(os.path.join(self.dir, "cluster.secret"), "wb") as f:
                f.write(SECRET)
            os.chmod(os.path.join(self.dir, "cluster.secret"), 0o600)
            lines.append('secret_file = "cluster.secret"')
        for i in (1, 2, 3):
            lines += ["[[node]]", f"id = {i}", f'raft = "127.0.0.1:{self.raft[i]}"',
                      f'client = "127.0.0.1:{self.client[i]}"']
        if forward:
            lines += ["[client]", "forward_writes = true"]
        config = os.path.join(self.dir, "cluster.toml")
        with open(config, "w") as f:
            f.write("\n".join(lines) + "\n")

        def limit():
            if nofile:
                resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

        self.procs = {}
        for i in (1, 2, 3):
            args = [LAMINA, "cluster", "--config", config, "--node-id", str(i),
                    "--dir", os.path.join(self.dir, f"n{i}")]
            if i == 1:
                args.append("--init")
            if not OLD and not SECURE:
                args.append("--insecure")
            log = open(os.path.join(self.dir, f"n{i}.log"), "w")
            self.procs[i] = subprocess.Popen(args, stdout=log, stderr=log,
                                             preexec_fn=limit)

    def call(self, i, line, timeout=5):
        """One line to member i's client port; its reply line (or the
        error)."""
        try:
            with socket.create_connection(("127.0.0.1", self.client[i]), timeout=timeout) as s:
                s.sendall(line.encode() + b"\n")
                return s.makefile().readline().strip()
        except OSError as e:
            return f"({e})"

    def leader(self, among=(1, 2, 3), wait=20):
        """The member that says it leads, with a write acknowledged."""
        deadline = time.time() + wait
        while time.time() < deadline:
            for i in among:
                if self.procs[i].poll() is not None:
                    continue
                reply = self.call(i, "@leader", timeout=1)
                if reply.startswith("LEADER ") and reply.split()[1] != "unknown":
                    lead = int(reply.split()[1])
                    if lead in among and self.call(lead, "p 999 1", timeout=2) == "OK":
                        return lead
            time.sleep(0.1)
        return None

    def stop(self):
        for p in self.procs.values():
            if p.poll() is None:
                p.kill()
            p.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


def handshake(s):
    """The client's side of the Raft port's handshake (crate::auth)."""
    ns = recv_exact(s, 32)
    nc = os.urandom(32)
    s.sendall(nc + hmac.new(SECRET, b"lamina-raft v1 client" + ns + nc, hashlib.sha256).digest())
    answer = recv_exact(s, 32)
    want = hmac.new(SECRET, b"lamina-raft v1 server" + ns + nc, hashlib.sha256).digest()
    assert hmac.compare_digest(answer, want), "the member failed the handshake"


def recv_exact(s, n):
    got = b""
    while len(got) < n:
        b = s.recv(n - len(got))
        if not b:
            raise EOFError(f"closed after {len(got)} of {n} bytes")
        got += b
    return got


def frame(obj):
    body = json.dumps(obj, separators=(",", ":")).encode()
    return struct.pack(">I", len(body)) + body


def read_all(s, timeout):
    s.settimeout(timeout)
    got = b""
    try:
        while True:
            b = s.recv(65536)
            if not b:
                return got, "closed"
            got += b
    except socket.timeout:
        return got, "open"
    except OSError as e:
        return got, f"reset ({e.errno})"


def case_forged():
    c = Cluster()
    try:
        lead = c.leader()
        forged = frame({"shard": 0, "rpc": {"Append": {
            "vote": {"leader_id": {"term": 2**64 - 1, "node_id": lead}, "committed": True},
            "prev_log_id": None, "entries": [], "leader_commit": None}}})
        answers = []
        for i in (1, 2, 3):
            with socket.create_connection(("127.0.0.1", c.raft[i])) as s:
                s.sendall(forged)
                got, how = read_all(s, 2)
                answers.append(f"member {i}: {len(got)} bytes back, {how}"
                               + (f" ({got[4:90].decode(errors='replace')}...)" if len(got) > 32 else ""))
        time.sleep(1)
        c.procs[lead].kill()
        started = time.time()
        others = tuple(i for i in (1, 2, 3) if i != lead)
        second = c.leader(among=others, wait=20)
        alive = [i for i in others if c.procs[i].poll() is None]
        print(f"forged: {'; '.join(answers)}")
        if second:
            print(f"forged: survived: new leader {second} acknowledged a write "
                  f"{time.time() - started:.1f} s after the old one was killed")
        else:
            print(f"forged: survived: NO, no leader within 20 s; members still running: {alive}")
    finally:
        c.stop()


def case_post():
    c = Cluster()
    try:
        lead = c.leader()
        body = b"p 1 1\n@remove 2\n"
        req = (b"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: text/plain\r\n"
               + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
        with socket.create_connection(("127.0.0.1", c.client[lead])) as s:
            s.sendall(req)
            got, how = read_all(s, 3)
        stored = c.call(lead, "g 1")
        # Member 2 still replicates if it sees a write made now.
        c.call(lead, "p 5 5")
        seen = "no"
        deadline = time.time() + 5
        while time.time() < deadline and seen == "no":
            with socket.create_connection(("127.0.0.1", c.client[2]), timeout=2) as s:
                s.sendall(b"@follower-reads on\ng 5\n")
                f = s.makefile()
                f.readline()
                if f.readline().strip() == "5":
                    seen = "yes"
            time.sleep(0.2)
        print(f"post: reply {got!r} ({how}); g 1 -> {stored!r}; member 2 "
              f"{'still replicates' if seen == 'yes' else 'gets no new writes'}")
    finally:
        c.stop()


def case_idle():
    n = int(os.environ.get("IDLE", "1100"))
    c = Cluster(nofile=1024, forward=True)
    socks = []
    try:
        lead = c.leader()
        follower = next(i for i in (1, 2, 3) if i != lead)
        writer = socket.create_connection(("127.0.0.1", c.client[lead]), timeout=15)
        wf = writer.makefile()
        base = rss_kib(c.procs[lead].pid)
        refused = 0
        for _ in range(n):
            try:
                s = socket.create_connection(("127.0.0.1", c.client[lead]), timeout=2)
                socks.append(s)
            except OSError:
                refused += 1
        time.sleep(1)
        for s in socks:
            s.setblocking(False)
            try:
                if s.recv(64).startswith(b"ERROR too many"):
                    refused += 1
            except (BlockingIOError, OSError):
                pass
        grown = rss_kib(c.procs[lead].pid) - base
        started = time.time()
        acked = 0
        for k in range(100):
            try:
                writer.sendall(f"p {k} {k}\n".encode())
                if wf.readline().strip() == "OK":
                    acked += 1
            except OSError:
                break
        took = time.time() - started
        forwarded = c.call(follower, "p 7 7", timeout=15)
        print(f"idle: {n} connections to the leader under ulimit -n 1024: {refused} refused, "
              f"RSS +{grown} KiB ({grown * 1024 // max(1, n - refused)} B per held one); "
              f"{acked}/100 writes acknowledged on an older connection in {took:.1f} s; "
              f"a follower's forwarded write: {forwarded!r}")
    finally:
        for s in socks:
            s.close()
        c.stop()


def case_stalled():
    c = Cluster()
    try:
        lead = c.leader()
        pid = c.procs[lead].pid
        base = rss_kib(pid)
        s = socket.create_connection(("127.0.0.1", c.raft[lead]))
        if SECURE:
            handshake(s)
        s.sendall(struct.pack(">I", 32 << 20))
        chunk = b"[" * (1 << 20)
        for _ in range(31):
            s.sendall(chunk)
        sent = time.time()
        time.sleep(1)
        held = rss_kib(pid) - base
        got, how = read_all(s, 40)
        took = time.time() - sent
        s.close()
        time.sleep(0.5)
        after = rss_kib(pid) - base
        print(f"stalled: a 32 MiB frame, 31 MiB sent: leader RSS +{held // 1024} MiB held; "
              f"connection {how} after {took:.1f} s; RSS +{after // 1024} MiB after")
    finally:
        c.stop()


if __name__ == "__main__":
    for name in ONLY:
        {"forged": case_forged, "post": case_post, "idle": case_idle,
         "stalled": case_stalled}[name]()
