"""MosaicML Streaming's MDS data sets as a record source, local and in object storage (a real S3
server, moto's, on loopback): every record's bytes equal what Streaming's own reader gives, the
index comes from the shards' offsets tables (and each sample's sizes where a column's size
varies), records are read by shard, bad shards are one-line errors naming the shard, and a
2-rank ShuffleGroup job serves Streaming's bytes in peer and in store mode. Skipped when
mosaicml-streaming is not installed."""

from __future__ import annotations

import json
import pathlib
import sys

import numpy as np
import pytest

pytest.importorskip("streaming", reason="mosaicml-streaming is not installed: pip install mosaicml-streaming")

from streaming import MDSWriter  # noqa: E402
from streaming.base.compression import decompress  # noqa: E402
from streaming.base.format import reader_from_json  # noqa: E402
from streaming.base.format.mds.encodings import mds_encode  # noqa: E402

from ubershuffle import RecordStore  # noqa: E402
from ubershuffle.sources import mds  # noqa: E402

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from shard_job import check_shard_job, one_line, run_shard_job, upload  # noqa: E402

SAMPLES = 120


def write_mds(
    folder: pathlib.Path,
    columns: dict,
    seed: int = 0,
    compression: str | None = None,
    hashes: list | None = None,
) -> None:
    """MDS shards written by Streaming's own writer: ``x`` of random bytes (6 to 30 KB, one
    empty), ``y`` an int, ``s`` a string of varying length, in shards of at most 400 KB."""
    rng = np.random.default_rng(seed)
    options = dict(size_limit=400_000, compression=compression, hashes=hashes)
    with MDSWriter(out=str(folder), columns=columns, **options) as w:
        for i in range(SAMPLES):
            sample = {
                "x": b"" if i == 7 else rng.bytes(int(rng.integers(6000, 30000))),
                "y": int(rng.integers(0, 10)),
                "s": "s" * int(rng.integers(0, 300)),
            }
            w.write({k: v for k, v in sample.items() if k in columns})


def own_reader(folder: pathlib.Path, column: str) -> list[bytes]:
    """Streaming's own reading of the data set's ``column``, sample by sample, as the bytes its
    encoding stores (a ``bytes`` column's values as they are); compressed shards decompressed
    by Streaming first, beside them, as its own reader does before reading."""
    index = json.loads((folder / "index.json").read_text())
    out = []
    for shard in index["shards"]:
        raw = folder / shard["raw_data"]["basename"]
        if shard.get("compression") and not raw.exists():
            raw.write_bytes(
                decompress(shard["compression"], (folder / shard["zip_data"]["basename"]).read_bytes())
            )
        reader = reader_from_json(str(folder), None, shard)
        encoding = shard["column_encodings"][shard["column_names"].index(column)]
        for i in range(reader.samples):
            value = reader.get_item(i)[column]
            out.append(value if encoding == "bytes" else mds_encode(encoding, value))
    return out


@pytest.mark.parametrize("columns", [{"x": "bytes", "y": "int", "s": "str"}, {"y": "int", "x": "bytes"}])
def test_local_mds_gives_streaming_s_bytes_from_its_offsets_tables(tmp_path, columns):
    write_mds(tmp_path / "data", columns)
    shards = json.loads((tmp_path / "data" / "index.json").read_text())["shards"]
    assert len(shards) > 2
    data_bytes = sum(s["raw_data"]["bytes"] for s in shards)
    for column in columns:
        source = mds(tmp_path / "data", column, index_dir=tmp_path / "index")
        expected = own_reader(tmp_path / "data", column)
        assert source.kind == "shards" and len(source) == SAMPLES
        assert [source.record(i).tobytes() for i in range(SAMPLES)] == expected, column
        # The offsets tables, and each sample's sizes when another column's size varies.
        table = sum(4 * (s["samples"] + 2) for s in shards)
        other_varies = any(
            size is None
            for name, size in zip(shards[0]["column_names"], shards[0]["column_sizes"])
            if name != column
        )
        assert (
            source.index_bytes_read == table
            if not other_varies
            else table < source.index_bytes_read < data_bytes / 10
        )
        again = mds(tmp_path / "data", column, index_dir=tmp_path / "index")
        assert again.index_bytes_read == 0 and list(again.sizes) == list(source.sizes)
        store = RecordStore(source.offsets)
        assert source.load(store, np.arange(SAMPLES)) == int(source.sizes.sum())
        assert all(store[i].tobytes() == expected[i] for i in range(SAMPLES))
        store.close()
        assert "records in" in repr(source._reader())


def test_bad_mds_data_sets_are_one_line_errors_naming_the_shard(tmp_path):
    write_mds(tmp_path / "br", {"x": "bytes"}, compression="br")
    with pytest.raises(ValueError) as e:
        mds(tmp_path / "br", "x", index_dir=False)
    assert one_line(e) == (
        f"{tmp_path / 'br'}/index.json: shard 0: compression 'br' is not read (only zstd, gz, bz2)"
    )
    folder = tmp_path / "data"
    write_mds(folder, {"x": "bytes", "s": "str"})
    with pytest.raises(ValueError) as e:
        mds(folder, "label", index_dir=False)
    assert one_line(e) == f"{folder}/index.json: shard 0 has no column 'label' (it has s, x)"
    shard = folder / "shard.00001.mds"
    blob = shard.read_bytes()
    # Truncated: its size is not index.json's.
    shard.write_bytes(blob[:-10])
    with pytest.raises(ValueError) as e:
        mds(folder, "x", index_dir=False)
    assert one_line(e) == f"{shard} has {len(blob) - 10} bytes, index.json says {len(blob)} (truncated?)"
    # A corrupt offsets table.
    bad = bytearray(blob)
    bad[8:12] = (2**31).to_bytes(4, "little")
    shard.write_bytes(bytes(bad))
    with pytest.raises(ValueError) as e:
        mds(folder, "x", index_dir=False)
    assert one_line(e) == f"{shard}: its offsets table at offset 4 is corrupt (not ascending from its end)"
    # A corrupt sample: its sizes are not its length.
    bad = bytearray(blob)
    first = int.from_bytes(blob[4:8], "little")
    bad[first : first + 4] = (1).to_bytes(4, "little")
    shard.write_bytes(bytes(bad))
    with pytest.raises(ValueError) as e:
        mds(folder, "x", index_dir=False)
    assert one_line(e).startswith(f"{shard}: sample 0 (offset {first}) has ")
    assert one_line(e).endswith("(corrupt)")


def test_mds_in_object_storage_is_indexed_by_ranged_gets_and_read_by_shard(s3, tmp_path):
    folder = tmp_path / "data"
    write_mds(folder, {"x": "bytes", "y": "int"})
    url = upload(s3, folder, "mds")
    expected = own_reader(folder, "x")
    shards = json.loads((folder / "index.json").read_text())["shards"]
    source = mds(url, "x", index_dir=tmp_path / "index")
    assert source.kind == "s3" and len(source) == SAMPLES
    # index.json, then a HeadObject and one ranged GET (the offsets table) a shard: y's size is
    # fixed.
    index_json = (folder / "index.json").stat().st_size
    assert source.requests == 1 + 2 * len(shards)
    assert source.index_bytes_read == sum(4 * (s["samples"] + 2) for s in shards)
    assert source.bytes_read == index_json + source.index_bytes_read
    listed = source.requests
    store = RecordStore(source.offsets)
    assert source.load(store, np.random.default_rng(0).permutation(SAMPLES)) == int(source.sizes.sum())
    assert all(store[i].tobytes() == expected[i] for i in range(SAMPLES))
    store.close()
    # Every sample's x by one range request a shard, from its first x to its last.
    assert source.requests - listed == len(shards)
    starts, ends = source._data.starts, source._data.starts + source.sizes
    which = source._data.shards
    spans = sum(int(ends[which == k].max() - starts[which == k].min()) for k in range(len(shards)))
    assert source.bytes_read - source.index_bytes_read - index_json == spans
    again = mds(url, "x", index_dir=tmp_path / "index")
    assert again.index_bytes_read == 0 and again._fingerprint() == source._fingerprint()
    # An object replaced after its index was made: its ETag differs, no bytes are served.
    s3.put("mds/shard.00000.mds", (folder / "shard.00000.mds").read_bytes()[::-1])
    with pytest.raises(ValueError) as e:
        source.record(0)
    assert (
        one_line(e) == f"{s3.url('mds/shard.00000.mds')} changed since the source was made (its ETag differs)"
    )


@pytest.mark.parametrize("where", ["local", "s3"])
@pytest.mark.parametrize("mode", ["peer", "store"])
def test_a_shuffle_group_serves_mds_with_streaming_s_bytes(tmp_path, request, where, mode):
    pytest.importorskip("torch", reason="torch is not installed: the ShuffleGroup test needs it")
    folder = tmp_path / "data"
    write_mds(folder, {"x": "bytes", "y": "int", "s": "str"})
    root = str(folder) if where == "local" else upload(request.getfixturevalue("s3"), folder, "mds")
    logs = run_shard_job(tmp_path, ("mds", [root, "x"], {}), own_reader(folder, "x"), mode, seed=5)
    check_shard_job(logs, mode, SAMPLES, "Streaming")


@pytest.mark.parametrize("compression", ["zstd", "zstd:7", "gz", "bz2"])
def test_compressed_mds_shards_give_streaming_s_bytes_each_read_whole(tmp_path, compression):
    folder = tmp_path / "data"
    write_mds(folder, {"x": "bytes", "y": "int"}, compression=compression)
    shards = json.loads((folder / "index.json").read_text())["shards"]
    assert len(shards) > 2 and all(s["compression"] == compression for s in shards)
    zipped = sum(s["zip_data"]["bytes"] for s in shards)
    source = mds(folder, "x", index_dir=tmp_path / "index")
    expected = own_reader(folder, "x")
    assert source.kind == "compressed" and len(source) == SAMPLES
    # The index decompressed each shard's start only, as far as its offsets table (bz2's first
    # block is the whole of these small shards).
    assert source.index_bytes_read < (zipped / 5 if compression != "bz2" else zipped + 1)
    assert [source.record(i).tobytes() for i in range(SAMPLES)] == expected
    store = RecordStore(source.offsets)
    assert source.load(store, np.random.default_rng(0).permutation(SAMPLES)) == int(source.sizes.sum())
    assert all(store[i].tobytes() == expected[i] for i in range(SAMPLES))
    store.close()
    assert source._reader() is None, "decompressed in Python (off the GIL), on the engine's source thread"
    again = mds(folder, "x", index_dir=tmp_path / "index")
    assert again.index_bytes_read == 0 and list(again.sizes) == list(source.sizes)


def test_compressed_mds_in_object_storage_is_read_by_one_get_a_shard(s3, tmp_path):
    folder = tmp_path / "data"
    write_mds(folder, {"x": "bytes", "y": "int", "s": "str"}, compression="zstd")
    url = upload(s3, folder, "mds")
    shards = json.loads((folder / "index.json").read_text())["shards"]
    expected = own_reader(folder, "x")
    source = mds(url, "x", index_dir=tmp_path / "index")
    assert source.kind == "compressed" and len(source) == SAMPLES
    # index.json, then a HeadObject and one GET a shard (s varies: its sizes lie all through
    # each shard, which the index decompresses whole).
    assert source.requests == 1 + 2 * len(shards)
    listed, read = source.requests, source.bytes_read
    store = RecordStore(source.offsets)
    assert source.load(store, np.arange(SAMPLES)) == int(source.sizes.sum())
    assert all(store[i].tobytes() == expected[i] for i in range(SAMPLES))
    store.close()
    # Every record by one GET of its whole shard.
    assert source.requests - listed == len(shards)
    assert source.bytes_read - read == sum(s["zip_data"]["bytes"] for s in shards)
    again = mds(url, "x", index_dir=tmp_path / "index")
    assert again.index_bytes_read == 0 and again._fingerprint() == source._fingerprint()


@pytest.mark.parametrize("compression", ["zstd", "gz"])
def test_a_truncated_or_corrupt_compressed_shard_is_a_one_line_error_naming_it(tmp_path, compression):
    folder = tmp_path / "data"
    write_mds(folder, {"x": "bytes", "y": "int"}, compression=compression)
    index = json.loads((folder / "index.json").read_text())
    shard = folder / index["shards"][1]["zip_data"]["basename"]
    blob = shard.read_bytes()
    # Truncated: its size is not index.json's.
    shard.write_bytes(blob[:-100])
    with pytest.raises(ValueError) as e:
        mds(folder, "x", index_dir=False)
    assert one_line(e) == f"{shard} has {len(blob) - 100} bytes, index.json says {len(blob)} (truncated?)"
    # Truncated, and index.json says so too: the index reads its start, the read finds its end
    # missing.
    index["shards"][1]["zip_data"]["bytes"] = len(blob) - 100
    (folder / "index.json").write_text(json.dumps(index))
    source = mds(folder, "x", index_dir=False)
    first = int(np.flatnonzero(source._data.which == 1)[0])
    with pytest.raises(ValueError) as e:
        source.record(first)
    assert (
        one_line(e)
        == f"{shard}: truncated: its {compression} stream ends unfinished at offset {len(blob) - 100}"
    )
    # A corrupt stream header: the index's decompression of its start fails.
    index["shards"][1]["zip_data"]["bytes"] = len(blob)
    (folder / "index.json").write_text(json.dumps(index))
    shard.write_bytes(blob[:4] + bytes(16) + blob[20:])
    with pytest.raises(ValueError) as e:
        mds(folder, "x", index_dir=False)
    assert one_line(e).startswith(f"{shard}: corrupt {compression} data before offset "), one_line(e)


def test_a_compressed_shard_s_digest_is_checked_before_its_records_are_served(tmp_path):
    # Random bytes are stored, not compressed, in a zstd frame without a checksum: only
    # index.json's digest (MDSWriter(hashes=...)) tells a changed byte.
    folder = tmp_path / "data"
    write_mds(folder, {"x": "bytes", "y": "int"}, compression="zstd", hashes=["sha1", "xxh64"])
    shard = folder / "shard.00001.mds.zstd"
    blob = bytearray(shard.read_bytes())
    source = mds(folder, "x", index_dir=False)
    blob[len(blob) // 2] ^= 1
    shard.write_bytes(bytes(blob))
    with pytest.raises(ValueError) as e:
        list(source.read(np.flatnonzero(source._data.which == 1)))
    want = json.loads((folder / "index.json").read_text())["shards"][1]["zip_data"]["hashes"]["sha1"]
    assert one_line(e).startswith(f"{shard}: its sha1 is ") and one_line(e).endswith(
        f", index.json says {want} (corrupt)"
    )


@pytest.mark.parametrize("mode", ["peer", "store"])
def test_a_shuffle_group_serves_compressed_mds_from_object_storage(tmp_path, s3, mode):
    pytest.importorskip("torch", reason="torch is not installed: the ShuffleGroup test needs it")
    folder = tmp_path / "data"
    write_mds(folder, {"x": "bytes", "y": "int"}, compression="zstd")
    expected = own_reader(folder, "x")
    root = upload(s3, folder, "mds")
    logs = run_shard_job(tmp_path, ("mds", [root, "x"], {}), expected, mode, seed=5)
    check_shard_job(logs, mode, SAMPLES, "Streaming")
