"""The Rust API's reads and maintenance calls from Python, against a dict
model: multi_get, bounded and prefixed iterators in both directions with
seeks and include_key/include_value, WriteBatch.delete_range, property,
checkpoint, compact_range, set_compaction; and the error classes."""

import errno
import os
import random

import pytest

import lamina

from test_db import random_key, random_value


def fill(db, rng, n=2500, universe=None, model=None):
    """Random puts, deletes and range deletes in db and in the dict model
    (a new one unless given); returns the model."""
    model = {} if model is None else model
    for step in range(n):
        k = random_key(rng)
        if universe is not None:
            universe.add(k)
        r = rng.random()
        if r < 0.7:
            v = random_value(rng)
            db.put(k, v)
            model[k] = v
        elif r < 0.95:
            db.delete(k)
            model.pop(k, None)
        else:
            start, end = sorted((k, random_key(rng)))
            batch = lamina.WriteBatch()
            batch.delete_range(start, end)
            db.write(batch)
            for key in [key for key in model if start <= key < end]:
                del model[key]
        if step == n // 2:
            db.flush()
    return model


def range_keys(model, start=None, end=None, prefix=None):
    keys = sorted(model)
    if prefix is not None:
        return [k for k in keys if k.startswith(prefix)]
    return [k for k in keys if (start is None or k >= start) and (end is None or k < end)]


def shape(model, keys, include_key=True, include_value=True):
    if include_key and include_value:
        return [(k, model[k]) for k in keys]
    if include_key:
        return keys
    return [model[k] for k in keys]


def walk_from(keys, anchor, reverse):
    """The keys an iterator yields once positioned on `anchor` (None: at
    no entry) and walking in its direction."""
    if anchor is None:
        return []
    if reverse:
        return [k for k in reversed(keys) if k <= anchor]
    return [k for k in keys if k >= anchor]


def random_spec(rng, keys):
    def bound():
        r = rng.random()
        if r < 0.3:
            return None
        if r < 0.7 and keys:
            return rng.choice(keys)
        return random_key(rng)

    spec = dict(reverse=rng.random() < 0.5)
    if rng.random() < 0.3:
        spec["prefix"] = (rng.choice(keys) if keys else random_key(rng))[: rng.randrange(0, 3)]
    else:
        spec["start"], spec["end"] = bound(), bound()
    r = rng.random()
    if r < 0.25:
        spec["include_value"] = False
    elif r < 0.4:
        spec["include_key"] = False
    return spec


def check_iterators(rng, reader, model, rounds=60):
    all_keys = sorted(model)
    for _ in range(rounds):
        spec = random_spec(rng, all_keys)
        keys = range_keys(model, spec.get("start"), spec.get("end"), spec.get("prefix"))
        inc = (spec.get("include_key", True), spec.get("include_value", True))
        it = reader.iterator(**spec)
        ordered = list(reversed(keys)) if spec["reverse"] else keys
        assert list(it) == shape(model, ordered, *inc), spec
        # Seeks to keys inside, between and outside the range.
        for _ in range(4):
            target = rng.choice(all_keys) if all_keys and rng.random() < 0.5 else random_key(rng)
            at_or_after = [k for k in keys if k >= target]
            at_or_before = [k for k in keys if k <= target]
            it.seek(target)
            want = walk_from(keys, at_or_after[0] if at_or_after else None, spec["reverse"])
            assert list(it) == shape(model, want, *inc), (spec, target, "seek")
            it.seek_for_prev(target)
            want = walk_from(keys, at_or_before[-1] if at_or_before else None, spec["reverse"])
            assert list(it) == shape(model, want, *inc), (spec, target, "seek_for_prev")
        it.seek_to_first()
        assert list(it) == shape(model, walk_from(keys, keys[0] if keys else None, spec["reverse"]), *inc)
        it.seek_to_last()
        assert list(it) == shape(model, walk_from(keys, keys[-1] if keys else None, spec["reverse"]), *inc)


@pytest.mark.parametrize("compaction", ["leveling", "tiered:b=4"])
def test_iterators_and_multi_get_match_a_dict(db_path, compaction):
    rng = random.Random(compaction)
    universe = set()
    with lamina.open(db_path, write_buffer_size=4096, compaction=compaction) as db:
        model = fill(db, rng, universe=universe)
        snap = db.snapshot()
        frozen = dict(model)
        check_iterators(rng, db, model)
        keys = sorted(universe) + [b"absent-key"]
        rng.shuffle(keys)
        assert db.multi_get(keys) == [model.get(k) for k in keys]
        assert db.multi_get([]) == []
        # Later writes change the database, not the snapshot.
        fill(db, rng, n=800, model=model)
        for k in list(model)[:50]:
            db.delete(k)
            del model[k]
        check_iterators(rng, db, model, rounds=20)
        check_iterators(rng, snap, frozen, rounds=30)
        assert snap.multi_get(keys) == [frozen.get(k) for k in keys]
        assert db.get(b"absent-key", b"fallback") == b"fallback"
        assert snap.get(b"absent-key", 7) == 7


def test_iterator_arguments_and_laziness(db_path):
    with lamina.open(db_path) as db:
        for k in [b"a", b"ab", b"abc", b"b", b"ba", b"c"]:
            db.put(k, k.upper())
        assert list(db.iterator(prefix=b"a", include_value=False)) == [b"a", b"ab", b"abc"]
        assert list(db.iterator(prefix=b"b", reverse=True)) == [(b"ba", b"BA"), (b"b", b"B")]
        assert list(db.iterator(b"ab", stop=b"b", include_key=False)) == [b"AB", b"ABC"]
        assert list(db.iterator(start=b"b", end=b"c", reverse=True)) == [(b"ba", b"BA"), (b"b", b"B")]
        assert list(db.iterator(prefix=b"\xff")) == []
        it = db.iterator()
        assert next(it) == (b"a", b"A")
        db.put(b"aa", b"later")  # after the iterator was made: invisible
        assert [k for k, _ in it] == [b"ab", b"abc", b"b", b"ba", b"c"]
        it.seek(b"aa")
        assert next(it) == (b"ab", b"AB")  # still without b"aa"
        it.close()
        assert list(it) == []
        with pytest.raises(ValueError):
            db.iterator(include_key=False, include_value=False)
        with pytest.raises(TypeError):
            db.iterator(prefix=b"a", start=b"a")
        with pytest.raises(TypeError):
            db.iterator(end=b"a", stop=b"b")
        with pytest.raises(TypeError):
            db.iterator(prefix="text")


def test_compact_range_and_set_compaction_keep_the_data(db_path):
    rng = random.Random(7)
    with lamina.open(db_path, write_buffer_size=4096, compaction="tiered:b=4") as db:
        model = fill(db, rng)
        db.flush()
        before = db.stats()["compaction_bytes_written"]
        db.compact_range(b"\x40", b"\xc0")
        assert dict(db.scan()) == model
        db.set_compaction("leveling:T=4")
        assert db.compaction.startswith("leveling")
        fill(db, rng, n=1500, model=model)
        db.compact_range()
        assert db.stats()["compaction_bytes_written"] > before
        assert dict(db.scan()) == model
        # After a full compaction everything is in the deepest level.
        levels = db.stats()["levels"]
        assert sum(1 for lvl in levels if lvl["files"] > 0) == 1
    with lamina.open(db_path) as db:
        assert dict(db.scan()) == model


def test_property(db_path):
    with lamina.open(db_path, compaction="leveling:T=4") as db:
        assert db.property("lamina.num-files-at-level0") == "0"
        db.put(b"k", b"v")
        db.flush()
        assert db.property("lamina.num-files-at-level0") == "1"
        assert db.property("lamina.compaction-spec") == db.compaction
        assert "Compaction Stats" in db.property("lamina.stats")
        assert db.property("lamina.no-such-property") is None


def test_checkpoint_is_an_openable_copy(db_path, tmp_path):
    rng = random.Random(3)
    copy = str(tmp_path / "copy")
    with lamina.open(db_path, write_buffer_size=4096) as db:
        model = fill(db, rng)
        report = db.checkpoint(copy)
        db.put(b"after", b"the checkpoint")
        assert report["files"] == len([f for f in os.listdir(copy) if f.endswith(".sst")])
        assert report["manifest"] in os.listdir(copy)
        assert report["sequence"] > 0
        with pytest.raises(lamina.InvalidArgumentError, match="not empty"):
            db.checkpoint(copy)
    with lamina.open(copy) as c:
        assert dict(c.scan()) == model


def test_storage_io_error_is_an_oserror_and_does_not_shadow_the_builtin(tmp_path):
    assert not hasattr(lamina, "IOError")
    assert issubclass(lamina.StorageIOError, lamina.Error)
    assert issubclass(lamina.StorageIOError, OSError)
    namespace = {}
    exec("from lamina import *", namespace)
    assert namespace.get("IOError", IOError) is OSError
    with pytest.raises(OSError) as raised:
        lamina.open("/proc/version/db")  # /proc/version is a file
    assert isinstance(raised.value, lamina.StorageIOError)
    assert raised.value.errno == errno.ENOTDIR
    assert "/proc/version" in str(raised.value)
    with pytest.raises(lamina.StorageIOError) as raised:
        lamina.experiment(tmp_path / "missing.toml")
    assert raised.value.errno == errno.ENOENT
