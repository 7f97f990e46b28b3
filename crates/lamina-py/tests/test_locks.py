"""Locks and opening as plyvel/lmdb users expect: close() releases the
directory lock whatever objects are alive; a lock held in this process is
named as such; an open that may not create creates nothing; read-only
opens share, with each other and with a writer (in this process, in
another one, or `lamina kv --read-only` beside a Python writer), each
reading the database as of its open while the writer compacts."""

import os
import subprocess
import sys
import textwrap

import pytest

import lamina


def test_close_releases_the_lock_whatever_objects_are_alive(db_path):
    db = lamina.open(db_path)
    db.put(b"a", b"1")
    db.put(b"b", b"2")
    snap = db.snapshot()
    scan = db.scan()
    it = db.iterator(prefix=b"a")
    snap_it = snap.iterator()
    assert next(scan) == (b"a", b"1")
    db.close()
    # The lock went with close(): the same process opens the directory again.
    with lamina.open(db_path) as again:
        assert again.get(b"b") == b"2"
    for call in [
        lambda: snap.get(b"a"),
        lambda: snap.multi_get([b"a"]),
        lambda: snap.scan(),
        lambda: snap.iterator(),
        lambda: next(scan),
        lambda: next(it),
        lambda: it.seek(b"a"),
        lambda: next(snap_it),
        lambda: snap_it.seek_to_last(),
    ]:
        with pytest.raises(lamina.ClosedError):
            call()


def test_a_snapshot_alive_after_the_with_block_keeps_no_lock(db_path):
    # The README's example: a snapshot taken inside `with` outlives it.
    with lamina.open(db_path) as db:
        db.put(b"k", b"v")
        snap = db.snapshot()
        it = db.iterator()
    with lamina.open(db_path) as db:
        assert db.get(b"k") == b"v"
    with pytest.raises(lamina.ClosedError):
        snap.get(b"k")
    with pytest.raises(lamina.ClosedError):
        list(it)


def test_a_lock_held_in_this_process_says_so(db_path):
    with lamina.open(db_path):
        with pytest.raises(lamina.LockedError, match="in this process") as raised:
            lamina.open(db_path)
        assert "another process" not in str(raised.value)


HOLDER = textwrap.dedent(
    """
    import sys, lamina
    db = lamina.open(sys.argv[1])
    print("ready", flush=True)
    sys.stdin.readline()
    db.close()
    """
)


def test_a_lock_held_by_another_process_says_so(db_path):
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, db_path], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline() == "ready\n"
        with pytest.raises(lamina.LockedError, match="another process"):
            lamina.open(db_path)
    finally:
        holder.communicate("\n", timeout=60)
    assert holder.returncode == 0


@pytest.mark.parametrize("read_only", [False, True])
def test_an_open_that_may_not_create_creates_nothing(tmp_path, read_only):
    missing = tmp_path / "a" / "b"
    with pytest.raises(lamina.InvalidArgumentError, match="nothing was created"):
        lamina.open(str(missing), create_if_missing=False, read_only=read_only)
    assert not (tmp_path / "a").exists()
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(lamina.InvalidArgumentError):
        lamina.open(str(empty), create_if_missing=False, read_only=read_only)
    assert os.listdir(empty) == []


def test_read_only_handles_share_with_each_other_and_the_writer(db_path):
    model = {b"key%04d" % i: b"value%d" % i for i in range(2000)}
    with lamina.open(db_path, write_buffer_size=16384) as writer:
        for k, v in model.items():
            writer.put(k, v)
        readers = [lamina.open(db_path, read_only=True) for _ in range(3)]
        for r in readers:
            assert dict(r.scan()) == model
            with pytest.raises(lamina.ReadOnlyError):
                r.put(b"k", b"v")
        writer.put(b"key0000", b"changed")
        # Opened before the write: they do not see it.
        assert [r.get(b"key0000") for r in readers] == [b"value0"] * 3
        for r in readers:
            r.close()
        with lamina.open(db_path, read_only=True) as fresh:
            assert fresh.get(b"key0000") == b"changed"


WRITER = textwrap.dedent(
    """
    import sys, lamina
    with lamina.open(sys.argv[1], write_buffer_size=16384, block_cache_bytes=0) as db:
        for i in range(6000):
            db.put(b"key%04d" % (i % 2000), b"first%d" % i)
        db.flush()
        for i in range(0, 2000, 3):
            db.delete(b"key%04d" % i)  # these stay in the log
        print("phase1", flush=True)
        sys.stdin.readline()
        for i in range(2000):
            db.put(b"key%04d" % i, b"second%d" % i)
        db.compact()
        db.wait_for_compactions()
        print("phase2", flush=True)
        sys.stdin.readline()
    """
)


def sst_names(path):
    return {f for f in os.listdir(path) if f.endswith(".sst")}


def test_a_reader_keeps_its_version_while_a_writer_process_compacts(db_path):
    # The writer's history, computed independently of the engine.
    phase1 = {b"key%04d" % (i % 2000): b"first%d" % i for i in range(6000)}
    for i in range(0, 2000, 3):
        del phase1[b"key%04d" % i]
    phase2 = {b"key%04d" % i: b"second%d" % i for i in range(2000)}
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, db_path], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert writer.stdout.readline() == "phase1\n"
        reader = lamina.open(db_path, read_only=True, block_cache_bytes=0)
        assert dict(reader.scan()) == phase1
        opened = sst_names(db_path)
        assert opened
        writer.stdin.write("\n")
        writer.stdin.flush()
        assert writer.stdout.readline() == "phase2\n"
        # The writer compacted every table the reader holds away...
        assert not opened & sst_names(db_path)
        # ...and the reader still reads its version, from unlinked files.
        assert dict(reader.scan()) == phase1
        assert dict(reader.scan(reverse=True)) == phase1
        assert reader.multi_get(sorted(phase1)[:100]) == [phase1[k] for k in sorted(phase1)[:100]]
        reader.close()
        with lamina.open(db_path, read_only=True) as fresh:
            assert dict(fresh.scan()) == phase2
    finally:
        writer.communicate("\n", timeout=120)
    assert writer.returncode == 0


def test_lamina_kv_read_only_scans_beside_a_python_writer(db_path, lamina_bin):
    model = {b"key%04d" % i: b"v%d" % i for i in range(1500)}
    with lamina.open(db_path, write_buffer_size=16384) as writer:
        for k, v in model.items():
            writer.put(k, v)
        writer.compact()
        for i in range(0, 1500, 7):
            writer.delete(b"key%04d" % i)
            del model[b"key%04d" % i]

        def kv(*args):
            return subprocess.run(
                [lamina_bin, "kv", "--dir", db_path, *args], capture_output=True, text=True, timeout=120
            )

        done = kv("--read-only", "scan")
        assert done.returncode == 0, done.stderr
        want = "".join(f"{k.decode()}\t{v.decode()}\n" for k, v in sorted(model.items()))
        assert done.stdout == want
        assert kv("count").stdout == f"{len(model)}\n"
        # A write still needs the lock, which the writer holds.
        refused = kv("put", "x", "y")
        assert refused.returncode != 0
        assert "another process" in refused.stderr
