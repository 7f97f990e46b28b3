"""lamina: an LSM-tree key-value storage engine and compaction laboratory."""

import os
import pathlib
from types import TracebackType
from typing import Any, Dict, Iterator, List, Optional, Tuple, Type, Union

__version__: str

_Path = Union[str, "os.PathLike[str]"]

class Error(Exception):
    """Base class of lamina's errors."""

class IOError(Error):
    """An operating-system I/O call failed."""

class CorruptionError(Error):
    """Stored bytes failed a checksum or could not be decoded."""

class LockedError(Error):
    """Another process or Db holds the directory lock."""

class InvalidArgumentError(Error):
    """An argument or option the engine cannot honour."""

class NeedsRepairError(Error):
    """The directory holds a database that `lamina repair` must rebuild first."""

class ClosedError(Error):
    """The database is closed."""

class ReadOnlyError(Error):
    """A write to a database opened with read_only=True."""

class BackgroundError(Error):
    """A background flush or compaction failed; writes are refused meanwhile."""

def open(
    path: _Path,
    *,
    create_if_missing: bool = True,
    read_only: bool = False,
    write_buffer_size: int = 64 << 20,
    max_immutable_memtables: int = 2,
    block_size: int = 4096,
    bloom_bits_per_key: float = 10.0,
    bloom_bits_per_level: List[float] = ...,
    bloom_monkey: bool = False,
    memtable_bloom_bits_per_key: float = 10.0,
    block_cache_bytes: int = 64 << 20,
    compression: str = "none",
    compression_per_level: List[str] = ...,
    row_cache_bytes: int = 0,
    size_ratio: int = 10,
    target_file_size: int = 16 << 20,
    compaction: str = ...,
    compaction_threads: int = 1,
    compaction_fills_cache: bool = False,
    compaction_warm_up: bool = False,
    compaction_readahead_bytes: int = 2 << 20,
    scan_threads: int = 1,
    level0_stop_runs: int = 12,
    writes_wait_for_compactions: bool = False,
    sync: str = "none",
    write_ahead_log: bool = True,
    mmap_reads: bool = False,
    scan_resistant_cache: bool = True,
    verify_checksums: bool = True,
    max_scan_readahead_bytes: int = 256 << 10,
) -> Db:
    """Opens (by default creates) the database in directory `path`.

    `compaction` is a strategy spec ("leveling", "tiered:b=4",
    "binomial:k=4", ...); `sync` is "none", "always" or "interval:MS";
    `compression` is "none", "lz4", "zstd" or "zstd:LEVEL" (1-22), and
    `compression_per_level` overrides it by level (level 0 first, the
    last entry for every deeper level).
    An unknown keyword raises TypeError; a value the engine refuses raises
    InvalidArgumentError."""

class WriteBatch:
    """Puts, deletes and range deletes applied together by `Db.write`."""

    def __init__(self) -> None: ...
    def put(self, key: bytes, value: bytes) -> None: ...
    def delete(self, key: bytes) -> None: ...
    def delete_range(self, start: bytes, end: bytes) -> None:
        """Adds a delete of every key with start <= key < end."""
    def clear(self) -> None: ...
    def __len__(self) -> int: ...

class Scan(Iterator[Tuple[bytes, bytes]]):
    """A lazy iterator of (key, value) returned by `scan`."""

    def __iter__(self) -> Scan: ...
    def __next__(self) -> Tuple[bytes, bytes]: ...

class Snapshot:
    """A consistent read view: writes after it was taken are invisible."""

    @property
    def sequence(self) -> int: ...
    def get(self, key: bytes) -> Optional[bytes]: ...
    def scan(
        self, start: Optional[bytes] = None, end: Optional[bytes] = None, reverse: bool = False
    ) -> Scan: ...

class Db:
    """An open database (see `open`). Usable from several threads; the GIL
    is released while the engine works."""

    @property
    def path(self) -> pathlib.Path: ...
    @property
    def closed(self) -> bool: ...
    @property
    def compaction(self) -> str:
        """The spec of the compaction strategy in force."""
    def put(self, key: bytes, value: bytes) -> None: ...
    def get(self, key: bytes) -> Optional[bytes]:
        """The value of `key`, or None."""
    def delete(self, key: bytes) -> None: ...
    def delete_range(self, start: bytes, end: bytes) -> None:
        """Deletes every key with start <= key < end (one range tombstone;
        nothing when start >= end)."""
    def write(self, batch: WriteBatch) -> None:
        """Applies `batch` atomically; the batch keeps its operations."""
    def scan(
        self, start: Optional[bytes] = None, end: Optional[bytes] = None, reverse: bool = False
    ) -> Scan:
        """Live entries with start <= key < end (None: unbounded), in key
        order or descending; the database as of this call."""
    def snapshot(self) -> Snapshot: ...
    def flush(self) -> None:
        """Writes the memtable to disk and waits for it."""
    def compact(self) -> None:
        """Flushes, then merges every file into the deepest level."""
    def wait_for_compactions(self) -> None: ...
    def set_compaction(self, spec: str) -> None: ...
    def stats(self) -> Dict[str, Any]:
        """The engine's statistics (write amplification, levels, latencies...)."""
    def close(self) -> None:
        """Flushes, stops background work and releases the directory lock;
        later calls raise ClosedError (close itself does nothing)."""
    def __enter__(self) -> Db: ...
    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> bool: ...

def sim(
    policy: str,
    flushes: int,
    *,
    flush_size: Optional[int] = None,
    flush_sizes: Optional[List[int]] = None,
    flush_uniform: Optional[Tuple[int, int]] = None,
    seed: int = 0,
    buffer_bytes: Optional[int] = None,
    size_ratio: int = 10,
    dup_ratio: float = 0.0,
    file_overhead: int = 0,
    wa: str = "engine",
    keys: str = "uniform",
    merge_cost: Optional[float] = None,
    merge_threads: int = 1,
    stall_runs: int = 0,
) -> List[Dict[str, Any]]:
    """The model simulator of `lamina sim`: one dict per flush (flush,
    flush_bytes, write_amplification, sorted_runs, avg_sorted_runs,
    runs_at_flush, avg_runs_at_flush, transient_space_amplification,
    merges, stalled, policy). Flushes are 1 MiB unless flush_size,
    flush_sizes or flush_uniform (with seed) says otherwise."""

def experiment(
    spec: Union[str, "os.PathLike[str]"], *, work_dir: Optional[_Path] = None
) -> List[Dict[str, Any]]:
    """Runs an experiment spec (TOML text or a file's path, the format of
    `lamina experiment`): one dict per run with the columns of its
    results.csv (run_id, strategy, workload, rep, grid parameters, metrics)
    and the full `stats`."""
