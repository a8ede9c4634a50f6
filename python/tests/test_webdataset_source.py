"""WebDataset tar shards as a record source, local and in object storage (a real S3 server,
moto's, on loopback): every record's bytes equal what WebDataset's own reader gives, the index
comes from the tar headers alone and is cached, records are read by shard, a truncated shard, a
corrupt header and a sample without its member are one-line errors naming the shard, and a
2-rank ShuffleGroup job serves WebDataset's bytes in peer and in store mode. Skipped when
webdataset is not installed (the S3 tests also need boto3 and moto[server])."""

from __future__ import annotations

import io
import json
import os
import pathlib
import sys
import tarfile

import numpy as np
import pytest

wds = pytest.importorskip("webdataset", reason="webdataset is not installed: pip install webdataset")

from ubershuffle import RecordStore  # noqa: E402
from ubershuffle._shards import INDEX_WINDOW  # noqa: E402
from ubershuffle.sources import sample_members, webdataset  # noqa: E402

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from shard_job import check_shard_job, one_line, run_shard_job  # noqa: E402

SHARDS = 4
SAMPLES = 12
"""Samples per shard."""


def write_shards(
    folder: pathlib.Path, seed: int = 0, shards: int = SHARDS, small: bool = False
) -> list[pathlib.Path]:
    """Shards written by WebDataset's own TarWriter: samples of a .jpg (random bytes, 9 to 40 KB:
    more than the gap a range read spans, or 0 to 3 KB when ``small``; one empty), a .cls and,
    every third sample, a .json."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for s in range(shards):
        path = folder / f"train-{s:06d}.tar"
        with wds.TarWriter(str(path)) as w:
            for k in range(SAMPLES):
                size = int(rng.integers(0, 3000) if small else rng.integers(9000, 40000))
                sample = {
                    "__key__": f"s{s}/{k:05d}",
                    "jpg": b"" if (s, k) == (1, 3) else rng.integers(0, 256, size, dtype=np.uint8).tobytes(),
                    "cls": str(int(rng.integers(0, 10))).encode(),
                }
                if k % 3 == 0:
                    sample["json"] = json.dumps({"k": k, "pad": "x" * int(rng.integers(0, 900))}).encode()
                w.write(sample)
        paths.append(path)
    return paths


def reference(paths: list) -> list[dict]:
    """WebDataset's own reading of the shards: samples in order, as dicts of bytes."""
    return [
        {k: v for k, v in s.items() if not k.startswith("__") or k == "__key__"}
        for s in wds.WebDataset([str(p) for p in paths], shardshuffle=False)
    ]


def as_dict(members: dict) -> dict:
    return {k: v if k == "__key__" else v.tobytes() for k, v in members.items()}


def test_local_shards_give_webdataset_s_bytes_and_their_index_is_cached(tmp_path):
    paths = write_shards(tmp_path / "data")
    ref = reference(paths)
    assert len(ref) == SHARDS * SAMPLES
    pattern = str(tmp_path / "data" / "train-{000000..000003}.tar")
    index_dir = tmp_path / "index"
    jpg = webdataset(pattern, member="jpg", index_dir=index_dir)
    assert jpg.kind == "shards" and len(jpg) == len(ref)
    assert [jpg.record(i).tobytes() for i in range(len(jpg))] == [s["jpg"] for s in ref]
    data_bytes = sum(p.stat().st_size for p in paths)
    assert 0 < jpg.index_bytes_read < data_bytes / 2, (jpg.index_bytes_read, data_bytes)
    # The cache: a file per shard; a second source reads no header.
    assert len(list(index_dir.iterdir())) == SHARDS
    again = webdataset([str(p) for p in paths], member="JPG", index_dir=index_dir)
    assert again.index_bytes_read == 0 and list(again.sizes) == list(jpg.sizes)
    # Whole samples: a tar of the sample's members, split by sample_members or tarfile.
    whole = webdataset(pattern, member=None, index_dir=index_dir)
    assert whole.index_bytes_read == 0, "the index is the same whatever the record"
    for i in range(len(whole)):
        assert as_dict(sample_members(whole.record(i))) == ref[i], f"sample {i}"
    with tarfile.open(fileobj=io.BytesIO(whole.record(5).tobytes())) as t:
        assert {m.name: t.extractfile(m).read() for m in t} == {
            f"{ref[5]['__key__']}.{ext}": v for ext, v in ref[5].items() if ext != "__key__"
        }
    # The engine's reader (Rust, off the GIL) and Python's read the same bytes.
    store = RecordStore(jpg.offsets)
    ids = np.arange(len(jpg), dtype=np.int64)
    reader = jpg._reader()
    assert "records in 4 shards" in repr(reader)
    assert jpg.load(store, ids) == int(jpg.sizes.sum())
    assert all(store[int(i)].tobytes() == ref[i]["jpg"] for i in ids)
    store.close()
    # A shard rewritten (another mtime) is indexed again.
    os.utime(paths[2], ns=(1, 1))
    third = webdataset(pattern, member="jpg", index_dir=index_dir)
    assert 0 < third.index_bytes_read < jpg.index_bytes_read


def test_bad_local_shards_are_one_line_errors_naming_the_shard(tmp_path):
    paths = write_shards(tmp_path / "data", shards=2)
    blob = paths[1].read_bytes()
    # Truncated inside a member's data.
    paths[1].write_bytes(blob[:20000])
    with pytest.raises(ValueError) as e:
        webdataset([str(p) for p in paths], index_dir=False)
    assert one_line(e).startswith(f"{paths[1]}: truncated at offset 20000: member"), str(e.value)
    # Truncated at a member's end: no end-of-archive block.
    members = tarfile.open(fileobj=io.BytesIO(blob)).getmembers()
    cut = members[3].offset  # the 4th member's header
    paths[1].write_bytes(blob[:cut])
    with pytest.raises(ValueError) as e:
        webdataset([str(p) for p in paths], index_dir=False)
    assert (
        one_line(e)
        == f"{paths[1]}: truncated at offset {cut}: the archive ends without its end-of-archive block"
    )
    # A corrupt header (one byte of a name changed): its checksum fails.
    bad = bytearray(blob)
    bad[members[2].offset + 2] ^= 0x01
    paths[1].write_bytes(bytes(bad))
    with pytest.raises(ValueError) as e:
        webdataset([str(p) for p in paths], index_dir=False)
    assert one_line(e).startswith(
        f"{paths[1]}: the tar header at offset {members[2].offset} is corrupt (checksum"
    )
    # A sample without the member asked for: named by shard, key and offset.
    with wds.TarWriter(str(paths[1])) as w:
        w.write({"__key__": "k0", "jpg": b"a", "cls": b"1"})
        w.write({"__key__": "k1", "cls": b"2"})
    with pytest.raises(ValueError) as e:
        webdataset([str(p) for p in paths], index_dir=False)
    at = next(m.offset for m in tarfile.open(paths[1]).getmembers() if m.name == "k1.cls")
    assert one_line(e) == f"{paths[1]}: sample 'k1' (offset {at}) has no .jpg member (it has .cls)"
    assert len(webdataset([str(p) for p in paths], member="cls", index_dir=False)) == SAMPLES + 2
    # A shard that changed after its index was made: named, no wrong bytes.
    source = webdataset([str(paths[0])], index_dir=False)
    paths[0].write_bytes(paths[0].read_bytes()[:-512])
    with pytest.raises(ValueError) as e:
        source.record(0)
    assert "when its index was made" in one_line(e)


def test_a_brace_pattern_expands_as_webdataset_s_does():
    from ubershuffle._shards import expand

    assert expand("s3://b/train-{000000..000002}.tar") == [f"s3://b/train-00000{i}.tar" for i in range(3)]
    assert expand("d/{a,b}-{1..2}.tar") == ["d/a-1.tar", "d/a-2.tar", "d/b-1.tar", "d/b-2.tar"]
    assert expand("x-{9..11}.tar") == ["x-9.tar", "x-10.tar", "x-11.tar"]
    assert expand(["a.tar", pathlib.Path("b.tar")]) == ["a.tar", "b.tar"]
    braceexpand = pytest.importorskip("braceexpand")
    for pattern in ("p/{00..12}/q{a,b}.tar", "{1..3}{x,y}"):
        assert expand(pattern) == list(braceexpand.braceexpand(pattern))


def upload(s3, paths: list, prefix: str = "wds") -> str:
    for p in paths:
        s3.put(f"{prefix}/{p.name}", p.read_bytes())
    return s3.url(f"{prefix}/train-{{000000..{len(paths) - 1:06d}}}.tar")


def test_shards_in_object_storage_are_indexed_by_ranged_gets_and_read_by_shard(s3, tmp_path):
    paths = write_shards(tmp_path / "data")
    ref = reference(paths)
    url = upload(s3, paths)
    index_dir = tmp_path / "index"
    source = webdataset(url, member="jpg", index_dir=index_dir)
    assert source.kind == "s3" and len(source) == len(ref)
    data_bytes = sum(p.stat().st_size for p in paths)
    # The index: HeadObject per shard, then ranged GETs of INDEX_WINDOW bytes at headers (a
    # sample's small members and the next sample's first header in one), never a shard whole.
    listed = source.requests
    gets = listed - SHARDS
    assert SHARDS * SAMPLES <= gets <= 2 * SHARDS * SAMPLES + SHARDS, gets
    assert source.bytes_read == source.index_bytes_read <= gets * INDEX_WINDOW
    assert source.index_bytes_read < data_bytes / 4, (source.index_bytes_read, data_bytes)
    # Every record, by range requests: one per shard (neighbours are a few headers apart).
    store = RecordStore(source.offsets)
    ids = np.random.default_rng(0).permutation(len(source))
    assert source.load(store, ids) == int(source.sizes.sum())
    assert all(store[int(i)].tobytes() == ref[i]["jpg"] for i in ids)
    assert source.requests - listed == SHARDS
    # What one request a shard reads: from its first .jpg to the end of its last, each byte
    # once (the headers and labels between them too).
    starts, ends = source._data.starts, source._data.starts + source.sizes
    spans = sum(int(ends[k * SAMPLES : (k + 1) * SAMPLES].max() - starts[k * SAMPLES]) for k in range(SHARDS))
    assert source.bytes_read - source.index_bytes_read == spans
    store.close()
    # Read in any order, record by record.
    assert [r.tobytes() for _, r in source.read([7, 3, 40])] == [ref[i]["jpg"] for i in (7, 3, 40)]
    # Whole samples.
    whole = webdataset(url, member=None, index_dir=index_dir)
    assert whole.index_bytes_read == 0 and whole.requests == SHARDS, "the listing alone: the index is cached"
    assert [as_dict(sample_members(r)) for _, r in whole.read(range(len(whole)))] == ref
    # Ranks compare the listing (URLs, sizes, ETags) and the index, not records.
    assert source._fingerprint() == webdataset(url, member="jpg", index_dir=index_dir)._fingerprint()
    assert source._fingerprint() != whole._fingerprint()


def test_a_whole_shard_is_one_get_however_long_its_body_streamed_in_pieces(s3, tmp_path, monkeypatch):
    from ubershuffle import _s3

    paths = write_shards(tmp_path / "data")
    ref = reference(paths)
    url = upload(s3, paths)
    source = webdataset(url, member="jpg", index_dir=tmp_path / "index")
    # Pieces far smaller than a shard (and than some records), and a blob's range limit
    # too: still one GET a shard.
    monkeypatch.setattr(_s3, "PIECE_BYTES", 10000)
    monkeypatch.setattr(_s3, "RANGE_BYTES", 10000)
    listed, read = source.requests, source.bytes_read
    got = list(source.read(range(len(source))))
    assert [i for i, _ in got] == list(range(len(source)))
    assert [r.tobytes() for _, r in got] == [s["jpg"] for s in ref]
    assert source.requests - listed == SHARDS
    starts, ends = source._data.starts, source._data.starts + source.sizes
    spans = sum(int(ends[k * SAMPLES : (k + 1) * SAMPLES].max() - starts[k * SAMPLES]) for k in range(SHARDS))
    assert source.bytes_read - read == spans
    # A reader that stops early lets the requests in flight go (nothing hangs).
    it = source.read(range(len(source)))
    assert next(it)[0] == 0
    it.close()
    # A shard replaced meanwhile: one line naming it, where its records would come.
    s3.put("wds/train-000002.tar", paths[1].read_bytes())
    it = source.read(range(len(source)))
    assert [next(it)[0] for _ in range(2 * SAMPLES)] == list(range(2 * SAMPLES))
    with pytest.raises(ValueError) as e:
        next(it)
    replaced = s3.url("wds/train-000002.tar")
    assert one_line(e) == f"{replaced} changed since the source was made (its ETag differs)"


def test_bad_shards_in_object_storage_are_one_line_errors_naming_the_shard(s3, tmp_path):
    paths = write_shards(tmp_path / "data", shards=2)
    blob = paths[1].read_bytes()
    members = tarfile.open(fileobj=io.BytesIO(blob)).getmembers()
    s3.put("ok/train-000000.tar", paths[0].read_bytes())
    m = next(m for m in members[3:] if m.size > 1000)  # an image
    s3.put("cut/train-000000.tar", blob[: m.offset_data + 100])
    bad = bytearray(blob)
    bad[members[4].offset + 130] ^= 0x07  # the size field
    s3.put("bad/train-000000.tar", bytes(bad))
    with pytest.raises(ValueError) as e:
        webdataset([s3.url("ok/train-000000.tar"), s3.url("cut/train-000000.tar")], index_dir=False)
    text = one_line(e)
    cut = m.offset_data + 100
    assert text == (
        f"{s3.url('cut/train-000000.tar')}: truncated at offset {cut}: "
        f'member "{m.name}" needs {m.size} bytes from offset {m.offset_data}'
    )
    with pytest.raises(ValueError) as e:
        webdataset(s3.url("bad/train-000000.tar"), index_dir=False)
    assert one_line(e).startswith(
        f"{s3.url('bad/train-000000.tar')}: the tar header at offset {members[4].offset} is corrupt (checksum"
    )
    # An object replaced after its index was made: its ETag differs, no bytes are served.
    source = webdataset(s3.url("ok/train-000000.tar"), index_dir=False)
    s3.put("ok/train-000000.tar", blob)
    with pytest.raises(ValueError) as e:
        source.record(0)
    assert (
        one_line(e) == f"{s3.url('ok/train-000000.tar')} changed since the source was made (its ETag differs)"
    )


@pytest.mark.parametrize("mode", ["peer", "store"])
def test_a_shuffle_group_serves_local_shards_with_webdataset_s_bytes(tmp_path, mode):
    pytest.importorskip("torch", reason="torch is not installed: the ShuffleGroup test needs it")
    paths = write_shards(tmp_path / "data")
    shards = str(tmp_path / "data" / "train-{000000..000003}.tar")
    expected = [s["jpg"] for s in reference(paths)]
    logs = run_shard_job(tmp_path, ("webdataset", [shards], {"member": "jpg"}), expected, mode, seed=4)
    check_shard_job(logs, mode, SHARDS * SAMPLES, "WebDataset")


@pytest.mark.parametrize("mode", ["peer", "store"])
def test_a_shuffle_group_serves_shards_in_object_storage_with_webdataset_s_bytes(s3, tmp_path, mode):
    pytest.importorskip("torch", reason="torch is not installed: the ShuffleGroup test needs it")
    paths = write_shards(tmp_path / "data")
    url = upload(s3, paths)
    expected = [s["jpg"] for s in reference(paths)]
    logs = run_shard_job(tmp_path, ("webdataset", [url], {"member": "jpg"}), expected, mode, seed=4)
    check_shard_job(logs, mode, SHARDS * SAMPLES, "WebDataset")
    record_bytes = sum(map(len, expected))
    readers = logs if mode == "peer" else logs[:1]
    # Each byte of the shards leaves the object store at most once in the job (the ranks agree
    # on the listing, not on a sample of records; a record larger than the gap a range read
    # spans is never read with a neighbour): what is read beyond the records is the headers and
    # labels between neighbours of one range. The index's reads are apart (each peer rank
    # builds it, or finds it cached).
    read = sum(log["bytes_read"] - log["index_bytes_read"] for log in readers)
    source = webdataset(url, member="jpg", index_dir=False)
    starts, ends = source._data.starts, source._data.starts + source.sizes
    spans = sum(int(ends[k * SAMPLES : (k + 1) * SAMPLES].max() - starts[k * SAMPLES]) for k in range(SHARDS))
    assert record_bytes <= read <= spans, (read, record_bytes, spans)


def epoch_0_reads(logs: list[dict], keys: list[str]) -> tuple[int, dict, list, list]:
    """From a peer job's logs: the bytes all ranks read from the object store up to the end of
    epoch 0, the GETs of each shard (``keys``) they made, and each rank's bytes and requests
    after epoch 0 (from then to the end of the job)."""
    epoch_0 = [log["counts"]["epoch 0"] for log in logs]
    end = [log["counts"]["end"] for log in logs]
    gets = {k: sum(c["gets"].get(k, 0) for c in epoch_0) for k in keys}
    after = [(e["bytes"] - c["bytes"], e["requests"] - c["requests"]) for c, e in zip(epoch_0, end)]
    return sum(c["bytes"] for c in epoch_0), gets, [b for b, _ in after], [r for _, r in after]


@pytest.mark.parametrize("small", [False, True], ids=["large-records", "small-records"])
def test_peer_mode_reads_each_shard_once_in_epoch_0_and_nothing_after(s3, tmp_path, small):
    """Peer mode over WebDataset shards in object storage (2 ranks, global policy): epoch 0
    follows the shards (``first_epoch="blocks"``, a sharded source's default), so each shard is
    read by at most 2 ranged GETs in epoch 0 (one per rank whose block it holds part of), all
    ranks together read at most 1.02x the shards' bytes, and nothing is read after epoch 0;
    every record served is WebDataset's bytes. The index is built before the job and its reads
    are apart: the ranks find it in ``index_dir`` and read no header. Records larger than the
    gap a range read spans, and smaller ones (a rank's range then takes in the headers and
    labels between its records). With a random epoch 0 (``first_epoch="random"``) every rank
    reads scattered runs of every shard: 5 or 6 GETs a shard in both cases (checked)."""
    pytest.importorskip("torch", reason="torch is not installed: the ShuffleGroup test needs it")
    shards = 5  # 60 records: rank 0's block ends in the middle of shard 2
    paths = write_shards(tmp_path / "data", shards=shards, small=small)
    url = upload(s3, paths)
    expected = [s["jpg"] for s in reference(paths)]
    built = webdataset(url, member="jpg", index_dir=tmp_path / "index")
    assert built.index_bytes_read > 0
    group = {"policy": "global", "fraction": None}
    source = ("webdataset", [url], {"member": "jpg"})
    logs = run_shard_job(tmp_path, source, expected, "peer", seed=4, group=group)
    check_shard_job(logs, "peer", shards * SAMPLES, "WebDataset")
    assert [log["first_epoch"] for log in logs] == ["blocks", "blocks"]
    assert all(log["counts"]["made"]["gets"] == {} for log in logs), "the index came from index_dir"
    data_bytes = sum(p.stat().st_size for p in paths)
    read, gets, bytes_after, requests_after = epoch_0_reads(logs, [f"wds/{p.name}" for p in paths])
    assert read <= 1.02 * data_bytes, (read, data_bytes)
    assert all(1 <= n <= 2 for n in gets.values()), gets
    assert sum(gets.values()) <= shards + 1, "one shard is split between the ranks' blocks"
    assert bytes_after == [0, 0] and requests_after == [0, 0]
