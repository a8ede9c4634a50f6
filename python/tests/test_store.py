"""The record store, the record sources, and the data plane's engine run in one process (no
torch): records sent whole between ranks' stores, and a store rank's coded delivery decoded at
every training rank, byte for byte."""

from __future__ import annotations

import multiprocessing
import pickle

import numpy as np
import pytest

from ubershuffle import _native
from ubershuffle.sampler import CodedShuffleSampler
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
    with pytest.raises(ValueError, match="offsets end"):
        RecordSource.from_blob(blob, [0, 2, 5])
    with pytest.raises(TypeError, match="2-D uint8"):
        as_source(np.zeros((2, 2, 2), dtype=np.uint8))
    with pytest.raises(ValueError, match="not a folder"):
        as_source(tmp_path / "missing")
    with pytest.raises(TypeError, match="^records must be .*, not int$"):
        as_source(42)


def cores(points: int, world: int, **kwargs) -> tuple:
    """Sampler cores at epoch 0 and 1 of one chain."""
    sampler = CodedShuffleSampler(points, num_replicas=world, rank=0, seed=5, **kwargs)
    now = sampler._core
    return now, now.stepped()


def test_records_move_whole_between_stores_to_every_rank_s_target():
    data = uneven(90, 3)
    source = as_source(data)
    now, nxt = cores(90, 3, policy="partial-local", fraction=0.5)
    stores = [RecordStore(source.offsets) for _ in range(3)]
    for r, store in enumerate(stores):
        source.load(store, now.targets()[r])
    views = [_native.TransferCore(stores[r]._core, now.targets(), nxt.targets(), r, 4096) for r in range(3)]
    assert all(len(v.source_ids()) == 0 for v in views), "every record is held by some rank"
    for k in range(max(v.rounds for v in views)):
        packed = []
        for v in views:
            sent, _ = v.sizes(k)
            out = np.empty(sum(sent), dtype=np.uint8)
            v.pack_into(k, out)
            packed.append((out, np.cumsum(sent) - sent, sent))
        for r, v in enumerate(views):
            _, received = v.sizes(k)
            parts = [packed[p][0][packed[p][1][r] : packed[p][1][r] + packed[p][2][r]] for p in range(3)]
            assert [len(x) for x in parts] == list(received), "both ends agree on every message"
            v.unpack(k, np.concatenate(parts))
    for r, store in enumerate(stores):
        for i in nxt.targets()[r]:
            assert store[int(i)].tobytes() == data[i]
        moved = np.setdiff1d(nxt.targets()[r], now.targets()[r])
        assert views[r].figures()["bytes_received"] == sum(len(data[i]) for i in moved)
        store.close()


@pytest.mark.parametrize("segment_bytes", [64, 1000])
def test_a_coded_delivery_decodes_at_every_rank_byte_for_byte(segment_bytes):
    data = uneven(120, 4)
    source = as_source(data)
    now, nxt = cores(120, 3, alpha=0.5)
    full = RecordStore(source.offsets)
    source.load(full, np.arange(120))
    sender = _native.CodedSendCore(now, full._core, segment_bytes, 50 * segment_bytes)
    figures = sender.figures()
    assert figures["packets"] < figures["uncoded_packets"]
    assert figures["data_bytes"] + figures["padding_bytes"] == figures["packets"] * segment_bytes
    # Every round: the store's message to each rank, then the relay as one all-to-all.
    messages = []
    for k in range(sender.rounds):
        sizes = sender.round_sizes(k)
        out = np.empty(sum(sizes), dtype=np.uint8)
        sender.encode_into(k, out)
        ends = np.cumsum(sizes)
        messages.append([out[e - s : e] for s, e in zip(sizes, ends)])
    stores, receivers = [], []
    for r in range(3):
        store = RecordStore(source.offsets)
        source.load(store, now.targets()[r])
        receiver = _native.CodedRecvCore(now, nxt, sender.part_for(r), store._core, r, segment_bytes)
        assert receiver.rounds == sender.rounds
        stores.append(store)
        receivers.append(receiver)
    for k in range(sender.rounds):
        relays = []
        for r, receiver in enumerate(receivers):
            sent, _ = receiver.relay_sizes(k)
            out = np.empty(sum(sent), dtype=np.uint8)
            receiver.pack_relay(k, messages[k][r], out)
            starts = np.cumsum([0, *sent])
            relays.append([out[starts[q] : starts[q + 1]] for q in range(3)])
        assert [[len(x) for x in row] for row in relays] == sender.relay_matrix(k)
        for r, receiver in enumerate(receivers):
            from_peers = np.concatenate([relays[q][r] for q in range(3)])
            receiver.decode(k, messages[k][r], from_peers)
    for r, (store, receiver) in enumerate(zip(stores, receivers)):
        done = receiver.finish()
        for i in nxt.batch(r):
            assert store[int(i)].tobytes() == data[i], f"rank {r}, record {i}"
        assert list(done["new_records"]) == list(np.setdiff1d(nxt.batch(r), now.targets()[r]))
        store.close()
    f = sender.figures()
    assert f["unicast_packets"] + f["multicast_packets"] + f["unneeded_packets"] == f["packets"]
    assert f["multicast_packets"] > 0, "alpha 0.5 codes: some packets serve several ranks"
    full.close()
