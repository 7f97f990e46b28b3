"""The Db API against a Python dict (the oracle): every read the engine
answers is compared with what the dict says after the same writes."""

import os
import random
import threading

import pytest

import lamina

# Edge bytes beside random ones: the empty key, the smallest and largest
# bytes, prefixes of one another.
EDGE_KEYS = [b"", b"\x00", b"\x00\x00", b"\x00\xff", b"\xff", b"\xff\xff", b"\xff\x00", b"a", b"ab"]


def random_key(rng):
    if rng.random() < 0.1:
        return rng.choice(EDGE_KEYS)
    return bytes(rng.randrange(256) for _ in range(rng.randrange(1, 6)))


def random_value(rng):
    return bytes(rng.randrange(256) for _ in range(rng.randrange(0, 40)))


def model_scan(model, start, end, reverse=False):
    keys = sorted(k for k in model if (start is None or k >= start) and (end is None or k < end))
    if reverse:
        keys.reverse()
    return [(k, model[k]) for k in keys]


def random_bound(rng, keys):
    r = rng.random()
    if r < 0.25:
        return None
    if r < 0.6 and keys:
        return rng.choice(keys)
    return random_key(rng)


def check_reads(rng, reader, model, universe, scans=30):
    for k in universe:
        assert reader.get(k) == model.get(k), k
    keys = sorted(universe)
    for _ in range(scans):
        start, end = random_bound(rng, keys), random_bound(rng, keys)
        reverse = rng.random() < 0.5
        got = list(reader.scan(start, end, reverse=reverse))
        assert got == model_scan(model, start, end, reverse), (start, end, reverse)
    assert list(reader.scan()) == model_scan(model, None, None)
    assert list(reader.scan(reverse=True)) == model_scan(model, None, None, True)


@pytest.mark.parametrize("compaction", ["leveling", "tiered:b=4", "binomial:k=4"])
def test_random_operations_match_a_dict(db_path, compaction):
    rng = random.Random(compaction)
    model = {}
    universe = set(EDGE_KEYS)
    # A small buffer: the keys cross memtables, flushes and compactions.
    with lamina.open(db_path, write_buffer_size=4096, compaction=compaction) as db:
        for step in range(3000):
            op = rng.random()
            key = random_key(rng)
            universe.add(key)
            if op < 0.55:
                value = random_value(rng)
                db.put(key, value)
                model[key] = value
            elif op < 0.75:
                db.delete(key)
                model.pop(key, None)
            elif op < 0.77:
                # A range delete, in the Db or in a batch: the dict drops
                # every key of [start, end).
                start, end = sorted((random_key(rng), random_key(rng)))
                if rng.random() < 0.5:
                    db.delete_range(start, end)
                else:
                    batch = lamina.WriteBatch()
                    batch.delete_range(start, end)
                    db.write(batch)
                for k in [k for k in model if start <= k < end]:
                    del model[k]
            elif op < 0.85:
                batch = lamina.WriteBatch()
                for _ in range(rng.randrange(1, 8)):
                    k = random_key(rng)
                    universe.add(k)
                    if rng.random() < 0.7:
                        v = random_value(rng)
                        batch.put(k, v)
                        model[k] = v
                    else:
                        batch.delete(k)
                        model.pop(k, None)
                db.write(batch)
            else:
                assert db.get(key) == model.get(key)
            if step % 1000 == 999:
                check_reads(rng, db, model, universe)
        db.flush()
        check_reads(rng, db, model, universe)
        db.compact()
        check_reads(rng, db, model, universe)
        assert db.stats()["bytes_ingested"] > 0
    # Everything survives a reopen.
    with lamina.open(db_path, compaction=compaction) as db:
        check_reads(rng, db, model, universe)


def test_snapshots_do_not_see_later_writes(db_path):
    rng = random.Random(4)
    model = {random_key(rng): random_value(rng) for _ in range(300)}
    with lamina.open(db_path, write_buffer_size=2048) as db:
        for k, v in model.items():
            db.put(k, v)
        snap = db.snapshot()
        frozen = dict(model)
        universe = set(model) | set(EDGE_KEYS)
        for _ in range(500):
            k = random_key(rng)
            universe.add(k)
            if rng.random() < 0.6:
                v = random_value(rng)
                db.put(k, v)
                model[k] = v
            else:
                db.delete(k)
                model.pop(k, None)
        db.compact()
        check_reads(rng, snap, frozen, universe)
        check_reads(rng, db, model, universe)
        assert isinstance(snap.sequence, int)


def test_scan_is_lazy_and_fixed_at_its_start(db_path):
    with lamina.open(db_path) as db:
        for i in range(1000):
            db.put(i.to_bytes(4, "big"), b"v")
        it = db.scan(b"\x00\x00\x00\x0a", b"\x00\x00\x01\x00")
        assert next(it) == (b"\x00\x00\x00\x0a", b"v")
        db.put(b"\x00\x00\x00\x0b", b"later")
        db.delete(b"\x00\x00\x00\x0c")
        rest = list(it)
        # The scan reads the database as it was when it started.
        assert rest[0] == (b"\x00\x00\x00\x0b", b"v")
        assert rest[1] == (b"\x00\x00\x00\x0c", b"v")
        assert len(rest) == 0x100 - 0x0A - 1
        assert iter(it) is it
        assert list(db.scan(b"\x05", b"\x01")) == []


def test_write_batch_is_kept_after_write(db_path):
    batch = lamina.WriteBatch()
    batch.put(b"a", b"1")
    batch.put(b"b", b"2")
    batch.delete(b"a")
    assert len(batch) == 3
    with lamina.open(db_path) as db:
        db.write(batch)
        assert db.get(b"a") is None and db.get(b"b") == b"2"
        db.put(b"b", b"3")
        db.write(batch)  # the same operations again
        assert db.get(b"b") == b"2"
        batch.clear()
        assert len(batch) == 0
        db.write(batch)  # an empty batch is no error


def test_context_manager_and_close(db_path):
    with lamina.open(db_path) as db:
        db.put(b"k", b"v")
        assert not db.closed
    assert db.closed
    assert "closed" in repr(db)
    db.close()  # again: nothing to do
    with pytest.raises(RuntimeError):
        with lamina.open(db_path) as db2:
            raise RuntimeError("boom")
    assert db2.closed  # closed on the way out of an exception too
    with lamina.open(db_path) as db:
        assert db.get(b"k") == b"v"
        assert str(db.path) == db_path


def test_operations_on_a_closed_db_raise(db_path):
    db = lamina.open(db_path)
    db.put(b"a", b"1")
    db.put(b"b", b"2")
    snap = db.snapshot()
    it = db.scan()
    db.close()
    calls = [
        lambda: db.put(b"k", b"v"),
        lambda: db.get(b"k"),
        lambda: db.delete(b"k"),
        lambda: db.write(lamina.WriteBatch()),
        lambda: db.scan(),
        lambda: db.snapshot(),
        lambda: db.flush(),
        lambda: db.compact(),
        lambda: db.stats(),
        lambda: snap.get(b"a"),
        lambda: snap.scan(),
        lambda: next(it),
    ]
    for call in calls:
        with pytest.raises(lamina.ClosedError):
            call()


def test_errors_are_lamina_exceptions(db_path, tmp_path):
    for cls in [
        lamina.StorageIOError,
        lamina.CorruptionError,
        lamina.LockedError,
        lamina.InvalidArgumentError,
        lamina.NeedsRepairError,
        lamina.ClosedError,
        lamina.ReadOnlyError,
        lamina.BackgroundError,
    ]:
        assert issubclass(cls, lamina.Error)
    assert issubclass(lamina.Error, Exception)
    with lamina.open(db_path) as db:
        db.put(b"k", b"v")
        with pytest.raises(lamina.LockedError):
            lamina.open(db_path)
        with pytest.raises(TypeError):
            db.put("text", b"v")
        with pytest.raises(lamina.InvalidArgumentError):
            db.set_compaction("no-such-strategy")
    with lamina.open(db_path, read_only=True) as ro:
        assert ro.get(b"k") == b"v"
        with pytest.raises(lamina.ReadOnlyError):
            ro.put(b"k", b"w")
    with pytest.raises(lamina.Error):
        lamina.open(str(tmp_path / "missing"), create_if_missing=False)
    with pytest.raises(lamina.StorageIOError):
        lamina.open("/proc/version/db")


def test_options_are_checked(db_path):
    with pytest.raises(TypeError, match="unexpected keyword argument 'nope'"):
        lamina.open(db_path, nope=1)
    with pytest.raises(TypeError, match="write_buffer_size"):
        lamina.open(db_path, write_buffer_size="big")
    with pytest.raises(OverflowError, match="write_buffer_size"):
        lamina.open(db_path, write_buffer_size=-1)
    with pytest.raises(lamina.InvalidArgumentError, match="write_buffer_size"):
        lamina.open(db_path, write_buffer_size=10)
    with pytest.raises(lamina.InvalidArgumentError, match="compaction"):
        lamina.open(db_path, compaction="tiered:b=zero")
    with pytest.raises(lamina.InvalidArgumentError, match="sync"):
        lamina.open(db_path, sync="sometimes")
    opts = dict(
        create_if_missing=True,
        write_buffer_size=1 << 16,
        max_immutable_memtables=2,
        block_size=1024,
        bloom_bits_per_key=8.0,
        bloom_bits_per_level=[10.0, 6.0],
        bloom_monkey=False,
        memtable_bloom_bits_per_key=0,
        block_cache_bytes=1 << 20,
        compression="zstd:3",
        compression_per_level=["none", "lz4"],
        row_cache_bytes=1 << 16,
        size_ratio=4,
        target_file_size=1 << 20,
        compaction="tiered:b=4",
        compaction_threads=1,
        compaction_fills_cache=True,
        compaction_warm_up=False,
        compaction_readahead_bytes=1 << 16,
        scan_threads=2,
        level0_stop_runs=20,
        writes_wait_for_compactions=True,
        sync="interval:100",
        write_ahead_log=True,
        mmap_reads=True,
        scan_resistant_cache=False,
        verify_checksums=False,
        max_scan_readahead_bytes=1 << 15,
    )
    with lamina.open(db_path, **opts) as db:
        assert db.compaction.startswith("tiered")
        db.set_compaction("leveling")
        assert db.compaction.startswith("leveling")
        db.put(b"k", b"v")
        assert db.get(b"k") == b"v"
        # Enough data for several flushes, read back through the scan
        # pool and mapped files, against a dict.
        model = {b"key%05d" % i: b"v%d" % (i * 7) for i in range(3000)}
        for k, v in model.items():
            db.put(k, v)
        db.flush()
        model[b"k"] = b"v"
        assert dict(db.scan()) == model
    with pytest.raises(TypeError, match="scan_threads"):
        lamina.open(db_path, scan_threads="two")
    with pytest.raises(lamina.InvalidArgumentError, match="compression"):
        lamina.open(db_path, compression="snappy")


def test_corruption_is_reported(db_path):
    with lamina.open(db_path, block_cache_bytes=0) as db:
        for i in range(2000):
            db.put(b"key%06d" % i, b"value%06d" % i * 4)
        db.flush()
    tables = [f for f in os.listdir(db_path) if f.endswith(".sst")]
    assert tables
    path = os.path.join(db_path, tables[0])
    with open(path, "r+b") as f:
        f.seek(100)  # inside the first data block
        byte = f.read(1)
        f.seek(100)
        f.write(bytes([byte[0] ^ 0xFF]))
    with pytest.raises(lamina.CorruptionError):
        with lamina.open(db_path, block_cache_bytes=0) as db:
            list(db.scan())


def test_stats_is_a_dict_of_the_engine_statistics(db_path):
    with lamina.open(db_path, write_buffer_size=4096) as db:
        for i in range(500):
            db.put(b"%05d" % i, b"x" * 50)
        db.flush()
        s = db.stats()
    assert isinstance(s, dict)
    assert s["bytes_ingested"] >= 500 * 55
    assert s["write_amplification"] >= 1.0
    assert isinstance(s["levels"], list)


def test_threads_share_a_db(db_path):
    with lamina.open(db_path, write_buffer_size=8192) as db:

        def writer(t):
            for i in range(500):
                db.put(b"%d-%04d" % (t, i), b"%d" % i)

        threads = [threading.Thread(target=writer, args=(t,)) for t in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(list(db.scan())) == 2000
        assert db.get(b"3-0499") == b"499"
