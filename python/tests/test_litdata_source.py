"""LitData's optimized data sets as a record source, local and in object storage (a real S3
server, moto's, on loopback): every record's bytes equal what LitData's own StreamingDataset
gives, the index comes from the chunks' offsets tables and items' size headers, records are read
by chunk, bad chunks are one-line errors naming the chunk, and a 2-rank ShuffleGroup job serves
LitData's bytes in peer and in store mode. The chunks are written by LitData's BinaryWriter (what
``litdata.optimize`` writes with). Skipped when litdata is not installed."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("litdata", reason="litdata is not installed: pip install litdata")

from litdata import StreamingDataset  # noqa: E402
from litdata.streaming.writer import BinaryWriter  # noqa: E402

from ubershuffle import RecordStore  # noqa: E402
from ubershuffle.sources import litdata  # noqa: E402

ITEMS = 100


def write_chunks(
    folder: pathlib.Path, seed: int = 0, compression: str | None = None, layout: str = "items"
) -> None:
    """Items of an ``image`` (random bytes, 3 to 20 KB, one empty) and a ``label`` (an int), in
    chunks of at most 150 KB, by LitData's own writer: as PyTree items (``layout="items"``: what
    LitData writes without pyarrow), or as an Arrow IPC file after the chunk's offsets table
    (``"arrow"``: what it writes for dict items when pyarrow is installed)."""
    import litdata.streaming.item_loader as item_loader

    if layout == "arrow":
        pytest.importorskip("pyarrow", reason="LitData writes Arrow rows only with pyarrow")
    rng = np.random.default_rng(seed)
    with pytest.MonkeyPatch.context() as patch:
        if layout == "items":
            patch.setattr(item_loader, "_PYARROW_AVAILABLE", False)
        writer = BinaryWriter(str(folder), chunk_bytes=150_000, compression=compression)
        for i in range(ITEMS):
            image = b"" if i == 5 else rng.bytes(int(rng.integers(3000, 20000)))
            writer[i] = {"image": image, "label": int(rng.integers(0, 10))}
        writer.done()
        writer.merge()


def own_reader(folder: pathlib.Path) -> list[dict]:
    """LitData's own reading of the data set, item by item."""
    dataset = StreamingDataset(str(folder))
    return [dataset[i] for i in range(len(dataset))]


def one_line(e: pytest.ExceptionInfo) -> str:
    text = str(e.value)
    assert "\n" not in text and e.value.__cause__ is None, text
    return text


@pytest.mark.parametrize("layout", ["items", "arrow"])
def test_local_chunks_give_litdata_s_bytes_from_their_offsets_tables(tmp_path, layout):
    folder = tmp_path / "data"
    write_chunks(folder, layout=layout)
    expected = own_reader(folder)
    chunks = json.loads((folder / "index.json").read_text())["chunks"]
    assert len(expected) == ITEMS and len(chunks) > 2
    images = litdata(folder, "image", index_dir=tmp_path / "index")
    assert images.kind == ("shards" if layout == "items" else "arrow") and len(images) == ITEMS
    assert [images.record(i).tobytes() for i in range(ITEMS)] == [item["image"] for item in expected]
    if layout == "items":  # an int as LitData stores it, 8 bytes (an Arrow int column is no record)
        labels = litdata(folder, "label", index_dir=tmp_path / "index")
        assert [int.from_bytes(labels.record(i).tobytes(), "little") for i in range(ITEMS)] == [
            item["label"] for item in expected
        ]
    data_bytes = sum((folder / c["filename"]).stat().st_size for c in chunks)
    if layout == "items":  # the offsets tables and each item's sizes: a small share of the chunks
        assert 4 * (ITEMS + 2 * len(chunks)) < images.index_bytes_read < data_bytes / 5
    else:  # Arrow rows: every record batch read once
        assert data_bytes / 2 < images.index_bytes_read <= data_bytes
    again = litdata(folder, "image", index_dir=tmp_path / "index")
    assert again.index_bytes_read == 0 and list(again.sizes) == list(images.sizes)
    store = RecordStore(images.offsets)
    assert images.load(store, np.arange(ITEMS)) == int(images.sizes.sum())
    assert all(store[i].tobytes() == expected[i]["image"] for i in range(ITEMS))
    store.close()
    if layout == "items":
        assert "records in" in repr(images._reader()), "read by the engine in Rust"


def test_bad_chunks_are_one_line_errors_naming_the_chunk(tmp_path):
    write_chunks(tmp_path / "zstd", compression="zstd")
    with pytest.raises(ValueError) as e:
        litdata(tmp_path / "zstd", "image", index_dir=False)
    assert one_line(e).endswith("the chunks have compression 'zstd': only plain chunks are read by range")
    folder = tmp_path / "data"
    write_chunks(folder)
    with pytest.raises(ValueError) as e:
        litdata(folder, "caption", index_dir=False)
    assert one_line(e) == f"{folder}/index.json: the items have no field 'caption' (they have image, label)"
    chunk = folder / json.loads((folder / "index.json").read_text())["chunks"][1]["filename"]
    blob = chunk.read_bytes()
    # Truncated.
    chunk.write_bytes(blob[:-10])
    with pytest.raises(ValueError) as e:
        litdata(folder, "image", index_dir=False)
    assert one_line(e).startswith(
        f"{chunk}: its samples end at offset {len(blob)}, the file has {len(blob) - 10} bytes"
    )
    # An item whose size header is not its length.
    bad = bytearray(blob)
    first = int.from_bytes(blob[4:8], "little")
    bad[first : first + 4] = (7).to_bytes(4, "little")
    chunk.write_bytes(bytes(bad))
    with pytest.raises(ValueError) as e:
        litdata(folder, "image", index_dir=False)
    assert one_line(e).startswith(f"{chunk}: sample 0 (offset {first}) has ") and one_line(e).endswith(
        "(corrupt)"
    )


def upload(s3, folder: pathlib.Path, prefix: str) -> str:
    for path in sorted(folder.iterdir()):
        s3.put(f"{prefix}/{path.name}", path.read_bytes())
    return s3.url(prefix)


def test_chunks_in_object_storage_are_indexed_by_ranged_gets_and_read_by_chunk(s3, tmp_path):
    folder = tmp_path / "data"
    write_chunks(folder)
    expected = [item["image"] for item in own_reader(folder)]
    chunks = json.loads((folder / "index.json").read_text())["chunks"]
    url = upload(s3, folder, "optimized")
    source = litdata(url, "image", index_dir=tmp_path / "index")
    assert source.kind == "s3" and len(source) == ITEMS
    data_bytes = sum((folder / c["filename"]).stat().st_size for c in chunks)
    index_json = (folder / "index.json").stat().st_size
    assert source.bytes_read == index_json + source.index_bytes_read
    assert source.index_bytes_read < data_bytes / 5
    listed = source.requests
    store = RecordStore(source.offsets)
    assert source.load(store, np.random.default_rng(0).permutation(ITEMS)) == int(source.sizes.sum())
    assert all(store[i].tobytes() == expected[i] for i in range(ITEMS))
    store.close()
    # Every item's image by one range request a chunk (items' headers and labels are between).
    assert source.requests - listed == len(chunks)
    again = litdata(url, "image", index_dir=tmp_path / "index")
    assert again.index_bytes_read == 0 and again._fingerprint() == source._fingerprint()


RANK = """
import json, pathlib, sys
import torch.distributed as dist
from ubershuffle.sources import litdata
from ubershuffle.torch import ShuffleGroup

root, mode, out = sys.argv[1], sys.argv[2], pathlib.Path(sys.argv[3])
dist.init_process_group("gloo")
rank = dist.get_rank()
expected = [bytes.fromhex(h) for h in json.loads((out / "expected.json").read_text())]  # LitData's own
source = litdata(root, "image", index_dir=str(out / "index"))
kwargs = dict(policy="partial-local", fraction=0.5) if mode == "peer" else dict(mode="store", alpha=0.5)
if mode == "store" and rank != 0:
    source = None
sg = ShuffleGroup(source, seed=6, timeout=60, **kwargs)
log = {"bad": [], "served": {}}
if sg.is_store:
    log["source_records"] = sum(f["source_records"] for f in sg.serve())
else:
    for epoch in range(3):
        sg.set_epoch(epoch)
        ids = [int(i) for i in sg.sampler]
        log["served"][epoch] = ids
        log["bad"] += [i for i in ids if sg[i].tobytes() != expected[i]]
    log["source_records"] = sg.figures(0)["source_records"]
    dist.barrier(group=sg.train_group)  # a training rank's close ends the store's serving
    sg.close()
(out / f"rank-{rank}.json").write_text(json.dumps(log))
dist.destroy_process_group()
"""


@pytest.mark.parametrize("where", ["local", "s3"])
@pytest.mark.parametrize("mode", ["peer", "store"])
def test_a_shuffle_group_serves_litdata_s_bytes(tmp_path, request, where, mode):
    pytest.importorskip("torch", reason="torch is not installed: the ShuffleGroup test needs it")
    folder = tmp_path / "data"
    # Arrow rows (read through pyarrow, on the engine's source thread) from the object store;
    # PyTree items (read by the engine in Rust) locally.
    write_chunks(folder, layout="arrow" if where == "s3" else "items")
    (tmp_path / "expected.json").write_text(json.dumps([item["image"].hex() for item in own_reader(folder)]))
    root = str(folder) if where == "local" else upload(request.getfixturevalue("s3"), folder, "optimized")
    script = tmp_path / "rank.py"
    script.write_text(RANK)
    nproc = 2 if mode == "peer" else 3
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}"]
    cmd += [str(script), root, mode, str(tmp_path)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    if done.returncode != 0:  # what the ranks said (their tracebacks come before torchrun's)
        said = [line for line in done.stderr.splitlines() if line.startswith("[rank")]
        pytest.fail("\n".join(said[-30:]) or done.stderr[-3000:])
    logs = [json.loads((tmp_path / f"rank-{r}.json").read_text()) for r in range(nproc)]
    trainers = logs if mode == "peer" else logs[1:]
    assert all(log["bad"] == [] for log in trainers), "bytes that are not LitData's"
    for epoch in map(str, range(3)):
        assert sorted(i for log in trainers for i in log["served"][epoch]) == list(range(ITEMS))
    readers = logs if mode == "peer" else logs[:1]
    assert sum(log["source_records"] for log in readers) == ITEMS
