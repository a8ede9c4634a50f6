"""Record sources: a data set of records of any size, with every size known up front.

:func:`as_source` takes what the data planes accept as ``records`` and gives a
:class:`RecordSource`:

- a 2-D ``uint8`` numpy array: one record a row (all of one size);
- a folder (``str`` or ``os.PathLike``): one record a file, every regular file under it
  (recursively, names starting with ``.`` skipped), sorted by relative path;
- a list or tuple of paths: one record a file, in the order given;
- any other sequence of bytes-like objects (``len`` and ``[i]``: ``bytes``, ``bytearray``,
  ``memoryview``, 1-D ``uint8`` arrays): record ``i`` is ``records[i]``;
- :meth:`RecordSource.from_blob`: records laid end to end in one file, with their offsets;
- ``"s3://bucket/prefix"``: one record an object under the prefix, taken as a folder (``prefix/``;
  ``s3://bucket`` for the whole bucket), sorted by key, names starting with ``.`` and folder
  markers (keys ending in ``/``) skipped, as a folder of files is read (a folder uploaded as it
  is gives the same records in the same order);
- a list or tuple of ``s3://bucket/key`` URLs: one record an object, in the order given;
- :meth:`RecordSource.from_blob` of an ``s3://bucket/key`` URL: records laid end to end in one
  object, read by HTTP range requests (consecutive records in one request);
- :func:`webdataset`: WebDataset tar shards as they are, local or ``s3://`` (a list, or a brace
  pattern such as ``s3://b/train-{000000..000099}.tar``): a record a sample, indexed from the
  tar headers alone and read by shard;
- :func:`mds`: a MosaicML Streaming data set as it is (``index.json`` and its MDS shards, local
  or ``s3://``): a record a sample's column, indexed from the shards' offsets tables;
- :func:`litdata`: a LitData data set as it is (``index.json`` and its chunks, as
  ``litdata.optimize`` wrote them, local or ``s3://``): a record an item's field;
- :func:`parquet`: Parquet files as they are (a Hugging Face data set's, local or ``s3://``): a
  record a row's binary column or image column's bytes;
- :func:`hf_dataset`: a Hugging Face ``datasets.Dataset`` as it is (its Arrow cache files,
  memory-mapped): a record a row's binary column or image column's bytes.

Sizes come from the array's shape, the files' sizes (``os.stat``, nothing read), ``len`` of
every item of a sequence (which is in memory anyway), or the object store's listing
(ListObjectsV2; HeadObject for a list of URLs or a blob; nothing read). Reading records
(:meth:`RecordSource.load`) counts what it reads: the data planes report it as reads from the
source, and an object store source also counts its :attr:`~RecordSource.requests` and
:attr:`~RecordSource.bytes_read`.

Object storage goes through boto3 (``pip install boto3``; imported only when an ``s3://``
source is made), configured by the usual environment: ``AWS_ENDPOINT_URL`` (or
``AWS_ENDPOINT_URL_S3``, or ``S3_ENDPOINT_URL`` when neither is set) for an S3-compatible store,
``AWS_ACCESS_KEY_ID`` and ``AWS_SECRET_ACCESS_KEY``, ``AWS_REGION``, ``AWS_PROFILE`` (see
``ubershuffle._s3`` for the whole list and the choice of client). A failed request is a one-line
:class:`ObjectStoreError` naming the object, e.g. ``s3://data/a.jpg: NoSuchKey (The specified
key does not exist.)``; an object replaced since the source was made is a one-line
``ValueError``.
"""

from __future__ import annotations

import os
import pathlib
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from . import _native, _s3, _shards
from ._s3 import ObjectStoreError
from ._shards import sample_members

__all__ = [
    "ObjectStoreError",
    "RecordSource",
    "as_source",
    "hf_dataset",
    "litdata",
    "mds",
    "parquet",
    "sample_members",
    "webdataset",
]

_FILE_TYPES = (str, os.PathLike)
_READ_BY_DATA = ("s3", "parquet", "arrow", "dataset", "compressed")
"""Kinds whose records their data object reads (``read``, ``record``, ``column``)."""
_COLUMNAR = ("parquet", "arrow", "dataset")
"""Kinds with columns beside the records' (:meth:`RecordSource.column`)."""


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
    """``"array"``, ``"files"``, ``"sequence"``, ``"blob"``, ``"shards"`` (ranges of local
    shard files), ``"s3"`` (objects, or ranges of objects), ``"parquet"`` (a column of
    Parquet files), ``"arrow"`` (a field of LitData chunks that hold Arrow rows),
    ``"compressed"`` (compressed MDS shards or LitData chunks, local or ``s3://``) or
    ``"dataset"`` (a column of a Hugging Face ``datasets.Dataset``)."""

    sharded: bool = False
    """Whether the records sit in shards, many to a file or object, in id order (the
    :func:`webdataset`, :func:`mds`, :func:`litdata` and :func:`parquet` sources): read fastest a
    shard at a time, so a peer-mode ``ShuffleGroup`` starts its chain in contiguous blocks."""

    index_bytes_read: int = 0
    """Bytes this process read to index a sharded source (0 when every shard's index came from
    the cache; tar headers, not records)."""

    _fingerprint_of: Any = None
    """What identifies an object store's sharded source without reading its records (its
    shards' URLs, sizes and ETags), or ``None``."""

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

    @property
    def requests(self) -> int:
        """Requests this process made to the object store for this source (listing, heads and
        reads, failed ones included; 0 for a local source). A pickled copy counts from 0."""
        return self._data.store.requests if self._remote() else 0

    @property
    def bytes_read(self) -> int:
        """Bytes this process read from the object store for this source (0 for a local
        source, whose reads the data planes count as ``source_bytes``). A pickled copy counts
        from 0."""
        return self._data.store.bytes_read if self._remote() else 0

    def _remote(self) -> bool:
        return self.kind in _READ_BY_DATA and self._data.store is not None

    def column(self, name: str) -> np.ndarray:
        """Every record's value of the small column ``name`` of a Parquet or Hugging Face data
        set source (labels, captions: read whole now, from every file), in record order;
        ``TypeError`` for other sources."""
        if self.kind not in _COLUMNAR:
            raise TypeError(f"a {self.kind} source has no columns (Parquet and Hugging Face data sets do)")
        return self._data.column(name)

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
        if self.kind in _READ_BY_DATA:
            return self._data.record(i, self.sizes)
        if self.kind == "shards":
            return self._data.record(i, self.sizes[i])
        return np.frombuffer(memoryview(self._data[i]).cast("B"), dtype=np.uint8)

    def read(self, ids: Any) -> Iterator[tuple[int, np.ndarray]]:
        """``(i, record i's bytes)`` for every ``i`` of ``ids``, in the order given; an object
        store source reads them by several requests at once (consecutive records of a blob in
        one range). A record whose size differs from the source's is a one-line ``ValueError``."""
        ids = np.asarray(ids, dtype=np.int64)
        if len(ids) and not (0 <= ids.min() and ids.max() < len(self)):
            bad = int(ids.min()) if ids.min() < 0 else int(ids.max())
            raise IndexError(f"record {bad} is out of range (the source has {len(self)} records)")
        if self.kind in _READ_BY_DATA:
            yield from self._data.read(ids, self.sizes)
            return
        for i in map(int, ids):
            record = self.record(i)
            if len(record) != self.sizes[i]:
                was = int(self.sizes[i])
                raise ValueError(f"record {i} has {len(record)} bytes now, {was} when the source was made")
            yield i, record

    def load(self, store: Any, ids: Any) -> int:
        """Reads the records ``ids`` into ``store`` (a :class:`ubershuffle.store.RecordStore`);
        returns the bytes read. Files are read by the Rust side, without the GIL; objects by
        several requests at once, in ascending order of ids (so that consecutive records of a
        blob share a range request)."""
        ids = np.asarray(ids, dtype=np.int64)
        if len(ids) == 0:
            return 0
        if self.kind == "files":
            return int(store._core.load_files(ids, [os.fspath(self._data[i]) for i in ids]))
        if self.kind in _READ_BY_DATA:
            ids = np.sort(ids)
        total = 0
        chunk: list[np.ndarray] = []
        chunk_ids: list[int] = []
        chunk_bytes = 0
        for i, record in self.read(ids):
            chunk.append(record)
            chunk_ids.append(i)
            chunk_bytes += len(record)
            if chunk_bytes >= 16 << 20:
                store.put_many(chunk_ids, np.concatenate(chunk))
                total += chunk_bytes
                chunk, chunk_ids, chunk_bytes = [], [], 0
        if chunk:
            store.put_many(chunk_ids, np.concatenate(chunk))
            total += chunk_bytes
        return total

    def _reader(self) -> Any:
        """A reader of this source for the data plane's engine, which reads with it off the
        GIL (``None``: the engine calls :meth:`load`, on a thread of its own)."""
        if self.kind == "files":
            return _native.SourceReader.files([os.fspath(p) for p in self._data], self.offsets)
        if self.kind == "blob" and isinstance(self._data, np.memmap) and self._data.filename:
            return _native.SourceReader.blob(self._data.filename, self.offsets)
        if self.kind == "shards":
            return self._data.reader(self.offsets)
        return None

    def _fingerprint(self) -> int | None:
        """A digest that ranks compare at start instead of reading a sample of records: an
        object store's sharded source's listing (URLs, sizes, ETags) and index; ``None`` for
        the others."""
        if self._fingerprint_of is None:
            return None
        return _shards.fingerprint(self._fingerprint_of, self.sizes, self._data.starts)

    @classmethod
    def from_blob(cls, path: str | os.PathLike, offsets: Any) -> RecordSource:
        """Records laid end to end in the file ``path`` (memory-mapped, read-only) at
        ``offsets`` (``records + 1`` ints from 0; the last one the file's size). ``path`` may
        be an ``s3://bucket/key`` URL: the object is read by range requests, never whole."""
        offsets = np.asarray(offsets, dtype=np.int64)
        if offsets.ndim != 1 or len(offsets) < 2 or offsets[0] != 0 or (np.diff(offsets) < 0).any():
            raise ValueError("blob offsets must be records + 1 non-decreasing ints from 0")
        if _s3.is_url(path):
            bucket, key = _s3.split_url(path)
            objects = _s3.ObjectRecords([(bucket, key)], [""], offsets)
            size, etag = objects.store.head(bucket, key)
            objects.etags[0] = etag
            if int(offsets[-1]) != size:
                raise ValueError(f"{path} has {size} bytes, its offsets end at {int(offsets[-1])}")
            return cls("s3", np.diff(offsets), objects)
        size = os.stat(path).st_size
        if int(offsets[-1]) != size:
            raise ValueError(f"{path} has {size} bytes, its offsets end at {int(offsets[-1])}")
        data = np.memmap(path, dtype=np.uint8, mode="r") if size else np.zeros(0, dtype=np.uint8)
        return cls("blob", np.diff(offsets), data)


def webdataset(urls: Any, member: str | None = "jpg", *, index_dir: Any = None) -> RecordSource:
    """WebDataset tar shards as they are: ``urls`` is a list of paths or ``s3://`` URLs, or
    one with brace patterns (``"s3://b/train-{000000..000099}.tar"``). A sample is the members
    in a row of a shard that share a key (``000123.jpg``, ``000123.cls``: key ``000123``), as
    WebDataset groups them; record ``i`` is the ``i``-th sample, shards in the order given:

    - with ``member="jpg"`` (an extension, case-insensitive), that member's bytes; a sample
      without one is a one-line ``ValueError`` naming the shard, the key and its offset;
    - with ``member=None``, the sample's members as they lie in the shard, headers included:
      a small tar archive (without end-of-archive blocks) that :func:`sample_members` (or
      Python's ``tarfile``) splits into ``{"__key__": key, "jpg": ..., "cls": ...}``.

    The index comes from the tar headers alone (a local shard's by ``pread`` in Rust; an
    object's by ranged GETs of 4 KiB at each header, several shards at once), every header's
    checksum checked: a truncated shard or a corrupt header is a one-line ``ValueError`` naming
    the shard and the offset. It is cached in ``index_dir`` (default: ``$UBERSHUFFLE_INDEX_DIR``,
    else ``~/.cache/ubershuffle/index``; ``False``: no cache), keyed by each shard's path or URL,
    size and modification time or ETag, so a restart does not read the headers again.
    :attr:`RecordSource.index_bytes_read` says what building it read.

    Records are read by shard: neighbours in a shard (at most 8 KiB apart: the headers and
    labels between two images) in one read, by the
    data plane's engine in Rust off the GIL for local shards, by range requests on a pool of
    threads for objects (only while the object keeps the ETag it was indexed with)."""
    return _shards.webdataset_source(urls, member, index_dir)


def mds(root: Any, column: str, *, split: str | None = None, index_dir: Any = None) -> RecordSource:
    """A MosaicML Streaming data set as it is: ``root`` is the folder or ``s3://`` prefix that
    holds its ``index.json`` (``split``: a subfolder, as Streaming's ``split``) and MDS shards,
    as ``streaming.MDSWriter`` wrote them. Record ``i`` is the ``i``-th sample's ``column``, the
    bytes Streaming stores for it (for a ``bytes`` column, what Streaming's reader returns; for
    ``jpeg`` or ``png``, the image file; ``str``, its UTF-8), shards in the index's order.

    The index comes from each shard's offsets table (one read of ``4 (samples + 2)`` bytes a
    shard) and, when a column other than ``column`` has a size that varies, the sizes at each
    sample's start (reads of a few bytes, neighbours within 4 KiB together); every sample's sizes
    are checked against the offsets table, the shard's size against ``index.json``'s. It is
    cached as :func:`webdataset`'s is (``index_dir``), and records are read by shard as its are.

    Compressed shards (``MDSWriter(compression=...)``: ``zstd``, ``gz`` or ``bz2``, at any level;
    ``br`` and ``snappy`` are a one-line ``ValueError``) are read whole, each by one read (one
    GET), decompressed as they come (zstd with ``pip install zstandard``, imported only then),
    and a shard's records are served only once it has decompressed to ``index.json``'s size
    (and matched its ``hashes``, those of ``hashlib``'s algorithms); the index decompresses a
    shard only as far as what it needs lies (its offsets table: a few KiB of its start; each
    sample's sizes when another column varies: all of it). Such a source's kind is ``"compressed"``, read in
    Python on the engine's source thread (the decompressors run off the GIL)."""
    if not isinstance(column, str) or not column:
        raise ValueError(f"column must be the name of an MDS column, got {column!r}")
    return _shards.mds_source(root, column, split, index_dir)


def litdata(root: Any, field: str, *, index_dir: Any = None) -> RecordSource:
    """A LitData data set as it is: ``root`` is the folder or ``s3://`` prefix that holds its
    ``index.json`` and chunks, as ``litdata.optimize`` (or its ``BinaryWriter``) wrote them, of
    items that are flat dicts. Record ``i`` is the ``i``-th item's ``field``, the bytes LitData
    stores for it (for a ``bytes`` field, what ``litdata.StreamingDataset`` returns), chunks in
    the index's order.

    Chunks are read plain, or compressed whole (``compression="zstd"`` with
    ``compression_level="chunk"``, a ``.zstd.bin`` a chunk, what LitData wrote before its
    in-chunk levels: read whole and checked as :func:`mds` reads a compressed shard, the index
    decompressing each chunk as far as its last item's sizes); LitData's newer in-chunk levels
    (``"batch"``, the default of ``compression="zstd"`` now, and ``"sample"``) and
    ``encryption`` are a one-line ``ValueError``. Of the ``PyTreeLoader``'s two layouts, items:
    the index comes from each chunk's offsets table
    and the sizes at each item's start (neighbours within 4 KiB in one read), every size checked
    against the chunk's, and records are read by chunk as :func:`webdataset`'s are. Arrow rows
    (an Arrow IPC file after the offsets table, LitData's ``LDARW01`` trailer: what it writes
    for dict items when pyarrow is installed): read with pyarrow as :func:`parquet` reads, the
    index reading each record batch once, records read by batch. The index is cached as
    :func:`webdataset`'s is (``index_dir``)."""
    if not isinstance(field, str) or not field:
        raise ValueError(f"field must be the name of a field of the items, got {field!r}")
    return _shards.litdata_source(root, field, index_dir)


def parquet(urls: Any, column: str, *, index_dir: Any = None) -> RecordSource:
    """Parquet files as they are (a Hugging Face data set's ``data/*.parquet``), local or
    ``s3://``: ``urls`` as :func:`webdataset` takes them. Record ``i`` is row ``i``'s value of
    ``column``, files in the order given: a binary column's bytes, a string column's UTF-8, or
    an image column's ``bytes`` (Hugging Face's ``Image`` feature, a struct of ``bytes`` and
    ``path``); a null is a one-line ``ValueError``. :meth:`RecordSource.column` reads a small
    column (labels) for a ``transform`` to use by index.

    Read with pyarrow (``pip install pyarrow``; imported only here). Parquet's footer says where
    each row group's column chunk is but not each value's size, so the index reads ``column``
    once (its column chunks, by range; page checksums checked where the writer wrote them),
    cached as :func:`webdataset`'s is (``index_dir``) with each file's footer. Records are read
    by row group: the column chunks of the row groups that hold records asked for, neighbours (at
    most 8 KiB of other columns between two) by one ranged GET however long, so that a rank that
    needs a whole file reads it by one request, on the engine's source thread through Python
    (pyarrow decodes off the GIL)."""
    if not isinstance(column, str) or not column:
        raise ValueError(f"column must be the name of a Parquet column, got {column!r}")
    from ._parquet import parquet_source

    return parquet_source(urls, column, index_dir)


def hf_dataset(dataset: Any, column: str) -> RecordSource:
    """A Hugging Face ``datasets.Dataset`` as it is (``load_dataset(...)["train"]``,
    ``load_from_disk``, after ``shuffle``, ``select`` or ``filter``): record ``i`` is what
    ``dataset[i][column]`` holds, a binary column's bytes, a string column's UTF-8, or an image
    column's ``bytes`` (the ``Image`` feature's file, not the decoded picture); a null (an image
    stored by path alone) is a one-line ``ValueError``. :meth:`RecordSource.column` reads a
    small column (labels) for a ``transform`` to use by index.

    Read from the data set's Arrow table, which ``datasets`` memory-maps from its cache files
    (``dataset.cache_files``; an in-memory data set's table as it is), through its indices
    mapping: every size from the table's offsets at once, nothing read; records are views of
    the mapped bytes. The source pickles as the cache files' paths (a ``datasets`` install reads
    them where unpickled); ``datasets`` is never imported by ``ubershuffle``, pyarrow only here."""
    if not isinstance(column, str) or not column:
        raise ValueError(f"column must be the name of a column of the data set, got {column!r}")
    from ._hf import dataset_source

    return dataset_source(dataset, column)


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
    from ._hf import is_dataset

    if is_dataset(records):
        raise TypeError(
            f"a Hugging Face {type(records).__name__} is a source with its column named: "
            "ubershuffle.sources.hf_dataset(dataset, column)"
        )
    if _s3.is_url(records):
        return _prefix_source(records)
    if isinstance(records, str) and "://" in records:
        raise ValueError(
            f"{records!r}: object storage is read through s3:// URLs (an S3-compatible store: "
            "set AWS_ENDPOINT_URL), local records through paths"
        )
    if isinstance(records, (list, tuple)) and records and all(_s3.is_url(r) for r in records):
        return _objects_source(list(records))
    if isinstance(records, (list, tuple)) and any(_s3.is_url(r) for r in records):
        raise ValueError("a list of records mixes s3:// URLs with other things: give one kind")
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
        "records must be a 2-D uint8 array, a folder, a list of paths, an s3:// prefix or a list "
        f"of s3:// URLs, or a sequence of bytes-like objects, not {type(records).__name__}"
    )


def _files_source(files: list[pathlib.Path]) -> RecordSource:
    sizes = np.empty(len(files), dtype=np.int64)
    for i, path in enumerate(files):
        try:
            sizes[i] = path.stat().st_size
        except OSError as e:
            raise ValueError(f"{path}: {e.strerror}") from None
    return RecordSource("files", sizes, files)


def _prefix_source(url: str) -> RecordSource:
    """Every object under ``url``'s prefix, taken as a folder, as a folder of files is read."""
    bucket, prefix = _s3.split_url(url)
    if prefix and not prefix.endswith("/"):
        prefix += "/"
    objects = _s3.ObjectRecords([], [])
    keys, sizes, etags = objects.store.list(bucket, prefix)
    kept = [
        k
        for k, key in enumerate(keys)
        if not key.endswith("/") and not any(part.startswith(".") for part in key[len(prefix) :].split("/"))
    ]
    if not kept:
        raise ValueError(f"s3://{bucket}/{prefix} holds no object")
    objects.bucket_keys = [(bucket, keys[k]) for k in kept]
    objects.etags = [etags[k] for k in kept]
    return RecordSource("s3", sizes[kept], objects)


def _objects_source(urls: list[str]) -> RecordSource:
    """One record an object, in the order given; sizes by HeadObject."""
    objects = _s3.ObjectRecords([_s3.split_url(u) for u in urls], [])
    heads = objects.store.heads(urls)
    objects.etags = [etag for _, etag in heads]
    return RecordSource("s3", np.array([size for size, _ in heads], dtype=np.int64), objects)
