"""redis-py, unmodified, against `lamina serve --resp`: its default
connection (RESP3 in redis-py 8: `HELLO 3`), RESP2, transactions (MULTI/EXEC
pipelines and WATCH), counters, INFO keyspace and a password from the
environment. The replies are checked against what Redis gives."""

import os
import re
import subprocess
import threading

import pytest
import redis  # scripts/python-tests.sh installs it (pinned)


class Served:
    """`lamina serve --resp 0` on a fresh database; its Redis port."""

    def __init__(self, lamina_bin, tmp_path, env=None):
        self.proc = subprocess.Popen(
            [lamina_bin, "serve", "--dir", str(tmp_path / "db"), "--port", "0", "--resp", "0"],
            stdin=subprocess.PIPE,  # the console reads it: kept open
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env={**os.environ, **(env or {})},
            text=True,
        )
        self.port = None
        for line in self.proc.stdout:
            m = re.match(r"lamina: redis protocol on .*:(\d+)$", line.strip())
            if m:
                self.port = int(m.group(1))
                break
        assert self.port, "the server did not start"

    def client(self, **kw):
        return redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=20, **kw)

    def stop(self):
        self.proc.kill()
        self.proc.wait()


@pytest.fixture
def served(lamina_bin, tmp_path):
    s = Served(lamina_bin, tmp_path)
    yield s
    s.stop()


def test_redis_py_defaults_to_resp3_and_connects(served):
    r = served.client()
    assert r.ping() is True
    # The connection's HELLO said 3 (redis-py 8's default): maps are dicts.
    assert r.execute_command("HELLO")[b"proto"] == 3
    assert r.set("apple", "red") is True
    assert r.get("apple") == b"red"
    assert r.get("missing") is None
    assert r.set("apple", "green", nx=True) is None
    assert r.set("apple", "green", xx=True, get=True) == b"red"
    assert r.mget(["apple", "missing"]) == [b"green", None]
    assert r.exists("apple", "missing") == 1
    assert r.config_get("appendonly") == {"appendonly": "yes"}  # redis-py decodes it
    assert r.client_setname("py") is True
    assert r.client_getname() == "py"  # redis-py decodes it


@pytest.mark.parametrize("protocol", [2, 3])
def test_a_scripted_session_reads_like_redis(served, protocol):
    r = served.client(protocol=protocol, decode_responses=True)
    hello = r.execute_command("HELLO", protocol)
    if protocol == 2:  # a flat array of pairs
        hello = dict(zip(hello[::2], hello[1::2]))
    assert hello["proto"] == protocol
    r.mset({"a": "1", "b": "2", "c": "3"})
    assert r.incr("n") == 1
    assert r.incrby("n", 41) == 42
    assert r.decr("n") == 41
    assert r.decrby("n", 1) == 40
    r.set("text", "x")
    with pytest.raises(redis.ResponseError, match="not an integer"):
        r.incr("text")
    assert r.delete("b", "missing") == 1
    assert sorted(r.scan_iter(match="[ab]")) == ["a"]
    assert r.dbsize() == 4  # a, c, n, text
    assert r.info("keyspace") == {"db0": {"keys": 4, "expires": 0, "avg_ttl": 0}}
    assert "redis_version" in r.info("server")
    # A MULTI/EXEC pipeline: queued, then applied as one batch.
    with r.pipeline(transaction=True) as p:
        p.set("x", "1").incr("x").get("x").delete("c")
        assert p.execute() == [True, 2, "2", 1]
    assert r.get("c") is None
    # A transaction refused at queue time raises and applies nothing.
    with r.pipeline(transaction=True) as p:
        p.set("x", "never").execute_command("NOSUCHCOMMAND")
        with pytest.raises(redis.ResponseError):
            p.execute()
    assert r.get("x") == "2"


def test_watch_retries_an_optimistic_transaction(served):
    r = served.client()
    r.set("balance", 100)
    other = served.client()
    attempts = []

    def withdraw(pipe):
        balance = int(pipe.get("balance"))
        if not attempts:
            other.set("balance", 500)  # a concurrent change: EXEC aborts
        attempts.append(balance)
        pipe.multi()
        pipe.set("balance", balance - 30)

    r.transaction(withdraw, "balance")
    assert attempts == [100, 500]
    assert r.get("balance") == b"470"


def test_concurrent_incr_from_many_clients_is_exact(served):
    def work():
        c = served.client()
        with c.pipeline(transaction=False) as p:
            for _ in range(300):
                p.incr("hits")
            p.execute()

    threads = [threading.Thread(target=work) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert served.client().get("hits") == b"1800"


def test_a_password_from_the_environment(lamina_bin, tmp_path):
    s = Served(lamina_bin, tmp_path, env={"LAMINA_REQUIREPASS": "s3cret pass"})
    try:
        with pytest.raises(redis.AuthenticationError):
            s.client().ping()
        with pytest.raises(redis.AuthenticationError):
            s.client(password="wrong").ping()
        for protocol in (2, 3):
            r = s.client(password="s3cret pass", protocol=protocol)
            assert r.set("k", protocol) is True
            assert r.get("k") == str(protocol).encode()
        # The password is not in the command line anyone can read.
        with open(f"/proc/{s.proc.pid}/cmdline", "rb") as f:
            assert b"s3cret" not in f.read()
    finally:
        s.stop()
