"""``RecordStore``: a rank's records, of any size, in files shared by every process.

Record ``i`` lives at its place in the data set laid end to end, in a sparse file (only the
records held take space: a store may stand for a data set larger than memory or disk allows
whole), with a byte per record saying whether it is held. The files sit in a folder: the
``directory`` given (kept across restarts: a process started again reopens it and finds its
records), or a temporary folder in shared memory (``/dev/shm`` where it exists).

A temporary store leaves nothing behind, however its process ends (SIGKILL included): on Linux
its files and folder are removed as soon as they are open and mapped, and live on unnamed until
the last process that maps them ends. Other processes (DataLoader workers started by spawn,
which get the store pickled) open them as ``/proc/<owner pid>/fd/<fd>``: the owner must still
run, under the same user. Elsewhere the folder is removed when the store is closed or its
process exits; and a new temporary store removes the ``ubershuffle-store-*`` folders beside it
whose owner process (its pid and start time, in the folder's ``owner`` file) is gone.

Space: a record's pages are reserved on the file system before it is written, so a full file
system (a small ``/dev/shm``, a full disk) is a one-line ``OSError`` naming the folder, the bytes
wanted, the free space and ``store_dir``, never SIGBUS. ``expect_bytes`` checks the free space
when the store is made.

Reading is zero-copy: ``store[i]`` is a read-only numpy view of the mapped file. Every process
that maps the files sees the same bytes, so DataLoader worker processes (forked or spawned,
persistent or not) read the records held now, never a copy taken when they started. Writing
and eviction go through the Rust side without the GIL; evicting a record gives its pages back
to the file system.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import tempfile
import weakref
from typing import Any

import numpy as np

from . import _native

_INDEX = "index.u64"
_RECORDS = "records.bin"
_HELD = "held.u8"
_OWNER = "owner"
_PREFIX = "ubershuffle-store-"


def _start_time(pid: int) -> str | None:
    """Process ``pid``'s start time (field 22 of ``/proc/<pid>/stat``), ``None`` if it is gone
    or the system has no ``/proc``."""
    try:
        stat = pathlib.Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2 :].split()
    return fields[19] if len(fields) > 19 else None


def _remove_orphans(base: pathlib.Path) -> None:
    """Removes the temporary stores in ``base`` whose owner process is gone (a pid reused by
    another process has another start time)."""
    if not pathlib.Path("/proc/self/stat").exists():
        return
    for folder in base.glob(f"{_PREFIX}*"):
        try:
            pid, started = (folder / _OWNER).read_text().split()
        except (OSError, ValueError):
            continue  # not one of ours, or being made
        if _start_time(int(pid)) != started:
            shutil.rmtree(folder, ignore_errors=True)


def _temporary_folder() -> pathlib.Path:
    shm = pathlib.Path("/dev/shm")
    base = shm if shm.is_dir() and os.access(shm, os.W_OK) else pathlib.Path(tempfile.gettempdir())
    _remove_orphans(base)
    folder = pathlib.Path(tempfile.mkdtemp(prefix=_PREFIX, dir=base))
    started = _start_time(os.getpid())
    if started is not None:
        (folder / _OWNER).write_text(f"{os.getpid()} {started}")
    return folder


def _remove_if_owner(path: pathlib.Path, owner: int) -> None:
    if os.getpid() == owner:
        shutil.rmtree(path, ignore_errors=True)


class RecordStore:
    """A rank's records (see the module's docs).

    ``offsets`` are the data set's ``records + 1`` offsets (a
    :class:`ubershuffle.sources.RecordSource`'s); ``directory`` keeps the store there (made if
    missing; a folder made for another data set is an error), ``None`` makes a temporary one.
    ``expect_bytes``, when given, is what the store will hold at most: its file system's free
    space (beside what the store already takes) is checked now, and a shortfall is a one-line
    ``OSError`` naming the size, the free space and ``store_dir``.
    """

    def __init__(
        self, offsets: Any, directory: str | os.PathLike | None = None, expect_bytes: int | None = None
    ) -> None:
        offsets = np.ascontiguousarray(offsets, dtype=np.int64)
        self.temporary = directory is None
        self.directory = _temporary_folder() if directory is None else pathlib.Path(directory)
        expect = None if expect_bytes is None else max(int(expect_bytes), 0)
        try:
            self._core = _native.StoreCore(self.directory, offsets, self.temporary, expect)
        except BaseException:
            if self.temporary:
                shutil.rmtree(self.directory, ignore_errors=True)
            raise
        self._owner = os.getpid()
        self._fds = self._core.fds() if self._core.unlinked else None
        self._cleanup = (
            weakref.finalize(self, _remove_if_owner, self.directory, os.getpid())
            if self.temporary and self._fds is None
            else None
        )
        self._map(offsets)

    def _path(self, which: int, name: str) -> pathlib.Path:
        """File ``name`` of the store: in the folder, or through the owner's descriptor
        ``which`` (0: index, 1: records, 2: flags) when the files have no name."""
        if self._fds is None:
            return self.directory / name
        return pathlib.Path(f"/proc/{self._owner}/fd/{self._fds[which]}")

    def _map(self, offsets: np.ndarray) -> None:
        self.offsets = offsets
        sizes = np.diff(offsets)
        self._width = int(sizes[0]) if len(sizes) and bool((sizes == sizes[0]).all()) else None
        total = int(offsets[-1])
        self._data = (
            np.memmap(self._path(1, _RECORDS), dtype=np.uint8, mode="r", shape=(total,))
            if total
            else np.zeros(0, dtype=np.uint8)
        )
        self._held = np.memmap(
            self._path(2, _HELD), dtype=np.uint8, mode="r", shape=(max(len(offsets) - 1, 1),)
        )

    def __getstate__(self) -> dict:
        """Pickled (into a spawned DataLoader worker, say) as where its files are: the folder,
        or the owner's pid and descriptors (a temporary store on Linux). The copy maps the same
        files and only reads."""
        return {"directory": os.fspath(self.directory), "owner": self._owner, "fds": self._fds}

    def __setstate__(self, state: dict) -> None:
        self.directory = pathlib.Path(state["directory"])
        self._owner = state.get("owner", 0)
        self._fds = state.get("fds")
        self.temporary = False
        self._core = None
        self._cleanup = None
        try:
            offsets = np.fromfile(self._path(0, _INDEX), dtype="<u8").astype(np.int64)
            self._map(offsets)
        except OSError as e:
            if self._fds is None:
                raise
            raise OSError(
                f"the temporary store of process {self._owner} cannot be opened (has it ended?): "
                f"{e.strerror or e}"
            ) from None

    def __len__(self) -> int:
        """The number of records of the data set (held or not)."""
        return len(self.offsets) - 1

    def __contains__(self, i: object) -> bool:
        return isinstance(i, (int, np.integer)) and 0 <= int(i) < len(self) and bool(self._held[int(i)])

    def __getitem__(self, i: int) -> np.ndarray:
        """Record ``i``'s bytes: a read-only uint8 view. ``KeyError`` if it is not held."""
        if isinstance(i, bool) or not isinstance(i, (int, np.integer)):
            raise TypeError(f"record ids are ints, not {type(i).__name__}")
        i = int(i)
        if not 0 <= i < len(self) or not self._held[i]:
            raise KeyError(i)
        view = self._data[self.offsets[i] : self.offsets[i + 1]]
        view = view.view(np.ndarray)
        view.flags.writeable = False
        return view

    @property
    def record_size(self) -> int | None:
        """Bytes per record when every record of the data set has the same size, else ``None``."""
        return self._width

    def records(self, ids: Any) -> np.ndarray | list[np.ndarray]:
        """The records ``ids``, each held (``KeyError`` names the first that is not): for a data
        set of one record size a read-only ``(len(ids), record_size)`` uint8 array (a view when
        the ids are consecutive, else a copy), otherwise a list of read-only views."""
        ids = self.check_held(ids)
        if self._width is None:
            return [self[int(i)] for i in ids]
        table = self._data.view(np.ndarray)[: len(self) * self._width].reshape(len(self), self._width)
        if len(ids) and bool((np.diff(ids) == 1).all()):
            return table[ids[0] : ids[-1] + 1]
        rows = table[ids]
        rows.flags.writeable = False
        return rows

    def check_held(self, ids: Any) -> np.ndarray:
        """``ids`` as a flat int64 array, each held (``KeyError`` names the first that is not),
        without reading a byte of them."""
        ids = np.asarray(ids, dtype=np.int64).reshape(-1)
        inside = (ids >= 0) & (ids < len(self))
        held = np.zeros(len(ids), dtype=np.bool_)
        held[inside] = self._held[ids[inside]] != 0
        if not held.all():
            raise KeyError(int(ids[np.argmin(held)]))
        return ids

    def missing(self, ids: Any) -> np.ndarray:
        """The records of ``ids`` (sorted, without repeats) that are not held (int64)."""
        ids = np.unique(np.asarray(ids, dtype=np.int64).reshape(-1))
        if len(ids) and (ids[0] < 0 or ids[-1] >= len(self)):
            bad = ids[0] if ids[0] < 0 else ids[-1]
            raise ValueError(f"record {int(bad)} is out of range (the data set has {len(self)} records)")
        return ids[self._held[ids] == 0]

    def held(self) -> np.ndarray:
        """The records held, sorted (int64), as of one moment: a delivery may be writing the
        flags meanwhile (another thread, or the owner process when read from a worker)."""
        flags = np.array(self._held[: len(self)], dtype=np.uint8)
        return np.flatnonzero(flags).astype(np.int64)

    def held_bytes(self) -> int:
        """The bytes of the records held."""
        held = self.held()
        return int((self.offsets[held + 1] - self.offsets[held]).sum())

    def _writable(self) -> Any:
        if self._core is None:
            raise RuntimeError("this copy of the store only reads (it was pickled into another process)")
        return self._core

    def put(self, i: int, data: Any) -> None:
        """Stores record ``i`` (bytes-like; its size must be the record's)."""
        self._writable().put(int(i), np.frombuffer(memoryview(data).cast("B"), dtype=np.uint8))

    def put_many(self, ids: Any, data: Any) -> None:
        """Stores the records ``ids`` from ``data``, their bytes back to back."""
        self._writable().put_many(
            np.ascontiguousarray(ids, dtype=np.int64), np.ascontiguousarray(data, dtype=np.uint8)
        )

    def evict(self, ids: Any) -> None:
        """Drops the records ``ids`` (their pages go back to the file system)."""
        self._writable().evict(np.ascontiguousarray(ids, dtype=np.int64))

    def retain(self, keep: Any) -> np.ndarray:
        """Drops every record held but ``keep``'s; returns those dropped."""
        return self._writable().retain(np.ascontiguousarray(keep, dtype=np.int64))

    def flush(self) -> None:
        """Writes the records to the files (for a folder kept across a restart)."""
        self._writable().flush()

    def close(self) -> None:
        """Closes the store; a temporary folder is removed (its space is freed once no process
        maps it)."""
        self._data = np.zeros(0, dtype=np.uint8)
        if self._cleanup is not None:
            self._cleanup()
        elif self._core is not None:
            self._core.flush()

    def __repr__(self) -> str:
        return f"RecordStore({self.directory}, {len(self.held())} of {len(self)} records held)"


def store_bytes_bound(offsets: np.ndarray, target: np.ndarray, batch: int, arrivals: float) -> int:
    """An upper bound of the bytes a training rank's record store will hold: ``len(target)``
    records (its cache) plus ``arrivals`` of a batch of ``batch``, of the largest sizes, and two
    pages each (a record's first and last pages may be shared); never more than the whole
    file."""
    sizes = np.diff(offsets)
    page = 4096
    whole = -(-int(offsets[-1]) // page) * page
    count = min(len(sizes), len(target) + int(-(-batch * arrivals // 1)))
    largest = np.partition(sizes, len(sizes) - count)[len(sizes) - count :] if count else sizes[:0]
    return int(min(whole, int(largest.sum()) + 2 * page * count))
