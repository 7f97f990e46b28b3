"""lamina.sim and lamina.experiment against the `lamina` binary: the same
arguments must give the same rows as `lamina sim` and the same columns as
`lamina experiment`'s results.csv."""

import csv
import io
import pathlib
import subprocess

import pytest

import lamina


def cli_sim(lamina_bin, args):
    out = subprocess.run(
        [lamina_bin, "sim", *args], check=True, capture_output=True, text=True
    ).stdout
    return list(csv.DictReader(io.StringIO(out)))


# (CLI arguments, the same for lamina.sim)
CASES = [
    (["--policy", "binomial:k=4", "--flushes", "300"], dict(policy="binomial:k=4", flushes=300)),
    (
        ["--policy", "tiered:b=4", "--flushes", "200", "--flush-size", "4096"],
        dict(policy="tiered:b=4", flushes=200, flush_size=4096),
    ),
    (
        ["--policy", "leveling", "--flushes", "150", "--wa", "paper", "--size-ratio", "4"],
        dict(policy="leveling", flushes=150, wa="paper", size_ratio=4),
    ),
    (
        ["--policy", "binomial:k=4", "--flushes", "120", "--flush-uniform", "1000,3000", "--seed", "7"],
        dict(policy="binomial:k=4", flushes=120, flush_uniform=(1000, 3000), seed=7),
    ),
    (
        ["--policy", "tiered:b=4", "--flushes", "100", "--merge-cost", "0.5", "--merge-threads", "2"],
        dict(policy="tiered:b=4", flushes=100, merge_cost=0.5, merge_threads=2),
    ),
]


@pytest.mark.parametrize("cli_args,kwargs", CASES, ids=[" ".join(c[0]) for c in CASES])
def test_sim_rows_equal_the_cli(lamina_bin, cli_args, kwargs):
    expected = cli_sim(lamina_bin, cli_args)
    rows = lamina.sim(**kwargs)
    assert len(rows) == len(expected) == kwargs["flushes"]
    for row, want in zip(rows, expected):
        assert str(row["flush"]) == want["flush"]
        assert f"{row['write_amplification']:.6f}" == want["write_amplification"]
        assert str(row["sorted_runs"]) == want["sorted_runs"]
        assert f"{row['avg_sorted_runs']:.6f}" == want["avg_sorted_runs"]
        if "stalled" in want:
            assert str(row["runs_at_flush"]) == want["runs_at_flush"]
            assert f"{row['stalled']:.3f}" == want["stalled"]
        assert row["policy"].startswith(kwargs["policy"].split(":")[0])


def test_sim_rows_have_every_record_field():
    rows = lamina.sim("binomial:k=4", 10, flush_sizes=[100, 200, 300])
    assert [r["flush"] for r in rows] == [1, 2, 3]  # the list ends first
    assert [r["flush_bytes"] for r in rows] == [100, 200, 300]
    assert set(rows[0]) >= {
        "flush",
        "flush_bytes",
        "write_amplification",
        "sorted_runs",
        "avg_sorted_runs",
        "runs_at_flush",
        "avg_runs_at_flush",
        "transient_space_amplification",
        "merges",
        "stalled",
        "policy",
    }


def test_sim_refuses_bad_arguments():
    with pytest.raises(lamina.InvalidArgumentError, match="nope"):
        lamina.sim("nope", 10)
    with pytest.raises(lamina.InvalidArgumentError, match="flush size"):
        lamina.sim("leveling", 10, flush_size=0)
    with pytest.raises(lamina.InvalidArgumentError, match="at most one"):
        lamina.sim("leveling", 10, flush_size=1, flush_sizes=[1])
    with pytest.raises(lamina.InvalidArgumentError, match="wa"):
        lamina.sim("leveling", 10, wa="other")
    with pytest.raises(lamina.InvalidArgumentError):
        lamina.sim("leveling", 10, flush_uniform=(5, 1))
    with pytest.raises(TypeError):
        lamina.sim("leveling", 10, colour="blue")


SPEC = """
title = "tiny"
strategies = ["leveling", "tiered:b=4"]
seed = 3
[engine]
block_cache_bytes = 1048576
[grid]
write_buffer_size = [65536, 262144]
[[workload]]
name = "load"
ycsb = "load"
records = 3000
[[workload]]
name = "updates"
kv = { inserts = 2000, update_ratio = 1.0, point_lookups = 500, key_size = 4, entry_size = 64 }
"""


def test_experiment_rows_have_the_cli_columns(lamina_bin, tmp_path):
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC)
    subprocess.run(
        [lamina_bin, "experiment", str(spec), "--out", str(tmp_path / "out"), "--work-dir", str(tmp_path)],
        check=True,
        capture_output=True,
    )
    with open(tmp_path / "out" / "results.csv") as f:
        cli_rows = list(csv.DictReader(f))
    rows = lamina.experiment(SPEC, work_dir=str(tmp_path))
    assert len(rows) == len(cli_rows) == 2 * 2 * 2
    for row, want in zip(rows, cli_rows):
        assert list(row)[:-1] == list(want)  # the same columns, then "stats"
        assert isinstance(row["stats"], dict)
        for col in ["run_id", "strategy", "workload"]:
            assert row[col] == want[col]
        for col in ["rep", "write_buffer_size", "ops", "reads", "bytes_ingested"]:
            assert isinstance(row[col], int)
            assert str(row[col]) == want[col]
        for col in ["ops_per_sec", "write_amplification"]:
            assert isinstance(row[col], float)
    # Only the scratch databases' parent is left, empty.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "spec.toml"]


def test_experiment_reads_a_path_and_refuses_bad_specs(tmp_path):
    small = SPEC.replace("records = 3000", "records = 500").replace(
        'strategies = ["leveling", "tiered:b=4"]', 'strategies = ["leveling"]'
    )
    spec = tmp_path / "spec.toml"
    spec.write_text(small)
    by_path = lamina.experiment(spec, work_dir=tmp_path)
    by_str = lamina.experiment(str(spec), work_dir=str(tmp_path))
    assert [r["run_id"] for r in by_path] == [r["run_id"] for r in by_str]
    assert len(by_path) == 4
    with pytest.raises(lamina.InvalidArgumentError, match="strategy"):
        lamina.experiment(small.replace('"leveling"', '"nope"'))
    with pytest.raises(lamina.InvalidArgumentError):
        lamina.experiment("this is not toml")
    with pytest.raises(lamina.StorageIOError):
        lamina.experiment(pathlib.Path(tmp_path / "missing.toml"))


def test_the_gil_is_released_while_the_engine_works():
    """A second Python thread keeps running during a long simulation: the
    longest pause between its steps is far shorter than the simulation."""
    import threading
    import time

    done = []
    # Leveling's simulation is the slowest per flush (about 0.15 s for
    # 5,000 flushes in a release build, about 1.5 s for 40,000).
    flushes = 40_000
    t = threading.Thread(target=lambda: done.append(lamina.sim("leveling", flushes)))
    last, longest = time.perf_counter(), 0.0
    start = last
    t.start()
    while t.is_alive():
        now = time.perf_counter()
        longest = max(longest, now - last)
        last = now
    t.join()
    took = time.perf_counter() - start
    assert len(done[0]) == flushes
    assert took > 0.2, "the simulation is too short to tell"
    assert longest < took / 2, (longest, took)
