"""A Hugging Face ``datasets.Dataset`` as a record source: every record's bytes equal what
``dataset[i][column]`` holds (a binary column, an ``Image`` column's file), read from the data
set's memory-mapped Arrow cache files, through its indices mapping after ``shuffle`` and
``select``; small columns by index; one-line errors; ``datasets`` never imported by
``ubershuffle``; and a 2-rank ShuffleGroup job serving the data set's bytes in peer and in store
mode. Skipped when datasets is not installed."""

from __future__ import annotations

import io
import pathlib
import pickle
import subprocess
import sys

import numpy as np
import pytest

datasets = pytest.importorskip("datasets", reason="datasets is not installed: pip install datasets")
PIL = pytest.importorskip("PIL.Image", reason="Pillow is not installed: pip install pillow")

from ubershuffle import RecordStore  # noqa: E402
from ubershuffle.sources import as_source, hf_dataset  # noqa: E402

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from shard_job import check_shard_job, one_line, run_shard_job  # noqa: E402

ROWS = 90


def png(rng: np.random.Generator) -> bytes:
    """A small PNG of random pixels (1 to 3 KB)."""
    side = int(rng.integers(12, 24))
    out = io.BytesIO()
    PIL.fromarray(rng.integers(0, 256, (side, side, 3), dtype=np.uint8)).save(out, format="PNG")
    return out.getvalue()


def write_dataset(folder: pathlib.Path, seed: int = 0) -> datasets.Dataset:
    """A data set of an ``image`` (Hugging Face's ``Image`` feature), a ``blob`` (binary, one
    empty), a ``label`` (a ``ClassLabel``) and a ``caption``, saved to ``folder`` in shards of
    Arrow record batches of 16 rows, and loaded again (memory-mapped from its cache files)."""
    rng = np.random.default_rng(seed)
    features = datasets.Features(
        {
            "image": datasets.Image(),
            "blob": datasets.Value("binary"),
            "label": datasets.ClassLabel(names=["cat", "dog", "eel"]),
            "caption": datasets.Value("string"),
        }
    )
    data = {
        "image": [{"bytes": png(rng), "path": None} for _ in range(ROWS)],
        "blob": [b"" if i == 4 else rng.bytes(int(rng.integers(100, 3000))) for i in range(ROWS)],
        "label": [int(x) for x in rng.integers(0, 3, ROWS)],
        "caption": [f"a caption {i}" * (i % 3) for i in range(ROWS)],
    }
    made = datasets.Dataset.from_dict(data, features=features)
    made.save_to_disk(str(folder), num_shards=3, max_shard_size=None)
    return datasets.load_from_disk(str(folder))


def own_bytes(dataset: datasets.Dataset, column: str) -> list[bytes]:
    """``dataset[i][column]`` for every ``i``: a binary column's bytes, an image's file (its
    ``bytes``, undecoded)."""
    if isinstance(dataset.features[column], datasets.Image):
        dataset = dataset.cast_column(column, datasets.Image(decode=False))
        return [dataset[i][column]["bytes"] for i in range(len(dataset))]
    return [dataset[i][column] for i in range(len(dataset))]


def test_a_dataset_gives_its_own_bytes_from_its_cache_files(tmp_path):
    dataset = write_dataset(tmp_path / "saved")
    assert len(dataset.cache_files) == 3
    for column in ("image", "blob"):
        source = hf_dataset(dataset, column)
        expected = own_bytes(dataset, column)
        assert source.kind == "dataset" and len(source) == ROWS and source._reader() is None
        assert [source.record(i).tobytes() for i in range(ROWS)] == expected, column
        assert [r.tobytes() for _, r in source.read(np.arange(ROWS)[::-1])] == expected[::-1]
        store = RecordStore(source.offsets)
        assert source.load(store, np.random.default_rng(1).permutation(ROWS)) == int(source.sizes.sum())
        assert all(store[i].tobytes() == expected[i] for i in range(ROWS))
        store.close()
    images = hf_dataset(dataset, "image")
    assert PIL.open(io.BytesIO(images.record(3).tobytes())).size == dataset[3]["image"].size
    assert list(images.column("label")) == dataset["label"]
    assert list(images.column("caption")) == dataset["caption"]
    # The source pickles as the cache files' paths, not their bytes.
    again = pickle.loads(pickle.dumps(images))
    assert len(pickle.dumps(images)) < images.total_bytes / 4
    assert [again.record(i).tobytes() for i in range(ROWS)] == own_bytes(dataset, "image")
    captions = hf_dataset(dataset, "caption")
    assert [captions.record(i).tobytes().decode() for i in range(ROWS)] == dataset["caption"]


def test_an_indices_mapping_and_an_in_memory_dataset_are_read_as_dataset_i_is(tmp_path):
    dataset = write_dataset(tmp_path / "saved")
    shuffled = dataset.shuffle(seed=3).select(range(10, 70))
    source = hf_dataset(shuffled, "image")
    assert len(source) == 60
    assert [source.record(i).tobytes() for i in range(60)] == own_bytes(shuffled, "image")
    assert list(source.column("label")) == shuffled["label"]
    in_memory = datasets.Dataset.from_dict({"x": [b"ab", b"", b"cde"], "y": [1, 2, 3]})
    assert in_memory.cache_files == []
    source = hf_dataset(in_memory, "x")
    assert [source.record(i).tobytes() for i in range(3)] == [b"ab", b"", b"cde"]


def test_bad_datasets_are_one_line_errors(tmp_path):
    dataset = write_dataset(tmp_path / "saved")
    with pytest.raises(ValueError) as e:
        hf_dataset(dataset, "text")
    assert one_line(e) == "the data set has no column 'text' (it has image, blob, label, caption)"
    with pytest.raises(ValueError) as e:
        hf_dataset(dataset, "label")
    assert one_line(e) == "column 'label' is int64, not binary, a string or an image's bytes"
    with pytest.raises(ValueError) as e:
        hf_dataset(datasets.Dataset.from_dict({"x": [b"a", None, b"c"]}), "x")
    assert one_line(e) == "record 1 of column 'x' is null (no bytes)"
    with pytest.raises(TypeError) as e:
        hf_dataset(datasets.DatasetDict({"train": dataset}), "image")
    assert one_line(e) == (
        "hf_dataset takes a datasets.Dataset, not DatasetDict (pick a split: dataset['train'])"
    )
    with pytest.raises(TypeError) as e:
        as_source(dataset)
    assert "ubershuffle.sources.hf_dataset(dataset, column)" in one_line(e)


def test_import_ubershuffle_imports_neither_datasets_nor_pyarrow():
    code = (
        "import sys, ubershuffle, ubershuffle.sources\n"
        "heavy = {'datasets', 'pyarrow', 'torch', 'zstandard'} & set(sys.modules)\n"
        "assert not heavy, sorted(heavy)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize("mode", ["peer", "store"])
def test_a_shuffle_group_serves_the_dataset_s_bytes(tmp_path, mode):
    pytest.importorskip("torch", reason="torch is not installed: the ShuffleGroup test needs it")
    dataset = write_dataset(tmp_path / "saved")
    expected = own_bytes(dataset, "image")
    source = ("hf_dataset", [str(tmp_path / "saved"), "image"], {})
    logs = run_shard_job(tmp_path, source, expected, mode, seed=8)
    check_shard_job(logs, mode, ROWS, "datasets")
