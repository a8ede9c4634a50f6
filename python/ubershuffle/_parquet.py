"""Parquet files as they are (local or ``s3://``), read with pyarrow (imported only when a
Parquet source is made): record ``i`` is row ``i``'s value of one binary column (or an image
column's ``bytes``: Hugging Face's ``Image`` feature, a struct of ``bytes`` and ``path``), files
in the order given, rows in order.

Parquet's footer says where each row group's column chunk is, not each value's size, and a
record source knows every size up front: the index reads the chosen column once (its column
chunks, by range) and keeps the sizes and the footer, cached as the other sharded sources'
indexes are. Records are then read by row group: the column chunks of the row groups that hold
records asked for, neighbours (at most 8 KiB of other columns between them, as pyarrow's own
coalescing reads) by one ranged GET however long, so a rank that needs a whole file's row groups
reads them by one request; each row group decoded as its bytes come, each value checked against
its indexed size.

pyarrow reads these Python file objects on the calling thread (``pre_buffer=False``,
``use_threads=False``): its own I/O threads calling back into Python could outlive the
interpreter, which then aborts at exit."""

from __future__ import annotations

import base64
import io
from collections.abc import Iterator
from typing import Any

import numpy as np

from . import _s3, _shards


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
    ``g`` (a Parquet row group, an Arrow record batch) of file ``file[g]``; a subclass reads
    groups' values (:meth:`_values`, by default :meth:`_read_group` each) and may read several
    by one request (:meth:`_runs`)."""

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

    def read(self, ids: np.ndarray, sizes: np.ndarray) -> Iterator[tuple[int, np.ndarray]]:
        """``(i, record i)`` for every ``i`` of ``ids``, in order: a group read once for each run
        of ids in it, groups read together as :meth:`_runs` says, on
        :data:`~ubershuffle._s3.WORKERS` threads."""
        ids = np.asarray(ids, dtype=np.int64)
        runs = self._runs(_visits(ids, self._group_of(ids)))
        yield from _s3._streamed(runs, lambda run, put: self._serve(run, sizes, put))

    def record(self, i: int, sizes: np.ndarray) -> np.ndarray:
        """Record ``i``, read now (its group's values)."""
        out: list = []
        self._serve([(int(self._group_of(np.array([i]))[0]), [int(i)])], sizes, out.extend)
        return out[0][1]

    def _runs(self, visits: list[tuple[int, list[int]]]) -> Iterator[list]:
        """``visits`` (a group and the ids read from it) in runs, each read by one request."""
        return ([visit] for visit in visits)

    def _serve(self, run: list, sizes: np.ndarray, put: Any) -> None:
        """Reads the groups of ``run`` and hands each visit's records on (``put``)."""
        for (g, ids), values in zip(run, self._values([g for g, _ in run], self.column_name)):
            put(self._records(g, ids, values, sizes))

    def _records(self, g: int, ids: list[int], values: Any, sizes: np.ndarray) -> list:
        """``(i, record i)`` of every ``i`` of ``ids`` from group ``g``'s ``values``, each checked
        to be present and of its indexed size."""
        out = []
        url = self.shards.urls[int(self.group_file[g])]
        for i in ids:
            value = values[i - int(self.group_first[g])]
            if not value.is_valid:
                raise ValueError(f"{url}: row {i} of {self.column_name!r} is null")
            record = np.frombuffer(value.as_buffer(), dtype=np.uint8)
            if len(record) != sizes[i]:
                raise ValueError(
                    f"record {i} ({url}) has {len(record)} bytes now, {int(sizes[i])} when its index was made"
                )
            out.append((i, record))
        return out

    def _values(self, groups: list[int], column: str) -> Iterator[Any]:
        """Each of ``groups``' values of ``column``, in order."""
        for g in groups:
            yield self._read_group(g)[0]

    def _read_group(self, g: int) -> tuple[Any, int]:
        raise NotImplementedError

    def column(self, name: str) -> np.ndarray:
        """Every row's value of the small column ``name``."""
        raise TypeError("this source has no columns to read by index (Parquet sources do)")


def _visits(ids: np.ndarray, groups: np.ndarray) -> list[tuple[int, list[int]]]:
    """``ids`` (in their groups ``groups``) as visits: a group and the ids in a row read from it."""
    visits: list[tuple[int, list[int]]] = []
    for i, g in zip(ids.tolist(), groups.tolist()):
        if visits and visits[-1][0] == g:
            visits[-1][1].append(i)
        else:
            visits.append((g, [i]))
    return visits


class _HeldFile(_RangedFile):
    """A shard of which the bytes ``data`` at ``first`` are held (a row group's column chunk,
    read with its neighbours by one request), read from there; any other read (a writer's
    padding that pyarrow wants too) is a read of the shard."""

    def __init__(self, shards: _shards.Shards, k: int, first: int, data: bytes) -> None:
        super().__init__(shards, k)
        self._first, self._data = first, memoryview(data)

    def read(self, n: int = -1) -> bytes:
        end = self._size if n is None or n < 0 else min(self._size, self._at + n)
        if self._first <= self._at and end <= self._first + len(self._data):
            body = bytes(self._data[self._at - self._first : end - self._first])
            self._at = end
            return body
        return super().read(n)


def chunk_range(metadata: Any, g: int, column: str) -> tuple[int, int]:
    """Where row group ``g``'s column chunks of ``column`` (all its leaves: an image struct's
    ``bytes`` and ``path``) are in the file, from its footer: ``(first byte, end)``."""
    group = metadata.row_group(g)
    first, end = None, 0
    for c in range(group.num_columns):
        chunk = group.column(c)
        if chunk.path_in_schema != column and not chunk.path_in_schema.startswith(column + "."):
            continue
        start = chunk.data_page_offset
        if chunk.has_dictionary_page and 0 < chunk.dictionary_page_offset < start:
            start = chunk.dictionary_page_offset
        first = start if first is None else min(first, start)
        end = max(end, start + chunk.total_compressed_size)
    if first is None:
        raise ValueError(f"row group {g} has no column {column!r}")
    return first, end


def read_run(shards: _shards.Shards, f: int, metadata: Any, groups: list[int], column: str) -> Iterator[Any]:
    """Each of file ``f``'s row groups ``groups``' ``column`` (a chunked array), in order, their column
    chunks read by one ranged GET (or one open file) from the first's start to the last's end,
    the holes between them read through (:func:`~ubershuffle._s3.near_runs` makes such runs)."""
    pa, pq = _pyarrow()
    url = shards.urls[f]
    spans = [chunk_range(metadata, g, column) for g in groups]
    with shards.opened(f, spans[0][0], spans[-1][1]) as take:
        at = spans[0][0]
        for g, (start, end) in zip(groups, spans):
            at += _s3.skip(take, start - at)
            data = take(end - start)
            if at != start or len(data) != end - start:
                raise ValueError(f"{url}: truncated at offset {max(at, start) + len(data)}")
            at = end
            try:
                parquet = pq.ParquetFile(
                    _HeldFile(shards, f, start, data),
                    metadata=metadata,
                    page_checksum_verification=True,
                    pre_buffer=False,
                )
                table = parquet.read_row_group(g, columns=[column], use_threads=False)
            except (pa.ArrowException, OSError) as e:
                raise ValueError(f"{url}: {' '.join(str(e).split())}") from None
            yield table.column(0)


def coalesced(metadata: Any, f: int, groups: list[int], column: str) -> Iterator[list[int]]:
    """File ``f``'s row groups ``groups`` in runs that one request each reads
    (:func:`~ubershuffle._s3.near_runs` of their column chunks of ``column``)."""
    return _s3.near_runs((g, f, *chunk_range(metadata, g, column)) for g in groups)


class ParquetRecords(GroupRecords):
    """Where a Parquet source's records are (row groups of files). The files' footers come with
    the index (``footers``: each a Parquet metadata file, base64), so a read reads column chunks
    alone: those of neighbouring row groups by one ranged GET (a whole file's, when a rank reads
    it all and the other columns between its row groups are small)."""

    def __init__(
        self, shards: _shards.Shards, column: str, groups: list[list[int]], footers: list[str]
    ) -> None:
        super().__init__(shards, column, groups)
        self.footers = footers

    def _metadata(self, f: int) -> Any:
        """File ``f``'s footer (parsed once a process)."""
        if f not in self._footers:
            pa, pq = _pyarrow()
            self._footers[f] = pq.read_metadata(pa.BufferReader(base64.b64decode(self.footers[f])))
        return self._footers[f]

    def _runs(self, visits: list[tuple[int, list[int]]]) -> Iterator[list]:
        """Visits of neighbouring row groups of one file (their column chunks at most
        :data:`~ubershuffle._s3.GAP_BYTES` apart, in file order) in one run."""
        spans = []
        for visit in visits:
            g = visit[0]
            f = int(self.group_file[g])
            start, end = chunk_range(self._metadata(f), int(self.group_index[g]), self.column_name)
            spans.append((visit, f, start, end))
        return _s3.near_runs(spans)

    def _values(self, groups: list[int], column: str) -> Iterator[Any]:
        """The values of ``groups`` (one run: of one file) by one read."""
        pa, _ = _pyarrow()
        f = int(self.group_file[groups[0]])
        local = [int(self.group_index[g]) for g in groups]
        for values in read_run(self.shards, f, self._metadata(f), local, column):
            yield _values(pa, values, column)

    def column(self, name: str) -> np.ndarray:
        """Every row's value of the column ``name`` (a small one: labels, captions), read whole
        from every file (its column chunks, neighbours by one read), in record order."""
        pa, _ = _pyarrow()
        chunks = []
        for f in range(len(self.shards.urls)):
            metadata = self._metadata(f)
            try:
                runs = list(coalesced(metadata, f, list(range(metadata.num_row_groups)), name))
            except ValueError as e:
                raise ValueError(f"{self.shards.urls[f]}: {e}") from None
            for run in runs:
                for values in read_run(self.shards, f, metadata, run, name):
                    chunks += values.chunks
        return pa.chunked_array(chunks).to_numpy(zero_copy_only=False)


def _index_file(column: str) -> Any:
    """A builder of file ``k``'s index: its row groups' row counts, the sizes of the column's
    values (its column chunks read, neighbours by one read) and its footer."""

    def build(shards: _shards.Shards, k: int) -> dict:
        pa, pq = _pyarrow()
        import pyarrow.compute as pc

        source = _RangedFile(shards, k)
        url = shards.urls[k]
        try:
            metadata = pq.ParquetFile(source, page_checksum_verification=True, pre_buffer=False).metadata
            names = metadata.schema.to_arrow_schema().names
            if column not in names:
                raise ValueError(f"no column {column!r} (it has {', '.join(names)})")
            rows: list[int] = []
            sizes: list[int] = []
            read = source.read_bytes
            for run in coalesced(metadata, k, list(range(metadata.num_row_groups)), column):
                read += chunk_range(metadata, run[-1], column)[1] - chunk_range(metadata, run[0], column)[0]
                for g, values in zip(run, read_run(shards, k, metadata, run, column)):
                    values = _values(pa, values, column)
                    if values.null_count:
                        raise ValueError(f"column {column!r} has a null in row group {g}")
                    rows.append(len(values))
                    sizes += pc.binary_length(values).to_pylist()
            footer = pa.BufferOutputStream()
            metadata.write_metadata_file(footer)
        except (pa.ArrowException, OSError, KeyError, ValueError) as e:
            raise ValueError(f"{url}: {' '.join(str(e).split())}") from None
        return {
            "rows": rows,
            "sizes": sizes,
            "read": read,
            "footer": base64.b64encode(footer.getvalue().to_pybytes()).decode(),
        }

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
    records = ParquetRecords(shards, column, [ix["rows"] for ix in indexes], [ix["footer"] for ix in indexes])
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
