"""Record sources in object storage, against a real S3 server (moto's) on loopback: listing
order and sizes, loading into a record store byte for byte, range reads of a blob, the count of
requests and bytes, one-line errors that name the bucket or key, pickling, and a ShuffleGroup
that reads an s3:// prefix. Skipped when boto3 or moto[server] is not installed."""

from __future__ import annotations

import json
import os
import pickle
import socket
import subprocess
import sys
import threading

import numpy as np
import pytest
from conftest import S3_SECRET

from ubershuffle import RecordStore
from ubershuffle import _s3 as s3_module
from ubershuffle.sources import ObjectStoreError, RecordSource, as_source


def uneven(count: int, seed: int = 0) -> list[bytes]:
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 256, int(s), dtype=np.uint8).tobytes() for s in rng.integers(0, 3000, count)]


def one_line(e: BaseException) -> str:
    """``e``'s message, checked to be one line with nothing chained and no secret."""
    text = str(e)
    assert "\n" not in text and S3_SECRET not in text, text
    assert e.__cause__ is None and e.__suppress_context__, "botocore's exception is chained"
    return text


def run_python(code: str) -> subprocess.CompletedProcess:
    # The same interpreter and environment as the tests: the package as they import it (installed,
    # or on PYTHONPATH in a checkout), never the source folder ahead of an installed build.
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)


def test_importing_the_package_never_imports_boto3():
    out = run_python(
        "import sys, ubershuffle, ubershuffle.sources\n"
        "ubershuffle.sources.as_source([b'ab', b'c'])\n"
        "assert not {'boto3', 'botocore'} & set(sys.modules), sorted(sys.modules)\n"
    )
    assert out.returncode == 0, out.stderr


def test_without_boto3_an_s3_source_says_what_to_install():
    out = run_python(
        "import sys\n"
        "sys.modules['boto3'] = None\n"
        "from ubershuffle.sources import as_source\n"
        "try:\n"
        "    as_source('s3://bucket/prefix')\n"
        "except ImportError as e:\n"
        "    print(e)\n"
    )
    assert out.returncode == 0 and out.stdout.strip() == "records in s3:// need boto3: pip install boto3", (
        out.stdout + out.stderr
    )


def test_a_prefix_is_a_folder_of_objects_sorted_by_key(s3, monkeypatch):
    monkeypatch.setattr(s3_module, "LIST_KEYS", 2)  # several pages
    data = {
        "images/b.jpg": b"bb",
        "images/a.jpg": b"a",
        "images/sub/c.jpg": b"ccc",
        "images/empty": b"",
        "images/sub/": b"",  # a folder marker
        "images/.hidden": b"h",
        "images/.git/config": b"g",
        "images-other/d.jpg": b"dddd",  # shares the prefix's text, not its folder
    }
    for key, body in data.items():
        s3.put(key, body)
    for url in (s3.url("images"), s3.url("images/")):
        source = as_source(url)
        assert source.kind == "s3" and len(source) == 4, source
        assert list(source.sizes) == [1, 2, 0, 3]  # a.jpg, b.jpg, empty, sub/c.jpg
        assert [source.record(i).tobytes() for i in range(4)] == [b"a", b"bb", b"", b"ccc"]
    assert len(as_source(s3.url())) == 5, "the whole bucket: images-other/d.jpg too"
    listed = as_source(s3.url("images"))
    assert listed.requests == 4 and listed.bytes_read == 0, "4 pages of 2 keys, nothing read"


def test_a_folder_uploaded_as_it_is_gives_the_same_records(s3, tmp_path):
    folder = tmp_path / "data"
    for name, body in {"b/c.jpg": b"xyz", "a.jpg": b"12", ".DS_Store": b"junk", "b/d": b"q" * 100}.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(body)
        s3.put(f"data/{name}", body)
    local, remote = as_source(folder), as_source(s3.url("data"))
    assert list(local.sizes) == list(remote.sizes)
    assert [remote.record(i).tobytes() for i in range(len(remote))] == [
        local.record(i).tobytes() for i in range(len(local))
    ]


def test_load_reads_every_record_once_into_the_store(s3, monkeypatch):
    monkeypatch.setattr(s3_module, "INFLIGHT", 3)  # more requests than may be in flight
    data = uneven(40)
    for i, body in enumerate(data):
        s3.put(f"set/{i:03}", body)
    source = as_source(s3.url("set"))
    store = RecordStore(source.offsets)
    ids = np.random.default_rng(1).permutation(40)[:30]
    assert source.load(store, ids) == sum(len(data[i]) for i in ids)
    assert sorted(store.held()) == sorted(ids)
    assert all(store[int(i)].tobytes() == data[i] for i in ids)
    assert source.requests == 1 + 30 and source.bytes_read == sum(len(data[i]) for i in ids)
    read = [(i, r.tobytes()) for i, r in source.read([5, 2, 9])]
    assert read == [(5, data[5]), (2, data[2]), (9, data[9])], "read() keeps the order given"
    store.close()


class InFlight:
    """Wraps ``ObjectStore.get`` to count the requests in flight at once: the first ``meet``
    wait at a barrier until that many are in flight together (a pool of fewer threads never
    gets there and the barrier breaks); the most ever in flight is kept."""

    def __init__(self, get, meet: int) -> None:
        self._get, self._lock = get, threading.Lock()
        self._barrier = threading.Barrier(meet, timeout=30)
        self.now = self.most = self.calls = 0

    def __call__(self, *args, **kwargs):
        with self._lock:
            self.now += 1
            self.calls += 1
            self.most = max(self.most, self.now)
            first = self.calls <= self._barrier.parties
        try:
            if first:
                self._barrier.wait()
            return self._get(*args, **kwargs)
        finally:
            with self._lock:
                self.now -= 1


@pytest.mark.parametrize("blob", [False, True])
def test_reads_go_eight_requests_at_a_time(s3, monkeypatch, blob):
    """As python/README says: a source reads 8 requests at a time, never more (objects of a
    prefix, or ranges of a blob, one record a range here)."""
    assert s3_module.WORKERS == 8
    data = uneven(40, 7)
    if blob:
        monkeypatch.setattr(s3_module, "RANGE_BYTES", 1)
        source = RecordSource.from_blob(s3.put("blob", b"".join(data)), np.cumsum([0, *map(len, data)]))
    else:
        for i, body in enumerate(data):
            s3.put(f"eight/{i:03}", body)
        source = as_source(s3.url("eight"))
    counted = InFlight(s3_module.ObjectStore.get, meet=8)
    monkeypatch.setattr(s3_module.ObjectStore, "get", lambda store, *a, **k: counted(store, *a, **k))
    nonempty = [i for i in range(40) if data[i]] if blob else list(range(40))
    assert [(i, r.tobytes()) for i, r in source.read(range(40))] == list(enumerate(data))
    assert counted.calls == len(nonempty) and counted.most == 8


def test_a_list_of_urls_is_one_record_an_object_in_the_order_given(s3):
    urls = [s3.put(f"u/{name}", name.encode() * 3) for name in ("z", "a", "m")]
    source = as_source([urls[1], urls[0], urls[2]])
    assert list(source.sizes) == [3, 3, 3] and source.requests == 3  # a HeadObject each
    assert [r.tobytes() for _, r in source.read(range(3))] == [b"aaa", b"zzz", b"mmm"]
    with pytest.raises(ValueError, match="mixes s3:// URLs"):
        as_source([urls[0], "local.jpg"])
    with pytest.raises(ValueError, match="read through s3:// URLs"):
        as_source("gs://bucket/prefix")


def test_a_blob_is_read_in_ranges_of_consecutive_records(s3, monkeypatch):
    data = uneven(12, 2)
    data[4] = b""
    offsets = np.cumsum([0, *map(len, data)])
    url = s3.put("blob.bin", b"".join(data))
    source = RecordSource.from_blob(url, offsets)
    assert source.kind == "s3" and list(source.sizes) == [len(d) for d in data]
    assert source.requests == 1 and source.bytes_read == 0, "a HeadObject for the size"
    store = RecordStore(source.offsets)
    ids = [8, 0, 1, 2, 7, 11, 4]
    assert source.load(store, ids) == sum(len(data[i]) for i in ids)
    assert all(store[i].tobytes() == data[i] for i in ids)
    # Sorted: 0-2, 4, 7-8, 11: three ranges and an empty record that needs no request.
    assert source.requests == 1 + 3 and source.bytes_read == sum(len(data[i]) for i in ids)
    monkeypatch.setattr(s3_module, "RANGE_BYTES", 1)  # each record a range of its own
    assert [r.tobytes() for _, r in source.read([5, 6])] == [data[5], data[6]]
    assert source.requests == 1 + 3 + 2 and source.record(3).tobytes() == data[3]
    with pytest.raises(ValueError, match="its offsets end at"):
        RecordSource.from_blob(url, offsets[:-1])
    store.close()


def test_failures_are_one_line_errors_naming_the_bucket_or_key(s3, monkeypatch):
    with pytest.raises(ObjectStoreError) as e:
        as_source("s3://no-such-bucket/images")
    assert one_line(e.value).startswith("s3://no-such-bucket/images/: NoSuchBucket (")
    with pytest.raises(ValueError, match=f"s3://{s3.name}/nothing/ holds no object"):
        as_source(s3.url("nothing"))
    with pytest.raises(ObjectStoreError) as e:
        as_source([s3.put("k/a", b"a"), s3.url("k/missing")])
    assert one_line(e.value) == f"s3://{s3.name}/k/missing: HTTP 404 (Not Found)"
    with pytest.raises(ObjectStoreError) as e:
        RecordSource.from_blob("s3://no-such-bucket/blob", [0, 1])
    assert one_line(e.value).startswith("s3://no-such-bucket/blob: HTTP 404")

    s3.put("k/b", b"bb")
    source = as_source(s3.url("k"))
    s3.client.delete_object(Bucket=s3.name, Key="k/a")
    with pytest.raises(ObjectStoreError) as e:
        source.load(RecordStore(source.offsets), [0, 1])
    assert one_line(e.value) == f"s3://{s3.name}/k/a: NoSuchKey (The specified key does not exist.)"
    s3.put("k/b", b"BB")  # replaced, the same size
    with pytest.raises(ValueError) as e:
        source.record(1)
    assert one_line(e.value) == f"s3://{s3.name}/k/b changed since the source was made (its ETag differs)"

    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    with pytest.raises(ObjectStoreError) as e:
        as_source(s3.url("k"))
    assert "Unable to locate credentials (set AWS_ACCESS_KEY_ID" in one_line(e.value)

    monkeypatch.setenv("AWS_ENDPOINT_URL", closed_endpoint())
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "s3-test-key")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", S3_SECRET)
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    with pytest.raises(ObjectStoreError) as e:
        as_source(s3.url("k"))
    text = one_line(e.value)
    assert text.startswith(f"s3://{s3.name}/k/: Could not connect to the endpoint URL") and "?" not in text


def closed_endpoint() -> str:
    """An http:// URL on loopback where nothing listens."""
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{closed.getsockname()[1]}"


def test_s3_endpoint_url_serves_when_the_aws_variable_is_unset(s3, monkeypatch):
    """``S3_ENDPOINT_URL`` serves when neither AWS variable of the endpoint is set, and is
    ignored when one is; ``AWS_ENDPOINT_URL_S3`` comes before ``AWS_ENDPOINT_URL``."""
    s3.put("e/x", b"x")
    server = os.environ["AWS_ENDPOINT_URL"]
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    monkeypatch.setenv("S3_ENDPOINT_URL", closed_endpoint())
    assert as_source(s3.url("e")).record(0).tobytes() == b"x", "AWS_ENDPOINT_URL comes first"
    monkeypatch.setenv("AWS_ENDPOINT_URL", closed_endpoint())
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", server)
    assert as_source(s3.url("e")).record(0).tobytes() == b"x", "AWS_ENDPOINT_URL_S3 comes first"
    monkeypatch.delenv("AWS_ENDPOINT_URL")
    monkeypatch.delenv("AWS_ENDPOINT_URL_S3")
    monkeypatch.setenv("S3_ENDPOINT_URL", server)
    assert as_source(s3.url("e")).record(0).tobytes() == b"x"


def test_a_source_pickles_without_its_client_or_credentials(s3):
    data = uneven(5, 3)
    for i, body in enumerate(data):
        s3.put(f"p/{i}", body)
    source = as_source(s3.url("p"))
    source.record(0)
    pickled = pickle.dumps(source)
    assert S3_SECRET.encode() not in pickled and b"s3-test-key" not in pickled
    copy = pickle.loads(pickled)
    assert copy.requests == 0 and copy.bytes_read == 0, "a copy counts its own requests"
    assert [r.tobytes() for _, r in copy.read(range(5))] == data
    assert copy.requests == 5 and source.requests == 2


def test_a_shuffle_group_reads_an_s3_prefix(s3):
    pytest.importorskip("torch", reason="torch is not installed: the ShuffleGroup test needs it")
    import socket

    import torch.distributed as dist

    from ubershuffle.torch import ShuffleGroup

    data = uneven(30, 4)
    for i, body in enumerate(data):
        s3.put(f"train/{i:02}.bin", body)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
    try:
        with ShuffleGroup(s3.url("train"), seed=1) as sg:
            for epoch in range(2):
                sg.set_epoch(epoch)
                assert all(sg[i].tobytes() == data[i] for i in sg.sampler)
            assert sg.figures(0)["source_records"] == 30 and sg.figures(1)["source_records"] == 0
            # One rank reads the source: no content check to read a sample for; epoch 0 reads
            # each record once.
            assert sg._source.bytes_read == sum(map(len, data))
    finally:
        dist.destroy_process_group()


PEER_RANK = """
import json, pathlib, sys
import torch.distributed as dist
from ubershuffle.torch import ShuffleGroup

dist.init_process_group("gloo")
sg = ShuffleGroup(sys.argv[1], policy="partial-local", fraction=0.5, seed=2, timeout=60)
source, log = sg._source, {}
for epoch in range(3):
    sg.set_epoch(epoch)
    log[epoch] = {
        "read": {i: sg[i].tobytes().hex() for i in sg.sampler},
        "bytes_read": source.bytes_read,
        "source_records": sg.figures(epoch)["source_records"],
        "held": [sg.figures(epoch)["held_bytes"], sg.figures(epoch)["peak_held_bytes"]],
    }
pathlib.Path(sys.argv[2], f"rank-{dist.get_rank()}.json").write_text(json.dumps(log))
sg.close()
dist.destroy_process_group()
"""


def test_two_peer_ranks_read_the_prefix_once_then_move_records_between_them(s3, tmp_path):
    pytest.importorskip("torch", reason="torch is not installed: the ShuffleGroup test needs it")
    data = uneven(40, 5)
    for i, body in enumerate(data):
        s3.put(f"peer/{i:02}", body)
    script = tmp_path / "rank.py"
    script.write_text(PEER_RANK)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2"]
    cmd += [str(script), s3.url("peer"), str(tmp_path)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    ranks = [json.loads((tmp_path / f"rank-{r}.json").read_text()) for r in range(2)]
    for epoch in map(str, range(3)):
        read = {int(i): bytes.fromhex(h) for log in ranks for i, h in log[epoch]["read"].items()}
        assert sorted(read) == list(range(40)) and all(read[i] == data[i] for i in read)
    for log in ranks:
        # Epoch 0 reads the rank's batch; later epochs read nothing from the object store.
        assert log["0"]["source_records"] == 20
        assert log["2"]["bytes_read"] == log["0"]["bytes_read"] and log["2"]["source_records"] == 0
        # The most a rank holds: epoch 1's 20 records and the 10 that partial-local (Q = 0.5)
        # brings it from the other rank for epoch 2, until epoch 2 lets go of the 10 it gave.
        before, now = (set(map(int, log[e]["read"])) for e in ("1", "2"))
        assert len(now - before) == 10
        held, peak = log["2"]["held"]
        assert held == sum(len(data[i]) for i in now)
        assert peak == sum(len(data[i]) for i in before | now)


STORE_RANK = """
import json, pathlib, sys
import torch.distributed as dist
from ubershuffle.torch import ShuffleGroup

dist.init_process_group("gloo")
store = dist.get_rank() == 0
sg = ShuffleGroup(sys.argv[1] if store else None, mode="store", alpha=0.5, seed=3, timeout=60)
log = {}
if store:
    served = sg.serve()
    log = {"served": [{k: f[k] for k in ("epoch", "source_records", "source_bytes")} for f in served],
           "requests": sg._source.requests, "bytes_read": sg._source.bytes_read}
else:
    for epoch in range(4):
        sg.set_epoch(epoch)
        log[epoch] = {i: sg[i].tobytes().hex() for i in sg.sampler}
    sg.close()
pathlib.Path(sys.argv[2], f"rank-{dist.get_rank()}.json").write_text(json.dumps(log))
dist.destroy_process_group()
"""


def test_the_store_reads_each_record_from_the_object_store_at_most_once(s3, tmp_path):
    # Store mode with the object store behind the store rank: the training ranks pass no
    # source, so the store has nobody to compare a sample with and reads no sample at the start;
    # each record is read once, when a delivery first needs it, and kept (issue 54's arm s).
    pytest.importorskip("torch", reason="torch is not installed: the ShuffleGroup test needs it")
    data = uneven(40, 6)
    for i, body in enumerate(data):
        s3.put(f"store/{i:02}", body)
    script = tmp_path / "rank.py"
    script.write_text(STORE_RANK)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=3"]
    cmd += [str(script), s3.url("store"), str(tmp_path)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    store = json.loads((tmp_path / "rank-0.json").read_text())
    trainers = [json.loads((tmp_path / f"rank-{r}.json").read_text()) for r in (1, 2)]
    for epoch in map(str, range(4)):
        read = {int(i): bytes.fromhex(h) for log in trainers for i, h in log[epoch].items()}
        assert sorted(read) == list(range(40)) and all(read[i] == data[i] for i in read)
    records = sum(f["source_records"] for f in store["served"])
    # Every record was needed (each epoch covers the data set) and read exactly once: a GET
    # each, beside the one listing of the prefix.
    assert records == 40 and store["requests"] == 40 + 1, store
    assert store["bytes_read"] == sum(f["source_bytes"] for f in store["served"]) == sum(map(len, data))
