"""Parquet files as they are (local or ``s3://``), read with pyarrow (imported only when a
Parquet source is made): record ``i`` is row ``i``'s value of one binary column (or an image
column's ``bytes``: Hugging Face's ``Image`` feature, a struct of ``bytes`` and ``path``), files
in the order given, rows in order.

Parquet's footer says where each row group's column chunk is, not each value's size, and a
record source knows every size up front: the index reads the chosen column once (its column
chunks, by range) and keeps the sizes, cached as the other sharded sources' indexes are. Records
are then read by row group: the column chunk of every row group that holds records asked for,
one range read each (pyarrow's), decoded, each value checked against its indexed size.

pyarrow reads these Python file objects on the calling thread (``pre_buffer=False``,
``use_threads=False``): its own I/O threads calling back into Python could outlive the
interpreter, which then aborts at exit."""

from __future__ import annotations

import io
from typing import Any

import numpy as np

from . import _shards


def _pyarrow() -> tuple[Any, Any]:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise ImportError("Parquet records need pyarrow: pip install pyarrow") from None
    return pa, pq


class _RangedFile(io.RawIOBase):
    """A shard read by ranges (a ranged GET of an object, a ``pread`` of a file) as the
    seekable file pyarrow reads a Parquet file from; counts the bytes it read."""

    def __init__(self, shards: _shards.Shards, k: int, base: int = 0, size: int | None = None) -> None:
        self._shards, self._k, self._base = shards, k, base
        self._size = int(shards.sizes[k]) - base if size is None else size
        self._at = 0
        self.read_bytes = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._at

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._at, io.SEEK_END: self._size}[whence]
        self._at = max(0, base + offset)
        return self._at

    def read(self, n: int = -1) -> bytes:
        end = self._size if n is None or n < 0 else min(self._size, self._at + n)
        if end <= self._at:
            return b""
        body = self._shards.read_range(self._k, self._base + self._at, self._base + end)
        self._at += len(body)
        self.read_bytes += len(body)
        return body

    def readinto(self, buffer: Any) -> int:
        data = self.read(len(buffer))
        memoryview(buffer)[: len(data)] = data
        return len(data)


def _values(pa: Any, column: Any, name: str) -> Any:
    """The binary values of ``column`` (a chunked array): binary or string as they are, a
    struct's ``bytes`` field (an image column)."""
    kind = column.type
    if pa.types.is_struct(kind):
        if kind.get_field_index("bytes") < 0:
            raise ValueError(f"column {name!r} is a struct without a 'bytes' field ({kind})")
        column = pa.chunked_array([chunk.field("bytes") for chunk in column.chunks], kind.field("bytes").type)
        kind = column.type
    if not (pa.types.is_binary(kind) or pa.types.is_large_binary(kind) or pa.types.is_string(kind)):
        if not pa.types.is_large_string(kind):
            raise ValueError(f"column {name!r} is {kind}, not binary, a string or an image's bytes")
    return column


class GroupRecords:
    """Where a columnar source's records are: record ``i`` is row ``i - first[g]`` of group
    ``g`` (a Parquet row group, an Arrow record batch) of file ``file[g]``; a subclass reads a
    group's values (:meth:`_read_group`)."""

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_footers": {}}  # pyarrow's metadata is read again where unpickled

    def __init__(self, shards: _shards.Shards, column: str, groups: list[list[int]]) -> None:
        self.shards, self.column_name = shards, column
        rows = [r for per_file in groups for r in per_file]
        self.group_file = np.repeat(np.arange(len(groups)), [len(g) for g in groups])
        self.group_index = np.concatenate([np.arange(len(g)) for g in groups]).astype(np.int64)
        self.group_first = np.concatenate([[0], np.cumsum(rows)]).astype(np.int64)
        self.starts = self.group_first
        """What the source's fingerprint takes for starts: the row groups' first rows."""
        self._footers: dict[int, Any] = {}
        """Each file's footer, once read (a row group's read then reads its column chunk alone)."""
        self.store = shards.objects.store if shards.remote else None

    def _group_of(self, ids: np.ndarray) -> np.ndarray:
        return np.searchsorted(self.group_first, ids, side="right") - 1

    def read(self, ids: np.ndarray, sizes: np.ndarray) -> Any:
        """``(i, record i)`` for every ``i`` of ``ids``, in order, a row group read once for
        each run of ids in it."""
        groups = self._group_of(ids)
        held, values = -1, None
        for i, g in zip(map(int, ids), map(int, groups)):
            if g != held:
                values, _ = self._read_group(g)
                held = g
            value = values[i - int(self.group_first[g])]
            data = value.as_buffer() if value.is_valid else None
            if data is None:
                raise ValueError(
                    f"{self.shards.urls[int(self.group_file[g])]}: row {i} of {self.column_name!r} is null"
                )
            record = np.frombuffer(data, dtype=np.uint8)
            if len(record) != sizes[i]:
                raise ValueError(
                    f"record {i} ({self.shards.urls[int(self.group_file[g])]}) has {len(record)} bytes now, "
                    f"{int(sizes[i])} when its index was made"
                )
            yield i, record

    def record(self, i: int, sizes: np.ndarray) -> np.ndarray:
        """Record ``i``, read now (its row group's column chunk)."""
        return next(iter(self.read(np.array([i]), sizes)))[1]

    def _read_group(self, g: int) -> tuple[Any, int]:
        raise NotImplementedError

    def column(self, name: str) -> np.ndarray:
        """Every row's value of the small column ``name``."""
        raise TypeError("this source has no columns to read by index (Parquet sources do)")


class ParquetRecords(GroupRecords):
    """Where a Parquet source's records are (row groups of files)."""

    def _read_group(self, g: int) -> tuple[Any, int]:
        """Row group ``g``'s values of the column, and the bytes read for them."""
        pa, pq = _pyarrow()
        f = int(self.group_file[g])
        source = _RangedFile(self.shards, f)
        url = self.shards.urls[f]
        try:
            parquet = pq.ParquetFile(
                source, metadata=self._footers.get(f), page_checksum_verification=True, pre_buffer=False
            )
            self._footers[f] = parquet.metadata
            table = parquet.read_row_group(
                int(self.group_index[g]), columns=[self.column_name], use_threads=False
            )
            values = _values(pa, table.column(0), self.column_name)
        except (pa.ArrowException, OSError) as e:
            raise ValueError(f"{url}: {' '.join(str(e).split())}") from None
        return values, source.read_bytes

    def column(self, name: str) -> np.ndarray:
        """Every row's value of the column ``name`` (a small one: labels, captions), read whole
        from every file, in record order."""
        pa, pq = _pyarrow()
        parts = []
        for f, url in enumerate(self.shards.urls):
            try:
                table = pq.read_table(
                    _RangedFile(self.shards, f), columns=[name], pre_buffer=False, use_threads=False
                )
                parts.append(table.column(0))
            except (pa.ArrowException, OSError, KeyError) as e:
                raise ValueError(f"{url}: {' '.join(str(e).split())}") from None
        return pa.chunked_array([c for part in parts for c in part.chunks]).to_numpy(zero_copy_only=False)


def _index_file(column: str) -> Any:
    """A builder of file ``k``'s index: its row groups' row counts and the sizes of the column's
    values, from its footer and the column's chunks."""

    def build(shards: _shards.Shards, k: int) -> dict:
        pa, pq = _pyarrow()
        import pyarrow.compute as pc

        source = _RangedFile(shards, k)
        url = shards.urls[k]
        try:
            parquet = pq.ParquetFile(source, page_checksum_verification=True, pre_buffer=False)
            names = parquet.schema_arrow.names
            if column not in names:
                raise ValueError(f"no column {column!r} (it has {', '.join(names)})")
            rows, sizes = [], []
            for g in range(parquet.num_row_groups):
                group = parquet.read_row_group(g, columns=[column], use_threads=False)
                values = _values(pa, group.column(0), column)
                if values.null_count:
                    raise ValueError(f"column {column!r} has a null in row group {g}")
                rows.append(len(values))
                sizes += pc.binary_length(values).to_pylist()
        except (pa.ArrowException, OSError, KeyError, ValueError) as e:
            raise ValueError(f"{url}: {' '.join(str(e).split())}") from None
        return {"rows": rows, "sizes": sizes, "read": source.read_bytes}

    return build


def parquet_source(urls: Any, column: str, index_dir: Any) -> Any:
    """See :func:`ubershuffle.sources.parquet`."""
    from .sources import RecordSource

    _pyarrow()
    shards = _shards.Shards.listed(_shards.expand(urls))
    indexes, index_bytes = _shards.shard_indexes(shards, f"parquet-{column}", _index_file(column), index_dir)
    sizes = np.array([s for ix in indexes for s in ix["sizes"]], dtype=np.int64)
    if len(sizes) == 0:
        raise ValueError("the Parquet files hold no row")
    records = ParquetRecords(shards, column, [ix["rows"] for ix in indexes])
    source = RecordSource("parquet", sizes, records)
    source.index_bytes_read = index_bytes
    source.sharded = True
    if shards.remote:
        source._fingerprint_of = (("parquet", column), shards.urls, shards.sizes.tolist(), shards.stamps)
    return source


LITDATA_ARROW_MAGIC = b"LDARW01\0"
"""The end of a LitData chunk whose rows follow as an Arrow IPC file (then its length, uint32)."""


class LitDataArrowRecords(GroupRecords):
    """Where a LitData source's records are when its chunks hold their rows as an Arrow IPC file
    after the offsets table (what LitData writes for dict items when pyarrow is installed): the
    record batches of each chunk's IPC file, ``ipc[f] = (start, length)``."""

    def __init__(self, shards: _shards.Shards, field: str, groups: list[list[int]], ipc: list) -> None:
        super().__init__(shards, field, groups)
        self.ipc = [tuple(x) for x in ipc]

    def _read_group(self, g: int) -> tuple[Any, int]:
        pa, _ = _pyarrow()
        f = int(self.group_file[g])
        start, length = self.ipc[f]
        source = _RangedFile(self.shards, f, start, length)
        try:
            batch = pa.ipc.open_file(source).get_batch(int(self.group_index[g]))
            values = _values(pa, pa.chunked_array([batch.column(self.column_name)]), self.column_name)
        except (pa.ArrowException, OSError, KeyError) as e:
            raise ValueError(f"{self.shards.urls[f]}: {' '.join(str(e).split())}") from None
        return values, source.read_bytes


def litdata_arrow_index(shards: _shards.Shards, k: int, field: str, start: int, length: int) -> dict:
    """Chunk ``k``'s index when its rows are an Arrow IPC file of ``length`` bytes at ``start``:
    its batches' row counts and the sizes of ``field``'s values (every batch read once)."""
    pa, _ = _pyarrow()
    import pyarrow.compute as pc

    source = _RangedFile(shards, k, start, length)
    try:
        reader = pa.ipc.open_file(source)
        if field not in reader.schema.names:
            raise ValueError(f"its rows have no field {field!r} (they have {', '.join(reader.schema.names)})")
        rows, sizes = [], []
        for b in range(reader.num_record_batches):
            values = _values(pa, pa.chunked_array([reader.get_batch(b).column(field)]), field)
            if values.null_count:
                raise ValueError(f"field {field!r} has a null in record batch {b}")
            rows.append(len(values))
            sizes += pc.binary_length(values).to_pylist()
    except (pa.ArrowException, OSError) as e:
        raise ValueError(f"{shards.urls[k]}: {' '.join(str(e).split())}") from None
    except ValueError as e:
        raise ValueError(f"{shards.urls[k]}: {e}") from None
    return {"rows": rows, "sizes": sizes, "ipc": [start, length], "read": source.read_bytes}
