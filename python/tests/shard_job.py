"""The ShuffleGroup job that the sharded sources' tests run (WebDataset, MDS, LitData, Parquet):
under torchrun, peer mode on 2 training ranks or store mode on a store and 2 training ranks, 3
epochs, every record a rank is served compared with the bytes the format's own reader gave
(``expected``, computed by the test); then the checks every format shares. An object store
source's reads are counted at the job's points (made, after epoch 0, at the end), and its GETs
object by object."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import pytest

EPOCHS = 3

RANK = """
import collections, json, pathlib, sys, threading
import torch.distributed as dist
import ubershuffle.sources
from ubershuffle.torch import ShuffleGroup

out, mode, seed = pathlib.Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
kind, args, options = json.loads((out / "source.json").read_text())
dist.init_process_group("gloo")
rank = dist.get_rank()
expected = [bytes.fromhex(h) for h in json.loads((out / "expected.json").read_text())]
if kind == "hf_dataset":  # a Hugging Face data set saved to disk, memory-mapped again here
    import datasets

    source = ubershuffle.sources.hf_dataset(datasets.load_from_disk(args[0]), *args[1:], **options)
else:
    source = getattr(ubershuffle.sources, kind)(*args, index_dir=str(out / "index"), **options)
kwargs = dict(policy="partial-local", fraction=0.5) if mode == "peer" else dict(mode="store", alpha=0.5)
kwargs.update(json.loads((out / "group.json").read_text()))
if mode == "store" and rank != 0:
    source = None
store = getattr(getattr(source, "_data", None), "store", None)  # an object store's client
gets, lock = collections.Counter(), threading.Lock()
if store is not None:
    plain_open = store.open

    def counted_open(bucket, key, first, end, etag):  # every GET, object by object
        with lock:
            gets[key] += 1
        return plain_open(bucket, key, first, end, etag)

    store.open = counted_open


def counts():
    if store is None:
        return None
    with lock:
        return {"requests": store.requests, "bytes": store.bytes_read, "gets": dict(gets)}


log = {"bad": [], "served": {}, "figures": {}, "counts": {"made": counts()}}
sg = ShuffleGroup(source, seed=seed, timeout=60, **kwargs)
log["first_epoch"] = sg.first_epoch
if sg.is_store:
    log["served"] = [{k: f[k] for k in ("epoch", "source_records", "source_bytes")} for f in sg.serve()]
else:
    for epoch in range(EPOCHS):
        sg.set_epoch(epoch)
        if epoch == 0:
            log["counts"]["epoch 0"] = counts()
        ids = [int(i) for i in sg.sampler]
        log["served"][epoch] = ids
        log["bad"] += [i for i in ids if sg[i].tobytes() != expected[i]]
        log["figures"][epoch] = {k: sg.figures(epoch)[k] for k in ("source_records", "source_bytes")}
    dist.barrier(group=sg.train_group)  # a training rank's close ends the store's serving
    sg.close()
log["counts"]["end"] = counts()
if sg._source is not None:
    log["requests"], log["bytes_read"] = sg._source.requests, sg._source.bytes_read
    log["index_bytes_read"] = sg._source.index_bytes_read
(out / f"rank-{rank}.json").write_text(json.dumps(log))
dist.destroy_process_group()
""".replace("EPOCHS", str(EPOCHS))


def run_shard_job(
    tmp_path: pathlib.Path,
    source: tuple,
    expected: list[bytes],
    mode: str,
    seed: int,
    group: dict | None = None,
) -> list[dict]:
    """Runs the job over ``source`` (``(function of ubershuffle.sources, its positional
    arguments, its keyword arguments)``, ``index_dir`` added; for ``hf_dataset`` the first
    argument is the folder of a data set saved by ``save_to_disk``; ``group``: more keyword
    arguments of ``ShuffleGroup``) and returns every rank's log, rank by rank; fails the test
    with what the ranks said if the job failed."""
    (tmp_path / "source.json").write_text(json.dumps(list(source)))
    (tmp_path / "group.json").write_text(json.dumps(group or {}))
    (tmp_path / "expected.json").write_text(json.dumps([record.hex() for record in expected]))
    script = tmp_path / "rank.py"
    script.write_text(RANK)
    nproc = 2 if mode == "peer" else 3
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}"]
    cmd += [str(script), str(tmp_path), mode, str(seed)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    if done.returncode != 0:  # what the ranks said (their tracebacks come before torchrun's)
        said = [line for line in done.stderr.splitlines() if line.startswith("[rank")]
        pytest.fail("\n".join(said[-30:]) or done.stderr[-3000:])
    return [json.loads((tmp_path / f"rank-{r}.json").read_text()) for r in range(nproc)]


def check_shard_job(logs: list[dict], mode: str, records: int, whose: str) -> None:
    """Every record a training rank was served has the format's own bytes (``whose`` reader's),
    every epoch serves each record once over the ranks, and the source's records were read
    once in the job: in peer mode by the ranks in epoch 0 and never after, in store mode by
    the store."""
    trainers = logs if mode == "peer" else logs[1:]
    assert all(log["bad"] == [] for log in trainers), f"bytes that are not {whose}'s"
    for epoch in map(str, range(EPOCHS)):
        served = sorted(i for log in trainers for i in log["served"][epoch])
        assert served == list(range(records)), f"epoch {epoch}"
    if mode == "peer":
        assert sum(log["figures"]["0"]["source_records"] for log in logs) == records
        later = [log["figures"][str(e)]["source_records"] for log in logs for e in range(1, EPOCHS)]
        assert later == [0] * len(later), "later epochs read nothing from the source"
    else:
        assert sum(f["source_records"] for f in logs[0]["served"]) == records


def one_line(e: pytest.ExceptionInfo) -> str:
    """The text of a raised error, checked to be one line with no chained cause."""
    text = str(e.value)
    assert "\n" not in text and e.value.__cause__ is None, text
    return text


def upload(s3, folder: pathlib.Path, prefix: str) -> str:
    """Puts every file of ``folder`` under ``prefix`` in the test's bucket; its ``s3://`` URL."""
    for path in sorted(folder.iterdir()):
        s3.put(f"{prefix}/{path.name}", path.read_bytes())
    return s3.url(prefix)
