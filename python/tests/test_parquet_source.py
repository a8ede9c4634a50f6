"""Parquet files as a record source, local and in object storage (a real S3 server, moto's, on
loopback): every record's bytes equal what pyarrow's own reader gives (a binary column, a
Hugging Face image column's bytes, a string column), small columns by index, the index cached,
records read by row group, bad files one-line errors naming the file, and a 2-rank ShuffleGroup
job serving pyarrow's bytes in peer and in store mode. Skipped when pyarrow is not installed."""

from __future__ import annotations

import pathlib
import sys

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow", reason="pyarrow is not installed: pip install pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

from ubershuffle import RecordStore  # noqa: E402
from ubershuffle.sources import as_source, parquet  # noqa: E402

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from shard_job import check_shard_job, one_line, run_shard_job  # noqa: E402

FILES = 3
ROWS = 40
"""Rows a file, in row groups of 8."""


def write_parquet(folder: pathlib.Path, seed: int = 0) -> list[pathlib.Path]:
    """Files of an ``image`` (binary, 2 to 9 KB, one empty), the same bytes as a Hugging Face
    ``Image`` struct (``img``), a ``label`` and a ``caption``, written by pyarrow with page
    checksums."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for f in range(FILES):
        images = [b"" if (f, i) == (1, 2) else rng.bytes(int(rng.integers(2000, 9000))) for i in range(ROWS)]
        table = pa.table(
            {
                "image": pa.array(images, pa.binary()),
                "img": pa.array([{"bytes": b, "path": f"{f}-{i}.jpg"} for i, b in enumerate(images)]),
                "label": pa.array(rng.integers(0, 10, ROWS)),
                "caption": pa.array([f"a caption {i}" * (i % 4) for i in range(ROWS)]),
            }
        )
        path = folder / f"train-{f:05d}.parquet"
        pq.write_table(table, path, row_group_size=8, write_page_checksum=True)
        paths.append(path)
    return paths


def own_reader(paths: list, column: str) -> list:
    """pyarrow's own reading of ``column`` over the files, in order."""
    return [v for p in paths for v in pq.read_table(p, columns=[column]).column(0).to_pylist()]


def test_local_parquet_gives_pyarrow_s_bytes_by_row_group(tmp_path):
    paths = write_parquet(tmp_path / "data")
    pattern = str(tmp_path / "data" / "train-{00000..00002}.parquet")
    images = parquet(pattern, "image", index_dir=tmp_path / "index")
    expected = own_reader(paths, "image")
    assert images.kind == "parquet" and len(images) == FILES * ROWS
    assert [images.record(i).tobytes() for i in range(len(images))] == expected
    hf = parquet(pattern, "img", index_dir=tmp_path / "index")
    assert [hf.record(i).tobytes() for i in range(len(hf))] == [v["bytes"] for v in own_reader(paths, "img")]
    captions = parquet(pattern, "caption", index_dir=False)
    assert [captions.record(i).tobytes().decode() for i in range(len(captions))] == own_reader(
        paths, "caption"
    )
    assert list(images.column("label")) == own_reader(paths, "label")
    # The index read the column once (its chunks and the footers); a second source reads none.
    assert images.index_bytes_read > 0
    assert parquet(pattern, "image", index_dir=tmp_path / "index").index_bytes_read == 0
    store = RecordStore(images.offsets)
    ids = np.random.default_rng(1).permutation(len(images))
    assert images.load(store, ids) == int(images.sizes.sum())
    assert all(store[int(i)].tobytes() == expected[i] for i in ids)
    store.close()
    assert images._reader() is None, "read through Python (pyarrow), on the engine's source thread"
    with pytest.raises(TypeError):
        as_source([b"a"]).column("label")


def test_bad_parquet_files_are_one_line_errors_naming_the_file(tmp_path):
    paths = write_parquet(tmp_path / "data")
    with pytest.raises(ValueError) as e:
        parquet([str(p) for p in paths], "label_text", index_dir=False)
    assert one_line(e) == f"{paths[0]}: no column 'label_text' (it has image, img, label, caption)"
    with pytest.raises(ValueError) as e:
        parquet([str(p) for p in paths], "label", index_dir=False)
    assert one_line(e) == f"{paths[0]}: column 'label' is int64, not binary, a string or an image's bytes"
    blob = paths[1].read_bytes()
    # Truncated: the footer is gone.
    paths[1].write_bytes(blob[:-100])
    with pytest.raises(ValueError) as e:
        parquet([str(p) for p in paths], "image", index_dir=False)
    assert one_line(e).startswith(f"{paths[1]}: ")
    # A corrupt data page: its checksum fails.
    meta = pq.ParquetFile(pa.BufferReader(blob)).metadata.row_group(0).column(0)
    bad = bytearray(blob)
    start = meta.dictionary_page_offset if meta.has_dictionary_page else meta.data_page_offset
    bad[start + meta.total_compressed_size - 10] ^= 0xFF  # in the last page's data
    paths[1].write_bytes(bytes(bad))
    with pytest.raises(ValueError) as e:
        parquet([str(p) for p in paths], "image", index_dir=False)
    assert one_line(e).startswith(f"{paths[1]}: ") and "checksum" in one_line(e).lower(), one_line(e)
    # A null.
    pq.write_table(pa.table({"image": pa.array([b"a", None], pa.binary())}), paths[1])
    with pytest.raises(ValueError) as e:
        parquet([str(p) for p in paths], "image", index_dir=False)
    assert one_line(e) == f"{paths[1]}: column 'image' has a null in row group 0"


def test_parquet_in_object_storage_is_read_by_ranges(s3, tmp_path):
    paths = write_parquet(tmp_path / "data")
    for p in paths:
        s3.put(f"pq/{p.name}", p.read_bytes())
    url = s3.url("pq/train-{00000..00002}.parquet")
    source = parquet(url, "image", index_dir=tmp_path / "index")
    expected = own_reader(paths, "image")
    assert source.kind == "parquet" and len(source) == FILES * ROWS
    assert source.bytes_read == source.index_bytes_read < sum(p.stat().st_size for p in paths)
    listed = source.requests
    store = RecordStore(source.offsets)
    assert source.load(store, np.arange(len(source))) == int(source.sizes.sum())
    assert all(store[i].tobytes() == expected[i] for i in range(len(source)))
    store.close()
    # The footers came with the index; each row group's column chunk by one range read (img,
    # the same bytes again, lies between two row groups' image chunks: a hole too long to read
    # through).
    groups = sum(pq.ParquetFile(p).num_row_groups for p in paths)
    assert source.requests - listed == groups
    assert list(source.column("label")) == own_reader(paths, "label")
    again = parquet(url, "image", index_dir=tmp_path / "index")
    assert again.index_bytes_read == 0 and again._fingerprint() == source._fingerprint()
    s3.put(f"pq/{paths[0].name}", paths[1].read_bytes())  # replaced after its index was made
    source._data._footers.clear()
    with pytest.raises(ValueError) as e:
        source.record(0)
    assert (
        one_line(e) == f"{s3.url('pq/' + paths[0].name)} changed since the source was made (its ETag differs)"
    )


def count_gets(source) -> dict:
    """Counts the GETs of ``source``'s object store client, key by key, from now on."""
    gets: dict = {}
    plain_open = source._data.store.open

    def counted_open(bucket, key, first, end, etag):
        gets[key] = gets.get(key, 0) + 1
        return plain_open(bucket, key, first, end, etag)

    source._data.store.open = counted_open
    return gets


def test_a_file_s_row_groups_are_read_by_coalesced_range_gets(s3, tmp_path):
    # Files as a Hugging Face image set's: an image, and small columns (a label, a caption)
    # between one row group's image chunk and the next one's; 10 row groups a file.
    rng = np.random.default_rng(3)
    paths = []
    for f in range(FILES):
        images = [rng.bytes(int(rng.integers(2000, 9000))) for _ in range(ROWS)]
        table = pa.table({"image": images, "label": rng.integers(0, 10, ROWS), "caption": ["a cat"] * ROWS})
        paths.append(tmp_path / f"part-{f}.parquet")
        pq.write_table(table, paths[-1], row_group_size=4, write_page_checksum=True)
        s3.put(f"hf/{paths[-1].name}", paths[-1].read_bytes())
    assert all(pq.ParquetFile(p).num_row_groups == 10 for p in paths)
    expected = own_reader(paths, "image")
    source = parquet([s3.url(f"hf/{p.name}") for p in paths], "image", index_dir=tmp_path / "index")
    gets = count_gets(source)
    store = RecordStore(source.offsets)
    assert source.load(store, np.arange(len(source))) == int(source.sizes.sum())
    assert all(store[i].tobytes() == expected[i] for i in range(len(source)))
    store.close()
    # A whole file's row groups by one ranged GET (its footer came with the index): one GET
    # per row group and one for the footer before, 11 a file.
    assert gets == {f"hf/{p.name}": 1 for p in paths}
    # A rank's part of a file (rows 9 to 30: row groups 2 to 7): one GET too.
    gets.clear()
    ids = np.random.default_rng(4).permutation(np.arange(ROWS + 9, ROWS + 31))
    assert [(i, r.tobytes()) for i, r in source.read(np.sort(ids))] == [
        (i, expected[i]) for i in np.sort(ids)
    ]
    assert gets == {f"hf/{paths[1].name}": 1}
    # A small column by index: a GET a row group (the images between are not read).
    gets.clear()
    assert list(source.column("label")) == own_reader(paths, "label")
    assert gets == {f"hf/{p.name}": 10 for p in paths}
    # The index read each file's footer and then its column chunks by one GET.
    again = parquet([s3.url(f"hf/{p.name}") for p in paths], "image", index_dir=False)
    assert again.requests == 3 * FILES  # a HeadObject, the footer, the image chunks
    # Locally the same bytes.
    local = parquet([str(p) for p in paths], "image", index_dir=False)
    assert [r.tobytes() for _, r in local.read(np.arange(len(local)))] == expected


@pytest.mark.parametrize("where", ["local", "s3"])
@pytest.mark.parametrize("mode", ["peer", "store"])
def test_a_shuffle_group_serves_pyarrow_s_bytes(tmp_path, request, where, mode):
    pytest.importorskip("torch", reason="torch is not installed: the ShuffleGroup test needs it")
    paths = write_parquet(tmp_path / "data")
    if where == "local":
        urls = str(tmp_path / "data" / "train-{00000..00002}.parquet")
    else:
        s3 = request.getfixturevalue("s3")
        for p in paths:
            s3.put(f"pq/{p.name}", p.read_bytes())
        urls = s3.url("pq/train-{00000..00002}.parquet")
    logs = run_shard_job(tmp_path, ("parquet", [urls, "image"], {}), own_reader(paths, "image"), mode, seed=7)
    check_shard_job(logs, mode, FILES * ROWS, "pyarrow")
    if where == "s3" and mode == "peer":
        # Epoch 0 follows the files (first_epoch="blocks"): each row group's column chunk is
        # read by the rank whose block holds it (both, for the group the blocks split), the
        # footers by each rank that reads a file, so the files' bytes are read about once
        # (with a random epoch 0 every rank read every row group: 1.17x here, checked). The
        # index's reads (each rank builds it: it reads the column to learn its values' sizes)
        # are apart; nothing is read after epoch 0.
        assert [log["first_epoch"] for log in logs] == ["blocks", "blocks"]
        counts = [log["counts"] for log in logs]
        read = sum(c["epoch 0"]["bytes"] - c["made"]["bytes"] for c in counts)
        assert read <= 1.02 * sum(p.stat().st_size for p in paths), read
        assert [c["end"]["bytes"] - c["epoch 0"]["bytes"] for c in counts] == [0, 0]
