"""LitData's optimized data sets as a record source, local and in object storage (a real S3
server, moto's, on loopback): every record's bytes equal what LitData's own StreamingDataset
gives, the index comes from the chunks' offsets tables and items' size headers, records are read
by chunk, bad chunks are one-line errors naming the chunk, and a 2-rank ShuffleGroup job serves
LitData's bytes in peer and in store mode. The chunks are written by LitData's BinaryWriter (what
``litdata.optimize`` writes with). Skipped when litdata is not installed."""

from __future__ import annotations

import json
import pathlib
import shutil
import sys

import numpy as np
import pytest

pytest.importorskip("litdata", reason="litdata is not installed: pip install litdata")

from litdata import StreamingDataset  # noqa: E402
from litdata.streaming.writer import BinaryWriter  # noqa: E402

from ubershuffle import RecordStore  # noqa: E402
from ubershuffle.sources import litdata  # noqa: E402

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from shard_job import check_shard_job, one_line, run_shard_job, upload  # noqa: E402

ITEMS = 100


def write_chunks(
    folder: pathlib.Path,
    seed: int = 0,
    compression: str | None = None,
    layout: str = "items",
    compression_level: str | None = None,
) -> None:
    """Items of an ``image`` (random bytes, 3 to 20 KB, one empty) and a ``label`` (an int), in
    chunks of at most 150 KB, by LitData's own writer: as PyTree items (``layout="items"``: what
    LitData writes without pyarrow), or as an Arrow IPC file after the chunk's offsets table
    (``"arrow"``: what it writes for dict items when pyarrow is installed); ``compression`` and
    ``compression_level`` as ``litdata.optimize`` takes them."""
    import litdata.streaming.item_loader as item_loader

    if layout == "arrow":
        pytest.importorskip("pyarrow", reason="LitData writes Arrow rows only with pyarrow")
    rng = np.random.default_rng(seed)
    with pytest.MonkeyPatch.context() as patch:
        if layout == "items":
            patch.setattr(item_loader, "_PYARROW_AVAILABLE", False)
        writer = BinaryWriter(
            str(folder), chunk_bytes=150_000, compression=compression, compression_level=compression_level
        )
        for i in range(ITEMS):
            image = b"" if i == 5 else rng.bytes(int(rng.integers(3000, 20000)))
            writer[i] = {"image": image, "label": int(rng.integers(0, 10))}
        writer.done()
        writer.merge()


def own_reader(folder: pathlib.Path) -> list[dict]:
    """LitData's own reading of the data set, item by item."""
    dataset = StreamingDataset(str(folder))
    return [dataset[i] for i in range(len(dataset))]


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
    write_chunks(tmp_path / "zstd", compression="zstd", compression_level="batch")
    with pytest.raises(ValueError) as e:
        litdata(tmp_path / "zstd", "image", index_dir=False)
    assert one_line(e) == (
        f"{tmp_path / 'zstd'}/index.json: the chunks have 'zstd' compression of level 'batch' (frames "
        "inside each chunk): only whole-chunk compression is read (compression_level='chunk')"
    )
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


@pytest.mark.parametrize("where", ["local", "s3"])
@pytest.mark.parametrize("mode", ["peer", "store"])
def test_a_shuffle_group_serves_litdata_s_bytes(tmp_path, request, where, mode):
    pytest.importorskip("torch", reason="torch is not installed: the ShuffleGroup test needs it")
    folder = tmp_path / "data"
    # Arrow rows (read through pyarrow, on the engine's source thread) from the object store;
    # PyTree items (read by the engine in Rust) locally.
    write_chunks(folder, layout="arrow" if where == "s3" else "items")
    expected = [item["image"] for item in own_reader(folder)]
    root = str(folder) if where == "local" else upload(request.getfixturevalue("s3"), folder, "optimized")
    logs = run_shard_job(tmp_path, ("litdata", [root, "image"], {}), expected, mode, seed=6)
    check_shard_job(logs, mode, ITEMS, "LitData")


def test_compressed_chunks_give_litdata_s_bytes_each_read_whole(tmp_path, request):
    folder = tmp_path / "data"
    write_chunks(folder, compression="zstd", compression_level="chunk")
    chunks = json.loads((folder / "index.json").read_text())["chunks"]
    assert len(chunks) > 2 and all(c["filename"].endswith(".zstd.bin") for c in chunks)
    shutil.copytree(folder, tmp_path / "copy")  # LitData's reader removes the chunks it decompressed
    items = own_reader(tmp_path / "copy")
    expected, labels = [item["image"] for item in items], [item["label"] for item in items]
    zipped = sum((folder / c["filename"]).stat().st_size for c in chunks)
    for where in ("local", "s3"):
        root = folder if where == "local" else upload(request.getfixturevalue("s3"), folder, "optimized")
        images = litdata(root, "image", index_dir=tmp_path / "index")
        assert images.kind == "compressed" and len(images) == ITEMS
        # Every item's sizes lie through its chunk: the index decompressed each chunk once, as
        # far as its last item's sizes.
        assert zipped * 0.8 < images.index_bytes_read <= zipped
        listed, read = images.requests, images.bytes_read
        store = RecordStore(images.offsets)
        assert images.load(store, np.random.default_rng(0).permutation(ITEMS)) == int(images.sizes.sum())
        assert all(store[i].tobytes() == expected[i] for i in range(ITEMS))
        store.close()
        if where == "s3":  # every chunk by one GET, whole
            assert images.requests - listed == len(chunks) and images.bytes_read - read == zipped
        label = litdata(root, "label", index_dir=tmp_path / "index")
        assert [int.from_bytes(label.record(i).tobytes(), "little") for i in range(ITEMS)] == labels
    # A truncated chunk (its index made before): a one-line error naming it.
    images = litdata(folder, "image", index_dir=False)
    chunk = folder / chunks[1]["filename"]
    blob = chunk.read_bytes()
    chunk.write_bytes(blob[:-50])
    with pytest.raises(ValueError) as e:
        list(images.read(np.arange(ITEMS)))
    assert one_line(e) == f"{chunk} has {len(blob) - 50} bytes now, {len(blob)} when its index was made"
    # Truncated before its index is made (index.json gives no compressed size): the index reads
    # it only as far as its last item's sizes, the read finds its end missing.
    images = litdata(folder, "image", index_dir=False)
    with pytest.raises(ValueError) as e:
        list(images.read(np.arange(ITEMS)))
    assert one_line(e) == f"{chunk}: truncated: its zstd stream ends unfinished at offset {len(blob) - 50}"


@pytest.mark.parametrize("mode", ["peer", "store"])
def test_a_shuffle_group_serves_compressed_chunks(tmp_path, mode):
    pytest.importorskip("torch", reason="torch is not installed: the ShuffleGroup test needs it")
    folder = tmp_path / "data"
    write_chunks(folder, compression="zstd", compression_level="chunk")
    shutil.copytree(folder, tmp_path / "copy")  # LitData's reader removes the chunks it decompressed
    expected = [item["image"] for item in own_reader(tmp_path / "copy")]
    logs = run_shard_job(tmp_path, ("litdata", [str(folder), "image"], {}), expected, mode, seed=6)
    check_shard_job(logs, mode, ITEMS, "LitData")
