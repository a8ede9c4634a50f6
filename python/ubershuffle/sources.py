"""Record sources: a data set of records of any size, with every size known up front.

:func:`as_source` takes what the data planes accept as ``records`` and gives a
:class:`RecordSource`:

- a 2-D ``uint8`` numpy array: one record a row (all of one size);
- a folder (``str`` or ``os.PathLike``): one record a file, every regular file under it
  (recursively, names starting with ``.`` skipped), sorted by relative path;
- a list or tuple of paths: one record a file, in the order given;
- any other sequence of bytes-like objects (``len`` and ``[i]``: ``bytes``, ``bytearray``,
  ``memoryview``, 1-D ``uint8`` arrays): record ``i`` is ``records[i]``;
- :meth:`RecordSource.from_blob`: records laid end to end in one file, with their offsets.

Sizes come from the array's shape, the files' sizes (``os.stat``, nothing read), or ``len`` of
every item of a sequence (which is in memory anyway). Reading records (:meth:`RecordSource.load`)
counts what it reads: the data planes report it as reads from the source.
"""

from __future__ import annotations

import os
import pathlib
from collections.abc import Sequence
from typing import Any

import numpy as np

_FILE_TYPES = (str, os.PathLike)


def _files_under(folder: pathlib.Path) -> list[pathlib.Path]:
    files = []
    for root, dirs, names in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in names:
            if not name.startswith("."):
                path = pathlib.Path(root) / name
                if path.is_file():
                    files.append(path)
    return sorted(files, key=lambda p: p.relative_to(folder).as_posix())


class RecordSource:
    """A data set of ``len(source)`` records whose sizes are :attr:`sizes` (int64) and whose
    offsets, laid end to end, are :attr:`offsets` (``len + 1`` int64, from 0). Build one with
    :func:`as_source`."""

    kind: str
    """``"array"``, ``"files"``, ``"sequence"`` or ``"blob"``."""

    def __init__(self, kind: str, sizes: np.ndarray, data: Any) -> None:
        self.kind = kind
        self.sizes = np.ascontiguousarray(sizes, dtype=np.int64)
        if self.sizes.ndim != 1 or len(self.sizes) == 0:
            raise ValueError("a record source needs at least one record")
        if (self.sizes < 0).any():
            raise ValueError("record sizes must not be negative")
        self.offsets = np.zeros(len(self.sizes) + 1, dtype=np.int64)
        np.cumsum(self.sizes, out=self.offsets[1:])
        self._data = data

    def __len__(self) -> int:
        return len(self.sizes)

    @property
    def total_bytes(self) -> int:
        """The bytes of all records."""
        return int(self.offsets[-1])

    def __repr__(self) -> str:
        return f"RecordSource({self.kind}, {len(self)} records, {self.total_bytes} bytes)"

    def record(self, i: int) -> np.ndarray:
        """Record ``i``'s bytes as a 1-D uint8 array (read now)."""
        i = int(i)
        if not 0 <= i < len(self):
            raise IndexError(f"record {i} is out of range (the source has {len(self)} records)")
        if self.kind == "array":
            return self._data[i]
        if self.kind == "files":
            return np.frombuffer(pathlib.Path(self._data[i]).read_bytes(), dtype=np.uint8)
        if self.kind == "blob":
            return self._data[self.offsets[i] : self.offsets[i + 1]]
        return np.frombuffer(memoryview(self._data[i]).cast("B"), dtype=np.uint8)

    def load(self, store: Any, ids: Any) -> int:
        """Reads the records ``ids`` into ``store`` (a :class:`ubershuffle.store.RecordStore`);
        returns the bytes read. Files are read by the Rust side, without the GIL."""
        ids = np.asarray(ids, dtype=np.int64)
        if len(ids) == 0:
            return 0
        if self.kind == "files":
            return int(store._core.load_files(ids, [os.fspath(self._data[i]) for i in ids]))
        total = 0
        chunk: list[np.ndarray] = []
        chunk_ids: list[int] = []
        chunk_bytes = 0
        for i in ids:
            record = self.record(int(i))
            if len(record) != self.sizes[i]:
                was = int(self.sizes[i])
                raise ValueError(
                    f"record {int(i)} has {len(record)} bytes now, {was} when the source was made"
                )
            chunk.append(record)
            chunk_ids.append(int(i))
            chunk_bytes += len(record)
            if chunk_bytes >= 16 << 20:
                store.put_many(chunk_ids, np.concatenate(chunk))
                total += chunk_bytes
                chunk, chunk_ids, chunk_bytes = [], [], 0
        if chunk:
            store.put_many(chunk_ids, np.concatenate(chunk))
            total += chunk_bytes
        return total

    @classmethod
    def from_blob(cls, path: str | os.PathLike, offsets: Any) -> RecordSource:
        """Records laid end to end in the file ``path`` (memory-mapped, read-only) at
        ``offsets`` (``records + 1`` ints from 0; the last one the file's size)."""
        offsets = np.asarray(offsets, dtype=np.int64)
        if offsets.ndim != 1 or len(offsets) < 2 or offsets[0] != 0 or (np.diff(offsets) < 0).any():
            raise ValueError("blob offsets must be records + 1 non-decreasing ints from 0")
        size = os.stat(path).st_size
        if int(offsets[-1]) != size:
            raise ValueError(f"{path} has {size} bytes, its offsets end at {int(offsets[-1])}")
        data = np.memmap(path, dtype=np.uint8, mode="r") if size else np.zeros(0, dtype=np.uint8)
        return cls("blob", np.diff(offsets), data)


def as_source(records: Any) -> RecordSource:
    """The :class:`RecordSource` of ``records`` (see the module's docs for what it takes).
    Raises ``TypeError`` for anything else and ``ValueError`` for an empty data set."""
    if isinstance(records, RecordSource):
        return records
    if isinstance(records, np.ndarray):
        if records.ndim != 2 or records.dtype != np.uint8:
            raise TypeError(
                "an array of records must be 2-D uint8 (one record a row); "
                f"got {records.ndim}-D {records.dtype}: for records of uneven size pass a list of bytes"
            )
        return RecordSource("array", np.full(records.shape[0], records.shape[1], dtype=np.int64), records)
    if isinstance(records, _FILE_TYPES):
        folder = pathlib.Path(records)
        if not folder.is_dir():
            raise ValueError(f"{folder} is not a folder (records from files: a folder, or a list of paths)")
        files = _files_under(folder)
        if not files:
            raise ValueError(f"{folder} holds no file")
        return _files_source(files)
    if isinstance(records, (list, tuple)) and records and all(isinstance(r, _FILE_TYPES) for r in records):
        return _files_source([pathlib.Path(r) for r in records])
    if isinstance(records, Sequence) or (hasattr(records, "__len__") and hasattr(records, "__getitem__")):
        sizes = np.fromiter(
            (memoryview(records[i]).nbytes for i in range(len(records))), np.int64, len(records)
        )
        return RecordSource("sequence", sizes, records)
    raise TypeError(
        "records must be a 2-D uint8 array, a folder, a list of paths, or a sequence of bytes-like "
        f"objects, not {type(records).__name__}"
    )


def _files_source(files: list[pathlib.Path]) -> RecordSource:
    sizes = np.empty(len(files), dtype=np.int64)
    for i, path in enumerate(files):
        try:
            sizes[i] = path.stat().st_size
        except OSError as e:
            raise ValueError(f"{path}: {e.strerror}") from None
    return RecordSource("files", sizes, files)
