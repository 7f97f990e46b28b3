"""lamina: an LSM-tree key-value storage engine and compaction laboratory."""

import os
import pathlib
from types import TracebackType
import typing
from typing import Any, Dict, List, Optional, Sequence, Tuple, Type, TypeVar, Union

__version__: str

_Path = Union[str, "os.PathLike[str]"]

class Error(Exception):
    """Base class of lamina's errors."""

class StorageIOError(Error, OSError):
    """An operating-system I/O call of the engine failed; an OSError with its
    errno (`except OSError` catches it). Not named IOError, which would
    shadow the builtin."""

class CorruptionError(Error):
    """Stored bytes failed a checksum or could not be decoded."""

class LockedError(Error):
    """The directory lock is held: by another process, or by a writing Db
    of this process (the message says which). Read-only opens take none."""

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

    With create_if_missing=False, or read_only=True, a directory without a
    database raises InvalidArgumentError having created nothing (no
    directory, no LOCK). A writing open takes the directory's lock
    (LockedError if held); read_only=True takes none, so any number of
    read-only handles run beside each other and beside a writer (another
    process, a server), each reading the database as of its open while the
    writer goes on, compactions included (docs/durability.md).

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

_T = TypeVar("_T")

class Iterator(typing.Iterator[_T]):
    """A lazy iterator over a key range of a Db or Snapshot, as of when it
    was made, returned by `scan` (yielding (key, value)) and `iterator`
    (yielding (key, value), keys or values). A seek repositions it: `next()`
    then yields the entry sought and goes on in the iterator's direction."""

    def __iter__(self) -> Iterator[_T]: ...
    def __next__(self) -> _T: ...
    def seek(self, key: bytes) -> None:
        """Next yields the first entry with a key >= `key`."""
    def seek_for_prev(self, key: bytes) -> None:
        """Next yields the last entry with a key <= `key`."""
    def seek_to_first(self) -> None: ...
    def seek_to_last(self) -> None: ...
    def close(self) -> None:
        """Releases the engine's state; nothing more is yielded."""

class Snapshot:
    """A consistent read view: writes after it was taken are invisible.
    Closing its Db ends it (ClosedError)."""

    @property
    def sequence(self) -> int: ...
    def get(self, key: bytes, default: Any = None) -> Optional[bytes]: ...
    def multi_get(self, keys: Sequence[bytes]) -> List[Optional[bytes]]: ...
    def scan(
        self, start: Optional[bytes] = None, end: Optional[bytes] = None, reverse: bool = False
    ) -> Iterator[Tuple[bytes, bytes]]: ...
    def iterator(
        self,
        start: Optional[bytes] = None,
        end: Optional[bytes] = None,
        *,
        stop: Optional[bytes] = None,
        prefix: Optional[bytes] = None,
        reverse: bool = False,
        include_key: bool = True,
        include_value: bool = True,
    ) -> Iterator[Any]:
        """Like `Db.iterator`, as of the snapshot."""

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
    def get(self, key: bytes, default: Any = None) -> Optional[bytes]:
        """The value of `key`, or `default` (None) if absent."""
    def multi_get(self, keys: Sequence[bytes]) -> List[Optional[bytes]]:
        """The values of `keys` (None for an absent one), in their order."""
    def delete(self, key: bytes) -> None: ...
    def delete_range(self, start: bytes, end: bytes) -> None:
        """Deletes every key with start <= key < end (one range tombstone;
        nothing when start >= end)."""
    def write(self, batch: WriteBatch) -> None:
        """Applies `batch` atomically; the batch keeps its operations."""
    def scan(
        self, start: Optional[bytes] = None, end: Optional[bytes] = None, reverse: bool = False
    ) -> Iterator[Tuple[bytes, bytes]]:
        """Live entries with start <= key < end (None: unbounded), in key
        order or descending; the database as of this call."""
    def iterator(
        self,
        start: Optional[bytes] = None,
        end: Optional[bytes] = None,
        *,
        stop: Optional[bytes] = None,
        prefix: Optional[bytes] = None,
        reverse: bool = False,
        include_key: bool = True,
        include_value: bool = True,
    ) -> Iterator[Any]:
        """plyvel's `iterator`: the keys with start <= key < end (`stop` is
        plyvel's name of `end`) or starting with `prefix` (not both),
        ascending or descending, yielding (key, value), keys
        (include_value=False) or values (include_key=False); it can seek."""
    def snapshot(self) -> Snapshot: ...
    def flush(self) -> None:
        """Writes the memtable to disk and waits for it."""
    def compact(self) -> None:
        """Flushes, then merges every file into the deepest level."""
    def compact_range(self, start: Optional[bytes] = None, end: Optional[bytes] = None) -> None:
        """Flushes, then merges the files overlapping [start, end] (None:
        unbounded) into the deepest level."""
    def property(self, name: str) -> Optional[str]:
        """An engine property ("lamina.num-files-at-level0", "lamina.stats",
        ...; RocksDB's GetProperty), or None for an unknown name."""
    def checkpoint(self, path: _Path) -> Dict[str, Any]:
        """Writes an openable copy of the database as of now to `path` (new
        or empty; tables hard-linked); returns sequence, files, copied,
        bytes and manifest."""
    def wait_for_compactions(self) -> None: ...
    def set_compaction(self, spec: str) -> None: ...
    def stats(self) -> Dict[str, Any]:
        """The engine's statistics (write amplification, levels, latencies...)."""
    def close(self) -> None:
        """Flushes, stops background work and releases the directory lock,
        whatever snapshots and iterators are alive; later calls, theirs
        included, raise ClosedError (close itself does nothing)."""
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
