"""The record store and the record sources in one process (no torch). The data plane's engine
that moves records between stores is tested in Rust, whole jobs in one process
(``cargo test -p ubershuffle-plane``), and under torchrun in test_torch_*.py."""

from __future__ import annotations

import multiprocessing
import pickle

import numpy as np
import pytest

from ubershuffle.sources import RecordSource, as_source
from ubershuffle.store import RecordStore


def uneven(count: int, seed: int = 0) -> list:
    rng = np.random.default_rng(seed)
    sizes = rng.integers(0, 3000, count)
    return [rng.integers(0, 256, s, dtype=np.uint8).tobytes() for s in sizes]


def test_the_store_reads_what_was_put_and_forgets_what_was_evicted(tmp_path):
    data = uneven(50)
    source = as_source(data)
    store = RecordStore(source.offsets, tmp_path / "s")
    assert source.load(store, [3, 4, 9]) == sum(len(data[i]) for i in (3, 4, 9))
    assert list(store.held()) == [3, 4, 9] and 4 in store and 5 not in store
    assert store[4].tobytes() == data[4] and not store[4].flags.writeable
    with pytest.raises(KeyError, match="^5$"):
        store[5]
    with pytest.raises(
        ValueError, match=f"^record 5 has {len(data[5]) + 1} bytes, the index says {len(data[5])}$"
    ):
        store.put(5, b"x" * (len(data[5]) + 1))
    assert list(store.retain([4, 9])) == [3]
    assert list(store.held()) == [4, 9] and store.held_bytes() == len(data[4]) + len(data[9])
    store.evict([9])
    assert list(store.held()) == [4]
    store.close()
    again = RecordStore(source.offsets, tmp_path / "s")
    assert list(again.held()) == [4] and again[4].tobytes() == data[4], "a folder keeps its records"
    with pytest.raises(ValueError, match="another data set"):
        RecordStore(as_source(uneven(7)).offsets, tmp_path / "s")


def _read_later(store: RecordStore, ready, out) -> None:
    ready.wait(10)
    out.put(store[2].tobytes())


def test_a_forked_reader_sees_records_put_after_the_fork():
    data = uneven(10, 1)
    store = RecordStore(as_source(data).offsets)
    ctx = multiprocessing.get_context("fork")
    ready, out = ctx.Event(), ctx.Queue()
    child = ctx.Process(target=_read_later, args=(store, ready, out))
    child.start()
    store.put(2, data[2])
    ready.set()
    assert out.get(timeout=10) == data[2], "a persistent worker reads the record put after it started"
    child.join(10)
    directory = store.directory
    store.close()
    assert not directory.exists(), "a temporary store is removed"


def test_a_pickled_store_only_reads_the_same_files():
    data = uneven(10, 2)
    store = RecordStore(as_source(data).offsets)
    store.put(1, data[1])
    copy = pickle.loads(pickle.dumps(store))
    assert copy[1].tobytes() == data[1]
    store.put(3, data[3])
    assert copy[3].tobytes() == data[3]
    with pytest.raises(RuntimeError, match="only reads"):
        copy.put(4, data[4])
    store.close()


def records_of(source) -> list:
    """Every record of ``source``, as bytes, read one by one and by ``read`` (which must agree)."""
    one_by_one = [source.record(i).tobytes() for i in range(len(source))]
    assert [(i, r.tobytes()) for i, r in source.read(range(len(source)))] == list(enumerate(one_by_one))
    return one_by_one


def test_sources_of_every_kind_give_sizes_and_bytes(tmp_path):
    """Every kind of source gives its records' bytes (sizes follow from them)."""
    rows = np.arange(12, dtype=np.uint8).reshape(3, 4)
    assert (
        records_of(as_source(rows)) == [r.tobytes() for r in rows] and list(as_source(rows).sizes) == [4] * 3
    )
    folder = tmp_path / "data"
    (folder / "b").mkdir(parents=True)
    (folder / "a.jpg").write_bytes(b"first")
    (folder / "b" / "c.jpg").write_bytes(b"second!")
    (folder / ".hidden").write_bytes(b"skipped")
    files = as_source(folder)
    assert files.kind == "files" and records_of(files) == [b"first", b"second!"]
    assert list(files.sizes) == [5, 7]
    listed = as_source([folder / "b" / "c.jpg", str(folder / "a.jpg")])
    assert records_of(listed) == [b"second!", b"first"] and list(listed.sizes) == [7, 5]
    store = RecordStore(files.offsets)
    assert files.load(store, [0, 1]) == 12 and [store[i].tobytes() for i in (0, 1)] == [b"first", b"second!"]
    store.close()
    seq = as_source([b"ab", bytearray(b"c"), memoryview(b""), np.frombuffer(b"xyz", dtype=np.uint8)])
    assert records_of(seq) == [b"ab", b"c", b"", b"xyz"]
    assert list(seq.sizes) == [2, 1, 0, 3] and seq.total_bytes == 6
    blob = tmp_path / "blob"
    blob.write_bytes(b"abcdef")
    from_blob = RecordSource.from_blob(blob, [0, 2, 2, 6])
    assert records_of(from_blob) == [b"ab", b"", b"cdef"]
    # Files and a local blob are read by the data plane's engine itself; the rest by Python.
    assert repr(files._reader()) == "SourceReader(2 files)"
    assert repr(from_blob._reader()) == f"SourceReader(3 records of {blob})"
    assert seq._reader() is None and as_source(rows)._reader() is None
    with pytest.raises(ValueError, match="offsets end"):
        RecordSource.from_blob(blob, [0, 2, 5])
    with pytest.raises(TypeError, match="2-D uint8"):
        as_source(np.zeros((2, 2, 2), dtype=np.uint8))
    with pytest.raises(ValueError, match="not a folder"):
        as_source(tmp_path / "missing")
    with pytest.raises(TypeError, match="^records must be .*, not int$"):
        as_source(42)
