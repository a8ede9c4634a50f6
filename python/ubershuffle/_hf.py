"""A Hugging Face ``datasets.Dataset`` as it is: record ``i`` is ``dataset[i]``'s value of one
binary column (or an image column's ``bytes``), read from the data set's Arrow table, which
``datasets`` memory-maps from its cache files (``Dataset.cache_files``), through its indices
mapping when it has one (after ``shuffle``, ``select``, ``filter``). ``datasets`` itself is never
imported here: the source holds the data set's table object (which pickles as its cache files'
paths, memory-mapped again where unpickled) and reads it with pyarrow."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from ._parquet import _pyarrow, _values


def is_dataset(records: Any) -> bool:
    """Whether ``records`` is a Hugging Face data set (of any kind), without importing
    ``datasets``."""
    return type(records).__module__.split(".")[0] == "datasets"


class DatasetRecords:
    """Where a Hugging Face data set source's records are: row ``rows[i]`` (row ``i`` without
    an indices mapping) of the column's values in the data set's Arrow table."""

    store = None
    """No object store: the table is memory-mapped from local cache files (or in memory)."""

    def __init__(self, table: Any, rows: np.ndarray | None, column: str) -> None:
        self.table, self.rows, self.column_name = table, rows, column
        self._chunks: list | None = None
        self._firsts: np.ndarray | None = None

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_chunks": None, "_firsts": None}  # taken again from the table

    def values(self) -> Any:
        """The column's binary values (a chunked array over the table's record batches)."""
        pa, _ = _pyarrow()
        return _values(pa, self.table.table.column(self.column_name), self.column_name)

    def _locate(self) -> tuple[list, np.ndarray]:
        if self._chunks is None:
            chunks = self.values().chunks
            self._firsts = np.concatenate([[0], np.cumsum([len(c) for c in chunks])]).astype(np.int64)
            self._chunks = chunks
        return self._chunks, self._firsts

    def record(self, i: int, sizes: np.ndarray) -> np.ndarray:
        """Record ``i``, a read-only view of the table's (memory-mapped) bytes, checked to be
        of its size when the source was made."""
        chunks, firsts = self._locate()
        row = int(self.rows[i]) if self.rows is not None else int(i)
        c = int(np.searchsorted(firsts, row, side="right")) - 1
        value = chunks[c][row - int(firsts[c])]
        if not value.is_valid:
            raise ValueError(f"row {row} of column {self.column_name!r} is null")
        record = np.frombuffer(value.as_buffer(), dtype=np.uint8)
        if len(record) != sizes[i]:
            now, was = len(record), int(sizes[i])
            raise ValueError(f"record {i} (row {row}) has {now} bytes now, {was} when the source was made")
        return record

    def read(self, ids: np.ndarray, sizes: np.ndarray) -> Iterator[tuple[int, np.ndarray]]:
        """``(i, record i)`` for every ``i`` of ``ids``, in order."""
        for i in map(int, ids):
            yield i, self.record(i, sizes)

    def column(self, name: str) -> np.ndarray:
        """Every record's value of the column ``name`` (labels, captions), in record order."""
        if name not in self.table.table.column_names:
            names = ", ".join(self.table.table.column_names)
            raise ValueError(f"the data set has no column {name!r} (it has {names})")
        values = self.table.table.column(name)
        if self.rows is not None:
            values = values.take(self.rows)
        return values.to_numpy(zero_copy_only=False)


def dataset_source(dataset: Any, column: str) -> Any:
    """See :func:`ubershuffle.sources.hf_dataset`."""
    from .sources import RecordSource

    pa, _ = _pyarrow()
    import pyarrow.compute as pc

    kind = type(dataset).__name__
    if not is_dataset(dataset) or not hasattr(getattr(dataset, "data", None), "table"):
        hint = " (pick a split: dataset['train'])" if kind == "DatasetDict" else ""
        raise TypeError(f"hf_dataset takes a datasets.Dataset, not {kind}{hint}")
    names = dataset.data.table.column_names
    if column not in names:
        raise ValueError(f"the data set has no column {column!r} (it has {', '.join(names)})")
    indices = getattr(dataset, "_indices", None)  # the mapping shuffle/select/filter leave
    rows = None if indices is None else indices.column(0).to_numpy().astype(np.int64)
    records = DatasetRecords(dataset.data, rows, column)
    values = records.values()
    lengths = pc.binary_length(values).to_numpy(zero_copy_only=False)
    if rows is not None:
        lengths = lengths[rows]
    if values.null_count:
        nulls = np.flatnonzero(pc.is_null(values).to_numpy(zero_copy_only=False))
        if rows is not None:
            nulls = np.flatnonzero(np.isin(rows, nulls))
        if len(nulls):
            raise ValueError(f"record {int(nulls[0])} of column {column!r} is null (no bytes)")
    if len(lengths) == 0:
        raise ValueError("the data set has no row")
    return RecordSource("dataset", lengths.astype(np.int64), records)
